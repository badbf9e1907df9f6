//! Trigrams: three bytes, ASCII letters folded to lower case, packed into 24 bits.
//!
//! One folded index serves both case modes: a case-sensitive query's folded trigrams are a
//! necessary condition too, and the candidates are verified exactly afterwards.

/// Folds ASCII upper case to lower case; every other byte is itself.
#[inline]
pub(crate) fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

#[inline]
fn pack(a: u8, b: u8, c: u8) -> u32 {
    (u32::from(fold(a)) << 16) | (u32::from(fold(b)) << 8) | u32::from(fold(c))
}

/// Collects the distinct trigrams of one file, reusing a 2 MiB bitset across files.
pub(crate) struct Extractor {
    seen: Vec<u64>,
    found: Vec<u32>,
}

impl Extractor {
    pub(crate) fn new() -> Extractor {
        Extractor {
            seen: vec![0; (1 << 24) / 64],
            found: Vec::new(),
        }
    }

    /// The sorted distinct trigrams of `bytes`, up to the first NUL (a match can only lie before
    /// the searcher's binary detection stops it, which is at or before the first NUL). Trigrams
    /// spanning a line break are skipped: a match never spans lines.
    pub(crate) fn extract(&mut self, bytes: &[u8]) -> Vec<u32> {
        // Like the searcher's BOM sniffing: a UTF-16 file with a byte-order mark is searched as
        // its UTF-8 transcoding, so its trigrams are taken from that.
        let transcoded;
        let bytes = match bytes {
            [0xFF, 0xFE, rest @ ..] | [0xFE, 0xFF, rest @ ..] => {
                let le = bytes[0] == 0xFF;
                let units: Vec<u16> = rest
                    .chunks_exact(2)
                    .map(|c| {
                        if le {
                            u16::from_le_bytes([c[0], c[1]])
                        } else {
                            u16::from_be_bytes([c[0], c[1]])
                        }
                    })
                    .collect();
                transcoded = String::from_utf16_lossy(&units).into_bytes();
                &transcoded[..]
            }
            _ => bytes,
        };
        let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
        let bytes = &bytes[..end];
        self.found.clear();
        for w in bytes.windows(3) {
            if w[0] == b'\n' || w[1] == b'\n' || w[2] == b'\n' {
                continue;
            }
            let t = pack(w[0], w[1], w[2]);
            let (word, bit) = ((t >> 6) as usize, 1u64 << (t & 63));
            if self.seen[word] & bit == 0 {
                self.seen[word] |= bit;
                self.found.push(t);
            }
        }
        for &t in &self.found {
            self.seen[(t >> 6) as usize] = 0;
        }
        let mut out = self.found.clone();
        out.sort_unstable();
        out
    }
}

/// The trigrams every file matching `query` must contain, or `None` when the query gives no
/// usable trigram (then every file is a candidate).
///
/// Case-insensitive queries use only trigrams of ASCII bytes other than `k` and `s`: under
/// Unicode simple case folding those two also match non-ASCII characters (U+212A KELVIN SIGN,
/// U+017F LONG S), and any non-ASCII byte may fold to a different encoding, so only the remaining
/// ASCII trigrams are necessary conditions.
pub(crate) fn query_trigrams(query: &str, case_insensitive: bool) -> Option<Vec<u32>> {
    let b = query.as_bytes();
    let mut out: Vec<u32> = b
        .windows(3)
        .filter(|w| {
            !case_insensitive
                || w.iter()
                    .all(|&c| c.is_ascii() && !matches!(c, b'k' | b'K' | b's' | b'S'))
        })
        .map(|w| pack(w[0], w[1], w[2]))
        .collect();
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}
