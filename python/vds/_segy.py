"""SEG-Y files to containers and back: ``vds.from_segy`` and ``vds.to_segy``.

Both call the Rust ``vds-segy`` crate through the compiled core, the same
code as ``vds import`` and ``vds export``, with the GIL released; Ctrl-C
stops them between blocks (KeyboardInterrupt) and leaves no destination.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from . import _vds
from .errors import InvalidArgumentError


def from_segy(path: str | os.PathLike[str], dst: str | os.PathLike[str], *, inline_byte: int = 189,
              crossline_byte: int = 193, offset_byte: int = 37, prestack: bool = False, two_d: bool = False,
              chunks: Sequence[int] | None = None, codec: Any = ("deflate", 1), lods: int | None = None,
              lod_method: str = "average", partitionings: Sequence[Sequence[int]] = (), overwrite: bool = False,
              sync: bool = True, buffer_size: int | None = None) -> str:
    """Imports the SEG-Y file ``path`` (rev 0, 1 or 2.1; any sample format, byte order and trace
    order) into a new container ``dst``, as ``vds import`` does. Returns ``dst``.

    The samples become ``amplitude`` [inline, crossline, sample] in the sample
    format's own type (IBM floats as float32); pre-stack gathers add an
    ``offset`` axis before the samples, and a 2-D line is [cdp, sample]. Where
    the grid has no trace, the values read the fill value and the
    missing-value mask is set. Every trace header is kept in
    ``segy_trace_header`` (uint8 [..., header=240]), the textual and binary
    headers and the grid in the ``segy`` attribute, and the world coordinates
    of the grid (fitted to CDP X/Y) in ``survey_coordinate_system``;
    :func:`to_segy` writes them back.

    ``inline_byte``, ``crossline_byte``, ``offset_byte``: the trace header
    bytes (1-based, as in the standard) of the inline, crossline and offset
    numbers (rev 0 files often use 9 and 21). ``prestack``: gathers by
    offset (also chosen when inline and crossline repeat); ``two_d``: one
    2-D line, whatever the inline numbers. ``chunks``: the chunk shape of
    ``amplitude`` (default at most 64 along each axis, evened out so that
    the last chunk is nearly full: 200 inlines make 4 chunks of 50; the
    trace headers follow it);
    ``codec`` as in :func:`vds.create` (default deflate level 1); ``lods``
    levels of detail with ``lod_method``; ``partitionings``: further chunk
    shapes (2-D tiles). ``buffer_size``: bytes of the blocks in flight (64 MiB:
    two of 32 MiB, one read while the other is written).

    Raises :class:`NotFoundError` when ``path`` does not exist,
    :class:`CorruptFileError` for a damaged file (``offset`` is the byte,
    ``object`` the trace), :class:`InvalidArgumentError` for traces that form
    no volume (duplicates) or bad byte positions, :class:`UnsupportedError`
    for what the reader does not handle, and :class:`AlreadyExistsError`
    when ``dst`` exists and ``overwrite`` is false.
    """
    from . import _codec_spec

    spec = {
        "inline_byte": _position("inline_byte", inline_byte), "crossline_byte": _position("crossline_byte", crossline_byte),
        "offset_byte": _position("offset_byte", offset_byte), "prestack": bool(prestack), "two_d": bool(two_d),
        "codec": _codec_spec(codec if codec is not None else "none"),
        "chunks": None if chunks is None else [int(c) for c in chunks],
        "lods": None if not lods else int(lods), "lod_method": str(lod_method),
        "partitionings": [[int(c) for c in p] for p in partitionings],
        "overwrite": bool(overwrite), "sync": bool(sync), "block_bytes": None if buffer_size is None else int(buffer_size),
    }
    _vds.import_segy(os.fspath(path), os.fspath(dst), json.dumps(spec))
    return os.fspath(dst)


def to_segy(src: str | os.PathLike[str], path: str | os.PathLike[str], variable: str | None = None, *,
            segy_format: int | None = None, overwrite: bool = False, buffer_size: int | None = None) -> str:
    """Writes a variable of the container ``src`` as the SEG-Y file ``path``, as ``vds export`` does.
    Returns the name of the variable written.

    ``variable``: by default the one imported from SEG-Y, else the only one.
    A container imported from SEG-Y (by :func:`from_segy`, ``vds import``, or
    :func:`vds.from_openvds` from a volume with SEG-Y headers) is written
    back with its kept textual, binary and trace headers, byte order, sample
    format and trace order, so a regular sorted file comes back byte for
    byte; any other variable of 1 to 4 axes (the last the samples) gets
    headers made from its axes: rev 1, big-endian, inline and crossline
    numbers at bytes 189 and 193 from the axes' coordinates, CDP X/Y from a
    ``survey_coordinate_system`` attribute. Missing traces (masked) are left
    out. ``segy_format``: the sample format code (1 IBM float, 5 IEEE float,
    ...; default: the kept one, else the variable's type's).

    Traces of more than 32,767 samples make a rev 2 file with the extended
    sample count; beyond 65,535 the 16-bit counts say 0 and the extended
    count rules (segyio reads such files).

    Raises :class:`InvalidArgumentError` for a variable SEG-Y cannot hold (a
    type no format holds, more than 4 axes, format 4),
    :class:`AlreadyExistsError` when ``path`` exists and ``overwrite`` is
    false. The file appears only when complete.
    """
    return _vds.export_segy(os.fspath(src), os.fspath(path), variable, segy_format, bool(overwrite),
                            None if buffer_size is None else int(buffer_size))


def _position(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{name} {value!r}: a trace header byte position, counted from 1")
    return value
