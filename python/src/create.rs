//! `create(path, spec)`: a new container from its description.
//!
//! The Python layer (`vds.create`) turns its keyword arguments into one
//! description of JSON values (a dict), read here straight into the typed
//! fields below, without a detour through JSON text or values; it is checked field by field (unknown fields are
//! refused, so a misspelt option is an error, not silently ignored) and
//! handed to `DatasetBuilder`, which checks everything else.

use crate::dataset::Dataset;
use crate::errors::{invalid, lib};
use pyo3::prelude::*;
use pyo3::types::PyString;
use serde::Deserialize;
use serde_json::{Map, Value};
use vds::{Axis, Codec, DType, DatasetBuilder, Durability, Layout, LodMethod, Scalar, VariableBuilder};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    axes: Vec<AxisSpec>,
    variables: Vec<VariableSpec>,
    #[serde(default)]
    attrs: Map<String, Value>,
    #[serde(default)]
    overwrite: bool,
    #[serde(default = "yes")]
    sync: bool,
    #[serde(default)]
    slots: Vec<String>,
    layout: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AxisSpec {
    name: String,
    samples: u64,
    #[serde(default)]
    unit: String,
    first: Option<f64>,
    last: Option<f64>,
    #[serde(default)]
    growable: bool,
    max_samples: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VariableSpec {
    name: String,
    dtype: String,
    axes: Vec<String>,
    chunks: Option<Vec<u64>>,
    codec: Option<CodecSpec>,
    fill_value: Option<Value>,
    #[serde(default)]
    unit: String,
    #[serde(default)]
    attrs: Map<String, Value>,
    lods: Option<LodSpec>,
    #[serde(default)]
    partitionings: Vec<Vec<u64>>,
    no_value: Option<Value>,
    quantization: Option<QuantSpec>,
    margin: Option<[u64; 2]>,
    #[serde(default)]
    mask: bool,
    blocks: Option<Vec<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CodecSpec {
    id: String,
    level: Option<u8>,
    #[serde(default = "yes")]
    shuffle: bool,
    /// The absolute error bound of codec "bounded".
    tolerance: Option<f64>,
    /// The predictor of codec "bounded": "graded" (the default), "anchored", "interpolation" or "lorenzo".
    predictor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LodSpec {
    levels: u8,
    #[serde(default)]
    axes: Vec<String>,
    #[serde(default = "average")]
    method: String,
}

fn average() -> String {
    "average".to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuantSpec {
    storage: String,
    min: f64,
    max: f64,
}

/// A fill value or no-value in the descriptor's JSON form (numbers, booleans, "NaN", "Infinity", "-Infinity").
fn scalar(py: Python<'_>, what: &str, v: &Value) -> PyResult<Scalar> {
    Scalar::from_json(v).ok_or_else(|| invalid(py, format!("{what} {v} is not a number or a boolean")))
}

pub(crate) fn codec(py: Python<'_>, var: &str, c: &CodecSpec) -> PyResult<Codec> {
    if (c.tolerance.is_some() || c.predictor.is_some()) && c.id != "bounded" {
        return Err(invalid(py, format!("variable {var:?}: codec {:?} takes no tolerance or predictor", c.id)));
    }
    let codec = match (c.id.as_str(), c.level) {
        // Nothing to shuffle for: stored as the library's default codec is, whatever "shuffle" says.
        ("none", None) => return Ok(Codec::NONE),
        ("deflate", level) => {
            let level = level.unwrap_or(6);
            if !vds::Compression::DEFLATE_LEVELS.contains(&level) {
                return Err(invalid(py, format!("variable {var:?}: deflate level {level} is not 0 to 9")));
            }
            Codec::deflate(level)
        }
        ("zstd", level) => {
            let level = level.unwrap_or(1);
            if !vds::Compression::ZSTD_LEVELS.contains(&level) {
                return Err(invalid(py, format!("variable {var:?}: zstd level {level} is not 1 to 22")));
            }
            Codec::zstd(level)
        }
        ("bounded", level) => {
            let level = level.unwrap_or(3);
            if !vds::Compression::ZSTD_LEVELS.contains(&level) {
                return Err(invalid(py, format!("variable {var:?}: bounded codec's zstd level {level} is not 1 to 22")));
            }
            let Some(tolerance) = c.tolerance else {
                return Err(invalid(py, format!("variable {var:?}: codec \"bounded\" needs a tolerance (\"bounded:0.01\")")));
            };
            let predictor = match c.predictor.as_deref() {
                None | Some("graded") => vds::Predictor::Graded,
                Some("anchored") => vds::Predictor::Anchored,
                Some("interpolation") => vds::Predictor::Interpolation,
                Some("lorenzo") => vds::Predictor::Lorenzo,
                Some(other) => {
                    return Err(invalid(
                        py,
                        format!("variable {var:?}: predictor {other:?} is not \"graded\", \"anchored\", \"interpolation\" or \"lorenzo\""),
                    ))
                }
            };
            // The library refuses a tolerance out of (0, 1e300] when the variable is created.
            return Ok(Codec { compression: vds::Compression::Bounded { tolerance, level, predictor }, shuffle: false });
        }
        (id, level) => {
            return Err(invalid(
                py,
                format!(
                    "variable {var:?}: codec {id:?} (level {level:?}) is not \"none\", \"deflate\" (0-9), \"zstd\" (1-22) or \"bounded\""
                ),
            ))
        }
    };
    Ok(codec.with_shuffle(c.shuffle))
}

fn variable(py: Python<'_>, v: &VariableSpec) -> PyResult<VariableBuilder> {
    let dtype = lib(py, DType::from_name(&v.dtype))?;
    let axes: Vec<&str> = v.axes.iter().map(String::as_str).collect();
    let mut b = VariableBuilder::new(&v.name, dtype, &axes);
    b.unit(&v.unit);
    if let Some(c) = &v.chunks {
        b.chunk(c);
    }
    if let Some(c) = &v.codec {
        b.codec(codec(py, &v.name, c)?);
    }
    if let Some(nv) = &v.no_value {
        b.no_value(scalar(py, "no_value", nv)?);
    }
    if let Some(f) = &v.fill_value {
        b.fill(scalar(py, "fill_value", f)?);
    }
    for (k, val) in &v.attrs {
        b.attribute(k, val.clone());
    }
    if let Some(l) = &v.lods {
        let method = match l.method.as_str() {
            "average" => LodMethod::Average,
            "nearest" => LodMethod::Nearest,
            m => return Err(invalid(py, format!("variable {:?}: lod method {m:?} is not \"average\" or \"nearest\"", v.name))),
        };
        let lod_axes: Vec<&str> = l.axes.iter().map(String::as_str).collect();
        b.levels_of_detail(l.levels, &lod_axes, method);
    }
    for p in &v.partitionings {
        b.partitioning(p);
    }
    if let Some(q) = &v.quantization {
        b.quantization(lib(py, DType::from_name(&q.storage))?, q.min, q.max);
    }
    if let Some([neg, pos]) = v.margin {
        b.margin(neg, pos);
    }
    b.missing_mask(v.mask);
    // Absent: the library's default blocks; empty: whole chunks.
    if let Some(shape) = &v.blocks {
        b.blocks((!shape.is_empty()).then_some(shape.as_slice()));
    }
    Ok(b)
}

/// create(path, spec) -> Dataset
///
/// Creates a container from its description (see `vds.create`): a dict, or
/// its JSON text.
#[pyfunction]
pub(crate) fn create(py: Python<'_>, path: crate::paths::FsPath, spec: &Bound<'_, PyAny>) -> PyResult<Dataset> {
    let spec: Spec = match spec.cast::<PyString>() {
        Ok(text) => serde_json::from_str(
            &text.to_cow().map_err(|_| invalid(py, "create: the description is not valid Unicode (a lone surrogate)"))?,
        )
        .map_err(|e| invalid(py, format!("create: {e}")))?,
        Err(_) => crate::json::from_py(py, spec, "create")?,
    };
    let mut b = DatasetBuilder::new();
    for a in &spec.axes {
        let mut axis = Axis::new(&a.name, a.samples).unit(&a.unit);
        let first = a.first.unwrap_or(0.0);
        // A lone first coordinate keeps unit spacing, as the library's default does.
        let last = a.last.unwrap_or(first + a.samples.saturating_sub(1) as f64);
        axis = axis.coordinates(first, last);
        if a.growable || a.max_samples.is_some() {
            axis = axis.growable(a.max_samples);
        }
        b.axis(axis);
    }
    for v in &spec.variables {
        b.variable(&variable(py, v)?);
    }
    for (k, v) in &spec.attrs {
        b.attribute(k, v.clone());
    }
    for s in &spec.slots {
        b.external_slot(s);
    }
    b.layout(match spec.layout.as_deref() {
        None | Some("auto") => Layout::Auto,
        Some("compact") => Layout::Compact,
        Some("aligned") => Layout::Aligned,
        Some(other) => return Err(invalid(py, format!("layout {other:?}: expected \"auto\", \"compact\" or \"aligned\""))),
    });
    b.overwrite(spec.overwrite);
    b.durability(if spec.sync { Durability::Fsync } else { Durability::None });
    let path: &std::path::Path = &path;
    let ds = py.detach(|| b.create(path));
    Ok(Dataset::new(lib(py, ds)?))
}
