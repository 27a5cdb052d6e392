//! The lane path's classifier and push in hand-written AVX2: [`classify_lanes`] and the row
//! `LaneJob::ingest` writes, for the CPUs `Engine::step_each_wide` runs on. The scalar forms
//! in `lanes.rs` stay the fallback and the reference: every result here is bit for bit theirs
//! (`avx2_classify_agrees_with_scalar` below, and `lane_equivalence.rs`, whose lane engine
//! runs this code where the CPU has AVX2).
//!
//! How each scalar step maps to vector code (four `f64` lanes a vector, two vectors a job):
//! - guard 3's bounds ([`Reading::within`], `within_from`, `within_positive`) are integer
//!   comparisons on the bits; on a non-negative bound they equal ordered float comparisons
//!   (`0 <= v <= hi`, `lo <= v <= hi`, `0 < v <= hi`): NaN (missing included) fails both,
//!   every negative value but −0.0 fails `0 <= v`, +∞ fails `v <= hi`, subnormals order as
//!   their bits (Rust never sets flush-to-zero or denormals-are-zero);
//! - products and sums are the scalar's, one operation each (no FMA), in the same order;
//! - `as u32` / `as u16` truncations take values that are non-negative, not NaN and below
//!   2^31 (compute ≤ 100, memory ≤ 2^20 MiB, power ≤ 2,000 W, each only where its field is
//!   in bounds; elsewhere the value is masked to +0.0 first), where `cvttpd` truncates alike.

use super::*;
use std::arch::x86_64::*;

const _: () = assert!(L == 8, "the AVX2 forms are written for eight lanes");

/// Eight `i32` lanes of one value.
macro_rules! i32s {
    ($x:expr) => {
        _mm256_set1_epi32($x)
    };
}

/// One cycle's samples of a lane job, classified, in vector registers: [`LaneClass`] as
/// vectors. Lanes 0–3 are in element `[0]`, lanes 4–7 in `[1]` of each pair.
#[derive(Clone, Copy)]
pub(super) struct LaneClassV {
    pub(super) fine: bool,
    pub(super) t_s: [__m256i; 2],
    /// The bits of util, SM activity, memory used and power (as [`LaneClass::bits`]).
    pub(super) bits: [[__m256i; 2]; FROZEN_FIELDS],
    /// All-ones where the field is known (as [`LaneClass::known`]).
    pub(super) known: [[__m256i; 2]; FROZEN_FIELDS],
    /// Eight `u32`.
    pub(super) util_milli: __m256i,
    /// Eight `u32`.
    pub(super) mem_mib: __m256i,
    /// Eight `u16`.
    pub(super) power_dw: __m128i,
    /// Eight `u32` (each below 2^16).
    pub(super) flags: __m256i,
}

/// Two vectors of four 64-bit lanes narrowed to one of eight 32-bit lanes (the low halves),
/// in lane order.
#[inline]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn narrow(lo: __m256i, hi: __m256i) -> __m256i {
    // [lo0 lo1 hi0 hi1 | lo2 lo3 hi2 hi3] in 32-bit units, then the 64-bit pairs reordered.
    let x = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi)));
    _mm256_permute4x64_epi64::<0b11_01_10_00>(x)
}

/// Eight `u32` below 2^16 as eight `u16`.
#[inline]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn to_u16(x: __m256i) -> __m128i {
    _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256::<1>(x))
}

/// [`classify_lanes`] in vector registers.
///
/// # Safety
/// The CPU must have every feature named.
#[inline]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
pub(super) unsafe fn classify_lanes_v<'a>(sample: &impl Fn(usize) -> &'a Sample, th: &IngestThresholds) -> LaneClassV {
    use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W, MAX_PROCS, MIN_POWER_W};
    // Written out: `std::array::from_fn` leaves calls to a closure per lane.
    let s: [&Sample; L] = [
        sample(0),
        sample(1),
        sample(2),
        sample(3),
        sample(4),
        sample(5),
        sample(6),
        sample(7),
    ];
    // Lanes 0–3 and 4–7 of a reading.
    macro_rules! lanes {
        ($f:ident) => {
            [
                _mm256_set_pd(s[3].$f.raw(), s[2].$f.raw(), s[1].$f.raw(), s[0].$f.raw()),
                _mm256_set_pd(s[7].$f.raw(), s[6].$f.raw(), s[5].$f.raw(), s[4].$f.raw()),
            ]
        };
    }
    let t_s = [
        _mm256_set_epi64x(s[3].t_s, s[2].t_s, s[1].t_s, s[0].t_s),
        _mm256_set_epi64x(s[7].t_s, s[6].t_s, s[5].t_s, s[4].t_s),
    ];
    let (u, sm, mt, mu, p, l) = (
        lanes!(util_pct),
        lanes!(sm_active),
        lanes!(mem_total_mib),
        lanes!(mem_used_mib),
        lanes!(power_w),
        lanes!(power_limit_w),
    );
    // The process count as one small number: 0..=MAX_PROCS as is, MAX_PROCS + 1 for any
    // count above (rejected, `u32::MAX` included), MAX_PROCS + 2 for none.
    let q = |s: &Sample| match s.procs {
        Some(n) => n.min(MAX_PROCS + 1) as i32,
        None => (MAX_PROCS + 2) as i32,
    };
    let q = _mm256_setr_epi32(q(s[0]), q(s[1]), q(s[2]), q(s[3]), q(s[4]), q(s[5]), q(s[6]), q(s[7]));

    let zero = _mm256_setzero_pd();
    let missing = _mm256_set1_epi64x(Reading::MISSING.to_bits() as i64);
    // Short names, as macros: a closure would not inherit the target features.
    macro_rules! c {
        ($x:expr) => {
            _mm256_set1_pd($x)
        };
    }
    macro_rules! bits {
        ($x:expr) => {
            _mm256_castpd_si256($x)
        };
    }
    macro_rules! and {
        ($a:expr, $b:expr $(,)?) => {
            _mm256_and_pd($a, $b)
        };
    }
    macro_rules! or {
        ($a:expr, $b:expr $(,)?) => {
            _mm256_or_pd($a, $b)
        };
    }
    // A field is acceptable when missing or in bounds (`!bad` of the scalar form).
    macro_rules! ok_or_missing {
        ($v:expr, $ok:expr) => {
            or!(_mm256_castsi256_pd(_mm256_cmpeq_epi64(bits!($v), missing)), $ok)
        };
    }
    macro_rules! flag {
        ($f:expr) => {
            _mm256_castsi256_pd(_mm256_set1_epi64x(i64::from($f)))
        };
    }
    let (mut known, mut vbits) = (
        [[_mm256_setzero_si256(); 2]; FROZEN_FIELDS],
        [[_mm256_setzero_si256(); 2]; FROZEN_FIELDS],
    );
    let (mut fine, mut good) = ([zero; 2], [zero; 2]);
    let (mut um, mut mem, mut pw, mut f64s) = (
        [_mm_setzero_si128(); 2],
        [_mm_setzero_si128(); 2],
        [_mm_setzero_si128(); 2],
        [_mm256_setzero_si256(); 2],
    );
    for h in 0..2 {
        let (u, sm, mt, mu, p, l) = (u[h], sm[h], mt[h], mu[h], p[h], l[h]);
        let u_ok = and!(_mm256_cmp_pd::<_CMP_GE_OQ>(u, zero), _mm256_cmp_pd::<_CMP_LE_OQ>(u, c!(100.0)));
        let sm_ok = and!(_mm256_cmp_pd::<_CMP_GE_OQ>(sm, zero), _mm256_cmp_pd::<_CMP_LE_OQ>(sm, c!(1.0)));
        let mt_ok = and!(
            _mm256_cmp_pd::<_CMP_GT_OQ>(mt, zero),
            _mm256_cmp_pd::<_CMP_LE_OQ>(mt, c!(MAX_MEM_MIB))
        );
        let mu_in = and!(
            _mm256_cmp_pd::<_CMP_GE_OQ>(mu, zero),
            _mm256_cmp_pd::<_CMP_LE_OQ>(mu, c!(MAX_MEM_MIB))
        );
        let mu_over = and!(and!(mu_in, mt_ok), _mm256_cmp_pd::<_CMP_GT_OQ>(mu, mt));
        let mu_ok = _mm256_andnot_pd(mu_over, mu_in);
        let p_ok = and!(
            _mm256_cmp_pd::<_CMP_GE_OQ>(p, c!(MIN_POWER_W)),
            _mm256_cmp_pd::<_CMP_LE_OQ>(p, c!(MAX_POWER_W))
        );
        let l_ok = and!(
            _mm256_cmp_pd::<_CMP_GE_OQ>(l, c!(MIN_POWER_W)),
            _mm256_cmp_pd::<_CMP_LE_OQ>(l, c!(MAX_POWER_W))
        );
        good[h] = _mm256_andnot_pd(
            mu_over,
            and!(
                and!(
                    and!(ok_or_missing!(u, u_ok), ok_or_missing!(sm, sm_ok)),
                    and!(ok_or_missing!(mt, mt_ok), ok_or_missing!(mu, mu_in))
                ),
                and!(ok_or_missing!(p, p_ok), ok_or_missing!(l, l_ok)),
            ),
        );
        // SM activity is a compute reading only at 0 (see `classify`).
        fine[h] = and!(good[h], or!(u_ok, and!(sm_ok, _mm256_cmp_pd::<_CMP_EQ_OQ>(sm, zero))));
        // `u` where known, else SM activity × 100 where known, else +0.0.
        let compute = _mm256_blendv_pd(and!(sm_ok, _mm256_mul_pd(sm, c!(100.0))), u, u_ok);
        um[h] = _mm256_cvttpd_epi32(_mm256_add_pd(_mm256_mul_pd(compute, c!(1000.0)), c!(0.5)));
        mem[h] = _mm256_cvttpd_epi32(and!(mu_ok, _mm256_add_pd(mu, c!(0.5))));
        pw[h] = _mm256_cvttpd_epi32(and!(p_ok, _mm256_add_pd(_mm256_mul_pd(p, c!(10.0)), c!(0.5))));
        let held = _mm256_cmp_pd::<_CMP_GE_OQ>(
            mu,
            _mm256_blendv_pd(c!(th.mem_held_mib), _mm256_mul_pd(c!(th.mem_held_frac), mt), mt_ok),
        );
        let idle = _mm256_cmp_pd::<_CMP_LE_OQ>(
            p,
            _mm256_blendv_pd(c!(th.idle_power_w), _mm256_mul_pd(c!(th.idle_power_frac), l), l_ok),
        );
        let spin_low = _mm256_cmp_pd::<_CMP_LE_OQ>(
            p,
            _mm256_blendv_pd(c!(th.idle_power_w), _mm256_mul_pd(c!(th.spin_power_frac), l), l_ok),
        );
        let cz = _mm256_cmp_pd::<_CMP_EQ_OQ>(compute, zero);
        let muz = _mm256_cmp_pd::<_CMP_EQ_OQ>(mu, zero);
        let pz = _mm256_cmp_pd::<_CMP_EQ_OQ>(p, zero);
        let mem_f = and!(mu_ok, _mm256_blendv_pd(flag!(MEM_FREE), flag!(MEM_HELD), held));
        let pow_f = and!(
            p_ok,
            or!(
                flag!(POWER_KNOWN),
                or!(and!(idle, flag!(POWER_IDLE)), and!(spin_low, flag!(POWER_SPIN_LOW)))
            )
        );
        let all_zero = and!(and!(cz, and!(muz, pz)), flag!(ALL_ZERO));
        // compute == 0 & (mu == 0 | !mu_ok) & !p_ok.
        let zom = and!(
            _mm256_andnot_pd(_mm256_andnot_pd(muz, mu_ok), _mm256_andnot_pd(p_ok, cz)),
            flag!(ZERO_OR_MISSING)
        );
        f64s[h] = bits!(or!(or!(mem_f, pow_f), or!(all_zero, zom)));
        for (f, (v, k)) in [(u, u_ok), (sm, sm_ok), (mu, mu_ok), (p, p_ok)].into_iter().enumerate() {
            vbits[f][h] = bits!(v);
            known[f][h] = bits!(k);
        }
    }
    let util_milli = _mm256_set_m128i(um[1], um[0]);
    let procs_zero = _mm256_cmpeq_epi32(q, _mm256_setzero_si256());
    let procs_pos = _mm256_and_si256(
        _mm256_cmpgt_epi32(q, _mm256_setzero_si256()),
        _mm256_cmpgt_epi32(i32s!(MAX_PROCS as i32 + 1), q),
    );
    let procs_bad = _mm256_cmpeq_epi32(q, i32s!(MAX_PROCS as i32 + 1));
    // util_milli >= spin_util_milli, unsigned.
    let spin = _mm256_cmpeq_epi32(_mm256_max_epu32(util_milli, i32s!(th.spin_util_milli as i32)), util_milli);
    let flags = _mm256_or_si256(
        narrow(f64s[0], f64s[1]),
        _mm256_or_si256(
            _mm256_or_si256(
                _mm256_and_si256(procs_zero, i32s!(PROCS_ZERO.into())),
                _mm256_and_si256(procs_pos, i32s!(PROCS_POS.into())),
            ),
            _mm256_and_si256(spin, i32s!(UTIL_SPIN.into())),
        ),
    );
    let fine = _mm256_movemask_pd(and!(fine[0], fine[1])) == 0xf && _mm256_testz_si256(procs_bad, procs_bad) == 1;
    LaneClassV {
        fine,
        t_s,
        bits: vbits,
        known,
        util_milli,
        mem_mib: _mm256_set_m128i(mem[1], mem[0]),
        power_dw: _mm_packus_epi32(pw[0], pw[1]),
        flags,
    }
}

/// [`classify_lanes`] by [`classify_lanes_v`], stored as the scalar form gives it.
///
/// # Safety
/// The CPU must have every feature named.
#[cfg(test)]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn classify_lanes_avx2<'a>(sample: &impl Fn(usize) -> &'a Sample, th: &IngestThresholds) -> LaneClass {
    let v = classify_lanes_v(sample, th);
    let mut c = LaneClass {
        fine: v.fine,
        t_s: [0; L],
        util_milli: [0; L],
        mem_mib: [0; L],
        power_dw: [0; L],
        flags: [0; L],
        bits: [[0; L]; FROZEN_FIELDS],
        known: [[false; L]; FROZEN_FIELDS],
    };
    // SAFETY (every store below): each destination is an array of exactly the bytes stored
    // (eight `u32`, eight `u16`, four `i64`/`u64` from lane `4 h`); unaligned stores.
    for h in 0..2 {
        _mm256_storeu_si256(c.t_s[4 * h..].as_mut_ptr() as *mut __m256i, v.t_s[h]);
        for f in 0..FROZEN_FIELDS {
            _mm256_storeu_si256(c.bits[f][4 * h..].as_mut_ptr() as *mut __m256i, v.bits[f][h]);
            let m = _mm256_movemask_pd(_mm256_castsi256_pd(v.known[f][h]));
            for i in 0..4 {
                c.known[f][4 * h + i] = m & (1 << i) != 0;
            }
        }
    }
    _mm256_storeu_si256(c.util_milli.as_mut_ptr() as *mut __m256i, v.util_milli);
    _mm256_storeu_si256(c.mem_mib.as_mut_ptr() as *mut __m256i, v.mem_mib);
    _mm_storeu_si128(c.power_dw.as_mut_ptr() as *mut __m128i, v.power_dw);
    _mm_storeu_si128(c.flags.as_mut_ptr() as *mut __m128i, to_u16(v.flags));
    c
}

impl LaneJob {
    /// `LaneJob::ingest` in AVX2: the same checks (`admit`), then the freeze check, the
    /// flags, the row and the sums in vector code.
    ///
    /// # Safety
    /// The CPU must have every feature named.
    #[inline]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    pub(super) unsafe fn ingest_avx2<'a>(
        &mut self,
        sample: &impl Fn(usize) -> &'a Sample,
        start_s: i64,
        cyc: &Cycle,
        th: &IngestThresholds,
    ) -> bool {
        let t = sample(0).t_s;
        let c = classify_lanes_v(sample, th);
        let tv = _mm256_set1_epi64x(t);
        let same_t = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_and_si256(
            _mm256_cmpeq_epi64(c.t_s[0], tv),
            _mm256_cmpeq_epi64(c.t_s[1], tv),
        ))) == 0xf;
        let Some(a) = self.admit(t, c.fine && same_t, start_s, cyc, th) else {
            return false;
        };
        // The freeze check: a lane changed where a known field's bits differ from the last
        // known ones, which that field then becomes.
        let mut changed = [_mm256_set1_epi64x(if a.first { -1 } else { 0 }); 2];
        for f in 0..FROZEN_FIELDS {
            for h in 0..2 {
                let p = self.last_bits[f][4 * h..].as_mut_ptr() as *mut __m256i;
                // SAFETY: `p` points at four `u64` of `last_bits[f]`.
                let last = _mm256_loadu_si256(p);
                let (b, k) = (c.bits[f][h], c.known[f][h]);
                let ne = _mm256_andnot_si256(_mm256_cmpeq_epi64(b, last), k);
                changed[h] = _mm256_or_si256(changed[h], ne);
                // Where no lane changed, every lane's bits are unknown or equal to the last:
                // the blend would store `last` again. Not storing keeps the cache line clean.
                if _mm256_testz_si256(ne, ne) == 0 {
                    // SAFETY: as the load.
                    _mm256_storeu_si256(p, _mm256_blendv_epi8(last, b, k));
                }
            }
        }
        let ch = narrow(changed[0], changed[1]);
        let ones = i32s!(-1);
        let lco_p = self.last_change_off.as_mut_ptr() as *mut __m256i;
        let copies_p = self.copies_since_change.as_mut_ptr() as *mut __m128i;
        // SAFETY: eight `u32` and eight `u16`.
        let (lco, copies) = (_mm256_loadu_si256(lco_p), _mm256_cvtepu16_epi32(_mm_loadu_si128(copies_p)));
        // `i64::from(lco) < copy_before`, for `lco` below `u32::MAX`: never when
        // `copy_before <= 0`, else `lco <= copy_before − 1` (clamped to `u32::MAX`).
        let before = if a.copy_before > 0 {
            let lim = i32s!((a.copy_before - 1).min(i64::from(u32::MAX)) as u32 as i32);
            _mm256_cmpeq_epi32(_mm256_max_epu32(lco, lim), lim)
        } else {
            _mm256_setzero_si256()
        };
        let zero = _mm256_setzero_si256();
        let copy_gap = _mm256_andnot_si256(
            _mm256_or_si256(_mm256_cmpeq_epi32(copies, zero), _mm256_cmpeq_epi32(lco, ones)),
            _mm256_and_si256(ch, before),
        );
        let gap = if a.gap { GAP_BEFORE } else { 0 };
        let flags = _mm256_or_si256(
            _mm256_or_si256(c.flags, i32s!(gap.into())),
            _mm256_or_si256(
                _mm256_and_si256(ch, i32s!(CHANGED.into())),
                _mm256_and_si256(copy_gap, i32s!(COPY_GAP.into())),
            ),
        );
        let t_off = i32s!(a.t_off as i32);
        let copies = _mm256_andnot_si256(ch, _mm256_min_epu32(_mm256_add_epi32(copies, i32s!(1)), i32s!(u16::MAX.into())));
        let in_max_p = self.in_max_milli.as_mut_ptr() as *mut __m256i;
        // SAFETY: eight `u32` each (`last_change_off`, `in_max_milli`), eight `u16`
        // (`copies_since_change`).
        _mm256_storeu_si256(lco_p, _mm256_blendv_epi8(lco, t_off, ch));
        _mm_storeu_si128(copies_p, to_u16(copies));
        _mm256_storeu_si256(in_max_p, _mm256_max_epu32(_mm256_loadu_si256(in_max_p), c.util_milli));
        let flags16 = to_u16(flags);
        let row = &mut self.rows[a.s];
        // SAFETY: each field of the row is eight `u32` or eight `u16`.
        _mm256_storeu_si256(row.util_milli.as_mut_ptr() as *mut __m256i, c.util_milli);
        _mm256_storeu_si256(row.suffix_max_milli.as_mut_ptr() as *mut __m256i, zero);
        _mm256_storeu_si256(row.mem_mib.as_mut_ptr() as *mut __m256i, c.mem_mib);
        _mm_storeu_si128(row.power_dw.as_mut_ptr() as *mut __m128i, c.power_dw);
        _mm_storeu_si128(row.flags.as_mut_ptr() as *mut __m128i, flags16);
        self.t_off[a.s] = a.t_off;
        self.last_valid_t_s = t;
        self.len += 1;
        self.add_avx2(flags16, c.util_milli, c.mem_mib, c.power_dw);
        true
    }

    /// `LaneJob::add` of a row with these flags and readings.
    #[inline]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    unsafe fn add_avx2(&mut self, flags: __m128i, util: __m256i, mem: __m256i, power: __m128i) {
        // The flag counts: byte `b` of lane `i`'s word `w` gains bit `8 w + b` of its flags
        // (`spread_flags`). Each 64-bit lane takes its flags byte in all eight bytes, keeps
        // bit `b` in byte `b`, and turns it into 0 or 1.
        let f = _mm256_broadcastsi128_si256(flags);
        let sel = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let one = _mm256_set1_epi8(1);
        // Byte indices within each 128-bit half: lanes (0, 1), (2, 3), (4, 5), (6, 7).
        for w in 0..2 {
            for h in 0..2 {
                let (a, b) = ((8 * h + w) as i8, (8 * h + w + 2) as i8);
                #[rustfmt::skip]
                let idx = _mm256_setr_epi8(
                    a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b,
                    a + 4, a + 4, a + 4, a + 4, a + 4, a + 4, a + 4, a + 4, b + 4, b + 4, b + 4, b + 4, b + 4, b + 4, b + 4, b + 4,
                );
                let spread = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(f, idx), sel), sel), one);
                let p = self.counts[w][4 * h..].as_mut_ptr() as *mut __m256i;
                // SAFETY: four `u64` of `counts[w]`.
                _mm256_storeu_si256(p, _mm256_add_epi64(_mm256_loadu_si256(p), spread));
            }
        }
        for (sum, v) in [
            (&mut self.sum_util_milli, util),
            (&mut self.sum_mem_mib, mem),
            (&mut self.sum_power_dw, _mm256_cvtepu16_epi32(power)),
        ] {
            let p = sum.as_mut_ptr() as *mut __m256i;
            // SAFETY: eight `u32`.
            _mm256_storeu_si256(p, _mm256_add_epi32(_mm256_loadu_si256(p), v));
        }
        for h in 0..2 {
            let p64 = _mm256_cvtepu16_epi64(if h == 0 { power } else { _mm_unpackhi_epi64(power, power) });
            let p = self.sum_power_sq[4 * h..].as_mut_ptr() as *mut __m256i;
            // SAFETY: four `u64` of `sum_power_sq`.
            _mm256_storeu_si256(p, _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_mul_epu32(p64, p64)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W, MAX_PROCS, MIN_POWER_W};
    use proptest::prelude::*;

    /// Random thresholds: memory held fraction and MiB, idle power fraction and watts, spin
    /// power fraction, spin util (milli-percent).
    type Th = (f64, f64, f64, f64, f64, u32);

    /// True when the CPU has what the AVX2 forms are compiled for (as `engine::wide_cpu`).
    fn wide() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt")
    }

    /// `x` and its neighbours one unit in the last place either way.
    fn around(x: f64) -> [f64; 3] {
        [
            f64::from_bits(x.to_bits().wrapping_sub(1)),
            x,
            f64::from_bits(x.to_bits().wrapping_add(1)),
        ]
    }

    /// Values that try every edge: guard 3's bounds and their neighbours, signed zeros,
    /// subnormals, infinities, NaNs of either sign, and huge values.
    fn specials() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::from_bits(1),
            -f64::from_bits(1),
            f64::MIN_POSITIVE / 2.0,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001), // a signalling NaN
            f64::MAX,
            f64::MIN,
            1e300,
            4_294_967_295.0,
            4_294_967_296.0,
            65_535.0,
            65_536.0,
            6_553.5,
            -1.0,
            0.5,
            0.49999999999999994,
            42.0,
            81_920.0,
            400.0,
            300.0,
        ];
        for b in [100.0, 1.0, MAX_MEM_MIB, MIN_POWER_W, MAX_POWER_W, 0.01, 0.001] {
            v.extend(around(b));
        }
        v
    }

    fn reading(th: Th) -> impl Strategy<Value = Reading> {
        let (held_frac, held_mib, idle_frac, idle_w, spin_frac, spin_milli) = th;
        let mut v = specials();
        for x in [held_mib, idle_w, f64::from(spin_milli) / 1000.0, held_frac, idle_frac, spin_frac] {
            v.extend(around(x));
        }
        prop_oneof![
            2 => Just(Reading::MISSING),
            6 => proptest::sample::select(v).prop_map(Reading::value),
            2 => (-10.0f64..3000.0).prop_map(Reading::value),
            2 => (0.0f64..100.0).prop_map(Reading::value),
            1 => (0.0f64..1.0).prop_map(Reading::value),
            1 => (0u32..2_000_000).prop_map(|x| Reading::value(f64::from(x))),
            1 => any::<u64>().prop_map(|b| Reading::value(f64::from_bits(b))),
        ]
    }

    /// One lane: random readings, some tied to the thresholds (memory used exactly at the
    /// held fraction of the total, power exactly at the idle or spin fraction of the limit).
    fn lane(th: Th) -> impl Strategy<Value = Sample> {
        let (held_frac, _, idle_frac, _, spin_frac, _) = th;
        (
            (reading(th), reading(th), reading(th), reading(th), reading(th), reading(th)),
            prop_oneof![
                Just(None),
                (0u32..5).prop_map(Some),
                Just(Some(MAX_PROCS)),
                Just(Some(MAX_PROCS + 1)),
                Just(Some(MAX_PROCS + 2)),
                Just(Some(u32::MAX)),
                Just(Some(u32::MAX - 1)),
                Just(Some(i32::MAX as u32 + 1)),
                any::<u32>().prop_map(Some),
            ],
            0u8..8,
            prop_oneof![8 => Just(60i64), 1 => any::<i64>(), 1 => 59i64..62],
        )
            .prop_map(move |((u, sm, mt, mu, p, l), procs, tie, t_s)| {
                let tied = |x: f64| Reading::value(x);
                let (mu, p) = match tie {
                    1 => (tied(held_frac * mt.raw()), p),
                    2 => (mu, tied(idle_frac * l.raw())),
                    3 => (mu, tied(spin_frac * l.raw())),
                    _ => (mu, p),
                };
                Sample {
                    t_s,
                    util_pct: u,
                    sm_active: sm,
                    mem_total_mib: mt,
                    mem_used_mib: mu,
                    power_w: p,
                    power_limit_w: l,
                    procs,
                    ..Sample::default()
                }
            })
    }

    fn thresholds() -> impl Strategy<Value = Th> {
        let frac = || prop_oneof![Just(0.0), Just(1.0), Just(0.5), 0.0f64..1.0, Just(f64::NAN)];
        let val = || prop_oneof![Just(0.0), Just(1.0), Just(100.0), 0.0f64..100_000.0, Just(f64::INFINITY)];
        let milli = prop_oneof![
            Just(0u32),
            Just(1),
            Just(100_000),
            Just(100_001),
            Just(u32::MAX),
            Just(i32::MAX as u32 + 1),
            0u32..100_001
        ];
        (frac(), val(), frac(), val(), frac(), milli)
    }

    fn cases() -> impl Strategy<Value = (Th, Vec<Sample>)> {
        thresholds().prop_flat_map(|th| (Just(th), proptest::collection::vec(lane(th), L)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 1000 } else { 4000 }))]

        /// The AVX2 classifier gives exactly what the scalar [`classify_lanes`] gives, field
        /// by field and bit for bit, on any input and under any thresholds.
        #[test]
        fn avx2_classify_agrees_with_scalar((t, samples) in cases()) {
            if !wide() {
                return Ok(());
            }
            let (held_frac, held_mib, idle_frac, idle_w, spin_frac, spin_milli) = t;
            let th = IngestThresholds {
                mem_held_frac: held_frac,
                mem_held_mib: held_mib,
                idle_power_frac: idle_frac,
                idle_power_w: idle_w,
                spin_power_frac: spin_frac,
                spin_util_milli: spin_milli,
                ..IngestThresholds::new(&PolicyConfig::default())
            };
            let want = classify_lanes(&|i| &samples[i], &th);
            // SAFETY: `wide()` checked every feature.
            let got = unsafe { classify_lanes_avx2(&|i| &samples[i], &th) };
            prop_assert_eq!(got.fine, want.fine);
            prop_assert_eq!(got.t_s, want.t_s);
            prop_assert_eq!(got.flags, want.flags);
            prop_assert_eq!(got.util_milli, want.util_milli);
            prop_assert_eq!(got.mem_mib, want.mem_mib);
            prop_assert_eq!(got.power_dw, want.power_dw);
            prop_assert_eq!(got.bits, want.bits);
            prop_assert_eq!(got.known, want.known);
            let t0 = samples[0].t_s;
            prop_assert_eq!(got.same_t(t0), want.same_t(t0));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 100 } else { 1000 }))]

        /// `LaneJob::ingest` with the AVX2 push leaves exactly the state the scalar one
        /// leaves (every field, every row, the ring and the clocks), and takes or refuses
        /// the same cycles, over runs of cycles: readings that change or repeat (freezes,
        /// copy gaps), gaps, repeated and late stamps, invalid fields, evictions, from any
        /// copy count and last change.
        #[test]
        fn avx2_ingest_agrees_with_scalar(
            steps in proptest::collection::vec((0u8..6, prop_oneof![6 => Just(60i64), 1 => Just(0i64), 1 => 1i64..400, 1 => -120i64..0], 0u8..16, 0i64..120), 1..90),
            per_lane in proptest::collection::vec(0u8..6, L),
            max_gap in prop_oneof![4 => Just(180i64), 4 => 0i64..400, 1 => Just(-5_000_000_000i64)],
            start in proptest::collection::vec((prop_oneof![Just(0u16), Just(1), Just(u16::MAX), any::<u16>()], prop_oneof![Just(u32::MAX), Just(0u32), any::<u32>()]), L),
        ) {
            if !wide() {
                return Ok(());
            }
            let cfg = PolicyConfig::default();
            let th = IngestThresholds { max_gap_s: max_gap, ..IngestThresholds::new(&cfg) };
            let cap = lane_cap(&th).expect("the defaults take the lane path");
            let (mut a, mut b) = (LaneJob::empty(cap), LaneJob::empty(cap));
            // Any copy count and last change to start from (as a restored state may hold),
            // and gaps that put every change before the copy gap's limit (`max_gap < 0`).
            for (i, &(copies, lco)) in start.iter().enumerate() {
                for j in [&mut a, &mut b] {
                    j.copies_since_change[i] = copies;
                    j.last_change_off[i] = lco;
                }
            }
            let mut t = 1_000_000i64;
            for (k, &(kind, dt, spoil, lag)) in steps.iter().enumerate() {
                t += dt;
                let samples: Vec<Sample> = (0..L)
                    .map(|i| {
                        let v = (per_lane[i] + kind) % 6;
                        let (u, mu, pw) = match v {
                            0 => (95.0 + (k % 3) as f64, 60_000.0, 300.0 + (k % 2) as f64),
                            1 => (0.0, 0.0, 60.0),
                            2 => (0.0, 30_000.0, 70.0),
                            3 => (100.0, 50_000.0, 70.0),
                            4 => (0.0, 0.0, 0.0),
                            _ => (42.0, 1_000.0 + k as f64, 150.0),
                        };
                        let mut s = Sample {
                            t_s: t,
                            util_pct: u.into(),
                            mem_used_mib: mu.into(),
                            mem_total_mib: 81_920.0.into(),
                            power_w: pw.into(),
                            power_limit_w: 400.0.into(),
                            procs: Some(u32::from(mu > 0.0)),
                            ..Sample::default()
                        };
                        // Now and then one lane is spoiled: a field missing, invalid, or
                        // another stamp.
                        if usize::from(spoil) == i {
                            match k % 5 {
                                0 => s.util_pct = Reading::MISSING,
                                1 => s.power_w = Reading::MISSING,
                                2 => s.mem_used_mib = Reading::value(1e9),
                                3 => s.t_s += 1,
                                _ => s.sm_active = Reading::value(0.5),
                            }
                        }
                        s
                    })
                    .collect();
                let cyc = th.cycle(t + lag);
                let took_a = a.ingest(|i| &samples[i], 0, &cyc, &th, false);
                let took_b = b.ingest(|i| &samples[i], 0, &cyc, &th, true);
                prop_assert_eq!(took_a, took_b, "step {}", k);
                a.evict(&cyc);
                b.evict(&cyc);
                prop_assert_eq!(format!("{:?}", a), format!("{:?}", b), "step {}", k);
            }
        }
    }
}
