"""Dask and vds: read variables as Dask arrays, and write Dask arrays from many workers.

Reading needs nothing special: a :class:`vds.Variable` is an array-like that
pickles as (path, variable), so ``dask.array.from_array(var, chunks=var.chunks)``
works with every scheduler, threads included (reads release the GIL).

Writing: :func:`store` writes each block of a Dask array into its own
fragment beside the container (SPEC.md's fragments, no lock between the
workers), then adopts all of them in one atomic merge. A worker that dies
mid-write leaves an unsealed fragment that no merge adopts; until the merge
the container stays at its previous commit. The merge removes the fragments
of failed attempts; a store that fails as a whole removes the fragments its
tasks left. The merge task may run again (its worker lost after it
committed): it then finds its fragments merged, or merged, folded and
removed, and succeeds. (A rerun after a fold whose fragments were not
yet removed merges and folds the same fragments once more: the same
values, a second rewrite.)
"""

import math
import os
import uuid

import numpy as np

from . import _names, create, fragment
from .errors import InvalidArgumentError
from . import open as vds_open


def from_variable(var, chunks=None):
    """``var`` as a Dask array, chunked like its storage unless ``chunks`` says otherwise."""
    import dask.array as da

    return da.from_array(var, chunks=chunks or var.chunks)


def _write_block(block, path, name, offset, prefix):
    """Writes one block into a new fragment; returns the fragment's name (a Dask task)."""
    name_ = f"{prefix}.{uuid.uuid4().hex}"  # a retried task writes a fresh fragment
    with fragment(path, name_) as f:
        key = tuple(slice(o, o + n) for o, n in zip(offset, block.shape))
        f[name][key] = block
    return name_


def store(darray, path, name="data", dims=None, codec="zstd", fill_value=None, attrs=None, overwrite=False,
          compute=True, fold=False):
    """Writes the Dask array ``darray`` to the variable ``name`` of a new container at ``path``.

    Each block is written by its own task into its own fragment (a file
    beside the container); when every task has finished, one atomic
    :meth:`Dataset.merge_fragments` adopts them. The storage chunks are the
    array's chunks (irregular chunks are made regular first), so no two
    fragments share a chunk. ``dims`` names the axes (default ``dim_0``,
    ...). ``fold=True`` then compacts the fragments into the container file
    itself (a full rewrite). With ``compute=False`` returns a
    ``dask.delayed`` object doing all of this. Returns the merge report
    (a dict with ``merged``, ``skipped``, ``chunks``). With ``overwrite=True``
    a container there is replaced; the fragment files an earlier store left
    it using stay, since a copy of that container beside it would use them
    too (store with ``fold=True`` to leave none, or remove them when no copy
    is kept).

    If the computation fails (a task keeps failing, or its worker keeps
    dying), the fragment files its tasks left that the container does not
    use are removed before the error is raised again: before the merge the
    container stays at its creating commit and uses none; fragments a merge
    adopted stay, whatever failed after it. (Only when ``store`` computes;
    a task still running at that moment may leave its file, which no merge
    adopts.)
    """
    import dask
    import dask.array as da

    darray = da.asarray(darray)
    if darray.ndim == 0:
        raise InvalidArgumentError("vds variables span 1 to 8 axes; got a 0-d array")
    if any(math.isnan(c) for cs in darray.chunks for c in cs):
        raise InvalidArgumentError("the array's chunk sizes are unknown (as after boolean indexing): call its compute_chunk_sizes() first")
    chunks = tuple(c[0] for c in darray.chunks)
    if any(len(set(c[:-1])) > 1 or c[-1] > c[0] for c in darray.chunks):
        darray = darray.rechunk(chunks)
    dims = _names(dims, "dims") if dims is not None else [f"dim_{i}" for i in range(darray.ndim)]
    path = os.path.abspath(os.fspath(path))
    spec = {"dtype": darray.dtype, "dims": dims, "chunks": list(chunks), "codec": codec}
    if fill_value is not None:
        spec["fill_value"] = fill_value
    create(path, axes=list(zip(dims, darray.shape)), variables={name: spec}, attrs=attrs, overwrite=overwrite).close()
    prefix = f"{os.path.basename(path)}.{uuid.uuid4().hex[:12]}"
    starts = [np.cumsum((0,) + c[:-1]) for c in darray.chunks]
    tasks = []
    for index, block in zip(np.ndindex(*darray.numblocks), darray.to_delayed().ravel()):
        offset = tuple(int(starts[d][i]) for d, i in enumerate(index))
        tasks.append(dask.delayed(_write_block, pure=False)(block, path, name, offset, prefix))
    merged = dask.delayed(_merge, pure=False)(path, tasks, prefix, fold)
    if not compute:
        return merged
    try:
        return merged.compute()
    except BaseException:
        _remove_unadopted(path, prefix)
        raise


def _merge(path, names, prefix, fold):
    """Adopts the fragments ``names`` in one commit (the last task of :func:`store`), then
    removes the fragments of failed attempts (a killed worker's), which no merge adopts."""
    with vds_open(path, "r+") as ds:
        if fold and _folded_before(ds, path, names, prefix):
            # A rerun after an attempt that merged, folded and began removing the fragments.
            report = {"merged": [], "skipped": [(n, "merged and folded before") for n in names], "chunks": 0}
            fold = False
        else:
            report = ds.merge_fragments(names)
        # A rerun of this task (its worker lost after the commit) finds them merged already.
        missing = [(n, r) for n, r in report["skipped"] if not r.startswith("merged ")]
        if missing:
            reasons = "; ".join(f"{n}: {r}" for n, r in missing)
            raise RuntimeError(f"fragments not merged: {reasons}")
        if fold:
            ds.compact("fold")
    _remove_unadopted(path, prefix)
    return report


def _folded_before(ds, path, names, prefix):
    """Whether an earlier run of the merge task committed ``names`` and folded them: some of
    the files are gone, yet the container (which :func:`store` created, its commit 1, and only
    the merge commits to) is past its creating commit and lists no slot of this store. A file
    missing before any merge stays an error: the merge reports it."""
    folder = os.path.dirname(path)
    if all(os.path.exists(os.path.join(folder, n)) for n in names) or ds.commit_sequence < 2:
        return False
    return not any(s["name"].startswith(prefix + ".") for s in ds.descriptor().get("slots", []))


def _remove_unadopted(path, prefix):
    """Removes the fragment files of one store (their names start with ``prefix``) that the
    container's last commit does not use: the slots it lists are merged fragments and stay,
    whatever failed after the merge. The container is held open for writing meanwhile, so that
    no merge still running commits in between (a merge that starts later finds its files
    missing before it commits). Removes nothing when the container cannot be opened so, for
    instance while such a merge holds it."""
    try:
        ds = vds_open(path, "r+")
    except Exception:
        return
    try:
        used = {s["name"] for s in ds.descriptor().get("slots", [])}
        folder = os.path.dirname(path)
        for n in os.listdir(folder):
            if n.startswith(prefix + ".") and n not in used:
                try:
                    os.remove(os.path.join(folder, n))
                except FileNotFoundError:
                    pass
    finally:
        ds.close(commit=False)
