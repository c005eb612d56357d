//! Writing SEG-Y: a binary header and trace headers synthesised for a
//! volume that did not come from SEG-Y, and the rules export follows.
//!
//! Decisions: synthesised files are big-endian rev 1 (what every reader
//! takes) with an EBCDIC textual header, unless a trace has more than
//! 32,767 samples: then rev 2.0 with the extended sample count (bytes
//! 3269-3272, a 32-bit count). Beyond 65,535 samples the 16-bit counts of
//! the binary and trace headers say 0: traces are fixed-length, so the
//! extended count of the binary header rules (rev 2.0, 4.1), and segyio
//! reads it; a per-trace count beyond 65,535 would need rev 2.1 trace header
//! extensions, which are not written.

use crate::binary::{set_field, FieldType, BINARY_HEADER_BYTES};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Endian, SampleFormat};
use crate::trace;

/// Most samples per trace a written file may have: the rev 2 extended
/// count is a signed 32-bit number.
pub const MAX_WRITE_SAMPLES: u64 = i32::MAX as u64;

/// The 16-bit sample count of a header: the count, or 0 when it does not
/// fit (the binary header's extended count then says it).
pub fn short_count(samples: u64) -> u16 {
    u16::try_from(samples).unwrap_or(0)
}

/// A binary header for traces of `samples` samples every `interval`
/// (microseconds, or the depth unit's thousandths), in `format`.
///
/// # Errors
/// `Unsupported` beyond [`MAX_WRITE_SAMPLES`] samples.
pub fn binary_header(endian: Endian, format: SampleFormat, samples: u64, interval: f64) -> Result<Vec<u8>> {
    if samples > MAX_WRITE_SAMPLES {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("{samples} samples per trace: SEG-Y's extended count holds at most {MAX_WRITE_SAMPLES}"),
        ));
    }
    let mut b = vec![0u8; BINARY_HEADER_BYTES];
    let interval_field = if interval.is_finite() && interval > 0.0 && interval <= 32767.0 { interval.round() as i64 } else { 0 };
    set_field(&mut b, 17, FieldType::I16, endian, interval_field);
    set_field(&mut b, 19, FieldType::I16, endian, interval_field);
    set_field(&mut b, 25, FieldType::I16, endian, i64::from(format.code()));
    set_field(&mut b, 29, FieldType::I16, endian, 4);
    set_field(&mut b, 55, FieldType::I16, endian, 1);
    set_field(&mut b, 303, FieldType::I16, endian, 1);
    let rev2 = samples > 32_767 || endian == Endian::Little || matches!(format.code(), 7 | 9..=12 | 15 | 16);
    if rev2 {
        b[300] = 2;
        set_field(&mut b, 69, FieldType::I32, endian, samples as i64);
        set_field(&mut b, 89, FieldType::I32, endian, samples as i64);
        b[72..80].copy_from_slice(&endian.put_u64(interval.to_bits()));
        b[96..100].copy_from_slice(&endian.put_u32(0x0102_0304));
    } else {
        b[300] = 1;
    }
    set_field(&mut b, 21, FieldType::U16, endian, i64::from(short_count(samples)));
    set_field(&mut b, 23, FieldType::U16, endian, i64::from(short_count(samples)));
    Ok(b)
}

/// What a synthesised trace header says.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceKeys {
    /// Trace number in the file, from 0.
    pub index: u64,
    /// Inline, crossline and offset numbers.
    pub inline: i32,
    /// Crossline number (and CDP number).
    pub crossline: i32,
    /// Offset (pre-stack).
    pub offset: i32,
    /// Samples in the trace (0 when more than 65,535: see [`short_count`]).
    pub samples: u16,
    /// Sample interval.
    pub interval: i16,
    /// Delay recording time (ms).
    pub delay: i16,
    /// World coordinates, written with scalar -100 (centimetres).
    pub xy: Option<[f64; 2]>,
}

/// A trace header for `keys`, with the inline, crossline and offset at the
/// positions given (counted from 1).
pub fn trace_header(endian: Endian, keys: &TraceKeys, positions: [usize; 3]) -> [u8; trace::TRACE_HEADER_BYTES] {
    let mut h = [0u8; trace::TRACE_HEADER_BYTES];
    let seq = (keys.index + 1).min(i32::MAX as u64) as i32;
    trace::set_i32(&mut h, trace::SEQUENCE_LINE, endian, seq);
    trace::set_i32(&mut h, trace::SEQUENCE_FILE, endian, seq);
    trace::set_i32(&mut h, trace::CDP, endian, keys.crossline);
    trace::set_i16(&mut h, 29, endian, 1);
    trace::set_i16(&mut h, trace::DELAY, endian, keys.delay);
    set_field(&mut h, trace::SAMPLES, FieldType::U16, endian, i64::from(keys.samples));
    trace::set_i16(&mut h, trace::SAMPLE_INTERVAL, endian, keys.interval);
    if let Some([x, y]) = keys.xy {
        let fits = |v: f64| (v * 100.0).is_finite() && (v * 100.0).abs() < f64::from(i32::MAX);
        if fits(x) && fits(y) {
            trace::set_i16(&mut h, trace::COORDINATE_SCALAR, endian, -100);
            trace::set_i32(&mut h, trace::CDP_X, endian, (x * 100.0).round() as i32);
            trace::set_i32(&mut h, trace::CDP_Y, endian, (y * 100.0).round() as i32);
        }
    }
    trace::set_i32(&mut h, positions[0], endian, keys.inline);
    trace::set_i32(&mut h, positions[1], endian, keys.crossline);
    if keys.offset != 0 || positions[2] != trace::OFFSET {
        trace::set_i32(&mut h, positions[2], endian, keys.offset);
    }
    h
}
