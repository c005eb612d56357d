"""vds.save and vds.load, the whole-file calls, against NumPy references and
against what vds.open and vds.create see of the same files."""

import collections.abc
import os
import re
import threading
import types

import numpy as np
import pytest

import vds
from conftest import DTYPES, reference


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_and_reads_as_open_sees_it(tmp_path, rng, dtype):
    ref = reference(rng, (9, 4, 3), dtype)
    path = tmp_path / f"{dtype}.vds"
    vds.save(path, {"v": ref, "f": np.asfortranarray(ref), "row": ref[:, 1, 2]})
    got = vds.load(path)
    assert list(got) == ["v", "f", "row"]
    for name, want in [("v", ref), ("f", ref), ("row", ref[:, 1, 2])]:
        assert got[name].dtype == ref.dtype and got[name].flags.c_contiguous
        np.testing.assert_array_equal(got[name], want)
    with vds.open(path) as ds:
        assert ds["v"].dims == ("dim_0", "dim_1", "dim_2") and ds["row"].dims == ("dim_0",)
        assert {n: a.size for n, a in ds.axes.items()} == {"dim_0": 9, "dim_1": 4, "dim_2": 3}
        np.testing.assert_array_equal(ds["f"][...], ref)


def test_inputs_that_are_not_plain_arrays_are_converted(tmp_path, rng):
    ref = reference(rng, (6, 8), "int32")
    path = tmp_path / "c.vds"
    vds.save(path, {"strided": ref[::2, ::-1], "big_endian": ref.astype(">i4"), "listed": [[1, 2], [3, 4]],
                    "floats": [0.5, 1.5]}, dims={"strided": ["a", "b"], "big_endian": ["c", "d"], "listed": ["e", "e2"],
                                                  "floats": ["e"]})
    got = vds.load(path)
    np.testing.assert_array_equal(got["strided"], ref[::2, ::-1])
    assert got["big_endian"].dtype == np.dtype("int32")
    np.testing.assert_array_equal(got["big_endian"], ref)
    np.testing.assert_array_equal(got["listed"], np.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(got["floats"], [0.5, 1.5])


def test_dims_attrs_chunks_and_codec_are_kept(tmp_path, rng):
    amp = rng.standard_normal((10, 12, 16)).astype(np.float32)
    flags = rng.integers(0, 2, (10, 12)).astype(bool)
    path = tmp_path / "meta.vds"
    vds.save(path, {"amp": amp, "flags": flags}, dims={"amp": ["il", "xl", "t"], "flags": ("il", "xl")},
             attrs={"survey": "north", "scale": np.float32(0.5)}, chunks={"amp": [5, 6, 8]}, codec=("zstd", 3), sync=False)
    with vds.open(path) as ds:
        assert list(ds.axes) == ["il", "xl", "t"]
        assert dict(ds.attrs) == {"survey": "north", "scale": 0.5}
        assert ds["amp"].chunks == (5, 6, 8) and ds["amp"].codec["id"] == "zstd" and ds["amp"].codec["level"] == 3
        assert ds["flags"].dims == ("il", "xl") and ds["flags"].codec["id"] == "zstd"
        np.testing.assert_array_equal(ds["amp"][2:7, ::3, -1], amp[2:7, ::3, -1])
        assert ds.verify()["ok"]
    got = vds.load(path, ["flags"])
    assert list(got) == ["flags"]
    assert list(vds.load(path, ("flags", "amp"))) == ["flags", "amp"]
    vds.save(path, {"amp": amp}, attrs=types.MappingProxyType({"a": 1}), overwrite=True)
    with vds.open(path) as ds:
        assert dict(ds.attrs) == {"a": 1}
    np.testing.assert_array_equal(got["flags"], flags)


def test_load_reads_what_indexing_reads_of_any_container(tmp_path, rng):
    # Quantized, masked, with levels of detail: load gives level 0's values, as var[...] does.
    ref = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    missing = rng.random((16, 16)) < 0.2
    path = tmp_path / "rich.vds"
    with vds.create(path, axes=[("y", 16), ("x", 16)],
                    variables={"q": {"dtype": "float32", "dims": ["y", "x"], "chunks": [8, 8], "quantization": ("uint16", -1, 1),
                                     "lods": 2},
                               "m": {"dtype": "float64", "dims": ["y", "x"], "chunks": [4, 4], "mask": True, "fill_value": -9.0}}) as ds:
        ds["q"][...] = ref
        ds["m"].write(..., ref.astype(np.float64), missing=missing)
    got = vds.load(path)
    with vds.open(path) as ds:
        for name in ("q", "m"):
            np.testing.assert_array_equal(got[name], ds[name][...])
    np.testing.assert_allclose(got["q"], ref, atol=2 / 65535)
    np.testing.assert_array_equal(got["m"], ref.astype(np.float64))  # values as written; the mask is vds.open's


@pytest.mark.parametrize("total", [4095, 4096, 4097, 40_000])
def test_load_reads_files_either_side_of_the_read_with_the_open(tmp_path, rng, total):
    # Up to 4096 bytes of values are read as the file is opened, more into the arrays after: the same values.
    ref = {"f": reference(rng, (total // 16, 2), "float32"), "i": reference(rng, (total - total // 16 * 8,), "uint8")}
    path = tmp_path / "sizes.vds"
    vds.save(path, ref, dims={"f": ["y", "x"], "i": ["z"]})
    got = vds.load(path)
    assert sum(a.nbytes for a in got.values()) == total
    assert list(got) == ["f", "i"]
    for name, a in ref.items():
        assert got[name].dtype == a.dtype and got[name].flags.c_contiguous and got[name].flags.owndata
        np.testing.assert_array_equal(got[name], a)
    np.testing.assert_array_equal(vds.load(path, ["i"])["i"], ref["i"])


def test_memory_limit_is_checked_before_anything_is_read(tmp_path):
    path = tmp_path / "m.vds"
    vds.save(path, {"a": np.zeros(100_000), "b": np.zeros(100_000, np.int8)})
    with pytest.raises(vds.OutOfMemoryError, match="900000 bytes of values, over the memory limit of 899999 bytes"):
        vds.load(path, memory_limit=899_999)
    assert vds.load(path, ["a"], memory_limit=800_000)["a"].shape == (100_000,)
    assert vds.load(path, memory_limit=900_000)["b"].dtype == np.int8


def test_load_takes_paths_names_and_limits_in_every_form_python_gives_them(tmp_path):
    a, b = np.arange(5), np.ones((2, 3))
    path = tmp_path / "forms.vds"
    vds.save(path, {"a": a, "b": b}, dims={"a": ["x"], "b": ["y", "z"]})
    for given in (path, str(path), bytes(path)):
        got = vds.load(given)
        assert list(got) == ["a", "b"]
        np.testing.assert_array_equal(got["a"], a)
        np.testing.assert_array_equal(got["b"], b)

    class Fspath:
        def __fspath__(self):
            return bytes(path)

    assert list(vds.load(Fspath(), iter(["b"]))) == ["b"]
    assert list(vds.load(path, ("b", "a"), memory_limit=np.uint32(100_000))) == ["b", "a"]
    assert vds.DEFAULT_MEMORY_LIMIT == 1 << 30
    for kwargs, kind, message in [(dict(memory_limit=-1), vds.InvalidArgumentError, "memory_limit is a number of bytes from 0 to 2"),
                                  (dict(memory_limit=True), vds.InvalidArgumentError, "memory_limit must be an integer, not True"),
                                  (dict(memory_limit=1.5), vds.InvalidArgumentError, "memory_limit must be an integer, not 1.5"),
                                  (dict(memory_limit=2**64), vds.InvalidArgumentError, "from 0 to 2\\*\\*64 - 1"),
                                  (dict(names=b"ab"), vds.InvalidArgumentError, "sequence of names, not b'ab'"),
                                  (dict(names=5), vds.InvalidArgumentError, "sequence of names, not 5"),
                                  (dict(names=[b"a"]), vds.InvalidArgumentError, "names are strings, not b'a'")]:
        with pytest.raises(kind, match=message):
            vds.load(path, **kwargs)
    with pytest.raises(TypeError, match="positional"):
        vds.load(path, None, 100)  # the limit is given by name
    with pytest.raises(TypeError, match="os.PathLike"):
        vds.load(3)


def test_load_binds_its_arguments_in_both_of_its_call_forms_alike(tmp_path):
    # On Python 3.10 and later, vds.load is called the vectorcall way with
    # arguments bound by the package; on 3.9 (and as _load_tuple everywhere) by PyO3.
    import inspect
    import sys

    fast, tupled = vds.load, vds._vds._load_tuple
    assert (fast is tupled) == (sys.version_info < (3, 10))
    for attr in ("__name__", "__qualname__", "__module__", "__doc__", "__text_signature__"):
        assert getattr(fast, attr) == getattr(tupled, attr), attr
    assert str(inspect.signature(fast)) == "(path, names=None, *, memory_limit=None)"
    assert "Reads every variable" in fast.__doc__
    path = tmp_path / "bind.vds"
    vds.save(path, {"a": np.arange(5), "b": np.ones((2, 3), np.float32)}, dims={"a": ["x"], "b": ["y", "z"]})

    class Key(str):
        pass

    calls = [((path,), {}), ((str(path), None), {}), ((path, ["b"]), {}), ((path,), dict(names=["b", "a"])),
             ((), dict(path=path)), ((), dict(names=["a"], path=bytes(path))), ((path,), dict(memory_limit=None)),
             ((path, None), dict(memory_limit=1 << 20)), ((path,), {Key("names"): ["a"], Key("memory_limit"): 10**6}),
             ((), {}), ((), dict(names=["a"])), ((path, ["a"], 10), {}), ((path, None, 10, 11), {}),
             ((path, ["a"]), dict(names=["a"])), ((path,), dict(path=path)), ((path,), dict(colour=1)),
             ((path,), {"\udc80": 1}), ((path,), {"n\u00e4mes": 1}), ((None,), {}), ((3,), {}), ((), dict(path=3.5)),
             ((path, "ab"), {}), ((path, [1]), {}), ((path,), dict(memory_limit="x")), ((path,), dict(memory_limit=-1)),
             ((path,), dict(memory_limit=10)), ((path, ["c"]), {}), ((tmp_path / "none.vds",), {})]
    raised = 0
    for args, kwargs in calls:
        results = []
        for f in (fast, tupled):
            try:
                results.append(("ok", {k: (v.dtype, v.tolist()) for k, v in f(*args, **kwargs).items()}))
            except Exception as e:
                cause = e.__cause__
                results.append((type(e), str(e), type(cause), str(cause)))
        assert results[0] == results[1], (args, kwargs)
        raised += results[0][0] != "ok"
    assert raised == 19
    with pytest.raises(TypeError, match=re.escape("load() missing 1 required positional argument: 'path'")):
        fast(names=None)
    with pytest.raises(TypeError, match=re.escape("load() got multiple values for argument 'names'")):
        fast(path, None, names=None)
    with pytest.raises(TypeError, match=re.escape("load() takes from 1 to 2 positional arguments but 3 were given")):
        fast(path, None, 1)
    with pytest.raises(TypeError, match=re.escape("load() got an unexpected keyword argument 'colour'")):
        fast(path, colour=1)
    with pytest.raises(TypeError, match=re.escape("argument 'path': expected str, bytes or os.PathLike object, not int")):
        fast(3)
    # A keyword that is not a str: the interpreter refuses it before a vectorcall function runs.
    for f, message in ((fast, "keywords must be strings" if fast is not tupled else "unexpected keyword argument '1'"),
                       (tupled, "unexpected keyword argument '1'")):
        with pytest.raises(TypeError, match=message):
            f(path, **{1: 2})


def test_a_path_object_is_asked_for_its_path_once_and_a_path_no_encoding_gives_is_refused(tmp_path):
    path = tmp_path / "once.vds"
    vds.save(path, {"a": np.arange(3)})

    class Counted:
        calls = 0

        def __fspath__(self):
            Counted.calls += 1
            if Counted.calls == 1:
                raise KeyError("the first answer")
            return str(path)

    with pytest.raises(KeyError, match="the first answer"):
        vds.load(Counted())
    assert Counted.calls == 1
    np.testing.assert_array_equal(vds.load(Counted())["a"], np.arange(3))

    class Asked:
        calls = 0

        def __fspath__(self):
            Asked.calls += 1
            return str(tmp_path / "asked.vds")

    for call in (lambda: vds.save(Asked(), {"a": np.arange(3)}, overwrite=True), lambda: vds.open(Asked()).close(),
                 lambda: vds.create(Asked(), axes=[("x", 1)], variables={"v": {"dtype": "int8", "dims": ["x"]}},
                                    overwrite=True).close(),
                 lambda: vds.fragment(Asked(), "f1").close(), lambda: vds.recover(Asked())):
        Asked.calls = 0
        call()
        assert Asked.calls == 1
    # A lone surrogate has no bytes in any encoding: Python's own UnicodeEncodeError, from every call.
    bad = str(tmp_path / "\ud800.vds")
    for call in (lambda: vds.load(bad), lambda: vds.open(bad), lambda: vds.save(bad, {"a": np.arange(3)}),
                 lambda: vds.create(bad, axes=[("x", 1)], variables={"v": {"dtype": "int8", "dims": ["x"]}}),
                 lambda: vds.recover(bad)):
        with pytest.raises(UnicodeEncodeError):
            call()
    # A surrogate escape stands for the byte it escapes, as os.fsencode has it.
    odd = tmp_path / "\udcff.vds"
    vds.save(odd, {"a": np.arange(2)})
    assert (bytes(tmp_path) + b"/\xff.vds") in [os.fsencode(p) for p in tmp_path.iterdir()]
    np.testing.assert_array_equal(vds.load(bytes(tmp_path) + b"/\xff.vds")["a"], np.arange(2))


class LyingSequence(collections.abc.Sequence):
    """A sequence that claims to be far longer than memory."""

    def __len__(self):
        return 2**40

    def __getitem__(self, i):
        return "x"


def test_more_axes_than_a_container_holds_are_refused_as_they_appear(tmp_path):
    data = {f"v{i}": np.zeros(i + 1) for i in range(1000)}
    dims = {f"v{i}": [f"a{i}"] for i in range(1000)}
    with pytest.raises(vds.InvalidArgumentError, match="more than 8 axes"):
        vds.save(tmp_path / "x.vds", data, dims=dims)


def test_errors_name_what_was_wrong(tmp_path):
    path = tmp_path / "e.vds"
    cases = [
        ({}, vds.InvalidArgumentError, "holds no array"),
        ({"a": np.float64(1.0)}, vds.InvalidArgumentError, "0-d array"),
        ({"a": np.zeros(3), "b": np.zeros(4)}, vds.InvalidArgumentError, 'axis "dim_0" is 3 long in variable "a" and 4 in variable "b"'),
        ({"s": np.array(["text"])}, vds.TypeMismatchError, 'variable "s": arrays of <U4 cannot be stored'),
        ({"c": np.zeros(2, np.complex64)}, vds.TypeMismatchError, "complex64"),
        ({"z": np.zeros(0)}, vds.InvalidArgumentError, "0 samples"),
        ({1: np.zeros(2)}, vds.InvalidArgumentError, "variable names are strings"),
        ({"m": np.ma.masked_array([1, 2], [0, 1])}, vds.InvalidArgumentError, 'variable "m" is a masked array'),
        ({"b": np.array(1.0, ">f8")}, vds.InvalidArgumentError, "0-d array"),
        ({f"v{i}": np.zeros(1) for i in range(65_536)}, vds.InvalidArgumentError, "at most 65535 variables"),
    ]
    for data, kind, message in cases:
        with pytest.raises(kind, match=message):
            vds.save(path, data)
        assert not path.exists()
    a = np.zeros((2, 3))
    for kwargs, message in [(dict(dims={"a": "xy"}), "one entry per axis, not 'xy'"),
                            (dict(dims={"a": ["x"]}), r"2 axes \(\[2, 3\]\) but 1 names"),
                            (dict(dims={"b": ["x", "y"]}), "dims names 'b', which is not in data"),
                            (dict(dims={"a": LyingSequence()}), "a list or tuple, one entry per axis"),
                            (dict(dims={"a": ["x", 2]}), "is not valid here"),
                            (dict(chunks={"a": [True, 1]}), "is not valid here"),
                            (dict(chunks={"a": list(range(1, 10))}), "9 entries; a variable has at most 8 axes"),
                            (dict(chunks={"b": [1, 1]}), "chunks names 'b', which is not in data"),
                            (dict(codec="zstq"), 'codec "zstq"'),
                            (dict(attrs=[1, 2]), "attrs is a dict of JSON values"),
                            (dict(attrs={"x": object()}), r'attrs: at \["x"\]: a value of type object')]:
        with pytest.raises(vds.InvalidArgumentError, match=message):
            vds.save(path, {"a": a}, **kwargs)
        assert not path.exists()
    vds.save(path, {"a": a})
    with pytest.raises(vds.AlreadyExistsError):
        vds.save(path, {"a": a + 1})
    np.testing.assert_array_equal(vds.load(path)["a"], a)
    with pytest.raises(vds.NotFoundError, match='no variable "b" in .*e.vds \\(variables: a\\)'):
        vds.load(path, ["b"])
    with pytest.raises(vds.InvalidArgumentError, match="sequence of names"):
        vds.load(path, "a")
    with pytest.raises(vds.InvalidArgumentError, match="names are strings, not 3"):
        vds.load(path, [3])
    with pytest.raises(vds.InvalidArgumentError, match='names gives "a" twice'):
        vds.load(path, ["a", "a"])
    with pytest.raises(vds.NotFoundError):
        vds.load(tmp_path / "absent.vds")


def test_a_variable_beyond_what_an_array_holds_is_refused_within_any_limit(tmp_path):
    # 2**63 bytes of float64 (nothing written): within a limit of 2**64 - 1, beyond what NumPy indexes.
    path = tmp_path / "huge.vds"
    with vds.create(path, axes=[("x", 2**20), ("y", 2**20), ("z", 2**20)],
                    variables={"v": {"dtype": "float64", "dims": ["x", "y", "z"], "chunks": [256, 256, 256]}}):
        pass
    for read in (lambda: vds.load(path, memory_limit=2**64 - 1), lambda: vds.open(path, memory_limit=2**64 - 1)["v"][...]):
        with pytest.raises(vds.OutOfMemoryError, match=re.escape("9223372036854775808 bytes is more than an array can hold")):
            read()


def test_a_refused_overwrite_leaves_the_old_file(tmp_path):
    path = tmp_path / "o.vds"
    vds.save(path, {"a": np.arange(5)})
    # Everything is checked before the file is touched: a bad second array leaves the first save whole.
    with pytest.raises(vds.TypeMismatchError):
        vds.save(path, {"a": np.arange(5) * 2, "b": np.array([object()] * 5)}, overwrite=True)
    np.testing.assert_array_equal(vds.load(path)["a"], np.arange(5))
    vds.save(path, {"a": np.arange(3) * 2}, overwrite=True)
    got = vds.load(path)
    np.testing.assert_array_equal(got["a"], [0, 2, 4])
    with vds.open(path) as ds:
        assert ds.verify()["ok"]


def test_a_damaged_file_raises_corrupt_file_error(tmp_path):
    path = tmp_path / "d.vds"
    vds.save(path, {"a": np.arange(100)})
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # inside the stored chunk or the index page after it
    path.write_bytes(bytes(data))
    with pytest.raises(vds.CorruptFileError):
        vds.load(path)


def test_threads_save_and_load_files_at_once(tmp_path, rng):
    arrays = [reference(rng, (50, 40), "float64") for _ in range(8)]
    errors = []

    def work(i):
        try:
            for round in range(20):
                p = tmp_path / f"t{i}.vds"
                vds.save(p, {"v": arrays[i] + round}, overwrite=True, sync=False)
                np.testing.assert_array_equal(vds.load(p)["v"], arrays[i] + round)
        except Exception as e:  # noqa: BLE001 (reported below, in the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
