"""Reads release the GIL: Python threads read one open dataset at once.

Four threads, started together by a barrier, each read their own quarter
of a compressed volume many times through one shared dataset, and every
read must equal the NumPy reference. The dataset's lock is shared by
readers, so the reads overlap; a wrong value or a deadlock fails the test.
That the GIL is released is shown without timing: a container served by a
Python thread of this process over HTTP opens and reads only if the calls
let that thread run.
"""

import http.server
import threading

import numpy as np

import vds


def test_four_threads_read_disjoint_regions_concurrently(tmp_path, rng):
    shape = (64, 48, 40)
    ref = rng.standard_normal(shape).astype(np.float32)
    with vds.create(tmp_path / "t.vds", axes=[("i", 64), ("j", 48), ("k", 40)],
                    variables={"v": {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [16, 16, 16], "codec": "deflate"}}) as ds:
        ds["v"][...] = ref
    ds = vds.open(tmp_path / "t.vds", cache_size=0)  # no cache: every read decodes its chunks
    v = ds["v"]
    barrier = threading.Barrier(4)
    errors, inside, most_inside = [], [0], [0]
    lock = threading.Lock()

    def reader(w):
        try:
            barrier.wait()
            for rep in range(30):
                key = (slice(w * 16, (w + 1) * 16), slice(None, None, 1 + rep % 3), slice(None, None, -1))
                with lock:
                    inside[0] += 1
                    most_inside[0] = max(most_inside[0], inside[0])
                got = v[key]
                with lock:
                    inside[0] -= 1
                if not np.array_equal(got, ref[key]):
                    errors.append(f"thread {w}, read {rep}: values differ")
        except Exception as e:  # reported below, with the thread
            errors.append(f"thread {w}: {e!r}")

    threads = [threading.Thread(target=reader, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    assert errors == []
    assert most_inside[0] >= 2, "no two reads were ever in progress at once"
    ds.close()


def test_a_reader_thread_does_not_block_a_writer_of_another_dataset(tmp_path, rng):
    ref = rng.standard_normal((32, 32)).astype(np.float64)
    with vds.create(tmp_path / "a.vds", axes=[("x", 32), ("y", 32)],
                    variables={"v": {"dtype": "float64", "dims": ["x", "y"], "chunks": [8, 8]}}) as ds:
        ds["v"][...] = ref
    r = vds.open(tmp_path / "a.vds")
    w = vds.create(tmp_path / "b.vds", axes=[("x", 32), ("y", 32)],
                   variables={"v": {"dtype": "float64", "dims": ["x", "y"], "chunks": [8, 8]}})
    done = []
    t = threading.Thread(target=lambda: done.append(all(np.array_equal(r["v"][i], ref[i]) for i in range(32) for _ in range(5))))
    t.start()
    for i in range(32):
        w["v"][i] = ref[i] * 2
    t.join(timeout=60)
    w.close()
    assert done == [True]
    with vds.open(tmp_path / "b.vds") as b:
        np.testing.assert_array_equal(b["v"][...], ref * 2)
    r.close()


class _RangeServer(http.server.ThreadingHTTPServer):
    """Serves one object at any path, answering range GETs (206 with
    Content-Range, a stable ETag) from Python threads of this process."""

    daemon_threads = True

    def __init__(self, blob):
        self.blob, self.requests = blob, 0
        super().__init__(("127.0.0.1", 0), _RangeHandler)


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, body_wanted):
        blob, n = self.server.blob, len(self.server.blob)
        self.server.requests += 1
        a, b = 0, n - 1
        spec = self.headers.get("Range", "")
        if spec.startswith("bytes="):
            first, _, last = spec[6:].partition("-")
            a, b = (n - int(last), n - 1) if first == "" else (int(first), min(int(last), n - 1) if last else n - 1)
        self.send_response(206 if spec else 200)
        self.send_header("Content-Length", str(b - a + 1))
        if spec:
            self.send_header("Content-Range", f"bytes {a}-{b}/{n}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"v1"')
        self.send_header("Last-Modified", "Tue, 24 Nov 2026 00:00:00 GMT")
        self.end_headers()
        if body_wanted:
            self.wfile.write(blob[a:b + 1])

    def do_GET(self):
        self._answer(True)

    def do_HEAD(self):
        self._answer(False)


def test_reads_release_the_gil(tmp_path, rng):
    # The container is served over HTTP by a Python server thread of this
    # process, so opening and reading it can only finish if the calls
    # release the GIL while they wait for the answers: with the GIL held
    # the server could not answer and the read would fail (after its
    # request timeouts) instead of returning the volume.
    ref = rng.standard_normal((64, 64, 64)).astype(np.float32)
    with vds.create(tmp_path / "g.vds", axes=[("i", 64), ("j", 64), ("k", 64)],
                    variables={"v": {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [16, 16, 16],
                                     "codec": ("deflate", 1)}}) as ds:
        ds["v"][...] = ref
    server = _RangeServer((tmp_path / "g.vds").read_bytes())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with vds.open(f"http://127.0.0.1:{server.server_address[1]}/g.vds") as ds:
            at_open = server.requests
            np.testing.assert_array_equal(ds["v"][...], ref)
        # 1 MiB of incompressible values: more than opening fetches, so the
        # read itself waited on the Python thread too.
        assert at_open >= 1 and server.requests > at_open, (at_open, server.requests)
    finally:
        server.shutdown()
        server.server_close()


def test_reads_never_see_half_a_write(tmp_path):
    # One thread rewrites the whole variable with one value after another
    # while three threads read it through the same dataset: a write holds
    # the dataset exclusively, so every read sees one value throughout.
    with vds.create(tmp_path / "w.vds", axes=[("i", 32), ("j", 32), ("k", 16)],
                    variables={"v": {"dtype": "int32", "dims": ["i", "j", "k"], "chunks": [8, 8, 8], "codec": "zstd"}}) as ds:
        v = ds["v"]
        stop, seen, errors = threading.Event(), set(), []

        def reader():
            n = 0
            while not stop.is_set():
                # A selection, and the whole variable looked up afresh (its lookups take the
                # dataset's lock with the GIL held only when no write has it).
                n += 1
                a = v[::-1, 3:, :] if n % 2 else ds["v"][...]
                if a.min() != a.max():
                    errors.append(f"a read mixed values {a.min()} and {a.max()}")
                    return
                seen.add(int(a[0, 0, 0]))

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for t in readers:
            t.start()
        for value in range(1, 60):
            v[...] = np.full((32, 32, 16), value, np.int32)
            if value % 20 == 0:
                ds.commit()
        stop.set()
        for t in readers:
            t.join(timeout=60)
        assert errors == [] and seen, "no read completed"
