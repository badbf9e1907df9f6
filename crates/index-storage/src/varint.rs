//! LEB128 varints, as both segment formats store postings and offsets.

/// Appends `v` as a LEB128 varint: seven bits a byte, low bits first, the high bit set on every
/// byte but the last.
pub fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at `*at` in `bytes`, moving `*at` past it; `None` when it runs past the end
/// (damage: the caller stops there). Bits past the 32nd are dropped, never a panic.
#[inline]
pub fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    let mut shift = 0u32;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u32::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift = shift.saturating_add(7);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length_boundary() {
        let values = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            2_097_151,
            2_097_152,
            u32::MAX,
        ];
        let mut bytes = Vec::new();
        for v in values {
            put_varint(&mut bytes, v);
        }
        assert_eq!(bytes.len(), 1 + 1 + 1 + 2 + 2 + 3 + 3 + 4 + 5);
        let mut at = 0;
        let read: Vec<u32> = std::iter::from_fn(|| read_varint(&bytes, &mut at)).collect();
        assert_eq!(read, values);
        assert_eq!(at, bytes.len());
    }

    #[test]
    fn a_varint_cut_short_or_overlong_is_none_or_truncated_never_a_panic() {
        let mut at = 0;
        assert_eq!(read_varint(&[0x80, 0x80], &mut at), None);
        let mut at = 0;
        // Eleven continuation bytes: the shift passes 32 bits and the extra bits are dropped.
        let overlong = [0xff; 11]
            .iter()
            .copied()
            .chain([0x01])
            .collect::<Vec<u8>>();
        assert_eq!(read_varint(&overlong, &mut at), Some(u32::MAX));
        assert_eq!(at, overlong.len());
    }
}
