//! Trigrams: three bytes, ASCII letters folded to lower case, packed into 24 bits.
//!
//! One folded index serves both case modes: a case-sensitive query's folded trigrams are a
//! necessary condition too, and the candidates are verified exactly afterwards.

use std::fs::File;
use std::io::{self, Read};

/// Folds ASCII upper case to lower case; every other byte is itself.
#[inline]
pub(crate) fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

#[inline]
pub(crate) fn pack(a: u8, b: u8, c: u8) -> u32 {
    (u32::from(fold(a)) << 16) | (u32::from(fold(b)) << 8) | u32::from(fold(c))
}

/// The read size of the streaming extraction: memory stays bounded whatever a file holds.
const CHUNK: usize = 256 * 1024;

/// Collects the distinct trigrams of one file, reusing a 2 MiB bitset and its buffers across files.
pub(crate) struct Extractor {
    seen: Vec<u64>,
    found: Vec<u32>,
    buf: Vec<u8>,
}

impl Extractor {
    pub(crate) fn new() -> Extractor {
        Extractor {
            seen: vec![0; (1 << 24) / 64],
            found: Vec::new(),
            buf: vec![0; CHUNK],
        }
    }

    /// The sorted distinct trigrams of `bytes` (see [`Extractor::extract_reader`]).
    #[cfg(test)]
    pub(crate) fn extract(&mut self, bytes: &[u8]) -> Vec<u32> {
        self.extract_reader(bytes).unwrap_or_default()
    }

    /// The sorted distinct trigrams of what `reader` yields, up to the first NUL (a match can
    /// only lie before the searcher's binary detection stops it, which is at or before the first
    /// NUL), read in fixed-size chunks so memory is bounded by the chunk and the 2^24-bit set, not
    /// by the file. Trigrams spanning a line break are skipped: a match never spans lines.
    ///
    /// Like the searcher's BOM sniffing, a UTF-16 file with a byte-order mark is read as its UTF-8
    /// transcoding.
    pub(crate) fn extract_reader(&mut self, reader: impl Read) -> io::Result<Vec<u32>> {
        let mut reader = encoding_rs_io::DecodeReaderBytesBuilder::new()
            .bom_sniffing(true)
            .utf8_passthru(true)
            .strip_bom(true)
            .build(reader);
        let mut scan = Scan::default();
        let result = loop {
            let n = match reader.read(&mut self.buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            if self.scan(&mut scan, n, 0) {
                break Ok(());
            }
        };
        self.finish(result)
    }

    /// [`Extractor::extract_reader`] for a file of `len` bytes when it was stamped: the same
    /// trigrams, with the fewest reads. A file shorter than a chunk is one `read`, with no read
    /// to sniff its byte-order mark and none to find its end: the bytes past `len` belong to a
    /// later version of the file, whose new stamp has it read again.
    pub(crate) fn extract_file(&mut self, mut file: &File, len: u64) -> io::Result<Vec<u32>> {
        let mut scan = Scan::default();
        let mut left = len;
        let mut first = true;
        let result = loop {
            let want = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
            if want == 0 {
                break Ok(());
            }
            let n = match search_profile::read_full(&mut file, &mut self.buf[..want]) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            left -= n as u64;
            let mut skip = 0;
            if std::mem::take(&mut first) {
                match self.buf[..n] {
                    // UTF-16 is transcoded as the searcher does, from what was read so far on.
                    [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..] => {
                        let head = self.buf[..n].to_vec();
                        return self.extract_reader(io::Cursor::new(head).chain(file.take(left)));
                    }
                    [0xEF, 0xBB, 0xBF, ..] => skip = 3,
                    _ => {}
                }
            }
            if self.scan(&mut scan, n, skip) {
                break Ok(());
            }
        };
        self.finish(result)
    }

    /// Adds the trigrams of `buf[skip..n]` to those found so far; `true` at a NUL, where the
    /// extraction stops.
    fn scan(&mut self, scan: &mut Scan, n: usize, skip: usize) -> bool {
        let bytes = &self.buf[skip.min(n)..n];
        let nul = memchr::memchr(0, bytes);
        // The last three bytes folded, rolling, and how many bytes since the last line break
        // (at most 2): one fold and one comparison per byte, and no bytes carried across chunks.
        let (mut window, mut run) = (scan.window, scan.run);
        for &b in &bytes[..nul.unwrap_or(bytes.len())] {
            if b == b'\n' {
                run = 0;
                continue;
            }
            window = ((window << 8) | u32::from(fold(b))) & 0xFF_FFFF;
            if run < 2 {
                run += 1;
                continue;
            }
            let (word, bit) = ((window >> 6) as usize, 1u64 << (window & 63));
            if self.seen[word] & bit == 0 {
                self.seen[word] |= bit;
                self.found.push(window);
            }
        }
        (scan.window, scan.run) = (window, run);
        nul.is_some()
    }

    /// Clears the set for the next file and returns what was found, sorted, unless the read
    /// failed.
    fn finish(&mut self, result: io::Result<()>) -> io::Result<Vec<u32>> {
        for &t in &self.found {
            self.seen[(t >> 6) as usize] = 0;
        }
        let out = result.map(|()| {
            let mut out = vec![0; self.found.len()];
            sort_trigrams(&mut self.found, &mut out);
            out
        });
        self.found.clear();
        out
    }
}

/// Below this many trigrams a comparison sort beats the radix sort's three passes of 256 buckets.
const RADIX_FROM: usize = 256;

/// Sorts the distinct 24-bit trigrams `keys` into `out` (of the same length), leaving `keys`
/// scrambled: a least-significant-byte radix sort, three passes of one byte each. A file's
/// trigrams are thousands, where a comparison sort was a seventh of a build's time.
fn sort_trigrams(keys: &mut [u32], out: &mut [u32]) {
    debug_assert_eq!(keys.len(), out.len());
    if keys.len() < RADIX_FROM {
        out.copy_from_slice(keys);
        out.sort_unstable();
        return;
    }
    let mut counts = [[0usize; 256]; 3];
    for &k in keys.iter() {
        for (byte, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * byte)) & 0xFF) as usize] += 1;
        }
    }
    // Three passes move `keys` into `out`, back, and into `out` again; a pass whose byte is the
    // same for every key would be a copy, and is made anyway so that `out` ends sorted.
    let (mut from, mut to) = (keys, out);
    for (byte, c) in counts.iter().enumerate() {
        let mut next = [0usize; 256];
        let mut sum = 0;
        for (n, &count) in next.iter_mut().zip(c) {
            *n = sum;
            sum += count;
        }
        for &k in from.iter() {
            let b = ((k >> (8 * byte)) & 0xFF) as usize;
            to[next[b]] = k;
            next[b] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
}

/// Where a scan stands between chunks: the last bytes folded and the run since a line break.
#[derive(Default)]
struct Scan {
    window: u32,
    run: u8,
}

#[cfg(test)]
mod tests {
    use super::{Extractor, pack};

    /// The trigrams of `bytes` computed the obvious way, for comparison.
    fn naive(bytes: &[u8]) -> Vec<u32> {
        let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
        let mut v: Vec<u32> = bytes[..end]
            .windows(3)
            .filter(|w| !w.contains(&b'\n'))
            .map(|w| pack(w[0], w[1], w[2]))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn streaming_extraction_equals_whole_file_extraction_across_chunk_edges() {
        let mut ex = Extractor::new();
        let mut text = Vec::new();
        let mut x = 7u32;
        while text.len() < 3 * super::CHUNK + 17 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            text.push(b"abcXYZ \n_"[(x >> 16) as usize % 9]);
        }
        assert_eq!(ex.extract(&text), naive(&text));
        text.insert(2 * super::CHUNK + 1, 0);
        assert_eq!(ex.extract(&text), naive(&text));
        assert_eq!(ex.extract(b"ab"), Vec::<u32>::new());
    }

    /// The trigrams of a file of `bytes`, read as a build reads it with `len` from its stamp.
    fn from_file(ex: &mut Extractor, bytes: &[u8], len: u64) -> Vec<u32> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        ex.extract_file(&std::fs::File::open(&path).unwrap(), len)
            .unwrap()
    }

    /// A file read by its stamped length gives what the searcher's reader gives: across chunk
    /// edges, up to a NUL, without a UTF-8 byte-order mark, with UTF-16 transcoded, and for files
    /// too short to hold a mark or a trigram.
    #[test]
    fn a_file_read_by_its_length_gives_the_readers_trigrams() {
        let mut ex = Extractor::new();
        let mut long = Vec::new();
        let mut x = 11u32;
        while long.len() < 2 * super::CHUNK + 5 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            long.push(b"abcXYZ \n_"[(x >> 16) as usize % 9]);
        }
        let mut with_nul = long.clone();
        with_nul.insert(super::CHUNK + 2, 0);
        let mut utf8_bom = vec![0xEF, 0xBB, 0xBF];
        utf8_bom.extend_from_slice(b"bom then text");
        let mut utf16 = vec![0xFE, 0xFF];
        for u in "wide text, long enough".encode_utf16() {
            utf16.extend_from_slice(&u.to_be_bytes());
        }
        let cases: [&[u8]; 9] = [
            &long,
            &with_nul,
            &utf8_bom,
            &utf16,
            b"",
            b"ab",
            &[0xEF, 0xBB],
            &[0xFF, 0xFE],
            b"abc",
        ];
        for bytes in cases {
            let expected = ex.extract(bytes);
            assert_eq!(
                from_file(&mut ex, bytes, bytes.len() as u64),
                expected,
                "{:?}",
                &bytes[..bytes.len().min(8)]
            );
        }
        assert_eq!(ex.extract(&utf8_bom), naive(b"bom then text"));
        // Bytes past the stamped length belong to a later version of the file, which is read
        // again under its own stamp.
        assert_eq!(from_file(&mut ex, b"abcdef", 4), naive(b"abcd"));
        assert_eq!(from_file(&mut ex, b"abcdef", 0), Vec::<u32>::new());
        // A file that shrank after it was stamped ends where its bytes end.
        assert_eq!(from_file(&mut ex, b"abcdef", 1 << 40), naive(b"abcdef"));
    }

    /// The radix sort orders every set a comparison sort does, below and above the size where it
    /// takes over, including keys that share their low or high bytes.
    #[test]
    fn trigrams_sort_as_a_comparison_sort_sorts_them() {
        let mut x = 3u32;
        for len in [0, 1, 2, super::RADIX_FROM - 1, super::RADIX_FROM, 5_000] {
            for spread in [0xFF_FFFF, 0xFF, 0xFF_FF00] {
                let mut keys: Vec<u32> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        (x >> 4) & spread
                    })
                    .collect();
                let mut expected = keys.clone();
                expected.sort_unstable();
                let mut out = vec![0; keys.len()];
                super::sort_trigrams(&mut keys, &mut out);
                assert_eq!(out, expected, "{len} keys within {spread:#x}");
            }
        }
    }

    #[test]
    fn utf16_with_a_bom_is_read_as_utf8() {
        let mut ex = Extractor::new();
        let mut bytes = vec![0xFF, 0xFE];
        for u in "héllo".encode_utf16() {
            bytes.extend_from_slice(&u.to_le_bytes());
        }
        assert_eq!(ex.extract(&bytes), naive("héllo".as_bytes()));
    }
}
