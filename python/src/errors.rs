//! libvds errors as Python exceptions.
//!
//! The exception classes are defined in Python (python/vds/errors.py), where
//! multiple inheritance is plain (`NotFoundError` is also a
//! `FileNotFoundError`); this side names the library's error kind and hands
//! over the message and, for corruption, the location.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Why a call failed: the library refused, or the dataset was closed.
pub(crate) enum Failure {
    /// An error of libvds.
    Library(vds::Error),
    /// The Python object's dataset was closed before the call.
    Closed,
    /// A request the library never sees, refused here (kind, message).
    Refused(&'static str, String),
}

impl From<vds::Error> for Failure {
    fn from(e: vds::Error) -> Failure {
        Failure::Library(e)
    }
}

/// The result of work done with the GIL released, converted to a Python
/// exception once the GIL is held again.
pub(crate) type Outcome<T> = Result<T, Failure>;

/// Converts a failure to the matching exception of `vds.errors`.
pub(crate) fn to_py(py: Python<'_>, f: Failure) -> PyErr {
    let (kind, message, location) = match f {
        Failure::Library(e) => {
            // `ErrorKind` is non-exhaustive: its Debug name ("Corrupt", "NotFound", ...)
            // selects the class, and a kind added later falls back to VdsError.
            let loc = e.location().map(|l| (l.object.clone(), l.slot, l.offset));
            (format!("{:?}", e.kind()), e.message().to_owned(), loc)
        }
        Failure::Closed => ("Closed".to_owned(), "the dataset is closed".to_owned(), None),
        Failure::Refused(kind, message) => (kind.to_owned(), message, None),
    };
    let made =
        py.import("vds.errors").and_then(|m| m.getattr("_from_library")).and_then(|f| f.call1((kind.as_str(), message.as_str(), location)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        // Only when the package is broken: keep the library's message.
        Err(e) => PyRuntimeError::new_err(format!("{kind}: {message} (vds.errors unavailable: {e})")),
    }
}

/// Shorthand: a library result as a Python result.
pub(crate) fn lib<T>(py: Python<'_>, r: vds::Result<T>) -> PyResult<T> {
    r.map_err(|e| to_py(py, Failure::Library(e)))
}

/// An `InvalidArgumentError` raised before the library is called.
pub(crate) fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, Failure::Refused("InvalidArgument", message.into()))
}
