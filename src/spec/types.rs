//! Data types and single values: the element types of SPEC.md 3.2, and
//! fill and constant values as JSON and as little-endian elements (3.3).

use crate::error::{invalid, Error, ErrorKind, Result};
use serde_json::Value;

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
