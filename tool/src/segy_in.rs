//! `vds import survey.sgy`: SEG-Y to a container. The conversion itself is
//! `vds_segy::container` (shared with the Python package); this module reads
//! the options, shows progress, answers Ctrl-C and makes the destination
//! appear only when complete.

use crate::args::Args;
use crate::convert::{block_budget, summary};
use crate::layout::{Layout, ValueRange};
use crate::util::{at, buffer, bytes_of, catch_interrupts, interrupted, open_input, Destination, Fail, Progress};
use std::fs::File;
use vds::{Codec, DType};
use vds_segy::container::{self, ImportOptions};
use vds_segy::{KeyBytes, SegyFile};

pub use vds_segy::container::{SEGY_ATTR, SURVEY_ATTR};

/// Options of `vds import` that only SEG-Y takes.
pub const SEGY_VALUES: [&str; 3] = ["inline-byte", "crossline-byte", "offset-byte"];
/// Flags of `vds import` that only SEG-Y takes.
pub const SEGY_FLAGS: [&str; 2] = ["prestack", "2d"];

/// A conversion's failure as the tool reports it: about the input, or
/// Ctrl-C with what was left behind.
fn fail<'a>(input: &'a str, left: &str) -> impl Fn(container::Error) -> Fail + 'a {
    let left = left.to_string();
    move |e| match e {
        container::Error::Cancelled => Fail::Interrupted(left.clone()),
        e => Fail::Error(format!("{input}: {e}")),
    }
}

/// Header byte positions from the options, checked.
fn key_bytes(args: &Args) -> Result<(KeyBytes, usize), Fail> {
    let pos = |name: &str, default: usize| -> Result<usize, Fail> {
        Ok(args.parsed(name, |s| s.parse::<usize>().map_err(|_| "not a byte position".to_string()))?.unwrap_or(default))
    };
    let offset = pos("offset-byte", vds_segy::trace::OFFSET)?;
    let keys = KeyBytes {
        inline: pos("inline-byte", vds_segy::trace::INLINE)?,
        crossline: pos("crossline-byte", vds_segy::trace::CROSSLINE)?,
        offset: args.flag("prestack").then_some(offset),
        two_d: args.flag("2d"),
    };
    keys.check().map_err(|e| args.usage(e.to_string()))?;
    Ok((keys, offset))
}

/// The smallest and largest finite samples of every trace (samples past
/// the end of a short trace are stored as 0, and count as such).
fn sample_range(file: &SegyFile<File>, input: &str, quiet: bool, left: &str) -> Result<ValueRange, Fail> {
    let format = file.format();
    let dtype = DType::from_name(format.dtype()).map_err(at(input))?;
    let err = |e: vds_segy::Error| Fail::Error(format!("{input}: {e}"));
    let mut range = ValueRange::default();
    let mut samples = buffer(file.samples * format.native_size() as u64)?;
    let mut progress = Progress::items("reading the value range of the samples", file.traces, quiet);
    if file.variable_length() {
        let mut scratch = Vec::new();
        for i in 0..file.traces {
            interrupted(left)?;
            let (_, ns) = file.locate(i).map_err(err)?;
            let ns = ns.min(file.samples);
            let part = &mut samples[..(ns as usize) * format.native_size()];
            file.read_samples(i, 0, part, &mut scratch).map_err(err)?;
            range.add(dtype, part, None);
            if ns < file.samples {
                range.add_value(0.0);
            }
            progress.set(i + 1);
        }
    } else {
        // Runs of whole traces, headers and all, of about 4 MiB.
        let trace = file.trace_bytes();
        let run = ((4u64 << 20) / trace).max(1);
        let mut raw = buffer(run.min(file.traces) * trace)?;
        let mut i = 0;
        while i < file.traces {
            interrupted(left)?;
            let n = run.min(file.traces - i);
            let raw = &mut raw[..(n * trace) as usize];
            file.read_raw_traces(i, n, raw).map_err(err)?;
            for t in raw.chunks_exact(trace as usize) {
                format.decode(file.binary.endian, &t[file.header_bytes as usize..], &mut samples);
                range.add(dtype, &samples, None);
            }
            i += n;
            progress.set(i);
        }
    }
    progress.finish();
    Ok(range)
}

pub fn import(args: &Args, layout: &Layout) -> Result<(), Fail> {
    let (input, output) = (&args.positional[0], &args.positional[1]);
    let (keys, offset_byte) = key_bytes(args)?;
    catch_interrupts();
    let file = SegyFile::open(open_input(input)?).map_err(|e| Fail::Error(format!("{input}: {e}")))?;
    let quiet = args.flag("quiet");
    let dtype = DType::from_name(file.format().dtype()).map_err(at(input))?;
    let left = format!("{output} was not written");
    let mut opts = ImportOptions { keys, offset_byte, codec: Codec::deflate(1), chunk: None, block_bytes: block_budget() };
    let g = {
        let mut progress = Progress::items("scanning trace headers", file.traces, quiet);
        let g = container::scan(&file, &opts, &mut |n| {
            progress.set(n);
            interrupted("").is_ok()
        });
        g.map_err(fail(input, &format!("{input} was not imported")))?
    };
    let names = container::axis_names(&g);
    layout.check(&[
        (container::AMPLITUDE.to_string(), names.len(), dtype),
        (container::TRACE_HEADERS.to_string(), names.len(), DType::UInt8),
    ])?;
    opts.chunk = layout.chunk(container::AMPLITUDE, names.len()).map(<[u64]>::to_vec);
    let dest = Destination::new(output, args.flag("force"))?;
    // The trace headers take the amplitudes' codec, made lossless.
    let codec = layout.codec_for(input, container::AMPLITUDE, dtype, || sample_range(&file, input, quiet, &left))?;
    opts.codec = codec.unwrap_or(opts.codec);
    let b = container::builder(&file, &g, &opts, &mut |vb| layout.apply(vb, names.len(), None)).map_err(fail(input, &left))?;
    let mut out = b.create(dest.temp()).map_err(at(output))?;
    let total = bytes_of(&[g.cell_count(), file.samples], dtype.size() as u64)?;
    {
        let mut progress = Progress::new("importing traces", total, quiet);
        container::fill(&file, &g, &mut out, opts.block_bytes, &mut |n| {
            progress.set(n);
            interrupted("").is_ok()
        })
        .map_err(fail(input, &left))?;
        progress.finish();
    }
    out.close().map_err(at(output))?;
    dest.finish()?;
    summary(output, total, std::fs::metadata(output).map_err(at(output))?.len())
}
