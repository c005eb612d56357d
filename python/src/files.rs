//! `save(path, data, ...)` and `load(path, ...)`: a whole container written
//! or read in one call, as `numpy.savez` and `numpy.load` do.
//!
//! For many small files, where what a call costs matters more than what it
//! moves: the description is made from the arrays themselves, and the
//! container is created, written, committed and closed (or opened, read
//! whole and closed) without a Python object in between. The reads and
//! writes are the `Dataset` class's own. Everything else (regions, levels
//! of detail, masks, growth) goes through `vds.open` and `vds.create`.

use crate::arrays::{by_dtype, fresh_bytes, nbytes, zeroed};
use crate::create::CodecSpec;
use crate::dataset::{catch_panic, write_typed, Dataset};
use crate::errors::{invalid, lib, to_py, Failure, Outcome};
use crate::paths::FsPath;
use numpy::{PyArrayDescrMethods, PyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use smallvec::SmallVec;
use vds::{Axis, DType, DatasetBuilder, Durability, Order, Region, VariableBuilder, MAX_DIMS, MAX_VARIABLES};

/// The library's element type of an array, once its dtype is known to be
/// exactly one the library stores (as the write will borrow it).
fn element_type(py: Python<'_>, name: &str, a: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    fn of<T: numpy::Element + vds::Element>(a: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
        a.cast::<PyArrayDyn<T>>()?;
        Ok(T::DTYPE)
    }
    by_dtype!(py, a, of(a)).map_err(|_| {
        let m = format!("save: variable {name:?}: arrays of {} cannot be stored (integers, floats and bool only)", a.dtype());
        to_py(py, Failure::Refused("TypeMismatch", m))
    })
}

/// `value` as an array of at least one axis: itself when it is one (not a
/// masked array, whose mask would be lost), else `numpy.asarray(value)`.
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
    if a.ndim() == 0 {
        return Err(invalid(
            py,
            format!("save: variable {name:?} is a 0-d array: give it an axis (a shape of (1,)), or store it as an attribute"),
        ));
    }
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

/// The items of `obj`, a list or tuple of at most `MAX_DIMS` (one per axis),
/// each converted by `item`; `what` names it in errors (made only for one).
fn per_axis<T>(
    py: Python<'_>,
    what: impl Fn() -> String,
    obj: &Bound<'_, PyAny>,
    item: impl Fn(&Bound<'_, PyAny>) -> Option<T>,
) -> PyResult<Vec<T>> {
    let describe = || obj.repr().map(|r| r.to_string()).unwrap_or_default();
    let items = if let Ok(list) = obj.cast::<PyList>() {
        list.as_sequence().to_tuple()?
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        tuple.clone()
    } else {
        return Err(invalid(py, format!("save: {} is a list or tuple, one entry per axis, not {}", what(), describe())));
    };
    if items.len() > MAX_DIMS {
        return Err(invalid(py, format!("save: {} has {} entries; a variable has at most {MAX_DIMS} axes", what(), items.len())));
    }
    items.iter().map(|x| item(&x).ok_or_else(|| invalid(py, format!("save: {}: {} is not valid here", what(), describe())))).collect()
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
    if data.len() > MAX_VARIABLES {
        return Err(invalid(py, format!("save: data holds {} arrays; a container holds at most {MAX_VARIABLES} variables", data.len())));
    }
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
        let names: Vec<String> = match dims.map(|d| d.get_item(&name)).transpose()?.flatten() {
            Some(given) => per_axis(
                py,
                || format!("dims of variable {name:?}"),
                &given,
                |x| x.cast::<PyString>().ok().and_then(|s| s.to_cow().ok().map(|c| c.into_owned())),
            )?,
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
                None if axes.len() == MAX_DIMS => {
                    return Err(invalid(py, format!("save: the variables span more than {MAX_DIMS} axes (a container has at most {MAX_DIMS})")))
                }
                None => axes.push((axis.clone(), n as u64, name.clone())),
            }
        }
        let dtype = element_type(py, &name, &array)?;
        items.push(Item { name, dims: names, dtype, array });
    }
    Ok((items, axes))
}

/// Refuses keys of `option` (dims or chunks) that name no array of `data`.
fn only_known(py: Python<'_>, option: &str, given: Option<&Bound<'_, PyDict>>, data: &Bound<'_, PyDict>) -> PyResult<()> {
    for key in given.map(|d| d.keys()).into_iter().flatten() {
        if !data.contains(&key)? {
            return Err(invalid(py, format!("save: {option} names {}, which is not in data", key.repr()?)));
        }
    }
    Ok(())
}

/// The description of the container `save` makes.
fn describe(
    py: Python<'_>,
    items: &[Item<'_>],
    axes: &[AxisUse],
    attrs: Option<&Bound<'_, PyAny>>,
    chunks: Option<&Bound<'_, PyDict>>,
    codec: Option<&Bound<'_, PyAny>>,
) -> PyResult<DatasetBuilder> {
    let mut b = DatasetBuilder::new();
    for (name, len, _) in axes {
        b.axis(Axis::new(name, *len));
    }
    let codec = match codec {
        None => None,
        Some(c) => Some(crate::json::from_py::<CodecSpec>(py, c, "save: codec")?),
    };
    for it in items {
        let names: Vec<&str> = it.dims.iter().map(String::as_str).collect();
        let mut v = VariableBuilder::new(&it.name, it.dtype, &names);
        if let Some(shape) = chunks.map(|c| c.get_item(&it.name)).transpose()?.flatten() {
            // Whole numbers (NumPy's too), not bools.
            let shape = per_axis(
                py,
                || format!("chunks of variable {:?}", it.name),
                &shape,
                |x| {
                    if x.is_instance_of::<PyBool>() {
                        None
                    } else {
                        x.extract::<u64>().ok()
                    }
                },
            )?;
            v.chunk(&shape);
        }
        if let Some(c) = &codec {
            v.codec(crate::create::codec(py, &it.name, c)?);
        }
        b.variable(&v);
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
    Ok(b)
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
    path: FsPath,
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
    only_known(py, "dims", dims, data)?;
    only_known(py, "chunks", chunks, data)?;
    let mut b = describe(py, &items, &axes, attrs, chunks, codec)?;
    b.overwrite(overwrite);
    b.durability(if sync { Durability::Fsync } else { Durability::None });
    // Everything above is checked before the file is touched.
    let path: &std::path::Path = &path;
    let ds = Dataset::new(lib(py, py.detach(|| b.create(path)))?);
    let written = items.iter().enumerate().try_for_each(|(var, it)| {
        let (a, zeros, ones) = (&it.array, vec![0; it.dims.len()], vec![1; it.dims.len()]);
        by_dtype!(py, a, write_typed(py, &ds, var, &zeros, &ones, a, None))
    });
    match written.and_then(|()| ds.close(py, true)) {
        Ok(()) => Ok(()),
        Err(e) => {
            // A file made here is removed again; one written over stays an empty container (its first commit).
            let _ = ds.close(py, false);
            if !overwrite {
                let _ = std::fs::remove_file(path);
            }
            Err(e)
        }
    }
}

/// A variable `load` reads: its index, element type, shape and name (held
/// inline up to 32 bytes: a small file's load allocates for none of this).
struct Wanted {
    var: usize,
    dtype: DType,
    dims: [u64; MAX_DIMS],
    ndim: usize,
    name: SmallVec<[u8; 32]>,
}

/// The variables `load` reads, in order (one held inline).
type Chosen = SmallVec<[Wanted; 1]>;

impl Wanted {
    fn shape(&self) -> &[u64] {
        &self.dims[..self.ndim]
    }

    fn name(&self) -> &str {
        // The bytes of a str (`chosen` copies them from one).
        std::str::from_utf8(&self.name).unwrap_or_default()
    }

    /// Bytes of its values (within the memory limit `chosen` checked).
    fn len(&self) -> usize {
        nbytes(self.dtype, self.shape()).map_or(usize::MAX, |n| n as usize)
    }
}

/// What `load` reads of `ds`: every variable, or those `names` gives, and
/// their bytes in all, checked against `limit` before anything is allocated.
fn chosen(ds: &vds::Dataset, names: Option<&[String]>, path: &std::path::Path, limit: u64) -> Outcome<(Chosen, u64)> {
    let vars = ds.variables();
    let want = |i: usize| {
        let v = &vars[i];
        let mut dims = [0; MAX_DIMS];
        dims[..v.shape().len()].copy_from_slice(v.shape());
        Wanted { var: i, dtype: v.dtype(), dims, ndim: v.shape().len(), name: SmallVec::from_slice(v.name().as_bytes()) }
    };
    let wanted: Chosen = match names {
        None => (0..vars.len()).map(want).collect(),
        Some(names) => {
            // By name, in one pass over the variables (a file may hold 65,535 of them).
            let index: std::collections::HashMap<&str, usize> = vars.iter().enumerate().map(|(i, v)| (v.name(), i)).collect();
            let (mut chosen, mut taken) = (Chosen::with_capacity(names.len()), vec![false; vars.len()]);
            for n in names {
                let Some(&i) = index.get(n.as_str()) else {
                    let all: Vec<&str> = vars.iter().map(vds::Variable::name).collect();
                    let m = format!("load: no variable {n:?} in {} (variables: {})", path.display(), all.join(", "));
                    return Err(Failure::Refused("NotFound", m));
                };
                if std::mem::replace(&mut taken[i], true) {
                    return Err(Failure::Refused("InvalidArgument", format!("load: names gives {n:?} twice")));
                }
                chosen.push(want(i));
            }
            chosen
        }
    };
    let total = wanted.iter().try_fold(0u64, |sum, w| nbytes(w.dtype, w.shape()).and_then(|n| sum.checked_add(n)));
    match total {
        Some(total) if total <= limit => Ok((wanted, total)),
        _ => {
            let what = total.map_or_else(|| "more than 2**64".to_owned(), |t| t.to_string());
            let m = format!(
                "load: {} holds {what} bytes of values, over the memory limit of {limit} bytes (load fewer with names=, or give a larger memory_limit=)",
                path.display()
            );
            Err(Failure::Refused("OutOfMemory", m))
        }
    }
}

/// Values `load` reads in the same release of the GIL as it opens the
/// file, into memory of its own, and copies into the arrays made after:
/// for a small file that is cheaper than a second release. More is read
/// straight into the arrays, in a second release.
const READ_WITH_OPEN: u64 = 4096;

/// What a load's open leaves: the values read already into the call's own
/// memory (the file closed), or the dataset, open for a read into the arrays.
enum Opened<'a> {
    Read(&'a [u8]),
    /// Boxed: the dataset is large, and moving it costs.
    Open(Box<vds::Dataset>),
}

/// Reads `wanted` of `ds` whole into `bufs` (in C order).
fn read_whole<'a>(ds: &vds::Dataset, wanted: &[Wanted], bufs: impl Iterator<Item = &'a mut [u8]>) -> Outcome<()> {
    for (w, buf) in wanted.iter().zip(bufs) {
        if !buf.is_empty() {
            ds.read_lod_bytes(w.var, 0, None, &Region::full(w.shape())?, Order::C, buf)?;
        }
    }
    Ok(())
}

/// Reads every variable of the container at ``path`` (or those in ``names``) whole, in one call.
///
/// ``path``: a file, or a URL as :func:`open` takes (``http://``,
/// ``https://``, ``s3://``).
///
/// Returns a dict from variable name to a new C-order NumPy array of the
/// variable's values (level 0; a quantized variable's values, not its
/// stored integers; a masked variable's values as written, its mask
/// through :func:`open`), in the file's order of variables, or in the
/// order of ``names``. ``memory_limit`` (default 1 GiB) bounds the
/// memory opening the file may take, and the arrays' total, which is
/// checked before anything is read: :class:`OutOfMemoryError` beyond it.
/// A name not in the file raises :class:`NotFoundError`. For regions,
/// levels of detail, masks, attributes and coordinates, use :func:`open`.
/// Opening and reading release the GIL.
//
// The package's `vds.load` itself: a Python function around it made a tiny
// file's load about a tenth slower. Names given otherwise than as a list, and
// a memory limit, are checked by the package's own helpers, as elsewhere.
#[pyfunction]
#[pyo3(signature = (path, names=None, *, memory_limit=None))]
pub(crate) fn load<'py>(
    py: Python<'py>,
    path: FsPath,
    names: Option<&Bound<'py, PyAny>>,
    memory_limit: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let memory_limit = match memory_limit {
        None => vds::DEFAULT_MEMORY_LIMIT,
        Some(m) => py.import("vds._dataset")?.getattr("_nbytes")?.call1((m, "memory_limit"))?.extract()?,
    };
    let names = match names {
        Some(n) if !n.is_exact_instance_of::<PyList>() => Some(py.import("vds")?.getattr("_names")?.call1((n, "names"))?),
        n => n.cloned(),
    };
    let names: Option<Vec<String>> = names
        .map(|list| {
            list.cast_into::<PyList>()?
                .iter()
                .map(|n| match n.cast::<PyString>() {
                    Ok(s) => {
                        s.to_cow().map(|c| c.into_owned()).map_err(|_| invalid(py, "load: a name is not valid Unicode (a lone surrogate)"))
                    }
                    Err(_) => {
                        Err(invalid(py, format!("load: names are strings, not {}", n.repr().map(|r| r.to_string()).unwrap_or_default())))
                    }
                })
                .collect()
        })
        .transpose()?;
    let mut o = vds::OpenOptions::new();
    o.memory_limit(memory_limit);
    let path: &std::path::Path = &path;
    // A small load's values, on the stack; only the bytes read are initialized.
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); READ_WITH_OPEN as usize];
    // The library's dataset itself, not a `Dataset` object: nothing else
    // can reach it, so it needs no lock, and it is closed inside a release
    // of the GIL: the first, with the reads, when the values are few.
    let opened = py.detach(|| {
        catch_panic(|| {
            let ds = o.open(path)?;
            let (wanted, total) = chosen(&ds, names.as_deref(), path, memory_limit)?;
            if total > READ_WITH_OPEN {
                return Ok((wanted, Opened::Open(Box::new(ds))));
            }
            let space = &mut space[..total as usize];
            space.fill(std::mem::MaybeUninit::new(0));
            // SAFETY: every byte of `space` was initialized just above.
            let early = unsafe { std::slice::from_raw_parts_mut(space.as_mut_ptr().cast::<u8>(), space.len()) };
            let mut rest = &mut *early;
            let bufs = wanted.iter().map(|w| {
                let (buf, after) = std::mem::take(&mut rest).split_at_mut(w.len());
                rest = after;
                buf
            });
            read_whole(&ds, &wanted, bufs)?;
            drop(ds);
            Ok((wanted, Opened::Read(early)))
        })
    });
    let (wanted, opened) = opened.map_err(|e| to_py(py, e))?;
    let out = PyDict::new(py);
    match opened {
        Opened::Read(early) => {
            let mut at = 0;
            for w in &wanted {
                let a = zeroed(py, w.dtype, w.shape(), memory_limit)?;
                // SAFETY: the array was just made, and nothing else holds it.
                unsafe { fresh_bytes(&a) }.copy_from_slice(&early[at..at + w.len()]);
                at += w.len();
                out.set_item(w.name(), a)?;
            }
        }
        Opened::Open(ds) => {
            let mut fresh = Vec::with_capacity(wanted.len());
            for w in &wanted {
                let a = zeroed(py, w.dtype, w.shape(), memory_limit)?;
                out.set_item(w.name(), &a)?;
                fresh.push(a);
            }
            // SAFETY: each array was made above, and only `out`, not yet returned, holds it.
            let bufs: Vec<&mut [u8]> = fresh.iter().map(|a| unsafe { fresh_bytes(a) }).collect();
            let read = move || {
                read_whole(&ds, &wanted, bufs.into_iter())?;
                drop(ds);
                Ok(())
            };
            py.detach(|| catch_panic(read)).map_err(|e| to_py(py, e))?;
        }
    }
    Ok(out)
}

/// `load`'s parameters, for its fastcall form.
static LOAD: crate::fastcall::Signature<3> =
    crate::fastcall::Signature { function: "load", params: [c"path", c"names", c"memory_limit"], positional: 2, required: 1 };

/// `load` called the vectorcall way (see fastcall.rs), on Python 3.10 and later.
///
/// # Safety
/// CPython's contract for a `METH_FASTCALL | METH_KEYWORDS` function.
pub(crate) unsafe extern "C" fn load_fastcall(
    module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    /// # Safety
    /// As `load_fastcall`, inside PyO3's trampoline.
    unsafe fn body(
        py: Python<'_>,
        _module: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: CPython passes the arguments as `bind` takes them.
        let [path, names, limit] = unsafe { LOAD.bind(py, args, nargs, kwnames)? };
        let path = crate::fastcall::extract(py, "path", path.expect("bind checks the required parameters"))?;
        let (names, limit) = (names.as_deref().filter(|a| !a.is_none()), limit.as_deref().filter(|a| !a.is_none()));
        Ok(load(py, path, names, limit)?.into_ptr())
    }
    // SAFETY: CPython calls this with the thread attached, as the trampoline requires.
    unsafe { pyo3::impl_::trampoline::fastcall_with_keywords(module, args, nargs, kwnames, body) }
}
