"""libvds beside its peers over HTTP range requests, against one server, in one run.

    python3 bench/peers.py --setup                  # once: target/bench-venv (the peers' venv; it has fsspec and aiohttp)
    python3 bench/remote_peers.py [--quick] [--latency-ms 20] [--bandwidth-mbit N] [--runs 3] [--dir DIR]

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

For each system, each from a fresh open (a new client: new fsspec filesystem, new TensorStore context):
open; open + one inline slice (a 2-D slice across axis 0, at n/2: from the tiles in libvds, from the
64 bricks it crosses in the others); open + one 64^3 brick (at n/2 on every axis); open + the whole
volume. Times are medians of --runs runs (3 by default); requests and bytes are those of the
first run; every read is compared with the volume in memory. It prints a Markdown table with each
time divided by libvds's. No timing is asserted.
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
    stats, stats_lock = {}, threading.Lock()
    aliases = {}  # prefix -> the directory it serves instead (two readers of one zarr store, counted apart)

    def log_message(self, *args):
        pass

    def count(self, sent):
        prefix = self.path.lstrip("/").split("/", 1)[0]
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

    def file(self):
        rel = self.path.split("?", 1)[0].lstrip("/")
        prefix, _, rest = rel.partition("/")
        base = os.path.join(self.aliases[prefix], rest) if prefix in self.aliases else os.path.join(self.root, rel)
        path = os.path.realpath(base)
        return path if path.startswith(os.path.realpath(self.root) + os.sep) and os.path.isfile(path) else None

    def answer(self):
        if self.path == "/_stats":
            return self.control()
        time.sleep(self.latency)
        path = self.file()
        if path is None:
            self.count(0)
            return self.reply(404, {"Content-Length": "0"})
        st = os.stat(path)
        size = st.st_size
        etag = f'"{st.st_ino:x}-{size:x}-{st.st_mtime_ns:x}"'
        common = {"ETag": etag, "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True), "Accept-Ranges": "bytes"}
        match = self.headers.get("If-Match")
        if match is not None and match.strip() not in (etag, "*"):
            self.count(0)
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
                self.count(0)
                return self.reply(416, {"Content-Range": f"bytes */{size}", "Content-Length": "0", **common})
            status = 206
            common["Content-Range"] = f"bytes {start}-{end}/{size}"
        n = end - start + 1 if size else 0
        body = b""
        if self.command == "GET" and n:
            with open(path, "rb") as f:
                f.seek(start)
                body = f.read(n)
        self.count(len(body))
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


def serve(root, latency_ms, mbit, aliases):
    """The child: serves `root` on a free loopback port, prints the port, serves until killed."""
    Handler.root, Handler.latency = root, latency_ms / 1e3
    Handler.link = Link(mbit * 1e6 / 8 if mbit else 0)
    Handler.aliases = dict(a.split("=", 1) for a in aliases)
    server = Listener(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Server:
    def __init__(self, root, latency_ms, mbit, aliases):
        args = [sys.executable, os.path.abspath(__file__), "--serve", root, str(latency_ms), str(mbit or 0), *aliases]
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
        path = os.path.join(d, self.prefix, "vol.vds")
        os.makedirs(os.path.dirname(path), exist_ok=True)
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
        path = os.path.join(d, self.prefix, "vol.zarr")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        peers.Zarr().write(path, v, (CHUNK,) * 3, CODEC)

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
        path = os.path.join(d, self.prefix, "vol.h5")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        peers.H5().write(path, v, (CHUNK,) * 3, CODEC)

    def open(self, url):
        import fsspec
        import h5py
        return h5py.File(fsspec.filesystem("http").open(f"{url}/{self.prefix}/vol.h5", "rb"), "r")

    def read(self, h, key):
        return h["v"][key]


SYSTEMS = [Vds(), Vds(cloud=False), ZarrFsspec(), TensorStoreHttp(), H5Fsspec()]


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


def sizes(d):
    return {s.prefix: peers.size_of(os.path.join(d, s.prefix)) for s in SYSTEMS}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 256^3 volume, not 512^3")
    ap.add_argument("--latency-ms", type=float, default=20, help="delay added to every request (default 20)")
    ap.add_argument("--bandwidth-mbit", type=float, default=None, help="one shared link of this rate (default: none)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each row (the median is shown; default 3)")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-remote-peers"))
    ap.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)  # the server child: root, latency, mbit, aliases
    o = ap.parse_args([x for x in sys.argv[1:] if x != "--setup"])
    if o.serve:
        root, latency, mbit, *aliases = o.serve
        return serve(root, float(latency), float(mbit), aliases)

    from importlib.metadata import version
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in ["numpy", "zarr", "tensorstore", "fsspec", "aiohttp", "h5py", "vds"]))
    load = os.getloadavg()
    n = 256 if o.quick else 512
    shutil.rmtree(o.dir, ignore_errors=True)
    os.makedirs(o.dir)
    v = peers.volume(n)
    for s in SYSTEMS:
        s.write(o.dir, v)
    on_disk = sizes(o.dir)
    aliases = [f"{s.prefix}={os.path.join(o.dir, s.alias_of)}" for s in SYSTEMS if hasattr(s, "alias_of")]
    server = Server(o.dir, o.latency_ms, o.bandwidth_mbit, aliases)
    link = f"one shared link of {o.bandwidth_mbit:g} Mbit/s" if o.bandwidth_mbit else "no bandwidth limit"
    print(f"\n{n}^3 float32 ({v.nbytes >> 20} MiB of values) in {CHUNK}^3 chunks, deflate/gzip level 1; "
          f"{o.latency_ms:g} ms added to every request, {link}; on the server: "
          + ", ".join(f"{s.name} {on_disk[s.alias_of if hasattr(s, 'alias_of') else s.prefix] / 2**20:.1f} MiB" for s in SYSTEMS))
    print("\n| operation | system | time | requests | MiB sent | time / libvds |")
    print("|---|---|---:|---:|---:|---:|")
    sys.stdout.flush()
    try:
        for op, key in rows_of(n):
            ref = None
            for s in SYSTEMS:
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
