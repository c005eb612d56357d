//! Damage is reported, never returned as data: one flipped byte in a chunk,
//! an index page or the descriptor gives a `Corrupt` error that names the
//! structure and its offset; a torn commit slot falls back to the previous
//! commit; files from newer versions say so instead of failing obscurely.

mod common;
use common::*;
use vds::serde_json::{json, Value};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Layout, Order, Region, VariableBuilder};

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// Offset of the newest commit slot, per SPEC.md section 4.
fn newest_slot(b: &[u8]) -> usize {
    let (h, size) = (head_len(b), slot_size(b));
    if u64_at(b, h + size + 16) > u64_at(b, h + 16) {
        h + size
    } else {
        h
    }
}

fn reseal_slot(b: &mut [u8], slot: usize) {
    let size = slot_size(b);
    let crc = crc32(&b[slot..slot + size - 4]);
    b[slot + size - 4..slot + size].copy_from_slice(&crc.to_le_bytes());
}

/// Edits the descriptor in line 2 and points the newest slot at it, as a writer would.
fn rewrite_descriptor(b: &mut [u8], edit: impl FnOnce(&mut Value)) {
    let h = head_len(b);
    let start = b.iter().position(|&c| c == b'\n').unwrap() + 1;
    let mut desc: Value = vds::serde_json::from_slice(&b[start..h - 1]).unwrap();
    edit(&mut desc);
    let json = vds::serde_json::to_vec(&desc).unwrap();
    b[start..h - 1].fill(b' ');
    b[start..start + json.len()].copy_from_slice(&json);
    let slot = newest_slot(b);
    b[slot + 40..slot + 48].copy_from_slice(&(start as u64).to_le_bytes());
    b[slot + 48..slot + 56].copy_from_slice(&(json.len() as u64).to_le_bytes());
    b[slot + 56..slot + 60].copy_from_slice(&crc32(&json).to_le_bytes());
    reseal_slot(b, slot);
}

const SHAPE: [u64; 2] = [30, 20];

/// A file with one committed, stored (not constant) chunk per 10x10 block,
/// in the aligned layout, whose offsets these tests compute (the compact
/// layout's bytes are each flipped by tests/mutation_sweep.rs).
fn sample(dir: &Scratch, codec: Codec) -> (std::path::PathBuf, Vec<i32>) {
    let path = dir.path("c.vds");
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .layout(Layout::Aligned)
        .axis(Axis::new("x", 30))
        .axis(Axis::new("y", 20))
        .variable(VariableBuilder::new("v", DType::Int32, &["x", "y"]).chunk(&[10, 10]).codec(codec))
        .create(&path)
        .unwrap();
    let values: Vec<i32> = (0..600).map(|i| i * 7 % 101).collect();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &values).unwrap();
    ds.close().unwrap();
    (path, values)
}

fn read_all(path: &std::path::Path) -> vds::Result<Vec<i32>> {
    Dataset::open(path)?.read_vec("v", &Region::full(&SHAPE)?, Order::C)
}

fn flipped(path: &std::path::Path, at: usize) -> vds::Error {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x04;
    let bad = path.with_extension("bad");
    std::fs::write(&bad, &b).unwrap();
    read_all(&bad).unwrap_err()
}

#[test]
fn a_flipped_byte_in_a_chunk_is_reported_with_its_location() {
    let dir = Scratch::new("chunk");
    for codec in [Codec::NONE, Codec::deflate(6)] {
        let (path, values) = sample(&dir, codec);
        assert_eq!(read_all(&path).unwrap(), values);
        let b = std::fs::read(&path).unwrap();
        let body = head_len(&b) + 1024;
        // The first stored chunk is the first thing in the body: chunk (0, 0).
        let e = flipped(&path, body + 17);
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        let loc = e.location().unwrap();
        assert_eq!((loc.slot, loc.offset), (0, body as u64));
        assert!(loc.object.contains("chunk [0, 0]") && loc.object.contains("\"v\""), "{loc:?}");
        assert!(e.to_string().contains("CRC32 mismatch"), "{e}");
    }
}

#[test]
fn a_flipped_byte_in_an_index_page_is_reported_with_its_location() {
    let dir = Scratch::new("page");
    let (path, _) = sample(&dir, Codec::NONE);
    let b = std::fs::read(&path).unwrap();
    let root = u64_at(&b, newest_slot(&b) + 64) as usize;
    assert!(root > 0);
    let e = flipped(&path, root + 100);
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert_eq!(e.location().unwrap().object, "index page");
    assert_eq!(e.location().unwrap().offset, root as u64);
    assert!(e.to_string().starts_with(&format!("corrupt index page at offset {root:#x}")), "{e}");
}

#[test]
fn a_flipped_byte_in_the_descriptor_is_reported_with_its_location() {
    let dir = Scratch::new("desc");
    let (path, _) = sample(&dir, Codec::NONE);
    // Byte 20 is inside the JSON of line 2, which starts after "VDS 1.1\n".
    let e = flipped(&path, 20);
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert_eq!(e.location().unwrap().object, "descriptor");
    assert_eq!(e.location().unwrap().offset, 8);
    assert!(e.to_string().contains("CRC32 mismatch"), "{e}");
}

#[test]
fn a_torn_commit_slot_falls_back_to_the_previous_commit() {
    let dir = Scratch::new("slot");
    let (path, _) = sample(&dir, Codec::NONE);
    let mut b = std::fs::read(&path).unwrap();
    let newest = newest_slot(&b);
    b[newest + 30] ^= 1;
    std::fs::write(&path, &b).unwrap();
    // The previous commit is the empty dataset as created: every value is the fill value 0.
    assert_eq!(read_all(&path).unwrap(), vec![0; 600]);
    let h = head_len(&b);
    let older = if newest == h { h + slot_size(&b) } else { h };
    b[older + 30] ^= 1;
    std::fs::write(&path, &b).unwrap();
    let e = read_all(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("neither slot is intact"), "{e}");
}

#[test]
fn truncated_and_foreign_files_are_refused() {
    let dir = Scratch::new("trunc");
    let (path, _) = sample(&dir, Codec::NONE);
    let b = std::fs::read(&path).unwrap();
    let cut = dir.path("cut.vds");
    std::fs::write(&cut, &b[..b.len() - 100]).unwrap();
    let e = read_all(&cut).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("truncated"), "{e}");
    for (bytes, want) in [
        (&b""[..], "empty"),
        (&b"\x89HDF\r\n\x1a\n\0\0\0\0"[..], "not a libvds container"),
        (&b"VDS 1.0\n{\"format\":\"vds\"}"[..], "no end"),
        (&b[..5000], "commit slots"),
    ] {
        std::fs::write(&cut, bytes).unwrap();
        let e = read_all(&cut).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains(want), "{e:?} should mention {want:?}");
    }
}

#[test]
fn newer_versions_and_unknown_features_are_named() {
    let dir = Scratch::new("version");
    let (path, values) = sample(&dir, Codec::NONE);
    let orig = std::fs::read(&path).unwrap();
    let edited = dir.path("e.vds");
    let check = |b: &[u8], kind: ErrorKind, want: &str| {
        std::fs::write(&edited, b).unwrap();
        let e = read_all(&edited).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(want), "{e:?} should mention {want:?}");
    };
    let mut b = orig.clone();
    b[4] = b'2';
    check(&b, ErrorKind::UnsupportedVersion, &format!("2.{}", vds::FORMAT_MINOR));

    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| d["features"]["incompat"] = json!(["sparse-bricks"]));
    check(&b, ErrorKind::UnsupportedFeature, "sparse-bricks");
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| d["variables"][0]["codec"] = json!({"id": "lz4", "level": 3}));
    check(&b, ErrorKind::UnsupportedFeature, "unknown codec \"lz4\"");
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| {
        d["features"]["incompat"] = json!(["zstd"]);
        d["variables"][0]["codec"] = json!({"id": "zstd", "level": 0});
    });
    check(&b, ErrorKind::Corrupt, "zstd needs \"level\" 1..=22, found Some(0)");
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| d["variables"][0]["dtype"] = json!("complex64"));
    check(&b, ErrorKind::UnsupportedFeature, "complex64");
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| d["variables"][0]["chunk"] = json!([10]));
    check(&b, ErrorKind::Corrupt, "chunk extent for each");

    // An unknown read-only-compatible feature: readable, not writable.
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| {
        d["features"]["ro_compat"] = json!(["chunk-hashes"]);
        d["future_field"] = json!({"kept": true});
    });
    std::fs::write(&edited, &b).unwrap();
    assert_eq!(read_all(&edited).unwrap(), values);
    assert_eq!(Dataset::open_rw(&edited).unwrap_err().kind(), ErrorKind::ReadOnly);

    // Unknown fields survive a rewrite of the descriptor by this library.
    let mut b = orig.clone();
    rewrite_descriptor(&mut b, |d| {
        d["future_field"] = json!({"kept": true});
        d["axes"][0]["future_axis_field"] = json!(1);
    });
    std::fs::write(&edited, &b).unwrap();
    let mut ds = Dataset::open_rw(&edited).unwrap();
    ds.set_attribute("touched", Some(json!(true))).unwrap();
    ds.close().unwrap();
    let text = Dataset::open(&edited).unwrap().descriptor_json();
    assert!(text.contains("\"future_field\":{\"kept\":true}") && text.contains("\"future_axis_field\":1"), "{text}");
}

/// `file` with field `at` of leaf entry 0 of its root page (the only page
/// of a small file) set to `value`, and page and slot re-sealed, as a
/// malicious writer would.
fn with_entry(file: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
    let mut b = file.to_vec();
    let slot = newest_slot(&b);
    let root = u64_at(&b, slot + 64) as usize;
    let p = u32::from_le_bytes(b[slot + 12..slot + 16].try_into().unwrap()) as usize;
    let e = root + 8;
    b[e + at..e + at + value.len()].copy_from_slice(value);
    let crc = crc32(&b[root..root + p - 4]);
    b[root + p - 4..root + p].copy_from_slice(&crc.to_le_bytes());
    b[slot + 60..slot + 64].copy_from_slice(&crc.to_le_bytes());
    reseal_slot(&mut b, slot);
    b
}

/// A stored entry cannot claim more raw bytes than its codec can expand its
/// stored bytes to (deflate 1032:1, zstd 32768:1, plus 1 KiB), and codec
/// byte 2 (zstd) is corrupt in a file that does not list the feature.
#[test]
fn entries_cannot_claim_more_than_their_codec_expands_to() {
    let dir = Scratch::new("ratio");
    // One chunk of 64 KiB that no codec shrinks, so it is stored raw.
    let mut rng = Rng::new(0x9E37_79B9);
    let noise: Vec<i32> = (0..16384).map(|_| rng.next() as i32).collect();
    let file = |codec: Codec| {
        let path = dir.path("r.vds");
        let mut ds = DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("x", 16384))
            .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[16384]).codec(codec))
            .create(&path)
            .unwrap();
        ds.write("v", &Region::full(&[16384]).unwrap(), Order::C, &noise).unwrap();
        ds.close().unwrap();
        std::fs::read(&path).unwrap()
    };
    let edited = dir.path("e.vds");
    let read = |b: &[u8]| {
        std::fs::write(&edited, b).unwrap();
        let e = Dataset::open(&edited).unwrap().read_vec::<i32>("v", &Region::full(&[16384]).unwrap(), Order::C).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        e.to_string()
    };
    // (codec byte, stored length): 63 bytes can hold 64 KiB of deflate, 40 cannot; 1 byte of zstd cannot, 2 can.
    for (f, listed) in [(file(Codec::deflate(1)), false), (file(Codec::zstd(1)), true)] {
        let e = |codec: u8, len: u32| read(&with_entry(&with_entry(&f, 37, &[codec]), 48, &len.to_le_bytes()));
        assert!(e(0x01, 40).contains("40 stored bytes cannot hold a chunk of 65536 bytes"));
        assert!(e(0x01, 63).contains("CRC32 mismatch"));
        if listed {
            assert!(e(0x02, 1).contains("1 stored bytes cannot hold a chunk of 65536 bytes"));
            assert!(e(0x12, 2).contains("CRC32 mismatch"));
        } else {
            for codec in [0x02, 0x12] {
                let msg = e(codec, 40);
                assert!(msg.contains("(zstd) in a file that does not list the feature \"zstd\""), "{msg}");
            }
        }
    }
}

#[test]
fn hostile_index_entries_are_refused_without_large_allocations() {
    let dir = Scratch::new("entry");
    let (path, _) = sample(&dir, Codec::NONE);
    let orig = std::fs::read(&path).unwrap();
    let with_entry = |at: usize, value: &[u8]| with_entry(&orig, at, value);
    let edited = dir.path("h.vds");
    for (at, value, want) in [
        (48, &u32::MAX.to_le_bytes()[..], "stored length"),
        (40, &(1u64 << 60).to_le_bytes()[..], "outside the data of its file"),
        (40, &0u64.to_le_bytes()[..], "outside the data of its file"),
        // An end past 2^64 is damage too, reported with the chunk and its offset.
        (40, &(u64::MAX - 10).to_le_bytes()[..], "at offset 0xfffffffffffffff5 would end past 2^64"),
        (38, &7u16.to_le_bytes()[..], "slot 7"),
        (37, &[0x0f][..], "compression id"),
        (36, &[9][..], "unknown kind"),
    ] {
        std::fs::write(&edited, with_entry(at, value)).unwrap();
        let e = read_all(&edited).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains(want), "{e:?} should mention {want:?}");
    }
}

#[test]
fn chunks_read_straight_into_the_callers_buffer_are_checked_too() {
    // A 10x10 region that is exactly chunk (1, 1) of an uncompressed variable is
    // read from the file into the caller's buffer directly; its CRC32 still guards it.
    let dir = Scratch::new("direct");
    let (path, values) = sample(&dir, Codec::NONE);
    let brick = Region::new(&[10, 10], &[10, 10]).unwrap();
    let want: Vec<i32> = (10..20).flat_map(|i| (10..20).map(move |j| (i * 20 + j) * 7 % 101)).collect();
    assert_eq!(Dataset::open(&path).unwrap().read_vec::<i32>("v", &brick, Order::C).unwrap(), want);
    assert_eq!(values.len(), 600);
    // Chunks are stored in key order after the head: (1, 1) is the fourth of 400 bytes each.
    let body = head_len(&std::fs::read(&path).unwrap()) as u64 + 1024;
    let b = flipped(&path, (body + 3 * 400 + 7) as usize);
    assert_eq!(b.kind(), ErrorKind::Corrupt);
    let bad = path.with_extension("bad");
    let e = Dataset::open(&bad).unwrap().read_vec::<i32>("v", &brick, Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert_eq!(e.location().unwrap().offset, body + 3 * 400);
    assert!(e.to_string().contains("chunk [1, 1]") && e.to_string().contains("CRC32 mismatch"), "{e}");
}
