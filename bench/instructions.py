"""What one tiny-file call costs in instructions, natively and through Python: a count that noise cannot move.

    target/pyenv/bin/python bench/instructions.py [--dir DIR]

The machines here are shared, and their speed drifts by more than the
per-call differences bench/python.py measures. Instructions executed do
not drift: this runs each loop under valgrind's callgrind (so valgrind
must be installed) over 100 and then 1100 tiny files (one int64 each,
written by the `tinyfile` example) and divides the difference by 1000,
so that start-up (the interpreter, imports, the loader) cancels out.
The loops are the native open + read (`tinyfile read`), `vds.load`, the
compiled core's `_vds.load`, and the handles (`vds.open`, `ds["v"][...]`).
Only user-space instructions count: the system calls, the same for all,
are not in the figures. Prints a Markdown table.
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The Python loops, each run as `python -c LOOP BASE N`.
LOOPS = {
    "`vds.load`, one call": "import sys, vds\nfor i in range(int(sys.argv[2])): vds.load(f'{sys.argv[1]}{i}')",
    "compiled core `_vds.load`": "import sys, vds\nL = vds._vds.load\nfor i in range(int(sys.argv[2])): L(f'{sys.argv[1]}{i}')",
    "vds package (handles)": "import sys, vds\nfor i in range(int(sys.argv[2])):\n"
                             "    with vds.open(f'{sys.argv[1]}{i}') as ds: ds['v'][...]",
}


def instructions(cmd):
    """The instructions callgrind counts for `cmd`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd, env=env,
                         capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


def per_call(cmd):
    """Instructions per file of `cmd + [N]`: 1100 files against 100."""
    return (instructions(cmd + ["1100"]) - instructions(cmd + ["100"])) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-bench-instructions"))
    o = ap.parse_args()
    os.makedirs(o.dir, exist_ok=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "tinyfile"], cwd=ROOT, check=True)
    tinyfile = os.path.join(ROOT, "target", "release", "examples", "tinyfile")
    base = os.path.join(o.dir, "t")
    subprocess.run([tinyfile, "write", base, "1100"], check=True, capture_output=True)
    # Every loop, the native one too, formats its file names: that is in each figure.
    native = per_call([tinyfile, "read", base])
    print("| loop (open + read a tiny file) | instructions per file | against native |")
    print("|---|---:|---:|")
    print(f"| native (`tinyfile read`) | {native:,.0f} | 1.00 |")
    for label, loop in LOOPS.items():
        n = per_call([sys.executable, "-c", loop, base])
        print(f"| {label} | {n:,.0f} | {n / native:.2f} |")


if __name__ == "__main__":
    main()
