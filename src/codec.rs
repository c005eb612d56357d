//! Chunk encoding: raw element bytes <-> stored bytes (SPEC.md section 6).
//!
//! The in-memory form of a chunk is its elements in C order, native-endian,
//! one byte per bool. The raw on-disk form is little-endian with bools packed
//! 8 to a byte (least significant bit first). Stored bytes are the raw form,
//! optionally byte-shuffled, optionally deflated; the index entry records
//! which (the codec byte), so a chunk that does not compress is kept raw.
//!
//! Decoding never writes more than the declared raw length: the output buffer
//! is allocated from the variable's chunk shape, not from the stored bytes.

use crate::spec::{Codec, Compression, DType};
use flate2::{Compress, Decompress, FlushCompress, FlushDecompress, Status};

/// Codec byte: the compression id in the low 4 bits.
pub(crate) const CODEC_NONE: u8 = 0;
/// Codec byte: zlib-wrapped deflate.
pub(crate) const CODEC_DEFLATE: u8 = 1;
/// Codec byte flag: the raw bytes were byte-shuffled before compression.
pub(crate) const CODEC_SHUFFLE: u8 = 0x10;

/// Bytes of the raw on-disk form of `elems` elements of `dtype`.
pub(crate) fn raw_len(dtype: DType, elems: usize) -> usize {
    if dtype == DType::Bool {
        elems.div_ceil(8)
    } else {
        elems * dtype.size()
    }
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

/// Encodes one chunk in memory form with `codec`; returns the codec byte
/// that describes the result and the stored bytes.
pub(crate) fn encode(dtype: DType, codec: Codec, data: &[u8]) -> (u8, Vec<u8>) {
    let esize = dtype.size();
    let mut raw = if dtype == DType::Bool {
        pack_bits(data)
    } else {
        let mut r = data.to_vec();
        native_to_le(&mut r, esize);
        r
    };
    let level = match codec.compression {
        Compression::None => return (CODEC_NONE, raw),
        Compression::Deflate { level } => level,
    };
    let shuffle = codec.shuffle && esize > 1 && dtype != DType::Bool;
    if shuffle {
        raw = shuffle_bytes(&raw, esize);
    }
    // The output may not grow beyond the raw size: if it would, the chunk is stored raw.
    let mut out = Vec::with_capacity(raw.len());
    let mut z = Compress::new(flate2::Compression::new(u32::from(level)), true);
    match z.compress_vec(&raw, &mut out, FlushCompress::Finish) {
        Ok(Status::StreamEnd) if out.len() < raw.len() => (CODEC_DEFLATE | if shuffle { CODEC_SHUFFLE } else { 0 }, out),
        _ => {
            if shuffle {
                raw = unshuffle_bytes(&raw, esize);
            }
            (CODEC_NONE, raw)
        }
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
        CODEC_DEFLATE => {
            if shuffled && (esize == 1 || dtype == DType::Bool) {
                return Err("shuffle flag on a 1-byte type".into());
            }
            // Inflate straight into `out` when the raw form is the memory form.
            if direct {
                inflate_exact(stored, out)?;
                le_to_native(out, esize);
            } else {
                let mut raw = vec![0u8; raw_n];
                inflate_exact(stored, &mut raw)?;
                if dtype == DType::Bool {
                    unpack_bits(&raw, out);
                } else {
                    unshuffle_into(&raw, esize, out);
                    le_to_native(out, esize);
                }
            }
        }
        other => return Err(format!("unknown compression id {other}")),
    }
    Ok(())
}

/// Inflates a zlib stream into exactly `out.len()` bytes: a stream that ends
/// early, runs long, or has trailing bytes is an error. Output is bounded by
/// `out`, so no input can make this allocate or write more.
fn inflate_exact(input: &[u8], out: &mut [u8]) -> Result<(), String> {
    let mut z = Decompress::new(true);
    loop {
        let (i, o) = (z.total_in() as usize, z.total_out() as usize);
        let status =
            z.decompress(&input[i..], &mut out[o..], FlushDecompress::Finish).map_err(|e| format!("deflate stream is invalid: {e}"))?;
        if status == Status::StreamEnd {
            break;
        }
        if z.total_in() as usize == i && z.total_out() as usize == o {
            return Err(if o == out.len() {
                format!("deflate stream holds more than the declared {} bytes", out.len())
            } else {
                format!("deflate stream ends after {o} of {} bytes", out.len())
            });
        }
    }
    if z.total_out() as usize != out.len() {
        return Err(format!("deflate stream holds {} bytes, expected {}", z.total_out(), out.len()));
    }
    if z.total_in() as usize != input.len() {
        return Err(format!("{} bytes after the end of the deflate stream", input.len() - z.total_in() as usize));
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

/// Byte shuffle: all first bytes of the elements, then all second bytes, ...
fn shuffle_bytes(raw: &[u8], esize: usize) -> Vec<u8> {
    let n = raw.len() / esize;
    let mut out = vec![0u8; raw.len()];
    for (i, e) in raw.chunks_exact(esize).enumerate() {
        for (b, &x) in e.iter().enumerate() {
            out[b * n + i] = x;
        }
    }
    out
}

fn unshuffle_into(raw: &[u8], esize: usize, out: &mut [u8]) {
    let n = raw.len() / esize;
    for (i, e) in out.chunks_exact_mut(esize).enumerate() {
        for (b, x) in e.iter_mut().enumerate() {
            *x = raw[b * n + i];
        }
    }
}

fn unshuffle_bytes(raw: &[u8], esize: usize) -> Vec<u8> {
    let mut out = vec![0u8; raw.len()];
    unshuffle_into(raw, esize, &mut out);
    out
}

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
    fn codecs_round_trip() {
        let n = if cfg!(miri) { 300 } else { 4000 };
        let data: Vec<u8> = (0..n).flat_map(|i: u32| ((i / 7) as f32).to_le_bytes()).collect();
        assert_eq!(round_trip(DType::Float32, Codec::NONE, &data), CODEC_NONE);
        assert_eq!(round_trip(DType::Float32, Codec::deflate(6), &data), CODEC_DEFLATE | CODEC_SHUFFLE);
        assert_eq!(round_trip(DType::Float32, Codec::deflate(1).with_shuffle(false), &data), CODEC_DEFLATE);
        let bools: Vec<u8> = (0..1001).map(|i| u8::from(i % 3 == 0)).collect();
        assert_eq!(round_trip(DType::Bool, Codec::deflate(9), &bools), CODEC_DEFLATE);
        assert_eq!(round_trip(DType::Bool, Codec::NONE, &bools), CODEC_NONE);
    }

    #[test]
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
    }

    #[test]
    fn bombs_and_truncation_are_refused() {
        // Smaller under miri, which interprets every instruction of the inflater.
        const N: usize = if cfg!(miri) { 1 << 12 } else { 1 << 16 };
        let big = vec![0u8; N];
        let mut z = Compress::new(flate2::Compression::new(9), true);
        let mut bomb = Vec::with_capacity(N);
        z.compress_vec(&big, &mut bomb, FlushCompress::Finish).unwrap();
        let mut out = vec![0u8; 1024];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb, &mut out).unwrap_err().contains("more than"));
        let mut out = vec![0u8; 2 * N];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb, &mut out).is_err());
        let mut out = vec![0u8; N];
        assert!(decode(DType::UInt8, CODEC_DEFLATE, &bomb[..bomb.len() / 2], &mut out).is_err());
        assert!(decode(DType::UInt8, 0x07, &bomb, &mut out).is_err());
        assert!(decode(DType::UInt8, CODEC_NONE, &bomb, &mut out).is_err());
    }
}
