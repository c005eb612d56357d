//! Levels of detail and partitionings through the C ABI (SPEC.md 3.7).

use super::builder::with_variable;
use super::dataset::{check_dtype, dataset, order_from_c, read_region, variable};
use super::VDS_MAX_DIMS;
use super::{arg_slice, arg_str, fail, ffi_boundary, out, out_string, vds_dataset, vds_status, Fail, FfiResult};
use crate::{LodMethod, MAX_DIMS};
use std::ffi::c_char;

/// How a level of detail is computed from the level below.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_lod_method {
    /// The mean of the pair (floats in double precision, integers rounded
    /// half away from zero). Not for bool.
    VDS_LOD_AVERAGE = 0,
    /// The first of the pair (decimation), for classes and masks.
    VDS_LOD_NEAREST = 1,
}

/// One stored layer of a variable, as returned by `vds_get_layer_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vds_layer_info {
    /// Levels of detail of the variable (1: level 0 only).
    pub levels: u32,
    /// Partitionings of the variable (1: its own chunk shape only).
    pub partitionings: u32,
    /// Number of dimensions.
    pub ndim: usize,
    /// Extent of this level along each dimension.
    pub shape: [u64; VDS_MAX_DIMS],
    /// Chunk extent of this partitioning along each dimension.
    pub chunk: [u64; VDS_MAX_DIMS],
    /// Whether levels of detail halve each dimension.
    pub halved: [bool; VDS_MAX_DIMS],
}

/// Keeps `levels` levels of detail of variable `var` (1 to 16; level 0 is
/// the data): level k halves each of the `naxes` axes named in `axes`
/// (`naxes` 0 and `axes` NULL: every axis) k times, ceil(n / 2^k) samples.
/// `method` is a `vds_lod_method`. The levels are computed at each commit
/// from the regions written since the last.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND` (no such variable), `VDS_ERR_INVALID_ARGUMENT`
/// (unknown method, more than 8 axes, bad UTF-8). Axis names and the level
/// count are checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_lods(
    b: *mut super::vds_builder,
    var: *const c_char,
    levels: u32,
    axes: *const *const c_char,
    naxes: usize,
    method: i32,
) -> vds_status {
    ffi_boundary!("vds_builder_set_lods", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        let method = match method {
            0 => LodMethod::Average,
            1 => LodMethod::Nearest,
            m => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{m} is not a vds_lod_method")),
        };
        let names = if naxes == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller promises `naxes` readable pointers; arg_slice bounds naxes by MAX_DIMS first.
            let ptrs = unsafe { arg_slice(axes, naxes, MAX_DIMS, "axes")? };
            // SAFETY: each pointer is NULL (refused) or a NUL-terminated string, as the caller promises.
            ptrs.iter().enumerate().map(|(i, &p)| unsafe { arg_str(p, &format!("axes[{i}]")) }).collect::<FfiResult<Vec<_>>>()?
        };
        let levels = u8::try_from(levels).unwrap_or(u8::MAX);
        with_variable(b, var, |v| {
            v.levels_of_detail(levels, &names, method);
            Ok(())
        })
    })
}

/// Stores variable `var` once more in chunks of `chunk[0..ndim]` (one
/// extent per axis of the variable): for instance 2-D tiles {1, 256, 256}
/// next to 3-D bricks. Every layer is brought up to date at commit.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (`ndim` 0 or above 8).
/// The shape is checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_add_partitioning(
    b: *mut super::vds_builder,
    var: *const c_char,
    chunk: *const u64,
    ndim: usize,
) -> vds_status {
    ffi_boundary!("vds_builder_add_partitioning", {
        // SAFETY: the caller promises a string and `ndim` readable extents.
        let var = unsafe { arg_str(var, "var")? };
        if ndim == 0 {
            return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, "ndim is 0");
        }
        // SAFETY: as above; arg_slice bounds ndim by MAX_DIMS first.
        let chunk = unsafe { arg_slice(chunk, ndim, MAX_DIMS, "chunk")? };
        with_variable(b, var, |v| {
            v.partitioning(chunk);
            Ok(())
        })
    })
}

/// Makes the stored chunks of variable `var` (its first partitioning, at
/// every level of detail) out of blocks of `block[0..ndim]` (one extent
/// per axis, each 1 to the chunk's), each encoded on its own (format 1.5):
/// a read that covers part of a chunk then reads and decodes only the
/// blocks it overlaps. `ndim` 0 (`block` may be NULL) stores whole chunks.
/// Without this call, a variable compressed with deflate or zstd whose
/// chunks hold 1 MiB or more gets the library's default blocks (at most
/// 128 KiB each: 32 x 32 x 32 in a 64^3 float32 brick; SPEC.md 3.1).
/// With the bounded codec each block is a bounded stream of its own
/// (format 1.6).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (`ndim` above 8). The
/// shape is checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_blocks(
    b: *mut super::vds_builder,
    var: *const c_char,
    block: *const u64,
    ndim: usize,
) -> vds_status {
    ffi_boundary!("vds_builder_set_blocks", {
        // SAFETY: the caller promises a string and `ndim` readable extents.
        let var = unsafe { arg_str(var, "var")? };
        let shape = if ndim == 0 {
            None
        } else {
            // SAFETY: as above; arg_slice bounds ndim by MAX_DIMS first.
            Some(unsafe { arg_slice(block, ndim, MAX_DIMS, "block")? })
        };
        with_variable(b, var, |v| {
            v.blocks(shape);
            Ok(())
        })
    })
}

/// Stores what layer (`lod`, `partitioning`) of variable `var` is in `*out_info`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE` (variable, level or partitioning).
#[no_mangle]
pub unsafe extern "C" fn vds_get_layer_info(
    ds: *const vds_dataset,
    var: usize,
    lod: u32,
    partitioning: u32,
    out_info: *mut vds_layer_info,
) -> vds_status {
    ffi_boundary!("vds_get_layer_info", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let v = variable(&d, var)?;
        let (shape, chunk) = layer(v, lod, partitioning)?;
        let mut info = vds_layer_info {
            levels: u32::from(v.levels_of_detail()),
            partitionings: v.partitionings().len() as u32,
            ndim: shape.len(),
            ..Default::default()
        };
        info.shape[..info.ndim].copy_from_slice(&shape);
        info.chunk[..info.ndim].copy_from_slice(&chunk);
        for k in v.lod_axes() {
            info.halved[k] = true;
        }
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_info, info, "out_info") }
    })
}

/// The shape and chunk shape of a layer, or `VDS_ERR_OUT_OF_RANGE`.
fn layer(v: &crate::Variable, lod: u32, partitioning: u32) -> FfiResult<(Vec<u64>, Vec<u64>)> {
    let shape = u8::try_from(lod).ok().and_then(|l| v.lod_shape(l)).ok_or_else(|| {
        Fail(
            vds_status::VDS_ERR_OUT_OF_RANGE,
            format!("variable {:?} has {} level(s) of detail; {lod} does not exist", v.name(), v.levels_of_detail()),
        )
    })?;
    let chunk = v.partitionings().get(partitioning as usize).ok_or_else(|| {
        Fail(
            vds_status::VDS_ERR_OUT_OF_RANGE,
            format!("variable {:?} has {} partitioning(s); {partitioning} does not exist", v.name(), v.partitionings().len()),
        )
    })?;
    Ok((shape, chunk.clone()))
}

/// Copies the OpenVDS-style name of a layer (`Dimensions_012LOD0`, with the
/// variable's name prepended for variables other than the first), like
/// `vds_axis_name`.
///
/// Returns as `vds_axis_name`, and `VDS_ERR_OUT_OF_RANGE`.
#[no_mangle]
pub unsafe extern "C" fn vds_layer_name(
    ds: *const vds_dataset,
    var: usize,
    lod: u32,
    partitioning: u32,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_layer_name", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let v = variable(&d, var)?;
        layer(v, lod, partitioning)?;
        let prefix = if var == 0 { "" } else { v.name() };
        let name = v.layer_name(lod as u8, partitioning as u8, prefix).unwrap_or_default();
        // SAFETY: the caller promises `cap` writable bytes at `buf`.
        unsafe { out_string(&name, buf, cap, needed) }
    })
}

/// Reads a region of level of detail `lod` of variable `var`, in that
/// level's coordinates, from `partitioning`, or (`partitioning` -1) from
/// the partitioning that reads the fewest bytes. Arguments otherwise as
/// `vds_read`. A read at level k touches only level-k chunks.
///
/// Returns as `vds_read`, and `VDS_ERR_OUT_OF_RANGE` for a level or
/// partitioning the variable does not have.
///
/// Thread safety: as `vds_read`.
#[no_mangle]
pub unsafe extern "C" fn vds_read_lod(
    ds: *const vds_dataset,
    var: usize,
    dtype: i32,
    lod: u32,
    partitioning: i32,
    start: *const u64,
    shape: *const u64,
    step: *const u64,
    ndim: usize,
    order: i32,
    buf: *mut u8,
    buf_len: usize,
) -> vds_status {
    ffi_boundary!("vds_read_lod", {
        let partitioning = partitioning_of(partitioning)?;
        // SAFETY: forwarded from the caller.
        unsafe { read_region(ds, var, dtype, (start, shape, step, ndim), order, buf, buf_len, lod_u8(lod), partitioning) }
    })
}

/// One axis-aligned 2-D plane of level `lod` of variable `var`: the
/// `nfixed` axes in `fixed_axes` (positions among the variable's axes) are
/// held at `fixed_index` (in that level's samples) and the two axes left run
/// whole. `buf` (`buf_len` bytes of `dtype`) receives the plane in `order`;
/// `out_shape[0..2]` its extents along the two free axes, slower first.
/// Reads from the partitioning that reads the fewest bytes (2-D tiles
/// across the plane when there are some).
///
/// Returns as `vds_read_lod`; `VDS_ERR_INVALID_ARGUMENT` unless exactly two
/// axes are left free.
#[no_mangle]
pub unsafe extern "C" fn vds_read_slice(
    ds: *const vds_dataset,
    var: usize,
    dtype: i32,
    lod: u32,
    fixed_axes: *const usize,
    fixed_index: *const u64,
    nfixed: usize,
    order: i32,
    buf: *mut u8,
    buf_len: usize,
    out_shape: *mut u64,
) -> vds_status {
    ffi_boundary!("vds_read_slice", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let dtype = check_dtype(&d, var, dtype)?;
        let order = order_from_c(order)?;
        if out_shape.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_shape is NULL");
        }
        // SAFETY: the caller promises `nfixed` values in each array; bounded by MAX_DIMS first.
        let fixed: Vec<(usize, u64)> = if nfixed == 0 {
            Vec::new()
        } else {
            let (axes, index) = unsafe {
                (arg_slice(fixed_axes, nfixed, MAX_DIMS, "fixed_axes")?, arg_slice(fixed_index, nfixed, MAX_DIMS, "fixed_index")?)
            };
            axes.iter().copied().zip(index.iter().copied()).collect()
        };
        // SAFETY: the caller promises `buf_len` writable bytes at `buf`.
        let out_buf = unsafe { out_buffer(buf, buf_len)? };
        let plane = d.read_slice_as(var, lod_u8(lod), &fixed, order, out_buf, dtype)?;
        // SAFETY: checked non-NULL; the caller promises two writable values.
        unsafe {
            *out_shape = plane[0];
            *out_shape.add(1) = plane[1];
        }
        Ok(())
    })
}

/// Computes the levels of detail and other partitionings of every region
/// written since the last commit, so that they can be read before
/// committing. `vds_commit` does this first.
///
/// Returns `VDS_OK`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`, `VDS_ERR_IO`.
///
/// Thread safety: takes the handle exclusively.
#[no_mangle]
pub extern "C" fn vds_update_layers(ds: *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_update_layers", {
        dataset(ds)?.write()?.update_layers()?;
        Ok(())
    })
}

/// Stores in `*out_bytes` how many stored chunk bytes the handle has read
/// from its files since it was opened (chunks served by the chunk cache do
/// not count): what reads cost in I/O.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub unsafe extern "C" fn vds_stored_bytes_read(ds: *const vds_dataset, out_bytes: *mut u64) -> vds_status {
    ffi_boundary!("vds_stored_bytes_read", {
        let n = dataset(ds)?.read()?.stored_bytes_read();
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_bytes, n, "out_bytes") }
    })
}

fn lod_u8(lod: u32) -> u8 {
    // Levels above 255 do not exist; the library reports them as out of range.
    u8::try_from(lod).unwrap_or(u8::MAX)
}

fn partitioning_of(p: i32) -> FfiResult<Option<u8>> {
    match p {
        -1 => Ok(None),
        0..=255 => Ok(Some(p as u8)),
        _ => fail(vds_status::VDS_ERR_OUT_OF_RANGE, format!("partitioning {p} does not exist (-1 chooses)")),
    }
}

/// The caller's output buffer, checked.
///
/// # Safety
/// `buf` must be NULL or point to `buf_len` writable bytes.
unsafe fn out_buffer<'a>(buf: *mut u8, buf_len: usize) -> FfiResult<&'a mut [u8]> {
    if buf.is_null() {
        return fail(vds_status::VDS_ERR_NULL_POINTER, "buf is NULL");
    }
    super::check_len::<u8>(buf_len, "buf")?;
    // SAFETY: the caller promises `buf_len` writable bytes at `buf` (at most isize::MAX, checked).
    Ok(unsafe { std::slice::from_raw_parts_mut(buf, buf_len) })
}

/// Stores float variable `var` as integers of `storage` (`VDS_UINT8` or
/// `VDS_UINT16`) over the value range `min..=max`: each value written is
/// rounded to the nearest of the evenly spaced values from min to max
/// (clamped outside the range; NaN becomes min). Reads with the variable's
/// type return those values; reads with `storage` return the integers.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (unknown dtype). The
/// types and the range are checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_quantization(
    b: *mut super::vds_builder,
    var: *const c_char,
    storage: i32,
    min: f64,
    max: f64,
) -> vds_status {
    ffi_boundary!("vds_builder_set_quantization", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        let storage = super::dataset::dtype_from_c(storage)?;
        with_variable(b, var, |v| {
            v.quantization(storage, min, max);
            Ok(())
        })
    })
}

/// Declares the value that marks a missing sample of variable `var`
/// (`value`: one element of its type, `value_len` bytes, native byte
/// order); unless a fill value is set, it is also the fill value. Chunks
/// entirely of no-value are index entries only, and levels of detail
/// average only the samples that are not no-value.
///
/// Returns as `vds_builder_set_fill`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_no_value(
    b: *mut super::vds_builder,
    var: *const c_char,
    value: *const u8,
    value_len: usize,
) -> vds_status {
    ffi_boundary!("vds_builder_set_no_value", {
        // SAFETY: the caller promises a string and `value_len` readable bytes.
        let var = unsafe { arg_str(var, "var")? };
        let bytes = unsafe { arg_slice(value, value_len, 8, "value")? };
        with_variable(b, var, |v| {
            let scalar = super::builder::element_of(v, var, bytes, value_len)?;
            v.no_value(scalar);
            Ok(())
        })
    })
}

/// Makes variable `var` keep a missing-value bitmask beside its values (as
/// the ds format does), for types whose every bit pattern is a valid value.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_missing_mask(b: *mut super::vds_builder, var: *const c_char, on: bool) -> vds_status {
    ffi_boundary!("vds_builder_set_missing_mask", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        with_variable(b, var, |v| {
            v.missing_mask(on);
            Ok(())
        })
    })
}

/// Writes a region of variable `var` as `vds_write` does, with its
/// missing-value mask: `missing` holds one byte per element of the region
/// (non-zero: missing), in the same order, `missing_len` bytes. Both are
/// checked before anything is written. (`vds_write` marks what it writes
/// as present.)
///
/// Returns as `vds_write`; `VDS_ERR_INVALID_ARGUMENT` for a variable
/// without a mask; `VDS_ERR_BUFFER_TOO_SMALL` / `VDS_ERR_INVALID_ARGUMENT`
/// for a mask of the wrong length.
///
/// Thread safety: takes the handle exclusively.
#[no_mangle]
pub unsafe extern "C" fn vds_write_masked(
    ds: *mut vds_dataset,
    var: usize,
    dtype: i32,
    start: *const u64,
    shape: *const u64,
    step: *const u64,
    ndim: usize,
    order: i32,
    buf: *const u8,
    buf_len: usize,
    missing: *const u8,
    missing_len: usize,
) -> vds_status {
    ffi_boundary!("vds_write_masked", {
        // SAFETY: forwarded from the caller.
        unsafe {
            super::dataset::write_region(ds, var, dtype, (start, shape, step, ndim), order, (buf, buf_len), Some((missing, missing_len)))
        }
    })
}

/// Reads the missing-value mask of a region of level `lod` of variable
/// `var` (1: missing, 0: present; unwritten samples are present) into
/// `out` (`out_len` bytes, one per element, in `order`), from the
/// partitioning a read of the values would use.
///
/// Returns as `vds_read_lod`; `VDS_ERR_INVALID_ARGUMENT` for a variable without a mask.
#[no_mangle]
pub unsafe extern "C" fn vds_read_mask(
    ds: *const vds_dataset,
    var: usize,
    lod: u32,
    start: *const u64,
    shape: *const u64,
    step: *const u64,
    ndim: usize,
    order: i32,
    out: *mut u8,
    out_len: usize,
) -> vds_status {
    ffi_boundary!("vds_read_mask", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        variable(&d, var)?;
        let order = order_from_c(order)?;
        // SAFETY: the caller promises `ndim` values in each array and `out_len` writable bytes.
        let r = unsafe { super::dataset::region(start, shape, step, ndim)? };
        let out_buf = unsafe { out_buffer(out, out_len)? };
        // Straight into the caller's buffer, whose size is checked first.
        d.read_mask_into(var, lod_u8(lod), None, &r, order, out_buf)?;
        Ok(())
    })
}

/// Gives each brick of variable `var` (each chunk of its first
/// partitioning, at every level of detail) copies of the `negative`
/// samples before and the `positive` samples after its box along every
/// axis (at most 64 each), so that a filter can read a brick with its
/// neighbourhood from one chunk (`vds_read_brick`).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`. The margins are checked by `vds_builder_create`.
#[no_mangle]
pub unsafe extern "C" fn vds_builder_set_margin(
    b: *mut super::vds_builder,
    var: *const c_char,
    negative: u64,
    positive: u64,
) -> vds_status {
    ffi_boundary!("vds_builder_set_margin", {
        // SAFETY: the caller promises a NUL-terminated string.
        let var = unsafe { arg_str(var, "var")? };
        with_variable(b, var, |v| {
            v.margin(negative, positive);
            Ok(())
        })
    })
}

/// Reads brick `coords[0..ndim]` (grid coordinates) of level `lod` of
/// variable `var` as stored: its box plus the margins around it, in C
/// order, into `buf` (`buf_len` bytes of `dtype`, exactly one brick);
/// `out_shape[0..ndim]` receives the box's shape (chunk shape plus both
/// margins). The box starts `negative` samples before the brick; samples
/// outside the variable read as the fill value.
///
/// Returns as `vds_read_lod`, and `VDS_ERR_OUT_OF_RANGE` for coordinates
/// outside the grid.
#[no_mangle]
pub unsafe extern "C" fn vds_read_brick(
    ds: *const vds_dataset,
    var: usize,
    dtype: i32,
    lod: u32,
    coords: *const u64,
    ndim: usize,
    buf: *mut u8,
    buf_len: usize,
    out_shape: *mut u64,
) -> vds_status {
    ffi_boundary!("vds_read_brick", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let dtype = check_dtype(&d, var, dtype)?;
        if out_shape.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_shape is NULL");
        }
        // SAFETY: the caller promises `ndim` coordinates; bounded by MAX_DIMS first.
        let coords = unsafe { arg_slice(coords, ndim, MAX_DIMS, "coords")? };
        // SAFETY: the caller promises `buf_len` writable bytes at `buf`.
        let out_buf = unsafe { out_buffer(buf, buf_len)? };
        let shape = d.read_brick_as(var, lod_u8(lod), coords, out_buf, dtype)?;
        // SAFETY: checked non-NULL; the caller promises `ndim` writable values.
        unsafe { std::ptr::copy_nonoverlapping(shape.as_ptr(), out_shape, shape.len()) };
        Ok(())
    })
}
