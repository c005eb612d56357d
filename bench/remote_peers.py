"""libvds beside its peers over HTTP range requests, against one server, in one run.

    python3 bench/peers.py --setup                  # once: target/bench-venv (the peers' venv; it has fsspec and aiohttp)
    python3 bench/remote_peers.py [--quick] [--latency-ms 20] [--bandwidth-mbit N] [--runs 3] [--dir DIR]
    python3 bench/remote_peers.py --s3 [...]        # the same over S3

What it measures: the same float32 volume (512^3, or 256^3 with --quick; suite b's smooth signal from
bench/peers.py) is written as

- libvds: 64^3 bricks, deflate level 1 (with shuffle), plus 1 x n x n tiles (a second partitioning) for
  slices across axis 0, compacted into the cloud-optimized arrangement (`compact("cloud")`, what
  `vds.publish` uploads), read with `vds.open(url)` (the library's own HTTP client); and the same
  container as written, not compacted (its index at the end), for the cost of the arrangement;
- zarr v3: 64^3 chunks, gzip level 1 (no shuffle: zarr's codecs as in bench/peers.py), one store read by
  zarr-python through fsspec's HTTP filesystem (aiohttp) and by TensorStore's zarr3 driver over its
  `http` kvstore (the same bytes, served under two prefixes so that each is counted apart);
- HDF5: 64^3 chunks, shuffle and gzip level 1, read by h5py from fsspec's HTTPFile (its default
  read-ahead cache of 5 MiB blocks).

A server in a child process (a threaded http.server, HTTP/1.1 keep-alive, concurrent connections) serves
the directory of them on loopback: GET with one byte range (206, Content-Range; suffix ranges too) or
without (200), HEAD, 404; a stable ETag and Last-Modified, If-Match honoured (412). It adds a fixed delay
to every request (--latency-ms, 20 by default: a distant region of a cloud) and, with --bandwidth-mbit,
sends every body through one shared link of that rate (all connections together), and it counts the
requests and the body bytes it sent per system (the first path component).

Clients are shared as each library shares them by default: fsspec keeps one filesystem (one aiohttp
session) per set of arguments, libvds one client per server (per bucket and AWS_* settings over S3),
TensorStore one transport per process; the first open in the process pays for building it, and is not
among the runs timed (one untimed open of each system comes first). For each system, each from a fresh
open (a new array or file object, a new TensorStore context):
open; open + one inline slice (a 2-D slice across axis 0, at n/2: from the tiles in libvds, from the
64 bricks it crosses in the others); open + one 64^3 brick (at n/2 on every axis); open + the whole
volume. Times are medians of --runs runs (3 by default); requests and bytes are those of the
first run; every read is compared with the volume in memory. It prints a Markdown table with each
time divided by libvds's. No timing is asserted.

With --s3 the same server answers S3's path-style requests for the same files as bucket "bench"
(GetObject and HeadObject with the same ranges, delay and counts, ListObjectsV2 with prefix and
delimiter; signatures are not checked), read by libvds (`s3://` URLs, AWS_ENDPOINT_URL), zarr-python
and h5py through s3fs (fsspec's instance cache: one S3FileSystem), TensorStore's zarr3 driver
over its `s3` kvstore, and TileDB's own S3 client (the AWS C++ SDK; bench/peers.py's TileDB writer).
moto's S3 server is not used here: it copies a whole object to answer each range request (88 MiB
for each 256 KiB read of the container), a cost no real store has, which would weigh only on the
single-object formats.
"""

import argparse
import email.utils
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# bench/peers.py re-executes this script in its venv (target/bench-venv) when run from another Python,
# and makes that venv when given --setup; its volume and its writers are the peers benchmark's.
import peers  # noqa: E402

import numpy as np  # noqa: E402

CHUNK = 64
CODEC = ("deflate", 1)  # suite b-deflate's: libvds and h5py deflate with shuffle; zarr gzip without


# --- the server (a child process) -----------------------------------------------------------------


class Link:
    """One shared link of `rate` bytes per second: each piece of a body waits for its turn on it."""

    def __init__(self, rate):
        self.rate, self.free, self.lock = rate, 0.0, threading.Lock()

    def send(self, wfile, data):
        if not self.rate:
            wfile.write(data)
            return
        for i in range(0, len(data), 64 << 10):
            piece = data[i:i + (64 << 10)]
            with self.lock:
                done = max(time.monotonic(), self.free) + len(piece) / self.rate
                self.free = done
            time.sleep(max(0.0, done - time.monotonic()))
            wfile.write(piece)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as every real server and client
    disable_nagle_algorithm = True  # TCP_NODELAY, as nginx sets on keep-alive connections: no 40 ms stalls on a body's last segment
    root, latency, link = ".", 0.0, Link(0)
    bucket = ""  # with a bucket name, S3 path style: /bucket/key, ListObjectsV2 at /bucket?list-type=2
    stats, stats_lock = {}, threading.Lock()
    aliases = {}  # prefix -> the directory it serves instead (two readers of one zarr store, counted apart)

    def log_message(self, *args):
        pass

    def key(self):
        """The object's path under the root (for S3: the key, after the bucket), and the query."""
        path, _, query = self.path.partition("?")
        path = path.lstrip("/")
        if self.bucket:
            bucket, _, path = path.partition("/")
            if bucket != self.bucket:
                return None, query
        return path, query

    def count(self, key, sent):
        prefix = (key or "").split("/", 1)[0]
        with self.stats_lock:
            s = self.stats.setdefault(prefix, [0, 0])
            s[0] += 1
            s[1] += sent

    def reply(self, status, headers, body=b""):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.link.send(self.wfile, body)

    def control(self):
        """/_stats: the counts so far, as JSON (not delayed, not counted)."""
        with self.stats_lock:
            body = json.dumps(self.stats).encode()
        self.reply(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body)

    def local(self, key):
        """The local path of `key` (through the aliases), or None outside the root."""
        prefix, _, rest = key.partition("/")
        base = os.path.join(self.aliases[prefix], rest) if prefix in self.aliases else os.path.join(self.root, key)
        path = os.path.realpath(base)
        return path if path.startswith(os.path.realpath(self.root) + os.sep) else None

    def file(self, key):
        path = self.local(key) if key else None
        return path if path and os.path.isfile(path) else None

    def not_found(self, key):
        self.count(key, 0)
        if self.command == "GET" and self.bucket:  # S3's error document
            body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code><Key>{key}</Key></Error>".encode()
            return self.reply(404, {"Content-Type": "application/xml", "Content-Length": str(len(body))}, body)
        return self.reply(404, {"Content-Length": "0"})

    def list_objects(self, query):
        """S3's ListObjectsV2 over the served directory (prefix and delimiter; every match in one page)."""
        from urllib.parse import parse_qs
        from xml.sax.saxutils import escape
        q = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        top = prefix.split("/", 1)[0]
        keys, common = [], set()
        start = self.local(top) if top else None
        for dirpath, _, files in os.walk(start) if start and os.path.isdir(start) else []:
            for f in sorted(files):
                key = top + "/" + os.path.relpath(os.path.join(dirpath, f), start)
                if not key.startswith(prefix):
                    continue
                cut = key.find(delimiter, len(prefix)) if delimiter else -1
                if cut >= 0:
                    common.add(key[:cut + len(delimiter)])
                else:
                    keys.append((key, os.stat(os.path.join(dirpath, f))))
        items = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(st.st_mtime))}"
            f"</LastModified><ETag>&quot;{st.st_ino:x}-{st.st_size:x}&quot;</ETag><Size>{st.st_size}</Size>"
            f"<StorageClass>STANDARD</StorageClass></Contents>" for k, st in sorted(keys))
        items += "".join(f"<CommonPrefixes><Prefix>{escape(c)}</Prefix></CommonPrefixes>" for c in sorted(common))
        body = (f"<?xml version='1.0' encoding='UTF-8'?><ListBucketResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'>"
                f"<Name>{self.bucket}</Name><Prefix>{escape(prefix)}</Prefix><Delimiter>{escape(delimiter)}</Delimiter>"
                f"<KeyCount>{len(keys) + len(common)}</KeyCount><MaxKeys>{max(1000, len(keys) + len(common))}</MaxKeys>"
                f"<IsTruncated>false</IsTruncated>{items}</ListBucketResult>").encode()
        self.count(prefix, len(body))
        self.reply(200, {"Content-Type": "application/xml", "Content-Length": str(len(body))}, body)

    def answer(self):
        if self.path == "/_stats":
            return self.control()
        time.sleep(self.latency)
        key, query = self.key()
        if self.bucket and key == "" and "list-type=2" in query:
            return self.list_objects(query)
        path = self.file(key)
        if path is None:
            return self.not_found(key)
        st = os.stat(path)
        size = st.st_size
        etag = f'"{st.st_ino:x}-{size:x}-{st.st_mtime_ns:x}"'
        common = {"ETag": etag, "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True), "Accept-Ranges": "bytes"}
        match = self.headers.get("If-Match")
        if match is not None and match.strip() not in (etag, "*"):
            self.count(key, 0)
            return self.reply(412, {"Content-Length": "0"})
        rng = self.headers.get("Range")
        if rng is None or self.command == "HEAD":
            start, end, status = 0, size - 1, 200
        else:
            a, _, b = rng.strip().removeprefix("bytes=").split(",")[0].strip().partition("-")  # the first range only
            try:
                start, end = (max(0, size - int(b)), size - 1) if a == "" else (int(a), min(size - 1, int(b)) if b else size - 1)
            except ValueError:
                start, end = 1, 0  # malformed: not satisfiable
            if start > end or start >= size:
                self.count(key, 0)
                return self.reply(416, {"Content-Range": f"bytes */{size}", "Content-Length": "0", **common})
            status = 206
            common["Content-Range"] = f"bytes {start}-{end}/{size}"
        n = end - start + 1 if size else 0
        body = b""
        if self.command == "GET" and n:
            with open(path, "rb") as f:
                f.seek(start)
                body = f.read(n)
        self.count(key, len(body))
        self.reply(status, {"Content-Length": str(n), "Content-Type": "application/octet-stream", **common}, body)

    def do_GET(self):
        try:
            self.answer()
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_HEAD = do_GET


class Listener(http.server.ThreadingHTTPServer):
    # A listen backlog for the clients' bursts of connections (TensorStore opens 32 at once): with the
    # default of 5, the kernel drops the SYNs beyond it and the clients retry them a second later.
    request_queue_size = 1024
    daemon_threads = True


def serve(root, latency_ms, mbit, bucket, aliases):
    """The child: serves `root` (as bucket `bucket` over S3, unless "-") on a free loopback port, prints
    the port, serves until killed."""
    Handler.root, Handler.latency, Handler.bucket = root, latency_ms / 1e3, "" if bucket == "-" else bucket
    Handler.link = Link(mbit * 1e6 / 8 if mbit else 0)
    Handler.aliases = dict(a.split("=", 1) for a in aliases)
    server = Listener(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Server:
    def __init__(self, root, latency_ms, mbit, aliases, bucket=None):
        args = [sys.executable, os.path.abspath(__file__), "--serve", root, str(latency_ms), str(mbit or 0), bucket or "-", *aliases]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def stats(self):
        with urllib.request.urlopen(self.url + "/_stats") as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


# --- the systems ----------------------------------------------------------------------------------
# Each: `prefix` (its path on the server), write(dir, v) puts its file(s) under dir/prefix, open(url)
# returns a handle (a fresh client), read(h, key) the selection as a NumPy array.


def file_under(d, prefix, name):
    """The path of `name` in directory `prefix` of `d`, the directory made."""
    os.makedirs(os.path.join(d, prefix), exist_ok=True)
    return os.path.join(d, prefix, name)


class Vds:
    """libvds's own HTTP client (`vds.open(url)`): the container compacted into the cloud-optimized
    arrangement (`compact("cloud")`, what `vds.publish` uploads: every index page right after the
    head) or, with `cloud=False`, as written (the last commit's index pages at the end)."""

    def __init__(self, cloud=True):
        self.cloud = cloud
        self.name, self.prefix = ("libvds", "vds") if cloud else ("libvds, not compacted", "vds-plain")

    def write(self, d, v):
        import vds
        n = v.shape[0]
        path = file_under(d, self.prefix, "vol.vds")
        spec = {"v": {"dtype": "float32", "dims": peers.DIMS, "chunks": [CHUNK] * 3, "codec": CODEC, "partitionings": [[1, n, n]]}}
        with vds.create(path, list(zip(peers.DIMS, v.shape)), spec, overwrite=True, sync=False) as ds:
            ds["v"][...] = v
        if self.cloud:
            with vds.open(path, "r+", sync=False) as ds:
                ds.compact("cloud")

    def open(self, url):
        import vds
        return vds.open(f"{url}/{self.prefix}/vol.vds")

    def read(self, h, key):
        return h["v"][key]  # a slice across axis 0 comes from the tiles (the partitioning reading fewest bytes)


class ZarrFsspec:
    name, prefix = "zarr-python + fsspec", "zarr"

    def write(self, d, v):
        peers.Zarr().write(file_under(d, self.prefix, "vol.zarr"), v, (CHUNK,) * 3, CODEC)

    def open(self, url):
        import zarr
        return zarr.open_array(f"{url}/{self.prefix}/vol.zarr", mode="r", zarr_format=3)

    def read(self, h, key):
        return h[key]


class TensorStoreHttp:
    """Reads zarr-python's store (served again under its own prefix) through TensorStore's http kvstore."""
    name, prefix = "tensorstore (http kvstore)", "ts"
    alias_of = ZarrFsspec.prefix

    def write(self, d, v):
        pass  # the zarr store above, served under /ts/ too

    def open(self, url):
        import tensorstore as ts
        spec = {"driver": "zarr3", "kvstore": {"driver": "http", "base_url": f"{url}/{self.prefix}/vol.zarr/"}}
        return ts.open(spec, read=True, context=ts.Context()).result()

    def read(self, h, key):
        return h[key].read().result()


class H5Fsspec:
    name, prefix = "h5py + fsspec HTTPFile", "h5"

    def write(self, d, v):
        peers.H5().write(file_under(d, self.prefix, "vol.h5"), v, (CHUNK,) * 3, CODEC)

    def open(self, url):
        import fsspec
        import h5py
        return h5py.File(fsspec.filesystem("http").open(f"{url}/{self.prefix}/vol.h5", "rb"), "r")

    def read(self, h, key):
        return h["v"][key]


SYSTEMS = [Vds(), Vds(cloud=False), ZarrFsspec(), TensorStoreHttp(), H5Fsspec()]


# --- over S3: the same server, path style ---------------------------------------------------------
BUCKET = "bench"
S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
          "AWS_DEFAULT_REGION": "us-east-1"}


def s3fs_filesystem(url):
    import s3fs
    return s3fs.S3FileSystem(endpoint_url=url)  # fsspec's instance cache: one client per endpoint, as over HTTP


class VdsS3(Vds):
    """libvds's S3 client (`vds.open("s3://...")`, object_store), on the same two containers."""

    def open(self, url):
        import vds
        return vds.open(f"s3://{BUCKET}/{self.prefix}/vol.vds")


class ZarrS3fs(ZarrFsspec):
    name = "zarr-python + s3fs"

    def open(self, url):
        import zarr
        # zarr makes its own (asynchronous) S3FileSystem, from fsspec's instance cache.
        return zarr.open_array(f"s3://{BUCKET}/{self.prefix}/vol.zarr", mode="r", zarr_format=3, storage_options={"endpoint_url": url})


class TensorStoreS3(TensorStoreHttp):
    name = "tensorstore (s3 kvstore)"

    def open(self, url):
        import tensorstore as ts
        kv = {"driver": "s3", "bucket": BUCKET, "path": f"{self.prefix}/vol.zarr/", "endpoint": url, "aws_region": "us-east-1"}
        return ts.open({"driver": "zarr3", "kvstore": kv}, read=True, context=ts.Context()).result()


class H5S3fs(H5Fsspec):
    name = "h5py + s3fs"

    def open(self, url):
        import h5py
        return h5py.File(s3fs_filesystem(url).open(f"{BUCKET}/{self.prefix}/vol.h5", "rb"), "r")


class TileDbS3:
    """TileDB's own S3 client (the AWS C++ SDK): a dense array, one tile per 64^3 chunk, byte shuffle and
    gzip level 1 (bench/peers.py's TileDB writer)."""
    name, prefix = "tiledb (s3)", "tiledb"

    def write(self, d, v):
        peers.TileDb().write(file_under(d, self.prefix, "vol.tdb"), v, (CHUNK,) * 3, CODEC)

    def open(self, url):
        import tiledb
        host = url.removeprefix("http://")
        ctx = tiledb.Ctx({"vfs.s3.endpoint_override": host, "vfs.s3.scheme": "http", "vfs.s3.region": "us-east-1",
                          "vfs.s3.use_virtual_addressing": "false", "vfs.s3.aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"],
                          "vfs.s3.aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"]})
        return tiledb.open(f"s3://{BUCKET}/{self.prefix}/vol.tdb", attr="v", ctx=ctx)

    def read(self, h, key):
        return h[key]


S3_SYSTEMS = [VdsS3(), VdsS3(cloud=False), ZarrS3fs(), TensorStoreS3(), H5S3fs(), TileDbS3()]


# --- the run --------------------------------------------------------------------------------------


def rows_of(n):
    m = n // 2
    brick = (slice(m, m + CHUNK),) * 3
    return [
        ("open", None),
        ("open + one inline slice", (m, slice(None), slice(None))),
        ("open + one 64^3 brick", brick),
        ("open + the whole volume", (slice(None),) * 3),
    ]


def measure(server, s, key, v, runs):
    """Median time of `runs` fresh opens (and the read of `key`); the requests and bytes of the first."""
    times, counted = [], None
    for _ in range(runs):
        before = server.stats().get(s.prefix, [0, 0])
        t = time.perf_counter()
        h = s.open(server.url)
        got = None if key is None else s.read(h, key)
        took = time.perf_counter() - t
        after = server.stats().get(s.prefix, [0, 0])
        if counted is None:
            counted = (after[0] - before[0], after[1] - before[1])
        times.append(took)
        if got is not None:
            assert np.array_equal(np.asarray(got), v[key]), f"{s.name} read {key} wrongly"
        close = getattr(h, "close", None)
        if close:
            close()
        del got, h
    return statistics.median(times), counted


def sizes(d, systems):
    return {s.prefix: peers.size_of(os.path.join(d, s.prefix)) for s in systems if not hasattr(s, "alias_of")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 256^3 volume, not 512^3")
    ap.add_argument("--latency-ms", type=float, default=20, help="delay added to every request (default 20)")
    ap.add_argument("--bandwidth-mbit", type=float, default=None, help="one shared link of this rate (default: none)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each row (the median is shown; default 3)")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-remote-peers"))
    ap.add_argument("--s3", action="store_true", help="over S3 (path style), not plain HTTP")
    ap.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)  # the server child: root, latency, mbit, bucket, aliases
    o = ap.parse_args([x for x in sys.argv[1:] if x != "--setup"])
    if o.serve:
        root, latency, mbit, bucket, *aliases = o.serve
        return serve(root, float(latency), float(mbit), bucket, aliases)

    from importlib.metadata import version
    shown = ["numpy", "zarr", "tensorstore", "h5py", "vds"] + (["s3fs", "tiledb"] if o.s3 else ["fsspec", "aiohttp"])
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in shown))
    load = os.getloadavg()
    n = 256 if o.quick else 512
    systems = S3_SYSTEMS if o.s3 else SYSTEMS
    shutil.rmtree(o.dir, ignore_errors=True)
    os.makedirs(o.dir)
    v = peers.volume(n)
    for s in systems:
        s.write(o.dir, v)
    on_disk = sizes(o.dir, systems)
    aliases = [f"{s.prefix}={os.path.join(o.dir, s.alias_of)}" for s in systems if hasattr(s, "alias_of")]
    server = Server(o.dir, o.latency_ms, o.bandwidth_mbit, aliases, BUCKET if o.s3 else None)
    if o.s3:
        os.environ.update(S3_ENV, AWS_ENDPOINT_URL=server.url)
    where = f"one shared link of {o.bandwidth_mbit:g} Mbit/s" if o.bandwidth_mbit else "no bandwidth limit"
    where += ", over S3 (path style)" if o.s3 else ", over HTTP"
    print(f"\n{n}^3 float32 ({v.nbytes >> 20} MiB of values) in {CHUNK}^3 chunks, deflate/gzip level 1; "
          f"{o.latency_ms:g} ms added to every request, {where}; stored: "
          + ", ".join(f"{s.name} {on_disk[getattr(s, 'alias_of', s.prefix)] / 2**20:.1f} MiB" for s in systems))
    print("\n| operation | system | time | requests | MiB sent | time / libvds |")
    print("|---|---|---:|---:|---:|---:|")
    sys.stdout.flush()
    try:
        for s in systems:  # each library's shared client, built once (untimed, uncounted)
            close = getattr(s.open(server.url), "close", None)
            if close:
                close()
        for op, key in rows_of(n):
            ref = None
            for s in systems:
                secs, (requests, sent) = measure(server, s, key, v, o.runs)
                ref = ref or secs
                t = f"{secs * 1e3:.0f} ms" if secs < 10 else f"{secs:.1f} s"
                print(f"| {op} | {s.name} | {t} | {requests} | {sent / 2**20:.2f} | {secs / ref:.2f} |", flush=True)
    finally:
        server.stop()
    print("\nload average (1, 5, 15 min) at the start: %.2f %.2f %.2f, at the end: %.2f %.2f %.2f (%d cores)"
          % (*load, *os.getloadavg(), os.cpu_count()))
    shutil.rmtree(o.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
