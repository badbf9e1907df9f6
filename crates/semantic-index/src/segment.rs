//! One immutable segment file of the [`crate::Store`]: a batch of files with their chunks, the
//! chunks' int8 static vectors and the BM25 postings of their terms, memory-mapped.
//!
//! Layout (little-endian): the magic, four counts, eight section offsets, then the sections:
//!
//! | section | content |
//! | --- | --- |
//! | files | per file 28 bytes: path offset and length (into strings), version, first chunk, chunk count, path prior (f32) |
//! | chunks | per chunk 44 bytes: file, first line, last line, snippet line, snippet offset and length, BM25 length, the first 16 bytes of its hash (the sha256 of its path and text, `crate::searched_text`) |
//! | strings | paths and snippets, back to back |
//! | dense | per chunk `dim` int8 values |
//! | scales | per chunk one f32: `v[i] ≈ q[i] · scale` |
//! | dictionary | the terms in byte order, in blocks of [`TERMS_PER_BLOCK`]: first one u32 per block (where its entries start, after this index), then per term the varints shared prefix length (0 at a block's head), suffix length, the suffix, and its postings offset (absolute at a block's head, else from the previous term's) |
//! | postings | per term, a varint count, then varint pairs (chunk or file id delta, term frequency) |
//!
//! The dictionary is front-coded because Linux has about seven million distinct terms (most of
//! them identifiers that occur once): fixed 16-byte rows and whole strings made it the largest
//! part of the store after the vectors. A lookup binary-searches the block heads and decodes one
//! block. Sixteen bytes of a chunk's sha256 are enough to reuse a vector by content: a collision
//! needs about 2^64 chunks.
//!
//! Terms live in three name spaces: a chunk's BM25 sub-tokens as they are, the sub-tokens of the
//! names its definition lines introduce behind [`DEFINITION`], and the sub-tokens of a file's name
//! behind [`FILE_NAME`] (those postings name files, not chunks). The file is checked whole by the
//! crc32 the manifest records before it is used; a segment is never rewritten once committed.

use std::collections::HashMap;

use index_storage::{IndexDir, Mmap, put_varint, read_varint};

use crate::store::error::StoreError;

const MAGIC: &[u8; 8] = b"RSSEMSG2";
const HEADER: usize = 8 + 4 * 4 + 8 * 8;
/// A segment larger than this is damage: refused by its size before it is mapped or checksummed.
/// Its string offsets are u32, and a catch-up writes a segment every 120 000 chunks (a few
/// hundred megabytes at most).
pub(crate) const MAX_SEGMENT_BYTES: u64 = 4 << 30;
const FILE_ROW: usize = 28;
const CHUNK_ROW: usize = 44;
/// Terms per front-coded block of the dictionary.
const TERMS_PER_BLOCK: usize = 16;
/// The bytes of a chunk's sha256 a segment keeps ([`crate::StoreHit::chunk_hash`]).
pub const HASH_BYTES: usize = 16;

/// The prefix of a definition-name term.
pub(crate) const DEFINITION: char = '\u{1}';
/// The prefix of a file-name term.
pub(crate) const FILE_NAME: char = '\u{2}';

/// The part of a chunk's sha256 a segment keeps: the key by which vectors are reused.
pub(crate) fn stored_hash(hash: &[u8; 32]) -> [u8; HASH_BYTES] {
    let mut short = [0; HASH_BYTES];
    short.copy_from_slice(&hash[..HASH_BYTES]);
    short
}

/// A file ready to be written: its chunks, each with everything a query reads.
pub(crate) struct FileData {
    pub(crate) path: String,
    pub(crate) version: u64,
    pub(crate) prior: f32,
    pub(crate) chunks: Vec<ChunkData>,
}

/// A chunk ready to be written.
pub(crate) struct ChunkData {
    pub(crate) start_line: u32,
    pub(crate) end_line: u32,
    /// The chunk's first non-blank line (its number and text): what a hit shows.
    pub(crate) snippet_line: u32,
    pub(crate) snippet: String,
    pub(crate) hash: [u8; 32],
    /// The number of BM25 terms in the chunk.
    pub(crate) length: u32,
    /// Distinct BM25 terms with their frequencies, and definition-name terms (prefixed).
    pub(crate) terms: Vec<(String, u32)>,
    pub(crate) vector: Vec<i8>,
    pub(crate) scale: f32,
}

/// One file of a segment.
pub(crate) struct FileRow<'a> {
    pub(crate) path: &'a str,
    pub(crate) version: u64,
}

/// One chunk of a segment.
pub(crate) struct ChunkRow<'a> {
    pub(crate) snippet_line: u32,
    pub(crate) snippet: &'a str,
}

/// Serialises `files` as a segment of `dim`-wide vectors.
pub(crate) fn encode(files: &[FileData], dim: usize) -> Vec<u8> {
    let n_chunks: usize = files.iter().map(|f| f.chunks.len()).sum();
    let mut strings: Vec<u8> = Vec::new();
    let mut put = |s: &str| {
        let at = strings.len() as u32;
        strings.extend_from_slice(s.as_bytes());
        (at, s.len() as u32)
    };
    let mut file_rows = Vec::with_capacity(files.len() * FILE_ROW);
    let mut chunk_rows = Vec::with_capacity(n_chunks * CHUNK_ROW);
    let mut dense = Vec::with_capacity(n_chunks * dim);
    let mut scales = Vec::with_capacity(n_chunks * 4);
    let mut postings: HashMap<&str, Vec<(u32, u32)>> = HashMap::new();
    let mut words: Vec<(u32, Vec<String>)> = Vec::new();
    let mut chunk_id = 0u32;
    for (fi, f) in files.iter().enumerate() {
        let (off, len) = put(&f.path);
        file_rows.extend_from_slice(&off.to_le_bytes());
        file_rows.extend_from_slice(&len.to_le_bytes());
        file_rows.extend_from_slice(&f.version.to_le_bytes());
        file_rows.extend_from_slice(&chunk_id.to_le_bytes());
        file_rows.extend_from_slice(&(f.chunks.len() as u32).to_le_bytes());
        file_rows.extend_from_slice(&f.prior.to_le_bytes());
        words.push((fi as u32, file_words(&f.path)));
        for c in &f.chunks {
            let (soff, slen) = put(&c.snippet);
            for v in [
                fi as u32,
                c.start_line,
                c.end_line,
                c.snippet_line,
                soff,
                slen,
                c.length,
            ] {
                chunk_rows.extend_from_slice(&v.to_le_bytes());
            }
            chunk_rows.extend_from_slice(&c.hash[..HASH_BYTES]);
            dense.extend(c.vector.iter().map(|&x| x as u8));
            scales.extend_from_slice(&c.scale.to_le_bytes());
            for (t, tf) in &c.terms {
                postings
                    .entry(t.as_str())
                    .or_default()
                    .push((chunk_id, *tf));
            }
            chunk_id += 1;
        }
    }
    let file_terms: Vec<(u32, String)> = words
        .into_iter()
        .flat_map(|(fi, ws)| ws.into_iter().map(move |w| (fi, format!("{FILE_NAME}{w}"))))
        .collect();
    for (fi, t) in &file_terms {
        let list = postings.entry(t.as_str()).or_default();
        if list.last().is_none_or(|&(id, _)| id != *fi) {
            list.push((*fi, 1));
        }
    }
    let mut terms: Vec<(&str, Vec<(u32, u32)>)> = postings.into_iter().collect();
    terms.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut heads = Vec::with_capacity(terms.len().div_ceil(TERMS_PER_BLOCK) * 4);
    let mut entries = Vec::new();
    let mut post = Vec::new();
    let (mut previous, mut previous_at): (&[u8], u32) = (&[], 0);
    for (i, (t, list)) in terms.iter().enumerate() {
        let t = t.as_bytes();
        let at = post.len() as u32;
        if i % TERMS_PER_BLOCK == 0 {
            heads.extend_from_slice(&(entries.len() as u32).to_le_bytes());
            put_varint(&mut entries, 0);
            put_varint(&mut entries, t.len() as u32);
            entries.extend_from_slice(t);
            put_varint(&mut entries, at);
        } else {
            let shared = previous.iter().zip(t).take_while(|(a, b)| a == b).count();
            put_varint(&mut entries, shared as u32);
            put_varint(&mut entries, (t.len() - shared) as u32);
            entries.extend_from_slice(&t[shared..]);
            put_varint(&mut entries, at - previous_at);
        }
        (previous, previous_at) = (t, at);
        put_varint(&mut post, list.len() as u32);
        let mut last = 0u32;
        for &(id, tf) in list {
            put_varint(&mut post, id - last);
            put_varint(&mut post, tf);
            last = id;
        }
    }
    let mut dict = heads;
    dict.extend_from_slice(&entries);
    let mut out = Vec::with_capacity(
        HEADER
            + file_rows.len()
            + chunk_rows.len()
            + strings.len()
            + dense.len()
            + scales.len()
            + dict.len()
            + post.len(),
    );
    out.extend_from_slice(MAGIC);
    for n in [files.len(), n_chunks, dim, terms.len()] {
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    let sections = [
        &file_rows,
        &chunk_rows,
        &strings,
        &dense,
        &scales,
        &dict,
        &post,
    ];
    let mut at = HEADER as u64;
    for s in sections {
        out.extend_from_slice(&at.to_le_bytes());
        at += s.len() as u64;
    }
    out.extend_from_slice(&at.to_le_bytes());
    for s in sections {
        out.extend_from_slice(s);
    }
    out
}

/// The sub-tokens of a file's name without its extensions, in the form the file-name boost
/// matches them ([`crate::text::name_stem`]).
pub(crate) fn file_words(path: &str) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    let mut words: Vec<String> = crate::text::sub_tokens(stem)
        .iter()
        .map(|w| crate::text::name_stem(w))
        .collect();
    words.sort();
    words.dedup();
    words
}

/// A committed segment, mapped and checked.
pub(crate) struct Segment {
    map: Mmap,
    pub(crate) n_files: u32,
    pub(crate) n_chunks: u32,
    pub(crate) dim: usize,
    n_terms: u32,
    /// Section starts: files, chunks, strings, dense, scales, dictionary, postings, end.
    at: [usize; 8],
    /// Per chunk, its BM25 length: read from the rows once, at open, not by every query.
    lengths: Vec<f32>,
}

impl Segment {
    /// Maps the file `name` of `dir` and checks it against the manifest's `crc32`, its magic and
    /// its layout. It is opened as every index file is (a regular file, no symlink followed), its
    /// size is checked first ([`MAX_SEGMENT_BYTES`]), then its header against that size, and only
    /// then its checksum, read through one small buffer: a damaged segment of any size costs no
    /// memory for its size.
    pub(crate) fn open(dir: &IndexDir, name: &str, crc32: u32) -> Result<Segment, StoreError> {
        let mapped = dir
            .map(name, HEADER as u64..=MAX_SEGMENT_BYTES)
            .map_err(StoreError::file(dir, name))?;
        let (map, len) = (&mapped.map, mapped.stamp.len);
        if &map[..8] != MAGIC {
            return Err(StoreError::Corrupt);
        }
        let u32_at = |i: usize| u32::from_le_bytes([map[i], map[i + 1], map[i + 2], map[i + 3]]);
        let (n_files, n_chunks, dim, n_terms) = (u32_at(8), u32_at(12), u32_at(16), u32_at(20));
        let mut at = [0usize; 8];
        for (k, slot) in at.iter_mut().enumerate() {
            let i = 24 + 8 * k;
            let mut b = [0u8; 8];
            b.copy_from_slice(&map[i..i + 8]);
            *slot = u64::from_le_bytes(b) as usize;
        }
        let (nf, nc, nt, d) = (
            n_files as usize,
            n_chunks as usize,
            n_terms as usize,
            dim as usize,
        );
        let sizes_fit = at[0] == HEADER
            && at.windows(2).all(|w| w[0] <= w[1])
            && at[7] == map.len()
            && at[1] - at[0] == nf * FILE_ROW
            && at[2] - at[1] == nc * CHUNK_ROW
            && at[4] - at[3] == nc * d
            && at[5] - at[4] == nc * 4
            && at[6] - at[5] >= nt.div_ceil(TERMS_PER_BLOCK) * 4
            && d > 0;
        if !sizes_fit {
            return Err(StoreError::Corrupt);
        }
        if mapped.crc32(len).map_err(StoreError::file(dir, name))? != crc32 {
            return Err(StoreError::Corrupt);
        }
        // Rows that point past their tables are damage: a query indexes by them unchecked.
        let mut next_chunk = 0u64;
        for f in 0..nf {
            let r = at[0] + f * FILE_ROW;
            let (first, count) = (u32_at(r + 16), u32_at(r + 20));
            if u64::from(first) != next_chunk {
                return Err(StoreError::Corrupt);
            }
            next_chunk += u64::from(count);
        }
        let files_of_chunks_fit = next_chunk == nc as u64
            && (0..nc).all(|c| (u32_at(at[1] + c * CHUNK_ROW) as usize) < nf);
        if !files_of_chunks_fit {
            return Err(StoreError::Corrupt);
        }
        let lengths = (0..nc)
            .map(|c| u32_at(at[1] + c * CHUNK_ROW + 24) as f32)
            .collect();
        Ok(Segment {
            map: mapped.map,
            n_files,
            n_chunks,
            dim: d,
            n_terms,
            at,
            lengths,
        })
    }

    fn u32_at(&self, i: usize) -> u32 {
        let b = &self.map[i..i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn string(&self, off: u32, len: u32) -> &str {
        std::str::from_utf8(self.bytes(off, len)).unwrap_or_default()
    }

    fn bytes(&self, off: u32, len: u32) -> &[u8] {
        let start = self.at[2] + off as usize;
        self.map
            .get(start..start + len as usize)
            .unwrap_or_default()
    }

    /// A file's path as its bytes, not checked to be UTF-8: for a pass over every path that
    /// looks for ASCII alone.
    pub(crate) fn path_bytes(&self, i: u32) -> &[u8] {
        let r = self.at[0] + i as usize * FILE_ROW;
        self.bytes(self.u32_at(r), self.u32_at(r + 4))
    }

    /// A file's first chunk, chunk count and path prior, without reading its path.
    pub(crate) fn file_chunks(&self, i: u32) -> (u32, u32, f32) {
        let r = self.at[0] + i as usize * FILE_ROW;
        (
            self.u32_at(r + 16),
            self.u32_at(r + 20),
            f32::from_bits(self.u32_at(r + 24)),
        )
    }

    pub(crate) fn file(&self, i: u32) -> FileRow<'_> {
        let r = self.at[0] + i as usize * FILE_ROW;
        let mut v = [0u8; 8];
        v.copy_from_slice(&self.map[r + 8..r + 16]);
        FileRow {
            path: self.string(self.u32_at(r), self.u32_at(r + 4)),
            version: u64::from_le_bytes(v),
        }
    }

    pub(crate) fn chunk(&self, i: u32) -> ChunkRow<'_> {
        let r = self.at[1] + i as usize * CHUNK_ROW;
        ChunkRow {
            snippet_line: self.u32_at(r + 12),
            snippet: self.string(self.u32_at(r + 16), self.u32_at(r + 20)),
        }
    }

    /// The file a chunk belongs to (the hot path of a query: no copy of the row).
    pub(crate) fn chunk_file(&self, i: u32) -> u32 {
        self.u32_at(self.at[1] + i as usize * CHUNK_ROW)
    }

    /// Every chunk's BM25 length, by chunk id.
    pub(crate) fn lengths(&self) -> &[f32] {
        &self.lengths
    }

    /// A chunk's BM25 length.
    pub(crate) fn chunk_length(&self, i: u32) -> u32 {
        self.u32_at(self.at[1] + i as usize * CHUNK_ROW + 24)
    }

    /// A chunk's content hash.
    pub(crate) fn chunk_hash(&self, i: u32) -> &[u8] {
        let r = self.at[1] + i as usize * CHUNK_ROW + 28;
        &self.map[r..r + HASH_BYTES]
    }

    /// The whole int8 matrix, row-major.
    pub(crate) fn dense(&self) -> &[u8] {
        &self.map[self.at[3]..self.at[4]]
    }

    /// The scales of `count` chunks from `first` on, as the segment holds them: a little-endian
    /// f32 each.
    pub(crate) fn scales(&self, first: u32, count: usize) -> &[u8] {
        let start = self.at[4] + first as usize * 4;
        &self.map[start..start + count * 4]
    }

    pub(crate) fn scale(&self, chunk: u32) -> f32 {
        f32::from_bits(self.u32_at(self.at[4] + chunk as usize * 4))
    }

    /// The int8 vector and scale of a chunk.
    pub(crate) fn vector(&self, chunk: u32) -> (Vec<i8>, f32) {
        let row = &self.dense()[chunk as usize * self.dim..(chunk as usize + 1) * self.dim];
        (row.iter().map(|&b| b as i8).collect(), self.scale(chunk))
    }

    /// The postings of `term`: (chunk or file id, term frequency), ids ascending.
    pub(crate) fn postings(&self, term: &str) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        if let Some(list) = self.lookup(term) {
            out.reserve(list.1 as usize);
            self.each_posting(list, |id, tf| out.push((id, tf)));
        }
        out
    }

    /// Where the postings of `term` start (past their count), and how many there are (ids of
    /// deleted files included).
    pub(crate) fn lookup(&self, term: &str) -> Option<(usize, u32)> {
        let term = term.as_bytes();
        let blocks = (self.n_terms as usize).div_ceil(TERMS_PER_BLOCK);
        let entries = self.at[5] + blocks * 4;
        let block_at = |b: usize| entries + self.u32_at(self.at[5] + b * 4) as usize;
        // The last block whose head is at most `term`.
        let (mut lo, mut hi) = (0usize, blocks);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let mut at = block_at(mid);
            let (_, len) = (self.varint(&mut at)?, self.varint(&mut at)? as usize);
            let head = self.map.get(at..at + len)?;
            if head <= term {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let block = lo.checked_sub(1)?;
        let mut at = block_at(block);
        let mut current: Vec<u8> = Vec::new();
        let mut postings = 0usize;
        let first = block * TERMS_PER_BLOCK;
        for i in first..(first + TERMS_PER_BLOCK).min(self.n_terms as usize) {
            let shared = self.varint(&mut at)? as usize;
            let len = self.varint(&mut at)? as usize;
            current.truncate(shared);
            current.extend_from_slice(self.map.get(at..at + len)?);
            at += len;
            let offset = self.varint(&mut at)? as usize;
            postings = if i == first {
                offset
            } else {
                postings + offset
            };
            match current.as_slice().cmp(term) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    let mut list = self.at[6] + postings;
                    let count = self.varint(&mut list)?;
                    // Each posting takes at least two bytes: a larger count is damage, and
                    // would make a caller reserve room for it.
                    let room = self.at[7].checked_sub(list)? / 2;
                    return (count as usize <= room).then_some((list, count));
                }
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }

    /// The varint at `at` (moved past it), or `None` past the end of the map.
    fn varint(&self, at: &mut usize) -> Option<u32> {
        read_varint(&self.map, at)
    }

    /// Calls `f(id, term frequency)` for each posting of a list [`Segment::lookup`] found,
    /// decoding in place.
    pub(crate) fn each_posting(&self, (mut at, count): (usize, u32), mut f: impl FnMut(u32, u32)) {
        let mut id = 0u32;
        for _ in 0..count {
            let (Some(delta), Some(tf)) = (self.varint(&mut at), self.varint(&mut at)) else {
                // A list running past the map: what was decoded stands (the crc held, so only
                // a writer's bug gets here).
                return;
            };
            id = id.wrapping_add(delta);
            f(id, tf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_coded_dictionary_finds_every_term_and_no_other() {
        // Terms with long shared prefixes, across many blocks, with a one-term last block.
        let mut words: Vec<String> = (0..16 * 9 + 1)
            .map(|i| format!("alloc{}page{}", i % 13, i))
            .collect();
        words.extend(["a", "b", "zz", "ünïcode", "\u{1}allocpage", "\u{2}mm"].map(str::to_owned));
        let files: Vec<FileData> = words
            .iter()
            .enumerate()
            .map(|(i, w)| FileData {
                path: format!("f{i}.c"),
                version: 1,
                prior: 0.5,
                chunks: vec![ChunkData {
                    start_line: 1,
                    end_line: 1,
                    snippet_line: 1,
                    snippet: w.clone(),
                    hash: [i as u8; 32],
                    length: 2,
                    terms: vec![(w.clone(), 1 + i as u32 % 3), ("common".to_owned(), 1)],
                    vector: vec![1, -1, 0, 2],
                    scale: 0.5,
                }],
            })
            .collect();
        let bytes = encode(&files, 4);
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = IndexDir::open(tmp.path()).expect("opens");
        dir.write_durably("seg", &bytes).expect("write");
        let seg = Segment::open(&dir, "seg", crc32fast::hash(&bytes)).expect("opens");
        for (i, w) in words.iter().enumerate() {
            assert_eq!(seg.postings(w), vec![(i as u32, 1 + i as u32 % 3)], "{w:?}");
            assert_eq!(seg.chunk_hash(i as u32), &[i as u8; HASH_BYTES]);
        }
        let common = seg.postings("common");
        assert_eq!(common.len(), words.len());
        assert!(common.iter().enumerate().all(|(i, &p)| p == (i as u32, 1)));
        for absent in [
            "",
            "0",
            "alloc",
            "alloc0page",
            "alloc12page999",
            "zzz",
            "\u{0}",
            "ü",
        ] {
            assert_eq!(seg.lookup(absent), None, "{absent:?}");
        }
    }
}
