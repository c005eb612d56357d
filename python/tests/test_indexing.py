"""NumPy basic indexing on vds variables, checked against NumPy itself.

Thousands of random index expressions (integers, negative integers, slices
with positive and negative steps, Ellipsis, newaxis) over random shapes and
chunkings in 1-D to 6-D, for every dtype: reads must equal NumPy's result
(values, dtype, shape, C order), and writes through the same expressions
must leave the variable equal to a NumPy array assigned the same way.
"""

import numpy as np
import pytest

import vds
from conftest import DTYPES, reference


def random_index(rng, shape):
    """One random basic index for `shape`, as NumPy accepts it."""
    items = []
    for n in shape:
        r = rng.random()
        if r < 0.25:
            items.append(int(rng.integers(-n, n)))
        elif r < 0.45:
            items.append(slice(None))
        else:
            start = int(rng.integers(-n - 2, n + 2)) if rng.random() < 0.7 else None
            stop = int(rng.integers(-n - 2, n + 2)) if rng.random() < 0.7 else None
            step = int(rng.choice([1, 1, 2, 3, -1, -2, -3, 5]))
            items.append(slice(start, stop, step))
    if rng.random() < 0.3:
        # Replace a run of axes by an Ellipsis.
        i = int(rng.integers(0, len(items) + 1))
        j = int(rng.integers(i, len(items) + 1))
        items[i:j] = [Ellipsis]
    for _ in range(int(rng.integers(0, 3)) if rng.random() < 0.3 else 0):
        items.insert(int(rng.integers(0, len(items) + 1)), None)
    if len(items) == 1 and rng.random() < 0.5:
        return items[0]
    return tuple(items)


def make(tmp_path, rng, ndim, dtype, name="v.vds"):
    shape = tuple(int(n) for n in rng.integers(1, [0, 40, 16, 9, 6, 5, 4][ndim] + 1, ndim))
    chunks = [int(rng.integers(1, n + 1)) for n in shape]
    codec = [None, "deflate", "zstd"][int(rng.integers(0, 3))]
    dims = [f"d{i}" for i in range(ndim)]
    ds = vds.create(tmp_path / name, axes=list(zip(dims, shape)),
                    variables={"v": {"dtype": dtype, "dims": dims, "chunks": chunks, "codec": codec}}, sync=False)
    ref = reference(rng, shape, dtype)
    ds["v"][...] = ref
    ds.commit()
    return ds, ref


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4, 5, 6])
def test_reads_match_numpy(tmp_path, rng, dtype, ndim):
    ds, ref = make(tmp_path, rng, ndim, dtype)
    v = ds["v"]
    assert v.shape == ref.shape and v.dtype == ref.dtype
    for _ in range(150):
        key = random_index(rng, ref.shape)
        want = ref[key]
        got = v[key]
        if isinstance(want, np.ndarray):
            assert isinstance(got, np.ndarray) and got.flags.c_contiguous, key
            assert got.shape == want.shape and got.dtype == want.dtype, key
            np.testing.assert_array_equal(got, want, err_msg=repr(key))
        else:
            assert type(got) is type(want) and got == want, key
    ds.close()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4, 5, 6])
def test_writes_match_numpy(tmp_path, rng, dtype, ndim):
    ds, ref = make(tmp_path, rng, ndim, dtype)
    v = ds["v"]
    for _ in range(40):
        key = random_index(rng, ref.shape)
        shape = np.shape(ref[key])
        if rng.random() < 0.2:
            value = reference(rng, (), dtype)[()]  # a scalar, broadcast
        else:
            value = reference(rng, shape, dtype)
            if rng.random() < 0.3 and value.ndim > 1:
                value = np.asfortranarray(value)
        ref[key] = value
        v[key] = value
    ds.commit()
    np.testing.assert_array_equal(v[...], ref)
    ds.close()
    with vds.open(tmp_path / "v.vds") as r:
        np.testing.assert_array_equal(np.asarray(r["v"]), ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_whole_variable_writes_match_numpy(tmp_path, rng, dtype):
    """`v[...] = value` for every kind of value: an array that matches the variable (written
    as it is), and ones that need a conversion, a copy or broadcasting first."""
    ds, ref = make(tmp_path, rng, 3, dtype)
    v = ds["v"]
    fresh = reference(rng, ref.shape, dtype)
    values = [
        fresh,  # matches: C order, the variable's dtype and shape
        np.asfortranarray(reference(rng, ref.shape, dtype)),
        reference(rng, ref.shape, dtype)[::-1],  # a view with a negative step
        reference(rng, ref.shape[1:], dtype),  # broadcast along the first axis
        reference(rng, (), dtype)[()],  # a scalar
        reference(rng, ref.shape, {"b": "bool", "i": "int8", "u": "uint8", "f": "float32"}[ref.dtype.kind]),  # converted
        reference(rng, ref.shape, dtype).tolist(),  # a nested list
    ]
    for value in values:
        ref[...] = value
        v[...] = value
        np.testing.assert_array_equal(v[...], ref)
    # A value the variable cannot take leaves it as it was.
    with pytest.raises(vds.VdsError):
        v[...] = np.zeros(ref.shape[:-1] + (ref.shape[-1] + 1,), ref.dtype)
    np.testing.assert_array_equal(v[...], ref)
    ds.commit()
    ds.close()
    with vds.open(tmp_path / "v.vds") as r:
        np.testing.assert_array_equal(r["v"][...], ref)


def test_fortran_order_reads(tmp_path, rng):
    ds, ref = make(tmp_path, rng, 3, "float64")
    v = ds["v"]
    for _ in range(50):
        key = random_index(rng, ref.shape)
        got = v.read(key, order="F")
        want = ref[key]
        if isinstance(want, np.ndarray):
            assert got.flags.f_contiguous and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    ds.close()


def test_index_errors_match_numpy(tmp_path, rng):
    ds, ref = make(tmp_path, rng, 2, "int32")
    v = ds["v"]
    n0, n1 = ref.shape
    for key in [n0, -n0 - 1, (0, n1), (0, 0, 0), (..., ...), (0, 1.5), "x"]:
        with pytest.raises(IndexError):
            ref[key]
        with pytest.raises(IndexError):
            v[key]
        with pytest.raises(IndexError):
            v[key] = 0
    # Advanced indexing (lists, arrays, booleans) is refused rather than guessed at.
    for key in [[0, 1], np.array([0]), True, (0, [1])]:
        ref[key]
        with pytest.raises(IndexError, match="valid indices"):
            v[key]
    with pytest.raises(vds.OutOfRangeError, match=f"index {n0} is out of bounds for axis 0 with size {n0}"):
        v[n0]
    with pytest.raises(ValueError, match="zero"):
        v[::0]
    # NumPy integers and huge Python integers, as NumPy takes them.
    for key in [np.int64(1), (np.uint8(1), np.int32(-1)), slice(2**70, None), slice(None, None, 2**70),
                slice(-2**70, 2**70, -2**65), (slice(None, None, -2**70), 0)]:
        np.testing.assert_array_equal(v[key], ref[key], err_msg=repr(key))
    with pytest.raises(vds.OutOfRangeError):
        v[2**70]
    ds.close()
