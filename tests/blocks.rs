//! Chunks made of blocks (SPEC.md 6.5): every read returns what a reference
//! array in memory holds, whichever blocks it touches; partial reads read
//! fewer stored bytes than whole chunks; damage to a block is reported by
//! the reads that need it and by verify; bad block shapes are refused.

mod common;
use common::{c_index, f_index, for_each_index, Rng, Scratch};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

const SHAPE: [u64; 3] = [70, 45, 60];

/// Smooth values with noise, one constant box and one fill box, as a
/// seismic volume with a dead zone would have.
fn reference() -> Vec<f32> {
    let mut rng = Rng::new(7);
    let mut v = vec![0f32; SHAPE.iter().product::<u64>() as usize];
    for_each_index(&SHAPE, |i| {
        let k = c_index(i, &SHAPE);
        v[k] = if i[0] < 16 && i[1] < 16 && i[2] < 16 {
            3.5
        } else if i[0] >= 48 && i[1] >= 32 && i[2] >= 32 {
            0.0
        } else {
            ((i[0] as f32 * 0.3).sin() + (i[2] as f32 * 0.11).cos()) * 1000.0 + (rng.below(100) as f32)
        };
    });
    v
}

/// A new container of one variable `var` over the three axes of SHAPE.
fn create_with(path: &std::path::Path, var: &VariableBuilder) -> Dataset {
    DatasetBuilder::new()
        .axis(Axis::new("inline", SHAPE[0]))
        .axis(Axis::new("crossline", SHAPE[1]))
        .axis(Axis::new("sample", SHAPE[2]))
        .variable(var)
        .create(path)
        .unwrap()
}

fn amplitude() -> VariableBuilder {
    VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "sample"])
}

fn create(path: &std::path::Path, codec: Codec, blocks: Option<&[u64]>, data: &[f32]) {
    let mut ds = create_with(path, amplitude().chunk(&[32, 32, 32]).codec(codec).blocks(blocks));
    ds.write("amplitude", &Region::full(&SHAPE).unwrap(), Order::C, data).unwrap();
    ds.close().unwrap();
}

fn random_region(rng: &mut Rng) -> Region {
    let mut start = [0u64; 3];
    let mut shape = [0u64; 3];
    let mut step = [1u64; 3];
    for d in 0..3 {
        step[d] = if rng.below(4) == 0 { 1 + rng.below(20) } else { 1 };
        start[d] = rng.below(SHAPE[d]);
        let most = (SHAPE[d] - 1 - start[d]) / step[d] + 1;
        let cap = if rng.below(3) == 0 { most } else { most.min(9) };
        shape[d] = 1 + rng.below(cap);
    }
    Region::new(&start, &shape).unwrap().with_step(&step).unwrap()
}

fn expected(data: &[f32], region: &Region, order: Order) -> Vec<f32> {
    let mut out = vec![0f32; region.shape().iter().product::<u64>() as usize];
    for_each_index(region.shape(), |i| {
        let src: Vec<u64> = (0..3).map(|d| region.start()[d] + i[d] * region.step()[d]).collect();
        let at = if order == Order::C { c_index(i, region.shape()) } else { f_index(i, region.shape()) };
        out[at] = data[c_index(&src, &SHAPE)];
    });
    out
}

#[test]
fn every_read_matches_the_reference_whatever_blocks_it_touches() {
    let dir = Scratch::new("blocks-reads");
    let data = reference();
    for (name, codec, blocks) in [
        ("none", Codec::NONE, [8u64, 8, 8]),
        ("deflate", Codec::deflate(4), [16, 16, 16]),
        ("zstd", Codec::zstd(1), [32, 32, 4]),
        ("uneven", Codec::deflate(1), [5, 7, 32]),
    ] {
        let path = dir.path(&format!("{name}.vds"));
        create(&path, codec, Some(&blocks), &data);
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.variable("amplitude").unwrap().block_shape(), Some(&blocks[..]));
        assert_eq!(ds.format_version(), [1, vds::FORMAT_MINOR]);
        let mut rng = Rng::new(common::seed(11));
        for round in 0..300 {
            let region = random_region(&mut rng);
            let order = if round % 3 == 0 { Order::Fortran } else { Order::C };
            let got: Vec<f32> = ds.read_vec("amplitude", &region, order).unwrap();
            assert!(got == expected(&data, &region, order), "{name}: region {region:?} in {order:?} order");
        }
        let all: Vec<f32> = ds.read_vec("amplitude", &Region::full(&SHAPE).unwrap(), Order::C).unwrap();
        assert!(all == data, "{name}: the whole volume");
        assert!(ds.verify_full().unwrap().is_ok(), "{name}");
    }
}

#[test]
fn a_trace_reads_a_few_blocks_not_whole_chunks() {
    let dir = Scratch::new("blocks-bytes");
    let data = reference();
    let (whole, blocked) = (dir.path("whole.vds"), dir.path("blocked.vds"));
    create(&whole, Codec::deflate(4), None, &data);
    create(&blocked, Codec::deflate(4), Some(&[8, 8, 8]), &data);
    let trace = Region::new(&[20, 20, 0], &[1, 1, SHAPE[2]]).unwrap();
    let read = |path: &std::path::Path| {
        let ds = Dataset::open(path).unwrap();
        let got: Vec<f32> = ds.read_vec("amplitude", &trace, Order::C).unwrap();
        assert!(got == expected(&data, &trace, Order::C));
        ds.stored_bytes_read()
    };
    let (w, b) = (read(&whole), read(&blocked));
    // Two 32^3 chunks against the blocks the trace crosses (8 of 32 per chunk) and their tables.
    assert!(b * 3 < w, "a trace read {b} stored bytes with blocks and {w} without");
    // A second read of the same trace is served by the cache.
    let ds = Dataset::open(&blocked).unwrap();
    let _: Vec<f32> = ds.read_vec("amplitude", &trace, Order::C).unwrap();
    let first = ds.stored_bytes_read();
    let _: Vec<f32> = ds.read_vec("amplitude", &trace, Order::C).unwrap();
    assert_eq!(ds.stored_bytes_read(), first);
}

#[test]
fn a_damaged_block_fails_the_reads_that_need_it_and_verify() {
    let dir = Scratch::new("blocks-damage");
    let data = reference();
    let path = dir.path("damaged.vds");
    create(&path, Codec::NONE, Some(&[8, 8, 8]), &data);
    // The value at (40, 40, 40) sits in a block of its own; find its bytes
    // (stored raw) and flip one.
    let bytes = std::fs::read(&path).unwrap();
    let target = data[c_index(&[40, 40, 40], &SHAPE)].to_le_bytes();
    let next = data[c_index(&[40, 40, 41], &SHAPE)].to_le_bytes();
    let pattern: Vec<u8> = target.iter().chain(&next).copied().collect();
    let at = bytes.windows(8).position(|w| w == pattern).expect("the raw block is in the file");
    let mut bad = bytes.clone();
    bad[at] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let e = ds.read_vec::<f32>("amplitude", &Region::new(&[40, 40, 40], &[1, 1, 1]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("chunk [1, 1, 1]") && e.to_string().contains("CRC32 mismatch"), "{e}");
    // Another block of the same chunk still reads.
    let fine = Region::new(&[33, 33, 33], &[2, 2, 2]).unwrap();
    assert!(ds.read_vec::<f32>("amplitude", &fine, Order::C).unwrap() == expected(&data, &fine, Order::C));
    let report = ds.verify().unwrap();
    assert!(!report.is_ok() && report.problems.iter().any(|p| p.to_string().contains("chunk [1, 1, 1]")), "{:?}", report.problems);
}

#[test]
fn levels_of_detail_and_partial_writes_keep_their_blocks() {
    let dir = Scratch::new("blocks-lod");
    let path = dir.path("lod.vds");
    let data = reference();
    let mut ds = create_with(
        &path,
        amplitude()
            .chunk(&[32, 32, 32])
            .codec(Codec::zstd(3))
            .blocks(Some(&[16, 16, 16]))
            .levels_of_detail(2, &["inline", "crossline", "sample"], LodMethod::Nearest)
            .partitioning(&[1, 45, 60]),
    );
    // Written in small pieces: partly covered chunks are read back, updated and re-encoded.
    let mut copy = data.clone();
    for i in 0..SHAPE[0] {
        let r = Region::new(&[i, 0, 0], &[1, SHAPE[1], SHAPE[2]]).unwrap();
        let start = c_index(&[i, 0, 0], &SHAPE);
        ds.write("amplitude", &r, Order::C, &data[start..start + (SHAPE[1] * SHAPE[2]) as usize]).unwrap();
    }
    ds.commit().unwrap();
    let one = Region::new(&[3, 3, 3], &[1, 1, 1]).unwrap();
    ds.write("amplitude", &one, Order::C, &[-7.0f32]).unwrap();
    copy[c_index(&[3, 3, 3], &SHAPE)] = -7.0;
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let all = Region::full(&SHAPE).unwrap();
    assert!(ds.read_vec::<f32>("amplitude", &all, Order::C).unwrap() == copy);
    // Level 1 takes every other sample; read it in pieces and whole.
    let half = [35u64, 23, 30];
    let lod1_all = Region::full(&half).unwrap();
    let mut whole = vec![0f32; half.iter().product::<u64>() as usize];
    ds.read_lod("amplitude", 1, Some(0), &lod1_all, Order::C, &mut whole).unwrap();
    for_each_index(&half, |i| {
        let src = [i[0] * 2, i[1] * 2, i[2] * 2];
        assert_eq!(whole[c_index(i, &half)], copy[c_index(&src, &SHAPE)], "level 1 at {i:?}");
    });
    let piece = Region::new(&[17, 5, 2], &[3, 4, 20]).unwrap();
    let mut got = vec![0f32; 3 * 4 * 20];
    ds.read_lod("amplitude", 1, Some(0), &piece, Order::C, &mut got).unwrap();
    for_each_index(piece.shape(), |i| {
        let at = [17 + i[0], 5 + i[1], 2 + i[2]];
        assert_eq!(got[c_index(i, piece.shape())], whole[c_index(&at, &half)]);
    });
    // The slab partitioning has no blocks of its own and reads the same values.
    let slab = Region::new(&[9, 0, 0], &[1, SHAPE[1], SHAPE[2]]).unwrap();
    let mut from_slabs = vec![0f32; (SHAPE[1] * SHAPE[2]) as usize];
    ds.read_lod("amplitude", 0, Some(1), &slab, Order::C, &mut from_slabs).unwrap();
    assert!(from_slabs == expected(&copy, &slab, Order::C));
    assert!(ds.verify_full().unwrap().is_ok());
}

#[test]
fn bad_block_shapes_are_refused_with_the_reason() {
    let dir = Scratch::new("blocks-bad");
    let try_blocks = |dtype: DType, blocks: &[u64], margin: bool| {
        let mut v = VariableBuilder::new("v", dtype, &["x", "y"]);
        v.chunk(&[64, 64]).blocks(Some(blocks));
        if margin {
            v.margin(1, 1);
        }
        DatasetBuilder::new().axis(Axis::new("x", 100)).axis(Axis::new("y", 100)).variable(&v).create(dir.path("bad.vds")).unwrap_err()
    };
    for (dtype, blocks, margin, says) in [
        (DType::Float32, &[0u64, 8][..], false, "1 to its chunk extent"),
        (DType::Float32, &[65, 8][..], false, "1 to its chunk extent"),
        (DType::Float32, &[8][..], false, "1 to its chunk extent"),
        (DType::Bool, &[8, 8][..], false, "numeric type"),
        (DType::Float32, &[8, 8][..], true, "no margins"),
    ] {
        let e = try_blocks(dtype, blocks, margin);
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(says), "{blocks:?}: {e}");
    }
    // More than 65,536 blocks a chunk.
    let e = DatasetBuilder::new()
        .axis(Axis::new("x", 1 << 20))
        .variable(VariableBuilder::new("v", DType::UInt8, &["x"]).chunk(&[1 << 20]).blocks(Some(&[8])))
        .create(dir.path("many.vds"))
        .unwrap_err();
    assert!(e.to_string().contains("more than 65536"), "{e}");
}

/// Without a block shape from its builder, a deflate or zstd variable whose
/// chunks hold 1 MiB or more is made of blocks of at most 128 KiB (SPEC.md
/// 3.1), lists the feature, and reads back what was written; smaller
/// chunks, other codecs, bool, margins and `blocks(None)` keep whole chunks.
#[test]
fn compressed_chunks_of_a_mebibyte_get_the_default_blocks() {
    let dir = Scratch::new("default-blocks");
    let data = reference();
    let cases: [(&str, VariableBuilder, Option<&[u64]>); 7] = [
        ("deflate 64^3", amplitude().chunk(&[64, 64, 64]).codec(Codec::deflate(1)).clone(), Some(&[32, 32, 32])),
        ("zstd 64^3", amplitude().chunk(&[64, 64, 64]).codec(Codec::zstd(1)).clone(), Some(&[32, 32, 32])),
        ("zstd, one chunk of 756 KiB", amplitude().chunk(&SHAPE).codec(Codec::zstd(1)).clone(), None),
        ("uncompressed 64^3", amplitude().chunk(&[64, 64, 64]).clone(), None),
        ("deflate 64^3, whole chunks asked for", amplitude().chunk(&[64, 64, 64]).codec(Codec::deflate(1)).blocks(None).clone(), None),
        ("deflate 64^3 with a margin", amplitude().chunk(&[64, 64, 64]).codec(Codec::deflate(1)).margin(1, 1).clone(), None),
        (
            "deflate 64^3 quantized to uint8 (256 KiB stored)",
            amplitude().chunk(&[64, 64, 64]).codec(Codec::deflate(1)).quantization(DType::UInt8, -3000.0, 3000.0).clone(),
            None,
        ),
    ];
    for (i, (what, var, want)) in cases.into_iter().enumerate() {
        let path = dir.path(&format!("d{i}.vds"));
        let mut ds = create_with(&path, &var);
        ds.write("amplitude", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
        ds.close().unwrap();
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.variables()[0].block_shape(), want, "{what}");
        let desc: vds::serde_json::Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
        let incompat = desc["features"]["incompat"].clone();
        assert_eq!(incompat.as_array().unwrap().iter().any(|f| f == "blocks"), want.is_some(), "{what}: {incompat}");
        let got: Vec<f32> = ds.read_vec("amplitude", &Region::full(&SHAPE).unwrap(), Order::C).unwrap();
        if var_is_exact(what) {
            assert!(got == data, "{what}");
        }
        assert!(ds.verify_full().unwrap().is_ok(), "{what}");
    }
    // A bool variable of 1 MiB chunks with deflate stays whole.
    let path = dir.path("bool.vds");
    let ds = DatasetBuilder::new()
        .axis(Axis::new("x", 1024))
        .axis(Axis::new("y", 1024))
        .variable(VariableBuilder::new("b", DType::Bool, &["x", "y"]).chunk(&[1024, 1024]).codec(Codec::deflate(1)))
        .create(&path)
        .unwrap();
    assert_eq!(ds.variables()[0].block_shape(), None);
}

/// Quantized values come back within the quantization step, not exactly.
fn var_is_exact(what: &str) -> bool {
    !what.contains("quantized")
}
