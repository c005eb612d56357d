//! Growable axes (SPEC.md 3.10): resizing and appending in 1-D to 6-D with
//! edge chunks, interleaved with writes, reads and commits, against a
//! reference array; levels of detail, partitionings, margins and masks
//! follow; shrinking removes chunks so that growing again reads the fill
//! value; rollback and reopening.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

const FILL: i32 = -7;

/// The reference after a resize: overlapping samples kept, new ones `fill`.
fn resized<T: Copy>(data: &[T], shape: &[u64], new_shape: &[u64], fill: T) -> Vec<T> {
    let mut out = vec![fill; new_shape.iter().product::<u64>() as usize];
    let common: Vec<u64> = shape.iter().zip(new_shape).map(|(a, b)| *a.min(b)).collect();
    for_each_index(&common, |i| out[c_index(i, new_shape)] = data[c_index(i, shape)]);
    out
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|d| format!("a{d}")).collect()
}

/// Random values, or one value for the whole region (constant chunks).
fn values(rng: &mut Rng, m: usize) -> Vec<i32> {
    if rng.below(3) == 0 {
        let c = rng.below(50) as i32;
        vec![c; m]
    } else {
        (0..m).map(|_| rng.below(100_000) as i32).collect()
    }
}

#[test]
fn growth_and_shrinking_along_every_axis_match_a_reference() {
    let dir = Scratch::new("growth");
    let mut rng = Rng::new(seed(0x6e0a));
    for n in 1..=6usize {
        let max = [40u64, 14, 9, 7, 5, 4][n - 1];
        let names = names(n);
        let axes: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut shape: Vec<u64> = (0..n).map(|_| 1 + rng.below(max - 1)).collect();
        let chunk: Vec<u64> = (0..n).map(|_| 1 + rng.below(3)).collect();
        let tile: Vec<u64> = chunk.iter().map(|c| c + 1).collect();
        let mut b = DatasetBuilder::new();
        b.overwrite(true);
        for d in 0..n {
            b.axis(Axis::new(&names[d], shape[d]).growable(Some(max)));
        }
        let codec = if n % 2 == 0 { Codec::deflate(1) } else { Codec::NONE };
        b.variable(
            VariableBuilder::new("v", DType::Int32, &axes)
                .chunk(&chunk)
                .fill(FILL)
                .codec(codec)
                .levels_of_detail(2, &axes, LodMethod::Average)
                .partitioning(&tile),
        );
        let path = dir.path(&format!("g{n}.vds"));
        let mut ds = b.create(&path).unwrap();
        let mut reference = vec![FILL; shape.iter().product::<u64>() as usize];
        let check = |ds: &Dataset, reference: &[i32], shape: &[u64], what: &str| {
            assert_eq!(ds.variable("v").unwrap().shape(), shape, "{what}");
            let got: Vec<i32> = ds.read_vec("v", &Region::full(shape).unwrap(), Order::C).unwrap();
            assert!(got == reference, "{n}-D {what}: level 0 of {shape:?}");
        };
        let check_layers = |ds: &Dataset, reference: &[i32], shape: &[u64], what: &str| {
            let (l1, s1) = halve_i32(reference, shape, &vec![true; n], true);
            for part in [0, 1] {
                let mut got = vec![0i32; l1.len()];
                ds.read_lod("v", 1, Some(part), &Region::full(&s1).unwrap(), Order::C, &mut got).unwrap();
                assert!(got == l1, "{n}-D {what}: level 1 of {shape:?}, partitioning {part}");
                let mut got0 = vec![0i32; reference.len()];
                ds.read_lod("v", 0, Some(part), &Region::full(shape).unwrap(), Order::C, &mut got0).unwrap();
                assert!(got0 == reference, "{n}-D {what}: level 0 of {shape:?}, partitioning {part}");
            }
        };
        for op in 0..60 {
            match rng.below(8) {
                0..=2 => {
                    let start: Vec<u64> = shape.iter().map(|&s| rng.below(s)).collect();
                    let count: Vec<u64> = (0..n).map(|d| 1 + rng.below(shape[d] - start[d])).collect();
                    let m = count.iter().product::<u64>() as usize;
                    let vals = values(&mut rng, m);
                    let fortran = rng.below(2) == 1;
                    insert(&mut reference, &shape, &start, &count, &vec![1; n], &vals, fortran);
                    let order = if fortran { Order::Fortran } else { Order::C };
                    ds.write("v", &Region::new(&start, &count).unwrap(), order, &vals).unwrap();
                }
                3 | 4 => {
                    let d = rng.below(n as u64) as usize;
                    let mut new_shape = shape.clone();
                    new_shape[d] = 1 + rng.below(max);
                    ds.resize_axis(&names[d], new_shape[d]).unwrap();
                    reference = resized(&reference, &shape, &new_shape, FILL);
                    shape = new_shape;
                    check(&ds, &reference, &shape, &format!("op {op}: resize of axis {d}"));
                }
                5 => {
                    let d = rng.below(n as u64) as usize;
                    let k = 1 + rng.below(3);
                    if shape[d] + k > max {
                        continue;
                    }
                    let mut new_shape = shape.clone();
                    new_shape[d] += k;
                    let mut count = shape.clone();
                    count[d] = k;
                    let vals = values(&mut rng, count.iter().product::<u64>() as usize);
                    let mut start = vec![0; n];
                    start[d] = shape[d];
                    let region = ds.append("v", &names[d], Order::C, &vals).unwrap();
                    assert_eq!((region.start(), region.shape()), (&start[..], &count[..]));
                    reference = resized(&reference, &shape, &new_shape, FILL);
                    insert(&mut reference, &new_shape, &start, &count, &vec![1; n], &vals, false);
                    shape = new_shape;
                }
                6 => {
                    ds.commit().unwrap();
                    check_layers(&ds, &reference, &shape, &format!("op {op}: commit"));
                }
                _ => check(&ds, &reference, &shape, &format!("op {op}: read")),
            }
        }
        ds.close().unwrap();
        let ds = Dataset::open(&path).unwrap();
        check(&ds, &reference, &shape, "reopened");
        check_layers(&ds, &reference, &shape, "reopened");
        for (a, &s) in ds.axes().iter().zip(&shape) {
            assert_eq!((a.samples(), a.is_growable(), a.max_samples()), (s, true, Some(max)));
        }
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{n}-D: {:?}", report.problems);
    }
}

#[test]
fn shrinking_removes_chunks_from_the_index_and_growing_reads_fill() {
    let dir = Scratch::new("shrink");
    let path = dir.path("s.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("t", 10).growable(None))
        .axis(Axis::new("x", 4))
        .variable(VariableBuilder::new("v", DType::Float64, &["t", "x"]).chunk(&[3, 4]).fill(f64::NAN))
        .create(&path)
        .unwrap();
    let data: Vec<f64> = (0..40).map(f64::from).collect();
    ds.write("v", &Region::full(&[10, 4]).unwrap(), Order::C, &data).unwrap();
    ds.commit().unwrap();
    assert_eq!(ds.stats().unwrap().stored_chunks, 4);
    // 10 -> 4 samples: chunks 2 and 3 (samples 6..10) leave the index; chunk 1 keeps samples 3 and 4..6 as unspecified.
    ds.resize_axis("t", 4).unwrap();
    ds.commit().unwrap();
    assert_eq!(ds.stats().unwrap().stored_chunks, 2);
    let space = ds.space().unwrap();
    assert!(space.reclaimable_bytes > 0);
    // Growing again: everything past sample 4 is the fill value, including the rest of chunk 1.
    ds.resize_axis("t", 12).unwrap();
    let got: Vec<f64> = ds.read_vec("v", &Region::full(&[12, 4]).unwrap(), Order::C).unwrap();
    assert_eq!(&got[..16], &data[..16]);
    assert!(got[16..].iter().all(|x| x.is_nan()), "{got:?}");
    ds.commit().unwrap();
    // Compaction drops the removed chunks' bytes.
    ds.compact().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let got: Vec<f64> = ds.read_vec("v", &Region::full(&[12, 4]).unwrap(), Order::C).unwrap();
    assert_eq!(&got[..16], &data[..16]);
    assert!(got[16..].iter().all(|x| x.is_nan()));
    assert_eq!(ds.space().unwrap().reclaimable_bytes, 0);
    assert_eq!(ds.axes()[0].last(), 11.0, "the coordinates keep their spacing");
}

#[test]
fn bricks_with_margins_and_masks_follow_growth() {
    let dir = Scratch::new("grow-margins");
    let mut rng = Rng::new(seed(0x9a51));
    let chunk = [3u64, 4, 3];
    let margin = [1u64, 2];
    // Extents that are multiples of the chunk: growing puts new bricks right
    // after full ones, whose samples the new bricks' margins must copy.
    let mut shape = vec![6u64, 8, 3];
    let path = dir.path("m.vds");
    let mut b = DatasetBuilder::new();
    for (d, &s) in shape.iter().enumerate() {
        b.axis(Axis::new(&format!("a{d}"), s).growable(Some(16)));
    }
    let mut ds = b
        .variable(
            VariableBuilder::new("v", DType::Int32, &["a0", "a1", "a2"])
                .chunk(&chunk)
                .margin(margin[0], margin[1])
                .missing_mask(true)
                .fill(FILL)
                .codec(Codec::deflate(1)),
        )
        .create(&path)
        .unwrap();
    let mut reference = vec![FILL; 144];
    let mut missing = vec![false; 144];
    for round in 0..34 {
        if round == 0 {
            reference = (0..144).map(|i| i * 3 + 1).collect();
            ds.write("v", &Region::full(&shape).unwrap(), Order::C, &reference).unwrap();
        } else if round <= 3 || round % 3 == 2 {
            let d = if round <= 3 { round - 1 } else { rng.below(3) as usize };
            let mut new_shape = shape.clone();
            new_shape[d] = if round <= 3 { shape[d] + 2 } else { 1 + rng.below(16) };
            ds.resize_axis(&format!("a{d}"), new_shape[d]).unwrap();
            reference = resized(&reference, &shape, &new_shape, FILL);
            missing = resized(&missing, &shape, &new_shape, false);
            shape = new_shape;
        } else {
            let start: Vec<u64> = shape.iter().map(|&s| rng.below(s)).collect();
            let count: Vec<u64> = (0..3).map(|d| 1 + rng.below(shape[d] - start[d])).collect();
            let m = count.iter().product::<u64>() as usize;
            let vals = values(&mut rng, m);
            let miss: Vec<bool> = (0..m).map(|_| rng.below(4) == 0).collect();
            insert(&mut reference, &shape, &start, &count, &[1, 1, 1], &vals, false);
            insert(&mut missing, &shape, &start, &count, &[1, 1, 1], &miss, false);
            ds.write_masked("v", &Region::new(&start, &count).unwrap(), Order::C, &vals, &miss).unwrap();
        }
        if round % 5 == 4 {
            ds.commit().unwrap();
        }
        let full = Region::full(&shape).unwrap();
        let got: Vec<i32> = ds.read_vec("v", &full, Order::C).unwrap();
        assert!(got == reference, "round {round}: values of {shape:?}");
        let mask = ds.read_mask("v", 0, None, &full, Order::C).unwrap();
        assert!(mask == missing, "round {round}: mask of {shape:?}");
        // Every brick holds its box and margins; outside the variable, the fill value.
        let grid: Vec<u64> = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).collect();
        let padded: Vec<u64> = chunk.iter().map(|c| c + margin[0] + margin[1]).collect();
        for_each_index(&grid, |c| {
            let (brick, _) = ds.read_brick::<i32>("v", 0, c).unwrap();
            for_each_index(&padded, |l| {
                let g: Vec<i64> = (0..3).map(|d| (c[d] * chunk[d] + l[d]) as i64 - margin[0] as i64).collect();
                let inside = g.iter().zip(&shape).all(|(&x, &s)| x >= 0 && (x as u64) < s);
                let want = if inside { reference[c_index(&g.iter().map(|&x| x as u64).collect::<Vec<_>>(), &shape)] } else { FILL };
                assert_eq!(brick[c_index(l, &padded)], want, "round {round}: brick {c:?} at {l:?} of {shape:?}");
            });
        });
    }
    ds.close().unwrap();
    let report = Dataset::open(&path).unwrap().verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn resizing_is_checked_and_undone_by_rollback() {
    let dir = Scratch::new("grow-errors");
    let path = dir.path("e.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("t", 4).growable(Some(6)).coordinates(10.0, 16.0))
        .axis(Axis::new("x", 3))
        .axis(Axis::new("y", 2))
        .variable(VariableBuilder::new("v", DType::Int16, &["t", "x"]).chunk(&[2, 3]))
        .variable(&VariableBuilder::new("w", DType::Int16, &["x", "y"]))
        .create(&path)
        .unwrap();
    let kind = |r: vds::Result<()>| r.unwrap_err().kind();
    assert_eq!(kind(ds.resize_axis("x", 5)), ErrorKind::InvalidArgument, "not growable");
    assert_eq!(kind(ds.resize_axis("t", 7)), ErrorKind::OutOfRange, "beyond max_samples");
    assert_eq!(kind(ds.resize_axis("t", 0)), ErrorKind::InvalidArgument);
    assert_eq!(kind(ds.resize_axis("nope", 3)), ErrorKind::NotFound);
    assert_eq!(ds.append("w", "t", Order::C, &[1i16; 6]).unwrap_err().kind(), ErrorKind::InvalidArgument, "w does not span t");
    assert_eq!(ds.append("v", "t", Order::C, &[1i16; 4]).unwrap_err().kind(), ErrorKind::InvalidArgument, "not whole samples");
    assert_eq!(ds.append("v", "t", Order::C, &[1i32; 3]).unwrap_err().kind(), ErrorKind::TypeMismatch);
    assert_eq!(ds.append("v", "t", Order::C, &[1i16; 9]).unwrap_err().kind(), ErrorKind::OutOfRange, "4 + 3 > 6");
    assert_eq!(ds.variable("v").unwrap().shape(), [4, 3], "failed calls change nothing");
    ds.append("v", "t", Order::C, &[5i16; 6]).unwrap();
    assert_eq!(ds.variable("v").unwrap().shape(), [6, 3]);
    assert_eq!(ds.axes()[0].last(), 20.0, "spacing 2 kept");
    ds.rollback().unwrap();
    assert_eq!(ds.variable("v").unwrap().shape(), [4, 3]);
    ds.resize_axis("t", 5).unwrap();
    ds.close().unwrap();
    let ro = Dataset::open(&path).unwrap();
    assert_eq!(ro.variable("v").unwrap().shape(), [5, 3]);
    let json = ro.descriptor_json();
    assert!(json.contains(r#""samples":5,"first":10.0,"last":18.0,"growable":true,"max_samples":6"#), "{json}");
    let mut ro = ro;
    assert_eq!(ro.resize_axis("t", 6).unwrap_err().kind(), ErrorKind::ReadOnly);
    // A descriptor giving max_samples to a fixed axis is refused.
    let e = DatasetBuilder::new()
        .axis(Axis::new("t", 4).growable(Some(3)))
        .variable(&VariableBuilder::new("v", DType::Int16, &["t"]))
        .create(dir.path("bad.vds"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn several_axes_resize_at_once_or_not_at_all() {
    let dir = Scratch::new("grow-many");
    let path = dir.path("m.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", 4).growable(None))
        .axis(Axis::new("b", 4).growable(None))
        .axis(Axis::new("c", 3))
        .variable(VariableBuilder::new("v", DType::Int32, &["a", "b"]).chunk(&[2, 2]).fill(FILL))
        .create(&path)
        .unwrap();
    let data: Vec<i32> = (0..16).collect();
    ds.write("v", &Region::full(&[4, 4]).unwrap(), Order::C, &data).unwrap();
    let kind = |r: vds::Result<()>| r.unwrap_err().kind();
    // Refused for one axis, by its own rules or by the format's limits with all applied: none changes.
    assert_eq!(kind(ds.resize_axes(&[("a", 10), ("b", 1 << 61)])), ErrorKind::OutOfRange);
    assert_eq!(kind(ds.resize_axes(&[("a", 10), ("c", 5)])), ErrorKind::InvalidArgument, "c is not growable");
    assert_eq!(kind(ds.resize_axes(&[("a", 10), ("b", 0)])), ErrorKind::InvalidArgument);
    assert_eq!(kind(ds.resize_axes(&[("a", 10), ("a", 6)])), ErrorKind::InvalidArgument, "a given twice");
    assert_eq!(kind(ds.resize_axes(&[("a", 10), ("z", 6)])), ErrorKind::NotFound);
    assert_eq!(ds.variable("v").unwrap().shape(), [4, 4], "failed calls change nothing");
    // One shrinks while the other grows: the overlap kept, the rest the fill value.
    ds.resize_axes(&[("a", 7), ("b", 3)]).unwrap();
    let want = resized(&data, &[4, 4], &[7, 3], FILL);
    assert_eq!(ds.read_vec::<i32>("v", &Region::full(&[7, 3]).unwrap(), Order::C).unwrap(), want);
    ds.resize_axes(&[]).unwrap();
    ds.resize_axes(&[("b", 3)]).unwrap(); // unchanged
    ds.close().unwrap();
    let ro = Dataset::open(&path).unwrap();
    assert_eq!(ro.read_vec::<i32>("v", &Region::full(&[7, 3]).unwrap(), Order::C).unwrap(), want);
}
