//! Missing-value bitmasks (SPEC.md 3.8): written with the values, read back
//! exactly, cleared by plain writes, carried into every partitioning and
//! level of detail (averaging only present samples), and refused for
//! variables without a mask.

mod common;
use common::*;
use vds::{Axis, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

#[test]
fn masks_follow_the_values_into_every_layer() {
    let dir = Scratch::new("mask");
    let path = dir.path("m.vds");
    let shape = [13u64, 10];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", 13))
        .axis(Axis::new("b", 10))
        .variable(
            VariableBuilder::new("v", DType::Float64, &["a", "b"])
                .chunk(&[4, 4])
                .partitioning(&[1, 10])
                .levels_of_detail(2, &[], LodMethod::Average)
                .missing_mask(true),
        )
        .variable(&VariableBuilder::new("plain", DType::Int8, &["a"]))
        .create(&path)
        .unwrap();
    let mut rng = Rng::new(seed(0x3a5c));
    let mut values: Vec<f64> = (0..130).map(|i| i as f64 * 1.5 - 40.0).collect();
    let mut missing: Vec<bool> = (0..130).map(|_| rng.below(3) == 0).collect();
    // Fortran order on the way in.
    let vf = extract(&values, &shape, &[0, 0], &shape, &[1, 1], true);
    let mf = extract(&missing, &shape, &[0, 0], &shape, &[1, 1], true);
    ds.write_masked("v", &Region::full(&shape).unwrap(), Order::Fortran, &vf, &mf).unwrap();
    // A plain write marks its region present.
    ds.write("v", &Region::new(&[2, 3], &[2, 2]).unwrap(), Order::C, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    insert(&mut values, &shape, &[2, 3], &[2, 2], &[1, 1], &[1.0, 2.0, 3.0, 4.0], false);
    insert(&mut missing, &shape, &[2, 3], &[2, 2], &[1, 1], &[false; 4], false);
    assert_eq!(
        ds.write_masked("plain", &Region::full(&[13]).unwrap(), Order::C, &[0i8; 13], &[false; 13]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let zeros = vec![0f64; 130];
    assert_eq!(
        ds.write_masked("v", &Region::full(&shape).unwrap(), Order::C, &zeros, &missing[..10]).unwrap_err().kind(),
        ErrorKind::BufferTooSmall
    );
    ds.close().unwrap();

    let ds = Dataset::open(&path).unwrap();
    assert!(ds.variable("v").unwrap().has_mask());
    let full = Region::full(&shape).unwrap();
    let got: Vec<f64> = ds.read_vec("v", &full, Order::C).unwrap();
    assert_eq!(got, values);
    for part in [0, 1] {
        assert_eq!(ds.read_mask("v", 0, Some(part), &full, Order::C).unwrap(), missing, "partitioning {part}");
    }
    // Level 1 (7 x 5): pairs along a, then along b; a missing sample is skipped, two make a missing one.
    let reduce = |vals: &[f64], miss: &[bool], s: &[u64], d: usize| {
        let mut ns = s.to_vec();
        ns[d] = s[d].div_ceil(2);
        let n = ns.iter().product::<u64>() as usize;
        let (mut v2, mut m2) = (vec![0f64; n], vec![false; n]);
        for_each_index(&ns, |idx| {
            let mut a = idx.to_vec();
            a[d] *= 2;
            let (x, mx) = (vals[c_index(&a, s)], miss[c_index(&a, s)]);
            let k = c_index(idx, &ns);
            if a[d] + 1 == s[d] {
                (v2[k], m2[k]) = (x, mx);
                return;
            }
            a[d] += 1;
            let (y, my) = (vals[c_index(&a, s)], miss[c_index(&a, s)]);
            (v2[k], m2[k]) = match (mx, my) {
                (true, true) => (x, true),
                (true, false) => (y, false),
                (false, true) => (x, false),
                _ => ((x + y) / 2.0, false),
            };
        });
        (v2, m2, ns)
    };
    let (v1, m1, s1) = reduce(&values, &missing, &shape, 0);
    let (v1, m1, s1) = reduce(&v1, &m1, &s1, 1);
    assert_eq!(s1, [7, 5]);
    for part in [0u8, 1] {
        let region = Region::full(&s1).unwrap();
        let mut got = vec![0f64; 35];
        ds.read_lod("v", 1, Some(part), &region, Order::C, &mut got).unwrap();
        let mask = ds.read_mask("v", 1, Some(part), &region, Order::C).unwrap();
        assert_eq!(mask, m1, "level 1 mask, partitioning {part}");
        for k in 0..35 {
            if !m1[k] {
                assert_eq!(got[k], v1[k], "level 1 value {k}, partitioning {part}");
            }
        }
    }
    assert_eq!(ds.read_mask("plain", 0, None, &Region::full(&[13]).unwrap(), Order::C).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let report = ds.verify_full().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let desc: vds::serde_json::Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
    assert!(desc["features"]["ro_compat"].as_array().unwrap().contains(&vds::serde_json::json!("missing_mask")));
}
