"""Type stubs of ``vds._segy``: SEG-Y conversion (``vds.from_segy``, ``vds.to_segy``)."""

from os import PathLike
from typing import Any, Optional, Sequence

def from_segy(
    path: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    inline_byte: int = 189,
    crossline_byte: int = 193,
    offset_byte: int = 37,
    prestack: bool = False,
    two_d: bool = False,
    chunks: Optional[Sequence[int]] = None,
    codec: Any = ("deflate", 1),
    lods: Optional[int] = None,
    lod_method: str = "average",
    partitionings: Sequence[Sequence[int]] = (),
    overwrite: bool = False,
    sync: bool = True,
    buffer_size: Optional[int] = None,
) -> str: ...
def to_segy(
    src: str | PathLike[str],
    path: str | PathLike[str],
    variable: Optional[str] = None,
    *,
    segy_format: Optional[int] = None,
    overwrite: bool = False,
    buffer_size: Optional[int] = None,
) -> str: ...
