//! Posting lists: the ascending doc ids of one trigram in one segment, as Elias–Fano or as a
//! bitmap, whichever is smaller.
//!
//! Which codec a list uses and how many bytes it takes follow from its length and the segment's
//! doc count alone ([`Shape::of`]), so the dictionary stores neither. Elias–Fano costs about
//! `2 + log2(docs / len)` bits an id, whatever the gaps; a bitmap costs `docs` bits, which is less
//! once a trigram is in more than about a quarter of the docs.
//!
//! ```text
//! Elias–Fano, low_bits = floor(log2(docs / len)) (0 when len ≥ docs):
//!   lows   len × low_bits bits, the low bits of each id, packed from bit 0 of the first byte
//!   highs  len + ((docs - 1) >> low_bits) bits: id i sets bit (id >> low_bits) + i
//! bitmap: docs bits, id i sets bit i
//! ```
//! Both are little-endian bit orders, each section padded to whole bytes.

/// A list's codec and size, from its length and the segment's doc count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// No ids: nothing is stored.
    Empty,
    /// Elias–Fano with this many low bits per id, `lows` then `highs` bytes.
    EliasFano {
        low_bits: u32,
        lows: usize,
        highs: usize,
    },
    /// One bit per doc of the segment, this many bytes.
    Bitmap { bytes: usize },
}

impl Shape {
    /// The shape of a list of `len` distinct ids below `docs`.
    pub(crate) fn of(len: u32, docs: u32) -> Shape {
        if len == 0 || docs == 0 {
            return Shape::Empty;
        }
        let quotient = docs / len;
        let low_bits = if quotient == 0 { 0 } else { quotient.ilog2() };
        let (len, docs) = (len as usize, docs as usize);
        let lows = (len * low_bits as usize).div_ceil(8);
        let highs = (len + ((docs - 1) >> low_bits)).div_ceil(8);
        let bitmap = docs.div_ceil(8);
        if bitmap < lows + highs {
            Shape::Bitmap { bytes: bitmap }
        } else {
            Shape::EliasFano {
                low_bits,
                lows,
                highs,
            }
        }
    }

    /// Bytes the list takes.
    pub(crate) fn bytes(self) -> usize {
        match self {
            Shape::Empty => 0,
            Shape::EliasFano { lows, highs, .. } => lows + highs,
            Shape::Bitmap { bytes } => bytes,
        }
    }
}

/// Appends `ids` (strictly ascending, each below `docs`) in the shape [`Shape::of`] gives them.
pub(crate) fn encode(ids: &[u32], docs: u32, out: &mut Vec<u8>) {
    debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
    debug_assert!(ids.last().is_none_or(|&l| l < docs));
    let start = out.len();
    let shape = Shape::of(ids.len() as u32, docs);
    out.resize(start + shape.bytes(), 0);
    let body = &mut out[start..];
    match shape {
        Shape::Empty => {}
        Shape::Bitmap { .. } => {
            for &id in ids {
                body[id as usize / 8] |= 1 << (id % 8);
            }
        }
        Shape::EliasFano { low_bits, lows, .. } => {
            let (low_part, high_part) = body.split_at_mut(lows);
            let mask = (1u64 << low_bits) - 1;
            for (i, &id) in ids.iter().enumerate() {
                let at = i * low_bits as usize;
                let bits = u64::from(id) & mask;
                // At most 31 low bits from any bit offset span at most five bytes.
                for (k, byte) in low_part[at / 8..].iter_mut().take(5).enumerate() {
                    *byte |= ((bits << (at % 8)) >> (8 * k)) as u8;
                }
                let high = (id >> low_bits) as usize + i;
                high_part[high / 8] |= 1 << (high % 8);
            }
        }
    }
}

/// The little-endian u64 of up to eight bytes at `at`, zero past the end.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    let tail = bytes.get(at..).unwrap_or(&[]);
    let n = tail.len().min(8);
    w[..n].copy_from_slice(&tail[..n]);
    u64::from_le_bytes(w)
}

/// Decodes a list of `len` ids below `docs` from exactly `bytes`, appending them to `out`.
/// Returns `false` for bytes no encoder writes (a wrong length, too few or too many ids, ids out
/// of order or out of range); what was appended is then to be discarded.
pub(crate) fn decode(bytes: &[u8], len: u32, docs: u32, out: &mut Vec<u32>) -> bool {
    let shape = Shape::of(len, docs);
    if bytes.len() != shape.bytes() {
        return false;
    }
    let want = out.len() + len as usize;
    match shape {
        Shape::Empty => return len == 0,
        Shape::Bitmap { .. } => {
            for (w, chunk) in bytes.chunks(8).enumerate() {
                let mut word = word_at(chunk, 0);
                while word != 0 {
                    let id = w * 64 + word.trailing_zeros() as usize;
                    if id >= docs as usize || out.len() == want {
                        return false;
                    }
                    out.push(id as u32);
                    word &= word - 1;
                }
            }
        }
        Shape::EliasFano { low_bits, lows, .. } => {
            let (low_part, high_part) = bytes.split_at(lows);
            let mask = (1u64 << low_bits) - 1;
            let mut i = 0usize;
            let mut next_min = 0u64;
            for (w, chunk) in high_part.chunks(8).enumerate() {
                let mut word = word_at(chunk, 0);
                while word != 0 {
                    let pos = w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    // Bit `pos` is id i's high part plus i, so it is never below i.
                    let Some(high) = pos.checked_sub(i) else {
                        return false;
                    };
                    let at = i * low_bits as usize;
                    let low = (word_at(low_part, at / 8) >> (at % 8)) & mask;
                    let id = ((high as u64) << low_bits) | low;
                    if id < next_min || id >= u64::from(docs) || out.len() == want {
                        return false;
                    }
                    out.push(id as u32);
                    next_min = id + 1;
                    i += 1;
                }
            }
        }
    }
    out.len() == want
}

/// Keeps the `candidates` (ascending) that the list of `len` ids below `docs` in `bytes` holds,
/// without decoding the list: a bitmap is probed bit by bit, and Elias–Fano skips a whole word of
/// its high bits when the largest id the word can hold is below the next candidate, so the cost
/// is about `len / 32` word reads plus a few steps per candidate. Bytes no encoder writes keep
/// every candidate from the first doubt on, which only widens what verification narrows.
pub(crate) fn retain_present(bytes: &[u8], len: u32, docs: u32, candidates: &mut Vec<u32>) {
    let shape = Shape::of(len, docs);
    if bytes.len() != shape.bytes() {
        return;
    }
    match shape {
        Shape::Empty => candidates.clear(),
        Shape::Bitmap { .. } => candidates.retain(|&id| {
            bytes
                .get(id as usize / 8)
                .is_some_and(|b| b & (1 << (id % 8)) != 0)
        }),
        Shape::EliasFano { low_bits, lows, .. } => {
            let (low_part, high_part) = bytes.split_at(lows);
            let mask = (1u64 << low_bits) - 1;
            let words = high_part.len().div_ceil(8);
            let (mut w, mut word) = (0usize, word_at(high_part, 0));
            // The index of the next id to read: the number of ones before `word`'s lowest one.
            let mut i = 0usize;
            let mut kept = 0usize;
            'candidates: for c in 0..candidates.len() {
                let want = u64::from(candidates[c]);
                loop {
                    if word == 0 || {
                        // The word's remaining ones have indexes of at least i, so their high
                        // parts are at most its last bit position minus i.
                        let last = (w * 64 + 63) as u64;
                        last.checked_sub(i as u64)
                            .is_some_and(|high| (high << low_bits) | mask < want)
                    } {
                        i += word.count_ones() as usize;
                        w += 1;
                        if w >= words {
                            break 'candidates;
                        }
                        word = word_at(high_part, w * 8);
                        continue;
                    }
                    let pos = w * 64 + word.trailing_zeros() as usize;
                    let (Some(high), true) = (pos.checked_sub(i), i < len as usize) else {
                        // Not an encoder's list: keep this candidate and the rest.
                        let rest = candidates.len() - c;
                        candidates.copy_within(c.., kept);
                        candidates.truncate(kept + rest);
                        return;
                    };
                    let at = i * low_bits as usize;
                    let low = (word_at(low_part, at / 8) >> (at % 8)) & mask;
                    let id = ((high as u64) << low_bits) | low;
                    if id < want {
                        word &= word - 1;
                        i += 1;
                        continue;
                    }
                    if id == want {
                        candidates[kept] = candidates[c];
                        kept += 1;
                    }
                    continue 'candidates;
                }
            }
            candidates.truncate(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Shape, decode, encode, retain_present};

    /// Encodes `ids` below `docs`, checks the bytes against `expected` (hex, or `None` to skip),
    /// and that they decode to `ids` again.
    fn check(ids: &[u32], docs: u32, expected: Option<&str>) {
        let mut bytes = Vec::new();
        encode(ids, docs, &mut bytes);
        assert_eq!(bytes.len(), Shape::of(ids.len() as u32, docs).bytes());
        if let Some(hex) = expected {
            let got: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, hex, "bytes of {ids:?} below {docs}");
        }
        let mut back = vec![7];
        assert!(decode(&bytes, ids.len() as u32, docs, &mut back), "{ids:?}");
        assert_eq!(back[1..], *ids, "{ids:?} below {docs}");
        // Probing keeps exactly the held ids, among every id below the doc count (or a sample of
        // them when there are many), and among every other one.
        let every: Vec<u32> = if docs <= 20_000 {
            (0..docs).collect()
        } else {
            ids.iter()
                .flat_map(|&i| [i.saturating_sub(1), i, i.saturating_add(1)])
                .filter(|&i| i < docs)
                .collect::<std::collections::BTreeSet<u32>>()
                .into_iter()
                .collect()
        };
        for step in [1, 2, 7] {
            let mut candidates: Vec<u32> = every.iter().copied().step_by(step).collect();
            let want: Vec<u32> = candidates
                .iter()
                .copied()
                .filter(|c| ids.binary_search(c).is_ok())
                .collect();
            retain_present(&bytes, ids.len() as u32, docs, &mut candidates);
            assert_eq!(
                candidates, want,
                "{ids:?} below {docs}, every {step}th candidate"
            );
        }
    }

    #[test]
    fn shapes_follow_from_length_and_doc_count() {
        assert_eq!(Shape::of(0, 100), Shape::Empty);
        assert_eq!(Shape::of(3, 0), Shape::Empty);
        // 2 ids of 1024: 9 low bits each, then 2 + 1 high bits.
        assert_eq!(
            Shape::of(2, 1024),
            Shape::EliasFano {
                low_bits: 9,
                lows: 3,
                highs: 1
            }
        );
        // Half the docs: a bitmap of 128 bytes beats Elias–Fano's 64 + 128.
        assert_eq!(Shape::of(512, 1024), Shape::Bitmap { bytes: 128 });
        // Every doc: no low bits, and still a bitmap.
        assert_eq!(Shape::of(1024, 1024), Shape::Bitmap { bytes: 128 });
    }

    #[test]
    fn lists_round_trip_in_both_codecs() {
        // Elias–Fano: ids 1 and 1000 below 1024 take 9 low bits each (1, then 1000 & 511 = 488)
        // and highs at bits 0 + 0 and 1 + 1.
        check(&[1, 1000], 1024, Some("01d00305"));
        // A bitmap: bits 0 to 6 and 9 of ten docs (Elias–Fano would take three bytes).
        check(&[0, 1, 2, 3, 4, 5, 6, 9], 10, Some("7f02"));
        // Four of the ten: Elias–Fano and a bitmap tie at two bytes, and the tie is Elias–Fano.
        check(&[0, 1, 2, 9], 10, Some("0a8b"));
        check(&[0], 1, Some("01"));
        check(&[], 5, Some(""));
        check(&[u32::MAX - 1], u32::MAX, None);
        check(&[0, u32::MAX - 1], u32::MAX, None);
    }

    #[test]
    fn every_length_and_spacing_round_trips() {
        // Lengths on both sides of the Elias–Fano/bitmap crossover, ids clustered and spread,
        // and low bits from 0 to 13, so ids straddle every byte and word boundary.
        let mut seed = 0x9e37_79b9_u32;
        for docs in [1u32, 2, 7, 8, 9, 63, 64, 65, 1000, 4096, 10_007] {
            for len in [1u32, 2, 3, 5, 17, 64, 100, 250, 1000, 2500, 4000] {
                if len > docs {
                    continue;
                }
                let mut ids: Vec<u32> = (0..len * 3)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        seed % docs
                    })
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                check(&ids, docs, None);
                let dense: Vec<u32> = (docs - len..docs).collect();
                check(&dense, docs, None);
            }
        }
    }

    #[test]
    fn bytes_no_encoder_writes_are_refused_never_a_panic() {
        let mut bytes = Vec::new();
        encode(&[3, 40, 41, 900], 1000, &mut bytes);
        let mut out = Vec::new();
        // A wrong length or a wrong id count.
        assert!(!decode(&bytes[..bytes.len() - 1], 4, 1000, &mut out));
        assert!(!decode(&bytes, 3, 1000, &mut out));
        assert!(!decode(&bytes, 5, 1000, &mut out));
        // A flipped bit is refused or decodes to another list of valid ids, except in the padding
        // after the low bits, which decoding never reads (the segment's crc covers it).
        let Shape::EliasFano { low_bits, lows, .. } = Shape::of(4, 1000) else {
            panic!("four ids of a thousand are Elias–Fano");
        };
        let padding = 4 * low_bits as usize..lows * 8;
        for at in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[at / 8] ^= 1 << (at % 8);
            // Probing never panics, and keeps candidates only.
            let mut candidates: Vec<u32> = (0..1000).collect();
            retain_present(&damaged, 4, 1000, &mut candidates);
            assert!(candidates.windows(2).all(|w| w[0] < w[1]) && candidates.len() <= 1000);
            let mut out = Vec::new();
            if decode(&damaged, 4, 1000, &mut out) {
                assert_eq!(out == [3, 40, 41, 900], padding.contains(&at), "bit {at}");
                assert!(out.windows(2).all(|w| w[0] < w[1]) && out.iter().all(|&i| i < 1000));
            }
        }
        // A bitmap with a bit past the doc count, or one bit too many.
        assert!(!decode(&[0b1000_0001], 2, 7, &mut Vec::new()));
        assert!(!decode(&[0b0000_0111], 2, 7, &mut Vec::new()));
    }
}
