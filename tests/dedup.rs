//! Chunk hashes and deduplication (SPEC.md 5.5): every stored chunk records
//! the XXH64 of its bytes; identical chunks are stored once, shared only
//! after a byte-for-byte comparison, and stay shared through compaction; a
//! chunk whose CRC32 still matches but whose hash does not is refused.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Order, Region, VariableBuilder};

/// A 64 x 64 x 64 int32 volume of 4096 chunks of 4^3 drawn from 8 distinct
/// (non-constant) patterns, so that most chunks repeat one another.
fn repeating(dedup: bool, dir: &Scratch, name: &str, codec: Codec) -> (std::path::PathBuf, Vec<i32>) {
    let path = dir.path(name);
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("x", 64))
        .axis(Axis::new("y", 64))
        .axis(Axis::new("z", 64))
        .variable(VariableBuilder::new("v", DType::Int32, &["x", "y", "z"]).chunk(&[4, 4, 4]).codec(codec))
        .create(&path)
        .unwrap();
    ds.set_deduplication(dedup);
    let mut data = vec![0i32; 64 * 64 * 64];
    for (i, v) in data.iter_mut().enumerate() {
        let (x, y, z) = (i / 4096, (i / 64) % 64, i % 64);
        let pattern = ((x / 4) * 5 + (y / 4) * 3 + z / 4) % 8;
        *v = (pattern * 1000 + (x % 4) * 16 + (y % 4) * 4 + z % 4) as i32;
    }
    // Written in two halves, with a commit between, so that sharing reaches committed chunks too.
    ds.write("v", &Region::new(&[0, 0, 0], &[32, 64, 64]).unwrap(), Order::C, &data[..32 * 4096]).unwrap();
    ds.commit().unwrap();
    ds.write("v", &Region::new(&[32, 0, 0], &[32, 64, 64]).unwrap(), Order::C, &data[32 * 4096..]).unwrap();
    ds.close().unwrap();
    (path, data)
}

#[test]
fn identical_chunks_are_stored_once_and_stay_shared() {
    let dir = Scratch::new("dedup");
    for codec in [Codec::NONE, Codec::deflate(3)] {
        let (shared, data) = repeating(true, &dir, "shared.vds", codec);
        let (separate, _) = repeating(false, &dir, "separate.vds", codec);
        let chunk_bytes = 4 * 4 * 4 * 4;
        let mut data_bytes = Vec::new();
        for path in [&shared, &separate] {
            let ds = Dataset::open(path).unwrap();
            let got: Vec<i32> = ds.read_vec("v", &Region::full(&[64, 64, 64]).unwrap(), Order::C).unwrap();
            assert!(got == data, "{}", path.display());
            let s = ds.stats().unwrap();
            assert_eq!(s.stored_chunks, 4096, "every chunk has its entry");
            let report = ds.verify().unwrap();
            assert!(report.is_ok(), "{:?}", report.problems);
            assert_eq!(report.live_bytes + report.reclaimable_bytes, report.file_bytes);
            // Live: head, slots, index pages and chunk data, each shared chunk once.
            data_bytes.push(report.live_bytes - 4096 - 1024 - report.index_pages * 4096);
        }
        // Each of the 8 patterns occurs 512 times: stored once when shared.
        assert_eq!(data_bytes[1], 512 * data_bytes[0], "{codec:?}: {data_bytes:?}");
        if codec == Codec::NONE {
            assert_eq!(data_bytes[0], 8 * chunk_bytes);
        }
        // Compaction copies each shared chunk once.
        let mut ds = Dataset::open_rw(&shared).unwrap();
        let before = std::fs::metadata(&shared).unwrap().len();
        ds.compact().unwrap();
        assert!(std::fs::metadata(&shared).unwrap().len() <= before);
        let got: Vec<i32> = ds.read_vec("v", &Region::full(&[64, 64, 64]).unwrap(), Order::Fortran).unwrap();
        let want = extract(&data, &[64, 64, 64], &[0, 0, 0], &[64, 64, 64], &[1, 1, 1], true);
        assert!(got == want);
        assert!(ds.verify().unwrap().is_ok());
    }
}

/// Patches the last 4 bytes of `data` so that its CRC32 becomes `target`
/// (CRC32 is linear: four free bytes reach any value).
fn force_crc(data: &mut [u8], target: u32) {
    let mut table = [0u32; 256];
    for (k, t) in table.iter_mut().enumerate() {
        let mut c = k as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
        *t = c;
    }
    let n = data.len() - 4;
    let mut state = !0u32;
    for &b in &data[..n] {
        state = (state >> 8) ^ table[((state ^ u32::from(b)) & 0xff) as usize];
    }
    // Walk back from the wanted final register through four unknown bytes.
    let mut reg = !target;
    for _ in 0..4 {
        let k = table.iter().position(|t| t >> 24 == reg >> 24).unwrap();
        reg = ((reg ^ table[k]) << 8) | k as u32;
    }
    data[n..].copy_from_slice(&(reg ^ state).to_le_bytes());
    assert_eq!(crc32(data), target, "the forged CRC32");
}

#[test]
fn a_chunk_that_passes_its_crc_but_not_its_hash_is_refused() {
    let dir = Scratch::new("hash");
    let path = dir.path("h.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 16))
        .variable(VariableBuilder::new("v", DType::UInt8, &["x"]).chunk(&[16]))
        .create(&path)
        .unwrap();
    let data: Vec<u8> = (0..16).map(|i| i * 7 + 1).collect();
    ds.write("v", &Region::full(&[16]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = body_start(&bytes);
    assert_eq!(&bytes[at..at + 16], &data[..], "the one chunk is the first bytes of the body");
    let crc = crc32(&bytes[at..at + 16]);
    bytes[at + 3] ^= 0x10;
    force_crc(&mut bytes[at..at + 16], crc);
    std::fs::write(&path, &bytes).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let e = ds.read_vec::<u8>("v", &Region::full(&[16]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("XXH64 mismatch"), "{e}");
    let report = ds.verify().unwrap();
    assert_eq!(report.problems.len(), 1);
    assert!(report.problems[0].to_string().contains("XXH64 mismatch"));
}

#[test]
fn chunks_sharing_bytes_but_not_type_do_not_share_the_cache() {
    // A uint8 chunk of 8 bytes and a bool chunk of 64 bits store the same 8
    // bytes, so deduplication shares them; each must still decode as itself.
    let dir = Scratch::new("cachetype");
    let path = dir.path("c.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 8))
        .axis(Axis::new("y", 64))
        .variable(VariableBuilder::new("a", DType::UInt8, &["x"]).chunk(&[8]))
        .variable(VariableBuilder::new("b", DType::Bool, &["y"]).chunk(&[64]))
        .create(&path)
        .unwrap();
    let bytes = [0x55u8, 0, 0, 0, 0, 0, 0, 0x80];
    let bits: Vec<bool> = (0..64).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1).collect();
    ds.write("a", &Region::full(&[8]).unwrap(), Order::C, &bytes).unwrap();
    ds.write("b", &Region::full(&[64]).unwrap(), Order::C, &bits).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let report = ds.verify().unwrap();
    let index = report.index_pages * u64::from(ds.index_page_size());
    let body = body_start(&std::fs::read(&path).unwrap()) as u64;
    assert_eq!(report.live_bytes - body - index, 8, "the two chunks share 8 bytes");
    for first in ["a", "b"] {
        let ds = Dataset::open(&path).unwrap();
        let read_a = || ds.read_vec::<u8>("a", &Region::full(&[8]).unwrap(), Order::C).unwrap();
        let read_b = || ds.read_vec::<bool>("b", &Region::full(&[64]).unwrap(), Order::C).unwrap();
        if first == "a" {
            assert_eq!(read_a(), bytes);
            assert_eq!(read_b(), bits);
        } else {
            assert_eq!(read_b(), bits);
            assert_eq!(read_a(), bytes);
        }
    }
}

#[test]
fn verify_reads_and_decodes_a_shared_chunk_once() {
    let dir = Scratch::new("dedup-verify");
    let (path, _) = repeating(true, &dir, "v.vds", Codec::deflate(1));
    let counting = CountingStorage { inner: vds::MemoryStorage::from_bytes(&std::fs::read(&path).unwrap()), ..Default::default() };
    let ds = vds::OpenOptions::new().open_storage(std::sync::Arc::new(counting.clone())).unwrap();
    let before = counting.reads.load(std::sync::atomic::Ordering::Relaxed);
    let report = ds.verify().unwrap();
    let reads = counting.reads.load(std::sync::atomic::Ordering::Relaxed) - before;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.chunks, 4096);
    // 8 distinct chunks, the index pages, the slots and the descriptor; not
    // one read per entry.
    let pages = report.index_pages;
    assert!(reads <= 8 + pages + 8, "{reads} reads for 8 distinct chunks and {pages} index pages");
}
