//! Chunks made of blocks (SPEC.md 6.5) against hostile input and unusual
//! use: block tables that lie (with a matching table CRC32), constant
//! blocks of every type with NaN payloads and -0.0, stored lengths equal
//! to the table's, descriptors whose `blocks` member is wrong or gone,
//! single-element reads at every position, growth, fragments, compaction,
//! deduplication and quantization. Every read is compared with a reference
//! array in memory, and every damaged file must give `Corrupt` naming the
//! chunk, never a panic or other values.

mod common;
use common::{c_index, crc32, f_index, for_each_index, head_len, slot_size, Rng, Scratch};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Order, Region, VariableBuilder};

/// Recomputes the CRC32 of every commit slot of a container image after
/// its fields were edited, and sets their descriptor CRC32 to `desc_crc`
/// when given (the descriptor stays where it is, in the head).
fn reseal_slots(bytes: &mut [u8], desc_crc: Option<u32>) {
    let (h, size) = (head_len(bytes), slot_size(bytes));
    for at in [h, h + size] {
        if !bytes[at..].starts_with(b"VDSCOMIT") {
            continue;
        }
        if let Some(c) = desc_crc {
            bytes[at + 56..at + 60].copy_from_slice(&c.to_le_bytes());
        }
        let crc = crc32(&bytes[at..at + size - 4]);
        bytes[at + size - 4..at + size].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Replaces `from` in the descriptor (the JSON text in the head) with
/// `to`, moving the rest of the text within the head's padding, and
/// records the new length and CRC32 in the slots.
fn edit_descriptor(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let first = out.iter().position(|&b| b == b'\n').unwrap() + 1;
    let h = head_len(&out);
    let len = u64::from_le_bytes(out[h + 48..h + 56].try_into().unwrap()) as usize;
    let text = String::from_utf8(out[first..first + len].to_vec()).unwrap();
    assert!(text.contains(from), "{text}");
    let edited = text.replacen(from, to, 1);
    assert!(first + edited.len().max(len) < h - 1, "room in the head");
    out[first..first + len.max(edited.len())].fill(b' ');
    out[first..first + edited.len()].copy_from_slice(edited.as_bytes());
    let size = slot_size(&out);
    for at in [h, h + size] {
        if out[at..].starts_with(b"VDSCOMIT") {
            out[at + 48..at + 56].copy_from_slice(&(edited.len() as u64).to_le_bytes());
        }
    }
    reseal_slots(&mut out, Some(crc32(edited.as_bytes())));
    out
}

fn elem_bytes(dtype: DType) -> usize {
    match dtype {
        DType::Int8 | DType::UInt8 => 1,
        DType::Int16 | DType::UInt16 => 2,
        DType::Int32 | DType::UInt32 | DType::Float32 => 4,
        _ => 8,
    }
}

/// Single-element reads at every position of a 2-D variable, both orders,
/// as raw bytes, compared with the reference bytes.
fn every_element(ds: &Dataset, var: &str, shape: &[u64; 2], reference: &[u8], esize: usize) {
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            let mut got = vec![0u8; esize];
            let order = if (i + j) % 2 == 0 { Order::C } else { Order::Fortran };
            ds.read_bytes(var, &Region::new(&[i, j], &[1, 1]).unwrap(), order, &mut got).unwrap();
            let k = c_index(&[i, j], shape) * esize;
            assert_eq!(got, reference[k..k + esize], "{var} at [{i}, {j}]");
        }
    }
}

#[test]
fn constant_blocks_keep_every_bit_of_every_type() {
    let dir = Scratch::new("blocks-constant-bits");
    const SHAPE: [u64; 2] = [12, 10];
    let types = [
        DType::Int8,
        DType::UInt8,
        DType::Int16,
        DType::UInt16,
        DType::Int32,
        DType::UInt32,
        DType::Int64,
        DType::UInt64,
        DType::Float32,
        DType::Float64,
    ];
    for dtype in types {
        let esize = elem_bytes(dtype);
        // Per block of 4 x 5 (a 3 x 2 grid), an element pattern: signalling
        // and negative NaNs with payloads, -0.0, 0.0 (the fill), all ones,
        // and one block whose elements differ.
        let special: [u64; 6] = match dtype {
            DType::Float32 => [0x7fa0_0001, 0x8000_0000, 0, 0xffc1_2345, 0x3f80_0000, 0],
            DType::Float64 => [0x7ff0_0000_0000_0001, 0x8000_0000_0000_0000, 0, 0xfff8_dead_beef_0001, 0x3ff0_0000_0000_0000, 0],
            _ => [0x5a5a_5a5a_5a5a_5a5a, 0x8080_8080_8080_8080, 0, u64::MAX, 1, 0],
        };
        let mut reference = vec![0u8; 120 * esize];
        for_each_index(&SHAPE, |i| {
            let block = (i[0] / 4) * 2 + i[1] / 5;
            let k = c_index(i, &SHAPE);
            let v = if block == 5 { (k as u64 + 1).wrapping_mul(0x0101_0101_0101_0101) } else { special[block as usize] };
            reference[k * esize..(k + 1) * esize].copy_from_slice(&v.to_le_bytes()[..esize]);
        });
        for codec in [Codec::NONE, Codec::deflate(3)] {
            let path = dir.path(&format!("{dtype}-{}.vds", codec == Codec::NONE));
            let mut ds = DatasetBuilder::new()
                .axis(Axis::new("y", SHAPE[0]))
                .axis(Axis::new("x", SHAPE[1]))
                .variable(VariableBuilder::new("v", dtype, &["y", "x"]).chunk(&SHAPE).codec(codec).blocks(Some(&[4, 5])))
                .create(&path)
                .unwrap();
            ds.write_bytes("v", &Region::full(&SHAPE).unwrap(), Order::C, &reference).unwrap();
            ds.close().unwrap();
            let ds = Dataset::open(&path).unwrap();
            every_element(&ds, "v", &SHAPE, &reference, esize);
            // A box straddling all six blocks, then the whole chunk.
            let r = Region::new(&[3, 4], &[6, 2]).unwrap();
            let mut got = vec![0u8; 12 * esize];
            ds.read_bytes("v", &r, Order::C, &mut got).unwrap();
            for_each_index(r.shape(), |i| {
                let (g, k) = (c_index(i, r.shape()), c_index(&[3 + i[0], 4 + i[1]], &SHAPE));
                assert_eq!(got[g * esize..(g + 1) * esize], reference[k * esize..(k + 1) * esize], "{dtype} {i:?}");
            });
            let mut all = vec![0u8; reference.len()];
            Dataset::open(&path).unwrap().read_bytes("v", &Region::full(&SHAPE).unwrap(), Order::C, &mut all).unwrap();
            assert!(all == reference, "{dtype}: whole chunk");
            assert!(ds.verify_full().unwrap().is_ok(), "{dtype}");
        }
    }
}

#[test]
fn a_chunk_of_constant_blocks_is_its_table_alone() {
    let dir = Scratch::new("blocks-table-only");
    let path = dir.path("t.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 16))
        .axis(Axis::new("x", 16))
        .variable(VariableBuilder::new("v", DType::Float64, &["y", "x"]).chunk(&[16, 16]).blocks(Some(&[8, 8])))
        .create(&path)
        .unwrap();
    let data: Vec<f64> = (0..256).map(|k| [1.5, -0.0, f64::NAN, 4.0][(k / 16 / 8) * 2 + (k % 16) / 8]).collect();
    ds.write("v", &Region::full(&[16, 16]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    // The stored chunk is 4 entries and the table CRC32: 68 bytes, nothing else.
    let ds = Dataset::open(&path).unwrap();
    let _: Vec<f64> = ds.read_vec("v", &Region::full(&[16, 16]).unwrap(), Order::C).unwrap();
    assert_eq!(ds.stored_bytes_read(), 68);
    let ds = Dataset::open(&path).unwrap();
    let bits: Vec<u64> = data.iter().map(|v| v.to_bits()).collect();
    let reference: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    every_element(&ds, "v", &[16, 16], &reference, 8);
    let all: Vec<f64> = ds.read_vec("v", &Region::full(&[16, 16]).unwrap(), Order::Fortran).unwrap();
    for_each_index(&[16, 16], |i| assert_eq!(all[f_index(i, &[16, 16])].to_bits(), bits[c_index(i, &[16, 16])]));
    assert!(ds.verify_full().unwrap().is_ok());
}

/// A 16 x 16 float32 chunk in four raw 8 x 8 blocks: the file, its
/// values, and where the block table starts in the file.
fn raw_blocked(path: &std::path::Path) -> (Vec<u8>, Vec<f32>, usize) {
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 16))
        .axis(Axis::new("x", 16))
        .variable(VariableBuilder::new("v", DType::Float32, &["y", "x"]).chunk(&[16, 16]).codec(Codec::NONE).blocks(Some(&[8, 8])))
        .create(path)
        .unwrap();
    let data: Vec<f32> = (0..256).map(|k| (k / 16) as f32 * 1000.0 + (k % 16) as f32 + 0.25).collect();
    ds.write("v", &Region::full(&[16, 16]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let first: Vec<u8> = data[..8].iter().flat_map(|v| v.to_le_bytes()).collect();
    let block0 = bytes.windows(32).position(|w| w == first).expect("block 0 stored raw");
    let table = block0 - 68;
    assert_eq!(crc32(&bytes[table..table + 64]).to_le_bytes(), bytes[table + 64..table + 68], "the table precedes block 0");
    (bytes, data, table)
}

#[test]
fn block_tables_that_lie_are_reported_by_partial_and_whole_reads() {
    let dir = Scratch::new("blocks-lying-tables");
    let path = dir.path("lie.vds");
    let (bytes, data, t) = raw_blocked(&path);
    let set_u32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "entries of blocks 0 and 1 swapped",
            Box::new(move |b| {
                let e0: Vec<u8> = b[t..t + 16].to_vec();
                let e1: Vec<u8> = b[t + 16..t + 32].to_vec();
                b[t..t + 16].copy_from_slice(&e1);
                b[t + 16..t + 32].copy_from_slice(&e0);
            }),
            "CRC32 mismatch",
        ),
        (
            "lengths moved between blocks, same sum",
            Box::new(move |b| {
                set_u32(b, t, 252);
                set_u32(b, t + 16, 260);
            }),
            "exceeds its raw length",
        ),
        ("a length of 2^32 - 1", Box::new(move |b| set_u32(b, t + 32, u32::MAX)), "exceeds its raw length"),
        (
            "lengths that overflow a u32 sum",
            Box::new(move |b| {
                for k in 0..4 {
                    set_u32(b, t + 16 * k, 0x4000_0040);
                }
            }),
            "exceeds its raw length",
        ),
        (
            "a stored block turned constant",
            Box::new(move |b| {
                set_u32(b, t + 16, 0);
                set_u32(b, t + 24, 0);
                set_u32(b, t + 28, 0);
            }),
            "the blocks end at byte",
        ),
        ("a shorter block leaving a gap", Box::new(move |b| set_u32(b, t + 48, 200)), "the blocks end at byte"),
        ("a block codec byte 0x20", Box::new(move |b| b[t + 4] = 0x20), "not a block codec"),
        ("a block codec byte 0x30", Box::new(move |b| b[t + 4] = 0x30), "not a block codec"),
        ("a block codec byte 0x40", Box::new(move |b| b[t + 20] = 0x40), "not a block codec"),
        ("shuffle without compression", Box::new(move |b| b[t + 4] = 0x10), "not a block codec"),
        ("an undefined compression", Box::new(move |b| b[t + 4] = 0x07), "block 0"),
        ("deflate over raw bytes", Box::new(move |b| b[t + 4] = 0x01), "block 0"),
        ("zstd without the feature", Box::new(move |b| b[t + 4] = 0x02), "zstd"),
        ("a reserved byte", Box::new(move |b| b[t + 6] = 1), "reserved"),
        ("a stored block's reserved bytes", Box::new(move |b| b[t + 15] = 1), "reserved"),
    ];
    for (what, edit, says) in cases {
        let mut bad = bytes.clone();
        edit(&mut bad);
        let crc = crc32(&bad[t..t + 64]);
        set_u32(&mut bad, t + 64, crc);
        std::fs::write(&path, &bad).unwrap();
        let ds = Dataset::open(&path).unwrap();
        let mut refused = 0;
        // One element in each block, then a box across all four.
        for (start, shape) in [([1, 1], [1, 1]), ([2, 12], [1, 1]), ([9, 3], [1, 1]), ([15, 15], [1, 1]), ([6, 6], [4, 4])] {
            let r = Region::new(&start, &shape).unwrap();
            match ds.read_vec::<f32>("v", &r, Order::C) {
                Ok(got) => {
                    for_each_index(&shape, |i| {
                        let k = c_index(&[start[0] + i[0], start[1] + i[1]], &[16, 16]);
                        assert_eq!(got[c_index(i, &shape)], data[k], "{what}: a partial read returned other values");
                    });
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
                    assert!(e.to_string().contains("chunk [0, 0]") && e.to_string().contains(says), "{what}: {e}");
                    refused += 1;
                }
            }
        }
        assert!(refused > 0, "{what}: no partial read noticed");
        let e = Dataset::open(&path).unwrap().read_vec::<f32>("v", &Region::full(&[16, 16]).unwrap(), Order::C).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
        assert!(!ds.verify_full().unwrap().is_ok(), "{what}: verify");
    }
}

#[test]
fn a_forged_block_with_its_crcs_fixed_is_caught_by_whole_reads_and_verify() {
    // A block rewritten with its CRC32 in the table and the table's CRC32
    // fixed: a partial read checks only those (SPEC.md 6.5), but the
    // entry's CRC32 still covers the stored chunk.
    let dir = Scratch::new("blocks-forged");
    let path = dir.path("forged.vds");
    let (mut bad, _, t) = raw_blocked(&path);
    let block1 = t + 68 + 256;
    bad[block1..block1 + 4].copy_from_slice(&7.0f32.to_le_bytes());
    let crc = crc32(&bad[block1..block1 + 256]);
    bad[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32(&bad[t..t + 64]);
    bad[t + 64..t + 68].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bad).unwrap();
    let e = Dataset::open(&path).unwrap().read_vec::<f32>("v", &Region::full(&[16, 16]).unwrap(), Order::C).unwrap_err();
    assert!(e.kind() == ErrorKind::Corrupt && e.to_string().contains("chunk [0, 0]"), "{e}");
    let report = Dataset::open(&path).unwrap().verify_full().unwrap();
    assert!(!report.is_ok(), "{:?}", report.problems);
}

#[test]
fn a_chunk_of_blocks_in_a_variable_without_blocks_is_corrupt() {
    let dir = Scratch::new("blocks-undeclared");
    let path = dir.path("u.vds");
    raw_blocked(&path);
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes[..head_len(&bytes)]).to_string();
    let member = ",\"blocks\":[8,8]";
    assert!(text.contains(member), "{text}");
    for (what, to) in [("removed", ""), ("null", ",\"blocks\":null")] {
        std::fs::write(&path, edit_descriptor(&bytes, member, to)).unwrap();
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.variable("v").unwrap().block_shape(), None, "{what}");
        for r in [Region::new(&[3, 3], &[2, 2]).unwrap(), Region::full(&[16, 16]).unwrap()] {
            let e = ds.read_vec::<f32>("v", &r, Order::C).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
            assert!(e.to_string().contains("chunk [0, 0]") && e.to_string().contains("declares no blocks"), "{what}: {e}");
        }
        assert!(!ds.verify_full().unwrap().is_ok(), "{what}");
    }
}

#[test]
fn hostile_block_shapes_in_a_file_are_refused_or_read_as_damage() {
    let dir = Scratch::new("blocks-hostile-shapes");
    let path = dir.path("s.vds");
    let (_, data, _) = raw_blocked(&path);
    let bytes = std::fs::read(&path).unwrap();
    let member = "\"blocks\":[8,8]";
    let mut refused = Vec::new();
    for to in [
        "\"blocks\":[0,8]",
        "\"blocks\":[8]",
        "\"blocks\":[]",
        "\"blocks\":[8,17]",
        "\"blocks\":[-8,8]",
        "\"blocks\":[8.5,8]",
        "\"blocks\":8",
        "\"blocks\":[8,8,8]",
        "\"blocks\":[18446744073709551615,8]",
        "\"blocks\":[18446744073709551616,8]",
        "\"blocks\":[1,1]",
        "\"blocks\":[16,16]",
        "\"blocks\":[4,16]",
        "\"blocks\":[8,9]",
        "\"blocks\":[8,8]",
    ] {
        std::fs::write(&path, edit_descriptor(&bytes, member, to)).unwrap();
        let ds = match Dataset::open(&path) {
            Ok(ds) => ds,
            Err(e) => {
                assert!(matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::InvalidArgument), "{to}: {e}");
                refused.push(to);
                continue;
            }
        };
        // A valid shape other than the one the chunk was written with: its
        // table's length, CRC32 or block lengths do not fit, except for
        // [4, 16], whose four entries of 256 bytes are a valid table of that
        // shape too (the same bytes read another way, as a descriptor with
        // another chunk shape would read them): no panic, and damage is Corrupt.
        for r in [Region::new(&[3, 3], &[1, 1]).unwrap(), Region::new(&[0, 0], &[16, 9]).unwrap(), Region::full(&[16, 16]).unwrap()] {
            match ds.read_vec::<f32>("v", &r, Order::C) {
                Ok(got) if to == "\"blocks\":[8,8]" => {
                    for_each_index(r.shape(), |i| {
                        let k = c_index(&[r.start()[0] + i[0], r.start()[1] + i[1]], &[16, 16]);
                        assert_eq!(got[c_index(i, r.shape())], data[k], "{to}: {r:?}");
                    });
                }
                Ok(_) => assert!(to == "\"blocks\":[4,16]", "{to}: {r:?} read"),
                Err(e) => assert!(e.kind() == ErrorKind::Corrupt && e.to_string().contains("chunk [0, 0]"), "{to}: {e}"),
            }
        }
    }
    // Every shape the descriptor rules forbid is refused when the file opens.
    assert_eq!(refused.len(), 10, "{refused:?}");
}

#[test]
fn every_element_and_strided_box_of_a_4d_variable_reads_as_the_reference() {
    let dir = Scratch::new("blocks-4d");
    const SHAPE: [u64; 4] = [9, 11, 7, 13];
    let path = dir.path("4d.vds");
    let mut rng = Rng::new(common::seed(5));
    let data: Vec<i32> = (0..SHAPE.iter().product::<u64>()).map(|k| if k % 97 < 40 { 3 } else { rng.next() as i32 }).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", SHAPE[0]))
        .axis(Axis::new("b", SHAPE[1]))
        .axis(Axis::new("c", SHAPE[2]))
        .axis(Axis::new("d", SHAPE[3]))
        .variable(
            VariableBuilder::new("v", DType::Int32, &["a", "b", "c", "d"])
                .chunk(&[4, 6, 7, 5])
                .codec(Codec::deflate(1).with_shuffle(true))
                .blocks(Some(&[3, 4, 2, 5])),
        )
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    for_each_index(&SHAPE, |i| {
        let got: Vec<i32> = ds.read_vec("v", &Region::new(i, &[1, 1, 1, 1]).unwrap(), Order::C).unwrap();
        assert_eq!(got[0], data[c_index(i, &SHAPE)], "at {i:?}");
    });
    // Boxes with steps beyond the block and the chunk, in both orders, each on a fresh handle.
    for round in 0..400 {
        let ds = Dataset::open(&path).unwrap();
        let (mut start, mut shape, mut step) = ([0u64; 4], [1u64; 4], [1u64; 4]);
        for d in 0..4 {
            step[d] = 1 + rng.below(if round % 2 == 0 { 3 } else { 15 });
            start[d] = rng.below(SHAPE[d]);
            shape[d] = 1 + rng.below((SHAPE[d] - 1 - start[d]) / step[d] + 1);
        }
        let r = Region::new(&start, &shape).unwrap().with_step(&step).unwrap();
        let order = if round % 3 == 0 { Order::Fortran } else { Order::C };
        let got: Vec<i32> = ds.read_vec("v", &r, order).unwrap();
        for_each_index(&shape, |i| {
            let src: Vec<u64> = (0..4).map(|d| start[d] + i[d] * step[d]).collect();
            let at = if order == Order::C { c_index(i, &shape) } else { f_index(i, &shape) };
            assert_eq!(got[at], data[c_index(&src, &SHAPE)], "{r:?} {order:?} at {i:?}");
        });
    }
    assert!(ds.verify_full().unwrap().is_ok());
}

fn check_2d(ds: &Dataset, var: &str, reference: &[f32], shape: [u64; 2], what: &str) {
    assert_eq!(ds.variable(var).unwrap().shape(), shape, "{what}");
    let all: Vec<f32> = ds.read_vec(var, &Region::full(&shape).unwrap(), Order::C).unwrap();
    assert!(all == reference, "{what}: whole variable");
    for (i, j) in [(0, 0), (shape[0] - 1, shape[1] - 1), (shape[0] / 2, 3), (1, shape[1] - 2)] {
        let got: Vec<f32> = ds.read_vec(var, &Region::new(&[i, j], &[1, 2.min(shape[1] - j)]).unwrap(), Order::Fortran).unwrap();
        assert_eq!(got[0], reference[c_index(&[i, j], &shape)], "{what} at [{i}, {j}]");
    }
}

#[test]
fn growth_fragments_compaction_and_dedup_keep_blocked_values() {
    let dir = Scratch::new("blocks-growth");
    let path = dir.path("g.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("t", 3).growable(None))
        .axis(Axis::new("x", 20))
        .variable(VariableBuilder::new("v", DType::Float32, &["t", "x"]).chunk(&[8, 8]).codec(Codec::zstd(1)).blocks(Some(&[3, 5])))
        .create(&path)
        .unwrap();
    let row = |t: u64| -> Vec<f32> { (0..20).map(|x| if t % 4 == 0 { 1.0 } else { (t * 100 + x) as f32 }).collect() };
    let mut reference: Vec<f32> = (0..3).flat_map(row).collect();
    ds.write("v", &Region::full(&[3, 20]).unwrap(), Order::C, &reference).unwrap();
    ds.commit().unwrap();
    // Rows appended one and three at a time, committing between, so that
    // edge chunks are read back, extended and re-encoded in blocks.
    for t in (3..30).step_by(4) {
        let rows: Vec<f32> = (t..t + 1).flat_map(row).collect();
        ds.append("v", "t", Order::C, &rows).unwrap();
        reference.extend_from_slice(&rows);
        let rows: Vec<f32> = (t + 1..t + 4).flat_map(row).collect();
        ds.append("v", "t", Order::C, &rows).unwrap();
        reference.extend_from_slice(&rows);
        ds.commit().unwrap();
        check_2d(&ds, "v", &reference, [t + 4, 20], "after appending");
    }
    // Shrink into the middle of a chunk and grow back: the cut part reads as fill.
    ds.resize_axis("t", 13).unwrap();
    ds.commit().unwrap();
    reference.truncate(13 * 20);
    check_2d(&ds, "v", &reference, [13, 20], "after shrinking");
    ds.resize_axis("t", 21).unwrap();
    reference.resize(21 * 20, 0.0);
    check_2d(&ds, "v", &reference, [21, 20], "after growing back");
    ds.close().unwrap();

    // Two fragments write disjoint chunk rows; merged, then compacted both ways.
    for (w, name) in ["w0.frag", "w1.frag"].iter().enumerate() {
        let mut f = Dataset::create_fragment(&path, name).unwrap();
        let rows: Vec<f32> = (0..8 * 20).map(|k| if k % 7 == 0 { -0.0 } else { (w * 1000 + k) as f32 }).collect();
        f.write("v", &Region::new(&[8 * w as u64, 0], &[8, 20]).unwrap(), Order::C, &rows).unwrap();
        reference[8 * w * 20..8 * (w + 1) * 20].copy_from_slice(&rows);
        f.close().unwrap();
    }
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.merge_fragments(&["w0.frag", "w1.frag"]).unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "after merging fragments");
    ds.compact_folding_slots().unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "after compaction");
    assert!(ds.verify_full().unwrap().is_ok());
    ds.compact_cloud_optimized().unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "after the cloud-optimized compaction");
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "reopened");
    assert!(ds.verify_full().unwrap().is_ok());

    // Deduplication: the same chunk contents written many times are stored once, and read right.
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.set_deduplication(true);
    let tile: Vec<f32> = (0..64).map(|k| (k % 9) as f32 - 0.5).collect();
    for t in [0u64, 8] {
        for x in [0u64, 8] {
            ds.write("v", &Region::new(&[t, x], &[8, 8]).unwrap(), Order::C, &tile).unwrap();
            for_each_index(&[8, 8], |i| reference[c_index(&[t + i[0], x + i[1]], &[21, 20])] = tile[c_index(i, &[8, 8])]);
        }
    }
    ds.commit().unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "after deduplicated writes");
    ds.compact_cloud_optimized().unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    check_2d(&ds, "v", &reference, [21, 20], "deduplicated, compacted");
    assert!(ds.verify_full().unwrap().is_ok());
}

#[test]
fn quantized_variables_with_blocks_read_as_without() {
    let dir = Scratch::new("blocks-quantized");
    let path = dir.path("q.vds");
    const SHAPE: [u64; 3] = [20, 17, 33];
    let quantized = |name: &str, blocks: Option<&[u64]>| {
        let mut v = VariableBuilder::new(name, DType::Float32, &["a", "b", "c"]);
        v.chunk(&[16, 16, 16]).codec(Codec::deflate(2)).quantization(DType::UInt16, -10.0, 10.0).blocks(blocks);
        v
    };
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", SHAPE[0]))
        .axis(Axis::new("b", SHAPE[1]))
        .axis(Axis::new("c", SHAPE[2]))
        .variable(&quantized("whole", None))
        .variable(&quantized("blocked", Some(&[4, 5, 16])))
        .create(&path)
        .unwrap();
    let data: Vec<f32> = (0..SHAPE.iter().product::<u64>()).map(|k| ((k as f32) * 0.013).sin() * 9.0).collect();
    for v in ["whole", "blocked"] {
        ds.write(v, &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    }
    ds.close().unwrap();
    let mut rng = Rng::new(common::seed(3));
    for _ in 0..200 {
        let ds = Dataset::open(&path).unwrap();
        let (mut start, mut shape, mut step) = ([0u64; 3], [1u64; 3], [1u64; 3]);
        for d in 0..3 {
            step[d] = 1 + rng.below(6);
            start[d] = rng.below(SHAPE[d]);
            shape[d] = 1 + rng.below((SHAPE[d] - 1 - start[d]) / step[d] + 1);
        }
        let r = Region::new(&start, &shape).unwrap().with_step(&step).unwrap();
        let a: Vec<f32> = ds.read_vec("whole", &r, Order::Fortran).unwrap();
        let b: Vec<f32> = ds.read_vec("blocked", &r, Order::Fortran).unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "{r:?}");
        for_each_index(&shape, |i| {
            let src: Vec<u64> = (0..3).map(|d| start[d] + i[d] * step[d]).collect();
            let want = data[c_index(&src, &SHAPE)];
            assert!((b[f_index(i, &shape)] - want).abs() <= 20.0 / 65535.0, "{r:?} at {i:?}");
        });
    }
}

#[test]
fn a_zstd_block_in_a_file_without_the_zstd_feature_is_corrupt() {
    // Codec byte 0x02 needs the feature `zstd` (SPEC.md 6.3), in a block as in a chunk.
    let dir = Scratch::new("blocks-zstd-feature");
    let path = dir.path("z.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 16))
        .axis(Axis::new("x", 16))
        .variable(VariableBuilder::new("v", DType::Float32, &["y", "x"]).chunk(&[16, 16]).codec(Codec::zstd(1)).blocks(Some(&[8, 8])))
        .create(&path)
        .unwrap();
    let data: Vec<f32> = (0..256).map(|k| (k % 3) as f32).collect();
    ds.write("v", &Region::full(&[16, 16]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes[..head_len(&bytes)]).to_string();
    assert!(text.contains("\"zstd\",") && text.contains("\"id\":\"zstd\""), "{text}");
    let bytes = edit_descriptor(&bytes, "\"zstd\",", "");
    let bytes = edit_descriptor(&bytes, "\"id\":\"zstd\"", "\"id\":\"deflate\"");
    std::fs::write(&path, &bytes).unwrap();
    let ds = Dataset::open(&path).unwrap();
    for r in [Region::new(&[1, 1], &[1, 1]).unwrap(), Region::full(&[16, 16]).unwrap()] {
        let e = ds.read_vec::<f32>("v", &r, Order::C).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains("chunk [0, 0]") && e.to_string().contains("feature \"zstd\""), "{e}");
    }
    assert!(!ds.verify_full().unwrap().is_ok());
}

#[test]
fn chunks_sharing_bytes_under_different_block_shapes_read_as_their_own() {
    // Four constant blocks make a chunk that is its table alone; the same
    // table is a chunk of quadrants for blocks of 8 x 8 and of bands for
    // blocks of 4 x 16. Deduplication stores it once for both variables,
    // and each must still decode it with its own block shape, also when
    // the other's decoded chunk is in the cache.
    let dir = Scratch::new("blocks-shared-bytes");
    let path = dir.path("shared.vds");
    let var = |name: &str, blocks: &[u64]| {
        let mut v = VariableBuilder::new(name, DType::Float32, &["y", "x"]);
        v.chunk(&[16, 16]).blocks(Some(blocks));
        v
    };
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 16))
        .axis(Axis::new("x", 16))
        .variable(&var("quadrants", &[8, 8]))
        .variable(&var("bands", &[4, 16]))
        .create(&path)
        .unwrap();
    let quadrants: Vec<f32> = (0..256).map(|k| [1.0, 2.0, 3.0, 4.0][(k / 16 / 8) * 2 + (k % 16) / 8]).collect();
    let bands: Vec<f32> = (0..256).map(|k| [1.0, 2.0, 3.0, 4.0][k / 16 / 4]).collect();
    ds.write("quadrants", &Region::full(&[16, 16]).unwrap(), Order::C, &quadrants).unwrap();
    ds.write("bands", &Region::full(&[16, 16]).unwrap(), Order::C, &bands).unwrap();
    ds.close().unwrap();
    let all = Region::full(&[16, 16]).unwrap();
    for (first, second) in [("quadrants", "bands"), ("bands", "quadrants")] {
        let ds = Dataset::open(&path).unwrap();
        for name in [first, second, first] {
            let want = if name == "bands" { &bands } else { &quadrants };
            assert!(&ds.read_vec::<f32>(name, &all, Order::C).unwrap() == want, "{name} after {first}");
            let got: Vec<f32> = ds.read_vec(name, &Region::new(&[5, 9], &[1, 1]).unwrap(), Order::C).unwrap();
            assert_eq!(got[0], want[5 * 16 + 9], "{name} at [5, 9] after {first}");
        }
    }
}

#[test]
fn large_strided_reads_decode_blocks_on_several_cores_and_report_damage() {
    // A read with a step along one axis covers every chunk in part, so it
    // goes block by block, cut into chunk rows read on several cores.
    let dir = Scratch::new("blocks-parallel");
    let path = dir.path("p.vds");
    const SHAPE: [u64; 3] = [96, 96, 128];
    let data: Vec<f32> = (0..SHAPE.iter().product::<u64>()).map(|k| k as f32 + 0.5).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("a", SHAPE[0]))
        .axis(Axis::new("b", SHAPE[1]))
        .axis(Axis::new("c", SHAPE[2]))
        .variable(
            VariableBuilder::new("v", DType::Float32, &["a", "b", "c"]).chunk(&[32, 32, 32]).codec(Codec::NONE).blocks(Some(&[8, 8, 8])),
        )
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let check = |ds: &Dataset, step: [u64; 3], order: Order| -> vds::Result<()> {
        let shape: Vec<u64> = (0..3).map(|d| (SHAPE[d] - 1) / step[d] + 1).collect();
        let r = Region::new(&[0, 0, 0], &shape).unwrap().with_step(&step).unwrap();
        let got: Vec<f32> = ds.read_vec("v", &r, order)?;
        for_each_index(&shape, |i| {
            let src: Vec<u64> = (0..3).map(|d| i[d] * step[d]).collect();
            let at = if order == Order::C { c_index(i, &shape) } else { f_index(i, &shape) };
            assert_eq!(got[at], data[c_index(&src, &SHAPE)], "step {step:?} {order:?} at {i:?}");
        });
        Ok(())
    };
    for (step, order) in [([1, 1, 2], Order::C), ([1, 3, 1], Order::Fortran), ([2, 1, 1], Order::C), ([1, 1, 9], Order::Fortran)] {
        check(&Dataset::open(&path).unwrap(), step, order).unwrap();
    }
    // One element of one block damaged: every such read reports it.
    let mut bytes = std::fs::read(&path).unwrap();
    let k = c_index(&[70, 40, 100], &SHAPE);
    let pattern: Vec<u8> = data[k..k + 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let at = bytes.windows(16).position(|w| w == pattern).expect("the raw block");
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    for (step, order) in [([1, 1, 2], Order::C), ([1, 2, 1], Order::Fortran)] {
        let e = check(&Dataset::open(&path).unwrap(), step, order).unwrap_err();
        assert!(e.kind() == ErrorKind::Corrupt && e.to_string().contains("chunk [2, 1, 3]"), "{e}");
    }
}

#[test]
fn averaged_levels_of_detail_and_masks_of_a_blocked_variable_match_the_reference() {
    let dir = Scratch::new("blocks-lod-mask");
    let path = dir.path("l.vds");
    const SHAPE: [u64; 2] = [37, 50];
    let mut rng = Rng::new(common::seed(8));
    let data: Vec<f32> = (0..SHAPE[0] * SHAPE[1]).map(|k| if k % 11 == 0 { -999.0 } else { (rng.below(1000) as f32) * 2.0 }).collect();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", SHAPE[0]))
        .axis(Axis::new("x", SHAPE[1]))
        .variable(
            VariableBuilder::new("v", DType::Float32, &["y", "x"])
                .chunk(&[16, 16])
                .codec(Codec::deflate(5))
                .blocks(Some(&[5, 7]))
                .levels_of_detail(3, &["y", "x"], vds::LodMethod::Average),
        )
        .variable(
            VariableBuilder::new("m", DType::Float32, &["y", "x"])
                .chunk(&[16, 16])
                .blocks(Some(&[3, 16]))
                .no_value(-999.0)
                .missing_mask(true),
        )
        .create(&path)
        .unwrap();
    for v in ["v", "m"] {
        // In two overlapping writes, so that chunks are read back and re-encoded.
        ds.write(v, &Region::new(&[0, 0], &[20, 50]).unwrap(), Order::C, &data[..1000]).unwrap();
        ds.write(v, &Region::new(&[17, 0], &[20, 50]).unwrap(), Order::C, &data[17 * 50..]).unwrap();
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let (mut level, mut shape) = (data.clone(), SHAPE.to_vec());
    for lod in 0..3u8 {
        if lod > 0 {
            (level, shape) = common::halve_f32(&level, &shape, &[true, true], true);
        }
        let s = [shape[0], shape[1]];
        let mut all = vec![0f32; level.len()];
        ds.read_lod("v", lod, None, &Region::full(&s).unwrap(), Order::C, &mut all).unwrap();
        assert!(all == level, "level {lod}");
        for_each_index(&s, |i| {
            let mut one = [0f32];
            ds.read_lod("v", lod, None, &Region::new(i, &[1, 1]).unwrap(), Order::Fortran, &mut one).unwrap();
            assert_eq!(one[0], level[c_index(i, &s)], "level {lod} at {i:?}");
        });
    }
    let all: Vec<f32> = ds.read_vec("m", &Region::full(&SHAPE).unwrap(), Order::C).unwrap();
    assert!(all == data, "masked variable");
    for_each_index(&SHAPE, |i| {
        let one: Vec<f32> = ds.read_vec("m", &Region::new(i, &[1, 1]).unwrap(), Order::C).unwrap();
        assert_eq!(one[0], data[c_index(i, &SHAPE)], "masked variable at {i:?}");
    });
    assert!(ds.verify_full().unwrap().is_ok());
}

#[test]
fn single_samples_with_huge_steps_read_the_right_block() {
    let dir = Scratch::new("blocks-huge-steps");
    let path = dir.path("h.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 40))
        .axis(Axis::new("x", 40))
        .variable(VariableBuilder::new("v", DType::Int64, &["y", "x"]).chunk(&[16, 16]).blocks(Some(&[3, 5])))
        .variable(VariableBuilder::new("w", DType::Int64, &["y", "x"]).chunk(&[16, 16]))
        .create(&path)
        .unwrap();
    let data: Vec<i64> = (0..1600).collect();
    for v in ["v", "w"] {
        ds.write(v, &Region::full(&[40, 40]).unwrap(), Order::C, &data).unwrap();
    }
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    for (v, step) in ["v", "w"].into_iter().flat_map(|v| [2, 17, 1 << 20, u64::MAX / 3, u64::MAX].map(|s| (v, s))) {
        for (i, j) in [(0, 0), (15, 15), (16, 16), (17, 4), (39, 39), (38, 15)] {
            let r = Region::new(&[i, j], &[1, 1]).unwrap().with_step(&[step, step]).unwrap();
            let got: Vec<i64> = ds.read_vec(v, &r, Order::Fortran).unwrap();
            assert_eq!(got[0], data[(i * 40 + j) as usize], "{v}: step {step} at [{i}, {j}]");
        }
        // Two samples along y, the second in another chunk when the step allows.
        if step < 40 {
            let r = Region::new(&[1, 7], &[2, 1]).unwrap().with_step(&[step, step]).unwrap();
            let got: Vec<i64> = ds.read_vec(v, &r, Order::C).unwrap();
            assert_eq!(got, [data[47], data[((1 + step) * 40 + 7) as usize]], "{v}: step {step}");
        }
    }
}
