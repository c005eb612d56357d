//! External-file slots with an identity (SPEC.md 8.1): striping policies,
//! slots added to an open container, and wrong, swapped or truncated slot
//! files refused with an error that names them.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Order, Region, SlotPolicy, VariableBuilder};

fn create(dir: &Scratch) -> (std::path::PathBuf, Vec<f32>, Vec<i32>) {
    let path = dir.path("c.vds");
    std::fs::create_dir_all(dir.path("sub")).unwrap();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 40))
        .axis(Axis::new("y", 30))
        .variable(VariableBuilder::new("a", DType::Float32, &["x", "y"]).chunk(&[8, 8]).codec(Codec::deflate(1)))
        .variable(VariableBuilder::new("b", DType::Int32, &["x", "y"]).chunk(&[10, 10]))
        .external_slot("s1.vdx")
        .external_slot("sub/s2.vdx")
        .create(&path)
        .unwrap();
    ds.set_slot_policy(SlotPolicy::RoundRobin(vec![1, 2])).unwrap();
    let a: Vec<f32> = (0..1200).map(|i| (i as f32 * 0.1).sin()).collect();
    let b: Vec<i32> = (0..1200).map(|i| i * 7 - 300).collect();
    ds.write("a", &Region::full(&[40, 30]).unwrap(), Order::C, &a).unwrap();
    ds.commit().unwrap();
    // Each channel in its own file: a to slot 1, b to a slot added now.
    let s3 = ds.add_external_slot("s3.vdx").unwrap();
    assert_eq!(s3, 3);
    ds.set_slot_policy(SlotPolicy::ByVariable(vec![1, s3])).unwrap();
    ds.write("b", &Region::full(&[40, 30]).unwrap(), Order::C, &b).unwrap();
    ds.close().unwrap();
    (path, a, b)
}

fn read_all(path: &std::path::Path) -> vds::Result<(Vec<f32>, Vec<i32>)> {
    let ds = Dataset::open(path)?;
    let full = Region::full(&[40, 30])?;
    Ok((ds.read_vec("a", &full, Order::C)?, ds.read_vec("b", &full, Order::C)?))
}

fn slot_lengths(path: &std::path::Path) -> Vec<(String, u64, u64)> {
    let ds = Dataset::open(path).unwrap();
    let d: vds::serde_json::Value = vds::serde_json::from_str(&ds.descriptor_json()).unwrap();
    d["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap().to_string();
            let len = std::fs::metadata(path.with_file_name(&name)).unwrap().len();
            (name, s["length"].as_u64().unwrap(), len)
        })
        .collect()
}

#[test]
fn striped_chunks_and_added_slots_are_read_back_and_recorded() {
    let dir = Scratch::new("slots");
    let (path, a, b) = create(&dir);
    assert_eq!(read_all(&path).unwrap(), (a, b));
    // Every slot records its length at the last commit, and the files match.
    let lengths = slot_lengths(&path);
    assert_eq!(lengths.len(), 3);
    for (name, recorded, actual) in &lengths {
        assert_eq!(recorded, actual, "{name}");
        assert!(*actual > 32, "{name} holds chunks");
    }
    // a (30 chunks) went round robin over slots 1 and 2; b (12 chunks) to slot 3 only.
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.external_slots(), ["s1.vdx", "sub/s2.vdx", "s3.vdx"]);
    assert_eq!(lengths[2].2, 32 + 12 * 400, "b's raw chunks in s3");
    assert!(ds.verify().unwrap().is_ok());
    // Names are checked, and an existing file is never overwritten.
    let mut ds = Dataset::open_rw(&path).unwrap();
    assert_eq!(ds.add_external_slot("s1.vdx").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(ds.add_external_slot("../out.vdx").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(ds.add_external_slot("c.vds").unwrap_err().kind(), ErrorKind::InvalidArgument);
    std::fs::write(dir.path("taken.vdx"), b"mine").unwrap();
    assert_eq!(ds.add_external_slot("taken.vdx").unwrap_err().kind(), ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(dir.path("taken.vdx")).unwrap(), b"mine");
    // A slot added and rolled back is forgotten.
    ds.add_external_slot("s4.vdx").unwrap();
    assert_eq!(ds.set_slot_policy(SlotPolicy::Fixed(5)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    ds.rollback().unwrap();
    assert_eq!(ds.external_slots().len(), 3);
    assert_eq!(ds.set_slot_policy(SlotPolicy::Fixed(4)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    drop(ds);
    // A reader stores no chunk: a policy for it is refused, not kept unused.
    let mut ds = Dataset::open(&path).unwrap();
    let e = ds.set_slot_policy(SlotPolicy::Fixed(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
}

#[test]
fn swapped_truncated_and_foreign_slot_files_are_named() {
    let dir = Scratch::new("slots-bad");
    let (path, a, b) = create(&dir);
    let s1 = dir.path("s1.vdx");
    let s3 = dir.path("s3.vdx");
    let (orig1, orig3) = (std::fs::read(&s1).unwrap(), std::fs::read(&s3).unwrap());
    let restore = || {
        std::fs::write(&s1, &orig1).unwrap();
        std::fs::write(&s3, &orig3).unwrap();
    };
    let err = |what: &str| {
        let e = read_all(&path).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
        e.to_string()
    };
    // Swapped: each file holds the other slot's id.
    std::fs::write(&s1, &orig3).unwrap();
    std::fs::write(&s3, &orig1).unwrap();
    let e = err("swapped");
    assert!(e.contains("external file slot 1") && e.contains("s1.vdx") && e.contains("belongs to another container or slot"), "{e}");
    restore();
    // Truncated by one byte: shorter than the length the commit recorded.
    std::fs::write(&s3, &orig3[..orig3.len() - 1]).unwrap();
    let e = err("truncated");
    assert!(e.contains("external file slot 3") && e.contains("truncated"), "{e}");
    // Cut inside the header.
    std::fs::write(&s3, &orig3[..20]).unwrap();
    let e = err("cut header");
    assert!(e.contains("too short for a slot header"), "{e}");
    restore();
    // Another container's slot file of the same length, and a damaged header.
    let other = Scratch::new("slots-other");
    let (_, _, _) = create(&other);
    let foreign = std::fs::read(other.path("s3.vdx")).unwrap();
    assert_eq!(foreign.len(), orig3.len());
    std::fs::write(&s3, &foreign).unwrap();
    assert!(err("foreign").contains("belongs to another container or slot"));
    let mut damaged = orig3.clone();
    damaged[20] ^= 1;
    std::fs::write(&s3, &damaged).unwrap();
    assert!(err("header bit flip").contains("slot header CRC32 mismatch"));
    let mut junk = orig3.clone();
    junk[..8].copy_from_slice(b"NOTASLOT");
    std::fs::write(&s3, &junk).unwrap();
    assert!(err("junk").contains("does not start with a slot header"));
    restore();
    assert_eq!(read_all(&path).unwrap(), (a, b));
    // Verify reports the slot too.
    std::fs::write(&s1, &orig3).unwrap();
    let report = Dataset::open(&path).unwrap().verify().unwrap();
    assert!(report.problems.iter().any(|p| p.to_string().contains("belongs to another container or slot")), "{:?}", report.problems);
}

#[test]
fn compaction_folds_external_slots_back_into_the_container() {
    let dir = Scratch::new("slots-fold");
    let (path, a, b) = create(&dir);
    // Rewrite part of a so that some external chunks are dead.
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.set_slot_policy(SlotPolicy::Fixed(2)).unwrap();
    ds.write("a", &Region::new(&[0, 0], &[8, 8]).unwrap(), Order::C, &[0.5f32; 64]).unwrap();
    ds.commit().unwrap();
    let report = ds.compact_folding_slots().unwrap();
    assert_eq!(report.folded_slots, ["s1.vdx", "sub/s2.vdx", "s3.vdx"]);
    assert!(ds.external_slots().is_empty());
    drop(ds);
    for f in ["s1.vdx", "sub/s2.vdx", "s3.vdx"] {
        std::fs::remove_file(dir.path(f)).unwrap();
    }
    let (mut ga, gb) = read_all(&path).unwrap();
    assert_eq!(gb, b);
    assert!(ga.iter().take(8).all(|&x| x == 0.5));
    for i in 0..8 {
        ga[i * 30..i * 30 + 8].copy_from_slice(&a[i * 30..i * 30 + 8]);
    }
    assert_eq!(ga, a);
    let ds = Dataset::open(&path).unwrap();
    assert!(ds.verify().unwrap().is_ok());
    assert_eq!(ds.space().unwrap().reclaimable_bytes, 0);
}

#[test]
fn compaction_moves_container_chunks_out_into_slots_and_back() {
    let dir = Scratch::new("slots-unfold");
    let path = dir.path("c.vds");
    let a: Vec<f32> = (0..1200).map(|i| (i as f32 * 0.1).sin()).collect();
    let b: Vec<i32> = (0..1200).map(|i| i * 7 - 300).collect();
    let full = Region::full(&[40, 30]).unwrap();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 40))
        .axis(Axis::new("y", 30))
        .variable(VariableBuilder::new("a", DType::Float32, &["x", "y"]).chunk(&[8, 8]).codec(Codec::deflate(1)))
        .variable(VariableBuilder::new("b", DType::Int32, &["x", "y"]).chunk(&[10, 10]))
        .create(&path)
        .unwrap();
    ds.write("a", &full, Order::C, &a).unwrap();
    ds.write("b", &full, Order::C, &b).unwrap();
    ds.commit().unwrap();
    assert_eq!(ds.compact_into_slots().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let in_container = ds.stats().unwrap().stored_bytes;
    // One file per variable, added to the existing container.
    let s1 = ds.add_external_slot("a.vdx").unwrap();
    let s2 = ds.add_external_slot("b.vdx").unwrap();
    ds.commit().unwrap();
    ds.set_slot_policy(SlotPolicy::ByVariable(vec![s1, s2])).unwrap();
    let report = ds.compact_into_slots().unwrap();
    assert!(report.after_bytes < report.before_bytes, "{report:?}");
    // Every stored byte left the container: the slot files hold them all, after their 32-byte headers.
    let len = |f: &str| std::fs::metadata(dir.path(f)).unwrap().len();
    assert_eq!(len("a.vdx") + len("b.vdx"), 2 * 32 + in_container);
    assert_eq!(full_read(&ds), (a.clone(), b.clone()));
    drop(ds);
    // The chunks are in the slot files now: b's 12 chunks of 400 bytes after the 32-byte header.
    assert_eq!(std::fs::metadata(dir.path("b.vdx")).unwrap().len(), 32 + 12 * 400);
    assert_eq!(read_all(&path).unwrap(), (a.clone(), b.clone()));
    assert!(Dataset::open(&path).unwrap().verify().unwrap().is_ok());
    let saved = std::fs::read(dir.path("b.vdx")).unwrap();
    std::fs::write(dir.path("b.vdx"), &saved[..1000]).unwrap();
    let e = read_all(&path).unwrap_err();
    assert!(e.to_string().contains("b.vdx"), "{e}");
    std::fs::write(dir.path("b.vdx"), &saved).unwrap();
    // And back into the container.
    let mut ds = Dataset::open_rw(&path).unwrap();
    assert_eq!(ds.compact_folding_slots().unwrap().folded_slots, ["a.vdx", "b.vdx"]);
    drop(ds);
    std::fs::remove_file(dir.path("a.vdx")).unwrap();
    std::fs::remove_file(dir.path("b.vdx")).unwrap();
    assert_eq!(read_all(&path).unwrap(), (a, b));
}

fn full_read(ds: &Dataset) -> (Vec<f32>, Vec<i32>) {
    let full = Region::full(&[40, 30]).unwrap();
    (ds.read_vec("a", &full, Order::C).unwrap(), ds.read_vec("b", &full, Order::C).unwrap())
}

/// A container held by a `Storage` other than a file reaches its slots
/// through `OpenOptions::slot_storage`: called with confined names only
/// (unless external paths are allowed), and each slot still checked for
/// its id and length.
#[test]
fn slots_of_a_storage_opened_container_come_from_the_slot_opener() {
    use std::sync::{Arc, Mutex};
    use vds::{MemoryStorage, OpenOptions, Storage};
    let dir = Scratch::new("slots-opener");
    let (path, a, b) = create(&dir);
    let container: Arc<dyn Storage> = Arc::new(MemoryStorage::from_bytes(&std::fs::read(&path).unwrap()));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let opener = |asked: Arc<Mutex<Vec<String>>>, swap: bool| {
        let dir = path.parent().unwrap().to_path_buf();
        Arc::new(move |name: &str| {
            asked.lock().unwrap().push(name.to_string());
            let name = if swap && name == "s1.vdx" { "s3.vdx" } else { name };
            let bytes = std::fs::read(dir.join(name))?;
            Ok(Arc::new(MemoryStorage::from_bytes(&bytes)) as Arc<dyn Storage>)
        }) as Arc<vds::SlotOpener>
    };
    let ds = OpenOptions::new().slot_storage(opener(asked.clone(), false)).open_storage(container.clone()).unwrap();
    assert_eq!(full_read(&ds), (a, b));
    let mut names = asked.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["s1.vdx", "s3.vdx", "sub/s2.vdx"]);

    // The opener serving the wrong file for a slot is caught by the slot's id.
    let ds = OpenOptions::new().slot_storage(opener(Arc::default(), true)).open_storage(container.clone()).unwrap();
    let e = ds.read_vec::<f32>("a", &Region::full(&[40, 30]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("external file slot 1 (s1.vdx)"), "{e}");

    // Without an opener, slots are unavailable, as before.
    let ds = OpenOptions::new().open_storage(container).unwrap();
    assert!(ds.read_vec::<f32>("a", &Region::full(&[40, 30]).unwrap(), Order::C).is_err());
}
