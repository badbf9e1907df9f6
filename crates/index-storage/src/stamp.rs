//! A file's stamp, as `stat` reports it.

/// A file's identity and version as `stat` reports it: size, modification and status-change
/// times in nanoseconds, inode. Two equal stamps mean the file was not written in between,
/// unless it was written within the file system's timestamp granularity of the `stat` (a reader
/// that trusts stamps handles that "racy" window itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u64,
    /// Status-change time, nanoseconds since the epoch (0 where there is none).
    pub ctime_ns: u64,
    /// Inode number (0 where there is none).
    pub ino: u64,
}

impl Stamp {
    /// The stamp of `m`.
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let ns = |s: i64, n: i64| {
                (s as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(n as u64)
            };
            Stamp {
                len: m.len(),
                mtime_ns: ns(m.mtime(), m.mtime_nsec()),
                ctime_ns: ns(m.ctime(), m.ctime_nsec()),
                ino: m.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let ns = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            Stamp {
                len: m.len(),
                mtime_ns: ns,
                ctime_ns: 0,
                ino: 0,
            }
        }
    }
}
