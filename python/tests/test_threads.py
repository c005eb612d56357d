"""Reads release the GIL: Python threads read one open dataset at once.

Four threads, started together by a barrier, each read their own quarter
of a compressed volume many times through one shared dataset, and every
read must equal the NumPy reference. The dataset's lock is shared by
readers, so the reads overlap; a wrong value or a deadlock fails the test.
"""

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


def test_reads_release_the_gil(tmp_path, rng):
    # While one thread is inside a long read, the main thread keeps running
    # Python code. Were the GIL held for the read, no main-thread timestamp
    # could fall inside the call (allowing 10 ms at its start for the
    # interpreter's switch interval).
    import time

    # 64 MiB in 64^3 deflate chunks: each whole read decodes for tens of
    # milliseconds even on a fast, idle machine.
    ref = rng.standard_normal((256, 256, 256)).astype(np.float32)
    with vds.create(tmp_path / "g.vds", axes=[("i", 256), ("j", 256), ("k", 256)],
                    variables={"v": {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [64, 64, 64],
                                     "codec": ("deflate", 1)}}) as ds:
        ds["v"][...] = ref
    ds = vds.open(tmp_path / "g.vds", cache_size=0)
    v = ds["v"]
    calls, stamps, done = [], [], threading.Event()

    def reader():
        for _ in range(5):
            t0 = time.perf_counter()
            a = v[...]
            calls.append((t0, time.perf_counter()))
            assert np.array_equal(a, ref)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    while not done.is_set():
        stamps.append(time.perf_counter())
    t.join()
    long_calls = [(a, b) for a, b in calls if b - a > 0.03]
    assert long_calls, f"reads too short to tell: {[round(b - a, 4) for a, b in calls]}"
    inside = sum(1 for s in stamps for a, b in long_calls if a + 0.01 < s < b - 0.001)
    assert inside > 0, "the main thread never ran while a read was in progress"
    ds.close()


def test_reads_never_see_half_a_write(tmp_path):
    # One thread rewrites the whole variable with one value after another
    # while three threads read it through the same dataset: a write holds
    # the dataset exclusively, so every read sees one value throughout.
    with vds.create(tmp_path / "w.vds", axes=[("i", 32), ("j", 32), ("k", 16)],
                    variables={"v": {"dtype": "int32", "dims": ["i", "j", "k"], "chunks": [8, 8, 8], "codec": "zstd"}}) as ds:
        v = ds["v"]
        stop, seen, errors = threading.Event(), set(), []

        def reader():
            while not stop.is_set():
                a = v[::-1, 3:, :]
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
