//! Every data type, in both memory orders, in 1-D through 6-D, with extents
//! that are not multiples of the chunk shape, survives a write, a commit, a
//! reopen and a read bit for bit, with and without compression.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Element, Order, Region, VariableBuilder};

/// Test values of each element type, compared bit for bit (so NaN payloads count).
trait Val: Element + Default + std::fmt::Debug {
    fn gen(r: &mut Rng) -> Self;
    fn bits(self) -> u64;
}
macro_rules! val_int {
    ($($t:ty),*) => {$(impl Val for $t {
        fn gen(r: &mut Rng) -> Self {
            // Runs of repeated values so that deflate and constant chunks both occur.
            if r.below(4) == 0 { 7 as $t } else { r.next() as $t }
        }
        fn bits(self) -> u64 { self as u64 }
    })*};
}
val_int!(i8, i16, i32, i64, u8, u16, u32, u64);
impl Val for f32 {
    fn gen(r: &mut Rng) -> Self {
        if r.below(3) == 0 {
            (r.below(100) as f32) * 0.25
        } else {
            f32::from_bits(r.next() as u32)
        }
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Val for f64 {
    fn gen(r: &mut Rng) -> Self {
        if r.below(3) == 0 {
            (r.below(100) as f64) * 0.25
        } else {
            f64::from_bits(r.next())
        }
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}
impl Val for bool {
    fn gen(r: &mut Rng) -> Self {
        r.below(3) == 0
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

const SHAPES: [&[u64]; 6] = [&[37], &[9, 11], &[5, 7, 6], &[4, 3, 5, 3], &[3, 4, 2, 3, 5], &[2, 3, 3, 2, 3, 4]];
const CHUNKS: [&[u64]; 6] = [&[8], &[4, 3], &[2, 3, 4], &[3, 2, 2, 2], &[2, 3, 2, 2, 2], &[1, 2, 2, 2, 2, 3]];
const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn assert_bits<T: Val>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.bits(), w.bits(), "{what}: element {i}: got {g:?}, want {w:?}");
    }
}

fn round_trip<T: Val>(seed: u64) {
    let dir = Scratch::new("round-trip");
    for dims in 1..=6 {
        let shape = SHAPES[dims - 1];
        let n: u64 = shape.iter().product();
        for (order, fortran) in [(Order::C, false), (Order::Fortran, true)] {
            for codec in [Codec::NONE, Codec::deflate(5), Codec::zstd(3)] {
                let mut rng = Rng::new(seed ^ (dims as u64) << 8);
                let reference: Vec<T> = (0..n).map(|_| T::gen(&mut rng)).collect();
                let path = dir.path(&format!("{}-{dims}-{fortran}-{:?}.vds", T::DTYPE, codec.compression));
                let mut b = DatasetBuilder::new();
                for d in 0..dims {
                    b.axis(Axis::new(NAMES[d], shape[d]));
                }
                b.variable(VariableBuilder::new("v", T::DTYPE, &NAMES[..dims]).chunk(CHUNKS[dims - 1]).codec(codec));
                let mut ds = b.create(&path).unwrap();
                // Written in the caller's order, read back in both orders.
                let input = extract(&reference, shape, &vec![0; dims], shape, &vec![1; dims], fortran);
                ds.write("v", &Region::full(shape).unwrap(), order, &input).unwrap();
                ds.close().unwrap();
                let ds = Dataset::open(&path).unwrap();
                let what = format!("{} {dims}-D written in {order:?} with {codec:?}", T::DTYPE);
                for (o2, f2) in [(Order::C, false), (Order::Fortran, true)] {
                    let got: Vec<T> = ds.read_vec("v", &Region::full(shape).unwrap(), o2).unwrap();
                    let want = extract(&reference, shape, &vec![0; dims], shape, &vec![1; dims], f2);
                    assert_bits(&got, &want, &format!("{what}, read in {o2:?}"));
                }
            }
        }
    }
}

#[test]
fn int8() {
    round_trip::<i8>(1);
}
#[test]
fn int16() {
    round_trip::<i16>(2);
}
#[test]
fn int32() {
    round_trip::<i32>(3);
}
#[test]
fn int64() {
    round_trip::<i64>(4);
}
#[test]
fn uint8() {
    round_trip::<u8>(5);
}
#[test]
fn uint16() {
    round_trip::<u16>(6);
}
#[test]
fn uint32() {
    round_trip::<u32>(7);
}
#[test]
fn uint64() {
    round_trip::<u64>(8);
}
#[test]
fn float32() {
    round_trip::<f32>(9);
}
#[test]
fn float64() {
    round_trip::<f64>(10);
}
#[test]
fn bool() {
    round_trip::<bool>(11);
}

#[test]
fn every_dtype_is_covered() {
    // A new DType must get a round-trip test above.
    assert_eq!(DType::ALL.len(), 11);
}

/// A chunk that zstd shrinks far beyond what deflate can (1 MiB of zeros but
/// one value: about 40 bytes) is stored compressed and reads back; its entry
/// says zstd, and the file announces the feature.
#[test]
fn zstd_chunks_compressed_beyond_deflates_ratio_read_back() {
    let dir = Scratch::new("zstd-ratio");
    let path = dir.path("z.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 256))
        .axis(Axis::new("y", 1024))
        .variable(VariableBuilder::new("v", DType::Float32, &["x", "y"]).chunk(&[256, 1024]).codec(Codec::zstd(19)).blocks(None))
        .create(&path)
        .unwrap();
    let mut data = vec![0f32; 256 * 1024];
    data[123_456] = 2.5;
    ds.write("v", &Region::full(&[256, 1024]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let stats = ds.stats().unwrap();
    assert_eq!(stats.stored_chunks, 1);
    assert!(stats.stored_bytes * 1032 + 1024 < 1 << 20, "{} stored bytes: within deflate's ratio", stats.stored_bytes);
    assert_eq!(ds.variables()[0].codec(), Codec::zstd(19));
    let got: Vec<f32> = ds.read_vec("v", &Region::full(&[256, 1024]).unwrap(), Order::C).unwrap();
    assert!(got == data);
    let head = std::fs::read(&path).unwrap();
    let line2 = head.split(|&b| b == b'\n').nth(1).unwrap();
    let desc: vds::serde_json::Value = vds::serde_json::from_slice(line2).unwrap();
    assert_eq!(desc["features"]["incompat"], vds::serde_json::json!(["zstd"]));
    assert_eq!(desc["variables"][0]["codec"], vds::serde_json::json!({"id": "zstd", "level": 19, "shuffle": true}));
}

#[test]
fn wrong_element_type_is_refused_before_any_byte_moves() {
    let dir = Scratch::new("type");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 10))
        .variable(VariableBuilder::new("v", DType::Float32, &["x"]).chunk(&[4]))
        .create(dir.path("t.vds"))
        .unwrap();
    let r = Region::full(&[10]).unwrap();
    let e = ds.write("v", &r, Order::C, &[0f64; 10]).unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::TypeMismatch);
    assert!(e.to_string().contains("float32") && e.to_string().contains("float64"), "{e}");
    let mut out = [0i32; 10];
    assert_eq!(ds.read("v", &r, Order::C, &mut out).unwrap_err().kind(), vds::ErrorKind::TypeMismatch);
    let mut short = [0f32; 9];
    assert_eq!(ds.read("v", &r, Order::C, &mut short).unwrap_err().kind(), vds::ErrorKind::BufferTooSmall);
    let e = ds.read_vec::<f32>("v", &Region::new(&[5], &[6]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::OutOfRange);
    assert!(e.to_string().contains("extent 10"), "{e}");
    assert_eq!(ds.read_vec::<f32>("nope", &r, Order::C).unwrap_err().kind(), vds::ErrorKind::NotFound);
    assert_eq!(ds.read_vec::<f32>("v", &Region::full(&[10, 1]).unwrap(), Order::C).unwrap_err().kind(), vds::ErrorKind::InvalidArgument);
}

/// Without a chunk shape, a variable gets C-order slabs of at most 4 MiB
/// (SPEC.md 3.1): one chunk when it fits, else whole trailing axes.
#[test]
fn the_default_chunk_shape_is_a_slab_of_whole_trailing_axes() {
    let dir = Scratch::new("default-chunk");
    let ds = DatasetBuilder::new()
        .axis(Axis::new("z", 100))
        .axis(Axis::new("y", 1000))
        .axis(Axis::new("x", 1000))
        .variable(&VariableBuilder::new("large", DType::Float64, &["z", "y", "x"]))
        .variable(&VariableBuilder::new("plane", DType::Float32, &["y", "x"]))
        .variable(&VariableBuilder::new("trace", DType::Int64, &["x"]))
        .create(dir.path("d.vds"))
        .unwrap();
    let chunks: Vec<&[u64]> = ds.variables().iter().map(|v| v.chunk_shape()).collect();
    assert_eq!(chunks, [&[1, 500, 1000][..], &[1000, 1000][..], &[1000][..]]);
    assert_eq!(chunks[0], vds::default_chunk_shape(&[100, 1000, 1000], 8).as_slice());
}
