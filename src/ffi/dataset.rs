//! `vds_dataset`: an open container.

use super::{
    arg_opt_str, arg_slice, arg_str, fail, ffi_boundary, kind_name, lookup, out, out_string, register, unregister, vds_status, Fail,
    FfiResult, Object,
};
use crate::{Compression, DType, Dataset, Durability, OpenOptions, Order, Region, Scalar, SlotPolicy, MAX_DIMS};
use std::ffi::c_char;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// An open container. Made by `vds_open` or `vds_builder_create`, closed
/// (and freed) by `vds_close`.
///
/// Thread safety: functions that only read (`vds_read`, the `vds_axis_*`,
/// `vds_variable_*`, `vds_*_json` and `vds_get_*` functions) may be called
/// on one handle from several threads at once. Functions that change the
/// dataset (`vds_write`, `vds_set_attribute`, `vds_set_slot_policy`,
/// `vds_commit`, `vds_rollback`) take the handle exclusively and wait for readers to finish.
/// `vds_close` must not race with other calls on the same handle: a call
/// that starts after it gets `VDS_ERR_BAD_HANDLE`.
pub struct vds_dataset {
    _private: [u8; 0],
}

/// The most dimensions a variable can have: the size of the arrays in `vds_variable_info`.
pub const VDS_MAX_DIMS: usize = 8;

/// `vds_open` flag: open read-only (the default).
pub const VDS_OPEN_READ: u32 = 0;
/// `vds_open` flag: open for reading and writing (takes the writer lock).
pub const VDS_OPEN_WRITE: u32 = 1;
/// `vds_open` flag: commits do not fsync (for scratch files).
pub const VDS_OPEN_NO_SYNC: u32 = 2;
/// `vds_open` flag: let external-file slot names point outside the
/// container's directory (absolute paths, "..", symbolic links leaving it).
/// Without it such names are refused as `VDS_ERR_CORRUPT`: they come from
/// the file, which may come from anyone.
pub const VDS_OPEN_ALLOW_EXTERNAL_PATHS: u32 = 4;
/// `vds_open` flag: with `VDS_OPEN_WRITE`, do not take the advisory writer
/// lock. Only for file systems whose locks fail (some NFS and Lustre
/// mounts), and only when nothing else can write the container meanwhile:
/// two writers without the lock corrupt it. The environment variable
/// `VDS_USE_FILE_LOCKING=FALSE` does the same for every open and create.
pub const VDS_OPEN_NO_LOCK: u32 = 8;

/// Element types. In memory, values are in native byte order; a bool is one byte, 0 or 1.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_dtype {
    /// int8_t
    VDS_INT8 = 0,
    /// int16_t
    VDS_INT16 = 1,
    /// int32_t
    VDS_INT32 = 2,
    /// int64_t
    VDS_INT64 = 3,
    /// uint8_t
    VDS_UINT8 = 4,
    /// uint16_t
    VDS_UINT16 = 5,
    /// uint32_t
    VDS_UINT32 = 6,
    /// uint64_t
    VDS_UINT64 = 7,
    /// float
    VDS_FLOAT32 = 8,
    /// double
    VDS_FLOAT64 = 9,
    /// bool (one byte in memory, one bit on disk)
    VDS_BOOL = 10,
}

/// The memory order of a caller's buffer.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_order {
    /// Row-major: the last axis varies fastest.
    VDS_ORDER_C = 0,
    /// Column-major: the first axis varies fastest.
    VDS_ORDER_FORTRAN = 1,
}

/// When commits reach the disk.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_durability {
    /// A commit returns after fsync (the default).
    VDS_DURABILITY_FSYNC = 0,
    /// A commit returns after handing the writes to the OS (scratch files).
    VDS_DURABILITY_NONE = 1,
}

/// Where new stored chunks go (see `vds_set_slot_policy`).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum vds_slot_policy {
    /// Every chunk into `slots[0]` (0 = the container).
    VDS_SLOTS_FIXED = 0,
    /// Chunks in turn into each of `slots`.
    VDS_SLOTS_ROUND_ROBIN = 1,
    /// Fill each of `slots` up to `max_bytes`, in order; the last takes the rest.
    VDS_SLOTS_BY_SIZE = 2,
    /// Chunks of variable i into `slots[i]` (variables past `nslots` into the container).
    VDS_SLOTS_BY_VARIABLE = 3,
}

/// One axis, as returned by `vds_get_axis_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vds_axis_info {
    /// Number of samples.
    pub samples: u64,
    /// Coordinate of the first sample.
    pub first: f64,
    /// Coordinate of the last sample.
    pub last: f64,
}

/// One variable, as returned by `vds_get_variable_info`. Entries beyond `ndim` are 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vds_variable_info {
    /// Element type, a `vds_dtype`.
    pub dtype: i32,
    /// Number of dimensions, 1..VDS_MAX_DIMS.
    pub ndim: usize,
    /// Extent along each dimension.
    pub shape: [u64; VDS_MAX_DIMS],
    /// Chunk extent along each dimension.
    pub chunk: [u64; VDS_MAX_DIMS],
    /// Index of the dataset axis of each dimension.
    pub axes: [usize; VDS_MAX_DIMS],
    /// Compression of new chunks, a `vds_compression`.
    pub compression: i32,
    /// Compression level.
    pub level: u32,
    /// Whether multi-byte elements are byte-shuffled before compression.
    pub shuffle: bool,
}

/// Chunk counts and sizes, as returned by `vds_get_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vds_stats {
    /// Chunks stored as bytes.
    pub stored_chunks: u64,
    /// Chunks kept as a constant index entry.
    pub constant_chunks: u64,
    /// Chunks explicitly written with the fill value only.
    pub fill_chunks: u64,
    /// Bytes of stored chunks after compression.
    pub stored_bytes: u64,
    /// Bytes the stored chunks take uncompressed.
    pub raw_bytes: u64,
    /// Length of the container file at the last commit.
    pub file_bytes: u64,
}

/// The object behind a `vds_dataset` handle.
pub(crate) struct DatasetObj {
    ds: RwLock<Dataset>,
}

impl DatasetObj {
    pub(crate) fn new(ds: Dataset) -> DatasetObj {
        DatasetObj { ds: RwLock::new(ds) }
    }
    pub(crate) fn read(&self) -> FfiResult<RwLockReadGuard<'_, Dataset>> {
        self.ds
            .read()
            .map_err(|_| Fail(vds_status::VDS_ERR_POISONED, "an earlier call on this handle failed inside libvds; close it".into()))
    }
    pub(crate) fn write(&self) -> FfiResult<RwLockWriteGuard<'_, Dataset>> {
        self.ds
            .write()
            .map_err(|_| Fail(vds_status::VDS_ERR_POISONED, "an earlier call on this handle failed inside libvds; close it".into()))
    }
}

pub(crate) fn dataset(ds: *const vds_dataset) -> FfiResult<Arc<DatasetObj>> {
    match lookup(ds as usize, "dataset")? {
        Object::Dataset(d) => Ok(d),
        other => fail(vds_status::VDS_ERR_BAD_HANDLE, format!("the dataset argument is {}, not a vds_dataset", kind_name(&other))),
    }
}

pub(crate) fn dtype_from_c(d: i32) -> FfiResult<DType> {
    usize::try_from(d)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| Fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{d} is not a vds_dtype")))
}

fn dtype_to_c(d: DType) -> i32 {
    DType::ALL.iter().position(|&x| x == d).map_or(-1, |i| i as i32)
}

pub(crate) fn durability_from_c(d: i32) -> FfiResult<Durability> {
    match d {
        0 => Ok(Durability::Fsync),
        1 => Ok(Durability::None),
        _ => fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{d} is not a vds_durability")),
    }
}

pub(crate) fn order_from_c(o: i32) -> FfiResult<Order> {
    match o {
        0 => Ok(Order::C),
        1 => Ok(Order::Fortran),
        _ => fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{o} is not a vds_order")),
    }
}

pub(crate) fn parse_json(text: &str) -> FfiResult<crate::serde_json::Value> {
    crate::serde_json::from_str(text).map_err(|e| Fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("malformed JSON: {e}")))
}

/// A scalar from one element in native byte order, as C hands it over.
#[allow(clippy::host_endian_bytes)]
pub(crate) fn scalar_from_native(dtype: DType, b: &[u8]) -> Scalar {
    let a = |n: usize| -> [u8; 8] {
        let mut x = [0u8; 8];
        x[..n].copy_from_slice(&b[..n]);
        x
    };
    match dtype {
        DType::Int8 => Scalar::Int(i64::from(b[0] as i8)),
        DType::Int16 => Scalar::Int(i64::from(i16::from_ne_bytes([b[0], b[1]]))),
        DType::Int32 => Scalar::Int(i64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))),
        DType::Int64 => Scalar::Int(i64::from_ne_bytes(a(8))),
        DType::UInt8 => Scalar::UInt(u64::from(b[0])),
        DType::UInt16 => Scalar::UInt(u64::from(u16::from_ne_bytes([b[0], b[1]]))),
        DType::UInt32 => Scalar::UInt(u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))),
        DType::UInt64 => Scalar::UInt(u64::from_ne_bytes(a(8))),
        DType::Float32 => Scalar::Float(f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))),
        DType::Float64 => Scalar::Float(f64::from_ne_bytes(a(8))),
        _ => Scalar::Bool(b[0] != 0),
    }
}

/// One element in native byte order, for C.
#[allow(clippy::host_endian_bytes)]
fn scalar_to_native(dtype: DType, s: Scalar) -> Vec<u8> {
    match (dtype, s) {
        (DType::Int8, Scalar::Int(v)) => (v as i8).to_ne_bytes().to_vec(),
        (DType::Int16, Scalar::Int(v)) => (v as i16).to_ne_bytes().to_vec(),
        (DType::Int32, Scalar::Int(v)) => (v as i32).to_ne_bytes().to_vec(),
        (DType::Int64, Scalar::Int(v)) => v.to_ne_bytes().to_vec(),
        (DType::UInt8, Scalar::UInt(v)) => (v as u8).to_ne_bytes().to_vec(),
        (DType::UInt16, Scalar::UInt(v)) => (v as u16).to_ne_bytes().to_vec(),
        (DType::UInt32, Scalar::UInt(v)) => (v as u32).to_ne_bytes().to_vec(),
        (DType::UInt64, Scalar::UInt(v)) => v.to_ne_bytes().to_vec(),
        (DType::Float32, Scalar::Float(v)) => (v as f32).to_ne_bytes().to_vec(),
        (DType::Float64, Scalar::Float(v)) => v.to_ne_bytes().to_vec(),
        (DType::Bool, Scalar::Bool(v)) => vec![u8::from(v)],
        _ => vec![0; dtype.size()],
    }
}

/// Opens the container at `path` and stores a handle in `*out_dataset`.
/// `flags` is `VDS_OPEN_READ` or `VDS_OPEN_WRITE`, or-ed with any of
/// `VDS_OPEN_NO_SYNC`, `VDS_OPEN_ALLOW_EXTERNAL_PATHS` and `VDS_OPEN_NO_LOCK`.
/// Only regular files open: a FIFO or a device is refused (`VDS_ERR_IO`)
/// without blocking.
///
/// A `path` that starts with `http://`, `https://` or `s3://` is a URL: a
/// library built with the cargo feature `remote` reads the container in
/// place with range requests (read-only, so `VDS_OPEN_WRITE` is
/// `VDS_ERR_READ_ONLY`; `s3://` takes its credentials, region and endpoint
/// from the `AWS_*` environment variables, README "Containers on a
/// web server or in S3"); a library built without it returns
/// `VDS_ERR_UNSUPPORTED_FEATURE`. A local file whose name starts that way
/// opens as `./http://...`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_INVALID_ARGUMENT`
/// (unknown flags), `VDS_ERR_NOT_FOUND`, `VDS_ERR_IO`, `VDS_ERR_CORRUPT`,
/// `VDS_ERR_UNSUPPORTED_VERSION`, `VDS_ERR_UNSUPPORTED_FEATURE`,
/// `VDS_ERR_READ_ONLY` (writing forbidden by the file's features, or a URL),
/// `VDS_ERR_LOCKED` (another writer has it open). Close it with `vds_close`.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub unsafe extern "C" fn vds_open(path: *const c_char, flags: u32, out_dataset: *mut *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_open", {
        // SAFETY: the caller promises a NUL-terminated string.
        let path = unsafe { arg_str(path, "path")? };
        if out_dataset.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "out_dataset is NULL");
        }
        if flags & !(VDS_OPEN_WRITE | VDS_OPEN_NO_SYNC | VDS_OPEN_ALLOW_EXTERNAL_PATHS | VDS_OPEN_NO_LOCK) != 0 {
            return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("unknown open flags {flags:#x}"));
        }
        let durability = if flags & VDS_OPEN_NO_SYNC != 0 { Durability::None } else { Durability::Fsync };
        let ds = OpenOptions::new()
            .write(flags & VDS_OPEN_WRITE != 0)
            .durability(durability)
            .allow_external_paths(flags & VDS_OPEN_ALLOW_EXTERNAL_PATHS != 0)
            .file_locking(flags & VDS_OPEN_NO_LOCK == 0)
            .open(path)?;
        let id = register(Object::Dataset(Arc::new(DatasetObj::new(ds))))?;
        // SAFETY: checked non-NULL above.
        unsafe { out(out_dataset, id as *mut vds_dataset, "out_dataset") }
    })
}

/// Sets the most bytes one buffer the library allocates for this handle (a
/// chunk being decoded or assembled) may take; larger needs fail with
/// `VDS_ERR_OUT_OF_MEMORY` instead of allocating. The default is 1 GiB.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub extern "C" fn vds_set_memory_limit(ds: *mut vds_dataset, bytes: u64) -> vds_status {
    ffi_boundary!("vds_set_memory_limit", {
        dataset(ds)?.write()?.set_memory_limit(bytes);
        Ok(())
    })
}

/// Sets the most bytes of decoded chunks kept for later reads (64 MiB by
/// default; 0 turns the cache off; up to four buffers of evicted chunks,
/// within a quarter of it, are kept besides for reuse), and, separately, the most bytes of
/// chunks written in part that are held in memory until the commit, so that
/// repeated small writes to one chunk read and store it once (0 stores every
/// partial write at once).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub extern "C" fn vds_set_cache_size(ds: *mut vds_dataset, bytes: u64) -> vds_status {
    ffi_boundary!("vds_set_cache_size", {
        dataset(ds)?.write()?.set_cache_size(bytes);
        Ok(())
    })
}

/// Makes every write and attribute change since the last commit durable and
/// visible, atomically. Nothing to commit is success.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`, `VDS_ERR_NOT_FOUND` (an
/// external file is missing), `VDS_ERR_IO`.
#[no_mangle]
pub extern "C" fn vds_commit(ds: *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_commit", {
        dataset(ds)?.write()?.commit()?;
        Ok(())
    })
}

/// Discards every write and attribute change since the last commit; the
/// handle stays open and shows the last commit again. Nothing to discard
/// (or a read-only dataset) is success.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_CORRUPT` or `VDS_ERR_IO` (the committed descriptor could not be read again).
#[no_mangle]
pub extern "C" fn vds_rollback(ds: *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_rollback", {
        dataset(ds)?.write()?.rollback()?;
        Ok(())
    })
}

/// Commits (for a writable dataset) and closes it, freeing the handle in
/// every case. NULL is a no-op. If the commit fails, the handle is freed
/// all the same, the status says why, and the file stays at its previous commit.
///
/// Returns `VDS_OK`, `VDS_ERR_BAD_HANDLE`, or a commit's failure.
#[no_mangle]
pub extern "C" fn vds_close(ds: *mut vds_dataset) -> vds_status {
    ffi_boundary!("vds_close", {
        if ds.is_null() {
            return Ok(());
        }
        let obj = dataset(ds)?;
        unregister(ds as usize);
        let mut d = obj.write()?;
        if d.is_writable() {
            d.commit()?;
        }
        Ok(())
    })
}

/// Stores the number of axes in `*out_count`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub unsafe extern "C" fn vds_axis_count(ds: *const vds_dataset, out_count: *mut usize) -> vds_status {
    ffi_boundary!("vds_axis_count", {
        let n = dataset(ds)?.read()?.axes().len();
        // SAFETY: `out` checks for NULL; the caller promises it is writable.
        unsafe { out(out_count, n, "out_count") }
    })
}

/// Copies a string of the dataset, chosen by `get`, into a caller buffer (see `out_string`).
unsafe fn copy_string(
    ds: *const vds_dataset,
    get: impl for<'a> FnOnce(&'a Dataset) -> FfiResult<&'a str>,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> FfiResult {
    let obj = dataset(ds)?;
    let d = obj.read()?;
    // SAFETY: the caller promises `cap` writable bytes at `buf`.
    unsafe { out_string(get(&d)?, buf, cap, needed) }
}

fn axis(ds: &Dataset, index: usize) -> FfiResult<&crate::Axis> {
    ds.axes()
        .get(index)
        .ok_or_else(|| Fail(vds_status::VDS_ERR_OUT_OF_RANGE, format!("axis index {index} is beyond the {} axes", ds.axes().len())))
}

/// Stores the sample count and coordinates of axis `index` in `*out_info`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_OUT_OF_RANGE`.
#[no_mangle]
pub unsafe extern "C" fn vds_get_axis_info(ds: *const vds_dataset, index: usize, out_info: *mut vds_axis_info) -> vds_status {
    ffi_boundary!("vds_get_axis_info", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let a = axis(&d, index)?;
        let info = vds_axis_info { samples: a.samples(), first: a.first(), last: a.last() };
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_info, info, "out_info") }
    })
}

/// Copies the name of axis `index` and a NUL into `buf` (`cap` bytes) and
/// the bytes it needs (with the NUL) into `*needed` (which may be NULL).
/// `buf` NULL with `cap` 0 only asks for the size.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE`, `VDS_ERR_BUFFER_TOO_SMALL` (nothing copied).
#[no_mangle]
pub unsafe extern "C" fn vds_axis_name(
    ds: *const vds_dataset,
    index: usize,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_axis_name", {
        // SAFETY: forwarded from the caller.
        unsafe { copy_string(ds, |d| Ok(axis(d, index)?.name()), buf, cap, needed) }
    })
}

/// Copies the unit of axis `index` ("" for none), like `vds_axis_name`.
///
/// Returns as `vds_axis_name`.
#[no_mangle]
pub unsafe extern "C" fn vds_axis_unit(
    ds: *const vds_dataset,
    index: usize,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_axis_unit", {
        // SAFETY: forwarded from the caller.
        unsafe { copy_string(ds, |d| Ok(axis(d, index)?.unit_str()), buf, cap, needed) }
    })
}

/// Stores the number of variables in `*out_count`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`.
#[no_mangle]
pub unsafe extern "C" fn vds_variable_count(ds: *const vds_dataset, out_count: *mut usize) -> vds_status {
    ffi_boundary!("vds_variable_count", {
        let n = dataset(ds)?.read()?.variables().len();
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_count, n, "out_count") }
    })
}

/// Stores the index of the variable called `name` in `*out_index`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn vds_variable_find(ds: *const vds_dataset, name: *const c_char, out_index: *mut usize) -> vds_status {
    ffi_boundary!("vds_variable_find", {
        // SAFETY: the caller promises a NUL-terminated string.
        let name = unsafe { arg_str(name, "name")? };
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let i = d
            .variables()
            .iter()
            .position(|v| v.name() == name)
            .ok_or_else(|| Fail(vds_status::VDS_ERR_NOT_FOUND, format!("no variable named {name:?}")))?;
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_index, i, "out_index") }
    })
}

pub(crate) fn variable(ds: &Dataset, index: usize) -> FfiResult<&crate::Variable> {
    ds.variables().get(index).ok_or_else(|| {
        Fail(vds_status::VDS_ERR_OUT_OF_RANGE, format!("variable index {index} is beyond the {} variables", ds.variables().len()))
    })
}

/// Stores the type, shape, chunk shape, axes and codec of variable `index` in `*out_info`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_OUT_OF_RANGE`.
#[no_mangle]
pub unsafe extern "C" fn vds_get_variable_info(ds: *const vds_dataset, index: usize, out_info: *mut vds_variable_info) -> vds_status {
    ffi_boundary!("vds_get_variable_info", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let v = variable(&d, index)?;
        let mut info = vds_variable_info { dtype: dtype_to_c(v.dtype()), ndim: v.shape().len(), ..Default::default() };
        info.shape[..info.ndim].copy_from_slice(v.shape());
        info.chunk[..info.ndim].copy_from_slice(v.chunk_shape());
        info.axes[..info.ndim].copy_from_slice(v.axes());
        let c = v.codec();
        (info.compression, info.level) = match c.compression {
            Compression::Deflate { level } => (1, u32::from(level)),
            Compression::Zstd { level } => (2, u32::from(level)),
            Compression::Bounded { level, .. } => (3, u32::from(level)),
            _ => (0, 0),
        };
        info.shuffle = c.shuffle;
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_info, info, "out_info") }
    })
}

/// Stores in `*out_tolerance` the error bound of variable `index`'s codec:
/// its tolerance if the codec is `VDS_COMPRESSION_BOUNDED`, else 0 (lossless).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_OUT_OF_RANGE`.
#[no_mangle]
pub unsafe extern "C" fn vds_variable_tolerance(ds: *const vds_dataset, index: usize, out_tolerance: *mut f64) -> vds_status {
    ffi_boundary!("vds_variable_tolerance", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let t = match variable(&d, index)?.codec().compression {
            Compression::Bounded { tolerance, .. } => tolerance,
            _ => 0.0,
        };
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_tolerance, t, "out_tolerance") }
    })
}

/// Copies the name of variable `index`, like `vds_axis_name`.
///
/// Returns as `vds_axis_name`.
#[no_mangle]
pub unsafe extern "C" fn vds_variable_name(
    ds: *const vds_dataset,
    index: usize,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_variable_name", {
        // SAFETY: forwarded from the caller.
        unsafe { copy_string(ds, |d| Ok(variable(d, index)?.name()), buf, cap, needed) }
    })
}

/// Copies the unit of variable `index` ("" for none), like `vds_axis_name`.
///
/// Returns as `vds_axis_name`.
#[no_mangle]
pub unsafe extern "C" fn vds_variable_unit(
    ds: *const vds_dataset,
    index: usize,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_variable_unit", {
        // SAFETY: forwarded from the caller.
        unsafe { copy_string(ds, |d| Ok(variable(d, index)?.unit()), buf, cap, needed) }
    })
}

/// Copies the fill value of variable `index`, one element in native byte
/// order, into `value` (`value_len` bytes, exactly the element size).
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE`, `VDS_ERR_TYPE_MISMATCH` (wrong `value_len`).
#[no_mangle]
pub unsafe extern "C" fn vds_variable_fill(ds: *const vds_dataset, index: usize, value: *mut u8, value_len: usize) -> vds_status {
    ffi_boundary!("vds_variable_fill", {
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let v = variable(&d, index)?;
        let bytes = scalar_to_native(v.dtype(), v.fill_value());
        if value_len != bytes.len() {
            return fail(
                vds_status::VDS_ERR_TYPE_MISMATCH,
                format!("variable {:?} holds {} ({} bytes), value_len is {value_len}", v.name(), v.dtype(), bytes.len()),
            );
        }
        if value.is_null() {
            return fail(vds_status::VDS_ERR_NULL_POINTER, "value is NULL");
        }
        // SAFETY: the caller promises `value_len` writable bytes at `value`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value, bytes.len()) };
        Ok(())
    })
}

/// Copies the attributes of the dataset (`var` NULL) or of variable `var`
/// as one JSON object, like `vds_axis_name`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_BUFFER_TOO_SMALL`.
#[no_mangle]
pub unsafe extern "C" fn vds_attributes_json(
    ds: *const vds_dataset,
    var: *const c_char,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
) -> vds_status {
    ffi_boundary!("vds_attributes_json", {
        // SAFETY: the caller promises a NUL-terminated string or NULL.
        let var = unsafe { arg_opt_str(var, "var")? };
        let obj = dataset(ds)?;
        let d = obj.read()?;
        let attrs = match var {
            None => d.attributes(),
            Some(v) => d.variable_attributes(v)?,
        };
        let text = crate::serde_json::to_string(attrs).unwrap_or_default();
        // SAFETY: the caller promises `cap` writable bytes at `buf`.
        unsafe { out_string(&text, buf, cap, needed) }
    })
}

/// Sets attribute `key` of the dataset (`var` NULL) or of variable `var` to
/// the JSON text `json`, or removes it when `json` is NULL. Committed with
/// the next commit.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_NOT_FOUND`, `VDS_ERR_INVALID_ARGUMENT` (malformed JSON),
/// `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`.
#[no_mangle]
pub unsafe extern "C" fn vds_set_attribute(
    ds: *mut vds_dataset,
    var: *const c_char,
    key: *const c_char,
    json: *const c_char,
) -> vds_status {
    ffi_boundary!("vds_set_attribute", {
        // SAFETY: the caller promises NUL-terminated strings (var and json may be NULL).
        let (var, key, json) = unsafe { (arg_opt_str(var, "var")?, arg_str(key, "key")?, arg_opt_str(json, "json")?) };
        let value = json.map(parse_json).transpose()?;
        let obj = dataset(ds)?;
        let mut d = obj.write()?;
        match var {
            None => d.set_attribute(key, value)?,
            Some(v) => d.set_variable_attribute(v, key, value)?,
        }
        Ok(())
    })
}

/// Copies the whole descriptor (the JSON of line 2 of the file, with any
/// uncommitted attribute changes), like `vds_axis_name`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_BUFFER_TOO_SMALL`.
#[no_mangle]
pub unsafe extern "C" fn vds_descriptor_json(ds: *const vds_dataset, buf: *mut c_char, cap: usize, needed: *mut usize) -> vds_status {
    ffi_boundary!("vds_descriptor_json", {
        let text = dataset(ds)?.read()?.descriptor_json();
        // SAFETY: the caller promises `cap` writable bytes at `buf`.
        unsafe { out_string(&text, buf, cap, needed) }
    })
}

/// Chooses where new stored chunks go: `policy` is a `vds_slot_policy`,
/// `slots[0..nslots]` are file slots (0 = the container, 1.. = external
/// files), `max_bytes` is used by `VDS_SLOTS_BY_SIZE` only.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_INVALID_ARGUMENT` (unknown policy, no slots, a slot that does not exist),
/// `VDS_ERR_READ_ONLY` (a dataset open read-only).
#[no_mangle]
pub unsafe extern "C" fn vds_set_slot_policy(
    ds: *mut vds_dataset,
    policy: i32,
    slots: *const u16,
    nslots: usize,
    max_bytes: u64,
) -> vds_status {
    ffi_boundary!("vds_set_slot_policy", {
        // SAFETY: the caller promises `nslots` readable values at `slots`.
        let slots = unsafe { arg_slice(slots, nslots, usize::from(u16::MAX) + 1, "slots")? }.to_vec();
        if slots.is_empty() {
            return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, "nslots is 0");
        }
        let p = match policy {
            0 => SlotPolicy::Fixed(slots[0]),
            1 => SlotPolicy::RoundRobin(slots),
            2 => SlotPolicy::BySize { slots, max_bytes },
            3 => SlotPolicy::ByVariable(slots),
            _ => return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, format!("{policy} is not a vds_slot_policy")),
        };
        dataset(ds)?.write()?.set_slot_policy(p)?;
        Ok(())
    })
}

/// Counts chunks and bytes by walking the whole index (time proportional to
/// the number of chunks) and stores the result in `*out_stats`.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`, `VDS_ERR_CORRUPT`, `VDS_ERR_IO`.
#[no_mangle]
pub unsafe extern "C" fn vds_get_stats(ds: *const vds_dataset, out_stats: *mut vds_stats) -> vds_status {
    ffi_boundary!("vds_get_stats", {
        let s = dataset(ds)?.read()?.stats()?;
        let c = vds_stats {
            stored_chunks: s.stored_chunks,
            constant_chunks: s.constant_chunks,
            fill_chunks: s.fill_chunks,
            stored_bytes: s.stored_bytes,
            raw_bytes: s.raw_bytes,
            file_bytes: s.file_bytes,
        };
        // SAFETY: `out` checks for NULL.
        unsafe { out(out_stats, c, "out_stats") }
    })
}

/// Builds a region from C arrays of `ndim` values (`step` may be NULL for all 1).
pub(crate) unsafe fn region(start: *const u64, shape: *const u64, step: *const u64, ndim: usize) -> FfiResult<Region> {
    if ndim == 0 {
        return fail(vds_status::VDS_ERR_INVALID_ARGUMENT, "ndim is 0");
    }
    // SAFETY: forwarded from the caller, with ndim bounded by MAX_DIMS first.
    let (start, shape) = unsafe { (arg_slice(start, ndim, MAX_DIMS, "start")?, arg_slice(shape, ndim, MAX_DIMS, "shape")?) };
    let r = Region::new(start, shape)?;
    if step.is_null() {
        return Ok(r);
    }
    // SAFETY: as above.
    Ok(r.with_step(unsafe { arg_slice(step, ndim, MAX_DIMS, "step")? })?)
}

/// Checks the buffer's type against variable `var` (a quantized variable
/// also takes its storage type, for the stored integers) and returns it.
pub(crate) fn check_dtype(d: &Dataset, var: usize, dtype: i32) -> FfiResult<DType> {
    variable(d, var)?;
    let want = dtype_from_c(dtype)?;
    d.check_type(var, want)?;
    Ok(want)
}

/// Reads a region of variable `var` into `buf`: `ndim` values each of
/// `start`, `shape` and `step` (NULL for steps of 1). `buf` holds exactly
/// the region's elements of type `dtype` (which must be the variable's) in
/// `order`: `buf_len` is in bytes. Unwritten parts read as the fill value.
///
/// Returns `VDS_OK`, `VDS_ERR_NULL_POINTER`, `VDS_ERR_BAD_HANDLE`,
/// `VDS_ERR_OUT_OF_RANGE` (variable index, region beyond the extent),
/// `VDS_ERR_INVALID_ARGUMENT` (ndim, step 0, buffer larger than the region),
/// `VDS_ERR_TYPE_MISMATCH`, `VDS_ERR_BUFFER_TOO_SMALL`, `VDS_ERR_CORRUPT`,
/// `VDS_ERR_OUT_OF_MEMORY` (a chunk larger than the memory limit),
/// `VDS_ERR_NOT_FOUND` (an external file is missing), `VDS_ERR_IO`.
/// On failure the contents of `buf` are unspecified.
///
/// Thread safety: several threads may read through one handle at once.
#[no_mangle]
pub unsafe extern "C" fn vds_read(
    ds: *const vds_dataset,
    var: usize,
    dtype: i32,
    start: *const u64,
    shape: *const u64,
    step: *const u64,
    ndim: usize,
    order: i32,
    buf: *mut u8,
    buf_len: usize,
) -> vds_status {
    ffi_boundary!("vds_read", {
        // SAFETY: forwarded from the caller.
        unsafe { read_region(ds, var, dtype, (start, shape, step, ndim), order, buf, buf_len, 0, None) }
    })
}

/// The body of `vds_read` and `vds_read_lod`: a region of level `lod` from
/// `partitioning` (None: the cheapest).
///
/// # Safety
/// As `vds_read`: `ndim` values in each array of `region`, `buf_len` writable bytes at `buf`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn read_region(
    ds: *const vds_dataset,
    var: usize,
    dtype: i32,
    (start, shape, step, ndim): (*const u64, *const u64, *const u64, usize),
    order: i32,
    buf: *mut u8,
    buf_len: usize,
    lod: u8,
    partitioning: Option<u8>,
) -> FfiResult {
    let obj = dataset(ds)?;
    let d = obj.read()?;
    let dtype = check_dtype(&d, var, dtype)?;
    let order = order_from_c(order)?;
    // SAFETY: the caller promises `ndim` values in each array.
    let r = unsafe { region(start, shape, step, ndim)? };
    if buf.is_null() {
        return fail(vds_status::VDS_ERR_NULL_POINTER, "buf is NULL");
    }
    super::check_len::<u8>(buf_len, "buf")?;
    // SAFETY: the caller promises `buf_len` writable bytes at `buf` (at most isize::MAX); any
    // byte pattern is valid for u8, and for bool the library writes only 0 or 1.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, buf_len) };
    d.read_as(var, lod, partitioning, &r, order, out, dtype)?;
    Ok(())
}

/// Writes a region of variable `var` from `buf`, laid out as for `vds_read`
/// (for bool, any non-zero byte is true). Visible to other handles after
/// the next commit.
///
/// Returns as `vds_read`, and `VDS_ERR_READ_ONLY`, `VDS_ERR_POISONED`.
///
/// Thread safety: takes the handle exclusively.
#[no_mangle]
pub unsafe extern "C" fn vds_write(
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
) -> vds_status {
    ffi_boundary!("vds_write", {
        // SAFETY: forwarded from the caller.
        unsafe { write_region(ds, var, dtype, (start, shape, step, ndim), order, (buf, buf_len), None) }
    })
}

/// The body of `vds_write` and `vds_write_masked`.
///
/// # Safety
/// As `vds_write`: `ndim` values in each array of `region`, `len` readable
/// bytes at each buffer.
pub(crate) unsafe fn write_region(
    ds: *mut vds_dataset,
    var: usize,
    dtype: i32,
    (start, shape, step, ndim): (*const u64, *const u64, *const u64, usize),
    order: i32,
    (buf, buf_len): (*const u8, usize),
    missing: Option<(*const u8, usize)>,
) -> FfiResult {
    let obj = dataset(ds)?;
    let mut d = obj.write()?;
    let dtype = check_dtype(&d, var, dtype)?;
    let order = order_from_c(order)?;
    // SAFETY: the caller promises `ndim` values in each array.
    let r = unsafe { region(start, shape, step, ndim)? };
    // SAFETY: the caller promises `buf_len` readable bytes at `buf`.
    let data = unsafe { arg_slice(buf, buf_len, usize::MAX, "buf")? };
    // SAFETY: as above, for the mask.
    let missing = match missing {
        Some((p, n)) => Some(unsafe { arg_slice(p, n, usize::MAX, "missing")? }),
        None => None,
    };
    d.write_masked_as(var, &r, order, data, dtype, missing)?;
    Ok(())
}
