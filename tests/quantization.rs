//! Quantized channels and no-value markers (SPEC.md 3.8): values stored as
//! uint8 or uint16 over a range come back within half a step, clamped
//! outside it; the stored integers can be read directly; levels of detail
//! average the integers and skip no-value samples; chunks entirely of
//! no-value are index entries only.

mod common;
use common::*;
use vds::serde_json::{json, Value};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

#[test]
fn quantized_values_are_within_half_a_step() {
    let dir = Scratch::new("quant");
    let mut rng = Rng::new(seed(0x9a17));
    for (storage, qmax) in [(DType::UInt8, 255.0), (DType::UInt16, 65535.0)] {
        let (min, max) = (-2.0f64, 3.0f64);
        let step = (max - min) / qmax;
        let path = dir.path("q.vds");
        let shape = [30u64, 21, 17];
        let mut ds = DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("a", 30))
            .axis(Axis::new("b", 21))
            .axis(Axis::new("c", 17))
            .variable(
                VariableBuilder::new("f", DType::Float32, &["a", "b", "c"])
                    .chunk(&[8, 8, 8])
                    .quantization(storage, min, max)
                    .levels_of_detail(2, &[], LodMethod::Average)
                    .codec(Codec::deflate(1)),
            )
            .variable(VariableBuilder::new("d", DType::Float64, &["a", "b"]).quantization(storage, min, max))
            .create(&path)
            .unwrap();
        let n = (30 * 21 * 17) as usize;
        // Inside the range, outside it, and the ends exactly.
        let mut values: Vec<f32> = (0..n).map(|_| (rng.below(7000) as f32 / 1000.0) - 3.0).collect();
        values[0] = min as f32;
        values[1] = max as f32;
        ds.write("f", &Region::full(&shape).unwrap(), Order::Fortran, &values).unwrap();
        let d: Vec<f64> = (0..30 * 21).map(|i| (i as f64) * 0.01 - 2.5).collect();
        ds.write("d", &Region::full(&[30, 21]).unwrap(), Order::C, &d).unwrap();
        ds.close().unwrap();
        let ds = Dataset::open(&path).unwrap();
        let q = ds.variable("f").unwrap().quantization().unwrap();
        assert_eq!((q.storage, q.min, q.max), (storage, min, max));
        let got: Vec<f32> = ds.read_vec("f", &Region::full(&shape).unwrap(), Order::Fortran).unwrap();
        let raw: Vec<u8> = if storage == DType::UInt8 {
            ds.read_vec::<u8>("f", &Region::full(&shape).unwrap(), Order::Fortran).unwrap()
        } else {
            ds.read_vec::<u16>("f", &Region::full(&shape).unwrap(), Order::Fortran).unwrap().iter().map(|&x| (x >> 8) as u8).collect()
        };
        for (i, (&x, &y)) in values.iter().zip(&got).enumerate() {
            let clamped = f64::from(x).clamp(min, max);
            assert!((f64::from(y) - clamped).abs() <= step / 2.0 + 1e-6, "{storage}: {x} came back as {y}");
            // The value is exactly what its integer stands for.
            let k = ((clamped - min) / step).round();
            assert_eq!(y, (min + k * step) as f32, "sample {i}");
            if storage == DType::UInt8 {
                assert_eq!(f64::from(raw[i]), k, "the stored integer of sample {i}");
            }
        }
        assert_eq!((got[0], got[1]), (min as f32, max as f32));
        let gd: Vec<f64> = ds.read_vec("d", &Region::full(&[30, 21]).unwrap(), Order::C).unwrap();
        assert!(d.iter().zip(&gd).all(|(x, y)| (y - x.clamp(min, max)).abs() <= step / 2.0 + 1e-12));
        // A quarter (uint8) or half (uint16) of float32's bytes are stored.
        let stats = ds.variable_stats("f").unwrap();
        assert_eq!(stats.raw_bytes, (4 * 3 * 3 + 2 * 2 * 2) * 512 * storage.size() as u64);
        // Level 1 averages the stored integers (rounded half away from zero), pair by pair.
        if storage == DType::UInt8 {
            let ints: Vec<u8> = ds.read_vec("f", &Region::full(&shape).unwrap(), Order::C).unwrap();
            let mut l1 = vec![0u8; 15 * 11 * 9];
            ds.read_lod("f", 1, None, &Region::full(&[15, 11, 9]).unwrap(), Order::C, &mut l1).unwrap();
            let mut cur: Vec<u32> = ints.iter().map(|&x| u32::from(x)).collect();
            let mut s = shape.to_vec();
            for d in 0..3 {
                let mut ns = s.clone();
                ns[d] = s[d].div_ceil(2);
                let mut next = vec![0u32; ns.iter().product::<u64>() as usize];
                for_each_index(&ns, |idx| {
                    let mut a = idx.to_vec();
                    a[d] *= 2;
                    let x = cur[c_index(&a, &s)];
                    next[c_index(idx, &ns)] = if a[d] + 1 < s[d] {
                        a[d] += 1;
                        (x + cur[c_index(&a, &s)]).div_ceil(2)
                    } else {
                        x
                    };
                });
                cur = next;
                s = ns;
            }
            assert!(cur.iter().zip(&l1).all(|(&a, &b)| a == u32::from(b)));
        }
        let desc: Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
        // A small container: the compact layout (SPEC.md 1.1) is listed too.
        assert_eq!(desc["features"]["incompat"], json!(["quantization", "compact_layout"]));
        assert_eq!(desc["variables"][0]["quantization"], json!({"storage": storage.name(), "range": [min, max]}));
        assert_eq!(ds.read_vec::<i16>("f", &Region::full(&shape).unwrap(), Order::C).unwrap_err().kind(), ErrorKind::TypeMismatch);
    }
    // Quantization needs a float variable, an unsigned 8- or 16-bit storage and a range.
    for (dtype, storage, min, max) in [
        (DType::Int32, DType::UInt8, 0.0, 1.0),
        (DType::Float32, DType::Int8, 0.0, 1.0),
        (DType::Float32, DType::UInt8, 1.0, 1.0),
        (DType::Float32, DType::UInt16, f64::NAN, 1.0),
    ] {
        let e = DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("a", 4))
            .variable(VariableBuilder::new("v", dtype, &["a"]).quantization(storage, min, max))
            .create(dir.path("bad.vds"))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
}

#[test]
fn no_value_chunks_are_entries_and_levels_skip_no_value() {
    let dir = Scratch::new("novalue");
    let path = dir.path("nv.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", 16))
        .axis(Axis::new("b", 8))
        .variable(VariableBuilder::new("v", DType::Int16, &["a", "b"]).chunk(&[4, 4]).no_value(-999i16).levels_of_detail(
            2,
            &["a"],
            LodMethod::Average,
        ))
        .create(&path)
        .unwrap();
    // Rows 0..8 hold data with scattered no-values; rows 8..16 are all no-value.
    let mut data = vec![-999i16; 16 * 8];
    for (i, v) in data.iter_mut().enumerate().take(64) {
        if i % 3 != 0 {
            *v = i as i16 * 10;
        }
    }
    ds.write("v", &Region::full(&[16, 8]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.variable("v").unwrap().no_value(), Some(vds::Scalar::Int(-999)));
    assert_eq!(ds.variable("v").unwrap().fill_value(), vds::Scalar::Int(-999), "no-value is the fill value unless one is set");
    let s = ds.stats().unwrap();
    // Level 0: 4 stored chunks with data, 4 of no-value only (fill entries); level 1 (8 x 8): 4 chunks,
    // 2 of them no-value only.
    assert_eq!((s.stored_chunks, s.fill_chunks), (4 + 2, 4 + 2), "{s:?}");
    let mut l1 = vec![0i16; 8 * 8];
    ds.read_lod("v", 1, None, &Region::full(&[8, 8]).unwrap(), Order::C, &mut l1).unwrap();
    for i in 0..8 {
        for j in 0..8 {
            let (x, y) = (data[2 * i * 8 + j], data[(2 * i + 1) * 8 + j]);
            let want = match (x, y) {
                (-999, y) => y,
                (x, -999) => x,
                (x, y) => ((i32::from(x) + i32::from(y)) as f64 / 2.0).round() as i16,
            };
            assert_eq!(l1[i * 8 + j], want, "level 1 at {i},{j}");
        }
    }
    let desc: Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
    assert!(desc["features"]["compat"].as_array().unwrap().contains(&json!("no_value")));
}
