//! The JSON descriptor (SPEC.md section 3): its members, parsing within
//! a memory limit, and the rules a descriptor must follow before the rest
//! of the library relies on its numbers.

use super::codec::{CodecJson, Compression};
use super::{
    check_name, check_slot_name, features, first_repeated, json, null_is_default, Axis, DType, LodMethod, Quantization, Scalar, Variable,
    FORMAT_MAJOR, KNOWN_FEATURES, MAX_CHUNK_BYTES, MAX_DESCRIPTOR_BYTES, MAX_DIMS, MAX_LAYERS, MAX_LODS, MAX_MARGIN, MAX_PARTITIONINGS,
    MAX_SAMPLES, MAX_SLOTS, MAX_VARIABLES,
};
use crate::codec::blocks::MAX_BLOCKS;
use crate::error::{Error, ErrorKind, Result};
use crate::wire;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The feature flags of a file, in the manner of ext4: names this library must
/// know to write (`ro_compat`) or to read at all (`incompat`).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub(crate) struct FeaturesJson {
    #[serde(default, deserialize_with = "null_is_default")]
    pub compat: Vec<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub ro_compat: Vec<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub incompat: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct AxisJson {
    pub name: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub unit: String,
    pub samples: u64,
    pub first: f64,
    pub last: f64,
    /// The axis may be resized (format 1.2).
    #[serde(default, deserialize_with = "null_is_default", skip_serializing_if = "std::ops::Not::not")]
    pub growable: bool,
    /// The most samples a growable axis may reach (format 1.2); none: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_samples: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct VariableJson {
    pub name: String,
    #[serde(default, deserialize_with = "null_is_default")]
    pub unit: String,
    pub dtype: String,
    pub axes: Vec<String>,
    pub chunk: Vec<u64>,
    pub fill: Value,
    pub codec: CodecJson,
    #[serde(default, deserialize_with = "null_is_default")]
    pub attributes: Map<String, Value>,
    /// Levels of detail (format 1.1, feature "levels_of_detail").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lod: Option<LodJson>,
    /// Further partitionings of the same data (format 1.1, feature "partitionings").
    #[serde(default, deserialize_with = "null_is_default", skip_serializing_if = "Vec::is_empty")]
    pub partitionings: Vec<PartitioningJson>,
    /// The value that marks a missing sample (format 1.1, feature "no_value").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_value: Option<Value>,
    /// Stored as integers over a value range (format 1.1, feature "quantization").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<QuantJson>,
    /// A missing-value bitmask is kept beside the values (format 1.1, feature "missing_mask").
    #[serde(default, deserialize_with = "null_is_default", skip_serializing_if = "std::ops::Not::not")]
    pub mask: bool,
    /// Bricks of the first partitioning overlap their neighbours by this
    /// many samples before and after (format 1.1, feature "margins").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<[u64; 2]>,
    /// Stored chunks are made of blocks of this shape, each encoded on its
    /// own (format 1.5, feature "blocks").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<Vec<u64>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `"lod": {"levels": 3, "axes": ["inline", "crossline", "time"], "method": "average"}`
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct LodJson {
    pub levels: u8,
    pub axes: Vec<String>,
    pub method: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `"quantization": {"storage": "uint8", "range": [-1.5, 1.5]}`
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct QuantJson {
    pub storage: String,
    pub range: [f64; 2],
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"chunk": [1, 256, 256]}`: one more partitioning of a variable.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct PartitioningJson {
    pub chunk: Vec<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct SlotJson {
    pub name: String,
    /// The slot file's identity (format 1.2): 16 hex digits, also in its header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The slot file's length at the last commit that wrote to it (format 1.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A parsed and validated descriptor: the JSON, the axes, the variables, and
/// whether an unknown `ro_compat` feature forbids writing. Shared: datasets
/// opened from the same bytes hold one copy, and a writer copies it when it
/// first changes it (`Arc::make_mut`).
pub(crate) type Parsed = (Arc<DescriptorJson>, Arc<Vec<Axis>>, Arc<Vec<Variable>>, bool);

/// The descriptor, SPEC.md section 3.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct DescriptorJson {
    pub format: String,
    pub version: [u16; 2],
    #[serde(default, deserialize_with = "null_is_default")]
    pub features: FeaturesJson,
    pub axes: Vec<AxisJson>,
    pub variables: Vec<VariableJson>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub slots: Vec<SlotJson>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub attributes: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Why a descriptor failed its checks.
enum Rule {
    /// A structural rule is broken (the message says which).
    Broken(String),
    /// A data type or codec this library does not know.
    Unsupported(Error),
}

impl From<String> for Rule {
    fn from(s: String) -> Rule {
        Rule::Broken(s)
    }
}

pub(super) fn descriptor_error(detail: String) -> Error {
    Error::new(ErrorKind::Corrupt, format!("invalid descriptor: {detail}"))
}

/// Refuses a descriptor whose parse could take more than the memory limit.
fn check_parse_cost(cost: u64, len: usize, memory_limit: u64) -> Result<()> {
    if cost > memory_limit {
        return Err(Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "the descriptor ({len} bytes) may take up to {cost} bytes of memory to parse, more than the memory limit of \
                 {memory_limit} bytes; open it with a larger memory limit"
            ),
        ));
    }
    Ok(())
}

impl DescriptorJson {
    /// Parses and validates descriptor bytes, refusing a descriptor whose
    /// parse could take more than `memory_limit` bytes. Errors are `Corrupt`
    /// (malformed), `OutOfMemory` (over the limit), `UnsupportedVersion` or
    /// `UnsupportedFeature`. The last member of the result says whether an
    /// unknown `ro_compat` feature forbids writing.
    pub(crate) fn parse(bytes: &[u8], memory_limit: u64) -> Result<Parsed> {
        // Opening many files of one schema parses the same bytes each time:
        // the last few small descriptors parsed are kept with their result,
        // which is a function of the bytes alone, and a hit shares it (a
        // writer copies it when it first changes it). Only results of a few
        // layers are kept (a short descriptor can declare many levels and
        // partitionings, each a variable in memory), so that the memo holds
        // little. The parse cost is kept too: a smaller limit than the one
        // the bytes were first parsed under still counts.
        const KEEP: usize = 4;
        const KEEP_BYTES: usize = 16 << 10;
        const KEEP_LAYERS: usize = 64;
        type Recent = Vec<(Vec<u8>, u64, Parsed)>;
        static RECENT: std::sync::Mutex<Recent> = std::sync::Mutex::new(Vec::new());
        let keep = bytes.len() <= KEEP_BYTES;
        if keep {
            let hit = RECENT.lock().ok().and_then(|r| r.iter().find(|(b, _, _)| b == bytes).map(|(_, c, p)| (*c, p.clone())));
            if let Some((cost, parsed)) = hit {
                check_parse_cost(cost, bytes.len(), memory_limit)?;
                return Ok(parsed);
            }
        }
        let (parsed, cost) = DescriptorJson::parse_costed(bytes, memory_limit)?;
        if keep && parsed.2.iter().map(|v| 1 + v.layers.len()).sum::<usize>() <= KEEP_LAYERS {
            let kept = parsed.clone();
            if let Ok(mut recent) = RECENT.lock() {
                if !recent.iter().any(|(b, _, _)| b == bytes) {
                    recent.truncate(KEEP - 1);
                    recent.insert(0, (bytes.to_vec(), cost, kept));
                }
            }
        }
        Ok(parsed)
    }

    /// [`DescriptorJson::parse`] without the memo.
    pub(crate) fn parse_uncached(bytes: &[u8], memory_limit: u64) -> Result<Parsed> {
        DescriptorJson::parse_costed(bytes, memory_limit).map(|(parsed, _)| parsed)
    }

    /// The JSON text checked and bounded (SPEC.md 3, "JSON text"), then
    /// parsed: the checks before serde_json bound what it allocates.
    fn read_text(bytes: &[u8], memory_limit: u64) -> Result<(DescriptorJson, u64)> {
        let shape = json::shape(bytes).map_err(|e| descriptor_error(format!("not valid descriptor JSON: {e}")))?;
        let cost = shape.parse_cost();
        check_parse_cost(cost, bytes.len(), memory_limit)?;
        json::check_member_names(bytes).map_err(|e| descriptor_error(format!("not valid descriptor JSON: {e}")))?;
        let d = serde_json::from_slice(bytes).map_err(|e| descriptor_error(format!("not valid descriptor JSON: {e}")))?;
        Ok((d, cost))
    }

    /// [`DescriptorJson::parse_uncached`], also returning the parse cost.
    fn parse_costed(bytes: &[u8], memory_limit: u64) -> Result<(Parsed, u64)> {
        let (d, cost) = DescriptorJson::read_text(bytes, memory_limit)?;
        // Version and features first: a newer file may legitimately fail the
        // checks below, and must then be reported as unsupported, not corrupt.
        if d.format != "vds" {
            return Err(descriptor_error(format!("\"format\" is {:?}, expected \"vds\"", d.format)));
        }
        if d.version[0] != FORMAT_MAJOR {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "descriptor format version {}.{} is not supported (this library reads {FORMAT_MAJOR}.x)",
                    d.version[0], d.version[1]
                ),
            ));
        }
        if let Some(f) = d.features.incompat.iter().find(|f| !KNOWN_FEATURES.contains(&f.as_str())) {
            return Err(Error::new(ErrorKind::UnsupportedFeature, format!("file needs feature {f:?}, which this library does not know")));
        }
        let read_only = d.features.ro_compat.iter().any(|f| !KNOWN_FEATURES.contains(&f.as_str()));
        let (axes, vars) = d.validate(ErrorKind::Corrupt)?;
        Ok(((Arc::new(d), Arc::new(axes), Arc::new(vars), read_only), cost))
    }

    /// Checks every structural rule of SPEC.md section 3 and derives the typed
    /// view. A broken rule is an error of kind `kind` (`Corrupt` for a file,
    /// `InvalidArgument` for a builder); an unknown data type or codec is
    /// `UnsupportedFeature` either way.
    pub(crate) fn validate(&self, kind: ErrorKind) -> Result<(Vec<Axis>, Vec<Variable>)> {
        self.check_rules(kind == ErrorKind::Corrupt).map_err(|e| match e {
            Rule::Broken(detail) if kind == ErrorKind::Corrupt => descriptor_error(detail),
            Rule::Broken(detail) => Error::new(kind, detail),
            Rule::Unsupported(e) => e,
        })
    }

    /// Whether a builder's rules for this descriptor are exactly a file's,
    /// so that reading its bytes back checks it as the builder would: true
    /// unless it lists an external-file slot, whose name a builder confines
    /// (the one place `check_rules` tells the two apart; a rule added for
    /// builders alone must be reflected here).
    pub(crate) fn builder_rules_are_a_files(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every limit on a count is checked before the list it bounds is
    /// walked, and names are checked for uniqueness with sets, so that the
    /// work is linear in the descriptor's size.
    fn check_rules(&self, from_file: bool) -> std::result::Result<(Vec<Axis>, Vec<Variable>), Rule> {
        features::check_listed(self)?;
        if self.axes.is_empty() || self.axes.len() > MAX_DIMS {
            return Err(format!("a dataset has 1 to {MAX_DIMS} axes, found {}", self.axes.len()).into());
        }
        if self.variables.is_empty() || self.variables.len() > MAX_VARIABLES {
            return Err(format!("a dataset has 1 to {MAX_VARIABLES} variables, found {}", self.variables.len()).into());
        }
        if self.slots.len() > MAX_SLOTS {
            return Err(format!("at most {MAX_SLOTS} external-file slots, found {}", self.slots.len()).into());
        }
        let mut axes = Vec::with_capacity(self.axes.len());
        if let Some(name) = first_repeated(self.axes.iter().map(|a| a.name.as_str())) {
            return Err(format!("axis name {name:?} is used twice").into());
        }
        for a in &self.axes {
            check_name("axis", &a.name)?;
            if a.samples == 0 || a.samples > MAX_SAMPLES {
                return Err(format!("axis {:?} has {} samples, outside 1..={MAX_SAMPLES}", a.name, a.samples).into());
            }
            if !a.first.is_finite() || !a.last.is_finite() {
                return Err(format!("axis {:?} has non-finite coordinates", a.name).into());
            }
            if a.max_samples.is_some() && !a.growable {
                return Err(format!("axis {:?} has max_samples but is not growable", a.name).into());
            }
            if let Some(m) = a.max_samples {
                if m < a.samples || m > MAX_SAMPLES {
                    return Err(format!("axis {:?}: max_samples {m} outside {}..={MAX_SAMPLES}", a.name, a.samples).into());
                }
            }
            axes.push(Axis {
                name: a.name.clone(),
                unit: a.unit.clone(),
                samples: a.samples,
                first: a.first,
                last: a.last,
                growable: a.growable,
                max_samples: a.max_samples,
            });
        }
        let mut vars = Vec::with_capacity(self.variables.len());
        let mut stored_layers = 0usize;
        if let Some(name) = first_repeated(self.variables.iter().map(|v| v.name.as_str())) {
            return Err(format!("variable name {name:?} is used twice").into());
        }
        for (i, v) in self.variables.iter().enumerate() {
            check_name("variable", &v.name)?;
            let dtype = DType::from_name(&v.dtype).map_err(|e| Rule::Unsupported(e.context(format!("variable {:?}", v.name))))?;
            if v.axes.is_empty() || v.axes.len() != v.chunk.len() {
                return Err(format!("variable {:?} must name 1 or more axes and give a chunk extent for each", v.name).into());
            }
            let mut ax = Vec::with_capacity(v.axes.len());
            for name in &v.axes {
                let k = self
                    .axes
                    .iter()
                    .position(|a| &a.name == name)
                    .ok_or_else(|| format!("variable {:?} spans unknown axis {name:?}", v.name))?;
                if ax.contains(&k) {
                    return Err(format!("variable {:?} spans axis {name:?} twice", v.name).into());
                }
                ax.push(k);
            }
            let shape: Vec<u64> = ax.iter().map(|&k| axes[k].samples).collect();
            let mut grid = Vec::with_capacity(ax.len());
            for (d, (&c, &n)) in v.chunk.iter().zip(&shape).enumerate() {
                if c == 0 {
                    return Err(format!("variable {:?}: chunk extent along axis {d} is 0", v.name).into());
                }
                let g = wire::div_ceil(n, c);
                if g > u64::from(u32::MAX) {
                    return Err(format!("variable {:?}: more than 2^32-1 chunks along axis {d}", v.name).into());
                }
                grid.push(g);
            }
            let elems = wire::product(&v.chunk, "chunk element count").map_err(|e| format!("variable {:?}: {e}", v.name))?;
            let bytes = elems.saturating_mul(dtype.size() as u64);
            if bytes > MAX_CHUNK_BYTES {
                return Err(format!("variable {:?}: a chunk of {bytes} bytes exceeds the limit of {MAX_CHUNK_BYTES}", v.name).into());
            }
            let fill = Scalar::from_json(&v.fill)
                .ok_or_else(|| format!("variable {:?}: fill value {} is not a number, boolean or NaN/Infinity string", v.name, v.fill))?
                .to_element(dtype)
                .map_err(|e| format!("variable {:?}: fill value: {e}", v.name))?;
            let codec = v.codec.to_codec(&v.name).map_err(|e| match e.kind() {
                ErrorKind::UnsupportedFeature => Rule::Unsupported(e),
                _ => Rule::Broken(e.message().trim_start_matches("invalid descriptor: ").to_string()),
            })?;
            let (lods, lod_axes, lod_method) = match &v.lod {
                None => (1, vec![false; ax.len()], LodMethod::Nearest),
                Some(l) => {
                    if l.levels == 0 || l.levels > MAX_LODS {
                        return Err(format!("variable {:?}: {} levels of detail, expected 1 to {MAX_LODS}", v.name, l.levels).into());
                    }
                    let mut halved = vec![false; ax.len()];
                    for a in &l.axes {
                        let k = v
                            .axes
                            .iter()
                            .position(|x| x == a)
                            .ok_or_else(|| format!("variable {:?}: level-of-detail axis {a:?} is not one of its axes", v.name))?;
                        if std::mem::replace(&mut halved[k], true) {
                            return Err(format!("variable {:?}: level-of-detail axis {a:?} is listed twice", v.name).into());
                        }
                    }
                    let method = match l.method.as_str() {
                        "average" if dtype != DType::Bool => LodMethod::Average,
                        "nearest" => LodMethod::Nearest,
                        m => {
                            return Err(format!(
                                "variable {:?}: level-of-detail method {m:?} (expected \"average\", not for bool, or \"nearest\")",
                                v.name
                            )
                            .into())
                        }
                    };
                    (l.levels, halved, method)
                }
            };
            if v.partitionings.len() + 1 > MAX_PARTITIONINGS {
                return Err(
                    format!("variable {:?}: {} partitionings, at most {MAX_PARTITIONINGS}", v.name, v.partitionings.len() + 1).into()
                );
            }
            let mut parts = vec![v.chunk.clone()];
            for p in &v.partitionings {
                if p.chunk.len() != ax.len() || p.chunk.contains(&0) {
                    return Err(format!(
                        "variable {:?}: a partitioning needs a non-zero chunk extent for each of its {} axes",
                        v.name,
                        ax.len()
                    )
                    .into());
                }
                let bytes = wire::product(&p.chunk, "chunk element count")
                    .map_err(|e| format!("variable {:?}: {e}", v.name))?
                    .saturating_mul(dtype.size() as u64);
                if bytes > MAX_CHUNK_BYTES || p.chunk.iter().zip(&shape).any(|(&c, &n)| n.div_ceil(c) > u64::from(u32::MAX)) {
                    return Err(format!("variable {:?}: partitioning chunk {:?} is too large or too small", v.name, p.chunk).into());
                }
                parts.push(p.chunk.clone());
            }
            let no_value = match &v.no_value {
                None => None,
                Some(j) => Some(
                    Scalar::from_json(j)
                        .ok_or_else(|| format!("variable {:?}: no_value {j} is not a number, boolean or NaN/Infinity string", v.name))?
                        .to_element(dtype)
                        .map_err(|e| format!("variable {:?}: no_value: {e}", v.name))?,
                ),
            };
            let quant = match &v.quantization {
                None => None,
                Some(q) => {
                    let storage = DType::from_name(&q.storage).ok().filter(|d| matches!(d, DType::UInt8 | DType::UInt16));
                    let storage = storage.ok_or_else(|| {
                        format!("variable {:?}: quantization storage {:?} (expected \"uint8\" or \"uint16\")", v.name, q.storage)
                    })?;
                    let [min, max] = q.range;
                    if !(matches!(dtype, DType::Float32 | DType::Float64) && min.is_finite() && max.is_finite() && min < max) {
                        return Err(
                            format!("variable {:?}: quantization needs a float variable and a finite range min < max", v.name).into()
                        );
                    }
                    Some(Quantization { storage, min, max })
                }
            };
            if matches!(codec.compression, Compression::Bounded { .. })
                && !(matches!(dtype, DType::Float32 | DType::Float64) && quant.is_none())
            {
                return Err(format!("variable {:?}: codec \"bounded\" needs a float32 or float64 variable, not quantized", v.name).into());
            }
            let margin = v.margin.unwrap_or([0, 0]);
            if margin.iter().any(|&m| m > MAX_MARGIN) {
                return Err(format!("variable {:?}: margin {margin:?} exceeds {MAX_MARGIN} samples", v.name).into());
            }
            let blocks = match &v.blocks {
                None => None,
                Some(b) => {
                    if b.len() != v.chunk.len() || b.iter().zip(&v.chunk).any(|(&b, &c)| b == 0 || b > c) {
                        return Err(format!("variable {:?}: block shape {b:?} must give each axis 1 to its chunk extent", v.name).into());
                    }
                    if dtype == DType::Bool || margin != [0, 0] {
                        return Err(format!("variable {:?}: blocks need a numeric type and no margins", v.name).into());
                    }
                    if matches!(codec.compression, super::Compression::Bounded { predictor: crate::spec::Predictor::Lorenzo, .. }) {
                        return Err(format!(
                            "variable {:?}: blocks are combined with the bounded codec's interpolation predictors only (format 1.6 and later)",
                            v.name
                        )
                        .into());
                    }
                    let count = b.iter().zip(&v.chunk).fold(1u64, |n, (&b, &c)| n.saturating_mul(c.div_ceil(b)));
                    if count > MAX_BLOCKS {
                        return Err(format!(
                            "variable {:?}: block shape {b:?} makes {count} blocks a chunk, more than {MAX_BLOCKS}",
                            v.name
                        )
                        .into());
                    }
                    Some(b.clone())
                }
            };
            let padded: Vec<u64> = v.chunk.iter().map(|&c| c + margin[0] + margin[1]).collect();
            let padded_bytes = wire::product(&padded, "chunk element count").map_err(|e| format!("variable {:?}: {e}", v.name))?;
            if padded_bytes.saturating_mul(dtype.size() as u64) > MAX_CHUNK_BYTES {
                return Err(format!("variable {:?}: a chunk with its margins exceeds {MAX_CHUNK_BYTES} bytes", v.name).into());
            }
            let mut var = Variable {
                name: v.name.clone(),
                unit: v.unit.clone(),
                dtype,
                axes: ax,
                shape,
                chunk: v.chunk.clone(),
                grid,
                fill,
                codec,
                // Cannot fail: elems * size <= MAX_CHUNK_BYTES.
                chunk_elems: elems as usize,
                lods,
                lod_axes,
                lod_method,
                parts,
                layers: Vec::new(),
                layer_id: 0,
                index: i,
                no_value,
                quant,
                masks: Vec::new(),
                margin,
                blocks,
            };
            var.layers =
                (0..lods).flat_map(|lod| (0..var.parts.len()).map(move |p| (lod, p))).map(|(lod, p)| var.make_layer(lod, p)).collect();
            if v.mask {
                var.masks = var.layers.iter().map(Variable::mask_of).collect();
            }
            // Bounded, since each layer takes memory when a file is opened.
            stored_layers += var.layers.len() + var.masks.len();
            if stored_layers > MAX_LAYERS {
                return Err(format!(
                    "the variables have more than {MAX_LAYERS} stored layers in all (levels of detail x partitionings x masks)"
                )
                .into());
            }
            vars.push(var);
        }
        if let Some(name) = first_repeated(self.slots.iter().map(|s| s.name.as_str())) {
            return Err(format!("external-file slot {name:?} is listed twice").into());
        }
        for s in &self.slots {
            // A builder's names must be confined; a file's are checked when a
            // slot is opened, where the caller may allow more (SPEC.md 8).
            // (The difference `builder_rules_are_a_files` names.)
            if from_file {
                check_name("slot", &s.name)?;
            } else {
                check_slot_name(&s.name)?;
            }
            if let Some(id) = &s.id {
                if id.len() != 16 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    return Err(format!("external-file slot {:?}: id {id:?} is not 16 lowercase hex digits", s.name).into());
                }
            }
            if s.id.is_none() && s.length.is_some() {
                return Err(format!("external-file slot {:?} has a length but no id", s.name).into());
            }
        }
        Ok((axes, vars))
    }

    /// Checks that the serialized descriptor is one a reader accepts: at most
    /// MAX_DESCRIPTOR_BYTES, within the JSON rules (attributes nested at most
    /// 127 deep, among others), and parseable within `memory_limit`.
    /// Returns its length and parse cost: [`DescBound`]s exact for it.
    pub(crate) fn check_writable(&self, memory_limit: u64) -> std::result::Result<DescBound, String> {
        let bytes = self.to_bytes();
        check_size(&bytes)?;
        let (_, cost) =
            DescriptorJson::read_text(&bytes, memory_limit).map_err(|e| format!("the descriptor would not read back: {}", e.message()))?;
        Ok(DescBound { bytes: bytes.len() as u64, cost })
    }

    /// The bounds of this descriptor, changed from one whose bounds were
    /// `bound` by a change that added at most `growth`: their sum when it
    /// stays within the limits, else what a full check finds (or why it
    /// would not read back).
    pub(crate) fn bound_after(
        &self,
        bound: Option<DescBound>,
        growth: Option<DescBound>,
        memory_limit: u64,
    ) -> std::result::Result<DescBound, String> {
        match bound.zip(growth).and_then(|(b, g)| b.grown(g, memory_limit)) {
            Some(b) => Ok(b),
            None => self.check_writable(memory_limit),
        }
    }

    /// The descriptor as one line of compact JSON (no newline inside).
    /// [`check_size`] tells whether a reader takes that many bytes.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain maps, strings and numbers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// At most how long a serialized descriptor is, and what parsing it may
/// cost ([`json::Shape::parse_cost`]): exact from
/// [`DescriptorJson::check_writable`], then grown by what each attribute
/// added since may add, so that a change whose bound stays within the limits
/// needs no new serialization of the whole descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescBound {
    pub bytes: u64,
    pub cost: u64,
}

impl DescBound {
    /// What removing a member adds: nothing.
    pub(crate) const NOTHING: DescBound = DescBound { bytes: 0, cost: 0 };

    /// The most a member `key: value` can add to a descriptor, placed in an
    /// object `depth` arrays and objects deep (the descriptor's own object
    /// is 1: 2 for the dataset's attributes, 4 for a variable's); None when
    /// the value is nested too deeply there (the full check then says so).
    pub(crate) fn of_member(key: &str, value: &serde_json::Value, depth: usize) -> Option<DescBound> {
        // The member inside as many arrays as there are levels above its object,
        // and that object: its nesting is checked where it will be, and what the
        // wrappers add (a value, a container and two bytes each) covers the comma
        // and the object becoming non-empty.
        let mut text = vec![b'['; depth - 1];
        text.push(b'{');
        serde_json::to_writer(&mut text, key).ok()?;
        text.push(b':');
        serde_json::to_writer(&mut text, value).ok()?;
        text.push(b'}');
        text.extend(std::iter::repeat_n(b']', depth - 1));
        let shape = json::shape(&text).ok()?;
        Some(DescBound { bytes: shape.bytes, cost: shape.parse_cost() })
    }

    /// This bound grown by `more`, if it stays within a reader's limits.
    pub(crate) fn grown(self, more: DescBound, memory_limit: u64) -> Option<DescBound> {
        let b = DescBound { bytes: self.bytes.saturating_add(more.bytes), cost: self.cost.saturating_add(more.cost) };
        (b.bytes <= MAX_DESCRIPTOR_BYTES && b.cost <= memory_limit).then_some(b)
    }
}

/// Refuses serialized descriptor bytes longer than a reader takes
/// (MAX_DESCRIPTOR_BYTES).
pub(crate) fn check_size(bytes: &[u8]) -> std::result::Result<(), String> {
    if bytes.len() as u64 > MAX_DESCRIPTOR_BYTES {
        return Err(format!("the descriptor would be {} bytes, more than the limit of {MAX_DESCRIPTOR_BYTES}", bytes.len()));
    }
    Ok(())
}
