//! The ways a chunk reaches the file when a region covers it entirely: an
//! uncompressed chunk whose rows lie whole in the caller's buffer is written
//! from there piece by piece (checksummed over the pieces, never gathered),
//! any other one is gathered into a chunk buffer first. Whatever the path,
//! the stored bytes are the chunk's raw form: reads give back the values
//! written, verification recomputes every checksum from the file, constant
//! chunks become index entries and identical chunks are stored once.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

/// Writes `region` of a `shape` float32 variable in `chunk`s from `values`
/// (the region's elements in `order`), with `codec`, and checks the file.
#[allow(clippy::too_many_arguments)]
fn write_and_check(
    dir: &Scratch,
    name: &str,
    shape: &[u64],
    chunk: &[u64],
    codec: Codec,
    region: &Region,
    order: Order,
    values: &[f32],
) -> Dataset {
    let path = dir.path(name);
    let mut b = DatasetBuilder::new();
    let names = ["a", "b", "c", "d"];
    for (d, &n) in shape.iter().enumerate() {
        b.axis(Axis::new(names[d], n));
    }
    b.variable(VariableBuilder::new("v", DType::Float32, &names[..shape.len()]).chunk(chunk).codec(codec));
    let mut ds = b.create(&path).unwrap();
    ds.write("v", region, order, values).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let got: Vec<f32> = ds.read_vec("v", region, order).unwrap();
    assert!(got.iter().zip(values).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}: values differ");
    let report = ds.verify().unwrap();
    assert!(report.problems.is_empty(), "{name}: {:?}", report.problems);
    ds
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| (rng.next() % 100_000) as f32 * 0.5 - 7.0).collect()
}

#[test]
fn uncompressed_chunks_read_back_whatever_path_wrote_them() {
    let dir = Scratch::new("write_paths");
    // (shape, chunk, region start, region shape, order): bricks whose rows are 256-byte
    // runs (gathered), slabs that are one piece, rows of 64 bytes (gathered), chunks of
    // 40 KiB rows (a piece each) in a region starting inside the variable, and Fortran order.
    type Case<'a> = (&'a [u64], &'a [u64], &'a [u64], &'a [u64], Order);
    let cases: [Case; 7] = [
        (&[128, 128, 128], &[64, 64, 64], &[0, 0, 0], &[128, 128, 128], Order::C),
        (&[8, 300, 500], &[1, 300, 500], &[0, 0, 0], &[8, 300, 500], Order::C),
        (&[96, 96, 96], &[32, 32, 16], &[0, 0, 0], &[96, 96, 96], Order::C),
        (&[100, 200, 150], &[20, 40, 50], &[20, 40, 50], &[60, 120, 100], Order::C),
        (&[4, 16, 20_000], &[2, 8, 10_000], &[0, 0, 0], &[4, 16, 20_000], Order::C),
        (&[128, 128, 128], &[64, 64, 64], &[0, 0, 0], &[128, 128, 128], Order::Fortran),
        (&[3, 64, 64, 64], &[1, 64, 64, 64], &[1, 0, 0, 0], &[2, 64, 64, 64], Order::C),
    ];
    for (i, (shape, chunk, start, rshape, order)) in cases.iter().enumerate() {
        let region = Region::new(start, rshape).unwrap();
        let n = rshape.iter().product::<u64>() as usize;
        let values = random(n, 100 + i as u64);
        let raw = write_and_check(&dir, &format!("raw{i}.vds"), shape, chunk, Codec::NONE, &region, *order, &values);
        // The same write through a codec, which always gathers: the same values.
        let packed = write_and_check(&dir, &format!("deflate{i}.vds"), shape, chunk, Codec::deflate(1), &region, *order, &values);
        let full = Region::full(shape).unwrap();
        let a: Vec<f32> = raw.read_vec("v", &full, Order::C).unwrap();
        let b: Vec<f32> = packed.read_vec("v", &full, Order::C).unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "case {i}: the two files differ");
        let s = raw.stats().unwrap();
        let chunk_bytes = chunk.iter().product::<u64>() * 4;
        assert_eq!(s.stored_bytes, s.stored_chunks * chunk_bytes, "case {i}: raw chunks are stored whole");
    }
}

#[test]
fn constant_and_repeated_chunks_written_from_the_callers_buffer() {
    let dir = Scratch::new("write_paths_dedup");
    // 8 chunks of 64 whole rows of 512 (1 MiB, written by several threads): each chunk
    // is one 128 KiB run of the caller's buffer.
    let (rows, cols) = (512u64, 512u64);
    let pattern = random(64 * 512, 7);
    let mut values = vec![0f32; (rows * cols) as usize];
    for (i, v) in values.iter_mut().enumerate() {
        let (r, c) = (i / cols as usize, i % cols as usize);
        *v = match r / 64 {
            0 => 0.0,                             // the fill value: no entry at all
            1 => 2.5,                             // constant: an entry, no bytes
            2..=4 => pattern[(r % 64) * 512 + c], // three identical chunks: stored once
            _ => (i as f32).sin(),
        };
    }
    let ds =
        write_and_check(&dir, "d.vds", &[rows, cols], &[64, 512], Codec::NONE, &Region::full(&[rows, cols]).unwrap(), Order::C, &values);
    let s = ds.stats().unwrap();
    assert_eq!((s.fill_chunks, s.constant_chunks), (1, 1), "{s:?}");
    // Six stored chunks, three of them sharing one copy: four copies of 128 KiB.
    assert_eq!(s.stored_chunks, 6, "{s:?}");
    assert_eq!(s.stored_bytes, 6 * 128 * 1024, "{s:?}");
    let bytes = std::fs::metadata(dir.path("d.vds")).unwrap().len();
    assert!(bytes < 4 * 128 * 1024 + 16 * 1024, "{bytes} bytes: the repeated chunks were not shared");
}

#[test]
fn chunk_buffers_stay_within_the_memory_limit() {
    // The tile build reads each brick into a buffer of the brick's size: a brick of
    // 32 KiB (constant, so nothing in the file would stop it) under a 16 KiB limit.
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("x", 100));
    b.variable(VariableBuilder::new("v", DType::Float64, &["x"]).chunk(&[4096]).partitioning(&[100]).codec(Codec::NONE));
    let mut ds = b.create_in(std::sync::Arc::new(vds::MemoryStorage::new())).unwrap();
    ds.write("v", &Region::full(&[100]).unwrap(), Order::C, &[3.0f64; 100]).unwrap();
    ds.set_memory_limit(16384);
    let e = ds.commit().unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::OutOfMemory, "{e}");
    assert!(e.to_string().contains("32768 bytes, more than the memory limit of 16384"), "{e}");
}
