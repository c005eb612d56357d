"""libvds for Python: chunked N-dimensional arrays in one crash-safe, checksummed file.

    import numpy as np, vds

    with vds.create("survey.vds",
                    axes=[("inline", 100), ("crossline", 80), {"name": "time", "size": 60, "unit": "ms", "last": 236.0}],
                    variables={"amplitude": {"dtype": "float32", "dims": ["inline", "crossline", "time"],
                                             "chunks": [32, 32, 32], "codec": "zstd"}},
                    attrs={"survey": "quickstart"}) as ds:
        ds["amplitude"][...] = np.random.default_rng(0).standard_normal((100, 80, 60), np.float32)

    with vds.open("survey.vds") as ds:
        amp = ds["amplitude"]
        plane = amp[42]              # NumPy basic indexing; a new C-order array
        trace = amp[3, -1, ::-2]     # negative indices and steps
        whole = np.asarray(amp)

    # A whole small file in one call each way, as numpy.savez and numpy.load:
    vds.save("small.vds", {"t": np.arange(10.0)}, attrs={"station": "A"})
    t = vds.load("small.vds")["t"]

Every libvds error is raised as a subclass of :class:`vds.errors.VdsError`
carrying the library's message. Reads and writes release the GIL, so
threads read one dataset in parallel.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from . import _vds, errors
from ._dataset import DEFAULT_MEMORY_LIMIT, Attributes, Axis, Dataset, Variable, _count, _fspath, _natural, _size, _text, _what
from ._openvds import from_openvds, to_openvds
from ._segy import from_segy, to_segy
from .errors import (
    AlreadyExistsError,
    ClosedError,
    CorruptFileError,
    InternalError,
    InvalidArgumentError,
    LockedError,
    NotFoundError,
    OutOfMemoryError,
    OutOfRangeError,
    PoisonedError,
    ReadOnlyError,
    TypeMismatchError,
    UnsupportedError,
    VdsError,
    VdsIOError,
)

__version__ = _vds.__version__
#: The newest format version this build writes, (major, minor).
FORMAT_VERSION = tuple(_vds.FORMAT_VERSION)

__all__ = [
    "open", "create", "save", "load", "fragment", "recover", "publish", "from_xarray", "from_openvds", "to_openvds", "from_segy", "to_segy",
    "Dataset", "Variable", "Axis", "Attributes", "errors",
    "VdsError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "CorruptFileError", "VdsIOError",
    "UnsupportedError", "TypeMismatchError", "OutOfRangeError", "ReadOnlyError", "LockedError", "OutOfMemoryError",
    "PoisonedError", "ClosedError", "InternalError", "DEFAULT_MEMORY_LIMIT", "FORMAT_VERSION",
]

_MODES = {"r": False, "r+": True}


def open(path: str | os.PathLike[str], mode: str = "r", *, sync: bool = True, memory_limit: int | None = None,  # noqa: A001
         cache_size: int | None = None, allow_external_paths: bool = False) -> Dataset:
    """Opens the container at ``path``: a file, or an ``http://``, ``https://``
    or ``s3://`` URL read in place with range requests (read-only; S3 settings
    from the ``AWS_*`` environment variables, such as ``AWS_ENDPOINT_URL``).

    ``mode``: ``"r"`` (read-only, any number of readers) or ``"r+"`` (read
    and write; takes the file's writer lock, so a second writer gets
    :class:`LockedError`). ``sync=False`` skips fsync at commit (scratch
    files). ``memory_limit`` caps every buffer a read or write allocates
    (default 1 GiB); ``cache_size`` bounds the decoded-chunk cache (default
    64 MiB). ``allow_external_paths`` lets external-file names leave the
    container's directory (off: they come from the file).

    Raises :class:`NotFoundError` (also a FileNotFoundError),
    :class:`CorruptFileError`, :class:`UnsupportedError`, :class:`LockedError`.
    """
    try:
        write = _MODES.get(mode)
    except TypeError:  # unhashable, such as a list
        write = None
    if write is None:
        raise InvalidArgumentError(f"mode must be 'r' or 'r+', not {mode!r} (vds.create makes a new file)")
    path = _fspath(path)  # once: the dataset keeps it as a str
    core = _vds.open(path, write, sync, _size(memory_limit, "memory_limit"), _size(cache_size, "cache_size"), allow_external_paths)
    return Dataset(core, path, mode, (sync, memory_limit, cache_size, allow_external_paths))


def _number(value, what, *args):
    """A coordinate: an int or float, NumPy's too (not a string or a bool), as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"{_what(what, args)} must be a number, not {value!r}")
    return float(value)


def _extents(value, what, item, *args):
    """A shape given as a sequence of whole numbers, not negative, as a list. ``what`` names the
    sequence in the error, ``item`` one of its extents (both formatted with ``args``)."""
    if type(value) is not list and type(value) is not tuple and (isinstance(value, (str, bytes)) or not hasattr(value, "__iter__")):
        raise InvalidArgumentError(f"{_what(what, args)} is a sequence of extents (one per axis), not {value!r}")
    return [_natural(c, item, *args) for c in value]


def _names(value, what, *args):
    """A sequence of names as a list; a single string is refused rather than split into letters."""
    if type(value) is list:
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InvalidArgumentError(f"{_what(what, args)} is a sequence of names, not {value!r}")
    return list(value)


def save(path: str | os.PathLike[str], data: Mapping[str, Any], *, dims: Mapping[str, Sequence[str]] | None = None,
         attrs: Mapping[str, Any] | None = None, chunks: Mapping[str, Sequence[int]] | None = None, codec: Any = None,
         overwrite: bool = False, sync: bool = True) -> None:
    """Writes the arrays of ``data`` (a dict from variable name to array) as a new container, in one call.

    The whole-file counterpart of :func:`create`, as ``numpy.savez`` is of
    a file opened for writing: the container is created, written,
    committed and closed without a Python object in between, which is what
    a small file costs most. ``dims`` names each variable's axes (a dict
    from variable name to a list or tuple of axis names); without it a
    variable's axes are ``dim_0``, ``dim_1``, ... (as xarray names them),
    and axes that share a name must share a length. ``attrs``: the
    dataset's attributes. ``chunks``: a dict from variable name to chunk
    shape (a list or tuple; default: the library's chunking). ``codec``
    applies to every variable, in any form :func:`create` takes (default:
    uncompressed). ``overwrite`` and ``sync`` as in :func:`create`.

    Overwriting replaces the file in place (SPEC.md 7.6): until the call
    returns, a reader opening the file may find the new container with
    nothing written yet (its fill values), and a crash in between leaves it
    so. To replace a file that others read, save under another name and
    ``os.replace`` it over the old one.

    Values that are not NumPy arrays go through ``numpy.asarray``; arrays
    keep their dtype (int8 to uint64, float32, float64, bool; others raise
    :class:`TypeMismatchError`), and one that is not contiguous or not in
    the machine's byte order is copied first. 0-d arrays, arrays with an
    axis of length 0 and masked arrays (the mask would be lost; use
    :func:`create` with ``mask=True``) are refused with
    :class:`InvalidArgumentError`. Everything is checked before the file
    is touched, so a refused save leaves an existing file as it was; an
    I/O error while writing removes a file the call made, and leaves one
    it was overwriting an empty container.

    Read it back with :func:`load`, or with :func:`open` for regions,
    attributes and the rest.
    """
    _vds.save(path, data if type(data) is dict else dict(data), dims if dims is None or type(dims) is dict else dict(dims),
              dict(attrs) if attrs is not None and type(attrs) is not dict and isinstance(attrs, Mapping) else attrs,
              chunks if chunks is None or type(chunks) is dict else dict(chunks),
              None if codec is None else _codec_spec(codec), overwrite, sync)


#: vds.load(path, names=None, *, memory_limit=None): every variable whole, in one call (its docstring
#: says all). Compiled: a Python function around it made a tiny file's load about a tenth slower.
load = _vds.load


def fragment(path: str | os.PathLike[str], name: str) -> Dataset:
    """Opens the container at ``path`` to write the fragment file ``name`` (a str) beside it.

    For parallel writers (processes, Dask tasks, MPI ranks): each writes its
    part into its own fragment, with no lock between them; closing the
    returned dataset seals the fragment, and one
    :meth:`Dataset.merge_fragments` adopts them all atomically. Give each
    writer whole chunks: fragments holding the same chunk are refused.
    """
    path = _fspath(path)  # once: the dataset keeps it as a str
    core = _vds.create_fragment(path, _text(name, "the name of a fragment"))
    return Dataset(core, path, "fragment", (True, None, None, False))


def from_xarray(dataset: Any, path: str | os.PathLike[str], chunks: int | Mapping[str, int] | None = None, codec: Any = "zstd",
                overwrite: bool = False, sync: bool = True) -> str | os.PathLike[str]:
    """Writes an xarray Dataset (so any netCDF, HDF5, GRIB or Zarr file xarray opens) to a new container.

    Dimensions become axes, with evenly spaced float coordinates as the
    axes' first and last values and other coordinates kept as variables;
    data variables keep their dtype, ``units`` and attributes (datetimes and
    timedeltas are stored as CF-encoded integers, which the xarray backend
    decodes again). ``chunks``: a
    dict from dimension to chunk size, one size, or None (the variables'
    own chunking). ``codec`` as in :func:`create`. Needs xarray. Returns ``path``.
    """
    from .xarray_backend import from_xarray as write

    return write(dataset, path, chunks=chunks, codec=codec, overwrite=overwrite, sync=sync)


def recover(path: str | os.PathLike[str]) -> tuple[int | None, int]:
    """Rolls a container whose newest commit is damaged back to its older commit.

    Returns ``(damaged, commit)``: the damaged commit's number (None when the
    newest commit was intact and nothing was written) and the commit the file shows.
    """
    return _vds.recover(path)


def publish(path: str | os.PathLike[str], url: str) -> int:
    """Uploads the container at ``path`` to an ``s3://`` URL; returns the bytes uploaded.

    What is uploaded is a compacted copy of the last commit, external-file
    slots folded in, in the cloud-optimized arrangement (every index page
    right after the head), so that :func:`open` on the URL fetches the whole
    index in one request. The copy is made in a temporary file and uploaded
    in parts when large; readers of the object see the old one or the new
    one, never a mix. The container itself is not changed. Endpoint and
    credentials come from the standard ``AWS_*`` variables, as for
    :func:`open`.
    """
    return _vds.publish(path, url)


def _scalar(x):
    """A fill value or no-value as JSON: numbers, booleans, and non-finite floats as strings."""
    if x is None:
        return None
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


def _axis_spec(a):
    if type(a) is tuple and len(a) == 2 and type(a[0]) is str and type(a[1]) is int and a[1] >= 0:
        return {"name": a[0], "samples": a[1]}  # (name, size), the common form: as below, without the lookups
    if isinstance(a, Axis):
        a = {"name": a.name, "size": a.size, "unit": a.unit, "first": a.first, "last": a.last,
             "growable": a.growable, "max_size": a.max_size}
    if isinstance(a, (tuple, list)):
        if len(a) != 2:
            raise InvalidArgumentError(f"an axis is (name, size) or a dict; got {a!r}")
        a = {"name": a[0], "size": a[1]}
    if not isinstance(a, dict):
        raise InvalidArgumentError(f"an axis is (name, size) or a dict; got {a!r}")
    if not _AXIS_KEYS.issuperset(a):
        raise InvalidArgumentError(f"axis {a.get('name')!r}: unknown keys {sorted(set(a) - _AXIS_KEYS)} (known: {sorted(_AXIS_KEYS)})")
    if "name" not in a or "size" not in a:
        raise InvalidArgumentError(f"an axis needs a name and a size; got {a!r}")
    # Only what was given: the extension's defaults are the library's.
    out = {"name": _text(a["name"], "the name of an axis"), "samples": _natural(a["size"], "the size of axis {!r}", a["name"])}
    if a.get("unit") is not None:
        out["unit"] = a["unit"]
    for key in ("first", "last"):
        if a.get(key) is not None:
            out[key] = _number(a[key], "{} of axis {!r}", key, a["name"])
    if a.get("max_size") is not None:
        out["max_samples"] = _natural(a["max_size"], "max_size of axis {!r}", a["name"])
    if a.get("growable") or a.get("max_size") is not None:
        out["growable"] = True
    return out


_AXIS_KEYS = {"name", "size", "unit", "first", "last", "growable", "max_size"}

# NumPy dtype names by the names and types people pass (np.dtype() of a string costs a microsecond or two).
_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(d, what, name):
    """The NumPy name of dtype ``d``; ``what`` names it in the error (formatted with the variable's ``name``)."""
    try:
        return _DTYPE_NAMES[d]
    except (KeyError, TypeError):  # TypeError: an unhashable dtype-like
        try:
            name = np.dtype(d).name
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{what.format(name)} {d!r} is not a data type (such as 'float32' or 'int16')") from None
        if isinstance(d, (str, type, np.dtype)) and len(_DTYPE_NAMES) < 256:
            _DTYPE_NAMES[d] = name
        return name


def _of(name):
    """Where a codec error is: ``"variable 'v': "``, or nothing for the codec of every variable."""
    return "" if name is None else f"variable {name!r}: "


def _level(codec, level, name):
    """A codec's level: an integer from 0 to 255 (the codec says which it takes)."""
    n = _count(level, "{}the level of codec {!r}", _of(name), codec)
    if not 0 <= n <= 255:
        raise InvalidArgumentError(f"{_of(name)}the level of codec {codec!r} must be from 0 to 255, not {n}")
    return n


def _codec_spec(c, name=None):
    """A codec in the form the extension takes; ``name``, the variable's, goes in error messages."""
    if c is None or c == "none":
        return {"id": "none"}
    if isinstance(c, str) and c.startswith("bounded:"):
        try:
            return {"id": "bounded", "tolerance": float(c[len("bounded:"):])}
        except ValueError:
            raise InvalidArgumentError(f"{_of(name)}codec {c!r}: expected 'bounded:TOLERANCE', such as 'bounded:0.01'") from None
    if isinstance(c, str):
        return {"id": c}
    if isinstance(c, (tuple, list)) and len(c) == 2:
        level = c[1]
        return {"id": c[0], "level": level if type(level) is int and 0 <= level <= 255 else _level(c, level, name)}
    if isinstance(c, dict):
        d = dict(c)
        if d.get("level") is not None:
            d["level"] = _level(c, d["level"], name)
        if "relative" in d:
            # A fraction of the value range, resolved to the absolute bound the file keeps.
            if d.get("id") != "bounded" or "range" not in d or "tolerance" in d:
                raise InvalidArgumentError(f"{_of(name)}codec {c!r}: 'relative' needs id 'bounded' and a 'range' (min, max), and no 'tolerance'")
            lo, hi = (float(x) for x in d.pop("range"))
            d["tolerance"] = float(d.pop("relative")) * (hi - lo)
        return d
    raise InvalidArgumentError(f"{_of(name)}codec {c!r}: expected None, 'deflate', 'zstd', 'bounded:TOLERANCE', (name, level) or a dict")


_VAR_KEYS = {"dtype", "dims", "chunks", "codec", "fill_value", "unit", "attrs", "lods", "lod_axes", "lod_method",
             "partitionings", "no_value", "quantization", "margin", "mask", "blocks"}
# A variable given with these alone needs none of the other keys' checks.
_BASIC_VAR_KEYS = {"dtype", "dims", "chunks", "codec"}


def _variable_spec(name, v):
    if type(v) is not dict and not isinstance(v, Mapping):
        raise InvalidArgumentError(f"variable {name!r} is a dict with a dtype and dims, not {v!r}")
    if not _VAR_KEYS.issuperset(v):
        raise InvalidArgumentError(f"variable {name!r}: unknown keys {sorted(set(v) - _VAR_KEYS)} (known: {sorted(_VAR_KEYS)})")
    # Only what was given (a key given as None is not given): the extension's defaults are the library's.
    get = v.get
    try:
        dtype, dims = v["dtype"], v["dims"]
    except KeyError:
        dtype = dims = None
    if dtype is None or dims is None or type(name) is not str:
        _text(name, "the name of a variable")
        if dtype is None or dims is None:
            missing = "dtype" if get("dtype") is None else "dims"
            raise InvalidArgumentError(f"variable {name!r} needs a dtype and dims; it has no {missing}")
    out = {"name": name, "dtype": _dtype_name(dtype, "the dtype of variable {!r}:", name), "axes": _names(dims, "dims of variable {!r}", name)}
    chunks = get("chunks")
    if chunks is not None:
        # A list or tuple of ints, the common form, without a call per extent.
        out["chunks"] = ([c if type(c) is int and c >= 0 else _natural(c, "a chunk extent of variable {!r}", name) for c in chunks]
                         if type(chunks) is list or type(chunks) is tuple
                         else _extents(chunks, "chunks of variable {!r}", "a chunk extent of variable {!r}", name))
    codec = get("codec")
    if codec is not None:
        out["codec"] = _codec_spec(codec, name)
    if _BASIC_VAR_KEYS.issuperset(v):
        return out  # nothing else given
    for key in ("fill_value", "no_value"):
        if get(key) is not None:
            out[key] = _scalar(v[key])
    if get("unit"):
        out["unit"] = v["unit"]
    if get("attrs"):
        out["attrs"] = dict(v["attrs"]) if isinstance(v["attrs"], Mapping) else v["attrs"]
    if get("lods"):
        levels = _natural(v["lods"], "lods of variable {!r}", name)
        if levels > 255:
            raise InvalidArgumentError(f"lods of variable {name!r} is a number of levels of detail, not {levels}")
        out["lods"] = {"levels": levels, "axes": _names(get("lod_axes") or [], "lod_axes of variable {!r}", name),
                       "method": get("lod_method", "average")}
    parts = get("partitionings")
    if parts:
        if isinstance(parts, (str, bytes)) or not hasattr(parts, "__iter__"):
            raise InvalidArgumentError(f"partitionings of variable {name!r} is a sequence of chunk shapes, not {parts!r}")
        out["partitionings"] = [_extents(p, "a partitioning of variable {!r}", "a partitioning extent of variable {!r}", name)
                                for p in parts]
    q = get("quantization")
    if q is not None:
        if isinstance(q, (tuple, list)) and len(q) == 3:
            out["quantization"] = {"storage": _dtype_name(q[0], "the quantization storage of variable {!r}:", name),
                                   "min": _number(q[1], "the quantization min of variable {!r}", name),
                                   "max": _number(q[2], "the quantization max of variable {!r}", name)}
        elif isinstance(q, Mapping):
            out["quantization"] = dict(q)
        else:
            raise InvalidArgumentError(f"quantization of variable {name!r} is (storage dtype, min, max) or a dict, not {q!r}")
    margin = get("margin")
    if margin is not None:
        if isinstance(margin, (str, bytes)) or not hasattr(margin, "__iter__"):
            m = _natural(margin, "margin of variable {!r}", name)
            out["margin"] = [m, m]
        else:
            out["margin"] = _extents(margin, "margin of variable {!r}", "margin of variable {!r}", name)
            if len(out["margin"]) != 2:
                raise InvalidArgumentError(f"margin of variable {name!r} is one extent or (before, after), not {margin!r}")
    if get("mask"):
        out["mask"] = True
    blocks = _blocks_spec(name, get("blocks"))
    if blocks is not None:
        out["blocks"] = blocks
    return out


def _blocks_spec(name, blocks):
    """None (the default blocks), [] (whole chunks: ``False``) or a block shape."""
    if blocks is None:
        return None
    if isinstance(blocks, (bool, np.bool_)):
        if blocks:
            raise InvalidArgumentError(f"variable {name!r}: blocks=True: give a block shape, or leave blocks out for the default")
        return []
    if isinstance(blocks, (str, bytes)) or not hasattr(blocks, "__iter__"):
        raise InvalidArgumentError(f"variable {name!r}: blocks={blocks!r}: expected a block shape (one extent per axis) or False")
    shape = [_natural(b, "a block extent of variable {!r}", name) for b in blocks]
    if not shape:
        raise InvalidArgumentError(f"variable {name!r}: blocks=[] has no extents: give one per axis, or blocks=False for whole chunks")
    return shape


def create(path: str | os.PathLike[str], axes: Sequence[Any], variables: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]],
           attrs: Mapping[str, Any] | None = None, *, overwrite: bool = False, sync: bool = True, slots: Sequence[str] = (),
           memory_limit: int | None = None, cache_size: int | None = None, layout: str = "auto") -> Dataset:
    """Creates a container and returns it open for writing (mode ``"r+"``).

    ``axes``: a sequence of ``(name, size)`` pairs or dicts with ``name``,
    ``size`` and optionally ``unit``, ``first`` and ``last`` (the coordinates
    of the first and last samples; default 0 and size - 1), ``growable``
    and ``max_size`` (growable axes can be resized and appended to).

    ``variables``: a dict from name to a dict with ``dtype`` (int8 to
    uint64, float32, float64, bool) and ``dims`` (axis names, slowest
    first), and optionally ``chunks``, ``codec`` (None, ``"deflate"``,
    ``"zstd"``, ``("zstd", level)``, ``{"id", "level", "shuffle"}``, or
    for float32 and float64 the lossy ``"bounded:0.01"``: every value read
    back within 0.01 of the value written, NaNs, infinities, ``fill_value``
    and ``no_value`` exact; ``{"id": "bounded", "tolerance": t, "level": l}``,
    or ``{"id": "bounded", "relative": f, "range": (min, max)}`` for a
    tolerance of ``f * (max - min)``; values are predicted by graded
    anchored interpolation (format 1.8), or with ``"predictor":
    "anchored"``, ``"interpolation"`` or ``"lorenzo"`` as format 1.7, 1.6
    or 1.5 readers decode),
    ``fill_value``, ``unit``, ``attrs``, ``lods`` (levels of detail,
    with ``lod_axes`` and ``lod_method`` "average" or "nearest"),
    ``partitionings`` (further chunk shapes, such as 2-D tiles), ``no_value``,
    ``quantization`` (``(storage dtype, min, max)``), ``margin``, ``mask``
    (keep a missing-value mask) and ``blocks`` (a block shape inside each
    chunk: each block is encoded on its own, so that reading a trace or a
    small box decodes only the blocks it touches; ``False`` stores whole
    chunks, and without it a deflate or zstd variable whose chunks hold
    1 MiB or more gets blocks of at most 128 KiB, such as 32x32x32 in a
    64x64x64 float32 chunk).
    A sequence of dicts each with a ``name`` works too.

    ``attrs``: the dataset's attributes (JSON values; NumPy scalars and
    arrays too). ``overwrite`` replaces an existing file in place (else
    :class:`AlreadyExistsError`): from the call on, readers find the new
    container, empty until what is written is committed, and a crash
    before that leaves it so (see :func:`save`); ``slots`` names external
    data files beside the container. Sizes, extents and names are checked as given: a
    float or negative size, a string where a sequence of names belongs, or
    a variable without a ``dtype`` or ``dims`` is an
    :class:`InvalidArgumentError` naming the axis or variable, not rounded
    or split into letters.

    ``layout``: ``"auto"`` (the default) gives the compact layout to a
    container whose variables declare at most 64 KiB, so that a small file
    costs its data and a few hundred bytes, and the aligned one otherwise;
    ``"compact"`` (128-byte head padding and commit slots, 256-byte index
    pages while the file is under 64 KiB; read by format 1.4 and later) or
    ``"aligned"`` (4 KiB-aligned head and index pages, read by every
    format 1.x reader) choose one (SPEC.md 1.1).
    """
    if type(axes) is not list and type(axes) is not tuple and (isinstance(axes, (str, bytes)) or not hasattr(axes, "__iter__")):
        raise InvalidArgumentError(f"axes is a sequence of axes, each (name, size) or a dict, not {axes!r}")
    if type(variables) is dict or isinstance(variables, Mapping):
        items = list(variables.items())
    elif isinstance(variables, (str, bytes)) or not hasattr(variables, "__iter__"):
        raise InvalidArgumentError(f"variables is a dict from name to variable, or a sequence of variables each with a name, not {variables!r}")
    else:
        items = []
        for item in variables:
            if not isinstance(item, Mapping) or "name" not in item:
                raise InvalidArgumentError(f"a variable in a sequence is a dict with a name, a dtype and dims, not {item!r}")
            v = dict(item)
            items.append((v.pop("name"), v))
    spec = {
        "axes": [_axis_spec(a) for a in axes],
        "variables": [_variable_spec(n, v) for n, v in items],
        "overwrite": bool(overwrite),
        "sync": bool(sync),
        "layout": layout,
    }
    if attrs:
        spec["attrs"] = dict(attrs) if isinstance(attrs, Mapping) else attrs
    slots = _names(slots, "slots")
    if slots:
        spec["slots"] = slots
    memory_limit, cache_size = _size(memory_limit, "memory_limit"), _size(cache_size, "cache_size")
    path = _fspath(path)  # once: the dataset keeps it as a str
    core = _vds.create(path, spec)
    if memory_limit is not None:
        core.set_memory_limit(memory_limit)
    if cache_size is not None:
        core.set_cache_size(cache_size)
    return Dataset(core, path, "r+", (sync, memory_limit, cache_size, False))
