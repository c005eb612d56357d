//! NumPy's `.npy` format (versions 1.0 to 3.0): a magic string, a version,
//! a header length, a Python dict literal (`descr`, `fortran_order`,
//! `shape`), then the array's bytes.

use crate::util::{at, Fail};
use std::fs::File;
use std::os::unix::fs::FileExt;
use vds::DType;

const MAGIC: &[u8] = b"\x93NUMPY";
/// Headers longer than this are not NumPy's.
const MAX_HEADER: u64 = 1 << 20;

/// What a `.npy` header says.
#[derive(Debug, PartialEq)]
pub struct Header {
    pub dtype: DType,
    /// Byte order of multi-byte elements.
    pub little: bool,
    pub fortran: bool,
    pub shape: Vec<u64>,
    /// Where the data starts.
    pub data_offset: u64,
}

/// Reads and checks the header of `file`, including that the file holds
/// all the data the header promises.
pub fn read_header(file: &File, path: &str) -> Result<Header, Fail> {
    let bad = |what: String| Fail::Error(format!("{path}: not a valid .npy file: {what}"));
    let len = file.metadata().map_err(at(path))?.len();
    let mut pre = [0u8; 12];
    if len < 10 {
        return Err(bad(format!("{len} bytes is too short")));
    }
    file.read_exact_at(&mut pre[..10], 0).map_err(at(path))?;
    if &pre[..6] != MAGIC {
        return Err(bad("it does not start with \\x93NUMPY".into()));
    }
    let (hlen, start) = match pre[6] {
        1 => (u64::from(u16::from_le_bytes([pre[8], pre[9]])), 10u64),
        2 | 3 if len >= 12 => {
            file.read_exact_at(&mut pre[10..12], 10).map_err(at(path))?;
            (u64::from(u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]])), 12)
        }
        v => return Err(bad(format!("format version {v}.{} is not supported (1.0 to 3.0 are)", pre[7]))),
    };
    if hlen > MAX_HEADER || start + hlen > len {
        return Err(bad(format!("the header length {hlen} runs past the end of the file")));
    }
    let mut text = vec![0u8; hlen as usize];
    file.read_exact_at(&mut text, start).map_err(at(path))?;
    let text = String::from_utf8(text).map_err(|_| bad("the header is not text".into()))?;
    let dict = Literal::parse(&text).map_err(|e| bad(format!("header {:?}: {e}", text.trim_end())))?;
    let Literal::Dict(items) = dict else { return Err(bad("the header is not a dict".into())) };
    let get = |k: &str| items.iter().find(|(n, _)| n == k).map(|(_, v)| v).ok_or_else(|| bad(format!("the header has no {k:?}")));
    let Literal::Str(descr) = get("descr")? else { return Err(bad("structured dtypes are not supported".into())) };
    let (dtype, little) = parse_descr(descr).ok_or_else(|| bad(format!("dtype {descr:?} is not supported")))?;
    let Literal::Bool(fortran) = get("fortran_order")? else { return Err(bad("fortran_order is not True or False".into())) };
    let Literal::Tuple(dims) = get("shape")? else { return Err(bad("shape is not a tuple".into())) };
    let shape = dims.iter().map(|d| if let Literal::Int(n) = d { Some(*n) } else { None }).collect::<Option<Vec<u64>>>();
    let shape = shape.ok_or_else(|| bad("shape holds something other than integers".into()))?;
    let data_offset = start + hlen;
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).and_then(|n| n.checked_mul(dtype.size() as u64));
    match n {
        Some(bytes) if data_offset.checked_add(bytes).is_some_and(|end| end <= len) => {}
        _ => return Err(bad(format!("shape {shape:?} of {descr} needs more data than the file's {len} bytes"))),
    }
    Ok(Header { dtype, little, fortran: *fortran, shape, data_offset })
}

/// The `.npy` header (1.0, or 2.0 when it is long) for an array.
pub fn header_bytes(dtype: DType, fortran: bool, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let py_bool = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': '{}', 'fortran_order': {py_bool}, 'shape': {tuple}, }}", descr(dtype));
    let (version, pre) = if dict.len() + 11 < 65_536 { (1u8, 10usize) } else { (2, 12) };
    // Pad with spaces so that the data starts at a multiple of 64, then a newline.
    let total = (pre + dict.len() + 1).div_ceil(64) * 64;
    let hlen = total - pre;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// NumPy's name of a type, little-endian.
fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::Int8 => "|i1",
        DType::Int16 => "<i2",
        DType::Int32 => "<i4",
        DType::Int64 => "<i8",
        DType::UInt8 => "|u1",
        DType::UInt16 => "<u2",
        DType::UInt32 => "<u4",
        DType::UInt64 => "<u8",
        DType::Float32 => "<f4",
        DType::Float64 => "<f8",
        _ => "|b1",
    }
}

/// A NumPy type string: its type and whether it is little-endian.
fn parse_descr(s: &str) -> Option<(DType, bool)> {
    let (order, code) = match s.as_bytes().first()? {
        b'<' | b'|' => (true, &s[1..]),
        b'=' => (cfg!(target_endian = "little"), &s[1..]),
        b'>' => (false, &s[1..]),
        _ => (cfg!(target_endian = "little"), s),
    };
    let dtype = match code {
        "i1" | "b" => DType::Int8,
        "i2" => DType::Int16,
        "i4" => DType::Int32,
        "i8" => DType::Int64,
        "u1" | "B" => DType::UInt8,
        "u2" => DType::UInt16,
        "u4" => DType::UInt32,
        "u8" => DType::UInt64,
        "f4" => DType::Float32,
        "f8" => DType::Float64,
        "b1" | "?" => DType::Bool,
        _ => return None,
    };
    Some((dtype, order))
}

/// The small part of Python's literal syntax a `.npy` header uses.
#[derive(Debug, PartialEq)]
enum Literal {
    Str(String),
    Int(u64),
    Bool(bool),
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(String, Literal)>),
}

impl Literal {
    fn parse(text: &str) -> Result<Literal, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0, depth: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("unexpected text at byte {}", p.i));
        }
        Ok(v)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn value(&mut self) -> Result<Literal, String> {
        self.depth += 1;
        if self.depth > 32 {
            return Err("nested too deeply".into());
        }
        let at = self.i;
        let v = match self.peek().ok_or("unexpected end")? {
            b'{' => Literal::Dict(self.seq(b'}', |p| {
                let Literal::Str(k) = p.value()? else { return Err("a dict key is not a string".into()) };
                if p.peek() != Some(b':') {
                    return Err(format!("expected ':' at byte {}", p.i));
                }
                p.i += 1;
                Ok((k, p.value()?))
            })?),
            b'(' => Literal::Tuple(self.seq(b')', Parser::value)?),
            b'[' => Literal::List(self.seq(b']', Parser::value)?),
            q @ (b'\'' | b'"') => {
                let start = self.i + 1;
                let end = self.s[start..].iter().position(|&c| c == q).ok_or("unterminated string")? + start;
                self.i = end + 1;
                Literal::Str(String::from_utf8_lossy(&self.s[start..end]).into_owned())
            }
            _ => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Literal::Bool(true),
                    b"False" => Literal::Bool(false),
                    w => {
                        let w = std::str::from_utf8(w).unwrap_or("");
                        Literal::Int(w.trim_end_matches('L').parse().map_err(|_| format!("unexpected {w:?} at byte {at}"))?)
                    }
                }
            }
        };
        self.depth -= 1;
        Ok(v)
    }

    /// Items up to `close`, separated by commas, a trailing comma allowed.
    fn seq<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Result<T, String>) -> Result<Vec<T>, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok(out);
            }
            out.push(item(self)?);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(c) if c == close => {}
                _ => return Err(format!("expected ',' or '{}' at byte {}", close as char, self.i)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_back() {
        let h = header_bytes(DType::Float32, true, &[3, 4]);
        assert_eq!(h.len() % 64, 0);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        let Literal::Dict(items) = Literal::parse(text).unwrap() else { panic!() };
        assert_eq!(items[0], ("descr".to_string(), Literal::Str("<f4".into())));
        assert_eq!(items[1], ("fortran_order".to_string(), Literal::Bool(true)));
        assert_eq!(items[2], ("shape".to_string(), Literal::Tuple(vec![Literal::Int(3), Literal::Int(4)])));
        assert!(Literal::parse("{'a': (1,").is_err());
        assert!(Literal::parse(&"(".repeat(100)).is_err());
    }
}
