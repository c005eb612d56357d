//! The bodies of the fuzz targets in fuzz/, kept in the library so that a
//! normal `cargo test` on stable replays every committed corpus and crash
//! input through exactly the code the fuzzers ran. Not part of the API.
//!
//! Each function takes arbitrary bytes and must neither panic, hang nor
//! allocate without bound; the structure-aware ones also check integrity:
//! damage is reported as an error, never returned as values.

use crate::array::{Order, Region};
use crate::codec;
use crate::dataset::{Dataset, DatasetBuilder, OpenOptions, VariableBuilder};
use crate::error::ErrorKind;
use crate::index;
use crate::spec::{Axis, Codec, DType, DescriptorJson, Predictor};
use crate::storage::MemoryStorage;
use std::sync::Arc;

/// Memory limit for datasets opened from fuzz input.
const FUZZ_MEMORY_LIMIT: u64 = 64 << 20;
/// Largest region read in full from fuzz input, in elements.
const FUZZ_MAX_READ: u64 = 1 << 20;

/// Small deterministic generator driven by the input.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |acc, _| acc << 8 | u64::from(self.u8()))
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.u64() % n
        }
    }
}

/// Fuzz target `descriptor`: the descriptor parser and validator.
pub fn descriptor(data: &[u8]) {
    if let Ok((d, axes, vars, _)) = DescriptorJson::parse(data, FUZZ_MEMORY_LIMIT) {
        // What parses must serialize and parse again to the same shape.
        let again = DescriptorJson::parse_uncached(&d.to_bytes(), FUZZ_MEMORY_LIMIT).expect("a parsed descriptor must parse again");
        assert_eq!(again.1, axes);
        assert_eq!(again.2.len(), vars.len());
    }
}

/// Fuzz target `index_page`: decoding one index page, raw and with a valid CRC.
pub fn index_page(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    // 4096 (aligned layout), 512, or 256 (compact layout, SPEC.md 1.1).
    let size = match sel >> 6 {
        2 | 3 => 4096,
        1 => 256,
        _ => 512,
    };
    let mut page = vec![0u8; size];
    let n = rest.len().min(size);
    page[..n].copy_from_slice(&rest[..n]);
    let level = sel & 3;
    let _ = index::decode_page(&page, 0, level, None);
    // Sealed, so that the fuzzer explores what lies behind the checksum.
    let crc = crate::wire::crc32(&page[..size - 4]);
    page[size - 4..].copy_from_slice(&crc.to_le_bytes());
    let _ = index::decode_page(&page, 0, level, Some(crc));
}

/// Fuzz target `codec`: every codec's decoder on arbitrary stored bytes,
/// also as a chunk made of blocks (SPEC.md 6.5), and the encoders on
/// arbitrary chunks (which must round-trip).
pub fn codec(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let dtype = DType::ALL[b.below(DType::ALL.len() as u64) as usize];
    let codec_byte = b.u8();
    let elems = 1 + b.below(1 << 14) as usize;
    let rest = data.get(b.pos..).unwrap_or_default();
    let mut out = vec![0u8; elems * dtype.size()];
    let _ = codec::decode(dtype, codec_byte, rest, &mut out);
    // Encoding any chunk and decoding it gives it back.
    let esize = dtype.size();
    let n = rest.len() / esize;
    if n > 0 {
        let mut chunk = rest[..n * esize].to_vec();
        if dtype == DType::Bool {
            chunk.iter_mut().for_each(|x| *x &= 1);
        }
        let codecs = [
            Codec::NONE,
            Codec::deflate(codec_byte % 10),
            Codec::deflate(1).with_shuffle(false),
            #[cfg(feature = "zstd")]
            Codec::zstd(1 + codec_byte % 9),
            #[cfg(feature = "zstd")]
            Codec::zstd(1).with_shuffle(false),
        ];
        for c in codecs {
            let (cb, stored) = codec::encode(dtype, c, &chunk);
            let mut back = vec![0u8; chunk.len()];
            codec::decode(dtype, cb, &stored, &mut back).expect("an encoded chunk must decode");
            assert_eq!(back, chunk, "round trip of {dtype} with {c:?}");
        }
    }
    if dtype != DType::Bool {
        blocks_of(dtype, codec_byte, elems, rest);
    }
}

/// The `codec` target's part for chunks made of blocks: a 2-D chunk and
/// block shape chosen from the selector bytes, the stored bytes decoded as
/// such a chunk, and a chunk of them encoded in blocks and decoded back.
fn blocks_of(dtype: DType, sel: u8, elems: usize, rest: &[u8]) {
    use codec::blocks::{decode_chunk, encode_chunk, BlockGrid};
    let chunk = [1 + u64::from(sel % 8), 1 + (elems % 64) as u64];
    let block = [1 + u64::from(sel >> 3) % 4, 1 + ((elems >> 6) % 16) as u64];
    let grid = BlockGrid::new(&chunk, &block);
    let n = (chunk[0] * chunk[1]) as usize * dtype.size();
    let mut out = vec![0u8; n];
    let _ = decode_chunk(dtype, &grid, rest, &mut out, true, true);
    if rest.len() >= n {
        let data = &rest[..n];
        let stored = encode_chunk(dtype, Codec::deflate(1), &grid, data, &[]);
        decode_chunk(dtype, &grid, &stored, &mut out, true, false).expect("a chunk encoded in blocks must decode");
        // Bitwise: NaN payloads and -0.0 come back as they went in.
        assert_eq!(out, data, "round trip of {dtype} in blocks {block:?} of {chunk:?}");
    }
}

/// Fuzz target `bounded`: the error-bounded codec (SPEC.md 6.6). Its
/// decoder on arbitrary bytes behind a well-formed header, then its encoder
/// on arbitrary values of a chunk of arbitrary shape, at an arbitrary
/// tolerance: every value must come back within the bound (checked here
/// independently of the encoder's own check), and NaNs, infinities and the
/// value kept exactly bit for bit.
// Chunks in memory form are in native byte order.
#[allow(clippy::host_endian_bytes)]
pub fn bounded(data: &[u8]) {
    let mut b = Bytes { data, pos: 0 };
    let sel = b.u8();
    // The form of the interpolation header below, apart from `sel`, so that
    // every method, width, order, flag and grade meets every element type.
    let form = [b.u8(), b.u8()];
    let dtype = if sel & 1 == 0 { DType::Float32 } else { DType::Float64 };
    let esize = dtype.size();
    let shape = [1 + b.below(12) as usize, 1 + b.below(12) as usize, 1 + b.below(40) as usize];
    let tol =
        if sel & 2 == 0 { 10f64.powi(b.below(80) as i32 - 40) * (1 + b.below(999)) as f64 / 100.0 } else { f64::from_bits(b.u64()).abs() };
    let rest = data.get(b.pos..).unwrap_or_default();
    let elems: usize = shape.iter().product();
    let mut out = vec![0u8; elems * esize];
    let _ = codec::decode(dtype, codec::CODEC_BOUNDED, rest, &mut out);
    // The same bytes behind a header that passes its checks, so that the
    // fuzzer reaches the frame and the codes.
    let mut stream = vec![1u8, [1, 2, 4][usize::from(sel >> 2) % 3], 0, 0];
    stream.extend_from_slice(&1.0f64.to_le_bytes());
    stream.extend_from_slice(&u32::from(sel >> 4).min(elems as u32).to_le_bytes());
    for e in shape {
        stream.extend_from_slice(&(e as u32).to_le_bytes());
    }
    stream.extend_from_slice(rest);
    let _ = codec::decode(dtype, codec::CODEC_BOUNDED, &stream, &mut out);
    // And behind an interpolation header (6.6.2, 6.6.3 anchored or 6.6.4
    // graded): flags (with method 4's grade), order, plane codes and run
    // bytes from the input.
    let method = 2 + form[0] % 3;
    let flags = form[1] & if method == 4 { 0x1f } else { 3 };
    let mut stream = vec![method, [1, 2, 4][usize::from(form[0] >> 2) % 3], flags, (form[0] >> 4) % 6];
    stream.extend_from_slice(&1.0f64.to_le_bytes());
    stream.extend_from_slice(&u32::from(sel >> 4).min(elems as u32).to_le_bytes());
    for e in shape {
        stream.extend_from_slice(&(e as u32).to_le_bytes());
    }
    let runs = if flags & 2 != 0 { rest.len().min(2 * elems) } else { 0 };
    let planes = if flags & 2 != 0 { (rest.len() - runs).min(elems) } else { elems };
    stream.extend_from_slice(&(planes as u32).to_le_bytes());
    stream.extend_from_slice(&(runs as u32).to_le_bytes());
    stream.extend_from_slice(rest);
    let _ = codec::decode(dtype, codec::CODEC_BOUNDED, &stream, &mut out);

    let n = rest.len() / esize;
    if n == 0 {
        return;
    }
    // Values as they come, native order; a 3-D shape when the count allows.
    let chunk = rest[..n * esize].to_vec();
    let dims: Vec<usize> = if n == elems { shape.to_vec() } else { vec![n] };
    let value = |i: usize| -> f64 {
        let e = &chunk[i * esize..(i + 1) * esize];
        if esize == 4 {
            f64::from(f32::from_ne_bytes([e[0], e[1], e[2], e[3]]))
        } else {
            f64::from_ne_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]])
        }
    };
    let bits = |c: &[u8], i: usize| -> u64 {
        let mut le = [0u8; 8];
        le[..esize].copy_from_slice(&c[i * esize..(i + 1) * esize]);
        let v = u64::from_ne_bytes(le);
        if cfg!(target_endian = "big") {
            v >> (8 * (8 - esize))
        } else {
            v
        }
    };
    let exact = [bits(&chunk, 0)];
    // Every predictor: graded (6.6.4), anchored (6.6.3), interpolation
    // (6.6.2), Lorenzo (6.6.1).
    for predictor in [Predictor::Graded, Predictor::Anchored, Predictor::Interpolation, Predictor::Lorenzo] {
        let codec = Codec::bounded_with(tol, predictor);
        let (cb, stored) = codec::encode_shaped(dtype, codec, &chunk, &dims, &exact);
        let mut back = vec![0u8; chunk.len()];
        codec::decode(dtype, cb, &stored, &mut back).expect("an encoded chunk must decode");
        let got = |i: usize| -> f64 {
            let e = &back[i * esize..(i + 1) * esize];
            if esize == 4 {
                f64::from(f32::from_ne_bytes([e[0], e[1], e[2], e[3]]))
            } else {
                f64::from_ne_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]])
            }
        };
        let ok_tol = tol > 0.0 && tol <= 1e300;
        for i in 0..n {
            let (x, y) = (value(i), got(i));
            if !ok_tol || !x.is_finite() || bits(&chunk, i) == exact[0] || cb != codec::CODEC_BOUNDED {
                assert_eq!(bits(&chunk, i), bits(&back, i), "value {i} must come back bit for bit");
            } else {
                // |x - y| <= tol exactly: Fast2Sum of the larger magnitude first.
                let (p, q) = if x.abs() >= y.abs() { (x, -y) } else { (-y, x) };
                let s = p + q;
                let e = q - (s - p);
                let within = s.is_finite() && (s.abs() < tol || (s.abs() == tol && e * s.signum() <= 0.0));
                assert!(within, "value {i}: {x:e} came back as {y:e}, beyond {tol:e}");
            }
        }
    }
}

/// Reads everything a dataset shows: every variable fully (when not huge)
/// in both orders, random regions, statistics and a verification.
/// Returns the full contents of each variable that could be read.
fn read_everything(ds: &Dataset, b: &mut Bytes<'_>) -> Vec<Result<Vec<u8>, ErrorKind>> {
    let mut contents = Vec::new();
    for (v, var) in ds.variables().iter().enumerate() {
        let n: u64 = var.shape().iter().try_fold(1u64, |a, &d| a.checked_mul(d)).unwrap_or(u64::MAX);
        if n <= FUZZ_MAX_READ {
            let full = Region::full(var.shape()).expect("a variable's shape is a region");
            let mut c = vec![0u8; n as usize * var.dtype().size()];
            let mut f = c.clone();
            let r = ds.read_bytes(v, &full, Order::C, &mut c).map(|()| c).map_err(|e| e.kind());
            let rf = ds.read_bytes(v, &full, Order::Fortran, &mut f).map_err(|e| e.kind());
            assert_eq!(r.is_ok(), rf.is_ok(), "reading in C and in Fortran order must agree on success");
            contents.push(r);
        }
        for _ in 0..4 {
            let start: Vec<u64> = var.shape().iter().map(|&d| b.below(d)).collect();
            let shape: Vec<u64> = var.shape().iter().zip(&start).map(|(&d, &s)| 1 + b.below((d - s).min(64))).collect();
            let step: Vec<u64> = shape.iter().map(|_| 1 + b.below(3)).collect();
            let Ok(r) = Region::new(&start, &shape).and_then(|r| r.with_step(&step)) else { continue };
            // The typed path too (other types are refused by type, which is fine).
            let _ = ds.read_vec::<u8>(v, &r, Order::C);
            let len = shape.iter().product::<u64>() as usize * var.dtype().size();
            let mut buf = vec![0u8; len];
            let _ = ds.read_bytes(v, &r, Order::Fortran, &mut buf);
        }
    }
    let _ = ds.stats();
    let _ = ds.verify();
    contents
}

/// Fuzz target `open_read`: arbitrary bytes opened as a container and read everywhere.
pub fn open_read(data: &[u8]) {
    let storage = Arc::new(MemoryStorage::from_bytes(data));
    let Ok(ds) = OpenOptions::new().memory_limit(FUZZ_MEMORY_LIMIT).open_storage(storage) else { return };
    let mut b = Bytes { data, pos: data.len().saturating_sub(64) };
    read_everything(&ds, &mut b);
}

/// A small valid container built from `seed`: its bytes after the last commit,
/// the full contents of each variable after each of its two commits, and the
/// byte range of the newest commit slot.
pub struct Sample {
    /// The container's bytes.
    pub bytes: Vec<u8>,
    /// Per commit (first, second): per variable, its values in C order as native bytes.
    pub commits: [Vec<Vec<u8>>; 2],
    /// Offset of the newest commit slot.
    pub newest_slot: usize,
    /// Size of a commit slot: 512, or 128 in the compact layout.
    pub slot_size: usize,
    /// Chunks stored as bytes by the last commit.
    pub stored_chunks: u64,
}

/// Builds a small random container (1 to 3 dimensions, any type, any codec,
/// edge chunks, constant chunks) with two commits.
pub fn sample(seed: &[u8]) -> Sample {
    // The seed is stretched (a multiplicative hash of position and seed) so
    // that short or repetitive seeds still give varied values.
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    let stretched: Vec<u8> = (0..4096usize)
        .map(|i| {
            h = (h ^ u64::from(seed.get(i % seed.len().max(1)).copied().unwrap_or(0))).wrapping_mul(0x100_0000_01B3).rotate_left(17);
            (h >> 24) as u8
        })
        .collect();
    let mut b = Bytes { data: &stretched, pos: 0 };
    let ndim = 1 + b.below(3) as usize;
    let names = ["a", "b", "c"];
    let shape: Vec<u64> = (0..ndim).map(|_| 1 + b.below(12)).collect();
    let chunk: Vec<u64> = shape.iter().map(|&s| 1 + b.below(s)).collect();
    let dtype = DType::ALL[b.below(DType::ALL.len() as u64) as usize];
    let codec = match b.below(3) {
        // Half the uncompressed samples become zstd ones, decided by the last
        // stretched byte rather than by another draw, so that the samples of
        // the saved crash inputs (tests/fuzz/) stay what they were.
        #[cfg(feature = "zstd")]
        0 if stretched[4095] & 1 == 1 => Codec::zstd(3),
        0 => Codec::NONE,
        1 => Codec::deflate(1),
        _ => Codec::deflate(9).with_shuffle(false),
    };
    let mut builder = DatasetBuilder::new();
    for d in 0..ndim {
        builder.axis(Axis::new(names[d], shape[d]));
    }
    let mut var = VariableBuilder::new("v", dtype, &names[..ndim]);
    var.chunk(&chunk).codec(codec);
    // A third of the samples have format 1.1's layers: two levels of
    // detail, slices along the first axis as a second partitioning, and
    // bricks with margins.
    if b.below(3) == 0 {
        let method = if dtype == DType::Bool { crate::LodMethod::Nearest } else { crate::LodMethod::Average };
        let mut tile = shape.clone();
        tile[0] = 1;
        var.levels_of_detail(2, &[], method).partitioning(&tile).margin(b.below(2), 1);
    } else if dtype != DType::Bool && stretched[4094] & 1 == 1 {
        // Half the others have format 1.5's blocks (chosen by a stretched
        // byte, not a draw, as zstd is above), half a chunk along each axis.
        let block: Vec<u64> = chunk.iter().map(|&c| c.div_ceil(2)).collect();
        var.blocks(Some(&block));
    }
    builder.variable(&var);
    let storage = MemoryStorage::new();
    let mut ds = builder.create_in(Arc::new(storage.clone())).expect("a sample description is valid");
    let n: u64 = shape.iter().product();
    let esize = dtype.size();
    let mut values = vec![0u8; n as usize * esize];
    let mut commits: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    for commit in &mut commits {
        // Half the writes are constant, so constant chunks come and go.
        let constant = b.below(2) == 0;
        let fill = b.u8();
        for (i, x) in values.iter_mut().enumerate() {
            *x = if constant { fill } else { b.u8() ^ (i as u8) };
            if dtype == DType::Bool {
                *x &= 1;
            }
        }
        let start: Vec<u64> = shape.iter().map(|&s| b.below(s)).collect();
        let part: Vec<u64> = shape.iter().zip(&start).map(|(&s, &a)| 1 + b.below(s - a)).collect();
        let region = Region::new(&start, &part).expect("valid region");
        let m: u64 = part.iter().product();
        let data = values[..m as usize * esize].to_vec();
        ds.write_bytes(0usize, &region, Order::C, &data).expect("writing a sample");
        ds.commit().expect("committing a sample");
        let mut full = vec![0u8; n as usize * esize];
        ds.read_bytes(0usize, &Region::full(&shape).expect("shape"), Order::C, &mut full).expect("reading a sample");
        *commit = vec![full];
    }
    let stored_chunks = ds.stats().map(|s| s.stored_chunks).unwrap_or(0);
    let bytes = storage.to_bytes();
    let head = bytes
        .iter()
        .position(|&c| c == b'\n')
        .and_then(|a| bytes[a + 1..].iter().position(|&c| c == b'\n').map(|b2| a + b2 + 2))
        .unwrap_or(0);
    let seq = |at: usize| u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap_or([0; 8]));
    let slot_size = crate::commit::slot_size(head as u64) as usize;
    let newest_slot = if seq(head + slot_size) > seq(head) { head + slot_size } else { head };
    Sample { bytes, commits, newest_slot, slot_size, stored_chunks }
}

/// What reading damaged bytes showed, compared with a sample's commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Opening or reading failed with an error (the damage was found).
    Refused,
    /// Every value equals the last commit's (the damage touched nothing it uses).
    Unchanged,
    /// Every value equals the previous commit's: the newest commit slot was damaged,
    /// which is indistinguishable from a commit interrupted by a crash.
    PreviousCommit,
}

/// Opens damaged sample bytes, reads everything, and classifies what was
/// returned. Panics if values differ from both commits (damage returned as data).
pub fn check_damaged(s: &Sample, damaged: &[u8], changed: std::ops::Range<usize>) -> Outcome {
    let storage = Arc::new(MemoryStorage::from_bytes(damaged));
    let Ok(ds) = OpenOptions::new().memory_limit(FUZZ_MEMORY_LIMIT).open_storage(storage) else { return Outcome::Refused };
    let mut b = Bytes { data: damaged, pos: 0 };
    let got = read_everything(&ds, &mut b);
    if got.iter().any(Result::is_err) || got.len() != s.commits[1].len() {
        return Outcome::Refused;
    }
    let got: Vec<Vec<u8>> = got.into_iter().map(|r| r.unwrap_or_default()).collect();
    if got == s.commits[1] {
        return Outcome::Unchanged;
    }
    let in_newest_slot = changed.start < s.newest_slot + s.slot_size && changed.end > s.newest_slot;
    if got == s.commits[0] && in_newest_slot {
        return Outcome::PreviousCommit;
    }
    panic!("damage at bytes {changed:?} was returned as values instead of being reported");
}

/// Fuzz target `mutate`: a valid random container, damaged by the input,
/// must be refused or read exactly as committed.
pub fn mutate(data: &[u8]) {
    let (seed, edits) = data.split_at(data.len().min(48));
    let s = sample(seed);
    let mut damaged = s.bytes.clone();
    let mut b = Bytes { data: edits, pos: 0 };
    let (mut lo, mut hi) = (usize::MAX, 0);
    for _ in 0..edits.len() / 4 {
        let at = b.below(damaged.len() as u64 + 16) as usize;
        let x = b.u8();
        if at < damaged.len() {
            damaged[at] ^= x;
            (lo, hi) = (lo.min(at), hi.max(at + 1));
        } else {
            damaged.truncate(damaged.len() - (at - damaged.len()).min(damaged.len()));
            (lo, hi) = (lo.min(damaged.len()), hi.max(s.bytes.len()));
        }
    }
    if lo < hi {
        check_damaged(&s, &damaged, lo..hi);
    }
}

/// A container and a sealed fragment for it (SPEC.md 11), made once per
/// process, with the container's contents before and after a merge.
struct MergeFixture {
    container: Vec<u8>,
    fragment: Vec<u8>,
    before: Vec<i32>,
    after: Vec<i32>,
}

const MERGE_SHAPE: [u64; 2] = [16, 12];

fn merge_fixture() -> &'static MergeFixture {
    static FIXTURE: std::sync::OnceLock<MergeFixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = merge_dir("fixture");
        let path = dir.join("c.vds");
        let full = Region::full(&MERGE_SHAPE).expect("shape");
        let mut ds = DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("x", MERGE_SHAPE[0]))
            .axis(Axis::new("y", MERGE_SHAPE[1]))
            .variable(
                VariableBuilder::new("v", DType::Int32, &["x", "y"])
                    .chunk(&[4, 4])
                    .codec(Codec::deflate(1))
                    .levels_of_detail(2, &[], crate::LodMethod::Average)
                    .partitioning(&[1, 12]),
            )
            .create(&path)
            .expect("creating the merge fixture");
        let first: Vec<i32> = (0..16 * 12).map(|i| if i < 8 * 12 { i * 3 } else { -1 }).collect();
        ds.write("v", &full, Order::C, &first).expect("writing the merge fixture");
        ds.close().expect("committing the merge fixture");
        let container = std::fs::read(&path).expect("reading the merge fixture");
        let mut f = Dataset::create_fragment(&path, "f.frag").expect("creating the fixture's fragment");
        let rows: Vec<i32> = (0..8 * 12).map(|i| 1000 - i * 7).collect();
        f.write("v", &Region::new(&[8, 0], &[8, 12]).expect("region"), Order::C, &rows).expect("writing the fragment");
        f.write("v", &Region::new(&[12, 4], &[2, 2]).expect("region"), Order::C, &[5, 6, 7, 8]).expect("writing the fragment");
        f.close().expect("sealing the fragment");
        let fragment = std::fs::read(dir.join("f.frag")).expect("reading the fixture's fragment");
        let mut ds = Dataset::open_rw(&path).expect("opening the merge fixture");
        ds.merge_fragments(&["f.frag"]).expect("merging the fixture's fragment");
        let after = ds.read_vec("v", &full, Order::C).expect("reading the merged fixture");
        MergeFixture { container, fragment, before: first, after }
    })
}

/// A scratch directory of this process for the `merge` target.
fn merge_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vds-fuzz-merge-{}", std::process::id())).join(name);
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

/// Fuzz target `merge`: a sealed fragment damaged by the input (first byte:
/// bit 0 reseals it, recomputing the seal's CRC32 so that the damage gets
/// past it; then two position bytes and one XOR byte per edit, positions
/// past the end truncating) is merged into a fresh copy of its container.
/// Nothing may panic, hang or allocate without bound. A failed merge leaves
/// the container as it was; a fragment skipped changes nothing; and without
/// resealing, a merged fragment reads exactly as written or reports damage.
pub fn merge(data: &[u8]) {
    let fx = merge_fixture();
    let Some((&mode, edits)) = data.split_first() else { return };
    let mut frag = fx.fragment.clone();
    for e in edits.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([e[0], e[1]])) % (fx.fragment.len() + 16);
        if at < frag.len() {
            frag[at] ^= e[2];
        } else {
            frag.truncate(frag.len().saturating_sub(at - fx.fragment.len() + 1));
        }
    }
    let resealed = mode & 1 == 1;
    if resealed && frag.len() >= 48 {
        let n = frag.len();
        let at = u64::from_le_bytes(frag[n - 40..n - 32].try_into().unwrap_or([0; 8]));
        if let Ok(at) = usize::try_from(at) {
            if at + 4 <= n {
                let crc = crate::wire::crc32(&frag[at..n - 4]);
                frag[n - 4..].copy_from_slice(&crc.to_le_bytes());
            }
        }
    }
    let dir = merge_dir("run");
    let path = dir.join("c.vds");
    std::fs::write(&path, &fx.container).expect("writing the container");
    std::fs::write(dir.join("f.frag"), &frag).expect("writing the fragment");
    let full = Region::full(&MERGE_SHAPE).expect("shape");
    let Ok(mut ds) = OpenOptions::new().write(true).memory_limit(FUZZ_MEMORY_LIMIT).open(&path) else {
        panic!("the untouched container does not open")
    };
    let result = ds.merge_fragments(&["f.frag"]);
    drop(ds);
    let ds = OpenOptions::new().memory_limit(FUZZ_MEMORY_LIMIT).open(&path).expect("the container opens after a merge");
    let values = ds.read_vec::<i32>("v", &full, Order::C);
    match result {
        Err(_) => assert!(values.ok() == Some(fx.before.clone()), "a failed merge changed the container"),
        Ok(r) if r.merged.is_empty() => assert!(values.ok() == Some(fx.before.clone()), "a skipped fragment changed the container"),
        Ok(_) => {
            if let (false, Ok(v)) = (resealed, &values) {
                assert!(*v == fx.after, "a damaged fragment was merged and read as other values");
            }
            let mut b = Bytes { data, pos: 0 };
            read_everything(&ds, &mut b);
        }
    }
}
