//! The one error type of the crate: what went wrong, and where.
//!
//! `Error` is a single boxed pointer so that `Result<T>` stays small. Callers
//! decide what to do next from [`Error::kind`]; corruption additionally
//! carries the object and the byte offset it was found at, so that a program
//! (not only a human reading the message) can locate the damage.

use std::fmt;

/// The result type of every fallible libvds operation.
pub type Result<T> = std::result::Result<T, Error>;

/// What kind of failure occurred. The kind says what the caller can do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument was malformed or inconsistent (bad shape, unknown axis name, ...).
    InvalidArgument,
    /// A named variable, axis, attribute or file does not exist.
    NotFound,
    /// The file to create exists already.
    AlreadyExists,
    /// The file's bytes are damaged or inconsistent; see [`Error::location`].
    Corrupt,
    /// The operating system reported an I/O error.
    Io,
    /// The file was written by an incompatible major version of the format.
    UnsupportedVersion,
    /// The file uses a feature (flag, codec, data type) this library does not know.
    UnsupportedFeature,
    /// The buffer's element type does not match the variable's data type.
    TypeMismatch,
    /// A region or index lies outside the variable's extent.
    OutOfRange,
    /// The dataset was opened read-only, or a feature flag forbids writing.
    ReadOnly,
    /// Another writer holds the file.
    Locked,
    /// A caller-supplied buffer is too small for the request.
    BufferTooSmall,
    /// A size exceeds a configured limit or memory could not be reserved.
    OutOfMemory,
    /// The dataset refused the operation because an earlier write failed;
    /// reopen it to continue from the last commit.
    Poisoned,
    /// A bug in libvds. Please report it.
    Internal,
}

/// Where in a file a structure was found to be corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The structure that failed a check: "descriptor", "commit slot 1",
    /// "index page", "chunk (0, 1, 3) of variable 'amplitude'", ...
    pub object: String,
    /// The file the structure lives in: 0 is the container, 1.. are the
    /// external-file slots of the descriptor.
    pub slot: u16,
    /// Byte offset of the structure in that file.
    pub offset: u64,
}

/// The error type of libvds.
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    message: String,
    location: Option<Location>,
    source: Option<std::io::Error>,
}

impl Error {
    /// Makes an error of the given kind with a message that says what was wrong.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error(Box::new(Inner { kind, message: message.into(), location: None, source: None }))
    }

    /// A corruption error: `object` at `offset` of file `slot` failed a check described by `detail`.
    pub(crate) fn corrupt(object: impl Into<String>, slot: u16, offset: u64, detail: impl Into<String>) -> Error {
        let object = object.into();
        let detail = detail.into();
        let file = if slot == 0 { String::new() } else { format!(" of external file slot {slot}") };
        let message = format!("corrupt {object} at offset {offset:#x}{file}: {detail}");
        Error(Box::new(Inner { kind: ErrorKind::Corrupt, message, location: Some(Location { object, slot, offset }), source: None }))
    }

    /// An I/O error with what was being done when it happened; its kind is
    /// `NotFound`, `AlreadyExists` or `OutOfMemory` for those I/O kinds and
    /// `Io` otherwise. For crates that open containers on storage of their
    /// own, as `remote::RemoteStorage` does over HTTP and S3.
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Error {
        let kind = match err.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
            std::io::ErrorKind::OutOfMemory => ErrorKind::OutOfMemory,
            _ => ErrorKind::Io,
        };
        let message = format!("{}: {err}", context.into());
        Error(Box::new(Inner { kind, message, location: None, source: Some(err) }))
    }

    /// The kind of the I/O error behind an `Io` error.
    pub(crate) fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.0.source.as_ref().map(std::io::Error::kind)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// For [`ErrorKind::Corrupt`], the structure and offset that failed a check.
    pub fn location(&self) -> Option<&Location> {
        self.0.location.as_ref()
    }

    /// The full message, the same text as `Display`.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Prefixes the message with context (e.g. the path or URL of the file),
    /// keeping kind and location.
    #[must_use]
    pub fn context(mut self, what: impl fmt::Display) -> Error {
        self.0.message = format!("{what}: {}", self.0.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {})", self.0.kind, self.0.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Shorthand for an `InvalidArgument` error.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}
