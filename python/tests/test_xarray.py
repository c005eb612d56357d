"""xarray: the vds backend (lazy, coordinates, units, attributes, preferred
chunks) and vds.from_xarray on netCDF and HDF5 files written here by
netCDF4 and h5py, compared value for value with what xarray reads from them."""

import os
import threading

import numpy as np
import pytest

import vds

xr = pytest.importorskip("xarray")


def make_vds(tmp_path, rng):
    ref = rng.standard_normal((20, 12, 10)).astype(np.float32)
    path = tmp_path / "x.vds"
    with vds.create(path, axes=[("inline", 20), {"name": "crossline", "size": 12, "unit": "m", "first": 100.0, "last": 155.0},
                                {"name": "time", "size": 10, "unit": "ms", "first": 0.0, "last": 36.0}],
                    variables={"amp": {"dtype": "float32", "dims": ["inline", "crossline", "time"], "chunks": [8, 4, 5],
                                       "unit": "Pa", "attrs": {"long_name": "amplitude"}},
                               "depth": {"dtype": "int32", "dims": ["inline", "crossline"], "chunks": [10, 6]}},
                    attrs={"survey": "x"}) as ds:
        ds["amp"][...] = ref
        ds["depth"][...] = np.arange(240, dtype=np.int32).reshape(20, 12)
    return path, ref


def test_open_dataset_engine_vds(tmp_path, rng):
    path, ref = make_vds(tmp_path, rng)
    with xr.open_dataset(path, engine="vds") as x:
        assert x.attrs == {"survey": "x"}
        amp = x["amp"]
        assert amp.dims == ("inline", "crossline", "time") and amp.attrs["units"] == "Pa"
        assert amp.attrs["long_name"] == "amplitude"
        assert amp.encoding["preferred_chunks"] == {"inline": 8, "crossline": 4, "time": 5}
        assert not amp.variable._in_memory  # lazy: nothing read at open
        np.testing.assert_allclose(x["crossline"].values, np.linspace(100.0, 155.0, 12))
        assert x["time"].attrs["units"] == "ms"
        np.testing.assert_array_equal(amp.isel(inline=3, time=slice(None, None, -2)).values, ref[3, :, ::-2])
        np.testing.assert_array_equal(amp.sel(crossline=105.0).values, ref[:, 1, :])
        np.testing.assert_array_equal(x["depth"].values, np.arange(240).reshape(20, 12))
    # Guessed from the file's first line, whatever its name.
    other = tmp_path / "renamed.dat"
    other.write_bytes(path.read_bytes())
    with xr.open_dataset(other) as x:
        np.testing.assert_array_equal(x["amp"].values, ref)


def test_guessing_looks_only_into_regular_files(tmp_path, rng):
    """The backend guesses a container from its first line, and does not block on what is not a
    regular file: a FIFO no one writes to is not a container, answered at once."""
    from vds.xarray_backend import VdsBackendEntrypoint

    path, _ = make_vds(tmp_path, rng)
    other = tmp_path / "renamed.dat"
    other.write_bytes(path.read_bytes())
    (tmp_path / "text.dat").write_bytes(b"VDS is not this\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    answers = {}
    guess = threading.Thread(target=lambda: answers.update(
        {name: VdsBackendEntrypoint().guess_can_open(tmp_path / name) for name in ["renamed.dat", "text.dat", "fifo", "absent"]}),
        daemon=True)
    guess.start()
    guess.join(60)
    assert not guess.is_alive(), "guess_can_open blocked"
    assert answers == {"renamed.dat": True, "text.dat": False, "fifo": False, "absent": False}


def test_open_dataset_holds_coordinates_and_reads_to_the_memory_limit(tmp_path, rng):
    """The axes' coordinates are made at opening: an axis of 2**28 samples (2 GiB of coordinates, in a
    file of a few KiB) raises OutOfMemoryError naming it rather than allocating them; ``memory_limit``
    (as vds.open's) sets the limit, for the coordinates and for reads."""
    path = tmp_path / "long.vds"
    vds.create(path, [("x", 2**28), ("y", 3)], {"v": {"dtype": "uint8", "dims": ["x", "y"], "chunks": [1 << 16, 3]}}).close()
    with pytest.raises(vds.OutOfMemoryError, match="coordinates of axis 'x' .* exceed the memory limit of 1073741824 bytes"):
        xr.open_dataset(path, engine="vds")
    with pytest.raises(vds.OutOfMemoryError, match="coordinates of axis 'x' .* exceed the memory limit of 1048576 bytes"):
        xr.open_dataset(path, engine="vds", memory_limit=1 << 20)
    square = tmp_path / "square.vds"
    ref = rng.integers(0, 255, (300, 300), dtype=np.uint8)
    with vds.create(square, [("a", 300), ("b", 300)], {"v": {"dtype": "uint8", "dims": ["a", "b"], "chunks": [50, 300]}}) as ds:
        ds["v"][...] = ref
    with xr.open_dataset(square, engine="vds", memory_limit=64 << 10) as x:
        np.testing.assert_array_equal(x["v"][:100].values, ref[:100])
        with pytest.raises(vds.OutOfMemoryError, match="memory limit"):
            x["v"].values  # 90000 bytes


def test_chunks_align_with_storage(tmp_path, rng):
    pytest.importorskip("dask")
    path, ref = make_vds(tmp_path, rng)
    with xr.open_dataset(path, engine="vds", chunks={}) as x:
        assert x["amp"].chunks == ((8, 8, 4), (4, 4, 4), (5, 5))
        np.testing.assert_allclose(x["amp"].mean("time").values, ref.mean(axis=2), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(x["amp"][2:9, ::-1].values, ref[2:9, ::-1])


def compare(src, got):
    """Two xarray Datasets hold the same variables, values, coordinates and attributes."""
    assert set(src.data_vars) == set(got.data_vars)
    for name in src.data_vars:
        a, b = src[name], got[name]
        assert a.dims == b.dims and a.dtype == b.dtype, name
        np.testing.assert_array_equal(a.values, b.values, err_msg=name)
        for k, v in a.attrs.items():
            np.testing.assert_array_equal(np.asarray(b.attrs[k]), np.asarray(v), err_msg=f"{name}.{k}")
    for name in src.coords:
        if src[name].dtype.kind == "f":
            np.testing.assert_allclose(src[name].values, got[name].values, rtol=1e-12, err_msg=name)
        else:
            np.testing.assert_array_equal(src[name].values, got[name].values, err_msg=name)
    for k, v in src.attrs.items():
        np.testing.assert_array_equal(np.asarray(got.attrs[k]), np.asarray(v), err_msg=k)


def test_from_xarray_netcdf(tmp_path, rng):
    netCDF4 = pytest.importorskip("netCDF4")
    nc = tmp_path / "in.nc"
    temp = rng.standard_normal((6, 9, 11)).astype(np.float32)
    with netCDF4.Dataset(nc, "w") as f:
        f.title = "synthetic"
        f.version = np.int32(3)
        for d, n in zip(("time", "lat", "lon"), temp.shape):
            f.createDimension(d, n)
        t = f.createVariable("time", "i4", ("time",))
        t[:] = [0, 6, 12, 24, 48, 96]  # uneven: kept as a variable, and datetimes once xarray decodes them
        t.units = "hours since 2000-01-01 00:00:00"
        la = f.createVariable("lat", "f8", ("lat",))
        la[:] = np.linspace(-40.0, 40.0, 9)
        la.units = "degrees_north"
        lo = f.createVariable("lon", "f8", ("lon",))
        lo[:] = np.linspace(0.0, 50.0, 11)
        v = f.createVariable("temp", "f4", ("time", "lat", "lon"), chunksizes=(1, 9, 11))
        v[:] = temp
        v.units = "K"
        v.scale_note = "raw"
        c = f.createVariable("count", "u2", ("lat", "lon"))
        c[:] = rng.integers(0, 60000, (9, 11))
    with xr.open_dataset(nc) as src:
        assert src["time"].dtype.kind == "M"
        out = vds.from_xarray(src, tmp_path / "nc.vds", overwrite=True)
        with vds.open(out) as ds:
            assert ds["temp"].chunks == (1, 9, 11) and ds["temp"].unit == "K"
            assert ds.axes["lat"].unit == "degrees_north"
        with xr.open_dataset(out, engine="vds") as got:
            compare(src, got)
            assert got["time"].dtype == src["time"].dtype
        with xr.open_dataset(out, engine="vds", decode_times=False) as raw:
            assert raw["time"].dtype == np.int64 and " since " in raw["time"].attrs["units"]


def test_from_xarray_hdf5(tmp_path, rng):
    h5py = pytest.importorskip("h5py")
    h5 = tmp_path / "in.h5"
    depth = rng.standard_normal((16, 12)).astype(np.float64)
    mask = rng.integers(0, 2, (16, 12)).astype(bool)
    with h5py.File(h5, "w") as f:
        f.attrs["source"] = "h5py"
        y = f.create_dataset("y", data=np.linspace(0.0, 15.0, 16))
        x = f.create_dataset("x", data=np.arange(12, dtype=np.int64) * 25)
        y.make_scale("y")
        x.make_scale("x")
        d = f.create_dataset("depth", data=depth, chunks=(8, 6))
        d.attrs["units"] = "m"
        m = f.create_dataset("valid", data=mask.astype(np.int8))
        for ds_ in (d, m):
            ds_.dims[0].attach_scale(y)
            ds_.dims[1].attach_scale(x)
    with xr.open_dataset(h5, engine="netcdf4") as src:
        out = vds.from_xarray(src, tmp_path / "h5.vds", chunks={"y": 4}, codec=("deflate", 6), overwrite=True)
        with vds.open(out) as ds:
            assert ds["depth"].chunks == (4, 12) and ds["depth"].codec["id"] == "deflate"
        with xr.open_dataset(out, engine="vds") as got:
            compare(src, got)
            assert got["x"].dtype == np.int64


def test_datetimes_and_timedeltas_round_trip(tmp_path, rng):
    stamps = np.datetime64("2021-03-04T05:06") + rng.integers(0, 10**6, 12).astype("timedelta64[m]")
    src = xr.Dataset({"seen": ("n", stamps), "lasted": ("n", rng.integers(0, 10**5, 12).astype("timedelta64[s]")),
                      "value": ("n", rng.standard_normal(12))}, attrs={"k": 1})
    vds.from_xarray(src, tmp_path / "t.vds")
    with xr.open_dataset(tmp_path / "t.vds", engine="vds") as got:
        for name in src.data_vars:
            assert got[name].dtype.kind == src[name].dtype.kind, name  # the resolution may differ, the values not
            np.testing.assert_array_equal(got[name].values, src[name].values, err_msg=name)


def test_from_xarray_refuses_what_it_cannot_store(tmp_path):
    x = xr.Dataset({"s": ("n", np.array(["a", "b"]))})
    with pytest.raises(TypeError, match="'s'"):
        vds.from_xarray(x, tmp_path / "bad.vds")
    # Refusals are the package's own errors (still TypeError and ValueError), naming what is wrong.
    with pytest.raises(vds.TypeMismatchError, match="complex128"):
        vds.from_xarray(xr.Dataset({"c": ("n", np.ones(2, np.complex128))}), tmp_path / "bad.vds")
    with pytest.raises(vds.InvalidArgumentError, match="scalar"):
        vds.from_xarray(xr.Dataset({"z": ((), 1.0), "v": ("n", np.ones(2))}), tmp_path / "bad.vds")
    for chunks in ["auto", {"n": "auto"}, {"n": None}, 0]:
        with pytest.raises(vds.InvalidArgumentError, match="chunks.* (must be an integer|is a positive chunk size)"):
            vds.from_xarray(xr.Dataset({"v": ("n", np.ones(2))}), tmp_path / "bad.vds", chunks=chunks)
    for what in [5, {"v": np.ones(2)}, np.ones(2)]:
        with pytest.raises(vds.InvalidArgumentError, match="writes an xarray Dataset or DataArray, not"):
            vds.from_xarray(what, tmp_path / "bad.vds")
    vds.from_xarray(xr.Dataset({"v": ("n", np.ones(8))}), tmp_path / "ok.vds", chunks=np.int64(4))
    with vds.open(tmp_path / "ok.vds") as ds:
        assert ds["v"].chunks == (4,)
    assert not (tmp_path / "bad.vds").exists()


def test_from_xarray_refuses_two_variables_a_container_would_name_alike(tmp_path):
    """A container's names are strings: variables 1 and "1" of an xarray Dataset would be one."""
    both = xr.Dataset({1: ("x", [10.0, 20.0, 30.0]), "1": ("x", [1.0, 2.0, 3.0])})
    with pytest.raises(vds.InvalidArgumentError, match="variables 1 and '1' would both be named '1'"):
        vds.from_xarray(both, tmp_path / "c.vds")
    assert not (tmp_path / "c.vds").exists()


def test_from_xarray_keeps_a_coordinate_of_two_dimensions_named_like_one(tmp_path, rng):
    """xarray lets a coordinate of two dimensions take the name of one of them: it is kept as a
    variable, its axis gets the default coordinates, and both read back."""
    grid = rng.standard_normal((2, 3))
    values = rng.standard_normal((2, 3)).astype(np.float32)
    x = xr.Dataset({"v": (("x", "y"), values)}, coords={"x": (("x", "y"), grid)})
    vds.from_xarray(x, tmp_path / "c.vds")
    with vds.open(tmp_path / "c.vds") as ds:
        np.testing.assert_array_equal(ds["x"][...], grid)
        np.testing.assert_array_equal(ds["v"][...], values)
        assert ds["v"].axes["x"].size == 2
    with xr.open_dataset(tmp_path / "c.vds", engine="vds") as back:
        assert "x" in back.coords and back["x"].dims == ("x", "y") and list(back.data_vars) == ["v"]
        np.testing.assert_array_equal(back["x"].values, grid)
        np.testing.assert_array_equal(back["v"].values, values)


def test_from_xarray_non_finite_coordinates_and_attributes(tmp_path):
    """A coordinate with a NaN or infinite end is kept as a variable (an axis's first and last are
    finite); NaNs and infinities in attributes, alone or in lists, become the strings JSON allows."""
    x = xr.Dataset({"v": (("t", "n"), np.ones((1, 3), np.float32), {"valid_range": np.array([np.nan, 1.0]), "fill": np.inf})},
                   coords={"t": ("t", [np.nan]), "n": ("n", [0.0, 1.0, np.inf])})
    vds.from_xarray(x, tmp_path / "nf.vds")
    with vds.open(tmp_path / "nf.vds") as ds:
        assert np.isnan(ds["t"][...]).all()
        np.testing.assert_array_equal(ds["n"][...], [0.0, 1.0, np.inf])
        assert ds["v"].attrs["valid_range"] == ["nan", 1.0] and ds["v"].attrs["fill"] == "inf"
