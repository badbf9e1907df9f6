//! An immutable segment file: the paths of its documents and a trigram → postings map.
//!
//! ```text
//! magic   8 bytes  "RSIDX\0\0\x04"
//! n_docs  u32, n_trigrams u32, paths_off u64, dict_off u64, postings_off u64, end u64
//! paths   (n_docs + 1) u32 offsets into the path bytes that follow them
//! meta    n_docs × 34 bytes: ranking prior u8 (1..=255), flags u8, then the file's stamp when it
//!         was read: length u64, mtime ns u64, ctime ns u64, inode u64
//! dict    n_trigrams × { trigram u32, postings offset u32 (from postings_off), count u32 }
//! postings  per trigram: its doc ids as Elias–Fano or a bitmap (`crate::postings`), whose
//!         size follows from the count and n_docs
//! crc32   of bytes [0, end)
//! ```
//! All integers little-endian. A segment is written to a temporary name, synced, and renamed:
//! once it has its name it is never modified, which is what makes mapping it sound.

use std::io::{self, Write};

use crate::postings::Shape;

use index_storage::{FileError, IndexDir, Mmap};

use crate::manifest::SegmentEntry;

const MAGIC: &[u8; 8] = b"RSIDX\0\0\x04";
/// Bytes of per-doc metadata: prior, flags, stamp.
const META: usize = 34;
const HEADER: usize = 48;
/// A segment larger than this is damage: its size is checked before it is mapped or checksummed.
/// Its offsets into paths and postings are u32, and a build writes a segment every
/// `pairs_per_segment` pairs, tens of megabytes by default.
pub(crate) const MAX_SEGMENT_BYTES: u64 = 4 << 30;

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

impl From<FileError> for SegmentError {
    fn from(e: FileError) -> Self {
        match e {
            // A concurrent commit collected it: the reader reads the newer manifest.
            FileError::Missing => SegmentError::Io(io::Error::from(io::ErrorKind::NotFound)),
            FileError::Io(e) => SegmentError::Io(e),
            // A symlink, FIFO or directory where a segment should be is damage.
            FileError::Damaged => SegmentError::Corrupt,
        }
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
pub(crate) use index_storage::Stamp;

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

/// Serializes segments with a counting sort over the 2^24 trigram space: two passes over the
/// (trigram, doc) pairs, no comparison sort. The count table is reused across batches.
pub(crate) struct Encoder {
    cursor: Counts,
}

/// Trigrams per page of [`Counts`]: one page covers every last byte after a given two.
const COUNT_PAGE: usize = 1 << 10;

/// A u32 per trigram, zero until touched, kept in pages that are allocated on first touch. Text
/// touches the pages of a few thousand byte pairs (about 10 MiB), where a flat table is 64 MiB
/// that a build would hold throughout; binary files can touch every page, which is the flat
/// table's size and no more.
struct Counts {
    pages: Vec<Option<Box<[u32]>>>,
}

impl Counts {
    fn new() -> Counts {
        Counts {
            pages: vec![None; (1 << 24) / COUNT_PAGE],
        }
    }

    /// The count of trigram `t` (< 2^24), its page allocated when first touched.
    fn at(&mut self, t: u32) -> &mut u32 {
        let t = t as usize;
        let page = self.pages[t / COUNT_PAGE]
            .get_or_insert_with(|| vec![0; COUNT_PAGE].into_boxed_slice());
        &mut page[t % COUNT_PAGE]
    }
}

impl Encoder {
    pub(crate) fn new() -> Encoder {
        Encoder {
            cursor: Counts::new(),
        }
    }

    /// Serializes docs (ids are their positions); returns the bytes and their crc.
    pub(crate) fn encode(&mut self, docs: &[DocTrigrams]) -> (Vec<u8>, u32) {
        let mut touched: Vec<u32> = Vec::new();
        let mut total = 0usize;
        for d in docs {
            for &t in &d.trigrams {
                let c = self.cursor.at(t);
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
            let c = self.cursor.at(t);
            lens.push(*c);
            *c = running;
            running += lens[lens.len() - 1];
        }
        let mut flat = vec![0u32; total];
        for (id, d) in docs.iter().enumerate() {
            for &t in &d.trigrams {
                let c = self.cursor.at(t);
                flat[*c as usize] = id as u32;
                *c += 1;
            }
        }
        for &t in &touched {
            *self.cursor.at(t) = 0;
        }
        let lists = touched.iter().zip(&lens).scan(0usize, |begin, (&t, &len)| {
            let start = *begin;
            *begin += len as usize;
            Some((t, &flat[start..*begin]))
        });
        encode_lists(
            docs.iter().map(|d| (d.path.as_str(), d.meta)),
            docs.len(),
            lists,
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
        crate::postings::encode(docs, n_docs as u32, &mut postings);
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

/// How a merge ([`write_concatenated`]) spreads its lists over threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MergeConfig {
    /// Threads that decode, renumber and encode lists at once.
    pub(crate) threads: usize,
    /// About how many bytes of encoded lists one thread produces at a time: the merge holds
    /// `threads` × [`MERGE_ROUND`] of them, and each thread the largest list it meets.
    pub(crate) block_bytes: usize,
}

/// Blocks a thread takes in one round of a merge, so that a thread that meets a slow block waits
/// for the others less often.
const MERGE_ROUND: usize = 4;

impl MergeConfig {
    /// Blocks of 256 KiB on `threads` threads.
    pub(crate) fn on(threads: usize) -> MergeConfig {
        MergeConfig {
            threads: threads.max(1),
            block_bytes: 256 << 10,
        }
    }
}

/// Why [`write_concatenated`] wrote no segment.
#[derive(Debug)]
pub(crate) enum MergeError {
    /// Reading the parts or writing the output failed: `InvalidInput` when the merged segment
    /// would not fit a segment's u32 offsets, `InvalidData` when a part's list is damaged (the
    /// caller then keeps the parts), any other kind from the file system.
    Io(io::Error),
    /// A thread encoding lists panicked: its blocks are lost, so nothing may be written.
    Panicked,
}

impl From<io::Error> for MergeError {
    fn from(e: io::Error) -> Self {
        MergeError::Io(e)
    }
}

/// A run of the merged dictionary whose lists one thread writes: where it starts in the
/// dictionary, and where each part's dictionary stood at that trigram.
struct MergeBlock {
    first: usize,
    end: usize,
    cursors: Vec<usize>,
}

/// Writes the segments `parts` as one, their docs in order: each part's docs must come after the
/// previous part's in path order, and none may be deleted. Streams to `out`, holding the merged
/// dictionary and a few blocks of lists, so a merge of any size has a small, bounded heap. The
/// lists are decoded, renumbered and encoded on `config.threads` threads, a block of the
/// dictionary each, and written in order. Returns the crc32 and the doc count, or `InvalidInput`
/// when the result would not fit a segment's u32 offsets (the caller merges fewer parts).
pub(crate) fn write_concatenated(
    parts: &[&Segment],
    out: &mut dyn Write,
    config: MergeConfig,
) -> Result<(u32, u32), MergeError> {
    let too_large = || io::Error::new(io::ErrorKind::InvalidInput, "merged segment too large");
    let n_docs: u64 = parts.iter().map(|p| u64::from(p.n_docs)).sum();
    let path_bytes: u64 = parts
        .iter()
        .map(|p| p.path_and_meta_bytes().0.len() as u64)
        .sum();
    let n_docs = u32::try_from(n_docs).map_err(|_| too_large())?;
    u32::try_from(path_bytes).map_err(|_| too_large())?;
    // The merged dictionary: every trigram of any part, its summed count and its list's offset.
    let mut dict: Vec<(u32, u32, u32)> = Vec::new();
    let mut cursors = vec![0usize; parts.len()];
    let mut postings_len = 0u64;
    let mut blocks: Vec<MergeBlock> = Vec::new();
    let mut block_bytes = 0usize;
    loop {
        if blocks.is_empty() || block_bytes >= config.block_bytes {
            if let Some(last) = blocks.last_mut() {
                last.end = dict.len();
            }
            blocks.push(MergeBlock {
                first: dict.len(),
                end: dict.len(),
                cursors: cursors.clone(),
            });
            block_bytes = 0;
        }
        let next = parts
            .iter()
            .zip(&cursors)
            .filter(|&(p, &c)| c < p.n_trigrams as usize)
            .map(|(p, &c)| p.dict_entry(c).0)
            .min();
        let Some(t) = next else { break };
        let mut count = 0u32;
        for (p, c) in parts.iter().zip(&mut cursors) {
            if *c < p.n_trigrams as usize && p.dict_entry(*c).0 == t {
                // A part's counts are at most its docs, so their sum is at most n_docs.
                count = count.saturating_add(p.dict_entry(*c).2.min(p.n_docs as usize) as u32);
                *c += 1;
            }
        }
        let offset = u32::try_from(postings_len).map_err(|_| too_large())?;
        dict.push((t, offset, count));
        let bytes = Shape::of(count, n_docs).bytes();
        postings_len += bytes as u64;
        block_bytes = block_bytes.saturating_add(bytes);
    }
    if let Some(last) = blocks.last_mut() {
        last.end = dict.len();
    }
    let paths_off = HEADER as u64;
    let dict_off =
        paths_off + (u64::from(n_docs) + 1) * 4 + path_bytes + u64::from(n_docs) * META as u64;
    let postings_off = dict_off + dict.len() as u64 * 12;
    let end = postings_off + postings_len;
    if end + 4 > MAX_SEGMENT_BYTES {
        return Err(too_large().into());
    }
    let mut hasher = crc32fast::Hasher::new();
    let mut put = |bytes: &[u8]| -> io::Result<()> {
        hasher.update(bytes);
        out.write_all(bytes)
    };
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&n_docs.to_le_bytes());
    header[12..16].copy_from_slice(&(dict.len() as u32).to_le_bytes());
    header[16..24].copy_from_slice(&paths_off.to_le_bytes());
    header[24..32].copy_from_slice(&dict_off.to_le_bytes());
    header[32..40].copy_from_slice(&postings_off.to_le_bytes());
    header[40..48].copy_from_slice(&end.to_le_bytes());
    put(&header)?;
    let mut base = 0u32;
    for p in parts {
        for id in 0..p.n_docs {
            put(&(base + p.path_range(id).0 as u32).to_le_bytes())?;
        }
        base += p.path_and_meta_bytes().0.len() as u32;
    }
    put(&base.to_le_bytes())?;
    for p in parts {
        put(p.path_and_meta_bytes().0)?;
    }
    for p in parts {
        put(p.path_and_meta_bytes().1)?;
    }
    for &(t, offset, count) in &dict {
        put(&t.to_le_bytes())?;
        put(&offset.to_le_bytes())?;
        put(&count.to_le_bytes())?;
    }
    // Each round hands every thread a few blocks; their bytes are written in dictionary order.
    let write_block = |block: &MergeBlock, state: &mut (Vec<u32>, Vec<u8>)| {
        let (list, bytes) = state;
        let mut encoded = Vec::new();
        let mut cursors = block.cursors.clone();
        for &(t, _, count) in &dict[block.first..block.end] {
            list.clear();
            let mut first_doc = 0u32;
            for (p, c) in parts.iter().zip(&mut cursors) {
                if *c < p.n_trigrams as usize && p.dict_entry(*c).0 == t {
                    list.extend(p.postings_at(*c).into_iter().map(|d| d + first_doc));
                    *c += 1;
                }
                first_doc += p.n_docs;
            }
            // A list that decoded as every doc of its part (damage the crc missed) disagrees
            // with the count written above: the caller keeps the parts, which serve it soundly.
            if list.len() != count as usize {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a damaged list"));
            }
            bytes.clear();
            crate::postings::encode(list, n_docs, bytes);
            encoded.extend_from_slice(bytes);
        }
        Ok(encoded)
    };
    for round in blocks.chunks(config.threads * MERGE_ROUND) {
        let encoded = crate::parallel::map(
            round,
            config.threads,
            || (Vec::new(), Vec::new()),
            |_, block, state| write_block(block, state),
        )
        .map_err(|crate::parallel::Panicked| MergeError::Panicked)?;
        for block in encoded {
            put(&block?)?;
        }
    }
    let crc = hasher.finalize();
    out.write_all(&crc.to_le_bytes())?;
    Ok((crc, n_docs))
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
    /// The docs the index could not read, in id order: they hold no trigrams, so every query
    /// keeps them as candidates. Found once at open, not by each query.
    unreadable: Vec<u32>,
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
        dir: &IndexDir,
        name: &str,
        expected_crc: u32,
    ) -> Result<Segment, SegmentError> {
        Segment::open_committed(dir, name, expected_crc, None)
    }

    /// [`Segment::open`], skipping the checksum scan of the whole file when the file's identity
    /// (size, inode, mtime, ctime) is still the one its writer recorded in the manifest right
    /// after writing it: then no byte of it was written since. Any write, copy, restore or
    /// `touch` changes the identity, and the whole file is checked again. What this leaves to the
    /// file system is silent media corruption, which changes no metadata.
    pub(crate) fn open_committed(
        dir: &IndexDir,
        name: &str,
        expected_crc: u32,
        identity: Option<[u64; 4]>,
    ) -> Result<Segment, SegmentError> {
        // Opened as every index file is (a regular file, no symlink), and refused by its size
        // before it is mapped: a damaged segment of any size costs nothing to refuse.
        let mapped = dir.map(name, (HEADER + 4) as u64..=MAX_SEGMENT_BYTES)?;
        let len = mapped.stamp.len;
        let b = &mapped.map[..];
        if &b[..8] != MAGIC {
            return Err(SegmentError::Corrupt);
        }
        let end = u64_at(b, 40);
        if end.checked_add(4) != Some(len) {
            return Err(SegmentError::Corrupt);
        }
        let end = end as usize;
        let crc = u32_at(b, end);
        if crc != expected_crc {
            return Err(SegmentError::Corrupt);
        }
        let untouched = identity.is_some_and(|id| SegmentEntry::identity_of(mapped.stamp) == id);
        if !untouched && mapped.crc32(end as u64)? != crc {
            return Err(SegmentError::Corrupt);
        }
        let map = mapped.map;
        let b = &map[..];
        // The header's offsets are checked in u64 before any is used: a crafted file whose crc the
        // manifest also records must still be `Corrupt`, never an overflow or a panic.
        let (n_docs, n_trigrams) = (u64::from(u32_at(b, 8)), u64::from(u32_at(b, 12)));
        let (paths_off, dict_off, postings_off) = (u64_at(b, 16), u64_at(b, 24), u64_at(b, 32));
        let dict_end = dict_off.checked_add(n_trigrams * 12);
        let header_ok = paths_off == HEADER as u64
            && paths_off + (n_docs + 1) * 4 <= dict_off
            && dict_end == Some(postings_off)
            && postings_off <= end as u64;
        if !header_ok {
            return Err(SegmentError::Corrupt);
        }
        let mut seg = Segment {
            unreadable: Vec::new(),
            n_docs: n_docs as u32,
            n_trigrams: n_trigrams as u32,
            paths_off: paths_off as usize,
            dict_off: dict_off as usize,
            postings_off: postings_off as usize,
            end,
            map,
        };
        let paths_bytes_start = seg.paths_off + (seg.n_docs as usize + 1) * 4;
        // Every path must be valid UTF-8 within bounds; checked once so lookups cannot panic.
        let last = seg.path_range(seg.n_docs.saturating_sub(1)).1;
        let meta_bytes = seg.n_docs as usize * META;
        if seg.n_docs > 0 && paths_bytes_start + last + meta_bytes != seg.dict_off {
            return Err(SegmentError::Corrupt);
        }
        // All paths are checked as one text, then each must lie between two of its character
        // boundaries: one pass over the bytes, not one per path.
        let text = if seg.n_docs > 0 {
            std::str::from_utf8(&seg.map[paths_bytes_start..paths_bytes_start + last])
                .map_err(|_| SegmentError::Corrupt)?
        } else {
            ""
        };
        for i in 0..seg.n_docs {
            let (s, e) = seg.path_range(i);
            if s > e || e > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
                return Err(SegmentError::Corrupt);
            }
        }
        seg.unreadable = (0..seg.n_docs)
            .filter(|&id| seg.meta(id).flags & flags::UNREADABLE != 0)
            .collect();
        Ok(seg)
    }

    /// The docs the index could not read, in id order.
    pub(crate) fn unreadable(&self) -> &[u32] {
        &self.unreadable
    }

    /// Whether the docs are in strictly increasing path order, as every writer puts them: a
    /// snapshot binary-searches them, so it refuses a segment that is not.
    pub(crate) fn is_in_path_order(&self) -> bool {
        let base = self.paths_off + (self.n_docs as usize + 1) * 4;
        let bytes = |id: u32| {
            let (s, e) = self.path_range(id);
            &self.map[base + s..base + e]
        };
        (1..self.n_docs).all(|i| {
            search_profile::PathKey::compare_bytes(bytes(i - 1), bytes(i))
                == std::cmp::Ordering::Less
        })
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

    /// The doc holding `path`, by binary search: docs are in path order (checked by the snapshot
    /// that maps the segment).
    pub(crate) fn find_path(&self, path: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0u32, self.n_docs);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match search_profile::PathKey::compare(self.path(mid), path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
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

    /// Binary-searches the dictionary for `trigram`'s entry.
    fn find(&self, trigram: u32) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.n_trigrams as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.dict_entry(mid).0.cmp(&trigram) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// How many docs hold `trigram`.
    pub(crate) fn count(&self, trigram: u32) -> usize {
        self.find(trigram).map_or(0, |i| self.dict_entry(i).2)
    }

    /// The docs holding `trigram`, ascending. A list whose bytes lie outside the postings or
    /// decode to anything but `count` ascending doc ids is every doc of the segment, which only
    /// widens the candidates that verification narrows: never a panic, a lost hit or an
    /// allocation its count asks for (the crc makes that a can't-happen for files this index
    /// wrote).
    pub(crate) fn postings(&self, trigram: u32) -> Vec<u32> {
        self.find(trigram)
            .map_or_else(Vec::new, |i| self.postings_at(i))
    }

    /// The docs of the `i`th dictionary entry (< n_trigrams), as [`Segment::postings`].
    fn postings_at(&self, i: usize) -> Vec<u32> {
        let (_, off, count) = self.dict_entry(i);
        let len = Shape::of(count as u32, self.n_docs).bytes();
        let start = self.postings_off.saturating_add(off);
        let Some(bytes) = start
            .checked_add(len)
            .and_then(|end| self.map[..self.end].get(start..end))
        else {
            return (0..self.n_docs).collect();
        };
        let mut out = Vec::with_capacity(count.min(self.n_docs as usize));
        if !crate::postings::decode(bytes, count as u32, self.n_docs, &mut out) {
            return (0..self.n_docs).collect();
        }
        out
    }

    /// Keeps the `candidates` (ascending docs) that hold `trigram`, probing its list rather than
    /// decoding it (`postings::retain_present`). A list whose bytes lie outside the postings
    /// keeps them all, as [`Segment::postings`] widens.
    pub(crate) fn retain_holding(&self, trigram: u32, candidates: &mut Vec<u32>) {
        let Some(i) = self.find(trigram) else {
            candidates.clear();
            return;
        };
        let (_, off, count) = self.dict_entry(i);
        let len = Shape::of(count as u32, self.n_docs).bytes();
        let start = self.postings_off.saturating_add(off);
        if let Some(bytes) = start
            .checked_add(len)
            .and_then(|end| self.map[..self.end].get(start..end))
        {
            crate::postings::retain_present(bytes, count as u32, self.n_docs, candidates);
        }
    }

    /// Every (trigram, doc) pair, for merging.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (u32, Vec<u32>)> + '_ {
        (0..self.n_trigrams as usize).map(move |i| (self.dict_entry(i).0, self.postings_at(i)))
    }

    /// The bytes of its paths (without their offsets) and of its metas.
    fn path_and_meta_bytes(&self) -> (&[u8], &[u8]) {
        let base = self.paths_off + (self.n_docs as usize + 1) * 4;
        let metas = self.dict_off - self.n_docs as usize * META;
        (&self.map[base..metas], &self.map[metas..self.dict_off])
    }

    /// Size on disk.
    pub(crate) fn bytes(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{
        DocMeta, DocTrigrams, Encoder, HEADER, META, MergeConfig, Segment, SegmentError, Stamp,
        flags,
    };
    use index_storage::IndexDir;

    /// Trigrams of a few distinct shapes: the smallest, the largest of the 2^24 space, and some
    /// in between.
    const A: u32 = 0;
    const B: u32 = 0x61_62_63;
    const C: u32 = 0x00ff_ffff;

    fn doc(path: &str, trigrams: &[u32], prior: u8, flags: u8, stamp: Stamp) -> DocTrigrams {
        DocTrigrams {
            path: path.to_owned(),
            trigrams: trigrams.to_vec(),
            meta: DocMeta {
                prior,
                flags,
                stamp,
            },
        }
    }

    fn sample_docs() -> Vec<DocTrigrams> {
        let stamp = |n: u64| Stamp {
            len: n,
            mtime_ns: n * 1_000_000_007,
            ctime_ns: u64::MAX - n,
            ino: n << 40,
        };
        vec![
            doc("src/main.rs", &[A, B], 255, 0, stamp(1)),
            doc("", &[], 1, flags::UNREADABLE, stamp(0)),
            doc("日本語/名前.rs", &[B, C], 128, flags::RACY, stamp(7)),
            doc(
                "name with space.txt",
                &[A, B, C],
                17,
                flags::RACY | flags::REFUSED_NAME,
                Stamp {
                    len: u64::MAX,
                    mtime_ns: u64::MAX,
                    ctime_ns: 0,
                    ino: u64::MAX,
                },
            ),
        ]
    }

    /// Writes `bytes` as a segment named `seg` in a fresh directory and opens it expecting `crc`.
    fn open_bytes(bytes: &[u8], crc: u32) -> Result<Segment, SegmentError> {
        let dir = tempfile::tempdir().unwrap();
        let root = IndexDir::open(dir.path()).unwrap();
        root.write_durably("seg", bytes).unwrap();
        Segment::open(&root, "seg", crc)
    }

    fn encode(docs: &[DocTrigrams]) -> (Vec<u8>, u32) {
        Encoder::new().encode(docs)
    }

    /// Replaces the trailing crc with the crc of the (modified) body, so only the modification
    /// itself can make the segment unreadable.
    fn recrc(bytes: &mut Vec<u8>) -> u32 {
        let end = bytes.len() - 4;
        bytes.truncate(end);
        let crc = crc32fast::hash(bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        crc
    }

    fn assert_corrupt(result: Result<Segment, SegmentError>, what: &str) {
        assert!(
            matches!(result, Err(SegmentError::Corrupt)),
            "{what}: expected Corrupt, got {:?}",
            result.map(|s| s.n_docs())
        );
    }

    #[test]
    fn encoded_docs_round_trip_paths_metas_priors_and_postings() {
        let docs = sample_docs();
        let (bytes, crc) = encode(&docs);
        let seg = open_bytes(&bytes, crc).unwrap();
        assert_eq!(seg.n_docs(), 4);
        assert_eq!(seg.bytes(), bytes.len());
        for (id, d) in docs.iter().enumerate() {
            let id = id as u32;
            assert_eq!(seg.path(id), d.path);
            assert_eq!(seg.meta(id), d.meta);
            assert_eq!(seg.prior(id), d.meta.prior);
        }
        for (t, want) in [(A, vec![0, 3]), (B, vec![0, 2, 3]), (C, vec![2, 3])] {
            assert_eq!(seg.count(t), want.len(), "count of {t:#x}");
            assert_eq!(seg.postings(t), want, "postings of {t:#x}");
        }
        // A trigram no doc holds, between and beyond the stored ones.
        for t in [1, B + 1, C - 1] {
            assert_eq!(seg.count(t), 0);
            assert!(seg.postings(t).is_empty());
        }
        let pairs: Vec<(u32, Vec<u32>)> = seg.pairs().collect();
        assert_eq!(
            pairs,
            [(A, vec![0, 3]), (B, vec![0, 2, 3]), (C, vec![2, 3])]
        );
    }

    #[test]
    fn encoder_reused_across_batches_does_not_leak_counts() {
        // The count table is reused; a batch must start from zeroes.
        let mut encoder = Encoder::new();
        let first = encoder.encode(&sample_docs());
        let second = encoder.encode(&sample_docs());
        assert_eq!(first, second);
        let (bytes, crc) = encoder.encode(&[doc("only", &[B], 9, 0, Stamp::default())]);
        let seg = open_bytes(&bytes, crc).unwrap();
        assert_eq!(seg.postings(B), [0]);
        assert_eq!(seg.count(A), 0);
    }

    /// Counts are kept in pages allocated when first touched: text touches the pages of its
    /// byte pairs, never the whole 2^24 table, and a trigram at either end of the space has
    /// its own page.
    #[test]
    fn the_encoder_allocates_count_pages_only_for_the_trigrams_it_sees() {
        let mut encoder = Encoder::new();
        let pages = |e: &Encoder| e.cursor.pages.iter().filter(|p| p.is_some()).count();
        assert_eq!(pages(&encoder), 0);
        let trigrams = |text: &str| {
            let mut t: Vec<u32> = text
                .as_bytes()
                .windows(3)
                .map(|w| u32::from(w[0]) << 16 | u32::from(w[1]) << 8 | u32::from(w[2]))
                .collect();
            t.sort_unstable();
            t.dedup();
            t
        };
        let text = "fn main() { println!(\"hello, world\"); }";
        let docs = [DocTrigrams {
            path: "a.rs".into(),
            trigrams: trigrams(text),
            meta: DocMeta::default(),
        }];
        let first = encoder.encode(&docs);
        let touched = pages(&encoder);
        // One page per distinct pair of leading bytes, at most.
        assert!(touched > 0 && touched <= trigrams(text).len(), "{touched}");
        assert_eq!(
            encoder.encode(&docs),
            first,
            "a page reused starts from zero"
        );
        assert_eq!(
            pages(&encoder),
            touched,
            "the same trigrams reuse their pages"
        );
        let edges = [doc("edge", &[0, (1 << 24) - 1], 9, 0, Stamp::default())];
        let (bytes, crc) = encoder.encode(&edges);
        let seg = open_bytes(&bytes, crc).unwrap();
        assert_eq!(seg.postings(0), [0]);
        assert_eq!(seg.postings((1 << 24) - 1), [0]);
        assert_eq!(pages(&encoder), touched + 2);
    }

    #[test]
    fn lists_of_every_density_round_trip_across_a_large_segment() {
        // A segment of 33 023 docs whose lists take both codecs: one id, ids far apart (many low
        // bits), every third doc and all but a few (a bitmap).
        let n = 33_023u32;
        let sparse = [0u32, 127, 255, 16_638, 33_022];
        let docs: Vec<DocTrigrams> = (0..n)
            .map(|i| {
                let mut trigrams = vec![A];
                if sparse.contains(&i) {
                    trigrams.push(B);
                }
                if i % 3 == 0 {
                    trigrams.push(C);
                }
                if i == 4_000 {
                    trigrams = vec![0x0010_0000];
                }
                doc(&format!("d{i:05}"), &trigrams, 1, 0, Stamp::default())
            })
            .collect();
        let (bytes, crc) = encode(&docs);
        let seg = open_bytes(&bytes, crc).unwrap();
        assert_eq!(seg.postings(B), sparse);
        assert_eq!(seg.postings(0x0010_0000), [4_000]);
        let thirds: Vec<u32> = (0..n).step_by(3).collect();
        assert_eq!(seg.postings(C), thirds);
        let all_but_one: Vec<u32> = (0..n).filter(|&i| i != 4_000).collect();
        assert_eq!(seg.postings(A), all_but_one);
        assert_eq!(seg.path(33_022), "d33022");
    }

    #[test]
    fn a_malformed_list_with_a_matching_crc_widens_to_every_doc_never_panics() {
        // A dictionary count that no list of this segment's bytes can hold (the largest u32) and
        // one that disagrees with the list's bytes: either way every doc is a candidate, and the
        // count's allocation is never made.
        let (bytes, _) = encode(&sample_docs());
        let dict_off = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
        // The dictionary's entries are A, B, C; B's count is its third field.
        let count_at = dict_off + 12 + 8;
        assert_eq!(super::u32_at(&bytes, count_at), 3);
        for count in [u32::MAX, 2] {
            let mut other = bytes.clone();
            other[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
            let crc = recrc(&mut other);
            let seg = open_bytes(&other, crc).unwrap();
            assert_eq!(seg.postings(B), [0, 1, 2, 3], "count {count}");
            assert_eq!(
                seg.postings(A),
                [0, 3],
                "an intact list beside it, count {count}"
            );
        }
    }

    #[test]
    fn concatenated_segments_are_byte_for_byte_the_segment_of_all_their_docs() {
        // Parts of every shape: the sample (empty path, unreadable doc, every stamp extreme),
        // a part sharing no trigram with it, an empty part and a large part whose lists become
        // bitmaps, written by streaming, must equal encoding all their docs at once.
        let big: Vec<DocTrigrams> = (0..3000u32)
            .map(|i| {
                doc(
                    &format!("z/{i:04}"),
                    &[A, 0x10 + i % 7],
                    3,
                    0,
                    Stamp::default(),
                )
            })
            .collect();
        let parts: Vec<Vec<DocTrigrams>> = vec![
            sample_docs(),
            vec![doc("x", &[0x00ab_cdef], 5, 0, Stamp::default())],
            Vec::new(),
            big,
        ];
        let dir = tempfile::tempdir().unwrap();
        let root = IndexDir::open(dir.path()).unwrap();
        let mut opened = Vec::new();
        for (i, docs) in parts.iter().enumerate() {
            let (bytes, crc) = encode(docs);
            root.write_durably(&format!("part{i}"), &bytes).unwrap();
            opened.push(Segment::open(&root, &format!("part{i}"), crc).unwrap());
        }
        let refs: Vec<&Segment> = opened.iter().collect();
        let all: Vec<DocTrigrams> = parts.into_iter().flatten().collect();
        let (whole, whole_crc) = encode(&all);
        // One thread and one block, and lists spread over threads in blocks of one list or a
        // few: the blocks are written in dictionary order whoever encoded them.
        for (threads, block_bytes) in [(1, 256 << 10), (2, 1), (3, 1), (2, 40), (4, 300)] {
            let config = MergeConfig {
                threads,
                block_bytes,
            };
            let mut streamed = Vec::new();
            let (crc, n_docs) = super::write_concatenated(&refs, &mut streamed, config).unwrap();
            assert_eq!(n_docs as usize, all.len());
            assert_eq!(
                (crc, streamed.len()),
                (whole_crc, whole.len()),
                "{config:?}"
            );
            assert!(
                streamed == whole,
                "the streamed segment differs from the whole encoding: {config:?}"
            );
        }
    }

    #[test]
    fn an_empty_segment_opens_and_holds_nothing() {
        let (bytes, crc) = encode(&[]);
        assert_eq!(bytes.len(), HEADER + 4 + 4, "header, one path offset, crc");
        let seg = open_bytes(&bytes, crc).unwrap();
        assert_eq!(seg.n_docs(), 0);
        assert_eq!(seg.count(B), 0);
        assert!(seg.postings(B).is_empty());
        assert_eq!(seg.pairs().count(), 0);
    }

    #[test]
    fn a_flipped_byte_anywhere_is_corrupt() {
        let (bytes, crc) = encode(&sample_docs());
        // Every byte: the magic, the header, the paths, the metas, the dictionary, the postings
        // and the crc itself.
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            assert_corrupt(open_bytes(&damaged, crc), &format!("byte {at} flipped"));
        }
    }

    #[test]
    fn a_byte_written_after_the_commit_is_caught_though_the_scan_is_skipped_when_untouched() {
        let (bytes, crc) = encode(&sample_docs());
        let dir = tempfile::tempdir().unwrap();
        let root = IndexDir::open(dir.path()).unwrap();
        root.write_durably("seg", &bytes).unwrap();
        let identity = crate::manifest::SegmentEntry::identity_of(root.stamp("seg").unwrap());
        // Untouched: opens with the recorded identity.
        assert!(Segment::open_committed(&root, "seg", crc, Some(identity)).is_ok());
        // Any later write changes the identity (ctime at least), so the scan runs and fails.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut damaged = bytes.clone();
        damaged[HEADER + 2] ^= 0x20;
        std::fs::write(dir.path().join("seg"), &damaged).unwrap();
        assert_corrupt(
            Segment::open_committed(&root, "seg", crc, Some(identity)),
            "a byte flipped after the commit",
        );
    }

    #[test]
    fn a_truncated_file_is_corrupt() {
        let (bytes, crc) = encode(&sample_docs());
        for len in [
            0,
            1,
            8,
            HEADER,
            HEADER + 3,
            HEADER + 4,
            bytes.len() - 4,
            bytes.len() - 1,
        ] {
            assert_corrupt(
                open_bytes(&bytes[..len], crc),
                &format!("truncated to {len} bytes"),
            );
        }
        // Bytes appended after the crc are damage too.
        let mut longer = bytes.clone();
        longer.push(0);
        assert_corrupt(open_bytes(&longer, crc), "one byte appended");
    }

    #[test]
    fn a_crc_other_than_the_manifests_is_corrupt() {
        let (bytes, crc) = encode(&sample_docs());
        assert!(open_bytes(&bytes, crc).is_ok());
        assert_corrupt(open_bytes(&bytes, crc ^ 1), "wrong expected crc");
        assert_corrupt(open_bytes(&bytes, 0), "zero expected crc");
    }

    #[test]
    fn a_wrong_magic_is_corrupt_even_with_a_matching_crc() {
        let (bytes, _) = encode(&sample_docs());
        for magic in [b"RSIDX\0\0\x03", b"RSIDX\0\0\x05", b"\0\0\0\0\0\0\0\0"] {
            let mut other = bytes.clone();
            other[..8].copy_from_slice(magic);
            let crc = recrc(&mut other);
            assert_corrupt(open_bytes(&other, crc), &format!("magic {magic:?}"));
        }
    }

    #[test]
    fn a_path_of_invalid_utf8_is_corrupt_even_with_a_matching_crc() {
        let (mut bytes, _) = encode(&[doc("ab", &[B], 1, 0, Stamp::default())]);
        // The path bytes follow the header and the two path offsets.
        let at = HEADER + 8;
        assert_eq!(&bytes[at..at + 2], b"ab");
        bytes[at] = 0xff;
        let crc = recrc(&mut bytes);
        assert_corrupt(open_bytes(&bytes, crc), "invalid UTF-8 path");
    }

    #[test]
    fn a_path_boundary_inside_a_character_is_corrupt_even_with_a_matching_crc() {
        // Two paths whose text is valid UTF-8 as a whole: moving the boundary between them into
        // the middle of `é` leaves each path invalid on its own.
        let (mut bytes, _) = encode(&[
            doc("a\u{e9}", &[B], 1, 0, Stamp::default()),
            doc("b", &[B], 1, 0, Stamp::default()),
        ]);
        // The path offsets follow the header: 0, end of the first path, end of the second.
        let at = HEADER + 4;
        assert_eq!(super::u32_at(&bytes, at), 3);
        bytes[at..at + 4].copy_from_slice(&2u32.to_le_bytes());
        let crc = recrc(&mut bytes);
        assert_corrupt(open_bytes(&bytes, crc), "a boundary inside a character");
    }

    #[test]
    fn header_fields_out_of_bounds_are_corrupt_even_with_a_matching_crc() {
        // The crc guards against damage, not against a file written by something else: a header
        // whose counts or offsets point anywhere must be refused, never panic or read past the
        // map.
        let (bytes, _) = encode(&sample_docs());
        let mut wrong = Vec::new();
        for field in [8usize, 12, 16, 24, 32] {
            let width = if field < 16 { 4 } else { 8 };
            for value in [u64::MAX, u64::from(u32::MAX), bytes.len() as u64, 1] {
                let mut other = bytes.clone();
                other[field..field + width].copy_from_slice(&value.to_le_bytes()[..width]);
                if other == bytes {
                    continue;
                }
                let crc = recrc(&mut other);
                let opened = std::panic::catch_unwind(|| open_bytes(&other, crc).map(|_| ()));
                if !matches!(opened, Ok(Err(SegmentError::Corrupt))) {
                    let got = match opened {
                        Err(_) => "a panic".to_owned(),
                        Ok(r) => format!("{r:?}"),
                    };
                    wrong.push(format!("field at {field} = {value:#x}: {got}"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "not refused as Corrupt:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn a_meta_is_exactly_34_bytes_after_the_paths() {
        // The layout the module docs promise: prior, flags, then four little-endian u64s.
        let stamp = Stamp {
            len: 0x0102_0304_0506_0708,
            mtime_ns: 2,
            ctime_ns: 3,
            ino: 4,
        };
        let (bytes, _) = encode(&[doc("p", &[], 200, flags::RACY, stamp)]);
        let meta_at = HEADER + 8 + 1;
        let meta = &bytes[meta_at..meta_at + META];
        assert_eq!(meta[..2], [200, flags::RACY]);
        assert_eq!(meta[2..10], 0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(meta[26..34], 4u64.to_le_bytes());
    }
}
