//! Opening files beneath a root without ever following a symlink.
//!
//! A path that was a plain directory when it was indexed may be a symlink to `/etc` by the time it
//! is opened (a submodule update, a nested repository, a crafted index entry). Joining it to the
//! root and calling `open` would follow that link. Here every component is resolved beneath the
//! root and none may be a symlink; the file must be a regular file, and it is opened without
//! blocking, so a FIFO planted in its place cannot hang the caller.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Why a file was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// A component of the path is a symlink (or the path would leave the root).
    Symlink,
    /// The path names something other than a regular file: a directory, FIFO, socket or device.
    NotRegular,
    /// Nothing is there.
    Missing,
    /// The path is not a canonical repo-relative path (empty, absolute, or with `.`/`..`).
    BadPath,
    /// Opening failed otherwise (permissions, I/O).
    Io(io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OpenError::Symlink => "a component of the path is a symlink",
            OpenError::NotRegular => "the path is not a regular file",
            OpenError::Missing => "the file does not exist",
            OpenError::BadPath => "the path is not a canonical relative path",
            OpenError::Io(_) => "the file could not be opened",
        })
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        match e {
            OpenError::Io(e) => e,
            OpenError::Missing => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
            other => io::Error::other(other.to_string()),
        }
    }
}

/// The directory a walker thread opened last, for [`RootDir::open_walked_file_in`]: one a
/// thread, never shared, and used with one [`RootDir`] only (it holds a directory of that root).
#[derive(Debug, Default)]
pub struct LastDir {
    rel: Vec<u8>,
    #[cfg(unix)]
    fd: Option<std::os::fd::OwnedFd>,
}

/// What [`RootDir::prefetch_walked_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// The file's first page was in the page cache already; nothing was asked of the disk.
    Cached,
    /// The kernel was asked to read the file; the call did not wait for it.
    Started,
    /// Nothing was done: the file could not be opened, or the platform cannot tell or hint.
    Skipped,
}

/// A directory that relative paths are opened beneath.
#[derive(Debug)]
pub struct RootDir {
    path: PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

impl RootDir {
    /// Opens `path` (a directory; it may itself be reached through symlinks, as the caller chose
    /// it) as the root.
    pub fn open(path: impl AsRef<Path>) -> io::Result<RootDir> {
        RootDir::open_dir(path.as_ref(), false)
    }

    /// [`RootDir::open`] for a directory that must itself be a real directory, not a symlink to
    /// one: a directory an index made for itself, where a link planted in its place must never
    /// lead its writers elsewhere ([`io::ErrorKind::NotADirectory`]). The components before the
    /// last are the caller's choice.
    pub fn open_real(path: impl AsRef<Path>) -> io::Result<RootDir> {
        RootDir::open_dir(path.as_ref(), true)
    }

    fn open_dir(path: &Path, real: bool) -> io::Result<RootDir> {
        let path = path.to_path_buf();
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags, open};
            let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            if real {
                flags |= OFlags::NOFOLLOW;
            }
            let fd = open(&path, flags, Mode::empty()).map_err(|e| {
                // A symlink opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR or ELOOP.
                if real && (e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR) {
                    io::Error::new(io::ErrorKind::NotADirectory, "not a real directory")
                } else {
                    io::Error::from(e)
                }
            })?;
            Ok(RootDir { path, fd })
        }
        #[cfg(not(unix))]
        {
            let meta = if real {
                std::fs::symlink_metadata(&path)?
            } else {
                std::fs::metadata(&path)?
            };
            if !meta.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "the root is not a directory",
                ));
            }
            Ok(RootDir { path })
        }
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the root's path still names the directory this handle opened. `false` once it was
    /// deleted, or replaced (for example a repository re-cloned at the same path): the caller
    /// opens the path again.
    pub fn is_still_at_path(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let (Ok(held), Ok(now)) = (rustix::fs::fstat(&self.fd), std::fs::metadata(&self.path))
            else {
                return false;
            };
            // The widths of `st_ino` and `st_dev` differ between platforms.
            #[allow(clippy::unnecessary_cast)]
            let same = held.st_ino as u64 == now.ino() && held.st_dev as u64 == now.dev();
            same && held.st_nlink > 0
        }
        #[cfg(not(unix))]
        {
            self.path.is_dir()
        }
    }

    /// Opens the regular file at the repo-relative, `/`-separated path `rel`, following no symlink
    /// in any component and never blocking.
    pub fn open_file(&self, rel: &str) -> Result<File, OpenError> {
        let file = self.open_walked_file(rel)?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if !meta.is_file() {
            return Err(OpenError::NotRegular);
        }
        Ok(file)
    }

    /// [`RootDir::open_file`] for a path a walk has just listed as a regular file: the same
    /// symlink-free, non-blocking open, without the `fstat` that checks the type again (one
    /// system call per file, which shows at ripgrep's speed). Something swapped in between the
    /// listing and the open is still never reached through a symlink, and cannot block the
    /// search: a FIFO reads as empty or fails, a directory fails to read, a device yields bytes
    /// that the search bounds by its deadline and binary rule. Paths that come from anywhere else
    /// (an index) use [`RootDir::open_file`].
    pub fn open_walked_file(&self, rel: &str) -> Result<File, OpenError> {
        let rel = walked_bytes(rel)?;
        self.open_raw(&rel)
    }

    /// [`RootDir::open_walked_file`] through the directory a walker thread opened last: the file's
    /// directory is opened once (no symlink in its path, never above the root), kept in `last`,
    /// and each of its files is opened from it by its name alone with `O_NOFOLLOW`. A walk hands
    /// a thread a directory's files one after another, so the kernel resolves one name a file
    /// instead of its whole path. A directory replaced since `last` opened it is not seen: its
    /// files are opened in the directory the walk listed them in.
    pub fn open_walked_file_in(&self, last: &mut LastDir, rel: &str) -> Result<File, OpenError> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::{Mode, OFlags, openat, openat2};
            let bytes = walked_bytes(rel)?;
            let Some(slash) = memchr::memrchr(b'/', &bytes) else {
                return self.open_raw(&bytes);
            };
            let (dir, name) = (&bytes[..slash], &bytes[slash + 1..]);
            let at = match &last.fd {
                Some(fd) if last.rel == dir => fd,
                _ => {
                    last.fd = None;
                    last.rel.clear();
                    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                    match openat2(&self.fd, dir, flags, Mode::empty(), BENEATH_NO_LINKS) {
                        Ok(fd) => {
                            last.rel.extend_from_slice(dir);
                            last.fd.insert(fd)
                        }
                        // `open_raw` would only try `openat2` again.
                        Err(e) if openat2_unavailable(e) => {
                            return self.open_by_components(&bytes, WALKED_FILE);
                        }
                        Err(e) => return Err(map_errno(e)),
                    }
                }
            };
            openat(at, name, WALKED_FILE | OFlags::NOFOLLOW, Mode::empty())
                .map(File::from)
                .map_err(map_errno)
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = last;
            self.open_walked_file(rel)
        }
    }

    /// Asks the kernel to start reading the walked file at `rel` into its page cache, and returns
    /// without waiting for the data: a reader that opens it soon then finds it cached or on its
    /// way. Reads of a tree that is not cached then overlap, where each reader would otherwise
    /// wait for the disk in turn. The file is opened as [`RootDir::open_walked_file`] opens it (no
    /// symlink, never blocking) and nothing of it is read into this process.
    ///
    /// Returns [`Prefetch::Cached`] when the file's first page was cached already (nothing was
    /// asked of the disk), so that a caller can stop hinting a tree that is warm.
    pub fn prefetch_walked_file(&self, rel: &str) -> Prefetch {
        let Ok(file) = self.open_walked_file(rel) else {
            return Prefetch::Skipped;
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::io::{Errno, ReadWriteFlags, preadv2};
            let mut byte = [0u8; 1];
            let probe = preadv2(
                &file,
                &mut [io::IoSliceMut::new(&mut byte)],
                0,
                ReadWriteFlags::NOWAIT,
            );
            match probe {
                // Data came back without waiting (or the file is empty): cached.
                Ok(_) => return Prefetch::Cached,
                // Only `EAGAIN` says the data is not cached; anything else (a kernel without
                // the flag, a file system that refuses it) says nothing, so the hint is given.
                Err(e) if e != Errno::AGAIN && e != Errno::OPNOTSUPP && e != Errno::INVAL => {
                    return Prefetch::Skipped;
                }
                Err(_) => {}
            }
            match rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::WillNeed) {
                Ok(()) => Prefetch::Started,
                Err(_) => Prefetch::Skipped,
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            drop(file);
            Prefetch::Skipped
        }
    }

    #[cfg(unix)]
    fn open_raw(&self, rel: &[u8]) -> Result<File, OpenError> {
        use rustix::fs::Mode;
        let flags = WALKED_FILE;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            match rustix::fs::openat2(&self.fd, rel, flags, Mode::empty(), BENEATH_NO_LINKS) {
                Ok(fd) => return Ok(File::from(fd)),
                // Resolved by hand below.
                Err(e) if openat2_unavailable(e) => {}
                Err(e) => return Err(map_errno(e)),
            }
        }
        self.open_by_components(rel, flags)
    }

    /// Opens component by component with `O_NOFOLLOW`: no symlink is followed, anywhere.
    #[cfg(unix)]
    fn open_by_components(&self, rel: &[u8], flags: rustix::fs::OFlags) -> Result<File, OpenError> {
        use rustix::fs::{Mode, OFlags, openat};
        let mut parts = rel.split(|&b| b == b'/').peekable();
        let mut dir: Option<std::os::fd::OwnedFd> = None;
        while let Some(part) = parts.next() {
            let at = dir.as_ref().unwrap_or(&self.fd);
            if parts.peek().is_none() {
                let fd =
                    openat(at, part, flags | OFlags::NOFOLLOW, Mode::empty()).map_err(map_errno)?;
                return Ok(File::from(fd));
            }
            let next = openat(
                at,
                part,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                // A symlink opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR or ELOOP.
                if e == rustix::io::Errno::NOTDIR {
                    OpenError::Symlink
                } else {
                    map_errno(e)
                }
            })?;
            dir = Some(next);
        }
        Err(OpenError::BadPath)
    }

    #[cfg(not(unix))]
    fn open_raw(&self, rel: &[u8]) -> Result<File, OpenError> {
        // Only Unix has names that are not UTF-8.
        let rel = std::str::from_utf8(rel).map_err(|_| OpenError::BadPath)?;
        // Best effort where there is no `openat`: refuse any component that is a link right now.
        let mut at = self.path.clone();
        for part in rel.split('/') {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => return Err(OpenError::Symlink),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::Missing),
                Err(e) => return Err(OpenError::Io(e)),
            }
        }
        File::open(&at).map_err(OpenError::Io)
    }
}

/// What `lstat` says of a directory entry: enough to tell whether a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStat {
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u64,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: u64,
    /// Inode number.
    pub ino: u64,
    /// It is a regular file (not a symlink, directory, FIFO, ...).
    pub is_file: bool,
}

impl RootDir {
    /// `lstat`s each of `names` (plain names, no `/`) in the repo-relative directory `dir` (`""`
    /// for the root), reached without following a symlink: one directory lookup for them all,
    /// not one path walk each. `None` for a name that is not there. Both may be walk names
    /// ([`crate::walk_name`]).
    pub fn stat_entries(&self, dir: &str, names: &[&str]) -> Vec<Option<EntryStat>> {
        #[cfg(unix)]
        {
            use rustix::fs::{AtFlags, Mode, OFlags, openat, statat};
            let opened;
            let at = if dir.is_empty() {
                &self.fd
            } else {
                match openat(
                    &self.fd,
                    &*crate::name_bytes(dir),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    // Only the last component is checked here; the directory cache that calls
                    // this trusts the stamps of every directory on the way, which it checks.
                    Ok(fd) => {
                        opened = fd;
                        &opened
                    }
                    Err(_) => return vec![None; names.len()],
                }
            };
            let ns = |s: i64, n: u64| (s as u64).wrapping_mul(1_000_000_000).wrapping_add(n);
            names
                .iter()
                .map(|name| {
                    let st =
                        statat(at, &*crate::name_bytes(name), AtFlags::SYMLINK_NOFOLLOW).ok()?;
                    #[allow(clippy::unnecessary_cast)]
                    Some(EntryStat {
                        len: st.st_size as u64,
                        mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as u64),
                        ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as u64),
                        ino: st.st_ino as u64,
                        is_file: rustix::fs::FileType::from_raw_mode(st.st_mode)
                            == rustix::fs::FileType::RegularFile,
                    })
                })
                .collect()
        }
        #[cfg(not(unix))]
        {
            let _ = (dir, names);
            vec![None; names.len()]
        }
    }
}

/// Opens `path` for reading only, without following a symlink in its last component and without
/// blocking on a FIFO; never creates it. The file must be regular. For caches a reader must not
/// be misled into, nor create.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    open_regular_with(options, path)
}

/// Opens `path` for reading and writing, creating it if missing, without following a symlink in its
/// last component and without blocking: a FIFO or a link planted in its place fails instead of
/// hanging the caller or writing elsewhere. The file must be regular. For lock files and the like.
pub fn open_or_create_regular(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    open_regular_with(options, path)
}

/// Opens `path` for appending, creating it if missing, as [`open_or_create_regular`] opens it: no
/// symlink followed, no FIFO waited on, regular files only. For logs that several processes
/// write to, each line at the end.
pub fn open_or_create_appending(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    open_regular_with(options, path)
}

/// Reads `path` whole, opened as [`open_regular`] opens it, when it holds at most `max` bytes
/// ([`read_bounded`]). For untrusted files of bounded size: manifests, caches, model headers.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_bounded(&open_regular(path)?, max)
}

/// Reads the whole of `file` when it holds at most `max` bytes. Its size is checked before a byte
/// is read: a larger file fails with [`io::ErrorKind::FileTooLarge`] having cost nothing, so a
/// damaged file of any size costs at most `max` bytes of memory. The buffer is allocated once, at
/// the file's size, and a file whose length changes while it is read fails with
/// [`io::ErrorKind::InvalidData`]: index and model files are never rewritten in place, so that is
/// damage too.
pub fn read_bounded(file: &File, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let len = file.metadata()?.len();
    let capacity = usize::try_from(len)
        .ok()
        .filter(|_| len <= max)
        .and_then(|n| n.checked_add(1))
        .ok_or_else(too_large)?;
    // One byte more than the size, so that a file that grew is noticed without a reallocation.
    let mut bytes = Vec::with_capacity(capacity);
    std::io::Read::take(file, len + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the file changed while it was read",
        ));
    }
    Ok(bytes)
}

/// Hands the first `len` bytes of `file` to `each`, in order, through one buffer of at most
/// [`CHUNK_BYTES`]: a checksum over a file of any size costs that buffer, never the file, and
/// reads no byte past `len`. A file shorter than `len` fails with
/// [`io::ErrorKind::UnexpectedEof`].
pub fn read_in_chunks(file: &File, len: u64, mut each: impl FnMut(&[u8])) -> io::Result<()> {
    use std::io::{Read as _, Seek as _};
    let mut reader = file;
    reader.seek(io::SeekFrom::Start(0))?;
    let mut buffer = vec![0u8; len.min(CHUNK_BYTES as u64) as usize];
    let mut left = len;
    while left > 0 {
        let want = left.min(buffer.len() as u64) as usize;
        reader.read_exact(&mut buffer[..want])?;
        each(&buffer[..want]);
        left -= want as u64;
    }
    Ok(())
}

/// Reads into `buf` until it is full or `reader` ends, and returns how many bytes it read: a
/// short count means the end, not a short `read`. An interrupted read is tried again.
pub fn read_full(reader: &mut impl io::Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The buffer [`read_in_chunks`] reads through.
pub const CHUNK_BYTES: usize = 1 << 20;

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        "the file is larger than any valid file of its kind",
    )
}

/// Opens `path` with `options`, no symlink followed and no FIFO waited on; regular files only.
fn open_regular_with(mut options: std::fs::OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// A walk name's bytes ([`crate::name_bytes`]), when it is a path beneath the root: relative, no
/// empty, `.` or `..` component, no NUL.
fn walked_bytes(rel: &str) -> Result<std::borrow::Cow<'_, [u8]>, OpenError> {
    // A walk name stands for the bytes of a name that is not UTF-8 (`crate::walk_name`).
    let bytes = crate::name_bytes(rel);
    if bytes.is_empty()
        || bytes.starts_with(b"/")
        || bytes.contains(&0)
        || bytes
            .split(|&b| b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return Err(OpenError::BadPath);
    }
    Ok(bytes)
}

/// How a worktree file is opened: read only, never blocking on a FIFO, never the caller's
/// terminal.
#[cfg(unix)]
const WALKED_FILE: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::NONBLOCK)
    .union(rustix::fs::OFlags::CLOEXEC)
    .union(rustix::fs::OFlags::NOCTTY);

/// How `openat2` resolves a path beneath the root: never above it, through no symlink.
#[cfg(any(target_os = "linux", target_os = "android"))]
const BENEATH_NO_LINKS: rustix::fs::ResolveFlags = rustix::fs::ResolveFlags::BENEATH
    .union(rustix::fs::ResolveFlags::NO_SYMLINKS)
    .union(rustix::fs::ResolveFlags::NO_MAGICLINKS);

/// Whether `openat2` failed for want of the call itself: a kernel before 5.6, or a sandbox
/// that filters it. The caller then resolves the path component by component.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn openat2_unavailable(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    e == Errno::NOSYS || e == Errno::PERM || e == Errno::INVAL
}

#[cfg(unix)]
fn map_errno(e: rustix::io::Errno) -> OpenError {
    use rustix::io::Errno;
    if e == Errno::LOOP || e == Errno::XDEV {
        OpenError::Symlink
    } else if e == Errno::NOENT {
        OpenError::Missing
    } else if e == Errno::NOTDIR || e == Errno::NXIO {
        // ENXIO: a socket or a FIFO without a writer opened without blocking.
        OpenError::NotRegular
    } else {
        OpenError::Io(io::Error::from(e))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::{LastDir, OpenError, RootDir};

    fn fifo(path: &std::path::Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
    }

    fn check(setup: impl FnOnce(&std::path::Path), rel: &str, expected: &str) {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        let root = RootDir::open(dir.path()).unwrap();
        let label = |opened: Result<std::fs::File, OpenError>| match opened {
            Ok(_) => "ok",
            Err(OpenError::Symlink) => "symlink",
            Err(OpenError::NotRegular) => "not-regular",
            Err(OpenError::Missing) => "missing",
            Err(OpenError::BadPath) => "bad-path",
            Err(OpenError::Io(_)) => "io",
        };
        assert_eq!(label(root.open_file(rel)), expected, "{rel}");
        // Through a walker thread's last directory, fresh or holding `a/b`, a walked file opens
        // exactly as it opens by its whole path.
        let walked = label(root.open_walked_file(rel));
        let mut fresh = LastDir::default();
        assert_eq!(
            label(root.open_walked_file_in(&mut fresh, rel)),
            walked,
            "{rel}"
        );
        let mut primed = LastDir::default();
        assert_eq!(
            label(root.open_walked_file_in(&mut primed, "a/b/f.txt")),
            "ok"
        );
        assert_eq!(
            label(root.open_walked_file_in(&mut primed, rel)),
            walked,
            "{rel} after a/b/f.txt"
        );
    }

    #[test]
    fn a_file_over_the_bound_is_refused_before_a_byte_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        // Sparse: 8 GiB that cost no disk. Reading it would cost 8 GiB of memory.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        let err = super::read_regular(&path, 1 << 20).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(super::read_regular(&path, 5).unwrap(), b"12345");
        assert_eq!(
            super::read_regular(&path, 4).unwrap_err().kind(),
            std::io::ErrorKind::FileTooLarge
        );
        std::os::unix::fs::symlink(&path, dir.path().join("link")).unwrap();
        assert!(super::read_regular(&dir.path().join("link"), 5).is_err());
    }

    #[test]
    fn chunked_reads_stop_at_the_length_they_are_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..super::CHUNK_BYTES * 2 + 7)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        for len in [0, 1, super::CHUNK_BYTES, super::CHUNK_BYTES * 2 + 3] {
            let mut seen = Vec::new();
            super::read_in_chunks(&file, len as u64, |b| {
                assert!(b.len() <= super::CHUNK_BYTES);
                seen.extend_from_slice(b);
            })
            .unwrap();
            assert_eq!(seen, data[..len], "{len}");
        }
        let past_the_end = super::read_in_chunks(&file, data.len() as u64 + 1, |_| {});
        assert_eq!(
            past_the_end.unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn entries_are_stated_without_following_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a")).unwrap();
        std::fs::write(d.join("a/f.txt"), "12345").unwrap();
        std::os::unix::fs::symlink("f.txt", d.join("a/link")).unwrap();
        std::os::unix::fs::symlink("a", d.join("link-dir")).unwrap();
        let root = RootDir::open(d).unwrap();
        let got = root.stat_entries("a", &["f.txt", "link", "missing"]);
        let meta = std::fs::symlink_metadata(d.join("a/f.txt")).unwrap();
        let f = got[0].unwrap();
        assert!(f.is_file);
        assert_eq!(f.len, 5);
        assert_eq!(f.ino, std::os::unix::fs::MetadataExt::ino(&meta));
        assert!(!got[1].unwrap().is_file, "a symlink is not a regular file");
        assert!(got[2].is_none());
        // A directory reached through a symlink is not entered.
        assert_eq!(root.stat_entries("link-dir", &["f.txt"]), [None]);
        assert!(root.stat_entries("", &["a"])[0].is_some_and(|s| !s.is_file));
    }

    #[test]
    fn a_real_directory_opens_and_a_link_to_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/f"), "x").unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        std::fs::write(d.join("file"), "x").unwrap();
        assert!(
            RootDir::open_real(d.join("real"))
                .unwrap()
                .open_file("f")
                .is_ok()
        );
        for refused in ["link", "file"] {
            let err = RootDir::open_real(d.join(refused)).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::NotADirectory, "{refused}");
        }
        let missing = RootDir::open_real(d.join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        // What the caller named on the way may be a link: only the last component must be real.
        assert!(RootDir::open_real(d.join("link/../real")).is_ok());
        // `open` follows the link, as its caller chose.
        assert!(RootDir::open(d.join("link")).is_ok());
    }

    #[test]
    fn regular_files_open_and_nothing_else_does() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("passwd"), "root:x:0:0\n").unwrap();
        let out = outside.path().to_path_buf();
        let tree = move |d: &std::path::Path| {
            std::fs::create_dir_all(d.join("a/b")).unwrap();
            std::fs::write(d.join("a/b/f.txt"), "x").unwrap();
            std::os::unix::fs::symlink(&out, d.join("etc")).unwrap();
            std::os::unix::fs::symlink("a", d.join("link-dir")).unwrap();
            std::os::unix::fs::symlink("a/b/f.txt", d.join("link-file")).unwrap();
            fifo(&d.join("fifo"));
        };
        for (rel, expected) in [
            ("a/b/f.txt", "ok"),
            ("etc/passwd", "symlink"),
            ("link-dir/b/f.txt", "symlink"),
            ("link-file", "symlink"),
            ("fifo", "not-regular"),
            ("a/b", "not-regular"),
            ("a/nope", "missing"),
            ("a/b/f.txt/x", "not-regular"),
            ("../x", "bad-path"),
            ("/etc/passwd", "bad-path"),
            ("a//b", "bad-path"),
        ] {
            check(tree.clone(), rel, expected);
        }
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_its_files_began_is_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("f.txt"), "outside").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/f.txt"), "inside").unwrap();
        let root = RootDir::open(d).unwrap();
        let mut last = LastDir::default();
        let read = |file: std::fs::File| std::io::read_to_string(file).unwrap();
        assert_eq!(
            read(root.open_walked_file_in(&mut last, "a/b/f.txt").unwrap()),
            "inside"
        );
        // The directory the walk listed is swapped for a link to another tree.
        std::fs::rename(d.join("a/b"), d.join("a/b.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join("a/b")).unwrap();
        // The thread's last directory is the one the walk listed, which still holds the file.
        assert_eq!(
            read(root.open_walked_file_in(&mut last, "a/b/f.txt").unwrap()),
            "inside"
        );
        // Opened afresh, the path is refused.
        let mut fresh = LastDir::default();
        assert!(matches!(
            root.open_walked_file_in(&mut fresh, "a/b/f.txt"),
            Err(OpenError::Symlink)
        ));
        assert!(matches!(
            root.open_walked_file("a/b/f.txt"),
            Err(OpenError::Symlink)
        ));
    }

    /// Whether the byte at `offset` of the file at `path` is in the page cache: a read that may not
    /// wait for the disk gets it.
    #[cfg(target_os = "linux")]
    fn cached(path: &std::path::Path, offset: u64) -> bool {
        let file = std::fs::File::open(path).unwrap();
        let mut byte = [0u8; 1];
        match rustix::io::preadv2(
            &file,
            &mut [std::io::IoSliceMut::new(&mut byte)],
            offset,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Ok(n) => n == 1,
            Err(e) if e == rustix::io::Errno::AGAIN => false,
            Err(e) => panic!("preadv2: {e}"),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_prefetch_reads_an_uncached_file_ahead_and_reaches_nothing_a_walked_open_does_not() {
        // Beside the test binary rather than in /tmp, which may be a tmpfs that keeps every page.
        let beside = std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        let dir = tempfile::tempdir_in(&beside).unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a")).unwrap();
        let path = d.join("a/f.bin");
        let len = 1u64 << 20;
        let mut file = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut file, &vec![7u8; len as usize]).unwrap();
        file.sync_all().unwrap();
        // Clean pages are dropped by this advice once they are written back.
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        drop(file);
        assert!(
            !cached(&path, len - 1),
            "the file system kept the file's pages after POSIX_FADV_DONTNEED, so this test cannot \
             see a prefetch"
        );

        let root = RootDir::open(d).unwrap();
        assert_eq!(
            root.prefetch_walked_file("a/f.bin"),
            super::Prefetch::Started
        );
        // The hint returned at once; the whole file arrives without anyone reading it.
        let waited = std::time::Instant::now();
        while !cached(&path, len - 1) {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(20),
                "the prefetched file's last page never reached the page cache"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            root.prefetch_walked_file("a/f.bin"),
            super::Prefetch::Cached
        );

        // What an open of a walked file would not reach, a prefetch does not touch, and a FIFO does
        // not block it. (A directory opens as a walked file does, and its hint is harmless.)
        let outside = tempfile::tempdir_in(&beside).unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join("out")).unwrap();
        std::os::unix::fs::symlink("a/f.bin", d.join("link-file")).unwrap();
        fifo(&d.join("fifo"));
        for rel in [
            "out/secret",
            "link-file",
            "fifo",
            "missing",
            "../a/f.bin",
            "",
        ] {
            assert_eq!(
                root.prefetch_walked_file(rel),
                super::Prefetch::Skipped,
                "{rel:?}"
            );
        }
    }
}
