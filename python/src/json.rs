//! Python values as JSON values: the description `vds.create` hands over
//! and the attributes set through `attrs[...]`, converted without a detour
//! through JSON text, and bounded in depth, in the number of values and in
//! the bytes of their strings, whatever the Python objects (lists that hold
//! each other, subclasses with endless iterators) would expand to.

use crate::errors::invalid;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

/// How deep a description or an attribute may nest (the JSON reader's own
/// limit): a list that holds itself must end in an error, not in a stack
/// overflow.
const MAX_DEPTH: usize = 128;

/// The most values, and bytes of strings and keys, a description or an
/// attribute may hold:
/// a few small lists that hold each other twice over stand for millions of
/// values, and must end in an error before they are all built. Neither
/// bound is reached by a description whose descriptor fits its 64 MiB
/// (SPEC.md 3).
const MAX_VALUES: u64 = 1 << 21;
const MAX_TEXT: u64 = 64 << 20;

/// What a value may still hold as it is converted.
struct Budget {
    values: u64,
    text: u64,
}

impl Budget {
    fn take(&mut self, py: Python<'_>, what: &str, text: usize) -> PyResult<()> {
        match (self.values.checked_sub(1), self.text.checked_sub(text as u64)) {
            (Some(v), Some(t)) => {
                (self.values, self.text) = (v, t);
                Ok(())
            }
            _ => Err(invalid(py, format!("{what}: holds more than {MAX_VALUES} values or {} MiB of strings", MAX_TEXT >> 20))),
        }
    }
}

/// A string's text, or an InvalidArgumentError for one that is not Unicode
/// (a lone surrogate).
fn text(py: Python<'_>, what: &str, s: &Bound<'_, PyString>) -> PyResult<String> {
    s.to_cow().map(std::borrow::Cow::into_owned).map_err(|_| {
        invalid(
            py,
            format!(
                "{what}: the string {} is not valid Unicode (it holds a lone surrogate)",
                s.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ),
        )
    })
}

/// The JSON value of a description or an attribute (`what`, for errors):
/// dicts with string keys, lists, tuples, strings, integers, finite
/// floats, booleans, None, NumPy scalars and arrays. Converting here, rather
/// than through `json.dumps` and back, keeps the creation of a small file's
/// container cheap, and bounds what it builds. Lists and tuples are read by
/// index (a subclass's `__iter__` is not called).
pub(crate) fn to_json(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    json_value(py, obj, what, 0, &mut Budget { values: MAX_VALUES, text: MAX_TEXT })
}

fn json_value(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str, depth: usize, budget: &mut Budget) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(invalid(py, format!("{what}: nests more than {MAX_DEPTH} levels deep")));
    }
    if obj.is_none() {
        budget.take(py, what, 0)?;
        Ok(Value::Null)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        budget.take(py, what, 0)?;
        Ok(Value::Bool(b.is_true()))
    } else if let Ok(i) = obj.cast::<PyInt>() {
        budget.take(py, what, 0)?;
        match i.extract::<i64>() {
            Ok(n) => Ok(Value::from(n)),
            Err(_) => i.extract::<u64>().map(Value::from).map_err(|_| invalid(py, format!("{what}: the integer {i} is out of range"))),
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        budget.take(py, what, 0)?;
        let x = f.value();
        serde_json::Number::from_f64(x).map(Value::Number).ok_or_else(|| invalid(py, format!("{what}: {x} is not a finite number")))
    } else if let Ok(s) = obj.cast::<PyString>() {
        let t = text(py, what, s)?;
        budget.take(py, what, t.len())?;
        Ok(Value::String(t))
    } else if let Ok(d) = obj.cast::<PyDict>() {
        budget.take(py, what, 0)?;
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(invalid(py, format!("{what}: a key is {}, not a string", k.get_type().name()?)));
            };
            let key = text(py, what, key)?;
            budget.take(py, what, key.len())?;
            map.insert(key, json_value(py, &v, what, depth + 1, budget)?);
        }
        Ok(Value::Object(map))
    } else if let Ok(list) = obj.cast::<PyList>() {
        budget.take(py, what, 0)?;
        list.iter().map(|item| json_value(py, &item, what, depth + 1, budget)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        budget.take(py, what, 0)?;
        tuple.iter().map(|item| json_value(py, &item, what, depth + 1, budget)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else if obj.is_instance(&py.import("numpy")?.getattr("ndarray")?)? {
        // An array: its values as nested lists, once its size is known to fit.
        let size: u64 = obj.getattr("size")?.extract()?;
        if size > budget.values {
            return Err(invalid(py, format!("{what}: an array of {size} values, more than {MAX_VALUES} in all")));
        }
        json_value(py, &obj.call_method0("tolist")?, what, depth + 1, budget)
    } else if obj.is_instance(&py.import("numpy")?.getattr("generic")?)? {
        // A NumPy scalar (np.float32(0.5), np.int16(3), np.bool_(True)): its Python value. The
        // item of a longdouble is a longdouble: that one is taken as a float64.
        let item = obj.call_method0("item")?;
        if item.is_instance(&py.import("numpy")?.getattr("generic")?)? {
            return match obj.extract::<f64>() {
                Ok(x) if obj.is_instance(&py.import("numpy")?.getattr("floating")?)? => {
                    json_value(py, &PyFloat::new(py, x), what, depth + 1, budget)
                }
                _ => Err(invalid(py, format!("{what}: a value of type {}, where a JSON value belongs", obj.get_type().name()?))),
            };
        }
        json_value(py, &item, what, depth + 1, budget)
    } else {
        Err(invalid(py, format!("{what}: a value of type {}, where a JSON value belongs", obj.get_type().name()?)))
    }
}
