//! The writer lock: one writer per index directory, across processes.

use std::fs::File;
use std::io;
use std::time::{Duration, Instant};

use crate::{IndexDir, LOCK};

/// How a writer waits for a lock: pauses that double from 1 ms up to 20 ms, until a deadline
/// (forever when there is none).
#[derive(Debug)]
pub struct Wait {
    deadline: Option<Instant>,
    pause: Duration,
}

impl Wait {
    /// Waits until `deadline`, or forever when `None`.
    pub fn until(deadline: Option<Instant>) -> Wait {
        Wait {
            deadline,
            pause: Duration::from_millis(1),
        }
    }

    /// Sleeps before the next try: `false`, without sleeping, once the deadline has passed.
    pub fn pause(&mut self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(Duration::from_millis(20));
        true
    }
}

/// Why the writer lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another writer held it until the deadline passed.
    Busy,
    /// The lock file could not be opened or locked: something other than a regular file is in
    /// its place (never followed, never blocked on), or I/O failed.
    Io(io::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy => f.write_str("another writer held the index lock past the deadline"),
            LockError::Io(e) => write!(f, "the index lock could not be taken: {e}"),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Io(e) => Some(e),
            LockError::Busy => None,
        }
    }
}

/// The writer lock, held until dropped.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl IndexDir {
    /// Takes the directory's writer lock: an OS lock on [`LOCK`], waiting as `wait` says. The
    /// lock file is created when missing and opened without following a symlink and without
    /// blocking on a FIFO, regular files only ([`search_profile::open_or_create_regular`]).
    /// Readers never take it.
    pub fn lock(&self, wait: &mut Wait) -> Result<WriterLock, LockError> {
        let file = search_profile::open_or_create_regular(&self.path().join(LOCK))
            .map_err(LockError::Io)?;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(WriterLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) => {
                    if !wait.pause() {
                        return Err(LockError::Busy);
                    }
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_holds_the_lock_and_the_next_waits_until_its_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        let held = dir.lock(&mut Wait::until(None)).unwrap();
        // Another handle on the same directory, as another process would hold it.
        let other = IndexDir::open(tmp.path()).unwrap();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(50);
        let busy = other.lock(&mut Wait::until(Some(deadline)));
        assert!(matches!(busy, Err(LockError::Busy)), "{busy:?}");
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(held);
        assert!(other.lock(&mut Wait::until(Some(Instant::now()))).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_file_that_is_a_symlink_is_refused_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, tmp.path().join(LOCK)).unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        assert!(matches!(
            dir.lock(&mut Wait::until(None)),
            Err(LockError::Io(_))
        ));
        assert!(!target.exists(), "nothing was created through the link");
    }
}
