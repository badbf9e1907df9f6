//! An immutable segment file: the paths of its documents and a trigram → postings map.
//!
//! ```text
//! magic   8 bytes  "RSIDX\0\0\x03"
//! n_docs  u32, n_trigrams u32, paths_off u64, dict_off u64, postings_off u64, end u64
//! paths   (n_docs + 1) u32 offsets into the path bytes that follow them
//! meta    n_docs × 34 bytes: ranking prior u8 (1..=255), flags u8, then the file's stamp when it
//!         was read: length u64, mtime ns u64, ctime ns u64, inode u64
//! dict    n_trigrams × { trigram u32, postings offset u32 (from postings_off), count u32 }
//! postings  per trigram: doc ids as LEB128 deltas
//! crc32   of bytes [0, end)
//! ```
//! All integers little-endian. A segment is written to a temporary name, synced, and renamed:
//! once it has its name it is never modified, which is what makes mapping it sound.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use memmap2::Mmap;

const MAGIC: &[u8; 8] = b"RSIDX\0\0\x03";
/// Bytes of per-doc metadata: prior, flags, stamp.
const META: usize = 34;
const HEADER: usize = 48;

/// Why a segment cannot be read.
#[derive(Debug)]
pub(crate) enum SegmentError {
    Io(io::Error),
    Corrupt,
}

impl From<io::Error> for SegmentError {
    fn from(e: io::Error) -> Self {
        SegmentError::Io(e)
    }
}

/// What the index knows of a file besides its trigrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DocMeta {
    /// The ranking prior, quantized to 1..=255 (computed by the ranking code, stored here).
    pub(crate) prior: u8,
    /// `flags::*` bits.
    pub(crate) flags: u8,
    /// The file's stamp when it was read.
    pub(crate) stamp: Stamp,
}

/// A file's identity and version as `stat` reports it. Two equal stamps mean the file was not
/// written in between, unless it was written within the file system's timestamp granularity of
/// the read: such a read is flagged [`flags::RACY`] and never trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp {
    pub(crate) len: u64,
    pub(crate) mtime_ns: u64,
    pub(crate) ctime_ns: u64,
    pub(crate) ino: u64,
}

/// Bits of [`DocMeta::flags`].
pub(crate) mod flags {
    /// The file was modified too close to when it was read for its stamp to vouch for it: the
    /// next refresh reads it again.
    pub(crate) const RACY: u8 = 1;
    /// The trust gate refuses the file's name: the index holds it, never serves it, and reports an
    /// answer incomplete when it holds a match.
    pub(crate) const REFUSED_NAME: u8 = 2;
    /// The file could not be opened or read when it was indexed; it has no trigrams.
    pub(crate) const UNREADABLE: u8 = 4;
}

/// A document about to be written: its path, its sorted distinct trigrams and its metadata.
pub(crate) struct DocTrigrams {
    pub(crate) path: String,
    pub(crate) trigrams: Vec<u32>,
    pub(crate) meta: DocMeta,
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Serializes segments with a counting sort over the 2^24 trigram space: two passes over the
/// (trigram, doc) pairs, no comparison sort. The 64 MiB count table is reused across batches.
pub(crate) struct Encoder {
    cursor: Vec<u32>,
}

impl Encoder {
    pub(crate) fn new() -> Encoder {
        Encoder {
            cursor: vec![0; 1 << 24],
        }
    }

    /// Serializes docs (ids are their positions); returns the bytes and their crc.
    pub(crate) fn encode(&mut self, docs: &[DocTrigrams]) -> (Vec<u8>, u32) {
        let mut touched: Vec<u32> = Vec::new();
        let mut total = 0usize;
        for d in docs {
            for &t in &d.trigrams {
                let c = &mut self.cursor[t as usize];
                if *c == 0 {
                    touched.push(t);
                }
                *c += 1;
                total += 1;
            }
        }
        touched.sort_unstable();
        // Turn counts into start positions, keeping each list's length for the dictionary.
        let mut lens = Vec::with_capacity(touched.len());
        let mut running = 0u32;
        for &t in &touched {
            let c = self.cursor[t as usize];
            lens.push(c);
            self.cursor[t as usize] = running;
            running += c;
        }
        let mut flat = vec![0u32; total];
        for (id, d) in docs.iter().enumerate() {
            for &t in &d.trigrams {
                let c = &mut self.cursor[t as usize];
                flat[*c as usize] = id as u32;
                *c += 1;
            }
        }
        for &t in &touched {
            self.cursor[t as usize] = 0;
        }
        let mut lists = Vec::with_capacity(touched.len());
        let mut begin = 0usize;
        for (&t, &len) in touched.iter().zip(&lens) {
            let end = begin + len as usize;
            lists.push((t, &flat[begin..end]));
            begin = end;
        }
        encode_lists(
            docs.iter().map(|d| (d.path.as_str(), d.meta)),
            docs.len(),
            lists.into_iter(),
        )
    }
}

/// Serializes from (trigram, ascending doc ids) lists in ascending trigram order.
pub(crate) fn encode_lists<'a, 'b>(
    paths: impl Iterator<Item = (&'a str, DocMeta)>,
    n_docs: usize,
    lists: impl Iterator<Item = (u32, &'b [u32])>,
) -> (Vec<u8>, u32) {
    let mut out = vec![0u8; HEADER];
    out[..8].copy_from_slice(MAGIC);
    let paths_off = out.len();
    let mut offsets = Vec::with_capacity(n_docs + 1);
    let mut bytes = Vec::new();
    let mut metas = Vec::with_capacity(n_docs * META);
    for (p, m) in paths {
        offsets.push(bytes.len() as u32);
        bytes.extend_from_slice(p.as_bytes());
        metas.push(m.prior);
        metas.push(m.flags);
        for v in [m.stamp.len, m.stamp.mtime_ns, m.stamp.ctime_ns, m.stamp.ino] {
            metas.extend_from_slice(&v.to_le_bytes());
        }
    }
    offsets.push(bytes.len() as u32);
    for o in &offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    out.extend_from_slice(&bytes);
    out.extend_from_slice(&metas);
    let mut dict = Vec::new();
    let mut postings = Vec::new();
    for (t, docs) in lists {
        let start = postings.len() as u32;
        let mut prev = 0u32;
        for &doc in docs {
            put_varint(&mut postings, doc - prev);
            prev = doc;
        }
        dict.extend_from_slice(&t.to_le_bytes());
        dict.extend_from_slice(&start.to_le_bytes());
        dict.extend_from_slice(&(docs.len() as u32).to_le_bytes());
    }
    let dict_off = out.len();
    out.extend_from_slice(&dict);
    let postings_off = out.len();
    out.extend_from_slice(&postings);
    let end = out.len();
    let n_trigrams = dict.len() / 12;
    out[8..12].copy_from_slice(&(n_docs as u32).to_le_bytes());
    out[12..16].copy_from_slice(&(n_trigrams as u32).to_le_bytes());
    out[16..24].copy_from_slice(&(paths_off as u64).to_le_bytes());
    out[24..32].copy_from_slice(&(dict_off as u64).to_le_bytes());
    out[32..40].copy_from_slice(&(postings_off as u64).to_le_bytes());
    out[40..48].copy_from_slice(&(end as u64).to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    (out, crc)
}

/// Writes bytes to `dir/name` durably: a temporary file of a name unique to this writer, fsync,
/// rename. The rename replaces the directory entry, never the old file's bytes, so a reader that
/// mapped the old file keeps reading it intact.
pub(crate) fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::write::unique_suffix()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A mapped, checked segment.
pub(crate) struct Segment {
    map: Mmap,
    n_docs: u32,
    n_trigrams: u32,
    paths_off: usize,
    dict_off: usize,
    postings_off: usize,
    end: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Segment {
    /// Maps and checks a segment: magic, bounds and the crc over the whole file, which must also
    /// equal the crc the manifest recorded.
    pub(crate) fn open(
        dir: &search_profile::RootDir,
        name: &str,
        expected_crc: u32,
    ) -> Result<Segment, SegmentError> {
        let file: File = dir.open_file(name).map_err(|e| match e {
            search_profile::OpenError::Io(e) => SegmentError::Io(e),
            search_profile::OpenError::Missing => {
                SegmentError::Io(io::Error::from(io::ErrorKind::NotFound))
            }
            // A symlink, FIFO or directory where a segment should be is damage.
            _ => SegmentError::Corrupt,
        })?;
        // SAFETY: segment files are immutable once renamed into place (see the module docs), and
        // the index directory belongs to this index; nothing truncates or rewrites them while
        // mapped.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file)? };
        let b = &map[..];
        if b.len() < HEADER + 4 || &b[..8] != MAGIC {
            return Err(SegmentError::Corrupt);
        }
        let end = u64_at(b, 40) as usize;
        if end + 4 != b.len() {
            return Err(SegmentError::Corrupt);
        }
        let crc = u32_at(b, end);
        if crc != expected_crc || crc32fast::hash(&b[..end]) != crc {
            return Err(SegmentError::Corrupt);
        }
        let seg = Segment {
            n_docs: u32_at(b, 8),
            n_trigrams: u32_at(b, 12),
            paths_off: u64_at(b, 16) as usize,
            dict_off: u64_at(b, 24) as usize,
            postings_off: u64_at(b, 32) as usize,
            end,
            map,
        };
        let paths_bytes_start = seg.paths_off + (seg.n_docs as usize + 1) * 4;
        if paths_bytes_start > seg.dict_off
            || seg.dict_off + seg.n_trigrams as usize * 12 != seg.postings_off
            || seg.postings_off > seg.end
        {
            return Err(SegmentError::Corrupt);
        }
        // Every path must be valid UTF-8 within bounds; checked once so lookups cannot panic.
        let last = seg.path_range(seg.n_docs.saturating_sub(1)).1;
        let meta_bytes = seg.n_docs as usize * META;
        if seg.n_docs > 0 && paths_bytes_start + last + meta_bytes != seg.dict_off {
            return Err(SegmentError::Corrupt);
        }
        for i in 0..seg.n_docs {
            let (s, e) = seg.path_range(i);
            if s > e || paths_bytes_start + e + meta_bytes > seg.dict_off {
                return Err(SegmentError::Corrupt);
            }
            if std::str::from_utf8(&seg.map[paths_bytes_start + s..paths_bytes_start + e]).is_err()
            {
                return Err(SegmentError::Corrupt);
            }
        }
        Ok(seg)
    }

    pub(crate) fn n_docs(&self) -> u32 {
        self.n_docs
    }

    fn path_range(&self, id: u32) -> (usize, usize) {
        let at = self.paths_off + id as usize * 4;
        (
            u32_at(&self.map, at) as usize,
            u32_at(&self.map, at + 4) as usize,
        )
    }

    /// The path of doc `id` (< n_docs; checked at open).
    pub(crate) fn path(&self, id: u32) -> &str {
        let base = self.paths_off + (self.n_docs as usize + 1) * 4;
        let (s, e) = self.path_range(id);
        std::str::from_utf8(&self.map[base + s..base + e]).unwrap_or("")
    }

    /// The metadata of doc `id` (< n_docs).
    pub(crate) fn meta(&self, id: u32) -> DocMeta {
        let at = self.dict_off - self.n_docs as usize * META + id as usize * META;
        let b = &self.map[at..at + META];
        DocMeta {
            prior: b[0],
            flags: b[1],
            stamp: Stamp {
                len: u64_at(b, 2),
                mtime_ns: u64_at(b, 10),
                ctime_ns: u64_at(b, 18),
                ino: u64_at(b, 26),
            },
        }
    }

    /// The ranking prior of doc `id` (< n_docs), 1..=255.
    pub(crate) fn prior(&self, id: u32) -> u8 {
        self.map[self.dict_off - self.n_docs as usize * META + id as usize * META]
    }

    fn dict_entry(&self, i: usize) -> (u32, usize, usize) {
        let at = self.dict_off + i * 12;
        (
            u32_at(&self.map, at),
            u32_at(&self.map, at + 4) as usize,
            u32_at(&self.map, at + 8) as usize,
        )
    }

    /// Binary-searches the dictionary.
    fn find(&self, trigram: u32) -> Option<(usize, usize)> {
        let (mut lo, mut hi) = (0usize, self.n_trigrams as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (t, off, count) = self.dict_entry(mid);
            match t.cmp(&trigram) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some((off, count)),
            }
        }
        None
    }

    /// How many docs hold `trigram`.
    pub(crate) fn count(&self, trigram: u32) -> usize {
        self.find(trigram).map_or(0, |(_, c)| c)
    }

    /// The docs holding `trigram`, ascending. A malformed list ends early rather than panicking
    /// (the crc makes that a can't-happen for files this index wrote).
    pub(crate) fn postings(&self, trigram: u32) -> Vec<u32> {
        let Some((off, count)) = self.find(trigram) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(count);
        let mut pos = self.postings_off + off;
        let mut prev = 0u32;
        while out.len() < count && pos < self.end {
            let mut v = 0u32;
            let mut shift = 0;
            while pos < self.end {
                let byte = self.map[pos];
                pos += 1;
                v |= u32::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
                shift += 7;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            prev = prev.wrapping_add(v);
            if prev >= self.n_docs {
                break;
            }
            out.push(prev);
        }
        out
    }

    /// Every (trigram, doc) pair, for merging.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (u32, Vec<u32>)> + '_ {
        (0..self.n_trigrams as usize).map(move |i| {
            let (t, _, _) = self.dict_entry(i);
            (t, self.postings(t))
        })
    }

    /// Size on disk.
    pub(crate) fn bytes(&self) -> usize {
        self.map.len()
    }
}
