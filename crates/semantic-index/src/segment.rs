//! One immutable segment file of the [`crate::Store`]: a batch of files with their chunks, the
//! chunks' int8 static vectors and the BM25 postings of their terms, memory-mapped.
//!
//! Layout (little-endian): the magic, four counts, eight section offsets, then the sections:
//!
//! | section | content |
//! | --- | --- |
//! | files | per file 28 bytes: path offset and length (into strings), version, first chunk, chunk count, path prior (f32) |
//! | chunks | per chunk 64 bytes: file, first line, last line, snippet line, snippet offset and length, BM25 length, 0, sha256 |
//! | strings | paths, snippets and terms, back to back |
//! | dense | per chunk `dim` int8 values |
//! | scales | per chunk one f32: `v[i] ≈ q[i] · scale` |
//! | dictionary | per term 16 bytes, terms in byte order: term offset and length, postings offset and count |
//! | postings | per term, varint pairs (chunk or file id delta, term frequency) |
//!
//! Terms live in three name spaces: a chunk's BM25 sub-tokens as they are, the sub-tokens of the
//! names its definition lines introduce behind [`DEFINITION`], and the sub-tokens of a file's name
//! behind [`FILE_NAME`] (those postings name files, not chunks). The file is checked whole by the
//! crc32 the manifest records before it is used; a segment is never rewritten once committed.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::StoreError;

const MAGIC: &[u8; 8] = b"RSSEMSG1";
const HEADER: usize = 8 + 4 * 4 + 8 * 8;
const FILE_ROW: usize = 28;
const CHUNK_ROW: usize = 64;
const TERM_ROW: usize = 16;

/// The prefix of a definition-name term.
pub(crate) const DEFINITION: char = '\u{1}';
/// The prefix of a file-name term.
pub(crate) const FILE_NAME: char = '\u{2}';

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
    pub(crate) first_chunk: u32,
    pub(crate) chunks: u32,
    pub(crate) prior: f32,
}

/// One chunk of a segment.
pub(crate) struct ChunkRow<'a> {
    pub(crate) file: u32,
    pub(crate) snippet_line: u32,
    pub(crate) snippet: &'a str,
    pub(crate) length: u32,
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
                0,
            ] {
                chunk_rows.extend_from_slice(&v.to_le_bytes());
            }
            chunk_rows.extend_from_slice(&c.hash);
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
    let mut dict = Vec::with_capacity(terms.len() * TERM_ROW);
    let mut post = Vec::new();
    for (t, list) in &terms {
        let (off, len) = put(t);
        dict.extend_from_slice(&off.to_le_bytes());
        dict.extend_from_slice(&len.to_le_bytes());
        dict.extend_from_slice(&(post.len() as u32).to_le_bytes());
        dict.extend_from_slice(&(list.len() as u32).to_le_bytes());
        let mut last = 0u32;
        for &(id, tf) in list {
            varint(&mut post, id - last);
            varint(&mut post, tf);
            last = id;
        }
    }
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

/// The sub-tokens of a file's name without its extensions, as the file-name boost reads them.
pub(crate) fn file_words(path: &str) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    let mut words = crate::text::sub_tokens(stem);
    words.sort();
    words.dedup();
    words
}

fn varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
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
}

impl Segment {
    /// Maps `path` and checks it against the manifest's `crc32`, its magic and its layout.
    pub(crate) fn open(path: &Path, crc32: u32) -> Result<Segment, StoreError> {
        let file = File::open(path).map_err(StoreError::io(path))?;
        // SAFETY: segment files are written under a fresh name, fsynced and only then named by a
        // manifest; nothing writes to one afterwards, and they are deleted (never truncated) once
        // no manifest names them, which leaves an existing map intact.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(&file) }.map_err(StoreError::io(path))?;
        if crc32fast::hash(&map) != crc32 || map.len() < HEADER || &map[..8] != MAGIC {
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
            && at[6] - at[5] == nt * TERM_ROW;
        if !sizes_fit {
            return Err(StoreError::Corrupt);
        }
        Ok(Segment {
            map,
            n_files,
            n_chunks,
            dim: d,
            n_terms,
            at,
        })
    }

    fn u32_at(&self, i: usize) -> u32 {
        let b = &self.map[i..i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn string(&self, off: u32, len: u32) -> &str {
        let start = self.at[2] + off as usize;
        std::str::from_utf8(
            self.map
                .get(start..start + len as usize)
                .unwrap_or_default(),
        )
        .unwrap_or_default()
    }

    pub(crate) fn file(&self, i: u32) -> FileRow<'_> {
        let r = self.at[0] + i as usize * FILE_ROW;
        let mut v = [0u8; 8];
        v.copy_from_slice(&self.map[r + 8..r + 16]);
        FileRow {
            path: self.string(self.u32_at(r), self.u32_at(r + 4)),
            version: u64::from_le_bytes(v),
            first_chunk: self.u32_at(r + 16),
            chunks: self.u32_at(r + 20),
            prior: f32::from_bits(self.u32_at(r + 24)),
        }
    }

    pub(crate) fn chunk(&self, i: u32) -> ChunkRow<'_> {
        let r = self.at[1] + i as usize * CHUNK_ROW;
        ChunkRow {
            file: self.u32_at(r),
            snippet_line: self.u32_at(r + 12),
            snippet: self.string(self.u32_at(r + 16), self.u32_at(r + 20)),
            length: self.u32_at(r + 24),
        }
    }

    /// The file a chunk belongs to (the hot path of a query: no copy of the row).
    pub(crate) fn chunk_file(&self, i: u32) -> u32 {
        self.u32_at(self.at[1] + i as usize * CHUNK_ROW)
    }

    /// A chunk's BM25 length.
    pub(crate) fn chunk_length(&self, i: u32) -> u32 {
        self.u32_at(self.at[1] + i as usize * CHUNK_ROW + 24)
    }

    /// A chunk's content hash.
    pub(crate) fn chunk_hash(&self, i: u32) -> &[u8] {
        let r = self.at[1] + i as usize * CHUNK_ROW;
        &self.map[r + 32..r + 64]
    }

    /// The whole int8 matrix, row-major.
    pub(crate) fn dense(&self) -> &[u8] {
        &self.map[self.at[3]..self.at[4]]
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
        let (mut lo, mut hi) = (0usize, self.n_terms as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let r = self.at[5] + mid * TERM_ROW;
            let t = self.string(self.u32_at(r), self.u32_at(r + 4));
            match t.as_bytes().cmp(term.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let (off, count) = (self.u32_at(r + 8), self.u32_at(r + 12));
                    return self.decode(self.at[6] + off as usize, count);
                }
            }
        }
        Vec::new()
    }

    fn decode(&self, mut at: usize, count: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::with_capacity(count as usize);
        let end = self.at[7];
        let mut next = || {
            let mut v = 0u32;
            let mut shift = 0;
            while at < end {
                let b = self.map[at];
                at += 1;
                v |= u32::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    break;
                }
                shift += 7;
            }
            v
        };
        let mut id = 0u32;
        for _ in 0..count {
            id = id.wrapping_add(next());
            let tf = next();
            out.push((id, tf));
        }
        out
    }
}
