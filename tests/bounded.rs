//! The bounded codec (SPEC.md 6.6) through the dataset: every value read
//! back is within the tolerance of the value last written to its position,
//! checked against an in-memory copy of the array, including after partial
//! rewrites of chunks that hold approximations already; specials come back
//! bit for bit; the file announces the feature; misuse is refused.
#![cfg(feature = "zstd")]

mod common;
use common::{Rng, Scratch};
use vds::{Axis, Codec, Compression, DType, Dataset, DatasetBuilder, ErrorKind, Order, Predictor, Region, VariableBuilder};

/// |x - y| <= t exactly (x, y float32, whose difference float64 holds
/// exactly when it matters: a difference beyond float64's rounding is far
/// beyond any tolerance used here).
fn within(x: f32, y: f32, t: f64) -> bool {
    (f64::from(x) - f64::from(y)).abs() <= t
}

/// A seismic-like volume: dipping reflectors with noise.
fn volume(rng: &mut Rng, n: [usize; 3]) -> Vec<f32> {
    let mut v = Vec::with_capacity(n[0] * n[1] * n[2]);
    for i in 0..n[0] {
        for j in 0..n[1] {
            for k in 0..n[2] {
                let t = k as f32 - 0.4 * i as f32 + 0.25 * j as f32;
                let noise = (rng.below(2001) as f32 - 1000.0) * 1e-4;
                v.push((0.3 * t).sin() * (0.05 * t).cos() * 2.0 + noise);
            }
        }
    }
    v
}

fn check(ds: &Dataset, name: &str, want: &[f32], shape: &[u64], tol: f64, exact: &[f32], when: &str) {
    let got: Vec<f32> = ds.read_vec(name, &Region::full(shape).unwrap(), Order::C).unwrap();
    assert_eq!(got.len(), want.len());
    for (n, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !w.is_finite() || exact.iter().any(|e| e.to_bits() == w.to_bits()) {
            assert_eq!(g.to_bits(), w.to_bits(), "{when}: element {n}: {g} for {w}");
        } else {
            assert!(within(g, w, tol), "{when}: element {n}: {g} for {w}, beyond {tol}");
        }
    }
}

/// Writes `data` to variable "a" in the box at `start` of `count`, and
/// records it in `want` (the whole variable, C order, of `shape`).
fn write_tracked(ds: &mut Dataset, want: &mut [f32], shape: &[u64], start: &[u64], count: &[u64], data: &[f32]) {
    ds.write("a", &Region::new(start, count).unwrap(), Order::C, data).unwrap();
    let mut k = 0;
    common::for_each_index(count, |idx| {
        let at: Vec<u64> = idx.iter().zip(start).map(|(&i, &s)| i + s).collect();
        want[common::c_index(&at, shape)] = data[k];
        k += 1;
    });
}

#[test]
fn values_stay_within_the_bound_through_whole_and_partial_writes() {
    within_the_bound_through_writes("bounded-writes", Codec::bounded(0.02), None);
}

/// The same with the Lorenzo predictor of format 1.5.
#[test]
fn values_stay_within_the_bound_by_lorenzo_prediction() {
    within_the_bound_through_writes("bounded-lorenzo", Codec::bounded_with(0.02, Predictor::Lorenzo), None);
}

/// The same with the interpolation predictor of format 1.6.
#[test]
fn values_stay_within_the_bound_by_the_interpolation_of_format_1_6() {
    within_the_bound_through_writes("bounded-interp", Codec::bounded_with(0.02, Predictor::Interpolation), None);
}

/// The same with the anchored interpolation of format 1.7.
#[test]
fn values_stay_within_the_bound_by_the_anchored_interpolation_of_format_1_7() {
    within_the_bound_through_writes("bounded-anchored", Codec::bounded_with(0.02, Predictor::Anchored), None);
}

/// The same with chunks made of blocks (format 1.6): each block a bounded
/// stream of its own, the edge blocks clipped.
#[test]
fn values_stay_within_the_bound_in_blocks() {
    within_the_bound_through_writes("bounded-blocks", Codec::bounded(0.02), Some(&[8, 8, 12]));
}

/// The chunks of a bounded variable made of blocks are block tables whose
/// blocks are bounded streams; a Lorenzo variable cannot have blocks.
#[test]
fn blocks_hold_bounded_streams_with_interpolation_only() {
    let dir = Scratch::new("bounded-block-table");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .axis(Axis::new("y", 64))
        .variable(
            VariableBuilder::new("v", DType::Float32, &["x", "y"]).chunk(&[64, 64]).blocks(Some(&[32, 32])).codec(Codec::bounded(1e-3)),
        )
        .create(dir.path("b.vds"))
        .unwrap();
    let want: Vec<f32> = (0..64 * 64).map(|k| ((k / 64) as f32 * 0.1).sin() + ((k % 64) as f32 * 0.07).cos()).collect();
    ds.write("v", &Region::full(&[64, 64]).unwrap(), Order::C, &want).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(dir.path("b.vds")).unwrap();
    assert_eq!(ds.variables()[0].block_shape(), Some(&[32u64, 32][..]));
    // Bounded streams, not zstd, whose float bytes would hardly shrink.
    let s = ds.variable_stats(0).unwrap();
    assert!(s.stored_bytes * 4 < s.raw_bytes, "{} stored bytes for {} raw", s.stored_bytes, s.raw_bytes);
    // A 4x4 box in one corner reads the table and one block of the four.
    let got: Vec<f32> = ds.read_vec("v", &Region::new(&[40, 40], &[4, 4]).unwrap(), Order::C).unwrap();
    for (k, g) in got.iter().enumerate() {
        assert!(within(*g, want[(40 + k / 4) * 64 + 40 + k % 4], 1e-3), "element {k}");
    }
    assert!(ds.stored_bytes_read() < s.stored_bytes / 2, "{} of {} bytes read", ds.stored_bytes_read(), s.stored_bytes);
    check(&ds, "v", &want, &[64, 64], 1e-3, &[], "whole");
    assert!(ds.verify().unwrap().is_ok());
    let e = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .variable(
            VariableBuilder::new("v", DType::Float32, &["x"]).blocks(Some(&[32])).codec(Codec::bounded_with(1e-3, Predictor::Lorenzo)),
        )
        .create(dir.path("l.vds"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("interpolation"), "{e}");
}

/// Other partitionings are built from decoded values: stored lossily again
/// they would be up to twice the tolerance off. Every partitioning reads
/// within the bound, after whole and partial writes, with either predictor.
#[test]
fn every_partitioning_stays_within_the_bound() {
    for (name, predictor) in [
        ("parts-graded", Predictor::Graded),
        ("parts-anchored", Predictor::Anchored),
        ("parts-interp", Predictor::Interpolation),
        ("parts-lorenzo", Predictor::Lorenzo),
    ] {
        let codec = Codec::bounded_with(0.5, predictor);
        let dir = Scratch::new(name);
        let shape = [24u64, 20, 40];
        let mut rng = Rng::new(common::seed(5));
        let mut want: Vec<f32> = (0..24 * 20 * 40).map(|_| (rng.below(20001) as f32 - 10000.0) * 1e-3).collect();
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("il", shape[0]))
            .axis(Axis::new("xl", shape[1]))
            .axis(Axis::new("t", shape[2]))
            .variable(
                VariableBuilder::new("a", DType::Float32, &["il", "xl", "t"])
                    .chunk(&[8, 8, 16])
                    .partitioning(&[1, 20, 40])
                    .partitioning(&[24, 20, 1])
                    .codec(codec),
            )
            .create(dir.path("p.vds"))
            .unwrap();
        ds.write("a", &Region::full(&shape).unwrap(), Order::C, &want).unwrap();
        ds.commit().unwrap();
        let data: Vec<f32> = (0..9 * 11 * 17).map(|_| (rng.below(20001) as f32 - 10000.0) * 1e-3).collect();
        write_tracked(&mut ds, &mut want, &shape, &[3, 2, 5], &[9, 11, 17], &data);
        ds.close().unwrap();
        let ds = Dataset::open(dir.path("p.vds")).unwrap();
        for p in 0..3u8 {
            let mut got = vec![0f32; want.len()];
            ds.read_lod("a", 0, Some(p), &Region::full(&shape).unwrap(), Order::C, &mut got).unwrap();
            let worst = got.iter().zip(&want).map(|(&g, &w)| (f64::from(g) - f64::from(w)).abs()).fold(0.0, f64::max);
            assert!(worst <= 0.5, "{name}: partitioning {p} is {worst} off, beyond 0.5");
        }
        assert!(ds.verify().unwrap().is_ok());
    }
}

/// A large chunk of nearly all zero steps is a few dozen bytes of runs:
/// the reader's bound on how much a stored byte may expand admits it.
#[test]
fn a_large_chunk_of_zero_steps_reads_back() {
    let dir = Scratch::new("bounded-expansion");
    let n = 2048u64;
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", n))
        .axis(Axis::new("x", n))
        .variable(VariableBuilder::new("v", DType::Float32, &["y", "x"]).chunk(&[n, n]).codec(Codec::bounded(1.0)))
        .create(dir.path("ramp.vds"))
        .unwrap();
    let want: Vec<f32> = (0..n * n).map(|k| (k / n) as f32 * 1e-3 + (k % n) as f32 * 1e-4).collect();
    ds.write("v", &Region::full(&[n, n]).unwrap(), Order::C, &want).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(dir.path("ramp.vds")).unwrap();
    let s = ds.variable_stats(0).unwrap();
    assert!(s.stored_bytes * 262_144 + 1024 < s.raw_bytes, "{} stored bytes: not beyond the old bound", s.stored_bytes);
    check(&ds, "v", &want, &[n, n], 1.0, &[], "a 16 MiB chunk in a few bytes");
}

fn within_the_bound_through_writes(name: &str, codec: Codec, blocks: Option<&[u64]>) {
    let dir = Scratch::new(name);
    let path = dir.path("v.vds");
    let n = [40usize, 36, 80];
    let shape = [40u64, 36, 80];
    let Compression::Bounded { tolerance: tol, predictor, .. } = codec.compression else { panic!("{codec:?}") };
    let mut rng = Rng::new(common::seed(11));
    let mut want = volume(&mut rng, n);
    // Specials: NaN, infinities, the fill and no-value markers.
    for (k, x) in want.iter_mut().enumerate() {
        match k % 211 {
            0 => *x = f32::NAN,
            1 => *x = f32::INFINITY,
            2 => *x = -999.25,
            3 => *x = 1e30,
            _ => {}
        }
    }
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("il", shape[0]))
        .axis(Axis::new("xl", shape[1]))
        .axis(Axis::new("t", shape[2]))
        .variable(
            VariableBuilder::new("a", DType::Float32, &["il", "xl", "t"])
                .chunk(&[16, 16, 32])
                .fill(-999.25f32)
                .no_value(1e30f32)
                .blocks(blocks)
                .codec(codec),
        )
        .create(&path)
        .unwrap();
    ds.write("a", &Region::full(&shape).unwrap(), Order::C, &want).unwrap();
    ds.commit().unwrap();
    let exact = [-999.25f32, 1e30];
    check(&ds, "a", &want, &shape, tol, &exact, "written whole");
    let s = ds.variable_stats(0).unwrap();
    assert!(s.raw_bytes > 3 * s.stored_bytes, "ratio {} / {}", s.raw_bytes, s.stored_bytes);

    // Partial rewrites, some committed, some held: the values not rewritten
    // must not drift beyond the bound of what was first written.
    for round in 0..12 {
        let start: Vec<u64> = shape.iter().map(|&d| rng.below(d)).collect();
        let count: Vec<u64> = start.iter().zip(&shape).map(|(&s, &d)| 1 + rng.below((d - s).min(20))).collect();
        let region = Region::new(&start, &count).unwrap();
        let total: u64 = count.iter().product();
        let data: Vec<f32> = (0..total).map(|_| (rng.below(20001) as f32 - 10000.0) * 1e-3).collect();
        write_tracked(&mut ds, &mut want, &shape, &start, &count, &data);
        if round % 3 == 0 {
            ds.commit().unwrap();
        }
        check(&ds, "a", &want, &shape, tol, &exact, &format!("rewrite {round} of {region:?}"));
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    check(&ds, "a", &want, &shape, tol, &exact, "reopened");
    assert!(ds.verify().unwrap().is_ok());
    // The descriptor names the codec, its tolerance and the feature.
    let head = std::fs::read(&path).unwrap();
    let line = String::from_utf8_lossy(&head[..head.iter().skip(8).position(|&c| c == b'\n').unwrap() + 8]).to_string();
    assert!(line.contains(r#""id":"bounded","level":3,"shuffle":false,"tolerance":0.02"#), "{line}");
    let (interpolation, anchored, graded) =
        (predictor == Predictor::Interpolation, predictor == Predictor::Anchored, predictor == Predictor::Graded);
    assert_eq!(line.contains(r#""predictor":"interpolation""#), interpolation, "{line}");
    assert_eq!(line.contains("bounded_interpolation"), interpolation, "{line}");
    assert_eq!(line.contains(r#""predictor":"anchored""#), anchored, "{line}");
    assert_eq!(line.contains("bounded_anchored"), anchored, "{line}");
    assert_eq!(line.contains(r#""predictor":"graded""#), graded, "{line}");
    assert_eq!(line.contains("bounded_graded"), graded, "{line}");
    assert!(line.contains(r#""bounded_codec""#), "{line}");
    assert_eq!(line.contains(r#""blocks""#), blocks.is_some(), "{line}");
    assert_eq!(ds.format_version(), [1, 8]);
}

#[test]
fn float64_and_levels_of_detail() {
    let dir = Scratch::new("bounded-f64");
    let shape = [64u64, 50];
    let tol = 1e-9;
    let want: Vec<f64> = (0..64 * 50).map(|k| ((k / 50) as f64 * 0.1).sin() * 1e3 + ((k % 50) as f64).sqrt()).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .axis(Axis::new("y", 50))
        .variable(VariableBuilder::new("d", DType::Float64, &["x", "y"]).chunk(&[32, 25]).codec(Codec::bounded(tol)).levels_of_detail(
            2,
            &["x", "y"],
            vds::LodMethod::Average,
        ))
        .create(dir.path("d.vds"))
        .unwrap();
    ds.write("d", &Region::full(&shape).unwrap(), Order::C, &want).unwrap();
    ds.commit().unwrap();
    let got: Vec<f64> = ds.read_vec("d", &Region::full(&shape).unwrap(), Order::C).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= tol, "{g} for {w}");
    }
    // Level 1 averages 2x2 of the decoded level 0, each within tol, so
    // the average is within tol of the true average (plus its rounding).
    let mut lod = vec![0f64; 32 * 25];
    ds.read_lod("d", 1, None, &Region::full(&[32, 25]).unwrap(), Order::C, &mut lod).unwrap();
    for (k, &g) in lod.iter().enumerate() {
        let (i, j) = (k / 25, k % 25);
        let avg =
            (want[2 * i * 50 + 2 * j] + want[2 * i * 50 + 2 * j + 1] + want[(2 * i + 1) * 50 + 2 * j] + want[(2 * i + 1) * 50 + 2 * j + 1])
                / 4.0;
        assert!((g - avg).abs() <= 2.0 * tol + 1e-12, "level 1 at {k}: {g} for {avg}");
    }
    assert!(ds.verify().unwrap().is_ok());
}

#[test]
fn misuse_is_refused() {
    let dir = Scratch::new("bounded-misuse");
    let create = |dtype: DType, codec: Codec| {
        DatasetBuilder::new()
            .axis(Axis::new("x", 10))
            .variable(VariableBuilder::new("v", dtype, &["x"]).codec(codec))
            .create(dir.path("m.vds"))
    };
    for dtype in [DType::Int16, DType::UInt8, DType::Bool, DType::Int64] {
        let e = create(dtype, Codec::bounded(0.1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{dtype}: {e}");
        assert!(e.to_string().contains("float32 or float64"), "{e}");
    }
    for tol in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e301] {
        let e = create(DType::Float32, Codec::bounded(tol)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{tol}: {e}");
    }
    let e = DatasetBuilder::new()
        .axis(Axis::new("x", 10))
        .variable(VariableBuilder::new("v", DType::Float32, &["x"]).quantization(DType::UInt8, 0.0, 1.0).codec(Codec::bounded(0.1)))
        .create(dir.path("q.vds"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // A relative tolerance is resolved to the absolute bound the file keeps.
    let c = Codec::bounded_relative(0.001, -2.0, 3.0);
    assert_eq!(c.compression, Compression::Bounded { tolerance: 0.001 * 5.0, level: 3, predictor: Predictor::Graded });
    let ds = create(DType::Float32, c).unwrap();
    assert_eq!(ds.variables()[0].codec(), c);
}

/// Chunks that do not compress or contain nothing but outliers are stored
/// losslessly, and read back exactly.
#[test]
fn incompressible_chunks_are_stored_losslessly() {
    let dir = Scratch::new("bounded-noise");
    let mut rng = Rng::new(common::seed(5));
    let want: Vec<f32> = (0..4096).map(|_| f32::from_bits(rng.next() as u32)).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 4096))
        .variable(VariableBuilder::new("v", DType::Float32, &["x"]).chunk(&[1024]).codec(Codec::bounded(1e-30)))
        .create(dir.path("n.vds"))
        .unwrap();
    ds.write("v", &Region::full(&[4096]).unwrap(), Order::C, &want).unwrap();
    ds.commit().unwrap();
    check(&ds, "v", &want, &[4096], 1e-30, &[], "noise");
}
