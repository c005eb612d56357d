//! The ds format (ds-format's native `.ds` files): a version line
//! `ds-1.0`, one line of JSON metadata, then a body of raw variable data.
//!
//! How ds variables map onto a container, so that `vds export` restores
//! them exactly:
//! - each dimension becomes an axis, each variable a variable over those
//!   axes with the ds attributes as its attributes, the dataset attributes
//!   (`"."`) as the container's attributes;
//! - a masked variable keeps 0 where values are missing (as ds-format reads
//!   them) and gets a bool companion variable `NAME:missing` (true where
//!   missing) named by its attribute `ds:missing`; the companion carries
//!   `ds:mask_of`;
//! - `str` and `unicode` variables become uint8 variables with a trailing
//!   axis `NAME:strlen` as long as the longest string's UTF-8 bytes, padded
//!   with zero bytes, and the attribute `ds:type`;
//! - a variable without dimensions spans the one-sample axis `scalar` and
//!   carries `vds:scalar`.

use crate::convert::{stream_out, Layer, Plan, Source, VarPlan, SCALAR_ATTR, SCALAR_AXIS};
use crate::util::{at, buffer, bytes_of, count, to_native, Fail, Progress};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use vds::serde_json::{self, Map, Value};
use vds::{DType, Dataset, Order, Region};

/// Longest metadata line read.
const MAX_HEADER: u64 = 64 << 20;
/// Most bytes a variable held in memory (masked, bool and string variables) may take.
const MAX_IN_MEMORY: u64 = 4 << 30;

/// Variable attribute naming the bool variable that holds its missing-value mask.
pub const MISSING_ATTR: &str = "ds:missing";
const MASK_OF_ATTR: &str = "ds:mask_of";
const TYPE_ATTR: &str = "ds:type";

/// Reads the metadata of a .ds file and plans its variables.
pub fn read(path: &str) -> Result<Plan, Fail> {
    let bad = |what: String| Fail::Error(format!("{path}: not a valid .ds file: {what}"));
    let file = crate::util::open_input(path)?;
    let len = file.metadata().map_err(at(path))?.len();
    let mut reader = BufReader::new((&file).take(MAX_HEADER));
    let mut line1 = Vec::new();
    reader.by_ref().take(64).read_until(b'\n', &mut line1).map_err(at(path))?;
    let version =
        line1.strip_prefix(b"ds-").and_then(|v| v.strip_suffix(b"\n")).ok_or_else(|| bad("it does not start with a ds-X.Y line".into()))?;
    if version != b"1.0" {
        return Err(bad(format!("format version {:?} is not supported (1.0 is)", String::from_utf8_lossy(version))));
    }
    let mut header = Vec::new();
    reader.read_until(b'\n', &mut header).map_err(at(path))?;
    if header.pop() != Some(b'\n') {
        return Err(bad(format!("the metadata line does not end within {MAX_HEADER} bytes")));
    }
    let body = (line1.len() + header.len() + 1) as u64;
    let meta: Map<String, Value> = serde_json::from_slice(&header).map_err(|e| bad(format!("metadata: {e}")))?;
    let mut plan = Plan::default();
    for (name, m) in &meta {
        if name == "." {
            plan.attrs = m.as_object().ok_or_else(|| bad("the dataset metadata \".\" is not an object".into()))?.clone();
            continue;
        }
        if name.starts_with('.') {
            continue;
        }
        let m = m.as_object().ok_or_else(|| bad(format!("variable {name:?}: metadata is not an object")))?;
        read_variable(&file, len, body, name, m, &mut plan).map_err(|e| bad(format!("variable {name:?}: {e}")))?;
    }
    if plan.vars.is_empty() {
        return Err(Fail::Error(format!("{path}: no variables with data")));
    }
    Ok(plan)
}

fn read_variable(file: &File, file_len: u64, body: u64, name: &str, m: &Map<String, Value>, plan: &mut Plan) -> Result<(), String> {
    let field_u64 = |k: &str| m.get(k).map_or(Ok(0), |v| v.as_u64().ok_or(format!("{k} is not a non-negative integer")));
    let ty = match m.get(".type") {
        None => "float64",
        Some(t) => t.as_str().ok_or(".type is not a string")?,
    };
    let size: Vec<u64> = match m.get(".size") {
        Some(Value::Array(a)) => {
            a.iter().map(|d| d.as_u64().ok_or(".size holds something other than integers")).collect::<Result<_, _>>()?
        }
        Some(Value::Null) | None => return Err("has no data (\".size\" is null)".into()),
        Some(_) => return Err(".size is not a list".into()),
    };
    let dims: Vec<String> = match m.get(".dims") {
        Some(Value::Array(a)) => {
            a.iter().map(|d| d.as_str().map(str::to_string).ok_or(".dims holds something other than names")).collect::<Result<_, _>>()?
        }
        None if size.is_empty() => Vec::new(),
        _ => return Err(".dims is not a list of names".into()),
    };
    if dims.len() != size.len() {
        return Err(format!(".dims names {} dimensions, .size gives {}", dims.len(), size.len()));
    }
    let little = match m.get(".endian").and_then(Value::as_str) {
        Some("l") => true,
        Some("b") | None => false,
        Some(e) => return Err(format!(".endian {e:?} is neither \"l\" nor \"b\"")),
    };
    let missing = m.get(".missing").and_then(Value::as_bool).unwrap_or(false);
    let (offset, len) = (field_u64(".offset")?, field_u64(".len")?);
    let start = body.checked_add(offset).filter(|s| s.checked_add(len).is_some_and(|e| e <= file_len));
    let start = start.ok_or(format!("its {len} bytes at body offset {offset} run past the end of the file ({file_len} bytes)"))?;
    let n = size.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or("too many values")?;
    if n == 0 {
        return Err("has no values (a vds axis needs at least one sample)".into());
    }
    let read = |at: u64, bytes: u64| -> Result<Vec<u8>, String> {
        if at + bytes > start + len {
            return Err(format!("needs {} bytes, .len gives {len}", at + bytes - start));
        }
        let mut b = buffer(bytes).map_err(|e| format!("{e:?}"))?;
        file.read_exact_at(&mut b, at).map_err(|e| format!("reading: {e}"))?;
        Ok(b)
    };
    // The mask: true where a value is missing; only present values are stored.
    let mask_len = if missing { n.div_ceil(8) } else { 0 };
    let mask: Option<Vec<u8>> = if missing { Some(unpack(&read(start, mask_len)?, n)) } else { None };
    let present = mask.as_ref().map_or(n, |m| m.iter().filter(|&&x| x == 0).count() as u64);
    let data_at = start + mask_len;
    let mut attrs: Map<String, Value> = m.iter().filter(|(k, _)| !k.starts_with('.')).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut axes = dims.clone();
    let mut shape = size.clone();
    if dims.is_empty() && !matches!(ty, "str" | "unicode") {
        attrs.insert(SCALAR_ATTR.into(), Value::Bool(true));
        axes.push(SCALAR_AXIS.into());
        shape.push(1);
    } else if dims.is_empty() {
        attrs.insert(SCALAR_ATTR.into(), Value::Bool(true));
    }
    let (dtype, data) = match ty {
        "str" | "unicode" => {
            let mut lens = read(data_at, present.checked_mul(8).ok_or("too many strings")?)?;
            to_native(&mut lens, 8, little);
            let lens: Vec<u64> = lens.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).collect();
            let total = lens.iter().try_fold(0u64, |a, &l| a.checked_add(l)).ok_or("string lengths overflow")?;
            let bytes = read(data_at + present * 8, total)?;
            let width = lens.iter().copied().max().unwrap_or(0).max(1);
            let padded = n
                .checked_mul(width)
                .filter(|&b| b <= MAX_IN_MEMORY)
                .ok_or(format!("{n} strings of up to {width} bytes are too large to import"))?;
            let mut out = buffer(padded).map_err(|e| format!("{e:?}"))?;
            let (mut src, mut k) = (0usize, 0usize);
            for i in 0..n as usize {
                if mask.as_ref().is_some_and(|m| m[i] != 0) {
                    continue;
                }
                let l = lens[k] as usize;
                out[i * width as usize..i * width as usize + l].copy_from_slice(&bytes[src..src + l]);
                src += l;
                k += 1;
            }
            attrs.insert(TYPE_ATTR.into(), Value::String(ty.into()));
            let strlen = format!("{name}:strlen");
            axes.push(strlen);
            shape.push(width);
            (DType::UInt8, Source::Memory(out))
        }
        _ => {
            let dtype = DType::from_name(ty).map_err(|_| format!("type {ty:?} is not supported"))?;
            if dtype == DType::Bool {
                let bits = unpack(&read(data_at, present.div_ceil(8))?, present);
                (dtype, Source::Memory(expand(bits, mask.as_deref(), 1, n)?))
            } else if let Some(mask) = &mask {
                let esize = dtype.size() as u64;
                let mut vals = read(data_at, present * esize)?;
                to_native(&mut vals, esize as usize, little);
                (dtype, Source::Memory(expand(vals, Some(mask), esize as usize, n)?))
            } else {
                let need = n.checked_mul(dtype.size() as u64).ok_or("too many values")?;
                if need > len {
                    return Err(format!("needs {need} bytes, .len gives {len}"));
                }
                (dtype, Source::File { file: file.try_clone().map_err(|e| e.to_string())?, offset: data_at, little, fortran: false })
            }
        }
    };
    for (a, &s) in axes.iter().zip(&shape) {
        plan.axis(a, s, &format!("variable {name:?}"))?;
    }
    if let Some(mask) = mask {
        let mask_name = format!("{name}:missing");
        attrs.insert(MISSING_ATTR.into(), Value::String(mask_name.clone()));
        let mut mask_attrs = Map::new();
        mask_attrs.insert(MASK_OF_ATTR.into(), Value::String(name.into()));
        let n_axes = if ty == "str" || ty == "unicode" { axes.len() - 1 } else { axes.len() };
        plan.vars.push(VarPlan { name: name.into(), dtype, axes: axes.clone(), shape: shape.clone(), attrs, data });
        plan.vars.push(VarPlan {
            name: mask_name,
            dtype: DType::Bool,
            axes: axes[..n_axes].to_vec(),
            shape: shape[..n_axes].to_vec(),
            attrs: mask_attrs,
            data: Source::Memory(mask),
        });
        return Ok(());
    }
    plan.vars.push(VarPlan { name: name.into(), dtype, axes, shape, attrs, data });
    Ok(())
}

/// Unpacks `n` bits, most significant bit first, into one byte (0 or 1) each.
fn unpack(packed: &[u8], n: u64) -> Vec<u8> {
    (0..n as usize).map(|i| (packed[i / 8] >> (7 - i % 8)) & 1).collect()
}

/// Packs bytes (0 or not) into bits, most significant bit first.
fn pack(bits: impl Iterator<Item = bool>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, b) in bits.enumerate() {
        if i % 8 == 0 {
            out.push(0);
        }
        if b {
            *out.last_mut().unwrap_or(&mut 0) |= 0x80 >> (i % 8);
        }
    }
    out
}

/// The present values `vals` (elements of `esize` bytes) placed at the
/// positions the mask leaves free, zero elsewhere.
fn expand(vals: Vec<u8>, mask: Option<&[u8]>, esize: usize, n: u64) -> Result<Vec<u8>, String> {
    let Some(mask) = mask else { return Ok(vals) };
    let mut out = buffer(n * esize as u64).map_err(|e| format!("{e:?}"))?;
    let mut k = 0;
    for (i, &m) in mask.iter().enumerate() {
        if m == 0 {
            out[i * esize..(i + 1) * esize].copy_from_slice(&vals[k * esize..(k + 1) * esize]);
            k += 1;
        }
    }
    Ok(out)
}

/// What is written for one variable.
enum Payload {
    /// Streamed from the variable with this index, little-endian.
    Stream(usize),
    Bytes(Vec<u8>),
}

/// Reads a whole variable into memory (C order, native bytes).
fn whole(src: &Dataset, v: usize, input: &str) -> Result<Vec<u8>, Fail> {
    let var = &src.variables()[v];
    let bytes = bytes_of(var.shape(), var.dtype().size() as u64)?;
    if bytes > MAX_IN_MEMORY {
        return Err(Fail::Error(format!(
            "{input}: variable {:?} ({bytes} bytes) is too large to hold in memory for a .ds file",
            var.name()
        )));
    }
    let mut buf = buffer(bytes)?;
    src.read_bytes(v, &Region::full(var.shape()).map_err(at(input))?, Order::C, &mut buf).map_err(at(input))?;
    Ok(buf)
}

/// Writes every variable of `src` as a .ds file at `path`.
pub fn write(src: &Dataset, input: &str, path: &Path, quiet: bool, left: &str) -> Result<(), Fail> {
    let mut meta = Map::new();
    let mut payloads = Vec::new();
    let mut offset = 0u64;
    for (i, var) in src.variables().iter().enumerate() {
        let attrs = src.variable_attributes(i).map_err(at(input))?;
        if attrs.contains_key(MASK_OF_ATTR) {
            continue;
        }
        let string_type = attrs.get(TYPE_ATTR).and_then(Value::as_str).filter(|t| *t == "str" || *t == "unicode");
        let scalar = attrs.get(SCALAR_ATTR) == Some(&Value::Bool(true));
        let mut dims: Vec<String> = var.axes().iter().map(|&k| src.axes()[k].name().to_string()).collect();
        let mut size = var.shape().to_vec();
        if string_type.is_some() || scalar {
            // Drop the strlen axis of strings, or the one-sample axis of a scalar.
            dims.pop();
            size.pop();
        }
        let n = count(&size)?;
        let mask = match attrs.get(MISSING_ATTR).and_then(Value::as_str) {
            Some(m) => {
                let mv = src
                    .variables()
                    .iter()
                    .position(|w| w.name() == m)
                    .ok_or_else(|| Fail::Error(format!("{input}: mask variable {m:?} is missing")))?;
                Some(whole(src, mv, input)?)
            }
            None => None,
        };
        let is_present = |j: usize| mask.as_ref().is_none_or(|m| m[j] == 0);
        let mut m = Map::new();
        m.insert(".dims".into(), dims.into());
        for (k, v) in attrs {
            if !k.starts_with("ds:") && !k.starts_with("vds:") {
                m.insert(k.clone(), v.clone());
            }
        }
        if !var.unit().is_empty() && !m.contains_key("units") {
            m.insert("units".into(), var.unit().into());
        }
        let mut bytes = mask.as_ref().map(|mk| pack(mk.iter().map(|&b| b != 0))).unwrap_or_default();
        let payload = match (string_type, var.dtype()) {
            (Some(_), _) => {
                let data = whole(src, i, input)?;
                let width = *var.shape().last().unwrap_or(&1) as usize;
                let strings: Vec<&[u8]> = (0..n as usize)
                    .filter(|&j| is_present(j))
                    .map(|j| {
                        let s = &data[j * width..(j + 1) * width];
                        &s[..s.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1)]
                    })
                    .collect();
                for s in &strings {
                    bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
                }
                strings.iter().for_each(|s| bytes.extend_from_slice(s));
                Payload::Bytes(bytes)
            }
            (None, DType::Bool) => {
                let data = whole(src, i, input)?;
                bytes.extend(pack((0..n as usize).filter(|&j| is_present(j)).map(|j| data[j] != 0)));
                Payload::Bytes(bytes)
            }
            (None, dtype) if mask.is_some() => {
                let mut data = whole(src, i, input)?;
                to_native(&mut data, dtype.size(), true);
                let e = dtype.size();
                (0..n as usize).filter(|&j| is_present(j)).for_each(|j| bytes.extend_from_slice(&data[j * e..(j + 1) * e]));
                Payload::Bytes(bytes)
            }
            (None, _) => Payload::Stream(i),
        };
        let len = match &payload {
            Payload::Bytes(b) => b.len() as u64,
            Payload::Stream(_) => n * var.dtype().size() as u64,
        };
        m.insert(".size".into(), size.into());
        m.insert(".offset".into(), offset.into());
        m.insert(".len".into(), len.into());
        m.insert(".type".into(), string_type.unwrap_or(var.dtype().name()).into());
        m.insert(".missing".into(), mask.is_some().into());
        if var.dtype() != DType::Bool || string_type.is_some() {
            m.insert(".endian".into(), "l".into());
        }
        meta.insert(var.name().to_string(), Value::Object(m));
        payloads.push((offset, payload));
        offset += len;
    }
    let dataset: Map<String, Value> = src
        .attributes()
        .iter()
        .filter(|(k, _)| !k.starts_with("ds:") && !k.starts_with("vds:"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    meta.insert(".".into(), Value::Object(dataset));
    let mut head = b"ds-1.0\n".to_vec();
    head.extend_from_slice(serde_json::to_string(&meta).map_err(|e| Fail::Error(e.to_string()))?.as_bytes());
    head.push(b'\n');
    let body = head.len() as u64;
    let file = File::create(path).map_err(at(path))?;
    file.write_all_at(&head, 0).map_err(at(path))?;
    file.set_len(body + offset).map_err(at(path))?;
    let mut progress = Progress::new(&format!("exporting {input}"), offset, quiet);
    for (off, p) in payloads {
        match p {
            Payload::Bytes(b) => {
                file.write_all_at(&b, body + off).map_err(at(path))?;
                progress.add(b.len() as u64);
            }
            Payload::Stream(v) => stream_out(src, (v, Layer::default()), &file, body + off, false, &mut progress, left)?,
        }
    }
    progress.finish();
    Ok(())
}
