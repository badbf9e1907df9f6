//! A list of files with the stamps a walk saw, in path order, kept as one block of text with
//! offsets: what a refresh compares and a build reads its batches from. At a monorepo's scale
//! (860 000 files) a `String` per path costs about twice the paths' own bytes, and the list is
//! held through a whole build.

use crate::segment::Stamp;

/// Files and their stamps, in the order they were added.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    text: String,
    /// Where each path starts in `text`, and where the last one ends (`len + 1` entries).
    starts: Vec<usize>,
    stamps: Vec<Stamp>,
}

impl Listing {
    /// An empty list with room for `files` files of `bytes` path bytes in all.
    pub(crate) fn with_capacity(files: usize, bytes: usize) -> Listing {
        let mut starts = Vec::with_capacity(files + 1);
        starts.push(0);
        Listing {
            text: String::with_capacity(bytes),
            starts,
            stamps: Vec::with_capacity(files),
        }
    }

    /// Adds `path` with `stamp` at the end.
    pub(crate) fn push(&mut self, path: &str, stamp: Stamp) {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.text.push_str(path);
        self.starts.push(self.text.len());
        self.stamps.push(stamp);
    }

    pub(crate) fn len(&self) -> usize {
        self.stamps.len()
    }

    /// Path `i` (< `len()`) and its stamp.
    pub(crate) fn get(&self, i: usize) -> (&str, &Stamp) {
        (
            &self.text[self.starts[i]..self.starts[i + 1]],
            &self.stamps[i],
        )
    }

    /// Every path, in order.
    pub(crate) fn paths(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).0)
    }

    /// The files as owned pairs.
    pub(crate) fn into_vec(self) -> Vec<(String, Stamp)> {
        (0..self.len())
            .map(|i| {
                let (p, s) = self.get(i);
                (p.to_owned(), *s)
            })
            .collect()
    }
}

impl From<Vec<(String, Stamp)>> for Listing {
    /// Each path is freed as soon as it is copied, so the conversion holds little more than the
    /// list it consumes.
    fn from(files: Vec<(String, Stamp)>) -> Listing {
        let bytes = files.iter().map(|(p, _)| p.len()).sum();
        let mut out = Listing::with_capacity(files.len(), bytes);
        for (path, stamp) in files {
            out.push(&path, stamp);
        }
        out
    }
}
