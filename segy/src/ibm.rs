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

const IEEEMAX: u32 = 0x7FFF_FFFF;
const IEMAXIB: u32 = 0x611F_FFFF;
const IEMINIB: u32 = 0x2120_0000;

/// The IEEE binary32 bits of the IBM float with bits `u`.
///
/// segyio looks up the mantissa's shift and the exponent's offset in two
/// tables indexed by the top 3 mantissa bits; here both are computed from
/// the leading zeros of those bits (the same numbers, checked against the
/// tables in the tests), which keeps this loop free of memory lookups.
#[inline]
pub fn ibm_to_ieee(u: u32) -> u32 {
    let manthi = u & 0x00ff_ffff;
    // 3 for a top hexadecimal digit of 0 or 1, 2 for 2-3, 1 for 4-7, 0 for 8-15.
    let shift = (manthi >> 21).leading_zeros() - 29;
    let iexp = ((u & 0x7f00_0000).wrapping_sub(0x20c0_0000 + shift * 0x0040_0000)) << 1;
    let inabs = u & 0x7fff_ffff;
    let manthi = if inabs > IEMAXIB { IEEEMAX } else { (manthi << shift).wrapping_add(iexp) };
    if inabs < IEMINIB {
        0
    } else {
        manthi | (u & 0x8000_0000)
    }
}

/// The IBM float bits of the IEEE binary32 number with bits `u`.
pub fn ieee_to_ibm(u: u32) -> u32 {
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

    #[test]
    fn computed_shifts_equal_segyios_tables() {
        // Every sign, exponent and top mantissa digit, with varied low bits.
        let mut x = 0x9e37_79b9u32;
        for hi in 0..=0xfffu32 {
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let u = hi << 20 | (x & 0x000f_ffff);
                assert_eq!(ibm_to_ieee(u), ibm_to_ieee_tables(u), "{u:#x}");
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
