//! File-system paths from Python, as `os.fsencode` makes them: a str in the
//! file-system encoding (surrogate escapes give back the bytes they stand
//! for), bytes as they are, an `os.PathLike` through its `__fspath__`,
//! called once. PyO3's own `PathBuf` conversion panics on a str the encoder
//! refuses (a lone surrogate); here that is the encoder's
//! `UnicodeEncodeError`, an ordinary exception.
//!
//! The path borrows the encoded bytes object rather than copying it (a
//! function holds it only for its call; the copy was an allocation and a
//! free on every call). Inside a release of the GIL, a function uses it as
//! a `&Path` (`let path: &Path = &path;`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A path argument of a compiled function (a file, or a URL as text).
pub(crate) struct FsPath<'py>(Bound<'py, PyBytes>);

impl std::ops::Deref for FsPath<'_> {
    type Target = Path;

    fn deref(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.0.as_bytes()))
    }
}

impl<'py> FromPyObject<'_, 'py> for FsPath<'py> {
    type Error = PyErr;

    fn extract(ob: Borrowed<'_, 'py, PyAny>) -> PyResult<FsPath<'py>> {
        let py = ob.py();
        let encoded = if ob.is_exact_instance_of::<PyString>() {
            // A str, the common case, without a call into Python code.
            // SAFETY: `ob` is a live str; the call returns a new reference,
            // or NULL with the exception set, which `from_owned_ptr_or_err` takes.
            unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyUnicode_EncodeFSDefault(ob.as_ptr()))? }
        } else {
            py.import("os")?.call_method1("fsencode", (&*ob,))?
        };
        Ok(FsPath(encoded.cast_into::<PyBytes>()?))
    }
}
