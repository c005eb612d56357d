//! `save(path, data, ...)` and `load(path, ...)`: a whole container written
//! or read in one call, as `numpy.savez` and `numpy.load` do.
//!
//! For many small files, where what a call costs matters more than what it
//! moves: the description is made from the arrays themselves, and the
//! container is created, written, committed and closed (or opened, read
//! whole and closed) without a Python object in between. Everything else
//! (regions, levels of detail, masks, growth) goes through `vds.open` and
//! `vds.create`.

use crate::arrays::{bad_array, by_dtype, order_of, zeroed};
use crate::create::CodecSpec;
use crate::errors::{invalid, lib, to_py, Failure};
use numpy::{PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::path::PathBuf;
use vds::{Axis, DType, DatasetBuilder, Durability, Order, Region, VariableBuilder};

/// The library's element type of a NumPy dtype (kind and size; the byte
/// order is checked when the array is borrowed).
fn element_type(py: Python<'_>, name: &str, a: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    fn of<T: vds::Element>() -> PyResult<DType> {
        Ok(T::DTYPE)
    }
    by_dtype!(py, a, of()).map_err(|_| {
        let m = format!("save: variable {name:?}: arrays of {} cannot be stored (integers, floats and bool only)", a.dtype());
        to_py(py, Failure::Refused("TypeMismatch", m))
    })
}

/// `value` as an array: itself when it is one (not a masked array, whose
/// mask would be lost), else `numpy.asarray(value)`.
/// An array that is neither C- nor Fortran-contiguous, or not in the
/// machine's byte order, is copied into one that is.
fn as_array<'py>(py: Python<'py>, name: &str, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    let a = match value.cast::<PyUntypedArray>() {
        Ok(a) if !a.is_exact_instance_of::<PyUntypedArray>() && a.is_instance(&py.import("numpy.ma")?.getattr("MaskedArray")?)? => {
            return Err(invalid(
                py,
                format!("save: variable {name:?} is a masked array, and save keeps no mask: create it with mask=True through vds.create"),
            ));
        }
        Ok(a) => a.clone(),
        Err(_) => py.import("numpy")?.call_method1("asarray", (value,))?.cast_into::<PyUntypedArray>()?,
    };
    let native = {
        let order = a.dtype().byteorder();
        order == b'=' || order == b'|' || order == if cfg!(target_endian = "little") { b'<' } else { b'>' }
    };
    if native && (a.is_c_contiguous() || a.is_fortran_contiguous()) {
        return Ok(a);
    }
    let dtype = a.dtype().call_method1("newbyteorder", ("=",))?;
    Ok(py.import("numpy")?.call_method1("ascontiguousarray", (&a, dtype))?.cast_into::<PyUntypedArray>()?)
}

/// One variable to save: its name, axis names, element type and array.
struct Item<'py> {
    name: String,
    dims: Vec<String>,
    dtype: DType,
    array: Bound<'py, PyUntypedArray>,
}

/// An axis as the arrays give it: its name, its length, and the variable that first spans it.
type AxisUse = (String, u64, String);

/// The variables of `data` with their axis names (from `dims`, else
/// `dim_0`, `dim_1`, ... as xarray names them), and the axes they span, in
/// order of first use, each with the one length every array gives it.
fn items<'py>(py: Python<'py>, data: &Bound<'py, PyDict>, dims: Option<&Bound<'py, PyDict>>) -> PyResult<(Vec<Item<'py>>, Vec<AxisUse>)> {
    let mut items = Vec::with_capacity(data.len());
    let mut axes: Vec<AxisUse> = Vec::new();
    // From a copy of its items: an array-like whose conversion changes the dict cannot upset the walk.
    for item in data.items().iter() {
        let (key, value) = item.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>()?;
        let Ok(name) = key.cast::<PyString>() else {
            return Err(invalid(py, format!("save: variable names are strings, not {}", key.repr()?)));
        };
        let name = name.to_cow().map_err(|_| invalid(py, "save: a variable name is not valid Unicode (a lone surrogate)"))?.into_owned();
        let array = as_array(py, &name, &value)?;
        let shape = array.shape();
        if shape.is_empty() {
            return Err(invalid(
                py,
                format!("save: variable {name:?} is a 0-d array: give it an axis (a shape of (1,)), or store it as an attribute"),
            ));
        }
        let names: Vec<String> = match dims.map(|d| d.get_item(&name)).transpose()?.flatten() {
            Some(given) => {
                if given.is_instance_of::<PyString>() {
                    return Err(invalid(
                        py,
                        format!("save: dims of variable {name:?} is a sequence of axis names, not the string {}", given.repr()?),
                    ));
                }
                given.extract().map_err(|_| {
                    invalid(
                        py,
                        format!(
                            "save: dims of variable {name:?} is a sequence of axis names, not {}",
                            given.repr().map(|r| r.to_string()).unwrap_or_default()
                        ),
                    )
                })?
            }
            None => (0..shape.len()).map(|i| format!("dim_{i}")).collect(),
        };
        if names.len() != shape.len() {
            return Err(invalid(
                py,
                format!("save: variable {name:?} has {} axes ({shape:?}) but {} names in dims: {names:?}", shape.len(), names.len()),
            ));
        }
        for (axis, &n) in names.iter().zip(shape) {
            match axes.iter().find(|(a, _, _)| a == axis) {
                Some((_, len, by)) if *len != n as u64 => {
                    return Err(invalid(
                        py,
                        format!("save: axis {axis:?} is {len} long in variable {by:?} and {n} in variable {name:?}: name the axes of each with dims="),
                    ))
                }
                Some(_) => {}
                None => axes.push((axis.clone(), n as u64, name.clone())),
            }
        }
        let dtype = element_type(py, &name, &array)?;
        items.push(Item { name, dims: names, dtype, array });
    }
    if let Some(d) = dims {
        for key in d.keys() {
            if !data.contains(&key)? {
                return Err(invalid(py, format!("save: dims names {}, which is not in data", key.repr()?)));
            }
        }
    }
    Ok((items, axes))
}

/// Writes `array` whole into variable `var` of `ds`, with the GIL released.
fn write_whole<T: numpy::Element + vds::Element>(
    py: Python<'_>,
    ds: &mut vds::Dataset,
    var: usize,
    array: &Bound<'_, PyUntypedArray>,
) -> PyResult<()> {
    let order = order_of(py, array)?;
    let shape: Vec<u64> = array.shape().iter().map(|&n| n as u64).collect();
    let region = lib(py, Region::full(&shape))?;
    let data = array.cast::<PyArrayDyn<T>>()?.try_readonly().map_err(bad_array(py, "data"))?;
    let buf = data.as_slice().map_err(bad_array(py, "data"))?;
    let r = py.detach(|| ds.write(var, &region, order, buf));
    lib(py, r)
}

/// save(path, data, dims=None, attrs=None, chunks=None, codec=None, overwrite=False, sync=True) -> None
///
/// Writes the arrays of `data` (a dict from name to array) as a new
/// container in one call (see `vds.save`).
#[pyfunction]
#[pyo3(signature = (path, data, dims=None, attrs=None, chunks=None, codec=None, overwrite=false, sync=true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn save(
    py: Python<'_>,
    path: PathBuf,
    data: &Bound<'_, PyDict>,
    dims: Option<&Bound<'_, PyDict>>,
    attrs: Option<&Bound<'_, PyAny>>,
    chunks: Option<&Bound<'_, PyDict>>,
    codec: Option<&Bound<'_, PyAny>>,
    overwrite: bool,
    sync: bool,
) -> PyResult<()> {
    if data.is_empty() {
        return Err(invalid(py, "save: data holds no array (a container has at least one variable)"));
    }
    let (items, axes) = items(py, data, dims)?;
    let mut b = DatasetBuilder::new();
    for (name, len, _) in &axes {
        b.axis(Axis::new(name, *len));
    }
    let codec = match codec {
        None => None,
        Some(c) => {
            let spec: CodecSpec =
                serde_json::from_value(crate::json::to_json(py, c, "codec")?).map_err(|e| invalid(py, format!("save: codec: {e}")))?;
            Some(spec)
        }
    };
    for it in &items {
        let names: Vec<&str> = it.dims.iter().map(String::as_str).collect();
        let mut v = VariableBuilder::new(&it.name, it.dtype, &names);
        if let Some(shape) = chunks.map(|c| c.get_item(&it.name)).transpose()?.flatten() {
            let shape: Vec<u64> = shape.extract().map_err(|_| {
                invalid(
                    py,
                    format!(
                        "save: chunks of variable {:?} is a sequence of extents, not {}",
                        it.name,
                        shape.repr().map(|r| r.to_string()).unwrap_or_default()
                    ),
                )
            })?;
            v.chunk(&shape);
        }
        if let Some(c) = &codec {
            v.codec(crate::create::codec(py, &it.name, c)?);
        }
        b.variable(&v);
    }
    if let Some(c) = chunks {
        for key in c.keys() {
            if !data.contains(&key)? {
                return Err(invalid(py, format!("save: chunks names {}, which is not in data", key.repr()?)));
            }
        }
    }
    if let Some(a) = attrs {
        match crate::json::to_json(py, a, "attrs")? {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    b.attribute(&k, v);
                }
            }
            other => return Err(invalid(py, format!("save: attrs is a dict of JSON values, not {other}"))),
        }
    }
    b.overwrite(overwrite);
    b.durability(if sync { Durability::Fsync } else { Durability::None });
    let mut ds = lib(py, py.detach(|| b.create(&path)))?;
    for (var, it) in items.iter().enumerate() {
        let a = &it.array;
        by_dtype!(py, a, write_whole(py, &mut ds, var, a))?;
    }
    lib(py, py.detach(|| ds.close()))
}

/// load(path, names=None, memory_limit) -> dict
///
/// Every variable (or those named), whole at level 0, as new C-order
/// arrays in a dict (see `vds.load`).
#[pyfunction]
#[pyo3(signature = (path, names, memory_limit))]
pub(crate) fn load<'py>(py: Python<'py>, path: PathBuf, names: Option<Vec<String>>, memory_limit: u64) -> PyResult<Bound<'py, PyDict>> {
    let mut o = vds::OpenOptions::new();
    o.memory_limit(memory_limit);
    let ds = lib(py, py.detach(|| o.open(&path)))?;
    let vars = ds.variables();
    let chosen: Vec<usize> = match &names {
        None => (0..vars.len()).collect(),
        Some(names) => names
            .iter()
            .map(|n| {
                vars.iter().position(|v| v.name() == n).ok_or_else(|| {
                    let all: Vec<&str> = vars.iter().map(vds::Variable::name).collect();
                    to_py(
                        py,
                        Failure::Refused(
                            "NotFound",
                            format!("load: no variable {n:?} in {} (variables: {})", path.display(), all.join(", ")),
                        ),
                    )
                })
            })
            .collect::<PyResult<_>>()?,
    };
    // The total within the limit first, then the arrays, then every read with the GIL released once.
    let total = chosen.iter().try_fold(0u64, |sum, &i| {
        let v = &vars[i];
        v.shape().iter().try_fold(v.dtype().size() as u64, |n, &s| n.checked_mul(s)).and_then(|n| sum.checked_add(n))
    });
    if total.is_none_or(|t| t > memory_limit) {
        let what = total.map_or_else(|| "more than 2**64".to_owned(), |t| t.to_string());
        let m = format!(
            "load: {} holds {what} bytes of values, over the memory limit of {memory_limit} bytes (load fewer with names=, or give a larger memory_limit=)",
            path.display()
        );
        return Err(to_py(py, Failure::Refused("OutOfMemory", m)));
    }
    let out = PyDict::new(py);
    let mut fills: Vec<(usize, Region, &mut [u8])> = Vec::with_capacity(chosen.len());
    for &i in &chosen {
        let v = &vars[i];
        let shape = v.shape();
        let array = zeroed(py, v.dtype(), shape, memory_limit)?;
        let bytes = array.len() * v.dtype().size();
        if bytes > 0 {
            // SAFETY: the array was just made, C-contiguous, holding `bytes`
            // bytes; no one else holds it until this call returns, and the
            // slice is dropped before.
            let buf = unsafe { std::slice::from_raw_parts_mut((*array.as_array_ptr()).data.cast::<u8>(), bytes) };
            fills.push((i, lib(py, Region::full(shape))?, buf));
        }
        out.set_item(v.name(), array)?;
    }
    let r = py.detach(|| -> vds::Result<()> {
        for (i, region, buf) in fills {
            ds.read_bytes(i, &region, Order::C, buf)?;
        }
        drop(ds);
        Ok(())
    });
    lib(py, r)?;
    Ok(out)
}
