//! NumPy arrays as libvds buffers: dtypes both ways, memory order, regions,
//! and new arrays that reads fill.

use crate::errors::{invalid, lib, to_py, Failure};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use vds::{Order, Region};

/// The memory order of a contiguous array; refuses other layouts.
pub(crate) fn order_of(py: Python<'_>, a: &Bound<'_, PyUntypedArray>) -> PyResult<Order> {
    if a.is_c_contiguous() {
        Ok(Order::C)
    } else if a.is_fortran_contiguous() {
        Ok(Order::Fortran)
    } else {
        Err(invalid(py, "the array must be C or Fortran contiguous"))
    }
}

/// A region from its start and step; the shape is the array's.
pub(crate) fn region(py: Python<'_>, start: &[u64], step: &[u64], shape: &[usize]) -> PyResult<Region> {
    let shape: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
    let r = Region::new(start, &shape).and_then(|r| r.with_step(step));
    lib(py, r)
}

/// The memory order of array `a` and the region it covers at `start` with `step`.
pub(crate) fn request(py: Python<'_>, a: &Bound<'_, PyUntypedArray>, start: &[u64], step: &[u64]) -> PyResult<(Order, Region)> {
    Ok((order_of(py, a)?, region(py, start, step, a.shape())?))
}

/// Maps a failure to borrow or view array `what` to an `InvalidArgumentError` naming it.
pub(crate) fn bad_array<'py, E: std::fmt::Display>(py: Python<'py>, what: &'static str) -> impl Fn(E) -> PyErr + 'py {
    move |e| invalid(py, format!("the {what} array: {e}"))
}

/// Calls `$f::<T>(args)` with `T` the element type of the NumPy array
/// `$arr`, for the eleven types libvds stores. Dispatches on the dtype's
/// kind and size (one comparison each, not one dtype object per type); the
/// cast to `PyArrayDyn<T>` in `$f` then checks the dtype exactly, byte order included.
macro_rules! by_dtype {
    ($py:expr, $arr:expr, $f:ident($($a:expr),*)) => {{
        let dt = $arr.dtype();
        match (numpy::PyArrayDescrMethods::kind(&dt), numpy::PyArrayDescrMethods::itemsize(&dt)) {
            (b'f', 4) => $f::<f32>($($a),*),
            (b'f', 8) => $f::<f64>($($a),*),
            (b'i', 1) => $f::<i8>($($a),*),
            (b'i', 2) => $f::<i16>($($a),*),
            (b'i', 4) => $f::<i32>($($a),*),
            (b'i', 8) => $f::<i64>($($a),*),
            (b'u', 1) => $f::<u8>($($a),*),
            (b'u', 2) => $f::<u16>($($a),*),
            (b'u', 4) => $f::<u32>($($a),*),
            (b'u', 8) => $f::<u64>($($a),*),
            (b'b', 1) => $f::<bool>($($a),*),
            _ => Err($crate::errors::to_py(
                $py,
                $crate::errors::Failure::Refused("TypeMismatch", format!("arrays of {dt} cannot be stored (native-order integers, floats and bool only)")),
            )),
        }
    }};
}
pub(crate) use by_dtype;

/// The NumPy dtype of values of type `of`.
pub(crate) fn numpy_dtype(py: Python<'_>, of: vds::DType) -> PyResult<Bound<'_, numpy::PyArrayDescr>> {
    use numpy::dtype;
    use vds::DType as D;
    Ok(match of {
        D::Int8 => dtype::<i8>(py),
        D::Int16 => dtype::<i16>(py),
        D::Int32 => dtype::<i32>(py),
        D::Int64 => dtype::<i64>(py),
        D::UInt8 => dtype::<u8>(py),
        D::UInt16 => dtype::<u16>(py),
        D::UInt32 => dtype::<u32>(py),
        D::UInt64 => dtype::<u64>(py),
        D::Float32 => dtype::<f32>(py),
        D::Float64 => dtype::<f64>(py),
        D::Bool => dtype::<bool>(py),
        other => numpy::PyArrayDescr::new(py, other.name())?,
    })
}

/// The bytes of an array of `dtype` and `shape`; None beyond 2**64 - 1.
pub(crate) fn nbytes(dtype: vds::DType, shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(dtype.size() as u64, |n, &s| n.checked_mul(s))
}

/// A new C-order array of `dtype` and `shape`, zeroed, not yet handed to
/// Python: the destination of a whole read. Raises `OutOfMemoryError` when
/// it would exceed `limit` bytes, and NumPy's `MemoryError` when it cannot
/// be had.
pub(crate) fn zeroed<'py>(py: Python<'py>, dtype: vds::DType, shape: &[u64], limit: u64) -> PyResult<Bound<'py, PyUntypedArray>> {
    let bytes = nbytes(dtype, shape);
    if bytes.is_none_or(|b| b > limit) {
        let bytes = bytes.map_or_else(|| "more than 2**64 - 1".to_owned(), |b| b.to_string());
        let m = format!(
            "a selection of {bytes} bytes exceeds the memory limit of {limit} bytes (read less at a time, or open with a larger memory_limit=)"
        );
        return Err(to_py(py, Failure::Refused("OutOfMemory", m)));
    }
    if let Some(b) = bytes.filter(|&b| b > isize::MAX as u64) {
        // Within a limit given beyond what NumPy can index (which would raise ValueError).
        let m = format!("a selection of {b} bytes is more than an array can hold (2**63 - 1 bytes)");
        return Err(to_py(py, Failure::Refused("OutOfMemory", m)));
    }
    // NumPy's own bound on axes (64 since NumPy 2, 32 before: it raises beyond).
    let mut dims = [0 as numpy::npyffi::npy_intp; 64];
    let Some(dims_used) = dims.get_mut(..shape.len()) else { return Err(invalid(py, format!("{} axes (at most 64)", shape.len()))) };
    for (d, &n) in dims_used.iter_mut().zip(shape) {
        *d = n as numpy::npyffi::npy_intp;
    }
    let nd = shape.len() as std::os::raw::c_int;
    // Zeroed (calloc: large arrays cost no pass), so that no value is
    // ever uninitialised; made through NumPy's C API rather than
    // `PyArray::zeros`, which panics where NumPy raises MemoryError.
    // SAFETY: `dims` holds `nd` extents (each within the memory limit
    // checked above, so within npy_intp), and PyArray_Zeros steals the
    // reference to the descriptor that `into_dtype_ptr` makes.
    unsafe {
        let ptr = numpy::npyffi::PY_ARRAY_API.PyArray_Zeros(py, nd, dims.as_mut_ptr(), numpy_dtype(py, dtype)?.into_dtype_ptr(), 0);
        Bound::from_owned_ptr_or_err(py, ptr)?.cast_into::<PyUntypedArray>().map_err(PyErr::from)
    }
}

/// The memory of `fresh`, a C-order array [`zeroed`] made, as bytes for a
/// read to fill.
///
/// # Safety
/// The caller made the array and has handed it to no Python code, so that
/// nothing else views or changes its memory while the slice lives.
// As NumPy's own `as_slice_mut`: the array, not the borrow, owns the memory.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn fresh_bytes<'a>(fresh: &'a Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let len = fresh.len() * fresh.dtype().itemsize();
    // SAFETY: a C-contiguous array's data is `len` bytes, NumPy's data
    // pointer is never null, and the caller guarantees no other access.
    unsafe { std::slice::from_raw_parts_mut((*fresh.as_array_ptr()).data.cast::<u8>(), len) }
}
