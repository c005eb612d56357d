//! Python values read as serde data: the description `vds.create` hands
//! over, straight into its typed fields, and the JSON values of attributes,
//! without a detour through JSON text or (for the description) through JSON
//! values; bounded in depth and in the memory the result takes, whatever the
//! Python objects (lists that hold each other, subclasses with endless
//! iterators) would expand to. An error says where in the value it arose.

use crate::errors::invalid;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::fmt;

/// How deep a description or an attribute may nest (the JSON reader's own
/// limit): a list that holds itself must end in an error, not in a stack
/// overflow.
const MAX_DEPTH: usize = 128;

/// What a converted value may cost, by SPEC.md 3.5's bound on the memory a
/// descriptor's parse takes (96 bytes a value, 256 an object member, 384 a
/// non-empty array or object, 4 a byte of text), against the library's
/// default memory limit: what fits here is what a writer with that limit
/// commits, and a few small lists that hold each other twice over, which
/// stand for millions of values, end in an error before they are built.
const BUDGET: u64 = 1 << 30;
const PER_VALUE: u64 = 96;
const PER_MEMBER: u64 = 256;
const PER_CONTAINER: u64 = 384;
const PER_BYTE: u64 = 4;

/// Why a conversion failed, and where: the keys and indices from the value
/// converted down to the part refused, innermost first (added as the
/// failure travels out, so a conversion that succeeds pays nothing for it).
#[derive(Debug)]
struct Fail {
    at: Vec<Step>,
    why: Why,
}

#[derive(Debug)]
enum Step {
    Key(String),
    Index(usize),
}

#[derive(Debug)]
enum Why {
    /// Refused here: the message, without its place.
    Refused(String),
    /// Refused for the value as a whole (too large, too deep): no one place is to blame.
    Whole(String),
    /// Raised by Python while reading the value (a NumPy method): passed on as it is.
    Raised(PyErr),
}

impl Fail {
    fn refused(why: impl Into<String>) -> Fail {
        Fail { at: Vec::new(), why: Why::Refused(why.into()) }
    }

    fn whole(why: impl Into<String>) -> Fail {
        Fail { at: Vec::new(), why: Why::Whole(why.into()) }
    }

    fn within(mut self, step: Step) -> Fail {
        if let Why::Refused(_) = self.why {
            self.at.push(step);
        }
        self
    }

    /// The exception: InvalidArgumentError("{what}: at {place}: {why}"), the
    /// place written as subscripts (`["attrs"]["scale"][2]`: keys as their
    /// JSON text, quoted and escaped, indices as numbers), left out at the top.
    fn into_py(self, py: Python<'_>, what: &str) -> PyErr {
        match self.why {
            Why::Raised(e) => e,
            Why::Whole(why) => invalid(py, format!("{what}: {why}")),
            Why::Refused(why) => {
                let place: String = self
                    .at
                    .iter()
                    .rev()
                    .map(|s| match s {
                        Step::Key(k) => format!("[{k:?}]"),
                        Step::Index(i) => format!("[{i}]"),
                    })
                    .collect();
                if place.is_empty() {
                    invalid(py, format!("{what}: {why}"))
                } else {
                    invalid(py, format!("{what}: at {place}: {why}"))
                }
            }
        }
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Why::Refused(why) | Why::Whole(why) => f.write_str(why),
            Why::Raised(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Fail {}

/// What serde's derived readers refuse (a missing or unknown field, a
/// string where a number belongs), placed as any other refusal is.
impl de::Error for Fail {
    fn custom<T: fmt::Display>(msg: T) -> Fail {
        Fail::refused(msg.to_string())
    }
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Fail {
        Fail { at: Vec::new(), why: Why::Raised(e) }
    }
}

type Converted<T> = Result<T, Fail>;

/// What a value may still cost as it is converted.
struct Budget(u64);

impl Budget {
    fn take(&mut self, cost: u64) -> Converted<()> {
        match self.0.checked_sub(cost) {
            Some(left) => {
                self.0 = left;
                Ok(())
            }
            None => Err(Fail::whole(format!(
                "holds more than a descriptor parsed within {} MiB takes (SPEC.md 3.5: 96 bytes a value, 4 a byte of text)",
                BUDGET >> 20
            ))),
        }
    }
}

/// A string's text as UTF-8 (Python's own encoding of it, borrowed, not
/// copied), refused when it is not Unicode (a lone surrogate).
fn utf8<'py>(s: &Bound<'py, PyString>) -> Converted<Bound<'py, pyo3::types::PyBytes>> {
    s.encode_utf8().map_err(|_| {
        Fail::refused(format!(
            "the string {} is not valid Unicode (it holds a lone surrogate)",
            s.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    })
}

fn as_str<'a>(bytes: &'a Bound<'_, pyo3::types::PyBytes>) -> &'a str {
    use pyo3::types::PyBytesMethods;
    // SAFETY: Python's UTF-8 encoder made these bytes, so they are UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes.as_bytes()) }
}

/// A Python int or float as a JSON number: integers of -2**63 to
/// 2**64 - 1, finite floats.
fn number(obj: &Bound<'_, PyAny>) -> Converted<Number> {
    if let Ok(i) = obj.cast::<PyInt>() {
        match i.extract::<i64>() {
            Ok(n) => Ok(n.into()),
            Err(_) => i.extract::<u64>().map(Number::from).map_err(|_| Fail::refused("an integer beyond -2**63 .. 2**64 - 1")),
        }
    } else {
        let x: f64 = obj.extract()?;
        Number::from_f64(x).ok_or_else(|| Fail::refused(format!("{x} is not a finite number")))
    }
}

/// The text of a dict key that is not a string, as `json.dumps` makes it:
/// True, False and None as `true`, `false` and `null`, integers in
/// decimal, finite floats as Python writes them (`1e-05`, `1e+16`).
fn key_text(k: &Bound<'_, PyAny>) -> Converted<String> {
    if k.is_none() {
        Ok("null".into())
    } else if let Ok(b) = k.cast::<PyBool>() {
        Ok(if b.is_true() { "true" } else { "false" }.into())
    } else if k.is_instance_of::<PyInt>() {
        number(k).map(|n| n.to_string())
    } else if k.is_instance_of::<PyFloat>() {
        number(k)?;
        Ok(k.py().get_type::<PyFloat>().getattr("__repr__")?.call1((k,))?.extract()?)
    } else {
        Err(Fail::refused(format!("a key is {}, not a string, a number, a boolean or None", k.get_type().name()?)))
    }
}

/// The JSON value of an attribute (`what`, for errors, which also say where
/// in the value the part refused is): dicts, lists, tuples, strings,
/// integers, finite floats, booleans, None, NumPy scalars and arrays.
/// Lists and tuples are read by index (a subclass's `__iter__` is not
/// called); a dict is read from a copy of its items, so a value that
/// changes it cannot upset the conversion.
pub(crate) fn to_json(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    from_py(py, obj, what)
}

/// A description read from Python values as [`to_json`] reads them, each
/// straight into the field of `T` it belongs to: a misspelt field, a value
/// of the wrong type, or a value JSON cannot hold is an
/// `InvalidArgumentError` saying where it is.
pub(crate) fn from_py<T: DeserializeOwned>(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    T::deserialize(Reader { obj, depth: 0, budget: &mut Budget(BUDGET) }).map_err(|f| f.into_py(py, what))
}

/// Reads one Python value for serde, at nesting `depth`.
struct Reader<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    depth: usize,
    budget: &'a mut Budget,
}

impl<'de> de::Deserializer<'de> for Reader<'_, '_> {
    type Error = Fail;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Converted<V::Value> {
        let (obj, py) = (self.obj, self.obj.py());
        if self.depth > MAX_DEPTH {
            return Err(Fail::whole(format!("nests more than {MAX_DEPTH} levels deep")));
        }
        self.budget.take(PER_VALUE)?;
        if obj.is_none() {
            visitor.visit_unit()
        } else if let Ok(b) = obj.cast::<PyBool>() {
            visitor.visit_bool(b.is_true())
        } else if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() {
            let n = number(obj)?;
            if let Some(i) = n.as_i64() {
                visitor.visit_i64(i)
            } else if let Some(u) = n.as_u64() {
                visitor.visit_u64(u)
            } else {
                visitor.visit_f64(n.as_f64().unwrap_or_default())
            }
        } else if let Ok(s) = obj.cast::<PyString>() {
            let bytes = utf8(s)?;
            let text = as_str(&bytes);
            self.budget.take(PER_BYTE.saturating_mul(text.len() as u64))?;
            visitor.visit_str(text)
        } else if let Ok(d) = obj.cast::<PyDict>() {
            let items = d.items();
            if !items.is_empty() {
                self.budget.take(PER_CONTAINER)?;
            }
            let len = items.len();
            let seen = may_repeat(&items).then(std::collections::HashMap::new);
            let mut members = Members { items, next: 0, key: None, value: None, seen, depth: self.depth, budget: self.budget };
            let value = visitor.visit_map(&mut members)?;
            // What a reader of a fixed number of members left unread is refused, not dropped.
            match members.next {
                read if read < len => Err(de::Error::invalid_length(len, &&*format!("a map of {read} members"))),
                _ => Ok(value),
            }
        } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
            if seq_len(obj) > 0 {
                self.budget.take(PER_CONTAINER)?;
            }
            let mut items = Items { seq: obj, next: 0, depth: self.depth, budget: self.budget };
            let value = visitor.visit_seq(&mut items)?;
            // A list longer than a fixed-length field ([before, after]) is refused, not cut short.
            match seq_len(obj) {
                len if items.next < len => Err(de::Error::invalid_length(len, &&*format!("a list of {} elements", items.next))),
                _ => Ok(value),
            }
        } else if obj.is_instance(&py.import("numpy")?.getattr("ndarray")?)? {
            // An array: its values as nested lists, once their number and their bytes are known
            // to fit (a broadcast view of one long string holds many copies of it as a list).
            let size: u64 = obj.getattr("size")?.extract()?;
            let nbytes: u64 = obj.getattr("nbytes")?.extract()?;
            self.budget.take(PER_VALUE.saturating_mul(size).saturating_add(PER_BYTE.saturating_mul(nbytes)))?;
            let list = obj.call_method0("tolist")?;
            Reader { obj: &list, depth: self.depth + 1, budget: self.budget }.deserialize_any(visitor)
        } else if obj.is_instance(&py.import("numpy")?.getattr("generic")?)? {
            // A NumPy scalar (np.float32(0.5), np.int16(3), np.bool_(True)): its Python value. The
            // item of a longdouble is a longdouble: that one is taken as a float64.
            let mut item = obj.call_method0("item")?;
            if item.is_instance(&py.import("numpy")?.getattr("generic")?)? {
                match obj.extract::<f64>() {
                    Ok(x) if obj.is_instance(&py.import("numpy")?.getattr("floating")?)? => item = PyFloat::new(py, x).into_any(),
                    _ => return Err(Fail::refused(format!("a value of type {}, where a JSON value belongs", obj.get_type().name()?))),
                }
            }
            Reader { obj: &item, depth: self.depth + 1, budget: self.budget }.deserialize_any(visitor)
        } else {
            Err(Fail::refused(format!("a value of type {}, where a JSON value belongs", obj.get_type().name()?)))
        }
    }

    /// None is an optional field left out.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Converted<V::Value> {
        if self.obj.is_none() {
            self.budget.take(PER_VALUE)?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The members of a dict, from a copy of its items; a failure in a value is
/// placed at its key.
struct Members<'a, 'py> {
    items: Bound<'py, PyList>,
    next: usize,
    key: Option<Bound<'py, PyAny>>,
    value: Option<Bound<'py, PyAny>>,
    /// The keys' texts so far, and the position of each key, when two keys
    /// may have one text (see [`may_repeat`]): refused, as `json.dumps`
    /// would write both and a reader keep one.
    seen: Option<std::collections::HashMap<String, usize>>,
    depth: usize,
    budget: &'a mut Budget,
}

/// Whether two keys of a dict (its items) may have one text in JSON: only
/// when some key is not exactly a str (distinct exact strs are distinct
/// texts; a str subclass may hash and compare as it likes).
fn may_repeat(items: &Bound<'_, PyList>) -> bool {
    items.iter().any(|kv| {
        let key = kv.cast_into::<PyTuple>().ok().and_then(|kv| kv.get_item(0).ok());
        key.is_none_or(|k| !k.is_exact_instance_of::<PyString>())
    })
}

impl Members<'_, '_> {
    /// Refuses `key`, the last one read and written as `text`, when a key
    /// before it was written so.
    fn once(&mut self, key: &Bound<'_, PyAny>, text: &str) -> Converted<()> {
        let Some(seen) = &mut self.seen else { return Ok(()) };
        match seen.entry(text.to_owned()) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let (first, _) = self.items.get_item(*first.get())?.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
                Err(Fail::refused(format!("the keys {} and {} are the same key in JSON", first.repr()?, key.repr()?)))
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(self.next - 1);
                Ok(())
            }
        }
    }
}

impl<'de> MapAccess<'de> for Members<'_, '_> {
    type Error = Fail;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Converted<Option<K::Value>> {
        if self.next >= self.items.len() {
            return Ok(None);
        }
        let (k, v) = self.items.get_item(self.next)?.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
        self.next += 1;
        let key = match k.cast::<PyString>() {
            Ok(s) => {
                let bytes = utf8(s)?;
                let text = as_str(&bytes);
                self.budget.take(PER_MEMBER.saturating_add(PER_BYTE.saturating_mul(text.len() as u64)))?;
                self.once(&k, text)?;
                seed.deserialize(de::value::StrDeserializer::<Fail>::new(text))?
            }
            Err(_) => {
                let text = key_text(&k)?;
                self.budget.take(PER_MEMBER.saturating_add(PER_BYTE.saturating_mul(text.len() as u64)))?;
                self.once(&k, &text)?;
                seed.deserialize(de::value::StringDeserializer::<Fail>::new(text))?
            }
        };
        (self.key, self.value) = (Some(k), Some(v));
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Converted<V::Value> {
        let (Some(k), Some(v)) = (self.key.take(), self.value.take()) else {
            return Err(Fail::refused("a value asked for before its key"));
        };
        seed.deserialize(Reader { obj: &v, depth: self.depth + 1, budget: self.budget }).map_err(|f| {
            // The key was read once already: its text is at hand.
            let text = match k.cast::<PyString>() {
                Ok(s) => s.to_string_lossy().into_owned(),
                Err(_) => key_text(&k).unwrap_or_default(),
            };
            f.within(Step::Key(text))
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len().saturating_sub(self.next))
    }
}

/// The length of a list or tuple as the object holds it (a subclass's `__len__` is not called).
fn seq_len(seq: &Bound<'_, PyAny>) -> usize {
    match seq.cast::<PyList>() {
        Ok(list) => list.len(),
        Err(_) => seq.cast::<PyTuple>().map_or(0, |t| t.len()),
    }
}

/// The items of a list or tuple, read by index; a failure is placed at its index.
struct Items<'a, 'py> {
    seq: &'a Bound<'py, PyAny>,
    next: usize,
    depth: usize,
    budget: &'a mut Budget,
}

impl<'de> SeqAccess<'de> for Items<'_, '_> {
    type Error = Fail;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Converted<Option<T::Value>> {
        let i = self.next;
        let item = if let Ok(list) = self.seq.cast::<PyList>() {
            if i >= list.len() {
                return Ok(None);
            }
            list.get_item(i)?
        } else {
            let tuple = self.seq.cast::<PyTuple>().map_err(PyErr::from)?;
            if i >= tuple.len() {
                return Ok(None);
            }
            tuple.get_item(i)?
        };
        self.next += 1;
        seed.deserialize(Reader { obj: &item, depth: self.depth + 1, budget: self.budget }).map(Some).map_err(|f| f.within(Step::Index(i)))
    }
}
