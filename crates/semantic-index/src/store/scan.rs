//! The cosine scan: every int8 row of the store's segments against the quantized query. The
//! loop is written four times (portable, AVX2, AVX-512 BW, AVX-512 VNNI), chosen per call by what
//! the CPU has; all compute the same integers, so the same cosines.
//!
//! The scan reads the whole matrix for every query, so it is written to keep up with memory:
//! each row's scale is read from the segment's bytes in place (no call per row), and the VNNI
//! kernel multiplies 64 values per instruction.

/// The quantized query as the kernels read it: its int8 values, the same widened to i16, their
/// sum (the VNNI kernel's correction) and its scale.
pub(super) struct ScanQuery {
    q8: Vec<i8>,
    q16: Vec<i16>,
    scale: f32,
}

impl ScanQuery {
    /// The query `q`, whose value `i` stands for `q[i] · scale`.
    pub(super) fn new(q: &[i8], scale: f32) -> Self {
        Self {
            q8: q.to_vec(),
            q16: q.iter().map(|&x| i16::from(x)).collect(),
            scale,
        }
    }
}

/// The scale of row `c`: the `c`-th little-endian f32 of `scales`.
#[inline(always)]
fn scale_at(scales: &[u8], c: usize) -> f32 {
    let b = &scales[4 * c..4 * c + 4];
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The cosine of a row from its exact integer dot product with the query, as every kernel
/// computes it (the same operations in the same order, so the same bits).
#[inline(always)]
fn cosine(dot: i32, qscale: f32, scale: f32) -> f32 {
    (dot as f32 * qscale * scale).clamp(0.0, 1.0)
}

/// Writes into `out` the cosine of each row of `rows` (rows of `dim` int8 values, row `c` with
/// the scale in `scales[4c..4c + 4]`, a little-endian f32) with the query `q`, clamped to
/// `[0, 1]`. Only the first `out.len()` rows are read; `rows` and `scales` must hold them.
pub(super) fn scan(out: &mut [f32], rows: &[u8], dim: usize, q: &ScanQuery, scales: &[u8]) {
    debug_assert!(rows.len() >= out.len() * dim && scales.len() >= out.len() * 4);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512vnni")
        && std::arch::is_x86_feature_detected!("avx512bw")
    {
        // SAFETY: `scan_vnni` needs AVX-512 BW and VNNI, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_vnni(out, rows, dim, q, scales) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: `scan_avx512` needs AVX-512 BW, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx512(out, rows, dim, q, scales) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `scan_avx2` needs AVX2, which the CPU was just found to have.
        #[allow(unsafe_code)]
        return unsafe { scan_avx2(out, rows, dim, q, scales) };
    }
    scan_rows(out, rows, dim, q, scales)
}

/// [`scan_rows`] with AVX-512 VNNI's multiply-add of unsigned by signed bytes: 64 values of a
/// row per instruction, four products summed into each of sixteen i32 lanes, exactly. The row's
/// int8 values are made unsigned by flipping their sign bit (`r + 128`); the sum gained by that,
/// `128 · Σ q`, is taken off again.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw,avx512vnni")]
fn scan_vnni(out: &mut [f32], rows: &[u8], dim: usize, q: &ScanQuery, scales: &[u8]) {
    use std::arch::x86_64::{
        __m512i, _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_reduce_add_epi32,
        _mm512_set1_epi8, _mm512_setzero_si512, _mm512_xor_si512,
    };
    let q8 = &q.q8;
    // The widest multiple of 64 both the row and the query hold.
    let main = dim.min(q8.len()) / 64 * 64;
    let offset: i32 = q8[..main].iter().map(|&x| 128 * i32::from(x)).sum();
    let flip = _mm512_set1_epi8(i8::MIN);
    for (c, (row, slot)) in rows.chunks_exact(dim).zip(out.iter_mut()).enumerate() {
        let mut acc = _mm512_setzero_si512();
        let mut i = 0;
        while i + 64 <= main {
            // SAFETY: `i + 64 <= main <= dim = row.len()` and `main <= q8.len()`, so both
            // unaligned loads read inside their slices.
            #[allow(unsafe_code)]
            let (r, qv) = unsafe {
                (
                    _mm512_loadu_si512(row.as_ptr().add(i).cast::<__m512i>()),
                    _mm512_loadu_si512(q8.as_ptr().add(i).cast::<__m512i>()),
                )
            };
            acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(r, flip), qv);
            i += 64;
        }
        let mut dot = _mm512_reduce_add_epi32(acc) - offset;
        for (&a, &b) in row[i..].iter().zip(&q8[i.min(q8.len())..]) {
            dot += i32::from(a as i8) * i32::from(b);
        }
        *slot = cosine(dot, q.scale, scale_at(scales, c));
    }
}

/// [`scan_rows`] with AVX2's widening multiply-add: sixteen int8 values of a row widened to
/// i16, multiplied by the query's and summed in pairs into eight i32 lanes per instruction.
/// Exact integer arithmetic, as in the portable loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(out: &mut [f32], rows: &[u8], dim: usize, q: &ScanQuery, scales: &[u8]) {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
        _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256,
        _mm256_loadu_si256, _mm256_madd_epi16, _mm256_setzero_si256,
    };
    let q16 = &q.q16;
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
        *slot = cosine(dot, q.scale, scale_at(scales, c));
    }
}

/// [`scan_avx2`] twice as wide: 32 int8 values per widening multiply-add.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn scan_avx512(out: &mut [f32], rows: &[u8], dim: usize, q: &ScanQuery, scales: &[u8]) {
    use std::arch::x86_64::{
        __m256i, __m512i, _mm256_loadu_si256, _mm512_add_epi32, _mm512_cvtepi8_epi16,
        _mm512_loadu_si512, _mm512_madd_epi16, _mm512_reduce_add_epi32, _mm512_setzero_si512,
    };
    let q16 = &q.q16;
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
        *slot = cosine(dot, q.scale, scale_at(scales, c));
    }
}

/// The portable scan: sixteen i32 lanes, which the compiler vectorises for the baseline.
fn scan_rows(out: &mut [f32], rows: &[u8], dim: usize, q: &ScanQuery, scales: &[u8]) {
    let q16 = &q.q16;
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
        *slot = cosine(dot, q.scale, scale_at(scales, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::lcg;

    #[test]
    fn every_scan_kernel_the_cpu_has_computes_the_portable_cosines() {
        let mut state = 7;
        // Widths around the kernels' steps (16, 32 and 64 values), and queries as long as,
        // shorter and longer than a row: every kernel multiplies the pairs both hold, and only
        // those.
        for (dim, q_len) in [
            (256, 256),
            (250, 250),
            (128, 100),
            (130, 200),
            (64, 64),
            (64, 33),
            (32, 32),
            (32, 20),
            (16, 16),
            (7, 7),
            (40, 45),
        ] {
            let rows = 300;
            let mut dense: Vec<u8> = (0..rows * dim).map(|_| lcg(&mut state) as u8).collect();
            // The extremes of int8, where a widening multiply-add could overflow, or a sign
            // flip go wrong, if it were wrong.
            dense[..dim].fill(0x80);
            dense[dim..2 * dim].fill(0x7f);
            let mut q8: Vec<i8> = (0..q_len)
                .map(|_| ((lcg(&mut state) % 255) as i16 - 127) as i8)
                .collect();
            q8[0] = -127;
            q8[q_len - 1] = i8::MIN;
            let query = ScanQuery::new(&q8, 0.01);
            let scales: Vec<f32> = (0..rows).map(|c| 1e-6 * (c + 1) as f32).collect();
            let scale_bytes: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
            // The definition, one product at a time.
            let expected: Vec<f32> = dense
                .chunks_exact(dim)
                .enumerate()
                .map(|(c, row)| {
                    let dot: i32 = row
                        .iter()
                        .zip(&q8)
                        .map(|(&a, &b)| i32::from(a as i8) * i32::from(b))
                        .sum();
                    (dot as f32 * 0.01 * scales[c]).clamp(0.0, 1.0)
                })
                .collect();
            let case = format!("dim {dim}, query {q_len}");
            let check = |kernel: &dyn Fn(&mut [f32]), name: &str| {
                let mut got = vec![-1.0; rows];
                kernel(&mut got);
                assert_eq!(got, expected, "{name} scan, {case}");
            };
            check(
                &|out| scan_rows(out, &dense, dim, &query, &scale_bytes),
                "portable",
            );
            check(
                &|out| scan(out, &dense, dim, &query, &scale_bytes),
                "dispatched",
            );
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                use std::arch::is_x86_feature_detected as has;
                if has!("avx2") {
                    // SAFETY: the CPU has AVX2, checked just above.
                    let kernel = |out: &mut [f32]| unsafe {
                        scan_avx2(out, &dense, dim, &query, &scale_bytes)
                    };
                    check(&kernel, "AVX2");
                }
                if has!("avx512bw") {
                    // SAFETY: the CPU has AVX-512 BW, checked just above.
                    let kernel = |out: &mut [f32]| unsafe {
                        scan_avx512(out, &dense, dim, &query, &scale_bytes)
                    };
                    check(&kernel, "AVX-512");
                }
                if has!("avx512bw") && has!("avx512vnni") {
                    // SAFETY: the CPU has AVX-512 BW and VNNI, checked just above.
                    let kernel = |out: &mut [f32]| unsafe {
                        scan_vnni(out, &dense, dim, &query, &scale_bytes)
                    };
                    check(&kernel, "AVX-512 VNNI");
                }
            }
        }
    }
}
