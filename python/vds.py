"""Python binding of libvds over its C ABI (ctypes + NumPy).

    import numpy as np, vds
    with vds.create("v.vds", axes=[("inline", 100), ("time", 50)],
                    variables=[("amp", "float32", ["inline", "time"], [32, 32], "deflate")]) as ds:
        ds.write("amp", np.ones((100, 50), np.float32))
    with vds.open("v.vds") as ds:
        a = ds.read("amp", start=(10, 0), shape=(1, 50))

The shared library is found through $VDS_LIBRARY, else next to this file's
repository (target/release/libvds.so), else by the system's loader.
Every failure raises VdsError with the status code and libvds's message.
"""

import ctypes as C
import json
import os

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))


def _load():
    candidates = [os.environ.get("VDS_LIBRARY"), os.path.join(_here, "..", "target", "release", "libvds.so"), "libvds.so.0"]
    for c in candidates:
        if c and (os.path.exists(c) or "/" not in c):
            try:
                return C.CDLL(c)
            except OSError:
                continue
    raise OSError("libvds.so not found: set VDS_LIBRARY or build with `cargo build --release`")


_lib = _load()
_u64p = C.POINTER(C.c_uint64)
_sig = {
    "vds_last_error_message": ([], C.c_char_p),
    "vds_status_str": ([C.c_int32], C.c_char_p),
    "vds_version": ([], C.c_char_p),
    "vds_builder_new": ([C.POINTER(C.c_void_p)], C.c_int32),
    "vds_builder_free": ([C.c_void_p], C.c_int32),
    "vds_builder_add_axis": ([C.c_void_p, C.c_char_p, C.c_uint64, C.c_char_p, C.c_double, C.c_double], C.c_int32),
    "vds_builder_add_variable": ([C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_char_p), C.c_size_t, _u64p], C.c_int32),
    "vds_builder_set_codec": ([C.c_void_p, C.c_char_p, C.c_int32, C.c_uint32, C.c_bool], C.c_int32),
    "vds_builder_set_fill": ([C.c_void_p, C.c_char_p, C.c_void_p, C.c_size_t], C.c_int32),
    "vds_builder_set_attribute": ([C.c_void_p, C.c_char_p, C.c_char_p, C.c_char_p], C.c_int32),
    "vds_builder_set_overwrite": ([C.c_void_p, C.c_bool], C.c_int32),
    "vds_builder_set_durability": ([C.c_void_p, C.c_int32], C.c_int32),
    "vds_builder_create": ([C.c_void_p, C.c_char_p, C.POINTER(C.c_void_p)], C.c_int32),
    "vds_open": ([C.c_char_p, C.c_uint32, C.POINTER(C.c_void_p)], C.c_int32),
    "vds_close": ([C.c_void_p], C.c_int32),
    "vds_commit": ([C.c_void_p], C.c_int32),
    "vds_rollback": ([C.c_void_p], C.c_int32),
    "vds_variable_count": ([C.c_void_p, C.POINTER(C.c_size_t)], C.c_int32),
    "vds_variable_find": ([C.c_void_p, C.c_char_p, C.POINTER(C.c_size_t)], C.c_int32),
    "vds_variable_name": ([C.c_void_p, C.c_size_t, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)], C.c_int32),
    "vds_attributes_json": ([C.c_void_p, C.c_char_p, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)], C.c_int32),
    "vds_set_attribute": ([C.c_void_p, C.c_char_p, C.c_char_p, C.c_char_p], C.c_int32),
    "vds_read": ([C.c_void_p, C.c_size_t, C.c_int32, _u64p, _u64p, _u64p, C.c_size_t, C.c_int32, C.c_void_p, C.c_size_t], C.c_int32),
    "vds_write": ([C.c_void_p, C.c_size_t, C.c_int32, _u64p, _u64p, _u64p, C.c_size_t, C.c_int32, C.c_void_p, C.c_size_t], C.c_int32),
    "vds_builder_set_axis_growable": ([C.c_void_p, C.c_char_p, C.c_uint64], C.c_int32),
    "vds_resize_axis": ([C.c_void_p, C.c_char_p, C.c_uint64], C.c_int32),
    "vds_append": ([C.c_void_p, C.c_size_t, C.c_int32, C.c_char_p, C.c_int32, C.c_void_p, C.c_size_t, _u64p], C.c_int32),
    "vds_add_external_slot": ([C.c_void_p, C.c_char_p, C.POINTER(C.c_uint16)], C.c_int32),
    "vds_fragment_create": ([C.c_char_p, C.c_char_p, C.POINTER(C.c_void_p)], C.c_int32),
    "vds_merge_fragments": ([C.c_void_p, C.POINTER(C.c_char_p), C.c_size_t, C.POINTER(C.c_size_t), C.POINTER(C.c_size_t)], C.c_int32),
    "vds_set_cache_size": ([C.c_void_p, C.c_uint64], C.c_int32),
    "vds_set_slot_policy": ([C.c_void_p, C.c_int32, C.POINTER(C.c_uint16), C.c_size_t, C.c_uint64], C.c_int32),
    "vds_compact": ([C.c_void_p, C.c_int32, _u64p, _u64p], C.c_int32),
}
for _name, (_args, _ret) in _sig.items():
    _f = getattr(_lib, _name)
    _f.argtypes, _f.restype = _args, _ret


class VariableInfo(C.Structure):
    _fields_ = [("dtype", C.c_int32), ("ndim", C.c_size_t), ("shape", C.c_uint64 * 8), ("chunk", C.c_uint64 * 8),
                ("axes", C.c_size_t * 8), ("compression", C.c_int32), ("level", C.c_uint32), ("shuffle", C.c_bool)]


_lib.vds_get_variable_info.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(VariableInfo)]
_lib.vds_get_variable_info.restype = C.c_int32

# vds_dtype codes, in the order of vds.h.
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool"]
# Native-endian NumPy dtypes to codes (dtype.name takes microseconds; a dict lookup does not).
_CODES = {np.dtype(n): i for i, n in enumerate(DTYPES)}


def _code(dtype):
    """The vds_dtype code of a NumPy dtype of either byte order, or -1 (which libvds refuses)."""
    dt = np.dtype(dtype)
    return _CODES.get(dt if dt.isnative else dt.newbyteorder("="), -1)


def _native(a):
    """`a` with its elements in the machine's byte order, as the C ABI takes them."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


class VdsError(Exception):
    """A libvds call failed: `status` is its vds_status code."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(status):
    if status != 0:
        raise VdsError(status, _lib.vds_last_error_message().decode("utf-8", "replace"))


_ARRAY_TYPES = [C.c_uint64 * n for n in range(9)]  # up to 8 dimensions; building the type per call is slow


def _arr(values):
    n = len(values)
    return (_ARRAY_TYPES[n] if n < len(_ARRAY_TYPES) else C.c_uint64 * n)(*values)


def _pointer(a):
    """The address of a NumPy array's data for a C call; byref of a ctypes view is 4x faster than `a.ctypes.data`."""
    if a.nbytes and a.flags.c_contiguous and a.flags.writeable:
        return C.byref(C.c_char.from_buffer(a))
    return a.ctypes.data


def _string(fn):
    needed = C.c_size_t(0)
    _check(fn(None, 0, C.byref(needed)))
    buf = C.create_string_buffer(needed.value)
    _check(fn(buf, needed.value, C.byref(needed)))
    return buf.value.decode("utf-8")


class Dataset:
    """An open container; use as a context manager, or call close()."""

    def __init__(self, handle):
        self._h = C.c_void_p(handle)

    def close(self):
        """Commits (if writable) and closes."""
        if self._h:
            h, self._h = self._h, None
            _check(_lib.vds_close(h))

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None and self._h:
            _lib.vds_rollback(self._h)  # an exception: do not commit half the work
        self.close()

    def commit(self):
        _check(_lib.vds_commit(self._h))

    def _index(self, var):
        if isinstance(var, int):
            return var
        i = C.c_size_t(0)
        _check(_lib.vds_variable_find(self._h, var.encode(), C.byref(i)))
        return i.value

    def _info(self, i):
        v = VariableInfo()
        _check(_lib.vds_get_variable_info(self._h, i, C.byref(v)))
        return v

    def info(self, var):
        """dtype name, shape and chunk shape of a variable."""
        v = self._info(self._index(var))
        n = v.ndim
        return {"dtype": DTYPES[v.dtype], "shape": tuple(v.shape[:n]), "chunk": tuple(v.chunk[:n])}

    @property
    def variables(self):
        n = C.c_size_t(0)
        _check(_lib.vds_variable_count(self._h, C.byref(n)))
        return [_string(lambda b, c, nd, i=i: _lib.vds_variable_name(self._h, i, b, c, nd)) for i in range(n.value)]

    def attributes(self, var=None):
        v = var.encode() if var else None
        return json.loads(_string(lambda b, c, nd: _lib.vds_attributes_json(self._h, v, b, c, nd)))

    def set_attribute(self, key, value, var=None):
        _check(_lib.vds_set_attribute(self._h, var.encode() if var else None, key.encode(),
                                      None if value is None else json.dumps(value).encode()))

    def read(self, var, start=None, shape=None, step=None, order="C", out=None):
        """A region as a NumPy array (the whole variable by default). `out`, if given, must have the
        region's shape and the variable's dtype and be writeable and C or Fortran contiguous; it is filled
        and returned."""
        i = self._index(var)
        v = self._info(i)
        nd = v.ndim
        start = tuple(start or (0,) * nd)
        if shape is None:
            full = v.shape[:nd]
            shape = full if start == (0,) * nd and not step else \
                tuple((n - s + k - 1) // k for n, s, k in zip(full, start, step or (1,) * nd))
        if out is None:
            out = np.empty(shape, dtype=DTYPES[v.dtype], order=order)
        else:
            if tuple(out.shape) != tuple(shape) or out.dtype != np.dtype(DTYPES[v.dtype]):
                raise ValueError(f"out is {out.dtype}{list(out.shape)}, the region is {DTYPES[v.dtype]}{list(shape)}")
            if not (out.flags.c_contiguous or out.flags.f_contiguous):
                raise ValueError("out must be C or Fortran contiguous")
            if not out.flags.writeable:
                raise ValueError("out is read-only")
            order = "C" if out.flags.c_contiguous else "F"
        _check(_lib.vds_read(self._h, i, v.dtype, _arr(start), _arr(shape), _arr(step) if step else None, len(start),
                             0 if order == "C" else 1, _pointer(out), out.nbytes))
        return out

    def write(self, var, array, start=None, step=None):
        """Writes a NumPy array (C or Fortran contiguous) at `start`."""
        i = self._index(var)
        a = _native(np.asanyarray(array))
        order = 1 if (a.flags.f_contiguous and not a.flags.c_contiguous) else 0
        if order == 0:
            a = np.ascontiguousarray(a)
        start = tuple(start or (0,) * a.ndim)
        code = _code(a.dtype)
        _check(_lib.vds_write(self._h, i, code, _arr(start), _arr(a.shape), _arr(step) if step else None, a.ndim, order,
                              a.ctypes.data, a.nbytes))


    def resize_axis(self, axis, samples):
        """Changes the number of samples of a growable axis (at the next commit)."""
        _check(_lib.vds_resize_axis(self._h, axis.encode(), samples))

    def append(self, var, axis, array):
        """Grows `axis` by the samples in `array` and writes them at its end; returns the first new index."""
        i = self._index(var)
        a = np.ascontiguousarray(_native(np.asanyarray(array)))
        code = _code(a.dtype)
        start = C.c_uint64()
        _check(_lib.vds_append(self._h, i, code, axis.encode(), 0, a.ctypes.data, a.nbytes, C.byref(start)))
        return start.value

    def add_external_slot(self, name):
        """Adds an external-file slot (a new file beside the container); returns its number."""
        slot = C.c_uint16()
        _check(_lib.vds_add_external_slot(self._h, name.encode(), C.byref(slot)))
        return slot.value

    def merge_fragments(self, names):
        """Adopts sealed fragments into the container in one commit; returns (merged, skipped) counts."""
        arr = (C.c_char_p * len(names))(*[n.encode() for n in names])
        merged, skipped = C.c_size_t(), C.c_size_t()
        _check(_lib.vds_merge_fragments(self._h, arr, len(names), C.byref(merged), C.byref(skipped)))
        return merged.value, skipped.value


    def set_cache_size(self, nbytes):
        """Bounds the cache of decoded chunks and, separately, the chunks written in part that are held
        until the commit (so many small writes to one chunk store it once); 0 turns both off."""
        _check(_lib.vds_set_cache_size(self._h, nbytes))

    def set_slot_policy(self, policy, slots, max_bytes=0):
        """Routes new stored chunks: policy "fixed", "round_robin", "by_size" or "by_variable" over slot numbers."""
        code = ["fixed", "round_robin", "by_size", "by_variable"].index(policy)
        arr = (C.c_uint16 * len(slots))(*slots)
        _check(_lib.vds_set_slot_policy(self._h, code, arr, len(slots), max_bytes))

    def compact(self, mode="keep"):
        """Rewrites the container without dead space, crash-safely; returns (bytes before, bytes after).
        mode: "keep" (external chunks stay in their files), "fold" (copied into the container) or
        "into_slots" (the container's chunks move to the slots the slot policy chooses)."""
        code = ["keep", "fold", "into_slots"].index(mode)
        before, after = C.c_uint64(), C.c_uint64()
        _check(_lib.vds_compact(self._h, code, C.byref(before), C.byref(after)))
        return before.value, after.value


def fragment(path, name):
    """Opens the container at `path` to write the fragment `name` beside it (one per worker process);
    closing it seals the fragment for Dataset.merge_fragments."""
    h = C.c_void_p()
    _check(_lib.vds_fragment_create(os.fspath(path).encode(), name.encode(), C.byref(h)))
    return Dataset(h.value)


def open(path, write=False, sync=True):  # noqa: A001 - mirrors io.open
    """Opens a container read-only (or for writing)."""
    h = C.c_void_p()
    flags = (1 if write else 0) | (0 if sync else 2)
    _check(_lib.vds_open(os.fspath(path).encode(), flags, C.byref(h)))
    return Dataset(h.value)


# Codec name -> (vds_compression, default level).
_CODECS = {"deflate": (1, 6), "zstd": (2, 1)}


def create(path, axes, variables, attributes=None, overwrite=False, sync=True, growable=()):
    """Creates a container. axes: [(name, samples)]; variables: [(name, dtype, axis names, chunk or None, codec or None)]
    where codec is None, "deflate" (level 6), ("deflate", level 0-9), "zstd" (level 1) or ("zstd", level 1-22), with
    the byte shuffle on; growable: names of axes that may be resized later."""
    b = C.c_void_p()
    _check(_lib.vds_builder_new(C.byref(b)))
    try:
        for name, n in axes:
            _check(_lib.vds_builder_add_axis(b, name.encode(), n, None, 0.0, float(n - 1)))
            if name in growable:
                _check(_lib.vds_builder_set_axis_growable(b, name.encode(), 0))
        for name, dtype, ax, chunk, codec in variables:
            names = (C.c_char_p * len(ax))(*[a.encode() for a in ax])
            _check(_lib.vds_builder_add_variable(b, name.encode(), _code(dtype), names, len(ax),
                                                 _arr(chunk) if chunk else None))
            if codec:
                kind, level = codec if isinstance(codec, (tuple, list)) else (codec, None)
                if kind not in _CODECS:
                    raise ValueError(f"codec {codec!r}: expected None, 'deflate', 'zstd' or a (name, level) pair")
                compression, default = _CODECS[kind]
                _check(_lib.vds_builder_set_codec(b, name.encode(), compression, default if level is None else level, True))
        for k, v in (attributes or {}).items():
            _check(_lib.vds_builder_set_attribute(b, None, k.encode(), json.dumps(v).encode()))
        _check(_lib.vds_builder_set_overwrite(b, overwrite))
        _check(_lib.vds_builder_set_durability(b, 0 if sync else 1))
        h = C.c_void_p()
        _check(_lib.vds_builder_create(b, os.fspath(path).encode(), C.byref(h)))
        return Dataset(h.value)
    finally:
        _lib.vds_builder_free(b)


def version():
    return _lib.vds_version().decode()
