//! `vds_builder`: describes a container to create.

use super::dataset::{dtype_from_c, DatasetObj};
use super::{
    arg_opt_str, arg_slice, arg_str, fail, ffi_boundary, kind_name, lookup, out, register, unregister, vds_dataset, vds_status, FfiResult,
    Object,
};
use crate::{Axis, Codec, Compression, DatasetBuilder, Layout, VariableBuilder, MAX_DIMS};
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

/// A description of a container to create. Made by `vds_builder_new`, freed
/// by `vds_builder_free`. A builder may be used by one thread at a time.
pub struct vds_builder {
    _private: [u8; 0],
}

/// The compression stage of a codec.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_compression {
    /// Chunks are stored as raw little-endian bytes.
    VDS_COMPRESSION_NONE = 0,
    /// zlib-wrapped deflate, level 0..9.
    VDS_COMPRESSION_DEFLATE = 1,
    /// Zstandard, level 1..22 (format 1.3): at level 1 about as small as
    /// deflate level 1 and about four times faster both ways. Not in builds
    /// without the cargo feature `zstd`: creating the container then fails
    /// with `VDS_ERR_UNSUPPORTED_FEATURE`.
    VDS_COMPRESSION_ZSTD = 2,
    /// Lossy with a guaranteed bound (format 1.5; values predicted by
    /// graded anchored interpolation, format 1.8), float32 and float64
    /// only: every value read back is within the tolerance of the value
    /// written; NaNs, infinities, the fill value and the no-value marker
    /// come back bit for bit. Set with `vds_builder_set_bounded_codec`
    /// (`vds_builder_set_codec` refuses it, having no tolerance). Not in
    /// builds without the cargo feature `zstd`.
    VDS_COMPRESSION_BOUNDED = 3,
}

pub(crate) fn builder(b: *const vds_builder) -> FfiResult<Arc<Mutex<DatasetBuilder>>> {
    match lookup(b as usize, "builder")? {
        Object::Builder(x) => Ok(x),
        other => fail(vds_status::VDS_ERR_BAD_HANDLE, format!("the builder argument is {}, not a vds_builder", kind_name(&other))),
    }
}

/// Runs `f` on the builder's variable named `var`.
pub(crate) fn with_variable(b: *mut vds_builder, var: &str, f: impl FnOnce(&mut VariableBuilder) -> FfiResult) -> FfiResult {
    let b = builder(b)?;
    let mut b = b.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match b.variable_mut(var) {
        Some(v) => f(v),
        None => fail(vds_status::VDS_ERR_NOT_FOUND, format!("the builder has no variable named {var:?}")),
    }
}

/// Makes an empty builder and stores its handle in `*out_builder`.
///
/// Returns `VDS_OK`, or `VDS_ERR_NULL_POINTER` when `out_builder` is NULL.
/// Free the builder with `vds_builder_free`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_new(out_builder: *mut *mut vds_builder) -> vds_status {
    ffi_boundary!("vds_builder_new", {
        if out_builder.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_builder is NULL");
        }
        let id = register(Object::Builder(Arc::new(Mutex::new(DatasetBuilder::new()))))?;
        // SAFETY: checked non-NULL above; the caller promises it is writable.
        unsafe { out(out_builder, id as *mut vds_builder, "out_builder") }
    })
}

/// Frees a builder. NULL is a no-op. Returns `VDS_ERR_BAD_HANDLE` for a
/// handle that is not a live builder (which is then left alone).
#[no_mangle]
pub extern "C" fn vds_builder_free(b: *mut vds_builder) -> vds_status {
    ffi_boundary!("vds_builder_free", {
        if b.is_null() {
            return Ok(());
        }
        builder(b)?;
        unregister(b as usize);
        Ok(())
    })
}

/// Adds an axis: `name` (unique), `samples` (at least 1), `unit` (NULL for
/// none) and the coordinates of the first and last sample. Axes are added
/// slowest-varying first.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (bad UTF-8). Names and counts are checked by
/// `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_add_axis(
    b: *mut vds_builder,
    name: *const c_char,
    samples: u64,
    unit: *const c_char,
    first: f64,
    last: f64,
) -> vds_status {
    ffi_boundary!("vds_builder_add_axis", {
        let b = builder(b)?;
        // SAFETY: the caller promises NUL-terminated strings or NULL.
        let (name, unit) = unsafe { (arg_str(name, "name")?, arg_opt_str(unit, "unit")?) };
        let axis = Axis::new(name, samples).unit(unit.unwrap_or("")).coordinates(first, last);
        b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).axis(axis);
        Ok(())
    })
}

/// Adds a variable `name` of type `dtype` spanning `naxes` axes named in
/// `axes` (slowest first), with chunk extents `chunk[0..naxes]`, or, when
/// `chunk` is NULL, the default: slabs of whole trailing axes of at most
/// 4 MiB (one chunk for a variable of at most 4 MiB; SPEC.md 3.1). Defaults: fill
/// value 0 (false), no compression, no unit.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (unknown dtype, naxes 0 or above 8, bad UTF-8).
#[no_mangle]
pub unsafe extern "C" fn vds_builder_add_variable(
    b: *mut vds_builder,
    name: *const c_char,
    dtype: i32,
    axes: *const *const c_char,
    naxes: usize,
    chunk: *const u64,
) -> vds_status {
    ffi_boundary!("vds_builder_add_variable", {
        let b = builder(b)?;
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        let dtype = dtype_from_c(dtype)?;
        if naxes == 0 {
            return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, "naxes is 0: a variable spans at least one axis");
        }
        // SAFETY: the caller promises `naxes` readable pointers; arg_slice bounds naxes by MAX_DIMS first.
        let ptrs = unsafe { arg_slice(axes, naxes, MAX_DIMS, "axes")? };
        // SAFETY: each pointer is NULL (refused) or a NUL-terminated string, as the caller promises.
        let names = ptrs.iter().enumerate().map(|(i, &p)| unsafe { arg_str(p, &format!("axes[{i}]")) }).collect::<FfiResult<Vec<_>>>()?;
        let mut v = VariableBuilder::new(name, dtype, &names);
        if !chunk.is_null() {
            // SAFETY: the caller promises `naxes` readable extents when `chunk` is not NULL.
            v.chunk(unsafe { arg_slice(chunk, naxes, MAX_DIMS, "chunk")? });
        }
        b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).variable(&v);
        Ok(())
    })
}

/// Sets the fill value of variable `var`: `value` points to one element of
/// the variable's type (`value_len` bytes, native byte order; for bool one
/// byte, 0 or 1).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND` (no such variable), `VDS_ERR_TYPE_MISMATCH`
/// (`value_len` is not the element size), `VDS_ERR_INVALID_ARGUMENT`
/// (`value_len` above 8).
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_fill(b: *mut vds_builder, var: *const c_char, value: *const u8, value_len: usize) -> vds_status {
    ffi_boundary!("vds_builder_set_fill", {
        // SAFETY: the caller promises a string and `value_len` readable bytes.
        let var = unsafe { arg_str(var, "var")? };
        let bytes = unsafe { arg_slice(value, value_len, 8, "value")? };
        with_variable(b, var, |v| {
            let scalar = element_of(v, var, bytes, value_len)?;
            v.fill(scalar);
            Ok(())
        })
    })
}

/// One element of the variable's type from the caller's bytes (native order).
pub(crate) fn element_of(v: &VariableBuilder, var: &str, bytes: &[u8], value_len: usize) -> FfiResult<crate::Scalar> {
    let dtype = v.dtype();
    if bytes.len() != dtype.size() {
        return fail(
            vds_status::VDS_ERR_TYPE_MISMATCH,
            format!("variable {var:?} holds {dtype} ({} bytes), value_len is {value_len}", dtype.size()),
        );
    }
    Ok(super::dataset::scalar_from_native(dtype, bytes))
}

/// Sets the codec of variable `var`: `compression` (a `vds_compression`),
/// its `level` (deflate: 0..9, zstd: 1..22; ignored for none) and whether
/// multi-byte elements are byte-shuffled first.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (unknown compression, level out of range).
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_codec(
    b: *mut vds_builder,
    var: *const c_char,
    compression: i32,
    level: u32,
    shuffle: bool,
) -> vds_status {
    ffi_boundary!("vds_builder_set_codec", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        let in_levels = |levels: std::ops::RangeInclusive<u8>| u8::try_from(level).is_ok_and(|l| levels.contains(&l));
        let codec = match compression {
            0 => Codec { compression: Compression::None, shuffle },
            1 if in_levels(Compression::DEFLATE_LEVELS) => Codec::deflate(level as u8).with_shuffle(shuffle),
            1 => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("deflate level {level} is not in 0..9")),
            2 if in_levels(Compression::ZSTD_LEVELS) => Codec::zstd(level as u8).with_shuffle(shuffle),
            2 => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("zstd level {level} is not in 1..22")),
            3 => {
                return fail(
                    vds_status::VDS_ERR_INVALID_ARGUMENT,
                    "the bounded codec needs a tolerance: vds_builder_set_bounded_codec".to_string(),
                )
            }
            c => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("unknown compression {c}")),
        };
        with_variable(b, var, |v| {
            v.codec(codec);
            Ok(())
        })
    })
}

/// Sets the codec of variable `var` (float32 or float64) to the bounded
/// codec: every value read back is within `tolerance` (finite, in
/// (0, 1e300]) of the value written, and NaNs, infinities, the fill value
/// and the no-value marker come back bit for bit; values are predicted by
/// interpolation from a coarser grid that holds both ends of every axis,
/// the coarser levels quantized more finely where that shortens a chunk
/// (format 1.8, SPEC.md 6.6.4; files that only 1.8 and later readers
/// open: C has no call for the older predictors) and the
/// codes compressed by zstd at `level` (1..22; 3 is a good default). A chunk the codec cannot
/// store within the bound, or smaller, is stored losslessly. Creating the
/// container fails with `VDS_ERR_INVALID_ARGUMENT` if the variable is not
/// float32 or float64 or is quantized, and with
/// `VDS_ERR_UNSUPPORTED_FEATURE` in a build without zstd.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (tolerance or level out of range).
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_bounded_codec(b: *mut vds_builder, var: *const c_char, tolerance: f64, level: u32) -> vds_status {
    ffi_boundary!("vds_builder_set_bounded_codec", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        if !(tolerance > 0.0 && tolerance <= 1e300) {
            return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("tolerance {tolerance} is not in (0, 1e300]"));
        }
        let level = match u8::try_from(level) {
            Ok(l) if Compression::ZSTD_LEVELS.contains(&l) => l,
            _ => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("zstd level {level} is not in 1..22")),
        };
        let codec = Codec { compression: Compression::Bounded { tolerance, level, predictor: crate::Predictor::Graded }, shuffle: false };
        with_variable(b, var, |v| {
            v.codec(codec);
            Ok(())
        })
    })
}

/// Sets the unit of variable `var` (NULL for none).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_unit(b: *mut vds_builder, var: *const c_char, unit: *const c_char) -> vds_status {
    ffi_boundary!("vds_builder_set_unit", {
        // SAFETY: the caller promises NUL-terminated strings or NULL.
        let (var, unit) = unsafe { (arg_str(var, "var")?, arg_opt_str(unit, "unit")?) };
        with_variable(b, var, |v| {
            v.unit(unit.unwrap_or(""));
            Ok(())
        })
    })
}

/// Sets attribute `key` of the dataset (`var` NULL) or of variable `var` to
/// the JSON text `json` (any JSON value, e.g. `"\"text\""`, `"3.5"`, `"{\"a\":[1,2]}"`).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (malformed JSON).
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_attribute(
    b: *mut vds_builder,
    var: *const c_char,
    key: *const c_char,
    json: *const c_char,
) -> vds_status {
    ffi_boundary!("vds_builder_set_attribute", {
        // SAFETY: the caller promises NUL-terminated strings (var may be NULL).
        let (var, key, json) = unsafe { (arg_opt_str(var, "var")?, arg_str(key, "key")?, arg_str(json, "json")?) };
        let value = super::dataset::parse_json(json)?;
        match var {
            None => {
                builder(b)?.lock().unwrap_or_else(std::sync::PoisonError::into_inner).attribute(key, value);
                Ok(())
            }
            Some(var) => with_variable(b, var, |v| {
                v.attribute(key, value);
                Ok(())
            }),
        }
    })
}

/// Adds an external-file slot: a file `name`, relative to the container's
/// directory, created beside it. Slots are numbered from 1 in the order added.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`. The name is
/// checked by `vds_builder_create` (no absolute paths, no "..").
#[no_mangle]
pub unsafe extern "C" fn vds_builder_add_external_slot(b: *mut vds_builder, name: *const c_char) -> vds_status {
    ffi_boundary!("vds_builder_add_external_slot", {
        let b = builder(b)?;
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).external_slot(name);
        Ok(())
    })
}

/// Whether `vds_builder_create` replaces existing files (default: false, it
/// fails with `VDS_ERR_ALREADY_EXISTS`).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub extern "C" fn vds_builder_set_overwrite(b: *mut vds_builder, overwrite: bool) -> vds_status {
    ffi_boundary!("vds_builder_set_overwrite", {
        builder(b)?.lock().unwrap_or_else(std::sync::PoisonError::into_inner).overwrite(overwrite);
        Ok(())
    })
}

/// When commits of the created dataset reach the disk.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn vds_builder_set_durability(b: *mut vds_builder, durability: i32) -> vds_status {
    ffi_boundary!("vds_builder_set_durability", {
        let d = super::dataset::durability_from_c(durability)?;
        builder(b)?.lock().unwrap_or_else(std::sync::PoisonError::into_inner).durability(d);
        Ok(())
    })
}

/// How `vds_builder_create` lays out the container (SPEC.md 1.1).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_layout {
    /// Compact when the variables declare at most 64 KiB, aligned otherwise (the default).
    VDS_LAYOUT_AUTO = 0,
    /// A head padded to 128 bytes, 128-byte commit slots, 256-byte index
    /// pages while small: a one-value file of a few hundred bytes. Format
    /// 1.4; readers of format 1.3 and before cannot open it.
    VDS_LAYOUT_COMPACT = 1,
    /// A head padded to 4096 bytes, 512-byte commit slots, 4096-byte index
    /// pages: what every format 1.x reader opens.
    VDS_LAYOUT_ALIGNED = 2,
}

/// How the container is laid out (a `vds_layout`; default
/// `VDS_LAYOUT_AUTO`). `VDS_LAYOUT_ALIGNED` keeps a small file readable by
/// libraries of format 1.3 and before.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn vds_builder_set_layout(b: *mut vds_builder, layout: i32) -> vds_status {
    ffi_boundary!("vds_builder_set_layout", {
        let l = match layout {
            0 => Layout::Auto,
            1 => Layout::Compact,
            2 => Layout::Aligned,
            _ => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{layout} is not a vds_layout")),
        };
        builder(b)?.lock().unwrap_or_else(std::sync::PoisonError::into_inner).layout(l);
        Ok(())
    })
}

/// Creates the container at `path` as described (and its external files),
/// writes its first commit, and stores a writable dataset handle in
/// `*out_dataset`. The builder stays valid and may create more files.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (inconsistent description; the message says
/// what), `VDS_ERR_UNSUPPORTED_FEATURE`, `VDS_ERR_ALREADY_EXISTS`,
/// `VDS_ERR_NOT_FOUND` (the directory does not exist), `VDS_ERR_LOCKED`
/// (overwriting a file another writer holds), `VDS_ERR_IO`.
/// Close the dataset with `vds_close`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_create(b: *const vds_builder, path: *const c_char, out_dataset: *mut *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_builder_create", {
        let b = builder(b)?;
        // SAFETY: the caller promises a NUL-terminated string.
        let path = unsafe { arg_str(path, "path")? };
        if out_dataset.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_dataset is NULL");
        }
        let ds = b.lock().unwrap_or_else(std::sync::PoisonError::into_inner).create(path)?;
        let id = register(Object::Dataset(Arc::new(DatasetObj::new(ds))))?;
        // SAFETY: checked non-NULL above.
        unsafe { out(out_dataset, id as *mut vds_dataset, "out_dataset") }
    })
}
