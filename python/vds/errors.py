"""The exceptions of vds: every libvds error is one of these, with the library's message.

    VdsError                              base of everything below
    ├── InvalidArgumentError (ValueError) a malformed or inconsistent argument
    ├── NotFoundError (FileNotFoundError) a file, variable, axis or fragment that does not exist
    ├── AlreadyExistsError (FileExistsError)
    ├── CorruptFileError                  damaged bytes; .object, .slot and .offset say where
    ├── VdsIOError (OSError)              the operating system failed a read or write
    ├── UnsupportedError                  a newer format version or an unknown feature
    ├── TypeMismatchError (TypeError)     an array of the wrong dtype
    ├── OutOfRangeError (IndexError)      a region or index beyond a variable's extent
    ├── ReadOnlyError                     writing a dataset opened read-only
    ├── LockedError                       another writer holds the file
    ├── OutOfMemoryError (MemoryError)    beyond the memory limit
    ├── PoisonedError                     an earlier write failed: reopen the dataset
    ├── ClosedError (ValueError)          the dataset was closed
    └── InternalError                     a bug in libvds
"""


class VdsError(Exception):
    """Base class of every error libvds reports; ``str(e)`` is the library's message."""


class InvalidArgumentError(VdsError, ValueError):
    """An argument was malformed or inconsistent (bad shape, unknown codec, ...)."""


class NotFoundError(VdsError, FileNotFoundError):
    """A file, variable, axis, attribute or fragment does not exist."""


class AlreadyExistsError(VdsError, FileExistsError):
    """The file to create exists already (pass ``overwrite=True`` to replace it)."""


class CorruptFileError(VdsError):
    """The file's bytes are damaged or inconsistent.

    ``object`` names the structure that failed a check, ``slot`` the file it
    lives in (0: the container, 1..: external-file slots) and ``offset`` its
    byte offset in that file; all three are None when the library gave no location.
    """

    object = None
    slot = None
    offset = None


class VdsIOError(VdsError, OSError):
    """The operating system reported an I/O error."""


class UnsupportedError(VdsError):
    """The file needs a newer libvds (a newer major version, or a feature this build lacks)."""


class TypeMismatchError(VdsError, TypeError):
    """An array's dtype does not match the variable's and cannot be converted safely."""


class OutOfRangeError(VdsError, IndexError):
    """A region, index or level of detail lies outside the variable."""


class ReadOnlyError(VdsError):
    """The dataset was opened read-only (``mode="r"``), or the file forbids writing."""


class LockedError(VdsError):
    """Another writer holds the file."""


class OutOfMemoryError(VdsError, MemoryError):
    """A request exceeds the memory limit, or memory could not be reserved."""


class PoisonedError(VdsError):
    """An earlier write failed; reopen the dataset to continue from its last commit."""


class ClosedError(VdsError, ValueError):
    """The dataset was closed."""


class InternalError(VdsError):
    """A bug in libvds: please report it with the message."""


_BY_KIND = {
    "InvalidArgument": InvalidArgumentError,
    "BufferTooSmall": InvalidArgumentError,
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "Corrupt": CorruptFileError,
    "Io": VdsIOError,
    "UnsupportedVersion": UnsupportedError,
    "UnsupportedFeature": UnsupportedError,
    "TypeMismatch": TypeMismatchError,
    "OutOfRange": OutOfRangeError,
    "ReadOnly": ReadOnlyError,
    "Locked": LockedError,
    "OutOfMemory": OutOfMemoryError,
    "Poisoned": PoisonedError,
    "Closed": ClosedError,
    "Internal": InternalError,
}


def _from_library(kind, message, location=None):
    """The exception for a libvds error of ``kind`` (called by the compiled core)."""
    cls = _BY_KIND.get(kind, VdsError)
    # One argument only: OSError(message) then keeps str(e) == message.
    exc = cls(message)
    exc.kind = kind
    if location is not None:
        exc.object, exc.slot, exc.offset = location
    return exc
