//! [`LaneJob::pool`]: the [`L`] lanes' briefs pooled at once, with no branch per lane.
//!
//! Each lane's flag counts are two words of byte counts (see `LaneJob::counts`). Rather than
//! take each count out of its byte, the pool compares whole words, byte by byte (SWAR): a
//! count equals `n` exactly when its byte of `counts ^ n·0x0101…` is zero, and a count is
//! zero when its byte is. [`zero_bytes`] marks the zero bytes of a word exactly, with no carry
//! between bytes. Each lane's decisions are then 0-or-1 words, tallied for all lanes at once
//! in one word of byte fields, and the loop over lanes is straight-line code over `[_; L]`
//! arrays that the compiler turns into vector code (four lanes a register on the AVX2 twin).
//!
//! A lane's problem (as `brief_of` decides it) is the first of gap, all-zero and frozen that
//! holds, and the pool takes the least over lanes in [`EvidenceProblem`]'s order (Gap <
//! AllZero < Frozen): that is gap when any lane has holes, else all-zero when any lane is,
//! else frozen when any lane is. The clock problems (future, stale) are the job's, not a
//! lane's: every lane has them or none does.
//!
//! `LaneJob::pool_lanewise` is the same pool written lane by lane as `brief_of` reads; it is
//! the reference that `lane_pool_agrees_with_briefs` and `lane_pool_agrees_on_any_lanes`
//! hold this one to, and the fallback for clocks near the ends of `i64`
//! ([`LaneJob::frozen_tail_below`]). The engine's AVX2 twin runs `LaneJob::pool_avx2`
//! (`pool_avx2.rs`) instead, which those tests hold to this one.
//!
//! Measured (callgrind, `cycle_profile 64 400 8`, instructions per GPU-sample of the whole
//! cycle): 461 with the lane-by-lane pool (about 80 of them pooling), 402 with this one
//! on the AVX2 twin (48 pooling), 380 with `pool_avx2` (35 pooling, the call included).

use super::*;

/// A one in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The top bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The top bit of every byte of `x` that is zero, and nothing else. Exact: `(x & 0x7f) + 0x7f`
/// is at most 0xfe in each byte, so no carry leaves a byte, and its top bit is set exactly
/// when the byte's low seven bits are not all zero.
#[inline(always)]
const fn zero_bytes(x: u64) -> u64 {
    !((((x & !HIGH) + !HIGH) | x) | !HIGH)
}

/// The bit position of `flag`'s count in its word of `LaneJob::counts`.
pub(super) const fn shift(flag: u16) -> u32 {
    8 * (nr(flag) % 8) as u32
}

/// 1 when [`zero_bytes`] marked `flag`'s byte in `z` (a word of counts of `flag`'s word).
#[inline(always)]
fn marked(z: u64, flag: u16) -> u64 {
    (z >> (shift(flag) + 7)) & 1
}

/// The first row's marks that `brief_of` does not count (holes and changes are flagged on the
/// sample after them, so the first row's refer to one outside the window), as an increment of
/// the second word of counts.
#[inline(always)]
fn first_row_marks(flags: u16) -> u64 {
    let one = |flag: u16| (u64::from(flags >> nr(flag)) & 1) << shift(flag);
    one(CHANGED) | one(GAP_BEFORE) | one(COPY_GAP)
}

const _: () = {
    // The flags the pool reads, in the word it reads them from.
    let (w0, w1) = (
        [MEM_HELD, MEM_FREE, POWER_KNOWN, POWER_SPIN_LOW, UTIL_SPIN],
        [ZERO_OR_MISSING, CHANGED, GAP_BEFORE, ALL_ZERO, COPY_GAP],
    );
    let mut k = 0;
    while k < w0.len() {
        assert!(nr(w0[k]) / 8 == 0 && nr(w1[k]) / 8 == 1);
        k += 1;
    }
    // Counts (at most `MAX_CAP`) and `n` fit a byte, with the top bit free for `n ^ count`.
    assert!(MAX_CAP <= 128);
    // The pooled sums of util (low half) and power (high half) share a word: each lane's sums
    // are at most `MAX_CAP` rows of guard 3's bounds (see `LaneJob`).
    assert!((L * MAX_CAP * 100_000) < (1 << 32) && (L * MAX_CAP * 20_000) < (1 << 32));
    // The tally's byte fields count lanes.
    assert!(L < 256);
};

/// The tally's byte fields: lanes with each outcome.
const T_HOLES: u32 = 0;
const T_ALL_ZERO: u32 = 8;
const T_FROZEN: u32 = 16;
const T_NO_PROBLEM: u32 = 24;
const T_UNDETECTABLE: u32 = 32;
const T_HELD: u32 = 40;
const T_SPIN: u32 = 48;

/// The lanes' figures, pooled over lanes before the job's clocks are applied: what
/// [`LaneJob::pool`] and its AVX2 form (`pool_avx2.rs`) each compute, and
/// [`LaneJob::pooled`] turns into a [`LanePool`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Lanes {
    /// Lanes with holes.
    pub(super) holes: u32,
    /// Lanes all-zero (a broken exporter).
    pub(super) all_zero: u32,
    /// Lanes whose first problem is a freeze: frozen, no hole, not all-zero.
    pub(super) frozen_first: u32,
    /// Lanes with none of those problems.
    pub(super) no_problem: u32,
    /// Lanes whose readings are identical without power on two samples.
    pub(super) undetectable: u32,
    /// Lanes with memory held on every row.
    pub(super) held: u32,
    /// Lanes at spin util, with known, low power, on every row.
    pub(super) spin: u32,
    pub(super) min_peak: u32,
    pub(super) max_peak: u32,
    pub(super) util_sum: u64,
    pub(super) mem_sum: u64,
    /// Σ (held + free) over lanes.
    pub(super) mem_n: u64,
    pub(super) pw_sum: u64,
    pub(super) pw_n: u64,
}

impl LaneJob {
    /// What the engine pools from the [`L`] lanes' briefs, computed for all lanes at once:
    /// exactly what taking [`LaneJob::brief`] of each lane in turn gives (the engine's
    /// `Accum::take`; `lane_pool_agrees_with_briefs` holds the two together). `None` for an
    /// empty window, which the engine pools lane by lane. See the module's doc.
    #[inline(always)]
    pub(crate) fn pool(&self, cyc: &Cycle, th: &IngestThresholds) -> Option<LanePool> {
        if self.len == 0 {
            return None;
        }
        let Some(tail_below) = self.frozen_tail_below(cyc, th).filter(|_| !self.any_all_zero()) else {
            return self.pool_lanewise(cyc, th);
        };
        Some(self.pooled(&self.lanes(tail_below), cyc, th))
    }

    /// Some lane holds an all-zero row. Ingest never puts one in the lanes (0 W makes a sample
    /// invalid), only a restore can; such windows are pooled lane by lane
    /// (`pool_lanewise`), where the all-zero rule's majority clause is written.
    #[inline(always)]
    pub(super) fn any_all_zero(&self) -> bool {
        let word = self.counts[nr(ALL_ZERO) / 8].iter().fold(0u64, |a, &c| a | c);
        (word >> shift(ALL_ZERO)) & 0xff != 0
    }

    /// The lanes' figures of a non-empty window, a lane's tail being frozen when its last
    /// change is below `tail_below` (see [`LaneJob::frozen_tail_below`]).
    #[inline(always)]
    pub(super) fn lanes(&self, tail_below: u32) -> Lanes {
        let n = self.len;
        let h = self.head as usize;
        let first = &self.rows[h];
        let out_mask = if self.out_len > 0 { u32::MAX } else { 0 };
        let all_n = u64::from(n) * ONES;
        let two_or_more = u64::from(n >= 2);
        // Array at a time, each loop one vector operation or a few, all lanes as u64.
        let (c0, c1) = (&self.counts[0], &self.counts[1]);
        let mut marks = [0u64; L];
        let mut tail = [0u64; L];
        for i in 0..L {
            marks[i] = first_row_marks(first.flags[i]);
            tail[i] = u64::from(self.copies_since_change[i] >= 1) & u64::from(self.last_change_off[i] < tail_below);
        }
        // Per lane: the tally's fields, Σ (held + free) and power known in the two halves,
        // and util and power sums in the two halves.
        let mut tally = [0u64; L];
        let mut known = [0u64; L];
        let mut util_power = [0u64; L];
        let mut mem = [0u64; L];
        let mut peak = [0u32; L];
        for i in 0..L {
            let power_known = (c0[i] >> shift(POWER_KNOWN)) & 0xff;
            let pk2 = u64::from(power_known >= 2);
            // Counts equal to n, and counts over the rows after the first equal to 0. The
            // first row is counted, so no byte of `c1` is below its mark.
            let all0 = zero_bytes(c0[i] ^ all_n);
            let all1 = zero_bytes(c1[i] ^ all_n);
            let none1 = zero_bytes(c1[i] - marks[i]);
            let holes = (1 ^ marked(none1, GAP_BEFORE)) | (pk2 & (1 ^ marked(none1, COPY_GAP)));
            let identical = two_or_more & marked(none1, CHANGED);
            let all_zero = (marked(all1, ZERO_OR_MISSING) | identical) & (1 ^ marked(none1, ALL_ZERO));
            let frozen = pk2 & (identical | tail[i]);
            // The lane's problem is the first that holds.
            let frozen_first = frozen & !(holes | all_zero);
            let no_problem = 1 ^ (holes | all_zero | frozen);
            let spin = marked(all0, UTIL_SPIN) & marked(all0, POWER_KNOWN) & marked(all0, POWER_SPIN_LOW);
            tally[i] = holes << T_HOLES
                | all_zero << T_ALL_ZERO
                | frozen_first << T_FROZEN
                | no_problem << T_NO_PROBLEM
                | (identical & (1 ^ pk2)) << T_UNDETECTABLE
                | marked(all0, MEM_HELD) << T_HELD
                | spin << T_SPIN;
            known[i] = ((c0[i] >> shift(MEM_HELD)) & 0xff) + ((c0[i] >> shift(MEM_FREE)) & 0xff) + (power_known << 32);
            util_power[i] = u64::from(self.sum_util_milli[i]) | u64::from(self.sum_power_dw[i]) << 32;
            mem[i] = u64::from(self.sum_mem_mib[i]);
            peak[i] = (first.suffix_max_milli[i] & out_mask).max(self.in_max_milli[i]);
        }
        let sum = |a: &[u64; L]| a.iter().sum::<u64>();
        let (tally, known, util_power) = (sum(&tally), sum(&known), sum(&util_power));
        let lanes = |field: u32| ((tally >> field) & 0xff) as u32;
        Lanes {
            holes: lanes(T_HOLES),
            all_zero: lanes(T_ALL_ZERO),
            frozen_first: lanes(T_FROZEN),
            no_problem: lanes(T_NO_PROBLEM),
            undetectable: lanes(T_UNDETECTABLE),
            held: lanes(T_HELD),
            spin: lanes(T_SPIN),
            min_peak: peak.iter().fold(u32::MAX, |m, &x| m.min(x)),
            max_peak: peak.iter().fold(0, |m, &x| m.max(x)),
            util_sum: util_power & 0xffff_ffff,
            mem_sum: sum(&mem),
            mem_n: known & 0xffff_ffff,
            pw_sum: util_power >> 32,
            pw_n: known >> 32,
        }
    }

    /// The pool of a non-empty window whose lanes give `l`: the job's clocks decide whether
    /// the lanes' problems count (stale or future windows have that problem on every lane).
    #[inline(always)]
    pub(super) fn pooled(&self, l: &Lanes, cyc: &Cycle, th: &IngestThresholds) -> LanePool {
        let h = self.head as usize;
        let (first_t, last_t) = (self.base_t_s + self.t_off[h] as i64, self.last_valid_t_s);
        // The clocks are the job's: every lane is from the future, or stale, or neither.
        let job_problem = if last_t > cyc.future_after_s {
            Some(EvidenceProblem::Future)
        } else if cyc.now_s.saturating_sub(last_t) > th.max_gap_s {
            Some(EvidenceProblem::Stale)
        } else {
            None
        };
        // The least of the lanes' problems, in `EvidenceProblem`'s order.
        let lane_problem = if l.holes > 0 {
            Some(EvidenceProblem::Gap)
        } else if l.all_zero > 0 {
            Some(EvidenceProblem::AllZero)
        } else if l.frozen_first > 0 {
            Some(EvidenceProblem::Frozen)
        } else {
            None
        };
        let clocks_fine = job_problem.is_none();
        LanePool {
            samples: self.len,
            first_t_s: first_t,
            last_t_s: last_t,
            problem: job_problem.or(lane_problem),
            any_short: clocks_fine && first_t > cyc.short_after_s && l.no_problem > 0,
            frozen_gpus: if clocks_fine { l.frozen_first } else { 0 },
            freeze_undetectable_gpus: l.undetectable,
            min_peak_milli: l.min_peak,
            peak_milli: l.max_peak,
            all_spin: l.spin == L as u32,
            mem_held_gpus: l.held,
            util_sum: l.util_sum,
            mem_sum: l.mem_sum,
            mem_n: l.mem_n,
            pw_sum: l.pw_sum,
            pw_n: l.pw_n,
        }
    }

    /// A lane's tail of copies is frozen (`brief_of`'s `frozen_tail`, given power on two
    /// samples and a copy since the last change) when its last change is older than the gap:
    /// `now − (base + last_change_off) > max_gap`, in saturating arithmetic. That only grows
    /// false as the offset grows, so it holds exactly for the offsets below one limit, which
    /// this returns (the offset `u32::MAX`, "no change", is never below it). The limit is
    /// `now − base − max_gap`, clamped to `u32`, unless saturation moves it (clocks or a gap
    /// near the ends of `i64`): `None` then (the caller pools lane by lane).
    #[inline(always)]
    pub(super) fn frozen_tail_below(&self, cyc: &Cycle, th: &IngestThresholds) -> Option<u32> {
        const SPAN: i64 = 1 << 32;
        let (now, base) = (cyc.now_s, self.base_t_s);
        // Where `base + off` is exact for every offset (below 2^32) and `now − base` is, the
        // test is `now − base − off > max_gap`, that is `off < now − base − max_gap`: where
        // `now − (base + off)` saturates at `i64::MIN`, both the test and that are false.
        // (`now − base − max_gap` saturating is still right once clamped.)
        if base <= i64::MAX - SPAN {
            if let Some(d) = now.checked_sub(base) {
                return Some(d.saturating_sub(th.max_gap_s).clamp(0, i64::from(u32::MAX)) as u32);
            }
        }
        self.frozen_tail_below_near_ends(cyc, th)
    }

    /// [`LaneJob::frozen_tail_below`] where `base + off` or `now − (base + off)` may
    /// saturate: the limit the exact integers give, when the saturating test agrees with it on
    /// the two offsets around it (then, the test being monotone, on all).
    #[cold]
    #[inline(never)]
    fn frozen_tail_below_near_ends(&self, cyc: &Cycle, th: &IngestThresholds) -> Option<u32> {
        let old = |off: u32| cyc.now_s.saturating_sub(self.base_t_s.saturating_add(i64::from(off))) > th.max_gap_s;
        let exact = i128::from(cyc.now_s) - i128::from(self.base_t_s) - i128::from(th.max_gap_s);
        let limit = exact.clamp(0, i128::from(u32::MAX)) as u32;
        ((limit == 0 || old(limit - 1)) && (limit == u32::MAX || !old(limit))).then_some(limit)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use proptest::prelude::*;

    /// What the engine's `Accum::take` pools from each lane's [`LaneJob::brief`] in turn, in
    /// the form of a [`LanePool`]; `None` for an empty window.
    pub(in crate::window) fn pooled_briefs(j: &LaneJob, cyc: &Cycle, th: &IngestThresholds) -> Option<LanePool> {
        let briefs: Vec<Brief> = (0..L).map(|i| j.brief(i, cyc, th)).collect();
        if j.len == 0 {
            assert!(briefs.iter().all(|b| b.samples == 0 && b.invalid == 0));
            return None;
        }
        let b0 = &briefs[0];
        let mut p = LanePool {
            samples: b0.samples,
            first_t_s: b0.first_t_s,
            last_t_s: b0.last_t_s,
            problem: None,
            any_short: false,
            frozen_gpus: 0,
            freeze_undetectable_gpus: 0,
            min_peak_milli: u32::MAX,
            peak_milli: 0,
            all_spin: true,
            mem_held_gpus: 0,
            util_sum: 0,
            mem_sum: 0,
            mem_n: 0,
            pw_sum: 0,
            pw_n: 0,
        };
        for b in &briefs {
            assert_eq!(
                (b.samples, b.first_t_s, b.last_t_s),
                (p.samples, p.first_t_s, p.last_t_s),
                "lanes share their clocks"
            );
            p.freeze_undetectable_gpus += u32::from(b.freeze_undetectable);
            match b.coverage {
                Coverage::Full => {}
                Coverage::Short => p.any_short = true,
                Coverage::Broken(q) => {
                    p.frozen_gpus += u32::from(q == EvidenceProblem::Frozen);
                    p.problem = Some(p.problem.map_or(q, |r| r.min(q)));
                }
            }
            p.min_peak_milli = p.min_peak_milli.min(b.peak_util_milli);
            p.peak_milli = p.peak_milli.max(b.peak_util_milli);
            p.all_spin &= b.spin_candidate;
            p.mem_held_gpus += u32::from(b.mem_held_all);
            p.util_sum += b.sum_util_milli;
            p.mem_sum += b.sum_mem_mib;
            p.mem_n += u64::from(b.mem_known);
            p.pw_sum += b.sum_power_dw;
            p.pw_n += u64::from(b.power_known);
        }
        Some(p)
    }

    /// True when this CPU runs [`LaneJob::pool_avx2`] (as the engine's `wide_cpu`).
    fn wide_cpu() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("popcnt")
                && is_x86_feature_detected!("lzcnt")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// [`LaneJob::pool_avx2`]'s pool, or `None` where this CPU cannot run it (the tests then
    /// check the portable form only).
    pub(in crate::window) fn pool_avx2(j: &LaneJob, cyc: &Cycle, th: &IngestThresholds) -> Option<Option<LanePool>> {
        #[cfg(target_arch = "x86_64")]
        if wide_cpu() {
            // SAFETY: the CPU has every feature `pool_avx2` is compiled for.
            return Some(unsafe { j.pool_avx2(cyc, th) });
        }
        let _ = (j, cyc, th);
        None
    }

    /// [`LaneJob::lanes`] in AVX2, as [`pool_avx2`].
    fn lanes_avx2(j: &LaneJob, tail_below: u32) -> Option<Lanes> {
        #[cfg(target_arch = "x86_64")]
        if wide_cpu() {
            // SAFETY: the CPU has every feature `lanes_avx2` is compiled for.
            return Some(unsafe { j.lanes_avx2(tail_below) });
        }
        let _ = (j, tail_below);
        None
    }

    /// One of a few interesting values, or `any`.
    fn pick<T: Copy>(k: u8, edges: &[T], any: T) -> T {
        edges.get(usize::from(k)).copied().unwrap_or(any)
    }

    /// A 64-bit mix (splitmix64), for the many small choices of one case.
    fn mix(x: u64) -> u64 {
        let x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 500 } else { 5000 }))]

        /// [`zero_bytes`] marks exactly the zero bytes.
        #[test]
        fn zero_bytes_marks_zero_bytes(x in any::<u64>(), zeros in any::<u8>()) {
            let mut x = x;
            for b in 0..8 {
                if zeros >> b & 1 == 1 {
                    x &= !(0xff << (8 * b));
                }
            }
            let z = zero_bytes(x);
            for b in 0..8 {
                let byte = (x >> (8 * b)) & 0xff;
                prop_assert_eq!((z >> (8 * b)) & 0xff, if byte == 0 { 0x80 } else { 0 });
            }
            for v in [0x80u64, 0x01, 0x7f, 0xff] {
                prop_assert_eq!(zero_bytes(v * ONES), 0);
            }
        }

        /// [`LaneJob::frozen_tail_below`] is the limit it claims: a last change at an offset
        /// below it, and only there, is old enough for a frozen tail, with clocks and gaps up
        /// to the ends of `i64`; and one is found unless they are near those ends. (Where saturation moves the limit, the clocks are stale or
        /// the gap is `i64::MAX`, and the pool's results may not show a wrong limit.)
        #[test]
        fn frozen_tail_below_is_the_limit(
            now_k in 0u8..9, now_any in any::<i64>(), base_k in 0u8..9, base_any in any::<i64>(),
            gap_k in 0u8..7, gap_any in any::<i64>(), probe in any::<u32>(), d in -3i64..=3,
        ) {
            let edges = [i64::MAX, i64::MIN, 0, i64::MAX - (1 << 31), i64::MIN + (1 << 31), 1_700_000_000, 1_700_005_000, -1_000];
            let mut th = IngestThresholds::new(&PolicyConfig::default());
            th.max_gap_s = pick(gap_k, &[i64::MAX, i64::MIN, 0, -60, 180, i64::MAX - 500], gap_any);
            let cyc = th.cycle(pick(now_k, &edges, now_any));
            let mut j = LaneJob::empty(2);
            j.base_t_s = pick(base_k, &edges, base_any);
            let old = |off: u32| cyc.now_s.saturating_sub(j.base_t_s.saturating_add(i64::from(off))) > th.max_gap_s;
            let limit = j.frozen_tail_below(&cyc, &th);
            // Away from the ends of `i64` nothing saturates: the pool never falls back.
            if [cyc.now_s, j.base_t_s, th.max_gap_s].iter().all(|x| x.unsigned_abs() < 1 << 61) {
                prop_assert!(limit.is_some());
            }
            if let Some(limit) = limit {
                let near = (i64::from(limit) + d).clamp(0, i64::from(u32::MAX) - 1) as u32;
                for off in [0, near, probe.min(u32::MAX - 1), u32::MAX - 1] {
                    prop_assert_eq!(off < limit, old(off), "offset {} limit {}", off, limit);
                }
            }
        }

        /// [`LaneJob::pool`] equals pooling the lanes' briefs, and [`LaneJob::pool_lanewise`],
        /// on lanes of any content that ingest could leave (every reading within guard 3,
        /// counts of the rows held): each count at 0, 1, 2, `n − 1` or `n` (every flag on
        /// every row, none, only the first row, all but the first, only the last, or at
        /// random), `n` from 0 to the ring's capacity, any front part (`out_len`), last
        /// changes around the frozen tail's limit, and clocks, gaps, windows and skews up to
        /// the ends of `i64`.
        #[test]
        fn lane_pool_agrees_on_any_lanes(
            cap_k in 0usize..4, n_k in 0u8..7, n_any in 0u32..=128, head in 0u32..128,
            base_k in 0u8..9, step_k in 0u8..4, last_k in 0u8..6, last_any in any::<i64>(),
            gap_k in 0u8..12, gap_any in any::<i64>(), window_k in 0u8..4, skew_k in 0u8..4,
            now_k in 0u8..10, now_d in -50i64..400, now_any in any::<i64>(),
            modes in proptest::collection::vec(0u8..8, L * 13), quiet in any::<u16>(), same in any::<u16>(),
            lane_k in proptest::collection::vec((0u8..6, 0u8..7, -2i64..=2), L),
            seed in any::<u64>(), out_k in 0u8..4,
        ) {
            let cap = [2u32, 4, 32, 128][cap_k];
            let n = match n_k {
                0 => 0,
                1 => 1,
                2 => 2.min(cap),
                3 => cap - 1,
                4 | 5 => cap,
                _ => n_any % (cap + 1),
            };
            let mut th = IngestThresholds::new(&PolicyConfig::default());
            th.max_gap_s = pick(gap_k, &[180, 60, 180, 60, 90, 0, 1, -60, i64::MAX, i64::MIN, 1 << 40], gap_any);
            th.window_s = pick(window_k, &[1200, 0, i64::MAX], 7);
            th.skew_s = pick(skew_k, &[30, 0, i64::MAX], 1);
            let mut j = LaneJob::empty(cap);
            j.head = head % cap;
            j.base_t_s = pick(base_k, &[1_000_000, 0, -5_000_000_000, i64::MAX - (1 << 33), i64::MAX - (1 << 31), i64::MIN + 1, i64::MAX / 2], 1_700_000_000);
            let step = pick(step_k, &[60u32, 1, 1 << 24], 7);
            let mut rng = seed;
            let mut next = || {
                rng = mix(rng);
                rng
            };
            for k in 0..n {
                let s = j.slot(k);
                j.t_off[s] = k * step + (k > 0) as u32 * (next() % u64::from(step)) as u32;
                let r = &mut j.rows[s];
                for i in 0..L {
                    let edge = |x: u64, max: u64| match x % 4 {
                        0 => 0,
                        1 => max,
                        _ => (x >> 2) % (max + 1),
                    };
                    r.util_milli[i] = edge(next(), 100_000) as u32;
                    r.mem_mib[i] = edge(next(), 1_048_576) as u32;
                    r.power_dw[i] = edge(next(), 20_000) as u16;
                    let mut flags = 0u16;
                    for b in 0..13 {
                        // A flag the same on every lane, or one on the first row at most
                        // (so that some windows have no hole, or no change).
                        let mode = modes[if same >> b & 1 == 1 { b } else { i * 13 + b }];
                        let mode = if quiet >> b & 1 == 1 { mode % 2 * 4 } else { mode };
                        let on = match mode {
                            0 | 1 => false,
                            2 | 3 => true,
                            4 => k == 0,
                            5 => k > 0,
                            6 => k + 1 == n,
                            _ => next() % 2 == 0,
                        };
                        flags |= u16::from(on) << b;
                    }
                    r.flags[i] = flags;
                }
            }
            j.len = n;
            for k in 0..n {
                let r = j.rows[j.slot(k)];
                j.add(&r);
            }
            j.out_len = match out_k {
                0 => 0,
                1 => n,
                _ => (next() % (u64::from(n) + 1)) as u32,
            };
            let newest = if n == 0 { j.base_t_s } else { j.base_t_s + i64::from(j.t_off[j.slot(n - 1)]) };
            j.last_valid_t_s = pick(last_k, &[newest, newest, newest, newest.saturating_add(1_000), j.base_t_s], last_any);
            j.newest_t_s = j.last_valid_t_s;
            let last = j.last_valid_t_s;
            let near = last.saturating_add(now_d);
            let now = pick(now_k, &[near, near, near, near, last.saturating_add(th.max_gap_s).saturating_add(now_d), j.base_t_s.saturating_add(now_d), i64::MAX, i64::MIN, 0], now_any);
            let cyc = th.cycle(now);
            // Where a tail's last change becomes old enough to be frozen.
            let limit = (i128::from(now) - i128::from(j.base_t_s) - i128::from(th.max_gap_s)).clamp(0, i128::from(u32::MAX)) as i64;
            for i in 0..L {
                let (copies_k, lco_k, d) = lane_k[i];
                j.copies_since_change[i] = pick(copies_k, &[0, 1, 2, u16::MAX], 3);
                j.last_change_off[i] = pick(lco_k, &[u32::MAX, 0, (limit + d).clamp(0, i64::from(u32::MAX)) as u32, (limit + d).clamp(0, i64::from(u32::MAX) - 1) as u32, u32::MAX - 1], next() as u32);
                j.in_max_milli[i] = (next() % 100_001) as u32;
                if n > 0 {
                    let h = j.head as usize;
                    j.rows[h].suffix_max_milli[i] = (next() % 100_001) as u32;
                }
            }
            let got = j.pool(&cyc, &th);
            prop_assert_eq!(got, j.pool_lanewise(&cyc, &th));
            prop_assert_eq!(got, pooled_briefs(&j, &cyc, &th));
            if let Some(wide) = pool_avx2(&j, &cyc, &th) {
                prop_assert_eq!(got, wide);
            }
            // The lanes' figures before the clocks mask them, at the limits that matter.
            if n > 0 {
                let limits = [j.frozen_tail_below(&cyc, &th).unwrap_or(0), 0, 1, u32::MAX, next() as u32];
                for t in limits {
                    if let Some(wide) = lanes_avx2(&j, t) {
                        prop_assert_eq!(j.lanes(t), wide, "tail below {}", t);
                    }
                }
            }
        }
    }
}
