"""Writes one container from several processes at once, with no lock or
message between them: each worker writes its slab of a volume into its own
fragment, and one short merge adopts them all (SPEC.md section 11).

    python examples/parallel_write.py OUT.vds [WORKERS]

Python's multiprocessing starts the workers here; Dask, an MPI job or a
Spark stage does the same thing: give each task a distinct fragment name and
whole chunks to write, then call merge_fragments once with every name.
A worker that dies before closing its fragment leaves it unsealed; the merge
skips it and reports it, and its slab can be redone into a new fragment.
"""

import multiprocessing
import os
import sys

import numpy as np

import vds

SHAPE = (64, 48, 40)
SLAB = 16  # the inline chunk extent: each worker writes whole chunks


def reference():
    i, j, k = np.meshgrid(*[np.arange(n) for n in SHAPE], indexing="ij")
    return (np.sin(i * 0.1) * np.cos(j * 0.07) + k * 0.01).astype(np.float32)


def work(args):
    path, w = args
    name = f"{os.path.basename(path)}.part{w}"
    with vds.fragment(path, name) as f:
        f["amplitude"][w * SLAB:(w + 1) * SLAB] = reference()[w * SLAB:(w + 1) * SLAB]
    return name


def main(path, workers):
    vds.create(path, axes=[("inline", SHAPE[0]), ("crossline", SHAPE[1]), ("time", SHAPE[2])],
               variables={"amplitude": {"dtype": "float32", "dims": ["inline", "crossline", "time"],
                                        "chunks": [SLAB, 16, 16], "codec": "deflate"}},
               overwrite=True).close()
    with multiprocessing.Pool(workers) as pool:
        names = pool.map(work, [(path, w) for w in range(SHAPE[0] // SLAB)])
    with vds.open(path, "r+") as ds:
        report = ds.merge_fragments(names)
    with vds.open(path) as ds:
        ok = np.array_equal(ds["amplitude"][...], reference())
    merged, skipped = len(report["merged"]), len(report["skipped"])
    print(f"{path}: {merged} fragments merged, {skipped} skipped, volume {'matches' if ok else 'DIFFERS FROM'} the reference")
    return 0 if ok and skipped == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4))
