//! The cloud-optimized arrangement (SPEC.md 9.4): a compaction that puts
//! every index page right after the commit slots keeps every value, and a
//! reader then fetches the whole index in one read when it opens, so that
//! each chunk read afterwards costs one read of the chunk alone.

mod common;
use common::{CountingStorage, Scratch};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, MemoryStorage, OpenOptions, Order, Region, Storage, VariableBuilder};

const SHAPE: [u64; 2] = [200, 5000];
const CHUNK: [u64; 2] = [5, 50];

fn value(i: u64, j: u64) -> i32 {
    (i * 7919 + j * 104_729) as i32 % 100_003
}

/// A container of 4,000 chunks, written in two commits (the second
/// rewrites a band, leaving garbage for compaction).
fn container(path: &std::path::Path) -> Vec<i32> {
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", SHAPE[0]))
        .axis(Axis::new("x", SHAPE[1]))
        .variable(VariableBuilder::new("v", DType::Int32, &["y", "x"]).chunk(&CHUNK).codec(Codec::NONE))
        .create(path)
        .unwrap();
    let mut data: Vec<i32> = (0..SHAPE[0] * SHAPE[1]).map(|k| value(k / SHAPE[1], k % SHAPE[1])).collect();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.commit().unwrap();
    let band: Vec<i32> = (0..20 * SHAPE[1]).map(|k| -(k as i32)).collect();
    ds.write("v", &Region::new(&[50, 0], &[20, SHAPE[1]]).unwrap(), Order::C, &band).unwrap();
    data[(50 * SHAPE[1]) as usize..(70 * SHAPE[1]) as usize].copy_from_slice(&band);
    ds.close().unwrap();
    data
}

/// Opens the file's bytes through a counting store with the index prefetch
/// a remote reader uses, then reads `chunks` single chunks; returns the
/// reads at open and the reads the chunks took.
fn reads(path: &std::path::Path, chunks: &[[u64; 2]], data: &[i32]) -> (u64, u64) {
    let store = CountingStorage { inner: MemoryStorage::new(), ..CountingStorage::default() };
    store.inner.write_at(0, &std::fs::read(path).unwrap()).unwrap();
    let counted = |s: &CountingStorage| s.reads.load(Ordering::Relaxed) + s.batches.load(Ordering::Relaxed);
    let ds = OpenOptions::new().index_prefetch(512).open_storage(Arc::new(store.clone())).unwrap();
    let at_open = counted(&store);
    for c in chunks {
        let start = [c[0] * CHUNK[0], c[1] * CHUNK[1]];
        let got: Vec<i32> = ds.read_vec("v", &Region::new(&start, &CHUNK).unwrap(), Order::C).unwrap();
        for (k, v) in got.iter().enumerate() {
            let (i, j) = (start[0] + k as u64 / CHUNK[1], start[1] + k as u64 % CHUNK[1]);
            assert_eq!(*v, data[(i * SHAPE[1] + j) as usize]);
        }
    }
    (at_open, counted(&store) - at_open)
}

#[test]
fn the_whole_index_comes_in_one_read_and_each_chunk_in_one_more() {
    let dir = Scratch::new("cloud");
    let (plain, cloud) = (dir.path("plain.vds"), dir.path("cloud.vds"));
    let data = container(&plain);
    container(&cloud);
    Dataset::open_rw(&plain).unwrap().compact_folding_slots().unwrap();
    let report = Dataset::open_rw(&cloud).unwrap().compact_cloud_optimized().unwrap();
    assert!(report.after_bytes < report.before_bytes, "{report:?}");
    let ds = Dataset::open(&cloud).unwrap();
    assert!(ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap() == data);
    assert!(ds.verify().unwrap().is_ok());
    assert_eq!(ds.stats().unwrap().stored_chunks, 4000);
    // The same bytes as the ordinary compaction, arranged differently.
    assert_eq!(std::fs::metadata(&cloud).unwrap().len(), std::fs::metadata(&plain).unwrap().len());

    // Chunks spread over the grid (beyond the first bytes, which a reader
    // keeps from opening), so that an ordinary index reads many leaves.
    let chunks: Vec<[u64; 2]> = (0..40u64).map(|k| [10 + (k * 17) % 30, (k * 31) % 100]).collect();
    let (cloud_open, cloud_chunks) = reads(&cloud, &chunks, &data);
    let (plain_open, plain_chunks) = reads(&plain, &chunks, &data);
    // The head, then every index page in one read.
    assert!(cloud_open <= 2, "opening the cloud-optimized container took {cloud_open} reads");
    assert!(cloud_chunks <= chunks.len() as u64, "{} chunks took {cloud_chunks} reads", chunks.len());
    // An ordinary arrangement reads a leaf before most chunks.
    assert!(
        plain_open + plain_chunks > cloud_open + cloud_chunks + 20,
        "plain {plain_open} + {plain_chunks}, cloud {cloud_open} + {cloud_chunks}"
    );
    eprintln!("reads: cloud-optimized {cloud_open} at open + {cloud_chunks} for 40 chunks; ordinary {plain_open} + {plain_chunks}");
}

#[test]
fn a_cloud_optimized_container_takes_further_commits() {
    let dir = Scratch::new("cloud-commit");
    let path = dir.path("c.vds");
    let mut data = container(&path);
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.compact_cloud_optimized().unwrap();
    let patch = [1i32, 2, 3, 4];
    ds.write("v", &Region::new(&[199, 4996], &[1, 4]).unwrap(), Order::C, &patch).unwrap();
    ds.close().unwrap();
    data[(199 * SHAPE[1] + 4996) as usize..(199 * SHAPE[1] + 5000) as usize].copy_from_slice(&patch);
    let (at_open, _) = reads(&path, &[[39, 99]], &data);
    assert!(at_open >= 1);
    let ds = Dataset::open(&path).unwrap();
    assert!(ds.read_vec::<i32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap() == data);
    assert!(ds.verify().unwrap().is_ok());
}
