//! A file is always readable at its last successful commit, whatever fails
//! during a write. A scripted multi-commit workload runs on a storage layer
//! that injects one fault at a time — the N-th write fails, is torn after
//! half its bytes, or hits a full disk; the N-th fsync fails — for every N.
//! After each fault the process is taken to have died, and every file image
//! the fault can leave is reopened and compared with an in-memory reference:
//! the live image (the process died, the OS kept its writes), the durable
//! image (power loss: only synced bytes survive), the durable image plus any
//! one unsynced write (the disk reordered them), and the durable image plus
//! each prefix of the unsynced writes, the last one torn (power loss midway
//! through flushing). Each must show exactly the last commit that succeeded,
//! or the one in flight when its commit had not yet returned. The workload
//! runs in both layouts (SPEC.md 1.1): in the compact one it crosses the
//! commit that moves the index from 256-byte to 4096-byte pages.

mod common;
use common::{layout_of, record_reliability};
use std::collections::BTreeSet;
use std::io;
use std::sync::{Arc, Mutex};
use vds::serde_json::{json, Value};
use vds::{
    Axis, Codec, DType, DatasetBuilder, Durability, ErrorKind, Layout, MemoryStorage, OpenOptions, Order, Region, Storage, VariableBuilder,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    FailWrite,
    TornWrite,
    NoSpace,
    FailSync,
}

#[derive(Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Default)]
struct State {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Op>,
    ops: u64,
    fault: Option<(u64, Fault)>,
    fired: bool,
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(off, data) => {
            let (a, b) = (*off as usize, *off as usize + data.len());
            if image.len() < b {
                image.resize(b, 0);
            }
            image[a..b].copy_from_slice(data);
        }
        Op::SetLen(n) => image.resize(*n as usize, 0),
    }
}

/// A storage that keeps live and durable images and fails one chosen operation.
#[derive(Clone, Default)]
struct FaultyStorage(Arc<Mutex<State>>);

impl FaultyStorage {
    fn with_fault(fault: Option<(u64, Fault)>) -> FaultyStorage {
        let s = FaultyStorage::default();
        s.0.lock().unwrap().fault = fault;
        s
    }
    /// The fault planned for the operation starting now, if any; `sync`
    /// says whether it is an fsync (only FailSync applies) or a write (the others apply).
    fn next_op(&self, sync: bool) -> Option<Fault> {
        let mut s = self.0.lock().unwrap();
        let n = s.ops;
        s.ops += 1;
        match s.fault {
            Some((at, f)) if at == n && sync == (f == Fault::FailSync) => {
                s.fired = true;
                Some(f)
            }
            _ => None,
        }
    }
    fn record(&self, op: Op) {
        let mut s = self.0.lock().unwrap();
        apply(&mut s.live, &op);
        s.unsynced.push(op);
    }
    /// Every image a crash after the fault can leave on disk.
    fn crash_images(&self) -> Vec<(&'static str, Vec<u8>)> {
        let s = self.0.lock().unwrap();
        let mut images = vec![("live", s.live.clone()), ("durable", s.durable.clone())];
        // Disks may reorder writes between syncs: any one unsynced write alone.
        for op in &s.unsynced {
            let mut one = s.durable.clone();
            apply(&mut one, op);
            images.push(("durable+one", one));
        }
        let mut img = s.durable.clone();
        for op in &s.unsynced {
            // This write reaches the disk torn, then everything before it whole.
            if let Op::Write(off, data) = op {
                let mut torn = img.clone();
                apply(&mut torn, &Op::Write(*off, data[..data.len() / 2].to_vec()));
                images.push(("durable+torn", torn));
            }
            apply(&mut img, op);
            images.push(("durable+prefix", img.clone()));
        }
        images
    }
}

fn injected(kind: Fault) -> io::Error {
    match kind {
        Fault::NoSpace => io::Error::from_raw_os_error(28),
        _ => io::Error::other(format!("injected {kind:?}")),
    }
}

impl Storage for FaultyStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().unwrap().live.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let s = self.0.lock().unwrap();
        let src = s.live.get(offset as usize..offset as usize + buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        match self.next_op(false) {
            None => {
                self.record(Op::Write(offset, data.to_vec()));
                Ok(())
            }
            Some(Fault::TornWrite) => {
                self.record(Op::Write(offset, data[..data.len() / 2].to_vec()));
                Err(injected(Fault::TornWrite))
            }
            Some(kind) => Err(injected(kind)),
        }
    }
    /// One operation, as `pwritev` is: a torn one writes the first half of the pieces joined.
    fn write_pieces_at(&self, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        self.write_at(offset, &pieces.concat())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        match self.next_op(false) {
            None => {
                self.record(Op::SetLen(len));
                Ok(())
            }
            Some(kind) => Err(injected(kind)),
        }
    }
    fn sync(&self) -> io::Result<()> {
        match self.next_op(true) {
            None => {
                let mut s = self.0.lock().unwrap();
                s.durable = s.live.clone();
                s.unsynced.clear();
                Ok(())
            }
            Some(kind) => Err(injected(kind)),
        }
    }
}

const SHAPE: [u64; 3] = [20, 16, 12];
const MAP: [u64; 2] = [20, 16];

/// The logical contents of a commit: the values of both variables and the attributes.
#[derive(Clone, PartialEq, Debug)]
struct Contents {
    /// Samples along the growable axis z.
    z: u64,
    volume: Vec<f32>,
    map: Vec<i16>,
    attributes: Value,
}

fn region(start: &[u64], shape: &[u64]) -> Region {
    Region::new(start, shape).unwrap()
}

/// One step of the workload: changes applied to the dataset and to the reference.
fn step(ds: &mut vds::Dataset, model: &mut Contents, k: usize) -> vds::Result<()> {
    let set = |m: &mut Contents, start: [u64; 3], shape: [u64; 3], f: &dyn Fn(usize) -> f32| -> Vec<f32> {
        let n = (shape[0] * shape[1] * shape[2]) as usize;
        let vals: Vec<f32> = (0..n).map(f).collect();
        let mut i = 0;
        for a in 0..shape[0] {
            for b in 0..shape[1] {
                for c in 0..shape[2] {
                    m.volume[(((start[0] + a) * SHAPE[1] + start[1] + b) * m.z + start[2] + c) as usize] = vals[i];
                    i += 1;
                }
            }
        }
        vals
    };
    match k {
        0 => {
            let v = set(model, [0, 0, 0], SHAPE, &|i| (i as f32 * 0.37).sin());
            ds.write("volume", &Region::full(&SHAPE)?, Order::C, &v)?;
        }
        1 => {
            let v = set(model, [3, 2, 1], [9, 10, 7], &|i| i as f32);
            ds.write("volume", &region(&[3, 2, 1], &[9, 10, 7]), Order::C, &v)?;
            model.map = (0..320).map(|i| (i * 7 % 100) as i16).collect();
            ds.write("map", &Region::full(&MAP)?, Order::C, &model.map)?;
        }
        2 => {
            model.attributes["step"] = json!(2);
            ds.set_attribute("step", Some(json!(2)))?;
            let v = set(model, [0, 8, 0], [20, 8, 12], &|_| 4.5);
            ds.write("volume", &region(&[0, 8, 0], &[20, 8, 12]), Order::C, &v)?;
        }
        3 => {
            // Too large for the head: the descriptor stays in the body.
            model.attributes["history"] = json!("h".repeat(9000));
            ds.set_attribute("history", Some(model.attributes["history"].clone()))?;
            let v = set(model, [10, 0, 6], [10, 16, 6], &|i| -(i as f32));
            ds.write("volume", &region(&[10, 0, 6], &[10, 16, 6]), Order::C, &v)?;
        }
        5 => {
            // The growable axis: three samples appended, then cut to 9.
            let v: Vec<f32> = (0..20 * 16 * 3).map(|i| i as f32 * 0.5).collect();
            ds.append("volume", "z", Order::C, &v)?;
            model.volume = resize_z(&model.volume, model.z, 15);
            model.z = 15;
            let _ = set(model, [0, 0, 12], [20, 16, 3], &|i| v[i]);
        }
        6 => {
            ds.resize_axis("z", 9)?;
            model.volume = resize_z(&model.volume, model.z, 9);
            model.z = 9;
        }
        _ => {
            for (i, x) in model.map.iter_mut().enumerate().take(160) {
                *x = -(i as i16);
            }
            ds.write("map", &region(&[0, 0], &[10, 16]), Order::C, &model.map[..160])?;
            model.attributes.as_object_mut().unwrap().remove("step");
            ds.set_attribute("step", None)?;
        }
    }
    Ok(())
}

const STEPS: usize = 8;

fn empty() -> Contents {
    Contents { z: 12, volume: vec![f32::NAN; 20 * 16 * 12], map: vec![-1; 320], attributes: json!({"origin": "crash test"}) }
}

/// The volume with `z` samples along its last axis instead of `from` (new ones NaN).
fn resize_z(v: &[f32], from: u64, z: u64) -> Vec<f32> {
    let mut out = vec![f32::NAN; (20 * 16 * z) as usize];
    for row in 0..20 * 16 {
        for c in 0..from.min(z) {
            out[(row * z + c) as usize] = v[(row * from + c) as usize];
        }
    }
    out
}

/// Runs the workload on `storage` until it finishes or an operation fails.
/// Returns the contents of every commit (index 0: as created), how many
/// commits succeeded, and whether a commit was in flight when it failed.
fn workload(storage: &FaultyStorage, durability: Durability, layout: Layout) -> (Vec<Contents>, Option<usize>, bool) {
    let mut states = vec![empty()];
    let created = DatasetBuilder::new()
        .axis(Axis::new("x", 20))
        .axis(Axis::new("y", 16))
        .axis(Axis::new("z", 12).growable(None))
        .variable(
            VariableBuilder::new("volume", DType::Float32, &["x", "y", "z"]).chunk(&[8, 8, 8]).fill(f32::NAN).codec(Codec::deflate(3)),
        )
        .variable(VariableBuilder::new("map", DType::Int16, &["x", "y"]).chunk(&[8, 8]).fill(-1))
        .attribute("origin", "crash test")
        .durability(durability)
        .layout(layout)
        .create_in(Arc::new(storage.clone()));
    let Ok(mut ds) = created else { return (states, None, true) };
    let mut model = empty();
    for k in 0..STEPS {
        if step(&mut ds, &mut model, k).is_err() {
            return (states, Some(k), false);
        }
        states.push(model.clone());
        if let Err(e) = ds.commit() {
            assert_eq!(e.kind(), ErrorKind::Io, "{e}");
            assert!(e.to_string().contains("injected") || e.to_string().contains("No space left"), "{e}");
            return (states, Some(k), true);
        }
    }
    (states, Some(STEPS), false)
}

fn read_contents(bytes: &[u8]) -> vds::Result<Contents> {
    let ds = OpenOptions::new().open_storage(Arc::new(MemoryStorage::from_bytes(bytes)))?;
    let z = ds.axes()[2].samples();
    Ok(Contents {
        z,
        volume: ds.read_vec("volume", &Region::full(&[SHAPE[0], SHAPE[1], z])?, Order::C)?,
        map: ds.read_vec("map", &Region::full(&MAP)?, Order::C)?,
        attributes: Value::Object(ds.attributes().clone()),
    })
}

fn same(a: &Contents, b: &Contents) -> bool {
    // Bitwise for floats, so that NaN fill values compare equal.
    a.z == b.z && a.map == b.map && a.attributes == b.attributes && a.volume.iter().zip(&b.volume).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn every_fault_point_leaves_the_last_successful_commit() {
    fault_points_in(Layout::Aligned, "fault-injection", "");
}

#[test]
fn every_fault_point_leaves_the_last_successful_commit_of_a_compact_container() {
    fault_points_in(Layout::Compact, "fault-injection-compact", ", compact layout");
}

fn fault_points_in(layout: Layout, record: &str, title: &str) {
    // A run without faults counts the operations and fixes the reference states.
    let clean = FaultyStorage::default();
    let (states, done, _) = workload(&clean, Durability::Fsync, layout);
    assert_eq!(done, Some(STEPS));
    let total_ops = clean.0.lock().unwrap().ops;
    assert!(same(&read_contents(&clean.0.lock().unwrap().durable).unwrap(), &states[STEPS]));
    // The compact container starts with small pages and ends with 4 KiB ones.
    let (head, page) = layout_of(&clean.0.lock().unwrap().durable);
    if layout == Layout::Compact {
        assert!(head % 4096 != 0 && page == 4096, "head {head}, page size {page}: the workload should outgrow 256-byte pages");
    } else {
        assert!(head % 4096 == 0 && page == 4096, "head {head}, page size {page}");
    }
    let mut page_sizes = BTreeSet::new();

    let (mut runs, mut images, mut at_last, mut at_inflight, mut uncreated) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut states_seen = BTreeSet::new();
    for op in 0..total_ops {
        for kind in [Fault::FailWrite, Fault::TornWrite, Fault::NoSpace, Fault::FailSync] {
            let storage = FaultyStorage::with_fault(Some((op, kind)));
            let (_, done, in_flight) = workload(&storage, Durability::Fsync, layout);
            if !storage.0.lock().unwrap().fired {
                continue; // this kind does not apply to this operation (a write fault at a sync, ...)
            }
            runs += 1;
            for (image_kind, bytes) in storage.crash_images() {
                images += 1;
                let what = format!("fault {kind:?} at operation {op}, {image_kind} image");
                let Some(committed) = done else {
                    // The crash hit the creation: the file may be unreadable, or empty as created.
                    match read_contents(&bytes) {
                        Ok(c) => assert!(same(&c, &states[0]), "{what}: a half-created file shows data"),
                        Err(_) => uncreated += 1,
                    }
                    continue;
                };
                let got = read_contents(&bytes).unwrap_or_else(|e| panic!("{what}: the file does not open: {e}"));
                page_sizes.insert(layout_of(&bytes).1);
                if same(&got, &states[committed]) {
                    at_last += 1;
                    states_seen.insert(committed);
                } else if in_flight && same(&got, &states[committed + 1]) {
                    at_inflight += 1;
                    states_seen.insert(committed + 1);
                } else {
                    panic!("{what}: the file shows neither commit {committed} (the last that succeeded) nor the one in flight");
                }
            }
        }
    }
    // Every write gets three kinds of fault, every sync one.
    assert!(runs >= total_ops, "too few fault runs: {runs} for {total_ops} operations");
    assert_eq!(states_seen.len(), STEPS + 1, "every commit should be the survivor of some fault: {states_seen:?}");
    if layout == Layout::Compact {
        // Crashes around the growth commit leave either page size, each readable.
        assert_eq!(page_sizes, BTreeSet::from([256, 4096]));
    }
    record_reliability(
        record,
        &format!(
            "## Fault injection (tests/crash_consistency.rs{title})\n\n\
             A workload of {STEPS} commits (chunks, partial-chunk updates, constant chunks, attributes, a descriptor too \
             large for the head) makes {total_ops} storage operations. Each operation was failed in turn: a write \
             failed, torn after half its bytes, or out of space; an fsync failed.\n\n\
             | figure | value |\n|---|---|\n\
             | fault points tried (operation x fault kind) | {runs} |\n\
             | crash images reopened and compared with the reference | {images} |\n\
             | images showing the last successful commit | {at_last} |\n\
             | images showing the commit in flight (its commit() had not returned) | {at_inflight} |\n\
             | images of an interrupted creation (unreadable or empty, as allowed) | {uncreated} |\n\
             | images showing anything else, or failing to open after a successful creation | 0 |\n\
             | distinct commits that survived some fault | {} of {} |\n\n",
            states_seen.len(),
            STEPS + 1
        ),
    );
}

#[test]
fn without_fsync_a_process_crash_still_loses_nothing_committed() {
    // Durability::None promises only process-crash safety: the live image.
    for layout in [Layout::Aligned, Layout::Compact] {
        let clean = FaultyStorage::default();
        let (states, _, _) = workload(&clean, Durability::None, layout);
        let total_ops = clean.0.lock().unwrap().ops;
        for op in 0..total_ops {
            for kind in [Fault::FailWrite, Fault::TornWrite, Fault::NoSpace] {
                let storage = FaultyStorage::with_fault(Some((op, kind)));
                let (_, done, in_flight) = workload(&storage, Durability::None, layout);
                let Some(committed) = done else { continue };
                let live = storage.0.lock().unwrap().live.clone();
                let got = read_contents(&live).unwrap_or_else(|e| panic!("fault {kind:?} at {op}: {e}"));
                assert!(same(&got, &states[committed]) || (in_flight && same(&got, &states[committed + 1])), "fault {kind:?} at {op}");
            }
        }
    }
}

#[test]
fn a_failed_commit_poisons_the_handle_and_reports_the_disk_error() {
    let storage = FaultyStorage::default();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 4))
        .variable(VariableBuilder::new("v", DType::UInt8, &["x"]).chunk(&[2]))
        .create_in(Arc::new(storage.clone()))
        .unwrap();
    ds.write("v", &Region::full(&[4]).unwrap(), Order::C, &[1u8, 2, 3, 4]).unwrap();
    // Fail the next sync (the commit's first).
    {
        let mut s = storage.0.lock().unwrap();
        s.fault = Some((s.ops + 1, Fault::FailSync));
    }
    let e = ds.commit().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains("syncing"), "{e}");
    let e = ds.write("v", &Region::full(&[4]).unwrap(), Order::C, &[1u8, 2, 3, 4]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Poisoned);
    assert_eq!(ds.commit().unwrap_err().kind(), ErrorKind::Poisoned);
}

/// A store holding `bytes` as both its live and its durable image.
fn storage_of(bytes: &[u8], fault: Option<(u64, Fault)>) -> FaultyStorage {
    let s = FaultyStorage::with_fault(fault);
    {
        let mut st = s.0.lock().unwrap();
        st.live = bytes.to_vec();
        st.durable = bytes.to_vec();
    }
    s
}

#[test]
fn compaction_under_every_fault_point_never_yields_a_partial_copy() {
    // The workload's last commit, with the space its rewrites left behind.
    let clean = FaultyStorage::default();
    let (states, done, _) = workload(&clean, Durability::Fsync, Layout::Auto);
    assert_eq!(done, Some(STEPS));
    let original = clean.0.lock().unwrap().durable.clone();
    let source = storage_of(&original, None);
    let ds = OpenOptions::new().write(true).open_storage(Arc::new(source.clone())).unwrap();
    // The copy as it stands right after creation, before any chunk: the final
    // descriptor, every sample the fill value.
    let last = &states[STEPS];
    let unfilled =
        Contents { z: last.z, volume: vec![f32::NAN; last.volume.len()], map: vec![-1; 320], attributes: last.attributes.clone() };

    // Without faults: smaller, synced entirely before compact_to returns (so a
    // rename after it cannot expose unsynced bytes), and equal to the source.
    let target = FaultyStorage::default();
    let report = ds.compact_to(Arc::new(target.clone()), false).unwrap();
    assert!(report.after_bytes < report.before_bytes, "{report:?}");
    let total_ops = {
        let t = target.0.lock().unwrap();
        assert!(t.unsynced.is_empty() && t.durable == t.live, "compact_to returned with unsynced writes");
        assert_eq!(t.live.len() as u64, report.after_bytes);
        assert!(same(&read_contents(&t.durable).unwrap(), last));
        t.ops
    };

    let (mut runs, mut images, mut unreadable, mut empty_copies, mut whole) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for op in 0..total_ops {
        for kind in [Fault::FailWrite, Fault::TornWrite, Fault::NoSpace, Fault::FailSync] {
            let target = FaultyStorage::with_fault(Some((op, kind)));
            let result = ds.compact_to(Arc::new(target.clone()), false);
            if !target.0.lock().unwrap().fired {
                continue;
            }
            runs += 1;
            // The failure is reported, so the copy is never renamed over the container.
            let e = result.expect_err("a compaction whose storage failed reported success");
            assert_eq!(e.kind(), ErrorKind::Io, "{e}");
            for (image_kind, bytes) in target.crash_images() {
                images += 1;
                match read_contents(&bytes) {
                    Err(_) => unreadable += 1,
                    Ok(c) if same(&c, &unfilled) => empty_copies += 1,
                    Ok(c) if same(&c, last) => whole += 1,
                    Ok(_) => panic!("fault {kind:?} at operation {op}, {image_kind} image: the copy opens with partial contents"),
                }
            }
        }
    }
    assert!(runs >= total_ops, "too few fault runs: {runs} for {total_ops} operations");
    // Compaction never writes to the container it copies.
    let s = source.0.lock().unwrap();
    assert!(s.live == original && s.durable == original && s.ops == 0, "compaction wrote to its source");
    drop(s);
    record_reliability(
        "fault-injection-compaction",
        &format!(
            "## Compaction under fault injection (tests/crash_consistency.rs)\n\n\
             The workload's final container ({} bytes) compacted into a new store ({} bytes, {total_ops} storage \
             operations), each operation failed in turn as above. Every failure was reported (so the copy is never \
             renamed over the container), the container itself was never written, and the successful copy was \
             wholly synced before `compact_to` returned.\n\n\
             | figure | value |\n|---|---|\n\
             | fault points tried | {runs} |\n\
             | crash images of the copy reopened | {images} |\n\
             | images that do not open | {unreadable} |\n\
             | images showing the copy as created, before any chunk | {empty_copies} |\n\
             | images showing the complete copy | {whole} |\n\
             | images showing partial contents | 0 |\n\n",
            report.before_bytes, report.after_bytes
        ),
    );
}
