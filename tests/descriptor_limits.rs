//! Opening a container parses its descriptor within the bound SPEC.md
//! section 3 states ("Size and parse memory"): for descriptors of every
//! shape (long arrays of numbers, of strings, of empty arrays and objects,
//! objects with many members, long strings, deep nesting, the most
//! variables and slots), the memory allocated while the container opens
//! stays below `96 * values + 256 * members + 384 * containers + 4 * length`
//! (containers: arrays and objects that are not empty), the estimate the
//! library checks against the caller's memory limit before it parses. A
//! 64 MiB descriptor of one array of zeros once took 2.4 GB to open.

mod common;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the bytes this thread has allocated, and their peak.
struct Counting;

thread_local! {
    static NOW: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = NOW.try_with(|n| {
        let v = n.get() + delta;
        n.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        // SAFETY: as the caller promised for `l`.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        track(-(l.size() as isize));
        // SAFETY: as the caller promised for `p` and `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        // SAFETY: as the caller promised for `l`.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        track(new as isize - l.size() as isize);
        // SAFETY: as the caller promised for `p`, `l` and `new`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// JSON values, object members, and arrays and objects that are not empty, of a parsed text.
fn count(v: &vds::serde_json::Value) -> [u64; 3] {
    use vds::serde_json::Value;
    let add = |a: [u64; 3], b: [u64; 3]| [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
    match v {
        Value::Array(a) => a.iter().map(count).fold([1, 0, u64::from(!a.is_empty())], add),
        Value::Object(o) => o.values().map(count).fold([1, o.len() as u64, u64::from(!o.is_empty())], add),
        _ => [1, 0, 0],
    }
}

fn with(variables: &str, slots: &str, attributes: &str) -> String {
    format!(
        r#"{{"format":"vds","version":[1,3],"axes":[{{"name":"x","samples":3,"first":0,"last":2}}],"variables":[{variables}],"slots":[{slots}],"attributes":{attributes}}}"#
    )
}

/// What opening allocates besides the parse: the file's first 64 KiB, the
/// commit slots, the dataset's caches.
const OPEN_ALLOWANCE: u64 = 1 << 20;

const VAR: &str = r#"{"name":"v","dtype":"int8","axes":["x"],"chunk":[2],"fill":0,"codec":{"id":"none"}}"#;

#[test]
fn opening_allocates_less_than_the_parse_estimate() {
    let n = 1 << 17;
    let list = |item: &str| vec![item; n].join(",");
    let shapes: Vec<(&str, String)> = vec![
        ("zeros", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("0")))),
        ("floats", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("0.5")))),
        ("short strings", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list(r#""a""#)))),
        ("empty arrays", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("[]")))),
        ("empty objects", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("{}")))),
        ("nulls", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("null")))),
        ("many members", with(VAR, "", &format!("{{{}}}", (0..n).map(|i| format!(r#""{i}":0"#)).collect::<Vec<_>>().join(",")))),
        ("small objects", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list(r#"{"a":0}"#)))),
        ("two-member objects", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list(r#"{"a":0,"b":[]}"#)))),
        ("one-element arrays", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list("[0]")))),
        ("objects in objects", with(VAR, "", &format!(r#"{{"z":[{}]}}"#, list(r#"{"a":{"b":{}}}"#)))),
        ("one long string", with(VAR, "", &format!(r#"{{"z":"{}"}}"#, "x".repeat(4 << 20)))),
        ("deep nesting", with(VAR, "", &format!(r#"{{"z":{}{}}}"#, "[".repeat(125), "]".repeat(125)))),
        (
            "most variables",
            with(&(0..65_535).map(|i| VAR.replace(r#""name":"v""#, &format!(r#""name":"v{i}""#))).collect::<Vec<_>>().join(","), "", "{}"),
        ),
        ("most slots", with(VAR, &(0..65_535).map(|i| format!(r#"{{"name":"s{i}"}}"#)).collect::<Vec<_>>().join(","), "{}")),
    ];
    let mut table = String::new();
    for (name, text) in shapes {
        let [values, members, containers] = count(&vds::serde_json::from_str(&text).unwrap());
        let estimate = 96 * values + 256 * members + 384 * containers + 4 * text.len() as u64;
        let storage = std::sync::Arc::new(vds::MemoryStorage::from_bytes(&common::container_with_descriptor(text.as_bytes())));
        let before = NOW.with(Cell::get);
        PEAK.with(|p| p.set(before));
        let started = std::time::Instant::now();
        let ds = vds::OpenOptions::new().memory_limit(estimate).open_storage(storage).unwrap();
        let took = started.elapsed().as_secs_f64() * 1000.0;
        let peak = (PEAK.with(Cell::get) - before) as u64;
        drop(ds);
        table += &format!("| {name} | {} | {values} | {peak} | {estimate} | {took:.0} ms |\n", text.len());
        eprintln!("{name}: {} bytes, {values} values, {members} members: peak {peak}, estimate {estimate}", text.len());
        assert!(peak <= estimate + OPEN_ALLOWANCE, "{name}: opening allocated {peak} bytes, more than the estimate of {estimate}");
        // And one byte less than the estimate refuses it before parsing.
        let storage = std::sync::Arc::new(vds::MemoryStorage::from_bytes(&common::container_with_descriptor(text.as_bytes())));
        let e = vds::OpenOptions::new().memory_limit(estimate - 1).open_storage(storage).err().unwrap();
        assert_eq!(e.kind(), vds::ErrorKind::OutOfMemory, "{name}: {e}");
    }
    common::record_reliability(
        "descriptor-memory",
        &format!(
            "## Hostile descriptors (tests/descriptor_limits.rs)\n\n\
             Legal descriptors of extreme shapes are opened with the memory limit set to the parse estimate \
             (96 bytes a value, 256 a member, 384 a non-empty container, 4 a byte of text), counting every \
             allocation: each peak stays under the estimate (plus 1 MiB for the rest of an open), one byte \
             less refuses the file before parsing, and opening is linear in the number of names.\n\n\
             | descriptor | bytes | JSON values | peak allocated | estimate | open time |\n|---|---|---|---|---|---|\n{table}\n"
        ),
    );
}
