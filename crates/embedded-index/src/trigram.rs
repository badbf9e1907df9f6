//! Trigrams: three bytes, ASCII letters folded to lower case, packed into 24 bits.
//!
//! One folded index serves both case modes: a case-sensitive query's folded trigrams are a
//! necessary condition too, and the candidates are verified exactly afterwards.

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

/// Collects the distinct trigrams of one file, reusing a 2 MiB bitset across files.
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
        self.found.clear();
        // The last three bytes folded, rolling, and how many bytes since the last line break (at
        // most 3): one fold and one comparison per byte, and no bytes carried across chunks.
        let (mut window, mut run) = (0u32, 0u8);
        let result = loop {
            let n = match reader.read(&mut self.buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            let nul = memchr::memchr(0, &self.buf[..n]);
            for &b in &self.buf[..nul.unwrap_or(n)] {
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
            if nul.is_some() {
                break Ok(());
            }
        };
        for &t in &self.found {
            self.seen[(t >> 6) as usize] = 0;
        }
        result?;
        let mut out = self.found.clone();
        out.sort_unstable();
        Ok(out)
    }
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
