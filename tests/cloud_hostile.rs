//! The cloud-optimized arrangement (SPEC.md 9.4) against hostile input and
//! unusual use: commit slots whose root lies in the head, the slots,
//! inside a chunk or past the end; every prefetch budget from 0 to
//! u32::MAX (which must not read a large file whole); empty indexes;
//! compact-layout files; and a cloud-optimized file then written and
//! committed many times. Every read is compared with a reference in memory.

mod common;
use common::{crc32, head_len, layout_of, slot_size, Rng, Scratch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vds::{
    Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Layout, MemoryStorage, OpenOptions, Order, Region, Storage, VariableBuilder,
};

const SHAPE: [u64; 2] = [60, 700];
const CHUNK: [u64; 2] = [4, 20];

fn builder(layout: Layout) -> DatasetBuilder {
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("y", SHAPE[0]))
        .axis(Axis::new("x", SHAPE[1]))
        .variable(VariableBuilder::new("v", DType::Int32, &["y", "x"]).chunk(&CHUNK).codec(Codec::deflate(1)))
        .layout(layout);
    b
}

/// A cloud-optimized container of 525 chunks (a two-level index) and its values.
fn cloud_file(path: &std::path::Path) -> Vec<i32> {
    let mut ds = builder(Layout::Aligned).create(path).unwrap();
    let data: Vec<i32> = (0..SHAPE[0] * SHAPE[1]).map(|k| (k * 2_654_435_761 % 1_000_003) as i32).collect();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.commit().unwrap();
    ds.compact_cloud_optimized().unwrap();
    assert!(ds.space().unwrap().index_first);
    ds.close().unwrap();
    data
}

/// Offset of the newest commit slot of a container image.
fn newest_slot(bytes: &[u8]) -> usize {
    let (h, size) = (head_len(bytes), slot_size(bytes));
    let seq =
        |at: usize| if bytes[at..].starts_with(b"VDSCOMIT") { u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap()) } else { 0 };
    if seq(h) >= seq(h + size) {
        h
    } else {
        h + size
    }
}

fn reseal(bytes: &mut [u8], at: usize) {
    let size = slot_size(bytes);
    let crc = crc32(&bytes[at..at + size - 4]);
    bytes[at + size - 4..at + size].copy_from_slice(&crc.to_le_bytes());
}

/// A storage that remembers its largest single read.
#[derive(Default)]
struct Largest {
    inner: MemoryStorage,
    largest: AtomicU64,
}

impl Storage for Largest {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.largest.fetch_max(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}

fn open_bytes(bytes: &[u8], prefetch: u32) -> (vds::Result<Dataset>, Arc<Largest>) {
    let store = Arc::new(Largest::default());
    store.inner.write_at(0, bytes).unwrap();
    (OpenOptions::new().index_prefetch(prefetch).open_storage(store.clone()), store)
}

#[test]
fn a_hostile_root_offset_is_refused_or_reported_never_misread() {
    let dir = Scratch::new("cloud-hostile-root");
    let path = dir.path("c.vds");
    let data = cloud_file(&path);
    let bytes = std::fs::read(&path).unwrap();
    let slot = newest_slot(&bytes);
    let root = u64::from_le_bytes(bytes[slot + 64..slot + 72].try_into().unwrap());
    let file_len = bytes.len() as u64;
    let body = (head_len(&bytes) + 2 * slot_size(&bytes)) as u64;
    for (what, offset) in [
        ("zero", 0),
        ("inside the head", 100),
        ("inside the slots", head_len(&bytes) as u64 + 8),
        ("one before the body", body - 1),
        ("the body's first page", body),
        ("one byte into the index", body + 1),
        ("half a page before the root", root - 2048),
        ("inside the chunks", root + 4096 + 1000),
        ("overlapping the end", file_len - 100),
        ("at the end", file_len),
        ("near 2^64", u64::MAX - 10),
    ] {
        let mut bad = bytes.clone();
        bad[slot + 64..slot + 72].copy_from_slice(&offset.to_le_bytes());
        reseal(&mut bad, slot);
        for prefetch in [0, 1, 512, u32::MAX] {
            let (ds, _) = open_bytes(&bad, prefetch);
            let ds = match ds {
                Ok(ds) => ds,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
                    continue;
                }
            };
            match ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C) {
                // The older slot: commit 1 of the copy, before any chunk.
                Ok(got) => assert!(got == data || got.iter().all(|&v| v == 0), "{what}, prefetch {prefetch}: other values"),
                Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}, prefetch {prefetch}: {e}"),
            }
            let one = ds.read_vec::<i32>("v", &Region::new(&[59, 699], &[1, 1]).unwrap(), Order::C);
            assert!(one.as_ref().map_or_else(|e| e.kind() == ErrorKind::Corrupt, |v| v[0] == data[data.len() - 1] || v[0] == 0), "{what}");
        }
    }
}

#[test]
fn every_prefetch_budget_reads_the_same_values() {
    let dir = Scratch::new("cloud-budgets");
    let (cloud, plain) = (dir.path("c.vds"), dir.path("p.vds"));
    let data = cloud_file(&cloud);
    let mut ds = builder(Layout::Aligned).create(&plain).unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    for path in [&cloud, &plain] {
        let bytes = std::fs::read(path).unwrap();
        for prefetch in [0, 1, 2, 3, 4, 511, 512, 1024, 1025, u32::MAX] {
            let (ds, _) = open_bytes(&bytes, prefetch);
            let ds = ds.unwrap();
            for (i, j) in [(0, 0), (59, 699), (31, 350), (4, 20)] {
                let got: Vec<i32> = ds.read_vec("v", &Region::new(&[i, j], &[1, 1]).unwrap(), Order::C).unwrap();
                assert_eq!(got[0], data[(i * SHAPE[1] + j) as usize], "{path:?} prefetch {prefetch}");
            }
            assert!(ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::Fortran).is_ok());
            let all: Vec<i32> = ds.read_vec("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap();
            assert!(all == data, "{path:?} prefetch {prefetch}");
        }
    }
}

#[test]
fn a_large_budget_does_not_read_a_large_file_whole() {
    // 8 MiB of raw chunks, one commit: the root is the file's last page, so
    // [body start, root end) is nearly the whole file. The page cache holds
    // 1024 pages; a budget beyond that must not fetch more than those.
    let dir = Scratch::new("cloud-large-budget");
    let path = dir.path("big.vds");
    let shape = [2048u64, 1024];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", shape[0]))
        .axis(Axis::new("x", shape[1]))
        .variable(VariableBuilder::new("v", DType::Float32, &["y", "x"]).chunk(&[64, 64]).codec(Codec::NONE))
        .create(&path)
        .unwrap();
    let data: Vec<f32> = (0..shape[0] * shape[1]).map(|k| k as f32).collect();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for prefetch in [512, 1024, 1 << 20, u32::MAX] {
        let (ds, store) = open_bytes(&bytes, prefetch);
        let ds = ds.unwrap();
        let largest = store.largest.load(Ordering::Relaxed);
        assert!(largest <= 1024 * 4096, "index prefetch {prefetch} read {largest} bytes at once from a {}-byte file", bytes.len());
        let got: Vec<f32> = ds.read_vec("v", &Region::new(&[2047, 1000], &[1, 24]).unwrap(), Order::C).unwrap();
        assert!(got == data[2047 * 1024 + 1000..2048 * 1024], "prefetch {prefetch}");
    }
}

#[test]
fn empty_and_fill_only_indexes_and_compact_layouts_survive_the_cloud_compaction() {
    let dir = Scratch::new("cloud-empty");
    // Nothing written: no root.
    let empty = dir.path("empty.vds");
    builder(Layout::Aligned).create(&empty).unwrap().close().unwrap();
    let mut ds = Dataset::open_rw(&empty).unwrap();
    ds.compact_cloud_optimized().unwrap();
    assert!(!ds.space().unwrap().index_first);
    ds.close().unwrap();
    // Only fill and constant chunks: an index without a stored chunk after it.
    let fills = dir.path("fills.vds");
    let mut ds = builder(Layout::Aligned).create(&fills).unwrap();
    let mut data = vec![0i32; (SHAPE[0] * SHAPE[1]) as usize];
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.write("v", &Region::new(&[4, 0], &[4, 700]).unwrap(), Order::C, &[9i32; 2800]).unwrap();
    data[4 * 700..8 * 700].fill(9);
    ds.commit().unwrap();
    ds.compact_cloud_optimized().unwrap();
    assert!(ds.space().unwrap().index_first);
    ds.close().unwrap();
    // A compact-layout container keeps its layout.
    let compact = dir.path("compact.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 100))
        .variable(VariableBuilder::new("s", DType::Int16, &["x"]).chunk(&[8]))
        .layout(Layout::Compact)
        .create(&compact)
        .unwrap();
    let small: Vec<i16> = (0..100).map(|k| k * 3 - 50).collect();
    ds.write("s", &Region::full(&[100]).unwrap(), Order::C, &small).unwrap();
    ds.commit().unwrap();
    ds.write("s", &Region::new(&[10], &[5]).unwrap(), Order::C, &[1i16; 5]).unwrap();
    ds.close().unwrap();
    let mut small = small;
    small[10..15].fill(1);
    let mut ds = Dataset::open_rw(&compact).unwrap();
    ds.compact_cloud_optimized().unwrap();
    ds.close().unwrap();
    let bytes = std::fs::read(&compact).unwrap();
    assert_ne!(layout_of(&bytes).0 % 4096, 0, "still the compact layout");
    for prefetch in [0, 1, 512, u32::MAX] {
        let (ds, _) = open_bytes(&std::fs::read(&empty).unwrap(), prefetch);
        let ds = ds.unwrap();
        assert!(ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap().iter().all(|&v| v == 0));
        assert!(ds.verify().unwrap().is_ok());
        let (ds, _) = open_bytes(&std::fs::read(&fills).unwrap(), prefetch);
        let ds = ds.unwrap();
        assert!(ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap() == data);
        assert!(ds.verify_full().unwrap().is_ok());
        let (ds, _) = open_bytes(&bytes, prefetch);
        let ds = ds.unwrap();
        assert_eq!(ds.read_vec::<i16>("s", &Region::full(&[100]).unwrap(), Order::C).unwrap(), small);
        assert!(ds.verify_full().unwrap().is_ok());
    }
}

#[test]
fn a_cloud_optimized_file_takes_many_commits_and_another_compaction() {
    let dir = Scratch::new("cloud-many-commits");
    let path = dir.path("c.vds");
    let mut data = cloud_file(&path);
    let mut rng = Rng::new(common::seed(21));
    let mut ds = Dataset::open_rw(&path).unwrap();
    for round in 0..30 {
        let (h, w) = (1 + rng.below(9), 1 + rng.below(90));
        let (y, x) = (rng.below(SHAPE[0] - h + 1), rng.below(SHAPE[1] - w + 1));
        let patch: Vec<i32> = (0..h * w).map(|k| if round % 5 == 0 { 0 } else { -((round * 10_000 + k) as i32) }).collect();
        ds.write("v", &Region::new(&[y, x], &[h, w]).unwrap(), Order::C, &patch).unwrap();
        for i in 0..h {
            for j in 0..w {
                data[((y + i) * SHAPE[1] + x + j) as usize] = patch[(i * w + j) as usize];
            }
        }
        ds.commit().unwrap();
        if round % 6 == 5 {
            let (r, _) = open_bytes(&std::fs::read(&path).unwrap(), 512);
            let r = r.unwrap();
            assert!(r.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap() == data, "after commit {round}");
        }
    }
    assert!(!ds.space().unwrap().index_first, "later commits append their pages");
    assert!(ds.verify_full().unwrap().is_ok());
    ds.compact_cloud_optimized().unwrap();
    assert!(ds.space().unwrap().index_first);
    ds.close().unwrap();
    let (r, _) = open_bytes(&std::fs::read(&path).unwrap(), 512);
    let r = r.unwrap();
    assert!(r.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap() == data);
    assert!(r.verify_full().unwrap().is_ok());
}
