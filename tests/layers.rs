//! Levels of detail and partitionings (SPEC.md 3.7): every level of every
//! partitioning equals a reference computed here from the level-0 data, for
//! odd extents in 2-D to 6-D, both memory orders, both methods; slices
//! through tiles equal slices through bricks; a read at level k touches only
//! level-k chunks; updates are incremental across commits.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

const SHAPES: [&[u64]; 5] = [&[37, 23], &[11, 9, 13], &[7, 5, 6, 9], &[5, 3, 4, 3, 5], &[3, 4, 3, 2, 3, 5]];
const BRICKS: [&[u64]; 5] = [&[8, 8], &[4, 4, 4], &[3, 2, 4, 4], &[2, 2, 2, 2, 2], &[2, 2, 2, 2, 2, 2]];

fn axes(n: usize) -> Vec<String> {
    (0..n).map(|d| format!("a{d}")).collect()
}

fn builder(dir: &Scratch, name: &str, shape: &[u64]) -> (std::path::PathBuf, DatasetBuilder) {
    let mut b = DatasetBuilder::new();
    for (d, &n) in shape.iter().enumerate() {
        b.axis(Axis::new(&format!("a{d}"), n));
    }
    (dir.path(name), b)
}

#[test]
fn every_level_and_partitioning_matches_the_reference() {
    let dir = Scratch::new("layers");
    let mut rng = Rng::new(seed(0x1a7e));
    for (case, (&shape, &brick)) in SHAPES.iter().zip(&BRICKS).enumerate() {
        let n = shape.len();
        let names = axes(n);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        // Tiles across the two fastest axes; LODs halve every axis but the first (in 3-D and up).
        let mut tile = vec![1u64; n];
        tile[n - 2] = shape[n - 2];
        tile[n - 1] = shape[n - 1];
        let lod_axes: Vec<&str> = if n >= 3 { names[1..].to_vec() } else { names.clone() };
        let halved: Vec<bool> = (0..n).map(|d| n < 3 || d >= 1).collect();
        let (path, mut b) = builder(&dir, &format!("c{case}.vds"), shape);
        b.variable(
            VariableBuilder::new("f", DType::Float32, &names)
                .chunk(brick)
                .partitioning(&tile)
                .levels_of_detail(4, &lod_axes, LodMethod::Average)
                .codec(Codec::deflate(1)),
        );
        b.variable(VariableBuilder::new("i", DType::Int32, &names).chunk(brick).partitioning(&tile).levels_of_detail(
            3,
            &lod_axes,
            LodMethod::Average,
        ));
        b.variable(VariableBuilder::new("k", DType::Int32, &names).chunk(brick).levels_of_detail(3, &lod_axes, LodMethod::Nearest));
        let mut ds = b.create(&path).unwrap();
        let total = shape.iter().product::<u64>() as usize;
        let mut f: Vec<f32> = (0..total).map(|_| (rng.below(2000) as f32 - 1000.0) * 0.37).collect();
        let mut i: Vec<i32> = (0..total).map(|_| rng.below(200_001) as i32 - 100_000).collect();
        let mut k: Vec<i32> = (0..total).map(|_| rng.below(7) as i32).collect();
        ds.write("f", &Region::full(shape).unwrap(), Order::C, &f).unwrap();
        ds.write("i", &Region::full(shape).unwrap(), Order::C, &i).unwrap();
        ds.write("k", &Region::full(shape).unwrap(), Order::C, &k).unwrap();
        ds.commit().unwrap();
        // Then two commits of partial updates, in Fortran order, to test incremental updates.
        for _ in 0..2 {
            let start: Vec<u64> = shape.iter().map(|&s| rng.below(s)).collect();
            let rshape: Vec<u64> = shape.iter().zip(&start).map(|(&s, &a)| 1 + rng.below(s - a)).collect();
            let m = rshape.iter().product::<u64>() as usize;
            let vf: Vec<f32> = (0..m).map(|_| rng.below(100) as f32 * 0.5).collect();
            let vi: Vec<i32> = (0..m).map(|_| rng.below(1001) as i32 - 500).collect();
            let step = vec![1; n];
            insert(&mut f, shape, &start, &rshape, &step, &vf, true);
            insert(&mut i, shape, &start, &rshape, &step, &vi, true);
            insert(&mut k, shape, &start, &rshape, &step, &vi, true);
            let region = Region::new(&start, &rshape).unwrap();
            ds.write("f", &region, Order::Fortran, &vf).unwrap();
            ds.write("i", &region, Order::Fortran, &vi).unwrap();
            ds.write("k", &region, Order::Fortran, &vi).unwrap();
            ds.commit().unwrap();
        }
        ds.close().unwrap();
        let ds = Dataset::open(&path).unwrap();
        let (mut rf, mut ri, mut rk, mut s) = (f.clone(), i.clone(), k.clone(), shape.to_vec());
        for lod in 0..4u8 {
            assert_eq!(ds.variable("f").unwrap().lod_shape(lod).unwrap(), s, "case {case} level {lod}");
            let full = Region::full(&s).unwrap();
            let origin = vec![0; n];
            let step = vec![1; n];
            for part in [0u8, 1] {
                for order in [Order::C, Order::Fortran] {
                    let fortran = order == Order::Fortran;
                    let mut got = vec![0f32; rf.len()];
                    ds.read_lod("f", lod, Some(part), &full, order, &mut got).unwrap();
                    let want = extract(&rf, &s, &origin, &s, &step, fortran);
                    assert!(
                        got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "f: case {case} level {lod} partitioning {part}"
                    );
                    if lod < 3 {
                        let mut got = vec![0i32; ri.len()];
                        ds.read_lod("i", lod, Some(part), &full, order, &mut got).unwrap();
                        assert_eq!(got, extract(&ri, &s, &origin, &s, &step, fortran), "i: case {case} level {lod} partitioning {part}");
                        ds.read_lod("k", lod, None, &full, order, &mut got).unwrap();
                        assert_eq!(got, extract(&rk, &s, &origin, &s, &step, fortran), "k: case {case} level {lod}");
                    }
                }
            }
            (rf, _) = halve_f32(&rf, &s, &halved, true);
            (ri, _) = halve_i32(&ri, &s, &halved, true);
            (rk, s) = halve_i32(&rk, &s, &halved, false);
        }
        assert_eq!(
            ds.read_lod::<f32>("f", 4, None, &Region::full(&s).unwrap(), Order::C, &mut vec![0f32; rf.len()]).unwrap_err().kind(),
            ErrorKind::OutOfRange
        );
        assert_eq!(
            ds.read_lod::<f32>("f", 0, Some(2), &Region::full(shape).unwrap(), Order::C, &mut vec![0f32; f.len()]).unwrap_err().kind(),
            ErrorKind::OutOfRange
        );
        // Every layer agrees with level 0 under the full check.
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "case {case}: {:?}", report.problems);
    }
}

/// A 3-D volume in 8^3 bricks plus tiles across each pair of axes, 3 levels.
fn volume(dir: &Scratch, name: &str) -> (std::path::PathBuf, Vec<f32>, [u64; 3]) {
    let shape = [40u64, 36, 30];
    let (path, mut b) = builder(dir, name, &shape);
    b.variable(
        VariableBuilder::new("amp", DType::Float32, &["a0", "a1", "a2"])
            .chunk(&[8, 8, 8])
            .partitioning(&[1, 36, 30])
            .partitioning(&[40, 1, 30])
            .partitioning(&[40, 36, 1])
            .levels_of_detail(3, &[], LodMethod::Average)
            .codec(Codec::NONE),
    );
    b.variable(VariableBuilder::new("second", DType::Int8, &["a0", "a1"]).partitioning(&[1, 36]));
    let mut ds = b.create(&path).unwrap();
    let data: Vec<f32> = (0..40 * 36 * 30).map(|i| ((i * 7919) % 1000) as f32 * 0.01 - 5.0).collect();
    ds.write("amp", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    (path, data, shape)
}

#[test]
fn slices_through_tiles_equal_slices_through_bricks_and_read_less() {
    let dir = Scratch::new("slices");
    let (path, data, shape) = volume(&dir, "v.vds");
    let mut ds = Dataset::open(&path).unwrap();
    ds.set_cache_size(0);
    for axis in 0..3 {
        for index in [0, 5, shape[axis] - 1] {
            let (tiles, plane) = ds.read_slice::<f32>("amp", 0, &[(axis, index)], Order::C).unwrap();
            // The tiles across this axis are partitioning axis + 1.
            let mut start = [0u64; 3];
            start[axis] = index;
            let mut count = shape;
            count[axis] = 1;
            let region = Region::new(&start, &count).unwrap();
            assert_eq!(ds.choose_partitioning("amp", 0, &region).unwrap(), axis as u8 + 1);
            let before = ds.stored_bytes_read();
            let mut bricks = vec![0f32; tiles.len()];
            ds.read_lod("amp", 0, Some(0), &region, Order::C, &mut bricks).unwrap();
            let brick_bytes = ds.stored_bytes_read() - before;
            let before = ds.stored_bytes_read();
            ds.read_slice::<f32>("amp", 0, &[(axis, index)], Order::C).unwrap();
            let tile_bytes = ds.stored_bytes_read() - before;
            assert_eq!(tiles, bricks, "axis {axis} index {index}");
            assert_eq!(tiles, extract(&data, &shape, &start, &count, &[1, 1, 1], false));
            let free: Vec<u64> = (0..3).filter(|&d| d != axis).map(|d| shape[d]).collect();
            assert_eq!(plane.to_vec(), free);
            // One tile of exactly the plane against whole bricks 8 samples deep.
            assert_eq!(tile_bytes, plane[0] * plane[1] * 4, "axis {axis}");
            assert!(brick_bytes >= 8 * tile_bytes, "axis {axis}: bricks {brick_bytes}, tiles {tile_bytes}");
        }
        // Coarser levels: the slice at level 2 matches reading level 2 from bricks.
        let s2 = ds.variable("amp").unwrap().lod_shape(2).unwrap();
        let (tiles, _) = ds.read_slice::<f32>("amp", 2, &[(axis, 1)], Order::Fortran).unwrap();
        let mut start = vec![0u64; 3];
        start[axis] = 1;
        let mut count = s2.clone();
        count[axis] = 1;
        let mut bricks = vec![0f32; tiles.len()];
        ds.read_lod("amp", 2, Some(0), &Region::new(&start, &count).unwrap(), Order::Fortran, &mut bricks).unwrap();
        assert_eq!(tiles, bricks);
    }
    // A small box reads bricks.
    assert_eq!(ds.choose_partitioning("amp", 0, &Region::new(&[3, 3, 3], &[4, 4, 4]).unwrap()).unwrap(), 0);
    // Slices need exactly two free axes.
    assert_eq!(ds.read_slice::<f32>("amp", 0, &[], Order::C).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(ds.read_slice::<f32>("amp", 0, &[(0, 1), (1, 1)], Order::C).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(ds.read_slice::<f32>("amp", 0, &[(0, 40)], Order::C).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(ds.read_slice::<i8>("amp", 0, &[(0, 1)], Order::C).unwrap_err().kind(), ErrorKind::TypeMismatch);
    // Layer names in the OpenVDS manner.
    let amp = ds.variable("amp").unwrap();
    let names: Vec<String> = (0..4).map(|p| amp.layer_name(1, p, "").unwrap()).collect();
    assert_eq!(names, ["Dimensions_012LOD1", "Dimensions_01LOD1", "Dimensions_02LOD1", "Dimensions_12LOD1"]);
    assert_eq!(ds.variable("second").unwrap().layer_name(0, 1, "second").unwrap(), "secondDimensions_0LOD0");
    assert_eq!(amp.layer_name(3, 0, ""), None);
    let report = ds.verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn a_read_at_one_level_touches_only_that_level() {
    let dir = Scratch::new("isolation");
    let shape = [32u64, 32, 32];
    let (path, mut b) = builder(&dir, "v.vds", &shape);
    b.variable(VariableBuilder::new("amp", DType::Float32, &["a0", "a1", "a2"]).chunk(&[8, 8, 8]).levels_of_detail(
        3,
        &[],
        LodMethod::Average,
    ));
    let mut ds = b.create(&path).unwrap();
    let data: Vec<f32> = (0..32 * 32 * 32).map(|i| (i % 977) as f32).collect();
    ds.write("amp", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    // Level-0 chunks are in the body now; the coarser levels are written at commit, after them.
    let level0_end = std::fs::metadata(&path).unwrap().len() as usize;
    ds.close().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let body = head_len(&bytes) + 1024;
    for b in &mut bytes[body..level0_end] {
        *b ^= 0x55;
    }
    std::fs::write(&path, &bytes).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let (l1, shape1) = ds.read_slice::<f32>("amp", 1, &[(0, 3)], Order::C).unwrap();
    assert_eq!(shape1, [16, 16]);
    let (r, s) = halve_f32(&data, &shape, &[true; 3], true);
    assert_eq!(l1, extract(&r, &s, &[3, 0, 0], &[1, 16, 16], &[1, 1, 1], false));
    let e = ds.read_slice::<f32>("amp", 0, &[(0, 3)], Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
}

#[test]
fn layers_are_updated_at_commit_and_dropped_by_rollback() {
    let dir = Scratch::new("pending");
    let shape = [16u64, 12];
    let (path, mut b) = builder(&dir, "v.vds", &shape);
    b.variable(VariableBuilder::new("v", DType::Int16, &["a0", "a1"]).chunk(&[4, 4]).partitioning(&[1, 12]).levels_of_detail(
        2,
        &["a1"],
        LodMethod::Nearest,
    ));
    let mut ds = b.create(&path).unwrap();
    let data: Vec<i16> = (0..16 * 12).map(|i| i as i16).collect();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    // Before the commit, level 0 reads come from the first partitioning, which has the data.
    let got: Vec<i16> = ds.read_vec("v", &Region::new(&[2, 0], &[1, 12]).unwrap(), Order::C).unwrap();
    assert_eq!(got, data[24..36]);
    ds.update_layers().unwrap();
    let mut l1 = vec![0i16; 16 * 6];
    ds.read_lod("v", 1, Some(1), &Region::full(&[16, 6]).unwrap(), Order::C, &mut l1).unwrap();
    assert_eq!(l1[6 * 3 + 2], data[12 * 3 + 4], "nearest takes the first of each pair");
    ds.commit().unwrap();
    ds.write("v", &Region::new(&[0, 0], &[1, 1]).unwrap(), Order::C, &[-1i16]).unwrap();
    ds.rollback().unwrap();
    ds.write("v", &Region::new(&[5, 6], &[1, 1]).unwrap(), Order::C, &[-7i16]).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let mut l1 = vec![0i16; 16 * 6];
    ds.read_lod("v", 1, Some(1), &Region::full(&[16, 6]).unwrap(), Order::C, &mut l1).unwrap();
    assert_eq!(l1[0], 0, "the rolled-back write reached no layer");
    assert_eq!(l1[5 * 6 + 3], -7, "the committed write reached level 1 of the tiles");
    let desc: vds::serde_json::Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
    assert_eq!(desc["features"]["ro_compat"], vds::serde_json::json!(["levels_of_detail", "partitionings"]));
    assert_eq!(desc["version"], vds::serde_json::json!([1, vds::FORMAT_MINOR]));
}

#[test]
fn descriptors_that_would_need_too_many_layers_are_refused() {
    let dir = Scratch::new("toomany");
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("a", 64));
    // 600 variables x 16 levels x 8 partitionings = 76800 layers.
    for i in 0..600 {
        let mut v = VariableBuilder::new(&format!("v{i}"), DType::Int8, &["a"]);
        v.chunk(&[4]).levels_of_detail(16, &[], LodMethod::Nearest);
        for c in 1..8 {
            v.partitioning(&[c]);
        }
        b.variable(&v);
    }
    let e = b.create(dir.path("x.vds")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("more than 65536 stored layers"), "{e}");
}

#[test]
fn many_small_writes_in_one_commit_reach_every_layer() {
    let dir = Scratch::new("smallwrites");
    let shape = [64u64, 64];
    let (path, mut b) = builder(&dir, "s.vds", &shape);
    b.variable(VariableBuilder::new("v", DType::Int32, &["a0", "a1"]).chunk(&[8, 8]).partitioning(&[1, 64]).levels_of_detail(
        2,
        &[],
        LodMethod::Nearest,
    ));
    let mut ds = b.create(&path).unwrap();
    // 4096 one-sample writes plus repeats: past the bound on remembered regions.
    let mut data = vec![0i32; 64 * 64];
    for k in 0..5000u64 {
        let (i, j) = ((k * 37) % 64, (k * 11) % 64);
        let x = k as i32;
        data[(i * 64 + j) as usize] = x;
        ds.write("v", &Region::new(&[i, j], &[1, 1]).unwrap(), Order::C, &[x]).unwrap();
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let mut tiles = vec![0i32; 64 * 64];
    ds.read_lod("v", 0, Some(1), &Region::full(&shape).unwrap(), Order::C, &mut tiles).unwrap();
    assert!(tiles == data);
    let mut l1 = vec![0i32; 32 * 32];
    ds.read_lod("v", 1, Some(1), &Region::full(&[32, 32]).unwrap(), Order::C, &mut l1).unwrap();
    assert_eq!(l1, extract(&data, &shape, &[0, 0], &[32, 32], &[2, 2], false));
}

#[test]
fn a_failed_update_or_write_leaves_no_layer_stale() {
    let dir = Scratch::new("failed");
    let shape = [32u64];
    let (path, mut b) = builder(&dir, "f.vds", &shape);
    b.variable(
        VariableBuilder::new("v", DType::Float32, &["a0"]).chunk(&[4]).levels_of_detail(2, &[], LodMethod::Average).missing_mask(true),
    );
    let mut ds = b.create(&path).unwrap();
    let data: Vec<f32> = (1..=32).map(|x| x as f32).collect();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    // The update at commit needs more than 16 bytes at a time: it fails, and nothing is forgotten.
    ds.set_memory_limit(16);
    assert_eq!(ds.commit().unwrap_err().kind(), ErrorKind::OutOfMemory);
    ds.set_memory_limit(1 << 30);
    ds.commit().unwrap();
    let level1 = |ds: &Dataset| {
        let mut l1 = vec![0f32; 16];
        ds.read_lod("v", 1, None, &Region::full(&[16]).unwrap(), Order::C, &mut l1).unwrap();
        l1
    };
    let pairs = |v: &[f32]| -> Vec<f32> { v.chunks(2).map(|p| ((f64::from(p[0]) + f64::from(p[1])) / 2.0) as f32).collect() };
    assert_eq!(level1(&ds), pairs(&data));
    // A write whose values land (16-byte chunks) but whose mask (32 bytes) does not still reaches level 1.
    ds.set_memory_limit(16);
    assert_eq!(ds.write("v", &Region::full(&shape).unwrap(), Order::C, &[3.0f32; 32]).unwrap_err().kind(), ErrorKind::OutOfMemory);
    ds.set_memory_limit(1 << 30);
    ds.commit().unwrap();
    let got: Vec<f32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::C).unwrap();
    assert_eq!(got, [3.0; 32], "the values were written before the mask failed");
    assert_eq!(level1(&ds), pairs(&got), "level 1 follows level 0");
}

/// A volume large enough for the update at commit to spread over several
/// cores, with edge chunks clipped in every grid, partitionings whose
/// chunks do not divide the bricks, bricks with margins, a missing-value
/// mask, two levels and a quantized variable: after one commit, and after
/// a partial update, every layer equals level 0.
#[test]
fn a_large_volume_with_tiles_keeps_every_layer_equal_to_level_0() {
    let dir = Scratch::new("layers-large");
    let shape = [100u64, 90, 70];
    let names = ["a0", "a1", "a2"];
    let (path, mut b) = builder(&dir, "large.vds", &shape);
    let tiled = |v: &mut VariableBuilder| {
        v.chunk(&[32, 32, 32])
            .partitioning(&[1, 90, 70])
            .partitioning(&[100, 1, 70])
            .partitioning(&[100, 90, 1])
            .partitioning(&[24, 40, 70])
            .levels_of_detail(2, &[], LodMethod::Average);
    };
    let mut f = VariableBuilder::new("f", DType::Float32, &names);
    tiled(&mut f);
    f.codec(Codec::deflate(1)).margin(2, 3);
    let mut m = VariableBuilder::new("m", DType::Int16, &names);
    tiled(&mut m);
    m.missing_mask(true);
    let mut q = VariableBuilder::new("q", DType::Float32, &names);
    tiled(&mut q);
    q.quantization(DType::UInt16, -10.0, 10.0);
    b.variable(&f).variable(&m).variable(&q);
    let mut ds = b.create(&path).unwrap();
    let total = shape.iter().product::<u64>() as usize;
    let mut rng = Rng::new(seed(0x7e55));
    let values: Vec<f32> = (0..total).map(|i| ((i % 977) as f32 * 0.013).sin() * 9.0 + rng.below(3) as f32).collect();
    let ints: Vec<i16> = (0..total).map(|_| rng.below(2001) as i16 - 1000).collect();
    let missing: Vec<bool> = (0..total).map(|_| rng.below(5) == 0).collect();
    let full = Region::full(&shape).unwrap();
    ds.write("f", &full, Order::C, &values).unwrap();
    ds.write_masked("m", &full, Order::C, &ints, &missing).unwrap();
    ds.write("q", &full, Order::C, &values).unwrap();
    ds.commit().unwrap();
    let report = ds.verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    // Each partitioning reads back what level 0 holds.
    for p in 1..5u8 {
        let mut out = vec![0f32; total];
        ds.read_lod("f", 0, Some(p), &full, Order::C, &mut out).unwrap();
        assert!(out == values, "partitioning {p}");
        assert_eq!(ds.read_mask("m", 0, Some(p), &full, Order::C).unwrap(), missing, "mask of partitioning {p}");
    }
    // A partial update in F order, across chunk boundaries.
    let region = Region::new(&[17, 5, 33], &[50, 61, 20]).unwrap();
    let n = 50 * 61 * 20;
    let patch: Vec<f32> = (0..n).map(|i| i as f32 * 0.001 - 3.0).collect();
    let patch_i: Vec<i16> = (0..n).map(|i| (i % 300) as i16).collect();
    ds.write("f", &region, Order::Fortran, &patch).unwrap();
    ds.write_masked("m", &region, Order::Fortran, &patch_i, &vec![false; n]).unwrap();
    ds.write("q", &region, Order::Fortran, &patch).unwrap();
    ds.commit().unwrap();
    let report = ds.verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut bricks = vec![0f32; n];
    let mut tiles = vec![0f32; n];
    for p in 1..5u8 {
        ds.read_lod("f", 0, Some(0), &region, Order::Fortran, &mut bricks).unwrap();
        ds.read_lod("f", 0, Some(p), &region, Order::Fortran, &mut tiles).unwrap();
        assert!(bricks == patch && tiles == patch, "partitioning {p}");
    }
    ds.close().unwrap();
    let report = Dataset::open(&path).unwrap().verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Levels large enough to be built on several cores (a batch of chunks
/// computed and encoded at a time, then stored in order): every level of
/// the bricks and of the tiles is what halving level 0 here gives, after
/// the first commit and after a partial update; a variable with a
/// missing-value mask verifies against level 0 as well.
#[test]
fn levels_built_on_several_cores_match_the_reference() {
    let dir = Scratch::new("layers-parallel-levels");
    let shape = [130u64, 96, 80];
    let names = ["a0", "a1", "a2"];
    let (path, mut b) = builder(&dir, "levels.vds", &shape);
    // Level 1 of `f` is 27 chunks of 128 KiB, of `m` 12: past the one-thread threshold of 1 MiB.
    b.variable(
        VariableBuilder::new("f", DType::Float32, &names)
            .chunk(&[32, 32, 32])
            .partitioning(&[1, 96, 80])
            .levels_of_detail(4, &[], LodMethod::Average)
            .codec(Codec::deflate(1)),
    );
    b.variable(
        VariableBuilder::new("m", DType::Int32, &names)
            .chunk(&[32, 32, 32])
            .levels_of_detail(3, &[], LodMethod::Average)
            .missing_mask(true),
    );
    let mut ds = b.create(&path).unwrap();
    let total = shape.iter().product::<u64>() as usize;
    let mut rng = Rng::new(seed(0x1e7e));
    let mut f: Vec<f32> = (0..total).map(|i| ((i % 1013) as f32 * 0.01).cos() * 50.0 + rng.below(100) as f32 * 0.25).collect();
    let ints: Vec<i32> = (0..total).map(|_| rng.below(20001) as i32 - 10000).collect();
    let missing: Vec<bool> = (0..total).map(|_| rng.below(7) == 0).collect();
    let full = Region::full(&shape).unwrap();
    ds.write("f", &full, Order::C, &f).unwrap();
    ds.write_masked("m", &full, Order::C, &ints, &missing).unwrap();
    ds.commit().unwrap();
    let check = |ds: &Dataset, f: &[f32], when: &str| {
        let (mut want, mut s) = (f.to_vec(), shape.to_vec());
        for lod in 0..4u8 {
            for part in [0u8, 1] {
                let mut got = vec![0f32; want.len()];
                ds.read_lod("f", lod, Some(part), &Region::full(&s).unwrap(), Order::C, &mut got).unwrap();
                assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{when}: level {lod}, partitioning {part}");
            }
            (want, s) = halve_f32(&want, &s, &[true; 3], true);
        }
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{when}: {:?}", report.problems);
    };
    check(&ds, &f, "first commit");
    // An update across chunk boundaries redoes the level chunks it touches.
    let start = [20u64, 10, 30];
    let rshape = [70u64, 80, 40];
    let n = rshape.iter().product::<u64>() as usize;
    let patch: Vec<f32> = (0..n).map(|i| i as f32 * 0.003 - 7.0).collect();
    insert(&mut f, &shape, &start, &rshape, &[1, 1, 1], &patch, false);
    ds.write("f", &Region::new(&start, &rshape).unwrap(), Order::C, &patch).unwrap();
    ds.write_masked("m", &Region::new(&start, &rshape).unwrap(), Order::C, &vec![5i32; n], &vec![false; n]).unwrap();
    ds.commit().unwrap();
    check(&ds, &f, "after an update");
    ds.close().unwrap();
    check(&Dataset::open(&path).unwrap(), &f, "reopened");
}

/// A full read of a volume that also has tiles, whose extent the bricks
/// divide, reads the bricks, and only them: as many stored bytes as the
/// same read of the bricks named. (Where edge bricks reach beyond the
/// extent, tiles that do not can hold fewer elements, and are read.)
#[test]
fn a_full_read_of_a_tiled_volume_reads_only_the_bricks() {
    let dir = Scratch::new("layers-full-read");
    let shape = [32u64, 24, 40];
    let (path, mut b) = builder(&dir, "full.vds", &shape);
    b.variable(
        VariableBuilder::new("amp", DType::Float32, &["a0", "a1", "a2"])
            .chunk(&[8, 8, 8])
            .partitioning(&[1, 24, 40])
            .partitioning(&[32, 1, 40])
            .partitioning(&[32, 24, 1])
            .codec(Codec::NONE),
    );
    let mut ds = b.create(&path).unwrap();
    // No two chunks alike, so that none shares another's stored bytes.
    let data: Vec<f32> = (0..32 * 24 * 40).map(|i| i as f32 * 0.5 - 5.0).collect();
    let full = Region::full(&shape).unwrap();
    ds.write("amp", &full, Order::C, &data).unwrap();
    ds.close().unwrap();
    let mut out = vec![0f32; data.len()];
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.choose_partitioning("amp", 0, &full).unwrap(), 0);
    ds.read("amp", &full, Order::C, &mut out).unwrap();
    assert!(out == data);
    let chosen = ds.stored_bytes_read();
    let ds = Dataset::open(&path).unwrap();
    ds.read_lod("amp", 0, Some(0), &full, Order::C, &mut out).unwrap();
    assert_eq!(chosen, ds.stored_bytes_read());
    assert_eq!(chosen, data.len() as u64 * 4);
}
