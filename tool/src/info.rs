//! `vds info`, `vds dump` and `vds verify`.

use crate::args::{Args, Spec};
use crate::convert::open;
use crate::util::{at, buffer, bytes_of, count, out, size, value_text, Fail, Progress};
use vds::serde_json::{json, Value};
use vds::{Compression, Dataset, Order, Region, Variable};

pub static INFO: Spec = Spec {
    name: "info",
    help: "\
vds info: axes, variables, chunking, codecs, chunk counts and space of a container

Usage: vds info FILE [--json]

For each variable: type, axes, chunk shape and grid (and whether the shape is
the default one, C-order slabs of at most 4 MiB), codec, fill value, chunks
stored, constant, fill-only and unwritten, bytes raw and on disk, and the
compression ratio. For the file: external-file slots, the commit, and the
space compaction would reclaim.

Options:
  --json   the same as one JSON object, for scripts

Example:
  vds info target/demo.vds
",
    values: &[],
    flags: &["json"],
    positional: (1, 1),
};

pub static DUMP: Spec = Spec {
    name: "dump",
    help: "\
vds dump: print a variable's values as text or CSV

Usage: vds dump FILE VAR [--region START:STOP,...] [--csv] [--all]

--region takes one item per axis: START:STOP (STOP excluded), a single index,
or `:` for the whole axis; missing trailing axes are whole. As text, the last
axis is a row and each 2-D plane is headed by its indices; as CSV, each value
is a row with its indices. More than 10000 values need --all.

Options:
  --region R   the values to print (default: all)
  --lod N      level of detail (default 0); the region is in that level's samples
  --csv        comma-separated rows: one index column per axis, then the value
  --all        allow more than 10000 values

Example:
  vds dump target/demo.vds amplitude --region 128,100:104,0:8
",
    values: &["region", "lod"],
    flags: &["csv", "all"],
    positional: (2, 2),
};

pub static VERIFY: Spec = Spec {
    name: "verify",
    help: "\
vds verify: check every checksum and structure of a container

Usage: vds verify FILE [--quick] [-q]

Reads the descriptor, every index page and every chunk of the current commit,
checks each checksum and decodes each chunk, and prints each problem with
where it is. Then, when nothing was found, it checks that every level of
detail and every partitioning (tiles) of each variable holds what level 0 of
its first partitioning implies, recomputing them: a layer of intact chunks
holding other values is damage too, since a read that picks it returns them.
--quick skips that second check (it reads the derived layers again, a few
times the time of the first on a variable with levels of detail or tiles).
Exit status: 0 when intact, 1 on damage or when the file cannot be opened.
A progress bar shows on a terminal unless -q.

Example:
  vds verify target/demo.vds
",
    values: &[],
    flags: &["quiet", "quick"],
    positional: (1, 1),
};

/// A codec in words: `deflate level 1 + shuffle`.
fn codec_text(v: &Variable) -> String {
    let c = v.codec();
    match c.compression {
        Compression::Deflate { level } if c.shuffle && v.dtype().size() > 1 => format!("deflate level {level} + shuffle"),
        Compression::Deflate { level } => format!("deflate level {level}"),
        Compression::Zstd { level } if c.shuffle && v.dtype().size() > 1 => format!("zstd level {level} + shuffle"),
        Compression::Zstd { level } => format!("zstd level {level}"),
        Compression::Bounded { tolerance, level, predictor } => {
            let by = match predictor {
                vds::Predictor::Graded => "graded anchored interpolation",
                vds::Predictor::Anchored => "anchored interpolation",
                vds::Predictor::Interpolation => "interpolation",
                _ => "Lorenzo",
            };
            format!("bounded, error <= {tolerance} ({by} prediction, zstd level {level})")
        }
        _ => "none".into(),
    }
}

fn join(v: &[u64], sep: &str) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(sep)
}

/// A number without a needless `.0`.
fn num(x: f64) -> String {
    format!("{x}")
}

pub fn info(args: &Args) -> Result<(), Fail> {
    let path = &args.positional[0];
    let ds = open(path)?;
    let report = describe(&ds, path)?;
    let text = if args.flag("json") { format!("{:#}\n", report) } else { render(&report) };
    out(text.as_bytes())
}

/// Everything `info` shows, as JSON.
fn describe(ds: &Dataset, path: &str) -> Result<Value, Fail> {
    let space = ds.space().map_err(at(path))?;
    let axes: Vec<Value> = ds
        .axes()
        .iter()
        .map(|a| json!({"name": a.name(), "samples": a.samples(), "unit": a.unit_str(), "first": a.first(), "last": a.last()}))
        .collect();
    let mut vars = Vec::new();
    for (i, v) in ds.variables().iter().enumerate() {
        let s = ds.variable_stats(i).map_err(at(path))?;
        // Chunks of every layer: each level of detail in each partitioning.
        // Chunks of every layer: each level of detail in each partitioning,
        // and as many again for the masks of a variable that keeps one.
        let too_many = || Fail::Error(format!("{path}: variable {:?} has more than 2^64 chunks in its layers", v.name()));
        let mut total = 0u64;
        for k in 0..v.levels_of_detail() {
            for c in v.partitionings() {
                let shape = v.lod_shape(k).unwrap_or_default();
                let grid: Vec<u64> = shape.iter().zip(c).map(|(n, c)| n.div_ceil(*c)).collect();
                total = count(&grid).ok().and_then(|g| total.checked_add(g)).ok_or_else(too_many)?;
            }
        }
        if v.has_mask() {
            total = total.checked_mul(2).ok_or_else(too_many)?;
        }
        let unwritten = total.saturating_sub(s.stored_chunks + s.constant_chunks + s.fill_chunks);
        let ratio = if s.stored_bytes > 0 { s.raw_bytes as f64 / s.stored_bytes as f64 } else { 0.0 };
        vars.push(json!({
            "name": v.name(),
            "dtype": v.dtype().name(),
            "axes": v.axes().iter().map(|&k| ds.axes()[k].name()).collect::<Vec<_>>(),
            "shape": v.shape(),
            "unit": v.unit(),
            "chunk_shape": v.chunk_shape(),
            "chunk_grid": v.chunk_grid(),
            "chunk_bytes": v.chunk_shape().iter().product::<u64>().saturating_mul(v.dtype().size() as u64),
            // Whether the shape is the one the library chooses when none is asked for (SPEC.md 3.1).
            "default_chunk": v.chunk_shape() == vds::default_chunk_shape(v.shape(), v.dtype().size()).as_slice(),
            "codec": codec_text(v),
            "blocks": v.block_shape(),
            "fill": value_json(v),
            "levels_of_detail": (0..v.levels_of_detail()).map(|k| json!({
                "level": k,
                "shape": v.lod_shape(k).unwrap_or_default(),
            })).collect::<Vec<_>>(),
            "lod_axes": v.lod_axes().iter().map(|&k| ds.axes()[v.axes()[k]].name()).collect::<Vec<_>>(),
            "lod_method": if v.levels_of_detail() > 1 { format!("{:?}", v.lod_method()).to_lowercase() } else { String::new() },
            "quantization": v.quantization().map(|q| json!({"storage": q.storage.name(), "range": [q.min, q.max]})),
            "no_value": v.no_value().map(scalar_json),
            "missing_mask": v.has_mask(),
            "margin": v.margin(),
            "partitionings": v.partitionings().iter().enumerate().map(|(p, c)| json!({
                "layer": v.layer_name(0, p as u8, if i == 0 { "" } else { v.name() }).unwrap_or_default(),
                "chunk_shape": c,
            })).collect::<Vec<_>>(),
            "chunks": {"total": total, "stored": s.stored_chunks, "constant": s.constant_chunks, "fill": s.fill_chunks, "unwritten": unwritten},
            "bytes": {"raw": s.raw_bytes, "stored": s.stored_bytes, "ratio": (ratio * 100.0).round() / 100.0},
            "attributes": ds.variable_attributes(i).map_err(at(path))?,
        }));
    }
    Ok(json!({
        "file": path,
        "format": format!("{}.{}", ds.format_version()[0], ds.format_version()[1]),
        "commit": ds.commit_sequence(),
        "file_bytes": space.file_bytes,
        "live_bytes": space.live_bytes,
        "reclaimable_bytes": space.reclaimable_bytes,
        "index_pages": space.index_pages,
        "index_first": space.index_first,
        "layout": if ds.layout() == vds::Layout::Compact { "compact" } else { "aligned" },
        "index_page_bytes": ds.index_page_size(),
        "external_slots": ds.external_slots(),
        "attributes": ds.attributes(),
        "axes": axes,
        "variables": vars,
    }))
}

/// A variable's fill value as JSON.
fn value_json(v: &Variable) -> Value {
    scalar_json(v.fill_value())
}

/// A value as JSON (non-finite floats as strings).
fn scalar_json(x: vds::Scalar) -> Value {
    match x {
        vds::Scalar::Int(x) => x.into(),
        vds::Scalar::UInt(x) => x.into(),
        vds::Scalar::Float(x) if x.is_finite() => x.into(),
        vds::Scalar::Float(x) => x.to_string().into(),
        vds::Scalar::Bool(x) => x.into(),
        _ => Value::Null,
    }
}

/// The text form of `describe`'s report.
fn render(r: &Value) -> String {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let mut t = format!(
        "{}: vds {} container, commit {}, {}, {} layout, {}-byte index pages\n",
        r["file"].as_str().unwrap_or(""),
        r["format"].as_str().unwrap_or(""),
        u(&r["commit"]),
        size(u(&r["file_bytes"])),
        r["layout"].as_str().unwrap_or(""),
        u(&r["index_page_bytes"])
    );
    t += "axes:\n";
    let width = r["axes"].as_array().into_iter().flatten().map(|a| a["name"].as_str().unwrap_or("").len()).max().unwrap_or(0);
    for a in r["axes"].as_array().into_iter().flatten() {
        let unit = a["unit"].as_str().unwrap_or("");
        let unit = if unit.is_empty() { String::new() } else { format!(" {unit}") };
        t += &format!(
            "  {:width$}  {:>6} samples  {} .. {}{unit}\n",
            a["name"].as_str().unwrap_or(""),
            u(&a["samples"]),
            num(a["first"].as_f64().unwrap_or(0.0)),
            num(a["last"].as_f64().unwrap_or(0.0)),
        );
    }
    t += "variables:\n";
    let list = |v: &Value| v.as_array().into_iter().flatten().map(|x| x.as_u64().unwrap_or(0)).collect::<Vec<_>>();
    for v in r["variables"].as_array().into_iter().flatten() {
        let axes: Vec<String> = v["axes"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(list(&v["shape"]))
            .map(|(a, n)| format!("{}={n}", a.as_str().unwrap_or("")))
            .collect();
        let unit = v["unit"].as_str().unwrap_or("");
        let unit = if unit.is_empty() { String::new() } else { format!(" ({unit})") };
        t += &format!("  {} {} [{}]{unit}\n", v["name"].as_str().unwrap_or(""), v["dtype"].as_str().unwrap_or(""), axes.join(", "));
        let grid = list(&v["chunk_grid"]);
        t += &format!(
            "    chunks {} (grid {}), {}, fill {}\n",
            join(&list(&v["chunk_shape"]), "x"),
            join(&grid, "x"),
            v["codec"].as_str().unwrap_or(""),
            v["fill"]
        );
        if v["default_chunk"] == Value::Bool(true) {
            t += &format!(
                "    chunk shape: the default, C-order slabs of whole trailing axes, {} each (at most 4 MiB)\n",
                size(u(&v["chunk_bytes"]))
            );
        }
        if !v["blocks"].is_null() {
            t += &format!("    blocks {} inside each chunk, each read and decoded on its own\n", join(&list(&v["blocks"]), "x"));
        }
        if let Some(q) = v["quantization"].as_object() {
            t += &format!("    quantized: {} over {}\n", q["storage"].as_str().unwrap_or(""), q["range"]);
        }
        if !v["no_value"].is_null() {
            t += &format!("    no-value: {}\n", v["no_value"]);
        }
        if let Some(m) = v["margin"].as_array().filter(|m| m.iter().any(|x| x.as_u64() != Some(0))) {
            t += &format!("    brick margins: {} before, {} after\n", m[0], m[1]);
        }
        if v["missing_mask"] == Value::Bool(true) {
            t += "    missing-value mask: kept\n";
        }
        let lods = v["levels_of_detail"].as_array().map_or(0, Vec::len);
        if lods > 1 {
            let shapes: Vec<String> =
                v["levels_of_detail"].as_array().into_iter().flatten().map(|l| join(&list(&l["shape"]), "x")).collect();
            let axes: Vec<&str> = v["lod_axes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            t += &format!(
                "    levels of detail: {lods} ({} over {}): {}\n",
                v["lod_method"].as_str().unwrap_or(""),
                axes.join(", "),
                shapes.join(", ")
            );
        }
        let parts = v["partitionings"].as_array().cloned().unwrap_or_default();
        if parts.len() > 1 {
            let p: Vec<String> =
                parts.iter().map(|p| format!("{} ({})", p["layer"].as_str().unwrap_or(""), join(&list(&p["chunk_shape"]), "x"))).collect();
            t += &format!("    partitionings: {}\n", p.join(", "));
        }
        let c = &v["chunks"];
        let layers = lods * parts.len();
        let of = if layers > 1 { format!(" in {layers} layers") } else { String::new() };
        t += &format!(
            "    {} chunks{of}: stored {}, constant {}, fill {}, unwritten {}\n",
            u(&c["total"]),
            u(&c["stored"]),
            u(&c["constant"]),
            u(&c["fill"]),
            u(&c["unwritten"])
        );
        let b = &v["bytes"];
        t += &format!(
            "    stored chunks: {} raw, {} on disk, ratio {:.2}\n",
            size(u(&b["raw"])),
            size(u(&b["stored"])),
            b["ratio"].as_f64().unwrap_or(0.0)
        );
        if let Some(a) = v["attributes"].as_object().filter(|a| !a.is_empty()) {
            t += &format!("    attributes: {}\n", Value::Object(a.clone()));
        }
    }
    let slots: Vec<&str> = r["external_slots"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    t += &format!("external slots: {}\n", if slots.is_empty() { "none".to_string() } else { slots.join(", ") });
    t += &format!(
        "space: {} live in the container, {} reclaimable by compaction, {} index pages{}\n",
        size(u(&r["live_bytes"])),
        size(u(&r["reclaimable_bytes"])),
        u(&r["index_pages"]),
        if r["index_first"] == Value::Bool(true) && u(&r["index_pages"]) > 1 { " (cloud-optimized: all right after the head)" } else { "" }
    );
    let mut attrs = r["attributes"].as_object().cloned().unwrap_or_default();
    if let Some(seg) = attrs.shift_remove(crate::segy_in::SEGY_ATTR) {
        t += &segy_text(&seg, attrs.shift_remove(crate::segy_in::SURVEY_ATTR).as_ref());
    }
    if !attrs.is_empty() {
        t += &format!("attributes: {}\n", Value::Object(attrs));
    }
    t
}

/// The survey geometry and world coordinates of a container imported from
/// SEG-Y, in place of the raw attributes (`--json` has them all).
fn segy_text(s: &Value, survey: Option<&Value>) -> String {
    let line = |v: &Value| match v.as_array().map(|a| a.iter().map(|x| x.as_i64().unwrap_or(0)).collect::<Vec<_>>()).as_deref() {
        Some(&[first, last, step]) => format!("{first}..{last} step {step}"),
        _ => "-".to_string(),
    };
    let mut t = format!(
        "SEG-Y: rev {}, {}-endian, format {}, {} traces, {} samples every {} us{}, sorted by {}{}\n",
        s["revision"].as_str().unwrap_or("?"),
        s["byte_order"].as_str().unwrap_or("?"),
        s["format"],
        s["traces"],
        s["samples"],
        num(s["sample_interval"].as_f64().unwrap_or(0.0)),
        match s["sample_interval_from"].as_str() {
            Some("trace header") => " (from the first trace header)",
            Some("assumed") => " (assumed: no header gives one)",
            _ => "",
        },
        s["sorting"].as_str().unwrap_or("?"),
        match s["missing_traces"].as_u64() {
            Some(0) | None => String::new(),
            Some(n) => format!(", {n} missing"),
        }
    );
    if s["two_d"] == Value::Bool(true) {
        t += &format!("  2-D line: cdp {} (trace header byte {})\n", line(&s["crosslines"]), s["crossline_byte"]);
    } else {
        t += &format!("  inlines {} (trace header byte {})\n", line(&s["inlines"]), s["inline_byte"]);
        t += &format!("  crosslines {} (byte {})\n", line(&s["crosslines"]), s["crossline_byte"]);
    }
    if !s["offsets"].is_null() {
        t += &format!("  offsets {} (byte {})\n", line(&s["offsets"]), s["offset_byte"]);
    }
    if let Some(c) = survey {
        // To the millimetre (or thousandth of a foot): the fit's rounding noise is not news.
        let mm = |x: f64| num((x * 1000.0).round() / 1000.0 + 0.0);
        let xy = |v: &Value| format!("({}, {})", mm(v[0].as_f64().unwrap_or(0.0)), mm(v[1].as_f64().unwrap_or(0.0)));
        let unit = c["unit"].as_str().filter(|u| !u.is_empty()).map_or(String::new(), |u| format!(" {u}"));
        t += &format!(
            "  world coordinates{unit}: origin {} at inline {}, crossline {}; per inline {}, per crossline {}\n",
            xy(&c["origin"]),
            c["first_inline"],
            c["first_crossline"],
            xy(&c["inline_spacing"]),
            xy(&c["crossline_spacing"])
        );
    }
    if let Some(first) = s["textual_headers"].as_array().and_then(|a| a.first()).and_then(Value::as_str) {
        let shown: Vec<&str> = first.lines().map(str::trim_end).filter(|l| l.len() > 3).take(4).collect();
        for l in shown {
            t += &format!("  | {l}\n");
        }
    }
    t
}

/// Most values `dump` prints without `--all`.
const DUMP_LIMIT: u64 = 10_000;

/// Parses `--region` against a shape: (start, count) per axis.
fn parse_region(s: &str, shape: &[u64]) -> Result<(Vec<u64>, Vec<u64>), String> {
    let items: Vec<&str> = if s.is_empty() { Vec::new() } else { s.split(',').collect() };
    if items.len() > shape.len() {
        return Err(format!("{} items for {} axes", items.len(), shape.len()));
    }
    let (mut start, mut counts) = (Vec::new(), Vec::new());
    for (k, &n) in shape.iter().enumerate() {
        let item = items.get(k).map_or(":", |i| i.trim());
        let num = |t: &str, dflt: u64| -> Result<u64, String> {
            if t.is_empty() {
                Ok(dflt)
            } else {
                t.parse().map_err(|_| format!("{t:?} is not an index"))
            }
        };
        let (a, b) = match item.split_once(':') {
            Some((a, b)) => (num(a, 0)?, num(b, n)?),
            None => {
                let i = num(item, 0)?;
                (i, i.saturating_add(1))
            }
        };
        if a >= b || b > n {
            return Err(format!("{item:?} is not a non-empty range inside axis {k}'s 0:{n}"));
        }
        start.push(a);
        counts.push(b - a);
    }
    Ok((start, counts))
}

/// The `--lod` option, checked against the variable: the level and its shape.
pub fn lod_of(args: &Args, path: &str, v: &Variable) -> Result<(u8, Vec<u64>), Fail> {
    let lod = args.parsed("lod", |s| s.parse::<u8>().map_err(|_| "not a level".to_string()))?.unwrap_or(0);
    match v.lod_shape(lod) {
        Some(shape) => Ok((lod, shape)),
        None => Err(Fail::Error(format!(
            "{path}: variable {:?} has {} level(s) of detail; level {lod} does not exist",
            v.name(),
            v.levels_of_detail()
        ))),
    }
}

pub fn dump(args: &Args) -> Result<(), Fail> {
    let (path, name) = (&args.positional[0], &args.positional[1]);
    let ds = open(path)?;
    let v = ds.variable(name.as_str()).map_err(at(path))?;
    let (lod, lod_shape) = lod_of(args, path, v)?;
    let (start, shape) = parse_region(args.value("region").unwrap_or(""), &lod_shape).map_err(|e| args.usage(format!("--region: {e}")))?;
    let n = count(&shape)?;
    if n > DUMP_LIMIT && !args.flag("all") {
        return Err(Fail::Error(format!("{path}: {n} values is more than {DUMP_LIMIT}; narrow --region or add --all")));
    }
    let esize = v.dtype().size();
    let dtype = v.dtype();
    let axis_names: Vec<&str> = v.axes().iter().map(|&k| ds.axes()[k].name()).collect();
    let nd = shape.len();
    // Rows of the last axis, read one 2-D plane (or row) at a time to bound memory.
    let row = shape[nd - 1];
    let plane_rows = if nd >= 2 { shape[nd - 2] } else { 1 };
    let planes = if n == 0 { 0 } else { n / (row * plane_rows) };
    let mut text = String::new();
    if args.flag("csv") {
        text += &format!("{},{}\n", axis_names.join(","), name);
    } else {
        let r: Vec<String> =
            start.iter().zip(&shape).map(|(s, c)| if *c == 1 { s.to_string() } else { format!("{s}:{}", s + c) }).collect();
        text += &format!("{name}[{}] {dtype}, axes {}\n", r.join(", "), axis_names.join(", "));
    }
    let mut idx = vec![0u64; nd.saturating_sub(2)];
    for p in 0..planes {
        let mut pstart = start.clone();
        let mut pshape = shape.clone();
        for (k, &i) in idx.iter().enumerate() {
            pstart[k] += i;
            pshape[k] = 1;
        }
        let mut buf = buffer(bytes_of(&[row, plane_rows], esize as u64)?)?;
        ds.read_lod_bytes(name.as_str(), lod, None, &Region::new(&pstart, &pshape).map_err(at(path))?, Order::C, &mut buf)
            .map_err(at(path))?;
        if !args.flag("csv") && nd >= 3 {
            let head: Vec<String> = pstart[..nd - 2].iter().map(u64::to_string).collect();
            text += &format!("{}// {name}[{}, :, :]\n", if p > 0 { "\n" } else { "" }, head.join(", "));
        }
        for r in 0..plane_rows {
            let vals = (0..row).map(|c| {
                let i = ((r * row + c) as usize) * esize;
                value_text(dtype, &buf[i..i + esize])
            });
            if args.flag("csv") {
                for (c, val) in vals.enumerate() {
                    let mut at = pstart.clone();
                    if nd >= 2 {
                        at[nd - 2] += r;
                    }
                    at[nd - 1] += c as u64;
                    text += &format!("{},{val}\n", join(&at, ","));
                }
            } else {
                text += &vals.collect::<Vec<_>>().join(", ");
                text += "\n";
            }
        }
        out(text.as_bytes())?;
        text.clear();
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(())
}

pub fn verify(args: &Args) -> Result<(), Fail> {
    let path = &args.positional[0];
    let ds = open(path)?;
    let mut progress = Progress::items(&format!("verifying {path}"), 0, args.flag("quiet"));
    let mut step = |done: u64, total: u64| {
        progress.total = total.max(1);
        progress.set(done);
    };
    let r =
        if args.flag("quick") { ds.verify_with_progress(&mut step) } else { ds.verify_full_with_progress(&mut step) }.map_err(at(path))?;
    progress.finish();
    let mut text = String::new();
    for p in &r.problems {
        text += &format!("{path}: {p}\n");
    }
    if r.is_ok() {
        text += &format!(
            "{path}: intact (commit {}, {} chunks and {} index pages checked{}, {} live, {} reclaimable)\n",
            r.commit,
            r.chunks,
            r.index_pages,
            if args.flag("quick") { "" } else { ", layers consistent" },
            size(r.live_bytes),
            size(r.reclaimable_bytes)
        );
        out(text.as_bytes())
    } else {
        let prev = match r.previous_commit {
            Some(c) => format!("; commit {c} in the other slot is intact, and `Dataset::recover` can roll back to it"),
            None => String::new(),
        };
        text += &format!("{path}: damaged: {} problems in commit {}{prev}\n", r.problems.len(), r.commit);
        out(text.as_bytes())?;
        Err(Fail::Quiet(1))
    }
}
