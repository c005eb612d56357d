//! Python values as JSON values: the description `vds.create` hands over
//! and the attributes set through `attrs[...]`, converted without a detour
//! through JSON text, and bounded in depth and in the memory the result
//! takes, whatever the Python objects (lists that hold each other,
//! subclasses with endless iterators) would expand to.

use crate::errors::invalid;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

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
struct Fail {
    at: Vec<Step>,
    why: Why,
}

enum Step {
    Key(String),
    Index(usize),
}

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

/// A string's text, refused when it is not Unicode (a lone surrogate).
fn text(s: &Bound<'_, PyString>) -> Converted<String> {
    s.to_cow().map(std::borrow::Cow::into_owned).map_err(|_| {
        Fail::refused(format!(
            "the string {} is not valid Unicode (it holds a lone surrogate)",
            s.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    })
}

/// The text of a dict key, as `json.dumps` makes it: strings as they are,
/// True, False and None as `true`, `false` and `null`, numbers in decimal.
fn key_text(py: Python<'_>, k: &Bound<'_, PyAny>) -> Converted<String> {
    if let Ok(s) = k.cast::<PyString>() {
        text(s)
    } else if k.is_none() {
        Ok("null".into())
    } else if let Ok(b) = k.cast::<PyBool>() {
        Ok(if b.is_true() { "true" } else { "false" }.into())
    } else if k.is_instance_of::<PyInt>() || k.is_instance_of::<PyFloat>() {
        match json_value(py, k, 0, &mut Budget(PER_VALUE))? {
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(Fail::refused("a key is not a number")),
        }
    } else {
        Err(Fail::refused(format!("a key is {}, not a string, a number, a boolean or None", k.get_type().name()?)))
    }
}

/// The JSON value of a description or an attribute (`what`, for errors,
/// which also say where in the value the part refused is): dicts, lists,
/// tuples, strings, integers, finite floats, booleans, None, NumPy scalars
/// and arrays. Converting here, rather than through `json.dumps` and back,
/// keeps the creation of a small file's container cheap, and bounds what it
/// builds. Lists and tuples are read by index (a subclass's `__iter__` is
/// not called); a dict is read from a copy of its items, so a value that
/// changes it cannot upset the conversion.
pub(crate) fn to_json(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    json_value(py, obj, 0, &mut Budget(BUDGET)).map_err(|f| f.into_py(py, what))
}

/// The items of a list or tuple, each converted, a failure placed at its index.
fn array<'py>(py: Python<'py>, items: impl Iterator<Item = Bound<'py, PyAny>>, depth: usize, budget: &mut Budget) -> Converted<Value> {
    items
        .enumerate()
        .map(|(i, item)| json_value(py, &item, depth + 1, budget).map_err(|f| f.within(Step::Index(i))))
        .collect::<Converted<Vec<_>>>()
        .map(Value::Array)
}

fn json_value(py: Python<'_>, obj: &Bound<'_, PyAny>, depth: usize, budget: &mut Budget) -> Converted<Value> {
    if depth > MAX_DEPTH {
        return Err(Fail::whole(format!("nests more than {MAX_DEPTH} levels deep")));
    }
    budget.take(PER_VALUE)?;
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if let Ok(i) = obj.cast::<PyInt>() {
        match i.extract::<i64>() {
            Ok(n) => Ok(Value::from(n)),
            Err(_) => i.extract::<u64>().map(Value::from).map_err(|_| Fail::refused("an integer beyond -2**63 .. 2**64 - 1")),
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        serde_json::Number::from_f64(x).map(Value::Number).ok_or_else(|| Fail::refused(format!("{x} is not a finite number")))
    } else if let Ok(s) = obj.cast::<PyString>() {
        let t = text(s)?;
        budget.take(PER_BYTE.saturating_mul(t.len() as u64))?;
        Ok(Value::String(t))
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let items = d.items();
        if !items.is_empty() {
            budget.take(PER_CONTAINER)?;
        }
        let mut map = Map::new();
        for item in items.iter() {
            let (k, v) = item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
            let key = key_text(py, &k)?;
            budget.take(PER_MEMBER.saturating_add(PER_BYTE.saturating_mul(key.len() as u64)))?;
            match json_value(py, &v, depth + 1, budget) {
                Ok(value) => map.insert(key, value),
                Err(f) => return Err(f.within(Step::Key(key))),
            };
        }
        Ok(Value::Object(map))
    } else if let Ok(list) = obj.cast::<PyList>() {
        if !list.is_empty() {
            budget.take(PER_CONTAINER)?;
        }
        array(py, list.iter(), depth, budget)
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        if !tuple.is_empty() {
            budget.take(PER_CONTAINER)?;
        }
        array(py, tuple.iter(), depth, budget)
    } else if obj.is_instance(&py.import("numpy")?.getattr("ndarray")?)? {
        // An array: its values as nested lists, once their number is known to fit.
        let size: u64 = obj.getattr("size")?.extract()?;
        budget.take(PER_VALUE.saturating_mul(size))?;
        json_value(py, &obj.call_method0("tolist")?, depth + 1, budget)
    } else if obj.is_instance(&py.import("numpy")?.getattr("generic")?)? {
        // A NumPy scalar (np.float32(0.5), np.int16(3), np.bool_(True)): its Python value. The
        // item of a longdouble is a longdouble: that one is taken as a float64.
        let item = obj.call_method0("item")?;
        if item.is_instance(&py.import("numpy")?.getattr("generic")?)? {
            return match obj.extract::<f64>() {
                Ok(x) if obj.is_instance(&py.import("numpy")?.getattr("floating")?)? => {
                    json_value(py, &PyFloat::new(py, x), depth + 1, budget)
                }
                _ => Err(Fail::refused(format!("a value of type {}, where a JSON value belongs", obj.get_type().name()?))),
            };
        }
        json_value(py, &item, depth + 1, budget)
    } else {
        Err(Fail::refused(format!("a value of type {}, where a JSON value belongs", obj.get_type().name()?)))
    }
}
