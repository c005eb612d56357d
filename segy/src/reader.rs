//! Opening a SEG-Y file: the textual headers (the first and any extended
//! ones), the binary header, and where each trace is. Nothing here reads
//! more than headers until asked, and every count taken from the file is
//! checked against the file's length before anything is allocated for it.

use crate::binary::{BinaryHeader, BINARY_HEADER_BYTES, BINARY_HEADER_OFFSET};
use crate::error::{Error, ErrorKind, Result};
use crate::format::SampleFormat;
use crate::text::{self, Encoding, TEXT_HEADER_BYTES};
use crate::trace::{self, TRACE_HEADER_BYTES};

/// Where a file's bytes come from: a file, or memory (tests and fuzzing).
pub trait Source {
    /// The length in bytes.
    ///
    /// # Errors
    /// When it cannot be had.
    fn size(&self) -> std::io::Result<u64>;
    /// Fills `buf` from byte `offset`.
    ///
    /// # Errors
    /// On a short read or an I/O failure.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl Source for std::fs::File {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

impl Source for [u8] {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| std::io::ErrorKind::UnexpectedEof)?;
        let src = start.checked_add(buf.len()).and_then(|end| self.get(start..end)).ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl<T: Source + ?Sized> Source for &T {
    fn size(&self) -> std::io::Result<u64> {
        (**self).size()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
}

/// Most extended textual headers read when their count is "variable" (-1).
const MAX_VARIABLE_TEXT_HEADERS: u64 = 10_000;
/// The most trace header extensions read per trace (rev 2 sets no limit):
/// 64 make 15,600 bytes of headers per trace, which an import holds for
/// every grid cell of a block, missing traces included.
pub const MAX_TRACE_HEADER_EXTENSIONS: u32 = 64;
/// The stanza that ends a variable number of extended textual headers.
const END_TEXT: &str = "((SEG: EndText))";

/// The sample interval taken when neither the binary header nor the first
/// trace header gives one: 4 ms, as segyio assumes.
pub const ASSUMED_INTERVAL: f64 = 4000.0;

/// Where a file's sample interval comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalSource {
    /// The binary header (bytes 3217-3218, or rev 2's extended interval).
    BinaryHeader,
    /// The first trace header (bytes 117-118), the binary header's being 0.
    TraceHeader,
    /// Neither gives one: [`ASSUMED_INTERVAL`].
    Assumed,
}

impl IntervalSource {
    /// The name the `segy` attribute records.
    pub fn name(self) -> &'static str {
        match self {
            IntervalSource::BinaryHeader => "binary header",
            IntervalSource::TraceHeader => "trace header",
            IntervalSource::Assumed => "assumed",
        }
    }
}

/// An open SEG-Y file.
pub struct SegyFile<S: Source + ?Sized> {
    /// Every textual header, the first and then the extended ones, as in the file.
    pub textual: Vec<Vec<u8>>,
    /// The encoding of the textual headers (guessed from the first).
    pub encoding: Encoding,
    /// The binary header.
    pub binary: BinaryHeader,
    /// Byte offset of the first trace header.
    pub first_trace: u64,
    /// Samples per trace: the binary header's count, or the first trace's
    /// when that is 0; with variable lengths, the longest trace's.
    pub samples: u64,
    /// Sample interval (µs, or the unit of the domain): the binary
    /// header's (its rev 2 extended interval included), or the first trace
    /// header's (bytes 117-118) when that is 0, or
    /// [`ASSUMED_INTERVAL`] when both are; [`SegyFile::interval_from`] says which.
    pub interval: f64,
    /// Where [`SegyFile::interval`] comes from.
    pub interval_from: IntervalSource,
    /// Number of traces.
    pub traces: u64,
    /// Bytes of each trace's headers: 240, and 240 more for each trace
    /// header extension (rev 2).
    pub header_bytes: u64,
    /// For variable-length traces (rev 2): each trace's offset and sample count.
    variable: Option<Vec<(u64, u64)>>,
    source: S,
}

impl<S: Source> SegyFile<S> {
    /// Reads the headers of `source` and locates its traces.
    ///
    /// # Errors
    /// `Io`; `Malformed` for a file too short for its headers, a sample
    /// count of 0, a last trace cut short; `Unsupported` for format 4.
    pub fn open(source: S) -> Result<SegyFile<S>> {
        let len = source.size()?;
        let head = BINARY_HEADER_OFFSET + BINARY_HEADER_BYTES as u64;
        if len < head {
            return Err(Error::malformed(format!("the file has {len} bytes, fewer than the {head} of SEG-Y's textual and binary headers")));
        }
        let mut first = vec![0u8; TEXT_HEADER_BYTES];
        source.read_exact_at(&mut first, 0)?;
        let mut bin = vec![0u8; BINARY_HEADER_BYTES];
        source.read_exact_at(&mut bin, BINARY_HEADER_OFFSET)?;
        let binary = BinaryHeader::parse(&bin)?;
        let encoding = Encoding::guess(&first);
        let mut textual = vec![first];
        let mut offset = head;
        // Bounded by what the file can hold before anything is read.
        let room = (len - head) / TEXT_HEADER_BYTES as u64;
        match binary.extended_textual {
            Some(n) => {
                if u64::from(n) > room {
                    return Err(Error::malformed(format!(
                        "the binary header announces {n} extended textual headers, the file has room for {room}"
                    ))
                    .at(BINARY_HEADER_OFFSET + 304));
                }
                for _ in 0..n {
                    let mut card = vec![0u8; TEXT_HEADER_BYTES];
                    source.read_exact_at(&mut card, offset)?;
                    textual.push(card);
                    offset += TEXT_HEADER_BYTES as u64;
                }
            }
            None => loop {
                if textual.len() as u64 > room.min(MAX_VARIABLE_TEXT_HEADERS) {
                    return Err(Error::malformed(format!("no extended textual header ends with {END_TEXT}")).at(offset));
                }
                let mut card = vec![0u8; TEXT_HEADER_BYTES];
                source.read_exact_at(&mut card, offset)?;
                let done = text::decode(&card, Encoding::guess(&card)).contains(END_TEXT);
                textual.push(card);
                offset += TEXT_HEADER_BYTES as u64;
                if done {
                    break;
                }
            },
        }
        if binary.first_trace_offset != 0 {
            if binary.first_trace_offset < offset || binary.first_trace_offset > len {
                return Err(Error::malformed(format!(
                    "the first trace is said to start at byte {}, outside the file's traces ({offset} to {len})",
                    binary.first_trace_offset
                ))
                .at(BINARY_HEADER_OFFSET + 320));
            }
            offset = binary.first_trace_offset;
        }
        let data = len - offset;
        // Extensions are counted against the file before anything is sized by them.
        if binary.additional_headers > MAX_TRACE_HEADER_EXTENSIONS {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "the binary header announces {} trace header extensions per trace; at most {MAX_TRACE_HEADER_EXTENSIONS} are read",
                    binary.additional_headers
                ),
            )
            .at(BINARY_HEADER_OFFSET + crate::binary::ADDITIONAL_HEADERS_POS as u64 - 1));
        }
        let extensions = u64::from(binary.additional_headers);
        let header_bytes = (extensions + 1) * TRACE_HEADER_BYTES as u64;
        if extensions > 0 && header_bytes > data {
            return Err(Error::malformed(format!(
                "the binary header announces {extensions} trace header extensions of 240 bytes per trace; \
                 the {data} bytes after the file headers do not hold one trace's headers"
            ))
            .at(BINARY_HEADER_OFFSET + crate::binary::ADDITIONAL_HEADERS_POS as u64 - 1));
        }
        let mut file = SegyFile {
            textual,
            encoding,
            samples: binary.samples,
            interval: binary.interval,
            interval_from: IntervalSource::BinaryHeader,
            binary,
            first_trace: offset,
            traces: 0,
            header_bytes,
            variable: None,
            source,
        };
        let size = file.binary.format.size() as u64;
        if file.interval <= 0.0 {
            let in_trace = if data >= header_bytes {
                trace::get_i16(&file.headers_at(file.first_trace)?, trace::SAMPLE_INTERVAL, file.binary.endian)
            } else {
                0
            };
            (file.interval, file.interval_from) =
                if in_trace > 0 { (f64::from(in_trace), IntervalSource::TraceHeader) } else { (ASSUMED_INTERVAL, IntervalSource::Assumed) };
        }
        if !file.binary.fixed_length {
            file.scan_variable(len)?;
            return Ok(file);
        }
        if file.samples == 0 && data >= header_bytes {
            let h = file.headers_at(file.first_trace)?;
            file.samples = trace::samples(&h, file.binary.endian);
        }
        if file.samples == 0 {
            return Err(
                Error::malformed("0 samples per trace, in the binary header and the first trace header").at(BINARY_HEADER_OFFSET + 20)
            );
        }
        let trace_bytes = file
            .samples
            .checked_mul(size)
            .and_then(|b| b.checked_add(header_bytes))
            .ok_or_else(|| Error::malformed(format!("{} samples per trace overflow", file.samples)))?;
        file.traces = data / trace_bytes;
        let rest = data % trace_bytes;
        if rest != 0 {
            let at = offset + file.traces * trace_bytes;
            return Err(Error::malformed(format!(
                "the file ends {rest} bytes into this trace, which needs {trace_bytes} ({} samples of {size} bytes and {header_bytes} \
                 bytes of headers): truncated, or the sample count or format is wrong",
                file.samples
            ))
            .trace(file.traces)
            .at(at));
        }
        Ok(file)
    }

    /// Locates traces whose lengths vary (rev 2, fixed-length flag 0): each
    /// trace header says its own sample count.
    fn scan_variable(&mut self, len: u64) -> Result<()> {
        let size = self.binary.format.size() as u64;
        let hb = self.header_bytes;
        let mut at = self.first_trace;
        let mut index = Vec::new();
        let mut h = vec![0u8; hb as usize];
        while at < len {
            let i = index.len() as u64;
            if len - at < hb {
                return Err(Error::malformed(format!("the file ends {} bytes into this trace's {hb} bytes of headers", len - at))
                    .trace(i)
                    .at(at));
            }
            self.source.read_exact_at(&mut h, at)?;
            self.check_extensions(i, at, &h)?;
            let mut ns = trace::samples(&h, self.binary.endian);
            if ns == 0 {
                ns = self.binary.samples;
            }
            let end = at + hb + ns * size;
            if end > len {
                return Err(Error::malformed(format!("the trace needs {ns} samples, the file ends before them")).trace(i).at(at));
            }
            index.push((at, ns));
            self.samples = self.samples.max(ns);
            at = end;
        }
        if self.samples == 0 {
            return Err(Error::malformed("0 samples per trace").at(BINARY_HEADER_OFFSET + 20));
        }
        self.traces = index.len() as u64;
        self.variable = Some(index);
        Ok(())
    }

    /// The sample format.
    pub fn format(&self) -> SampleFormat {
        self.binary.format
    }

    /// Whether traces have different lengths (rev 2).
    pub fn variable_length(&self) -> bool {
        self.variable.is_some()
    }

    /// Byte offset of trace `i`'s header and its number of samples.
    ///
    /// # Errors
    /// `InvalidArgument` for a trace past the last.
    pub fn locate(&self, i: u64) -> Result<(u64, u64)> {
        if i >= self.traces {
            return Err(Error::new(ErrorKind::InvalidArgument, format!("the file has {} traces", self.traces)).trace(i));
        }
        Ok(match &self.variable {
            Some(v) => v[i as usize],
            None => (self.first_trace + i * self.trace_bytes(), self.samples),
        })
    }

    /// The headers (standard and extensions) of the trace at byte `at`.
    fn headers_at(&self, at: u64) -> Result<Vec<u8>> {
        let mut h = vec![0u8; self.header_bytes as usize];
        self.source.read_exact_at(&mut h, at).map_err(|e| Error::from(e).at(at))?;
        Ok(h)
    }

    /// Checks that trace `i` (its headers `headers`, at byte `at`) has the
    /// trace header extensions the binary header announces: Trace Header
    /// Extension 1 may say how many a trace has, and traces with fewer or
    /// more than the others are not read (their lengths would differ).
    ///
    /// # Errors
    /// `Unsupported` naming the trace and byte where it says otherwise.
    pub fn check_extensions(&self, i: u64, at: u64, headers: &[u8]) -> Result<()> {
        let want = self.binary.additional_headers;
        let Some(ext) = headers.get(TRACE_HEADER_BYTES..).filter(|_| want > 0) else { return Ok(()) };
        let said = crate::binary::field_i64(ext, trace::EXT_COUNT, crate::binary::FieldType::U16, self.binary.endian).unwrap_or(0);
        if said != 0 && said != i64::from(want) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "the trace says it has {said} trace header extensions (Trace Header Extension 1, bytes 157-158), \
                     where the binary header says every trace has {want}: traces with differing extensions are not read"
                ),
            )
            .trace(i)
            .at(at + (TRACE_HEADER_BYTES + trace::EXT_COUNT - 1) as u64));
        }
        Ok(())
    }

    /// The 240 bytes of trace `i`'s standard header, as in the file.
    ///
    /// # Errors
    /// As [`SegyFile::locate`]; `Io`.
    pub fn trace_header(&self, i: u64) -> Result<[u8; TRACE_HEADER_BYTES]> {
        let (at, _) = self.locate(i)?;
        let mut h = [0u8; TRACE_HEADER_BYTES];
        self.source.read_exact_at(&mut h, at).map_err(|e| Error::from(e).trace(i).at(at))?;
        Ok(h)
    }

    /// Every header of trace `i` as in the file: the standard one and its
    /// extensions ([`SegyFile::header_bytes`] bytes).
    ///
    /// # Errors
    /// As [`SegyFile::locate`]; `Io`.
    pub fn trace_headers(&self, i: u64) -> Result<Vec<u8>> {
        let (at, _) = self.locate(i)?;
        self.headers_at(at).map_err(|e| e.trace(i))
    }

    /// Reads `n` consecutive traces from trace `first`, headers and samples
    /// as in the file, into `buf` (which must hold exactly their bytes);
    /// fixed-length files only.
    ///
    /// # Errors
    /// `InvalidArgument` for traces past the last, a wrong buffer size or a
    /// variable-length file; `Io`.
    pub fn read_raw_traces(&self, first: u64, n: u64, buf: &mut [u8]) -> Result<()> {
        if self.variable.is_some() || first.checked_add(n).is_none_or(|end| end > self.traces) {
            return Err(Error::new(ErrorKind::InvalidArgument, format!("traces {first}..{} of {}", first.saturating_add(n), self.traces)));
        }
        let trace_bytes = self.trace_bytes();
        if buf.len() as u64 != n * trace_bytes {
            return Err(Error::new(ErrorKind::InvalidArgument, format!("{} bytes for {n} traces of {trace_bytes}", buf.len())));
        }
        let at = self.first_trace + first * trace_bytes;
        self.source.read_exact_at(buf, at).map_err(|e| Error::from(e).trace(first).at(at))
    }

    /// Bytes of one trace, headers included (fixed-length files).
    pub fn trace_bytes(&self) -> u64 {
        self.header_bytes + self.samples * self.binary.format.size() as u64
    }

    /// Reads trace `i`'s samples `start..start + dst.len() / native_size`
    /// decoded to native-endian values into `dst`. Samples past a short
    /// trace's end (variable lengths) are left as they are in `dst`.
    ///
    /// # Errors
    /// As [`SegyFile::locate`]; `InvalidArgument` for samples past the end; `Io`.
    pub fn read_samples(&self, i: u64, start: u64, dst: &mut [u8], scratch: &mut Vec<u8>) -> Result<()> {
        let (at, ns) = self.locate(i)?;
        let f = self.binary.format;
        let n = (dst.len() / f.native_size()) as u64;
        if start.checked_add(n).is_none_or(|end| end > self.samples) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("samples {start}..{} of {}", start.saturating_add(n), self.samples),
            )
            .trace(i));
        }
        let have = ns.saturating_sub(start).min(n);
        scratch.clear();
        scratch.resize(have as usize * f.size(), 0);
        let from = at + self.header_bytes + start * f.size() as u64;
        self.source.read_exact_at(scratch, from).map_err(|e| Error::from(e).trace(i).at(from))?;
        f.decode(self.binary.endian, scratch, dst);
        Ok(())
    }

    /// The first textual header decoded.
    pub fn text(&self) -> String {
        text::decode(&self.textual[0], self.encoding)
    }

    /// The underlying source.
    pub fn source(&self) -> &S {
        &self.source
    }
}
