"""Type stubs of ``vds._openvds``: OpenVDS conversion (``vds.from_openvds``, ``vds.to_openvds``)."""

from os import PathLike
from typing import Any, Optional, Sequence

DEFAULT_BUFFER_SIZE: int

def from_openvds(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    codec: Any = "zstd",
    overwrite: bool = False,
    sync: bool = True,
    buffer_size: int = ...,
) -> str: ...
def to_openvds(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    variables: Optional[Sequence[str]] = None,
    brick_size: Optional[int] = None,
    compression: str = "none",
    overwrite: bool = False,
    buffer_size: int = ...,
) -> str: ...
