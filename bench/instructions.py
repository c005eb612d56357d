"""What one tiny-file call costs in instructions, natively and through Python: a count that noise cannot move.

    target/pyenv/bin/python bench/instructions.py [--dir DIR]

The machines here are shared, and their speed drifts by more than the
per-call differences bench/python.py measures. Instructions executed do
not drift: this runs each loop under valgrind's callgrind (so valgrind
must be installed) over 100 and then 1100 tiny files (one int64 each,
written by the `tinyfile` example) and divides the difference by 1000,
so that start-up (the interpreter, imports, the loader) cancels out.
The loops are the native open + read (`tinyfile read`), `vds.load`, the
compiled core's `_vds.load`, and the handles (`vds.open`, `ds["v"][...]`);
then the writes: the native create + write + close (`tinyfile write`),
`vds.save`, and the handles (`vds.create`, `ds["v"][...] = value`), each
without fsync (system calls are not counted in any case).
Only user-space instructions count: the system calls, the same for all,
are not in the figures. Prints two Markdown tables.
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The Python loops, each run as `python -c PROGRAM BASE N`: the body of a
# function over the first N of 1100 names made beforehand (the native loop
# makes its names before its loop too), so that neither the names' making nor
# the module-level lookups of a loop outside a function are in the figures.
def program(body, setup=""):
    return ("import sys, numpy as np, vds\n"
            f"def run(paths):\n{setup}    for p in paths:\n" + "".join(f"        {line}\n" for line in body.splitlines()) +
            "run([f'{sys.argv[1]}{i}' for i in range(1100)][:int(sys.argv[2])])\n")


LOOPS = {
    "`vds.load`, one call": program("vds.load(p)"),
    "compiled core `_vds.load`": program("load(p)", "    load = vds._vds.load\n"),
    "vds package (handles)": program("with vds.open(p) as ds: ds['v'][...]"),
}
WRITES = {
    "`vds.save`, one call": program("vds.save(p, {'v': v}, dims={'v': ['x']}, chunks={'v': [1]}, overwrite=True, sync=False)",
                                    "    v = np.array([42], np.int64)\n"),
    "vds package (handles)": program("with vds.create(p, axes=[('x', 1)], overwrite=True, sync=False,\n"
                                     "                 variables={'v': {'dtype': 'int64', 'dims': ['x'], 'chunks': [1]}}) as ds:\n"
                                     "    ds['v'][...] = v", "    v = np.array([42], np.int64)\n"),
}


def instructions(cmd):
    """The instructions callgrind counts for `cmd`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd, env=env,
                         capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


def per_call(cmd, after=()):
    """Instructions per file of `cmd + [N] + after`: 1100 files against 100."""
    return (instructions(cmd + ["1100", *after]) - instructions(cmd + ["100", *after])) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-instructions"))
    o = ap.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "tinyfile"], cwd=ROOT, check=True)
    tinyfile = os.path.join(ROOT, "target", "release", "examples", "tinyfile")
    # Each loop reads, or writes over, files that exist before it starts.
    for what, mode, loops in [("open + read a tiny file", "read", LOOPS), ("create + write + close a tiny file", "write", WRITES)]:
        base = os.path.join(o.dir, mode[0])
        subprocess.run([tinyfile, "write", base, "1100"], check=True, capture_output=True)
        native = per_call([tinyfile, mode, base], ["-", "1", "1100"])
        print(f"| loop ({what}) | instructions per file | against native |")
        print("|---|---:|---:|")
        print(f"| native (`tinyfile {mode}`) | {native:,.0f} | 1.00 |")
        for label, loop in loops.items():
            n = per_call([sys.executable, "-c", loop, base])
            print(f"| {label} | {n:,.0f} | {n / native:.2f} |")
        print()

if __name__ == "__main__":
    main()
