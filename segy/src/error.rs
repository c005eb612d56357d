//! The crate's one error type: what was wrong, and where in the file (the
//! trace number, counted from 1 as SEG-Y tools do, and the byte offset).

use std::fmt;

/// What kind of failure an [`Error`] is; says what the caller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing the file failed.
    Io,
    /// The bytes are not valid SEG-Y (truncated, absurd counts, unknown codes).
    Malformed,
    /// Valid SEG-Y that this crate does not handle (format 4, extended trace headers).
    Unsupported,
    /// The traces do not form a volume (duplicates, inconsistent numbering).
    Geometry,
    /// A caller's argument is wrong (a header byte position out of range).
    InvalidArgument,
}

/// A failure, with the trace and byte offset it concerns when it concerns one.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    trace: Option<u64>,
    offset: Option<u64>,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, trace: None, offset: None, message: message.into() }
    }
    pub(crate) fn malformed(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Malformed, message)
    }
    /// At byte `offset` of the file.
    pub(crate) fn at(mut self, offset: u64) -> Error {
        self.offset = Some(offset);
        self
    }
    /// About trace `index` (0-based; shown 1-based).
    pub(crate) fn trace(mut self, index: u64) -> Error {
        self.trace = Some(index + 1);
        self
    }
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The trace concerned, counted from 1, if any.
    pub fn trace_number(&self) -> Option<u64> {
        self.trace
    }
    /// The byte offset in the file concerned, if any.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }
    /// The description without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.trace, self.offset) {
            (Some(t), Some(o)) => write!(f, "trace {t} (byte {o}): {}", self.message),
            (Some(t), None) => write!(f, "trace {t}: {}", self.message),
            (None, Some(o)) => write!(f, "byte {o}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
