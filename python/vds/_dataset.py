"""Dataset and Variable: the h5py/zarr-style layer over the compiled core."""

from __future__ import annotations

import copy
import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from . import _vds
from ._indexing import select
from .errors import InvalidArgumentError, OutOfMemoryError, OutOfRangeError, ReadOnlyError, TypeMismatchError

#: The default memory limit of a dataset (libvds's, 1 GiB): no read or write allocates more.
DEFAULT_MEMORY_LIMIT: int = _vds.DEFAULT_MEMORY_LIMIT

# The keyword arguments of vds.open that a dataset keeps to reopen when unpickled.
_OPTIONS = ("sync", "memory_limit", "cache_size", "allow_external_paths")

# Start and step of a whole-variable read, by number of axes.
_ZEROS = [(0,) * n for n in range(9)]
_ONES = [(1,) * n for n in range(9)]


def _fspath(path):
    """``path`` (a str, bytes or os.PathLike) as a str, as os.fsdecode gives it; a str as it is,
    without os.fsdecode's two calls, which opening a tiny file would feel. For what a Dataset
    keeps: the compiled functions take a path in any of these forms themselves."""
    return path if type(path) is str else os.fsdecode(path)


def _what(what, args):
    """``what`` with ``args`` put in (``str.format``): error messages are made only when raised."""
    return what.format(*args) if args else what


def _count(value, what, *args):
    """A whole number given for a size or an extent (NumPy integers too; not a float, a string or a bool).
    ``what`` names it in the error (formatted with ``args``)."""
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"{_what(what, args)} must be an integer, not {value!r}")
    return int(value)


def _natural(value, what, *args):
    """A size or an extent: a whole number as :func:`_count` takes it, and not negative."""
    if type(value) is int and value >= 0:
        return value
    n = _count(value, what, *args)
    if n < 0:
        raise InvalidArgumentError(f"{_what(what, args)} must not be negative, not {n}")
    return n


def _u64(value, kind, what, *args):
    """A whole number from 0 to 2**64 - 1 (the library's sizes): ``kind`` says what sort of number
    it is in the error ("a number of bytes "), ``what`` names it (formatted with ``args``)."""
    n = _count(value, what, *args)
    if not 0 <= n < 2**64:
        raise InvalidArgumentError(f"{_what(what, args)} is {kind}from 0 to 2**64 - 1, not {value!r}")
    return n


def _nbytes(value, what, *args):
    """A number of bytes: an integer from 0 to 2**64 - 1."""
    return _u64(value, "a number of bytes ", what, *args)


def _size(value, what, *args):
    """A size in bytes given as an option: None, or an integer from 0 to 2**64 - 1."""
    return None if value is None else _nbytes(value, what, *args)


def _new_size(axis, size):
    """The new number of samples of ``axis`` (a name): an integer from 0 to 2**64 - 1."""
    return _u64(size, "", "the new size of axis {!r}", axis)


def _text(value, what, *args):
    """A name given as a str (not bytes, a number or a path; a subclass of str is one) that is valid Unicode."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{_what(what, args)} is a str, not {value!r}")
    if not str.isascii(value):  # str's own, whatever a subclass makes of them
        try:
            str.encode(value, "utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"{_what(what, args)}, {value!r}, is not valid Unicode (it holds a lone surrogate)") from None
    return value


class Axis:
    """One axis of a dataset: its name, unit, size and sample coordinates.

    ``values`` are the coordinates of its samples, evenly spaced from ``first``
    to ``last`` (as a NumPy array, made on each use and held to the memory
    limit of the dataset); ``growable`` axes can be resized, up to
    ``max_size`` (None: unbounded).
    """

    __slots__ = ("name", "unit", "size", "first", "last", "growable", "max_size", "_limit")
    # What an axis is (compared by ==); not the memory limit of the dataset it came from.
    _FIELDS = ("name", "unit", "size", "first", "last", "growable", "max_size")

    def __init__(self, d, memory_limit=DEFAULT_MEMORY_LIMIT):
        self.name = d["name"]
        self.unit = d["unit"]
        self.size = d["samples"]
        self.first = d["first"]
        self.last = d["last"]
        self.growable = d["growable"]
        self.max_size = d["max_samples"]
        self._limit = memory_limit

    @property
    def values(self) -> np.ndarray:
        """The coordinates of the samples: ``size`` float64 values evenly spaced from ``first`` to ``last``.

        Raises :class:`OutOfMemoryError` when they would take more than the memory limit of the
        dataset (``memory_limit`` of :func:`vds.open`; an axis can hold far more samples than
        any variable on it stores).
        """
        nbytes = self.size * 8
        if nbytes > self._limit:
            raise OutOfMemoryError(
                f"the coordinates of axis {self.name!r} ({self.size} samples, {nbytes} bytes) exceed the memory limit "
                f"of {self._limit} bytes (open with a larger memory_limit=)")
        return np.linspace(self.first, self.last, self.size)

    def __len__(self):
        return self.size

    def __eq__(self, other):
        return isinstance(other, Axis) and all(getattr(self, k) == getattr(other, k) for k in Axis._FIELDS)

    def __repr__(self):
        unit = f" {self.unit}" if self.unit else ""
        grow = ", growable" if self.growable else ""
        return f"<vds.Axis {self.name!r}: {self.size} samples, {self.first}..{self.last}{unit}{grow}>"


class Attributes(MutableMapping):
    """The attributes of a dataset or a variable: a mutable mapping of JSON values.

    Values are dicts, lists, tuples, strings, numbers, booleans, None and
    NumPy scalars and arrays (read back as lists). A dict's keys that are
    not strings are written as ``json.dumps`` writes them (``1`` as
    ``"1"``, None as ``"null"``), and a dict where two keys would be
    written as one (``1`` and ``"1"``) is refused. Changes are written
    with the data: they become durable at the next ``commit()`` (or
    ``close()``) and are discarded by ``rollback()``.
    """

    def __init__(self, ds, var):
        self._ds = ds
        self._var = var

    def _all(self):
        """All of them, decoded once and kept by the dataset until a change: the kept dict is
        never changed, and values that could be (lists, dicts) are handed out as copies."""
        ds = self._ds
        changes = ds._attr_changes  # before the fetch: a change landing during it leaves it unused
        kept = ds._attrs.get(self._var)
        if kept is not None and kept[0] == changes and not ds._core.closed:
            return kept[1]
        values = json.loads(ds._core.attributes(self._var))
        ds._attrs[self._var] = (changes, values)
        return values

    def __getitem__(self, key):
        value = self._all()[key]
        return copy.deepcopy(value) if isinstance(value, (list, dict)) else value

    def __contains__(self, key):
        return key in self._all()

    def __setitem__(self, key, value):
        self._ds._core.set_attribute(self._var, _text(key, "an attribute name"), value, False)
        self._ds._attr_changes += 1

    def __delitem__(self, key):
        if key not in self._all():
            raise KeyError(key)
        self._ds._core.set_attribute(self._var, key, None, True)
        self._ds._attr_changes += 1

    def __iter__(self):
        return iter(self._all())

    def __len__(self):
        return len(self._all())

    def __repr__(self):
        return f"<vds.Attributes {self._all()!r}>"


def _cwd():
    """The working directory, or None when it is gone (a relative path then pickles as it is)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _reopen(path, mode, options):
    """Reopens a pickled dataset (see Dataset.__reduce__)."""
    from . import open as open_

    return open_(path, mode, **options)


class Dataset(Mapping):
    """An open container: a mapping from variable names to :class:`Variable`.

    Made by :func:`vds.open`, :func:`vds.create` or :func:`vds.fragment`. Use it
    as a context manager: leaving the block commits and closes, or, after an
    exception, rolls back and closes. Changes (writes, attributes, resizes)
    become durable and visible to other handles at :meth:`commit`; closing
    without committing (``close(commit=False)``, or dropping the object)
    leaves the file at its last commit.

    A dataset pickles as (path, mode, options), a relative path made absolute
    from the directory it was opened in, and reopens when unpickled, so Dask's process and distributed schedulers
    can ship it to workers in any directory.
    """

    __slots__ = ("_core", "_path", "_cwd", "_mode", "_options", "_meta", "_changes", "_attrs", "_attr_changes", "_limit",
                 "__weakref__")

    def __init__(self, core, path, mode, options):
        # options: what it was opened with, as (sync, memory_limit, cache_size,
        # allow_external_paths) (see _OPTIONS), for reopening when unpickled.
        self._core = core
        self._path = _fspath(path)
        # The directory a relative path was opened from, for pickling (a URL or an absolute path needs none).
        self._cwd = None if os.path.isabs(self._path) or "://" in self._path else _cwd()
        self._mode = mode
        self._options = options
        # The cached metadata, (changes, fast, names, infos, axes): `changes` is what
        # self._changes was before it was fetched, and it serves only while that holds.
        self._meta = None
        self._changes = 0
        # The decoded attributes, {variable index or None: (changes, dict)}, as `_meta` is kept.
        self._attrs = {}
        self._attr_changes = 0
        self._limit = DEFAULT_MEMORY_LIMIT if options[1] is None else options[1]

    # --- what is inside -------------------------------------------------------------

    def _vars(self):
        """(changes, per variable: (NumPy dtype, shapes of its levels of detail), name -> index,
        infos, axes), fetched once and kept until a change of shapes. Only what reads need:
        opening a file and reading it stays cheap; the rest (`_info`, `_axes`) is fetched on
        first use. A change another thread makes while this fetches (a resize between the
        fetch and the store) leaves what was fetched unused: it is tagged with the count of
        changes before the fetch, which the change's `_changed` moves on."""
        meta = self._meta
        if meta is None or meta[0] != self._changes:
            changes = self._changes
            fast, names = self._core.layout()
            meta = self._meta = (changes, fast, names, None, None)
        return meta

    def _info(self, index):
        """The full description of variable ``index`` (a dict), fetched on first use."""
        changes, fast, names, infos, axes = self._vars()
        if infos is None:
            infos = self._core.variables()
            self._meta = (changes, fast, names, infos, axes)
        return infos[index]

    def _axes(self):
        """The Axis objects, fetched on first use (opening and reading need none)."""
        changes, fast, names, infos, axes = self._vars()
        if axes is None:
            axes = [Axis(a, self._limit) for a in self._core.axes()]
            self._meta = (changes, fast, names, infos, axes)
        return axes

    def _changed(self):
        """Forgets the cached metadata after a change of shapes or variables (made before this is called)."""
        self._changes += 1
        self._meta = None
        self._attr_changes += 1  # a rollback, a merge or a compaction may change attributes too

    @property
    def path(self) -> str:
        """The container's path."""
        return self._path

    @property
    def mode(self) -> str:
        """``"r"``, ``"r+"`` or ``"fragment"``."""
        return self._mode

    @property
    def closed(self) -> bool:
        """Whether the dataset is closed."""
        return self._core.closed

    @property
    def writable(self) -> bool:
        """Whether the dataset can be written."""
        return self._core.writable

    @property
    def axes(self) -> dict[str, Axis]:
        """The dataset's axes, as a dict from name to :class:`Axis`, in order."""
        return {a.name: a for a in self._axes()}

    @property
    def attrs(self) -> Attributes:
        """The dataset's attributes (a mutable mapping, committed with the data)."""
        return Attributes(self, None)

    @property
    def commit_sequence(self) -> int:
        """The number of the last commit (1 for a new file)."""
        return self._core.commit_sequence

    @property
    def format_version(self) -> tuple[int, int]:
        """The format version of the file, (major, minor)."""
        return self._core.format_version

    def descriptor(self) -> dict[str, Any]:
        """The JSON descriptor (SPEC.md section 3) as a dict."""
        return json.loads(self._core.descriptor_json())

    def __getitem__(self, name):
        meta = self._meta
        if meta is not None and meta[0] == self._changes:
            # The names kept with the layout: a lookup, however many variables there are.
            index = meta[2].get(name) if isinstance(name, str) else None
        else:
            # Not fetched yet: asked of the core (a whole read of a small file never needs the layout).
            try:
                index = self._core.index(name)
            except (TypeError, UnicodeEncodeError):  # not a str, or not one a name can be
                index = None
        if index is None:
            raise KeyError(f"no variable {name!r} in {self._path} (variables: {', '.join(self._vars()[2]) or 'none'})")
        return Variable(self, index, name)

    def __iter__(self):
        return iter(self._vars()[2])

    def __len__(self):
        return len(self._vars()[1])

    # A handle is equal only to itself (as h5py's), not by its variables (as a Mapping would
    # compare them), and so can be a dict key or in a set.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self):
        if self.closed:
            return f"<vds.Dataset {self._path!r} (closed)>"
        axes = ", ".join(f"{a.name}={a.size}" for a in self._axes())
        return f"<vds.Dataset {self._path!r} mode {self._mode!r}: axes {axes}; variables {', '.join(self)}>"

    # --- changes --------------------------------------------------------------------

    def resize(self, axis: str, size: int) -> None:
        """Sets the number of samples of the growable ``axis`` (a name) to ``size`` (an integer, NumPy's
        too; a float, a string or a bool is an :class:`InvalidArgumentError`); samples added read as the
        fill value."""
        self._core.resize_axis(_text(axis, "the axis to resize"), _new_size(axis, size))
        self._changed()

    def commit(self) -> None:
        """Makes every change since the last commit durable and visible, atomically."""
        self._core.commit()
        self._changed()

    def rollback(self) -> None:
        """Discards every change since the last commit: the dataset returns to what the file holds."""
        self._core.rollback()
        self._changed()

    def close(self, commit: bool = True) -> None:
        """Commits (if writable and ``commit``) and closes. Closing twice does nothing."""
        self._core.close(commit)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        core = self._core
        if kind is not None and not core.closed and core.writable:
            core.rollback()  # an exception: do not commit half the work
            core.close(False)
        else:
            core.close(True)

    def verify(self, full: bool = False) -> dict[str, Any]:
        """Checks every checksum and structure of the current commit.

        With ``full=True`` it then also recomputes every level of detail and
        every partitioning (tiles) of each variable from level 0 and reports
        each chunk that differs: a layer of intact chunks holding other values
        is damage too, since a read that picks it returns them (levels of
        detail of the lossy ``bounded`` codec agree within its tolerance). That reads the
        derived layers again (a few times the time of the plain check on a
        variable with levels or tiles).

        Returns a dict: ``ok``, ``problems`` (one message per damaged
        structure, naming it and its offset), ``commit``, ``chunks``,
        ``index_pages``, ``live_bytes``, ``file_bytes``, ``reclaimable_bytes``.
        Damage is reported there rather than raised; errors that stop the
        check itself raise.
        """
        return self._core.verify(full)

    def compact(self, mode: str = "keep") -> tuple[int, int]:
        """Rewrites the container without dead space, crash-safely; returns (bytes before, bytes after).

        ``mode``: ``"keep"`` (external chunks stay in their files), ``"fold"``
        (copied into the container), ``"into_slots"`` (the container's chunks
        move to the slots of the slot policy) or ``"cloud"`` (as ``"fold"``,
        with every index page right after the head, so that a reader over
        HTTP or S3 fetches the whole index in one request).
        """
        before, after, _ = self._core.compact(mode)
        self._changed()
        return before, after

    def merge_fragments(self, names: Iterable[str | os.PathLike[str]]) -> dict[str, Any]:
        """Adopts the sealed fragments ``names`` (files beside the container) in one atomic commit.

        Returns a dict: ``merged`` (names), ``skipped`` ((name, reason) for
        fragments never sealed, such as a crashed worker's, or merged before)
        and ``chunks`` (index entries adopted). Overlapping fragments are
        refused and nothing is merged.
        """
        if isinstance(names, (str, bytes, os.PathLike)) or not hasattr(names, "__iter__"):
            raise InvalidArgumentError(f"merge_fragments takes a sequence of fragment names, not {names!r}")
        names = [_text(os.fspath(n), "the name of a fragment to merge") for n in names]
        merged, skipped, chunks = self._core.merge_fragments(names)
        self._changed()
        return {"merged": merged, "skipped": skipped, "chunks": chunks}

    def add_external_slot(self, name: str) -> int:
        """Adds an external data file ``name`` (a str) beside the container; returns its slot number."""
        return self._core.add_external_slot(_text(name, "the name of an external slot"))

    def set_slot_policy(self, policy: str, slots: Iterable[int], max_bytes: int = 0) -> None:
        """Routes new stored chunks: ``"fixed"``, ``"round_robin"``, ``"by_size"`` or ``"by_variable"`` over
        slot numbers (integers from 0 to 65535); ``max_bytes`` is the chunk size limit of ``"by_size"``."""
        _text(policy, "the slot policy")
        if isinstance(slots, (str, bytes)) or not hasattr(slots, "__iter__"):
            raise InvalidArgumentError(f"slot policy {policy!r}: slots is a sequence of slot numbers, not {slots!r}")
        numbers = [_count(s, "a slot number of slot policy {!r}", policy) for s in slots]
        for s in numbers:
            if not 0 <= s < 65536:
                raise InvalidArgumentError(f"slot policy {policy!r}: a slot number is from 0 to 65535, not {s}")
        self._core.set_slot_policy(policy, numbers, _nbytes(max_bytes, "max_bytes of slot policy {!r}", policy))

    def set_cache_size(self, nbytes: int) -> None:
        """Bounds the decoded-chunk cache and the write-back buffer of partly written chunks to ``nbytes``
        (an integer from 0 to 2**64 - 1; 0 turns both off)."""
        self._core.set_cache_size(_nbytes(nbytes, "the cache size"))

    @property
    def stored_bytes_read(self) -> int:
        """Stored chunk bytes read from files (not from the cache) since the dataset was opened."""
        return self._core.stored_bytes_read

    def __reduce__(self):
        if self._mode == "fragment":
            raise TypeError("a fragment being written cannot be pickled; open a fragment in each worker with vds.fragment")
        # A file by its absolute path as it was opened, so that a worker in another directory (or
        # this process after a chdir) reopens the same file; a URL as it is.
        path = self._path if self._cwd is None else os.path.join(self._cwd, self._path)
        return (_reopen, (path, self._mode, dict(zip(_OPTIONS, self._options))))

    def _check_alloc(self, nbytes):
        if nbytes > self._limit:
            raise OutOfMemoryError(
                f"a selection of {nbytes} bytes exceeds the memory limit of {self._limit} bytes "
                "(read less at a time, or open with a larger memory_limit=)"
            )


class Variable:
    """A variable (channel) of a dataset, indexed like a NumPy array.

    ``var[...]`` reads with NumPy basic indexing (integers, negative indices,
    slices with any step, ``...``, ``None``) and returns a new C-order array;
    ``var[...] = x`` writes, broadcasting ``x`` as NumPy does and converting
    its values as NumPy's ``same_kind`` casting does (floats into a float32
    variable, integers into a float one), except that integers of another
    type are taken only when every value fits the variable's (otherwise an
    :class:`InvalidArgumentError` for an array, and for Python ints NumPy's
    own ``OverflowError``; never wrapped); floats into an integer variable
    are a :class:`TypeMismatchError`. ``np.asarray(var)``
    reads it all. ``lod(k)`` is level of detail k (read-only), ``mask`` the
    missing-value mask, ``stored`` a quantized variable's stored integers.
    """

    __slots__ = ("_ds", "_index", "_name", "_lod", "__weakref__")

    def __init__(self, ds, index, name, lod=0):
        self._ds = ds
        self._index = index
        self._name = name
        self._lod = lod

    def _info(self):
        return self._ds._info(self._index)

    @property
    def name(self) -> str:
        """The variable's name."""
        return self._name

    @property
    def dataset(self) -> Dataset:
        """The :class:`Dataset` holding the variable."""
        return self._ds

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of its values (for a quantized variable, the values', not the stored integers')."""
        return self._ds._vars()[1][self._index][0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The extent along each axis (at this level of detail)."""
        return self._ds._vars()[1][self._index][1][self._lod]

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of values."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of all the values in memory."""
        return self.size * self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape (of the first partitioning)."""
        return tuple(self._info()["chunks"])

    @property
    def dims(self) -> tuple[str, ...]:
        """The names of its axes, slowest first."""
        axes = self._ds._axes()
        return tuple(axes[i].name for i in self._info()["axes"])

    @property
    def axes(self) -> dict[str, Axis]:
        """Its axes, a dict from name to :class:`Axis` (``axes[name].values`` are the coordinates)."""
        axes = self._ds._axes()
        return {axes[i].name: axes[i] for i in self._info()["axes"]}

    @property
    def unit(self) -> str:
        """The unit of its values (may be empty)."""
        return self._info()["unit"]

    @property
    def attrs(self) -> Attributes:
        """The variable's attributes (a mutable mapping, committed with the data)."""
        return Attributes(self._ds, self._index)

    @property
    def fill_value(self) -> np.generic:
        """The value read where nothing was written, as a NumPy scalar of ``dtype``."""
        return self.dtype.type(self._info()["fill_value"])

    @property
    def no_value(self) -> np.generic | None:
        """The value marking a missing sample, or None."""
        nv = self._info()["no_value"]
        return None if nv is None else self.dtype.type(nv)

    @property
    def codec(self) -> dict[str, Any]:
        """The codec of new chunks: a dict with ``id`` ("none", "deflate", "zstd", "bounded"), ``level`` and ``shuffle``,
        and for "bounded" its ``tolerance`` (every value read back is within it of the value written) and ``predictor``
        ("graded", "anchored", "interpolation" or "lorenzo")."""
        return dict(self._info()["codec"])

    @property
    def levels(self) -> int:
        """The number of levels of detail (1: level 0 only)."""
        return len(self._ds._vars()[1][self._index][1])

    @property
    def partitionings(self) -> list[tuple[int, ...]]:
        """The chunk shape of every partitioning (the first is ``chunks``)."""
        return [tuple(p) for p in self._info()["partitionings"]]

    @property
    def blocks(self) -> tuple[int, ...] | None:
        """The shape of the blocks each stored chunk is made of (each read and decoded on its own), or None."""
        b = self._info()["blocks"]
        return None if b is None else tuple(b)

    @property
    def margin(self) -> tuple[int, int]:
        """The samples each stored chunk carries from its neighbours, (before, after) along every axis; (0, 0) for none."""
        a, b = self._info()["margin"]
        return (a, b)

    @property
    def quantization(self) -> dict[str, Any] | None:
        """How values are stored as integers: a dict (``storage``, ``min``, ``max``), or None."""
        q = self._info()["quantization"]
        return None if q is None else dict(q)

    @property
    def has_mask(self) -> bool:
        """Whether the variable keeps a missing-value mask."""
        return self._info()["mask"]

    def __eq__(self, other):
        """The same level of the same variable of the same open dataset."""
        if not isinstance(other, Variable):
            return NotImplemented
        return (self._ds, self._index, self._lod) == (other._ds, other._index, other._lod)

    def __hash__(self):
        return hash((self._ds, self._index, self._lod))

    def __repr__(self):
        lod = f" lod {self._lod}" if self._lod else ""
        dims = ", ".join(f"{d}={n}" for d, n in zip(self.dims, self.shape))
        return f"<vds.Variable {self._name!r}{lod}: {self.dtype} [{dims}], chunks {self.chunks}, {self.codec['id']}>"

    def __reduce__(self):
        return (_variable, (self._ds, self._name, self._lod))

    def __dask_tokenize__(self):
        # Read-only, the same variable at the same commit holds the same values;
        # a writable one may change without a commit, so it is never equal to another.
        ds = self._ds
        if ds.mode != "r":
            return ("vds.Variable", uuid.uuid4().hex)
        return ("vds.Variable", os.path.abspath(ds.path), self._name, self._lod, ds.commit_sequence)

    # --- reading --------------------------------------------------------------------

    def _read(self, key, order, dtype, out=None):
        if order not in ("C", "F"):
            raise InvalidArgumentError(f"order must be 'C' or 'F', not {order!r}")
        sel = select(key, self._ds._vars()[1][self._index][1][self._lod])
        if out is not None:
            return self._read_into(sel, dtype, out)
        return self._read_box(sel, dtype, order)

    def _read_into(self, sel, dtype, out):
        """Reads selection ``sel`` into the caller's array ``out`` (straight into it when it is
        contiguous and the selection reverses no axis); returns ``out``."""
        if not isinstance(out, np.ndarray) or out.shape != sel.shape or out.dtype != dtype:
            got = f"{out.dtype}{list(out.shape)}" if isinstance(out, np.ndarray) else type(out).__name__
            raise InvalidArgumentError(f"out is {got}; the selection is {dtype}{list(sel.shape)}")
        if not out.flags.writeable:
            raise InvalidArgumentError("out is read-only")
        if sel.empty:
            return out
        if not sel.flip and (out.flags.c_contiguous or out.flags.f_contiguous):
            self._ds._core.read(self._index, self._lod, sel.start, sel.step, out.reshape(sel.count, order="A"))
        else:
            out[...] = self._read_box(sel, dtype)
        return out

    def _read_box(self, sel, dtype, order="C"):
        """The result of selection ``sel`` in a new array in ``order``."""
        ds = self._ds
        ds._check_alloc(math.prod(sel.count) * dtype.itemsize)
        box = np.empty(sel.count, dtype=dtype, order=order)
        if not sel.empty:
            ds._core.read(self._index, self._lod, sel.start, sel.step, box)
        return sel.finish(box, order)

    def __getitem__(self, key):
        if key is Ellipsis:
            # The whole variable, the commonest read: one call, which makes the array.
            return self._ds._core.read_all(self._index, self._lod, self._ds._limit)
        return self._read(key, "C", self._ds._vars()[1][self._index][0])

    def read(self, key: Any = (), order: str = "C", out: np.ndarray | None = None) -> np.ndarray:
        """Reads ``self[key]`` (everything by default) into a new array in ``order``: ``"C"`` or ``"F"`` (Fortran).

        With ``out`` (an array of the selection's shape and the variable's dtype), reads into it
        instead and returns it: straight into its memory when it is C or Fortran contiguous and
        no step is negative, so repeated reads reuse one buffer.
        """
        return self._read(key, order, self.dtype, out)

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("reading a vds variable always makes a new array (copy=False is impossible)")
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def lod(self, level: int) -> Variable:
        """Level of detail ``level`` of this variable, read-only: level k halves the LOD axes k times."""
        level = _count(level, "the level of detail of variable {!r}", self._name)
        if not 0 <= level < self.levels:
            raise OutOfRangeError(f"variable {self._name!r} has levels of detail 0 to {self.levels - 1}, not {level}")
        return Variable(self._ds, self._index, self._name, level)

    def slice(self, axis: str | int | Sequence[str | int], index: int | Sequence[int], lod: int = 0) -> np.ndarray:
        """One axis-aligned plane as a 2-D array: ``axis`` (a name or position, negative from the
        end, or a sequence of them, each axis once) fixed at ``index`` (an integer, negative from
        the end, or a sequence), every other axis whole, at level of detail ``lod``.
        Reads from the partitioning that reads the fewest bytes (such as 2-D tiles)."""
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        indices = list(index) if isinstance(index, (list, tuple)) else [index]
        if len(axes) != len(indices):
            raise InvalidArgumentError(f"slice: {len(axes)} axes but {len(indices)} indices")
        key: list[Any] = [slice(None)] * self.ndim
        for a, i in zip(axes, indices):
            d = self._axis_position(a)  # a name, or a position (negative from the end)
            if key[d] != slice(None):
                raise InvalidArgumentError(f"slice: axis {self.dims[d]!r} is given twice")
            # One sample along each fixed axis (negative from the end, as in indexing).
            key[d] = _count(i, "slice: the index along axis {!r}", self.dims[d])
        if self.ndim - len(axes) != 2:
            raise InvalidArgumentError(f"a slice leaves two axes free; fixing {len(axes)} of {self.ndim} leaves {self.ndim - len(axes)}")
        return self.lod(lod)[tuple(key)]

    @property
    def mask(self):
        """The missing-value mask, indexed like the variable: True where a value is missing."""
        return _MaskView(self)

    @property
    def stored(self):
        """A quantized variable's stored integers, indexed (and assigned) like the variable."""
        if self.quantization is None:
            raise InvalidArgumentError(f"variable {self._name!r} is not quantized: it has no stored integers apart from its values")
        return _StoredView(self)

    # --- writing --------------------------------------------------------------------

    def _box(self, sel, value, dtype):
        """``value`` converted to ``dtype`` and shaped as the box of ``sel`` (a contiguous array)."""
        v = np.asarray(value)
        if not isinstance(value, (np.ndarray, np.generic)) and dtype.kind in "iu" and (
                v.dtype.kind in "iu"
                # NumPy infers float64 for Python ints beyond int64 (uint64 values), and objects for
                # ints beyond 64 bits: still exact ints.
                or v.dtype.kind in "fO" and all(isinstance(x, int) for x in np.asarray(value, dtype=object).flat)):
            try:
                v = np.asarray(value, dtype=dtype)
            except OverflowError:
                # An OverflowError, as NumPy raises, saying what the variable takes.
                info = np.iinfo(dtype)
                raise OverflowError(f"Python integers out of bounds for variable {self._name!r} of {dtype} "
                                    f"({info.min} to {info.max})") from None
        if v.dtype != dtype and not np.can_cast(v.dtype, dtype, "safe"):
            if v.dtype.kind in "iu" and dtype.kind in "iu":
                # Integers into a narrower or other-signed type: taken when every value fits, never wrapped.
                if v.size:
                    info, lo, hi = np.iinfo(dtype), int(v.min()), int(v.max())
                    if lo < info.min or hi > info.max:
                        raise InvalidArgumentError(f"values from {lo} to {hi} do not fit variable {self._name!r} "
                                                   f"of {dtype} ({info.min} to {info.max})")
            elif not np.can_cast(v.dtype, dtype, "same_kind"):
                raise TypeMismatchError(f"cannot write {v.dtype} values into variable {self._name!r} of {dtype}")
        self._ds._check_alloc(math.prod(sel.count) * dtype.itemsize)
        extra = v.ndim - len(sel.shape)
        if extra > 0 and sel.shape and all(n == 1 for n in v.shape[:extra]):
            # Leading axes of one value, as NumPy's assignment drops them (though not into one element).
            v = v.reshape(v.shape[extra:])
        try:
            v = np.broadcast_to(v, sel.shape)
        except ValueError:
            raise InvalidArgumentError(f"could not broadcast input array from shape {v.shape} into shape {sel.shape}") from None
        box = sel.box(v)
        if box.dtype != dtype or not (box.flags.c_contiguous or box.flags.f_contiguous):
            box = np.ascontiguousarray(box, dtype=dtype)
        return box

    def _write(self, key, value, dtype, missing=None):
        if self._lod:
            raise ReadOnlyError("levels of detail are computed from level 0 at commit; write level 0")
        shape = self.shape
        if (key is Ellipsis and missing is None and type(value) is np.ndarray and value.dtype == dtype
                and value.shape == shape and value.flags.c_contiguous):
            # The whole variable from an array that matches it: nothing to select, convert or copy.
            self._ds._check_alloc(value.nbytes)  # as a write through a selection checks it
            if value.size:
                self._ds._core.write(self._index, _ZEROS[len(shape)], _ONES[len(shape)], value, None)
            return
        sel = select(key, shape)
        if isinstance(value, np.ma.MaskedArray) and missing is None and self.has_mask:
            missing = np.ma.getmaskarray(value)
            value = value.data
        box = self._box(sel, value, dtype)
        if missing is not None:
            missing = np.asarray(missing)
            if missing.dtype != np.bool_:
                raise TypeMismatchError(f"the missing-value mask must be bool, not {missing.dtype}")
            missing = self._box(sel, missing, np.dtype(np.bool_))
            order = "F" if box.flags.f_contiguous and not box.flags.c_contiguous else "C"
            missing = np.asarray(missing, order=order)
        if sel.empty:
            return
        self._ds._core.write(self._index, sel.start, sel.step, box, missing)

    def __setitem__(self, key, value):
        self._write(key, value, self.dtype)

    def write(self, key: Any, value: Any, missing: Any = None) -> None:
        """Writes ``value`` at ``self[key]``; ``missing`` (bool, broadcast like ``value``) marks missing
        values of a variable with a mask. A NumPy masked array carries its own mask."""
        self._write(key, value, self.dtype, missing)

    def resize(self, size: int | Sequence[int], axis: str | int | None = None) -> None:
        """Resizes growable axes: ``size`` is the new shape, or with ``axis`` (a name or position) that axis's new size.

        Sizes are integers (NumPy's too); a float, a string or a bool is an :class:`InvalidArgumentError`.
        Every size is checked before any axis changes: an axis that would change but is not growable
        or would have no samples (:class:`InvalidArgumentError`), or would pass its ``max_size`` or
        the format's limits (:class:`OutOfRangeError`), leaves every axis as it was. The axes are the dataset's: every
        variable spanning a resized axis changes with it.
        """
        if self._lod:
            raise ReadOnlyError(f"variable {self._name!r}: levels of detail follow level 0; resize level 0")
        dims = self.dims
        old = self.shape
        if axis is not None:
            d = self._axis_position(axis)
            shape: list[Any] = list(old)
            shape[d] = size
        else:
            shape = list(size) if isinstance(size, (list, tuple)) else [size]
        if len(shape) != len(dims):
            raise InvalidArgumentError(f"variable {self._name!r} has {len(dims)} axes; the new shape {tuple(shape)} has {len(shape)}")
        new = [_new_size(a, n) for a, n in zip(dims, shape)]
        changes = [(dims[d], n) for d, (o, n) in enumerate(zip(old, new)) if o != n]
        if changes:
            # All at once: every size is checked (the format's limits with all of them too) before any axis changes.
            self._ds._core.resize_axes(changes)
            self._ds._changed()

    def _axis_position(self, axis):
        """The position of ``axis`` (a name, or a position counted from the end when negative)."""
        dims = self.dims
        if isinstance(axis, str):
            if axis not in dims:
                raise InvalidArgumentError(f"variable {self._name!r} does not span axis {axis!r} (axes: {dims})")
            return dims.index(axis)
        if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
            raise InvalidArgumentError(f"an axis is a name or a position, not {axis!r}")
        if not -len(dims) <= axis < len(dims):
            raise OutOfRangeError(f"variable {self._name!r} has {len(dims)} axes; there is no axis {int(axis)}")
        return int(axis) % len(dims)

    def append(self, data: Any, axis: str | int = 0) -> int:
        """Grows the growable ``axis`` (a name or position) by the samples in ``data`` and writes them
        at its end; returns the index of the first new sample.

        ``data`` has the variable's shape except along ``axis``, where it has the number of samples to
        add: ``(n, 3)`` along the first axis of a variable of shape ``(t, 3)``. An array without that axis
        (here of shape ``(3,)``, a row) is one sample. Any other shape is an :class:`InvalidArgumentError`:
        nothing else is broadcast or reshaped. Data with no samples along ``axis`` appends nothing and
        returns the axis's size (where the next sample goes), after the same checks (the axis must be
        growable, the dataset writable, the dtype one the variable takes).
        """
        if self._lod:
            raise ReadOnlyError(f"variable {self._name!r}: levels of detail are computed from level 0 at commit; append to level 0")
        d = self._axis_position(axis)
        name = self.dims[d]
        shape = self.shape
        data = np.asarray(data)
        given = data.shape
        if data.ndim == len(shape) - 1:
            data = np.expand_dims(data, d)
        if data.ndim != len(shape) or data.shape[:d] != shape[:d] or data.shape[d + 1:] != shape[d + 1:]:
            want = ", ".join("n" if i == d else str(n) for i, n in enumerate(shape))
            raise InvalidArgumentError(
                f"append to variable {self._name!r} of shape {shape} along axis {name!r}: data of shape {given} is not "
                f"of shape ({want}{',' if len(shape) == 1 else ''}) (n samples) or {shape[:d] + shape[d + 1:]} (one)")
        sel = select((slice(None),) * len(shape), data.shape)
        box = self._box(sel, data, self.dtype)
        if sel.empty:
            # No samples (axes have at least one, so only along ``axis``): resizing the axis to its
            # size makes the checks an append makes, and changes nothing.
            self._ds._core.resize_axis(name, shape[d])
            return shape[d]
        start = self._ds._core.append(self._index, name, box)
        self._ds._changed()
        return start[d]


def _variable(ds, name, lod):
    """Unpickles a variable (see Variable.__reduce__)."""
    v = ds[name]
    return v.lod(lod) if lod else v


class _MaskView:
    """``var.mask[key]``: the missing-value mask of ``var[key]`` (True: missing)."""

    def __init__(self, var):
        self._var = var

    def __getitem__(self, key):
        var = self._var
        sel = select(key, var.shape)
        var._ds._check_alloc(math.prod(sel.count))
        box = np.empty(sel.count, dtype=np.bool_)
        if not sel.empty:
            var._ds._core.read_mask(var._index, var._lod, sel.start, sel.step, box)
        return sel.finish(box)

    @property
    def shape(self):
        """The shape of the mask (the variable's)."""
        return self._var.shape


class _StoredView:
    """``var.stored[key]``: a quantized variable's stored integers (uint8 or uint16)."""

    def __init__(self, var):
        self._var = var
        self.dtype = np.dtype(var.quantization["storage"])

    def __getitem__(self, key):
        return self._var._read(key, "C", self.dtype)

    def __setitem__(self, key, value):
        self._var._write(key, value, self.dtype)

    def read(self, key=(), order="C", out=None):
        """Reads the stored integers of ``var[key]`` in ``order`` (or into ``out``, as Variable.read)."""
        return self._var._read(key, order, self.dtype, out)

    @property
    def shape(self):
        """The shape (the variable's)."""
        return self._var.shape
