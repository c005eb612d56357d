//! `vds import`, `vds export` and `vds copy`: arrays move block by block, in
//! bounded memory, into a destination that appears only when complete.

use crate::args::{u64_list, Args, Spec};
use crate::layout::{Layout, ValueRange};
use crate::util::{
    at, buffer, bytes_of, catch_interrupts, interrupted, open_input, runs, size, to_native, Blocks, Destination, Fail, Progress,
};
use crate::{ds, npy};
use std::fs::File;
use std::os::unix::fs::FileExt;
use vds::serde_json::{Map, Value};
use vds::{Axis, Codec, Compression, DType, Dataset, DatasetBuilder, Order, Region, Variable, VariableBuilder};

/// Bytes moved per block (at least one chunk): 64 MiB, or `VDS_BLOCK_BYTES`.
pub fn block_budget() -> u64 {
    std::env::var("VDS_BLOCK_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(64 << 20)
}

/// Variable attribute marking a variable whose source had no dimensions
/// (a NumPy or ds scalar); it spans the one-sample axis [`SCALAR_AXIS`].
pub const SCALAR_ATTR: &str = "vds:scalar";
/// The one-sample axis of scalars.
pub const SCALAR_AXIS: &str = "scalar";

pub static IMPORT: Spec = Spec {
    name: "import",
    help: "\
vds import: make a container from a .npy file, a .ds file, SEG-Y or raw binary

Usage: vds import INPUT OUTPUT.vds [options]

The input's format comes from its extension (.npy, .ds, .sgy, .segy) or
from --format.
A .npy file becomes one variable (named after the file unless --name);
a .ds file brings every variable, its dimensions and attributes, missing-value
masks (as a bool variable NAME:missing) and strings (as uint8 with a
trailing NAME:strlen axis). Raw binary needs --dtype and --shape.
SEG-Y (rev 0, 1, 2.1; any sample format, either byte order, any trace
order) becomes `amplitude` [inline, crossline, (offset,) sample] or
[cdp, sample] for a 2-D line (in chunks of at most 64 along each axis,
evened out: 200 inlines make 4 chunks of 50), with a mask where traces
are missing, every trace header in `segy_trace_header`, and the textual
and binary headers and world coordinates in the attributes.

OUTPUT may be an s3:// URL: the container is made in a temporary file and
uploaded, as by `vds copy`.

Options:
  --format npy|ds|segy|raw   the input's format
  --name NAME           the variable's name (.npy and raw)
  --axes A,B,...        axis names (.npy and raw; default dim0, dim1, ...)
  --dtype TYPE          raw: int8 ... uint64, float32, float64 or bool
  --shape N,N,...       raw: the array's shape
  --order C|F           raw: C (last axis fastest, the default) or F
  --endian little|big   raw: byte order (default little)
  --inline-byte N       SEG-Y: trace header byte of the inline number (default 189; rev 0: 9)
  --crossline-byte N    SEG-Y: trace header byte of the crossline number (default 193; rev 0: 21)
  --offset-byte N       SEG-Y: trace header byte of the offset (default 37)
  --prestack            SEG-Y: gathers by offset (also chosen when inline and
                        crossline repeat)
  --2d                  SEG-Y: one 2-D line, whatever the inline numbers
  --chunk N,N,...       chunk shape (for variables of that many dimensions);
                        VAR=N,N,... for one variable; repeatable
  --codec none|deflate[:LEVEL]|zstd[:LEVEL]|bounded:TOL|bounded:P%
                                compression (default deflate:1; zstd: level 1 by
                                default); bounded: lossy, every float value
                                within TOL of the input, NaNs, infinities and
                                fill values exact (other types: zstd);
                                bounded:P%: TOL is P percent (0 < P <= 100) of
                                each float variable's value range (its largest
                                finite value minus its smallest), which the
                                input is read once more to find; `vds info`
                                shows the TOL it came to
  --no-shuffle          no byte shuffle before compressing
  --lods N              keep N levels of detail (each halves every axis)
  --lod-method M        average (default; not for bool) or nearest
  --partitioning N,N,...  also store the data in chunks of this shape (2-D
                        tiles such as 1,256,256); VAR=... for one variable;
                        repeatable
  --blocks N,N,...      make each chunk of blocks of this shape, each encoded
                        on its own, so that reads of traces and small boxes
                        decode only the blocks they touch; VAR=... for one
                        variable; repeatable; `none` for whole chunks
                        (default: blocks of at most 128 KiB in deflate or
                        zstd chunks of 1 MiB or more)
  -f, --force           replace OUTPUT if it exists
  -q, --quiet           no progress bar

Example:
  vds import survey.npy survey.vds --axes inline,crossline,time --chunk 64,64,64
  vds import survey.sgy survey.vds
  vds import survey.sgy survey.vds --codec bounded:0.1%
",
    values: &[
        "format",
        "name",
        "axes",
        "dtype",
        "shape",
        "order",
        "endian",
        "chunk",
        "codec",
        "lods",
        "lod-method",
        "partitioning",
        "blocks",
        "inline-byte",
        "crossline-byte",
        "offset-byte",
    ],
    flags: &["no-shuffle", "force", "quiet", "prestack", "2d"],
    positional: (2, 2),
};

pub static EXPORT: Spec = Spec {
    name: "export",
    help: "\
vds export: write variables to a .npy file, a .ds file, SEG-Y or raw binary

Usage: vds export FILE.vds OUTPUT [VAR] [options]

The format comes from OUTPUT's extension (.npy, .ds, .sgy, .segy) or from
--format. SEG-Y takes a variable of 1 to 4 dimensions, the last the
samples: a container imported from SEG-Y is written back with its kept
headers, byte order, format and trace order (a regular file comes back
byte for byte); any other gets headers made from its axes.
.npy and raw take one variable (VAR may be left out when there is only one);
.ds takes every variable with its attributes, restoring what `vds import`
brought from a .ds file (masks, strings, scalars) exactly.

Options:
  --format npy|ds|segy|raw   the output's format
  --order C|F           .npy and raw: memory order of the output (default C)
  --lod K               .npy and raw: level of detail K (default 0, the data)
  --partitioning P      .npy and raw: read partitioning P (default: whichever
                        reads fastest; 0 is the bricks, which every other
                        layer is derived from)
  --segy-format N       SEG-Y: sample format code (1 IBM float, 5 IEEE float,
                        ...; default: the kept one, else the variable's type)
  --mask                .npy and raw: the missing-value mask (bool, true where
                        a value is missing) instead of the values
  -f, --force           replace OUTPUT if it exists
  -q, --quiet           no progress bar

Example:
  vds export survey.vds amplitude.npy amplitude
  vds export survey.vds overview.npy amplitude --lod 2
  vds export survey.vds survey2.sgy
",
    values: &["format", "order", "lod", "partitioning", "segy-format"],
    flags: &["force", "quiet", "mask"],
    positional: (2, 3),
};

pub static COPY: Spec = Spec {
    name: "copy",
    help: "\
vds copy: copy a container with new chunking or codec, in bounded memory

Usage: vds copy SRC.vds DST.vds [options]

Copies axes, attributes and every variable, with its no-value, quantized
storage, missing-value mask and margins. Chunks in external-file slots
are brought into DST itself. Without options the chunking, codecs, blocks,
levels of detail and partitionings stay. SRC may be an http://, https:// or s3://
URL. DST may be an s3:// URL: the copy is made in a temporary file,
arranged for reading over the network (as --cloud) and uploaded (in parts
when large); readers of the object see the old one or the new one, never
a mix.

Options:
  --chunk N,N,...       new chunk shape (for variables of that many dimensions);
                        VAR=N,N,... for one variable; repeatable
  --codec none|deflate[:LEVEL]|zstd[:LEVEL]|bounded:TOL|bounded:P%
                                new compression for every variable; bounded:
                                lossy, every float value within TOL of the
                                source (other types: zstd); bounded:P%: TOL is
                                P percent (0 < P <= 100) of each float
                                variable's value range (its largest finite
                                value minus its smallest), which SRC is read
                                once more to find
  --no-shuffle          with --codec deflate or zstd: no byte shuffle
  --lods N              levels of detail for every variable (each halves every axis)
  --lod-method M        average (default; not for bool) or nearest
  --partitioning N,N,...  replace the further partitionings (2-D tiles such
                        as 1,256,256); VAR=... for one variable; repeatable
  --blocks N,N,...      new block shape inside each chunk (kept from SRC when
                        neither this nor --chunk is given, else the default
                        of import); VAR=... for one variable; repeatable;
                        `none` for whole chunks
  --cloud               write the cloud-optimized arrangement: every index
                        page right after the head, so that a reader over
                        HTTP or S3 fetches the whole index in one request
                        (always done for an s3:// DST)
  -f, --force           replace DST if it exists
  -q, --quiet           no progress bar

Example:
  vds copy survey.vds rechunked.vds --chunk 64,64,64 --partitioning 1,512,512 --lods 4
  vds copy survey.vds s3://survey-bucket/2026/survey.vds
",
    values: &["chunk", "codec", "lods", "lod-method", "partitioning", "blocks"],
    flags: &["no-shuffle", "force", "quiet", "cloud"],
    positional: (2, 2),
};

/// Where a variable's data come from.
pub enum Source {
    /// A C- or Fortran-order array in a file, starting at `offset`.
    File { file: File, offset: u64, little: bool, fortran: bool },
    /// Already in memory: C order, native byte order.
    Memory(Vec<u8>),
}

/// A variable to create.
pub struct VarPlan {
    pub name: String,
    pub dtype: DType,
    pub axes: Vec<String>,
    pub shape: Vec<u64>,
    pub attrs: Map<String, Value>,
    pub data: Source,
}

/// A container to create.
#[derive(Default)]
pub struct Plan {
    pub axes: Vec<(String, u64)>,
    pub vars: Vec<VarPlan>,
    pub attrs: Map<String, Value>,
}

impl Plan {
    /// Adds (or reuses) an axis; an existing axis of that name must have that size.
    pub fn axis(&mut self, name: &str, samples: u64, whose: &str) -> Result<(), String> {
        if samples == 0 {
            return Err(format!("{whose}: dimension {name:?} has 0 samples, and a vds axis needs at least one"));
        }
        match self.axes.iter().find(|(n, _)| n == name) {
            Some((_, s)) if *s != samples => Err(format!("{whose}: dimension {name:?} has {samples} samples here and {s} elsewhere")),
            Some(_) => Ok(()),
            None => {
                self.axes.push((name.to_string(), samples));
                Ok(())
            }
        }
    }
}

/// The format of a file: from `--format`, else its extension.
fn format_of(args: &Args, path: &str) -> Result<&'static str, Fail> {
    match args.value("format") {
        Some("npy") => Ok("npy"),
        Some("ds") => Ok("ds"),
        Some("raw") => Ok("raw"),
        Some("segy") => Ok("segy"),
        Some(f) => Err(args.usage(format!("--format {f:?}: expected npy, ds, segy or raw"))),
        None if path.ends_with(".npy") => Ok("npy"),
        None if path.ends_with(".ds") => Ok("ds"),
        None if [".sgy", ".segy", ".SGY", ".SEGY"].iter().any(|e| path.ends_with(e)) => Ok("segy"),
        None => Ok("raw"),
    }
}

pub fn import(args: &Args) -> Result<(), Fail> {
    let (input, output) = (&args.positional[0], &args.positional[1]);
    let layout = Layout::from(args)?;
    let format = format_of(args, input)?;
    if format != "raw" {
        for raw_only in ["dtype", "shape", "order", "endian"] {
            if args.value(raw_only).is_some() {
                return Err(args.usage(format!("--{raw_only} is for raw input only")));
            }
        }
    }
    if (format == "ds" || format == "segy") && (args.value("name").is_some() || args.value("axes").is_some()) {
        return Err(args.usage(format!("--name and --axes are for .npy and raw input; a {format} file names its own")));
    }
    if format != "segy" {
        for segy_only in crate::segy_in::SEGY_VALUES {
            if args.value(segy_only).is_some() {
                return Err(args.usage(format!("--{segy_only} is for SEG-Y input only")));
            }
        }
        for segy_only in crate::segy_in::SEGY_FLAGS {
            if args.flag(segy_only) {
                return Err(args.usage(format!("--{segy_only} is for SEG-Y input only")));
            }
        }
    } else {
        return crate::segy_in::import(args, &layout);
    }
    let plan = match format {
        "ds" => ds::read(input)?,
        _ => single_array_plan(args, input, format)?,
    };
    layout.check(&plan.vars.iter().map(|v| (v.name.clone(), v.shape.len(), v.dtype)).collect::<Vec<_>>())?;
    catch_interrupts();
    let (dest, publish) = container_destination(output, args.flag("force"))?;
    let left = format!("{output} was not written");
    let mut b = DatasetBuilder::new();
    for (name, samples) in &plan.axes {
        b.axis(Axis::new(name, *samples));
    }
    for v in &plan.vars {
        let mut vb = VariableBuilder::new(&v.name, v.dtype, &v.axes.iter().map(String::as_str).collect::<Vec<_>>());
        let codec = layout.codec_for(input, &v.name, v.dtype, || plan_range(&plan, v, input, args.flag("quiet"), &left))?;
        vb.codec(codec.unwrap_or(Codec::deflate(1)));
        if let Some(c) = layout.chunk(&v.name, v.shape.len()) {
            vb.chunk(c);
        }
        layout.apply(&mut vb, v.shape.len(), None);
        for (k, val) in &v.attrs {
            vb.attribute(k, val.clone());
        }
        b.variable(&vb);
    }
    for (k, val) in &plan.attrs {
        b.attribute(k, val.clone());
    }
    let mut out = b.create(dest.temp()).map_err(at(output))?;
    let total = plan.vars.iter().try_fold(0u64, |t, v| {
        bytes_of(&v.shape, v.dtype.size() as u64)?
            .checked_add(t)
            .ok_or_else(|| Fail::Error(format!("{input}: more than 2^64 bytes of data")))
    })?;
    let mut progress = Progress::new(&format!("importing {input}"), total, args.flag("quiet"));
    for (i, v) in plan.vars.iter().enumerate() {
        match &v.data {
            Source::File { file, offset, little, fortran } => {
                stream_in(file, *offset, *little, *fortran, &mut out, i, &mut progress, &left).map_err(|e| e.about(input))?;
            }
            Source::Memory(bytes) => {
                out.write_bytes(i, &Region::full(&v.shape).map_err(at(output))?, Order::C, bytes).map_err(at(output))?;
                progress.add(bytes.len() as u64);
            }
        }
        interrupted(&left)?;
    }
    out.close().map_err(at(output))?;
    progress.finish();
    deliver(dest, publish, false, output, total, &left)
}

/// The value range of a variable of `plan` to import, read from its
/// source; the values its missing-value mask (from a .ds file) marks do
/// not count.
fn plan_range(plan: &Plan, v: &VarPlan, input: &str, quiet: bool, left: &str) -> Result<ValueRange, Fail> {
    let mut range = ValueRange::default();
    let mask = v.attrs.get(ds::MISSING_ATTR).and_then(Value::as_str).and_then(|m| plan.vars.iter().find(|w| w.name == m));
    let missing: Option<Vec<bool>> = match mask.map(|m| &m.data) {
        Some(Source::Memory(bits)) => Some(bits.iter().map(|&b| b != 0).collect()),
        _ => None,
    };
    match &v.data {
        Source::Memory(bytes) => range.add(v.dtype, bytes, missing.as_deref()),
        Source::File { file, offset, little, .. } => {
            // Every element once, in file order: the order does not change the range.
            let esize = v.dtype.size() as u64;
            let total = bytes_of(&v.shape, esize)?;
            let step = (block_budget() / esize).max(1) * esize;
            let mut buf = buffer(step.min(total))?;
            let mut progress = Progress::new(&format!("reading the value range of {}", v.name), total, quiet);
            let mut done = 0;
            while done < total {
                interrupted(left)?;
                let part = &mut buf[..step.min(total - done) as usize];
                file.read_exact_at(part, offset + done).map_err(|e| Fail::Error(format!("{input}: reading the data: {e}")))?;
                to_native(part, esize as usize, *little);
                range.add(v.dtype, part, None);
                done += part.len() as u64;
                progress.add(part.len() as u64);
            }
            progress.finish();
        }
    }
    Ok(range)
}

/// The value range of variable `v` of `src`, read block by block; values
/// its missing-value mask marks do not count.
fn source_range(src: &Dataset, v: usize, input: &str, quiet: bool, left: &str) -> Result<ValueRange, Fail> {
    let var = src.variable(v).map_err(at(input))?;
    let (dtype, esize) = (var.dtype(), var.dtype().size() as u64);
    let mut range = ValueRange::default();
    let mut progress = Progress::new(&format!("reading the value range of {}", var.name()), bytes_of(var.shape(), esize)?, quiet);
    for (start, bshape) in Blocks::new(var.shape(), var.chunk_shape(), esize, block_budget()) {
        interrupted(left)?;
        let mut buf = buffer(bytes_of(&bshape, esize)?)?;
        let region = Region::new(&start, &bshape).map_err(at(input))?;
        src.read_bytes(v, &region, Order::C, &mut buf).map_err(at(input))?;
        let missing = if var.has_mask() { Some(src.read_mask(v, 0, None, &region, Order::C).map_err(at(input))?) } else { None };
        range.add(dtype, &buf, missing.as_deref());
        progress.add(buf.len() as u64);
    }
    progress.finish();
    Ok(range)
}

/// The line import and copy print: what the new container holds.
/// Where a new container is written: `output` itself (through a temporary
/// file renamed into place), or, for an `s3://` URL, a local temporary file
/// that [`deliver`] then uploads. Also says which.
fn container_destination(output: &str, force: bool) -> Result<(Destination, bool), Fail> {
    if !vds::remote::is_url(output) {
        return Ok((Destination::new(output, force)?, false));
    }
    if !force && vds::remote::exists(output).map_err(at(output))? {
        return Err(Fail::Error(format!("{output}: already exists (use --force to replace it)")));
    }
    let staging = std::env::temp_dir().join(format!("vds-publish-{}.vds", std::process::id()));
    Ok((Destination::new(&staging.display().to_string(), true)?, true))
}

/// Puts the finished container in place (renamed, or uploaded when
/// `publish`) and prints what it holds. What is uploaded, or with `cloud`
/// written, is first compacted into the cloud-optimized arrangement (every
/// index page right after the head, SPEC.md 9.4).
fn deliver(dest: Destination, publish: bool, cloud: bool, output: &str, raw: u64, left: &str) -> Result<(), Fail> {
    if publish || cloud {
        interrupted(left)?;
        let mut ds = vds::Dataset::open_rw(dest.temp()).map_err(at(output))?;
        ds.compact_cloud_optimized().map_err(at(output))?;
        ds.close().map_err(at(output))?;
    }
    if publish {
        interrupted(left)?;
        let sent = vds::remote::publish(dest.temp(), output).map_err(at(output))?;
        drop(dest);
        return summary(output, raw, sent);
    }
    dest.finish()?;
    summary(output, raw, std::fs::metadata(output).map_err(at(output))?.len())
}

pub fn summary(output: &str, raw: u64, disk: u64) -> Result<(), Fail> {
    let ds = open(output)?;
    let names: Vec<String> = ds
        .variables()
        .iter()
        .map(|v| format!("{} {}[{}]", v.name(), v.dtype(), v.shape().iter().map(u64::to_string).collect::<Vec<_>>().join("x")))
        .collect();
    let text = format!("{output}: {} ({} of values, {} on disk)\n", names.join(", "), size(raw), size(disk));
    crate::util::out(text.as_bytes())
}

/// The plan for a .npy or raw input: one variable.
fn single_array_plan(args: &Args, input: &str, format: &str) -> Result<Plan, Fail> {
    let file = open_input(input)?;
    let (dtype, little, fortran, shape, offset) = if format == "npy" {
        let h = npy::read_header(&file, input)?;
        (h.dtype, h.little, h.fortran, h.shape, h.data_offset)
    } else {
        let dtype = args.parsed("dtype", |s| DType::from_name(s).map_err(|e| e.message().to_string()))?;
        let dtype = dtype.ok_or_else(|| args.usage("raw input needs --dtype".into()))?;
        let shape = args.parsed("shape", u64_list)?.ok_or_else(|| args.usage("raw input needs --shape".into()))?;
        let fortran = match args.value("order") {
            None | Some("C") | Some("c") => false,
            Some("F") | Some("f") => true,
            Some(o) => return Err(args.usage(format!("--order {o:?}: expected C or F"))),
        };
        let little = match args.value("endian") {
            None | Some("little") => true,
            Some("big") => false,
            Some(e) => return Err(args.usage(format!("--endian {e:?}: expected little or big"))),
        };
        let need = bytes_of(&shape, dtype.size() as u64).map_err(|e| match e {
            Fail::Error(m) => Fail::Error(format!("{input}: {m}")),
            other => other,
        })?;
        let len = file.metadata().map_err(at(input))?.len();
        if len != need {
            return Err(Fail::Error(format!("{input}: {len} bytes, but {dtype} of shape {shape:?} needs {need}")));
        }
        (dtype, little, fortran, shape, 0)
    };
    let name = match args.value("name") {
        Some(n) => n.to_string(),
        None => std::path::Path::new(input).file_stem().map_or("data".into(), |s| s.to_string_lossy().into_owned()),
    };
    let mut plan = Plan::default();
    let mut attrs = Map::new();
    let axes: Vec<String> = if shape.is_empty() {
        attrs.insert(SCALAR_ATTR.into(), Value::Bool(true));
        vec![SCALAR_AXIS.to_string()]
    } else {
        match args.value("axes") {
            Some(a) => a.split(',').map(str::to_string).collect(),
            None => (0..shape.len()).map(|k| format!("dim{k}")).collect(),
        }
    };
    let shape = if shape.is_empty() { vec![1] } else { shape };
    if axes.len() != shape.len() {
        return Err(args.usage(format!("--axes names {} axes, the array has {}", axes.len(), shape.len())));
    }
    for (a, &n) in axes.iter().zip(&shape) {
        plan.axis(a, n, input).map_err(Fail::Error)?;
    }
    plan.vars.push(VarPlan { name, dtype, axes, shape, attrs, data: Source::File { file, offset, little, fortran } });
    Ok(plan)
}

impl Fail {
    /// Names `path` in an I/O failure that does not name a file yet.
    fn about(self, path: &str) -> Fail {
        match self {
            Fail::Error(m) if m.starts_with("reading") => Fail::Error(format!("{path}: {m}")),
            other => other,
        }
    }
}

/// The axes of a Fortran-order array seen as a C-order one: reversed.
fn reversed(v: &[u64]) -> Vec<u64> {
    v.iter().rev().copied().collect()
}

/// Writes variable `v` of `out` from an array in `file` at `offset`,
/// block by block.
#[allow(clippy::too_many_arguments)]
fn stream_in(
    file: &File,
    offset: u64,
    little: bool,
    fortran: bool,
    out: &mut Dataset,
    v: usize,
    progress: &mut Progress,
    left: &str,
) -> Result<(), Fail> {
    let var = out.variable(v).map_err(|e| Fail::Error(e.to_string()))?;
    let (shape, chunk, dtype) = (var.shape().to_vec(), var.chunk_shape().to_vec(), var.dtype());
    let esize = dtype.size() as u64;
    // A Fortran-order file is a C-order file of the reversed shape.
    let (fshape, fchunk) = if fortran { (reversed(&shape), reversed(&chunk)) } else { (shape.clone(), chunk.clone()) };
    let order = if fortran { Order::Fortran } else { Order::C };
    for (start, bshape) in Blocks::new(&fshape, &fchunk, esize, block_budget()) {
        interrupted(left)?;
        let mut buf = buffer(bytes_of(&bshape, esize)?)?;
        for (off, boff, len) in runs(&fshape, &start, &bshape) {
            let dst = &mut buf[(boff * esize) as usize..((boff + len) * esize) as usize];
            file.read_exact_at(dst, offset + off * esize).map_err(|e| Fail::Error(format!("reading the data: {e}")))?;
        }
        to_native(&mut buf, esize as usize, little);
        let (rstart, rshape) = if fortran { (reversed(&start), reversed(&bshape)) } else { (start, bshape) };
        let region = Region::new(&rstart, &rshape).map_err(|e| Fail::Error(e.to_string()))?;
        out.write_bytes(v, &region, order, &buf).map_err(|e| Fail::Error(e.to_string()))?;
        progress.add(buf.len() as u64);
    }
    Ok(())
}

/// Writes variable `v` of `src` into `file` at `offset` as a C- or
/// Fortran-order array in little-endian byte order, block by block.
/// Which stored layer of a variable an export reads: a level of detail, a
/// partitioning (the one that reads fastest when `None`), and the values or
/// the missing-value mask.
#[derive(Clone, Copy, Default)]
pub struct Layer {
    pub lod: u8,
    pub part: Option<u8>,
    pub mask: bool,
}

impl Layer {
    /// The layer the options `--lod`, `--partitioning` and `--mask` name.
    fn from(args: &Args, path: &str, var: &vds::Variable) -> Result<(Layer, Vec<u64>), Fail> {
        let (lod, shape) = crate::info::lod_of(args, path, var)?;
        let part = args.parsed("partitioning", |s| s.parse::<u8>().map_err(|_| "not a partitioning number".to_string()))?;
        if let Some(p) = part {
            if usize::from(p) >= var.partitionings().len() {
                return Err(Fail::Error(format!(
                    "{path}: variable {:?} has {} partitioning(s); {p} does not exist",
                    var.name(),
                    var.partitionings().len()
                )));
            }
        }
        let mask = args.flag("mask");
        if mask && !var.has_mask() {
            return Err(Fail::Error(format!("{path}: variable {:?} keeps no missing-value mask", var.name())));
        }
        Ok((Layer { lod, part, mask }, shape))
    }
}

/// Streams `layer` of variable `v` into `file` at `offset`, in C or Fortran order.
pub fn stream_out(
    src: &Dataset,
    (v, layer): (usize, Layer),
    file: &File,
    offset: u64,
    fortran: bool,
    progress: &mut Progress,
    left: &str,
) -> Result<(), Fail> {
    let var = src.variable(v).map_err(|e| Fail::Error(e.to_string()))?;
    let shape = var.lod_shape(layer.lod).ok_or_else(|| Fail::Error(format!("level of detail {} does not exist", layer.lod)))?;
    let chunk = var.chunk_shape().to_vec();
    let esize = if layer.mask { 1 } else { var.dtype().size() as u64 };
    let (fshape, fchunk) = if fortran { (reversed(&shape), reversed(&chunk)) } else { (shape.clone(), chunk.clone()) };
    let order = if fortran { Order::Fortran } else { Order::C };
    for (start, bshape) in Blocks::new(&fshape, &fchunk, esize, block_budget()) {
        interrupted(left)?;
        let mut buf = buffer(bytes_of(&bshape, esize)?)?;
        let (rstart, rshape) = if fortran { (reversed(&start), reversed(&bshape)) } else { (start.clone(), bshape.clone()) };
        let region = Region::new(&rstart, &rshape).map_err(|e| Fail::Error(e.to_string()))?;
        let err = |e: vds::Error| Fail::Error(e.to_string());
        if layer.mask {
            let bits = src.read_mask(v, layer.lod, layer.part, &region, order).map_err(err)?;
            buf.iter_mut().zip(bits).for_each(|(b, m)| *b = u8::from(m));
        } else {
            src.read_lod_bytes(v, layer.lod, layer.part, &region, order, &mut buf).map_err(err)?;
            to_native(&mut buf, esize as usize, true);
        }
        for (off, boff, len) in runs(&fshape, &start, &bshape) {
            let part = &buf[(boff * esize) as usize..((boff + len) * esize) as usize];
            file.write_all_at(part, offset + off * esize).map_err(|e| Fail::Error(format!("writing: {e}")))?;
        }
        progress.add(buf.len() as u64);
    }
    Ok(())
}

/// Opens a container for reading, naming it in any error: a path, or an
/// `http://`, `https://` or `s3://` URL read in place with range requests.
/// Its chunk cache holds a few blocks, enough for chunks that straddle
/// block boundaries.
pub fn open(path: &str) -> Result<Dataset, Fail> {
    let mut options = vds::OpenOptions::new();
    options.cache_size(4 * block_budget()).open(path).map_err(at(path))
}

pub fn export(args: &Args) -> Result<(), Fail> {
    let (input, output) = (&args.positional[0], &args.positional[1]);
    let format = format_of(args, output)?;
    let fortran = match args.value("order") {
        None | Some("C") | Some("c") => false,
        Some("F") | Some("f") if format != "ds" => true,
        Some(o) => return Err(args.usage(format!("--order {o:?}: expected C or F (and .ds is always C)"))),
    };
    if format != "segy" && args.value("segy-format").is_some() {
        return Err(args.usage("--segy-format is for SEG-Y output only".into()));
    }
    let src = open(input)?;
    catch_interrupts();
    let dest = Destination::new(output, args.flag("force"))?;
    let left = format!("{output} was not written");
    if format == "segy" {
        for option in ["lod", "partitioning", "order"] {
            if args.value(option).is_some() {
                return Err(args.usage(format!("--{option} is for .npy and raw output")));
            }
        }
        if args.flag("mask") {
            return Err(args.usage("--mask is for .npy and raw output; SEG-Y leaves missing traces out".into()));
        }
        crate::segy_out::export(args, &src, input, output, &dest, &left)?;
        return dest.finish();
    }
    if format == "ds" {
        if args.pos(2).is_some() {
            return Err(args.usage("a .ds file takes every variable; leave VAR out".into()));
        }
        for option in ["lod", "partitioning"] {
            if args.value(option).is_some() {
                return Err(args.usage(format!("--{option} is for .npy and raw output; a .ds file takes the data itself")));
            }
        }
        if args.flag("mask") {
            return Err(args.usage("--mask is for .npy and raw output; a .ds file takes masks with their variables".into()));
        }
        ds::write(&src, input, dest.temp(), args.flag("quiet"), &left).map_err(|e| e.about(output))?;
        return dest.finish();
    }
    let v = match args.pos(2) {
        Some(name) => src
            .variables()
            .iter()
            .position(|v| v.name() == name)
            .ok_or_else(|| Fail::Error(format!("{input}: no variable named {name:?}")))?,
        None if src.variables().len() == 1 => 0,
        None => {
            let names: Vec<&str> = src.variables().iter().map(|v| v.name()).collect();
            return Err(args.usage(format!("{input} has {} variables ({}); name one", names.len(), names.join(", "))));
        }
    };
    let var = &src.variables()[v];
    let (layer, lod_shape) = Layer::from(args, input, var)?;
    let dtype = if layer.mask { vds::DType::Bool } else { var.dtype() };
    let scalar = src.variable_attributes(v).map_err(at(input))?.get(SCALAR_ATTR) == Some(&Value::Bool(true));
    let shape: Vec<u64> = if scalar { vec![] } else { lod_shape.clone() };
    let file = File::create(dest.temp()).map_err(at(output))?;
    let header = if format == "npy" { npy::header_bytes(dtype, fortran, &shape) } else { Vec::new() };
    file.write_all_at(&header, 0).map_err(at(output))?;
    let bytes = bytes_of(&lod_shape, dtype.size() as u64)?;
    let len = bytes
        .checked_add(header.len() as u64)
        .ok_or_else(|| Fail::Error(format!("{output}: {bytes} bytes of data do not fit in a file")))?;
    file.set_len(len).map_err(at(output))?;
    let mut progress = Progress::new(&format!("exporting {}", var.name()), bytes, args.flag("quiet"));
    stream_out(&src, (v, layer), &file, header.len() as u64, fortran, &mut progress, &left).map_err(|e| e.about(output))?;
    progress.finish();
    drop(file);
    dest.finish()
}

/// Copies `region` of variable `v` from `src` to `out` (`buf` holds its
/// values), with its missing-value mask if the variable keeps one. A
/// quantized variable's stored integers are copied as they are: its values,
/// rounded to the value type and quantized again, could come back as other
/// integers.
fn copy_region(
    src: &Dataset,
    out: &mut Dataset,
    v: usize,
    region: &Region,
    buf: &mut [u8],
    (input, output): (&str, &str),
) -> Result<(), Fail> {
    let var = &src.variables()[v];
    let missing = if var.has_mask() { Some(src.read_mask(v, 0, None, region, Order::C).map_err(at(input))?) } else { None };
    match var.quantization().map(|q| q.storage) {
        Some(DType::UInt8) => copy_stored::<u8>(src, out, v, region, missing.as_deref(), (input, output)),
        Some(_) => copy_stored::<u16>(src, out, v, region, missing.as_deref(), (input, output)),
        None => {
            src.read_bytes(v, region, Order::C, buf).map_err(at(input))?;
            match &missing {
                Some(m) => out.write_bytes_masked(v, region, Order::C, buf, m),
                None => out.write_bytes(v, region, Order::C, buf),
            }
            .map_err(at(output))
        }
    }
}

/// [`copy_region`] of a quantized variable, as its stored integers `T`.
fn copy_stored<T: vds::Element + Default>(
    src: &Dataset,
    out: &mut Dataset,
    v: usize,
    region: &Region,
    missing: Option<&[bool]>,
    (input, output): (&str, &str),
) -> Result<(), Fail> {
    let ints: Vec<T> = src.read_vec(v, region, Order::C).map_err(at(input))?;
    match missing {
        Some(m) => out.write_masked(v, region, Order::C, &ints, m),
        None => out.write(v, region, Order::C, &ints),
    }
    .map_err(at(output))
}

pub fn copy(args: &Args) -> Result<(), Fail> {
    let (input, output) = (&args.positional[0], &args.positional[1]);
    let layout = Layout::from(args)?;
    let src = open(input)?;
    // A quantized variable is stored as integers, which take no lossy codec.
    let stored = |v: &Variable| if v.quantization().is_some() { DType::UInt16 } else { v.dtype() };
    layout.check(&src.variables().iter().map(|v| (v.name().to_string(), v.shape().len(), stored(v))).collect::<Vec<_>>())?;
    catch_interrupts();
    let (dest, publish) = container_destination(output, args.flag("force"))?;
    let left = format!("{output} was not written");
    let mut b = DatasetBuilder::new();
    for a in src.axes() {
        b.axis(Axis::new(a.name(), a.samples()).unit(a.unit_str()).coordinates(a.first(), a.last()));
    }
    for (i, v) in src.variables().iter().enumerate() {
        let axes: Vec<&str> = v.axes().iter().map(|&k| src.axes()[k].name()).collect();
        let mut vb = VariableBuilder::new(v.name(), v.dtype(), &axes);
        vb.chunk(layout.chunk(v.name(), axes.len()).unwrap_or(v.chunk_shape()));
        let codec = layout.codec_for(input, v.name(), stored(v), || source_range(&src, i, input, args.flag("quiet"), &left))?;
        vb.codec(codec.unwrap_or(v.codec())).unit(v.unit()).fill(v.fill_value());
        // What the values mean goes with them: the no-value, quantized
        // storage, the missing-value mask (copied below) and margins.
        if let Some(nv) = v.no_value() {
            vb.no_value(nv);
        }
        if let Some(q) = v.quantization() {
            vb.quantization(q.storage, q.min, q.max);
        }
        let [negative, positive] = v.margin();
        vb.missing_mask(v.has_mask()).margin(negative, positive);
        layout.apply(&mut vb, axes.len(), Some((v, &axes)));
        // A source's blocks are not kept under a bounded codec, whose
        // interpolation compresses whole chunks better (asked-for blocks
        // still are; the Lorenzo predictor refuses them, saying why).
        let bounded = matches!(codec.unwrap_or(v.codec()).compression, Compression::Bounded { .. });
        if bounded && !layout.asks_blocks(v.name(), axes.len()) {
            vb.blocks(None);
        }
        for (k, val) in src.variable_attributes(i).map_err(at(input))? {
            vb.attribute(k, val.clone());
        }
        b.variable(&vb);
    }
    for (k, val) in src.attributes() {
        b.attribute(k, val.clone());
    }
    let mut out = b.create(dest.temp()).map_err(at(output))?;
    let total = src.variables().iter().try_fold(0u64, |t, v| {
        bytes_of(v.shape(), v.dtype().size() as u64)?
            .checked_add(t)
            .ok_or_else(|| Fail::Error(format!("{input}: more than 2^64 bytes of data")))
    })?;
    let mut progress = Progress::new(&format!("copying {input}"), total, args.flag("quiet"));
    for v in 0..src.variables().len() {
        let (shape, chunk, esize) = {
            let var = out.variable(v).map_err(at(output))?;
            (var.shape().to_vec(), var.chunk_shape().to_vec(), var.dtype().size() as u64)
        };
        for (start, bshape) in Blocks::new(&shape, &chunk, esize, block_budget()) {
            interrupted(&left)?;
            let mut buf = buffer(bytes_of(&bshape, esize)?)?;
            let region = Region::new(&start, &bshape).map_err(at(input))?;
            copy_region(&src, &mut out, v, &region, &mut buf, (input, output))?;
            progress.add(buf.len() as u64);
        }
    }
    out.close().map_err(at(output))?;
    progress.finish();
    deliver(dest, publish, args.flag("cloud"), output, total, &left)
}
