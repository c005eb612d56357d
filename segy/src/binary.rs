//! The 400-byte binary file header (bytes 3201-3600 of the file): its named
//! fields as the SEG-Y rev 2.1 standard lays them out (rev 0 and rev 1 use
//! the first part of the same layout), the file's byte order, revision,
//! sample format, sample count and interval, and extended textual headers.
//!
//! Layout (file byte positions, 1-based, as the standard counts them):
//! ```text
//! 3201 job id i32          3205 line i32          3209 reel i32
//! 3213 traces/ensemble i16 3215 aux traces i16    3217 interval (us) i16
//! 3219 orig interval i16   3221 samples u16       3223 orig samples u16
//! 3225 format i16          ...                    3261-3296 rev 2 extensions
//! 3297 byte-order constant 0x01020304 (rev 2; 0 before)
//! 3501 major rev u8  3502 minor rev u8  3503 fixed length i16
//! 3505 extended textual headers i16  3507 additional trace headers i32 (rev 2)
//! 3513 traces u64  3521 first trace offset u64
//! ```

use crate::error::{Error, Result};
use crate::format::{Endian, SampleFormat};

/// Bytes in the binary header.
pub const BINARY_HEADER_BYTES: usize = 400;
/// File offset of the binary header (after the first textual header).
pub const BINARY_HEADER_OFFSET: u64 = 3200;

/// How a header field is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// One unsigned byte.
    U8,
    /// Two bytes, signed.
    I16,
    /// Two bytes, unsigned.
    U16,
    /// Four bytes, signed.
    I32,
    /// Four bytes, unsigned.
    U32,
    /// Eight bytes, unsigned.
    U64,
    /// An IEEE binary64 number.
    F64,
}

impl FieldType {
    /// Bytes the field takes.
    pub fn size(self) -> usize {
        match self {
            FieldType::U8 => 1,
            FieldType::I16 | FieldType::U16 => 2,
            FieldType::I32 | FieldType::U32 => 4,
            FieldType::U64 | FieldType::F64 => 8,
        }
    }
}

/// A named header field: its name, its byte position counted from 1 within
/// the header, and its type.
pub type Field = (&'static str, usize, FieldType);

/// The fields of the binary header, positions counted from 1 within it
/// (file byte = position + 3200).
pub const BINARY_FIELDS: &[Field] = &[
    ("job_id", 1, FieldType::I32),
    ("line_number", 5, FieldType::I32),
    ("reel_number", 9, FieldType::I32),
    ("traces_per_ensemble", 13, FieldType::I16),
    ("aux_traces_per_ensemble", 15, FieldType::I16),
    ("sample_interval", 17, FieldType::I16),
    ("sample_interval_original", 19, FieldType::I16),
    ("samples", 21, FieldType::U16),
    ("samples_original", 23, FieldType::U16),
    ("format", 25, FieldType::I16),
    ("ensemble_fold", 27, FieldType::I16),
    ("sorting", 29, FieldType::I16),
    ("vertical_sum", 31, FieldType::I16),
    ("sweep_frequency_start", 33, FieldType::I16),
    ("sweep_frequency_end", 35, FieldType::I16),
    ("sweep_length", 37, FieldType::I16),
    ("sweep_type", 39, FieldType::I16),
    ("sweep_channel", 41, FieldType::I16),
    ("sweep_taper_start", 43, FieldType::I16),
    ("sweep_taper_end", 45, FieldType::I16),
    ("taper_type", 47, FieldType::I16),
    ("correlated", 49, FieldType::I16),
    ("binary_gain_recovered", 51, FieldType::I16),
    ("amplitude_recovery", 53, FieldType::I16),
    ("measurement_system", 55, FieldType::I16),
    ("impulse_polarity", 57, FieldType::I16),
    ("vibratory_polarity", 59, FieldType::I16),
    ("ext_traces_per_ensemble", 61, FieldType::I32),
    ("ext_aux_traces_per_ensemble", 65, FieldType::I32),
    ("ext_samples", 69, FieldType::I32),
    ("ext_sample_interval", 73, FieldType::F64),
    ("ext_sample_interval_original", 81, FieldType::F64),
    ("ext_samples_original", 89, FieldType::I32),
    ("ext_ensemble_fold", 93, FieldType::I32),
    ("byte_order", 97, FieldType::U32),
    ("revision_major", 301, FieldType::U8),
    ("revision_minor", 302, FieldType::U8),
    ("fixed_length", 303, FieldType::I16),
    ("extended_textual_headers", 305, FieldType::I16),
    ("additional_trace_headers", 307, FieldType::I32),
    ("time_basis", 311, FieldType::I16),
    ("traces_in_file", 313, FieldType::U64),
    ("first_trace_offset", 321, FieldType::U64),
    ("trailer_records", 329, FieldType::I32),
];

/// Reads field `(pos, ty)` of a header in byte order `endian` as f64 (every
/// integer type here fits exactly, except u64 beyond 2^53). `None` when the
/// header is too short.
pub fn field_f64(header: &[u8], pos: usize, ty: FieldType, endian: Endian) -> Option<f64> {
    Some(match ty {
        FieldType::F64 => f64::from_bits(endian.u64(header.get(pos - 1..pos + 7)?)),
        FieldType::U64 => endian.u64(header.get(pos - 1..pos + 7)?) as f64,
        _ => field_i64(header, pos, ty, endian)? as f64,
    })
}

/// Reads an integer field; `None` when out of the header or a float.
pub fn field_i64(header: &[u8], pos: usize, ty: FieldType, endian: Endian) -> Option<i64> {
    let b = header.get(pos.checked_sub(1)?..pos - 1 + ty.size())?;
    Some(match ty {
        FieldType::U8 => i64::from(b[0]),
        FieldType::I16 => i64::from(endian.u16(b) as i16),
        FieldType::U16 => i64::from(endian.u16(b)),
        FieldType::I32 => i64::from(endian.u32(b) as i32),
        FieldType::U32 => i64::from(endian.u32(b)),
        FieldType::U64 => i64::try_from(endian.u64(b)).ok()?,
        FieldType::F64 => return None,
    })
}

/// Writes an integer field; values are cut to the field's width.
pub fn set_field(header: &mut [u8], pos: usize, ty: FieldType, endian: Endian, value: i64) {
    let Some(b) = header.get_mut(pos - 1..pos - 1 + ty.size()) else { return };
    match ty {
        FieldType::U8 => b[0] = value as u8,
        FieldType::I16 | FieldType::U16 => b.copy_from_slice(&endian.put_u16(value as u16)),
        FieldType::I32 | FieldType::U32 => b.copy_from_slice(&endian.put_u32(value as u32)),
        FieldType::U64 => b.copy_from_slice(&endian.put_u64(value as u64)),
        FieldType::F64 => b.copy_from_slice(&endian.put_u64((value as f64).to_bits())),
    }
}

/// The binary header, with what it says about the rest of the file.
#[derive(Debug, Clone)]
pub struct BinaryHeader {
    /// The 400 bytes as in the file.
    pub bytes: Vec<u8>,
    /// The byte order of every binary number in the file.
    pub endian: Endian,
    /// SEG-Y revision (major, minor): (0, 0) for rev 0, (1, 0), (2, 0), (2, 1).
    pub revision: (u8, u8),
    /// The sample format.
    pub format: SampleFormat,
    /// Samples per trace, from the extended count when the 16-bit one is 0
    /// (rev 2) or the trace headers when both are (see the reader).
    pub samples: u64,
    /// Sample interval in microseconds (or the unit of the domain), from
    /// the extended interval when the 16-bit one is 0 (rev 2).
    pub interval: f64,
    /// Extended textual headers following the first: a count, or `None`
    /// for "variable" (-1): as many as end with `((SEG: EndText))`.
    pub extended_textual: Option<u32>,
    /// Whether every trace has the same length (always, before rev 2).
    pub fixed_length: bool,
    /// Traces in the file declared by rev 2 (0: not said).
    pub traces_in_file: u64,
    /// Byte offset of the first trace declared by rev 2 (0: not said).
    pub first_trace_offset: u64,
    /// 240-byte trace header extensions after each trace's standard header
    /// (rev 2, bytes 3507-3510; 0 before rev 2).
    pub additional_headers: u32,
}

/// Position (1-based) of the count of trace header extensions in the binary header.
pub const ADDITIONAL_HEADERS_POS: usize = 307;

/// Position of the rev 2 byte-order constant within the binary header.
const BYTE_ORDER_POS: usize = 97;

impl BinaryHeader {
    /// Parses a binary header; fails on a format code neither byte order
    /// makes sense of. Byte order: the rev 2 constant 0x01020304 decides
    /// when present; otherwise big-endian, unless only the little-endian
    /// reading of the format code is valid (files written little-endian
    /// without the constant exist, and segyio reads them the same way).
    ///
    /// # Errors
    /// `Malformed` for a short header or an unknown sample format code.
    pub fn parse(bytes: &[u8]) -> Result<BinaryHeader> {
        let at = |pos: usize| BINARY_HEADER_OFFSET + pos as u64 - 1;
        if bytes.len() < BINARY_HEADER_BYTES {
            return Err(Error::malformed(format!("the binary header needs {BINARY_HEADER_BYTES} bytes, the file has {}", bytes.len()))
                .at(BINARY_HEADER_OFFSET));
        }
        let bytes = bytes[..BINARY_HEADER_BYTES].to_vec();
        let constant = &bytes[BYTE_ORDER_POS - 1..BYTE_ORDER_POS + 3];
        let format_of = |e: Endian| SampleFormat::from_code(e.u16(&bytes[24..26]) as i16);
        let unflagged_little = constant != [1, 2, 3, 4] && format_of(Endian::Big).is_none() && format_of(Endian::Little).is_some();
        let endian = if constant == [4, 3, 2, 1] || unflagged_little { Endian::Little } else { Endian::Big };
        let code = endian.u16(&bytes[24..26]) as i16;
        let format = SampleFormat::from_code(code).ok_or_else(|| {
            Error::malformed(format!("sample format code {code} is not one SEG-Y defines (1-3, 5-12, 15, 16)")).at(at(25))
        })?;
        if format == SampleFormat::FixedPointGain {
            return Err(Error::new(
                crate::ErrorKind::Unsupported,
                "sample format 4 (fixed point with gain, obsolete since rev 1) is not read",
            )
            .at(at(25)));
        }
        let get = |pos: usize, ty: FieldType| field_i64(&bytes, pos, ty, endian).unwrap_or(0);
        let mut revision = (bytes[300], bytes[301]);
        // Rev 1 files often store 0x0100 as a 16-bit number: byte 3501 is 1.
        // Anything beyond the revisions that exist is treated as rev 1.
        if revision.0 > 2 {
            revision = (1, 0);
        }
        let mut samples = get(21, FieldType::U16) as u64;
        let mut interval = get(17, FieldType::I16) as f64;
        if revision.0 >= 2 {
            let ext = get(69, FieldType::I32);
            if samples == 0 && ext > 0 {
                samples = ext as u64;
            }
            let ext_interval = field_f64(&bytes, 73, FieldType::F64, endian).unwrap_or(0.0);
            if interval <= 0.0 && ext_interval.is_finite() && ext_interval > 0.0 {
                interval = ext_interval;
            }
        }
        let ext_text = get(305, FieldType::I16);
        // Rev 0 left these bytes unassigned, but segyio writes and reads the
        // count in any revision, so a positive count is honoured in all.
        let extended_textual = match ext_text {
            n if n < 0 && revision.0 == 0 => Some(0),
            -1 => None,
            n if n >= 0 => Some(n as u32),
            n => return Err(Error::malformed(format!("{n} extended textual headers")).at(at(305))),
        };
        // Trace header extensions exist from rev 2 on; before, the bytes are unassigned.
        let additional = if revision.0 >= 2 { get(307, FieldType::I32) } else { 0 };
        let additional_headers = u32::try_from(additional).map_err(|_| {
            Error::malformed(format!("{additional} additional 240-byte trace headers per trace (a count cannot be negative)")).at(at(307))
        })?;
        let fixed_length = revision.0 < 2 || get(303, FieldType::I16) != 0;
        let (traces_in_file, first_trace_offset) =
            if revision.0 >= 2 { (endian.u64(&bytes[312..320]), endian.u64(&bytes[320..328])) } else { (0, 0) };
        Ok(BinaryHeader {
            bytes,
            endian,
            revision,
            format,
            samples,
            interval,
            extended_textual,
            fixed_length,
            traces_in_file,
            first_trace_offset,
            additional_headers,
        })
    }

    /// Every named field as (name, value); f64 for the floating ones.
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        BINARY_FIELDS.iter().filter_map(|&(n, pos, ty)| field_f64(&self.bytes, pos, ty, self.endian).map(|v| (n, v))).collect()
    }
}
