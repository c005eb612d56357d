//! `vds export FILE.vds OUT.sgy`: a variable to SEG-Y. A container imported
//! from SEG-Y is written back with its kept headers, byte order, sample
//! format and trace order, so a regular sorted file comes back byte for
//! byte; any other volume gets headers made from its axes (rev 1,
//! big-endian, IEEE floats for float32 unless --segy-format says 1 for IBM).
//! Traces are written in file order, a slab of inlines (or crosslines) at a
//! time, in bounded memory; missing traces (masked) are left out.

use crate::args::Args;
use crate::convert::block_budget;
use crate::segy_in::{unbase64, SEGY_ATTR, SURVEY_ATTR, TRACE_HEADERS};
use crate::util::{at, buffer, interrupted, Destination, Fail, Progress};
use std::io::Write;
use vds::serde_json::Value;
use vds::{Dataset, Order, Region};
use vds_segy::writer::{self, TraceKeys};
use vds_segy::{text, Encoding, Endian, SampleFormat};

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
    /// Traces of different lengths (rev 2): each written as long as its header says.
    variable: bool,
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

pub fn export(args: &Args, src: &Dataset, input: &str, output: &str, dest: &Destination, left: &str) -> Result<(), Fail> {
    let seg = src.attributes().get(SEGY_ATTR).cloned();
    let v = match args.pos(2) {
        Some(name) => name.to_string(),
        None => match seg.as_ref().and_then(|s| s["variable"].as_str()) {
            Some(n) => n.to_string(),
            None if src.variables().len() == 1 => src.variables()[0].name().to_string(),
            None => return Err(args.usage(format!("{input} has {} variables; name the one to export", src.variables().len()))),
        },
    };
    let vi = src.variables().iter().position(|x| x.name() == v).ok_or_else(|| Fail::Error(format!("{input}: no variable named {v:?}")))?;
    let var = &src.variables()[vi];
    let shape = var.shape().to_vec();
    let ndim = shape.len();
    if ndim > 4 {
        return Err(Fail::Error(format!(
            "{input}: {v:?} has {ndim} dimensions; SEG-Y holds at most 4 (inline, crossline, offset, sample)"
        )));
    }
    if let Some(n) = shape[..ndim - 1].iter().find(|&&n| n > i32::MAX as u64) {
        return Err(Fail::Error(format!("{input}: {v:?} has an axis of {n} samples; SEG-Y numbers traces with 32-bit integers")));
    }
    let ns = shape[ndim - 1];
    let axes: Vec<&vds::Axis> = var.axes().iter().map(|&k| &src.axes()[k]).collect();
    let requested = args.parsed("segy-format", |s| {
        s.parse::<i16>().ok().and_then(SampleFormat::from_code).ok_or_else(|| "not a SEG-Y sample format code".to_string())
    })?;
    let dtype = var.dtype().name();
    // The kept layout applies when the variable is the one imported with it.
    let kept = seg.as_ref().filter(|s| s["variable"].as_str() == Some(v.as_str()) && s["binary_raw"].is_string());
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
                return Err(Fail::Error(format!("{input}: the kept SEG-Y headers are damaged")));
            }
            if format.code() != s["format"].as_i64().unwrap_or(0) as i16 {
                vds_segy::binary::set_field(&mut binary, 25, vds_segy::binary::FieldType::I16, endian, i64::from(format.code()));
            }
            let headers = src.variables().iter().position(|x| x.name() == s["trace_headers"].as_str().unwrap_or(TRACE_HEADERS));
            let headers = headers.filter(|&h| src.variables()[h].shape()[..src.variables()[h].shape().len() - 1] == shape[..ndim - 1]);
            let pos = |k: &str, d: usize| s[k].as_u64().map_or(d, |p| p as usize);
            Plan {
                textual,
                binary,
                endian,
                format,
                by_crossline: s["sorting"] == "crossline",
                headers,
                variable: s["variable_length"] == Value::Bool(true),
                positions: [pos("inline_byte", 189), pos("crossline_byte", 193), pos("offset_byte", 37)],
            }
        }
        None => {
            let format = requested
                .or_else(|| SampleFormat::for_dtype(dtype))
                .ok_or_else(|| Fail::Error(format!("{input}: {v:?} is {dtype}, which no SEG-Y sample format holds")))?;
            let names: Vec<&str> = axes.iter().map(|a| a.name()).collect();
            let lines = [
                "C 1 SEG-Y written by libvds (vds export)".to_string(),
                format!("C 2 from {input}, variable {v}"),
                format!("C 3 axes {}", names.join(" x ")),
                format!("C 4 shape {}", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ")),
                format!("C 5 sample interval {interval} us, first sample at {} {}", sample_axis.first(), sample_axis.unit_str()),
                "C 6 inline bytes 189-192, crossline 193-196, offset 37-40, CDP X/Y 181-188".to_string(),
                "C40 END TEXTUAL HEADER".to_string(),
            ];
            let mut card: Vec<&str> = lines[..6].iter().map(String::as_str).collect();
            card.resize(39, "");
            card.push(&lines[6]);
            let binary = writer::binary_header(Endian::Big, format, ns, interval).map_err(|e| Fail::Error(format!("{output}: {e}")))?;
            Plan {
                textual: text::encode(&text::card(&card), Encoding::Ebcdic),
                binary,
                endian: Endian::Big,
                format,
                by_crossline: false,
                headers: None,
                variable: false,
                positions: [189, 193, 37],
            }
        }
    };
    if SampleFormat::for_dtype(dtype).map(|f| f.dtype()) != Some(plan.format.dtype()) {
        return Err(Fail::Error(format!(
            "{input}: {v:?} is {dtype}; SEG-Y format {} holds {} (choose a format with --segy-format)",
            plan.format.code(),
            plan.format.dtype()
        )));
    }
    if ns > writer::MAX_WRITE_SAMPLES {
        return Err(Fail::Error(format!(
            "{input}: {ns} samples per trace; SEG-Y trace headers hold at most {}",
            writer::MAX_WRITE_SAMPLES
        )));
    }
    let file = std::fs::File::create(dest.temp()).map_err(at(output))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let werr = |e: std::io::Error| Fail::Error(format!("{output}: writing: {e}"));
    w.write_all(&plan.textual[..3200]).map_err(werr)?;
    w.write_all(&plan.binary).map_err(werr)?;
    w.write_all(&plan.textual[3200..]).map_err(werr)?;
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
    let per_trace = ns * esize + 240;
    // A slab is whole lines of the outer axis of the file's order.
    let (outer, inner) = if plan.by_crossline { (1, 0) } else { (0, 1) };
    let per_line = grid[inner] * grid[2] * per_trace;
    let slab = (block_budget() / per_line.max(1)).clamp(1, grid[outer]);
    let mut progress = Progress::new(&format!("exporting {v}"), grid.iter().product::<u64>() * per_trace, args.flag("quiet"));
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
        interrupted(left)?;
        let on = slab.min(grid[outer] - o0);
        let (start, count) = lead_region(o0, on);
        let region = Region::new(&start, &count).map_err(at(input))?;
        let n: u64 = count.iter().product();
        let mut data = buffer(n * esize)?;
        src.read_bytes(vi, &region, Order::C, &mut data).map_err(at(input))?;
        let mask = if var.has_mask() { Some(src.read_mask(vi, 0, None, &region, Order::C).map_err(at(input))?) } else { None };
        let heads = match plan.headers {
            Some(h) => {
                let mut hs = start[..ndim - 1].to_vec();
                hs.push(0);
                let mut hc = count[..ndim - 1].to_vec();
                hc.push(240);
                let mut b = buffer(n / ns * 240)?;
                src.read_bytes(h, &Region::new(&hs, &hc).map_err(at(input))?, Order::C, &mut b).map_err(at(input))?;
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
                    let header = match &heads {
                        Some(hb) => {
                            let mut h = [0u8; 240];
                            h.copy_from_slice(&hb[t * 240..(t + 1) * 240]);
                            h
                        }
                        None => {
                            let (inl, crl) = (number(0, cell[0]), number(1, cell[1]));
                            let keys = TraceKeys {
                                index,
                                inline: inl,
                                crossline: crl,
                                offset: number(2, cell[2]),
                                samples: ns as u16,
                                interval: if interval > 0.0 && interval <= 32767.0 { interval.round() as i16 } else { 0 },
                                delay: sample_axis.first().round().clamp(-32768.0, 32767.0) as i16,
                                xy: xy(inl, crl),
                            };
                            writer::trace_header(plan.endian, &keys, plan.positions)
                        }
                    };
                    let bytes = &data[t * (ns * esize) as usize..(t + 1) * (ns * esize) as usize];
                    plan.format.encode(plan.endian, bytes, &mut enc);
                    let samples = if plan.variable { u64::from(plan.endian.u16(&header[114..116])).min(ns) } else { ns };
                    w.write_all(&header).map_err(werr)?;
                    w.write_all(&enc[..samples as usize * plan.format.size()]).map_err(werr)?;
                    index += 1;
                    progress.add(per_trace);
                }
            }
        }
        o0 += on;
    }
    w.flush().map_err(werr)?;
    progress.finish();
    Ok(())
}
