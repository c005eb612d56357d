"""Shared fixtures of the vds tests: reference arrays of every dtype."""

import zlib

import numpy as np
import pytest

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool"]


def reference(rng, shape, dtype):
    """Random values of `dtype` over its whole range (floats: normal), as NumPy makes them."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name, so that a failure repeats."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
