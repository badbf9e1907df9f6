//! Writing the store's files: reading, chunking and embedding files (vectors reused by content
//! hash), the IDF table, and segments of bounded size under names unique to the writer.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use index_storage::{IndexDir, unique_name_part};

use crate::chunk::{chunk_file, searched_text};
use crate::rank::quantize;
use crate::segment::{ChunkData, DEFINITION, FileData, HASH_BYTES, Segment, encode, stored_hash};
use crate::statics::StaticModel;
use crate::text::sub_tokens;

use super::error::StoreError;
use super::manifest::{FORMAT, Manifest, SegmentEntry};

/// The IDF table is computed over the chunks of at most this many files.
pub const IDF_SAMPLE_FILES: usize = 4000;
/// A build or an update writes a segment each time this many chunks have accumulated, which
/// bounds its memory (small in unit tests, so that they cross the bound).
pub(super) const CHUNKS_PER_SEGMENT: usize = if cfg!(test) { 40 } else { 120_000 };
/// Files read, chunked and embedded between two checks of the pending segment's size.
pub(super) const FILES_PER_BATCH: usize = if cfg!(test) { 8 } else { 2000 };
/// Files larger than this are kept without chunks: generated tables and blobs, not prose or code
/// anyone describes.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Snippets are cut (on a character boundary) at this many bytes when stored.
const SNIPPET_BYTES: usize = 512;

/// One file of the trigram index's snapshot, as the store keeps pace with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Repo-relative path.
    pub path: String,
    /// Changes whenever the trigram index read the file again (a digest of its stamp).
    pub version: u64,
    /// The trigram index's path prior, in `(0, 1]`.
    pub prior: f32,
}

/// What [`Store::catch_up`](super::Store::catch_up) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Whether everything was rebuilt (no store, damage, another model, the IDF rule).
    pub rebuilt: bool,
    /// Files read and chunked.
    pub files_read: usize,
    /// Files dropped.
    pub removed: usize,
    /// Chunks written.
    pub chunks: usize,
    /// Chunks whose static vector was computed (the others' content hash was already held).
    pub embedded: usize,
}

/// Token ids of a text, piece by piece between whitespace, each piece cached: the tokenizer's
/// normaliser, pre-tokeniser and word-piece model never look across whitespace, so the ids are
/// the tokenizer's own (`cached_token_ids_are_the_tokenizers`), and code repeats its pieces.
pub(crate) struct TokenCache<'m> {
    statics: &'m StaticModel,
    pieces: HashMap<String, Vec<u32>>,
}

impl<'m> TokenCache<'m> {
    /// Pieces kept before the cache is emptied, which bounds its memory.
    const MAX_PIECES: usize = 400_000;

    pub(crate) fn new(statics: &'m StaticModel) -> Self {
        Self {
            statics,
            pieces: HashMap::new(),
        }
    }

    pub(crate) fn ids(&mut self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for piece in text.split_whitespace() {
            if !piece.bytes().all(|b| b.is_ascii_graphic()) {
                self.extend(piece, &mut out);
                continue;
            }
            // In ASCII the tokenizer's pre-tokeniser makes each punctuation character a word of
            // its own, and `for_embedding` only looks inside runs of letters and digits: so a
            // piece's ids are those of its runs and punctuation bytes, each tokenised alone.
            // Code repeats identifiers far more often than it repeats whole pieces
            // (`f->f_op->read(f,`), so these are what the cache keeps.
            let bytes = piece.as_bytes();
            let mut start = 0;
            while start < bytes.len() {
                let end = if bytes[start].is_ascii_alphanumeric() {
                    bytes[start..]
                        .iter()
                        .position(|b| !b.is_ascii_alphanumeric())
                        .map_or(bytes.len(), |n| start + n)
                } else {
                    start + 1
                };
                self.extend(&piece[start..end], &mut out);
                start = end;
            }
        }
        out
    }

    /// Appends the ids of `key`, a piece the tokenizer reads without looking beyond it.
    fn extend(&mut self, key: &str, out: &mut Vec<u32>) {
        if let Some(ids) = self.pieces.get(key) {
            out.extend_from_slice(ids);
            return;
        }
        let ids = self.statics.token_ids(key);
        out.extend_from_slice(&ids);
        if self.pieces.len() >= Self::MAX_PIECES {
            self.pieces.clear();
        }
        self.pieces.insert(key.to_owned(), ids);
    }
}

/// One token cache per core.
pub(super) fn token_caches(statics: &StaticModel) -> Vec<TokenCache<'_>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..threads).map(|_| TokenCache::new(statics)).collect()
}

/// Reads, chunks and embeds `files` on one thread per cache in `caches` (at most one per file);
/// chunks whose hash is in `known` take its vector. `embedded` counts the vectors computed.
fn prepare(
    statics: &StaticModel,
    idf: &[f32],
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    known: &HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)>,
    embedded: &AtomicUsize,
    caches: &mut [TokenCache],
) -> Vec<FileData> {
    let threads = caches.len().min(files.len()).max(1);
    let next = AtomicUsize::new(0);
    let top = (1.0 + (idf.len() as f32 + 0.5) / 0.5).ln();
    let mut out: Vec<(usize, FileData)> = std::thread::scope(|s| {
        let workers: Vec<_> = caches
            .iter_mut()
            .take(threads)
            .map(|cache| {
                let next = &next;
                s.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        let text = read(&f.path).filter(|t| t.len() <= MAX_FILE_BYTES);
                        let chunks = text.map_or_else(Vec::new, |t| {
                            chunk_data(&f.path, &t, |c| {
                                if let Some((seg, id)) = known.get(&stored_hash(&c.hash)) {
                                    return seg.vector(*id);
                                }
                                embedded.fetch_add(1, Ordering::Relaxed);
                                let ids = cache.ids(&searched_text(&c.path, &c.text));
                                quantize(&statics.embed_ids(&ids, |id| {
                                    idf.get(id as usize).copied().unwrap_or(top)
                                }))
                            })
                        });
                        done.push((
                            i,
                            FileData {
                                path: f.path.clone(),
                                version: f.version,
                                prior: f.prior,
                                chunks,
                            },
                        ));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            // A worker that panicked must not leave its files out of the store unnoticed.
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, f)| f).collect()
}

/// The content hashes of the chunks of `files` as they read now: a first, cheap pass over an
/// update, so that the store is searched for those hashes only.
pub(super) fn chunk_hashes(
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
) -> HashSet<[u8; HASH_BYTES]> {
    files
        .iter()
        .filter_map(|f| {
            read(&f.path)
                .filter(|t| t.len() <= MAX_FILE_BYTES)
                .map(|t| (f, t))
        })
        .flat_map(|(f, t)| {
            chunk_file(&f.path, &t)
                .into_iter()
                .map(|c| stored_hash(&c.hash))
        })
        .collect()
}

/// A file's chunks with their terms, snippets and vectors (`vector` gives a chunk's).
fn chunk_data(
    path: &str,
    text: &str,
    mut vector: impl FnMut(&crate::Chunk) -> (Vec<i8>, f32),
) -> Vec<ChunkData> {
    chunk_file(path, text)
        .into_iter()
        .map(|c| {
            let tokens = sub_tokens(&searched_text(path, &c.text));
            let mut counts: HashMap<String, u32> = HashMap::new();
            let length = tokens.len() as u32;
            for t in tokens {
                *counts.entry(t).or_default() += 1;
            }
            let mut terms: Vec<(String, u32)> = counts.into_iter().collect();
            // The names the chunker found (the syntax tree's, or the definition lines').
            let mut def: Vec<String> = c.defines.iter().flat_map(|d| sub_tokens(d)).collect();
            def.sort();
            def.dedup();
            terms.extend(def.into_iter().map(|d| (format!("{DEFINITION}{d}"), 1)));
            let (offset, first) = c
                .text
                .lines()
                .enumerate()
                .find(|(_, l)| !l.trim().is_empty())
                .unwrap_or((0, ""));
            let mut cut = first.len().min(SNIPPET_BYTES);
            while !first.is_char_boundary(cut) {
                cut -= 1;
            }
            let (v, scale) = vector(&c);
            ChunkData {
                start_line: c.start_line,
                end_line: c.end_line,
                snippet_line: c.start_line + offset as u32,
                snippet: first[..cut].trim_end_matches('\r').to_owned(),
                hash: c.hash,
                length,
                terms,
                vector: v,
                scale,
            }
        })
        .collect()
}

/// Builds the whole store for `files` and commits it.
pub(super) fn build(
    dir: &IndexDir,
    statics: &StaticModel,
    model: &str,
    revision: &str,
    files: &[SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<CatchUp, StoreError> {
    let generation = Manifest::read(dir).map_or(0, |m| m.generation) + 1;
    // One cache per core for the whole build: identifiers repeat across the tree.
    let mut caches = token_caches(statics);
    let (idf, idf_chunks) = idf_table(statics, files, read, &mut caches);
    let mut bytes = Vec::with_capacity(idf.len() * 4);
    for x in &idf {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let idf_file = format!("idf-{generation}-{}.bin", unique_name_part());
    dir.write_durably(&idf_file, &bytes)
        .map_err(StoreError::io(&dir.path().join(&idf_file)))?;
    let mut stats = CatchUp {
        rebuilt: true,
        ..CatchUp::default()
    };
    let all: Vec<&SourceFile> = files.iter().collect();
    let segments = write_segments(
        dir,
        generation,
        statics,
        &idf,
        &all,
        read,
        &HashMap::new(),
        &mut caches,
        &mut stats,
    )?;
    let manifest = Manifest {
        format: FORMAT,
        generation,
        revision: revision.to_owned(),
        model: model.to_owned(),
        idf_crc32: crc32fast::hash(&bytes),
        idf_file,
        idf_chunks: idf_chunks as u64,
        segments,
    };
    manifest.commit(dir)?;
    Ok(stats)
}

/// Reads, chunks and embeds `files` a batch at a time and writes them as segments of about
/// [`CHUNKS_PER_SEGMENT`] chunks each (checked after each batch of [`FILES_PER_BATCH`] files)
/// (`seg-<generation>-<writer>-0`, `-1`, …; at least one, empty when `files` is), so that memory
/// holds one segment's data however many files a build or an update brings. Adds to `stats` the
/// files read, the chunks and the vectors computed.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_segments(
    dir: &IndexDir,
    generation: u64,
    statics: &StaticModel,
    idf: &[f32],
    files: &[&SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    known: &HashMap<[u8; HASH_BYTES], (Arc<Segment>, u32)>,
    caches: &mut [TokenCache],
    stats: &mut CatchUp,
) -> Result<Vec<SegmentEntry>, StoreError> {
    let writer = unique_name_part();
    let name = |n: usize| format!("seg-{generation}-{writer}-{n}.sem");
    let mut segments = Vec::new();
    let mut pending: Vec<FileData> = Vec::new();
    let mut pending_chunks = 0usize;
    let embedded = AtomicUsize::new(0);
    for batch in files.chunks(FILES_PER_BATCH) {
        for f in prepare(statics, idf, batch, read, known, &embedded, caches) {
            pending_chunks += f.chunks.len();
            stats.files_read += 1;
            pending.push(f);
        }
        if pending_chunks >= CHUNKS_PER_SEGMENT {
            stats.chunks += pending_chunks;
            let data = std::mem::take(&mut pending);
            let file = name(segments.len());
            segments.push(write_segment(dir, file, &data, statics.dim())?);
            pending_chunks = 0;
        }
    }
    if !pending.is_empty() || segments.is_empty() {
        stats.chunks += pending_chunks;
        let file = name(segments.len());
        segments.push(write_segment(dir, file, &pending, statics.dim())?);
    }
    stats.embedded += embedded.load(Ordering::Relaxed);
    Ok(segments)
}

/// The IDF of every token id over the chunks of an even sample of `files`, and the number of
/// chunks of all files it stands for (estimated from the sample).
fn idf_table(
    statics: &StaticModel,
    files: &[SourceFile],
    read: &(dyn Fn(&str) -> Option<String> + Sync),
    caches: &mut [TokenCache],
) -> (Vec<f32>, usize) {
    let step = files.len().div_ceil(IDF_SAMPLE_FILES).max(1);
    let sample: Vec<&SourceFile> = files.iter().step_by(step).collect();
    let next = AtomicUsize::new(0);
    let vocab = statics.vocab_size();
    let (df, chunks) = std::thread::scope(|s| {
        let workers: Vec<_> = caches
            .iter_mut()
            .map(|cache| {
                let (next, sample) = (&next, &sample);
                s.spawn(move || {
                    let mut df = vec![0u32; vocab];
                    let mut chunks = 0usize;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = sample.get(i) else { break };
                        let Some(text) = read(&f.path).filter(|t| t.len() <= MAX_FILE_BYTES) else {
                            continue;
                        };
                        for c in chunk_file(&f.path, &text) {
                            chunks += 1;
                            let mut ids = cache.ids(&searched_text(&f.path, &c.text));
                            ids.sort_unstable();
                            ids.dedup();
                            for id in ids {
                                if let Some(d) = df.get_mut(id as usize) {
                                    *d += 1;
                                }
                            }
                        }
                    }
                    (df, chunks)
                })
            })
            .collect();
        let mut df = vec![0u32; vocab];
        let mut chunks = 0usize;
        for w in workers {
            if let Ok((d, c)) = w.join() {
                df.iter_mut().zip(d).for_each(|(a, b)| *a += b);
                chunks += c;
            }
        }
        (df, chunks)
    });
    let n = chunks as f32;
    let idf = df
        .iter()
        .map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln())
        .collect();
    (idf, chunks * step)
}

/// Writes a segment of `files` as `file` (a fresh name), durably, and returns its manifest entry.
fn write_segment(
    dir: &IndexDir,
    file: String,
    files: &[FileData],
    dim: usize,
) -> Result<SegmentEntry, StoreError> {
    let bytes = encode(files, dim);
    dir.write_durably(&file, &bytes)
        .map_err(StoreError::io(&dir.path().join(&file)))?;
    Ok(SegmentEntry {
        file,
        crc32: crc32fast::hash(&bytes),
        chunks: files.iter().map(|f| f.chunks.len() as u32).sum(),
        deleted: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_token_ids_are_the_tokenizers() {
        let statics = crate::store::tests::statics();
        let mut cache = TokenCache::new(statics);
        for text in [
            "static int getUserName(struct file *f) {\n\treturn f->f_op->read(f, buf);\n}",
            "  Café déjà-vu: naïve “quotes” and 中文字符 in a_snake_case identifier.\r\n",
            "x\u{a0}y\tz\n\nHTTPResponse2 parse_http_response",
            "__init__(self,*args,**kw):#x==y!=z;a[i]<<=2`q`@dec{}|~^$%&'\"?/\\",
            "0x1F__attribute__((aligned(64)))struct_a9Bc_DEF123ghi->x",
            "ab".repeat(70).as_str(),
            format!("x.{}.y", "Q".repeat(120)).as_str(),
            include_str!("../store.rs"),
            include_str!("search.rs"),
            include_str!("../chunk/syntax.rs"),
            "",
        ] {
            // Twice: the second time every piece comes from the cache.
            for _ in 0..2 {
                let head: String = text.chars().take(80).collect();
                assert_eq!(cache.ids(text), statics.token_ids(text), "{head:?}");
            }
        }
    }
}
