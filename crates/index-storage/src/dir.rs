//! An index directory: opening its files, writing them durably, collecting what no commit needs.

use std::fs::File;
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use search_profile::{OpenError, RootDir};

use crate::{FileError, LOCK, MANIFEST, Mmap, Stamp};

/// How old a temporary file must be before any garbage collection takes it for a killed
/// writer's: no write takes that long, so a running writer's is always younger. (Under the
/// writer lock, the temporary files of what the lock guards are collected at any age.)
pub const STALE_TEMP: Duration = Duration::from_secs(60);

/// A directory that holds an index's files, opened: its files are opened beneath it.
#[derive(Debug)]
pub struct IndexDir {
    root: RootDir,
}

/// A file of an index, mapped: its handle, its map and its stamp when it was opened.
#[derive(Debug)]
pub struct Mapped {
    /// The open file.
    pub file: File,
    /// The whole file, mapped.
    pub map: Mmap,
    /// The file's stamp (`fstat`) when it was opened; `stamp.len` is the map's length.
    pub stamp: Stamp,
}

impl Mapped {
    /// The crc32 of the file's first `len` bytes, read through one small buffer
    /// ([`search_profile::read_in_chunks`]), never through the map: checking a file costs no
    /// memory for its size, and only the parts a query reads become resident. A file shorter
    /// than `len` is [`FileError::Damaged`].
    pub fn crc32(&self, len: u64) -> Result<u32, FileError> {
        let mut hasher = crc32fast::Hasher::new();
        search_profile::read_in_chunks(&self.file, len, |bytes| hasher.update(bytes)).map_err(
            |e| match e.kind() {
                io::ErrorKind::UnexpectedEof => FileError::Damaged,
                _ => FileError::Io(e),
            },
        )?;
        Ok(hasher.finalize())
    }
}

impl IndexDir {
    /// Opens the directory at `path` as the caller named it (through symlinks on the way, if its
    /// path has them): a directory the user chose.
    pub fn open(path: impl AsRef<Path>) -> io::Result<IndexDir> {
        RootDir::open(path).map(|root| IndexDir { root })
    }

    /// [`IndexDir::open`], creating the directory first when it is missing.
    pub fn create(path: impl AsRef<Path>) -> io::Result<IndexDir> {
        std::fs::create_dir_all(path.as_ref())?;
        IndexDir::open(path)
    }

    /// Opens a directory an index made for itself: it must be a real directory, not a symlink
    /// ([`RootDir::open_real`]), so that a link planted in its place can never lead its writers
    /// or its garbage collection elsewhere. A link is [`io::ErrorKind::NotADirectory`].
    pub fn open_own(path: impl AsRef<Path>) -> io::Result<IndexDir> {
        RootDir::open_real(path).map(|root| IndexDir { root })
    }

    /// [`IndexDir::open_own`], creating the directory first when it is missing.
    pub fn create_own(path: impl AsRef<Path>) -> io::Result<IndexDir> {
        std::fs::create_dir_all(path.as_ref())?;
        IndexDir::open_own(path)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// Whether the path still names the directory this handle opened: `false` once it was
    /// deleted or replaced, and the caller opens the path again.
    pub fn is_still_at_path(&self) -> bool {
        self.root.is_still_at_path()
    }

    /// Opens the file `name` of this directory for reading: a plain name, no symlink followed,
    /// never blocking, a regular file only. Anything else in its place is
    /// [`FileError::Damaged`].
    pub fn open_file(&self, name: &str) -> Result<File, FileError> {
        if !is_plain_name(name) {
            return Err(FileError::Damaged);
        }
        self.root.open_file(name).map_err(|e| match e {
            OpenError::Missing => FileError::Missing,
            OpenError::Io(e) => FileError::Io(e),
            OpenError::Symlink | OpenError::NotRegular | OpenError::BadPath => FileError::Damaged,
        })
    }

    /// Reads the file `name` whole when it holds at most `max` bytes, opened as
    /// [`IndexDir::open_file`] opens it. Its size is checked before a byte is read
    /// ([`search_profile::read_bounded`]): a larger file, or one that changed while it was
    /// read, is [`FileError::Damaged`] (index files are renamed into place, never rewritten).
    pub fn read(&self, name: &str, max: u64) -> Result<Vec<u8>, FileError> {
        let file = self.open_file(name)?;
        search_profile::read_bounded(&file, max).map_err(|e| match e.kind() {
            io::ErrorKind::FileTooLarge | io::ErrorKind::InvalidData => FileError::Damaged,
            _ => FileError::Io(e),
        })
    }

    /// Opens the file `name` as [`IndexDir::open_file`] does and maps it whole, when its size is
    /// within `sizes`: the size is checked first, so a damaged file of any size costs nothing to
    /// refuse ([`FileError::Damaged`]).
    pub fn map(&self, name: &str, sizes: RangeInclusive<u64>) -> Result<Mapped, FileError> {
        let file = self.open_file(name)?;
        let stamp = Stamp::of(&file.metadata().map_err(FileError::Io)?);
        if !sizes.contains(&stamp.len) {
            return Err(FileError::Damaged);
        }
        // SAFETY: a file of an index is written under a temporary name, fsynced and renamed
        // into place; nothing writes to it afterwards, and it is deleted (never truncated) once
        // no manifest names it, which leaves an existing map intact. The length is checked
        // against the `fstat` below, so a file changed in spite of that is refused as damage.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file) }.map_err(FileError::Io)?;
        if map.len() as u64 != stamp.len {
            return Err(FileError::Damaged);
        }
        Ok(Mapped { file, map, stamp })
    }

    /// The stamp of the file `name` (`lstat`: a symlink's own), or `None` when there is none.
    pub fn stamp(&self, name: &str) -> Option<Stamp> {
        std::fs::symlink_metadata(self.path().join(name))
            .ok()
            .map(|m| Stamp::of(&m))
    }

    /// Writes `bytes` to the file `name` durably: a temporary file of a name unique to this
    /// writer (so that writers never write into each other's), fsync, rename. The rename
    /// replaces the directory entry, never the old file's bytes, so a reader that mapped the old
    /// file keeps reading it intact. [`IndexDir::sync`] makes the rename itself durable.
    pub fn write_durably(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_replacing(name, |f| f.write_all(bytes), true)
    }

    /// [`IndexDir::write_durably`] of whatever `write` writes, through a buffer: for a file too
    /// large to hold in memory. Nothing takes the name unless `write` succeeds.
    pub fn write_durably_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.write_buffered(name, write, true)
    }

    /// [`IndexDir::write_durably`] without the fsync: for a cache that a crash may lose (it only
    /// costs the work of making it again), never for a file a manifest names.
    pub fn write_unsynced(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_replacing(name, |f| f.write_all(bytes), false)
    }

    /// [`IndexDir::write_unsynced`] of whatever `write` writes, through a buffer: for a cache
    /// too large to build in memory first. Nothing takes the name unless `write` succeeds.
    pub fn write_unsynced_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.write_buffered(name, write, false)
    }

    fn write_buffered(
        &self,
        name: &str,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
        sync: bool,
    ) -> io::Result<()> {
        self.write_replacing(
            name,
            |f| {
                let mut buffered = io::BufWriter::with_capacity(1 << 20, f);
                write(&mut buffered)?;
                buffered.flush()
            },
            sync,
        )
    }

    fn write_replacing(
        &self,
        name: &str,
        write: impl FnOnce(&mut File) -> io::Result<()>,
        sync: bool,
    ) -> io::Result<()> {
        if !is_plain_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an index file's name must be a plain name",
            ));
        }
        let tmp = self.path().join(temp_name(name));
        let written = (|| {
            // `create_new` fails on anything already there, a symlink included: the bytes go
            // into a new file of this writer's, or nowhere.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            write(&mut f)?;
            if sync {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, self.path().join(name))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Makes a file written by [`IndexDir::write_unsynced`] durable (fsync), before a manifest
    /// names it.
    pub fn sync_file(&self, name: &str) -> io::Result<()> {
        match self.open_file(name) {
            Ok(f) => f.sync_all(),
            Err(FileError::Io(e)) => Err(e),
            Err(FileError::Missing) => Err(io::Error::from(io::ErrorKind::NotFound)),
            Err(FileError::Damaged) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular index file",
            )),
        }
    }

    /// Makes the renames in this directory durable (fsync of the directory).
    pub fn sync(&self) -> io::Result<()> {
        #[cfg(unix)]
        File::open(self.path())?.sync_all()?;
        Ok(())
    }

    /// Removes the files no commit needs. The caller holds the writer lock, so no writer of what
    /// `locked` names has a file in flight:
    ///
    /// - a file that `locked` names (a file only writers under the lock write) and `live` does
    ///   not keep (the committed manifest does not name it);
    /// - a temporary file of [`IndexDir::write_durably`] for the manifest or for a name `locked`
    ///   names: only a killed writer leaves one;
    /// - any other temporary file older than [`STALE_TEMP`].
    ///
    /// The manifest and the lock file are never removed. Nothing is removed once the path names
    /// another directory than the one this handle opened.
    pub fn collect_garbage(&self, locked: impl Fn(&str) -> bool, live: impl Fn(&str) -> bool) {
        self.collect(Some((&locked, &live)));
    }

    /// Removes the temporary files of [`IndexDir::write_durably`] older than [`STALE_TEMP`]:
    /// killed writers' leftovers. Needs no lock: a running writer's is younger.
    pub fn remove_stale_temps(&self) {
        self.collect(None);
    }

    #[allow(clippy::type_complexity)]
    fn collect(&self, under_lock: Option<(&dyn Fn(&str) -> bool, &dyn Fn(&str) -> bool)>) {
        if !self.is_still_at_path() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.path()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == LOCK {
                continue;
            }
            let garbage = match (temp_target(&name), under_lock) {
                (Some(target), Some((locked, _))) if target == MANIFEST || locked(target) => true,
                (Some(_), _) => is_stale(&e),
                (None, Some((locked, live))) => name != MANIFEST && locked(&name) && !live(&name),
                (None, None) => false,
            };
            if garbage {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A name part unique to this writer: process id, time and a counter. Index files that writers
/// may write at once carry it (with the temporary names of [`IndexDir::write_durably`]), so that
/// no two writers ever write one name.
pub fn unique_name_part() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}-{:x}-{}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The temporary name a durable write of `name` goes through: `.<name>.<unique>.tmp`.
fn temp_name(name: &str) -> String {
    format!(".{name}.{}.tmp", unique_name_part())
}

/// The name a temporary file stands for, or `None` when `name` is not a temporary name. A
/// temporary name without a unique part (`.MANIFEST.tmp`) stands for what it wraps.
fn temp_target(name: &str) -> Option<&str> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    Some(inner.rsplit_once('.').map_or(inner, |(target, _)| target))
}

/// Whether `name` names a file directly in the directory.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

fn is_stale(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > STALE_TEMP)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// What opening `name` gives, after `setup` made the directory.
    fn check(setup: impl FnOnce(&Path), name: &str, expected: &str) {
        let tmp = tempfile::tempdir().unwrap();
        setup(tmp.path());
        let dir = IndexDir::open(tmp.path()).unwrap();
        let got = match dir.read(name, 16) {
            Ok(bytes) => String::from_utf8(bytes).unwrap(),
            Err(FileError::Missing) => "missing".into(),
            Err(FileError::Damaged) => "damaged".into(),
            Err(FileError::Io(e)) => format!("io: {e}"),
        };
        assert_eq!(got, expected, "{name}");
    }

    #[test]
    fn only_a_regular_file_under_its_plain_name_and_size_is_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside").unwrap();
        std::fs::create_dir(outside.path().join("d")).unwrap();
        std::fs::write(outside.path().join("d/MANIFEST"), "elsewhere").unwrap();
        let out = outside.path().to_path_buf();
        let tree = move |d: &Path| {
            std::fs::write(d.join("MANIFEST"), "committed").unwrap();
            std::fs::write(d.join("big"), "x".repeat(17)).unwrap();
            std::fs::create_dir(d.join("sub")).unwrap();
            std::fs::write(d.join("sub/f"), "nested").unwrap();
            std::os::unix::fs::symlink(out.join("secret"), d.join("link")).unwrap();
            std::os::unix::fs::symlink(out.join("d"), d.join("linked-dir")).unwrap();
            mkfifo(&d.join("fifo"));
        };
        for (name, expected) in [
            ("MANIFEST", "committed"),
            ("nothing", "missing"),
            ("big", "damaged"),
            ("link", "damaged"),
            ("fifo", "damaged"),
            ("sub", "damaged"),
            ("sub/f", "damaged"),
            ("linked-dir/MANIFEST", "damaged"),
            ("../secret", "damaged"),
            ("", "damaged"),
        ] {
            check(tree.clone(), name, expected);
        }
    }

    /// A FIFO, made by the `mkfifo` command so that the tests need no system-call crate.
    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo");
    }

    #[test]
    fn writers_of_one_name_at_once_never_share_a_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        // A fixed temporary name made such writers truncate and rename each other's files.
        std::thread::scope(|s| {
            for w in 0..8u8 {
                let dir = &dir;
                s.spawn(move || {
                    for i in 0..50u8 {
                        let bytes = vec![w; 1000 + usize::from(i)];
                        dir.write_durably("MANIFEST", &bytes).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read(tmp.path().join("MANIFEST")).unwrap();
        assert!(
            last.iter().all(|&b| b == last[0]),
            "one writer's bytes, whole"
        );
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["MANIFEST"], "no temporary file is left");
    }

    #[test]
    fn a_durable_write_never_writes_through_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        std::fs::write(&target, "untouched").unwrap();
        std::os::unix::fs::symlink(&target, tmp.path().join("seg")).unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        dir.write_durably("seg", b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
        assert_eq!(dir.read("seg", 16).unwrap(), b"new");
        for bad in ["", "a/b", "..", "x\\y"] {
            let err = dir.write_durably(bad, b"x").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn garbage_collection_keeps_what_is_live_and_what_a_running_writer_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let dir = IndexDir::open(d).unwrap();
        let old = |name: &str| {
            let f = File::options()
                .write(true)
                .create(true)
                .truncate(true)
                .open(d.join(name));
            f.unwrap()
                .set_modified(SystemTime::now() - STALE_TEMP - Duration::from_secs(1))
                .unwrap();
        };
        for name in [
            "MANIFEST",
            "LOCK",
            "seg-1.idx",
            "seg-2.idx",
            "cache",
            ".seg-3.idx.1-2-3.tmp",
            ".MANIFEST.4-5-6.tmp",
            ".MANIFEST.tmp",
            ".cache.7-8-9.tmp",
        ] {
            std::fs::write(d.join(name), "x").unwrap();
        }
        old(".vectors.1-1-1.tmp");
        std::fs::create_dir(d.join("semantic")).unwrap();
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        // Without the lock, only old temporary files go.
        dir.remove_stale_temps();
        assert!(!listing().contains(&".vectors.1-1-1.tmp".to_owned()));
        assert_eq!(listing().len(), 10);
        old(".vectors.1-1-1.tmp");
        dir.collect_garbage(|n| n.ends_with(".idx"), |n| n == "seg-2.idx");
        assert_eq!(
            listing(),
            [
                ".cache.7-8-9.tmp",
                "LOCK",
                "MANIFEST",
                "cache",
                "seg-2.idx",
                "semantic"
            ],
            "the lock's own leftovers go at any age, others' when old"
        );
    }

    #[test]
    fn a_file_outside_its_size_bounds_is_damage_before_it_is_mapped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        dir.write_durably("seg", b"0123456789").unwrap();
        assert!(matches!(dir.map("seg", 11..=100), Err(FileError::Damaged)));
        assert!(matches!(dir.map("seg", 0..=9), Err(FileError::Damaged)));
        let mapped = dir.map("seg", 10..=10).unwrap();
        assert_eq!(&mapped.map[..], b"0123456789");
        assert_eq!(mapped.stamp.len, 10);
        assert_eq!(mapped.crc32(4).unwrap(), crc32fast::hash(b"0123"));
        assert!(matches!(mapped.crc32(11), Err(FileError::Damaged)));
        // Sparse: 8 GiB that cost no disk, refused by its size alone.
        File::options()
            .write(true)
            .open(tmp.path().join("seg"))
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        assert!(matches!(
            dir.map("seg", 0..=4 << 30),
            Err(FileError::Damaged)
        ));
    }

    #[test]
    fn an_own_directory_that_is_a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = tmp.path().join("store");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let err = IndexDir::create_own(&link).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory);
        assert!(IndexDir::create_own(tmp.path().join("real")).is_ok());
        // A directory the user named may be reached through a link.
        assert!(IndexDir::open(&link).is_ok());
    }
}
