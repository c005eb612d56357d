//! Parallel writers (SPEC.md section 11): several OS processes, with no lock
//! or message between them, each write their part of a volume into a
//! fragment; one merge adopts them. A worker that dies before sealing is
//! skipped; a merging process killed at any moment leaves the container
//! before or after the merge; overlapping fragments and fragments of
//! another container are refused without changing anything.

mod common;
use common::*;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, LodMethod, Order, Region, VariableBuilder};

const SHAPE: [u64; 3] = [40, 24, 20];
const SLAB: u64 = 8; // inline chunk extent: each worker writes whole chunks
const WORKERS: u64 = 5;

fn value(i: u64, j: u64, k: u64) -> f32 {
    ((i * 31 + j * 7 + k) % 97) as f32 * 0.5 - 10.0
}

fn slab(w: u64) -> (Region, Vec<f32>) {
    let start = [w * SLAB, 0, 0];
    let shape = [SLAB, SHAPE[1], SHAPE[2]];
    let mut v = Vec::new();
    for_each_index(&shape, |x| v.push(value(start[0] + x[0], x[1], x[2])));
    (Region::new(&start, &shape).unwrap(), v)
}

fn create(path: &std::path::Path) {
    DatasetBuilder::new()
        .axis(Axis::new("inline", SHAPE[0]))
        .axis(Axis::new("crossline", SHAPE[1]))
        .axis(Axis::new("time", SHAPE[2]))
        .variable(
            VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[SLAB, 8, 8])
                .fill(f32::NAN)
                .codec(Codec::deflate(1))
                .levels_of_detail(2, &[], LodMethod::Average)
                .partitioning(&[1, 24, 20]),
        )
        .variable(VariableBuilder::new("count", DType::Int32, &["inline", "crossline"]).chunk(&[SLAB, 12]).missing_mask(true))
        .create(path)
        .unwrap()
        .close()
        .unwrap();
}

/// Not a test of its own: the body of a worker process, run when the parent
/// test starts this binary with VDS_FRAGMENT_WORKER set.
#[test]
fn worker() {
    let Ok(args) = std::env::var("VDS_FRAGMENT_WORKER") else { return };
    let parts: Vec<&str> = args.split(',').collect();
    let (container, name, w, crash) = (parts[0], parts[1], parts[2].parse::<u64>().unwrap(), parts[3] == "crash");
    let mut f = Dataset::create_fragment(container, name).unwrap();
    let (region, values) = slab(w);
    f.write("amp", &region, Order::C, &values).unwrap();
    let counts: Vec<i32> = (0..SLAB * SHAPE[1]).map(|x| (w * 1000 + x) as i32).collect();
    let missing: Vec<bool> = (0..SLAB * SHAPE[1]).map(|x| x % 5 == 0).collect();
    let r2 = Region::new(&[w * SLAB, 0], &[SLAB, SHAPE[1]]).unwrap();
    f.write_masked("count", &r2, Order::C, &counts, &missing).unwrap();
    if crash {
        std::process::abort(); // chunks written, never sealed
    }
    f.close().unwrap();
}

/// Not a test of its own: the body of a merging process (VDS_FRAGMENT_MERGER
/// = container, then the fragment names), which the parent kills.
#[test]
fn merger() {
    let Ok(args) = std::env::var("VDS_FRAGMENT_MERGER") else { return };
    let parts: Vec<&str> = args.split(',').collect();
    let mut ds = Dataset::open_rw(parts[0]).unwrap();
    ds.merge_fragments(&parts[1..]).unwrap();
    ds.close().unwrap();
}

fn spawn(container: &std::path::Path, name: &str, w: u64, crash: bool) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker", "--test-threads", "1"])
        .env("VDS_FRAGMENT_WORKER", format!("{},{name},{w},{}", container.display(), if crash { "crash" } else { "ok" }))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn processes_write_fragments_that_one_merge_adopts() {
    let dir = Scratch::new("fragments");
    let path = dir.path("survey.vds");
    create(&path);
    // Five processes at once; worker 2 dies after writing its chunks.
    let children: Vec<_> = (0..WORKERS).map(|w| spawn(&path, &format!("part{w}.frag"), w, w == 2)).collect();
    let codes: Vec<bool> = children.into_iter().map(|mut c| c.wait().unwrap().success()).collect();
    assert_eq!(codes, [true, true, false, true, true]);
    let names: Vec<String> = (0..WORKERS).map(|w| format!("part{w}.frag")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut ds = Dataset::open_rw(&path).unwrap();
    let report = ds.merge_fragments(&names).unwrap();
    assert_eq!(report.merged, ["part0.frag", "part1.frag", "part3.frag", "part4.frag"]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].0, "part2.frag");
    assert!(report.skipped[0].1.contains("not sealed"), "{:?}", report.skipped);
    // Per worker: 3 x 3 bricks of amp, 2 chunks of count and 2 of its mask.
    assert_eq!(report.chunks, 4 * (9 + 2 + 2));
    // The crashed worker's slab is redone by a new process and merged alone.
    assert!(spawn(&path, "redo2.frag", 2, false).wait().unwrap().success());
    let report = ds.merge_fragments(&["redo2.frag", "part0.frag"]).unwrap();
    assert_eq!(report.merged, ["redo2.frag"]);
    assert!(report.skipped[0].1.contains("merged before"), "{:?}", report.skipped);
    drop(ds);

    // Everything against the reference, from a fresh reader.
    let ds = Dataset::open(&path).unwrap();
    let mut reference = Vec::new();
    for_each_index(&SHAPE, |x| reference.push(value(x[0], x[1], x[2])));
    let got: Vec<f32> = ds.read_vec("amp", &Region::full(&SHAPE).unwrap(), Order::C).unwrap();
    assert!(got == reference, "level 0");
    let (l1, s1) = halve_f32(&reference, &SHAPE, &[true, true, true], true);
    for part in [0, 1] {
        let mut got = vec![0f32; l1.len()];
        ds.read_lod("amp", 1, Some(part), &Region::full(&s1).unwrap(), Order::C, &mut got).unwrap();
        assert!(got == l1, "level 1 of partitioning {part}, computed by the merge");
        let mut got = vec![0f32; reference.len()];
        ds.read_lod("amp", 0, Some(part), &Region::full(&SHAPE).unwrap(), Order::C, &mut got).unwrap();
        assert!(got == reference, "level 0 of partitioning {part}");
    }
    let counts: Vec<i32> = ds.read_vec("count", &Region::full(&SHAPE[..2]).unwrap(), Order::C).unwrap();
    let mask = ds.read_mask("count", 0, None, &Region::full(&SHAPE[..2]).unwrap(), Order::C).unwrap();
    for i in 0..SHAPE[0] {
        for j in 0..SHAPE[1] {
            let (w, x) = (i / SLAB, (i % SLAB) * SHAPE[1] + j);
            let at = (i * SHAPE[1] + j) as usize;
            assert_eq!((counts[at], mask[at]), ((w * 1000 + x) as i32, x % 5 == 0), "count at {i},{j}");
        }
    }
    assert_eq!(ds.external_slots(), ["part0.frag", "part1.frag", "part3.frag", "part4.frag", "redo2.frag"]);
    let report = ds.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn a_merge_killed_at_any_moment_leaves_the_container_before_or_after_it() {
    let dir = Scratch::new("fragments-kill");
    let path = dir.path("survey.vds");
    create(&path);
    let children: Vec<_> = (0..WORKERS).map(|w| spawn(&path, &format!("part{w}.frag"), w, false)).collect();
    assert!(children.into_iter().all(|mut c| c.wait().unwrap().success()));
    let names: Vec<String> = (0..WORKERS).map(|w| format!("part{w}.frag")).collect();
    let mut files: Vec<(std::path::PathBuf, Vec<u8>)> = vec![(path.clone(), std::fs::read(&path).unwrap())];
    files.extend(names.iter().map(|n| (dir.path(n), std::fs::read(dir.path(n)).unwrap())));
    let restore = || files.iter().for_each(|(p, b)| std::fs::write(p, b).unwrap());
    let merger = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "merger", "--test-threads", "1"])
            .env("VDS_FRAGMENT_MERGER", format!("{},{}", path.display(), names.join(",")))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut reference = Vec::new();
    for_each_index(&SHAPE, |x| reference.push(value(x[0], x[1], x[2])));
    // One merge left to finish, timed (process start included).
    let t0 = std::time::Instant::now();
    assert!(merger().wait().unwrap().success());
    let whole = t0.elapsed();
    let full = Region::full(&SHAPE).unwrap();
    // Then killed at moments spread over that time, and a bit beyond.
    let (mut before, mut after, mut killed_running) = (0, 0, 0);
    let kills = 30u32;
    for i in 0..kills {
        restore();
        let mut child = merger();
        std::thread::sleep(whole * i / (kills - 6));
        if child.try_wait().unwrap().is_none() {
            killed_running += 1;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let mut ds = Dataset::open_rw(&path).unwrap_or_else(|e| panic!("kill {i}: the container does not open: {e}"));
        let report = ds.verify().unwrap();
        assert!(report.is_ok(), "kill {i}: {:?}", report.problems);
        let got: Vec<f32> = ds.read_vec("amp", &full, Order::C).unwrap();
        if ds.external_slots().is_empty() {
            assert!(got.iter().all(|x| x.is_nan()), "kill {i}: no fragment adopted, yet data");
            before += 1;
        } else {
            assert_eq!(ds.external_slots().len(), WORKERS as usize, "kill {i}: part of the fragments adopted");
            assert!(got == reference, "kill {i}: adopted, but the volume differs");
            after += 1;
        }
        // Merging again finishes the job, or finds it done.
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let report = ds.merge_fragments(&name_refs).unwrap();
        assert_eq!(report.merged.len() + report.skipped.len(), WORKERS as usize);
        assert!(ds.read_vec::<f32>("amp", &full, Order::C).unwrap() == reference, "kill {i}: after merging again");
    }
    assert_eq!(before + after, kills);
    eprintln!("merge killed {kills} times ({killed_running} while running, merge {whole:?}): {before} before, {after} after");
}

#[test]
fn overlapping_or_foreign_fragments_change_nothing() {
    let dir = Scratch::new("fragments-bad");
    let path = dir.path("c.vds");
    create(&path);
    // Two fragments that both write brick (0, 0, 0) of amp: one partially,
    // starting from the container's contents.
    let mut a = Dataset::create_fragment(&path, "a.frag").unwrap();
    a.write("amp", &Region::new(&[0, 0, 0], &[2, 2, 2]).unwrap(), Order::C, &[1.0f32; 8]).unwrap();
    let mut inside = [0f32; 2];
    a.read("amp", &Region::new(&[1, 1, 1], &[1, 1, 2]).unwrap(), Order::C, &mut inside).unwrap();
    assert_eq!(inside[0], 1.0);
    assert!(inside[1].is_nan(), "the rest of the brick is the container's (fill)");
    // A fragment carries data only.
    assert_eq!(a.set_attribute("k", Some(1.into())).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(a.resize_axis("inline", 3).unwrap_err().kind(), ErrorKind::InvalidArgument);
    a.close().unwrap();
    let (region, values) = slab(0);
    let mut b = Dataset::create_fragment(&path, "b.frag").unwrap();
    b.write("amp", &region, Order::C, &values).unwrap();
    b.close().unwrap();
    assert_eq!(Dataset::create_fragment(&path, "b.frag").unwrap_err().kind(), ErrorKind::AlreadyExists);
    assert_eq!(Dataset::create_fragment(&path, "../b.frag").unwrap_err().kind(), ErrorKind::InvalidArgument);
    let before = std::fs::read(&path).unwrap();
    let mut ds = Dataset::open_rw(&path).unwrap();
    let e = ds.merge_fragments(&["a.frag", "b.frag"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("\"a.frag\" and \"b.frag\" both hold chunk [0, 0, 0] of variable \"amp\""), "{e}");
    assert!(ds.external_slots().is_empty());
    drop(ds);
    assert_eq!(std::fs::read(&path).unwrap(), before, "the container is untouched");
    // A fragment written for a container with other variables.
    let other = dir.path("other.vds");
    DatasetBuilder::new()
        .axis(Axis::new("inline", SHAPE[0]))
        .variable(&VariableBuilder::new("amp", DType::Float64, &["inline"]))
        .create(&other)
        .unwrap()
        .close()
        .unwrap();
    let mut f = Dataset::create_fragment(&other, "o.frag").unwrap();
    f.write("amp", &Region::full(&[SHAPE[0]]).unwrap(), Order::C, &[2.0f64; 40]).unwrap();
    f.close().unwrap();
    let mut ds = Dataset::open_rw(&path).unwrap();
    let e = ds.merge_fragments(&["o.frag"]).unwrap_err();
    assert!(e.to_string().contains("written for a container with other variables"), "{e}");
    // A damaged seal is not a seal: the fragment is skipped.
    let mut bytes = std::fs::read(dir.path("b.frag")).unwrap();
    let n = bytes.len();
    bytes[n - 48 - 10] ^= 1; // inside the list of entries
    std::fs::write(dir.path("b.frag"), &bytes).unwrap();
    let report = ds.merge_fragments(&["b.frag"]).unwrap();
    assert!(report.merged.is_empty() && report.skipped[0].1.contains("CRC32"), "{report:?}");
    // Margins are written in the container only.
    let m = dir.path("m.vds");
    DatasetBuilder::new()
        .axis(Axis::new("x", 10))
        .variable(VariableBuilder::new("v", DType::Int16, &["x"]).chunk(&[4]).margin(1, 1))
        .create(&m)
        .unwrap()
        .close()
        .unwrap();
    let mut f = Dataset::create_fragment(&m, "m.frag").unwrap();
    let e = f.write("v", &Region::full(&[10]).unwrap(), Order::C, &[1i16; 10]).unwrap_err();
    assert!(e.to_string().contains("has margins"), "{e}");
}
