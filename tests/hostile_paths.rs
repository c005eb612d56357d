//! A file's external-file slot names cannot reach outside its directory:
//! absolute names, `..`, and symbolic links that leave the directory are
//! refused with an error naming the slot, unless the caller allows them.
//! Allocations sized by the file stay under the caller's memory limit.

mod common;
use common::*;
use vds::serde_json::{json, Value};
use vds::{Axis, DType, Dataset, DatasetBuilder, ErrorKind, Layout, OpenOptions, Order, Region, SlotPolicy, VariableBuilder};

/// A container in `dir` whose chunks all live in external slot 1, named `slot.1`;
/// aligned, so that its head has room for the descriptor `rename_slot` edits.
fn make(dir: &Scratch) -> std::path::PathBuf {
    let path = dir.path("c.vds");
    let mut ds = DatasetBuilder::new()
        .layout(Layout::Aligned)
        .axis(Axis::new("x", 64))
        .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[16]))
        .external_slot("slot.1")
        .create(&path)
        .unwrap();
    ds.set_slot_policy(SlotPolicy::Fixed(1)).unwrap();
    ds.write("v", &Region::full(&[64]).unwrap(), Order::C, &(0..64).collect::<Vec<i32>>()).unwrap();
    ds.close().unwrap();
    path
}

/// Rewrites the slot name in the head's descriptor and re-seals the newest commit slot.
fn rename_slot(path: &std::path::Path, name: &str) {
    let mut b = std::fs::read(path).unwrap();
    let h = head_len(&b);
    let mut desc: Value = vds::serde_json::from_slice(&b[8..h - 1]).unwrap();
    desc["slots"][0]["name"] = json!(name);
    let text = vds::serde_json::to_vec(&desc).unwrap();
    b[8..h - 1].fill(b' ');
    b[8..8 + text.len()].copy_from_slice(&text);
    let seq = |at: usize| u64::from_le_bytes(b[at + 16..at + 24].try_into().unwrap());
    let slot = if seq(h + 512) > seq(h) { h + 512 } else { h };
    assert_eq!(u64::from_le_bytes(b[slot + 40..slot + 48].try_into().unwrap()), 8, "the descriptor is in the head");
    b[slot + 48..slot + 56].copy_from_slice(&(text.len() as u64).to_le_bytes());
    b[slot + 56..slot + 60].copy_from_slice(&crc32(&text).to_le_bytes());
    let crc = crc32(&b[slot..slot + 508]);
    b[slot + 508..slot + 512].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

fn read(path: &std::path::Path, allow: bool) -> vds::Result<Vec<i32>> {
    OpenOptions::new().allow_external_paths(allow).open(path)?.read_vec("v", &Region::full(&[64])?, Order::C)
}

#[test]
fn every_escape_is_refused_unless_allowed() {
    let outer = Scratch::new("escape-outer");
    let inner = outer.dir().join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let dir = Scratch::new("escape");
    let path = make(&dir);
    let want: Vec<i32> = (0..64).collect();
    assert_eq!(read(&path, false).unwrap(), want);
    let data = std::fs::read(dir.path("slot.1")).unwrap();
    let outside = outer.dir().join("stolen.1");
    std::fs::write(&outside, &data).unwrap();

    // Absolute path, and a relative path climbing out with "..".
    let rel = format!("../{}/stolen.1", outer.dir().file_name().unwrap().to_str().unwrap());
    for name in [outside.to_str().unwrap(), rel.as_str()] {
        rename_slot(&path, name);
        let e = read(&path, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{name}: {e}");
        assert!(e.to_string().contains("external file slot 1") && e.to_string().contains("allow_external_paths"), "{e}");
        assert_eq!(read(&path, true).unwrap(), want, "{name} with paths allowed");
    }
    // A symbolic link inside the directory that points out of it, as the file and as a directory.
    rename_slot(&path, "link.1");
    std::os::unix::fs::symlink(&outside, dir.path("link.1")).unwrap();
    let e = read(&path, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("outside the container's directory"), "{e}");
    assert_eq!(read(&path, true).unwrap(), want);
    std::os::unix::fs::symlink(outer.dir(), dir.path("sub")).unwrap();
    rename_slot(&path, "sub/stolen.1");
    assert!(read(&path, false).unwrap_err().to_string().contains("outside the container's directory"));
    assert_eq!(read(&path, true).unwrap(), want);
    // A link that stays inside is fine.
    std::fs::rename(dir.path("slot.1"), dir.path("real.1")).unwrap();
    std::os::unix::fs::symlink("real.1", dir.path("slot.1")).unwrap();
    rename_slot(&path, "slot.1");
    assert_eq!(read(&path, false).unwrap(), want);
}

#[test]
fn the_memory_limit_bounds_every_buffer() {
    let dir = Scratch::new("limit");
    let path = dir.path("m.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 1 << 20))
        .variable(VariableBuilder::new("v", DType::Float64, &["x"]).chunk(&[1 << 17]))
        .create(&path)
        .unwrap();
    ds.write("v", &Region::full(&[1 << 20]).unwrap(), Order::C, &(0..1 << 20).map(f64::from).collect::<Vec<_>>()).unwrap();
    ds.close().unwrap();
    // A chunk is 1 MiB: a 512 KiB limit refuses to read one, and says so.
    let ds = OpenOptions::new().memory_limit(512 << 10).open(&path).unwrap();
    let e = ds.read_vec::<f64>("v", &Region::new(&[5], &[10]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.to_string().contains("memory limit of 524288 bytes"), "{e}");
    // read_vec refuses regions above the limit before allocating them.
    let mut ds = Dataset::open(&path).unwrap();
    ds.set_memory_limit(4 << 20);
    let e = ds.read_vec::<f64>("v", &Region::full(&[1 << 20]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(ds.read_vec::<f64>("v", &Region::new(&[7], &[3]).unwrap(), Order::C).unwrap(), vec![7.0, 8.0, 9.0]);
}

/// Runs `f` on another thread and fails the test if it has not returned
/// within a minute: what it checks must not block at all.
fn without_blocking<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what} blocked"))
}

fn mkfifo(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    run(std::process::Command::new("mkfifo").arg(path));
}

#[test]
fn a_fifo_or_a_directory_is_refused_without_blocking() {
    let dir = Scratch::new("fifo");
    let path = make(&dir);
    // A slot file replaced by a FIFO: opening it would wait for a writer forever.
    mkfifo(&dir.path("slot.1"));
    let p = path.clone();
    let e = without_blocking("reading through a FIFO slot", move || read(&p, false)).unwrap_err();
    assert!(e.to_string().contains("FIFO") && e.to_string().contains("slot 1"), "{e}");
    let p = path.clone();
    let e = without_blocking("opening a container whose slot is a FIFO for writing", move || {
        let mut ds = Dataset::open_rw(&p)?;
        ds.write("v", &Region::new(&[0], &[4])?, Order::C, &[1i32; 4])
    })
    .unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
    // The container itself a FIFO or a directory, read-only and for writing.
    let fifo = dir.path("fifo.vds");
    mkfifo(&fifo);
    for write in [false, true] {
        let (f, d) = (fifo.clone(), dir.dir().to_path_buf());
        let e = without_blocking("opening a FIFO", move || OpenOptions::new().write(write).open(&f)).unwrap_err();
        assert!(e.to_string().contains("a FIFO, not a regular file"), "{e}");
        let e = without_blocking("opening a directory", move || OpenOptions::new().write(write).open(&d)).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }
    // A fragment named by a merge, and a container to recover, likewise.
    let frag = dir.path("w.frag");
    mkfifo(&frag);
    let p = path.clone();
    let e = without_blocking("merging a FIFO fragment", move || Dataset::open_rw(&p)?.merge_fragments(&["w.frag"])).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
    let e = without_blocking("recovering a FIFO", move || Dataset::recover(&fifo)).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
}
