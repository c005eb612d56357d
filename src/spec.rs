//! The format as data, with no I/O: the version line, data types, fill
//! values, codecs, and the JSON descriptor with its validation.
//!
//! Each descriptor type follows SPEC.md section 3 field by field. Parsing
//! validates everything a later step relies on (shapes, sizes, names), so
//! that the rest of the library can index with the numbers it finds here.

use crate::error::{invalid, Error, ErrorKind, Result};
use crate::wire;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

mod features;
mod json;
pub(crate) use features::{
    FEATURE_CHUNK_HASHES, FEATURE_COMPACT, FEATURE_LOD, FEATURE_MARGINS, FEATURE_MASK, FEATURE_NO_VALUE, FEATURE_PARTITIONINGS,
    FEATURE_QUANTIZATION, FEATURE_ZSTD, KNOWN_FEATURES,
};

/// The first bytes of every container: the magic word and a space.
pub const MAGIC: &[u8] = b"VDS ";
/// The major version this library writes and reads. A file with another major version is refused.
pub const FORMAT_MAJOR: u16 = 1;
/// The minor version this library writes. Files of any minor version of major 1 are read.
pub const FORMAT_MINOR: u16 = 4;
/// The most axes a dataset may have (the chunk key holds this many coordinates).
pub const MAX_DIMS: usize = 8;
/// The largest uncompressed chunk, in bytes (256 MiB).
pub const MAX_CHUNK_BYTES: u64 = 256 << 20;
/// The most variables a dataset may have (the layer key gives them 16 bits).
pub const MAX_VARIABLES: usize = 65_535;
/// The longest descriptor accepted, in bytes (64 MiB).
pub const MAX_DESCRIPTOR_BYTES: u64 = 64 << 20;
/// The most external-file slots a dataset may have (an entry gives the slot number 16 bits).
pub(crate) const MAX_SLOTS: usize = 65_535;

/// The version line, "VDS 1.3\n".
pub(crate) fn version_line() -> String {
    format!("VDS {FORMAT_MAJOR}.{FORMAT_MINOR}\n")
}

/// Parses the version line (without its newline) into (major, minor).
pub(crate) fn parse_version_line(line: &[u8]) -> Result<(u16, u16)> {
    let bad = || {
        Error::corrupt(
            "version line",
            0,
            0,
            format!(
                "not a libvds container: expected \"VDS <major>.<minor>\", found {:?}",
                String::from_utf8_lossy(&line[..line.len().min(32)])
            ),
        )
    };
    let rest = line.strip_prefix(MAGIC).ok_or_else(bad)?;
    let text = std::str::from_utf8(rest).map_err(|_| bad())?;
    let (ma, mi) = text.split_once('.').ok_or_else(bad)?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ma) || !digits(mi) {
        return Err(bad());
    }
    let major: u16 = ma.parse().map_err(|_| bad())?;
    let minor: u16 = mi.parse().map_err(|_| bad())?;
    if major != FORMAT_MAJOR {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("file format version {major}.{minor} is not supported: this library reads major version {FORMAT_MAJOR}"),
        ));
    }
    Ok((major, minor))
}

/// The element type of a variable. All multi-byte types are little-endian on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// IEEE 754 binary32.
    Float32,
    /// IEEE 754 binary64.
    Float64,
    /// Boolean: one bit per value on disk, one byte (0 or 1) per value in memory.
    Bool,
}

impl DType {
    /// Every data type, in the order of their descriptor names in SPEC.md.
    pub const ALL: [DType; 11] = [
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float32,
        DType::Float64,
        DType::Bool,
    ];

    /// The name used in the descriptor ("int8", ..., "float64", "bool").
    pub fn name(self) -> &'static str {
        match self {
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Bool => "bool",
        }
    }

    /// The data type with the given descriptor name.
    ///
    /// # Errors
    /// `UnsupportedFeature` when the name is not one of SPEC.md's types.
    pub fn from_name(name: &str) -> Result<DType> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| Error::new(ErrorKind::UnsupportedFeature, format!("unknown data type {name:?}")))
    }

    /// Bytes per element in memory (1 for bool).
    pub fn size(self) -> usize {
        match self {
            DType::Int8 | DType::UInt8 | DType::Bool => 1,
            DType::Int16 | DType::UInt16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A single value of any data type: a fill value or a constant chunk's value.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Scalar {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A floating-point number (NaN and infinities allowed).
    Float(f64),
    /// A boolean.
    Bool(bool),
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar { Scalar::$v(x as $c) }
        }
    )*};
}
scalar_from!(i8 => Int as i64, i16 => Int as i64, i32 => Int as i64, i64 => Int as i64,
             u8 => UInt as u64, u16 => UInt as u64, u32 => UInt as u64, u64 => UInt as u64,
             f32 => Float as f64, f64 => Float as f64);
impl From<bool> for Scalar {
    fn from(x: bool) -> Scalar {
        Scalar::Bool(x)
    }
}

impl Scalar {
    /// Encodes the value as one element of `dtype`, little-endian, in the
    /// first `dtype.size()` bytes of the result (the rest zero).
    ///
    /// # Errors
    /// `InvalidArgument` when the value does not fit the type exactly
    /// (out of range, a fraction for an integer type, a number for bool).
    pub fn to_element(self, dtype: DType) -> Result<[u8; 8]> {
        let mut out = [0u8; 8];
        let unfit = || invalid(format!("value {self:?} does not fit data type {dtype}"));
        // Integers are carried as i128 so that every i64 and u64 compares exactly.
        let int: Option<i128> = match self {
            Scalar::Int(v) => Some(i128::from(v)),
            Scalar::UInt(v) => Some(i128::from(v)),
            Scalar::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 2f64.powi(64) => Some(f as i128),
            _ => None,
        };
        macro_rules! put_int {
            ($t:ty) => {{
                let v = int.ok_or_else(unfit)?;
                let v = <$t>::try_from(v).map_err(|_| unfit())?;
                out[..std::mem::size_of::<$t>()].copy_from_slice(&v.to_le_bytes());
            }};
        }
        match dtype {
            DType::Int8 => put_int!(i8),
            DType::Int16 => put_int!(i16),
            DType::Int32 => put_int!(i32),
            DType::Int64 => put_int!(i64),
            DType::UInt8 => put_int!(u8),
            DType::UInt16 => put_int!(u16),
            DType::UInt32 => put_int!(u32),
            DType::UInt64 => put_int!(u64),
            DType::Float32 | DType::Float64 => {
                let f = match self {
                    Scalar::Float(f) => f,
                    // Integers must convert exactly (2^53 + 1 has no binary64 value).
                    Scalar::Int(v) if (v as f64) as i128 == i128::from(v) => v as f64,
                    Scalar::UInt(v) if (v as f64) as i128 == i128::from(v) => v as f64,
                    _ => return Err(unfit()),
                };
                if dtype == DType::Float32 {
                    let g = f as f32;
                    if f.is_finite() && (g as f64) != f {
                        return Err(unfit());
                    }
                    out[..4].copy_from_slice(&g.to_le_bytes());
                } else {
                    out.copy_from_slice(&f.to_le_bytes());
                }
            }
            DType::Bool => match self {
                Scalar::Bool(b) => out[0] = u8::from(b),
                _ => return Err(unfit()),
            },
        }
        Ok(out)
    }

    /// Decodes one little-endian element of `dtype` from `bytes[..dtype.size()]`.
    pub fn from_element(dtype: DType, bytes: &[u8; 8]) -> Scalar {
        let b = bytes;
        match dtype {
            DType::Int8 => Scalar::Int(i64::from(b[0] as i8)),
            DType::Int16 => Scalar::Int(i64::from(i16::from_le_bytes([b[0], b[1]]))),
            DType::Int32 => Scalar::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            DType::Int64 => Scalar::Int(i64::from_le_bytes(*b)),
            DType::UInt8 => Scalar::UInt(u64::from(b[0])),
            DType::UInt16 => Scalar::UInt(u64::from(u16::from_le_bytes([b[0], b[1]]))),
            DType::UInt32 => Scalar::UInt(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            DType::UInt64 => Scalar::UInt(u64::from_le_bytes(*b)),
            DType::Float32 => Scalar::Float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            DType::Float64 => Scalar::Float(f64::from_le_bytes(*b)),
            DType::Bool => Scalar::Bool(b[0] != 0),
        }
    }

    /// The descriptor's JSON form: a number, a boolean, or for non-finite
    /// floats one of the strings "NaN", "Infinity", "-Infinity".
    pub(crate) fn to_json(self) -> Value {
        match self {
            Scalar::Int(v) => Value::from(v),
            Scalar::UInt(v) => Value::from(v),
            Scalar::Bool(v) => Value::from(v),
            Scalar::Float(f) if f.is_nan() => Value::from("NaN"),
            Scalar::Float(f) if f == f64::INFINITY => Value::from("Infinity"),
            Scalar::Float(f) if f == f64::NEG_INFINITY => Value::from("-Infinity"),
            Scalar::Float(f) => Value::from(f),
        }
    }

    /// Parses the descriptor's JSON form: a number, a boolean, or one of the
    /// strings "NaN", "Infinity", "-Infinity" for non-finite floats. `None`
    /// for anything else.
    pub fn from_json(v: &Value) -> Option<Scalar> {
        match v {
            Value::Bool(b) => Some(Scalar::Bool(*b)),
            Value::Number(n) => {
                n.as_u64().map(Scalar::UInt).or_else(|| n.as_i64().map(Scalar::Int)).or_else(|| n.as_f64().map(Scalar::Float))
            }
            Value::String(s) => match s.as_str() {
                "NaN" => Some(Scalar::Float(f64::NAN)),
                "Infinity" => Some(Scalar::Float(f64::INFINITY)),
                "-Infinity" => Some(Scalar::Float(f64::NEG_INFINITY)),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The compression stage of a variable's codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Chunks are stored as their raw little-endian bytes.
    None,
    /// zlib-wrapped deflate (RFC 1950), level 0 (fastest) to 9 (smallest).
    Deflate {
        /// Compression level, 0..=9.
        level: u8,
    },
    /// Zstandard (RFC 8878), level 1 (fastest) to 22 (smallest); format
    /// 1.3, and only in builds with the cargo feature `zstd` (on by default).
    /// At level 1 it stores about as small as deflate level 1 and runs about
    /// four times faster both ways.
    Zstd {
        /// Compression level, 1..=22.
        level: u8,
    },
}

impl Compression {
    /// The levels of [`Compression::Deflate`].
    pub const DEFLATE_LEVELS: std::ops::RangeInclusive<u8> = 0..=9;
    /// The levels of [`Compression::Zstd`].
    pub const ZSTD_LEVELS: std::ops::RangeInclusive<u8> = 1..=22;
}

/// How a variable's chunks are encoded: an optional byte shuffle, then compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    /// The compression stage.
    pub compression: Compression,
    /// Byte-shuffle multi-byte elements before compression (ignored for 1-byte types).
    pub shuffle: bool,
}

impl Codec {
    /// No compression, no shuffle.
    pub const NONE: Codec = Codec { compression: Compression::None, shuffle: false };

    /// Deflate at `level` (clamped to 9) with the byte shuffle on, which
    /// usually helps multi-byte numeric data.
    pub fn deflate(level: u8) -> Codec {
        Codec { compression: Compression::Deflate { level: level.min(9) }, shuffle: true }
    }

    /// Zstandard at `level` (clamped to 1..=22) with the byte shuffle on.
    /// Creating a variable with it fails with [`ErrorKind::UnsupportedFeature`]
    /// in a build without the cargo feature `zstd`.
    pub fn zstd(level: u8) -> Codec {
        let levels = Compression::ZSTD_LEVELS;
        Codec { compression: Compression::Zstd { level: level.clamp(*levels.start(), *levels.end()) }, shuffle: true }
    }

    /// The same codec with the shuffle set to `on`.
    #[must_use]
    pub fn with_shuffle(self, on: bool) -> Codec {
        Codec { shuffle: on, ..self }
    }
}

/// Reads an optional member whose `null` stands for its absence, as it
/// does for every optional member (SPEC.md 3.1).
fn null_is_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> std::result::Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Codec as it appears in the descriptor: `{"id":"deflate","level":6,"shuffle":true}`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct CodecJson {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub shuffle: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CodecJson {
    pub(crate) fn from_codec(c: Codec) -> CodecJson {
        let (id, level) = match c.compression {
            Compression::None => ("none", None),
            Compression::Deflate { level } => ("deflate", Some(level)),
            Compression::Zstd { level } => ("zstd", Some(level)),
        };
        CodecJson { id: id.into(), level, shuffle: c.shuffle, extra: Map::new() }
    }

    pub(crate) fn to_codec(&self, var: &str) -> Result<Codec> {
        let compression = match (self.id.as_str(), self.level) {
            ("none", None) => Compression::None,
            ("none", Some(_)) => return Err(descriptor_error(format!("variable {var:?}: codec \"none\" takes no \"level\""))),
            ("deflate", Some(level)) if Compression::DEFLATE_LEVELS.contains(&level) => Compression::Deflate { level },
            ("deflate", other) => {
                return Err(descriptor_error(format!("variable {var:?}: deflate needs \"level\" 0..=9, found {other:?}")))
            }
            ("zstd", _) if !cfg!(feature = "zstd") => {
                return Err(Error::new(
                    ErrorKind::UnsupportedFeature,
                    format!("variable {var:?}: codec \"zstd\", and this build of libvds has no zstd (cargo feature \"zstd\")"),
                ))
            }
            ("zstd", Some(level)) if Compression::ZSTD_LEVELS.contains(&level) => Compression::Zstd { level },
            ("zstd", other) => return Err(descriptor_error(format!("variable {var:?}: zstd needs \"level\" 1..=22, found {other:?}"))),
            (id, _) => return Err(Error::new(ErrorKind::UnsupportedFeature, format!("variable {var:?}: unknown codec {id:?}"))),
        };
        Ok(Codec { compression, shuffle: self.shuffle })
    }
}

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

/// Most stored layers (levels of detail x partitionings, and their masks)
/// of all the variables of a dataset together.
pub const MAX_LAYERS: usize = 65_536;
/// The largest margin, in samples.
pub const MAX_MARGIN: u64 = 64;
/// The bit of a key's partitioning byte that marks a mask layer.
pub(crate) const MASK_LAYER: u8 = 0x80;
/// Most samples along an axis: (2^32 - 1) chunks of at most 2^28 samples.
pub(crate) const MAX_SAMPLES: u64 = u32::MAX as u64 * MAX_CHUNK_BYTES;
/// Most levels of detail of a variable.
pub const MAX_LODS: u8 = 16;
/// Most partitionings of a variable (the first is its own chunk shape).
pub const MAX_PARTITIONINGS: usize = 8;

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
/// whether an unknown `ro_compat` feature forbids writing.
pub(crate) type Parsed = (DescriptorJson, Vec<Axis>, Vec<Variable>, bool);

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

fn descriptor_error(detail: String) -> Error {
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

/// One axis of a dataset: its name, unit, number of samples and the
/// coordinates of its first and last sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) samples: u64,
    pub(crate) first: f64,
    pub(crate) last: f64,
    pub(crate) growable: bool,
    pub(crate) max_samples: Option<u64>,
}

impl Axis {
    /// An axis of `samples` samples with coordinates 0, 1, ..., samples - 1 and no unit.
    pub fn new(name: &str, samples: u64) -> Axis {
        Axis {
            name: name.into(),
            unit: String::new(),
            samples,
            first: 0.0,
            last: samples.saturating_sub(1) as f64,
            growable: false,
            max_samples: None,
        }
    }
    /// Makes the axis growable: [`Dataset::resize_axis`](crate::Dataset::resize_axis)
    /// and [`Dataset::append`](crate::Dataset::append) may change its
    /// number of samples later, up to `max_samples` (`None`: no limit but
    /// the format's). Every variable spanning it grows or shrinks with it.
    #[must_use]
    pub fn growable(mut self, max_samples: Option<u64>) -> Axis {
        self.growable = true;
        self.max_samples = max_samples;
        self
    }
    /// Whether the axis may be resized.
    pub fn is_growable(&self) -> bool {
        self.growable
    }
    /// The most samples a growable axis may reach, if limited.
    pub fn max_samples(&self) -> Option<u64> {
        self.max_samples
    }
    /// Sets the unit (e.g. "m", "ms").
    #[must_use]
    pub fn unit(mut self, unit: &str) -> Axis {
        self.unit = unit.into();
        self
    }
    /// Sets the coordinates of the first and last sample (samples are evenly spaced between them).
    #[must_use]
    pub fn coordinates(mut self, first: f64, last: f64) -> Axis {
        self.first = first;
        self.last = last;
        self
    }
    /// The axis name, unique in its dataset.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The unit, possibly empty.
    pub fn unit_str(&self) -> &str {
        &self.unit
    }
    /// The number of samples.
    pub fn samples(&self) -> u64 {
        self.samples
    }
    /// The coordinate of the first sample.
    pub fn first(&self) -> f64 {
        self.first
    }
    /// The coordinate of the last sample.
    pub fn last(&self) -> f64 {
        self.last
    }
}

/// A variable (channel) of a dataset, as described by the descriptor.
#[derive(Debug, Clone)]
pub struct Variable {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) dtype: DType,
    pub(crate) axes: Vec<usize>,
    pub(crate) shape: Vec<u64>,
    pub(crate) chunk: Vec<u64>,
    /// Chunks along each axis: ceil(shape / chunk).
    pub(crate) grid: Vec<u64>,
    /// The fill value as one little-endian element.
    pub(crate) fill: [u8; 8],
    pub(crate) codec: Codec,
    /// Elements per chunk.
    pub(crate) chunk_elems: usize,
    /// Levels of detail, 1 or more (level 0 is the data itself).
    pub(crate) lods: u8,
    /// Per axis of the variable: whether levels of detail halve it.
    pub(crate) lod_axes: Vec<bool>,
    pub(crate) lod_method: LodMethod,
    /// Chunk shapes of every partitioning; the first is `chunk`.
    pub(crate) parts: Vec<Vec<u64>>,
    /// The stored layers, `lod * parts.len() + partitioning`, each with its
    /// own shape, chunk shape and grid (empty inside a layer).
    pub(crate) layers: Vec<Variable>,
    /// This layer's `lod << 8 | partitioning` (0 for the variable itself).
    pub(crate) layer_id: u16,
    /// The variable's position in the dataset.
    pub(crate) index: usize,
    /// The no-value marker as one little-endian element (of `dtype`), if any.
    pub(crate) no_value: Option<[u8; 8]>,
    /// How values are stored as integers, if they are.
    pub(crate) quant: Option<Quantization>,
    /// The missing-value masks of the layers, in the order of `layers`
    /// (empty unless the variable keeps a mask).
    pub(crate) masks: Vec<Variable>,
    /// Samples each stored chunk of this layer carries before and after its
    /// own box along every axis (the first partitioning's bricks only).
    pub(crate) margin: [u64; 2],
}

/// Quantized storage: values of a float variable kept as `storage`
/// integers q, standing for `min + q * (max - min) / qmax` (SPEC.md 3.8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantization {
    /// The integer type stored: uint8 or uint16.
    pub storage: DType,
    /// The value of q = 0.
    pub min: f64,
    /// The value of q = qmax (255 or 65535).
    pub max: f64,
}

impl Quantization {
    /// The largest stored integer.
    pub fn qmax(&self) -> f64 {
        if self.storage == DType::UInt8 {
            255.0
        } else {
            65535.0
        }
    }
    /// The difference between two neighbouring representable values.
    pub fn step(&self) -> f64 {
        (self.max - self.min) / self.qmax()
    }
    /// The stored integer of `x`: `round((x - min) / step)` (halves away
    /// from zero), clamped to `0..=qmax`; NaN is 0.
    pub fn quantize(&self, x: f64) -> u16 {
        let q = ((x - self.min) / self.step()).round();
        if q.is_nan() {
            0
        } else {
            q.clamp(0.0, self.qmax()) as u16
        }
    }
    /// The value a stored integer stands for, in double precision.
    pub fn value(&self, q: u16) -> f64 {
        self.min + f64::from(q) * self.step()
    }
}

/// How a level of detail is computed from the level below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LodMethod {
    /// The mean of the (up to 2^d) values a sample covers; integers are
    /// rounded to the nearest, halves away from zero. For continuous data.
    Average,
    /// The first of the values a sample covers (decimation). For discrete
    /// data such as classes and masks.
    Nearest,
}

impl LodMethod {
    pub(crate) fn name(self) -> &'static str {
        match self {
            LodMethod::Average => "average",
            LodMethod::Nearest => "nearest",
        }
    }
}

/// The extent of `n` samples at level of detail `lod` along a halved axis.
pub(crate) fn lod_extent(n: u64, lod: u8) -> u64 {
    n.div_ceil(1u64 << lod)
}

impl Variable {
    /// One stored layer of this variable: level of detail `lod` in
    /// partitioning `part`, with that level's shape and that partitioning's chunks.
    fn make_layer(&self, lod: u8, part: usize) -> Variable {
        let shape: Vec<u64> = self.shape.iter().zip(&self.lod_axes).map(|(&n, &h)| if h { lod_extent(n, lod) } else { n }).collect();
        let chunk = self.parts[part].clone();
        let grid = shape.iter().zip(&chunk).map(|(&n, &c)| n.div_ceil(c)).collect();
        // Only the first partitioning's bricks carry margins.
        let margin = if part == 0 { self.margin } else { [0, 0] };
        let chunk_elems = chunk.iter().map(|&c| c + margin[0] + margin[1]).product::<u64>() as usize;
        let name =
            if lod == 0 && part == 0 { self.name.clone() } else { format!("{} (level of detail {lod}, partitioning {part})", self.name) };
        let mut layer = Variable {
            name,
            shape,
            chunk,
            grid,
            chunk_elems,
            margin,
            // A layer has no layers or partitionings of its own.
            parts: Vec::new(),
            layers: Vec::new(),
            layer_id: u16::from(lod) << 8 | part as u16,
            ..self.clone()
        };
        // A quantized variable's layers hold its stored integers.
        if let Some(q) = self.quant {
            let as_int = |e: &[u8; 8]| {
                let mut out = [0u8; 8];
                let x = match Scalar::from_element(self.dtype, e) {
                    Scalar::Float(x) => x,
                    _ => 0.0,
                };
                // q <= qmax, so for uint8 the second byte is 0.
                out[..2].copy_from_slice(&q.quantize(x).to_le_bytes());
                out
            };
            layer.dtype = q.storage;
            layer.fill = as_int(&self.fill);
            layer.no_value = self.no_value.as_ref().map(as_int);
        }
        layer
    }

    /// The missing-value mask of this layer: bool, same chunks, fill false
    /// (present), keyed with the mask bit in the partitioning byte.
    fn mask_of(layer: &Variable) -> Variable {
        Variable {
            name: format!("{} (missing-value mask)", layer.name),
            dtype: DType::Bool,
            fill: [0; 8],
            no_value: None,
            quant: None,
            codec: Codec::deflate(1).with_shuffle(false),
            layer_id: layer.layer_id | u16::from(MASK_LAYER),
            ..layer.clone()
        }
    }

    /// The layer a key's level-of-detail and partitioning bytes name: a
    /// data layer, or with the mask bit the mask of one.
    pub(crate) fn stored_layer(&self, lod: u8, part: u8) -> Option<&Variable> {
        if part & MASK_LAYER == 0 {
            return self.layer(lod, part);
        }
        let part = part & !MASK_LAYER;
        if lod >= self.lods || usize::from(part) >= self.parts.len() {
            return None;
        }
        self.masks.get(usize::from(lod) * self.parts.len() + usize::from(part))
    }

    /// The stored layer `lod`, `part`, if it exists.
    pub(crate) fn layer(&self, lod: u8, part: u8) -> Option<&Variable> {
        if lod >= self.lods || usize::from(part) >= self.parts.len() {
            return None;
        }
        self.layers.get(usize::from(lod) * self.parts.len() + usize::from(part))
    }
}

impl Variable {
    /// The variable's name, unique in its dataset.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The unit, possibly empty.
    pub fn unit(&self) -> &str {
        &self.unit
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Indices into the dataset's axes, slowest-varying first (SPEC.md section 2).
    pub fn axes(&self) -> &[usize] {
        &self.axes
    }
    /// The extent along each of the variable's axes.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// The chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk
    }
    /// The number of chunks along each axis.
    pub fn chunk_grid(&self) -> &[u64] {
        &self.grid
    }
    /// The value read where nothing was written.
    pub fn fill_value(&self) -> Scalar {
        Scalar::from_element(self.dtype, &self.fill)
    }
    /// The codec new chunks are written with.
    pub fn codec(&self) -> Codec {
        self.codec
    }
    /// The number of levels of detail (1: level 0 only).
    pub fn levels_of_detail(&self) -> u8 {
        self.lods
    }
    /// The positions (among the variable's axes) that levels of detail halve.
    pub fn lod_axes(&self) -> Vec<usize> {
        self.lod_axes.iter().enumerate().filter(|(_, &h)| h).map(|(i, _)| i).collect()
    }
    /// How levels of detail are computed.
    pub fn lod_method(&self) -> LodMethod {
        self.lod_method
    }
    /// The shape at level of detail `lod`: each halved axis has
    /// ceil(n / 2^lod) samples. `None` beyond the last level.
    pub fn lod_shape(&self, lod: u8) -> Option<Vec<u64>> {
        self.layer(lod, 0).map(|l| l.shape.clone())
    }
    /// The value that marks a missing sample, if the variable declares one.
    pub fn no_value(&self) -> Option<Scalar> {
        self.no_value.map(|b| Scalar::from_element(self.dtype, &b))
    }
    /// The samples each brick of the first partitioning carries before and
    /// after its own box along every axis (`[0, 0]`: none).
    pub fn margin(&self) -> [u64; 2] {
        self.margin
    }
    /// The shape of a stored chunk of the first partitioning: the chunk
    /// shape plus both margins.
    pub(crate) fn stored_chunk(&self) -> Vec<u64> {
        self.chunk.iter().map(|&c| c + self.margin[0] + self.margin[1]).collect()
    }
    /// Whether the variable keeps a missing-value bitmask.
    pub fn has_mask(&self) -> bool {
        !self.masks.is_empty()
    }
    /// How the values are stored as integers, if they are quantized.
    pub fn quantization(&self) -> Option<Quantization> {
        self.quant
    }
    /// The chunk shape of every partitioning; the first is [`Variable::chunk_shape`].
    pub fn partitionings(&self) -> &[Vec<u64>] {
        &self.parts
    }
    /// The name of a layer in the OpenVDS manner: `Dimensions_` and the
    /// dimensions the partitioning's chunks extend along (OpenVDS numbers
    /// dimensions fastest first, so the variable's last axis is 0), then
    /// `LOD` and the level, e.g. `Dimensions_012LOD0` for bricks and
    /// `Dimensions_01LOD0` for tiles across the two fastest axes. A
    /// partitioning that extends along the same dimensions as an earlier one
    /// gets `_P` and its number appended (`Dimensions_012LOD0_P2`), so that
    /// no two layers of a variable share a name. `prefix` is prepended (the
    /// channel name, for channels other than the first).
    pub fn layer_name(&self, lod: u8, partitioning: u8, prefix: &str) -> Option<String> {
        self.layer(lod, partitioning)?;
        let dims = self.extended_dims(usize::from(partitioning));
        let repeated = (0..usize::from(partitioning)).any(|q| self.extended_dims(q) == dims);
        let suffix = if repeated { format!("_P{partitioning}") } else { String::new() };
        Some(format!("{prefix}Dimensions_{dims}LOD{lod}{suffix}"))
    }
    /// The dimensions (OpenVDS numbering, ascending) along which the chunks
    /// of partitioning `part` extend beyond one sample; an axis of extent 1
    /// counts as extended.
    fn extended_dims(&self, part: usize) -> String {
        let chunk = &self.parts[part];
        let n = chunk.len();
        let mut dims: Vec<usize> = (0..n).filter(|&k| chunk[k] > 1 || self.shape[k] == 1).map(|k| n - 1 - k).collect();
        dims.sort_unstable();
        dims.iter().map(|d| d.to_string()).collect()
    }
    /// Bytes of one element in memory.
    pub(crate) fn esize(&self) -> usize {
        self.dtype.size()
    }
}

/// The first name of `names` that an earlier one equals, found with a set
/// (a name list may be 65535 long: comparing each name with every earlier
/// one made opening quadratic).
pub(crate) fn first_repeated<T: Eq + std::hash::Hash + Copy>(names: impl IntoIterator<Item = T>) -> Option<T> {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().find(|&n| !seen.insert(n))
}

/// Checks a name used for an axis, variable or attribute: non-empty, at most 255 bytes, no control characters.
pub(crate) fn check_name(what: &str, name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
        return Err(format!("{what} name {name:?} must be 1 to 255 bytes without control characters"));
    }
    Ok(())
}

/// Checks an external-file slot name: a relative path inside the container's
/// directory (no absolute path, no `..`, no empty or `.` components, no
/// backslash or colon).
pub(crate) fn check_slot_name(name: &str) -> std::result::Result<(), String> {
    check_name("slot", name)?;
    if name.starts_with('/') || name.contains('\\') || name.contains(':') {
        return Err(format!("slot name {name:?} must be a relative path without '\\' or ':'"));
    }
    if name.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!("slot name {name:?} must not contain empty, '.' or '..' components"));
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
        // which is a function of the bytes alone. Only results of a few
        // layers are kept (a short descriptor can declare many levels and
        // partitionings, each a variable in memory), and a hit is copied
        // after the lock is released. The parse cost is kept too: a smaller
        // limit than the one the bytes were first parsed under still counts.
        const KEEP: usize = 4;
        const KEEP_BYTES: usize = 16 << 10;
        const KEEP_LAYERS: usize = 64;
        type Recent = Vec<(Vec<u8>, u64, std::sync::Arc<Parsed>)>;
        static RECENT: std::sync::Mutex<Recent> = std::sync::Mutex::new(Vec::new());
        let keep = bytes.len() <= KEEP_BYTES;
        if keep {
            let hit = RECENT.lock().ok().and_then(|r| r.iter().find(|(b, _, _)| b == bytes).map(|(_, c, p)| (*c, p.clone())));
            if let Some((cost, parsed)) = hit {
                check_parse_cost(cost, bytes.len(), memory_limit)?;
                return Ok((*parsed).clone());
            }
        }
        let (parsed, cost) = DescriptorJson::parse_costed(bytes, memory_limit)?;
        if keep && parsed.2.iter().map(|v| 1 + v.layers.len()).sum::<usize>() <= KEEP_LAYERS {
            let kept = std::sync::Arc::new(parsed.clone());
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
        Ok(((d, axes, vars, read_only), cost))
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
                return Err(format!("axis {:?} has {} samples", a.name, a.samples).into());
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
            let margin = v.margin.unwrap_or([0, 0]);
            if margin.iter().any(|&m| m > MAX_MARGIN) {
                return Err(format!("variable {:?}: margin {margin:?} exceeds {MAX_MARGIN} samples", v.name).into());
            }
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
    pub(crate) fn check_writable(&self, memory_limit: u64) -> std::result::Result<Vec<u8>, String> {
        let bytes = self.to_bytes();
        if bytes.len() as u64 > MAX_DESCRIPTOR_BYTES {
            return Err(format!("the descriptor would be {} bytes, more than the limit of {MAX_DESCRIPTOR_BYTES}", bytes.len()));
        }
        DescriptorJson::read_text(&bytes, memory_limit).map_err(|e| format!("the descriptor would not read back: {}", e.message()))?;
        Ok(bytes)
    }

    /// The descriptor as one line of compact JSON (no newline inside).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain maps, strings and numbers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_line_round_trip() {
        let line = version_line();
        assert_eq!(line, "VDS 1.4\n");
        assert_eq!(parse_version_line(line.trim_end().as_bytes()).unwrap(), (1, FORMAT_MINOR));
        assert_eq!(parse_version_line(b"VDS 1.7").unwrap(), (1, 7));
        assert_eq!(parse_version_line(b"VDS 2.0").unwrap_err().kind(), ErrorKind::UnsupportedVersion);
        assert_eq!(parse_version_line(b"HDF 1.0").unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(parse_version_line(b"VDS 1.").unwrap_err().kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn scalars_fit_or_fail() {
        assert_eq!(Scalar::Int(-1).to_element(DType::Int8).unwrap()[0], 0xff);
        assert!(Scalar::Int(-1).to_element(DType::UInt8).is_err());
        assert!(Scalar::Int(300).to_element(DType::Int8).is_err());
        assert!(Scalar::Float(0.5).to_element(DType::Int32).is_err());
        assert!(Scalar::Float(0.1).to_element(DType::Float32).is_err());
        assert!(Scalar::Float(f64::NAN).to_element(DType::Float32).is_ok());
        assert!(Scalar::Int((1 << 53) + 1).to_element(DType::Float64).is_err());
        assert!(Scalar::Int(1 << 53).to_element(DType::Float64).is_ok());
        assert!(Scalar::UInt((1 << 24) + 1).to_element(DType::Float32).is_err());
        assert_eq!(Scalar::UInt(u64::MAX).to_element(DType::UInt64).unwrap(), [0xff; 8]);
        let e = Scalar::Float(-0.25).to_element(DType::Float64).unwrap();
        assert_eq!(Scalar::from_element(DType::Float64, &e), Scalar::Float(-0.25));
        for s in [Scalar::Float(f64::NAN), Scalar::Float(f64::INFINITY), Scalar::Float(f64::NEG_INFINITY)] {
            let back = Scalar::from_json(&s.to_json()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{s:?}"));
        }
    }

    /// Parsing is remembered for the last few descriptors: what comes back
    /// is what parsing those bytes gives, however the calls interleave.
    #[test]
    fn remembered_descriptors_parse_as_their_bytes() {
        let desc = |n: u64| {
            format!(
                r#"{{"format":"vds","version":[1,2],"features":{{"compat":[],"ro_compat":[],"incompat":[]}},"axes":[{{"name":"x","unit":"","samples":{n},"first":0.0,"last":1.0}}],"variables":[{{"name":"v","unit":"","dtype":"int64","axes":["x"],"chunk":[1],"fill":0,"codec":{{"id":"none","shuffle":false}},"attributes":{{}}}}],"slots":[],"attributes":{{"n":{n}}}}}"#
            )
        };
        let shown = |p: &Parsed| format!("{:?} {:?} {:?} {}", p.0, p.1, p.2, p.3);
        for round in 0..3 {
            for n in (2..9).chain([3, 2, 8]) {
                let bytes = desc(n).into_bytes();
                let parsed = DescriptorJson::parse(&bytes, u64::MAX).unwrap();
                assert_eq!(parsed.1[0].samples, n, "round {round}");
                assert_eq!(shown(&parsed), shown(&DescriptorJson::parse_uncached(&bytes, u64::MAX).unwrap()));
            }
        }
        // Damage to a remembered descriptor is seen: the bytes differ.
        let mut bad = desc(3).into_bytes();
        let at = bad.len() - 3;
        bad[at] = b'x';
        assert_eq!(DescriptorJson::parse(&bad, u64::MAX).unwrap_err().kind(), ErrorKind::Corrupt);
    }

    /// A name that counts how often it is compared for equality.
    #[derive(Clone, Copy)]
    struct Counted<'a>(u32, &'a std::cell::Cell<u64>);
    impl std::hash::Hash for Counted<'_> {
        fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
            self.0.hash(h);
        }
    }
    impl PartialEq for Counted<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.1.set(self.1.get() + 1);
            self.0 == other.0
        }
    }
    impl Eq for Counted<'_> {}

    /// Uniqueness of 65535 names takes about one comparison per name, not
    /// one per pair (2 * 10^9 when each name was compared with every earlier one).
    #[test]
    fn repeated_names_are_found_with_linear_work() {
        let compared = std::cell::Cell::new(0);
        let names: Vec<Counted<'_>> = (0..65_535).map(|i| Counted(i, &compared)).collect();
        assert!(first_repeated(names.iter().copied()).is_none());
        assert!(compared.get() <= 65_535, "{} comparisons for 65535 names", compared.get());
        let again = names.iter().copied().chain([Counted(40_000, &compared)]);
        assert_eq!(first_repeated(again).map(|c| c.0), Some(40_000));
    }

    fn descriptor_with(variables: &[String], slots: &[String]) -> Vec<u8> {
        format!(
            r#"{{"format":"vds","version":[1,3],"axes":[{{"name":"x","samples":3,"first":0,"last":2}}],"variables":[{}],"slots":[{}]}}"#,
            variables.join(","),
            slots.join(",")
        )
        .into_bytes()
    }

    fn variable(name: &str) -> String {
        format!(r#"{{"name":"{name}","dtype":"int8","axes":["x"],"chunk":[2],"fill":0,"codec":{{"id":"none"}}}}"#)
    }

    /// The largest legal name lists open; one more is refused by its count
    /// before any name is looked at, whatever the names are.
    #[test]
    fn name_counts_are_checked_before_names() {
        let slots: Vec<String> = (0..65_535).map(|i| format!(r#"{{"name":"s{i}"}}"#)).collect();
        let (_, _, vars, _) = DescriptorJson::parse_uncached(&descriptor_with(&[variable("v")], &slots), u64::MAX).unwrap();
        assert_eq!(vars.len(), 1);
        let names: Vec<String> = (0..65_535).map(|i| variable(&format!("v{i}"))).collect();
        let (_, _, vars, _) = DescriptorJson::parse_uncached(&descriptor_with(&names, &[]), u64::MAX).unwrap();
        assert_eq!(vars.len(), 65_535);

        let same = vec![r#"{"name":"s"}"#.to_string(); 65_536];
        let e = DescriptorJson::parse_uncached(&descriptor_with(&[variable("v")], &same), u64::MAX).unwrap_err();
        assert!(e.message().contains("at most 65535 external-file slots, found 65536"), "{e}");
        let same = vec![variable("v"); 65_536];
        let e = DescriptorJson::parse_uncached(&descriptor_with(&same, &[]), u64::MAX).unwrap_err();
        assert!(e.message().contains("1 to 65535 variables, found 65536"), "{e}");
    }

    #[test]
    fn slot_names_are_confined() {
        for bad in ["/etc/passwd", "../x", "a/../../b", "a//b", "./a", "c:\\x", "a\\b", ""] {
            assert!(check_slot_name(bad).is_err(), "{bad}");
        }
        for good in ["data.vdx", "sub/dir/data.1"] {
            assert!(check_slot_name(good).is_ok(), "{good}");
        }
    }
}
