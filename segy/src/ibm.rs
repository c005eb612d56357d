//! IBM System/360 single-precision floats (SEG-Y sample format 1) to and
//! from IEEE 754 binary32, bit for bit as segyio converts them, so that a
//! file read here and by segyio gives the same numbers, and an IBM file
//! read and written again gives the same bytes.
//!
//! IBM to IEEE is exact for every normalized IBM number in IEEE's range
//! (an IBM mantissa has at most 24 significant bits); larger magnitudes
//! become NaN with the sign kept (segyio's choice), smaller ones zero.
//! IEEE to IBM truncates the up to 3 bits an IBM mantissa cannot hold when
//! the leading hexadecimal digit is small, so IBM -> IEEE -> IBM is the
//! identity on normalized IBM numbers.

use crate::format::Endian;

const IEEEMAX: u32 = 0x7FFF_FFFF;
const IEMAXIB: u32 = 0x611F_FFFF;
const IEMINIB: u32 = 0x2120_0000;

/// The IEEE binary32 bits of the IBM float with bits `u`.
///
/// segyio looks up the mantissa's shift and the exponent's offset in two
/// tables indexed by the top 3 mantissa bits; here both are computed with
/// comparisons, masks and additions only (the same numbers, checked against
/// the tables in the tests, and against the previous formula on all 2^32
/// inputs when it was written), so that a loop over samples has no memory
/// lookups, variable shifts or branches and compiles to vector instructions.
#[inline(always)]
pub fn ibm_to_ieee(u: u32) -> u32 {
    let mut manthi = u & 0x00ff_ffff;
    let digit = manthi >> 20;
    // All ones when the top hexadecimal digit is below 8, 4, 2: the mantissa
    // doubles once for each (3 times for a digit of 0 or 1, none for 8-15),
    // and the exponent loses 2^22 for each.
    let below = |n: u32| 0u32.wrapping_sub(u32::from(digit < n));
    let (a, b, c) = (below(8), below(4), below(2));
    manthi = manthi.wrapping_add(manthi & a);
    manthi = manthi.wrapping_add(manthi & b);
    manthi = manthi.wrapping_add(manthi & c);
    let adjust = (a & 0x0040_0000) + (b & 0x0040_0000) + (c & 0x0040_0000);
    let iexp = ((u & 0x7f00_0000).wrapping_sub(0x20c0_0000 + adjust)) << 1;
    let inabs = u & 0x7fff_ffff;
    let manthi = if inabs > IEMAXIB { IEEEMAX } else { manthi.wrapping_add(iexp) };
    if inabs < IEMINIB {
        0
    } else {
        manthi | (u & 0x8000_0000)
    }
}

/// Decodes the IBM floats in `src` (byte order `endian`) into native-endian
/// IEEE binary32 in `dst`, as many as both hold.
pub fn decode(endian: Endian, src: &[u8], dst: &mut [u8]) {
    fastest::<Decode>(endian, src, dst);
}

/// A conversion loop over words of 4 bytes, built once per instruction set.
trait Words {
    /// `dst`'s words from `src`'s, as many as both hold.
    fn convert(endian: Endian, src: &[u8], dst: &mut [u8]);
}

struct Decode;
struct Encode;

impl Words for Decode {
    #[inline(always)]
    fn convert(endian: Endian, src: &[u8], dst: &mut [u8]) {
        match endian {
            Endian::Big => each_word(src, dst, |w| ibm_to_ieee(u32::from_be_bytes(w)).to_ne_bytes()),
            Endian::Little => each_word(src, dst, |w| ibm_to_ieee(u32::from_le_bytes(w)).to_ne_bytes()),
        }
    }
}

impl Words for Encode {
    #[inline(always)]
    fn convert(endian: Endian, src: &[u8], dst: &mut [u8]) {
        match endian {
            Endian::Big => each_word(src, dst, |w| ieee_to_ibm(u32::from_ne_bytes(w)).to_be_bytes()),
            Endian::Little => each_word(src, dst, |w| ieee_to_ibm(u32::from_ne_bytes(w)).to_le_bytes()),
        }
    }
}

/// Runs loop `W` in a build for this processor: on x86-64 processors with
/// AVX2 its AVX2 build, about 3 times the samples a second of the baseline
/// build (which has SSE2 only).
fn fastest<W: Words>(endian: Endian, src: &[u8], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        return unsafe { with_avx2::<W>(endian, src, dst) };
    }
    W::convert(endian, src, dst);
}

/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn with_avx2<W: Words>(endian: Endian, src: &[u8], dst: &mut [u8]) {
    W::convert(endian, src, dst);
}

/// `dst`'s words of 4 bytes are `f` of `src`'s, as many as both hold: an
/// indexed loop over slices of one length, inlined into each build, so that
/// it has no bounds checks and no iterator adapter left out of line (which
/// would run in the baseline build).
#[inline(always)]
fn each_word(src: &[u8], dst: &mut [u8], f: impl Fn([u8; 4]) -> [u8; 4]) {
    let n = src.len().min(dst.len()) / 4;
    let (src, dst) = (&src[..4 * n], &mut dst[..4 * n]);
    for i in 0..n {
        dst[4 * i..4 * i + 4].copy_from_slice(&f([src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]]));
    }
}

/// The IBM float bits of the IEEE binary32 number with bits `u`.
///
/// segyio takes the exponent's offset and the mantissa's factor from two
/// tables indexed by the exponent's low 2 bits (offsets 0x21200000,
/// 0x21400000, 0x21800000, 0x22100000; factors 2, 4, 8, 1, the product
/// shifted right by 3); here they are selected with masks, the same
/// numbers (checked against the tables in the tests, and on all 2^32 inputs
/// when written), so that a loop over samples compiles to vector
/// instructions.
#[inline(always)]
pub fn ieee_to_ibm(u: u32) -> u32 {
    let ix = (u >> 23) & 3;
    let is = |k: u32| 0u32.wrapping_sub(u32::from(ix == k));
    let (e0, e1, e2, e3) = (is(0), is(1), is(2), is(3));
    let offset = (e0 & 0x2120_0000) | (e1 & 0x2140_0000) | (e2 & 0x2180_0000) | (e3 & 0x2210_0000);
    let mant = u & 0x007f_ffff;
    let scaled = (e0 & (mant << 1)) | (e1 & (mant << 2)) | (e2 & (mant << 3)) | (e3 & mant);
    let iexp = ((u & 0x7e00_0000) >> 1).wrapping_add(offset);
    let manthi = (scaled >> 3).wrapping_add(iexp) | (u & 0x8000_0000);
    if u & 0x7fff_ffff != 0 {
        manthi
    } else {
        0
    }
}

/// Encodes native-endian IEEE binary32 values (`src`) as IBM floats of byte
/// order `endian` (`dst`), as many as both hold: the inverse of [`decode`].
pub fn encode(endian: Endian, src: &[u8], dst: &mut [u8]) {
    fastest::<Encode>(endian, src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // From the SEG-Y rev 1 standard's example: -118.625 is 0xC276A000.
        assert_eq!(f32::from_bits(ibm_to_ieee(0xC276_A000)), -118.625);
        assert_eq!(ieee_to_ibm((-118.625f32).to_bits()), 0xC276_A000);
        assert_eq!(f32::from_bits(ibm_to_ieee(0x4110_0000)), 1.0);
        assert_eq!(f32::from_bits(ibm_to_ieee(0)), 0.0);
        assert_eq!(ieee_to_ibm(0), 0);
        assert_eq!(f32::from_bits(ibm_to_ieee(0x4080_0000)), 0.5);
    }

    /// segyio's table-driven conversion, the reference.
    fn ibm_to_ieee_tables(u: u32) -> u32 {
        const IT: [u32; 8] = [0x2180_0000, 0x2140_0000, 0x2100_0000, 0x2100_0000, 0x20c0_0000, 0x20c0_0000, 0x20c0_0000, 0x20c0_0000];
        const MT: [u32; 8] = [8, 4, 2, 2, 1, 1, 1, 1];
        let mut manthi = u & 0x00ff_ffff;
        let ix = (manthi >> 21) as usize;
        let iexp = ((u & 0x7f00_0000).wrapping_sub(IT[ix])) << 1;
        manthi = manthi.wrapping_mul(MT[ix]).wrapping_add(iexp);
        let inabs = u & 0x7fff_ffff;
        if inabs > IEMAXIB {
            manthi = IEEEMAX;
        }
        manthi |= u & 0x8000_0000;
        if inabs < IEMINIB {
            0
        } else {
            manthi
        }
    }

    /// Every value of the top 12 bits (sign, exponent and top mantissa
    /// digit), each 64 times with varied low bits.
    fn every_top(seed: u32) -> impl Iterator<Item = u32> {
        let low = random_words(seed, 64);
        (0..=0xfffu32).flat_map(move |hi| low.clone().into_iter().map(move |x| hi << 20 | (x & 0x000f_ffff)))
    }

    #[test]
    fn computed_shifts_equal_segyios_tables() {
        for u in every_top(0x9e37_79b9) {
            assert_eq!(ibm_to_ieee(u), ibm_to_ieee_tables(u), "{u:#x}");
        }
    }

    /// segyio's table-driven conversion the other way, the reference.
    fn ieee_to_ibm_tables(u: u32) -> u32 {
        const IT: [u32; 4] = [0x2120_0000, 0x2140_0000, 0x2180_0000, 0x2210_0000];
        const MT: [u32; 4] = [2, 4, 8, 1];
        let ix = ((u & 0x0180_0000) >> 23) as usize;
        let iexp = ((u & 0x7e00_0000) >> 1).wrapping_add(IT[ix]);
        let manthi = (MT[ix].wrapping_mul(u & 0x007f_ffff)) >> 3;
        let manthi = manthi.wrapping_add(iexp) | (u & 0x8000_0000);
        if u & 0x7fff_ffff != 0 {
            manthi
        } else {
            0
        }
    }

    #[test]
    fn masks_equal_segyios_tables_from_ieee() {
        for u in every_top(0x1234_5677) {
            assert_eq!(ieee_to_ibm(u), ieee_to_ibm_tables(u), "{u:#x}");
        }
    }

    /// `n` pseudo-random words (xorshift from `seed`).
    fn random_words(mut x: u32, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x
            })
            .collect()
    }

    #[test]
    fn encoding_a_buffer_converts_every_sample() {
        let words = random_words(0x0bad_5eed, 1031);
        let src: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        for endian in [Endian::Big, Endian::Little] {
            let mut dst = vec![0u8; src.len()];
            encode(endian, &src, &mut dst);
            for (w, d) in words.iter().zip(dst.chunks_exact(4)) {
                let got = if endian == Endian::Big {
                    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
                } else {
                    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
                };
                assert_eq!(got, ieee_to_ibm_tables(*w), "{w:#x} {endian:?}");
            }
        }
    }

    #[test]
    fn decoding_a_buffer_converts_every_sample() {
        // Odd lengths and both byte orders, through whichever build the processor takes.
        let words = random_words(0x2545_f491, 1037);
        for endian in [Endian::Big, Endian::Little] {
            let src: Vec<u8> = words.iter().flat_map(|&w| if endian == Endian::Big { w.to_be_bytes() } else { w.to_le_bytes() }).collect();
            let mut dst = vec![0u8; src.len()];
            decode(endian, &src, &mut dst);
            for (w, d) in words.iter().zip(dst.chunks_exact(4)) {
                assert_eq!(u32::from_ne_bytes([d[0], d[1], d[2], d[3]]), ibm_to_ieee_tables(*w), "{w:#x} {endian:?}");
            }
        }
    }

    #[test]
    fn normalized_ibm_round_trips() {
        // Every exponent in IEEE's range, mantissas with each leading digit.
        for exp in 0x22u32..0x60 {
            for lead in 1u32..16 {
                for low in [0u32, 1, 0x5a5a5, 0xfffff] {
                    for sign in [0, 0x8000_0000] {
                        let ibm = sign | exp << 24 | lead << 20 | low;
                        let ieee = ibm_to_ieee(ibm);
                        assert_eq!(ieee_to_ibm(ieee), ibm, "{ibm:#x} -> {ieee:#x}");
                    }
                }
            }
        }
    }

    #[test]
    fn ieee_values_keep_their_value_where_ibm_can_hold_it() {
        for v in [1.5f32, -2.25, 1e-10, 3.0e30, 123_456.78, 0.1] {
            let back = f32::from_bits(ibm_to_ieee(ieee_to_ibm(v.to_bits())));
            assert!((back - v).abs() <= v.abs() * 1e-6, "{v} -> {back}");
        }
    }
}
