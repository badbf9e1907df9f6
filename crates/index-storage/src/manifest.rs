//! The manifest: the checksummed envelope every index commits through, and loading the files it
//! names.

use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{FileError, IndexDir, MANIFEST, MAX_MANIFEST_BYTES};

/// The manifest on disk: its body as a string, and the crc32 of that string.
#[derive(Serialize, Deserialize)]
struct Envelope {
    crc32: u32,
    body: String,
}

/// What every manifest's body holds besides the index's own fields: the format it was written
/// in.
#[derive(Deserialize)]
struct Format {
    format: u32,
}

impl IndexDir {
    /// Reads the committed manifest, which must be of `format` (its body's `format` field: the
    /// format this version writes and reads). [`FileError::Missing`] when there is none (the
    /// index is empty); [`FileError::Damaged`] when it is not a regular file, is over
    /// [`MAX_MANIFEST_BYTES`], does not parse, does not match its crc32 or is of another format
    /// (which the index answers by a rebuild, as it does damage).
    pub fn read_manifest<M: DeserializeOwned>(&self, format: u32) -> Result<M, FileError> {
        let bytes = self.read(MANIFEST, MAX_MANIFEST_BYTES)?;
        let env: Envelope = serde_json::from_slice(&bytes).map_err(|_| FileError::Damaged)?;
        drop(bytes);
        if crc32fast::hash(env.body.as_bytes()) != env.crc32 {
            return Err(FileError::Damaged);
        }
        let written: Format = serde_json::from_str(&env.body).map_err(|_| FileError::Damaged)?;
        if written.format != format {
            return Err(FileError::Damaged);
        }
        serde_json::from_str(&env.body).map_err(|_| FileError::Damaged)
    }

    /// Commits `m`, whose body holds the `format` it is written in: the manifest is written
    /// durably and the directory fsynced, so a crash at any point leaves either the old or the
    /// new manifest in place, never a mix. A manifest a reader would refuse for its size is not
    /// written: the commit fails ([`io::ErrorKind::FileTooLarge`]) and the previous one stays.
    pub fn commit_manifest<M: Serialize>(&self, m: &M) -> io::Result<()> {
        self.commit_manifest_with(m, Durability::Durable)
    }

    /// [`IndexDir::commit_manifest`] with the given [`Durability`]: [`Durability::Unsynced`]
    /// writes and renames the manifest with no fsync at all.
    pub fn commit_manifest_with<M: Serialize>(
        &self,
        m: &M,
        durability: Durability,
    ) -> io::Result<()> {
        let body = serde_json::to_string(m).map_err(io::Error::other)?;
        let env = Envelope {
            crc32: crc32fast::hash(body.as_bytes()),
            body,
        };
        let bytes = serde_json::to_vec(&env).map_err(io::Error::other)?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "the manifest would be larger than a reader accepts",
            ));
        }
        match durability {
            Durability::Durable => {
                self.write_durably(MANIFEST, &bytes)?;
                self.sync()
            }
            Durability::Unsynced => self.write_unsynced(MANIFEST, &bytes),
        }
    }
}

/// What a commit survives. A killed process loses nothing either way: what it wrote is in the
/// page cache, and the rename is the commit point. The difference is an operating-system crash
/// or a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The manifest is fsynced before its rename and the directory after it: after a crash the
    /// directory reads this commit or a later one.
    Durable,
    /// No fsync: after a crash the directory may read this commit, an earlier one, or a manifest
    /// whose checksum fails, which the index answers as it answers damage (by a rebuild). For a
    /// commit that is cheap to make again and must not wait for the disk: an incremental
    /// refresh, which a query waits for.
    Unsynced,
}

/// The loaded form of `entry` when the previous version (its manifest's entries and, in the
/// same order, what it loaded for them) holds a file of the same name and crc32, which `file`
/// reads from an entry: a name is never written again once committed, so it is the same file,
/// already checked. A version then opens only the files its commit wrote: its cost follows the
/// change, not the index.
pub fn reuse<E, T: Clone>(
    previous: Option<(&[E], &[T])>,
    entry: &E,
    file: impl Fn(&E) -> (&str, u32),
) -> Option<T> {
    let (entries, loaded) = previous?;
    let wanted = file(entry);
    entries
        .iter()
        .position(|e| file(e) == wanted)
        .and_then(|i| loaded.get(i).cloned())
}

/// How often a reader tries again when a concurrent commit collected a file it was about to
/// open: each try reads the newer manifest, so this only runs out under a storm of commits.
pub const LOAD_ATTEMPTS: usize = 50;

/// Loads the committed version with `load` (which reads the manifest, then the files it names),
/// again while it fails because a file was `collected` in between by a newer commit, at most
/// [`LOAD_ATTEMPTS`] times; then the error `exhausted` makes.
pub fn load_committed<T, E>(
    mut load: impl FnMut() -> Result<T, E>,
    collected: impl Fn(&E) -> bool,
    exhausted: impl FnOnce() -> E,
) -> Result<T, E> {
    for _ in 0..LOAD_ATTEMPTS {
        match load() {
            Err(e) if collected(&e) => std::thread::sleep(std::time::Duration::from_millis(2)),
            other => return other,
        }
    }
    Err(exhausted())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    const FORMAT: u32 = 7;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Listing {
        format: u32,
        files: Vec<(String, u32)>,
    }

    fn listing(n: usize) -> Listing {
        Listing {
            format: FORMAT,
            files: (0..n).map(|i| (format!("seg-{i}"), i as u32)).collect(),
        }
    }

    fn read(dir: &IndexDir) -> Result<Listing, FileError> {
        dir.read_manifest(FORMAT)
    }

    #[test]
    fn a_manifest_round_trips_and_any_changed_byte_is_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        assert!(matches!(read(&dir), Err(FileError::Missing)));
        dir.commit_manifest(&listing(3)).unwrap();
        assert_eq!(read(&dir).unwrap(), listing(3));
        let bytes = std::fs::read(tmp.path().join(MANIFEST)).unwrap();
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            std::fs::write(tmp.path().join(MANIFEST), &damaged).unwrap();
            let got = read(&dir);
            assert!(matches!(got, Err(FileError::Damaged)), "byte {at}: {got:?}");
        }
    }

    #[test]
    fn a_manifest_of_another_format_is_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        let mut other = listing(1);
        other.format = FORMAT - 1;
        dir.commit_manifest(&other).unwrap();
        assert!(matches!(read(&dir), Err(FileError::Damaged)));
        // A body without a format is no manifest of any version.
        dir.commit_manifest(&vec![1, 2, 3]).unwrap();
        assert!(matches!(read(&dir), Err(FileError::Damaged)));
    }

    #[test]
    fn a_manifest_too_large_to_read_is_never_committed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = IndexDir::open(tmp.path()).unwrap();
        dir.commit_manifest(&listing(1)).unwrap();
        let huge = Listing {
            format: FORMAT,
            files: vec![("x".repeat(MAX_MANIFEST_BYTES as usize), 0)],
        };
        let err = dir.commit_manifest(&huge).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(read(&dir).unwrap(), listing(1));
        // One on disk anyway (damage) is refused by its size before it is read.
        File::options()
            .write(true)
            .open(tmp.path().join(MANIFEST))
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        assert!(matches!(read(&dir), Err(FileError::Damaged)));
    }

    #[test]
    fn a_file_is_reused_only_under_the_same_name_and_checksum() {
        let previous = listing(3).files;
        let loaded = ["zero", "one", "two"];
        fn file(e: &(String, u32)) -> (&str, u32) {
            (&e.0, e.1)
        }
        let check = |entry: (&str, u32), expected: Option<&str>| {
            let entry = (entry.0.to_owned(), entry.1);
            let got = reuse(Some((&previous[..], &loaded[..])), &entry, file);
            assert_eq!(got, expected, "{entry:?}");
        };
        check(("seg-1", 1), Some("one"));
        check(("seg-2", 2), Some("two"));
        check(("seg-1", 2), None);
        check(("seg-9", 1), None);
        assert_eq!(reuse::<_, &str>(None, &("seg-1".to_owned(), 1), file), None);
    }

    #[test]
    fn loading_tries_again_only_while_files_are_collected() {
        let mut tries = 0;
        let loaded = load_committed(
            || {
                tries += 1;
                if tries < 3 {
                    Err("collected")
                } else {
                    Ok(tries)
                }
            },
            |e| *e == "collected",
            || "exhausted",
        );
        assert_eq!(loaded, Ok(3));
        let mut tries = 0;
        let damaged: Result<(), _> = load_committed(
            || {
                tries += 1;
                Err("damaged")
            },
            |e| *e == "collected",
            || "exhausted",
        );
        assert_eq!((damaged, tries), (Err("damaged"), 1));
        let storm: Result<(), _> =
            load_committed(|| Err("collected"), |e| *e == "collected", || "exhausted");
        assert_eq!(storm, Err("exhausted"));
    }
}
