//! Opening a container's file: only regular files, and for writing only
//! with the advisory writer lock held on the file the path still names
//! (SPEC.md section 7.1).
//!
//! A compaction writes a new file and renames it over the path. A writer
//! that opened the path just before the rename and took the lock just
//! after would hold the lock of the old, unlinked file, and everything it
//! committed would vanish with it; so after the lock is taken, the path
//! must still name the locked file (same device and inode), or the open
//! starts again.

use crate::error::{Error, ErrorKind, Result};
use crate::storage::{open_nonblocking, regular};
use std::fs::{File, Metadata, OpenOptions as FsOpenOptions};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// How many times an open for writing starts again when the path was
/// replaced between the open and the lock, before reporting `Locked`.
const REPLACED_RETRIES: u32 = 16;

/// The environment variable that turns the writer lock off for file
/// systems without working locks (as HDF5's `HDF5_USE_FILE_LOCKING`).
pub const FILE_LOCKING_ENV: &str = "VDS_USE_FILE_LOCKING";

/// Whether the environment turns locking off (`VDS_USE_FILE_LOCKING` set
/// to `FALSE`, `false`, `0`, `no` or `off`).
pub(crate) fn locking_disabled_by_env() -> bool {
    std::env::var(FILE_LOCKING_ENV).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "0" | "no" | "off"))
}

/// Takes the advisory writer lock on `file`, or fails with `Locked`.
/// `locking` false (or the environment's opt-out) skips it.
pub(crate) fn lock(file: &File, path: &Path, locking: bool) -> Result<()> {
    if !locking || locking_disabled_by_env() {
        return Ok(());
    }
    flock(file, path)
}

/// Takes the advisory writer lock on `file`, or fails with `Locked`.
fn flock(file: &File, path: &Path) -> Result<()> {
    // SAFETY: flock on a valid, open descriptor has no memory effects.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Err(Error::new(ErrorKind::Locked, format!("{}: another writer has the file open", path.display()))),
        Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS) => Err(Error::io(
            format!(
                "locking {} (the file system does not support locks; set {FILE_LOCKING_ENV}=FALSE to write without the lock, \
                 at the risk of two writers corrupting the file)",
                path.display()
            ),
            err,
        )),
        _ => Err(Error::io(format!("locking {}", path.display()), err)),
    }
}

/// Whether `path` names the file whose metadata is `held` now (same device and inode).
fn names(path: &Path, held: &Metadata) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        // Renamed away or removed since the open: start again.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(format!("reading the metadata of {}", path.display()), e)),
    }
}

/// Locks `file`, opened from `path` by [`open_nonblocking`], checks that it
/// is a regular file, and that `path` still names it. Returns `Ok(None)`
/// when the path was replaced in between (the caller opens it again).
/// `what` ("opening", "creating") begins the message of an I/O error.
/// `locking` false skips the lock and the check of the path.
fn lock_named(file: File, path: &Path, locking: bool, what: &str) -> Result<Option<(File, Metadata)>> {
    let locked = if locking { flock(&file, path) } else { Ok(()) };
    // A FIFO or a device is reported as what it is, even when its lock is taken.
    let meta = regular(&file, path).map_err(|e| Error::io(format!("{what} {}", path.display()), e))?;
    locked?;
    if !locking || names(path, &meta)? {
        return Ok(Some((file, meta)));
    }
    Ok(None)
}

/// Opens the container at `path` with `open` (which opens it with
/// [`open_nonblocking`]) and takes its writer lock, opening again while the
/// path turns out to have been replaced meanwhile. Returns the file and its
/// metadata as of after the lock was taken.
///
/// # Errors
/// `Locked` when another writer holds it (or the path keeps being replaced
/// by other writers' compactions); `Io` when `open` fails (the message
/// begins with `what` and the path) or the file is not a regular file.
pub(crate) fn open_locked(path: &Path, locking: bool, what: &str, open: impl Fn() -> std::io::Result<File>) -> Result<(File, Metadata)> {
    let locking = locking && !locking_disabled_by_env();
    for _ in 0..REPLACED_RETRIES {
        let file = open().map_err(|e| Error::io(format!("{what} {}", path.display()), e))?;
        if let Some(opened) = lock_named(file, path, locking, what)? {
            return Ok(opened);
        }
    }
    Err(Error::new(
        ErrorKind::Locked,
        format!(
            "{}: the file was replaced {REPLACED_RETRIES} times while it was being opened (another writer compacting it)",
            path.display()
        ),
    ))
}

/// Opens the existing container at `path` for reading and writing, with its writer lock.
///
/// # Errors
/// As [`open_locked`].
pub(crate) fn open_rw_locked(path: &Path, locking: bool) -> Result<(File, Metadata)> {
    open_locked(path, locking, "opening", || open_nonblocking(path, FsOpenOptions::new().read(true).write(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race the check closes: the path is opened, another writer renames
    /// a new file over it, and only then is the lock taken.
    #[test]
    fn a_lock_on_a_replaced_file_is_not_kept() {
        let dir = std::env::temp_dir().join(format!("vds-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.vds");
        std::fs::write(&path, b"old").unwrap();
        let stale = FsOpenOptions::new().read(true).write(true).open(&path).unwrap();
        let new = dir.join("c.vds.compacting");
        std::fs::write(&new, b"new").unwrap();
        let other = FsOpenOptions::new().read(true).write(true).open(&new).unwrap();
        lock(&other, &new, true).unwrap();
        std::fs::rename(&new, &path).unwrap();
        // The stale handle's lock is free, but the path names another file.
        assert!(lock_named(stale, &path, true, "opening").unwrap().is_none());
        // Opening again finds the new file, whose lock the other writer holds.
        assert_eq!(open_rw_locked(&path, true).unwrap_err().kind(), ErrorKind::Locked);
        drop(other);
        let (f, meta) = open_rw_locked(&path, true).unwrap();
        assert!(names(&path, &f.metadata().unwrap()).unwrap());
        assert_eq!(meta.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
