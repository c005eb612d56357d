//! Growth and scale-out through the C ABI: growable axes (SPEC.md 3.10)
//! and external-file slots added to an open container (8.1), fragments
//! written by parallel processes and their merge (11), and compaction
//! (7.7).

use super::builder::builder;
use super::dataset::{check_dtype, dataset, order_from_c, DatasetObj};
use super::{arg_slice, arg_str, fail, ffi_boundary, out, register, vds_dataset, vds_status, Object};
use std::ffi::c_char;
use std::sync::Arc;

/// Makes the builder's axis `name` growable, up to `max_samples` samples
/// (0: no limit but the format's), so that `vds_resize_axis` and
/// `vds_append` can change it after creation.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND` (no such axis), `VDS_ERR_INVALID_ARGUMENT` (bad
/// UTF-8). The limit is checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_axis_growable(b: *mut super::vds_builder, name: *const c_char, max_samples: u64) -> vds_status {
    ffi_boundary!("vds_builder_set_axis_growable", {
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        let b = builder(b)?;
        let mut b = b.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(axis) = b.axis_mut(name) else {
            return fail(vds_status::VDS_ERR_NOT_FOUND, format!("the builder has no axis named {name:?}"));
        };
        *axis = axis.clone().growable((max_samples > 0).then_some(max_samples));
        Ok(())
    })
}

/// Whether axis `index` is growable (`*out_growable` 1 or 0) and the most
/// samples it may reach (`*out_max_samples`, 0: no limit). Either output
/// may be NULL.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE` (no such axis).
#[no_mangle]
pub unsafe extern "C" fn vds_axis_growth(
    ds: *const vds_dataset,
    index: usize,
    out_growable: *mut i32,
    out_max_samples: *mut u64,
) -> vds_status {
    ffi_boundary!("vds_axis_growth", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let Some(a) = d.axes().get(index) else {
            return fail(vds_status::VDS_ERR_OUT_OF_RANGE, format!("axis {index} does not exist ({} axes)", d.axes().len()));
        };
        // SAFETY: the caller promises writable outputs or NULL.
        unsafe {
            if !out_growable.is_null() {
                out(out_growable, i32::from(a.is_growable()), "out_growable")?;
            }
            if !out_max_samples.is_null() {
                out(out_max_samples, a.max_samples().unwrap_or(0), "out_max_samples")?;
            }
        }
        Ok(())
    })
}

/// Changes the number of samples of the growable axis `name`, and so the
/// extent of every variable spanning it, at the next commit: added samples
/// read as the fill value until written; chunks wholly beyond a smaller
/// extent leave the index. Levels of detail, partitionings, masks and
/// margins follow at commit.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND` (no such axis), `VDS_ERR_INVALID_ARGUMENT` (not
/// growable, 0 samples, bad UTF-8), `VDS_ERR_OUT_OF_RANGE` (beyond the
/// axis's maximum), `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`,
/// `VDS_ERR_CORRUPT`, `VDS_ERR_IO`.
#[no_mangle]
pub unsafe extern "C" fn vds_resize_axis(ds: *mut vds_dataset, name: *const c_char, samples: u64) -> vds_status {
    ffi_boundary!("vds_resize_axis", {
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        let obj = dataset(ds)?;
        let mut d = obj.write()?;
        d.resize_axis(name, samples)?;
        Ok(())
    })
}

/// Grows the axis `axis` by the samples in `buf` and writes them at its
/// end: `buf` holds `buf_len` bytes of elements of type `dtype` in
/// `order`, the variable's extent along every other axis times any whole
/// number of samples along `axis`. `*out_start` (may be NULL) receives the
/// index of the first sample written along `axis`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE`, `VDS_ERR_INVALID_ARGUMENT` (the variable does
/// not span `axis`, not a whole number of samples), `VDS_ERR_TYPE_MISMATCH`,
/// and the errors of `vds_resize_axis` and `vds_write`.
#[no_mangle]
pub unsafe extern "C" fn vds_append(
    ds: *mut vds_dataset,
    var: usize,
    dtype: i32,
    axis: *const c_char,
    order: i32,
    buf: *const u8,
    buf_len: usize,
    out_start: *mut u64,
) -> vds_status {
    ffi_boundary!("vds_append", {
        // SAFETY: the caller promises a NUL-terminated string and `buf_len` readable bytes.
        let (axis, data) = unsafe { (arg_str(axis, "axis")?, arg_slice(buf, buf_len, usize::MAX, "buf")?) };
        let obj = dataset(ds)?;
        let mut d = obj.write()?;
        let dtype = check_dtype(&d, var, dtype)?;
        let order = order_from_c(order)?;
        let region = d.append_as(var, axis, order, data, dtype)?;
        if !out_start.is_null() {
            let k = d.variables()[var].axes().iter().position(|&a| d.axes()[a].name() == axis).unwrap_or(0);
            // SAFETY: the caller promises a writable output or NULL.
            unsafe { out(out_start, region.start()[k], "out_start")? };
        }
        Ok(())
    })
}

/// Adds an external-file slot to an open container: creates the file
/// `name` (relative to the container's directory; it must not exist) with
/// a slot header and a new random id, and stores the slot's number in
/// `*out_slot` (may be NULL) for `vds_set_slot_policy`. The slot belongs to
/// the container from the next commit.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (not a confined relative path, a name already
/// used, the container itself), `VDS_ERR_ALREADY_EXISTS`, `VDS_ERR_IO`,
/// `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`.
#[no_mangle]
pub unsafe extern "C" fn vds_add_external_slot(ds: *mut vds_dataset, name: *const c_char, out_slot: *mut u16) -> vds_status {
    ffi_boundary!("vds_add_external_slot", {
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        let obj = dataset(ds)?;
        let slot = obj.write()?.add_external_slot(name)?;
        if !out_slot.is_null() {
            // SAFETY: the caller promises a writable output or NULL.
            unsafe { out(out_slot, slot, "out_slot")? };
        }
        Ok(())
    })
}

/// Opens the container at `path` (read-only, without its writer lock) to
/// write a fragment: a new file `name` beside it. Writes through
/// `*out_dataset` go to the fragment, starting from the container's
/// committed contents; `vds_commit` or `vds_close` seals it. Many
/// processes may each write their own fragment at once; give each whole
/// chunks. Descriptor changes (attributes, resizing, slots) are refused.
/// `vds_merge_fragments` adopts sealed fragments into the container.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_INVALID_ARGUMENT`
/// (not a confined relative name), `VDS_ERR_ALREADY_EXISTS`, and the
/// errors of `vds_open`.
#[no_mangle]
pub unsafe extern "C" fn vds_fragment_create(path: *const c_char, name: *const c_char, out_dataset: *mut *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_fragment_create", {
        // SAFETY: the caller promises NUL-terminated strings.
        let (path, name) = unsafe { (arg_str(path, "path")?, arg_str(name, "name")?) };
        if out_dataset.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_dataset is NULL");
        }
        let ds = crate::Dataset::create_fragment(path, name)?;
        let id = register(Object::Dataset(Arc::new(DatasetObj::new(ds))))?;
        // SAFETY: checked non-NULL above.
        unsafe { out(out_dataset, id as *mut vds_dataset, "out_dataset") }
    })
}

/// Adopts the sealed fragments `names[0..count]` (files beside the
/// container) into the container open for writing in `ds`, in one atomic
/// commit: each becomes an external-file slot, and levels of detail and
/// partitionings of the regions they wrote are brought up to date.
/// Fragments never sealed (a crashed writer's) or merged before are
/// skipped. `*out_merged` and `*out_skipped` (either may be NULL) receive
/// the counts. When two fragments hold the same chunk, or one was written
/// for a container with other variables, nothing is merged and the error
/// names them.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (uncommitted changes, overlapping or foreign
/// fragments, bad names), `VDS_ERR_CORRUPT`, `VDS_ERR_NOT_FOUND`,
/// `VDS_ERR_IO`, `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`.
#[no_mangle]
pub unsafe extern "C" fn vds_merge_fragments(
    ds: *mut vds_dataset,
    names: *const *const c_char,
    count: usize,
    out_merged: *mut usize,
    out_skipped: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_merge_fragments", {
        // SAFETY: the caller promises `count` pointers at `names`.
        let ptrs = unsafe { arg_slice(names, count, 1 << 20, "names")? };
        let mut list = Vec::with_capacity(ptrs.len());
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: each pointer is a NUL-terminated string, as promised.
            list.push(unsafe { arg_str(p, &format!("names[{i}]"))? });
        }
        let obj = dataset(ds)?;
        let report = obj.write()?.merge_fragments(&list)?;
        // SAFETY: the caller promises writable outputs or NULL.
        unsafe {
            if !out_merged.is_null() {
                out(out_merged, report.merged.len(), "out_merged")?;
            }
            if !out_skipped.is_null() {
                out(out_skipped, report.skipped.len(), "out_skipped")?;
            }
        }
        Ok(())
    })
}

/// What `vds_compact` does with external-file slots.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_compact_mode {
    /// The container's live chunks are rewritten into a fresh body; chunks in external files stay there.
    VDS_COMPACT_KEEP_SLOTS = 0,
    /// External chunks are copied into the new body too; the new container lists no slots.
    VDS_COMPACT_FOLD_SLOTS = 1,
    /// The container's chunks move into the slots the slot policy chooses (`vds_set_slot_policy`).
    VDS_COMPACT_INTO_SLOTS = 2,
    /// Cloud-optimized (SPEC.md 9.4): every index page right after the commit slots, then the
    /// chunks in key order, external chunks folded in, so that a reader over a network gets the
    /// whole index of a container of thousands of chunks with its first request (a container in
    /// the compact layout keeps its index after its chunks: small, it comes whole anyway).
    VDS_COMPACT_CLOUD = 3,
}

/// Rewrites the last commit without the space copy-on-write left behind
/// (`mode`, a `vds_compact_mode`, says where chunks go), crash-safely: the
/// new container is written beside the old one, synced and renamed over it,
/// so a crash leaves one or the other, whole. Commit first. The container's
/// lengths before and after go to `*out_before` and `*out_after` (either may
/// be NULL). With `VDS_COMPACT_FOLD_SLOTS` and `VDS_COMPACT_CLOUD` the slot
/// files are left on disk, unused.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (unknown mode, uncommitted changes, a fragment
/// handle, no slot for `VDS_COMPACT_INTO_SLOTS`), `VDS_ERR_READ_ONLY`,
/// `VDS_ERR_POISONED`, `VDS_ERR_CORRUPT` (a damaged chunk or page: `vds
/// verify FILE` names it), `VDS_ERR_IO`.
#[no_mangle]
pub unsafe extern "C" fn vds_compact(ds: *mut vds_dataset, mode: i32, out_before: *mut u64, out_after: *mut u64) -> vds_status {
    ffi_boundary!("vds_compact", {
        let obj = dataset(ds)?;
        let mut d = obj.write()?;
        use vds_compact_mode::*;
        let report = match mode {
            m if m == VDS_COMPACT_KEEP_SLOTS as i32 => d.compact()?,
            m if m == VDS_COMPACT_FOLD_SLOTS as i32 => d.compact_folding_slots()?,
            m if m == VDS_COMPACT_INTO_SLOTS as i32 => d.compact_into_slots()?,
            m if m == VDS_COMPACT_CLOUD as i32 => d.compact_cloud_optimized()?,
            _ => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{mode} is not a vds_compact_mode")),
        };
        // SAFETY: the caller promises writable outputs or NULL.
        unsafe {
            if !out_before.is_null() {
                out(out_before, report.before_bytes, "out_before")?;
            }
            if !out_after.is_null() {
                out(out_after, report.after_bytes, "out_after")?;
            }
        }
        Ok(())
    })
}
