//! The format as data, with no I/O: the version line, the limits, and name
//! rules here; data types, fill values, codecs, the descriptor with its
//! validation, and the variables it describes in the modules below.
//!
//! Each descriptor type follows SPEC.md section 3 field by field. Parsing
//! validates everything a later step relies on (shapes, sizes, names), so
//! that the rest of the library can index with the numbers it finds here.

use crate::error::{Error, ErrorKind, Result};
use serde::{Deserialize, Deserializer};

mod codec;
mod descriptor;
mod features;
mod json;
mod types;
mod variable;
pub(crate) use codec::CodecJson;
pub use codec::{Codec, Compression, Predictor};
pub(crate) use descriptor::{
    check_size, AxisJson, DescBound, DescriptorJson, FeaturesJson, LodJson, Parsed, PartitioningJson, QuantJson, SlotJson, VariableJson,
};
pub(crate) use features::{
    used_by as features_used_by, FEATURE_BOUNDED, FEATURE_CHUNK_HASHES, FEATURE_COMPACT, FEATURE_ZSTD, KNOWN_FEATURES,
};
pub use types::{DType, Scalar};
pub use variable::{Axis, LodMethod, Quantization, Variable};

/// The first bytes of every container: the magic word and a space.
pub const MAGIC: &[u8] = b"VDS ";
/// The major version this library writes and reads. A file with another major version is refused.
pub const FORMAT_MAJOR: u16 = 1;
/// The minor version this library writes. Files of any minor version of major 1 are read.
pub const FORMAT_MINOR: u16 = 8;
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

/// Reads an optional member whose `null` stands for its absence, as it
/// does for every optional member (SPEC.md 3.1).
pub(super) fn null_is_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> std::result::Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
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

#[cfg(test)]
mod tests {
    use super::descriptor::Parsed;
    use super::*;

    #[test]
    fn version_line_round_trip() {
        let line = version_line();
        assert_eq!(line, "VDS 1.8\n");
        assert_eq!(parse_version_line(line.trim_end().as_bytes()).unwrap(), (1, FORMAT_MINOR));
        assert_eq!(parse_version_line(b"VDS 1.8").unwrap(), (1, 8));
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
