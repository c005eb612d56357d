//! Checked size arithmetic and little-endian field access.
//!
//! Every product of dimensions and every offset + length that comes from a
//! file or from a caller goes through these helpers, which name what they
//! compute so that an overflow error says which quantity overflowed.

use crate::error::{Error, ErrorKind, Result};
use byteorder::{ByteOrder, LittleEndian};

/// `a * b`, or an error naming `what`.
pub(crate) fn mul(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_mul(b).ok_or_else(|| Error::new(ErrorKind::OutOfRange, format!("{what} overflows 64 bits ({a} * {b})")))
}

/// `a + b`, or an error naming `what`.
pub(crate) fn add(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_add(b).ok_or_else(|| Error::new(ErrorKind::OutOfRange, format!("{what} overflows 64 bits ({a} + {b})")))
}

/// The product of all `dims`, or an error naming `what`.
pub(crate) fn product(dims: &[u64], what: &str) -> Result<u64> {
    dims.iter().try_fold(1u64, |acc, &d| mul(acc, d, what))
}

/// Converts to `usize`, or an error naming `what` (only fails on 32-bit hosts).
pub(crate) fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::new(ErrorKind::OutOfMemory, format!("{what} ({v}) does not fit in this machine's address space")))
}

/// `ceil(a / b)` for `b > 0`.
pub(crate) fn div_ceil(a: u64, b: u64) -> u64 {
    a / b + u64::from(a % b != 0)
}

pub(crate) fn get_u16(b: &[u8], off: usize) -> u16 {
    LittleEndian::read_u16(&b[off..off + 2])
}
pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    LittleEndian::read_u32(&b[off..off + 4])
}
pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    LittleEndian::read_u64(&b[off..off + 8])
}
pub(crate) fn put_u16(b: &mut [u8], off: usize, v: u16) {
    LittleEndian::write_u16(&mut b[off..off + 2], v);
}
pub(crate) fn put_u32(b: &mut [u8], off: usize, v: u32) {
    LittleEndian::write_u32(&mut b[off..off + 4], v);
}
pub(crate) fn put_u64(b: &mut [u8], off: usize, v: u64) {
    LittleEndian::write_u64(&mut b[off..off + 8], v);
}

/// CRC32 (IEEE 802.3, as zlib's `crc32`) of `data`.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_named() {
        let e = mul(u64::MAX, 2, "chunk byte size").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfRange);
        assert!(e.to_string().contains("chunk byte size"), "{e}");
        assert_eq!(product(&[2, 3, 4], "x").unwrap(), 24);
        assert!(product(&[1 << 40, 1 << 40], "x").is_err());
        assert_eq!(div_ceil(10, 4), 3);
        assert_eq!(div_ceil(8, 4), 2);
        assert_eq!(div_ceil(0, 4), 0);
    }

    #[test]
    fn crc_matches_zlib_check_value() {
        // The standard CRC-32 check value of "123456789".
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
