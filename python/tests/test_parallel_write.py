"""examples/parallel_write.py, the example of several processes writing one
container through fragments, runs as a program and writes the reference
volume."""

import os
import runpy
import subprocess
import sys

import numpy as np

import vds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "parallel_write.py")


def test_parallel_write_example(tmp_path):
    path = str(tmp_path / "parallel.vds")
    done = subprocess.run([sys.executable, EXAMPLE, path, "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 fragments merged, 0 skipped, volume matches the reference" in done.stdout
    reference = runpy.run_path(EXAMPLE)["reference"]  # not as __main__: defines, does not run
    with vds.open(path) as ds:
        np.testing.assert_array_equal(ds["amplitude"][...], reference())
        assert ds.verify()["ok"]
