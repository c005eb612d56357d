"""vds.open reads a container from an S3 bucket as from a file: moto's S3
server runs in this process on a loopback port, and the endpoint and
credentials come from the standard AWS_* variables."""
import os
import socket

import numpy as np
import pytest

import vds

import moto.server as moto_server  # noqa: E402  (.ci/deps.sh installs moto)
import boto3  # noqa: E402

ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")


@pytest.fixture(scope="module")
def bucket():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(dict(zip(ENV, (endpoint, "testing", "testing", "us-east-1"))))
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="py-bucket")
    try:
        yield client
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_open_reads_a_container_in_a_bucket(tmp_path, bucket):
    path = tmp_path / "r.vds"
    data = (np.arange(40 * 30 * 20, dtype=np.float32) * 0.5).reshape(40, 30, 20)
    spec = {"v": {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [16, 16, 8], "codec": ("deflate", 1)}}
    with vds.create(path, axes=[("x", 40), ("y", 30), ("z", 20)], variables=spec) as ds:
        ds["v"][...] = data
    bucket.put_object(Bucket="py-bucket", Key="a/r.vds", Body=path.read_bytes())
    with vds.open("s3://py-bucket/a/r.vds") as ds:
        assert np.array_equal(ds["v"][...], data)
        assert np.array_equal(ds["v"][3, ::2, -1], data[3, ::2, -1])
    assert np.array_equal(vds.load("s3://py-bucket/a/r.vds")["v"], data)
    with pytest.raises(vds.ReadOnlyError):
        vds.open("s3://py-bucket/a/r.vds", "r+")
    with pytest.raises(vds.NotFoundError):
        vds.open("s3://py-bucket/a/absent.vds")


def test_publish_uploads_a_cloud_optimized_copy(tmp_path, bucket):
    path = tmp_path / "p.vds"
    data = np.arange(64 * 64 * 32, dtype=np.int32).reshape(64, 64, 32) * 3
    spec = {"v": {"dtype": "int32", "dims": ["x", "y", "z"], "chunks": [8, 8, 8], "codec": ("zstd", 1)}}
    with vds.create(path, axes=[("x", 64), ("y", 64), ("z", 32)], variables=spec) as ds:
        ds["v"][...] = data
    with vds.open(path, "r+") as ds:
        ds["v"][5] = -1
    data[5] = -1
    before = path.read_bytes()
    sent = vds.publish(path, "s3://py-bucket/pub/p.vds")
    assert path.read_bytes() == before, "the container itself is not changed"
    body = bucket.get_object(Bucket="py-bucket", Key="pub/p.vds")["Body"].read()
    assert sent == len(body) and len(body) < len(before), "a compacted copy is uploaded"
    with vds.open("s3://py-bucket/pub/p.vds") as ds:
        np.testing.assert_array_equal(ds["v"][...], data)
        assert ds.verify()["ok"]
    with pytest.raises(vds.InvalidArgumentError, match="s3:// URLs only"):
        vds.publish(path, "https://example.invalid/p.vds")
    with pytest.raises(vds.NotFoundError):
        vds.publish(tmp_path / "absent.vds", "s3://py-bucket/pub/q.vds")



def test_a_forked_child_reads_remote_containers(tmp_path, bucket):
    """A child made by fork() (multiprocessing's default on Linux, PyTorch's DataLoader workers) reads through
    a dataset its parent opened and opens new ones: it builds its own network runtime and clients, where the
    parent's threads do not exist. Without that the child's first request never completes."""
    import time

    path = tmp_path / "f.vds"
    data = np.arange(32 * 32 * 32, dtype=np.int32).reshape(32, 32, 32)
    spec = {"v": {"dtype": "int32", "dims": ["x", "y", "z"], "chunks": [8, 8, 8], "codec": ("zstd", 1)}}
    with vds.create(path, axes=[("x", 32), ("y", 32), ("z", 32)], variables=spec) as ds:
        ds["v"][...] = data
    bucket.put_object(Bucket="py-bucket", Key="f/f.vds", Body=path.read_bytes())
    url = "s3://py-bucket/f/f.vds"
    held = vds.open(url, cache_size=0)
    assert np.array_equal(held["v"][:4], data[:4])  # the parent's runtime and client are running
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when both reads match, 1 when they differ, 2 on an error
        code = 2
        try:
            inherited = held["v"][8:]
            with vds.open(url) as fresh:
                code = 0 if np.array_equal(inherited, data[8:]) and np.array_equal(fresh["v"][...], data) else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's remote reads did not complete in 60 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert np.array_equal(held["v"][...], data)  # the parent reads on
    held.close()


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """nginx (from Debian's packages, which .ci/deps.sh installs) serving a directory on a loopback
    port, with range requests as every web server answers them; yields (directory, base URL)."""
    import shutil
    import subprocess
    import time

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(nginx), "nginx is missing: sh .ci/deps.sh installs it"
    root = tmp_path_factory.mktemp("www")
    work = tmp_path_factory.mktemp("nginx")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (work / "nginx.conf").write_text(
        f"daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;\n"
        f"events {{ worker_connections 64; }}\n"
        f"http {{ access_log {work}/access.log; {temp} server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n")
    proc = subprocess.Popen([nginx, "-p", str(work), "-e", str(work / "error.log"), "-c", str(work / "nginx.conf")],
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (work / "error.log").read_text()
                time.sleep(0.02)
        yield root, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_open_reads_a_container_on_a_web_server(web, rng):
    """Over http://: every read as from the local file, levels of detail and tiles included, the
    external-file slot fetched from the URL next to the container's (the name has a space)."""
    root, base = web
    data = rng.standard_normal((48, 40, 24)).astype(np.float32)
    spec = {"v": {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [16, 16, 8], "codec": ("zstd", 1),
                  "partitionings": [[1, 40, 24]], "lods": 3}}
    local = root / "w.vds"
    with vds.create(local, axes=[("x", 48), ("y", 40), ("z", 24)], variables=spec) as ds:
        ds["v"][...] = data
    with vds.open(local, "r+") as ds:
        ds.set_slot_policy("fixed", [ds.add_external_slot("w data.vdx")])
        ds.commit()
        ds.compact("into_slots")
    assert (root / "w data.vdx").exists()
    with vds.open(local) as want, vds.open(f"{base}/w.vds") as got:
        for key in [Ellipsis, (slice(3, 40, 5), 7, slice(None, None, -2)), (11,), (slice(None), 2, 3)]:
            np.testing.assert_array_equal(got["v"][key], want["v"][key])
        for level in (1, 2):
            np.testing.assert_array_equal(got["v"].lod(level)[...], want["v"].lod(level)[...])
        np.testing.assert_array_equal(got["v"].slice(0, 17), data[17])
        assert got.verify()["ok"]
    np.testing.assert_array_equal(vds.load(f"{base}/w.vds")["v"], data)
    with pytest.raises(vds.ReadOnlyError):
        vds.open(f"{base}/w.vds", "r+")
    with pytest.raises(vds.NotFoundError):
        vds.open(f"{base}/absent.vds")
