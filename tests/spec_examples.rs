//! The worked examples of SPEC.md are what the library writes: the example
//! descriptor (3.6) byte for byte with its length and CRC32, and the
//! creating commit slot of section 4 byte for byte. SPEC.md is read at test
//! time, so the document and the code cannot drift apart.

mod common;
use common::*;
use vds::serde_json::json;
use vds::{Axis, Codec, DType, DatasetBuilder, VariableBuilder};

fn spec() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SPEC.md")).unwrap()
}

/// The first fenced block after `marker` in SPEC.md.
fn block_after(spec: &str, marker: &str) -> String {
    let at = spec.find(marker).unwrap_or_else(|| panic!("SPEC.md lost {marker:?}"));
    let rest = &spec[at..];
    let start = rest.find("```\n").unwrap() + 4;
    let end = start + rest[start..].find("```").unwrap();
    rest[start..end].to_string()
}

#[test]
fn the_example_descriptor_and_its_first_commit_slot_are_what_the_library_writes() {
    let dir = Scratch::new("spec");
    let path = dir.path("example.vds");
    DatasetBuilder::new()
        .axis(Axis::new("inline", 200).coordinates(1000.0, 1199.0))
        .axis(Axis::new("crossline", 150).coordinates(2000.0, 2149.0))
        .axis(Axis::new("depth", 500).unit("m").coordinates(0.0, 1996.0))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "depth"])
                .chunk(&[64, 64, 64])
                .fill(f32::NAN)
                .codec(Codec::deflate(6))
                .attribute("scale", 0.5),
        )
        .variable(VariableBuilder::new("mask", DType::Bool, &["inline", "crossline"]).chunk(&[128, 128]).fill(false))
        .external_slot("survey.vdx")
        .attribute("survey", "North Sea")
        .attribute("crs", json!("EPSG:23031"))
        .create(&path)
        .unwrap()
        .close()
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let spec = spec();

    let want = block_after(&spec, "### 3.6 Example");
    let want = want.trim_end();
    let h = head_len(&bytes);
    let line2 = std::str::from_utf8(&bytes[8..h - 1]).unwrap().trim_end();
    // The slot's id is random (SPEC.md 8.1): the file's header holds the same
    // one, and the example shows another; everything else is byte for byte.
    let slot_file = std::fs::read(dir.path("survey.vdx")).unwrap();
    assert_eq!((slot_file.len(), &slot_file[..8]), (32, &b"VDSXSLOT"[..]));
    let id = format!("{:016x}", u64::from_le_bytes(slot_file[8..16].try_into().unwrap()));
    let example_id = want.split("\"slots\"").nth(1).unwrap().split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap();
    assert!(line2.contains(&format!("\"id\":\"{id}\"")), "{line2}");
    assert_eq!(line2.replace(&id, example_id), want, "SPEC.md 3.6 shows a different descriptor than the library writes");
    let stated = format!("({} bytes, CRC32 0x{:08X})", want.len(), crc32(want.as_bytes()));
    assert!(
        spec.replace('\n', " ").contains(&format!("one line, {} bytes, CRC32 0x{:08X}", want.len(), crc32(want.as_bytes()))),
        "SPEC.md 3.6 must state {stated}"
    );
    assert_eq!(h, 4096);
    assert_eq!(bytes.len(), 4096 + 1024);

    // The hex dump of section 4: rows of 16 bytes; " ..." rows stand for zeros.
    let dump = block_after(&spec, "**Worked example.** The creating commit");
    let mut expected = vec![0u8; 512];
    for line in dump.lines().filter(|l| !l.trim_start().starts_with("...")) {
        let (off, hex) = line.split_once(':').unwrap();
        let off = usize::from_str_radix(off.trim(), 16).unwrap();
        for (i, b) in hex.split_whitespace().enumerate() {
            expected[off + i] = u8::from_str_radix(b, 16).unwrap();
        }
    }
    // Bytes 56..60 (the descriptor's CRC32) and 508..512 (the slot's) depend on the slot id.
    let mut written = bytes[4608..5120].to_vec();
    assert_eq!(u32::from_le_bytes(written[56..60].try_into().unwrap()), crc32(line2.as_bytes()));
    written[56..60].copy_from_slice(&expected[56..60]);
    written[508..512].copy_from_slice(&expected[508..512]);
    assert_eq!(&written[..], &expected[..], "SPEC.md section 4's slot dump differs from commit 1 as written");
    assert_eq!(u32::from_le_bytes(expected[508..512].try_into().unwrap()), crc32(&expected[..508]), "the dump's own slot CRC32");
    assert!(bytes[4096..4608].iter().all(|&b| b == 0), "slot 0 of a new file is zeros");
}
