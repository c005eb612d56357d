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
