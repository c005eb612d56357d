//! Codecs as the descriptor names them (SPEC.md 3.1, 6.3 and 6.6): compression
//! and shuffle, and their JSON form.

use super::descriptor::descriptor_error;
use super::null_is_default;
use crate::error::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The compression stage of a variable's codec.
#[derive(Debug, Clone, Copy)]
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
    /// Lossy with a guaranteed bound, for float32 and float64 variables
    /// (SPEC.md 6.6; format 1.5, and only in builds with the cargo feature
    /// `zstd`): every value read back is within `tolerance` of the value
    /// written; NaNs, infinities, the fill value and the no-value marker
    /// come back bit for bit. A chunk the codec cannot store within the
    /// bound, or not smaller, is stored losslessly (zstd).
    Bounded {
        /// The absolute error bound, finite, in (0, 1e300].
        tolerance: f64,
        /// zstd level of the codes, 1..=22.
        level: u8,
        /// How values are predicted before they are quantized.
        predictor: Predictor,
    },
}

/// The predictor of a [`Compression::Bounded`] variable, fixed for its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Predictor {
    /// The 3-D Lorenzo predictor of format 1.5 (SPEC.md 6.6.1), which 1.5
    /// readers decode; it stores seismic and smooth volumes larger than
    /// interpolation does.
    Lorenzo,
    /// Interpolation from a coarser grid of multiples of a power of two
    /// (SPEC.md 6.6.2; format 1.6, feature `bounded_interpolation`), which
    /// 1.6 readers decode.
    Interpolation,
    /// Interpolation from a coarser grid that also holds the last sample of
    /// every axis (SPEC.md 6.6.3; format 1.7, feature `bounded_anchored`),
    /// which 1.7 readers decode: no sample is predicted by a copy of its
    /// neighbour at the far end of a chunk, which on smooth data shrinks a
    /// chunk several times over.
    Anchored,
    /// Anchored interpolation whose coarser levels may be quantized with
    /// finer steps, chosen per chunk (SPEC.md 6.6.4; format 1.8, feature
    /// `bounded_graded`), as [`Codec::bounded`] makes: the finer levels
    /// inherit the coarser ones' errors through interpolation, and on
    /// smooth data at tight tolerances this halves a chunk.
    Graded,
}

/// Compressions are equal when their fields are (a tolerance by its bits,
/// so equality is an equivalence).
impl PartialEq for Compression {
    fn eq(&self, other: &Compression) -> bool {
        match (*self, *other) {
            (Compression::None, Compression::None) => true,
            (Compression::Deflate { level: a }, Compression::Deflate { level: b }) => a == b,
            (Compression::Zstd { level: a }, Compression::Zstd { level: b }) => a == b,
            (
                Compression::Bounded { tolerance: a, level: la, predictor: ia },
                Compression::Bounded { tolerance: b, level: lb, predictor: ib },
            ) => a.to_bits() == b.to_bits() && la == lb && ia == ib,
            _ => false,
        }
    }
}

impl Eq for Compression {}

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

    /// Lossy with every value within `tolerance` of the value written (see
    /// [`Compression::Bounded`]), values predicted by graded anchored
    /// interpolation ([`Predictor::Graded`]), codes compressed by zstd level 3. Creating
    /// a variable with it fails with [`ErrorKind::InvalidArgument`] unless the
    /// variable is float32 or float64 (and not quantized) and the tolerance is
    /// in (0, 1e300], and with [`ErrorKind::UnsupportedFeature`] in a build
    /// without the cargo feature `zstd`.
    pub fn bounded(tolerance: f64) -> Codec {
        Codec::bounded_with(tolerance, Predictor::Graded)
    }

    /// [`Codec::bounded`] with another predictor: [`Predictor::Anchored`],
    /// [`Predictor::Interpolation`] or [`Predictor::Lorenzo`] for files that
    /// 1.7, 1.6 or 1.5 readers must decode.
    pub fn bounded_with(tolerance: f64, predictor: Predictor) -> Codec {
        Codec { compression: Compression::Bounded { tolerance, level: 3, predictor }, shuffle: false }
    }

    /// [`Codec::bounded`] with a relative tolerance: `fraction` of the width
    /// of the value range `[min, max]` (as OpenVDS's tolerance is), resolved
    /// to the absolute bound the file stores. A range of width 0 (or not
    /// finite) gives a tolerance that creating the variable refuses.
    pub fn bounded_relative(fraction: f64, min: f64, max: f64) -> Codec {
        Codec::bounded(fraction * (max - min))
    }

    /// The same codec with the shuffle set to `on`.
    #[must_use]
    pub fn with_shuffle(self, on: bool) -> Codec {
        Codec { shuffle: on, ..self }
    }
}

/// The descriptor's name of the interpolation predictor of codec "bounded".
pub(crate) const INTERPOLATION: &str = "interpolation";
/// The descriptor's name of its anchored interpolation predictor.
pub(crate) const ANCHORED: &str = "anchored";
/// The descriptor's name of its graded anchored interpolation predictor.
pub(crate) const GRADED: &str = "graded";

impl Predictor {
    /// The descriptor's name (none for Lorenzo, which 1.5 wrote without one).
    pub(crate) fn name(self) -> Option<&'static str> {
        match self {
            Predictor::Lorenzo => None,
            Predictor::Interpolation => Some(INTERPOLATION),
            Predictor::Anchored => Some(ANCHORED),
            Predictor::Graded => Some(GRADED),
        }
    }
}

/// Codec as it appears in the descriptor: `{"id":"deflate","level":6,"shuffle":true}`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct CodecJson {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub shuffle: bool,
    /// The absolute error bound of codec "bounded" (format 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// The predictor of codec "bounded": "graded" (format 1.8), "anchored" (format 1.7),
    /// "interpolation" (format 1.6) or, when absent, Lorenzo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictor: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CodecJson {
    pub(crate) fn from_codec(c: Codec) -> CodecJson {
        let (id, level, tolerance, predictor) = match c.compression {
            Compression::None => ("none", None, None, None),
            Compression::Deflate { level } => ("deflate", Some(level), None, None),
            Compression::Zstd { level } => ("zstd", Some(level), None, None),
            Compression::Bounded { tolerance, level, predictor } => {
                ("bounded", Some(level), Some(tolerance), predictor.name().map(str::to_string))
            }
        };
        let shuffle = c.shuffle && tolerance.is_none();
        CodecJson { id: id.into(), level, shuffle, tolerance, predictor, extra: Map::new() }
    }

    pub(crate) fn to_codec(&self, var: &str) -> Result<Codec> {
        if self.tolerance.is_some() && self.id != "bounded" {
            return Err(descriptor_error(format!("variable {var:?}: codec {:?} takes no \"tolerance\"", self.id)));
        }
        let predictor = match self.predictor.as_deref() {
            Some(p) if self.id != "bounded" => {
                return Err(descriptor_error(format!("variable {var:?}: codec {:?} takes no \"predictor\" (found {p:?})", self.id)))
            }
            None => Predictor::Lorenzo,
            Some(INTERPOLATION) => Predictor::Interpolation,
            Some(ANCHORED) => Predictor::Anchored,
            Some(GRADED) => Predictor::Graded,
            Some(other) => {
                return Err(descriptor_error(format!(
                    "variable {var:?}: codec \"bounded\" has predictor {other:?} (expected \"{GRADED}\", \"{ANCHORED}\", \"{INTERPOLATION}\" or none)"
                )))
            }
        };
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
            ("bounded", _) if !cfg!(feature = "zstd") => {
                return Err(Error::new(
                    ErrorKind::UnsupportedFeature,
                    format!("variable {var:?}: codec \"bounded\", and this build of libvds has no zstd (cargo feature \"zstd\")"),
                ))
            }
            ("bounded", Some(level)) if Compression::ZSTD_LEVELS.contains(&level) && !self.shuffle => match self.tolerance {
                Some(tolerance) if tolerance > 0.0 && tolerance <= 1e300 => Compression::Bounded { tolerance, level, predictor },
                other => {
                    return Err(descriptor_error(format!(
                        "variable {var:?}: codec \"bounded\" needs \"tolerance\" in (0, 1e300], found {other:?}"
                    )))
                }
            },
            ("bounded", other) => {
                return Err(descriptor_error(format!(
                    "variable {var:?}: codec \"bounded\" needs \"level\" 1..=22 and no shuffle, found level {other:?}"
                )))
            }
            (id, _) => return Err(Error::new(ErrorKind::UnsupportedFeature, format!("variable {var:?}: unknown codec {id:?}"))),
        };
        Ok(Codec { compression, shuffle: self.shuffle })
    }
}
