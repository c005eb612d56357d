//! `vds import survey.sgy`: SEG-Y to a container, through the vds-segy
//! crate. The trace headers are scanned once for the geometry, then the
//! volume is filled block by block (a block is whole chunks of the output,
//! at most the block budget), each trace read where the file has it, so
//! memory stays bounded by the budget and the grid of trace numbers
//! whatever the file's size or sorting.
//!
//! What a container imported from SEG-Y holds:
//! - `amplitude`: the samples, [inline, crossline, (offset,) sample] or
//!   [cdp, sample] for a 2-D line, in the sample format's own type (IBM
//!   floats as float32); with a missing-value mask when traces are missing.
//! - `segy_trace_header`: uint8 [..., header=240], every trace header as in
//!   the file (zeros where a trace is missing).
//! - attribute `segy`: the textual headers (as text and as the file's
//!   bytes), the binary header (named fields and bytes), byte order,
//!   format, key byte positions, sorting and grid; attribute
//!   `survey_coordinate_system`: origin and inline/crossline spacing
//!   vectors of the grid in world coordinates, from CDP X/Y.

use crate::args::Args;
use crate::convert::{block_budget, summary, Layout};
use crate::util::{at, buffer, bytes_of, catch_interrupts, interrupted, open_input, Blocks, Destination, Fail, Progress};
use std::fs::File;
use vds::serde_json::{json, Map, Value};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};
use vds_segy::{Geometry, KeyBytes, SegyFile};

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

/// Options of `vds import` that only SEG-Y takes.
pub const SEGY_VALUES: [&str; 3] = ["inline-byte", "crossline-byte", "offset-byte"];
/// Flags of `vds import` that only SEG-Y takes.
pub const SEGY_FLAGS: [&str; 2] = ["prestack", "2d"];

fn segy_err(path: &str) -> impl Fn(vds_segy::Error) -> Fail + '_ {
    move |e| Fail::Error(format!("{path}: {e}"))
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

/// Header byte positions from the options, checked.
fn key_bytes(args: &Args) -> Result<KeyBytes, Fail> {
    let pos = |name: &str, default: usize| -> Result<usize, Fail> {
        Ok(args.parsed(name, |s| s.parse::<usize>().map_err(|_| "not a byte position".to_string()))?.unwrap_or(default))
    };
    let keys = KeyBytes {
        inline: pos("inline-byte", vds_segy::trace::INLINE)?,
        crossline: pos("crossline-byte", vds_segy::trace::CROSSLINE)?,
        offset: args.flag("prestack").then_some(pos("offset-byte", vds_segy::trace::OFFSET)?),
        two_d: args.flag("2d"),
    };
    keys.check().map_err(|e| args.usage(e.to_string()))?;
    Ok(keys)
}

/// The geometry: post-stack unless asked, or unless traces repeat an
/// (inline, crossline) pair with different offsets: then pre-stack.
fn geometry(file: &SegyFile<File>, args: &Args, input: &str, mut keys: KeyBytes) -> Result<Geometry, Fail> {
    let mut progress = Progress::items("scanning trace headers", file.traces, args.flag("quiet"));
    let mut scan = |keys: KeyBytes| {
        Geometry::scan(file, keys, &mut |n| {
            progress.set(n);
            interrupted("").is_ok()
        })
    };
    let g = match scan(keys) {
        Err(e) if keys.offset.is_none() && e.message().starts_with("duplicate trace") => {
            keys.offset = Some(
                args.parsed("offset-byte", |s| s.parse::<usize>().map_err(|_| "not a byte position".to_string()))?
                    .unwrap_or(vds_segy::trace::OFFSET),
            );
            scan(keys)
        }
        other => other,
    };
    interrupted(&format!("{input} was not imported"))?;
    g.map_err(segy_err(input))
}

/// The `segy` attribute: everything needed to write the file back.
fn segy_attribute(file: &SegyFile<File>, g: &Geometry, delay: f64) -> Value {
    let b = &file.binary;
    let texts: Vec<Value> = file
        .textual
        .iter()
        .map(|t| {
            let e = vds_segy::Encoding::guess(t);
            Value::from(vds_segy::text::lines(&vds_segy::text::decode(t, e)).join("\n").trim_end().to_string())
        })
        .collect();
    let raw: Vec<u8> = file.textual.concat();
    let fields: Map<String, Value> = b.fields().into_iter().map(|(n, v)| (n.to_string(), json!(v))).collect();
    let line = |l: &vds_segy::Line| json!([l.first, l.last(), l.step]);
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
        "sample_interval": b.interval,
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

pub fn import(args: &Args, layout: &Layout) -> Result<(), Fail> {
    let (input, output) = (&args.positional[0], &args.positional[1]);
    let keys = key_bytes(args)?;
    catch_interrupts();
    let file = SegyFile::open(open_input(input)?).map_err(segy_err(input))?;
    let g = geometry(&file, args, input, keys)?;
    let dtype = DType::from_name(file.format().dtype()).map_err(at(input))?;
    let e = file.binary.endian;
    let first = file.trace_header(0).map_err(segy_err(input))?;
    let delay = f64::from(vds_segy::trace::get_i16(&first, vds_segy::trace::DELAY, e));
    let dt_ms = file.binary.interval / 1000.0;
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
    let names: Vec<String> = axes.iter().map(|a| a.name().to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    layout.check(&[(AMPLITUDE.to_string(), names.len()), (TRACE_HEADERS.to_string(), names.len())])?;
    let dest = Destination::new(output, args.flag("force"))?;
    let mut b = DatasetBuilder::new();
    for a in axes {
        b.axis(a);
    }
    b.axis(Axis::new(HEADER_AXIS, 240));
    let mut vb = VariableBuilder::new(AMPLITUDE, dtype, &names);
    vb.codec(layout.codec_for(dtype).unwrap_or(Codec::deflate(1))).missing_mask(!g.complete());
    if let Some(c) = layout.chunk(AMPLITUDE, names.len()) {
        vb.chunk(c);
    } else {
        // 64 samples along each axis: bricks, as OpenVDS's default.
        vb.chunk(&default_chunk(&g, ns));
    }
    layout.apply(&mut vb, names.len(), None);
    b.variable(&vb);
    let chunk = layout.chunk(AMPLITUDE, names.len()).map_or_else(|| default_chunk(&g, ns), <[u64]>::to_vec);
    let mut head_axes = names[..names.len() - 1].to_vec();
    head_axes.push(HEADER_AXIS);
    let mut hb = VariableBuilder::new(TRACE_HEADERS, DType::UInt8, &head_axes);
    let mut hchunk = chunk[..chunk.len() - 1].to_vec();
    hchunk.push(240);
    hb.codec(layout.codec_for(DType::UInt8).unwrap_or(Codec::deflate(1))).chunk(&hchunk);
    b.variable(&hb);
    b.attribute(SEGY_ATTR, segy_attribute(&file, &g, delay));
    if let Some(s) = g.survey {
        let unit = match vds_segy::binary::field_i64(&file.binary.bytes, 55, vds_segy::binary::FieldType::I16, e) {
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
    let mut out = b.create(dest.temp()).map_err(at(output))?;
    let left = format!("{output} was not written");
    fill(&file, &g, &mut out, args.flag("quiet"), &left).map_err(|e| match e {
        Fail::Error(m) if !m.starts_with(input.as_str()) => Fail::Error(format!("{input}: {m}")),
        other => other,
    })?;
    out.close().map_err(at(output))?;
    dest.finish()?;
    let total = bytes_of(&[g.cell_count(), ns], dtype.size() as u64)?;
    summary(output, total, std::fs::metadata(output).map_err(at(output))?.len())
}

/// 64 samples along each axis, as OpenVDS's default bricks, or fewer
/// where the volume has fewer.
fn default_chunk(g: &Geometry, ns: u64) -> Vec<u64> {
    let mut c = Vec::new();
    if !g.two_d {
        c.push(g.inlines.count.min(64));
    }
    c.push(g.crosslines.count.min(64));
    if let Some(o) = g.offsets {
        c.push(o.count.min(64));
    }
    c.push(ns.min(64));
    c
}

/// Writes every trace and trace header into `out`, block by block.
fn fill(file: &SegyFile<File>, g: &Geometry, out: &mut Dataset, quiet: bool, left: &str) -> Result<(), Fail> {
    let (shape, chunk, dtype, masked) = {
        let v = out.variable(AMPLITUDE).map_err(|e| Fail::Error(e.to_string()))?;
        (v.shape().to_vec(), v.chunk_shape().to_vec(), v.dtype(), v.has_mask())
    };
    let esize = dtype.size() as u64;
    let ns = file.samples;
    let ndim = shape.len();
    let mut progress = Progress::new("importing traces", bytes_of(&shape, esize)?, quiet);
    let mut scratch = Vec::new();
    let trace = vec![0u8; 240 + (ns * file.format().size() as u64) as usize];
    // Runs of traces read at once: about 4 MiB.
    let run_max = (4usize << 20).div_ceil(trace.len());
    let mut run = buffer((run_max * trace.len()) as u64)?;
    // Blocks keep whole traces, so each trace is read once, header and all.
    let (mut buf, mut heads) = (Vec::new(), Vec::new());
    let mut bchunk = chunk.clone();
    bchunk[ndim - 1] = ns;
    for (start, bshape) in Blocks::new(&shape, &bchunk, esize, block_budget()) {
        interrupted(left)?;
        let traces: u64 = bshape[..ndim - 1].iter().product();
        let tbytes = (ns * esize) as usize;
        // The buffers of the first block (the largest) serve every block:
        // fresh ones would be paged in anew each time.
        if buf.len() < (traces * ns * esize) as usize {
            buf = buffer(traces * ns * esize)?;
            heads = buffer(traces * 240)?;
        }
        let buf = &mut buf[..(traces * ns * esize) as usize];
        let heads = &mut heads[..(traces * 240) as usize];
        if masked {
            // Missing traces read zeros (the fill value) and zero headers.
            buf.fill(0);
            heads.fill(0);
        }
        let mut missing = if masked { vec![false; (traces * ns) as usize] } else { Vec::new() };
        // Cells of the block in C order: the block's leading axes.
        let lead = &shape[..ndim - 1];
        let mut idx = vec![0u64; ndim - 1];
        // (position in the block, trace number) of the block's live traces.
        let mut live: Vec<(usize, u64)> = Vec::new();
        for t in 0..traces as usize {
            let cell = idx.iter().zip(&start).zip(lead).fold(0u64, |c, ((&i, &s), &n)| c * n + s + i);
            match g.cells[cell as usize] {
                0 if masked => missing[t * ns as usize..(t + 1) * ns as usize].fill(true),
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
            let bytes = &mut run[..n * trace.len()];
            if n == 1 {
                read_trace(file, live[k].1, bytes, &mut scratch).map_err(|e| Fail::Error(e.to_string()))?;
            } else {
                file.read_raw_traces(live[k].1, n as u64, bytes).map_err(|e| Fail::Error(e.to_string()))?;
            }
            for (j, tr) in bytes.chunks_exact(trace.len()).enumerate() {
                let t = live[k].0 + j;
                heads[t * 240..(t + 1) * 240].copy_from_slice(&tr[..240]);
                file.format().decode(file.binary.endian, &tr[240..], &mut buf[t * tbytes..(t + 1) * tbytes]);
            }
            k += n;
        }
        let region = Region::new(&start, &bshape).map_err(|e| Fail::Error(e.to_string()))?;
        if masked {
            write_masked(out, dtype, &region, buf, &missing)?;
        } else {
            out.write_bytes(AMPLITUDE, &region, Order::C, buf).map_err(|e| Fail::Error(e.to_string()))?;
        }
        let mut hstart = start[..ndim - 1].to_vec();
        hstart.push(0);
        let mut hshape = bshape[..ndim - 1].to_vec();
        hshape.push(240);
        let hregion = Region::new(&hstart, &hshape).map_err(|e| Fail::Error(e.to_string()))?;
        out.write_bytes(TRACE_HEADERS, &hregion, Order::C, heads).map_err(|e| Fail::Error(e.to_string()))?;
        progress.add(buf.len() as u64);
    }
    progress.finish();
    Ok(())
}

/// Reads trace `i` whole (header and samples, as in the file) into `dst`;
/// a shorter trace of a variable-length file leaves zeros after its end.
fn read_trace(file: &SegyFile<File>, i: u64, dst: &mut [u8], scratch: &mut Vec<u8>) -> vds_segy::Result<()> {
    if file.variable_length() {
        dst.fill(0);
        let h = file.trace_header(i)?;
        dst[..240].copy_from_slice(&h);
        let (at, ns) = file.locate(i)?;
        let n = (ns * file.format().size() as u64) as usize;
        scratch.clear();
        scratch.resize(n, 0);
        vds_segy::Source::read_exact_at(file.source(), scratch, at + 240)?;
        dst[240..240 + n].copy_from_slice(scratch);
        Ok(())
    } else {
        file.read_raw_traces(i, 1, dst)
    }
}

/// Writes a block with its missing-trace mask, typed as the variable is.
fn write_masked(out: &mut Dataset, dtype: DType, region: &Region, buf: &[u8], missing: &[bool]) -> Result<(), Fail> {
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
        other => return Err(Fail::Error(format!("no SEG-Y format decodes to {other}"))),
    };
    r.map_err(|e| Fail::Error(e.to_string()))
}
