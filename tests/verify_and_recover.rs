//! Damage is found and undone: verify checks every checksum and structure
//! and lists each problem with its location; recover rolls a damaged file
//! back to its newest intact commit, writing only a commit slot; compaction
//! reclaims the space copy-on-write leaves behind without changing a value;
//! readers keep their snapshot until they refresh; rollback discards
//! uncommitted work.

mod common;
use common::*;
use vds::serde_json::json;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Layout, Order, Recovery, Region, VariableBuilder};

const SHAPE: [u64; 2] = [40, 30];

/// In the aligned layout, whose offsets most of these tests compute.
fn builder() -> DatasetBuilder {
    builder_in(Layout::Aligned)
}

fn builder_in(layout: Layout) -> DatasetBuilder {
    let mut b = DatasetBuilder::new();
    b.layout(layout)
        .axis(Axis::new("y", 40))
        .axis(Axis::new("x", 30))
        .variable(VariableBuilder::new("v", DType::Float64, &["y", "x"]).chunk(&[10, 10]).codec(Codec::deflate(1)));
    b
}

fn ramp(offset: f64) -> Vec<f64> {
    (0..1200).map(|i| f64::from(i) * 0.25 + offset).collect()
}

fn read_all(path: &std::path::Path) -> vds::Result<Vec<f64>> {
    Dataset::open(path)?.read_vec("v", &Region::full(&SHAPE)?, Order::C)
}

fn flip(path: &std::path::Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

#[test]
fn verify_reports_every_problem_with_its_location() {
    let dir = Scratch::new("verify");
    let path = dir.path("v.vds");
    let mut ds = builder().create(&path).unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(0.0)).unwrap();
    ds.close().unwrap();
    let report = Dataset::open(&path).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!((report.chunks, report.index_pages), (12, 1));
    assert_eq!(report.previous_commit, Some(1));
    assert_eq!(report.reclaimable_bytes, 0, "{report:?}");
    assert_eq!(report.live_bytes, report.file_bytes);

    // Two damaged chunks: both reported, each with its own offset.
    let body = head_len(&std::fs::read(&path).unwrap()) as u64 + 1024;
    let ds = Dataset::open(&path).unwrap();
    flip(&path, body + 3);
    let second = body + 3 + report.file_bytes / 20;
    flip(&path, second);
    let report = ds.verify().unwrap();
    assert!(!report.is_ok());
    let offsets: Vec<u64> = report.problems.iter().filter_map(|e| e.location().map(|l| l.offset)).collect();
    assert!(report.problems.len() >= 2, "{:?}", report.problems);
    assert_eq!(offsets[0], body, "{:?}", report.problems);
    assert!(report.problems.iter().all(|e| e.kind() == ErrorKind::Corrupt && e.to_string().contains("chunk")), "{:?}", report.problems);

    // A damaged index page is reported and the check goes on.
    let mut b = std::fs::read(&path).unwrap();
    let root = report.file_bytes as usize - 4096;
    b[root + 50] ^= 1;
    std::fs::write(&path, b).unwrap();
    let report = ds.verify().unwrap();
    assert!(
        report.problems.iter().any(|e| e.location().is_some_and(|l| l.object == "index page" && l.offset == root as u64)),
        "{:?}",
        report.problems
    );
}

#[test]
fn recover_rolls_back_to_the_newest_intact_commit() {
    // Both layouts: the compact one's slots are 128 bytes (SPEC.md 1.1).
    for layout in [Layout::Aligned, Layout::Compact] {
        recover_rolls_back_in(layout);
    }
}

fn recover_rolls_back_in(layout: Layout) {
    let dir = Scratch::new("recover");
    let path = dir.path("r.vds");
    let mut ds = builder_in(layout).create(&path).unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(0.0)).unwrap();
    ds.commit().unwrap();
    let end_of_first = std::fs::metadata(&path).unwrap().len();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(1000.0)).unwrap();
    ds.close().unwrap();
    assert_eq!(Dataset::recover(&path).unwrap(), Recovery::Intact { commit: 3 });

    // Damage a chunk that only the newest commit uses (its chunks follow the first commit's end).
    flip(&path, end_of_first + 20);
    let len_before = std::fs::metadata(&path).unwrap().len();
    assert_eq!(read_all(&path).unwrap_err().kind(), ErrorKind::Corrupt);
    assert_eq!(Dataset::recover(&path).unwrap(), Recovery::RolledBack { damaged: 3, restored: 5 });
    assert_eq!(read_all(&path).unwrap(), ramp(0.0));
    assert!(Dataset::open(&path).unwrap().verify().unwrap().is_ok());
    // Only a commit slot was written: the damaged bytes are still there, and new writes go after them.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len_before);
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.write("v", &Region::new(&[0, 0], &[1, 1]).unwrap(), Order::C, &[7.0]).unwrap();
    ds.close().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > len_before);
    assert_eq!(read_all(&path).unwrap()[0], 7.0);

    // When neither commit is intact there is nothing to go back to.
    flip(&path, 20); // the descriptor in the head, which both commits point at
    let e = Dataset::recover(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("no intact commit"), "{e}");
}

#[test]
fn compaction_reclaims_space_and_keeps_every_value() {
    let dir = Scratch::new("compact");
    let path = dir.path("c.vds");
    let mut ds = builder().create(&path).unwrap();
    for round in 0..6 {
        ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(f64::from(round))).unwrap();
        ds.set_attribute("round", Some(json!(round))).unwrap();
        ds.commit().unwrap();
    }
    let report = ds.verify().unwrap();
    assert!(report.is_ok());
    assert!(report.reclaimable_bytes > report.live_bytes, "{report:?}");
    let compacted = ds.compact().unwrap();
    assert!(compacted.after_bytes < compacted.before_bytes / 3, "{compacted:?}");
    assert_eq!(compacted.after_bytes, std::fs::metadata(&path).unwrap().len());
    let report = ds.verify().unwrap();
    assert!(report.is_ok() && report.reclaimable_bytes == 0, "{report:?}");
    // Still the writer: the lock moved with the new file.
    assert_eq!(Dataset::open_rw(&path).unwrap_err().kind(), ErrorKind::Locked);
    ds.write("v", &Region::new(&[0, 0], &[1, 1]).unwrap(), Order::C, &[-1.0]).unwrap();
    ds.close().unwrap();
    let mut want = ramp(5.0);
    want[0] = -1.0;
    assert_eq!(read_all(&path).unwrap(), want);
    assert_eq!(Dataset::open(&path).unwrap().attributes()["round"], json!(5));
    assert!(!dir.path("c.vds.compacting").exists());
    // Uncommitted changes are refused rather than silently committed or lost.
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.write("v", &Region::new(&[0, 0], &[1, 1]).unwrap(), Order::C, &[3.0]).unwrap();
    assert_eq!(ds.compact().unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn readers_keep_their_snapshot_until_they_refresh() {
    let dir = Scratch::new("refresh");
    let path = dir.path("s.vds");
    let mut w = builder().create(&path).unwrap();
    w.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(0.0)).unwrap();
    w.commit().unwrap();
    let mut r = Dataset::open(&path).unwrap();
    assert!(!r.refresh().unwrap());
    w.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(1.0)).unwrap();
    w.set_attribute("new", Some(json!(true))).unwrap();
    w.commit().unwrap();
    assert_eq!(r.read_vec::<f64>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap(), ramp(0.0));
    assert!(r.attributes().get("new").is_none());
    assert!(r.refresh().unwrap());
    assert_eq!(r.read_vec::<f64>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap(), ramp(1.0));
    assert_eq!(r.attributes()["new"], json!(true));
    assert!(!r.refresh().unwrap());
}

#[test]
fn rollback_discards_uncommitted_work() {
    let dir = Scratch::new("rollback");
    let path = dir.path("b.vds");
    let mut ds = builder().create(&path).unwrap();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(0.0)).unwrap();
    ds.commit().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(9.0)).unwrap();
    ds.set_attribute("draft", Some(json!(1))).unwrap();
    ds.rollback().unwrap();
    assert_eq!(ds.read_vec::<f64>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap(), ramp(0.0));
    assert!(ds.attributes().get("draft").is_none());
    ds.write("v", &Region::new(&[0, 0], &[1, 1]).unwrap(), Order::C, &[5.0]).unwrap();
    ds.close().unwrap();
    // The discarded chunks' space was reused rather than leaked.
    assert!(std::fs::metadata(&path).unwrap().len() < len + 8 * 1024, "{} vs {len}", std::fs::metadata(&path).unwrap().len());
    let mut want = ramp(0.0);
    want[0] = 5.0;
    assert_eq!(read_all(&path).unwrap(), want);
}

/// Sets the sequence number of commit slot `which` (re-sealing its CRC32).
fn set_sequence(path: &std::path::Path, which: usize, sequence: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let size = slot_size(&bytes);
    let at = head_len(&bytes) + which * size;
    bytes[at + 16..at + 24].copy_from_slice(&sequence.to_le_bytes());
    let crc = crc32(&bytes[at..at + size - 4]);
    bytes[at + size - 4..at + size].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// The root page offset recorded in commit slot `which`.
fn root_offset(path: &std::path::Path, which: usize) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let at = head_len(&bytes) + which * slot_size(&bytes) + 64;
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// A container whose creating commit is numbered three below the last
/// sequence number, then given two commits (ramp 1, ramp 2): its newest
/// commit has the last number. Returns the writer.
fn at_the_last_sequence_number(path: &std::path::Path, layout: Layout) -> Dataset {
    builder_in(layout).create(path).unwrap().close().unwrap();
    // Commit 1 lives in slot 1.
    set_sequence(path, 1, u64::MAX - 2);
    let mut ds = Dataset::open_rw(path).unwrap();
    for k in 1..=2u32 {
        ds.write("v", &Region::full(&SHAPE).unwrap(), Order::C, &ramp(f64::from(k))).unwrap();
        ds.commit().unwrap();
        assert_eq!(read_all(path).unwrap(), ramp(f64::from(k)), "commit {k} returned OK, so a new reader sees it");
    }
    ds
}

#[test]
fn the_last_sequence_number_refuses_a_commit_instead_of_wrapping() {
    for layout in [Layout::Aligned, Layout::Compact] {
        let dir = Scratch::new("sequence-limit");
        let path = dir.path("c.vds");
        let all = Region::full(&SHAPE).unwrap();
        let mut ds = at_the_last_sequence_number(&path, layout);
        assert_eq!(ds.commit_sequence(), u64::MAX);
        // No number is left: the commit is refused, nothing is written, and the
        // last commit stays what every reader sees.
        ds.write("v", &all, Order::C, &ramp(3.0)).unwrap();
        let e = ds.commit().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfRange, "{e}");
        assert!(e.to_string().contains("compact"), "{e}");
        ds.rollback().unwrap();
        assert_eq!(read_all(&path).unwrap(), ramp(2.0));
        // Compaction numbers the commits from 1 again, and writing goes on.
        ds.compact().unwrap();
        assert_eq!(ds.commit_sequence(), 2, "the new file's creation and the copy's commit");
        ds.write("v", &all, Order::C, &ramp(3.0)).unwrap();
        ds.commit().unwrap();
        drop(ds);
        assert_eq!(read_all(&path).unwrap(), ramp(3.0));
        assert!(Dataset::open(&path).unwrap().verify().unwrap().is_ok());
    }
}

#[test]
fn recovery_at_the_last_sequence_number_rolls_back_without_wrapping() {
    for layout in [Layout::Aligned, Layout::Compact] {
        let dir = Scratch::new("sequence-limit-recover");
        let path = dir.path("c.vds");
        drop(at_the_last_sequence_number(&path, layout));
        // The newest commit (the last number, slot 1) has a damaged index root.
        flip(&path, root_offset(&path, 1) + 100);
        let r = Dataset::recover(&path).unwrap();
        assert_eq!(r, Recovery::RolledBack { damaged: u64::MAX, restored: u64::MAX - 1 });
        assert_eq!(read_all(&path).unwrap(), ramp(1.0));
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.commit_sequence(), u64::MAX - 1);
        assert!(ds.verify().unwrap().is_ok());
    }
}
