//! Random regions — with steps, partial chunks, edge chunks and both memory
//! orders — written and read against an in-memory reference array, across
//! commits, reopens and uncommitted writes. The seed is printed on failure;
//! rerun one with VDS_TEST_SEED=<seed>.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

fn random_region(rng: &mut Rng, shape: &[u64], max_step: u64) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let mut start = Vec::new();
    let mut rshape = Vec::new();
    let mut step = Vec::new();
    for &n in shape {
        let s = 1 + rng.below(max_step);
        let a = rng.below(n);
        let max_count = (n - 1 - a) / s + 1;
        start.push(a);
        step.push(s);
        rshape.push(1 + rng.below(max_count));
    }
    (start, rshape, step)
}

/// Rounds of random writes, commits, reopens and reads against the
/// reference; every third round's region has steps up to `max_step` (longer
/// than a chunk from 5 on), and the bricks carry `margin` samples of their
/// neighbours on each side.
fn run(seed: u64, codec: Codec, max_step: u64, margin: u64) {
    let dir = Scratch::new("random");
    let path = dir.path("r.vds");
    let shape = [23u64, 17, 29];
    let fill = -1.5f32;
    let mut reference = vec![fill; shape.iter().product::<u64>() as usize];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 23))
        .axis(Axis::new("y", 17))
        .axis(Axis::new("z", 29))
        .variable(
            VariableBuilder::new("v", DType::Float32, &["x", "y", "z"]).chunk(&[5, 4, 7]).fill(fill).codec(codec).margin(margin, margin),
        )
        .create(&path)
        .unwrap();
    let mut rng = Rng::new(seed);
    let mut committed = reference.clone();
    for round in 0..60 {
        let fortran = rng.below(2) == 1;
        let order = if fortran { Order::Fortran } else { Order::C };
        let (start, rshape, step) = random_region(&mut rng, &shape, if round % 3 == 0 { max_step } else { 1 });
        let region = Region::new(&start, &rshape).unwrap().with_step(&step).unwrap();
        match rng.below(5) {
            0 | 1 => {
                let n: u64 = rshape.iter().product();
                // Half the writes are constant, so constant chunks come and go.
                let k = rng.below(2);
                let values: Vec<f32> = (0..n).map(|i| if k == 0 { round as f32 } else { (i as f32) * 0.5 + round as f32 }).collect();
                ds.write("v", &region, order, &values).unwrap();
                insert(&mut reference, &shape, &start, &rshape, &step, &values, fortran);
            }
            2 => {
                ds.commit().unwrap();
                committed = reference.clone();
            }
            3 if round % 7 == 0 => {
                // Reopening drops uncommitted writes: the reference returns to the last commit.
                drop(ds);
                ds = Dataset::open_rw(&path).unwrap();
                reference = committed.clone();
            }
            _ => {
                let got: Vec<f32> = ds.read_vec("v", &region, order).unwrap();
                let want = extract(&reference, &shape, &start, &rshape, &step, fortran);
                assert_eq!(got, want, "seed {seed}, round {round}: region {start:?} {rshape:?} step {step:?} {order:?}");
            }
        }
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let got: Vec<f32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::C).unwrap();
    assert_eq!(got, reference, "seed {seed}: whole variable after close");
    let got: Vec<f32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::Fortran).unwrap();
    assert_eq!(got, extract(&reference, &shape, &[0, 0, 0], &shape, &[1, 1, 1], true), "seed {seed}: Fortran read");
}

#[test]
fn random_regions_match_the_reference() {
    let base = seed(0x5EED);
    for i in 0..8 {
        let codec = [Codec::NONE, Codec::deflate(3), Codec::NONE, Codec::zstd(3)][i as usize % 4];
        run(base.wrapping_add(i), codec, 4, 0);
    }
}

#[test]
fn steps_longer_than_a_chunk_skip_chunks_and_match_the_reference() {
    // Steps of up to 16 over chunks of 4 to 7: regions that skip whole
    // chunks, written (also through the margins of the bricks around them)
    // and read back.
    let base = seed(0x51DE);
    for i in 0..6 {
        let codec = [Codec::NONE, Codec::zstd(3)][i as usize % 2];
        run(base.wrapping_add(i), codec, 16, [0, 1, 2][i as usize % 3]);
    }
}

#[test]
fn a_strided_region_over_a_vast_grid_visits_only_the_chunks_it_holds() {
    // 2^40 chunk positions; a region of 4 x 4 samples 2^18 apart holds 16 of
    // them. A walk over every chunk between its corners would not end in
    // this test's lifetime; the walk over the chunks it holds takes 16 steps.
    let dir = Scratch::new("vast");
    let path = dir.path("v.vds");
    let side = 1u64 << 20;
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", side))
        .axis(Axis::new("y", side))
        .variable(VariableBuilder::new("v", DType::Int32, &["x", "y"]).chunk(&[1, 1]).fill(-7i32))
        .create(&path)
        .unwrap();
    let step = 1u64 << 18;
    let region = Region::new(&[3, 5], &[4, 4]).unwrap().with_step(&[step, step]).unwrap();
    let values: Vec<i32> = (0..16).collect();
    ds.write("v", &region, Order::C, &values).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<i32>("v", &region, Order::C).unwrap(), values);
    let stats = ds.stats().unwrap();
    assert_eq!(stats.stored_chunks + stats.constant_chunks, 16, "one chunk a written sample");
    // Between the written samples, and past them, the fill value.
    let beside = Region::new(&[4, 5], &[4, 4]).unwrap().with_step(&[step, step]).unwrap();
    assert_eq!(ds.read_vec::<i32>("v", &beside, Order::C).unwrap(), vec![-7; 16]);
    let one = Region::new(&[3 + 3 * step, 5 + 2 * step], &[1, 1]).unwrap();
    assert_eq!(ds.read_vec::<i32>("v", &one, Order::C).unwrap(), vec![14]);
}

#[test]
fn threads_share_a_read_handle() {
    let dir = Scratch::new("threads");
    let path = dir.path("t.vds");
    let shape = [64u64, 48];
    let values: Vec<u32> = (0..64 * 48).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .axis(Axis::new("y", 48))
        .variable(VariableBuilder::new("v", DType::UInt32, &["x", "y"]).chunk(&[8, 8]).codec(Codec::deflate(1)))
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &values).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let ds = &ds;
            let values = &values;
            s.spawn(move || {
                let mut rng = Rng::new(t);
                for _ in 0..200 {
                    let (start, rshape, step) = random_region(&mut rng, &shape, 3);
                    let r = Region::new(&start, &rshape).unwrap().with_step(&step).unwrap();
                    let got: Vec<u32> = ds.read_vec("v", &r, Order::C).unwrap();
                    assert_eq!(got, extract(values, &shape, &start, &rshape, &step, false));
                }
            });
        }
    });
}

#[test]
fn multi_megabyte_regions_take_the_parallel_paths_and_match() {
    // Large enough (8 MiB of chunks and more) that encoding and decoding run on several threads.
    let dir = Scratch::new("parallel");
    let path = dir.path("p.vds");
    let shape = [130u64, 100, 90];
    let n = (130 * 100 * 90) as usize;
    let reference: Vec<f32> = (0..n).map(|i| ((i % 977) as f32).sqrt()).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 130))
        .axis(Axis::new("y", 100))
        .axis(Axis::new("z", 90))
        .variable(VariableBuilder::new("v", DType::Float32, &["x", "y", "z"]).chunk(&[32, 32, 32]).codec(Codec::deflate(1)))
        .create(&path)
        .unwrap();
    // The whole volume: 60 chunks, all fully covered (edge chunks' valid parts included): encoded in parallel.
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &reference).unwrap();
    // Then an offset region in Fortran order: partial chunks at its edges, read-modify-written.
    let start = [5u64, 5, 5];
    let part = [120u64, 90, 80];
    let values: Vec<f32> = (0..120 * 90 * 80).map(|i| -(i as f32)).collect();
    ds.write("v", &Region::new(&start, &part).unwrap(), Order::Fortran, &values).unwrap();
    ds.close().unwrap();
    let mut want = reference.clone();
    insert(&mut want, &shape, &start, &part, &[1, 1, 1], &values, true);
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<f32>("v", &Region::full(&shape).unwrap(), Order::C).unwrap(), want);
    let got: Vec<f32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::Fortran).unwrap();
    assert_eq!(got, extract(&want, &shape, &[0, 0, 0], &shape, &[1, 1, 1], true));
    // Reads of 2 MiB and more are cut into one part per core along their
    // outermost axis (in the read's order) at chunk boundaries: offset
    // regions, steps on the other axes, and a step on the outermost axis
    // (which is read whole), in both orders.
    for (start, count, step, fortran) in [
        ([3u64, 2, 1], [125u64, 97, 44], [1u64, 1, 2], false),
        ([3, 2, 1], [64, 97, 88], [2, 1, 1], true),
        ([3, 2, 1], [64, 97, 88], [2, 1, 1], false),
        ([0, 0, 0], [127, 100, 89], [1, 1, 1], true),
    ] {
        let region = Region::new(&start, &count).unwrap().with_step(&step).unwrap();
        let order = if fortran { Order::Fortran } else { Order::C };
        let got: Vec<f32> = ds.read_vec("v", &region, order).unwrap();
        assert!(got.len() * 4 >= 2 << 20, "{count:?} is large enough to be cut");
        assert_eq!(got, extract(&want, &shape, &start, &count, &step, fortran), "{start:?} {count:?} {step:?} {order:?}");
    }
    assert_eq!(ds.stats().unwrap().stored_chunks, 5 * 4 * 3);
}
