"""Conversions through the Python package: SEG-Y (vds.from_segy, vds.to_segy)
and OpenVDS (vds.to_openvds, vds.from_openvds), timed on one IEEE-float
SEG-Y file against segyio reading it into NumPy, with each conversion's
peak resident memory, to show that memory stays bounded whatever the size.

    target/pyenv/bin/python bench/convert.py [--shape 200,200,1000] [--runs 3] [--dir DIR]

Runs in target/pyenv (sh .ci/deps.sh: numpy, segyio, openvds and the vds
package). Every conversion runs in a child process, so that its peak
resident memory (from /usr/bin/time) is its own; the time is the median
of --runs, warm OS cache. libvds fsyncs what it writes; segyio's cube is
only read into memory. Output: a Markdown table.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def write_segy(path, shape):
    """A sorted post-stack file of IEEE floats, inline by inline, in bounded memory."""
    ni, nx, ns = shape
    rng = np.random.default_rng(0)
    binary = np.zeros(400, np.uint8)
    for pos, value, kind in ((16, 4000, ">i2"), (20, ns, ">u2"), (24, 5, ">i2")):
        binary[pos:pos + 2] = np.frombuffer(np.array(value, kind).tobytes(), np.uint8)
    with open(path, "wb") as f:
        f.write(b"\x40" * 3200)
        f.write(binary.tobytes())
        for il in range(ni):
            heads = np.zeros((nx, 240), np.uint8)
            heads[:, 188:192] = np.full(nx, il + 1, ">i4").view(np.uint8).reshape(-1, 4)
            heads[:, 192:196] = np.arange(1, nx + 1).astype(">i4").view(np.uint8).reshape(-1, 4)
            heads[:, 114:116] = np.frombuffer(np.array(ns, ">u2").tobytes(), np.uint8)
            values = rng.standard_normal((nx, ns)).astype(">f4")
            f.write(np.concatenate([heads, values.view(np.uint8)], axis=1).tobytes())


def child(code, runs):
    """Median time and peak RSS (bytes) of `code` run by a fresh Python, `runs` times."""
    times, rss = [], 0
    report = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-convert-rss")
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.check_call(["/usr/bin/time", "-f", "%M", "-o", report, sys.executable, "-c", code])
        times.append(time.perf_counter() - t)
        rss = max(rss, int(open(report).read().split()[-1]) * 1024)
    return statistics.median(times), rss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="200,200,1000")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "bench-convert"))
    a = p.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    os.makedirs(a.dir, exist_ok=True)
    d = lambda name: os.path.join(a.dir, name)  # noqa: E731
    write_segy(d("in.sgy"), shape)
    size = os.path.getsize(d("in.sgy"))
    start = "import vds, segyio, os, shutil\n"
    rm = "for f in {names}:\n    shutil.rmtree(f) if os.path.isdir(f) else (os.remove(f) if os.path.exists(f) else None)\n"
    steps = [
        ("python: baseline (import vds, segyio, openvds)", "import openvds\n"),
        ("`segyio.tools.cube` into NumPy", f"segyio.tools.cube({d('in.sgy')!r})\n"),
        ("`vds.from_segy(codec=None)`", rm.format(names=[d("none.vds")]) + f"vds.from_segy({d('in.sgy')!r}, {d('none.vds')!r}, codec=None)\n"),
        ("`vds.from_segy` (deflate 1)", rm.format(names=[d("a.vds")]) + f"vds.from_segy({d('in.sgy')!r}, {d('a.vds')!r})\n"),
        ("`vds.to_segy`", rm.format(names=[d("out.sgy")]) + f"vds.to_segy({d('a.vds')!r}, {d('out.sgy')!r})\n"),
        ("`vds.to_openvds`", rm.format(names=[d("a.ovds")]) + f"vds.to_openvds({d('a.vds')!r}, {d('a.ovds')!r})\n"),
        ("`vds.from_openvds` (zstd 1)", rm.format(names=[d("b.vds")]) + f"vds.from_openvds({d('a.ovds')!r}, {d('b.vds')!r})\n"),
    ]
    print(f"{shape[0]} x {shape[1]} traces of {shape[2]} float32 samples: {size / 2**20:.0f} MiB of SEG-Y\n")
    print("| step | time | peak RSS |\n|---|---:|---:|")
    for name, code in steps:
        t, rss = child(start + code, a.runs)
        print(f"| {name} | {t:.2f} s | {rss / 2**20:.0f} MiB |", flush=True)
    same = open(d("in.sgy"), "rb").read() == open(d("out.sgy"), "rb").read()
    print(f"\nto_segy wrote the input back byte for byte: {same}")


if __name__ == "__main__":
    main()
