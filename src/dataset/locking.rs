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
use crate::storage::open_regular;
use std::fs::{File, OpenOptions as FsOpenOptions};
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

/// Whether `path` names `file` now (same device and inode).
fn names(path: &Path, file: &File) -> Result<bool> {
    let held = file.metadata().map_err(|e| Error::io(format!("reading the metadata of {}", path.display()), e))?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        // Renamed away or removed since the open: start again.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(format!("reading the metadata of {}", path.display()), e)),
    }
}

/// Locks `file`, opened from `path`, and checks that `path` still names it.
/// Returns `Ok(None)` when the path was replaced in between (the caller
/// opens it again).
fn lock_named(file: File, path: &Path, locking: bool) -> Result<Option<File>> {
    lock(&file, path, locking)?;
    if !locking || locking_disabled_by_env() || names(path, &file)? {
        return Ok(Some(file));
    }
    Ok(None)
}

/// Opens the container at `path` with `open` and takes its writer lock,
/// opening again while the path turns out to have been replaced meanwhile.
///
/// # Errors
/// `Locked` when another writer holds it (or the path keeps being replaced
/// by other writers' compactions); whatever `open` fails with.
pub(crate) fn open_locked(path: &Path, locking: bool, open: impl Fn() -> Result<File>) -> Result<File> {
    for _ in 0..REPLACED_RETRIES {
        if let Some(file) = lock_named(open()?, path, locking)? {
            return Ok(file);
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
pub(crate) fn open_rw_locked(path: &Path, locking: bool) -> Result<File> {
    open_locked(path, locking, || {
        open_regular(path, FsOpenOptions::new().read(true).write(true)).map_err(|e| Error::io(format!("opening {}", path.display()), e))
    })
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
        assert!(lock_named(stale, &path, true).unwrap().is_none());
        // Opening again finds the new file, whose lock the other writer holds.
        assert_eq!(open_rw_locked(&path, true).unwrap_err().kind(), ErrorKind::Locked);
        drop(other);
        let f = open_rw_locked(&path, true).unwrap();
        assert!(names(&path, &f).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
