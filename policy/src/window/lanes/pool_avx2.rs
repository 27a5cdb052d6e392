//! [`LaneJob::pool`] in AVX2 (with BMI2 and POPCNT), for the engine's wide twin
//! (`Engine::step_each_wide`): the same figures, each lane's decisions as one bit of a mask
//! word rather than one word per lane.
//!
//! A byte compare of a word of counts (64 bytes: 8 lanes × 8 flags) against a byte, and a
//! `movemask`, give one bit per (lane, flag): bit `8·i + b` for flag `b` of the word on lane
//! `i`, the layout of the counts in memory. Shifted so that a flag's bits sit at `8·i`, masks
//! of different flags combine with one scalar operation for all lanes, and `popcnt` counts
//! lanes. [`LaneJob::pool`] (the portable form) is the reference: `pool_avx2_agrees` holds
//! the two together.

use super::pool::{shift, Lanes};
use super::*;
use std::arch::x86_64::*;

/// A one in every byte: bit `8·i` is lane `i`.
const ONES: u64 = 0x0101_0101_0101_0101;

/// Lane `i`'s bit at `8·i`, for `flag`'s count in the mask `m` of its word.
#[inline(always)]
fn lanes_of(m: u64, flag: u16) -> u64 {
    (m >> (nr(flag) % 8)) & ONES
}

/// The bytes of the 64 in `a`, `b` (one word of counts) equal to those of `x`, as bits.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn equal(a: __m256i, b: __m256i, x: __m256i) -> u64 {
    let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(a, x)) as u32;
    let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(b, x)) as u32;
    u64::from(lo) | u64::from(hi) << 32
}

/// The bytes of the 64 in `a`, `b` at most 1, as bits.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn at_most_one(a: __m256i, b: __m256i) -> u64 {
    let one = _mm256_set1_epi8(1);
    let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(a, one), a)) as u32;
    let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(b, one), b)) as u32;
    u64::from(lo) | u64::from(hi) << 32
}

/// Per lane of `a`, `b` (the eight lanes of a word of counts), the sum of its bytes kept by
/// `keep` (a mask of bytes of a lane).
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn byte_sums(a: __m256i, b: __m256i, keep: u64) -> __m256i {
    let keep = _mm256_set1_epi64x(keep as i64);
    let zero = _mm256_setzero_si256();
    _mm256_add_epi64(
        _mm256_sad_epu8(_mm256_and_si256(a, keep), zero),
        _mm256_sad_epu8(_mm256_and_si256(b, keep), zero),
    )
}

/// The sum of the four `u64` of `v` (wrapping, but no sum here comes near overflowing).
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum_u64x4(v: __m256i) -> u64 {
    let x = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    (_mm_cvtsi128_si64(x) as u64).wrapping_add(_mm_extract_epi64::<1>(x) as u64)
}

/// The least and the greatest of the eight `u32` of `v`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn min_max_u32x8(v: __m256i) -> (u32, u32) {
    let (lo, hi) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let (mut a, mut b) = (_mm_min_epu32(lo, hi), _mm_max_epu32(lo, hi));
    a = _mm_min_epu32(a, _mm_shuffle_epi32::<0b01_00_11_10>(a));
    b = _mm_max_epu32(b, _mm_shuffle_epi32::<0b01_00_11_10>(b));
    a = _mm_min_epu32(a, _mm_shuffle_epi32::<0b10_11_00_01>(a));
    b = _mm_max_epu32(b, _mm_shuffle_epi32::<0b10_11_00_01>(b));
    (_mm_cvtsi128_si32(a) as u32, _mm_cvtsi128_si32(b) as u32)
}

/// The eight lanes of `a`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_u32x8(a: &[u32; L]) -> __m256i {
    // SAFETY (of the read): `a` is 32 bytes, read unaligned.
    _mm256_loadu_si256(a.as_ptr() as *const __m256i)
}

/// Lanes `4·k` to `4·k + 3` of `a`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_u64x4(a: &[u64; L], k: usize) -> __m256i {
    let q = &a[4 * k..4 * k + 4];
    // SAFETY (of the read): `q` is 32 bytes, read unaligned.
    _mm256_loadu_si256(q.as_ptr() as *const __m256i)
}

/// The eight lanes of `a`.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_u16x8(a: &[u16; L]) -> __m128i {
    // SAFETY (of the read): `a` is 16 bytes, read unaligned.
    _mm_loadu_si128(a.as_ptr() as *const __m128i)
}

impl LaneJob {
    /// [`LaneJob::pool`], in AVX2.
    ///
    /// # Safety
    /// The CPU has every feature enabled here (the engine's `wide` flag says so).
    #[inline]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    pub(crate) unsafe fn pool_avx2(&self, cyc: &Cycle, th: &IngestThresholds) -> Option<LanePool> {
        if self.len == 0 {
            return None;
        }
        let Some(tail_below) = self.frozen_tail_below(cyc, th).filter(|_| !self.any_all_zero()) else {
            return self.pool_lanewise(cyc, th);
        };
        Some(self.pooled(&self.lanes_avx2(tail_below), cyc, th))
    }

    /// [`LaneJob::lanes`], in AVX2.
    ///
    /// # Safety
    /// The CPU has every feature enabled here.
    #[inline]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    pub(super) unsafe fn lanes_avx2(&self, tail_below: u32) -> Lanes {
        let n = self.len;
        let first = &self.rows[self.head as usize];
        let (c0a, c0b) = (load_u64x4(&self.counts[0], 0), load_u64x4(&self.counts[0], 1));
        let (c1a, c1b) = (load_u64x4(&self.counts[1], 0), load_u64x4(&self.counts[1], 1));
        let zero = _mm256_setzero_si256();
        // Counts equal to n (at most `MAX_CAP`, 128: a byte), 0 and 1; counts of word 0 at
        // most 1.
        let all_n = _mm256_set1_epi8(n as u8 as i8);
        let all0 = equal(c0a, c0b, all_n);
        let at_most_one0 = at_most_one(c0a, c0b);
        let all1 = equal(c1a, c1b, all_n);
        let zero1 = equal(c1a, c1b, zero);
        let one1 = equal(c1a, c1b, _mm256_set1_epi8(1));
        // The first row's flags 8–15, lane `i`'s in byte `i`: the marks of word 1's counts.
        let hi = _mm_srli_epi16::<8>(load_u16x8(&first.flags));
        let marks = _mm_cvtsi128_si64(_mm_packus_epi16(hi, hi)) as u64;
        // Counts of word 1 over the rows after the first are zero: the count is the first
        // row's mark (0 or 1).
        let none1 = (zero1 & !marks) | (one1 & marks);
        // Tails: a copy since the last change, which is below `tail_below`.
        let no_copy = _mm_cmpeq_epi16(load_u16x8(&self.copies_since_change), _mm_setzero_si128());
        let no_copy = _mm_movemask_epi8(_mm_packs_epi16(no_copy, no_copy)) as u32 & 0xff;
        // `lco < tail_below` is `min(lco, tail_below − 1) == lco`, and none is below 0.
        let lco = load_u32x8(&self.last_change_off);
        let below = _mm256_cmpeq_epi32(_mm256_min_epu32(lco, _mm256_set1_epi32(tail_below.wrapping_sub(1) as i32)), lco);
        let below = _mm256_movemask_ps(_mm256_castsi256_ps(below)) as u32 & if tail_below == 0 { 0 } else { 0xff };
        let tail = _pdep_u64(u64::from(below & !no_copy), ONES);
        // Lane decisions, bit `8·i` for lane `i` (see `LaneJob::lanes`).
        let two_or_more = if n >= 2 { ONES } else { 0 };
        let pk2 = !lanes_of(at_most_one0, POWER_KNOWN) & ONES;
        let holes = (!lanes_of(none1, GAP_BEFORE) | (pk2 & !lanes_of(none1, COPY_GAP))) & ONES;
        let identical = two_or_more & lanes_of(none1, CHANGED);
        let all_zero = (lanes_of(all1, ZERO_OR_MISSING) | identical) & !lanes_of(zero1, ALL_ZERO) & ONES;
        let frozen = pk2 & (identical | tail);
        let spin = lanes_of(all0, UTIL_SPIN) & lanes_of(all0, POWER_KNOWN) & lanes_of(all0, POWER_SPIN_LOW);
        let count = |m: u64| m.count_ones();
        // Σ (held + free), and Σ power known in the high half.
        let held_free = byte_sums(c0a, c0b, (0xff << shift(MEM_HELD)) | (0xff << shift(MEM_FREE)));
        let power_known = byte_sums(c0a, c0b, 0xff << shift(POWER_KNOWN));
        let known = sum_u64x4(_mm256_add_epi64(held_free, _mm256_slli_epi64::<32>(power_known)));
        // Util, power and memory sums: pairwise, then the halves (no sum overflows a u32).
        let up = _mm256_hadd_epi32(load_u32x8(&self.sum_util_milli), load_u32x8(&self.sum_power_dw));
        let mz = _mm256_hadd_epi32(load_u32x8(&self.sum_mem_mib), zero);
        let s = _mm256_hadd_epi32(up, mz);
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        // Peaks: the front's suffix maximum (when there is a front) and the back's maximum.
        let out = if self.out_len > 0 {
            load_u32x8(&first.suffix_max_milli)
        } else {
            zero
        };
        let (min_peak, max_peak) = min_max_u32x8(_mm256_max_epu32(out, load_u32x8(&self.in_max_milli)));
        Lanes {
            holes: count(holes),
            all_zero: count(all_zero),
            frozen_first: count(frozen & !(holes | all_zero)),
            no_problem: count(ONES & !(holes | all_zero | frozen)),
            undetectable: count(identical & !pk2),
            held: count(lanes_of(all0, MEM_HELD)),
            spin: count(spin),
            min_peak,
            max_peak,
            util_sum: u64::from(_mm_cvtsi128_si32(s) as u32),
            pw_sum: u64::from(_mm_extract_epi32::<1>(s) as u32),
            mem_sum: u64::from(_mm_extract_epi32::<2>(s) as u32),
            mem_n: known & 0xffff_ffff,
            pw_n: known >> 32,
        }
    }
}
