//! The descriptor's JSON text, checked before anything is built from it
//! (SPEC.md section 3, "JSON text").
//!
//! This module owns the rules RFC 8259 leaves to implementations (nesting,
//! duplicate member names, numbers beyond binary64 or 64-bit integers, lone
//! surrogates, a byte order mark) and the bound on what parsing may cost.
//! It reads the text twice without building a tree: the first pass checks
//! the grammar and counts values and members, which bounds the memory a
//! parse takes before any of it is allocated; the second, run only when
//! that bound is within the caller's limit, checks that no object names a
//! member twice. serde_json then builds the descriptor from text that is
//! known to be acceptable.

use std::borrow::Cow;
use std::collections::HashSet;

/// The deepest nesting of arrays and objects: the descriptor's own object is
/// level 1. (serde_json refuses level 128, so the two agree.)
pub(crate) const MAX_NESTING: usize = 127;

/// Bytes of memory a parse may take per JSON value (a number, string,
/// literal, array or object), per object member, per array or object that
/// is not empty (its first allocation holds several elements), and per byte
/// of text. Measured on serde_json with `preserve_order` building the
/// descriptor: tests/descriptor_limits.rs checks that opening descriptors
/// of many shapes stays below.
const COST_PER_VALUE: u64 = 96;
const COST_PER_MEMBER: u64 = 256;
const COST_PER_CONTAINER: u64 = 384;
const COST_PER_BYTE: u64 = 4;

/// What the first pass found: counts that bound the parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// JSON values of every kind, containers included.
    pub values: u64,
    /// Object members (name-value pairs).
    pub members: u64,
    /// Arrays and objects that are not empty.
    pub containers: u64,
    /// Length of the text.
    pub bytes: u64,
}

impl Shape {
    /// The most memory parsing a text of this shape may take, in bytes.
    pub(crate) fn parse_cost(&self) -> u64 {
        self.values
            .saturating_mul(COST_PER_VALUE)
            .saturating_add(self.members.saturating_mul(COST_PER_MEMBER))
            .saturating_add(self.containers.saturating_mul(COST_PER_CONTAINER))
            .saturating_add(self.bytes.saturating_mul(COST_PER_BYTE))
    }
}

/// Checks the text against every rule of SPEC.md section 3 on JSON text and
/// counts what it holds. Allocates only a stack of at most [`MAX_NESTING`]
/// frames. The error says what is wrong and at which byte.
pub(crate) fn shape(text: &[u8]) -> Result<Shape, String> {
    let mut s = Scanner { text, pos: 0, values: 0, members: 0, containers: 0, names: false };
    s.document(&mut Vec::new())?;
    Ok(Shape { values: s.values, members: s.members, containers: s.containers, bytes: text.len() as u64 })
}

/// Checks that no object of the text names a member twice (names compared
/// after unescaping). The text must have passed [`shape`]; this pass keeps
/// the member names of every open object, borrowed from the text unless
/// they contain escapes.
pub(crate) fn check_member_names(text: &[u8]) -> Result<(), String> {
    let mut s = Scanner { text, pos: 0, values: 0, members: 0, containers: 0, names: true };
    s.document(&mut Vec::new())
}

/// One open array (`None`) or object (`Some`, with the names seen so far
/// when they are being checked).
type Frame<'a> = Option<HashSet<Cow<'a, [u8]>>>;

struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
    values: u64,
    members: u64,
    containers: u64,
    /// Whether member names are kept and compared.
    names: bool,
}

impl<'a> Scanner<'a> {
    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// The whole text: one value between optional white space. Iterative, so
    /// that nesting costs a frame on `stack`, not a native stack frame.
    fn document(&mut self, stack: &mut Vec<Frame<'a>>) -> Result<(), String> {
        if self.text.starts_with(b"\xEF\xBB\xBF") {
            return self.fail("a byte order mark (the descriptor is UTF-8 without one)");
        }
        if let Err(e) = std::str::from_utf8(self.text) {
            self.pos = e.valid_up_to();
            return self.fail("invalid UTF-8");
        }
        self.skip_space();
        'value: loop {
            self.values += 1;
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if stack.len() == MAX_NESTING {
                        return self.fail(&format!("arrays and objects nested too deeply (more than {MAX_NESTING} levels)"));
                    }
                    self.pos += 1;
                    self.skip_space();
                    if open == b'[' {
                        if self.peek() == Some(b']') {
                            self.pos += 1;
                        } else {
                            self.containers += 1;
                            stack.push(None);
                            continue 'value;
                        }
                    } else if self.peek() == Some(b'}') {
                        self.pos += 1;
                    } else {
                        self.containers += 1;
                        stack.push(Some(HashSet::new()));
                        self.member_name(stack)?;
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return self.fail("expected a JSON value"),
            }
            // After a value: close containers until one continues.
            loop {
                self.skip_space();
                let Some(top) = stack.last() else { break 'value };
                let is_object = top.is_some();
                match (self.peek(), is_object) {
                    (Some(b','), _) => {
                        self.pos += 1;
                        self.skip_space();
                        if is_object {
                            self.member_name(stack)?;
                        }
                        continue 'value;
                    }
                    (Some(b']'), false) | (Some(b'}'), true) => {
                        self.pos += 1;
                        stack.pop();
                    }
                    (_, false) => return self.fail("expected ',' or ']'"),
                    (_, true) => return self.fail("expected ',' or '}'"),
                }
            }
        }
        if self.pos != self.text.len() {
            return self.fail("text after the descriptor's object");
        }
        Ok(())
    }

    /// A member's name and the colon after it; the name must be new to its object.
    fn member_name(&mut self, stack: &mut [Frame<'a>]) -> Result<(), String> {
        if self.peek() != Some(b'"') {
            return self.fail("expected a member name");
        }
        let at = self.pos;
        let name = self.string()?;
        self.members += 1;
        if self.names {
            if let Some(Some(seen)) = stack.last_mut() {
                if !seen.insert(name) {
                    self.pos = at;
                    let shown = String::from_utf8_lossy(&self.text[at..self.text.len().min(at + 64)]).into_owned();
                    return self.fail(&format!("a member name used twice in one object ({})", shown.split(':').next().unwrap_or("")));
                }
            }
        }
        self.skip_space();
        if self.peek() != Some(b':') {
            return self.fail("expected ':'");
        }
        self.pos += 1;
        self.skip_space();
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        if !self.text[self.pos..].starts_with(word) {
            return self.fail("expected a JSON value");
        }
        self.pos += word.len();
        Ok(())
    }

    /// A string; returns its value when names are kept (borrowed unless it has escapes).
    fn string(&mut self) -> Result<Cow<'a, [u8]>, String> {
        self.pos += 1;
        let start = self.pos;
        let mut owned: Option<Vec<u8>> = None;
        loop {
            let Some(b) = self.peek() else { return self.fail("unterminated string") };
            match b {
                b'"' => {
                    let value = match owned {
                        Some(v) => Cow::Owned(v),
                        None => Cow::Borrowed(&self.text[start..self.pos]),
                    };
                    self.pos += 1;
                    return Ok(value);
                }
                b'\\' => {
                    if owned.is_none() && self.names {
                        owned = Some(self.text[start..self.pos].to_vec());
                    }
                    let c = self.escape()?;
                    if let Some(v) = owned.as_mut() {
                        let mut utf8 = [0u8; 4];
                        v.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                    }
                }
                0..=0x1f => return self.fail("a control character in a string (it must be escaped)"),
                _ => {
                    if let Some(v) = owned.as_mut() {
                        v.push(b);
                    }
                    self.pos += 1;
                }
            }
        }
    }

    /// One escape sequence, from its backslash; surrogates must pair.
    fn escape(&mut self) -> Result<char, String> {
        self.pos += 1;
        let Some(e) = self.peek() else { return self.fail("unterminated string") };
        self.pos += 1;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                let code = match hi {
                    0xD800..=0xDBFF => {
                        if !self.text[self.pos..].starts_with(b"\\u") {
                            return self.fail("a lone surrogate escape (\\uD800 to \\uDBFF must be followed by a low surrogate)");
                        }
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return self.fail("a lone surrogate escape (\\uD800 to \\uDBFF must be followed by a low surrogate)");
                        }
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return self.fail("a lone surrogate escape (\\uDC00 to \\uDFFF without a high surrogate)"),
                    _ => hi,
                };
                // Cannot fail: surrogates were paired above.
                char::from_u32(code).unwrap_or('\u{fffd}')
            }
            _ => return self.fail("an unknown escape sequence"),
        };
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.text.get(self.pos..self.pos + 4).filter(|d| d.iter().all(u8::is_ascii_hexdigit));
        let Some(digits) = digits else { return self.fail("\\u without four hex digits") };
        self.pos += 4;
        // Cannot fail: four ASCII hex digits.
        Ok(u32::from_str_radix(std::str::from_utf8(digits).unwrap_or("0"), 16).unwrap_or(0))
    }

    /// A number: an integer (no fraction, no exponent) must fit 64 bits
    /// (signed or unsigned), any other number must be finite in binary64.
    fn number(&mut self) -> Result<(), String> {
        let start = self.pos;
        let digits = |s: &mut Self| {
            let from = s.pos;
            while matches!(s.peek(), Some(b'0'..=b'9')) {
                s.pos += 1;
            }
            s.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let n = digits(self);
        if n == 0 || (n > 1 && self.text[int_start] == b'0') {
            return self.fail("a malformed number");
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            integer = false;
            if digits(self) == 0 {
                return self.fail("a malformed number");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return self.fail("a malformed number");
            }
        }
        // The grammar above admits only ASCII.
        let text = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
        if integer {
            if text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
                self.pos = start;
                return self.fail(&format!("integer {text} does not fit 64 bits"));
            }
        } else if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            self.pos = start;
            return self.fail(&format!("number {text} is beyond the range of binary64"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn counts_values_and_members() {
        let s = shape(br#" {"a": [1, 2.5, "x", true, null, {}], "b": {"c": -0}} "#).unwrap();
        assert_eq!((s.values, s.members, s.containers), (10, 3, 3));
    }

    #[test]
    fn the_rules_of_the_text() {
        for good in [
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":18446744073709551615,"b":-9223372036854775808}"#,
            r#"{"a":1e308,"b":1e-400,"c":-0}"#,
            r#"{"a":1,"A":2,"b":{"a":3}}"#,
        ] {
            assert!(shape(good.as_bytes()).is_ok() && check_member_names(good.as_bytes()).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("\u{feff}{}", "byte order mark"),
            (r#"{"a":"\ud800"}"#, "lone surrogate"),
            (r#"{"a":"\udc00\ud800"}"#, "lone surrogate"),
            (r#"{"a":18446744073709551616}"#, "64 bits"),
            (r#"{"a":-9223372036854775809}"#, "64 bits"),
            (r#"{"a":1e309}"#, "binary64"),
            (r#"{"a":01}"#, "malformed"),
            (r#"{"a":1} x"#, "after"),
            ("{\"a\":\"\t\"}", "control character"),
            (r#"{"a":[1,]}"#, "expected a JSON value"),
        ] {
            let e = shape(bad.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        for dup in [r#"{"a":1,"a":2}"#, r#"{"b":{"a":1,"\u0061":2}}"#, r#"{"x":[{"k":1,"k":1}]}"#] {
            assert!(shape(dup.as_bytes()).is_ok(), "{dup}");
            assert!(check_member_names(dup.as_bytes()).unwrap_err().contains("used twice"), "{dup}");
        }
    }

    /// serde_json and this scanner refuse the same depth.
    #[test]
    fn nesting_limit_agrees_with_serde_json() {
        let ok = nested(MAX_NESTING);
        assert!(shape(ok.as_bytes()).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&ok).is_ok());
        let deep = nested(MAX_NESTING + 1);
        assert!(shape(deep.as_bytes()).unwrap_err().contains("nested too deeply (more than 127 levels)"));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
    }
}
