//! Lists of paths kept as one block of text with offsets: the files a walk selected, in path
//! order, which a refresh compares and a build reads its batches from, and the paths the
//! directory cache stores. At a monorepo's scale (860 000 files) a `String` per path costs about
//! twice the paths' own bytes, and the list is held through a whole build; the walk's list and
//! the directory cache share one block rather than each holding a copy.

use std::sync::Arc;

use crate::segment::Stamp;

/// Paths as one block of text with a table of offsets, as the cache file stores them: a file's
/// bytes decode into about as many bytes of memory, never into a structure per path, so a damaged
/// or crafted file of 64 MiB costs about 64 MiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathBlock {
    text: String,
    /// Where each path starts in `text`, and where the last one ends (`len + 1` entries).
    starts: Vec<u32>,
}

impl Default for PathBlock {
    fn default() -> Self {
        PathBlock::with_capacity(0, 0)
    }
}

impl PathBlock {
    /// An empty block with room for `paths` paths of `bytes` bytes in all.
    pub(crate) fn with_capacity(paths: usize, bytes: usize) -> PathBlock {
        let mut starts = Vec::with_capacity(paths + 1);
        starts.push(0);
        PathBlock {
            text: String::with_capacity(bytes),
            starts,
        }
    }

    /// Room for `paths` more paths of `bytes` bytes in all, and no more.
    fn reserve_exact(&mut self, paths: usize, bytes: usize) {
        self.starts.reserve_exact(paths);
        self.text.reserve_exact(bytes);
    }

    /// Adds `path` at the end; `None` when the text would outgrow the offsets' 4 GiB.
    pub(crate) fn push(&mut self, path: &str) -> Option<()> {
        let end = u32::try_from(self.text.len().checked_add(path.len())?).ok()?;
        self.text.push_str(path);
        self.starts.push(end);
        Some(())
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Path `i` (< `len()`).
    pub(crate) fn get(&self, i: usize) -> &str {
        // Checked when read from a file: every start is a character boundary, in order.
        self.text
            .get(self.starts[i] as usize..self.starts[i + 1] as usize)
            .unwrap_or("")
    }

    /// Every path, in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The paths' bytes, one after another.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The bytes it holds on the heap.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.starts.capacity() * 4
    }

    /// The table of offsets (`len() + 1` of them).
    pub(crate) fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// The block of `starts` into `text`, as a cache file holds them: `None` unless every
    /// path is non-empty and lies in the text, in order, between character boundaries.
    pub(crate) fn checked(starts: Vec<u32>, text: Vec<u8>) -> Option<PathBlock> {
        let text = String::from_utf8(text).ok()?;
        let valid = starts.first() == Some(&0)
            && starts.last().is_some_and(|&e| e as usize == text.len())
            && starts.windows(2).all(|w| w[0] < w[1])
            && starts.iter().all(|&s| text.is_char_boundary(s as usize));
        valid.then_some(PathBlock { text, starts })
    }
}

/// Files in path order, each with what the walk kept of it: its stamp for a refresh, which
/// compares stamps, and nothing (`()`) for a build, which takes each file's stamp from the file
/// it opens. The paths are shared with the directory cache that the same walk recorded.
#[derive(Debug, Clone)]
pub(crate) struct Listing<T = Stamp> {
    paths: Arc<PathBlock>,
    kept: Vec<T>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            paths: Arc::default(),
            kept: Vec::new(),
        }
    }
}

impl<T> Listing<T> {
    /// `paths` with `kept[i]` for path `i`; `None` unless there is one for each.
    pub(crate) fn new(paths: Arc<PathBlock>, kept: Vec<T>) -> Option<Listing<T>> {
        (paths.len() == kept.len()).then_some(Listing { paths, kept })
    }

    /// `files` as one block, in their order. The list is consumed from the front a slice at a
    /// time: each path is freed as soon as it is copied, the list's table shrinks, and the block
    /// grows by exactly what the slice adds, so the conversion holds little more than the list
    /// it consumes (at a monorepo's scale the list is about 100 MiB). `None` when the paths'
    /// text outgrows 4 GiB.
    pub(crate) fn from_vec<P: AsRef<str>>(mut files: Vec<(P, T)>) -> Option<Listing<T>> {
        // Sixteen slices: each drain moves the rest of the table down once.
        let slice = (files.len() / 16).max(1 << 12);
        let mut paths = PathBlock::default();
        let mut kept = Vec::new();
        while !files.is_empty() {
            let n = slice.min(files.len());
            let bytes = files[..n].iter().map(|(p, _)| p.as_ref().len()).sum();
            paths.reserve_exact(n, bytes);
            kept.reserve_exact(n);
            for (path, k) in files.drain(..n) {
                paths.push(path.as_ref())?;
                kept.push(k);
            }
            files.shrink_to_fit();
        }
        Some(Listing {
            paths: Arc::new(paths),
            kept,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }

    /// Path `i` (< `len()`) and what was kept of it.
    pub(crate) fn get(&self, i: usize) -> (&str, &T) {
        (self.paths.get(i), &self.kept[i])
    }

    /// Every file, in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &T)> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The paths, shared.
    pub(crate) fn paths(&self) -> &Arc<PathBlock> {
        &self.paths
    }

    /// The files as owned pairs.
    pub(crate) fn into_vec(self) -> Vec<(String, T)> {
        let paths = self.paths;
        self.kept
            .into_iter()
            .enumerate()
            .map(|(i, k)| (paths.get(i).to_owned(), k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Listing, PathBlock};

    /// `files` as a listing, then read back in order with what was kept of each.
    fn check(files: &[(&str, u32)]) {
        let owned: Vec<(Box<str>, u32)> = files.iter().map(|&(p, k)| (p.into(), k)).collect();
        let listing = Listing::from_vec(owned).expect("small");
        assert_eq!(listing.len(), files.len());
        let got: Vec<(&str, u32)> = listing.iter().map(|(p, k)| (p, *k)).collect();
        assert_eq!(got, files);
        assert!(listing.paths().iter().eq(files.iter().map(|(p, _)| *p)));
        let back: Vec<(String, u32)> = listing.into_vec();
        assert!(
            back.iter()
                .zip(files)
                .all(|((p, k), (q, l))| p == q && k == l)
        );
    }

    #[test]
    fn a_listing_keeps_its_files_in_order_with_what_was_kept_of_each() {
        check(&[]);
        check(&[("a.txt", 1)]);
        check(&[("src/名前.rs", 7), ("a b/c", 0), ("z", u32::MAX)]);
        // More files than one slice of the conversion holds, so the list is consumed in parts.
        let many: Vec<String> = (0..10_000).map(|i| format!("d{}/f{i}.c", i % 97)).collect();
        let files: Vec<(&str, u32)> = many.iter().zip(0..).map(|(p, i)| (p.as_str(), i)).collect();
        check(&files);
    }

    #[test]
    fn a_listing_needs_one_kept_value_per_path() {
        let mut block = PathBlock::default();
        block.push("a").unwrap();
        block.push("b").unwrap();
        let block = std::sync::Arc::new(block);
        assert!(Listing::new(block.clone(), vec![(); 2]).is_some());
        assert!(Listing::new(block.clone(), vec![(); 1]).is_none());
        assert!(Listing::new(block, vec![(); 3]).is_none());
    }

    /// A block read from a file is taken only when its offsets lie in its text, in order.
    #[test]
    fn a_block_read_from_a_file_is_checked() {
        let mut block = PathBlock::default();
        block.push("a").unwrap();
        assert_eq!(
            PathBlock::checked(vec![0, 1], b"a".to_vec()),
            Some(block.clone())
        );
        assert_eq!(PathBlock::checked(vec![0, 2], b"a".to_vec()), None);
        assert_eq!(PathBlock::checked(vec![1, 1], b"a".to_vec()), None);
    }
}
