//! The cosine scan: every int8 row of the store's segments against the quantized query. The
//! loop is written three times (portable, AVX2, AVX-512 BW), chosen per call by what the CPU has;
//! all compute the same integers, so the same cosines.

/// Writes into `out` the cosine of each row of `rows` (rows of `dim` int8 values, row `c` with
/// scale `scale(c)`) with the query `q16` (its int8 values widened), clamped to `[0, 1]`. The
/// loop is compiled twice: for the baseline x86-64 (SSE2) and for AVX2, chosen per call by what
/// the CPU has; both compute the same integers, so the same cosines.
pub(super) fn scan(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: `scan_avx512` needs AVX-512 BW, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx512(out, rows, dim, q16, qscale, scale) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `scan_avx2` needs AVX2, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx2(out, rows, dim, q16, qscale, scale) };
    }
    scan_rows(out, rows, dim, q16, qscale, scale)
}

/// [`scan_rows`] with AVX2's widening multiply-add: sixteen int8 values of a row widened to
/// i16, multiplied by the query's and summed in pairs into eight i32 lanes per instruction.
/// Exact integer arithmetic, as in the portable loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
        _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256,
        _mm256_loadu_si256, _mm256_madd_epi16, _mm256_setzero_si256,
    };
    // The widest multiple of 16 both the row and the query hold.
    let main = dim.min(q16.len()) / 16 * 16;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i + 16 <= main {
            // SAFETY: `i + 16 <= main <= dim = row.len()` and `main <= q16.len()`, so both
            // unaligned loads read inside their slices.
            #[allow(unsafe_code)]
            let (r, q) = unsafe {
                (
                    _mm_loadu_si128(row.as_ptr().add(i).cast::<__m128i>()),
                    _mm256_loadu_si256(q16.as_ptr().add(i).cast::<__m256i>()),
                )
            };
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_cvtepi8_epi16(r), q));
            i += 16;
        }
        let half = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256(acc, 1),
        );
        let pairs = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0b10_11_00_01));
        let mut dot = _mm_cvtsi128_si32(one);
        for (&a, &b) in row[i..].iter().zip(&q16[i.min(q16.len())..]) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

/// [`scan_avx2`] twice as wide: 32 int8 values per widening multiply-add.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn scan_avx512(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_loadu_si256, _mm512_add_epi32, _mm512_cvtepi8_epi16,
        _mm512_loadu_si512, _mm512_madd_epi16, _mm512_reduce_add_epi32, _mm512_setzero_si512,
    };
    // The widest multiple of 32 both the row and the query hold.
    let main = dim.min(q16.len()) / 32 * 32;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut acc = _mm512_setzero_si512();
        let mut i = 0;
        while i + 32 <= main {
            // SAFETY: `i + 32 <= main <= dim = row.len()` and `main <= q16.len()`, so both
            // unaligned loads read inside their slices.
            #[allow(unsafe_code)]
            let (r, q) = unsafe {
                (
                    _mm256_loadu_si256(row.as_ptr().add(i).cast::<__m256i>()),
                    _mm512_loadu_si512(q16.as_ptr().add(i).cast::<__m512i>()),
                )
            };
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_cvtepi8_epi16(r), q));
            i += 32;
        }
        let mut dot = _mm512_reduce_add_epi32(acc);
        for (&a, &b) in row[i..].iter().zip(&q16[i.min(q16.len())..]) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

/// The portable scan: sixteen i32 lanes, which the compiler vectorises for the baseline.
fn scan_rows(
    out: &mut [f32],
    rows: &[u8],
    dim: usize,
    q16: &[i16],
    qscale: f32,
    scale: &dyn Fn(u32) -> f32,
) {
    // The widest multiple of 16 both the row and the query hold; the rest one by one, as the
    // SIMD kernels do.
    let main = dim.min(q16.len()) / 16 * 16;
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut lanes = [0i32; 16];
        let (row_main, row_tail) = row.split_at(main);
        let (q_main, q_tail) = q16.split_at(main);
        for (r, qq) in row_main.chunks_exact(16).zip(q_main.chunks_exact(16)) {
            for k in 0..16 {
                lanes[k] += i32::from(r[k] as i8) * i32::from(qq[k]);
            }
        }
        let mut dot: i32 = lanes.iter().sum();
        for (&a, &b) in row_tail.iter().zip(q_tail) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = (dot as f32 * qscale * scale(c as u32)).clamp(0.0, 1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::lcg;

    #[test]
    fn every_scan_kernel_the_cpu_has_computes_the_portable_cosines() {
        let mut state = 7;
        // Widths around the kernels' steps, and queries as long as, shorter and longer than a
        // row: every kernel multiplies the pairs both hold, and only those.
        for (dim, q_len) in [
            (256, 256),
            (250, 250),
            (32, 32),
            (32, 20),
            (16, 16),
            (7, 7),
            (40, 45),
            (64, 33),
        ] {
            let rows = 300;
            let mut dense: Vec<u8> = (0..rows * dim).map(|_| lcg(&mut state) as u8).collect();
            // The extremes of int8, where a widening multiply-add could overflow if it were wrong.
            dense[..dim].fill(0x80);
            dense[dim..2 * dim].fill(0x7f);
            let mut q16: Vec<i16> = (0..q_len)
                .map(|_| (lcg(&mut state) % 255) as i16 - 127)
                .collect();
            q16[0] = -127;
            let scales: Vec<f32> = (0..rows).map(|c| 1e-6 * (c + 1) as f32).collect();
            let scale = |c: u32| scales[c as usize];
            // The definition, one product at a time.
            let expected: Vec<f32> = dense
                .chunks_exact(dim)
                .enumerate()
                .map(|(c, row)| {
                    let dot: i32 = row
                        .iter()
                        .zip(&q16)
                        .map(|(&a, &b)| i32::from(a as i8) * i32::from(b))
                        .sum();
                    (dot as f32 * 0.01 * scales[c]).clamp(0.0, 1.0)
                })
                .collect();
            let case = format!("dim {dim}, query {q_len}");
            let mut got = vec![-1.0; rows];
            scan_rows(&mut got, &dense, dim, &q16, 0.01, &scale);
            assert_eq!(got, expected, "portable scan, {case}");
            let mut got = vec![-1.0; rows];
            scan(&mut got, &dense, dim, &q16, 0.01, &scale);
            assert_eq!(got, expected, "dispatched scan, {case}");
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut got = vec![-1.0; rows];
                    // SAFETY: the CPU has AVX2, checked just above.
                    unsafe { scan_avx2(&mut got, &dense, dim, &q16, 0.01, &scale) };
                    assert_eq!(got, expected, "AVX2 scan, {case}");
                }
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    let mut got = vec![-1.0; rows];
                    // SAFETY: the CPU has AVX-512 BW, checked just above.
                    unsafe { scan_avx512(&mut got, &dense, dim, &q16, 0.01, &scale) };
                    assert_eq!(got, expected, "AVX-512 scan, {case}");
                }
            }
        }
    }
}
