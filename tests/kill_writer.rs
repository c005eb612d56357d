//! A writer killed with SIGKILL at any moment leaves a file that opens at one
//! of its commits, exactly. A child process (this test binary, re-run with
//! VDS_KILL_CHILD set) updates a variable and an attribute and commits in a
//! loop, compacting every 50 commits; the parent kills it after a random
//! delay, hundreds of times, and each time reopens the file and compares it
//! with the state the commit it shows must have. While the child runs, the
//! parent also reads the file from its own process: a reader in another
//! process must never see a torn state either.
//!
//! A second test races two such writers against each other's compactions:
//! each opens the file for writing (waiting while the other holds it),
//! commits a few steps, compacts and closes, in a loop, and reports every
//! commit that returned; after both are killed, the file must hold every
//! reported commit of each.
//!
//! The file is small (7.5 KiB of data), so it has the compact layout (SPEC.md
//! 1.1); its index moves to 4096-byte pages as commits add up, and each
//! compaction brings it back to 256-byte ones. The first test also runs
//! over a file forced to the aligned layout.
//!
//! VDS_KILL_ROUNDS sets the number of kills (default 150 per layout; try 5000).

mod common;
use common::{layout_of, record_reliability, Rng, Scratch};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vds::serde_json::json;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Durability, ErrorKind, Layout, OpenOptions, Order, Region, VariableBuilder};

const CHILD: &str = "VDS_KILL_CHILD";
const RACER: &str = "VDS_RACE_CHILD";
const SHAPE: [u64; 2] = [48, 40];
/// The writer compacts after every this many commits: the commits between
/// take the file past COMPACT_LIMIT (about 1.7 KiB each), so its index
/// moves to 4096-byte pages before each compaction brings it back.
const COMPACT_EVERY: u64 = 50;

/// The change commit `step` makes: a region and its values, from the step alone.
fn update(step: u64) -> (Region, Vec<u32>) {
    let mut rng = Rng::new(step);
    let (y, x) = (rng.below(48), rng.below(40));
    let (h, w) = (1 + rng.below(48 - y), 1 + rng.below(40 - x));
    let constant = step % 3 == 0;
    let values = (0..h * w).map(|i| if constant { step as u32 } else { (step as u32) << 12 | i as u32 }).collect();
    (Region::new(&[y, x], &[h, w]).unwrap(), values)
}

/// Applies commit `step`'s change to a C-order reference of SHAPE.
fn apply(state: &mut [u32], step: u64) {
    let (r, values) = update(step);
    let mut k = 0;
    for i in 0..r.shape()[0] {
        for j in 0..r.shape()[1] {
            state[((r.start()[0] + i) * SHAPE[1] + r.start()[1] + j) as usize] = values[k];
            k += 1;
        }
    }
}

fn create(path: &Path) {
    create_in_layout(path, Layout::Auto);
}

fn create_in_layout(path: &Path, layout: Layout) {
    DatasetBuilder::new()
        .layout(layout)
        .axis(Axis::new("y", 48))
        .axis(Axis::new("x", 40))
        .variable(VariableBuilder::new("v", DType::UInt32, &["y", "x"]).chunk(&[16, 16]).codec(Codec::deflate(1)))
        .attribute("step", 0)
        .attribute("w0", 0)
        .attribute("w1", 0)
        .create(path)
        .unwrap()
        .close()
        .unwrap();
}

/// The writer: commits steps after the file's current one, until killed (or `limit`).
fn write_steps(path: &Path, limit: Option<u64>) {
    write_steps_watched(path, limit, &mut |_| {});
}

/// [`write_steps`], calling `after(step)` once each step has committed (and compacted).
fn write_steps_watched(path: &Path, limit: Option<u64>, after: &mut dyn FnMut(u64)) {
    let mut ds = OpenOptions::new().write(true).durability(Durability::Fsync).open(path).unwrap();
    let mut step = ds.attributes()["step"].as_u64().unwrap();
    loop {
        step += 1;
        let (r, values) = update(step);
        ds.write("v", &r, Order::C, &values).unwrap();
        ds.set_attribute("step", Some(json!(step))).unwrap();
        ds.commit().unwrap();
        if step % COMPACT_EVERY == 0 {
            ds.compact().unwrap();
        }
        after(step);
        if limit.is_some_and(|l| step >= l) {
            return;
        }
    }
}

/// Opens the file and checks that it is exactly the state of the commit it
/// claims (its "step" attribute). `model` holds the state at `model_step`
/// and is advanced as needed (steps only move forward). Returns the step.
fn check(path: &Path, model: &mut Vec<u32>, model_step: &mut u64) -> u64 {
    let ds = Dataset::open(path).unwrap_or_else(|e| panic!("the file does not open: {e}"));
    let step = ds.attributes()["step"].as_u64().unwrap();
    let got: Vec<u32> = ds.read_vec("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap_or_else(|e| panic!("step {step}: {e}"));
    assert!(step >= *model_step, "the file went back from commit {} to {step}", *model_step);
    while *model_step < step {
        *model_step += 1;
        apply(model, *model_step);
    }
    assert!(got == *model, "the file claims commit {step} but its data differ from that commit's");
    step
}

#[test]
fn writer_killed_at_random_moments_leaves_a_committed_state() {
    if let Some(path) = std::env::var_os(CHILD) {
        write_steps(Path::new(&path), None);
        return;
    }
    let rounds: u64 = std::env::var("VDS_KILL_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    let mut rows = String::new();
    for (layout, name) in [(Layout::Compact, "compact"), (Layout::Aligned, "aligned")] {
        // Which page sizes the kills landed in depends on the machine's
        // speed; that the compact file changes page size is checked step by
        // step in the_writer_workload_is_what_the_checker_expects.
        let (kills, commits, reads, sizes, elapsed) = kill_rounds(rounds, layout);
        rows += &format!(
            "| {name} | {kills} | {rounds} | 0 | {commits} | {reads} | {} | no problem | {elapsed:.1} s |\n",
            sizes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        );
    }
    record_reliability(
        "kill-9",
        &format!(
            "## Killed writer (tests/kill_writer.rs)\n\n\
             A child process updates a region, sets an attribute and commits (fsync) in a loop, compacting every 50 \
             commits; it is killed with SIGKILL after a random 5 to 65 ms, and the file is reopened and compared with \
             the state of the commit it shows. Meanwhile this process reads the file concurrently. The file runs in \
             each layout (SPEC.md 1.1); the compact one changes index page size as it grows and is compacted.\n\n\
             | layout | kills (SIGKILL while running) | reopens after a kill that matched a committed state exactly | \
             reopens that failed or showed anything else | commits made (compactions every 50) | concurrent reads \
             from another process, each a committed state | index page sizes seen | final verify | time |\n\
             |---|---|---|---|---|---|---|---|---|\n{rows}\n\
             Run longer with `VDS_KILL_ROUNDS=5000 cargo test --release --test kill_writer`.\n\n"
        ),
    );
}

/// Kills a writer of a file of `layout` `rounds` times; returns the kills,
/// the commits made, the concurrent reads, the index page sizes seen at the
/// reopens and the time taken.
fn kill_rounds(rounds: u64, layout: Layout) -> (u64, u64, u64, std::collections::BTreeSet<u32>, f64) {
    let dir = Scratch::new("kill");
    let path = dir.path("k.vds");
    create_in_layout(&path, layout);
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(common::seed(0x6B11));
    let (mut model, mut model_step) = (vec![0u32; 48 * 40], 0u64);
    let (mut concurrent_reads, mut killed_mid_run, mut max_step) = (0u64, 0u64, 0u64);
    let mut sizes = std::collections::BTreeSet::new();
    let started = Instant::now();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "writer_killed_at_random_moments_leaves_a_committed_state", "--nocapture", "--test-threads=1"])
            .env(CHILD, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(5 + rng.below(60));
        // Read from this process while the child commits.
        while Instant::now() < deadline {
            check(&path, &mut model, &mut model_step);
            concurrent_reads += 1;
        }
        // SIGKILL: no destructor, no flush, no chance to finish a write.
        child.kill().unwrap();
        let status = child.wait().unwrap();
        if status.code().is_none() {
            killed_mid_run += 1;
        } else {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("round {round}: the writer exited by itself ({status}): {err}");
        }
        max_step = check(&path, &mut model, &mut model_step);
        let (head, page) = layout_of(&std::fs::read(&path).unwrap());
        assert_eq!(head % 4096 != 0, layout == Layout::Compact, "round {round}: head of {head} bytes");
        sizes.insert(page);
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(max_step > rounds, "the writer made too little progress to test anything: {max_step} commits in {rounds} rounds");
    let report = Dataset::open(&path).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    (killed_mid_run, max_step, concurrent_reads, sizes, elapsed)
}

/// A racing writer `w`: opens the file for writing (waiting while the other
/// writer holds it), commits one to four steps, each also counting its own
/// commits in attribute `w<w>`, and prints the count once the commit has
/// returned; compacts; closes; again, until killed.
fn race_steps(path: &Path, w: u64) {
    use std::io::Write;
    let counter = format!("w{w}");
    let mut rng = Rng::new(w + 1);
    loop {
        let mut ds = match OpenOptions::new().write(true).open(path) {
            Ok(ds) => ds,
            Err(e) if e.kind() == ErrorKind::Locked => {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            Err(e) => panic!("writer {w}: {e}"),
        };
        let mut step = ds.attributes()["step"].as_u64().unwrap();
        let mut mine = ds.attributes()[counter.as_str()].as_u64().unwrap();
        for _ in 0..1 + rng.below(4) {
            step += 1;
            mine += 1;
            let (r, values) = update(step);
            ds.write("v", &r, Order::C, &values).unwrap();
            ds.set_attribute("step", Some(json!(step))).unwrap();
            ds.set_attribute(&counter, Some(json!(mine))).unwrap();
            ds.commit().unwrap();
            let mut out = std::io::stdout().lock();
            writeln!(out, "{mine}").unwrap();
            out.flush().unwrap();
        }
        ds.compact().unwrap();
        drop(ds);
    }
}

#[test]
fn writers_racing_compactions_never_lose_a_commit() {
    if let (Some(path), Ok(w)) = (std::env::var_os(RACER), std::env::var("VDS_RACE_WRITER")) {
        race_steps(Path::new(&path), w.parse().unwrap());
        return;
    }
    let rounds: u64 = std::env::var("VDS_KILL_ROUNDS").ok().and_then(|s| s.parse().ok()).map_or(40, |r: u64| r.div_ceil(4));
    let dir = Scratch::new("race");
    let path = dir.path("r.vds");
    create(&path);
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(common::seed(0x6ACE));
    let (mut model, mut model_step) = (vec![0u32; 48 * 40], 0u64);
    let (mut reported, mut reads) = ([0u64; 2], 0u64);
    let started = Instant::now();
    for round in 0..rounds {
        let mut children: Vec<_> = (0..2)
            .map(|w| {
                Command::new(&exe)
                    .args(["--exact", "writers_racing_compactions_never_lose_a_commit", "--nocapture", "--test-threads=1"])
                    .env(RACER, &path)
                    .env("VDS_RACE_WRITER", w.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let deadline = Instant::now() + Duration::from_millis(20 + rng.below(150));
        while Instant::now() < deadline {
            check(&path, &mut model, &mut model_step);
            reads += 1;
        }
        for (w, child) in children.iter_mut().enumerate() {
            child.kill().unwrap();
            let status = child.wait().unwrap();
            let (mut out, mut err) = (String::new(), String::new());
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(status.code().is_none(), "round {round}: writer {w} exited by itself ({status}): {err}");
            // Every line is a commit that returned, numbered by the writer.
            if let Some(n) = out.lines().filter_map(|l| l.trim().parse::<u64>().ok()).max() {
                reported[w] = reported[w].max(n);
            }
        }
        check(&path, &mut model, &mut model_step);
        let ds = Dataset::open(&path).unwrap();
        for (w, &n) in reported.iter().enumerate() {
            let held = ds.attributes()[format!("w{w}").as_str()].as_u64().unwrap();
            assert!(held >= n, "round {round}: writer {w} saw {n} of its commits return, but the file holds {held}");
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(reported.iter().all(|&n| n > 0), "a writer never committed: {reported:?}");
    let report = Dataset::open(&path).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    record_reliability(
        "race-compaction",
        &format!(
            "## Writers racing compactions (tests/kill_writer.rs)\n\n\
             Two child processes each open the file for writing (waiting while the other holds the lock), commit one to \
             four steps (fsync), compact (which renames a new file over the path) and close, in a loop; both are killed \
             with SIGKILL after a random 20 to 170 ms. Every commit a writer saw return must be in the file.\n\n\
             | figure | value |\n|---|---|\n\
             | rounds (both writers killed) | {rounds} |\n\
             | commits that returned, writer 0 / writer 1 | {} / {} |\n\
             | commits that returned but are missing from the file | 0 |\n\
             | concurrent reads from a third process, each a committed state | {reads} |\n\
             | final verify of every checksum and structure | no problem |\n\
             | time | {elapsed:.1} s |\n\n",
            reported[0], reported[1]
        ),
    );
}

#[test]
fn the_writer_workload_is_what_the_checker_expects() {
    // Without kills: the writer's commits and the checker's model agree step by step.
    let dir = Scratch::new("kill-model");
    let path = dir.path("m.vds");
    create(&path);
    let (mut model, mut model_step) = (vec![0u32; 48 * 40], 0u64);
    for limit in [1, 7, 30, 31] {
        write_steps(&path, Some(limit));
        assert_eq!(check(&path, &mut model, &mut model_step), limit);
    }
    // Commit by commit, the compact file's index moves to 4096-byte pages as
    // it grows past COMPACT_LIMIT, and each compaction (every COMPACT_EVERY steps)
    // brings it back to 256-byte ones: the kill test's writer goes through both.
    let mut sizes = Vec::new();
    write_steps_watched(&path, Some(2 * COMPACT_EVERY + 10), &mut |step| {
        assert_eq!(check(&path, &mut model, &mut model_step), step);
        let (head, page) = layout_of(&std::fs::read(&path).unwrap());
        assert!(head % 4096 != 0, "step {step}: the file left the compact layout (head of {head} bytes)");
        sizes.push((step, page, std::fs::metadata(&path).unwrap().len()));
    });
    assert!(sizes.iter().any(|&(_, p, _)| p == 4096), "the index never moved to 4096-byte pages: {sizes:?}");
    for &(step, page, _) in &sizes {
        if step % COMPACT_EVERY == 0 {
            assert_eq!(page, 256, "step {step} compacted, yet its pages are {page} bytes: {sizes:?}");
        }
    }
}

#[test]
fn reader_threads_see_only_committed_states_while_a_writer_commits() {
    let dir = Scratch::new("threads-commit");
    let path = dir.path("t.vds");
    create(&path);
    std::thread::scope(|s| {
        let writer = s.spawn(|| write_steps(&path, Some(120)));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let (mut model, mut model_step, mut reads) = (vec![0u32; 48 * 40], 0u64, 0u64);
                    // A long-lived handle that refreshes, and fresh opens.
                    let mut held = Dataset::open(&path).unwrap();
                    while model_step < 120 {
                        check(&path, &mut model, &mut model_step);
                        held.refresh().unwrap();
                        let step = held.attributes()["step"].as_u64().unwrap();
                        let mut m = vec![0u32; 48 * 40];
                        (1..=step).for_each(|k| apply(&mut m, k));
                        assert_eq!(
                            held.read_vec::<u32>("v", &Region::full(&SHAPE).unwrap(), Order::C).unwrap(),
                            m,
                            "refreshed handle at {step}"
                        );
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        writer.join().unwrap();
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
}
