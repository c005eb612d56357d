//! SEG-Y files to libvds containers and back (cargo feature `vds`): what
//! `vds import survey.sgy` and `vds export ... .sgy` do, shared by the `vds`
//! tool and the Python package (`vds.from_segy`, `vds.to_segy`).
//!
//! Import scans the trace headers once for the geometry ([`scan`]), then
//! fills the volume block by block ([`fill`]: a block is whole chunks of the
//! output, at most the block budget), each trace read where the file has it,
//! so memory stays bounded by the budget and the grid of trace numbers
//! whatever the file's size or sorting.
//!
//! What a container imported from SEG-Y holds:
//! - `amplitude`: the samples, [inline, crossline, (offset,) sample] or
//!   [cdp, sample] for a 2-D line, in the sample format's own type (IBM
//!   floats as float32); with a missing-value mask when traces are missing.
//! - `segy_trace_header`: uint8 [..., header=240], every trace header as in
//!   the file (zeros where a trace is missing); with rev 2 trace header
//!   extensions, the header axis holds them too, after the standard header
//!   (240 bytes more for each).
//! - attribute `segy`: the textual headers (as text and as the file's
//!   bytes), the binary header (named fields and bytes), byte order,
//!   format, key byte positions, sorting and grid; attribute
//!   `survey_coordinate_system`: origin and inline/crossline spacing
//!   vectors of the grid in world coordinates, from CDP X/Y.
//!
//! Export ([`export`]) writes a container imported from SEG-Y back with its
//! kept headers, byte order, sample format and trace order, so a regular
//! sorted file comes back byte for byte; any other volume gets headers made
//! from its axes (rev 1, big-endian, IEEE floats for float32 unless another
//! format is asked). Traces are written in file order, a slab of inlines (or
//! crosslines) at a time, in bounded memory; missing traces (masked) are
//! left out.
//!
//! Progress callbacks get the count done so far and return `false` to stop,
//! which ends the call with [`Error::Cancelled`].

use crate::writer::{self, TraceKeys};
use crate::{text, Encoding, Endian, Geometry, KeyBytes, SampleFormat, SegyFile, Source};
use std::fmt;
use std::io::Write;
use vds::serde_json::{json, Map, Value};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

/// The dataset attribute holding the SEG-Y headers and layout.
pub const SEGY_ATTR: &str = "segy";
/// The dataset attribute holding the world coordinates of the grid.
pub const SURVEY_ATTR: &str = "survey_coordinate_system";
/// The variable of the samples.
pub const AMPLITUDE: &str = "amplitude";
/// The variable of the trace headers.
pub const TRACE_HEADERS: &str = "segy_trace_header";
/// The trace header axis.
pub const HEADER_AXIS: &str = "header";
/// Bytes moved per block by default (at least one chunk): 64 MiB.
pub const DEFAULT_BLOCK_BYTES: u64 = 64 << 20;

/// A failed conversion.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The SEG-Y file is unreadable, malformed or not a volume.
    Segy(crate::Error),
    /// The container could not be created, read or written.
    Vds(vds::Error),
    /// Writing the SEG-Y file failed.
    Write(std::io::Error),
    /// The container's variable cannot be written as SEG-Y, or an option is wrong.
    Invalid(String),
    /// A progress callback asked to stop.
    Cancelled,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Segy(e) => e.fmt(f),
            Error::Vds(e) => e.fmt(f),
            Error::Write(e) => write!(f, "writing: {e}"),
            Error::Invalid(m) => f.write_str(m),
            Error::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        Error::Segy(e)
    }
}

impl From<vds::Error> for Error {
    fn from(e: vds::Error) -> Error {
        Error::Vds(e)
    }
}

/// The results of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// A buffer of `bytes` bytes, or an error rather than an abort when it cannot be had.
fn buffer(bytes: u64) -> Result<Vec<u8>> {
    let n = usize::try_from(bytes).map_err(|_| Error::Invalid(format!("{bytes} bytes do not fit in memory")))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::Invalid(format!("cannot allocate {n} bytes")))?;
    v.resize(n, 0);
    Ok(v)
}

/// Bytes that `shape` elements of `esize` bytes take, checked.
pub fn bytes_of(shape: &[u64], esize: u64) -> Result<u64> {
    shape
        .iter()
        .try_fold(esize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::Invalid(format!("shape {shape:?} of {esize}-byte values takes more than 2^64 bytes")))
}

/// Base64 (RFC 4648, with padding) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = u32::from(c[0]) << 16 | u32::from(*c.get(1).unwrap_or(&0)) << 8 | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            out.push(if k <= c.len() { char::from(A[(n >> (18 - 6 * k) & 63) as usize]) } else { '=' });
        }
    }
    out
}

/// The bytes of base64 text, or `None` if it is not base64.
pub fn unbase64(text: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let t = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(t.len() * 3 / 4);
    for c in t.chunks(4) {
        let mut n = 0u32;
        for (k, &b) in c.iter().enumerate() {
            n |= u32::from(val(b)?) << (18 - 6 * k);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..c.len()]);
    }
    Some(out)
}

/// How `vds import` reads a SEG-Y file.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Where the inline, crossline (and, for pre-stack, offset) numbers are.
    pub keys: KeyBytes,
    /// The offset's byte when pre-stack is found rather than asked for
    /// (traces repeating an inline and crossline).
    pub offset_byte: usize,
    /// The codec of both variables.
    pub codec: Codec,
    /// The chunk shape of `amplitude` (the trace headers follow it); by
    /// default at most 64 samples along each axis, as OpenVDS's bricks,
    /// evened out over the axis (200 inlines: chunks of 50).
    pub chunk: Option<Vec<u64>>,
    /// Bytes of the blocks in flight: two of half of it, one read while the
    /// other is written (or one of all of it, when a row of chunks is more
    /// than half).
    pub block_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            keys: KeyBytes { inline: crate::trace::INLINE, crossline: crate::trace::CROSSLINE, offset: None, two_d: false },
            offset_byte: crate::trace::OFFSET,
            codec: Codec::deflate(1),
            chunk: None,
            block_bytes: DEFAULT_BLOCK_BYTES,
        }
    }
}

/// The geometry: post-stack unless asked, or unless traces repeat an
/// (inline, crossline) pair with different offsets: then pre-stack.
/// `progress` gets the traces scanned.
///
/// # Errors
/// [`Error::Segy`] for bad key bytes, duplicate traces or an unreadable
/// file; [`Error::Cancelled`].
pub fn scan<S: Source>(file: &SegyFile<S>, opts: &ImportOptions, progress: &mut dyn FnMut(u64) -> bool) -> Result<Geometry> {
    opts.keys.check()?;
    let mut go = true;
    let mut run = |keys: KeyBytes| {
        Geometry::scan(file, keys, &mut |n| {
            go = progress(n);
            go
        })
    };
    let g = match run(opts.keys) {
        Err(e) if opts.keys.offset.is_none() && e.message().starts_with("duplicate trace") => {
            run(KeyBytes { offset: Some(opts.offset_byte), ..opts.keys })
        }
        other => other,
    };
    if !go {
        return Err(Error::Cancelled);
    }
    Ok(g?)
}

/// The axis names of `amplitude` for a geometry.
pub fn axis_names(g: &Geometry) -> Vec<&'static str> {
    let mut names = if g.two_d { vec!["cdp"] } else { vec!["inline", "crossline"] };
    if g.offsets.is_some() {
        names.push("offset");
    }
    names.push("sample");
    names
}

/// At most 64 samples along each axis, as OpenVDS's default bricks, and
/// as few fewer as cover the axis in the same number of chunks (200
/// inlines: 4 chunks of 50, not 4 of 64), so that the chunks at the far
/// edges hold little padding: stored uncompressed, 64^3 chunks over a
/// 200 x 200 x 1000 volume take 1.6 times its bytes.
fn default_chunk(g: &Geometry, ns: u64) -> Vec<u64> {
    let even = |n: u64| n.div_ceil(n.div_ceil(64).max(1)).max(1);
    let mut c = Vec::new();
    if !g.two_d {
        c.push(even(g.inlines.count));
    }
    c.push(even(g.crosslines.count));
    if let Some(o) = g.offsets {
        c.push(even(o.count));
    }
    c.push(even(ns));
    c
}

/// The `segy` attribute: everything needed to write the file back.
fn segy_attribute<S: Source>(file: &SegyFile<S>, g: &Geometry, delay: f64) -> Value {
    let b = &file.binary;
    let texts: Vec<Value> = file
        .textual
        .iter()
        .map(|t| {
            let e = Encoding::guess(t);
            Value::from(text::lines(&text::decode(t, e)).join("\n").trim_end().to_string())
        })
        .collect();
    let raw: Vec<u8> = file.textual.concat();
    let fields: Map<String, Value> = b.fields().into_iter().map(|(n, v)| (n.to_string(), json!(v))).collect();
    let line = |l: &crate::Line| json!([l.first, l.last(), l.step]);
    json!({
        "revision": format!("{}.{}", b.revision.0, b.revision.1),
        "byte_order": b.endian.name(),
        "format": b.format.code(),
        "textual_encoding": file.encoding.name(),
        "textual_headers": texts,
        "textual_raw": base64(&raw),
        "binary_header": fields,
        "binary_raw": base64(&b.bytes),
        "samples": file.samples,
        "sample_interval": file.interval,
        "sample_interval_from": file.interval_from.name(),
        "delay": delay,
        "traces": file.traces,
        "missing_traces": g.cell_count() - g.traces,
        "sorting": g.sorting.name(),
        "two_d": g.two_d,
        "variable_length": file.variable_length(),
        "inline_byte": g.keys.inline,
        "crossline_byte": g.keys.crossline,
        "offset_byte": g.keys.offset,
        "inlines": line(&g.inlines),
        "crosslines": line(&g.crosslines),
        "offsets": g.offsets.as_ref().map(line),
        "variable": AMPLITUDE,
        "trace_headers": TRACE_HEADERS,
    })
}

/// The container's description for a scanned file: axes, `amplitude` and
/// `segy_trace_header`, and the attributes. `configure` may change
/// `amplitude` further (levels of detail, partitionings).
///
/// # Errors
/// [`Error::Segy`] when the first trace header cannot be read;
/// [`Error::Vds`] for a sample format no dtype holds.
pub fn builder<S: Source>(
    file: &SegyFile<S>,
    g: &Geometry,
    opts: &ImportOptions,
    configure: &mut dyn FnMut(&mut VariableBuilder),
) -> Result<DatasetBuilder> {
    let dtype = DType::from_name(file.format().dtype())?;
    let e = file.binary.endian;
    let first = file.trace_header(0)?;
    let delay = f64::from(crate::trace::get_i16(&first, crate::trace::DELAY, e));
    let dt_ms = file.interval / 1000.0;
    let ns = file.samples;
    // Axes: the grid's numbers as coordinates, samples in ms from the delay.
    let mut axes: Vec<Axis> = Vec::new();
    if g.two_d {
        axes.push(Axis::new("cdp", g.crosslines.count).coordinates(g.crosslines.first as f64, g.crosslines.last() as f64));
    } else {
        axes.push(Axis::new("inline", g.inlines.count).coordinates(g.inlines.first as f64, g.inlines.last() as f64));
        axes.push(Axis::new("crossline", g.crosslines.count).coordinates(g.crosslines.first as f64, g.crosslines.last() as f64));
    }
    if let Some(o) = g.offsets {
        axes.push(Axis::new("offset", o.count).coordinates(o.first as f64, o.last() as f64));
    }
    axes.push(Axis::new("sample", ns).unit("ms").coordinates(delay, delay + dt_ms * (ns - 1) as f64));
    let names = axis_names(g);
    let mut b = DatasetBuilder::new();
    for a in axes {
        b.axis(a);
    }
    let header_bytes = file.header_bytes;
    b.axis(Axis::new(HEADER_AXIS, header_bytes));
    let chunk = opts.chunk.clone().unwrap_or_else(|| default_chunk(g, ns));
    if chunk.len() != names.len() {
        return Err(Error::Invalid(format!("a chunk shape of {} extents for {} axes ({})", chunk.len(), names.len(), names.join(", "))));
    }
    let mut vb = VariableBuilder::new(AMPLITUDE, dtype, &names);
    // A lossy codec is for float samples; integer ones stay exact.
    let lossless = |c: Codec| match c.compression {
        vds::Compression::Bounded { level, .. } => Codec::zstd(level),
        _ => c,
    };
    let amplitude_codec = if matches!(dtype, DType::Float32 | DType::Float64) { opts.codec } else { lossless(opts.codec) };
    vb.codec(amplitude_codec).missing_mask(!g.complete()).chunk(&chunk);
    configure(&mut vb);
    b.variable(&vb);
    let mut head_axes = names[..names.len() - 1].to_vec();
    head_axes.push(HEADER_AXIS);
    let mut hb = VariableBuilder::new(TRACE_HEADERS, DType::UInt8, &head_axes);
    let mut hchunk = chunk[..chunk.len() - 1].to_vec();
    hchunk.push(header_bytes);
    // The headers are bytes: a lossy codec asked for the amplitudes keeps them exact.
    hb.codec(lossless(opts.codec)).chunk(&hchunk);
    b.variable(&hb);
    b.attribute(SEGY_ATTR, segy_attribute(file, g, delay));
    if let Some(s) = g.survey {
        let unit = match crate::binary::field_i64(&file.binary.bytes, 55, crate::binary::FieldType::I16, e) {
            Some(1) => "m",
            Some(2) => "ft",
            _ => "",
        };
        b.attribute(
            SURVEY_ATTR,
            json!({
                "origin": s.origin,
                "inline_spacing": s.inline_spacing,
                "crossline_spacing": s.crossline_spacing,
                "first_inline": g.inlines.first,
                "first_crossline": g.crosslines.first,
                "unit": unit,
                "misfit": s.misfit,
            }),
        );
    }
    Ok(b)
}

/// Writes every trace and trace header of `file` into `out` (made from
/// [`builder`]), block by block; `progress` gets the sample bytes written.
///
/// Two threads share the work: one reads and converts the next block while
/// the caller's thread writes the last one, each block taking half the
/// budget, so that reading the SEG-Y file and writing the container overlap
/// (when one row of chunks is more than half the budget, blocks of the whole
/// budget are read and written in turn).
///
/// # Errors
/// [`Error::Segy`] naming the trace and byte where the file cannot be read;
/// [`Error::Vds`]; [`Error::Cancelled`].
pub fn fill<S: Source + Sync>(
    file: &SegyFile<S>,
    g: &Geometry,
    out: &mut Dataset,
    block_bytes: u64,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<()> {
    let (shape, chunk, dtype, masked) = {
        let v = out.variable(AMPLITUDE)?;
        (v.shape().to_vec(), v.chunk_shape().to_vec(), v.dtype(), v.has_mask())
    };
    let esize = dtype.size() as u64;
    let ns = file.samples;
    let ndim = shape.len();
    let hb = file.header_bytes as usize;
    let trace_len = hb + (ns * file.format().size() as u64) as usize;
    let reader = BlockReader { file, g, lead: &shape[..ndim - 1], ns, esize, hb, trace_len, masked };
    // Blocks keep whole traces, so each trace is read once, header and all.
    let mut bchunk = chunk.clone();
    bchunk[ndim - 1] = ns;
    // A block holds each of its traces' headers as well as its samples (for
    // every grid cell, missing ones too): the budget for the samples is the
    // share of the whole that they are.
    let sample_bytes = ns * esize;
    let budget =
        u64::try_from(u128::from(block_bytes) * u128::from(sample_bytes) / u128::from(sample_bytes + hb as u64)).unwrap_or(block_bytes);
    // Two blocks in flight, each of half the budget; or, when the smallest
    // block (one row of chunks) is more than half, one at a time.
    let mut pieces = vds::RegionPieces::new(&shape, &bchunk, esize, budget / 2);
    let largest = pieces.clone().next().map_or(0, |(_, s)| s.iter().product::<u64>().saturating_mul(esize));
    let in_flight = if largest <= budget / 2 { 2 } else { 1 };
    if in_flight == 1 {
        pieces = vds::RegionPieces::new(&shape, &bchunk, esize, budget);
    }
    // Set when the writer stops (it failed, or was cancelled): so does the reading.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Blocks go to the writer through `full` and come back through
        // `empty` to be filled again, each with its own buffers.
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Block>(1);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Block>();
        for _ in 0..in_flight {
            let _ = empty_tx.send(Block::default());
        }
        let stopped = &stop;
        let producer = scope.spawn(move || -> Result<()> {
            let (mut run, mut scratch) = (Vec::new(), Vec::new());
            for (start, bshape) in pieces {
                let Ok(mut b) = empty_rx.recv() else { return Ok(()) };
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    return Ok(());
                }
                reader.read(&start, &bshape, &mut b, &mut run, &mut scratch)?;
                if full_tx.send(b).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        let mut written = Ok(());
        let mut done = 0u64;
        for b in &full_rx {
            written = write_block(out, dtype, masked, hb, &b);
            done += b.samples_len as u64;
            if written.is_ok() && !progress(done) {
                written = Err(Error::Cancelled);
            }
            if written.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                break;
            }
            let _ = empty_tx.send(b);
        }
        drop((full_rx, empty_tx));
        let read = producer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        read.and(written)
    })
}

/// One block of the volume: where it lies, and its samples, trace headers
/// and missing-sample mask as read. The buffers are kept from block to
/// block, grown to the largest block they have held, and only the first
/// `samples_len` and `heads_len` bytes hold this block's.
#[derive(Default)]
struct Block {
    start: Vec<u64>,
    shape: Vec<u64>,
    samples: Vec<u8>,
    samples_len: usize,
    heads: Vec<u8>,
    heads_len: usize,
    missing: Vec<bool>,
}

/// What reading a block of the volume from the SEG-Y file needs.
struct BlockReader<'a, S: Source> {
    file: &'a SegyFile<S>,
    g: &'a Geometry,
    /// The grid: the volume's shape without the sample axis.
    lead: &'a [u64],
    ns: u64,
    esize: u64,
    hb: usize,
    trace_len: usize,
    masked: bool,
}

impl<S: Source> BlockReader<'_, S> {
    /// Reads the block at `start` of `bshape` into `b`: each live trace's
    /// samples converted and its headers as they are; missing traces read
    /// zeros (the fill value) and zero headers. `run` and `scratch` are
    /// buffers kept between calls.
    fn read(&self, start: &[u64], bshape: &[u64], b: &mut Block, run: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Result<()> {
        let (file, ns, hb, trace_len) = (self.file, self.ns, self.hb, self.trace_len);
        let ndim = bshape.len();
        let traces: u64 = bshape[..ndim - 1].iter().product();
        let tbytes = (ns * self.esize) as usize;
        // Fresh buffers for each block would be paged in anew each time.
        if b.samples.len() < (traces * ns * self.esize) as usize {
            b.samples = buffer(traces * ns * self.esize)?;
            b.heads = buffer(traces * hb as u64)?;
        }
        // Runs of traces read at once: about 4 MiB.
        let run_max = (4usize << 20).div_ceil(trace_len);
        if run.len() < run_max * trace_len {
            *run = buffer((run_max * trace_len) as u64)?;
        }
        b.start.clear();
        b.start.extend_from_slice(start);
        b.shape.clear();
        b.shape.extend_from_slice(bshape);
        b.samples_len = (traces * ns * self.esize) as usize;
        b.heads_len = traces as usize * hb;
        let buf = &mut b.samples[..b.samples_len];
        let heads = &mut b.heads[..b.heads_len];
        b.missing.clear();
        if self.masked {
            buf.fill(0);
            heads.fill(0);
            b.missing.resize((traces * ns) as usize, false);
        }
        // Cells of the block in C order: the block's leading axes.
        let mut idx = vec![0u64; ndim - 1];
        // (position in the block, trace number) of the block's live traces.
        let mut live: Vec<(usize, u64)> = Vec::new();
        for t in 0..traces as usize {
            let cell = idx.iter().zip(start).zip(self.lead).fold(0u64, |c, ((&i, &s), &n)| c * n + s + i);
            match self.g.cells[cell as usize] {
                0 if self.masked => b.missing[t * ns as usize..(t + 1) * ns as usize].fill(true),
                0 => {}
                n => live.push((t, n - 1)),
            }
            for k in (0..ndim - 1).rev() {
                idx[k] += 1;
                if idx[k] < bshape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        // Traces next to each other in the file and in the block are read
        // in one call: a sorted file is read in long sequential runs.
        let mut k = 0;
        while k < live.len() {
            let mut n = 1;
            while k + n < live.len() && !file.variable_length() && n < run_max && live[k + n] == (live[k].0 + n, live[k].1 + n as u64) {
                n += 1;
            }
            let bytes = &mut run[..n * trace_len];
            if n == 1 {
                read_trace(file, live[k].1, bytes, scratch)?;
            } else {
                file.read_raw_traces(live[k].1, n as u64, bytes)?;
            }
            for (j, tr) in bytes.chunks_exact(trace_len).enumerate() {
                let t = live[k].0 + j;
                heads[t * hb..(t + 1) * hb].copy_from_slice(&tr[..hb]);
                file.format().decode(file.binary.endian, &tr[hb..], &mut buf[t * tbytes..(t + 1) * tbytes]);
            }
            k += n;
        }
        Ok(())
    }
}

/// Writes block `b` into `out`: its samples (with the mask when `masked`)
/// and its trace headers of `hb` bytes each.
fn write_block(out: &mut Dataset, dtype: DType, masked: bool, hb: usize, b: &Block) -> Result<()> {
    let samples = &b.samples[..b.samples_len];
    let region = Region::new(&b.start, &b.shape)?;
    if masked {
        write_masked(out, dtype, &region, samples, &b.missing)?;
    } else {
        out.write_bytes(AMPLITUDE, &region, Order::C, samples)?;
    }
    let ndim = b.shape.len();
    let mut hstart = b.start[..ndim - 1].to_vec();
    hstart.push(0);
    let mut hshape = b.shape[..ndim - 1].to_vec();
    hshape.push(hb as u64);
    out.write_bytes(TRACE_HEADERS, &Region::new(&hstart, &hshape)?, Order::C, &b.heads[..b.heads_len])?;
    Ok(())
}

/// Reads trace `i` whole (header and samples, as in the file) into `dst`;
/// a shorter trace of a variable-length file leaves zeros after its end.
fn read_trace<S: Source>(file: &SegyFile<S>, i: u64, dst: &mut [u8], scratch: &mut Vec<u8>) -> crate::Result<()> {
    if file.variable_length() {
        dst.fill(0);
        let h = file.trace_headers(i)?;
        let hb = h.len();
        dst[..hb].copy_from_slice(&h);
        let (at, ns) = file.locate(i)?;
        let n = (ns * file.format().size() as u64) as usize;
        scratch.clear();
        scratch.resize(n, 0);
        Source::read_exact_at(file.source(), scratch, at + hb as u64)?;
        dst[hb..hb + n].copy_from_slice(scratch);
        Ok(())
    } else {
        file.read_raw_traces(i, 1, dst)
    }
}

/// Writes a block with its missing-trace mask, typed as the variable is.
fn write_masked(out: &mut Dataset, dtype: DType, region: &Region, buf: &[u8], missing: &[bool]) -> Result<()> {
    macro_rules! typed {
        ($t:ty) => {{
            let v: Vec<$t> =
                buf.chunks_exact(std::mem::size_of::<$t>()).map(|c| <$t>::from_ne_bytes(c.try_into().unwrap_or_default())).collect();
            out.write_masked(AMPLITUDE, region, Order::C, &v, missing)
        }};
    }
    let r = match dtype {
        DType::Int8 => typed!(i8),
        DType::UInt8 => typed!(u8),
        DType::Int16 => typed!(i16),
        DType::UInt16 => typed!(u16),
        DType::Int32 => typed!(i32),
        DType::UInt32 => typed!(u32),
        DType::Int64 => typed!(i64),
        DType::UInt64 => typed!(u64),
        DType::Float32 => typed!(f32),
        DType::Float64 => typed!(f64),
        other => return Err(Error::Invalid(format!("no SEG-Y format decodes to {other}"))),
    };
    Ok(r?)
}

/// How `vds export` writes SEG-Y.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The sample format; by default the kept one, else the variable's type's.
    pub format: Option<SampleFormat>,
    /// What the made-up textual header names as the source.
    pub source_name: String,
    /// Bytes read per slab.
    pub block_bytes: u64,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions { format: None, source_name: String::new(), block_bytes: DEFAULT_BLOCK_BYTES }
    }
}

/// The variable to export: `name`, else the one imported from SEG-Y, else
/// the only one.
///
/// # Errors
/// [`Error::Invalid`] when there is no such variable or several to choose from.
pub fn export_variable(src: &Dataset, name: Option<&str>) -> Result<String> {
    let v = match name {
        Some(n) => n.to_string(),
        None => match src.attributes().get(SEGY_ATTR).and_then(|s| s["variable"].as_str()) {
            Some(n) => n.to_string(),
            None if src.variables().len() == 1 => src.variables()[0].name().to_string(),
            None => return Err(Error::Invalid(format!("{} variables; name the one to export", src.variables().len()))),
        },
    };
    if src.variables().iter().any(|x| x.name() == v) {
        Ok(v)
    } else {
        Err(Error::Invalid(format!("no variable named {v:?}")))
    }
}

/// How the file is laid out: kept from an import, or made up.
struct Plan {
    textual: Vec<u8>,
    binary: Vec<u8>,
    endian: Endian,
    format: SampleFormat,
    /// Crossline-major trace order.
    by_crossline: bool,
    /// Trace headers from this variable, when kept.
    headers: Option<usize>,
    /// Bytes of each trace's headers: 240, and 240 for each rev 2 extension kept.
    header_bytes: u64,
    /// Traces of different lengths (rev 2): each written as long as its header says.
    variable: bool,
    /// The binary header's sample count: that of a variable-length trace
    /// whose headers say 0 (as the reader takes it).
    samples: u64,
    positions: [usize; 3],
}

/// The coordinates of an axis's samples as integers, when they all are;
/// else 1, 2, 3, ...
fn numbers(a: &vds::Axis) -> Vec<i32> {
    let n = a.samples();
    let step = if n > 1 { (a.last() - a.first()) / (n - 1) as f64 } else { 0.0 };
    let v: Vec<f64> = (0..n).map(|i| a.first() + step * i as f64).collect();
    if v.iter().all(|x| (x - x.round()).abs() < 1e-6 && x.abs() < f64::from(i32::MAX)) {
        v.iter().map(|x| x.round() as i32).collect()
    } else {
        (1..=n as i32).collect()
    }
}

/// Writes variable `v` of `src` as SEG-Y to `w`; `progress` gets the bytes
/// of samples written (as the variable holds them).
///
/// # Errors
/// [`Error::Invalid`] for a variable SEG-Y cannot hold (more than 4 axes,
/// a type no format holds, more samples per trace than headers count);
/// [`Error::Vds`] reading; [`Error::Write`]; [`Error::Cancelled`].
pub fn export(src: &Dataset, v: &str, opts: &ExportOptions, w: &mut dyn Write, progress: &mut dyn FnMut(u64) -> bool) -> Result<()> {
    let seg = src.attributes().get(SEGY_ATTR).cloned();
    let vi = src.variables().iter().position(|x| x.name() == v).ok_or_else(|| Error::Invalid(format!("no variable named {v:?}")))?;
    let var = &src.variables()[vi];
    let shape = var.shape().to_vec();
    let ndim = shape.len();
    if ndim > 4 {
        return Err(Error::Invalid(format!("{v:?} has {ndim} dimensions; SEG-Y holds at most 4 (inline, crossline, offset, sample)")));
    }
    if let Some(n) = shape[..ndim - 1].iter().find(|&&n| n > i32::MAX as u64) {
        return Err(Error::Invalid(format!("{v:?} has an axis of {n} samples; SEG-Y numbers traces with 32-bit integers")));
    }
    let ns = shape[ndim - 1];
    let axes: Vec<&vds::Axis> = var.axes().iter().map(|&k| &src.axes()[k]).collect();
    let requested = opts.format;
    let dtype = var.dtype().name();
    // The kept layout applies when the variable is the one imported with it.
    let kept = seg.as_ref().filter(|s| s["variable"].as_str() == Some(v) && s["binary_raw"].is_string());
    let sample_axis = axes[ndim - 1];
    let step = if ns > 1 { (sample_axis.last() - sample_axis.first()) / (ns - 1) as f64 } else { 1.0 };
    let interval = match sample_axis.unit_str() {
        "s" => step * 1e6,
        _ => step * 1000.0,
    };
    let plan = match kept {
        Some(s) => {
            let endian = if s["byte_order"] == "little" { Endian::Little } else { Endian::Big };
            let format =
                requested.or_else(|| s["format"].as_i64().and_then(|c| SampleFormat::from_code(c as i16))).unwrap_or(SampleFormat::Float32);
            let textual = s["textual_raw"].as_str().and_then(unbase64).unwrap_or_default();
            let mut binary = s["binary_raw"].as_str().and_then(unbase64).unwrap_or_default();
            if binary.len() != 400 || textual.len() % 3200 != 0 || textual.is_empty() {
                return Err(Error::Invalid("the kept SEG-Y headers are damaged".into()));
            }
            if format.code() != s["format"].as_i64().unwrap_or(0) as i16 {
                crate::binary::set_field(&mut binary, 25, crate::binary::FieldType::I16, endian, i64::from(format.code()));
            }
            let headers = src.variables().iter().position(|x| x.name() == s["trace_headers"].as_str().unwrap_or(TRACE_HEADERS));
            let headers = headers.filter(|&h| {
                let hs = src.variables()[h].shape();
                hs.len() == ndim && hs[..ndim - 1] == shape[..ndim - 1]
            });
            // Kept headers are written as they are, or not at all: never cut or padded.
            if let Some(h) = headers {
                let (name, bytes) = (src.variables()[h].name(), src.variables()[h].shape()[ndim - 1]);
                if bytes == 0 || bytes % 240 != 0 || src.variables()[h].dtype() != DType::UInt8 {
                    return Err(Error::Invalid(format!(
                        "the kept trace headers ({name:?}, {} [.., {bytes}]) are not whole 240-byte headers",
                        src.variables()[h].dtype().name()
                    )));
                }
            }
            let header_bytes = headers.map_or(240, |h| *src.variables()[h].shape().last().unwrap_or(&240));
            let kept_binary = crate::BinaryHeader::parse(&binary).map_err(|e| Error::Invalid(format!("the kept binary header: {e}")))?;
            // The binary header says how many extensions follow each standard
            // header, from rev 2 on (as the reader takes the revision).
            let extensions = header_bytes / 240 - 1;
            if kept_binary.revision.0 >= 2 {
                if extensions != u64::from(kept_binary.additional_headers) {
                    let count = i64::try_from(extensions).unwrap_or(0);
                    crate::binary::set_field(
                        &mut binary,
                        crate::binary::ADDITIONAL_HEADERS_POS,
                        crate::binary::FieldType::I32,
                        endian,
                        count,
                    );
                }
            } else if extensions > 0 {
                return Err(Error::Invalid(format!(
                    "the kept trace headers hold {extensions} trace header extensions per trace, which SEG-Y has from rev 2 on, \
                     and the kept binary header says rev {}.{}",
                    kept_binary.revision.0, kept_binary.revision.1
                )));
            }
            let pos = |k: &str, d: usize| s[k].as_u64().map_or(d, |p| p as usize);
            Plan {
                textual,
                binary,
                endian,
                format,
                by_crossline: s["sorting"] == "crossline",
                headers,
                header_bytes,
                variable: s["variable_length"] == Value::Bool(true),
                samples: kept_binary.samples,
                positions: [pos("inline_byte", 189), pos("crossline_byte", 193), pos("offset_byte", 37)],
            }
        }
        None => {
            let format = requested
                .or_else(|| SampleFormat::for_dtype(dtype))
                .ok_or_else(|| Error::Invalid(format!("{v:?} is {dtype}, which no SEG-Y sample format holds")))?;
            let names: Vec<&str> = axes.iter().map(|a| a.name()).collect();
            let lines = [
                "C 1 SEG-Y written by libvds (vds export)".to_string(),
                format!("C 2 from {}, variable {v}", opts.source_name),
                format!("C 3 axes {}", names.join(" x ")),
                format!("C 4 shape {}", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ")),
                format!("C 5 sample interval {interval} us, first sample at {} {}", sample_axis.first(), sample_axis.unit_str()),
                "C 6 inline bytes 189-192, crossline 193-196, offset 37-40, CDP X/Y 181-188".to_string(),
                "C40 END TEXTUAL HEADER".to_string(),
            ];
            let mut card: Vec<&str> = lines[..6].iter().map(String::as_str).collect();
            card.resize(39, "");
            card.push(&lines[6]);
            let binary = writer::binary_header(Endian::Big, format, ns, interval)?;
            Plan {
                textual: text::encode(&text::card(&card), Encoding::Ebcdic),
                binary,
                endian: Endian::Big,
                format,
                by_crossline: false,
                headers: None,
                header_bytes: 240,
                variable: false,
                samples: ns,
                positions: [189, 193, 37],
            }
        }
    };
    if plan.format == SampleFormat::FixedPointGain {
        return Err(Error::Invalid("SEG-Y format 4 (fixed point with gain, obsolete since rev 1) is not written".into()));
    }
    if SampleFormat::for_dtype(dtype).map(|f| f.dtype()) != Some(plan.format.dtype()) {
        return Err(Error::Invalid(format!(
            "{v:?} is {dtype}; SEG-Y format {} holds {} (choose a format with --segy-format)",
            plan.format.code(),
            plan.format.dtype()
        )));
    }
    if ns > writer::MAX_WRITE_SAMPLES {
        return Err(Error::Invalid(format!("{ns} samples per trace; SEG-Y's extended count holds at most {}", writer::MAX_WRITE_SAMPLES)));
    }
    w.write_all(&plan.textual[..3200]).map_err(Error::Write)?;
    w.write_all(&plan.binary).map_err(Error::Write)?;
    w.write_all(&plan.textual[3200..]).map_err(Error::Write)?;
    // The grid: [inline, crossline, offset] with 1 for axes the variable lacks.
    let grid: [u64; 3] = match ndim {
        1 => [1, 1, 1],
        2 => [1, shape[0], 1],
        3 => [shape[0], shape[1], 1],
        _ => [shape[0], shape[1], shape[2]],
    };
    let lead: Vec<Vec<i32>> = axes[..ndim - 1].iter().map(|a| numbers(a)).collect();
    let number = |axis: usize, i: u64| -> i32 {
        let k = match (ndim, axis) {
            (2, 1) => Some(0),
            (3, a) | (4, a) if a < ndim - 1 => Some(a),
            _ => None,
        };
        k.map_or(if axis == 2 { 0 } else { 1 }, |k| lead[k][i as usize])
    };
    let survey = src.attributes().get(SURVEY_ATTR).cloned();
    let xy = |il: i32, xl: i32| -> Option<[f64; 2]> {
        let s = survey.as_ref()?;
        let f = |v: &Value, k: usize| v[k].as_f64();
        let (i, j) = (f64::from(il) - s["first_inline"].as_f64()?, f64::from(xl) - s["first_crossline"].as_f64()?);
        Some([
            f(&s["origin"], 0)? + i * f(&s["inline_spacing"], 0)? + j * f(&s["crossline_spacing"], 0)?,
            f(&s["origin"], 1)? + i * f(&s["inline_spacing"], 1)? + j * f(&s["crossline_spacing"], 1)?,
        ])
    };
    let esize = var.dtype().size() as u64;
    let hb = plan.header_bytes;
    let per_trace = ns * esize + hb;
    // A slab is whole lines of the outer axis of the file's order.
    let (outer, inner) = if plan.by_crossline { (1, 0) } else { (0, 1) };
    let per_line = grid[inner] * grid[2] * per_trace;
    let slab = (opts.block_bytes / per_line.max(1)).clamp(1, grid[outer]);
    let mut done = 0u64;
    let mut index = 0u64;
    let mut enc = vec![0u8; (ns as usize) * plan.format.size()];
    let lead_region = |o0: u64, on: u64| -> (Vec<u64>, Vec<u64>) {
        let mut start = vec![0u64; ndim];
        let mut count = shape.clone();
        let k = match (ndim, outer) {
            (1, _) => None,
            (2, 0) => None,
            (2, 1) => Some(0),
            (_, o) => Some(o),
        };
        if let Some(k) = k {
            start[k] = o0;
            count[k] = on;
        }
        (start, count)
    };
    let mut o0 = 0;
    while o0 < grid[outer] {
        let on = slab.min(grid[outer] - o0);
        let (start, count) = lead_region(o0, on);
        let region = Region::new(&start, &count)?;
        let n: u64 = count.iter().product();
        let mut data = buffer(n * esize)?;
        src.read_bytes(vi, &region, Order::C, &mut data)?;
        let mask = if var.has_mask() { Some(src.read_mask(vi, 0, None, &region, Order::C)?) } else { None };
        let heads = match plan.headers {
            Some(h) => {
                let mut hs = start[..ndim - 1].to_vec();
                hs.push(0);
                let mut hc = count[..ndim - 1].to_vec();
                hc.push(hb);
                let mut b = buffer(n / ns * hb)?;
                src.read_bytes(h, &Region::new(&hs, &hc)?, Order::C, &mut b)?;
                Some(b)
            }
            None => None,
        };
        // The region's leading extents as a [inline, crossline, offset] box.
        let rc: [u64; 3] = match ndim {
            1 => [1, 1, 1],
            2 => [1, count[0], 1],
            3 => [count[0], count[1], 1],
            _ => [count[0], count[1], count[2]],
        };
        let (a_n, b_n) = (rc[outer], rc[inner]);
        for a in 0..a_n {
            for b in 0..b_n {
                for o in 0..rc[2] {
                    let (il, xl) = if plan.by_crossline { (b, a) } else { (a, b) };
                    let t = ((il * rc[1] + xl) * rc[2] + o) as usize;
                    if mask.as_ref().is_some_and(|m| m[t * ns as usize]) {
                        continue;
                    }
                    let cell = [il + if outer == 0 { o0 } else { 0 }, xl + if outer == 1 { o0 } else { 0 }, o];
                    let synthesised;
                    let header: &[u8] = match &heads {
                        Some(b) => &b[t * hb as usize..(t + 1) * hb as usize],
                        None => {
                            let (inl, crl) = (number(0, cell[0]), number(1, cell[1]));
                            let keys = TraceKeys {
                                index,
                                inline: inl,
                                crossline: crl,
                                offset: number(2, cell[2]),
                                samples: writer::short_count(ns),
                                interval: if interval > 0.0 && interval <= 32767.0 { interval.round() as i16 } else { 0 },
                                delay: sample_axis.first().round().clamp(-32768.0, 32767.0) as i16,
                                xy: xy(inl, crl),
                            };
                            synthesised = writer::trace_header(plan.endian, &keys, plan.positions);
                            &synthesised
                        }
                    };
                    let bytes = &data[t * (ns * esize) as usize..(t + 1) * (ns * esize) as usize];
                    plan.format.encode(plan.endian, bytes, &mut enc);
                    // A trace that says no count has the binary header's (as the reader takes it).
                    let said = crate::trace::samples(header, plan.endian);
                    let samples = if !plan.variable {
                        ns
                    } else if said > 0 {
                        said.min(ns)
                    } else {
                        plan.samples.min(ns)
                    };
                    w.write_all(header).map_err(Error::Write)?;
                    w.write_all(&enc[..samples as usize * plan.format.size()]).map_err(Error::Write)?;
                    index += 1;
                    done += ns * esize;
                }
            }
        }
        if !progress(done) {
            return Err(Error::Cancelled);
        }
        o0 += on;
    }
    w.flush().map_err(Error::Write)?;
    Ok(())
}
