//! Chunk encoding: raw element bytes <-> stored bytes (SPEC.md section 6).
//!
//! The in-memory form of a chunk is its elements in C order, native-endian,
//! one byte per bool. The raw on-disk form is little-endian with bools packed
//! 8 to a byte (least significant bit first). Stored bytes are the raw form,
//! optionally byte-shuffled, optionally compressed (deflate, or zstd with the
//! cargo feature `zstd`); the index entry records which (the codec byte), so
//! a chunk that does not compress is kept raw.
//!
//! Decoding never writes more than the declared raw length: the output buffer
//! is allocated from the variable's chunk shape, not from the stored bytes.

use crate::spec::{Codec, Compression, DType};

pub(crate) mod blocks;
#[cfg(feature = "zstd")]
pub(crate) mod bounded;
mod deflate;
#[cfg(feature = "zstd")]
mod zstd;

/// Runs `f` on this thread's context in `slot`, made on first use; once the
/// thread-local has been destroyed (a call from another thread-local's
/// destructor that runs after it), on a context made for this call alone.
/// None when the codec library cannot allocate one. Shared by the deflate
/// and zstd contexts.
fn with_context<T: 'static, R>(
    slot: &'static std::thread::LocalKey<std::cell::RefCell<Option<T>>>,
    create: fn() -> Option<T>,
    f: impl FnOnce(&mut T) -> R,
) -> Option<R> {
    let mut f = Some(f);
    let kept = slot.try_with(|cell| {
        let mut cell = cell.try_borrow_mut().ok()?;
        if cell.is_none() {
            *cell = create();
        }
        let f = f.take()?;
        cell.as_mut().map(f)
    });
    match (kept, f) {
        (Ok(Some(r)), _) => Some(r),
        (_, Some(f)) => create().as_mut().map(f),
        (_, None) => None,
    }
}

/// Codec byte: the compression id in the low 4 bits.
pub(crate) const CODEC_NONE: u8 = 0;
/// Codec byte: zlib-wrapped deflate.
pub(crate) const CODEC_DEFLATE: u8 = 1;
/// Codec byte: one zstd frame (format 1.3).
pub(crate) const CODEC_ZSTD: u8 = 2;
/// Codec byte: an error-bounded stream (format 1.5, SPEC.md 6.6).
pub(crate) const CODEC_BOUNDED: u8 = 3;
/// Codec byte flag: the raw bytes were byte-shuffled before compression.
pub(crate) const CODEC_SHUFFLE: u8 = 0x10;

/// The most raw bytes one stored byte can decode to with compression id
/// `codec & 0x0f` (SPEC.md 9.3): deflate 1032 (zlib's largest expansion),
/// zstd 32768 (a 4-byte RLE block makes 128 KiB), a bounded stream
/// 8 * 255 times zstd's (each byte of its zstd frame's content stands for
/// at most 255 elements, a run of zero steps, of at most 8 bytes).
pub(crate) fn max_expansion(codec: u8) -> u64 {
    match codec & 0x0f {
        CODEC_ZSTD => 32_768,
        CODEC_BOUNDED => 8 * 255 * 32_768,
        _ => 1032,
    }
}

/// Bytes of the raw on-disk form of `elems` elements of `dtype`.
pub(crate) fn raw_len(dtype: DType, elems: usize) -> usize {
    if dtype == DType::Bool {
        elems.div_ceil(8)
    } else {
        elems * dtype.size()
    }
}

/// Whether a chunk of `dtype` in memory form is byte for byte its raw
/// on-disk form, so that it can be stored and read without a copy: every
/// type but bool (packed on disk) on little-endian hosts, and one-byte types
/// everywhere.
pub(crate) fn raw_is_memory_form(dtype: DType) -> bool {
    dtype != DType::Bool && (dtype.size() == 1 || cfg!(target_endian = "little"))
}

/// Converts native-endian elements to little-endian in place (nothing to do on little-endian hosts).
#[allow(unused_variables)]
pub(crate) fn native_to_le(buf: &mut [u8], esize: usize) {
    #[cfg(target_endian = "big")]
    if esize > 1 {
        for e in buf.chunks_exact_mut(esize) {
            e.reverse();
        }
    }
}

/// Converts little-endian elements to native-endian in place.
pub(crate) fn le_to_native(buf: &mut [u8], esize: usize) {
    native_to_le(buf, esize);
}

/// Compresses whole bytes at a level into a shorter stream, or None.
type Compressor = fn(&[u8], u8) -> Option<Vec<u8>>;

/// Encodes one chunk in memory form with `codec`; returns the codec byte
/// that describes the result and the stored bytes. A chunk of a bounded
/// codec is taken as one axis, with no values kept exactly but NaNs and
/// infinities: see [`encode_shaped`].
pub(crate) fn encode(dtype: DType, codec: Codec, data: &[u8]) -> (u8, Vec<u8>) {
    encode_shaped(dtype, codec, data, &[data.len() / dtype.size()], &[])
}

/// Encodes one chunk of `shape` (elements, C order) in memory form with
/// `codec`; a bounded codec keeps the elements whose bits (of `dtype`'s
/// width) are in `exact` bit for bit, and stores the chunk losslessly (zstd,
/// shuffled) when its stream would not be shorter or would miss the bound.
pub(crate) fn encode_shaped(dtype: DType, codec: Codec, data: &[u8], shape: &[usize], exact: &[u64]) -> (u8, Vec<u8>) {
    let esize = dtype.size();
    #[cfg(feature = "zstd")]
    if let Compression::Bounded { tolerance, level, predictor } = codec.compression {
        if matches!(dtype, DType::Float32 | DType::Float64) {
            if let Some(out) = bounded::encode(esize, data, shape, tolerance, exact, level, predictor) {
                return (CODEC_BOUNDED, out);
            }
        }
        return encode_shaped(dtype, Codec::zstd(level), data, shape, exact);
    }
    let _ = (shape, exact);
    let raw_form = || {
        if dtype == DType::Bool {
            pack_bits(data)
        } else {
            let mut r = data.to_vec();
            native_to_le(&mut r, esize);
            r
        }
    };
    let (id, level, compress): (u8, u8, Compressor) = match codec.compression {
        Compression::None => return (CODEC_NONE, raw_form()),
        Compression::Deflate { level } => (CODEC_DEFLATE, level, deflate::compress_shorter),
        #[cfg(feature = "zstd")]
        Compression::Zstd { level } => (CODEC_ZSTD, level, zstd::compress_shorter),
        // Not built in: no descriptor can name it (SPEC.md 3.4), so this is
        // not reached; storing raw is still a valid encoding.
        #[cfg(not(feature = "zstd"))]
        Compression::Zstd { .. } | Compression::Bounded { .. } => return (CODEC_NONE, raw_form()),
        // Handled above.
        #[cfg(feature = "zstd")]
        Compression::Bounded { .. } => return (CODEC_NONE, raw_form()),
    };
    let shuffle = codec.shuffle && esize > 1 && dtype != DType::Bool;
    // Compress from the memory form where it is the raw form; the raw form
    // is only copied out when the chunk is stored raw.
    let compressed = if shuffle {
        compress(&shuffle_to_le(data, esize), level)
    } else if raw_is_memory_form(dtype) {
        compress(data, level)
    } else {
        compress(&raw_form(), level)
    };
    // The output may not grow beyond the raw size: if it would, the chunk is stored raw.
    match compressed {
        Some(out) => (id | if shuffle { CODEC_SHUFFLE } else { 0 }, out),
        None => (CODEC_NONE, raw_form()),
    }
}

/// Decodes stored bytes with codec byte `codec` into `out`, the chunk's memory
/// form (exactly chunk_elems * esize bytes). Errors describe what was wrong.
pub(crate) fn decode(dtype: DType, codec: u8, stored: &[u8], out: &mut [u8]) -> Result<(), String> {
    let esize = dtype.size();
    let elems = out.len() / esize;
    let raw_n = raw_len(dtype, elems);
    if codec & !(0x0f | CODEC_SHUFFLE) != 0 {
        return Err(format!("unknown codec flags {codec:#04x}"));
    }
    let shuffled = codec & CODEC_SHUFFLE != 0;
    let direct = dtype != DType::Bool && !shuffled;
    match codec & 0x0f {
        CODEC_NONE => {
            if shuffled {
                return Err("shuffle flag without compression".into());
            }
            if stored.len() != raw_n {
                return Err(format!("raw chunk is {} bytes, expected {raw_n}", stored.len()));
            }
            if dtype == DType::Bool {
                unpack_bits(stored, out);
            } else {
                out.copy_from_slice(stored);
                le_to_native(out, esize);
            }
        }
        id @ (CODEC_DEFLATE | CODEC_ZSTD) => {
            if shuffled && (esize == 1 || dtype == DType::Bool) {
                return Err("shuffle flag on a 1-byte type".into());
            }
            let decompress: fn(&[u8], &mut [u8]) -> Result<(), String> = match id {
                CODEC_DEFLATE => deflate::inflate_exact,
                #[cfg(feature = "zstd")]
                _ => zstd::decompress_exact,
                #[cfg(not(feature = "zstd"))]
                _ => return Err("zstd chunk, and this build of libvds has no zstd (cargo feature \"zstd\")".into()),
            };
            // Decompress straight into `out` when the raw form is the memory form.
            if direct {
                decompress(stored, out)?;
                le_to_native(out, esize);
            } else {
                let mut raw = vec![0u8; raw_n];
                decompress(stored, &mut raw)?;
                if dtype == DType::Bool {
                    unpack_bits(&raw, out);
                } else {
                    unshuffle_to_native(&raw, esize, out);
                }
            }
        }
        CODEC_BOUNDED => {
            if shuffled {
                return Err("shuffle flag on a bounded chunk".into());
            }
            if !matches!(dtype, DType::Float32 | DType::Float64) {
                return Err(format!("bounded chunk in a {} variable (only float32 and float64)", dtype.name()));
            }
            #[cfg(feature = "zstd")]
            {
                bounded::decode(esize, stored, out)?;
            }
            #[cfg(not(feature = "zstd"))]
            return Err("bounded chunk, and this build of libvds has no zstd (cargo feature \"zstd\")".into());
        }
        other => return Err(format!("unknown compression id {other}")),
    }
    Ok(())
}

/// Packs one byte per bool (0 or not 0) into bits, least significant bit first.
pub(crate) fn pack_bits(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; data.len().div_ceil(8)];
    for (byte, bits) in out.iter_mut().zip(data.chunks(8)) {
        for (k, &b) in bits.iter().enumerate() {
            *byte |= u8::from(b != 0) << k;
        }
    }
    out
}

/// Unpacks bits (least significant first) into one byte (0 or 1) per element of `out`.
pub(crate) fn unpack_bits(bits: &[u8], out: &mut [u8]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = (bits[i / 8] >> (i % 8)) & 1;
    }
}

/// Byte shuffle of native-endian elements into their little-endian byte
/// planes: all least significant bytes, then all second bytes, ...
fn shuffle_to_le(data: &[u8], esize: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    match esize {
        2 => shuffle_2(data, &mut out),
        4 => shuffle_4(data, &mut out),
        8 => shuffle_8(data, &mut out),
        _ => {
            let n = data.len() / esize;
            for (i, e) in data.chunks_exact(esize).enumerate() {
                for (b, &x) in e.iter().enumerate() {
                    let plane = if cfg!(target_endian = "little") { b } else { esize - 1 - b };
                    out[plane * n + i] = x;
                }
            }
        }
    }
    out
}

/// The inverse of [`shuffle_to_le`]: little-endian byte planes into
/// native-endian elements.
fn unshuffle_to_native(raw: &[u8], esize: usize, out: &mut [u8]) {
    match esize {
        2 => unshuffle_2(raw, out),
        4 => unshuffle_4(raw, out),
        8 => unshuffle_8(raw, out),
        _ => {
            let n = raw.len() / esize;
            for (i, e) in out.chunks_exact_mut(esize).enumerate() {
                for (b, x) in e.iter_mut().enumerate() {
                    *x = raw[b * n + i];
                }
            }
            le_to_native(out, esize);
        }
    }
}

/// Shuffle and unshuffle for one element size, moving each element as one
/// integer: written this way the loops vectorize, and run 3x (8-byte
/// elements: 1.2x) faster than byte by byte.
macro_rules! byte_planes {
    ($shuffle:ident, $unshuffle:ident, $int:ty, $($plane:ident $b:literal)+) => {
        // The memory form is native-endian: elements are read and written as such.
        #[allow(clippy::host_endian_bytes)]
        fn $shuffle(data: &[u8], out: &mut [u8]) {
            const N: usize = std::mem::size_of::<$int>();
            let n = data.len() / N;
            let mut planes = out.chunks_exact_mut(n.max(1));
            $(let Some($plane) = planes.next().filter(|_| n > 0) else { return };)+
            for (i, e) in data.chunks_exact(N).enumerate() {
                let v = <$int>::from_ne_bytes(e.try_into().unwrap_or_default());
                $($plane[i] = (v >> (8 * $b)) as u8;)+
            }
        }

        #[allow(clippy::host_endian_bytes)]
        fn $unshuffle(raw: &[u8], out: &mut [u8]) {
            const N: usize = std::mem::size_of::<$int>();
            let n = raw.len() / N;
            $(let $plane = &raw[$b * n..($b + 1) * n];)+
            for (i, o) in out.chunks_exact_mut(N).enumerate().take(n) {
                let v: $int = 0 $(| <$int>::from($plane[i]) << (8 * $b))+;
                o.copy_from_slice(&v.to_ne_bytes());
            }
        }
    };
}

byte_planes!(shuffle_2, unshuffle_2, u16, p0 0 p1 1);
byte_planes!(shuffle_4, unshuffle_4, u32, p0 0 p1 1 p2 2 p3 3);
byte_planes!(shuffle_8, unshuffle_8, u64, p0 0 p1 1 p2 2 p3 3 p4 4 p5 5 p6 6 p7 7);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(dtype: DType, codec: Codec, data: &[u8]) -> u8 {
        let (c, bytes) = encode(dtype, codec, data);
        let mut out = vec![0xAAu8; data.len()];
        decode(dtype, c, &bytes, &mut out).unwrap();
        assert_eq!(out, data);
        c
    }

    #[test]
    #[cfg_attr(miri, ignore = "libdeflate is C, which miri cannot run")]
    fn codecs_round_trip() {
        let n = if cfg!(miri) { 300 } else { 4000 };
        let data: Vec<u8> = (0..n).flat_map(|i: u32| ((i / 7) as f32).to_le_bytes()).collect();
        assert_eq!(round_trip(DType::Float32, Codec::NONE, &data), CODEC_NONE);
        assert_eq!(round_trip(DType::Float32, Codec::deflate(6), &data), CODEC_DEFLATE | CODEC_SHUFFLE);
        assert_eq!(round_trip(DType::Float32, Codec::deflate(1).with_shuffle(false), &data), CODEC_DEFLATE);
        #[cfg(feature = "zstd")]
        {
            assert_eq!(round_trip(DType::Float32, Codec::zstd(1), &data), CODEC_ZSTD | CODEC_SHUFFLE);
            assert_eq!(round_trip(DType::Float32, Codec::zstd(19).with_shuffle(false), &data), CODEC_ZSTD);
            assert_eq!(round_trip(DType::Int16, Codec::zstd(3), &data), CODEC_ZSTD | CODEC_SHUFFLE);
            assert_eq!(round_trip(DType::Float64, Codec::zstd(3), &data), CODEC_ZSTD | CODEC_SHUFFLE);
        }
        let bools: Vec<u8> = (0..1001).map(|i| u8::from(i % 3 == 0)).collect();
        #[cfg(feature = "zstd")]
        assert_eq!(round_trip(DType::Bool, Codec::zstd(2), &bools), CODEC_ZSTD);
        assert_eq!(round_trip(DType::Bool, Codec::deflate(9), &bools), CODEC_DEFLATE);
        assert_eq!(round_trip(DType::Bool, Codec::NONE, &bools), CODEC_NONE);
    }

    #[test]
    #[cfg_attr(miri, ignore = "libdeflate is C, which miri cannot run")]
    fn incompressible_data_is_stored_raw() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..if cfg!(miri) { 512 } else { 4096 })
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(round_trip(DType::UInt8, Codec::deflate(9), &data), CODEC_NONE);
        #[cfg(feature = "zstd")]
        assert_eq!(round_trip(DType::UInt8, Codec::zstd(22), &data), CODEC_NONE);
    }

    #[test]
    #[cfg_attr(miri, ignore = "libdeflate is C, which miri cannot run")]
    fn bombs_and_truncation_are_refused() {
        // Smaller under miri, which interprets every instruction of the inflater.
        const N: usize = if cfg!(miri) { 1 << 12 } else { 1 << 16 };
        let big = vec![0u8; N];
        let bomb = deflate::compress_shorter(&big, 9).unwrap();
        let mut out = vec![0u8; 1024];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb, &mut out).unwrap_err().contains("it holds more"));
        let mut out = vec![0u8; 2 * N];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb, &mut out).is_err());
        let mut out = vec![0u8; N];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb[..bomb.len() / 2], &mut out).is_err());
        assert!(decode(DType::UInt8, 0x07, &bomb, &mut out).is_err());
        assert!(decode(DType::UInt8, CODEC_NONE, &bomb, &mut out).is_err());
    }

    /// A chunk encoded and decoded from a thread-local's destructor that runs
    /// after the codec contexts' own (so those are gone) uses contexts made
    /// for the call, instead of panicking, which would abort the process.
    #[test]
    #[cfg_attr(miri, ignore = "libdeflate and libzstd are C, which miri cannot run")]
    fn codecs_work_after_the_threads_contexts_are_destroyed() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static ROUND_TRIPS: AtomicUsize = AtomicUsize::new(0);
        struct Late;
        impl Drop for Late {
            fn drop(&mut self) {
                let data: Vec<u8> = (0..4000u32).flat_map(|i| ((i / 7) as f32).to_le_bytes()).collect();
                let codecs = [
                    Codec::deflate(6),
                    #[cfg(feature = "zstd")]
                    Codec::zstd(3),
                ];
                for codec in codecs {
                    let (c, bytes) = encode(DType::Float32, codec, &data);
                    let mut out = vec![0u8; data.len()];
                    if c != CODEC_NONE && decode(DType::Float32, c, &bytes, &mut out).is_ok() && out == data {
                        ROUND_TRIPS.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
        thread_local!(static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) });
        std::thread::spawn(|| {
            // Registered first, so destroyed last (thread-locals go in reverse order).
            LATE.with(|l| *l.borrow_mut() = Some(Late));
            round_trip(DType::Float32, Codec::deflate(6), &[0u8; 400]);
            #[cfg(feature = "zstd")]
            round_trip(DType::Float32, Codec::zstd(3), &[0u8; 400]);
        })
        .join()
        .unwrap();
        assert_eq!(ROUND_TRIPS.load(Ordering::SeqCst), if cfg!(feature = "zstd") { 2 } else { 1 });
    }

    /// The shuffle puts byte b of element i (little-endian) at b * n + i, for
    /// every element size, and the unshuffle gives the memory form back.
    #[test]
    fn shuffle_makes_little_endian_byte_planes() {
        for esize in [2usize, 4, 8, 3] {
            for n in [0usize, 1, 7, 1000] {
                let values: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7).collect();
                let le: Vec<Vec<u8>> = values.iter().map(|v| v.to_le_bytes()[..esize].to_vec()).collect();
                let memory: Vec<u8> = le
                    .iter()
                    .flat_map(|e| {
                        let mut e = e.clone();
                        le_to_native(&mut e, esize);
                        e
                    })
                    .collect();
                let mut expected = vec![0u8; n * esize];
                for (i, e) in le.iter().enumerate() {
                    for (b, &x) in e.iter().enumerate() {
                        expected[b * n + i] = x;
                    }
                }
                let shuffled = shuffle_to_le(&memory, esize);
                assert_eq!(shuffled, expected, "esize {esize}, {n} elements");
                let mut back = vec![0xAAu8; memory.len()];
                unshuffle_to_native(&shuffled, esize, &mut back);
                assert_eq!(back, memory, "esize {esize}, {n} elements");
            }
        }
    }

    /// Streams agree with an independent zlib (zlib-rs through flate2) both
    /// ways, at every level, and a damaged checksum or trailing byte is refused.
    #[test]
    #[cfg_attr(miri, ignore = "libdeflate is C, which miri cannot run")]
    fn streams_agree_with_an_independent_zlib() {
        use flate2::{Compress, Decompress, FlushCompress, FlushDecompress, Status};
        let data: Vec<u8> = (0..20_000u32).flat_map(|i| (((i as f32) * 0.01).sin() * 1000.0).to_le_bytes()).collect();
        for level in 0..=9u8 {
            let (c, ours) = encode(DType::Float32, Codec::deflate(level).with_shuffle(false), &data);
            if level == 0 {
                assert_eq!(c, CODEC_NONE, "level 0 stores, so the stream is longer and the chunk is kept raw");
                continue;
            }
            assert_eq!(c, CODEC_DEFLATE);
            let mut z = Decompress::new(true);
            let mut back = Vec::with_capacity(data.len() + 1);
            assert_eq!(z.decompress_vec(&ours, &mut back, FlushDecompress::Finish).unwrap(), Status::StreamEnd);
            assert_eq!(back, data, "level {level}: zlib-rs reads what libvds wrote");

            let mut z = Compress::new(flate2::Compression::new(u32::from(level)), true);
            let mut theirs = Vec::with_capacity(2 * data.len());
            assert_eq!(z.compress_vec(&data, &mut theirs, FlushCompress::Finish).unwrap(), Status::StreamEnd);
            let mut out = vec![0u8; data.len()];
            decode(DType::Float32, CODEC_DEFLATE, &theirs, &mut out).unwrap();
            assert_eq!(out, data, "level {level}: libvds reads what zlib-rs wrote");

            let mut bad = theirs.clone();
            *bad.last_mut().unwrap() ^= 1;
            let e = decode(DType::Float32, CODEC_DEFLATE, &bad, &mut out).unwrap_err();
            assert!(e.contains("Adler-32"), "{e}");
            bad = theirs.clone();
            bad.push(0);
            let e = decode(DType::Float32, CODEC_DEFLATE, &bad, &mut out).unwrap_err();
            assert_eq!(e, "1 bytes after the end of the deflate stream");
            let mut short = vec![0u8; data.len() + 4];
            let e = decode(DType::Float32, CODEC_DEFLATE, &theirs, &mut short).unwrap_err();
            assert_eq!(e, format!("deflate stream holds {} bytes, expected {}", data.len(), data.len() + 4));
        }
    }

    /// RFC 8878's frame magic number, little-endian.
    #[cfg(feature = "zstd")]
    const FRAME_MAGIC_FOR_TESTS: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

    /// A build without zstd refuses zstd chunks with an error.
    #[test]
    #[cfg(not(feature = "zstd"))]
    fn zstd_chunks_are_an_error_without_zstd() {
        let mut out = vec![0u8; 64];
        for codec in [CODEC_ZSTD, CODEC_ZSTD | CODEC_SHUFFLE] {
            let e = decode(DType::Float32, codec, &[0x28, 0xB5, 0x2F, 0xFD, 0, 0], &mut out).unwrap_err();
            assert!(e.contains("this build of libvds has no zstd"), "{e}");
        }
    }

    /// Frames agree with an independent zstd (ruzstd, pure Rust) both ways,
    /// and everything but one frame of exactly the raw length is refused.
    #[test]
    #[cfg(feature = "zstd")]
    #[cfg_attr(miri, ignore = "libzstd is C, which miri cannot run")]
    fn frames_agree_with_an_independent_zstd() {
        use ruzstd::decoding::FrameDecoder;
        use ruzstd::encoding::{compress_to_vec, CompressionLevel};
        let data: Vec<u8> = (0..20_000u32).flat_map(|i| (((i as f32) * 0.01).sin() * 1000.0).to_le_bytes()).collect();
        let decode_f32 = |stored: &[u8], out: &mut [u8]| decode(DType::Float32, CODEC_ZSTD, stored, out);
        for level in [1u8, 3, 9, 19, 22] {
            let (c, ours) = encode(DType::Float32, Codec::zstd(level).with_shuffle(false), &data);
            assert_eq!(c, CODEC_ZSTD, "level {level}");
            let mut back = Vec::with_capacity(data.len());
            FrameDecoder::new().decode_all_to_vec(&ours, &mut back).unwrap();
            assert_eq!(back, data, "level {level}: ruzstd reads what libvds wrote");
        }
        for level in [CompressionLevel::Uncompressed, CompressionLevel::Fastest] {
            let theirs = compress_to_vec(&data[..], level);
            let mut out = vec![0u8; data.len()];
            decode_f32(&theirs, &mut out).unwrap();
            assert_eq!(out, data, "libvds reads what ruzstd wrote");
        }

        let (_, frame) = encode(DType::Float32, Codec::zstd(3).with_shuffle(false), &data);
        let refused = |stored: &[u8], n: usize, why: &str| {
            let mut out = vec![0u8; n];
            let e = decode_f32(stored, &mut out).unwrap_err();
            assert!(e.contains(why), "{e:?} does not say {why:?}");
        };
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        refused(&two, data.len(), &format!("{} bytes after the end of the zstd frame", frame.len()));
        refused(&two, 2 * data.len(), "after the end of the zstd frame");
        refused(&frame[..frame.len() - 1], data.len(), "truncated or damaged");
        refused(&frame, data.len() - 4, &format!("zstd frame holds {} bytes, expected {}", data.len(), data.len() - 4));
        refused(&frame, data.len() + 4, &format!("zstd frame holds {} bytes", data.len()));
        let mut skippable = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        refused(&skippable, 4, "not a zstd frame (bad magic number)");
        skippable.splice(..0, frame.iter().copied());
        refused(&skippable, data.len(), "12 bytes after the end of the zstd frame");
        // The frame header descriptor's Dictionary_ID_flag, with a one-byte id after it.
        let mut dict = frame.clone();
        dict[4] |= 1;
        let at = if dict[4] & 0x20 != 0 { 5 } else { 6 };
        dict.insert(at, 7);
        refused(&dict, data.len(), "needs dictionary 7");
        // A frame with a content checksum (which libvds does not write) is checked when present.
        let sum = compress_to_vec(&data[..], CompressionLevel::Fastest);
        // Without a content size in the header (ruzstd writes none) the size is checked after decoding.
        assert!(matches!(zstd_safe::get_frame_content_size(&sum), Ok(None)));
        refused(&sum, data.len() - 4, &format!("does not decode to the declared {} bytes", data.len() - 4));
        refused(&sum, data.len() + 4, &format!("zstd frame holds {} bytes, expected {}", data.len(), data.len() + 4));
        // Blocks larger than Block_Maximum_Size, which libzstd's one-pass decoder would accept:
        // one RLE block of 2 MiB - 1 (the limit is 128 KiB) in a 13-byte frame with its content size ...
        let n: u32 = (1 << 21) - 1;
        let mut rle = FRAME_MAGIC_FOR_TESTS.to_vec();
        rle.push(0xA0); // single segment, 4-byte content size
        rle.extend_from_slice(&n.to_le_bytes());
        rle.extend_from_slice(&(n << 3 | 1 << 1 | 1).to_le_bytes()[..3]);
        rle.push(7);
        assert_eq!(rle.len(), 13);
        refused(&rle, n as usize, "zstd block of 2097151 bytes exceeds the frame's largest block (131072 bytes)");
        // ... and a raw block of 2000 bytes in a frame whose window is 1 KiB.
        let mut raw = FRAME_MAGIC_FOR_TESTS.to_vec();
        raw.extend_from_slice(&[0x00, 0x00]); // no content size, window descriptor 0: 1 KiB
        raw.extend_from_slice(&(2000u32 << 3 | 1).to_le_bytes()[..3]);
        raw.extend(std::iter::repeat_n(5u8, 2000));
        refused(&raw, 2000, "zstd block of 2000 bytes exceeds the frame's largest block (1024 bytes)");
        assert!(sum[4] & 0x04 != 0, "ruzstd writes a content checksum");
        let mut bad = sum.clone();
        *bad.last_mut().unwrap() ^= 1;
        refused(&bad, data.len(), "does not decode to the declared");
    }
}
