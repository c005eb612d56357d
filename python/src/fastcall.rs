//! Module functions called the vectorcall way (PEP 590, `METH_FASTCALL |
//! METH_KEYWORDS`): the interpreter hands over its own array of arguments
//! and a tuple of keyword names, and makes no argument tuple or keyword
//! dict for the call.
//!
//! The flag is in the stable ABI from Python 3.10, and the one abi3 build
//! serves 3.9 too, so module init (lib.rs) makes a function this way only
//! on an interpreter of 3.10 or later, and PyO3's tuple-and-dict function
//! on 3.9. PyO3 itself gives fastcall functions only to builds for 3.10 and
//! later. For `vds.load` of a tiny file, the tuple, the dict and their
//! unpacking were about 3% of the call (440 of 15,840 instructions).
//!
//! An entry point runs its body through PyO3's own fastcall trampoline
//! (`pyo3::impl_`, what PyO3's generated functions call, present in builds
//! for 3.9 too), which attaches PyO3's state and raises a panic as
//! PanicException. Arguments are bound to parameters as PyO3 binds them,
//! with its messages: a parameter by position or by name, keyword-only ones
//! after the positional ones, the required ones checked last. The tests
//! call both forms with the same arguments and compare what they return and
//! raise. One difference is the interpreter's: a keyword that is not a str
//! (`load(**{1: 2})`) is refused before a fastcall function is called, with
//! its own TypeError ("keywords must be strings"), where PyO3 reports an
//! unexpected keyword argument.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyTuple};
use std::ffi::{CStr, CString};

/// Call flags of a function taking an argument array and keyword names
/// (`METH_FASTCALL | METH_KEYWORDS`; CPython's value since 3.7, in the
/// stable ABI since 3.10).
const FASTCALL_KEYWORDS: std::ffi::c_int = 0x0080 | ffi::METH_KEYWORDS;

/// What CPython calls for such a function.
pub(crate) type Entry =
    unsafe extern "C" fn(*mut ffi::PyObject, *const *mut ffi::PyObject, ffi::Py_ssize_t, *mut ffi::PyObject) -> *mut ffi::PyObject;

/// A function's parameters: its name, its parameters' names (the
/// positional ones first), how many may be given by position, and how many
/// of those are required. Keyword-only parameters are optional.
pub(crate) struct Signature<const N: usize> {
    pub(crate) function: &'static str,
    pub(crate) params: [&'static CStr; N],
    pub(crate) positional: usize,
    pub(crate) required: usize,
}

/// A call's arguments, bound to the parameters of a `Signature`.
pub(crate) type Args<'a, 'py, const N: usize> = [Option<Borrowed<'a, 'py, PyAny>>; N];

impl<const N: usize> Signature<N> {
    fn name(&self, i: usize) -> &'static str {
        self.params[i].to_str().unwrap_or("?")
    }

    /// Binds the arguments of one call to the parameters.
    ///
    /// # Safety
    /// As CPython calls a fastcall function: `args` holds `nargs` positional
    /// arguments and then one value per name in `kwnames`, a tuple of str
    /// or NULL, all alive for the call, with the thread attached.
    pub(crate) unsafe fn bind<'a, 'py>(
        &self,
        py: Python<'py>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<Args<'a, 'py, N>> {
        let nargs = usize::try_from(nargs).unwrap_or(0);
        if nargs > self.positional {
            let was = if nargs == 1 { "was" } else { "were" };
            let takes = if self.required == self.positional {
                format!("{}", self.positional)
            } else {
                format!("from {} to {}", self.required, self.positional)
            };
            return Err(PyTypeError::new_err(format!("{}() takes {takes} positional arguments but {nargs} {was} given", self.function)));
        }
        let mut out: Args<'a, 'py, N> = [None; N];
        for (i, slot) in out.iter_mut().enumerate().take(nargs) {
            // SAFETY: the first `nargs` entries of `args` are live references (the caller's promise).
            *slot = Some(unsafe { Borrowed::from_ptr(py, *args.add(i)) });
        }
        // SAFETY: `kwnames` is NULL or a tuple (the caller's promise).
        if let Some(kwnames) = unsafe { Borrowed::from_ptr_or_opt(py, kwnames) } {
            // SAFETY: as above, a tuple.
            let kwnames = unsafe { kwnames.cast_unchecked::<PyTuple>() };
            for (k, name) in kwnames.iter_borrowed().enumerate() {
                // SAFETY: one value per keyword name follows the positional arguments.
                let value = unsafe { Borrowed::from_ptr(py, *args.add(nargs + k)) };
                // SAFETY: `name` is a live str; the call compares it with a NUL-terminated ASCII name.
                let Some(i) =
                    self.params.iter().position(|p| unsafe { ffi::PyUnicode_CompareWithASCIIString(name.as_ptr(), p.as_ptr()) } == 0)
                else {
                    return Err(PyTypeError::new_err(format!("{}() got an unexpected keyword argument '{}'", self.function, *name)));
                };
                if out[i].replace(value).is_some() {
                    return Err(PyTypeError::new_err(format!("{}() got multiple values for argument '{}'", self.function, self.name(i))));
                }
            }
        }
        let missing: Vec<&str> = (0..self.required).filter(|&i| out[i].is_none()).map(|i| self.name(i)).collect();
        if !missing.is_empty() {
            let arguments = if missing.len() == 1 { "argument" } else { "arguments" };
            // As PyO3 lists them: 'a', 'a' and 'b', 'a', 'b', and 'c'.
            let mut list = String::new();
            for (i, m) in missing.iter().enumerate() {
                if i > 0 {
                    list.push_str(if missing.len() > 2 { "," } else { "" });
                    list.push_str(if i == missing.len() - 1 { " and " } else { " " });
                }
                list.push_str(&format!("'{m}'"));
            }
            let n = missing.len();
            return Err(PyTypeError::new_err(format!("{}() missing {n} required positional {arguments}: {list}", self.function)));
        }
        Ok(out)
    }
}

/// Extracts a bound argument as `T`, naming the parameter in a TypeError
/// as PyO3 does ("argument 'path': ...").
pub(crate) fn extract<'a, 'py, T: FromPyObject<'a, 'py, Error = PyErr>>(
    py: Python<'py>,
    name: &str,
    value: Borrowed<'a, 'py, PyAny>,
) -> PyResult<T> {
    value.extract().map_err(|e: PyErr| {
        if e.get_type(py).is(py.get_type::<PyTypeError>()) {
            let named = PyTypeError::new_err(format!("argument '{name}': {}", e.value(py)));
            named.set_cause(py, e.cause(py));
            named
        } else {
            e
        }
    })
}

/// A module function calling `entry` the fastcall way, named and
/// documented as `like` (the same function made by PyO3): its docstring
/// and text signature, so `help()` and `inspect.signature` show the same.
pub(crate) fn function<'py>(module: &Bound<'py, PyModule>, like: &Bound<'py, PyCFunction>, entry: Entry) -> PyResult<Bound<'py, PyAny>> {
    let py = module.py();
    let name: String = like.getattr("__name__")?.extract()?;
    let signature: Option<String> = like.getattr("__text_signature__")?.extract()?;
    let doc: Option<String> = like.getattr("__doc__")?.extract()?;
    let doc = match signature {
        Some(sig) => format!("{name}{sig}\n--\n\n{}", doc.unwrap_or_default()),
        None => doc.unwrap_or_default(),
    };
    let text = |s: String| CString::new(s).map_err(|_| PyTypeError::new_err("a function's name or docstring holds a NUL"));
    // CPython keeps pointers to the definition for the function's life: the
    // module's, so until the process ends. Made once per module init.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: text(name)?.into_raw(),
        // SAFETY: a function pointer as another: CPython calls it as the
        // flags say, with the arguments `Entry` takes (the union's own
        // fastcall member is left out of PyO3's builds for 3.9).
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionWithKeywords: unsafe { std::mem::transmute::<Entry, ffi::PyCFunctionWithKeywords>(entry) },
        },
        ml_flags: FASTCALL_KEYWORDS,
        ml_doc: text(doc)?.into_raw(),
    }));
    let module_name = module.name()?;
    // SAFETY: `def` lives forever; the module and its name are live; the call
    // returns a new reference, or NULL with the exception set.
    unsafe { pyo3::Bound::from_owned_ptr_or_err(py, ffi::PyCFunction_NewEx(def, module.as_ptr(), module_name.as_ptr())) }
}
