"""The Python package against native Rust, in one run: what calling libvds from Python costs.

    target/pyenv/bin/python bench/python.py [--quick] [--dir DIR] [--rounds R]

Tiny files (one int64), 1000 of them (200 with --quick): opening each and
reading it through the `vds` package's handles, through the compiled core
alone (vds._vds, which shows what the Python layer adds) and with the
whole-file call vds.load, against the same loop natively (the `tinyfile`
example, `cargo build --release --example tinyfile`, over the same files,
warm); and writing them through the handles and with vds.save against
Python's plain-file write of the same bytes (the floor). The machines here
are shared and their speed drifts by more than the differences measured,
so these rows are taken in R rounds (15 by default), each timing every
loop once, one after the other, and each ratio is the median of the R
ratios of one round (the times shown are medians too).

Then a full read of the 512^3 (256^3) float32 volume in 64^3 chunks,
uncompressed, deflate level 1 and zstd level 1 with shuffle, each read
opening the file afresh, into a new array and into one reused array (as
the native benchmark reads), against the native benchmark's suite b
(`cargo run --release --example bench`), run before and after (the
better of its two runs). Prints a Markdown table.
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


def timed(fn):
    """Seconds one call of `fn` takes."""
    return timeit.timeit(fn, number=1)


def median_time(reps, fn):
    """The median of `reps` timed calls of `fn`, in seconds."""
    return statistics.median(timeit.repeat(fn, number=1, repeat=reps))


def native(quick, folder):
    """Times of the native suite b: {row label: [seconds, ...]} in table order."""
    cmd = ["cargo", "run", "--quiet", "--release", "--example", "bench", "--", "--suite", "b", "--dir", folder]
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
    ap.add_argument("--rounds", type=int, default=15, help="rounds of the tiny-file loops (each ratio is their median)")
    o = ap.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    before = native(o.quick, os.path.join(o.dir, "native"))
    table = []

    files = 200 if o.quick else 1000
    # The native loop over the same files: the tinyfile example writes them, then reads them
    # in a process of its own each round (five loops, the median one: warm, as Python's are).
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "tinyfile"], cwd=ROOT, check=True)
    tinyfile = os.path.join(ROOT, "target", "release", "examples", "tinyfile")
    base = os.path.join(o.dir, "t")
    subprocess.run([tinyfile, "write", base, str(files)], check=True, capture_output=True)
    paths = [f"{base}{i}" for i in range(files)]

    def native_read():
        out = subprocess.run([tinyfile, "read", base, str(files), "-", "5"], check=True, capture_output=True, text=True).stdout
        return float(out.split()[1]) * 1e-6 * files  # "read: X us per file"

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

    # Writing tiny files, against Python's own plain-file write of the same 8 bytes (the floor).
    value = np.array([42], np.int64)
    wpaths = [os.path.join(o.dir, f"w{i}.vds") for i in range(files)]

    def write_vds():
        for p in wpaths:
            with vds.create(p, axes=[("x", 1)], variables={"v": {"dtype": "int64", "dims": ["x"], "chunks": [1]}},
                            overwrite=True, sync=False) as ds:
                ds["v"][...] = value

    def write_plain():
        # Over the file, then cut to length, as libvds overwrites a container (see bench/peers.py's floor).
        for p in wpaths:
            with os.fdopen(os.open(p + ".bin", os.O_WRONLY | os.O_CREAT, 0o644), "wb") as f:
                f.write(value.tobytes())
                f.truncate()

    def save_vds():
        for p in wpaths:
            vds.save(p, {"v": value}, dims={"v": ["x"]}, chunks={"v": [1]}, overwrite=True, sync=False)

    # (label, loop, what it is measured against, the pairs of times of each round)
    paired = [(f"open + read a tiny file ({files} files), {what}", fn, "native", []) for what, fn in
              [("vds package", api), ("compiled core only", core), ("`vds.load`, one call", load)]]
    paired += [(f"write a tiny file ({files} files), {what}, against Python's plain-file write", fn, "floor", [])
               for what, fn in [("vds package", write_vds), ("`vds.save`", save_vds)]]
    for _, fn, _, _ in paired:
        fn()  # the files made, the caches warm
    write_plain()
    for _ in range(o.rounds):
        reference = {"native": native_read(), "floor": timed(write_plain)}
        for _, fn, against, pairs in paired:
            pairs.append((reference[against], timed(fn)))

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

    print(f"vds {vds.__version__} (Python {sys.version.split()[0]}, NumPy {np.__version__}) against native libvds\n")
    print("| operation | native (or floor) | Python | ratio |")
    print("|---|---:|---:|---:|")
    rows = [(label, statistics.median(n for n, _ in pairs), statistics.median(p for _, p in pairs),
             statistics.median(p / n for n, p in pairs)) for label, _, _, pairs in paired]
    rows += [(label, best[row][index], py, py / best[row][index]) for label, (row, index), py in table]
    for label, nat, py, ratio in rows:
        print(f"| {label} | {nat * 1e3:.2f} ms | {py * 1e3:.2f} ms | {ratio:.2f} |")
    print(f"\nTiny-file rows: medians of {o.rounds} rounds, the ratio the median of each round's own ratio.")


if __name__ == "__main__":
    main()
