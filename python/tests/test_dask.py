"""Dask: variables read as Dask arrays; vds.dask.store writes a Dask array
from the workers of a LocalCluster (separate processes), each block into its
own fragment, merged once; a killed worker never leaves a torn container."""

import os
import shutil

import numpy as np
import pytest

import vds

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import vds.dask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    import sys

    import cloudpickle
    import dask

    # The workers cannot import this test module: ship its functions by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # One failure of a task is retried, a second fails the computation (quicker than the default 3).
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as c:
        yield c


def test_from_array_reads_with_threads(tmp_path, rng):
    ref = rng.standard_normal((40, 30, 20)).astype(np.float32)
    with vds.create(tmp_path / "r.vds", axes=[("a", 40), ("b", 30), ("c", 20)],
                    variables={"v": {"dtype": "float32", "dims": ["a", "b", "c"], "chunks": [16, 16, 8]}}) as ds:
        ds["v"][...] = ref
    with vds.open(tmp_path / "r.vds") as ds:
        d = da.from_array(ds["v"], chunks=ds["v"].chunks)
        np.testing.assert_allclose(d.sum(axis=(1, 2)).compute(scheduler="threads"), ref.sum(axis=(1, 2)), rtol=1e-4)
        np.testing.assert_array_equal(vds.dask.from_variable(ds["v"])[::-3, 5].compute(), ref[::-3, 5])


def test_from_array_on_a_distributed_cluster(tmp_path, rng, client):
    ref = rng.integers(-1000, 1000, (30, 20), dtype=np.int32)
    with vds.create(tmp_path / "d.vds", axes=[("a", 30), ("b", 20)],
                    variables={"v": {"dtype": "int32", "dims": ["a", "b"], "chunks": [8, 8]}}) as ds:
        ds["v"][...] = ref
    with vds.open(tmp_path / "d.vds") as ds:
        d = da.from_array(ds["v"], chunks=(8, 8))  # pickled to the workers, reopened there
        np.testing.assert_array_equal(client.compute(d).result(), ref)


def test_store_from_worker_processes(tmp_path, rng, client):
    ref = rng.standard_normal((50, 40, 12))
    src = da.from_array(ref, chunks=(16, 20, 12))
    path = tmp_path / "s.vds"
    report = vds.dask.store(src, path, name="temp", dims=["x", "y", "z"], attrs={"from": "dask"})
    assert len(report["merged"]) == 8 and report["skipped"] == []
    with vds.open(path) as ds:
        assert ds["temp"].chunks == (16, 20, 12) and ds.attrs["from"] == "dask"
        np.testing.assert_array_equal(ds["temp"][...], ref)
        assert ds.verify()["ok"]
    report = vds.dask.store(src * 2, tmp_path / "f.vds", overwrite=True, fold=True)
    assert [n for n in os.listdir(tmp_path) if n.startswith("f.vds.")] == []
    with vds.open(tmp_path / "f.vds") as ds:
        np.testing.assert_array_equal(ds["data"][...], ref * 2)


class _DiesWhenWritten:
    """A block that kills its worker process when the write asks for its values, inside
    vds.dask's write task, after that task has created its fragment file. With a marker
    path it dies once (the first task to get there), recording the fragment files that
    existed then; without one, every time."""

    def __init__(self, block, marker):
        self.block, self.marker, self.shape, self.dtype = block, marker, block.shape, block.dtype

    def __array__(self, dtype=None, copy=None):
        if self.marker is not None:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return np.asarray(self.block, dtype)
            folder, base = os.path.split(self.marker)
            os.write(fd, "\n".join(n for n in os.listdir(folder) if n.startswith(base.split("-")[0] + ".")).encode())
            os.close(fd)
        os._exit(1)


def test_a_killed_worker_leaves_no_torn_container(tmp_path, rng, client):
    ref = rng.standard_normal((48, 16)).astype(np.float32)
    src = da.from_array(ref, chunks=(8, 16))
    meta = np.array((), src.dtype)
    # Killed once, mid-write: Dask reruns the task elsewhere, into a fresh fragment; the result is whole.
    path = tmp_path / "k.vds"
    marker = tmp_path / "k.vds-marker"
    report = vds.dask.store(src.map_blocks(_DiesWhenWritten, str(marker), meta=meta), path)
    assert len(report["merged"]) == 6
    with vds.open(path) as ds:
        np.testing.assert_array_equal(ds["data"][...], ref)
        assert ds.verify()["ok"]
    # The worker died holding an unsealed fragment of its own, which no merge adopted and which is gone.
    seen = set(marker.read_text().split())
    killed = seen - set(report["merged"])
    assert len(killed) >= 1 and not any((tmp_path / n).exists() for n in killed)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("k.vds.")) == sorted(report["merged"])
    # Killed every time: the store fails, the container stays at its first commit (all fill),
    # and the fragments the dead attempts left are removed. One block, so that no other task
    # is still running (and making a fragment) when the failed store cleans up.
    path = tmp_path / "dead.vds"
    whole = da.from_array(ref, chunks=ref.shape)
    with pytest.raises(Exception):
        vds.dask.store(whole.map_blocks(_DiesWhenWritten, None, meta=meta), path)
    with vds.open(path) as ds:
        assert ds.commit_sequence == 1 and ds.verify()["ok"]
        np.testing.assert_array_equal(ds["data"][...], np.zeros_like(ref))
    assert [n for n in os.listdir(tmp_path) if n.startswith("dead.vds.")] == []


def test_a_failure_after_the_merge_keeps_the_merged_fragments(tmp_path, rng, monkeypatch):
    """The fragments a merge adopted are the container's slots: when the store fails after the merge
    committed (here the fold's compaction), its cleanup leaves them, and the container reads whole."""
    ref = rng.standard_normal((32, 16)).astype(np.float32)
    path = tmp_path / "m.vds"

    def fail(self, mode="keep"):
        raise OSError("no space left on device (injected)")

    # The merge task runs in the client's process when computed with the synchronous scheduler.
    monkeypatch.setattr(vds.Dataset, "compact", fail)
    import dask

    with dask.config.set(scheduler="synchronous"), pytest.raises(OSError, match="injected"):
        vds.dask.store(da.from_array(ref, chunks=(8, 16)), path, fold=True)
    with vds.open(path) as ds:
        assert ds.commit_sequence == 2 and ds.verify()["ok"]
        np.testing.assert_array_equal(ds["data"][...], ref)
        assert len(ds.descriptor()["slots"]) == 4


def test_a_store_over_another_leaves_the_fragments_a_copy_of_the_old_container_uses(tmp_path, rng):
    """overwrite=True replaces the container; the fragment files it used stay, since a copy of it
    beside it (a backup) uses them too, and reads whole."""
    import dask

    ref = rng.standard_normal((32, 16)).astype(np.float32)
    path = tmp_path / "o.vds"
    with dask.config.set(scheduler="synchronous"):
        vds.dask.store(da.from_array(ref, chunks=(8, 16)), path)
        shutil.copy(path, tmp_path / "backup.vds")
        vds.dask.store(da.from_array(ref * 2, chunks=(16, 16)), path, overwrite=True)
    with vds.open(path) as ds:
        np.testing.assert_array_equal(ds["data"][...], ref * 2)
    with vds.open(tmp_path / "backup.vds") as ds:
        np.testing.assert_array_equal(ds["data"][...], ref)
        assert ds.verify()["ok"]


def test_a_rerun_merge_after_fold_finds_its_work_done(tmp_path, rng):
    """The merge task runs again when its worker is lost after it committed. With fold=True the first
    run folded the fragments into the container and removed them (or some of them, if it died while
    removing): the rerun reports them merged and folded before, removes what is left, and the container
    reads whole. Before any merge, a missing fragment is still an error, and the container stays at
    its creating commit."""
    from vds.dask import _merge, _write_block

    ref = rng.standard_normal((32, 16)).astype(np.float32)
    for leave_one in (False, True):
        path = os.path.join(tmp_path, f"r{int(leave_one)}.vds")
        vds.create(path, [("a", 32), ("b", 16)], {"data": {"dtype": "float32", "dims": ["a", "b"], "chunks": [8, 16]}}).close()
        prefix = f"{os.path.basename(path)}.store"
        names = [_write_block(ref[i:i + 8], path, "data", (i, 0), prefix) for i in range(0, 32, 8)]
        kept = os.path.join(tmp_path, "kept-" + names[-1])
        if leave_one:
            os.link(os.path.join(tmp_path, names[-1]), kept)  # as if the first run died before removing it
        first = _merge(path, names, prefix, True)
        assert sorted(first["merged"]) == sorted(names) and first["chunks"] == 4
        if leave_one:
            os.rename(kept, os.path.join(tmp_path, names[-1]))
        again = _merge(path, names, prefix, True)
        assert again["merged"] == [] and [r for _, r in again["skipped"]] == ["merged and folded before"] * 4
        assert not [n for n in os.listdir(tmp_path) if n.startswith(prefix)]
        with vds.open(path) as ds:
            assert ds.commit_sequence == 2 and not ds.descriptor().get("slots") and ds.verify()["ok"]
            np.testing.assert_array_equal(ds["data"][...], ref)

    path = os.path.join(tmp_path, "lost.vds")
    vds.create(path, [("a", 32)], {"data": {"dtype": "float32", "dims": ["a"], "chunks": [8]}}).close()
    names = [_write_block(ref[i:i + 8, 0], path, "data", (i,), "lost.vds.store") for i in range(0, 32, 8)]
    os.remove(os.path.join(tmp_path, names[0]))
    with pytest.raises(vds.NotFoundError, match=names[0]):
        _merge(path, names, "lost.vds.store", True)
    with vds.open(path) as ds:
        assert ds.commit_sequence == 1


def test_store_refuses_unknown_chunk_sizes_and_a_string_of_dims(tmp_path):
    """A Dask array whose chunk sizes are unknown (after boolean indexing) cannot be laid out in
    chunks: the store says so before it creates anything."""
    x = da.arange(10, chunks=5)
    y = x[x > 3]
    with pytest.raises(vds.InvalidArgumentError, match="compute_chunk_sizes"):
        vds.dask.store(y, tmp_path / "u.vds")
    assert not (tmp_path / "u.vds").exists()
    vds.dask.store(y.compute_chunk_sizes(), tmp_path / "u.vds")
    with vds.open(tmp_path / "u.vds") as ds:
        np.testing.assert_array_equal(ds["data"][...], np.arange(4, 10))
    # Axis names are a sequence of names: a string is not split into letters.
    with pytest.raises(vds.InvalidArgumentError, match="dims is a sequence of names, not 'ab'"):
        vds.dask.store(da.ones((2, 2), chunks=2), tmp_path / "d.vds", dims="ab")
    assert not (tmp_path / "d.vds").exists()
