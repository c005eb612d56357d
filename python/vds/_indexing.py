"""NumPy basic indexing over a region reader: keys to (start, count, step) and back.

libvds reads and writes boxes with a positive step. A NumPy basic index
(integers, negative integers, slices with any step, Ellipsis, newaxis) is
turned into one such box plus what to do with the box afterwards: axes to
reverse (negative steps), axes to drop (integers) and axes to insert
(newaxis).
"""

import operator

import numpy as np

from .errors import OutOfRangeError

_VALID = "only integers, slices (`:`), ellipsis (`...`) and numpy.newaxis (`None`) are valid indices"


class Selection:
    """One basic index applied to a shape: the box to read and how to shape the result."""

    __slots__ = ("start", "count", "step", "flip", "shape", "scalar")

    def __init__(self, start, count, step, flip, shape, scalar):
        self.start = start  # first index read along each axis
        self.count = count  # samples read along each axis
        self.step = step  # positive step along each axis
        self.flip = flip  # axes whose samples come out in reverse
        self.shape = shape  # the shape NumPy would give the result
        self.scalar = scalar  # whether NumPy gives a scalar (integers only, no Ellipsis)

    @property
    def empty(self):
        """Whether the box holds no sample."""
        return 0 in self.count

    def finish(self, box, order="C"):
        """The result of the index from the box read at (start, count, step), in `order`."""
        out = np.flip(box, axis=self.flip) if self.flip else box
        out = out.reshape(self.shape, order="A")
        if self.scalar:
            return out[()]
        # (Not np.ascontiguousarray: it makes a 0-d result 1-d.)
        if order == "F":
            return out if out.flags.f_contiguous else out.copy(order="F")
        return out if out.flags.c_contiguous else out.copy(order="C")

    def box(self, value):
        """`value` (already of the result's shape) as the box to write, with flips undone."""
        v = value.reshape(self.count, order="A")
        return np.flip(v, axis=self.flip) if self.flip else v


def _expand(key, ndim):
    """``key`` with its Ellipsis (or missing trailing axes) replaced by whole slices; and whether
    NumPy would give a scalar (only integers, one per axis)."""
    ellipses = sum(1 for k in key if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {real} were indexed")
    fill = (slice(None),) * (ndim - real)
    if ellipses:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        return key[:i] + fill + key[i + 1:], False
    return key + fill, real == ndim and len(key) == ndim


def select(key, shape):
    """The Selection of NumPy basic index `key` on an array of `shape`.

    Raises IndexError (OutOfRangeError for an integer beyond its axis) as NumPy
    does for the same index; ValueError for a zero step.
    """
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(shape)
    # Scalar until a slice, an Ellipsis or a newaxis says otherwise (as NumPy).
    scalar = True
    if len(key) != ndim or any(k is None or k is Ellipsis for k in key):
        key, scalar = _expand(key, ndim)
    start, count, step, flip, out = [], [], [], [], []
    d = 0
    for k in key:
        if k is None:
            out.append(1)
            continue
        n = shape[d]
        if isinstance(k, slice):
            r = range(*k.indices(n))
            c = len(r)
            if c <= 1:
                # One sample or none: the step plays no part (and may exceed what the core takes).
                start.append(r.start if c else 0)
                step.append(1)
            elif r.step > 0:
                start.append(r.start)
                step.append(r.step)
            else:
                start.append(r[-1])
                step.append(-r.step)
                flip.append(d)
            count.append(c)
            out.append(c)
            scalar = False
        else:
            if isinstance(k, (bool, np.bool_)):
                raise IndexError(f"{_VALID}; boolean indices are advanced indexing, which vds does not take")
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(f"{_VALID}; got {k!r}") from None
            if not -n <= i < n:
                raise OutOfRangeError(f"index {i} is out of bounds for axis {d} with size {n}")
            start.append(i % n)
            count.append(1)
            step.append(1)
        d += 1
    return Selection(start, count, step, tuple(flip), tuple(out), scalar)
