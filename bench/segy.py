"""SEG-Y import speed: `vds import survey.sgy` against segyio reading the
same file into NumPy (segyio.tools.cube) and segyio's cube written on to
HDF5 (h5py) and zarr v3, on one IBM-float file, in one run.

    python3 bench/segy.py --setup                 # once: target/bench-segy-venv
    python3 bench/segy.py [--shape 256,256,1000] [--runs 3] [--dir DIR] [--cold]

Every timing is the median of --runs with a warm OS cache (the file is read
once before timing). `floor` reads the file's bytes into memory in 16 MiB
blocks: the rate nothing that reads the whole file can beat; the second
floor copies them to a new file and fsyncs it, which any import that keeps
a durable copy of the data must at least do. vds runs as a
subprocess (the release binary, built first), and its peak resident memory
is the child's (from /usr/bin/time). vds fsyncs what it writes (its
destination appears only when complete and durable); h5py and zarr do not,
so h5py is also timed with an fsync. Before every timed run the page
cache's dirty pages are written out (sync, untimed). With --cold the
SEG-Y file is also dropped from the page cache before every run
(posix_fadvise DONTNEED), so that every row reads it from the disk and the
floor is the disk's read rate. Output: a Markdown table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "bench-segy-venv")
PEERS = ["numpy", "segyio==1.9.14", "h5py", "zarr>=3"]

if "--setup" in sys.argv:
    subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([os.path.join(VENV, "bin", "pip"), "install", "-q", *PEERS])
    sys.exit(0)
if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        sys.exit("run `python3 bench/segy.py --setup` first")
    os.execv(python, [python, *sys.argv])

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import segyio  # noqa: E402
import zarr  # noqa: E402

VDS = os.path.join(ROOT, "target", "release", "vds")


COLD = []  # files dropped from the page cache before every timed run (--cold)


def median_time(fn, runs):
    times = []
    for _ in range(runs):
        # Dirty pages of the runs before (hundreds of MiB) are written out first, untimed:
        # otherwise a run that fsyncs waits for its predecessors' writeback.
        os.sync()
        for path in COLD:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_vds(args):
    """Runs vds; returns its peak resident memory in bytes, measured by
    /usr/bin/time (a child forked from this Python process would count the
    parent's pages until its exec)."""
    report = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-segy-rss")
    subprocess.check_call(["/usr/bin/time", "-f", "%M", "-o", report, VDS, *args], stdout=subprocess.DEVNULL)
    with open(report) as f:
        return int(f.read().split()[-1]) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="256,256,1000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-segy"))
    ap.add_argument("--cold", action="store_true", help="read the SEG-Y file from the disk in every run")
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    subprocess.check_call(["cargo", "build", "--release", "-q", "-p", "vds-tool"], cwd=ROOT)
    os.makedirs(a.dir, exist_ok=True)
    sgy = os.path.join(a.dir, "survey.sgy")
    rng = np.random.default_rng(18)
    vol = (rng.standard_normal(shape) * 1000).astype(np.float32)
    segyio.tools.from_array(sgy, vol, format=1, dt=4000)
    size = os.path.getsize(sgy)
    mib = size / 2**20
    if a.cold:
        COLD.append(sgy)
    rows = []

    def floor():
        with open(sgy, "rb", buffering=0) as f:
            buf = bytearray(16 << 20)
            while f.readinto(buf):
                pass

    floor()
    rows.append(("floor: read the file's bytes", median_time(floor, a.runs), "-"))

    def copy_floor():
        # What any import that keeps a durable copy of the data must at least do.
        with open(sgy, "rb", buffering=0) as f, open(os.path.join(a.dir, "copy.bin"), "wb", buffering=0) as g:
            buf = bytearray(16 << 20)
            view = memoryview(buf)
            while n := f.readinto(buf):
                g.write(view[:n])
            os.fsync(g.fileno())

    rows.append(("floor: copy the file's bytes, then fsync", median_time(copy_floor, a.runs), "-"))

    def cube():
        with segyio.open(sgy) as f:
            return segyio.tools.cube(f)

    got = cube()
    assert np.array_equal(got, vol)
    rows.append(("segyio.tools.cube (into NumPy)", median_time(cube, a.runs), "-"))

    def to_h5():
        path = os.path.join(a.dir, "survey.h5")
        with h5py.File(path, "w") as h:
            h.create_dataset("amplitude", data=cube(), chunks=(64, 64, 64))

    rows.append(("segyio cube, then h5py (64^3 chunks, uncompressed)", median_time(to_h5, a.runs), "-"))

    def to_h5_durable():
        to_h5()
        fd = os.open(os.path.join(a.dir, "survey.h5"), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    rows.append(("segyio cube, then h5py, then fsync (durable, as vds)", median_time(to_h5_durable, a.runs), "-"))

    def to_zarr():
        path = os.path.join(a.dir, "survey.zarr")
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.create_array(store=path, shape=shape, chunks=(64, 64, 64), dtype="f4", compressors=None, zarr_format=3)
        z[...] = cube()

    rows.append(("segyio cube, then zarr v3 (64^3 chunks, uncompressed)", median_time(to_zarr, a.runs), "-"))
    out = os.path.join(a.dir, "survey.vds")
    for label, extra in [("vds import --codec none (default chunks: at most 64, evened out)", ["--codec", "none"]),
                         ("vds import (deflate level 1 + shuffle)", [])]:
        peaks = []

        def imp():
            peaks.append(run_vds(["import", sgy, out, "-f", "-q", *extra]))

        t = median_time(imp, a.runs)
        rows.append((label, t, "%.0f MiB" % (max(peaks) / 2**20)))
    print("SEG-Y file: %s IBM float, %.1f MiB, %d traces of %d samples, %s\n" % (
        "x".join(map(str, shape)), mib, shape[0] * shape[1], shape[2],
        "read from the disk in every run (--cold)" if a.cold else "in the page cache (warm)"))
    print("| operation | time | throughput | peak memory |")
    print("|---|---:|---:|---:|")
    for label, t, peak in rows:
        print("| %s | %.2f s | %.0f MiB/s | %s |" % (label, t, mib / t, peak))


if __name__ == "__main__":
    main()
