"""The xarray backend of vds: ``xr.open_dataset("f.vds", engine="vds")``.

Registered as the entry point ``vds`` (pyproject.toml), and guessed from a
file's first line (``VDS <major>.<minor>``). Opening reads the descriptor
only: variables are lazy (``LazilyIndexedArray`` over basic indexing, so a
selection reads only the chunks it overlaps); coordinates come from the
axes' first and last samples, or from a 1-D variable named like its axis
(how :func:`vds.from_xarray` keeps coordinates that are not evenly spaced).
Units and attributes are carried; ``encoding["preferred_chunks"]`` holds the
storage chunks, so ``chunks={}`` gives Dask arrays aligned to them.
``memory_limit=`` (as :func:`vds.open` takes it) bounds the axes' coordinates
made at opening and every read.
"""

import os
import re
import stat
from collections.abc import Mapping

import numpy as np
from xarray import Dataset as XrDataset
from xarray import Variable as XrVariable
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.coding.times import CFDatetimeCoder, CFTimedeltaCoder
from xarray.core import indexing

from . import open as vds_open
from .errors import InvalidArgumentError, TypeMismatchError

#: Dataset attribute listing variables that are coordinates but not axes (written by from_xarray).
COORDINATES_ATTR = "_vds_coordinates"


class VdsBackendArray(BackendArray):
    """A vds variable as xarray's lazy backend array (basic indexing, read on demand)."""

    def __init__(self, var):
        self.var = var
        self.shape = var.shape
        self.dtype = var.dtype

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._raw)

    def _raw(self, key):
        return self.var[key]


def _is_cf_time(attrs):
    """Whether attributes mark integers as CF datetimes ("<unit> since <date>")."""
    return " since " in str(attrs.get("units", ""))


def _is_cf_timedelta(attrs):
    """Whether attributes mark numbers as timedeltas (as xarray's encoder writes them)."""
    return str(attrs.get("dtype", "")).startswith("timedelta64")


def _variable(var, lazy=True, decode_times=True):
    attrs = dict(var.attrs)
    if var.unit:
        attrs.setdefault("units", var.unit)
    data = indexing.LazilyIndexedArray(VdsBackendArray(var)) if lazy else var[...]
    encoding = {
        "preferred_chunks": dict(zip(var.dims, var.chunks)),
        "chunksizes": var.chunks,
        "dtype": var.dtype,
        "vds_codec": var.codec,
    }
    out = XrVariable(var.dims, data, attrs, encoding)
    if decode_times and _is_cf_time(attrs):
        out = CFDatetimeCoder().decode(out, name=var.name)
    elif decode_times and _is_cf_timedelta(attrs):
        out = CFTimedeltaCoder().decode(out, name=var.name)
    return out


def open_vds_dataset(path, drop_variables=None, decode_times=True, memory_limit=None):
    """Opens the container at ``path`` as a lazy xarray Dataset (what ``engine="vds"`` calls).

    With ``decode_times``, integer variables with CF time units ("hours since
    2020-01-01", as :func:`from_xarray` writes datetimes) read as datetime64,
    and those it wrote from timedeltas as timedelta64.

    The coordinates of the axes are made at opening (xarray indexes them):
    an axis whose coordinates take more than ``memory_limit`` (as
    :func:`vds.open` takes it, default 1 GiB; it bounds every later read
    too) raises :class:`vds.OutOfMemoryError`.
    """
    ds = vds_open(path, memory_limit=memory_limit)
    try:
        attrs = dict(ds.attrs)
        extra_coords = set(attrs.pop(COORDINATES_ATTR, []))
        drop = set([drop_variables] if isinstance(drop_variables, str) else drop_variables or [])
        data_vars, coords = {}, {}
        for name in ds:
            if name in drop:
                continue
            var = ds[name]
            if name in ds.axes and var.dims == (name,):
                coords[name] = _variable(var, False, decode_times)  # an index: xarray loads it anyway
            elif name in extra_coords or name in ds.axes:  # named like an axis it does not span alone: a coordinate
                coords[name] = _variable(var, True, decode_times)
            else:
                data_vars[name] = _variable(var, True, decode_times)
        for axis in ds.axes.values():
            if axis.name not in coords and axis.name not in drop:
                coords[axis.name] = XrVariable(axis.name, axis.values, {"units": axis.unit} if axis.unit else {})
        out = XrDataset(data_vars, coords, attrs=attrs)
    except BaseException:
        ds.close()
        raise
    out.set_close(ds.close)
    return out


class VdsBackendEntrypoint(BackendEntrypoint):
    """Opens libvds containers in xarray: ``xr.open_dataset("f.vds", engine="vds")``."""

    description = "Open libvds containers (.vds) lazily, with coordinates, units and attributes"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "decode_times", "memory_limit")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, decode_times=True, memory_limit=None):
        """Opens the container ``filename_or_obj`` lazily (see :func:`open_vds_dataset`)."""
        return open_vds_dataset(os.fspath(filename_or_obj), drop_variables, decode_times, memory_limit)

    def guess_can_open(self, filename_or_obj):
        """Whether the file's first line is a vds version line, ``VDS 1.8`` (or its name ends in .vds)."""
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        if str(path).endswith(".vds"):
            return True
        try:
            # Only a regular file is looked into: a FIFO or a device would block the read (or the open).
            if not stat.S_ISREG(os.stat(path).st_mode):
                return False
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            try:
                head = os.read(fd, 16)
            finally:
                os.close(fd)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            return False
        return re.match(rb"VDS \d+\.\d+\n", head) is not None


def _axis_of(dataset, dim):
    """The axis spec of ``dim``: coordinates on the axis when evenly spaced floats, else (other
    values, or a coordinate of more than one dimension named like this one) in a variable."""
    size = dataset.sizes[dim]
    spec = {"name": dim, "size": size}
    coord = dataset.coords.get(dim)
    if coord is None:
        return spec, None
    values = np.asarray(coord.values)
    units = coord.attrs.get("units")
    if units is not None:
        spec["unit"] = str(units)
    if coord.ndim == 1 and values.dtype.kind == "f" and size >= 1:
        first, last = float(values[0]), float(values[-1])
        # Not finite (a NaN or infinite end): kept as a variable, as uneven coordinates are.
        if np.isfinite([first, last]).all() and (
                size == 1 or np.allclose(values, np.linspace(first, last, size), rtol=1e-12, atol=abs(last - first) * 1e-12)):
            spec["first"], spec["last"] = first, last
            return spec, None
    return spec, coord


def _attrs(attrs):
    """xarray attributes as JSON values: NumPy values as numbers and lists, bytes as text, and
    NaNs and infinities (JSON has none), alone or in lists, as the strings "nan", "inf", "-inf"."""
    def plain(v, depth=0):
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, (np.ndarray, np.generic)):
            v = v.tolist()
        if isinstance(v, float) and not np.isfinite(v):
            return str(v)
        if isinstance(v, (list, tuple)) and depth < 128:  # deeper: left for the conversion to refuse
            return [plain(x, depth + 1) for x in v]
        return v

    out = {}
    for k, v in attrs.items():
        out[str(k)] = plain(v)
    return out


def from_xarray(dataset, path, chunks=None, codec="zstd", overwrite=False, sync=True, slab_bytes=64 << 20):
    """Writes an xarray Dataset (or DataArray) to a new container at ``path``.

    Every dimension becomes an axis; evenly spaced float coordinates become
    the axis's first and last coordinates, other coordinates (integers,
    uneven spacing, 2-D) are kept as variables. Data variables keep their
    dtype, ``units`` (as the unit) and attributes; the dataset's attributes
    are kept. ``chunks``: a dict from dimension to chunk size, one size for
    every dimension, or None for the variables' own chunking
    (``encoding["chunksizes"]``, Dask chunks) or the library's default.
    ``codec``: as in :func:`vds.create`. Data are written in slabs of about
    ``slab_bytes``, so Dask-backed or lazily loaded variables never load
    whole. Returns the path.
    """
    from . import create

    if chunks is not None and not isinstance(chunks, Mapping):
        chunks = _chunk_size(chunks, "chunks")
    elif chunks is not None:
        chunks = {d: _chunk_size(c, f"chunks[{d!r}]") for d, c in chunks.items()}
    if hasattr(dataset, "to_dataset") and not hasattr(dataset, "data_vars"):
        dataset = dataset.to_dataset(name=dataset.name or "data")
    if not isinstance(dataset, XrDataset):
        raise InvalidArgumentError(f"from_xarray writes an xarray Dataset or DataArray, not {type(dataset).__name__}")
    axes, coord_vars = [], {}
    for dim in dataset.sizes:
        spec, coord = _axis_of(dataset, dim)
        axes.append(spec)
        if coord is not None:
            coord_vars[dim] = coord
    extra = [n for n in dataset.coords if n not in dataset.dims]
    to_write = dict(coord_vars)
    to_write.update({n: dataset.coords[n] for n in extra})
    to_write.update(dataset.data_vars)
    variables, encoded = {}, {}
    for name, da in to_write.items():
        var = da.variable
        # Datetimes and timedeltas are stored as CF-encoded integers ("hours since ...").
        if var.dtype.kind == "M":
            var = CFDatetimeCoder().encode(var, name=name)
        elif var.dtype.kind == "m":
            var = CFTimedeltaCoder().encode(var, name=name)
        encoded[name] = var
        if da.ndim == 0:
            raise InvalidArgumentError(f"variable {name!r} is a scalar; vds variables span 1 to 8 axes (keep it as an attribute)")
        dtype = np.dtype(var.dtype)
        if dtype.kind not in "biuf" or dtype.itemsize > 8 or dtype == np.float16:
            raise TypeMismatchError(f"variable {name!r} holds {dtype}, which vds does not store (integers, float32/64, bool, "
                            "datetimes and timedeltas)")
        attrs = _attrs(var.attrs)
        unit = attrs.pop("units", "")
        if str(name) in variables:
            # Names are strings in a container: two that read alike would be one variable, the other lost.
            other = next(n for n in encoded if n is not name and str(n) == str(name))
            raise InvalidArgumentError(f"variables {other!r} and {name!r} would both be named {str(name)!r} in the container: rename one")
        variables[str(name)] = {"dtype": dtype, "dims": [str(d) for d in da.dims], "codec": codec,
                                "chunks": _chunks_for(da, chunks), "unit": str(unit), "attrs": attrs}
    attrs = _attrs(dataset.attrs)
    if extra:
        attrs[COORDINATES_ATTR] = [str(n) for n in extra]
    with create(path, axes=axes, variables=variables, attrs=attrs, overwrite=overwrite, sync=sync) as ds:
        for name, var in encoded.items():
            _write_slabs(ds[str(name)], var, slab_bytes)
    return path


def _chunk_size(c, what):
    """A chunk size given to from_xarray: a positive integer (NumPy's too)."""
    from . import _count

    if _count(c, what) < 1:
        raise InvalidArgumentError(f"{what} is a positive chunk size, not {c!r}")
    return int(c)


def _chunks_for(da, chunks):
    if chunks is None:
        own = da.encoding.get("chunksizes")
        if own is not None and len(own) == da.ndim:
            return [int(c) for c in own]
        if da.chunks is not None:
            return [int(c[0]) for c in da.chunks]
        return None
    if isinstance(chunks, int):
        return [min(chunks, n) for n in da.shape]
    return [int(chunks.get(d, n)) for d, n in zip(da.dims, da.shape)]


def _write_slabs(var, da, slab_bytes):
    """Writes ``da`` (an xarray Variable) into ``var`` in slabs along its first axis, whole chunks at a time."""
    n = da.shape[0]
    row = max(1, int(np.prod(da.shape[1:], dtype=np.int64)) * da.dtype.itemsize)
    step = max(1, slab_bytes // row)
    c = var.chunks[0]
    step = max(c, step // c * c)
    dim = da.dims[0]
    for start in range(0, n, step):
        stop = min(n, start + step)
        var[start:stop] = np.asarray(da.isel({dim: slice(start, stop)}).values)
