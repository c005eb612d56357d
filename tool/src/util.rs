//! What every command shares: failures and exit codes, standard output,
//! Ctrl-C, destinations that appear only when complete, progress bars,
//! sizes, values as text, and block-wise iteration in bounded memory.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use vds::DType;

/// How a command ended when it did not succeed.
#[derive(Debug)]
pub enum Fail {
    /// A usage error (exit status 2); the message is complete.
    Usage(String),
    /// Something failed (exit status 1); printed after `vds: `.
    Error(String),
    /// Ctrl-C (exit status 130); the message says what was left behind.
    Interrupted(String),
    /// Already reported, or nothing to report: just this exit status.
    Quiet(u8),
}

impl Fail {
    /// Prints the message (one line) and returns the exit status.
    pub fn report(self) -> u8 {
        let mut err = std::io::stderr();
        match self {
            Fail::Usage(m) => {
                let _ = writeln!(err, "{m}");
                2
            }
            Fail::Error(m) => {
                let _ = writeln!(err, "vds: {m}");
                1
            }
            Fail::Interrupted(m) => {
                let _ = writeln!(err, "vds: interrupted; {m}");
                130
            }
            Fail::Quiet(code) => code,
        }
    }
}

/// Turns a library or I/O error about `path` into a failure naming it.
pub fn at<E: std::fmt::Display>(path: impl AsRef<Path>) -> impl Fn(E) -> Fail {
    let path = path.as_ref().display().to_string();
    move |e| {
        let e = e.to_string();
        Fail::Error(if e.contains(&path) { e } else { format!("{path}: {e}") })
    }
}

/// Writes to standard output. A closed pipe (`vds dump ... | head`) ends the
/// command quietly.
pub fn out(bytes: &[u8]) -> Result<(), Fail> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Fail::Quiet(0)),
        Err(e) => Err(Fail::Error(format!("writing to standard output: {e}"))),
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe that wakes the watchdog thread (-1: none).
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// Partial outputs to remove if the watchdog has to end the process.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// How long a command has, after Ctrl-C or SIGTERM, to reach a point where
/// it stops by itself and cleans up, before the watchdog ends it.
const GRACE: Duration = Duration::from_secs(2);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) on a pipe is async-signal-safe; the byte is on the stack.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

/// From now on, Ctrl-C (SIGINT) and SIGTERM set a flag that long loops
/// check with [`interrupted`], so that they can remove what they started.
/// A command blocked in a call that does not return (a stalled disk or
/// network file system) cannot check it, and the standard library retries
/// interrupted calls; so a watchdog thread ends the process GRACE after the
/// signal if the command has not stopped by then, removing the partial
/// outputs of every live [`Destination`] first.
pub fn catch_interrupts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
            let read_end = fds[0];
            WAKE.store(fds[1], Ordering::SeqCst);
            std::thread::spawn(move || watchdog(read_end));
        }
        let handler: extern "C" fn(libc::c_int) = on_interrupt;
        // SAFETY: the handler only stores to an atomic and writes to a pipe,
        // both async-signal-safe; the sigaction struct is zeroed and filled.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            // No SA_RESTART: a blocked call returns EINTR where the caller lets it.
            action.sa_flags = 0;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
            libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        }
    });
}

/// Waits for the first signal, gives the command GRACE to stop, then
/// removes its partial outputs and ends the process with status 130.
fn watchdog(read_end: libc::c_int) {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: read(2) into a one-byte buffer on the stack.
        let n = unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
    std::thread::sleep(GRACE);
    for p in PARTIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let _ = std::fs::remove_file(p);
    }
    let _ = writeln!(std::io::stderr(), "vds: interrupted; stopped {} s after the signal, partial output removed", GRACE.as_secs());
    // SAFETY: _exit ends the process without running anything else.
    unsafe { libc::_exit(130) };
}

/// Fails when Ctrl-C was pressed; `what` says what is left.
pub fn interrupted(what: &str) -> Result<(), Fail> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(Fail::Interrupted(what.to_string()))
    } else {
        Ok(())
    }
}

/// An output file written under a temporary name in the same directory and
/// renamed into place only when complete: after a failure or Ctrl-C the
/// destination is absent (or as it was), never half-written.
pub struct Destination {
    path: PathBuf,
    temp: PathBuf,
    done: bool,
}

impl Destination {
    /// Refuses an existing destination unless `force`.
    pub fn new(path: &str, force: bool) -> Result<Destination, Fail> {
        let p = PathBuf::from(path);
        if !force && p.exists() {
            return Err(Fail::Error(format!("{path}: already exists (use --force to replace it)")));
        }
        let name = p.file_name().ok_or_else(|| Fail::Error(format!("{path}: not a file name")))?;
        let temp = p.with_file_name(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
        PARTIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(temp.clone());
        Ok(Destination { path: p, temp, done: false })
    }

    /// Where to write.
    pub fn temp(&self) -> &Path {
        &self.temp
    }

    /// Moves the complete file into place (an atomic rename) and makes the
    /// rename durable.
    pub fn finish(mut self) -> Result<(), Fail> {
        std::fs::File::open(&self.temp).and_then(|f| f.sync_all()).map_err(at(&self.path))?;
        std::fs::rename(&self.temp, &self.path).map_err(at(&self.path))?;
        self.done = true;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.temp);
        }
        PARTIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|p| *p != self.temp);
    }
}

/// Opens an input file, refusing anything but a regular file without
/// blocking (a FIFO with no writer would block the open forever).
pub fn open_input(path: &str) -> Result<std::fs::File, Fail> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(at(path))?;
    if !file.metadata().map_err(at(path))?.is_file() {
        return Err(Fail::Error(format!("{path}: not a regular file")));
    }
    Ok(file)
}

/// A progress bar on standard error: drawn only when standard error is a
/// terminal (or `VDS_PROGRESS=always`), only once the work has taken a
/// second, and at most ten times a second.
pub struct Progress {
    label: String,
    /// Bytes (shown as a rate in bytes per second) or, when false, items.
    bytes: bool,
    pub total: u64,
    done: u64,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
    delay: Duration,
}

impl Progress {
    /// A bar for `total` bytes of work.
    pub fn new(label: &str, total: u64, quiet: bool) -> Progress {
        Progress::with_unit(label, total, quiet, true)
    }

    /// A bar for `total` items (chunks) of work.
    pub fn items(label: &str, total: u64, quiet: bool) -> Progress {
        Progress::with_unit(label, total, quiet, false)
    }

    fn with_unit(label: &str, total: u64, quiet: bool, bytes: bool) -> Progress {
        let forced = std::env::var("VDS_PROGRESS").is_ok_and(|v| v == "always");
        let enabled = !quiet && (forced || std::io::stderr().is_terminal());
        let delay = if forced { Duration::ZERO } else { Duration::from_secs(1) };
        Progress { label: label.to_string(), bytes, total: total.max(1), done: 0, start: Instant::now(), last: None, enabled, delay }
    }

    /// Records `n` more bytes (or items) done.
    pub fn add(&mut self, n: u64) {
        self.set(self.done + n);
    }

    /// Records that `done` bytes (or items) are done.
    pub fn set(&mut self, done: u64) {
        self.done = done.min(self.total);
        if !self.enabled || self.start.elapsed() < self.delay || self.last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        self.last = Some(Instant::now());
        let frac = self.done as f64 / self.total as f64;
        let width = 30;
        let filled = (frac * width as f64) as usize;
        let rate = self.done as f64 / self.start.elapsed().as_secs_f64().max(1e-9);
        let eta = if self.done > 0 { (self.total - self.done) as f64 / rate } else { 0.0 };
        let _ = write!(
            std::io::stderr(),
            "\r{} [{}{}] {:3.0}% {}/s, {:.0} s left ",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            frac * 100.0,
            if self.bytes { size(rate as u64) } else { format!("{rate:.0} chunks") },
            eta
        );
    }

    /// Clears the bar, if one was drawn.
    pub fn finish(&mut self) {
        if self.last.take().is_some() {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(self.label.len() + 60));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A byte count for people: `512 B`, `15.9 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The first `N` bytes of `b`.
fn a<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut x = [0u8; N];
    x.copy_from_slice(&b[..N]);
    x
}

/// One element in native byte order as text: integers in full, floats in
/// their shortest exact form, bools as `true` / `false`.
pub fn value_text(dtype: DType, b: &[u8]) -> String {
    match dtype {
        DType::Int8 => i8::from_ne_bytes(a(b)).to_string(),
        DType::Int16 => i16::from_ne_bytes(a(b)).to_string(),
        DType::Int32 => i32::from_ne_bytes(a(b)).to_string(),
        DType::Int64 => i64::from_ne_bytes(a(b)).to_string(),
        DType::UInt8 => b[0].to_string(),
        DType::UInt16 => u16::from_ne_bytes(a(b)).to_string(),
        DType::UInt32 => u32::from_ne_bytes(a(b)).to_string(),
        DType::UInt64 => u64::from_ne_bytes(a(b)).to_string(),
        DType::Float32 => f32::from_ne_bytes(a(b)).to_string(),
        DType::Float64 => f64::from_ne_bytes(a(b)).to_string(),
        _ => (b[0] != 0).to_string(),
    }
}

/// One element in native byte order as f64 (for pictures).
pub fn value_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::Int8 => f64::from(i8::from_ne_bytes(a(b))),
        DType::Int16 => f64::from(i16::from_ne_bytes(a(b))),
        DType::Int32 => f64::from(i32::from_ne_bytes(a(b))),
        DType::Int64 => i64::from_ne_bytes(a(b)) as f64,
        DType::UInt8 => f64::from(b[0]),
        DType::UInt16 => f64::from(u16::from_ne_bytes(a(b))),
        DType::UInt32 => f64::from(u32::from_ne_bytes(a(b))),
        DType::UInt64 => u64::from_ne_bytes(a(b)) as f64,
        DType::Float32 => f64::from(f32::from_ne_bytes(a(b))),
        DType::Float64 => f64::from_ne_bytes(a(b)),
        _ => f64::from(u8::from(b[0] != 0)),
    }
}

/// Reverses the byte order of each `esize`-byte element of `buf` when the
/// data's byte order (`little`) is not this machine's.
pub fn to_native(buf: &mut [u8], esize: usize, little: bool) {
    if esize > 1 && little != cfg!(target_endian = "little") {
        buf.chunks_exact_mut(esize).for_each(<[u8]>::reverse);
    }
}

/// Product of a shape, failing on overflow.
pub fn count(shape: &[u64]) -> Result<u64, Fail> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).ok_or_else(|| Fail::Error(format!("shape {shape:?} has too many elements")))
}

/// Bytes that `shape` elements of `esize` bytes take, or an error when that
/// passes 2^64 (never a wrapped, smaller number).
pub fn bytes_of(shape: &[u64], esize: u64) -> Result<u64, Fail> {
    count(shape)?
        .checked_mul(esize)
        .ok_or_else(|| Fail::Error(format!("shape {shape:?} of {esize}-byte values takes more than 2^64 bytes")))
}

/// A buffer of `bytes` bytes, or an error rather than an abort when it cannot be had.
pub fn buffer(bytes: u64) -> Result<Vec<u8>, Fail> {
    let n = usize::try_from(bytes).map_err(|_| Fail::Error(format!("{bytes} bytes do not fit in memory")))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Fail::Error(format!("cannot allocate {}", size(bytes))))?;
    v.resize(n, 0);
    Ok(v)
}

/// The blocks a copy moves one at a time (see [`vds::RegionPieces`]).
pub use vds::RegionPieces as Blocks;

/// The contiguous runs of the box (`start`, `bshape`) inside a C-order array
/// of `shape`: (element offset in the array, element offset in the box's
/// own C-order buffer, elements), in the box's order.
pub fn runs(shape: &[u64], start: &[u64], bshape: &[u64]) -> Vec<(u64, u64, u64)> {
    let n = shape.len();
    // The run covers axes j.. : every axis after j is whole.
    let mut j = n - 1;
    while j > 0 && bshape[j] == shape[j] {
        j -= 1;
    }
    let run: u64 = bshape[j..].iter().product();
    let strides: Vec<u64> = (0..n).map(|k| shape[k + 1..].iter().product()).collect();
    let outer: u64 = bshape[..j].iter().product();
    let mut out = Vec::with_capacity(outer as usize);
    let mut idx = vec![0u64; j];
    for b in 0..outer {
        let mut off: u64 = start[j..].iter().zip(&strides[j..]).map(|(s, t)| s * t).sum();
        off += idx.iter().enumerate().map(|(k, &i)| (start[k] + i) * strides[k]).sum::<u64>();
        out.push((off, b * run, run));
        for k in (0..j).rev() {
            idx[k] += 1;
            if idx[k] < bshape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_shape_once() {
        for (shape, chunk, budget) in [(vec![10u64, 7, 5], vec![3u64, 2, 5], 64u64), (vec![5, 5], vec![2, 2], 1000), (vec![9], vec![4], 8)]
        {
            let mut seen = vec![0u8; shape.iter().product::<u64>() as usize];
            for (start, b) in Blocks::new(&shape, &chunk, 4, budget) {
                for (off, boff, len) in runs(&shape, &start, &b) {
                    assert!(boff + len <= b.iter().product());
                    for e in off..off + len {
                        seen[e as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{shape:?} {chunk:?}");
        }
    }
}
