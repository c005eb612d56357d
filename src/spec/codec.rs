//! Codecs as the descriptor names them (SPEC.md 3.1 and 6.3): compression
//! and shuffle, and their JSON form.

use super::descriptor::descriptor_error;
use super::null_is_default;
use crate::error::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
