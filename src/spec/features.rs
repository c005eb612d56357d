//! Feature flags (SPEC.md 3.4): the names this library knows, the list each
//! belongs in, and the rule that a file lists every feature it uses.
//!
//! A file that uses a feature without listing it would be misread, or
//! damaged, by a reader or writer that does not know the feature, without
//! any warning; so would one that lists a known name in a weaker list. Both
//! are refused as invalid descriptors.

use super::codec::{ANCHORED, GRADED, INTERPOLATION};
use super::{DescriptorJson, FeaturesJson, VariableJson};

/// A variable's codec is zstd (incompatible: a reader that does not know it
/// cannot decode the chunks; format 1.3).
pub(crate) const FEATURE_ZSTD: &str = "zstd";
/// A variable keeps a missing-value bitmask (read-only compatible: a writer
/// that does not know it would leave the mask stale).
pub(crate) const FEATURE_MASK: &str = "missing_mask";
/// Bricks carry margins (incompatible: a reader that does not know them
/// would misplace every sample).
pub(crate) const FEATURE_MARGINS: &str = "margins";
/// A variable declares a no-value marker (compatible: to a reader that does
/// not know it, the marker is an ordinary value).
pub(crate) const FEATURE_NO_VALUE: &str = "no_value";
/// A variable's chunks hold quantized integers (incompatible: a reader that
/// does not know it would misread them).
pub(crate) const FEATURE_QUANTIZATION: &str = "quantization";
/// Stored entries record the XXH64 of their bytes (compatible: a reader
/// that does not know it ignores the field, as 1.0 readers do).
pub(crate) const FEATURE_CHUNK_HASHES: &str = "chunk_hashes";
/// A variable has levels of detail (read-only compatible: a reader that does
/// not know them reads level 0, but must not write, or the levels go stale).
pub(crate) const FEATURE_LOD: &str = "levels_of_detail";
/// A variable is stored in more than one partitioning (read-only
/// compatible, for the same reason).
pub(crate) const FEATURE_PARTITIONINGS: &str = "partitionings";

/// A variable's chunks are made of independently encoded blocks
/// (incompatible: a reader that does not know them cannot decode the
/// chunks; format 1.5).
pub(crate) const FEATURE_BLOCKS: &str = "blocks";
/// A variable's codec is the error-bounded one (incompatible: a reader
/// that does not know it cannot decode the chunks; format 1.5).
pub(crate) const FEATURE_BOUNDED: &str = "bounded_codec";

/// A variable's bounded codec predicts by interpolation (incompatible: a
/// reader that does not know it cannot decode its chunks; format 1.6).
pub(crate) const FEATURE_BOUNDED_INTERPOLATION: &str = "bounded_interpolation";

/// A variable's bounded codec predicts by anchored interpolation
/// (incompatible: a reader that does not know it cannot decode its chunks;
/// format 1.7).
pub(crate) const FEATURE_BOUNDED_ANCHORED: &str = "bounded_anchored";

/// A variable's bounded codec predicts by anchored interpolation with
/// graded steps (incompatible: a reader that does not know it cannot decode
/// its chunks; format 1.8).
pub(crate) const FEATURE_BOUNDED_GRADED: &str = "bounded_graded";

/// The container has the compact layout: a head not padded to 4 KiB and
/// 128-byte commit slots (incompatible: a reader that does not know it
/// would look for the slots in the wrong place; format 1.4). Listed
/// exactly when the head length is not a multiple of 4096.
pub(crate) const FEATURE_COMPACT: &str = "compact_layout";

/// Feature names this build knows (SPEC.md section 3.4).
/// `zstd` only in builds with the cargo feature of that name.
pub(crate) const KNOWN_FEATURES: &[&str] = &[
    FEATURE_LOD,
    FEATURE_PARTITIONINGS,
    FEATURE_CHUNK_HASHES,
    FEATURE_NO_VALUE,
    FEATURE_QUANTIZATION,
    FEATURE_MASK,
    FEATURE_MARGINS,
    FEATURE_COMPACT,
    FEATURE_BLOCKS,
    #[cfg(feature = "zstd")]
    FEATURE_ZSTD,
    #[cfg(feature = "zstd")]
    FEATURE_BOUNDED,
    #[cfg(feature = "zstd")]
    FEATURE_BOUNDED_INTERPOLATION,
    #[cfg(feature = "zstd")]
    FEATURE_BOUNDED_ANCHORED,
    #[cfg(feature = "zstd")]
    FEATURE_BOUNDED_GRADED,
];

/// The three lists of `features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Compat,
    RoCompat,
    Incompat,
}

impl List {
    fn name(self) -> &'static str {
        match self {
            List::Compat => "compat",
            List::RoCompat => "ro_compat",
            List::Incompat => "incompat",
        }
    }
}

/// Whether a variable uses a feature.
type Uses = fn(&VariableJson) -> bool;

/// Every feature the format defines (in every build), with its list and
/// what uses it.
const DEFINED: [(&str, List, Uses); 12] = [
    (FEATURE_NO_VALUE, List::Compat, |v| v.no_value.is_some()),
    (FEATURE_LOD, List::RoCompat, |v| v.lod.is_some()),
    (FEATURE_PARTITIONINGS, List::RoCompat, |v| !v.partitionings.is_empty()),
    (FEATURE_MASK, List::RoCompat, |v| v.mask),
    (FEATURE_QUANTIZATION, List::Incompat, |v| v.quantization.is_some()),
    (FEATURE_MARGINS, List::Incompat, |v| v.margin.is_some_and(|m| m != [0, 0])),
    (FEATURE_ZSTD, List::Incompat, |v| v.codec.id == "zstd"),
    (FEATURE_BLOCKS, List::Incompat, |v| v.blocks.is_some()),
    (FEATURE_BOUNDED, List::Incompat, |v| v.codec.id == "bounded"),
    (FEATURE_BOUNDED_INTERPOLATION, List::Incompat, |v| v.codec.id == "bounded" && v.codec.predictor.as_deref() == Some(INTERPOLATION)),
    (FEATURE_BOUNDED_ANCHORED, List::Incompat, |v| v.codec.id == "bounded" && v.codec.predictor.as_deref() == Some(ANCHORED)),
    (FEATURE_BOUNDED_GRADED, List::Incompat, |v| v.codec.id == "bounded" && v.codec.predictor.as_deref() == Some(GRADED)),
];

/// The features a new descriptor with these variables lists: those its
/// variables use, each in its own list, and `chunk_hashes` (every entry
/// this library writes records the XXH64 of its bytes).
pub(crate) fn used_by(variables: &[VariableJson]) -> FeaturesJson {
    let mut f = FeaturesJson { compat: vec![FEATURE_CHUNK_HASHES.into()], ..FeaturesJson::default() };
    for &(name, list, uses) in &DEFINED {
        if variables.iter().any(uses) {
            match list {
                List::Compat => f.compat.push(name.into()),
                List::RoCompat => f.ro_compat.push(name.into()),
                List::Incompat => f.incompat.push(name.into()),
            }
        }
    }
    f
}

/// Checks that every feature name the format defines appears only in its
/// own list, and that every feature a variable uses is listed. Linear in
/// the descriptor: each listed name is compared with the few defined ones.
pub(crate) fn check_listed(d: &DescriptorJson) -> Result<(), String> {
    let f = &d.features;
    let lists = [(List::Compat, &f.compat), (List::RoCompat, &f.ro_compat), (List::Incompat, &f.incompat)];
    // `chunk_hashes` is used by index entries and `compact_layout` by the
    // head, not by the descriptor.
    let defined = DEFINED
        .iter()
        .map(|&(name, list, _)| (name, list))
        .chain([(FEATURE_CHUNK_HASHES, List::Compat), (FEATURE_COMPACT, List::Incompat)]);
    let mut listed = [false; DEFINED.len()];
    for (name, own) in defined {
        for (list, names) in lists {
            if names.iter().any(|n| n == name) {
                if list != own {
                    return Err(format!("feature {name:?} is listed in \"{}\"; it belongs in \"{}\"", list.name(), own.name()));
                }
                if let Some(k) = DEFINED.iter().position(|&(n, _, _)| n == name) {
                    listed[k] = true;
                }
            }
        }
    }
    for v in &d.variables {
        for (k, &(name, list, uses)) in DEFINED.iter().enumerate() {
            if !listed[k] && uses(v) {
                return Err(format!(
                    "variable {:?} uses the feature {name:?}, which \"features\".\"{}\" does not list",
                    v.name,
                    list.name()
                ));
            }
        }
    }
    Ok(())
}
