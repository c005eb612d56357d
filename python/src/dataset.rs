//! The `Dataset` class: one open container, shared by Python threads.
//!
//! The handle sits in a `RwLock`: reads take it shared and run in parallel
//! with the GIL released; writes, commits and closing take it exclusively.
//! The lock is taken with the GIL released; lookups that never wait on I/O
//! take it with the GIL held only when it is free (`Dataset::shared`). No
//! thread waits for the lock while holding the GIL, so the two locks
//! cannot deadlock.

use crate::arrays::{bad_array, by_dtype, fresh_bytes, numpy_dtype, order_of, region, request, zeroed};
use crate::errors::{invalid, lib, to_py, Failure, Outcome};
use crate::paths::FsPath;
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::path::Path;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, TryLockError};
use vds::{Compression, Order, Region, Scalar, SlotPolicy};

/// An open libvds container (the compiled core of `vds.Dataset`).
#[pyclass(module = "vds._vds", frozen)]
pub(crate) struct Dataset {
    inner: RwLock<Option<vds::Dataset>>,
}

impl Dataset {
    pub(crate) fn new(ds: vds::Dataset) -> Dataset {
        Dataset { inner: RwLock::new(Some(ds)) }
    }

    /// Runs `f` on the open dataset, shared, with the GIL released.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&vds::Dataset) -> Outcome<T> + Send) -> PyResult<T> {
        let r = py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            let ds = guard.as_ref().ok_or(Failure::Closed)?;
            catch_panic(|| f(ds))
        });
        r.map_err(|e| to_py(py, e))
    }

    /// The lock, shared, for lookups that never wait on I/O (releasing the
    /// GIL would cost more than they do): taken with the GIL held when it is
    /// free; when a writer has it, waited for with the GIL released.
    fn shared(&self, py: Python<'_>) -> RwLockReadGuard<'_, Option<vds::Dataset>> {
        loop {
            match self.inner.try_read() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.inner.read())),
            }
        }
    }

    /// Runs `f` on the open dataset under [`Dataset::shared`], with the GIL held.
    pub(crate) fn with_now<T>(&self, py: Python<'_>, f: impl FnOnce(&vds::Dataset) -> Outcome<T>) -> PyResult<T> {
        let guard = self.shared(py);
        let ds = guard.as_ref().ok_or(Failure::Closed).map_err(|e| to_py(py, e))?;
        f(ds).map_err(|e| to_py(py, e))
    }

    /// Runs `f` on the open dataset, exclusively, with the GIL released.
    /// After a panic (a bug in libvds) the handle is dropped, so that no
    /// later call sees a dataset left half-changed: the file stays at its
    /// last commit, and reopening continues from there.
    fn with_mut<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut vds::Dataset) -> Outcome<T> + Send) -> PyResult<T> {
        let r = py.detach(|| {
            let mut guard = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            let ds = guard.as_mut().ok_or(Failure::Closed)?;
            match catch_panic(|| f(ds)) {
                Err(Failure::Refused("Internal", m)) => {
                    *guard = None;
                    Err(Failure::Refused("Internal", format!("{m}; the dataset is closed: reopen it to continue from its last commit")))
                }
                r => r,
            }
        });
        r.map_err(|e| to_py(py, e))
    }
}

/// Runs `f`, turning a panic (a bug in libvds) into an `InternalError`
/// carrying the panic's message, rather than PyO3's `PanicException`,
/// which is not an `Exception` and would escape ordinary handlers.
pub(crate) fn catch_panic<T>(f: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned());
        Err(Failure::Refused("Internal", format!("a bug in libvds (please report it): {what}")))
    })
}

/// What a read targets: a level of detail of a variable.
#[derive(Clone, Copy)]
pub(crate) struct Layer {
    pub(crate) var: usize,
    pub(crate) lod: u8,
}

fn read_typed<T: numpy::Element + vds::Element>(
    py: Python<'_>,
    ds: &Dataset,
    layer: Layer,
    start: &[u64],
    step: &[u64],
    out: &Bound<'_, PyUntypedArray>,
) -> PyResult<()> {
    let (order, region) = request(py, out, start, step)?;
    let mut out = out.cast::<PyArrayDyn<T>>()?.try_readwrite().map_err(bad_array(py, "output"))?;
    let buf = out.as_slice_mut().map_err(bad_array(py, "output"))?;
    ds.with(py, |d| Ok(d.read_lod(layer.var, layer.lod, None, &region, order, buf)?))
}

/// Reads `layer` whole (of `shape`) into `fresh`, a C-order array of `T`
/// just made and not yet handed to Python.
pub(crate) fn write_typed<T: numpy::Element + vds::Element>(
    py: Python<'_>,
    ds: &Dataset,
    var: usize,
    start: &[u64],
    step: &[u64],
    data: &Bound<'_, PyUntypedArray>,
    missing: Option<&Bound<'_, PyUntypedArray>>,
) -> PyResult<()> {
    let (order, region) = request(py, data, start, step)?;
    let data = data.cast::<PyArrayDyn<T>>()?.try_readonly().map_err(bad_array(py, "data"))?;
    let buf = data.as_slice().map_err(bad_array(py, "data"))?;
    match missing {
        None => ds.with_mut(py, |d| Ok(d.write(var, &region, order, buf)?)),
        Some(m) => {
            if m.shape() != data.shape() || order_of(py, m)? != order {
                return Err(invalid(py, "the missing-value mask must have the data's shape and memory order"));
            }
            let m = m.cast::<PyArrayDyn<bool>>()?.try_readonly().map_err(bad_array(py, "mask"))?;
            let mbuf = m.as_slice().map_err(bad_array(py, "mask"))?;
            ds.with_mut(py, |d| Ok(d.write_masked(var, &region, order, buf, mbuf)?))
        }
    }
}

fn append_typed<T: numpy::Element + vds::Element>(
    py: Python<'_>,
    ds: &Dataset,
    var: usize,
    axis: &str,
    data: &Bound<'_, PyUntypedArray>,
) -> PyResult<Vec<u64>> {
    let order = order_of(py, data)?;
    let data = data.cast::<PyArrayDyn<T>>()?.try_readonly().map_err(bad_array(py, "data"))?;
    let buf = data.as_slice().map_err(bad_array(py, "data"))?;
    ds.with_mut(py, |d| Ok(d.append(var, axis, order, buf)?.start().to_vec()))
}

fn scalar_to_py(py: Python<'_>, s: Option<Scalar>) -> PyResult<Py<PyAny>> {
    Ok(match s {
        None => py.None(),
        Some(Scalar::Int(v)) => v.into_pyobject(py)?.into_any().unbind(),
        Some(Scalar::UInt(v)) => v.into_pyobject(py)?.into_any().unbind(),
        Some(Scalar::Float(v)) => v.into_pyobject(py)?.into_any().unbind(),
        Some(Scalar::Bool(v)) => v.into_pyobject(py)?.to_owned().into_any().unbind(),
        // Scalar is non-exhaustive: a kind added later shows as its Debug text.
        Some(other) => format!("{other:?}").into_pyobject(py)?.into_any().unbind(),
    })
}

fn codec_dict<'py>(py: Python<'py>, c: vds::Codec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (id, level) = match c.compression {
        Compression::None => ("none", None),
        Compression::Deflate { level } => ("deflate", Some(level)),
        Compression::Zstd { level } => ("zstd", Some(level)),
        Compression::Bounded { level, .. } => ("bounded", Some(level)),
        _ => ("unknown", None),
    };
    d.set_item("id", id)?;
    d.set_item("level", level)?;
    d.set_item("shuffle", c.shuffle)?;
    if let Compression::Bounded { tolerance, predictor, .. } = c.compression {
        d.set_item("tolerance", tolerance)?;
        let name = match predictor {
            vds::Predictor::Graded => "graded",
            vds::Predictor::Anchored => "anchored",
            vds::Predictor::Interpolation => "interpolation",
            _ => "lorenzo",
        };
        d.set_item("predictor", name)?;
    }
    Ok(d)
}

fn variable_dict<'py>(py: Python<'py>, v: &vds::Variable) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", v.name())?;
    d.set_item("unit", v.unit())?;
    d.set_item("dtype", v.dtype().name())?;
    d.set_item("axes", v.axes().to_vec())?;
    d.set_item("shape", v.shape().to_vec())?;
    d.set_item("chunks", v.chunk_shape().to_vec())?;
    d.set_item("fill_value", scalar_to_py(py, Some(v.fill_value()))?)?;
    d.set_item("no_value", scalar_to_py(py, v.no_value())?)?;
    d.set_item("codec", codec_dict(py, v.codec())?)?;
    let lods: Vec<Vec<u64>> = (0..v.levels_of_detail()).filter_map(|k| v.lod_shape(k)).collect();
    d.set_item("lod_shapes", lods)?;
    d.set_item("lod_axes", v.lod_axes())?;
    d.set_item("lod_method", format!("{:?}", v.lod_method()).to_lowercase())?;
    d.set_item("partitionings", v.partitionings().to_vec())?;
    d.set_item("blocks", v.block_shape().map(<[u64]>::to_vec))?;
    d.set_item("margin", v.margin().to_vec())?;
    d.set_item("mask", v.has_mask())?;
    let q = match v.quantization() {
        None => None,
        Some(q) => {
            let qd = PyDict::new(py);
            qd.set_item("storage", q.storage.name())?;
            qd.set_item("min", q.min)?;
            qd.set_item("max", q.max)?;
            Some(qd)
        }
    };
    d.set_item("quantization", q)?;
    Ok(d)
}

fn json_text(v: &serde_json::Map<String, serde_json::Value>) -> String {
    serde_json::Value::Object(v.clone()).to_string()
}

/// What a merge did: fragments merged, (fragment, reason) skipped, chunks adopted.
type Merged = (Vec<String>, Vec<(String, String)>, u64);

#[pymethods]
impl Dataset {
    /// read(var, lod, start, step, out) -> None
    ///
    /// Reads the region of `out`'s shape at `start` (with `step`) of level
    /// `lod` (from the partitioning that reads the fewest bytes) into `out`, a C- or Fortran-contiguous writable array of the
    /// variable's dtype (or, for a quantized variable, its storage type:
    /// then the stored integers are read).
    fn read(&self, py: Python<'_>, var: usize, lod: u8, start: Vec<u64>, step: Vec<u64>, out: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        let layer = Layer { var, lod };
        by_dtype!(py, out, read_typed(py, self, layer, &start, &step, out))
    }

    /// read_all(var, lod, limit) -> ndarray
    ///
    /// Level `lod` of variable `var` whole, in a new C-order array of its
    /// dtype: the commonest read (`var[...]`) in one call. Raises
    /// `OutOfMemoryError` when the array would exceed `limit` bytes, and
    /// NumPy's `MemoryError` when it cannot be had.
    fn read_all<'py>(&self, py: Python<'py>, var: usize, lod: u8, limit: u64) -> PyResult<Bound<'py, PyUntypedArray>> {
        let (dtype, shape) = self.with_now(py, |d| {
            let v = d.variable(var)?;
            let no_level = || Failure::Refused("OutOfRange", format!("variable {:?} has no level of detail {lod}", v.name()));
            Ok((v.dtype(), v.lod_shape(lod).ok_or_else(no_level)?))
        })?;
        let fresh = zeroed(py, dtype, &shape, limit)?;
        if !shape.contains(&0) {
            let region = lib(py, Region::full(&shape))?;
            // SAFETY: the array was made above and is not yet returned.
            let buf = unsafe { fresh_bytes(&fresh) };
            self.with(py, |d| Ok(d.read_lod_bytes(var, lod, None, &region, Order::C, buf)?))?;
        }
        Ok(fresh)
    }

    /// index(name) -> int | None
    ///
    /// The index of the variable called `name`, or None.
    fn index(&self, py: Python<'_>, name: &str) -> PyResult<Option<usize>> {
        self.with_now(py, |d| Ok(d.variables().iter().position(|v| v.name() == name)))
    }

    /// write(var, start, step, data, missing=None) -> None
    ///
    /// Writes `data` (C- or Fortran-contiguous, the variable's dtype or a
    /// quantized variable's storage type) at `start` with `step`; `missing`
    /// is a bool array of the same shape and order for masked variables.
    #[pyo3(signature = (var, start, step, data, missing=None))]
    fn write(
        &self,
        py: Python<'_>,
        var: usize,
        start: Vec<u64>,
        step: Vec<u64>,
        data: &Bound<'_, PyUntypedArray>,
        missing: Option<&Bound<'_, PyUntypedArray>>,
    ) -> PyResult<()> {
        by_dtype!(py, data, write_typed(py, self, var, &start, &step, data, missing))
    }

    /// append(var, axis, data) -> list[int]
    ///
    /// Grows the growable `axis` by the samples in `data` and writes them
    /// there; returns the start of the written region.
    fn append(&self, py: Python<'_>, var: usize, axis: &str, data: &Bound<'_, PyUntypedArray>) -> PyResult<Vec<u64>> {
        by_dtype!(py, data, append_typed(py, self, var, axis, data))
    }

    /// read_mask(var, lod, start, step, out) -> None
    ///
    /// Reads the missing-value mask (True: missing) of a region into `out`,
    /// a C-contiguous bool array of the region's shape.
    fn read_mask(
        &self,
        py: Python<'_>,
        var: usize,
        lod: u8,
        start: Vec<u64>,
        step: Vec<u64>,
        out: &Bound<'_, PyArrayDyn<bool>>,
    ) -> PyResult<()> {
        if !out.is_c_contiguous() {
            return Err(invalid(py, "the mask output array must be C contiguous"));
        }
        let region = region(py, &start, &step, out.shape())?;
        let mut out = out.try_readwrite().map_err(bad_array(py, "output"))?;
        let buf = out.as_slice_mut().map_err(bad_array(py, "output"))?;
        self.with(py, |d| {
            let mask = d.read_mask(var, lod, None, &region, Order::C)?;
            if mask.len() != buf.len() {
                return Err(Failure::Refused("InvalidArgument", format!("the mask has {} values, the array {}", mask.len(), buf.len())));
            }
            buf.copy_from_slice(&mask);
            Ok(())
        })
    }

    /// resize_axis(axis, samples) -> None
    ///
    /// Changes the number of samples of a growable axis (at the next commit).
    fn resize_axis(&self, py: Python<'_>, axis: &str, samples: u64) -> PyResult<()> {
        self.with_mut(py, |d| Ok(d.resize_axis(axis, samples)?))
    }

    /// resize_axes(sizes) -> None: several growable axes at once, `sizes` a
    /// list of (axis name, samples); every size is checked before any axis
    /// changes.
    fn resize_axes(&self, py: Python<'_>, sizes: Vec<(String, u64)>) -> PyResult<()> {
        let sizes: Vec<(&str, u64)> = sizes.iter().map(|(a, n)| (a.as_str(), *n)).collect();
        self.with_mut(py, |d| Ok(d.resize_axes(&sizes)?))
    }

    /// commit() -> None: makes every change since the last commit durable, atomically.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with_mut(py, |d| Ok(d.commit()?))
    }

    /// rollback() -> None: discards every change since the last commit.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.with_mut(py, |d| Ok(d.rollback()?))
    }

    /// close(commit=True) -> None
    ///
    /// Commits (if writable and `commit`) and closes; closing a closed dataset does nothing.
    #[pyo3(signature = (commit=true))]
    pub(crate) fn close(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let r = py.detach(|| {
            let taken = self.inner.write().unwrap_or_else(PoisonError::into_inner).take();
            match taken {
                Some(d) if commit => d.close(),
                _ => Ok(()),
            }
        });
        lib(py, r)
    }

    /// Whether the dataset is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.shared(py).is_none()
    }

    /// Whether the dataset is open for writing.
    #[getter]
    fn writable(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |d| Ok(d.is_writable()))
    }

    /// Whether this dataset writes a fragment.
    #[getter]
    fn is_fragment(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |d| Ok(d.is_fragment()))
    }

    /// The number of the last commit.
    #[getter]
    fn commit_sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |d| Ok(d.commit_sequence()))
    }

    /// The format version of the file, (major, minor).
    #[getter]
    fn format_version(&self, py: Python<'_>) -> PyResult<(u16, u16)> {
        self.with(py, |d| {
            let [a, b] = d.format_version();
            Ok((a, b))
        })
    }

    /// The axes, as a list of dicts (name, unit, samples, first, last, growable, max_samples).
    fn axes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let axes = self.with(py, |d| {
            Ok(d.axes()
                .iter()
                .map(|a| (a.name().to_owned(), a.unit_str().to_owned(), a.samples(), a.first(), a.last(), a.is_growable(), a.max_samples()))
                .collect::<Vec<_>>())
        })?;
        let list = PyList::empty(py);
        for (name, unit, samples, first, last, growable, max) in axes {
            let d = PyDict::new(py);
            d.set_item("name", name)?;
            d.set_item("unit", unit)?;
            d.set_item("samples", samples)?;
            d.set_item("first", first)?;
            d.set_item("last", last)?;
            d.set_item("growable", growable)?;
            d.set_item("max_samples", max)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// What reads need of every variable, cheaply, as Python needs it: a list
    /// of (NumPy dtype, [shape tuple of each level of detail]) and a dict
    /// from variable name to index.
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
        let guard = self.shared(py);
        let d = guard.as_ref().ok_or_else(|| to_py(py, Failure::Closed))?;
        let (vars, names) = (PyList::empty(py), PyDict::new(py));
        for (i, v) in d.variables().iter().enumerate() {
            let shapes = PyList::empty(py);
            for shape in (0..v.levels_of_detail()).filter_map(|k| v.lod_shape(k)) {
                shapes.append(PyTuple::new(py, shape)?)?;
            }
            vars.append((numpy_dtype(py, v.dtype())?, shapes))?;
            names.set_item(v.name(), i)?;
        }
        Ok((vars, names))
    }

    /// The variables, as a list of dicts (name, dtype, axes, shape, chunks, codec, ...).
    fn variables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let guard = self.shared(py);
        let d = guard.as_ref().ok_or_else(|| to_py(py, Failure::Closed))?;
        let list = PyList::empty(py);
        for v in d.variables() {
            list.append(variable_dict(py, v)?)?;
        }
        Ok(list)
    }

    /// attributes(var=None) -> str: the dataset's (or a variable's) attributes as a JSON object.
    #[pyo3(signature = (var=None))]
    fn attributes(&self, py: Python<'_>, var: Option<usize>) -> PyResult<String> {
        self.with(py, |d| {
            Ok(match var {
                None => json_text(d.attributes()),
                Some(v) => json_text(d.variable_attributes(v)?),
            })
        })
    }

    /// set_attribute(var, key, value, remove) -> None
    ///
    /// Sets `key` to `value` (a JSON value: dicts, lists, strings, numbers,
    /// NumPy scalars and arrays), or with `remove` removes it, as an
    /// attribute of the dataset (`var` None) or of a variable; committed
    /// with the data.
    #[pyo3(signature = (var, key, value, remove))]
    fn set_attribute(&self, py: Python<'_>, var: Option<usize>, key: &str, value: &Bound<'_, PyAny>, remove: bool) -> PyResult<()> {
        let value = if remove { None } else { Some(crate::json::to_json(py, value, &format!("attribute {key:?}"))?) };
        self.with_mut(py, |d| {
            match var {
                None => d.set_attribute(key, value)?,
                Some(v) => d.set_variable_attribute(v, key, value)?,
            }
            Ok(())
        })
    }

    /// The descriptor as JSON text (what the file's second line holds at the last commit).
    fn descriptor_json(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |d| Ok(d.descriptor_json()))
    }

    /// verify(full) -> dict: checks every checksum and structure of the
    /// current commit; with `full`, also every level of detail and
    /// partitioning against level 0.
    #[pyo3(signature = (full=false))]
    fn verify<'py>(&self, py: Python<'py>, full: bool) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with(py, |d| Ok(if full { d.verify_full()? } else { d.verify()? }))?;
        let out = PyDict::new(py);
        out.set_item("ok", r.is_ok())?;
        out.set_item("commit", r.commit)?;
        out.set_item("previous_commit", r.previous_commit)?;
        out.set_item("problems", r.problems.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        out.set_item("index_pages", r.index_pages)?;
        out.set_item("chunks", r.chunks)?;
        out.set_item("live_bytes", r.live_bytes)?;
        out.set_item("file_bytes", r.file_bytes)?;
        out.set_item("reclaimable_bytes", r.reclaimable_bytes)?;
        Ok(out)
    }

    /// compact(mode) -> (before_bytes, after_bytes, folded_slots)
    ///
    /// Rewrites the container without dead space, crash-safely. `mode`:
    /// "keep", "fold" (external chunks copied in) or "into_slots".
    fn compact(&self, py: Python<'_>, mode: &str) -> PyResult<(u64, u64, Vec<String>)> {
        let mode = match mode {
            "keep" | "fold" | "into_slots" | "cloud" => mode.to_owned(),
            m => return Err(invalid(py, format!("compact mode {m:?} is not \"keep\", \"fold\", \"into_slots\" or \"cloud\""))),
        };
        let r = self.with_mut(py, move |d| {
            Ok(match mode.as_str() {
                "fold" => d.compact_folding_slots()?,
                "into_slots" => d.compact_into_slots()?,
                "cloud" => d.compact_cloud_optimized()?,
                _ => d.compact()?,
            })
        })?;
        Ok((r.before_bytes, r.after_bytes, r.folded_slots))
    }

    /// merge_fragments(names) -> (merged, skipped, chunks)
    ///
    /// Adopts sealed fragments in one atomic commit; `skipped` lists
    /// (name, reason) for fragments never sealed or merged before.
    fn merge_fragments(&self, py: Python<'_>, names: Vec<String>) -> PyResult<Merged> {
        let r = self.with_mut(py, |d| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Ok(d.merge_fragments(&names)?)
        })?;
        Ok((r.merged, r.skipped, r.chunks))
    }

    /// add_external_slot(name) -> int: adds an external data file beside the container; returns its slot number.
    fn add_external_slot(&self, py: Python<'_>, name: &str) -> PyResult<u16> {
        self.with_mut(py, |d| Ok(d.add_external_slot(name)?))
    }

    /// set_slot_policy(kind, slots, max_bytes=0) -> None
    ///
    /// Routes new stored chunks: "fixed", "round_robin", "by_size" or "by_variable".
    #[pyo3(signature = (kind, slots, max_bytes=0))]
    fn set_slot_policy(&self, py: Python<'_>, kind: &str, slots: Vec<u16>, max_bytes: u64) -> PyResult<()> {
        let policy = match (kind, slots.as_slice()) {
            ("fixed", [s]) => SlotPolicy::Fixed(*s),
            ("round_robin", _) => SlotPolicy::RoundRobin(slots),
            ("by_size", _) => SlotPolicy::BySize { slots, max_bytes },
            ("by_variable", _) => SlotPolicy::ByVariable(slots),
            (k, s) => {
                return Err(invalid(
                    py,
                    format!(
                    "slot policy {k:?} with slots {s:?}: expected \"fixed\" with one slot, \"round_robin\", \"by_size\" or \"by_variable\""
                ),
                ))
            }
        };
        self.with_mut(py, |d| Ok(d.set_slot_policy(policy)?))
    }

    /// set_cache_size(nbytes) -> None: bounds the decoded-chunk cache and the write-back buffer.
    fn set_cache_size(&self, py: Python<'_>, nbytes: u64) -> PyResult<()> {
        self.with_mut(py, |d| {
            d.set_cache_size(nbytes);
            Ok(())
        })
    }

    /// set_memory_limit(nbytes) -> None: caps every buffer libvds allocates for this dataset.
    fn set_memory_limit(&self, py: Python<'_>, nbytes: u64) -> PyResult<()> {
        self.with_mut(py, |d| {
            d.set_memory_limit(nbytes);
            Ok(())
        })
    }

    /// Stored chunk bytes read from files (not from the cache) since the dataset was opened.
    #[getter]
    fn stored_bytes_read(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |d| Ok(d.stored_bytes_read()))
    }
}

/// open(path, write=False, sync=True, memory_limit=None, cache_size=None, allow_external_paths=False) -> Dataset
///
/// Opens a container, by path or by http://, https:// or s3:// URL (see `vds.open`).
#[pyfunction]
#[pyo3(signature = (path, write=false, sync=true, memory_limit=None, cache_size=None, allow_external_paths=false))]
pub(crate) fn open(
    py: Python<'_>,
    path: FsPath,
    write: bool,
    sync: bool,
    memory_limit: Option<u64>,
    cache_size: Option<u64>,
    allow_external_paths: bool,
) -> PyResult<Dataset> {
    let mut o = vds::OpenOptions::new();
    o.write(write).durability(if sync { vds::Durability::Fsync } else { vds::Durability::None }).allow_external_paths(allow_external_paths);
    if let Some(m) = memory_limit {
        o.memory_limit(m);
    }
    if let Some(c) = cache_size {
        o.cache_size(c);
    }
    // A URL opens read-only in place (vds::OpenOptions::open).
    let path: &Path = &path;
    let ds = py.detach(|| o.open(path));
    Ok(Dataset::new(lib(py, ds)?))
}

/// publish(path, url) -> int
///
/// Uploads a cloud-optimized copy of the container at `path` to `url` (see `vds.publish`).
#[pyfunction]
pub(crate) fn publish(py: Python<'_>, path: FsPath, url: &str) -> PyResult<u64> {
    let (path, url): (&Path, String) = (&path, url.to_owned());
    let sent = py.detach(move || -> vds::Result<u64> {
        if !url.starts_with("s3://") {
            return Err(vds::Error::new(vds::ErrorKind::InvalidArgument, format!("{url}: containers are published to s3:// URLs only")));
        }
        let src = vds::Dataset::open(path)?;
        let staging = std::env::temp_dir().join(format!("vds-publish-{}-{}.vds", std::process::id(), src.commit_sequence()));
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&staging)
            .map_err(|e| vds::Error::io(format!("creating {}", staging.display()), e))?;
        let result = src
            .copy_cloud_optimized_to(std::sync::Arc::new(vds::FileStorage::new(file)))
            .and_then(|_| vds::remote::publish(&staging, &url));
        let _ = std::fs::remove_file(&staging);
        result
    });
    lib(py, sent)
}

/// create_fragment(container, name) -> Dataset
///
/// Opens `container` to write the fragment file `name` beside it (see `vds.fragment`).
#[pyfunction]
pub(crate) fn create_fragment(py: Python<'_>, container: FsPath, name: &str) -> PyResult<Dataset> {
    let container: &Path = &container;
    let ds = py.detach(|| vds::Dataset::create_fragment(container, name));
    Ok(Dataset::new(lib(py, ds)?))
}

/// recover(path) -> (damaged_commit or None, commit now shown)
///
/// Rolls a container whose newest commit is damaged back to the older one.
#[pyfunction]
pub(crate) fn recover(py: Python<'_>, path: FsPath) -> PyResult<(Option<u64>, u64)> {
    let path: &Path = &path;
    let r = py.detach(|| vds::Dataset::recover(path));
    match lib(py, r)? {
        vds::Recovery::Intact { commit } => Ok((None, commit)),
        vds::Recovery::RolledBack { damaged, restored } => Ok((Some(damaged), restored)),
        other => Err(invalid(py, format!("recovery reported {other:?}"))),
    }
}
