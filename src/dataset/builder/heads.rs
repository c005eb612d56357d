//! The heads of containers made recently, by their description: creating
//! many containers of one schema (a small file each) makes and checks its
//! descriptor once.
//!
//! A new container's head is a function of its builder's axes, variables,
//! attributes, external-file slots and layout. Making it (the descriptor,
//! its JSON text, the check that it reads back) cost about a third of
//! creating, writing and closing a small container in memory. The last few
//! heads made are kept with a copy of what made them, and a builder that
//! describes the same container exactly takes a copy of the head.
//!
//! "Exactly" means that the JSON text would be the same: floating-point
//! numbers (coordinates, fill values, quantization ranges, attribute
//! values) compare by their bits, so that 0.0 and -0.0 are different
//! descriptions and a NaN is the same as itself, and attribute members
//! compare in order, as they are written. Every field of each builder is
//! named in the comparisons below, so a field added to one must be added
//! here before the library compiles.

use super::{DatasetBuilder, NewHead, VariableBuilder};
use crate::spec::{Axis, Scalar};
use serde_json::{Map, Value};
use std::sync::Mutex;

/// How many heads are kept, the largest descriptor kept and the most
/// layers its variables may have (as the descriptor parser's own memo).
const KEEP: usize = 4;
const KEEP_BYTES: usize = 16 << 10;
const KEEP_LAYERS: usize = 64;

type Recent = Vec<(DatasetBuilder, NewHead)>;
static RECENT: Mutex<Recent> = Mutex::new(Vec::new());

/// The head made last for a builder describing the same container as `b`.
pub(super) fn find(b: &DatasetBuilder) -> Option<NewHead> {
    let recent = RECENT.lock().ok()?;
    recent.iter().find(|(kept, _)| same_container(kept, b)).map(|(_, head)| head.clone())
}

/// Keeps `head`, made for `b`, when its descriptor is small.
pub(super) fn keep(b: &DatasetBuilder, head: &NewHead) {
    let (bytes, layers) = head.size();
    if bytes > KEEP_BYTES || layers > KEEP_LAYERS {
        return;
    }
    if let Ok(mut recent) = RECENT.lock() {
        if !recent.iter().any(|(kept, _)| same_container(kept, b)) {
            recent.truncate(KEEP - 1);
            recent.insert(0, (b.clone(), head.clone()));
        }
    }
}

/// Whether two builders make the same head (their overwrite and durability settings aside).
fn same_container(a: &DatasetBuilder, b: &DatasetBuilder) -> bool {
    let DatasetBuilder { axes, variables, slots, attributes, overwrite: _, durability: _, layout } = a;
    axes.len() == b.axes.len()
        && axes.iter().zip(&b.axes).all(|(x, y)| same_axis(x, y))
        && variables.len() == b.variables.len()
        && variables.iter().zip(&b.variables).all(|(x, y)| same_variable(x, y))
        && *slots == b.slots
        && same_members(attributes, &b.attributes)
        && *layout == b.layout
}

fn same_axis(a: &Axis, b: &Axis) -> bool {
    let Axis { name, unit, samples, first, last, growable, max_samples } = a;
    *name == b.name
        && *unit == b.unit
        && *samples == b.samples
        && first.to_bits() == b.first.to_bits()
        && last.to_bits() == b.last.to_bits()
        && *growable == b.growable
        && *max_samples == b.max_samples
}

fn same_variable(a: &VariableBuilder, b: &VariableBuilder) -> bool {
    let VariableBuilder {
        name,
        unit,
        dtype,
        axes,
        chunk,
        fill,
        codec,
        attributes,
        lod,
        partitionings,
        blocks,
        fill_set,
        no_value,
        quantization,
        mask,
        margin,
    } = a;
    *name == b.name
        && *unit == b.unit
        && *dtype == b.dtype
        && *axes == b.axes
        && *chunk == b.chunk
        && same_scalar(fill, &b.fill)
        // Compression compares a tolerance by its bits.
        && *codec == b.codec
        && same_members(attributes, &b.attributes)
        && *lod == b.lod
        && *partitionings == b.partitionings
        && *blocks == b.blocks
        && *fill_set == b.fill_set
        && match (no_value, &b.no_value) {
            (Some(x), Some(y)) => same_scalar(x, y),
            (x, y) => x.is_none() && y.is_none(),
        }
        && match (quantization, &b.quantization) {
            (Some((t, lo, hi)), Some((u, lo2, hi2))) => t == u && lo.to_bits() == lo2.to_bits() && hi.to_bits() == hi2.to_bits(),
            (x, y) => x.is_none() && y.is_none(),
        }
        && *mask == b.mask
        && *margin == b.margin
}

fn same_scalar(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => x.to_bits() == y.to_bits(),
        (Scalar::Float(_), _) | (_, Scalar::Float(_)) => false,
        _ => a == b,
    }
}

/// Attribute maps with the same members in the same order (the order they are written in).
fn same_members(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|((k, x), (l, y))| k == l && same_value(x, y))
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.is_f64(), y.is_f64()) {
            (true, true) => x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits),
            (false, false) => x == y,
            // An integer and a float of one value are written differently (1 and 1.0).
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q)),
        (Value::Object(x), Value::Object(y)) => same_members(x, y),
        (Value::Number(_) | Value::Array(_) | Value::Object(_), _) | (_, Value::Number(_) | Value::Array(_) | Value::Object(_)) => false,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Axis, DType};

    fn builder(fill: f64, first: f64, attr: Value) -> DatasetBuilder {
        let mut b = DatasetBuilder::new();
        b.axis(Axis::new("x", 4).coordinates(first, 3.0));
        let mut v = VariableBuilder::new("v", DType::Float64, &["x"]);
        v.fill(Scalar::Float(fill));
        v.attribute("a", attr);
        b.variable(&v);
        b
    }

    #[test]
    fn floats_compare_by_their_bits_and_members_in_order() {
        let a = builder(0.0, 0.0, serde_json::json!(1.5));
        assert!(same_container(&a, &builder(0.0, 0.0, serde_json::json!(1.5))));
        assert!(!same_container(&a, &builder(-0.0, 0.0, serde_json::json!(1.5))));
        assert!(!same_container(&a, &builder(0.0, -0.0, serde_json::json!(1.5))));
        assert!(!same_container(&a, &builder(0.0, 0.0, serde_json::json!(-1.5))));
        assert!(!same_container(&a, &builder(0.0, 0.0, serde_json::json!(1))));
        assert!(same_container(&builder(f64::NAN, 0.0, Value::Null), &builder(f64::NAN, 0.0, Value::Null)));
        assert!(!same_container(&builder(0.0, 0.0, serde_json::json!(0)), &builder(0.0, 0.0, serde_json::json!(0.0))));
        let members = |pairs: &[(&str, i64)]| Value::Object(pairs.iter().map(|&(k, v)| (k.to_string(), Value::from(v))).collect());
        let x = builder(0.0, 0.0, members(&[("p", 1), ("q", 2)]));
        assert!(same_container(&x, &builder(0.0, 0.0, members(&[("p", 1), ("q", 2)]))));
        assert!(!same_container(&x, &builder(0.0, 0.0, members(&[("p", 1), ("q", 3)]))));
        // Members are written in the order they were given (serde_json's preserve_order): in
        // another order they are another descriptor text, so another description.
        let (pq, qp) = (members(&[("p", 1), ("q", 2)]), members(&[("q", 2), ("p", 1)]));
        assert_ne!(serde_json::to_string(&pq).unwrap(), serde_json::to_string(&qp).unwrap());
        assert!(!same_container(&x, &builder(0.0, 0.0, qp)));
        // Settings that do not reach the file do not count.
        let mut y = builder(0.0, 0.0, members(&[("p", 1), ("q", 2)]));
        y.overwrite(true);
        assert!(same_container(&x, &y));
    }
}
