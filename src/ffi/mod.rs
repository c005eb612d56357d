//! The C ABI: `include/vds.h` is generated from this module by cbindgen.
//!
//! Every exported function's body sits in `ffi_boundary!`, which catches
//! unwinding and turns it into `VDS_ERR_INTERNAL`. Handles are ids handed out
//! by a registry, never dereferenced as pointers: a NULL, closed or
//! wrong-kind handle is looked up and refused before any use.
//!
//! This module uses only the crate's public API, so that C, Rust and any
//! other front end cannot drift apart.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

use crate::{Error, ErrorKind};
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

mod builder;
mod dataset;
mod growth;
mod layers;

pub use builder::*;
pub use dataset::*;
pub use layers::*;

/// Status codes returned by every libvds function. `VDS_OK` is 0; values are
/// never renumbered or reused. `vds_last_error_message()` explains the
/// latest failure on the calling thread in words.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_status {
    /// Success.
    VDS_OK = 0,
    /// An argument is malformed or inconsistent (bad shape, unknown axis, bad UTF-8, ...).
    VDS_ERR_INVALID_ARGUMENT = 1,
    /// A named variable, axis or file does not exist.
    VDS_ERR_NOT_FOUND = 2,
    /// The file to create exists already.
    VDS_ERR_ALREADY_EXISTS = 3,
    /// The file is damaged; the message names the structure and its offset.
    VDS_ERR_CORRUPT = 4,
    /// The operating system reported an I/O error.
    VDS_ERR_IO = 5,
    /// The file was written by an incompatible major version of the format.
    VDS_ERR_UNSUPPORTED_VERSION = 6,
    /// The file uses a feature, codec or data type this library does not know.
    VDS_ERR_UNSUPPORTED_FEATURE = 7,
    /// The buffer's data type does not match the variable's.
    VDS_ERR_TYPE_MISMATCH = 8,
    /// A region or index lies outside the variable's extent, or a size overflows.
    VDS_ERR_OUT_OF_RANGE = 9,
    /// The dataset is read-only.
    VDS_ERR_READ_ONLY = 10,
    /// Another writer holds the file.
    VDS_ERR_LOCKED = 11,
    /// A caller buffer is too small; the function reports the size it needs.
    VDS_ERR_BUFFER_TOO_SMALL = 12,
    /// Memory could not be allocated, or a size exceeds a limit.
    VDS_ERR_OUT_OF_MEMORY = 13,
    /// An earlier write on this handle failed; close and reopen it.
    VDS_ERR_POISONED = 14,
    /// A required pointer argument is NULL.
    VDS_ERR_NULL_POINTER = 15,
    /// A handle is not a live handle of the expected kind (closed, freed, or of another kind).
    VDS_ERR_BAD_HANDLE = 16,
    /// A bug in libvds (for example a caught panic). Please report it.
    VDS_ERR_INTERNAL = 99,
}

impl vds_status {
    fn from_kind(kind: ErrorKind) -> vds_status {
        // One exhaustive match: a new ErrorKind forces a decision here.
        #[allow(clippy::wildcard_enum_match_arm)]
        match kind {
            ErrorKind::InvalidArgument => vds_status::VDS_ERR_INVALID_ARGUMENT,
            ErrorKind::NotFound => vds_status::VDS_ERR_NOT_FOUND,
            ErrorKind::AlreadyExists => vds_status::VDS_ERR_ALREADY_EXISTS,
            ErrorKind::Corrupt => vds_status::VDS_ERR_CORRUPT,
            ErrorKind::Io => vds_status::VDS_ERR_IO,
            ErrorKind::UnsupportedVersion => vds_status::VDS_ERR_UNSUPPORTED_VERSION,
            ErrorKind::UnsupportedFeature => vds_status::VDS_ERR_UNSUPPORTED_FEATURE,
            ErrorKind::TypeMismatch => vds_status::VDS_ERR_TYPE_MISMATCH,
            ErrorKind::OutOfRange => vds_status::VDS_ERR_OUT_OF_RANGE,
            ErrorKind::ReadOnly => vds_status::VDS_ERR_READ_ONLY,
            ErrorKind::Locked => vds_status::VDS_ERR_LOCKED,
            ErrorKind::BufferTooSmall => vds_status::VDS_ERR_BUFFER_TOO_SMALL,
            ErrorKind::OutOfMemory => vds_status::VDS_ERR_OUT_OF_MEMORY,
            ErrorKind::Poisoned => vds_status::VDS_ERR_POISONED,
            ErrorKind::Internal => vds_status::VDS_ERR_INTERNAL,
        }
    }
}

/// A failure inside an exported function: a status and its message.
pub(crate) struct Fail(vds_status, String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(vds_status::from_kind(e.kind()), e.to_string())
    }
}

pub(crate) type FfiResult<T = ()> = std::result::Result<T, Fail>;

pub(crate) fn fail<T>(status: vds_status, msg: impl Into<String>) -> FfiResult<T> {
    Err(Fail(status, msg.into()))
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // try_with: during thread teardown (a C destructor calling libvds) the
    // thread-local may be gone, and `with` would panic outside the boundary.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = c);
}

/// Runs an exported function's body: catches panics, records the message of
/// a failure, and returns its status.
pub(crate) fn boundary(name: &str, body: impl FnOnce() -> FfiResult) -> vds_status {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => vds_status::VDS_OK,
        Ok(Err(Fail(status, msg))) => {
            set_last_error(&format!("{name}: {msg}"));
            status
        }
        Err(panic) => {
            set_last_error(&format!("{name}: internal error (a panic was caught: {}); please report it", panic_text(&*panic)));
            vds_status::VDS_ERR_INTERNAL
        }
    }
}

fn panic_text(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| (*s).to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// Wraps the body of every exported function that returns `vds_status`.
macro_rules! ffi_boundary {
    ($name:literal, $body:block) => {
        $crate::ffi::boundary($name, || -> $crate::ffi::FfiResult { $body })
    };
}
pub(crate) use ffi_boundary;

/// Wraps the body of an exported function that cannot fail, returning `$default` on a panic.
macro_rules! ffi_infallible {
    ($default:expr, $body:block) => {
        std::panic::catch_unwind(|| $body).unwrap_or($default)
    };
}

/// The kinds of objects handed out through the C ABI.
#[derive(Clone)]
pub(crate) enum Object {
    Builder(Arc<Mutex<crate::DatasetBuilder>>),
    Dataset(Arc<dataset::DatasetObj>),
}

/// Live handles by id. Ids are never reused, so a closed handle stays invalid.
struct Registry {
    next: usize,
    live: HashMap<usize, Object>,
}

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    // Ids are multiples of 16 from 0x10000, so they look like aligned pointers.
    R.get_or_init(|| Mutex::new(Registry { next: 0x10000, live: HashMap::new() })).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers `obj` and returns its handle id.
pub(crate) fn register(obj: Object) -> FfiResult<usize> {
    let mut r = registry();
    let id = r.next;
    // Ids are never reused: when they run out (only conceivable on 32-bit hosts), refuse.
    r.next = id.checked_add(16).ok_or_else(|| Fail(vds_status::VDS_ERR_OUT_OF_MEMORY, "no handle ids left".into()))?;
    r.live.insert(id, obj);
    Ok(id)
}

/// Looks up a live handle.
pub(crate) fn lookup(id: usize, what: &str) -> FfiResult<Object> {
    if id == 0 {
        return fail(vds_status::VDS_ERR_NULL_POINTER, format!("the {what} handle is NULL"));
    }
    match registry().live.get(&id) {
        Some(o) => Ok(o.clone()),
        None => fail(vds_status::VDS_ERR_BAD_HANDLE, format!("{id:#x} is not a live handle (already closed or freed, or never created)")),
    }
}

/// Removes a handle from the registry, returning its object.
pub(crate) fn unregister(id: usize) -> Option<Object> {
    registry().live.remove(&id)
}

/// The handle kind's name, for messages.
pub(crate) fn kind_name(o: &Object) -> &'static str {
    match o {
        Object::Builder(_) => "a vds_builder",
        Object::Dataset(_) => "a vds_dataset",
    }
}

/// Reads a NUL-terminated UTF-8 string argument.
pub(crate) unsafe fn arg_str<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return fail(vds_status::VDS_ERR_NULL_POINTER, format!("{what} is NULL"));
    }
    // SAFETY: the caller promises a NUL-terminated string that outlives the call.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|_| Fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{what} is not valid UTF-8")))
}

/// Reads an optional string argument (NULL gives `None`).
pub(crate) unsafe fn arg_opt_str<'a>(p: *const c_char, what: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { arg_str(p, what) }.map(Some)
    }
}

/// Reads an array argument of `n` elements, with a bound on `n` checked before the pointer is used.
pub(crate) unsafe fn arg_slice<'a, T>(p: *const T, n: usize, max: usize, what: &str) -> FfiResult<&'a [T]> {
    check_len::<T>(n, what)?;
    if n > max {
        return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{what} has {n} elements, at most {max} are allowed"));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return fail(vds_status::VDS_ERR_NULL_POINTER, format!("{what} is NULL"));
    }
    // SAFETY: the caller promises `n` readable elements at `p`; n is bounded above.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Refuses lengths no object can have: a Rust slice may not span more than
/// `isize::MAX` bytes, so making one from a larger C length would be undefined.
pub(crate) fn check_len<T>(n: usize, what: &str) -> FfiResult {
    if n > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return fail(vds_status::VDS_ERR_OUT_OF_RANGE, format!("the length of {what} ({n}) exceeds the largest possible object"));
    }
    Ok(())
}

/// Stores `value` through an output pointer.
pub(crate) unsafe fn out<T>(p: *mut T, value: T, what: &str) -> FfiResult {
    if p.is_null() {
        return fail(vds_status::VDS_ERR_NULL_POINTER, format!("{what} is NULL"));
    }
    // SAFETY: the caller promises a writable, aligned T at `p`.
    unsafe { p.write(value) };
    Ok(())
}

/// Copies `s` and a NUL into a caller buffer, snprintf-style.
///
/// `buf == NULL` with `cap == 0` is a size query: `*needed` is set and the
/// call succeeds. A buffer that is too small gets nothing and
/// `VDS_ERR_BUFFER_TOO_SMALL` with `*needed` set.
pub(crate) unsafe fn out_string(s: &str, buf: *mut c_char, cap: usize, needed: *mut usize) -> FfiResult {
    let n = s.len() + 1;
    if !needed.is_null() {
        // SAFETY: the caller promises a writable size_t at `needed` when it is not NULL.
        unsafe { needed.write(n) };
    }
    if buf.is_null() {
        return if cap == 0 { Ok(()) } else { fail(vds_status::VDS_ERR_NULL_POINTER, "buf is NULL but cap is not 0") };
    }
    if cap < n {
        return fail(vds_status::VDS_ERR_BUFFER_TOO_SMALL, format!("the string needs {n} bytes with its NUL, the buffer has {cap}"));
    }
    // SAFETY: the caller promises `cap` writable bytes at `buf`, and n <= cap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}

/// The library version as text, "MAJOR.MINOR.PATCH". The string is static; do not free it.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn vds_version() -> *const c_char {
    ffi_infallible!(std::ptr::null(), { concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast() })
}

/// The library version as a number, MAJOR * 1000000 + MINOR * 1000 + PATCH,
/// equal to `VDS_VERSION_NUMBER` of the header the program was compiled with
/// when header and library match.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn vds_version_number() -> u32 {
    ffi_infallible!(0, {
        let p = |s: &str| s.parse::<u32>().unwrap_or(0);
        p(env!("CARGO_PKG_VERSION_MAJOR")) * 1_000_000 + p(env!("CARGO_PKG_VERSION_MINOR")) * 1000 + p(env!("CARGO_PKG_VERSION_PATCH"))
    })
}

/// The message of the latest failure of a libvds call on this thread, or ""
/// if none failed yet. Never NULL. The string belongs to the library and
/// stays valid until the next libvds call on the same thread. The status a
/// function returns, not this message, says whether it failed.
///
/// Thread safety: each thread has its own message.
#[no_mangle]
pub extern "C" fn vds_last_error_message() -> *const c_char {
    ffi_infallible!(c"".as_ptr(), { LAST_ERROR.try_with(|e| e.borrow().as_ptr()).unwrap_or(c"".as_ptr()) })
}

/// A fixed description of a status code, e.g. "corrupt file" for
/// `VDS_ERR_CORRUPT`. Never NULL; the string is static, do not free it.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn vds_status_str(status: i32) -> *const c_char {
    ffi_infallible!(c"unknown status".as_ptr(), {
        let s: &CStr = match status {
            0 => c"ok",
            1 => c"invalid argument",
            2 => c"not found",
            3 => c"already exists",
            4 => c"corrupt file",
            5 => c"I/O error",
            6 => c"unsupported format version",
            7 => c"unsupported feature",
            8 => c"type mismatch",
            9 => c"out of range",
            10 => c"read-only",
            11 => c"locked by another writer",
            12 => c"buffer too small",
            13 => c"out of memory",
            14 => c"handle unusable after an earlier failure",
            15 => c"NULL pointer",
            16 => c"bad handle",
            99 => c"internal error",
            _ => c"unknown status",
        };
        s.as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_with_a_message() {
        let explode = |n: u32| -> FfiResult {
            assert!(n == 0, "boom");
            Ok(())
        };
        let status = ffi_boundary!("vds_test_panic", { explode(1) });
        assert_eq!(status, vds_status::VDS_ERR_INTERNAL);
        // SAFETY: the library returns a NUL-terminated string valid until the next call.
        let msg = unsafe { CStr::from_ptr(vds_last_error_message()) }.to_str().unwrap().to_string();
        assert!(msg.starts_with("vds_test_panic: internal error") && msg.contains("boom"), "{msg}");
    }

    #[test]
    fn every_error_kind_has_a_distinct_status_with_a_description() {
        use ErrorKind::*;
        let kinds = [
            InvalidArgument,
            NotFound,
            AlreadyExists,
            Corrupt,
            Io,
            UnsupportedVersion,
            UnsupportedFeature,
            TypeMismatch,
            OutOfRange,
            ReadOnly,
            Locked,
            BufferTooSmall,
            OutOfMemory,
            Poisoned,
            Internal,
        ];
        let mut seen = Vec::new();
        for k in kinds {
            let s = vds_status::from_kind(k) as i32;
            assert!(!seen.contains(&s), "{k:?} shares status {s}");
            seen.push(s);
            // SAFETY: static strings.
            let text = unsafe { CStr::from_ptr(vds_status_str(s)) }.to_str().unwrap();
            assert_ne!(text, "unknown status", "{k:?}");
        }
    }
}
