//! The 240-byte trace header: the standard's named fields (positions
//! counted from 1 within the header, as SEG-Y and segyio count them), and
//! reading and writing a field in the file's byte order.
//!
//! From rev 2 a trace may carry 240-byte trace header extensions after its
//! standard header (as many as binary header bytes 3507-3510 say). The
//! first, Trace Header Extension 1, is standardised; the fields read here
//! (positions counted from 1 within the extension):
//! ```text
//! 137 samples in this trace u32 (when bytes 115-116 cannot hold it)
//! 157 trace header extensions of this trace u16 (0: as the binary header says)
//! 161 CDP X f64     169 CDP Y f64     233 name "SEG00001" (8 bytes)
//! ```

use crate::binary::{field_i64, set_field, Field, FieldType};
use crate::format::Endian;

/// Bytes in a trace header.
pub const TRACE_HEADER_BYTES: usize = 240;

/// Trace header byte of the trace sequence number within the line.
pub const SEQUENCE_LINE: usize = 1;
/// Trace header byte of the trace sequence number within the file.
pub const SEQUENCE_FILE: usize = 5;
/// Trace header byte of the CDP ensemble number (the rev 0 crossline position).
pub const CDP: usize = 21;
/// Trace header byte of the field record number (the rev 0 inline position).
pub const FIELD_RECORD: usize = 9;
/// Trace header byte of the source-receiver offset.
pub const OFFSET: usize = 37;
/// Trace header byte of the scalar applied to coordinates.
pub const COORDINATE_SCALAR: usize = 71;
/// Trace header byte of the coordinate units.
pub const COORDINATE_UNITS: usize = 89;
/// Trace header byte of the delay recording time (ms).
pub const DELAY: usize = 109;
/// Trace header byte of the number of samples in this trace.
pub const SAMPLES: usize = 115;
/// Trace header byte of the sample interval of this trace (us).
pub const SAMPLE_INTERVAL: usize = 117;
/// Trace header byte of the CDP X coordinate.
pub const CDP_X: usize = 181;
/// Trace header byte of the CDP Y coordinate.
pub const CDP_Y: usize = 185;
/// Trace header byte of the inline number (rev 1 and later).
pub const INLINE: usize = 189;
/// Trace header byte of the crossline number (rev 1 and later).
pub const CROSSLINE: usize = 193;

/// Position in Trace Header Extension 1 of the trace's sample count (u32).
pub const EXT_SAMPLES: usize = 137;
/// Position in Trace Header Extension 1 of the trace's count of extensions (u16).
pub const EXT_COUNT: usize = 157;
/// Position in Trace Header Extension 1 of the CDP X coordinate (f64, unscaled).
pub const EXT_CDP_X: usize = 161;
/// Position in Trace Header Extension 1 of the CDP Y coordinate (f64, unscaled).
pub const EXT_CDP_Y: usize = 169;

/// The samples of a trace from its headers (the standard one, then any
/// extensions): bytes 115-116, or when they say 0 the extended count of
/// Trace Header Extension 1; 0 when neither says.
pub fn samples(headers: &[u8], endian: Endian) -> u64 {
    let short = field_i64(headers, SAMPLES, FieldType::U16, endian).unwrap_or(0) as u64;
    match headers.get(TRACE_HEADER_BYTES..) {
        Some(ext) if short == 0 => field_i64(ext, EXT_SAMPLES, FieldType::U32, endian).unwrap_or(0) as u64,
        _ => short,
    }
}

/// The CDP X and Y coordinates of Trace Header Extension 1 (doubles, no
/// scalar), when the headers have one and it holds them.
pub fn extended_cdp(headers: &[u8], endian: Endian) -> Option<(f64, f64)> {
    let ext = headers.get(TRACE_HEADER_BYTES..)?;
    let f = |pos| crate::binary::field_f64(ext, pos, FieldType::F64, endian).filter(|v| v.is_finite());
    Some((f(EXT_CDP_X)?, f(EXT_CDP_Y)?)).filter(|&(x, y)| x != 0.0 || y != 0.0)
}

/// The named fields of a trace header.
pub const TRACE_FIELDS: &[Field] = &[
    ("trace_sequence_line", 1, FieldType::I32),
    ("trace_sequence_file", 5, FieldType::I32),
    ("field_record", 9, FieldType::I32),
    ("trace_number", 13, FieldType::I32),
    ("energy_source_point", 17, FieldType::I32),
    ("cdp", 21, FieldType::I32),
    ("cdp_trace", 25, FieldType::I32),
    ("trace_identification_code", 29, FieldType::I16),
    ("summed_traces", 31, FieldType::I16),
    ("stacked_traces", 33, FieldType::I16),
    ("data_use", 35, FieldType::I16),
    ("offset", 37, FieldType::I32),
    ("receiver_group_elevation", 41, FieldType::I32),
    ("source_surface_elevation", 45, FieldType::I32),
    ("source_depth", 49, FieldType::I32),
    ("receiver_datum_elevation", 53, FieldType::I32),
    ("source_datum_elevation", 57, FieldType::I32),
    ("source_water_depth", 61, FieldType::I32),
    ("group_water_depth", 65, FieldType::I32),
    ("elevation_scalar", 69, FieldType::I16),
    ("source_group_scalar", 71, FieldType::I16),
    ("source_x", 73, FieldType::I32),
    ("source_y", 77, FieldType::I32),
    ("group_x", 81, FieldType::I32),
    ("group_y", 85, FieldType::I32),
    ("coordinate_units", 89, FieldType::I16),
    ("delay_recording_time", 109, FieldType::I16),
    ("samples", 115, FieldType::U16),
    ("sample_interval", 117, FieldType::I16),
    ("year", 157, FieldType::I16),
    ("day_of_year", 159, FieldType::I16),
    ("hour", 161, FieldType::I16),
    ("minute", 163, FieldType::I16),
    ("second", 165, FieldType::I16),
    ("cdp_x", 181, FieldType::I32),
    ("cdp_y", 185, FieldType::I32),
    ("inline", 189, FieldType::I32),
    ("crossline", 193, FieldType::I32),
    ("shot_point", 197, FieldType::I32),
    ("shot_point_scalar", 201, FieldType::I16),
    ("measurement_unit", 203, FieldType::I16),
];

/// A 4-byte signed field at `pos` (1-based) of a trace header.
pub fn get_i32(header: &[u8], pos: usize, endian: Endian) -> i32 {
    field_i64(header, pos, FieldType::I32, endian).unwrap_or(0) as i32
}

/// A 2-byte signed field at `pos` (1-based) of a trace header.
pub fn get_i16(header: &[u8], pos: usize, endian: Endian) -> i16 {
    field_i64(header, pos, FieldType::I16, endian).unwrap_or(0) as i16
}

/// Sets a 4-byte field at `pos` (1-based).
pub fn set_i32(header: &mut [u8], pos: usize, endian: Endian, value: i32) {
    set_field(header, pos, FieldType::I32, endian, i64::from(value));
}

/// Sets a 2-byte field at `pos` (1-based).
pub fn set_i16(header: &mut [u8], pos: usize, endian: Endian, value: i16) {
    set_field(header, pos, FieldType::I16, endian, i64::from(value));
}

/// A coordinate with the trace's coordinate scalar (bytes 71-72) applied:
/// positive multiplies, negative divides, zero is 1.
pub fn scaled(value: i32, scalar: i16) -> f64 {
    match scalar {
        0 => f64::from(value),
        s if s > 0 => f64::from(value) * f64::from(s),
        s => f64::from(value) / -f64::from(s),
    }
}
