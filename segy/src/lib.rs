//! # vds-segy: SEG-Y in and out, for libvds
//!
//! A small SEG-Y reader and writer, written against the SEG-Y rev 1 (2002)
//! and rev 2.1 (2023) standards and checked against segyio. It has no
//! dependencies and does no I/O beyond the [`Source`] it is given; the
//! `vds` tool builds `vds import survey.sgy` and `vds export ... .sgy` on it.
//!
//! ## Contents
//! - [`SegyFile`]: textual headers (EBCDIC or ASCII, extended ones too),
//!   the binary header, and where every trace is; [`SegyFile::read_samples`]
//!   decodes samples of any format to native values.
//! - [`SampleFormat`]: formats 1 (IBM float, converted bit for bit as
//!   segyio does), 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16; [`Endian`]: big,
//!   or rev 2 little-endian, found from the constant at bytes 3297-3300.
//! - [`Geometry`]: inline, crossline and offset numbers from configurable
//!   trace header bytes, the grid they fill, missing and duplicate traces,
//!   the file's sorting, and the world coordinates ([`Survey`]).
//! - [`writer`]: headers for volumes that never were SEG-Y.
//! - `container` (cargo feature `vds`): SEG-Y files to libvds containers
//!   and back, as `vds import` and `vds export` do; the tool and the Python
//!   package (`vds.from_segy`, `vds.to_segy`) share it.
//!
//! ## Decisions where the standard is silent
//! - Byte order: the rev 2 constant decides; without it big-endian, unless
//!   only the little-endian reading of the format code is valid.
//! - Sample count: the binary header's (its rev 2 extended count when the
//!   16-bit one is 0), else the first trace header's. A file whose trace
//!   area is not a whole number of traces is an error naming the trace and
//!   byte where it is cut, never a silently shorter volume.
//! - Variable-length traces (rev 2, fixed-length flag 0): each trace header
//!   gives its count; a volume takes the longest, shorter traces are padded.
//! - EBCDIC is code page 037 (segyio uses the POSIX `dd` table, which
//!   differs for a few symbols such as `|`, `!`, `[`); the textual headers'
//!   bytes are kept as well as their text, so nothing is lost either way.
//! - Extended textual headers: a positive count in bytes 3505-3506 is
//!   honoured in every revision (segyio writes it in rev 0 files too);
//!   -1 ("ends with `((SEG: EndText))`") from rev 1 on.
//! - Format 4 is refused as unsupported. Rev 2 trace header extensions are
//!   read when every trace has the number the binary header says (Trace
//!   Header Extension 1 may say it per trace), at most 64
//!   ([`MAX_TRACE_HEADER_EXTENSIONS`]): they are kept with the
//!   standard header, and give the sample count and CDP X/Y where the
//!   standard header does not.
//! - Geometry rules are in [`geometry`]'s documentation.
//!
//! ## Robustness
//! No input makes the parser panic; every count read from the file (textual
//! headers, samples, traces, grid cells) is checked against the file's
//! length before memory is reserved for it. `fuzz/fuzz_targets/segy.rs`
//! runs [`fuzzing::parse`], and `tests/fuzz_replay.rs` replays its corpus.

pub mod binary;
#[cfg(feature = "vds")]
pub mod container;
mod error;
mod format;
pub mod geometry;
pub mod ibm;
mod reader;
pub mod text;
pub mod trace;
pub mod writer;

#[doc(hidden)]
pub mod fuzzing;

pub use binary::BinaryHeader;
pub use error::{Error, ErrorKind, Result};
pub use format::{Endian, SampleFormat};
pub use geometry::{Geometry, KeyBytes, Line, Sorting, Survey};
pub use reader::{IntervalSource, SegyFile, Source, ASSUMED_INTERVAL, MAX_TRACE_HEADER_EXTENSIONS};
pub use text::Encoding;
