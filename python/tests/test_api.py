"""The vds package's API against NumPy references: metadata, attributes,
commits, levels of detail, slices, masks, quantization, growth, maintenance,
fragments, pickling, and the exception raised for each kind of error."""

import json
import os
import pickle
import re
import warnings

import numpy as np
import pytest

import vds
from conftest import DTYPES, reference


def volume(tmp_path, rng, name="vol.vds", **var):
    """A 3-D float32 volume written whole and committed; returns (dataset open r+, reference)."""
    spec = {"dtype": "float32", "dims": ["inline", "crossline", "time"], "chunks": [8, 8, 8], "codec": "deflate"}
    spec.update(var)
    ds = vds.create(tmp_path / name,
                    axes=[("inline", 20), {"name": "crossline", "size": 12, "unit": "m", "first": 100.0, "last": 155.0},
                          {"name": "time", "size": 10, "unit": "ms", "first": 0.0, "last": 36.0}],
                    variables={"amp": spec}, attrs={"survey": "test", "n": 3}, overwrite=True)
    ref = rng.standard_normal((20, 12, 10)).astype(np.float32)
    ds["amp"][...] = ref
    ds.commit()
    return ds, ref


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips(tmp_path, rng, dtype):
    ref = reference(rng, (13, 7, 5), dtype)
    path = tmp_path / f"{dtype}.vds"
    with vds.create(path, axes=[("a", 13), ("b", 7), ("c", 5)],
                    variables={"v": {"dtype": dtype, "dims": ["a", "b", "c"], "chunks": [4, 3, 2], "codec": ("zstd", 3)}}) as ds:
        ds["v"][...] = np.asfortranarray(ref) if dtype in ("int16", "float64") else ref
    with open(path, "rb") as f:
        assert f.readline().startswith(b"VDS ")
        assert json.loads(f.readline())["variables"][0]["codec"]["id"] == "zstd"
    with vds.open(path) as ds:
        v = ds["v"]
        assert list(ds) == ["v"] and v.dtype == ref.dtype and v.shape == ref.shape and v.chunks == (4, 3, 2)
        np.testing.assert_array_equal(np.asarray(v), ref)
        f = v.read(order="F")
        assert f.flags.f_contiguous
        np.testing.assert_array_equal(f, ref)
        np.testing.assert_array_equal(v.read((slice(1, 13, 3), slice(None), 2)), ref[1:13:3, :, 2])


def test_metadata(tmp_path, rng):
    ds, ref = volume(tmp_path, rng, fill_value=-1.5, unit="Pa", attrs={"kind": "seismic"})
    v = ds["amp"]
    assert v.name == "amp" and v.unit == "Pa" and v.ndim == 3 and v.size == ref.size and v.nbytes == ref.nbytes
    assert v.dims == ("inline", "crossline", "time") and len(v) == 20
    assert v.fill_value == np.float32(-1.5) and v.fill_value.dtype == np.float32
    assert v.codec == {"id": "deflate", "level": 6, "shuffle": True}
    axes = v.axes
    assert list(axes) == ["inline", "crossline", "time"]
    np.testing.assert_allclose(axes["crossline"].values, np.linspace(100.0, 155.0, 12))
    np.testing.assert_allclose(axes["time"].values, np.arange(10) * 4.0)
    assert axes["time"].unit == "ms" and axes["inline"].size == 20 and not axes["inline"].growable
    assert dict(v.attrs) == {"kind": "seismic"} and dict(ds.attrs) == {"survey": "test", "n": 3}
    assert "amp" in ds and len(ds) == 1 and "nope" not in ds
    with pytest.raises(KeyError, match="nope"):
        ds["nope"]
    assert "amp" in repr(ds) and "float32" in repr(v)
    assert ds.descriptor()["variables"][0]["name"] == "amp"
    ds.close()


def test_options_left_out_or_given_as_none_are_the_librarys_defaults(tmp_path):
    """What create sends the extension holds only the options given: the rest, and those given
    as None, False or empty, must come out as the library's defaults, the same file byte for byte."""
    value = np.arange(24, dtype=np.int16).reshape(4, 6)
    spelled = {"dtype": np.int16, "dims": ["y", "x"], "chunks": None, "codec": None, "fill_value": None,
               "unit": "", "attrs": {}, "lods": 0, "partitionings": [], "no_value": None, "quantization": None,
               "margin": None, "mask": False, "blocks": None}
    axes = [{"name": "y", "size": 4, "unit": None, "first": None, "last": None, "growable": False, "max_size": None},
            ("x", 6)]
    for name, ax, var in [("short.vds", [("y", 4), ("x", 6)], {"dtype": "int16", "dims": ["y", "x"]}),
                          ("spelled.vds", axes, spelled),
                          ("none.vds", [("y", 4), ("x", 6)], {"dtype": "int16", "dims": ["y", "x"], "codec": "none"})]:
        with vds.create(tmp_path / name, axes=ax, variables={"v": var}, attrs=None, slots=np.array([], dtype=str)) as ds:
            ds["v"][...] = value
    for name in ("spelled.vds", "none.vds"):
        assert (tmp_path / "short.vds").read_bytes() == (tmp_path / name).read_bytes(), name
    with vds.open(tmp_path / "short.vds") as ds:
        v = ds["v"]
        assert v.codec["id"] == "none" and v.fill_value == 0 and not v.axes["y"].growable
        np.testing.assert_array_equal(v[...], value)
    # A maximum size alone makes an axis growable, as growable=True does.
    for name, y in [("max.vds", {"name": "y", "size": 4, "max_size": 10}),
                    ("grow.vds", {"name": "y", "size": 4, "growable": True, "max_size": 10})]:
        with vds.create(tmp_path / name, axes=[y, ("x", 6)], variables={"v": {"dtype": "int16", "dims": ["y", "x"]}}) as ds:
            assert ds.axes["y"].growable and ds.axes["y"].max_size == 10
    assert (tmp_path / "max.vds").read_bytes() == (tmp_path / "grow.vds").read_bytes()


def test_attributes_are_committed_with_the_data(tmp_path, rng):
    ds, _ = volume(tmp_path, rng)
    ds.attrs["list"] = [1, 2, 3]
    ds.attrs["np"] = np.float64(2.5)
    ds["amp"].attrs["scale"] = np.arange(3)
    del ds.attrs["n"]
    ds.rollback()
    assert dict(ds.attrs) == {"survey": "test", "n": 3}
    ds.attrs["list"] = [1, 2, 3]
    ds["amp"].attrs["scale"] = np.arange(3)
    with pytest.raises(vds.InvalidArgumentError):
        ds.attrs["bad"] = float("nan")
    with pytest.raises(vds.InvalidArgumentError):
        ds.attrs["bad"] = object()
    ds.close()
    with vds.open(tmp_path / "vol.vds") as r:
        assert dict(r.attrs) == {"survey": "test", "n": 3, "list": [1, 2, 3]}
        assert r["amp"].attrs["scale"] == [0, 1, 2]


def test_commit_rollback_and_context_manager(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    seq = ds.commit_sequence
    ds["amp"][0] = 7.0
    assert (ds["amp"][0] == 7.0).all()  # visible to this handle before the commit
    ds.rollback()
    np.testing.assert_array_equal(ds["amp"][...], ref)
    ds["amp"][1, ::2] = 3.0
    ref[1, ::2] = 3.0
    ds.commit()
    assert ds.commit_sequence == seq + 1
    ds.close()
    with pytest.raises(RuntimeError):
        with vds.open(tmp_path / "vol.vds", "r+") as ds:
            ds["amp"][...] = 0.0
            raise RuntimeError("boom")
    assert ds.closed
    with vds.open(tmp_path / "vol.vds") as ds:
        np.testing.assert_array_equal(ds["amp"][...], ref)  # the exception rolled back


def test_levels_of_detail_and_slices(tmp_path, rng):
    ds, ref = volume(tmp_path, rng, lods=3, partitionings=[[1, 12, 10]])
    v = ds["amp"]
    assert v.levels == 3 and v.partitionings == [(8, 8, 8), (1, 12, 10)]
    # Level 1: the mean of up to 2 x 2 x 2 samples.
    l1 = v.lod(1)
    assert l1.shape == (10, 6, 5)
    want = ref.reshape(10, 2, 6, 2, 5, 2).mean(axis=(1, 3, 5))
    np.testing.assert_allclose(l1[...], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(l1[3, ::-1], want[3, ::-1], rtol=1e-5, atol=1e-6)
    assert v.lod(2).shape == (5, 3, 3)
    with pytest.raises(vds.OutOfRangeError):
        v.lod(3)
    with pytest.raises(vds.ReadOnlyError):
        l1[0] = 1.0
    np.testing.assert_array_equal(v.slice("inline", 4), ref[4])
    np.testing.assert_array_equal(v.slice(2, -1), ref[:, :, -1])
    np.testing.assert_allclose(v.slice("crossline", 2, lod=1), want[:, 2, :], rtol=1e-5, atol=1e-6)
    with pytest.raises(vds.InvalidArgumentError, match="two axes free"):
        v.slice(["inline", "time"], [0, 0])
    # The full check recomputes every level and the tiles from level 0.
    report = ds.verify(full=True)
    assert report["ok"] and report["problems"] == [], report
    ds.close()


def test_blocks_inside_chunks(tmp_path, rng):
    ds, ref = volume(tmp_path, rng, chunks=[16, 12, 10], blocks=[4, 6, 10])
    assert ds["amp"].blocks == (4, 6, 10)
    ds.close()
    with vds.open(tmp_path / "vol.vds") as ds:
        amp = ds["amp"]
        # Traces, small boxes and strided reads, each against NumPy's indexing of the reference.
        for sel in [(3, 7, slice(None)), (slice(5, 9), slice(2, 5), slice(1, 4)), (slice(None, None, 3), 4, slice(None, None, -2)), (-1, -1, -1)]:
            np.testing.assert_array_equal(amp[sel], ref[sel])
        np.testing.assert_array_equal(np.asarray(amp), ref)
        assert ds.verify(full=True)["ok"]
    with pytest.raises(vds.InvalidArgumentError, match="1 to its chunk extent"):
        volume(tmp_path, rng, name="bad.vds", blocks=[0, 8, 8])


def test_missing_value_mask(tmp_path, rng):
    ds, ref = volume(tmp_path, rng, mask=True)
    v = ds["amp"]
    assert v.has_mask and not v.mask[...].any()
    missing = rng.random(ref.shape) < 0.3
    v.write((slice(None),) * 3, ref, missing=missing)
    np.testing.assert_array_equal(v.mask[...], missing)
    np.testing.assert_array_equal(v.mask[2:9:3, ::-1, 4], missing[2:9:3, ::-1, 4])
    m = np.ma.masked_array(ref[0] + 1, mask=~missing[0])
    v[0] = m
    ds.commit()
    np.testing.assert_array_equal(v.mask[0], ~missing[0])
    np.testing.assert_array_equal(v[0], ref[0] + 1)
    ds.close()


def test_quantized_values_and_stored_integers(tmp_path, rng):
    ds, ref = volume(tmp_path, rng, quantization=("uint8", -4.0, 4.0))
    v = ds["amp"]
    assert v.quantization == {"storage": "uint8", "min": -4.0, "max": 4.0}
    step = 8.0 / 255
    want_ints = np.clip(np.round((ref.astype(np.float64) + 4.0) / step), 0, 255).astype(np.uint8)
    got_ints = v.stored[...]
    assert got_ints.dtype == np.uint8
    np.testing.assert_array_equal(got_ints, want_ints)
    np.testing.assert_allclose(v[...], -4.0 + want_ints * step, atol=1e-5)
    assert np.abs(v[...] - np.clip(ref, -4, 4)).max() <= step / 2 + 1e-5
    v.stored[0, 0] = np.arange(10, dtype=np.uint8)
    np.testing.assert_array_equal(v.stored[0, 0], np.arange(10))
    ds.close()
    plain, _ = volume(tmp_path, rng, name="plain.vds")
    with pytest.raises(vds.InvalidArgumentError, match="not quantized"):
        plain["amp"].stored
    plain.close()


def test_growth_resize_and_append(tmp_path, rng):
    path = tmp_path / "grow.vds"
    with vds.create(path, axes=[{"name": "t", "size": 1, "growable": True}, ("s", 3)],
                    variables={"v": {"dtype": "int32", "dims": ["t", "s"], "chunks": [2, 3]}}) as ds:
        v = ds["v"]
        v[...] = [[1, 2, 3]]
        assert v.append(np.arange(6, dtype=np.int32).reshape(2, 3), axis="t") == 1
        assert v.append([9, 9, 9], axis=0) == 3
        assert v.shape == (4, 3)
    with vds.open(path, "r+") as ds:
        v = ds["v"]
        np.testing.assert_array_equal(v[...], [[1, 2, 3], [0, 1, 2], [3, 4, 5], [9, 9, 9]])
        v.resize(2, axis="t")
        assert v.shape == (2, 3)
        v.resize((5, 3))
        np.testing.assert_array_equal(v[2:], np.zeros((3, 3), np.int32))
        with pytest.raises(vds.InvalidArgumentError, match="growable"):
            v.resize(4, axis="s")
    with vds.open(path) as ds:
        assert ds["v"].shape == (5, 3) and ds.axes["t"].growable
        whole = ds["v"][...]
        assert whole.flags.c_contiguous and whole.flags.writeable and whole.flags.owndata
        np.testing.assert_array_equal(whole, [[1, 2, 3], [0, 1, 2]] + [[0, 0, 0]] * 3)


def test_append_takes_the_variables_shape_along_the_other_axes(tmp_path):
    """append writes data of the variable's shape but along the appended axis (or without that axis:
    one sample); another shape is refused, not reshaped, and leaves the variable as it was. No samples
    append nothing, after the checks any append makes."""
    path = tmp_path / "append.vds"
    with vds.create(path, [{"name": "t", "size": 1, "growable": True}, ("x", 3)],
                    {"g": {"dtype": "float32", "dims": ["t", "x"], "lods": 2, "lod_axes": ["t"]}}) as ds:
        g = ds["g"]
        g[...] = [[1, 2, 3]]
        for data, given in [(np.array([[1], [2], [3]], np.float32), "(3, 1)"),  # as many values as a row
                            (np.ones((2, 4), np.float32), "(2, 4)"), (np.ones(6, np.float32), "(6,)"),
                            (np.float32(5), "()"), (np.ones((1, 1, 3), np.float32), "(1, 1, 3)")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(
                    f"append to variable 'g' of shape (1, 3) along axis 't': data of shape {given} is not of shape (n, 3)")):
                g.append(data)
        assert g.shape == (1, 3)
        assert g.append(np.array([[4, 5, 6], [7, 8, 9]], np.float32)) == 1
        assert g.append([10, 11, 12]) == 3  # one sample, without the axis
        # Nothing to append: nothing changes, the next sample's index is returned; a dtype it cannot take is refused.
        assert g.append(np.zeros((0, 3), np.float32), axis="t") == 4
        with pytest.raises(vds.TypeMismatchError, match="complex128"):
            g.append(np.zeros((0, 3), complex))
        assert g.shape == (4, 3)
        with pytest.raises(vds.InvalidArgumentError, match="not growable"):
            g.append(np.zeros((4, 0), np.float32), axis="x")
        # A level of detail is computed, not appended to.
        with pytest.raises(vds.ReadOnlyError, match="append to level 0"):
            g.lod(1).append(np.zeros((1, 3), np.float32))
        assert g.shape == (4, 3)
    with vds.open(path) as ds:
        np.testing.assert_array_equal(ds["g"][...], np.arange(1, 13, dtype=np.float32).reshape(4, 3))
        with pytest.raises(vds.ReadOnlyError):
            ds["g"].append(np.zeros((0, 3), np.float32))
    # Along a later axis, a (1, 2) array is not a (2, 1) one.
    with vds.create(tmp_path / "x.vds", [("t", 2), {"name": "x", "size": 1, "growable": True}],
                    {"g": {"dtype": "int32", "dims": ["t", "x"]}}) as ds:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape("along axis 'x': data of shape (1, 2) is not of shape (2, n)")):
            ds["g"].append(np.array([[1, 2]], np.int32), axis="x")
        assert ds["g"].append(np.array([[1], [2]], np.int32), axis=-1) == 1
        assert ds["g"].append([3, 4], axis="x") == 2
        np.testing.assert_array_equal(ds["g"][...], [[0, 1, 3], [0, 2, 4]])


def test_resize_takes_integer_sizes_and_axis_names(tmp_path):
    """Sizes given to resize are integers (NumPy's too): a float, a string or a bool is refused, not
    rounded, and nothing changes; so are axes not given by name, and sizes beyond 64 bits."""
    with vds.create(tmp_path / "r.vds", [{"name": "t", "size": 3, "growable": True}, ("x", 2)],
                    {"g": {"dtype": "int8", "dims": ["t", "x"], "lods": 2, "lod_axes": ["t"]}}) as ds:
        g = ds["g"]
        for call, message in [(lambda: g.resize(5.9, axis="t"), "the new size of axis 't' must be an integer, not 5.9"),
                              (lambda: g.resize("4", axis="t"), "the new size of axis 't' must be an integer, not '4'"),
                              (lambda: g.resize((5.0, 2)), "the new size of axis 't' must be an integer, not 5.0"),
                              (lambda: g.resize((5, "2")), "the new size of axis 'x' must be an integer, not '2'"),
                              (lambda: g.resize(-1, axis=0), "the new size of axis 't' is from 0 to 2**64 - 1, not -1"),
                              (lambda: ds.resize("t", True), "the new size of axis 't' must be an integer, not True"),
                              (lambda: ds.resize("t", 2**64), "the new size of axis 't' is from 0 to 2**64 - 1, not 18446744073709551616"),
                              (lambda: ds.resize(0, 5), "the axis to resize is a str, not 0")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
                call()
            assert g.shape == (3, 2)
        with pytest.raises(vds.ReadOnlyError, match="resize level 0"):
            g.lod(1).resize(1, axis="t")
        g.resize(np.int64(5), axis="t")
        ds.resize("t", np.uint8(4))
        assert g.shape == (4, 2)
    # A new shape that one axis cannot take changes no axis, not the ones before it.
    with vds.create(tmp_path / "two.vds", [{"name": "t", "size": 3, "growable": True}, {"name": "u", "size": 2, "max_size": 6},
                                          ("x", 2)], {"g": {"dtype": "int8", "dims": ["t", "u", "x"]}}) as ds:
        g = ds["g"]
        for shape, error, message in [((12, 2, 5), vds.InvalidArgumentError, 'axis "x" is not growable'),
                                      ((12, 0, 2), vds.InvalidArgumentError, 'axis "u" cannot have 0 samples'),
                                      ((12, 7, 2), vds.OutOfRangeError, 'axis "u" may grow to 6 samples, not 7')]:
            with pytest.raises(error, match=message):
                g.resize(shape)
            assert g.shape == (3, 2, 2)
        g.resize((12, 6, 2))
        assert g.shape == (12, 6, 2)


def test_dataset_options_are_checked_and_named(tmp_path):
    """The sizes, numbers and names given to a dataset's methods and to vds.open and vds.fragment are
    refused with an InvalidArgumentError naming the argument, not a bare TypeError or OverflowError."""
    path = tmp_path / "o.vds"
    vds.create(path, [("x", 4)], {"v": {"dtype": "int8", "dims": ["x"]}}).close()
    for mode in [["r"], None, b"r"]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(f"mode must be 'r' or 'r+', not {mode!r}")):
            vds.open(path, mode)
    with pytest.raises(vds.InvalidArgumentError, match="the name of a fragment is a str, not 3"):
        vds.fragment(path, 3)
    with vds.open(path, "r+") as ds:
        for call, message in [(lambda: ds.set_cache_size(-1), "the cache size is a number of bytes from 0 to 2**64 - 1, not -1"),
                              (lambda: ds.set_cache_size(1.5), "the cache size must be an integer, not 1.5"),
                              (lambda: ds.add_external_slot(3), "the name of an external slot is a str, not 3"),
                              (lambda: ds.set_slot_policy(3, [0]), "the slot policy is a str, not 3"),
                              (lambda: ds.set_slot_policy("fixed", 0), "slot policy 'fixed': slots is a sequence of slot numbers, not 0"),
                              (lambda: ds.set_slot_policy("fixed", [-1]), "slot policy 'fixed': a slot number is from 0 to 65535, not -1"),
                              (lambda: ds.set_slot_policy("fixed", [0.0]), "a slot number of slot policy 'fixed' must be an integer, not 0.0"),
                              (lambda: ds.set_slot_policy("by_size", [0], -1),
                               "max_bytes of slot policy 'by_size' is a number of bytes from 0 to 2**64 - 1, not -1")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
                call()
        ds.set_cache_size(np.int64(1 << 20))
        ds.set_slot_policy("fixed", (np.uint16(ds.add_external_slot("o.vdx")),))
        ds["v"][...] = np.arange(4, dtype=np.int8)
    with vds.open(path) as ds:
        np.testing.assert_array_equal(ds["v"][...], np.arange(4, dtype=np.int8))


def test_axis_coordinates_are_held_to_the_memory_limit(tmp_path):
    """An axis may have far more samples than any variable on it stores: its coordinates are made only
    within the dataset's memory limit (2**28 samples, 2 GiB of float64, in a file of a few KiB)."""
    path = tmp_path / "long.vds"
    with vds.create(path, [("x", 2**28), ("y", 3)], {"v": {"dtype": "uint8", "dims": ["x", "y"], "chunks": [1 << 16, 3]}},
                    memory_limit=1 << 20) as ds:
        with pytest.raises(vds.OutOfMemoryError, match=re.escape(
                "the coordinates of axis 'x' (268435456 samples, 2147483648 bytes) exceed the memory limit of 1048576 bytes")):
            ds.axes["x"].values
        np.testing.assert_array_equal(ds["v"].axes["y"].values, [0.0, 1.0, 2.0])
    assert path.stat().st_size < 64 << 10
    with vds.open(path) as ds:  # the default limit, 1 GiB
        with pytest.raises(vds.OutOfMemoryError, match="axis 'x'.* the memory limit of 1073741824 bytes"):
            ds["v"].axes["x"].values
    with vds.open(path, memory_limit=2**28 * 8 - 1) as ds, vds.open(path, memory_limit=1 << 20) as other:
        with pytest.raises(vds.OutOfMemoryError, match="axis 'x'"):
            ds.axes["x"].values
        assert ds.axes["x"] == other.axes["x"]  # the limit is not part of what an axis is


def test_verify_compact_and_slots(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    for i in range(5):
        ds["amp"][i] = i
        ref[i] = i
        ds.commit()
    report = ds.verify()
    assert report["ok"] and report["problems"] == [] and report["chunks"] > 0
    assert report["reclaimable_bytes"] > 0
    before, after = ds.compact()
    assert after < before and after == os.path.getsize(tmp_path / "vol.vds")
    slot = ds.add_external_slot("vol.vdx")
    ds.commit()
    ds.set_slot_policy("fixed", [slot])
    ds.compact("into_slots")
    assert os.path.getsize(tmp_path / "vol.vdx") > ref.nbytes // 10
    ds.compact("fold")
    ds.close()
    os.remove(tmp_path / "vol.vdx")
    with vds.open(tmp_path / "vol.vds") as ds:
        np.testing.assert_array_equal(ds["amp"][...], ref)
        assert ds.verify()["ok"]


def test_compact_cloud_optimized(tmp_path, rng):
    ref = rng.standard_normal((64, 64, 64)).astype(np.float32)
    with vds.create(tmp_path / "big.vds", axes=[("a", 64), ("b", 64), ("c", 64)],
                    variables={"v": {"dtype": "float32", "dims": ["a", "b", "c"], "chunks": [8, 8, 8]}}) as ds:
        ds["v"][...] = ref
    with vds.open(tmp_path / "big.vds", "r+") as ds:
        before, after = ds.compact("cloud")
        assert after <= before
        np.testing.assert_array_equal(ds["v"][...], ref)
    with vds.open(tmp_path / "big.vds") as ds:
        np.testing.assert_array_equal(ds["v"][3:40:5, 7, ::-3], ref[3:40:5, 7, ::-3])
        assert ds.verify()["ok"]
    with vds.open(tmp_path / "big.vds", "r+") as ds, pytest.raises(vds.InvalidArgumentError, match="\"cloud\""):
        ds.compact("clouds")


def test_fragments_merge(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    ds.close()
    path = tmp_path / "vol.vds"
    for w in range(2):
        with vds.fragment(path, f"part{w}") as f:
            assert f.mode == "fragment"
            f["amp"][w * 8:(w + 1) * 8] = -ref[w * 8:(w + 1) * 8]
    unsealed = vds.fragment(path, "part2")
    unsealed["amp"][16:] = 0.0
    unsealed.close(commit=False)  # a worker that died before sealing
    with vds.open(path, "r+") as ds:
        report = ds.merge_fragments(["part0", "part1", "part2"])
        assert report["merged"] == ["part0", "part1"] and [s[0] for s in report["skipped"]] == ["part2"]
        ref[:16] = -ref[:16]
        np.testing.assert_array_equal(ds["amp"][...], ref)
    with pytest.raises(vds.AlreadyExistsError):
        vds.fragment(path, "part0")


def test_pickling_reopens(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    ds.close()
    with vds.open(tmp_path / "vol.vds") as r:
        v2 = pickle.loads(pickle.dumps(r["amp"]))
        np.testing.assert_array_equal(v2[3], ref[3])
        assert v2.dataset.mode == "r" and v2.dataset is not r
        v2.dataset.close()
    # The options it was opened with come along.
    vds.create(tmp_path / "big.vds", axes=[("x", 10000)], variables={"v": {"dtype": "float64", "dims": ["x"]}}).close()
    with vds.open(tmp_path / "big.vds", memory_limit=30000) as r:
        again = pickle.loads(pickle.dumps(r))
        with pytest.raises(vds.OutOfMemoryError, match="limit of 30000 bytes"):
            again["v"][...]
        assert again["v"][:3000].shape == (3000,)
        again.close()
    ds, ref = volume(tmp_path, rng, name="lod.vds", lods=2)
    ds.close()
    with vds.open(tmp_path / "lod.vds") as r:
        l1 = pickle.loads(pickle.dumps(r["amp"].lod(1)))
        assert l1.shape == (10, 6, 5)
        np.testing.assert_array_equal(l1[...], r["amp"].lod(1)[...])
        l1.dataset.close()
    with vds.fragment(tmp_path / "lod.vds", "frag") as f:
        with pytest.raises(TypeError, match="fragment"):
            pickle.dumps(f)


def test_attributes_are_read_after_every_change_and_handed_out_as_copies(tmp_path):
    """Attributes are decoded once and kept until a change (set, delete, rollback): what is read
    is always the current state, and a list or dict read can be changed without changing them."""
    with vds.create(tmp_path / "a.vds", axes=[("x", 2)], variables={"v": {"dtype": "int8", "dims": ["x"]}}) as ds:
        ds.attrs["a"] = [1, 2]
        got = ds.attrs["a"]
        got.append(3)
        assert ds.attrs["a"] == [1, 2]
        ds.commit()
        ds.attrs["b"] = {"x": 1}
        ds.attrs["b"]["x"] = 2
        assert "b" in ds.attrs and dict(ds.attrs) == {"a": [1, 2], "b": {"x": 1}}
        ds.rollback()
        assert dict(ds.attrs) == {"a": [1, 2]} and "b" not in ds.attrs
        v = ds["v"]
        v.attrs["u"] = 1
        assert dict(v.attrs) == {"u": 1} and dict(ds.attrs) == {"a": [1, 2]}
        del ds.attrs["a"]
        assert len(ds.attrs) == 0 and list(ds.attrs) == [] and dict(v.attrs) == {"u": 1}
        for i in range(3000):  # many, each set checked by what it adds
            ds.attrs[f"k{i}"] = i
    with vds.open(tmp_path / "a.vds") as ds:
        assert dict(ds.attrs) == {f"k{i}": i for i in range(3000)} and dict(ds["v"].attrs) == {"u": 1}


def test_a_resize_of_several_axes_refused_for_one_changes_none(tmp_path):
    ds = vds.create(tmp_path / "r.vds", axes=[{"name": "a", "size": 4, "growable": True}, {"name": "b", "size": 4, "growable": True}],
                    variables={"v": {"dtype": "float32", "dims": ["a", "b"]}})
    with pytest.raises(vds.OutOfRangeError, match="samples"):
        ds["v"].resize((10, 2**61))  # beyond the format's limit for b: a must not have changed either
    assert ds["v"].shape == (4, 4)
    with pytest.raises(vds.InvalidArgumentError, match="not growable|cannot have 0 samples"):
        ds["v"].resize((10, 0))
    assert ds["v"].shape == (4, 4)
    ds["v"].resize((6, 2))
    assert ds["v"].shape == (6, 2)
    ds.close()


def test_attribute_names_an_edit_refuses_are_refused_when_the_file_is_made(tmp_path):
    """What ds.attrs[k] = v refuses as a name, create and save refuse too: no attribute is made that
    could not be changed or removed later."""
    for bad in ["", "a\x00b", "\n", "a\tb", "n" * 256]:
        with pytest.raises(vds.InvalidArgumentError, match="must be 1 to 255 bytes without control characters"):
            vds.save(tmp_path / "a.vds", {"a": np.ones(3)}, attrs={bad: 1}, overwrite=True)
        with pytest.raises(vds.InvalidArgumentError, match="variable 'v'|variable \"v\""):
            vds.create(tmp_path / "b.vds", [("x", 3)], {"v": {"dtype": "int8", "dims": ["x"], "attrs": {bad: 1}}}, overwrite=True)
        with vds.create(tmp_path / "c.vds", [("x", 3)], {"v": {"dtype": "int8", "dims": ["x"]}}, overwrite=True) as ds:
            with pytest.raises(vds.InvalidArgumentError, match="must be 1 to 255 bytes"):
                ds.attrs[bad] = 1


def test_levels_slices_and_fragment_names_are_taken_as_indexing_takes_them(tmp_path, rng):
    """Levels and slice indices are integers (NumPy's too), not floats, bools or strings; a slice's
    axes are names or positions (negative from the end), each once; fragment names a sequence."""
    ref = rng.standard_normal((4, 5, 6)).astype(np.float32)
    with vds.create(tmp_path / "l.vds", [("a", 4), ("b", 5), ("c", 6)],
                    {"v": {"dtype": "float32", "dims": ["a", "b", "c"], "lods": 2}}) as ds:
        v = ds["v"]
        v[...] = ref
        ds.commit()
        assert v.lod(np.int64(1)).shape == v.lod(1).shape == (2, 3, 3)
        for level in [1.5, True, "1", None]:
            with pytest.raises(vds.InvalidArgumentError, match="level of detail of variable 'v' must be an integer"):
                v.lod(level)
        np.testing.assert_array_equal(v.slice(np.int64(0), 1), ref[1])
        np.testing.assert_array_equal(v.slice(-1, 2), ref[:, :, 2])
        np.testing.assert_array_equal(v.slice("b", -1), ref[:, -1, :])
        for axis, index, message in [(True, 0, "an axis is a name or a position, not True"),
                                     ("a", slice(0, 2), "the index along axis 'a' must be an integer"),
                                     (["a", "a"], [0, 1], "axis 'a' is given twice"),
                                     (["a", 0], [0, 1], "axis 'a' is given twice"),
                                     ("z", 0, "does not span axis 'z'")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
                v.slice(axis, index)
        with pytest.raises(vds.InvalidArgumentError, match="a sequence of fragment names, not 'ok2'"):
            ds.merge_fragments("ok2")
        # Names that are not valid Unicode are refused as any invalid argument, naming what they are.
        class Name(str):  # a str that says it is ASCII: str's own test decides
            def isascii(self):
                return True

        for call, what in [(lambda: ds.merge_fragments(["\ud800"]), "the name of a fragment to merge"),
                           (lambda: vds.fragment(ds.path, Name("a\ud800")), "the name of a fragment"),
                           (lambda: ds.add_external_slot("a\udcff"), "the name of an external slot"),
                           (lambda: vds.fragment(ds.path, "\ud800"), "the name of a fragment")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(what) + ", '.*', is not valid Unicode"):
                call()


def test_attribute_values_are_bounded_by_what_they_hold_and_read_as_the_objects_hold_them(tmp_path):
    """A broadcast view of one long string lists as many copies of it: refused by its bytes before
    it is listed. A list subclass is read by index and its length as the list holds it (its own
    __len__ is not asked). A closed dataset's attributes raise ClosedError, as its variables do."""

    class Long(list):
        def __len__(self):
            return 10**9

    class Raising(tuple):
        def __len__(self):
            raise RuntimeError("asked")

    with vds.create(tmp_path / "b.vds", [("x", 2)], {"v": {"dtype": "int8", "dims": ["x"]}}) as ds:
        with pytest.raises(vds.InvalidArgumentError, match="holds more than a descriptor parsed"):
            ds.attrs["k"] = np.broadcast_to(np.array(["x" * 10**6]), (1200,))
        ds.attrs["l"] = Long([1, 2])
        ds.attrs["t"] = Raising((3, 4))
        assert ds.attrs["l"] == [1, 2] and ds.attrs["t"] == [3, 4]
        vds.create(tmp_path / "c.vds", [{"name": "x", "size": 2}],
                   {"v": {"dtype": "int8", "dims": ["x"], "margin": Raising((1, 1))}}).close()
    with pytest.raises(vds.ClosedError):
        ds.attrs["l"]
    with pytest.raises(vds.ClosedError):
        "t" in ds.attrs


def test_a_pickled_dataset_reopens_its_file_from_another_directory(tmp_path, monkeypatch):
    """A dataset opened by a relative path pickles with its absolute path, so that a worker in
    another directory (or this process after a chdir) reopens the same file."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    vds.save("rel.vds", {"a": np.arange(5.0)})
    with vds.open("rel.vds") as ds:
        shipped = pickle.dumps(ds["a"])
        assert ds.path == "rel.vds"  # the path as given
    monkeypatch.chdir(tmp_path / "elsewhere")
    v = pickle.loads(shipped)
    np.testing.assert_array_equal(v[...], np.arange(5.0))
    assert v.dataset.path == str(tmp_path / "rel.vds")
    v.dataset.close()
    # The directory is the one it was opened in, not the one it is pickled in.
    vds.save("rel.vds", {"a": np.zeros(2)})  # another file of that name, here
    monkeypatch.chdir(tmp_path)
    with vds.open("rel.vds") as ds:
        monkeypatch.chdir(tmp_path / "elsewhere")
        again = pickle.loads(pickle.dumps(ds))
        np.testing.assert_array_equal(again["a"][...], np.arange(5.0))
        again.close()


def test_a_dataset_is_equal_only_to_itself_and_a_variable_to_the_same_variable(tmp_path):
    vds.save(tmp_path / "e.vds", {"a": np.arange(4.0), "b": np.arange(4.0)})
    with vds.open(tmp_path / "e.vds") as ds, vds.open(tmp_path / "e.vds") as again:
        assert ds == ds and ds != again and len({ds, again, ds}) == 2
        assert ds["a"] == ds["a"] and ds["a"] != ds["b"] and ds["a"] != again["a"]
        assert {ds["a"]: 1}[ds["a"]] == 1 and ds["a"] != "a"


def test_a_change_made_while_the_layout_is_fetched_is_not_hidden_by_it(tmp_path):
    """The shapes a handle keeps are fetched, then kept: a resize by another thread landing between
    the two must not leave the old shape kept (reads through it would silently come back short)."""
    ds = vds.create(tmp_path / "g.vds", axes=[{"name": "g", "size": 10, "growable": True}],
                    variables={"v": {"dtype": "int32", "dims": ["g"]}})
    ds["v"][...] = np.arange(10, dtype=np.int32)
    v = ds["v"]

    class Racing:
        """The core, but its next layout() is overtaken by a resize (as another thread's would be)."""
        def __init__(self, core):
            self.core, self.armed = core, True

        def __getattr__(self, name):
            return getattr(self.core, name)

        def layout(self):
            fetched = self.core.layout()
            if self.armed:
                self.armed = False
                ds.resize("g", 29)
            return fetched

    ds._changed()
    ds._core = Racing(ds._core)
    assert v.shape == (10,)  # what was fetched, as it was at the fetch
    assert v.shape == (29,)  # then the change is seen
    assert len(v[:]) == 29 and v[:].tolist() == list(range(10)) + [0] * 19
    ds._core = ds._core.core
    ds.close()


def test_a_value_with_leading_axes_of_one_is_written_as_numpy_assigns_it(tmp_path):
    ref = np.zeros((4, 3))
    with vds.create(tmp_path / "b.vds", axes=[("y", 4), ("x", 3)], variables={"v": {"dtype": "float64", "dims": ["y", "x"]}}) as ds:
        v = ds["v"]
        for key, value in [(slice(0, 2), np.ones((1, 2, 3))), (0, np.full((1, 3), 2.0)), ((slice(None), 0), np.full((1, 1, 4), 3.0))]:
            ref[key] = value
            v[key] = value
            np.testing.assert_array_equal(v[...], ref)
        with pytest.raises(vds.InvalidArgumentError, match=re.escape("could not broadcast input array from shape (2, 2, 3) into shape (2, 3)")):
            v[0:2] = np.ones((2, 2, 3))
        with pytest.raises(ValueError):
            ref[0:2] = np.ones((2, 2, 3))  # NumPy refuses it too
        with pytest.raises(vds.InvalidArgumentError, match=re.escape("from shape (1, 1) into shape ()")):
            v[1, 1] = np.ones((1, 1))
        # One element takes no array of more axes, in NumPy either (older
        # NumPy only warned that it is deprecated: the warning made an error).
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            ref[1, 1] = np.ones((1, 1))


def test_integers_of_another_type_are_written_when_they_fit(tmp_path):
    """Integer arrays of another type are taken when every value fits the variable's type, and refused
    (never wrapped, as NumPy's assignment would) when one does not; floats into integers are refused."""
    with vds.create(tmp_path / "i.vds", [("x", 4)], {"s": {"dtype": "int8", "dims": ["x"]}, "u": {"dtype": "uint8", "dims": ["x"]},
                                                     "w": {"dtype": "int64", "dims": ["x"]}, "f": {"dtype": "float32", "dims": ["x"]}}) as ds:
        ds["u"][...] = np.arange(4) * 80  # int64 into uint8: 0 to 240 fit
        ds["s"][...] = np.array([-128, 0, 5, 127], np.int64)
        ds["w"][...] = np.array([0, 1, 2, 2**63 - 1], np.uint64)
        ds["f"][...] = np.arange(4, dtype=np.int16)  # integers into floats, as NumPy casts them
        np.testing.assert_array_equal(ds["u"][...], [0, 80, 160, 240])
        np.testing.assert_array_equal(ds["s"][...], [-128, 0, 5, 127])
        np.testing.assert_array_equal(ds["w"][...], [0, 1, 2, 2**63 - 1])
        np.testing.assert_array_equal(ds["f"][...], [0, 1, 2, 3])
        for var, values, message in [("s", np.array([1, 300]), r"values from 1 to 300 do not fit variable 's' of int8 \(-128 to 127\)"),
                                     ("u", np.array([-1, 2], np.int16), "values from -1 to 2 do not fit variable 'u' of uint8"),
                                     ("w", np.array([2**63], np.uint64), "do not fit variable 'w' of int64")]:
            with pytest.raises(vds.InvalidArgumentError, match=message):
                ds[var][...] = values
        with pytest.raises(vds.TypeMismatchError, match="cannot write float64 values into variable 's' of int8"):
            ds["s"][...] = np.ones(4)
        # Python integers out of range: NumPy's OverflowError, saying what the variable takes.
        for var, value in [("s", 2**63), ("w", 2**64), ("w", [1, 2**70]), ("u", -1)]:
            with pytest.raises(OverflowError, match=rf"out of bounds for variable '{var}' of (u?int(8|64))"):
                ds[var][0:len(value) if isinstance(value, list) else 1] = value
        ds["w"][0:2] = [2**62, -(2**63)]  # Python ints that fit, whatever type NumPy would infer for them
        np.testing.assert_array_equal(ds["w"][0:2], [2**62, -(2**63)])
        # Nothing refused was written.
        np.testing.assert_array_equal(ds["s"][...], [-128, 0, 5, 127])
        np.testing.assert_array_equal(ds["u"][...], [0, 80, 160, 240])


def test_errors_raise_the_right_exception(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    path = tmp_path / "vol.vds"
    # A second writer is locked out.
    with pytest.raises(vds.LockedError):
        vds.open(path, "r+")
    # Wrong dtype: values that cannot be cast safely.
    with pytest.raises(vds.TypeMismatchError, match="complex128"):
        ds["amp"][0] = np.ones((12, 10), complex)
    with pytest.raises(TypeError):
        ds["amp"][0] = "text"
    with pytest.raises(vds.InvalidArgumentError, match="broadcast"):
        ds["amp"][0] = np.ones((3, 3), np.float32)
    ds.close()
    # Closed dataset.
    with pytest.raises(vds.ClosedError, match="closed"):
        ds["amp"][0]
    with pytest.raises(ValueError):
        ds.commit()
    ds.close()  # twice is fine
    # Read-only.
    with vds.open(path) as r:
        with pytest.raises(vds.ReadOnlyError, match="read-only"):
            r["amp"][0] = 1.0
        with pytest.raises(vds.ReadOnlyError):
            r.attrs["x"] = 1
        with pytest.raises(vds.OutOfRangeError):
            r["amp"][20]
        with pytest.raises(vds.OutOfMemoryError, match="memory limit"):
            vds.open(path, memory_limit=1000)["amp"][...]
    # Within the memory limit but beyond what any machine can allocate (1 PiB): MemoryError.
    huge = tmp_path / "huge.vds"
    vds.create(huge, axes=[("a", 1 << 25), ("b", 1 << 25)], variables={"v": {"dtype": "uint8", "dims": ["a", "b"], "chunks": [1024, 1024]}}).close()
    with vds.open(huge, memory_limit=1 << 62) as h:
        with pytest.raises(MemoryError):
            h["v"][...]
        assert h["v"][:2, :3].tolist() == [[0, 0, 0], [0, 0, 0]]
    # Beyond 2**64 bytes the count is not saturated into a false figure.
    vast = tmp_path / "vast.vds"
    vds.create(vast, axes=[("a", 1 << 40), ("b", 1 << 40)], variables={"v": {"dtype": "uint8", "dims": ["a", "b"], "chunks": [1 << 14, 1 << 14]}}).close()
    with vds.open(vast) as h:
        with pytest.raises(vds.OutOfMemoryError, match=re.escape("a selection of more than 2**64 - 1 bytes exceeds the memory limit")):
            h["v"][...]
    # Writes of the whole variable are held to the memory limit, however they are spelled.
    big = tmp_path / "big.vds"
    vds.create(big, axes=[("x", 10000)], variables={"v": {"dtype": "float64", "dims": ["x"], "chunks": [1000]}}).close()
    with vds.open(big, "r+", memory_limit=30000) as w:
        for key in [Ellipsis, slice(None)]:
            with pytest.raises(vds.OutOfMemoryError, match="memory limit"):
                w["v"][key] = np.ones(10000)
        w["v"][:3000] = np.ones(3000)  # 24000 bytes: within it
    # Not found.
    with pytest.raises(vds.NotFoundError, match="missing.vds") as e:
        vds.open(tmp_path / "missing.vds")
    assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(vds.AlreadyExistsError):
        vds.create(path, axes=[("x", 2)], variables={"v": {"dtype": "int8", "dims": ["x"]}})
    with pytest.raises(vds.InvalidArgumentError):
        vds.open(path, "w")
    # Bad creation arguments.
    for bad in [{"dtype": "float16", "dims": ["x"]}, {"dtype": "int32", "dims": ["y"]},
                {"dtype": "int32", "dims": ["x"], "codec": "lz4"}, {"dtype": "int32", "dims": ["x"], "codec": ("zstd", 23)},
                {"dtype": "int32", "dims": ["x"], "chunks": [0]}, {"dtype": "int32", "dims": ["x"], "colour": 1}]:
        with pytest.raises((vds.VdsError, TypeError)):
            vds.create(tmp_path / "bad.vds", axes=[("x", 4)], variables={"v": bad}, overwrite=True)
    # Huge shapes are refused, not allocated.
    with vds.create(tmp_path / "huge.vds", axes=[("a", 2**40), ("b", 2**40)],
                    variables={"v": {"dtype": "float64", "dims": ["a", "b"], "chunks": [4096, 4096]}}, overwrite=True) as h:
        with pytest.raises(vds.OutOfMemoryError):
            h["v"][...]
        with pytest.raises(vds.OutOfMemoryError):
            h["v"][...] = 1.0
        assert h["v"][2**40 - 1, ::2**39].tolist() == [0.0, 0.0]
    # A corrupt file.
    data = bytearray(path.read_bytes())
    for off in range(len(data) // 2, len(data) - 64, 97):
        data[off] ^= 0xFF
    bad = tmp_path / "corrupt.vds"
    bad.write_bytes(bytes(data))
    with pytest.raises(vds.CorruptFileError) as e:
        with vds.open(bad) as r:
            r["amp"][...]
    assert e.value.offset is not None and "corrupt" in str(e.value)


def test_read_into_a_callers_array(tmp_path, rng):
    ds, ref = volume(tmp_path, rng)
    v = ds["amp"]
    out = np.zeros((20, 12, 10), np.float32)
    assert v.read(out=out) is out
    np.testing.assert_array_equal(out, ref)
    for key, order in [((slice(2, 9), 3), "C"), ((slice(None, None, -2), slice(1, None, 3)), "F"), ((4, 5, 6), "C"),
                       ((None, 1, ..., slice(8, 1, -3)), "F")]:
        want = ref[key]
        buf = np.full(np.shape(want), -1, np.float32, order=order)
        got = v.read(key, out=buf)
        assert got is buf
        np.testing.assert_array_equal(buf, want)
    strided = np.zeros((20, 24, 10), np.float32)[:, ::2]  # not contiguous: filled through a copy
    v.read(out=strided)
    np.testing.assert_array_equal(strided, ref)
    for bad in [np.zeros((20, 12), np.float32), np.zeros((20, 12, 10), np.float64), [0.0]]:
        with pytest.raises(vds.InvalidArgumentError, match="out is"):
            v.read(out=bad)
    frozen = np.zeros((20, 12, 10), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(vds.InvalidArgumentError, match="read-only"):
        v.read(out=frozen)
    ds.close()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("predictor", ["graded", "anchored", "interpolation", "lorenzo"])
def test_bounded_codec_keeps_every_value_within_the_tolerance(tmp_path, rng, dtype, predictor):
    ref = (np.cumsum(rng.standard_normal((24, 20, 40)), axis=2) * 0.3).astype(dtype)
    ref[0, 0, :5] = [np.nan, np.inf, -np.inf, -999.25, -12345.5]
    tol = 0.01
    codec = f"bounded:{tol}" if predictor == "graded" else {"id": "bounded", "tolerance": tol, "predictor": predictor}
    with vds.create(tmp_path / "b.vds", axes=[("i", 24), ("j", 20), ("k", 40)],
                    variables={"v": {"dtype": dtype, "dims": ["i", "j", "k"], "chunks": [8, 10, 40], "codec": codec,
                                     "fill_value": -999.25, "no_value": -12345.5}}) as ds:
        ds["v"][...] = ref
    with vds.open(tmp_path / "b.vds") as ds:
        v = ds["v"]
        assert v.codec == {"id": "bounded", "level": 3, "shuffle": False, "tolerance": tol, "predictor": predictor}
        # Each predictor lists its own feature only, so that 1.7 readers read
        # anchored files, 1.6 readers interpolation ones and 1.5 readers
        # Lorenzo ones.
        head = (tmp_path / "b.vds").read_bytes()[:4096].decode("latin-1")
        assert ("bounded_interpolation" in head) == (predictor == "interpolation")
        assert ("bounded_anchored" in head) == (predictor == "anchored")
        assert ("bounded_graded" in head) == (predictor == "graded")
        back = np.asarray(v)
    exact = ~np.isfinite(ref) | (ref == -999.25) | (ref == -12345.5)
    np.testing.assert_array_equal(back[exact].view(f"u{ref.itemsize}"), ref[exact].view(f"u{ref.itemsize}"))
    # In float64 (exact for the difference of two float32).
    err = np.abs(back[~exact].astype(np.float64) - ref[~exact].astype(np.float64))
    assert err.max() <= tol
    assert err.max() > tol / 10, "the codec is lossy: it uses the bound it was given"


def test_bounded_codec_in_blocks(tmp_path, rng):
    """With an interpolation predictor each block of a chunk is a bounded stream of its own; the Lorenzo one takes no blocks."""
    ref = (np.cumsum(rng.standard_normal((32, 30, 64)), axis=2) * 0.3).astype(np.float32)
    var = {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [16, 30, 64], "codec": "bounded:0.01", "blocks": [8, 8, 32]}
    with vds.create(tmp_path / "b.vds", axes=[("i", 32), ("j", 30), ("k", 64)], variables={"v": var}) as ds:
        ds["v"][...] = ref
    with vds.open(tmp_path / "b.vds") as ds:
        v = ds["v"]
        assert v.blocks == (8, 8, 32)
        for box in [np.s_[...], np.s_[3:5, 29, 10:40], np.s_[17, :, 63]]:
            assert np.abs(v[box].astype(np.float64) - ref[box].astype(np.float64)).max() <= 0.01
    with pytest.raises(vds.InvalidArgumentError, match="interpolation"):
        vds.create(tmp_path / "l.vds", axes=[("x", 64)], variables={"v": {"dtype": "float32", "dims": ["x"], "blocks": [32],
                                                                       "codec": {"id": "bounded", "tolerance": 0.1, "predictor": "lorenzo"}}})


def test_bounded_codec_relative_and_misuse(tmp_path):
    with vds.create(tmp_path / "r.vds", axes=[("x", 10)],
                    variables={"v": {"dtype": "float32", "dims": ["x"],
                                     "codec": {"id": "bounded", "relative": 0.001, "range": (-2.0, 3.0)}}}) as ds:
        assert ds["v"].codec["tolerance"] == 0.001 * 5.0
    for bad in [{"dtype": "int32", "dims": ["x"], "codec": "bounded:0.1"}, {"dtype": "float32", "dims": ["x"], "codec": "bounded:0"},
                {"dtype": "float32", "dims": ["x"], "codec": "bounded:x"}, {"dtype": "float32", "dims": ["x"], "codec": "bounded"},
                {"dtype": "float32", "dims": ["x"], "codec": {"id": "zstd", "tolerance": 0.1}},
                {"dtype": "float32", "dims": ["x"], "codec": {"id": "zstd", "predictor": "interpolation"}},
                {"dtype": "float32", "dims": ["x"], "codec": {"id": "bounded", "tolerance": 0.1, "predictor": "wavelet"}}]:
        with pytest.raises(vds.InvalidArgumentError):
            vds.create(tmp_path / "bad.vds", axes=[("x", 4)], variables={"v": bad}, overwrite=True)


def test_default_blocks_in_large_compressed_chunks(tmp_path, rng):
    """A deflate or zstd variable whose chunks hold 1 MiB or more is made of
    blocks of at most 128 KiB unless ``blocks=False``; smaller chunks stay whole."""
    ref = rng.standard_normal((64, 64, 64)).astype(np.float32)
    for name, var, want in [
        ("d.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64], "codec": "zstd"}, (32, 32, 32)),
        ("w.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64], "codec": "zstd", "blocks": False}, None),
        ("b.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64], "codec": "zstd", "blocks": np.False_}, None),
        ("e.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64], "codec": "zstd",
                   "blocks": np.array([16, 64, 64])}, (16, 64, 64)),
        ("s.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [32, 64, 64], "codec": "zstd"}, None),
        ("n.vds", {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64]}, None),
    ]:
        with vds.create(tmp_path / name, axes=[("x", 64), ("y", 64), ("z", 64)], variables={"amp": var}) as ds:
            ds["amp"][...] = ref
        with vds.open(tmp_path / name) as ds:
            assert ds["amp"].blocks == want, name
            np.testing.assert_array_equal(ds["amp"][...], ref)
            np.testing.assert_array_equal(ds["amp"][5, 7, :], ref[5, 7, :])
    # No shape at all is not a way to say whole chunks, nor is True one to ask for the default.
    for blocks, message in [([], "blocks=\\[\\] has no extents"), (True, "blocks=True"), (np.True_, "blocks=True"),
                            ("32", "expected a block shape"), (32, "expected a block shape")]:
        var = {"dtype": "float32", "dims": ["x", "y", "z"], "chunks": [64, 64, 64], "codec": "zstd", "blocks": blocks}
        with pytest.raises(vds.InvalidArgumentError, match=message):
            vds.create(tmp_path / "bad.vds", axes=[("x", 64), ("y", 64), ("z", 64)], variables={"amp": var})
        assert not (tmp_path / "bad.vds").exists()


def test_create_messages_name_the_axis_or_variable(tmp_path):
    """A size, extent or list of names given wrongly is refused with a message naming its axis or
    variable; (name, size) pairs, dicts and Axis-like dicts describe the same container."""
    var = {"v": {"dtype": "int8", "dims": ["x"]}}
    for axis, message in [(("x", 4.5), "the size of axis 'x' must be an integer, not 4.5"),
                          (("x", True), "the size of axis 'x' must be an integer, not True"),
                          ({"name": "x", "size": 4, "last": "9"}, "last of axis 'x' must be a number, not '9'"),
                          ({"name": "x", "size": 4, "max_size": 8.0}, "max_size of axis 'x' must be an integer, not 8.0")]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
            vds.create(tmp_path / "bad.vds", [axis], var)
        assert not (tmp_path / "bad.vds").exists()
    for v, message in [({"dtype": "int8", "dims": "x"}, "dims of variable 'v' is a sequence of names, not 'x'"),
                       ({"dtype": "int8", "dims": ["x"], "chunks": [2.0]}, "a chunk extent of variable 'v' must be an integer, not 2.0"),
                       ({"dtype": "int8", "dims": ["x"], "partitionings": [[None]]}, "a partitioning extent of variable 'v' must be an integer"),
                       ({"dtype": "int8", "dims": ["x"], "lods": 1.5}, "lods of variable 'v' must be an integer, not 1.5")]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
            vds.create(tmp_path / "bad.vds", [("x", 4)], {"v": v})
        assert not (tmp_path / "bad.vds").exists()
    # A negative size is refused, in a pair as in a dict.
    for axis in [("x", -1), {"name": "x", "size": -1}]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape("the size of axis 'x' must not be negative, not -1")):
            vds.create(tmp_path / "bad.vds", [axis], var)
    descriptors = []
    for axis in [("x", 4), ["x", 4], {"name": "x", "size": 4}, ("x", np.int32(4))]:
        with vds.create(tmp_path / "same.vds", [axis], var, overwrite=True) as ds:
            descriptors.append(ds.descriptor())
    assert all(d == descriptors[0] for d in descriptors)


def test_create_refuses_malformed_variables_and_negative_sizes(tmp_path):
    """A variable or an option of one given in the wrong form, and a negative size or extent, are
    refused by vds.create with an InvalidArgumentError naming the variable or axis, and no file is made."""
    def v(dtype="int8", **options):
        return {"v": {"dtype": dtype, "dims": ["x"], **options}}

    for variables, message in [({"v": {"dims": ["x"]}}, "variable 'v' needs a dtype and dims; it has no dtype"),
                               ({"v": {"dtype": "int8", "dims": None}}, "variable 'v' needs a dtype and dims; it has no dims"),
                               (v("junk"), "the dtype of variable 'v': 'junk' is not a data type"),
                               ({"v": "f4"}, "variable 'v' is a dict with a dtype and dims, not 'f4'"),
                               ({1: {"dtype": "int8", "dims": ["x"]}}, "the name of a variable is a str, not 1"),
                               ([{"dtype": "int8", "dims": ["x"]}], "a variable in a sequence is a dict with a name, a dtype and dims"),
                               (["v"], "a variable in a sequence is a dict with a name, a dtype and dims, not 'v'"),
                               (None, "variables is a dict from name to variable, or a sequence of variables"),
                               (v(chunks=3), "chunks of variable 'v' is a sequence of extents (one per axis), not 3"),
                               (v(chunks=[-1]), "a chunk extent of variable 'v' must not be negative, not -1"),
                               (v(margin=1.5), "margin of variable 'v' must be an integer, not 1.5"),
                               (v(margin=-1), "margin of variable 'v' must not be negative, not -1"),
                               (v(margin=[1, 2, 3]), "margin of variable 'v' is one extent or (before, after)"),
                               (v("float32", quantization=("u2",)), "quantization of variable 'v' is (storage dtype, min, max) or a dict"),
                               (v("float32", quantization=("junk", 0, 1)), "the quantization storage of variable 'v': 'junk' is not a data type"),
                               (v("float32", quantization=("u2", "0", 1)), "the quantization min of variable 'v' must be a number, not '0'"),
                               (v(lods=-1), "lods of variable 'v' must not be negative, not -1"),
                               (v(lods=300), "lods of variable 'v' is a number of levels of detail, not 300"),
                               (v(blocks=[-1]), "a block extent of variable 'v' must not be negative, not -1"),
                               (v(partitionings=2), "partitionings of variable 'v' is a sequence of chunk shapes"),
                               (v(partitionings=[[-1]]), "a partitioning extent of variable 'v' must not be negative, not -1"),
                               (v(codec=("zstd", -1)), "variable 'v': the level of codec ('zstd', -1) must be from 0 to 255, not -1"),
                               (v(codec={"id": "zstd", "level": 2.5}), "variable 'v': the level of codec {'id': 'zstd', 'level': 2.5} must be"),
                               (v(codec="bounded:x"), "variable 'v': codec 'bounded:x': expected 'bounded:TOLERANCE'")]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
            vds.create(tmp_path / "bad.vds", [("x", 4)], variables)
        assert not (tmp_path / "bad.vds").exists()
    for axes, message in [([("x", -1)], "the size of axis 'x' must not be negative, not -1"),
                          ([{"name": "x", "size": np.int64(-1)}], "the size of axis 'x' must not be negative, not -1"),
                          ([{"name": "x", "size": 4, "max_size": -1}], "max_size of axis 'x' must not be negative, not -1"),
                          ([(1, 4)], "the name of an axis is a str, not 1"),
                          ("x", "axes is a sequence of axes, each (name, size) or a dict, not 'x'"),
                          (None, "axes is a sequence of axes, each (name, size) or a dict, not None")]:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
            vds.create(tmp_path / "bad.vds", axes, v())
        assert not (tmp_path / "bad.vds").exists()
    # The forms that are right make the same file as before; a Mapping that is not a dict is a dict of variables.
    from types import MappingProxyType
    spec = {"dtype": "float32", "dims": ["x"], "chunks": (2,), "margin": (1, 1), "quantization": ("uint16", -1, 1), "codec": ("zstd", 3)}
    for name, variables in [("dict.vds", {"v": spec}), ("list.vds", [dict(spec, name="v")]),
                            ("proxy.vds", MappingProxyType({"v": dict(spec, margin=np.int8(1), chunks=np.array([2]))}))]:
        with vds.create(tmp_path / name, [("x", 4)], variables) as ds:
            ds["v"][...] = [0.5, -0.5, 1, -1]
    for name in ("list.vds", "proxy.vds"):
        assert (tmp_path / "dict.vds").read_bytes() == (tmp_path / name).read_bytes(), name
    with vds.open(tmp_path / "proxy.vds") as ds:
        v = ds["v"]
        assert (v.chunks, v.margin, v.quantization["storage"], v.codec["level"]) == ((2,), (1, 1), "uint16", 3)


def test_create_refuses_what_json_cannot_hold(tmp_path):
    """The description of a new container holds JSON values: anything else, a coordinate that is not
    finite or an integer beyond 64 bits is an InvalidArgumentError naming it, and no file is made.
    NumPy scalars are numbers."""
    var = {"v": {"dtype": "int8", "dims": ["x"]}}
    for axis, message in [({"name": "x", "size": 4, "unit": object()}, "a value of type object"),
                          ({"name": "x", "size": 4, "first": float("nan")}, "NaN is not a finite number"),
                          ({"name": "x", "size": 4, "last": float("inf")}, "inf is not a finite number"),
                          ({"name": "x", "size": 2**70}, "an integer beyond")]:
        with pytest.raises(vds.InvalidArgumentError, match=message):
            vds.create(tmp_path / "bad.vds", [axis], var)
        assert not (tmp_path / "bad.vds").exists()
    # A few lists holding each other twice over stand for 2**30 values: refused before they are all built
    # (where a string belongs, at once, by its type; as an attribute, below, by its size).
    # A list subclass is read by index, not through its __iter__ (here an endless one).
    dag = []
    for _ in range(30):
        dag = [dag, dag]

    class Endless(list):
        def __iter__(self):
            return itertools.repeat(0)

    for axis, message in [({"name": "x", "size": 4, "unit": dag}, re.escape('at ["axes"][0]["unit"]: invalid type: sequence, expected a string')),
                          ({"name": "x", "size": 4, "unit": Endless()}, "expected a string"),
                          ({"name": "\ud800", "size": 4}, "lone surrogate"),
                          ({"name": "x", "size": 10.9}, "must be an integer, not 10.9"),
                          ({"name": "x", "size": "7"}, "must be an integer"),
                          ({"name": "x", "size": None}, "must be an integer"),
                          ({"name": "x", "size": 4, "first": "0"}, "must be a number"),
                          ({"name": "x"}, "needs a name and a size")]:
        with pytest.raises(vds.InvalidArgumentError, match=message):
            vds.create(tmp_path / "bad.vds", [axis], var)
        assert not (tmp_path / "bad.vds").exists()
    # An integer too large is refused without its digits: str() of it would be costly, or user code.
    with pytest.raises(vds.InvalidArgumentError, match=re.escape('create: at ["attrs"]["big"]: an integer beyond -2**63 .. 2**64 - 1')):
        vds.create(tmp_path / "bad.vds", [("x", 4)], var, {"big": 10**5000})
    for kwargs, message in [({"slots": "abc"}, "slots is a sequence of names"), ({"attrs": {"a": dag}}, "holds more than a descriptor parsed"),
                            ({"attrs": [1, 2]}, "expected a map"), ({"attrs": {"a": {(1, 2): 3}}}, "a key is tuple"),
                            ({"memory_limit": -1}, "memory_limit is a number of bytes")]:
        with pytest.raises(vds.InvalidArgumentError, match=message):
            vds.create(tmp_path / "bad.vds", [("x", 4)], var, **kwargs)
        assert not (tmp_path / "bad.vds").exists()
    deep = 1
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(vds.InvalidArgumentError, match="nests more than 128 levels deep"):
        vds.create(tmp_path / "bad.vds", [("x", 4)], var, {"a": deep})
    with pytest.raises(vds.InvalidArgumentError, match="sequence of names"):
        vds.create(tmp_path / "bad.vds", [("x", 4), ("y", 4)], {"v": {"dtype": "int8", "dims": ["x", "y"], "lods": 2, "lod_axes": "xy"}})
    vds.create(tmp_path / "lods.vds", [("x", 4)], {"v": {"dtype": "int8", "dims": ["x"], "lods": 2, "lod_axes": None}}).close()
    # A long double is a float64 fill value.
    with vds.create(tmp_path / "ld.vds", [("x", 4)], {"v": {"dtype": "float64", "dims": ["x"], "fill_value": np.longdouble(1.5)}}) as ds:
        assert ds["v"].fill_value == 1.5
        with pytest.raises(vds.InvalidArgumentError, match="lone surrogate"):
            ds.attrs["\ud800"] = 1
        with pytest.raises(vds.InvalidArgumentError, match='attribute "a": holds more than a descriptor parsed within 1024 MiB'):
            ds.attrs["a"] = dag
        with pytest.raises(vds.InvalidArgumentError, match="holds more than a descriptor parsed"):
            ds.attrs["a"] = np.zeros(20_000_000)  # refused by its size, before its values are listed
        # What a descriptor may hold within the default memory limit is taken: three million zeros.
        ds.attrs["zeros"] = np.zeros(3_000_000, np.int8)
        # Keys as json.dumps writes them.
        ds.attrs["keys"] = {1: "a", 2.5: "b", False: "c", None: "d", 1e-05: "e", 1e16: "f"}

        class Key(str):  # a str that hashes as it likes: the dict holds it beside an equal str
            def __hash__(self):
                return 42

            def __eq__(self, other):
                return str.__eq__(self, other)

        # ... and refused where two keys would be written as one, at any depth and wherever attributes are given.
        for twins, shown in [({1: "a", "1": "b"}, "1 and '1'"), ({"x": {None: 1, "null": 2}}, "None and 'null'"),
                             ({"false": 1, False: 2}, "'false' and False"), ({1e-05: 1, "1e-05": 2}, "1e-05 and '1e-05'"),
                             ({Key("1"): 1, "1": 2}, "'1' and '1'")]:
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(f"the keys {shown} are the same key in JSON")):
                ds.attrs["twins"] = twins
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(f"the keys {shown} are the same key in JSON")):
                vds.save(tmp_path / "twins.vds", {"v": np.arange(2)}, attrs=twins, overwrite=True)
            with pytest.raises(vds.InvalidArgumentError, match=re.escape(f"the keys {shown} are the same key in JSON")):
                vds.create(tmp_path / "twins.vds", [("x", 4)], {"v": {"dtype": "int8", "dims": ["x"], "attrs": twins}}, overwrite=True)
        assert "twins" not in ds.attrs
        # A value refused is named by where it is in the attribute.
        with pytest.raises(vds.InvalidArgumentError, match=r'attribute "a": at \["range"\]\[1\]: NaN is not a finite number'):
            ds["v"].attrs["a"] = {"range": [1, np.float32("nan")]}
        ds.attrs["a"] = {"range": np.array([[1, 2], [3, 4]], np.int16), "scale": np.float32(0.5), "on": np.bool_(True)}
        assert ds.attrs["a"] == {"range": [[1, 2], [3, 4]], "scale": 0.5, "on": True}
    with vds.open(tmp_path / "ld.vds") as ds:
        assert len(ds.attrs["zeros"]) == 3_000_000 and not any(ds.attrs["zeros"])
        assert ds.attrs["keys"] == json.loads(json.dumps({1: "a", 2.5: "b", False: "c", None: "d", 1e-05: "e", 1e16: "f"}))
    with pytest.raises(vds.InvalidArgumentError, match="cache_size"):
        vds.open(tmp_path / "ld.vds", cache_size=2**64)
    with vds.open(os.fsencode(tmp_path / "ld.vds")) as ds:  # a path given as bytes
        np.testing.assert_array_equal(ds["v"][...], np.full(4, 1.5))

    quantized = {"dtype": "float32", "dims": ["x"], "quantization": {"storage": "uint8", "min": np.float32(-1), "max": np.int16(1)}}
    with vds.create(tmp_path / "np.vds", [{"name": "x", "size": np.int64(4), "first": np.float32(0.5), "last": np.float64(2),
                                          "max_size": np.uint16(8)}], dict(var, q=quantized)) as ds:
        ds["v"][...] = np.arange(4, dtype=np.int8)
    with vds.open(tmp_path / "np.vds") as ds:
        x = ds["v"].axes["x"]
        assert (x.size, x.first, x.last, x.growable) == (4, 0.5, 2.0, True)
        np.testing.assert_array_equal(ds["v"][...], np.arange(4, dtype=np.int8))
        assert ds["q"].quantization == {"storage": "uint8", "min": -1.0, "max": 1.0}


def test_the_compiled_create_reads_a_description_field_by_field_and_says_where_it_is_wrong(tmp_path):
    """vds._vds.create, under vds.create, reads the description (a dict, or its JSON text) into typed fields:
    a misspelt field, a missing one or a value of the wrong type is an InvalidArgumentError placing it."""
    from vds import _vds
    good = {"axes": [{"name": "x", "samples": 4}], "variables": [{"name": "v", "dtype": "int16", "axes": ["x"], "chunks": [2]}],
            "attrs": {"k": [1, 2.5, None, True, "s"]}, "sync": False}
    for path, spec in [(tmp_path / "a.vds", good), (tmp_path / "b.vds", json.dumps(good))]:
        ds = _vds.create(os.fspath(path), spec)
        ds.close()
        with vds.open(path) as opened:
            assert (opened["v"].shape, opened["v"].chunks, opened["v"].dtype) == ((4,), (2,), np.int16)
            assert opened.attrs["k"] == [1, 2.5, None, True, "s"]
    bad = [({"variables": [{"name": "v", "dtype": "int16", "axes": ["x"], "chnks": [2]}]}, 'at ["variables"][0]: unknown field `chnks`'),
           ({"variables": [{"name": "v", "axes": ["x"]}]}, 'at ["variables"][0]: missing field `dtype`'),
           ({"axes": [{"name": "x", "samples": "4"}]}, 'at ["axes"][0]["samples"]: invalid type: string "4", expected u64'),
           ({"axes": [{"name": "x", "samples": -4}]}, 'at ["axes"][0]["samples"]: invalid value: integer `-4`, expected u64'),
           ({"variables": [{"name": "v", "dtype": "int16", "axes": ["x"], "margin": [1, 2, 3]}]},
            'at ["variables"][0]["margin"]: invalid length 3, expected a list of 2 elements'),
           ({"layot": "compact"}, "create: unknown field `layot`"),
           ({"axes": {"x": 4}}, 'at ["axes"]: invalid type: map, expected a sequence')]
    for change, message in bad:
        with pytest.raises(vds.InvalidArgumentError, match=re.escape(message)):
            _vds.create(os.fspath(tmp_path / "bad.vds"), dict(good, **change))
        assert not (tmp_path / "bad.vds").exists()


def test_layout_compact_or_aligned(tmp_path, rng):
    """``layout`` chooses the container's layout: a small file is a few hundred bytes in the compact one
    (the default for it) and 4 KiB-aligned in the other; both read back the same values; large variables
    get the aligned layout by default; an unknown layout is refused."""
    small = rng.integers(-1000, 1000, 100).astype(np.int64)
    sizes = {}
    for layout in ["auto", "compact", "aligned"]:
        path = tmp_path / f"{layout}.vds"
        with vds.create(path, [("x", 100)], {"v": {"dtype": "int64", "dims": ["x"]}}, layout=layout) as ds:
            ds["v"][...] = small
        sizes[layout] = path.stat().st_size
        with vds.open(path) as ds:
            np.testing.assert_array_equal(ds["v"][...], small)
            features = ds.descriptor()["features"]["incompat"]
            assert ("compact_layout" in features) == (layout != "aligned"), (layout, features)
    assert sizes["auto"] == sizes["compact"] < 1024 + small.nbytes, sizes
    assert sizes["aligned"] >= 2 * 4096 + small.nbytes, sizes  # a 4 KiB head and a 4 KiB index page

    # Over 64 KiB declared: aligned unless asked otherwise.
    with vds.create(tmp_path / "big.vds", [("x", 10000)], {"v": {"dtype": "float64", "dims": ["x"]}}) as ds:
        assert "compact_layout" not in ds.descriptor()["features"]["incompat"]
    with pytest.raises(vds.InvalidArgumentError, match="layout 'tiny'|layout \"tiny\""):
        vds.create(tmp_path / "bad.vds", [("x", 4)], {"v": {"dtype": "int8", "dims": ["x"]}}, layout="tiny")
    assert not (tmp_path / "bad.vds").exists()


def test_every_public_name_says_what_it_is_and_functions_show_their_arguments():
    import inspect

    for name in vds.__all__:
        obj = getattr(vds, name)
        if not callable(obj):
            continue
        doc = inspect.getdoc(obj) or ""
        assert len(doc) > 20, f"vds.{name} has no docstring"
        if not (isinstance(obj, type) and issubclass(obj, Exception)):
            params = inspect.signature(obj).parameters
            assert params, f"vds.{name} shows no arguments"
    assert list(inspect.signature(vds.load).parameters) == ["path", "names", "memory_limit"]
    assert inspect.signature(vds.load).parameters["memory_limit"].kind is inspect.Parameter.KEYWORD_ONLY
