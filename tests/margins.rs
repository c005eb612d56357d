//! Bricks with margins (SPEC.md 3.9): every brick holds its box plus the
//! margins around it, kept up to date by writes anywhere (including partial
//! writes in a neighbour), readable from one chunk; reads of ordinary
//! regions, levels of detail and other partitionings are unaffected.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

#[test]
fn bricks_carry_their_neighbourhood() {
    let dir = Scratch::new("margins");
    let mut rng = Rng::new(seed(0x3e61));
    for (shape, chunk, margin) in [
        (vec![23u64, 17, 11], vec![4u64, 5, 4], [1u64, 2u64]),
        (vec![30, 9], vec![8, 4], [3, 3]),
        (vec![7, 6, 5, 4], vec![3, 3, 2, 2], [0, 1]),
    ] {
        let n = shape.len();
        let names: Vec<String> = (0..n).map(|d| format!("a{d}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut b = DatasetBuilder::new();
        b.overwrite(true);
        for (d, &s) in shape.iter().enumerate() {
            b.axis(Axis::new(names[d], s));
        }
        let mut tile = vec![1u64; n];
        tile[n - 1] = shape[n - 1];
        b.variable(
            VariableBuilder::new("v", DType::Int32, &names)
                .chunk(&chunk)
                .margin(margin[0], margin[1])
                .partitioning(&tile)
                .levels_of_detail(2, &[], LodMethod::Nearest)
                .fill(-1i32)
                .codec(Codec::deflate(1)),
        );
        let path = dir.path("m.vds");
        let mut ds = b.create(&path).unwrap();
        let total = shape.iter().product::<u64>() as usize;
        let mut reference = vec![-1i32; total];
        // Random boxes, some with steps, in both orders, over two commits.
        for round in 0..12 {
            let start: Vec<u64> = shape.iter().map(|&s| rng.below(s)).collect();
            let step: Vec<u64> = (0..n).map(|_| 1 + rng.below(2)).collect();
            let count: Vec<u64> = (0..n).map(|d| 1 + rng.below((shape[d] - start[d]).div_ceil(step[d]))).collect();
            let m = count.iter().product::<u64>() as usize;
            let values: Vec<i32> = (0..m).map(|_| rng.below(100_000) as i32).collect();
            let fortran = round % 2 == 1;
            insert(&mut reference, &shape, &start, &count, &step, &values, fortran);
            let region = Region::new(&start, &count).unwrap().with_step(&step).unwrap();
            ds.write("v", &region, if fortran { Order::Fortran } else { Order::C }, &values).unwrap();
            if round == 5 {
                ds.commit().unwrap();
            }
        }
        ds.close().unwrap();
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.variable("v").unwrap().margin(), margin);
        let got: Vec<i32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::C).unwrap();
        assert!(got == reference, "ordinary reads of {shape:?}");
        let mut tiles = vec![0i32; total];
        ds.read_lod("v", 0, Some(1), &Region::full(&shape).unwrap(), Order::C, &mut tiles).unwrap();
        assert!(tiles == reference, "tiles of {shape:?}");
        // Every brick holds its box and margins; outside the variable, the fill value.
        let grid: Vec<u64> = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).collect();
        let padded: Vec<u64> = chunk.iter().map(|c| c + margin[0] + margin[1]).collect();
        for_each_index(&grid, |c| {
            let (brick, bshape) = ds.read_brick::<i32>("v", 0, c).unwrap();
            assert_eq!(bshape, padded);
            for_each_index(&padded, |l| {
                let g: Vec<i64> = (0..n).map(|d| (c[d] * chunk[d] + l[d]) as i64 - margin[0] as i64).collect();
                let inside = g.iter().zip(&shape).all(|(&x, &s)| x >= 0 && (x as u64) < s);
                let want = if inside { reference[c_index(&g.iter().map(|&x| x as u64).collect::<Vec<_>>(), &shape)] } else { -1 };
                assert_eq!(brick[c_index(l, &padded)], want, "brick {c:?} at {l:?} of {shape:?}");
            });
        });
        // Level 1 (nearest): every second sample, through bricks with margins and through tiles.
        let s1: Vec<u64> = shape.iter().map(|s| s.div_ceil(2)).collect();
        let want = extract(&reference, &shape, &vec![0; n], &s1, &vec![2; n], false);
        for part in [0, 1] {
            let mut l1 = vec![0i32; want.len()];
            ds.read_lod("v", 1, Some(part), &Region::full(&s1).unwrap(), Order::C, &mut l1).unwrap();
            assert!(l1 == want, "level 1 of {shape:?}, partitioning {part}");
        }
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
        let outside: Vec<u64> = grid.clone();
        assert_eq!(ds.read_brick::<i32>("v", 0, &outside).unwrap_err().kind(), ErrorKind::OutOfRange);
        assert_eq!(ds.read_brick::<i32>("v", 2, &vec![0; n]).unwrap_err().kind(), ErrorKind::OutOfRange);
    }
    let e = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("a", 10))
        .variable(VariableBuilder::new("v", DType::Int8, &["a"]).margin(65, 0))
        .create(dir.path("bad.vds"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn margins_outside_the_variable_read_as_fill_even_for_constant_bricks() {
    let dir = Scratch::new("margin-fill");
    let path = dir.path("c.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 10))
        .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[4]).margin(1, 1).fill(-1i32))
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&[10]).unwrap(), Order::C, &[7i32; 10]).unwrap();
    ds.commit().unwrap();
    // Brick 2 was constant; a partial write makes it stored again.
    ds.write("v", &Region::new(&[8], &[1]).unwrap(), Order::C, &[5i32]).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_brick::<i32>("v", 0, &[0]).unwrap().0, [-1, 7, 7, 7, 7, 7]);
    assert_eq!(ds.read_brick::<i32>("v", 0, &[1]).unwrap().0, [7, 7, 7, 7, 7, 5]);
    assert_eq!(ds.read_brick::<i32>("v", 0, &[2]).unwrap().0, [7, 5, 7, -1, -1, -1]);
}
