//! MiniLM chunk vectors kept across processes: an append-only file of checksummed records, keyed
//! by the model and the settings that made them.
//!
//! A re-rank embeds the head's chunks that no earlier call embedded. In one process the host keeps
//! them in memory; this file lets the next process (a CLI call, a restarted server) start with
//! them. It is a cache: whatever is wrong with the file (another model's key, a torn record from
//! a writer that was killed, a flipped byte) loses only the vectors it touches, which are then
//! computed again.
//!
//! Layout: an 8-byte magic and the 32-byte key, then records of a 4-byte marker, the chunk hash
//! ([`HASH_BYTES`]), `dim` little-endian IEEE half floats and a CRC-32 of the key, the hash and the
//! halves. Writers append whole records under an OS lock on the file and first cut a torn tail
//! away, so records stay at fixed offsets. Readers take no lock: a record being written fails its
//! checksum and is skipped. [`VectorLog::rewrite`] replaces the file whole, by a rename.
//!
//! A vector is kept as half floats: 768 bytes for MiniLM's 384 rather than 1 536, so a log of a
//! whole repository's chunks is half the size and read in half the time. Whoever computes a
//! vector rounds it with [`kept`] before using it, so a vector read back is the vector that was
//! used, bit for bit, and an answer never depends on which process computed it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use index_storage::IndexDir;

use crate::segment::HASH_BYTES;

const MAGIC: &[u8; 8] = b"RSVECLG2";
const MARKER: &[u8; 4] = b"VEC2";
const HEADER: usize = MAGIC.len() + 32;

/// A chunk's content hash as the store keeps it.
pub type ChunkHash = [u8; HASH_BYTES];

/// `v` as a [`VectorLog`] keeps it: each float rounded to the nearest half float. Rounding again
/// changes nothing, so a vector used after `kept` is the vector a later read returns.
pub fn kept(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect()
}

/// An append-only file of MiniLM chunk vectors kept across processes: a key (the model and the
/// settings that made them), then checksummed records. Whatever is wrong with the file loses
/// only the vectors it touches, which are then computed again.
#[derive(Debug)]
pub struct VectorLog {
    path: PathBuf,
    key: [u8; 32],
    dim: usize,
    limit: usize,
}

impl VectorLog {
    /// The log at `path` for vectors of `dim` floats made under `key` (the model and settings),
    /// holding at most `limit` records: an append that would pass it writes nothing ([`Appended::Full`]).
    /// Nothing is read or created until [`VectorLog::read`] or [`VectorLog::append`].
    pub fn new(path: &Path, key: [u8; 32], dim: usize, limit: usize) -> Self {
        Self {
            path: path.to_owned(),
            key,
            dim,
            limit: limit.max(1),
        }
    }

    /// A record's CRC-32 covers the key too: a reader that read one key's header and, while
    /// another key's writer started the file over, that writer's records, rejects them.
    fn checksum(&self, body: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.key);
        h.update(body);
        h.finalize()
    }

    fn record_len(&self) -> usize {
        MARKER.len() + HASH_BYTES + 2 * self.dim + 4
    }

    /// Every whole, intact record of this key, later records winning. Empty when the file is
    /// missing, is not a regular file (a symlink is never followed), or holds another key.
    pub fn read(&self) -> HashMap<ChunkHash, Vec<f32>> {
        let mut out = HashMap::new();
        let Ok(file) = open_regular(&self.path, false) else {
            return out;
        };
        // The size first, then no more than the limit's whole records, one at a time: a file of
        // any size (another build's, garbage) costs no more memory than the vectors it holds
        // intact, and never more than a full log's.
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return out;
        };
        let whole = len.saturating_sub(HEADER as u64) / self.record_len() as u64;
        let records = whole.min(self.limit as u64) as usize;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
        let mut header = [0u8; HEADER];
        if reader.read_exact(&mut header).is_err() || !self.header_matches(&header) {
            return out;
        }
        let mut record = vec![0u8; self.record_len()];
        for _ in 0..records {
            if reader.read_exact(&mut record).is_err() {
                break;
            }
            if let Some((hash, vector)) = self.parse(&record) {
                out.insert(hash, vector);
            }
        }
        out
    }

    fn header_matches(&self, bytes: &[u8]) -> bool {
        bytes.len() >= HEADER
            && &bytes[..MAGIC.len()] == MAGIC
            && bytes[MAGIC.len()..HEADER] == self.key
    }

    fn parse(&self, record: &[u8]) -> Option<(ChunkHash, Vec<f32>)> {
        let (marker, rest) = record.split_at(MARKER.len());
        let (body, crc) = rest.split_at(rest.len() - 4);
        if marker != MARKER || self.checksum(body).to_le_bytes() != crc {
            return None;
        }
        let (hash, halves) = body.split_at(HASH_BYTES);
        let vector = halves
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        Some((hash.try_into().ok()?, vector))
    }

    /// Appends `entries` (vectors of another width are skipped) under the file's lock, creating
    /// the file, or starting it over when it holds another key. A torn record at the end, left by
    /// a writer that was killed, is cut away first. Nothing is written, and the answer says why,
    /// when another writer holds the lock ([`Appended::Busy`]: it is a cache, and no search waits
    /// for it) or the records would pass the limit ([`Appended::Full`]: which vectors to drop
    /// is the caller's choice, by [`VectorLog::rewrite`]).
    pub fn append(&self, entries: &[(ChunkHash, Vec<f32>)]) -> std::io::Result<Appended> {
        self.append_opening(entries, &mut || open_regular(&self.path, true))
    }

    /// [`VectorLog::append`], opening the file with `open` (a test hands it a stale handle).
    fn append_opening(
        &self,
        entries: &[(ChunkHash, Vec<f32>)],
        open: &mut dyn FnMut() -> std::io::Result<File>,
    ) -> std::io::Result<Appended> {
        let entries: Vec<&(ChunkHash, Vec<f32>)> = entries
            .iter()
            .filter(|(_, v)| v.len() == self.dim)
            .collect();
        if entries.is_empty() {
            return Ok(Appended::Kept);
        }
        // A rewrite renames a new file over the path between this open and the lock: records
        // appended to the old one would be lost. So the locked file is checked to be the one at
        // the path, and opened again when it is not.
        for _ in 0..3 {
            let mut file = open()?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(Appended::Busy),
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            if !same_file(&file, &self.path) {
                file.unlock()?;
                continue;
            }
            let len = file.metadata()?.len() as usize;
            let mut header = vec![0u8; HEADER.min(len)];
            file.seek(SeekFrom::Start(0))?;
            file.read_exact(&mut header)?;
            let whole = len.saturating_sub(HEADER) / self.record_len();
            if !self.header_matches(&header) {
                file.set_len(0)?;
                file.seek(SeekFrom::Start(0))?;
                let mut fresh = MAGIC.to_vec();
                fresh.extend_from_slice(&self.key);
                file.write_all(&fresh)?;
            } else if whole + entries.len() > self.limit {
                return Ok(Appended::Full);
            } else {
                let end = (HEADER + whole * self.record_len()) as u64;
                file.set_len(end)?;
                file.seek(SeekFrom::Start(end))?;
            }
            // One write of whole records: a reader sees each record whole or fails its checksum.
            file.write_all(&self.records(entries.into_iter().take(self.limit)))?;
            file.unlock()?;
            return Ok(Appended::Kept);
        }
        Ok(Appended::Busy)
    }

    /// Whether the file at `path` is long enough to hold `records` records of vectors of `dim`
    /// floats: a check that reads no byte of it, made before the model that a key needs is
    /// loaded.
    pub fn may_hold(path: &Path, records: usize, dim: usize) -> bool {
        let record = MARKER.len() + HASH_BYTES + 2 * dim + 4;
        std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.is_file() && m.len() as usize >= HEADER + records * record)
    }

    fn records<'e>(&self, entries: impl IntoIterator<Item = &'e (ChunkHash, Vec<f32>)>) -> Vec<u8> {
        let mut out = Vec::new();
        for (hash, vector) in entries {
            let start = out.len() + MARKER.len();
            out.extend_from_slice(MARKER);
            out.extend_from_slice(hash);
            for &x in vector {
                out.extend_from_slice(&half::f16::from_f32(x).to_le_bytes());
            }
            let crc = self.checksum(&out[start..]);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    /// How many records the file holds by its length (intact or not), without reading it: what
    /// an append would count against the limit. 0 when there is no regular file.
    pub fn records_on_disk(&self) -> usize {
        open_regular(&self.path, false)
            .and_then(|f| f.metadata())
            .map_or(0, |m| {
                (m.len() as usize).saturating_sub(HEADER) / self.record_len()
            })
    }

    /// Replaces the file with exactly `entries` (vectors of another width skipped, at most the
    /// limit), written beside it and renamed over it: a reader sees the old file or the new one,
    /// never a mix. Used to drop the vectors of chunks no longer in the index, or to start a full
    /// log over. The old file's lock is held meanwhile (waited for up to a second), so an append
    /// lands in the old file before the rename or in the new one after it. Callers run one
    /// rewrite at a time: a rewrite removes the temporary files a killed one left.
    pub fn rewrite(&self, entries: &[(ChunkHash, Vec<f32>)]) -> std::io::Result<()> {
        // The lock of the file at the path: one that an earlier rewrite renamed away guards
        // nothing. Past a second, the rewrite goes ahead unlocked (an append may then be lost,
        // as a cache may lose it).
        let mut old = open_regular(&self.path, true)?;
        let mut locked = false;
        for _ in 0..200 {
            if old.try_lock().is_ok() {
                if same_file(&old, &self.path) {
                    locked = true;
                    break;
                }
                old.unlock()?;
                old = open_regular(&self.path, true)?;
                continue;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.key);
        out.extend(
            self.records(
                entries
                    .iter()
                    .filter(|(_, v)| v.len() == self.dim)
                    .take(self.limit),
            ),
        );
        let written = self.replace(&out);
        if locked {
            let _ = old.unlock();
        }
        written
    }

    /// Replaces the file with `bytes` as every index file is written: a temporary file of a name
    /// unique to this writer, fsync, rename, fsync of the directory. The temporary files that
    /// killed writers left beside it, old enough that no running writer owns them, are removed
    /// first.
    fn replace(&self, bytes: &[u8]) -> std::io::Result<()> {
        let (Some(dir), Some(name)) = (
            self.path.parent(),
            self.path.file_name().and_then(|n| n.to_str()),
        ) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the log's path names no file",
            ));
        };
        let dir = IndexDir::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })?;
        dir.remove_stale_temps();
        dir.write_durably(name, bytes)?;
        dir.sync()
    }
}

/// What [`VectorLog::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The records were written.
    Kept,
    /// Another writer held the file: nothing was written.
    Busy,
    /// The records would pass the limit: nothing was written.
    Full,
}

/// Whether the open `file` is the file at `path` now (not one a rename replaced).
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// Opens a regular file without following a symlink (never blocking on a FIFO): read-only and
/// never created, or for writing and created when missing.
fn open_regular(path: &Path, write: bool) -> std::io::Result<File> {
    if write {
        search_profile::open_or_create_regular(path)
    } else {
        search_profile::open_regular(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seed: u8, dim: usize) -> (ChunkHash, Vec<f32>) {
        (
            [seed; HASH_BYTES],
            (0..dim).map(|i| f32::from(seed) + i as f32).collect(),
        )
    }

    fn log(dir: &Path, key: u8, limit: usize) -> VectorLog {
        VectorLog::new(&dir.join("vectors"), [key; 32], 3, limit)
    }

    #[test]
    fn appended_vectors_are_read_back_and_another_key_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), 1, 100);
        assert!(a.read().is_empty(), "no file yet");
        let path = dir.path().join("vectors");
        assert!(!VectorLog::may_hold(&path, 0, 3));
        a.append(&[entry(1, 3), entry(2, 3), entry(9, 4)]).unwrap();
        assert!(VectorLog::may_hold(&path, 2, 3));
        assert!(!VectorLog::may_hold(&path, 3, 3));
        assert!(!VectorLog::may_hold(&path, 2, 4));
        a.append(&[entry(3, 3)]).unwrap();
        let read = a.read();
        assert_eq!(read.len(), 3, "the 4-wide vector was skipped");
        assert_eq!(read[&[2; HASH_BYTES]], entry(2, 3).1);
        let b = log(dir.path(), 2, 100);
        assert!(b.read().is_empty(), "another key");
        b.append(&[entry(4, 3)]).unwrap();
        assert_eq!(b.read().len(), 1, "the other key's file was started over");
        assert!(a.read().is_empty());
    }

    #[test]
    fn a_torn_tail_is_cut_away_and_a_flipped_byte_loses_one_record() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), 1, 100);
        a.append(&[entry(1, 3), entry(2, 3)]).unwrap();
        let path = dir.path().join("vectors");
        let mut bytes = std::fs::read(&path).unwrap();
        // A writer killed halfway through its record.
        bytes.extend_from_within(HEADER..HEADER + 7);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(a.read().len(), 2);
        a.append(&[entry(3, 3)]).unwrap();
        assert_eq!(a.read().len(), 3, "the record after the torn tail is read");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + MARKER.len() + HASH_BYTES + 1] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let read = a.read();
        assert_eq!(read.len(), 2, "the changed record is skipped");
        assert!(!read.contains_key(&[1; HASH_BYTES]));
    }

    #[test]
    fn records_under_another_keys_header_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        log(dir.path(), 2, 100).append(&[entry(1, 3)]).unwrap();
        // As a reader that read key 1's header, then key 2's records, would see it.
        let path = dir.path().join("vectors");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[MAGIC.len()..HEADER].copy_from_slice(&[1; 32]);
        std::fs::write(&path, &bytes).unwrap();
        assert!(log(dir.path(), 1, 100).read().is_empty());
    }

    #[test]
    fn a_read_takes_no_more_than_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        log(dir.path(), 1, 100)
            .append(&[entry(1, 3), entry(2, 3), entry(3, 3)])
            .unwrap();
        assert_eq!(log(dir.path(), 1, 2).read().len(), 2);
    }

    #[test]
    fn a_full_log_keeps_its_records_until_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), 1, 2);
        assert_eq!(
            a.append(&[entry(1, 3), entry(2, 3)]).unwrap(),
            Appended::Kept
        );
        assert_eq!(a.append(&[entry(3, 3)]).unwrap(), Appended::Full);
        assert_eq!(a.read().len(), 2, "a full log lost records");
        a.rewrite(&[entry(3, 3)]).unwrap();
        let read = a.read();
        assert_eq!(read.len(), 1);
        assert!(read.contains_key(&[3; HASH_BYTES]));
    }

    /// An append whose writer opened the file before a rewrite renamed a new one over it lands
    /// in the new file, not in the one the rename unlinked.
    #[test]
    fn an_append_after_a_rewrite_lands_in_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), 1, 100);
        a.append(&[entry(1, 3)]).unwrap();
        let path = dir.path().join("vectors");
        let mut stale = Some(open_regular(&path, true).unwrap());
        a.rewrite(&[entry(2, 3)]).unwrap();
        // The first open hands the append the handle it had before the rename.
        let mut open = || match stale.take() {
            Some(f) => Ok(f),
            None => open_regular(&path, true),
        };
        assert_eq!(
            a.append_opening(&[entry(3, 3)], &mut open).unwrap(),
            Appended::Kept
        );
        assert!(stale.is_none(), "the stale handle was not tried");
        let read = a.read();
        assert_eq!(read.len(), 2, "{:?}", read.keys());
        assert!(
            read.contains_key(&[3; HASH_BYTES]),
            "the record went to the unlinked file"
        );
    }

    #[test]
    fn parallel_writers_never_tear_or_drop_a_kept_record() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|scope| {
            for t in 0..4u8 {
                let dir = dir.path();
                scope.spawn(move || {
                    let a = log(dir, 1, 1000);
                    for i in 0..25u8 {
                        let e = entry(t * 25 + i, 3);
                        // A busy lock skips the append; the writer tries again until it is kept.
                        while !a.read().contains_key(&e.0) {
                            a.append(std::slice::from_ref(&e)).unwrap();
                        }
                    }
                });
            }
        });
        assert_eq!(log(dir.path(), 1, 1000).read().len(), 100);
    }

    #[test]
    fn a_rewrite_keeps_exactly_its_entries_and_appends_continue_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), 1, 100);
        a.append(&[entry(1, 3), entry(2, 3), entry(3, 3)]).unwrap();
        assert_eq!(a.records_on_disk(), 3);
        // What a rewrite killed before its rename left, long ago, and what a running one is
        // writing now.
        let killed = dir.path().join(".vectors.f423f-0-0.tmp");
        std::fs::write(&killed, b"half a log").unwrap();
        let old = std::time::SystemTime::now() - 2 * index_storage::STALE_TEMP;
        std::fs::File::options()
            .write(true)
            .open(&killed)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let running = dir.path().join(".vectors.f423e-0-0.tmp");
        std::fs::write(&running, b"a log being written").unwrap();
        a.rewrite(&[entry(2, 3), entry(7, 3), entry(8, 4)]).unwrap();
        assert!(!killed.exists(), "a killed rewrite's file was left");
        assert!(running.exists(), "a running rewrite's file was removed");
        std::fs::remove_file(&running).unwrap();
        let read = a.read();
        assert_eq!(read.len(), 2, "{:?}", read.keys());
        assert_eq!(read[&[7; HASH_BYTES]], entry(7, 3).1);
        assert!(!read.contains_key(&[1; HASH_BYTES]));
        assert_eq!(a.records_on_disk(), 2);
        a.append(&[entry(9, 3)]).unwrap();
        assert_eq!(a.read().len(), 3);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temporary file was left: {names:?}");
    }

    #[test]
    fn a_kept_vector_reads_back_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let a = VectorLog::new(&dir.path().join("vectors"), [1; 32], 4, 10);
        let v = kept(&[0.123_456_79, -0.987_654_3, 1e-6, 0.5]);
        assert_ne!(v[0], 0.123_456_79, "not rounded to a half float");
        assert_eq!(kept(&v), v, "rounding twice changed the vector");
        a.append(&[([5; HASH_BYTES], v.clone())]).unwrap();
        assert_eq!(a.read()[&[5; HASH_BYTES]], v);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_log_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        log(dir.path(), 1, 10).append(&[entry(1, 3)]).unwrap();
        std::fs::rename(dir.path().join("vectors"), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("vectors")).unwrap();
        let a = log(dir.path(), 1, 10);
        assert!(a.read().is_empty(), "read through a symlink");
        assert!(
            a.append(&[entry(2, 3)]).is_err(),
            "written through a symlink"
        );
        assert!(
            a.rewrite(&[entry(2, 3)]).is_err(),
            "rewritten through a symlink"
        );
        assert_eq!(
            std::fs::read(&elsewhere).unwrap().len(),
            HEADER + a.record_len()
        );
    }
}
