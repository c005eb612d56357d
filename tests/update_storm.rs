//! Update storms: many small writes between commits, checked against an
//! in-memory reference, with the write-back buffer off, smaller than the
//! chunks touched, and large; and the buffer's point: a chunk updated many
//! times between two commits is read once and stored once. The seed is
//! printed on failure; rerun one with VDS_TEST_SEED=<seed>.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, LodMethod, OpenOptions, Order, Region, Stats, VariableBuilder};

/// Stats without the file length (which a commit changes).
fn entries(s: &Stats) -> (u64, u64, u64, u64, u64) {
    (s.stored_chunks, s.constant_chunks, s.fill_chunks, s.stored_bytes, s.raw_bytes)
}

fn storm(seed: u64, codec: Codec, cache: u64) {
    let dir = Scratch::new("storm");
    let path = dir.path("s.vds");
    let shape = [40u64, 33, 27];
    let chunk = [8u64, 8, 8];
    let mut reference = vec![-7i32; shape.iter().product::<u64>() as usize];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", shape[0]))
        .axis(Axis::new("y", shape[1]))
        .axis(Axis::new("z", shape[2]))
        .variable(VariableBuilder::new("v", DType::Int32, &["x", "y", "z"]).chunk(&chunk).fill(-7i32).codec(codec).levels_of_detail(
            2,
            &["x", "y", "z"],
            LodMethod::Nearest,
        ))
        // The same writes, without other layers: its statistics must count held chunks.
        .variable(VariableBuilder::new("u", DType::Int32, &["x", "y", "z"]).chunk(&chunk).fill(-7i32).codec(codec))
        .create(&path)
        .unwrap();
    ds.set_cache_size(cache);
    let mut rng = Rng::new(seed);
    let mut committed = reference.clone();
    let ctx = |round: usize| format!("seed {seed}, {codec:?}, cache {cache}, round {round}");
    for round in 0..600 {
        match rng.below(100) {
            // Small writes: single elements and boxes up to 3 on a side, some of
            // them constant, crowded into a corner so that chunks are hit often.
            0..=74 => {
                let hot = rng.below(4) != 0;
                let start: Vec<u64> = shape.iter().map(|&s| rng.below(if hot { 12 } else { s })).collect();
                let count: Vec<u64> = (0..3).map(|d| 1 + rng.below(3.min(shape[d] - start[d]))).collect();
                let n = count.iter().product::<u64>() as usize;
                let constant = rng.below(3) == 0;
                let values: Vec<i32> = (0..n).map(|i| if constant { round as i32 } else { (round * 1000 + i) as i32 }).collect();
                let fortran = rng.below(2) == 1;
                for var in ["v", "u"] {
                    ds.write(var, &Region::new(&start, &count).unwrap(), if fortran { Order::Fortran } else { Order::C }, &values).unwrap();
                }
                insert(&mut reference, &shape, &start, &count, &[1, 1, 1], &values, fortran);
            }
            // Reads of random regions, which must see the held chunks.
            75..=87 => {
                let start: Vec<u64> = shape.iter().map(|&s| rng.below(s)).collect();
                let count: Vec<u64> = (0..3).map(|d| 1 + rng.below(shape[d] - start[d])).collect();
                let got: Vec<i32> = ds.read_vec("v", &Region::new(&start, &count).unwrap(), Order::C).unwrap();
                assert!(got == extract(&reference, &shape, &start, &count, &[1, 1, 1], false), "{}: read {start:?} {count:?}", ctx(round));
            }
            // A whole chunk written over chunks that may be held.
            88..=89 => {
                let c: Vec<u64> = shape.iter().zip(&chunk).map(|(s, c)| rng.below(s / c) * c).collect();
                let values: Vec<i32> = (0..512).map(|i| -(round as i32) * 512 - i).collect();
                ds.write("v", &Region::new(&c, &chunk).unwrap(), Order::C, &values).unwrap();
                ds.write("u", &Region::new(&c, &chunk).unwrap(), Order::C, &values).unwrap();
                insert(&mut reference, &shape, &c, &chunk, &[1, 1, 1], &values, false);
            }
            // Commits: the statistics count held chunks as the commit stores them.
            90..=95 => {
                let before = ds.variable_stats("u").unwrap();
                ds.commit().unwrap();
                assert_eq!(entries(&before), entries(&ds.variable_stats("u").unwrap()), "{}: stats across the commit", ctx(round));
                committed = reference.clone();
            }
            // Rollback drops the held chunks with the rest.
            _ => {
                ds.rollback().unwrap();
                reference = committed.clone();
            }
        }
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let full = Region::full(&shape).unwrap();
    for var in ["v", "u"] {
        assert!(ds.read_vec::<i32>(var, &full, Order::C).unwrap() == reference, "{}: {var} after reopening", ctx(600));
    }
    // Level 1 is computed from the held chunks at each commit.
    let (want, s1) = halve_i32(&reference, &shape, &[true; 3], false);
    let mut got = vec![0i32; want.len()];
    ds.read_lod("v", 1, None, &Region::full(&s1).unwrap(), Order::C, &mut got).unwrap();
    assert!(got == want, "{}: level 1", ctx(600));
    let report = ds.verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn update_storms_match_the_reference() {
    let base = seed(0x570A);
    // Off, smaller than the chunks a storm touches (three 2 KiB chunks: stored
    // and held again repeatedly), and large enough for everything.
    for (i, cache) in [0u64, 3 * 2048, 64 << 20].into_iter().enumerate() {
        for (j, codec) in [Codec::NONE, Codec::deflate(1)].into_iter().enumerate() {
            storm(base.wrapping_add((2 * i + j) as u64), codec, cache);
        }
    }
}

/// Writes 2000 single elements into 4 chunks of 128 KiB and commits;
/// returns how much the file grew and how many stored bytes were read.
fn small_writes(path: &std::path::Path, cache: u64, round: i32, reference: &mut [i32]) -> (u64, u64) {
    let mut ds = OpenOptions::new().write(true).cache_size(cache).open(path).unwrap();
    let before = ds.stats().unwrap().file_bytes;
    let mut rng = Rng::new(round as u64);
    for i in 0..2000 {
        let at: Vec<u64> = (0..3).map(|d| rng.below(if d == 0 { 64 } else { 32 }) + if d == 2 { 32 } else { 0 }).collect();
        ds.write("v", &Region::new(&at, &[1, 1, 1]).unwrap(), Order::C, &[round * 10_000 + i]).unwrap();
        reference[c_index(&at, &[64, 64, 64])] = round * 10_000 + i;
    }
    ds.commit().unwrap();
    (ds.stats().unwrap().file_bytes - before, ds.stored_bytes_read())
}

#[test]
fn repeated_small_writes_store_each_chunk_once() {
    let dir = Scratch::new("once");
    let path = dir.path("o.vds");
    let shape = [64u64, 64, 64];
    let chunk_bytes = 32 * 32 * 32 * 4u64;
    let mut reference: Vec<i32> = (0..64 * 64 * 64).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .axis(Axis::new("y", 64))
        .axis(Axis::new("z", 64))
        .variable(VariableBuilder::new("v", DType::Int32, &["x", "y", "z"]).chunk(&[32, 32, 32]))
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &reference).unwrap();
    ds.close().unwrap();
    // The writes land in chunks (0,0,1) and (1,0,1)... of x < 64, y < 32, z in 32..64: 2 chunks.
    let (grown, read) = small_writes(&path, 64 << 20, 1, &mut reference);
    assert!((2 * chunk_bytes..2 * chunk_bytes + 8192).contains(&grown), "held: the file grew by {grown} bytes");
    assert_eq!(read, 2 * chunk_bytes, "held: each chunk is read once");
    // Without the buffer every write stores its chunk again.
    let (grown, read) = small_writes(&path, 0, 2, &mut reference);
    assert!(grown >= 2000 * chunk_bytes, "not held: the file grew by {grown} bytes");
    assert!(read >= 2000 * chunk_bytes, "not held: {read} stored bytes read");
    // A buffer of one chunk: the two chunks take turns, each store making room for the other.
    let (grown, _) = small_writes(&path, chunk_bytes, 3, &mut reference);
    assert!(grown > 2 * chunk_bytes + 8192, "one chunk held: the file grew by {grown} bytes");
    let ds = Dataset::open(&path).unwrap();
    assert!(ds.read_vec::<i32>("v", &Region::full(&shape).unwrap(), Order::C).unwrap() == reference);
}
