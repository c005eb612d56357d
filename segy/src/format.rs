//! Byte orders and sample formats: the codes of the binary header (bytes
//! 3225-3226), their sizes, the type each decodes to, and the conversion
//! of trace samples to and from native-endian values of that type.

use crate::ibm;

/// The byte order of a file's binary numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Big-endian: every revision's default.
    Big,
    /// Little-endian: rev 2, flagged by 0x01020304 at bytes 3297-3300.
    Little,
}

impl Endian {
    /// "big" or "little".
    pub fn name(self) -> &'static str {
        match self {
            Endian::Big => "big",
            Endian::Little => "little",
        }
    }
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    /// The first two bytes of `b` as a number in this order.
    pub fn u16(self, b: &[u8]) -> u16 {
        match self {
            Endian::Big => u16::from_be_bytes(Self::arr(b)),
            Endian::Little => u16::from_le_bytes(Self::arr(b)),
        }
    }
    /// The first four bytes of `b` as a number in this order.
    pub fn u32(self, b: &[u8]) -> u32 {
        match self {
            Endian::Big => u32::from_be_bytes(Self::arr(b)),
            Endian::Little => u32::from_le_bytes(Self::arr(b)),
        }
    }
    /// The first eight bytes of `b` as a number in this order.
    pub fn u64(self, b: &[u8]) -> u64 {
        match self {
            Endian::Big => u64::from_be_bytes(Self::arr(b)),
            Endian::Little => u64::from_le_bytes(Self::arr(b)),
        }
    }
    /// `v` as two bytes in this order.
    pub fn put_u16(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Big => v.to_be_bytes(),
            Endian::Little => v.to_le_bytes(),
        }
    }
    /// `v` as four bytes in this order.
    pub fn put_u32(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Big => v.to_be_bytes(),
            Endian::Little => v.to_le_bytes(),
        }
    }
    /// `v` as eight bytes in this order.
    pub fn put_u64(self, v: u64) -> [u8; 8] {
        match self {
            Endian::Big => v.to_be_bytes(),
            Endian::Little => v.to_le_bytes(),
        }
    }
}

/// A sample format (binary header bytes 3225-3226).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SampleFormat {
    /// 1: 4-byte IBM floating point, read as float32.
    IbmFloat32,
    /// 2: 4-byte two's complement integer.
    Int32,
    /// 3: 2-byte two's complement integer.
    Int16,
    /// 4: 4-byte fixed point with gain (obsolete; recognised, not read).
    FixedPointGain,
    /// 5: 4-byte IEEE floating point.
    Float32,
    /// 6: 8-byte IEEE floating point.
    Float64,
    /// 7: 3-byte two's complement integer, read as int32.
    Int24,
    /// 8: 1-byte two's complement integer.
    Int8,
    /// 9: 8-byte two's complement integer.
    Int64,
    /// 10: 4-byte unsigned integer.
    UInt32,
    /// 11: 2-byte unsigned integer.
    UInt16,
    /// 12: 8-byte unsigned integer.
    UInt64,
    /// 15: 3-byte unsigned integer, read as uint32.
    UInt24,
    /// 16: 1-byte unsigned integer.
    UInt8,
}

impl SampleFormat {
    /// Every format this crate reads and writes.
    pub const ALL: [SampleFormat; 13] = [
        SampleFormat::IbmFloat32,
        SampleFormat::Int32,
        SampleFormat::Int16,
        SampleFormat::Float32,
        SampleFormat::Float64,
        SampleFormat::Int24,
        SampleFormat::Int8,
        SampleFormat::Int64,
        SampleFormat::UInt32,
        SampleFormat::UInt16,
        SampleFormat::UInt64,
        SampleFormat::UInt24,
        SampleFormat::UInt8,
    ];

    /// The format with binary-header code `code`.
    pub fn from_code(code: i16) -> Option<SampleFormat> {
        Some(match code {
            1 => SampleFormat::IbmFloat32,
            2 => SampleFormat::Int32,
            3 => SampleFormat::Int16,
            4 => SampleFormat::FixedPointGain,
            5 => SampleFormat::Float32,
            6 => SampleFormat::Float64,
            7 => SampleFormat::Int24,
            8 => SampleFormat::Int8,
            9 => SampleFormat::Int64,
            10 => SampleFormat::UInt32,
            11 => SampleFormat::UInt16,
            12 => SampleFormat::UInt64,
            15 => SampleFormat::UInt24,
            16 => SampleFormat::UInt8,
            _ => return None,
        })
    }

    /// The binary-header code.
    pub fn code(self) -> i16 {
        match self {
            SampleFormat::IbmFloat32 => 1,
            SampleFormat::Int32 => 2,
            SampleFormat::Int16 => 3,
            SampleFormat::FixedPointGain => 4,
            SampleFormat::Float32 => 5,
            SampleFormat::Float64 => 6,
            SampleFormat::Int24 => 7,
            SampleFormat::Int8 => 8,
            SampleFormat::Int64 => 9,
            SampleFormat::UInt32 => 10,
            SampleFormat::UInt16 => 11,
            SampleFormat::UInt64 => 12,
            SampleFormat::UInt24 => 15,
            SampleFormat::UInt8 => 16,
        }
    }

    /// Bytes one sample takes in the file.
    pub fn size(self) -> usize {
        match self {
            SampleFormat::Int8 | SampleFormat::UInt8 => 1,
            SampleFormat::Int16 | SampleFormat::UInt16 => 2,
            SampleFormat::Int24 | SampleFormat::UInt24 => 3,
            SampleFormat::Float64 | SampleFormat::Int64 | SampleFormat::UInt64 => 8,
            _ => 4,
        }
    }

    /// The type samples decode to, by its libvds / NumPy name.
    pub fn dtype(self) -> &'static str {
        match self {
            SampleFormat::IbmFloat32 | SampleFormat::Float32 | SampleFormat::FixedPointGain => "float32",
            SampleFormat::Float64 => "float64",
            SampleFormat::Int8 => "int8",
            SampleFormat::Int16 => "int16",
            SampleFormat::Int24 | SampleFormat::Int32 => "int32",
            SampleFormat::Int64 => "int64",
            SampleFormat::UInt8 => "uint8",
            SampleFormat::UInt16 => "uint16",
            SampleFormat::UInt24 | SampleFormat::UInt32 => "uint32",
            SampleFormat::UInt64 => "uint64",
        }
    }

    /// Bytes one decoded sample takes in memory.
    pub fn native_size(self) -> usize {
        match self {
            SampleFormat::Int24 | SampleFormat::UInt24 => 4,
            f => f.size(),
        }
    }

    /// The format that stores values of `dtype` unchanged (float32 as IEEE).
    pub fn for_dtype(dtype: &str) -> Option<SampleFormat> {
        Some(match dtype {
            "float32" => SampleFormat::Float32,
            "float64" => SampleFormat::Float64,
            "int8" => SampleFormat::Int8,
            "int16" => SampleFormat::Int16,
            "int32" => SampleFormat::Int32,
            "int64" => SampleFormat::Int64,
            "uint8" => SampleFormat::UInt8,
            "uint16" => SampleFormat::UInt16,
            "uint32" => SampleFormat::UInt32,
            "uint64" => SampleFormat::UInt64,
            _ => return None,
        })
    }

    /// Decodes samples in file byte order `endian` (`src`, a whole number
    /// of samples) into native-endian values (`dst`, `native_size` each).
    /// Extra room in either is left alone.
    pub fn decode(self, endian: Endian, src: &[u8], dst: &mut [u8]) {
        let (size, native) = (self.size(), self.native_size());
        let swap = (endian == Endian::Big) == cfg!(target_endian = "little");
        // One loop per case, the match outside it: this runs on every sample.
        match self {
            SampleFormat::IbmFloat32 => ibm::decode(endian, src, dst),
            SampleFormat::Int24 | SampleFormat::UInt24 => {
                for (s, d) in src.chunks_exact(3).zip(dst.chunks_exact_mut(4)) {
                    let (hi, mid, lo) = match endian {
                        Endian::Big => (s[0], s[1], s[2]),
                        Endian::Little => (s[2], s[1], s[0]),
                    };
                    let mut v = u32::from(hi) << 16 | u32::from(mid) << 8 | u32::from(lo);
                    if self == SampleFormat::Int24 && hi & 0x80 != 0 {
                        v |= 0xff00_0000;
                    }
                    d.copy_from_slice(&v.to_ne_bytes());
                }
            }
            _ if !swap || size == 1 => {
                let n = src.len().min(dst.len()) / size * size;
                dst[..n].copy_from_slice(&src[..n]);
            }
            _ => {
                for (s, d) in src.chunks_exact(size).zip(dst.chunks_exact_mut(native)) {
                    for (k, b) in d.iter_mut().enumerate() {
                        *b = s[size - 1 - k];
                    }
                }
            }
        }
    }

    /// Encodes native-endian values (`src`) as samples in byte order
    /// `endian` (`dst`): the inverse of [`SampleFormat::decode`]. 24-bit
    /// formats keep the low 24 bits.
    pub fn encode(self, endian: Endian, src: &[u8], dst: &mut [u8]) {
        let (size, native) = (self.size(), self.native_size());
        if self == SampleFormat::IbmFloat32 {
            return ibm::encode(endian, src, dst);
        }
        for (s, d) in src.chunks_exact(native).zip(dst.chunks_exact_mut(size)) {
            match self {
                SampleFormat::Int24 | SampleFormat::UInt24 => {
                    let v = u32::from_ne_bytes([s[0], s[1], s[2], s[3]]).to_be_bytes();
                    match endian {
                        Endian::Big => d.copy_from_slice(&v[1..]),
                        Endian::Little => d.copy_from_slice(&[v[3], v[2], v[1]]),
                    }
                }
                _ => {
                    d.copy_from_slice(s);
                    if (endian == Endian::Big) == cfg!(target_endian = "little") {
                        d.reverse();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_round_trips_in_both_orders() {
        for f in SampleFormat::ALL {
            assert_eq!(SampleFormat::from_code(f.code()), Some(f));
            for e in [Endian::Big, Endian::Little] {
                // Bytes whose decoded value every format can hold again.
                let mut file: Vec<u8> = (0..f.size() * 5)
                    .map(|i| match i % 4 {
                        0 if f == SampleFormat::IbmFloat32 => 0x41,
                        1 if f == SampleFormat::IbmFloat32 => 0x10 | (i * 37 % 251) as u8,
                        _ => (i * 37 % 251) as u8,
                    })
                    .collect();
                if e == Endian::Little {
                    file.chunks_exact_mut(f.size()).for_each(<[u8]>::reverse);
                }
                let mut native = vec![0u8; f.native_size() * 5];
                f.decode(e, &file, &mut native);
                let mut back = vec![0u8; file.len()];
                f.encode(e, &native, &mut back);
                assert_eq!(back, file, "{f:?} {e:?}");
            }
        }
    }

    #[test]
    fn int24_sign_extends() {
        let mut d = [0u8; 4];
        SampleFormat::Int24.decode(Endian::Big, &[0xff, 0xff, 0xfe], &mut d);
        assert_eq!(i32::from_ne_bytes(d), -2);
        SampleFormat::UInt24.decode(Endian::Little, &[0xfe, 0xff, 0xff], &mut d);
        assert_eq!(u32::from_ne_bytes(d), 0xff_fffe);
    }
}
