"""The Python package against native Rust, in one run: what calling libvds from Python costs.

    target/pyenv/bin/python bench/python.py [--quick] [--dir DIR]

Runs the native benchmark's suites a and b (`cargo run --release --example
bench`) before and after the same workloads through the `vds` package (installed in
the running interpreter, e.g. target/pyenv by .ci/deps.sh): opening a tiny
file (one int64) and reading it, 1000 files (200 with --quick), and writing
them against Python's plain-file write of the same bytes; and a full
read of the 512^3 (256^3) float32 volume in 64^3 chunks, uncompressed,
deflate level 1 and zstd level 1 with shuffle, each read opening the file
afresh, into a new array and into one reused array (as the native
benchmark reads). Tiny files are also read through the compiled core alone
(vds._vds), which shows what the Python layer adds, and read and written
with the whole-file calls vds.load and vds.save. Prints a Markdown
table with each time divided by the native one (the better of its two runs).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import timeit

# NumPy's OpenBLAS starts a worker thread per core that spins while idle: on a
# machine of two cores it takes CPU from the loops timed here (the tiny-file
# reads measured 8.3 µs a file with it, 7.8 µs without), though nothing here
# calls BLAS. The native benchmark has no such thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import vds  # noqa: E402
from vds import _vds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def median_time(reps, fn):
    """The median of `reps` timed calls of `fn`, in seconds."""
    return statistics.median(timeit.repeat(fn, number=1, repeat=reps))


def native(quick, folder):
    """Times of the native suites a and b: {row label: [seconds, ...]} in table order."""
    cmd = ["cargo", "run", "--quiet", "--release", "--example", "bench", "--", "--suite", "a,b", "--dir", folder]
    out = subprocess.run(cmd + (["--quick"] if quick else []), cwd=ROOT, check=True, capture_output=True, text=True).stdout
    rows = {}
    for label, value, unit in re.findall(r"^\| ([^|]+?) \| ([0-9.]+) (ns|µs|ms|s) \|", out, re.M):
        rows.setdefault(label, []).append(float(value) * UNITS[unit])
    return rows


def volume(n):
    """The native benchmark's signal (bench.rs `volume`)."""
    i, j, k = np.meshgrid(*[np.arange(n, dtype=np.float32) / np.float32(n)] * 3, indexing="ij")
    return (np.sin(6 * i + 2 * j) * np.cos(9 * k + 3 * i * j) + np.float32(0.25) * np.sin(17 * k)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-python"))
    o = ap.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    before = native(o.quick, os.path.join(o.dir, "native"))
    table = []

    files = 200 if o.quick else 1000
    paths = [os.path.join(o.dir, f"t{i}.vds") for i in range(files)]
    for i, p in enumerate(paths):
        with vds.create(p, axes=[("x", 1)], variables={"v": {"dtype": "int64", "dims": ["x"]}}, overwrite=True, sync=False) as ds:
            ds["v"][...] = 42

    def api():
        for p in paths:
            with vds.open(p) as ds:
                ds["v"][...]

    out = np.empty(1, np.int64)

    def core():
        for p in paths:
            d = _vds.open(p)
            d.read(0, 0, [0], [1], out)
            d.close()

    def load():
        for p in paths:
            vds.load(p)["v"]

    # Each loop takes a millisecond or two: the median of 15 steadies them on a busy machine.
    tiny = [("vds package", median_time(15, api)), ("compiled core only", median_time(15, core)),
            ("`vds.load`, one call", median_time(15, load))]

    # Writing tiny files, against Python's own plain-file write of the same 8 bytes (the floor).
    value = np.array([42], np.int64)

    def write_vds():
        for p in paths:
            with vds.create(p, axes=[("x", 1)], variables={"v": {"dtype": "int64", "dims": ["x"], "chunks": [1]}},
                            overwrite=True, sync=False) as ds:
                ds["v"][...] = value

    def write_plain():
        # Over the file, then cut to length, as libvds overwrites a container (see bench/peers.py's floor).
        for p in paths:
            with os.fdopen(os.open(p + ".bin", os.O_WRONLY | os.O_CREAT, 0o644), "wb") as f:
                f.write(value.tobytes())
                f.truncate()

    def save_vds():
        for p in paths:
            vds.save(p, {"v": value}, dims={"v": ["x"]}, chunks={"v": [1]}, overwrite=True, sync=False)

    floor_write = median_time(5, write_plain)
    writes = [(f"write a tiny file ({files} files), vds package, against Python's plain-file write", floor_write,
               median_time(5, write_vds)),
              (f"write a tiny file ({files} files), `vds.save`, against Python's plain-file write", floor_write,
               median_time(5, save_vds))]

    n = 256 if o.quick else 512
    vol = volume(n)
    p = os.path.join(o.dir, "vol.vds")
    for index, (label, codec) in enumerate([("uncompressed", None), ("deflate level 1 + shuffle", ("deflate", 1)),
                                            ("zstd level 1 + shuffle", ("zstd", 1))]):
        # Whole chunks, as the native suite b writes them (`blocks(None)`): without
        # "blocks", deflate and zstd would get 32^3 blocks inside each brick.
        spec = {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [64, 64, 64], "codec": codec, "blocks": False}
        with vds.create(p, axes=[("i", n), ("j", n), ("k", n)], variables={"v": spec}, overwrite=True, sync=False) as ds:
            ds["v"][...] = vol

        def read():
            with vds.open(p) as ds:
                return ds["v"][...]

        buf = np.empty_like(vol)

        def read_into():  # as the native benchmark does: into one buffer, reused
            with vds.open(p) as ds:
                ds["v"].read(out=buf)

        assert np.array_equal(read(), vol)
        table.append((f"full read of the {n}^3 volume, {label}, into a new array (`v[...]`)", ("full read", index),
                      median_time(5, read)))
        table.append((f"full read of the {n}^3 volume, {label}, into a reused array (`v.read(out=buf)`)",
                      ("full read", index), median_time(5, read_into)))
        assert np.array_equal(buf, vol)
        os.remove(p)

    # The native suites run again after: on a machine shared with other work, each native
    # figure is the better of the two runs, so that load during one cannot flatter Python.
    after = native(o.quick, os.path.join(o.dir, "native"))
    best = {k: [min(a, b) for a, b in zip(before[k], after[k])] for k in before}
    table = [(f"open + read a tiny file ({files} files), {what}", ("read tiny (one int64)", 0), t) for what, t in tiny] + table

    print(f"vds {vds.__version__} (Python {sys.version.split()[0]}, NumPy {np.__version__}) against native libvds\n")
    print("| operation | native (or floor) | Python | ratio |")
    print("|---|---:|---:|---:|")
    rows = [(label, best[row][index], py) for label, (row, index), py in table] + writes
    for label, nat, py in rows:
        print(f"| {label} | {nat * 1e3:.2f} ms | {py * 1e3:.2f} ms | {py / nat:.2f} |")


if __name__ == "__main__":
    main()
