//! The import's two threads (`container::fill`: one reads and converts the
//! next block while the caller's thread writes the last) end together, with
//! the right error, whichever side fails: a read that fails in the middle of
//! the volume, a write that fails, and a progress callback that cancels.
#![cfg(feature = "vds")]

use std::sync::atomic::{AtomicUsize, Ordering};
use vds_segy::container::{self, Error, ImportOptions};
use vds_segy::{SegyFile, Source};

const NI: usize = 8;
const NX: usize = 8;
const NS: usize = 50;

/// A rev 1 file of IEEE floats, sorted by inline: NI x NX traces of NS samples.
fn segy() -> Vec<u8> {
    let mut f = vec![b' '; 3200];
    let mut binary = [0u8; 400];
    binary[16..18].copy_from_slice(&4000u16.to_be_bytes());
    binary[20..22].copy_from_slice(&(NS as u16).to_be_bytes());
    binary[24..26].copy_from_slice(&5u16.to_be_bytes());
    f.extend_from_slice(&binary);
    for i in 0..NI {
        for x in 0..NX {
            let mut head = [0u8; 240];
            head[114..116].copy_from_slice(&(NS as u16).to_be_bytes());
            head[188..192].copy_from_slice(&(i as i32 + 1).to_be_bytes());
            head[192..196].copy_from_slice(&(x as i32 + 1).to_be_bytes());
            f.extend_from_slice(&head);
            for s in 0..NS {
                f.extend_from_slice(&((i * 10_000 + x * 100 + s) as f32).to_be_bytes());
            }
        }
    }
    f
}

/// The file in memory, whose reads of whole traces (longer than a header,
/// after the file's headers) fail from the `fail_at`-th on.
struct Flaky {
    bytes: Vec<u8>,
    fail_at: usize,
    trace_reads: AtomicUsize,
}

impl Source for Flaky {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if buf.len() > 240 && offset >= 3600 && self.trace_reads.fetch_add(1, Ordering::SeqCst) >= self.fail_at {
            return Err(std::io::Error::other("injected read failure"));
        }
        self.bytes.as_slice().read_exact_at(buf, offset)
    }
}

/// Imports the file through `source` in blocks of one 2 x 2 column of
/// chunks, two in flight; `progress` as `fill` takes it. Returns what
/// `fill` did and how many reads of whole traces it made.
fn import(name: &str, source: Flaky, progress: &mut dyn FnMut(u64) -> bool) -> (container::Result<()>, usize) {
    let dir = std::env::temp_dir().join(format!("vds-segy-pipeline-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = SegyFile::open(source).unwrap();
    let opts = ImportOptions { chunk: Some(vec![2, 2, NS as u64]), block_bytes: 2 * 4 * (NS as u64 * 4 + 240), ..ImportOptions::default() };
    let g = container::scan(&file, &opts, &mut |_| true).unwrap();
    let mut out = container::builder(&file, &g, &opts, &mut |_| {}).unwrap().create(dir.join("out.vds")).unwrap();
    let before = file.source().trace_reads.load(Ordering::SeqCst);
    let r = container::fill(&file, &g, &mut out, opts.block_bytes, progress);
    let reads = file.source().trace_reads.load(Ordering::SeqCst) - before;
    drop(out);
    std::fs::remove_dir_all(&dir).unwrap();
    (r, reads)
}

/// The file, its reads of whole traces failing from the `fail_at`-th on
/// (counted from the file's opening, which reads the first trace whole).
fn flaky(fail_at: usize) -> Flaky {
    Flaky { bytes: segy(), fail_at, trace_reads: AtomicUsize::new(0) }
}

#[test]
fn the_whole_file_imports_in_many_blocks() {
    let mut blocks = 0;
    let (r, reads) = import("whole", flaky(usize::MAX), &mut |_| {
        blocks += 1;
        true
    });
    r.unwrap();
    assert_eq!(blocks, NI * NX / 4, "one 2 x 2 column of chunks per block");
    assert_eq!(reads, NI * NX / 2, "runs of two traces, each read once");
}

#[test]
fn a_read_failing_mid_volume_ends_the_import_with_its_error() {
    let (r, _) = import("read", flaky(5), &mut |_| true);
    match r {
        Err(Error::Segy(e)) => assert!(e.to_string().contains("injected read failure"), "{e}"),
        other => panic!("expected the read's error, got {other:?}"),
    }
}

#[test]
fn a_cancel_stops_the_reading_too() {
    let mut calls = 0;
    let (r, reads) = import("cancel", flaky(usize::MAX), &mut |_| {
        calls += 1;
        calls < 3
    });
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    // Cancelled after the third block (two reads of two traces each): the
    // reader read at most one block more, under way, not the other twelve.
    assert!(reads <= 4 * 2, "{reads} reads of whole traces after a cancel at block 3 of 16");
}
