//! A feasibility spike for issue 2's 20 ns target, not the engine: `lanes_spike.rs`'s common
//! path (a job whose GPUs all report one valid sample each at one instant) with (1) a compact
//! job-lane state, (2) hand-written AVX-512 (std::arch, chosen at run time, with the compact
//! scalar code as the fallback) and (3) software prefetch of each job's ring rows.
//!
//! Semantics: every field check of guard 3, the thirteen entry flags, the freeze, gap and
//! copy-gap marks, eviction, counts and sums, the sliding peak (two stacks), per-GPU coverage
//! in the engine's order (stale, gap with copy gaps, all-zero, frozen or frozen tail), the
//! `freeze_undetectable` count, pooling, and one finding per job. `lanes_spike` modelled less
//! of `GpuWindow::brief` (no copy gaps, no frozen tail, no `freeze_undetectable_gpus`, a
//! frozen count ignoring the problem order, `Cause::NoBreach` for broken evidence): its
//! findings differ from the engine's on anything but the all-busy bench. Slow path (counted,
//! left to a real core): a GPU late or out of step with the job's others, an invalid field
//! (`lanes_spike` windowed it anyway), a full ring, a breach (signatures and the ladder).
//!
//! Checks, run every time: every variant's findings equal the engine's on the bench
//! workload; the scalar path's findings equal the engine's on 25,600 varied findings (busy and
//! idle readings, memory free and held, missing fields, SM activity for util, gaps, frozen
//! GPUs); the AVX-512 path equals the scalar one (findings, header, rows) on 192,000 random
//! findings, invalid and out-of-step input included.
//!
//! The compact state (what changed from `lanes_spike`, and why each stays exact):
//! - Flag counts are `u8`, laid out `[flag][lane]`: a count never exceeds the ring's 32 rows
//!   (a production core sizing rings from window ÷ interval needs `u16` beyond 255 rows).
//!   A row's flags are stored as one byte per flag, one bit per lane, so that the push and
//!   the eviction are one masked byte add/sub each over the counts (two AVX-512 ops).
//! - Sums of utilisation (milli-percent ≤ 100,000), power (deciwatts ≤ 20,000) and memory
//!   (MiB ≤ 1,048,576) are `u32` (≤ 32 rows: ≤ 3.2 M, 640 k, 33.6 M); the sum of squared
//!   power stays `u64` (32 × 4·10⁸ does not fit 32 bits). Valid input only reaches them.
//! - A ring row is 128 bytes, two aligned cache lines (`lanes_spike`: 164 bytes straddling
//!   three or four): utilisation `u32` and memory `u32` in the first; the suffix maximum
//!   `u32`, power `u16` (≤ 20,000), the time offset (31 bits, the job-level `GAP_BEFORE` in
//!   the top bit) and 12 flag bytes in the second.
//! - The header is 704 bytes (11 lines; `lanes_spike`: 960): scalars and copies-since-change;
//!   counts; the `u64` square sum; the freeze fingerprint (the last known bits of four fields,
//!   256 bytes, kept exact: a hash could call a changing GPU frozen); the last change's offset
//!   and four `u32` sums/maxima. 64-byte vectors sit on 64-byte boundaries.
//! - Headers and rings are two flat arrays. Each job's ring is its own 4 KiB: the hardware
//!   prefetchers do not follow a cycle from one job's rows to the next's, so the rows a job
//!   will touch are prefetched four jobs ahead (`prefetch_rows`).
//!
//! Figures (2026-11-30, the 2-core AMD EPYC machine under load from other sessions; best of 30
//! cycles, two runs): AVX-512 with prefetch 9.7–10.1 ns per GPU-sample at 10,000 × 8 and
//! 7.8–7.9 ns at 64 × 8, against the engine's 65–69 and 46 in the same process; about 107
//! instructions per GPU-sample (gdb single-stepping; valgrind 3.19 has no AVX-512) against the
//! engine's 831 (callgrind). All jobs here start together, so every 20th cycle rebuilds every
//! job's suffix maxima at once and costs 55–65 ns per sample; the mean of 20 consecutive
//! cycles is 14–20 ns at 10,000 × 8. See the session 9 report (branch `simd`) for the table.
//!
//! Usage: `cargo run --release -p benches --features simd-spike --example simd_spike --
//! [jobs] [--only=VARIANT] [--count=VARIANT|engine]` (default 10,000 jobs × 8 GPUs): runs the
//! checks, then prints for each variant and for the engine the best and median of 30 cycles
//! (after 40 warm-up cycles), the mean of cycles 41–60 and the two rebuild cycles. `--count`
//! runs 40 cycles, then 20 inside `counted` for instruction counts (`valgrind --tool=callgrind
//! --toggle-collect='*counted*'`, or gdb `stepi` from `counted` to its return for AVX-512).
//! `SIMD_SPIKE_CYCLES=1` prints every measured cycle.

// Lane loops index several arrays by GPU at once; that is the point of the layout.
#![allow(clippy::needless_range_loop)]
// The AVX-512 intrinsics are stable since Rust 1.89, the workspace's MSRV is 1.85: this
// example is built only with the `simd-spike` feature (benches/Cargo.toml).
#![allow(clippy::incompatible_msrv)]

use policy::{
    Cause, Engine, Evidence, EvidenceProblem, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, Reading, Sample, Scope, Verdict,
};
use std::hint::black_box;
use std::mem::offset_of;
use std::time::Instant;

const L: usize = 8;
const CAP: usize = 32;
/// Flags per lane and row (the engine's entry flags, `COPY_GAP` included).
const NFLAGS: usize = 13;

const F_MEM_HELD: usize = 0;
const F_MEM_FREE: usize = 1;
const F_PROCS_POS: usize = 2;
const F_PROCS_ZERO: usize = 3;
const F_POWER_KNOWN: usize = 4;
const F_POWER_IDLE: usize = 5;
const F_POWER_SPIN_LOW: usize = 6;
const F_UTIL_SPIN: usize = 7;
const F_ZERO_OR_MISSING: usize = 8;
const F_CHANGED: usize = 9;
const F_GAP_BEFORE: usize = 10;
const F_ALL_ZERO: usize = 11;
const F_COPY_GAP: usize = 12;
/// `Row::t_off`'s top bit: the row's `GAP_BEFORE`, the same on every lane (a job-level gap).
const T_GAP: u32 = 1 << 31;

const MISSING_BITS: u64 = 0x7ff8_6d69_7373_696e;
const M: f64 = f64::from_bits(MISSING_BITS);

/// One instant of a job's window, one lane per GPU: two aligned cache lines.
#[derive(Clone, Copy, Default, PartialEq, Debug)]
#[repr(C, align(64))]
struct Row {
    // Line 1: written by the push, read by the eviction.
    util: [u32; L],
    mem: [u32; L],
    // Line 2: the suffix maximum (read at the front), power, time, flags.
    sfx: [u32; L],
    power: [u16; L],
    /// Offset from `base_t` (31 bits), and [`T_GAP`].
    t_off: u32,
    /// One byte per flag, bit `i` for lane `i`: flags 0–9, then `ALL_ZERO` and `COPY_GAP`
    /// (`GAP_BEFORE` is in `t_off`).
    flags: [u8; 12],
}

impl Row {
    /// The row's flags as count masks: bit `8f + i` of the pair is flag `f` on lane `i`.
    #[inline(always)]
    fn masks(&self) -> (u64, u64) {
        let f = &self.flags;
        let lo = u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]]);
        let gap = if self.t_off & T_GAP != 0 { 0xFF } else { 0 };
        let hi = u64::from_le_bytes([f[8], f[9], gap, f[10], f[11], 0, 0, 0]);
        (lo, hi)
    }

    #[inline(always)]
    fn set(&mut self, t_off: u32, lo: u64, hi: u64) {
        let h = hi.to_le_bytes();
        self.flags[0..8].copy_from_slice(&lo.to_le_bytes());
        self.flags[8] = h[0];
        self.flags[9] = h[1];
        self.flags[10] = h[3];
        self.flags[11] = h[4];
        self.t_off = t_off | if h[2] != 0 { T_GAP } else { 0 };
    }

    #[inline(always)]
    fn off(&self) -> u32 {
        self.t_off & !T_GAP
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
#[repr(C, align(64))]
struct Scalars {
    base_t: i64,
    last_valid_t: i64,
    newest_t: i64,
    /// `i64::MIN`: none (an `Option` would not leave room for `copies` in this line).
    breach_start: i64,
    head: u32,
    len: u32,
    out_len: u32,
    /// Per lane, rows pushed since the readings last changed (saturating): see
    /// `Hdr::last_change_off`.
    copies: [u16; L],
    rung: u8,
}

#[derive(Clone, Copy, PartialEq, Debug)]
#[repr(C, align(64))]
struct Hdr {
    s: Scalars,
    /// `counts[f * 8 + i]`: rows in the window with flag `f` on lane `i` (104 bytes used).
    counts: [u8; 128],
    // 64-byte vectors on 64-byte boundaries: a load split across two lines cost 5 ns.
    sum_pw2: [u64; L],
    last_bits: [[u64; L]; 4],
    /// Per lane, the offset of the newest row whose readings changed (`u32::MAX`: none), for
    /// the engine's copy gaps and frozen tail.
    last_change_off: [u32; L],
    sum_util: [u32; L],
    sum_pw: [u32; L],
    sum_mem: [u32; L],
    in_max: [u32; L],
}

impl Hdr {
    fn empty() -> Hdr {
        Hdr {
            s: Scalars {
                base_t: i64::MIN,
                last_valid_t: i64::MIN,
                newest_t: i64::MIN,
                breach_start: i64::MIN,
                head: 0,
                len: 0,
                out_len: 0,
                copies: [0; L],
                rung: 0,
            },
            counts: [0; 128],
            last_change_off: [u32::MAX; L],
            sum_util: [0; L],
            sum_pw: [0; L],
            sum_mem: [0; L],
            in_max: [0; L],
            sum_pw2: [0; L],
            last_bits: [[MISSING_BITS; L]; 4],
        }
    }
}

type Ring = [Row; CAP];

struct Th {
    mem_held_frac: f64,
    mem_held_mib: f64,
    idle_power_frac: f64,
    idle_power_w: f64,
    spin_power_frac: f64,
    spin_util_milli: u32,
    max_gap_s: i64,
    window_s: i64,
    low_below_milli: u32,
    warmup_s: i64,
}

#[inline(always)]
fn raw(r: Reading) -> f64 {
    f64::from_bits(r.to_bits())
}

fn slow_finding() -> Finding {
    Finding {
        job_index: 0,
        verdict: Verdict::InsufficientEvidence,
        signature: None,
        cause: Cause::NoBreach,
        cap: None,
        dwell_s: 0,
        signature_dwell_s: 0,
        evidence: Evidence::default(),
        wasted_gpu_h: 0.0,
        hypothetical: false,
        exempt: None,
    }
}

/// What the brief pools for the job; both paths end in [`finish`].
struct Pooled {
    first_t: i64,
    n: u32,
    problem: Option<EvidenceProblem>,
    min_peak: u32,
    peak: u32,
    all_spin: bool,
    util_sum: u64,
    pw_sum: u64,
    mem_sum: u64,
    pw_n: u64,
    mem_n: u64,
    held_gpus: u32,
    frozen: u32,
    undetectable: u32,
}

#[inline(always)]
fn finish(h: &mut Scalars, p: Pooled, now: i64, th: &Th, slow: &mut u64) -> Finding {
    let n = p.n;
    let ev = Evidence {
        window_start_s: p.first_t,
        window_end_s: h.last_valid_t,
        gpus_allocated: L as u32,
        gpus_observed: L as u32,
        samples_min_per_gpu: n,
        samples_max_per_gpu: n,
        frozen_gpus: p.frozen,
        freeze_undetectable_gpus: p.undetectable,
        peak_util_pct: p.peak as f64 / 1000.0,
        mean_util_pct: p.util_sum as f64 / (n as u64 * L as u64) as f64 / 1000.0,
        mem_used_mean_mib: (p.mem_n > 0).then(|| p.mem_sum as f64 / p.mem_n as f64),
        mem_held_gpus: p.held_gpus,
        power_mean_w: (p.pw_n > 0).then(|| p.pw_sum as f64 / p.pw_n as f64 / 10.0),
        ..Evidence::default()
    };
    // The ladder, for a job that does not breach (the common case).
    let (verdict, cause) = if now < th.warmup_s {
        (Verdict::Healthy, Cause::Warmup)
    } else if let Some(problem) = p.problem {
        (Verdict::InsufficientEvidence, Cause::Evidence(problem))
    } else if p.min_peak < th.low_below_milli || p.all_spin {
        // A breach: the engine would classify here (not modelled: counted as slow).
        *slow += 1;
        (Verdict::Watching, Cause::Breach)
    } else {
        (Verdict::Healthy, Cause::NoBreach)
    };
    if verdict == Verdict::Healthy {
        h.breach_start = i64::MIN;
        h.rung = 0;
    }
    Finding {
        job_index: 0,
        verdict,
        signature: None,
        cause,
        cap: None,
        dwell_s: 0,
        signature_dwell_s: 0,
        evidence: ev,
        wasted_gpu_h: 0.0,
        hypothetical: false,
        exempt: None,
    }
}

/// Step 1: the compact state, plain scalar loops over lanes (also the fallback).
#[inline(always)]
fn job_step_scalar(h: &mut Hdr, ring: &mut Ring, s: &[Sample], now: i64, th: &Th, slow: &mut u64) -> Finding {
    let t = s[0].t_s;
    let mut synced = true;
    let (mut u, mut sm, mut mt, mut mu, mut p, mut l) = ([0f64; L], [0f64; L], [0f64; L], [0f64; L], [0f64; L], [0f64; L]);
    let mut procs = [0u32; L];
    let mut bits = [[0u64; L]; 4];
    for i in 0..L {
        let x = &s[i];
        synced &= x.t_s == t;
        u[i] = raw(x.util_pct);
        sm[i] = raw(x.sm_active);
        mt[i] = raw(x.mem_total_mib);
        mu[i] = raw(x.mem_used_mib);
        p[i] = raw(x.power_w);
        l[i] = raw(x.power_limit_w);
        procs[i] = x.procs.unwrap_or(u32::MAX);
        bits[0][i] = x.util_pct.to_bits();
        bits[1][i] = x.sm_active.to_bits();
        bits[2][i] = x.mem_used_mib.to_bits();
        bits[3][i] = x.power_w.to_bits();
    }
    if !synced || t <= h.s.newest_t || t > now + 60 {
        *slow += 1;
        return slow_finding();
    }
    let mut flags = [0u32; L];
    let mut util_milli = [0u32; L];
    let mut mem_mib = [0u32; L];
    let mut power_dw = [0u32; L];
    let mut known = [[false; L]; 4];
    let mut bad_any = false;
    let b = |c: bool, f: usize| (c as u32) << f;
    for i in 0..L {
        let u_ok = (u[i] >= 0.0) & (u[i] <= 100.0);
        let sm_ok = (sm[i] >= 0.0) & (sm[i] <= 1.0);
        let mt_ok = (mt[i] > 0.0) & (mt[i] <= 1_048_576.0);
        let mu_in = (mu[i] >= 0.0) & (mu[i] <= 1_048_576.0);
        let mu_over = mu_in & mt_ok & (mu[i] > mt[i]);
        let mu_ok = mu_in & !mu_over;
        let p_ok = (p[i] >= 1.0) & (p[i] <= 2000.0);
        let l_ok = (l[i] >= 1.0) & (l[i] <= 2000.0);
        let miss = |x: f64| x.to_bits() == MISSING_BITS;
        let bad = (!miss(u[i]) & !u_ok)
            | (!miss(sm[i]) & !sm_ok)
            | (!miss(mt[i]) & !mt_ok)
            | (!miss(mu[i]) & !mu_in)
            | mu_over
            | (!miss(p[i]) & !p_ok)
            | (!miss(l[i]) & !l_ok)
            | ((procs[i] != u32::MAX) & (procs[i] > 1_000_000));
        let compute = if u_ok { u[i] } else { sm[i] * 100.0 };
        bad_any |= bad | !(u_ok | sm_ok);
        let um = (compute * 1000.0 + 0.5) as u32;
        let held = if mt_ok {
            mu[i] >= th.mem_held_frac * mt[i]
        } else {
            mu[i] >= th.mem_held_mib
        };
        let (idle, spin_low) = if l_ok {
            (p[i] <= th.idle_power_frac * l[i], p[i] <= th.spin_power_frac * l[i])
        } else {
            (p[i] <= th.idle_power_w, p[i] <= th.idle_power_w)
        };
        flags[i] = b(mu_ok & held, F_MEM_HELD)
            | b(mu_ok & !held, F_MEM_FREE)
            | b(procs[i] == 0, F_PROCS_ZERO)
            | b((procs[i] != 0) & (procs[i] <= 1_000_000), F_PROCS_POS)
            | b(p_ok, F_POWER_KNOWN)
            | b(p_ok & idle, F_POWER_IDLE)
            | b(p_ok & spin_low, F_POWER_SPIN_LOW)
            | b(um >= th.spin_util_milli, F_UTIL_SPIN)
            | b((compute == 0.0) & (mu[i] == 0.0) & (p[i] == 0.0), F_ALL_ZERO)
            | b((compute == 0.0) & ((mu[i] == 0.0) | !mu_ok) & !p_ok, F_ZERO_OR_MISSING);
        util_milli[i] = um;
        mem_mib[i] = if mu_ok { (mu[i] + 0.5) as u32 } else { 0 };
        power_dw[i] = if p_ok { (p[i] * 10.0 + 0.5) as u32 } else { 0 };
        known[0][i] = u_ok;
        known[1][i] = sm_ok;
        known[2][i] = mu_ok;
        known[3][i] = p_ok;
    }
    if bad_any {
        *slow += 1;
        return slow_finding();
    }
    let st = &mut h.s;
    st.newest_t = t;
    if st.base_t == i64::MIN {
        st.base_t = t;
    }
    if t - st.base_t >= T_GAP as i64 {
        // 68 years of one job: not modelled.
        *slow += 1;
        return slow_finding();
    }
    let t_off = (t - st.base_t) as u32;
    // Freeze, gap and copy-gap marks.
    let first = st.last_valid_t == i64::MIN;
    let gap = !first && t - st.last_valid_t > th.max_gap_s;
    for i in 0..L {
        let mut changed = first;
        for f in 0..4 {
            changed |= known[f][i] & (bits[f][i] != h.last_bits[f][i]);
            h.last_bits[f][i] = if known[f][i] { bits[f][i] } else { h.last_bits[f][i] };
        }
        let lco = h.last_change_off[i];
        let copy_gap = changed && st.copies[i] >= 1 && lco != u32::MAX && (t_off - lco) as i64 > th.max_gap_s;
        flags[i] |= b(changed, F_CHANGED) | b(gap, F_GAP_BEFORE) | b(copy_gap, F_COPY_GAP);
        if changed {
            h.last_change_off[i] = t_off;
            st.copies[i] = 0;
        } else {
            st.copies[i] = st.copies[i].saturating_add(1);
        }
    }
    st.last_valid_t = t;
    // Evict.
    let cutoff = now - th.window_s;
    let off_cut = (cutoff - st.base_t).max(-1);
    while st.len > 0 && ring[st.head as usize].off() as i64 <= off_cut {
        if st.out_len == 0 {
            let mut m = [0u32; L];
            for k in (0..st.len).rev() {
                let r = &mut ring[((st.head + k) as usize) & (CAP - 1)];
                for i in 0..L {
                    m[i] = m[i].max(r.util[i]);
                }
                r.sfx = m;
            }
            st.out_len = st.len;
            h.in_max = [0; L];
        }
        let r = &ring[st.head as usize];
        let (lo, hi) = r.masks();
        for k in 0..64 {
            h.counts[k] -= ((lo >> k) & 1) as u8;
            h.counts[64 + k] -= ((hi >> k) & 1) as u8;
        }
        for i in 0..L {
            let pw = r.power[i] as u32;
            h.sum_util[i] -= r.util[i];
            h.sum_pw[i] -= pw;
            h.sum_pw2[i] -= pw as u64 * pw as u64;
            h.sum_mem[i] -= r.mem[i];
        }
        st.head = (st.head + 1) & (CAP as u32 - 1);
        st.len -= 1;
        st.out_len -= 1;
    }
    if st.len as usize == CAP {
        // A production core grows the ring here.
        *slow += 1;
        return slow_finding();
    }
    // Push.
    let slot = ((st.head + st.len) as usize) & (CAP - 1);
    let r = &mut ring[slot];
    r.util = util_milli;
    r.mem = mem_mib;
    for i in 0..L {
        r.power[i] = power_dw[i] as u16;
    }
    let (mut lo, mut hi) = (0u64, 0u64);
    for f in 0..NFLAGS {
        for i in 0..L {
            let bit = ((flags[i] >> f) & 1) as u64;
            if f < 8 {
                lo |= bit << (8 * f + i);
            } else {
                hi |= bit << (8 * (f - 8) + i);
            }
        }
    }
    r.set(t_off, lo, hi);
    st.len += 1;
    for k in 0..64 {
        h.counts[k] += ((lo >> k) & 1) as u8;
        h.counts[64 + k] += ((hi >> k) & 1) as u8;
    }
    for i in 0..L {
        let pw = power_dw[i];
        h.sum_util[i] += util_milli[i];
        h.sum_pw[i] += pw;
        h.sum_pw2[i] += pw as u64 * pw as u64;
        h.sum_mem[i] += mem_mib[i];
        h.in_max[i] = h.in_max[i].max(util_milli[i]);
    }
    // Brief and pool, in the engine's order of problems (`GpuWindow::brief`): stale, gap
    // (copy gaps where power is known twice), all-zero, frozen (or a frozen tail).
    let front = &ring[st.head as usize];
    let (flo, fhi) = front.masks();
    let n = st.len;
    let first_t = st.base_t + front.off() as i64;
    let stale = now - st.last_valid_t > th.max_gap_s;
    let short = first_t > cutoff + th.max_gap_s;
    let mut problem = stale.then_some(EvidenceProblem::Stale);
    let mut min_peak = u32::MAX;
    let mut all_spin = true;
    let (mut util_sum, mut pw_sum, mut mem_sum, mut pw_n, mut mem_n, mut held_gpus, mut frozen, mut peak) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u32, 0u32, 0u32);
    let mut undetectable = 0u32;
    for i in 0..L {
        let c = |f: usize| h.counts[f * L + i] as u32;
        let fb = |f: usize| {
            (if f < 8 {
                (flo >> (8 * f + i)) & 1
            } else {
                (fhi >> (8 * (f - 8) + i)) & 1
            }) as u32
        };
        let power_known = c(F_POWER_KNOWN);
        let copy_holes = if power_known >= 2 { c(F_COPY_GAP) - fb(F_COPY_GAP) } else { 0 };
        let holes = c(F_GAP_BEFORE) - fb(F_GAP_BEFORE) + copy_holes;
        let identical = n >= 2 && c(F_CHANGED) - fb(F_CHANGED) == 0;
        let all_zero = c(F_ZERO_OR_MISSING) == n && c(F_ALL_ZERO) > 0;
        let lco = h.last_change_off[i];
        let tail = power_known >= 2 && st.copies[i] >= 1 && lco != u32::MAX && now - (st.base_t + lco as i64) > th.max_gap_s;
        let fz = (identical & (power_known >= 2)) | tail;
        undetectable += (identical && power_known < 2) as u32;
        let p = if stale {
            Some(EvidenceProblem::Stale)
        } else if holes > 0 {
            Some(EvidenceProblem::Gap)
        } else if all_zero {
            Some(EvidenceProblem::AllZero)
        } else if fz {
            Some(EvidenceProblem::Frozen)
        } else {
            None
        };
        frozen += (p == Some(EvidenceProblem::Frozen)) as u32;
        if let Some(p) = p {
            problem = Some(problem.map_or(p, |q| q.min(p)));
        }
        let pk = if st.out_len > 0 {
            front.sfx[i].max(h.in_max[i])
        } else {
            h.in_max[i]
        };
        min_peak = min_peak.min(pk);
        peak = peak.max(pk);
        all_spin &= (c(F_UTIL_SPIN) == n) & (power_known == n) & (c(F_POWER_SPIN_LOW) == n);
        util_sum += h.sum_util[i] as u64;
        pw_sum += h.sum_pw[i] as u64;
        mem_sum += h.sum_mem[i] as u64;
        pw_n += power_known as u64;
        mem_n += (c(F_MEM_HELD) + c(F_MEM_FREE)) as u64;
        held_gpus += (c(F_MEM_HELD) == n) as u32;
    }
    black_box(short);
    let pooled = Pooled {
        first_t,
        n,
        problem,
        min_peak,
        peak,
        all_spin,
        util_sum,
        pw_sum,
        mem_sum,
        pw_n,
        mem_n,
        held_gpus,
        frozen,
        undetectable,
    };
    finish(st, pooled, now, th, slow)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    /// The 8 samples' fields, one lane per GPU.
    pub struct In {
        pub t: __m512i,
        pub u: __m512d,
        pub sm: __m512d,
        pub mt: __m512d,
        pub mu: __m512d,
        pub p: __m512d,
        pub l: __m512d,
        pub procs: __m256i,
    }

    /// Transposes 8 consecutive samples (AoS) into lanes: with gathers, or with scalar loads
    /// through a stack array.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub unsafe fn load(s: &[Sample], gather: bool) -> In {
        debug_assert_eq!(s.len(), L);
        let procs = [
            s[0].procs.unwrap_or(u32::MAX),
            s[1].procs.unwrap_or(u32::MAX),
            s[2].procs.unwrap_or(u32::MAX),
            s[3].procs.unwrap_or(u32::MAX),
            s[4].procs.unwrap_or(u32::MAX),
            s[5].procs.unwrap_or(u32::MAX),
            s[6].procs.unwrap_or(u32::MAX),
            s[7].procs.unwrap_or(u32::MAX),
        ];
        let procs = unsafe { _mm256_loadu_si256(procs.as_ptr() as *const __m256i) };
        if gather {
            const S: i64 = size_of::<Sample>() as i64;
            let idx = _mm512_set_epi64(7 * S, 6 * S, 5 * S, 4 * S, 3 * S, 2 * S, S, 0);
            let base = s.as_ptr() as *const u8;
            macro_rules! g {
                ($field:ident) => {
                    unsafe { _mm512_i64gather_pd::<1>(idx, base.add(offset_of!(Sample, $field)) as *const f64) }
                };
            }
            In {
                t: unsafe { _mm512_i64gather_epi64::<1>(idx, base.add(offset_of!(Sample, t_s)) as *const i64) },
                u: g!(util_pct),
                sm: g!(sm_active),
                mt: g!(mem_total_mib),
                mu: g!(mem_used_mib),
                p: g!(power_w),
                l: g!(power_limit_w),
                procs,
            }
        } else {
            macro_rules! a {
                ($field:ident) => {{
                    let a = [
                        raw(s[0].$field),
                        raw(s[1].$field),
                        raw(s[2].$field),
                        raw(s[3].$field),
                        raw(s[4].$field),
                        raw(s[5].$field),
                        raw(s[6].$field),
                        raw(s[7].$field),
                    ];
                    unsafe { _mm512_loadu_pd(a.as_ptr()) }
                }};
            }
            let t = [s[0].t_s, s[1].t_s, s[2].t_s, s[3].t_s, s[4].t_s, s[5].t_s, s[6].t_s, s[7].t_s];
            In {
                t: unsafe { _mm512_loadu_si512(t.as_ptr() as *const _) },
                u: a!(util_pct),
                sm: a!(sm_active),
                mt: a!(mem_total_mib),
                mu: a!(mem_used_mib),
                p: a!(power_w),
                l: a!(power_limit_w),
                procs,
            }
        }
    }

    /// The transpose alone, to measure it.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub unsafe fn load_only(s: &[Sample], gather: bool) -> u64 {
        let x = unsafe { load(s, gather) };
        let v = _mm512_add_pd(
            _mm512_add_pd(_mm512_add_pd(x.u, x.sm), _mm512_add_pd(x.mt, x.mu)),
            _mm512_add_pd(x.p, x.l),
        );
        let w = _mm512_xor_si512(_mm512_castpd_si512(v), x.t);
        let w = _mm512_xor_si512(w, _mm512_cvtepu32_epi64(x.procs));
        _mm512_reduce_add_epi64(w) as u64
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,popcnt")]
    pub unsafe fn job_step(h: &mut Hdr, ring: &mut Ring, s: &[Sample], now: i64, th: &Th, slow: &mut u64, gather: bool) -> Finding {
        let x = unsafe { load(s, gather) };
        let t = s[0].t_s;
        let synced = _mm512_cmpeq_epi64_mask(x.t, _mm512_set1_epi64(t)) == 0xFF;
        if !synced || t <= h.s.newest_t || t > now + 60 {
            *slow += 1;
            return slow_finding();
        }
        macro_rules! c {
            ($v:expr) => {
                _mm512_set1_pd($v)
            };
        }
        macro_rules! cmp {
            ($op:ident, $a:expr, $b:expr) => {
                _mm512_cmp_pd_mask::<$op>($a, $b)
            };
        }
        let zero = _mm512_setzero_pd();
        let (u, sm, mt, mu, p, l) = (x.u, x.sm, x.mt, x.mu, x.p, x.l);
        let u_ok = cmp!(_CMP_GE_OQ, u, zero) & cmp!(_CMP_LE_OQ, u, c!(100.0));
        let sm_ok = cmp!(_CMP_GE_OQ, sm, zero) & cmp!(_CMP_LE_OQ, sm, c!(1.0));
        let mt_ok = cmp!(_CMP_GT_OQ, mt, zero) & cmp!(_CMP_LE_OQ, mt, c!(1_048_576.0));
        let mu_in = cmp!(_CMP_GE_OQ, mu, zero) & cmp!(_CMP_LE_OQ, mu, c!(1_048_576.0));
        let mu_over = mu_in & mt_ok & cmp!(_CMP_GT_OQ, mu, mt);
        let mu_ok = mu_in & !mu_over;
        let p_ok = cmp!(_CMP_GE_OQ, p, c!(1.0)) & cmp!(_CMP_LE_OQ, p, c!(2000.0));
        let l_ok = cmp!(_CMP_GE_OQ, l, c!(1.0)) & cmp!(_CMP_LE_OQ, l, c!(2000.0));
        let missing = _mm512_set1_epi64(MISSING_BITS as i64);
        macro_rules! miss {
            ($v:expr) => {
                _mm512_cmpeq_epi64_mask(_mm512_castpd_si512($v), missing)
            };
        }
        let procs = x.procs;
        let procs_known = _mm256_cmpneq_epi32_mask(procs, _mm256_set1_epi32(-1));
        let procs_le = _mm256_cmple_epu32_mask(procs, _mm256_set1_epi32(1_000_000));
        let bad = (!miss!(u) & !u_ok)
            | (!miss!(sm) & !sm_ok)
            | (!miss!(mt) & !mt_ok)
            | (!miss!(mu) & !mu_in)
            | mu_over
            | (!miss!(p) & !p_ok)
            | (!miss!(l) & !l_ok)
            | (procs_known & !procs_le);
        if (bad | !(u_ok | sm_ok)) != 0 {
            *slow += 1;
            return slow_finding();
        }
        let compute = _mm512_mask_blend_pd(u_ok, _mm512_mul_pd(sm, c!(100.0)), u);
        let um = _mm512_cvttpd_epu32(_mm512_add_pd(_mm512_mul_pd(compute, c!(1000.0)), c!(0.5)));
        let held_thr = _mm512_mask_blend_pd(mt_ok, c!(th.mem_held_mib), _mm512_mul_pd(c!(th.mem_held_frac), mt));
        let held = cmp!(_CMP_GE_OQ, mu, held_thr);
        let idle_thr = _mm512_mask_blend_pd(l_ok, c!(th.idle_power_w), _mm512_mul_pd(c!(th.idle_power_frac), l));
        let spin_thr = _mm512_mask_blend_pd(l_ok, c!(th.idle_power_w), _mm512_mul_pd(c!(th.spin_power_frac), l));
        let idle = cmp!(_CMP_LE_OQ, p, idle_thr);
        let spin_low = cmp!(_CMP_LE_OQ, p, spin_thr);
        let pz = _mm256_cmpeq_epi32_mask(procs, _mm256_setzero_si256());
        let cz = cmp!(_CMP_EQ_OQ, compute, zero);
        let muz = cmp!(_CMP_EQ_OQ, mu, zero);
        let pwz = cmp!(_CMP_EQ_OQ, p, zero);
        let mem_mib = _mm512_maskz_cvttpd_epu32(mu_ok, _mm512_add_pd(mu, c!(0.5)));
        let power32 = _mm512_maskz_cvttpd_epu32(p_ok, _mm512_add_pd(_mm512_mul_pd(p, c!(10.0)), c!(0.5)));
        let power16 = _mm256_cvtepi32_epi16(power32);

        let st = &mut h.s;
        st.newest_t = t;
        if st.base_t == i64::MIN {
            st.base_t = t;
        }
        if t - st.base_t >= T_GAP as i64 {
            *slow += 1;
            return slow_finding();
        }
        let t_off = (t - st.base_t) as u32;
        // Freeze, gap and copy-gap marks.
        let first = st.last_valid_t == i64::MIN;
        let gap = !first && t - st.last_valid_t > th.max_gap_s;
        let mut changed: u8 = if first { 0xFF } else { 0 };
        for (f, (v, k)) in [(u, u_ok), (sm, sm_ok), (mu, mu_ok), (p, p_ok)].into_iter().enumerate() {
            let lp = h.last_bits[f].as_mut_ptr() as *mut __m512i;
            let last = unsafe { _mm512_loadu_si512(lp) };
            let b = _mm512_castpd_si512(v);
            changed |= _mm512_mask_cmpneq_epi64_mask(k, b, last);
            unsafe { _mm512_storeu_si512(lp, _mm512_mask_mov_epi64(last, k, b)) };
        }
        let lco_p = h.last_change_off.as_mut_ptr() as *mut __m256i;
        let cop_p = st.copies.as_mut_ptr() as *mut __m128i;
        let lco = unsafe { _mm256_loadu_si256(lco_p) };
        let copies = _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(cop_p) });
        let none = _mm256_set1_epi32(-1);
        let toff = _mm256_set1_epi32(t_off as i32);
        // t_off − lco > max_gap (lco ≤ t_off: an earlier offset of the same base).
        let copy_gap = changed
            & _mm256_cmpge_epu32_mask(copies, _mm256_set1_epi32(1))
            & _mm256_cmpneq_epi32_mask(lco, none)
            & _mm256_cmpgt_epu32_mask(
                _mm256_sub_epi32(toff, lco),
                _mm256_set1_epi32(th.max_gap_s.min(u32::MAX as i64) as i32),
            );
        let lco = _mm256_mask_mov_epi32(lco, changed, toff);
        let copies = _mm256_maskz_min_epu32(
            !changed,
            _mm256_add_epi32(copies, _mm256_set1_epi32(1)),
            _mm256_set1_epi32(u16::MAX as i32),
        );
        unsafe {
            _mm256_storeu_si256(lco_p, lco);
            _mm_storeu_si128(cop_p, _mm256_cvtepi32_epi16(copies));
        }
        st.last_valid_t = t;
        let m: [u8; NFLAGS] = [
            mu_ok & held,
            mu_ok & !held,
            procs_known & !pz & procs_le,
            pz,
            p_ok,
            p_ok & idle,
            p_ok & spin_low,
            _mm256_cmpge_epu32_mask(um, _mm256_set1_epi32(th.spin_util_milli as i32)),
            cz & (muz | !mu_ok) & !p_ok,
            changed,
            if gap { 0xFF } else { 0 },
            cz & muz & pwz,
            copy_gap,
        ];
        let f_lo = u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]]);
        let f_hi = u64::from_le_bytes([m[8], m[9], m[10], m[11], m[12], 0, 0, 0]);

        // Evict, in registers.
        let cp = h.counts.as_mut_ptr();
        let mut c_lo = unsafe { _mm512_loadu_si512(cp as *const __m512i) };
        let mut c_hi = unsafe { _mm512_loadu_si512(cp.add(64) as *const __m512i) };
        let ld = |a: &[u32; L]| unsafe { _mm256_loadu_si256(a.as_ptr() as *const __m256i) };
        let mut s_util = ld(&h.sum_util);
        let mut s_pw = ld(&h.sum_pw);
        let mut s_mem = ld(&h.sum_mem);
        let mut in_max = ld(&h.in_max);
        let mut s_pw2 = unsafe { _mm512_loadu_si512(h.sum_pw2.as_ptr() as *const __m512i) };
        let ones = _mm512_set1_epi8(1);
        let cutoff = now - th.window_s;
        let off_cut = (cutoff - st.base_t).max(-1);
        while st.len > 0 && ring[st.head as usize].off() as i64 <= off_cut {
            if st.out_len == 0 {
                let mut mx = _mm256_setzero_si256();
                for k in (0..st.len).rev() {
                    let r = &mut ring[((st.head + k) as usize) & (CAP - 1)];
                    mx = _mm256_max_epu32(mx, ld(&r.util));
                    unsafe { _mm256_storeu_si256(r.sfx.as_mut_ptr() as *mut __m256i, mx) };
                }
                st.out_len = st.len;
                in_max = _mm256_setzero_si256();
            }
            let r = &ring[st.head as usize];
            let (fl, fh) = r.masks();
            c_lo = _mm512_mask_sub_epi8(c_lo, fl, c_lo, ones);
            c_hi = _mm512_mask_sub_epi8(c_hi, fh, c_hi, ones);
            let rp = _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(r.power.as_ptr() as *const __m128i) });
            s_util = _mm256_sub_epi32(s_util, ld(&r.util));
            s_mem = _mm256_sub_epi32(s_mem, ld(&r.mem));
            s_pw = _mm256_sub_epi32(s_pw, rp);
            let rp64 = _mm512_cvtepu32_epi64(rp);
            s_pw2 = _mm512_sub_epi64(s_pw2, _mm512_mul_epu32(rp64, rp64));
            st.head = (st.head + 1) & (CAP as u32 - 1);
            st.len -= 1;
            st.out_len -= 1;
        }
        let full = st.len as usize == CAP;
        if !full {
            // Push.
            let slot = ((st.head + st.len) as usize) & (CAP - 1);
            let r = &mut ring[slot];
            unsafe {
                _mm256_storeu_si256(r.util.as_mut_ptr() as *mut __m256i, um);
                _mm256_storeu_si256(r.mem.as_mut_ptr() as *mut __m256i, mem_mib);
                _mm_storeu_si128(r.power.as_mut_ptr() as *mut __m128i, power16);
            }
            r.set(t_off, f_lo, f_hi);
            st.len += 1;
            c_lo = _mm512_mask_add_epi8(c_lo, f_lo, c_lo, ones);
            c_hi = _mm512_mask_add_epi8(c_hi, f_hi, c_hi, ones);
            s_util = _mm256_add_epi32(s_util, um);
            s_mem = _mm256_add_epi32(s_mem, mem_mib);
            s_pw = _mm256_add_epi32(s_pw, power32);
            let p64 = _mm512_cvtepu32_epi64(power32);
            s_pw2 = _mm512_add_epi64(s_pw2, _mm512_mul_epu32(p64, p64));
            in_max = _mm256_max_epu32(in_max, um);
        }
        unsafe {
            _mm512_storeu_si512(cp as *mut __m512i, c_lo);
            _mm512_storeu_si512(cp.add(64) as *mut __m512i, c_hi);
            _mm256_storeu_si256(h.sum_util.as_mut_ptr() as *mut __m256i, s_util);
            _mm256_storeu_si256(h.sum_pw.as_mut_ptr() as *mut __m256i, s_pw);
            _mm256_storeu_si256(h.sum_mem.as_mut_ptr() as *mut __m256i, s_mem);
            _mm256_storeu_si256(h.in_max.as_mut_ptr() as *mut __m256i, in_max);
            _mm512_storeu_si512(h.sum_pw2.as_mut_ptr() as *mut __m512i, s_pw2);
        }
        if full {
            // A production core grows the ring here.
            *slow += 1;
            return slow_finding();
        }

        // Brief and pool, as the scalar path (the engine's order of problems).
        let front = &ring[st.head as usize];
        let (_, ffh) = front.masks();
        let n = st.len;
        let first_t = st.base_t + front.off() as i64;
        let stale = now - st.last_valid_t > th.max_gap_s;
        let short = first_t > cutoff + th.max_gap_s;
        let byte = |m: u64, f: usize| (m >> (8 * f)) as u8;
        let eq_lo = _mm512_cmpeq_epi8_mask(c_lo, _mm512_set1_epi8(n as i8));
        let eq_hi = _mm512_cmpeq_epi8_mask(c_hi, _mm512_set1_epi8(n as i8));
        let adj_hi = _mm512_mask_sub_epi8(c_hi, ffh, c_hi, ones);
        let nz_adj_hi = _mm512_test_epi8_mask(adj_hi, adj_hi);
        let nz_hi = _mm512_test_epi8_mask(c_hi, c_hi);
        let pk2 = byte(_mm512_cmpge_epu8_mask(c_lo, _mm512_set1_epi8(2)), F_POWER_KNOWN);
        let holes = byte(nz_adj_hi, F_GAP_BEFORE - 8) | (pk2 & byte(nz_adj_hi, F_COPY_GAP - 8));
        let identical = if n >= 2 { !byte(nz_adj_hi, F_CHANGED - 8) } else { 0 };
        let all_zero = byte(eq_hi, F_ZERO_OR_MISSING - 8) & byte(nz_hi, F_ALL_ZERO - 8);
        // The frozen tail: now − (base + lco) > max_gap, i.e. lco < now − base − max_gap.
        let lim = now - st.base_t - th.max_gap_s;
        let tail = if lim <= 0 {
            0
        } else {
            pk2 & _mm256_cmpge_epu32_mask(copies, _mm256_set1_epi32(1))
                & _mm256_cmpneq_epi32_mask(lco, none)
                & _mm256_cmplt_epu32_mask(lco, _mm256_set1_epi32(lim.min(u32::MAX as i64) as u32 as i32))
        };
        let fz = (identical & pk2) | tail;
        let problem = if stale {
            Some(EvidenceProblem::Stale)
        } else if holes != 0 {
            Some(EvidenceProblem::Gap)
        } else if all_zero != 0 {
            Some(EvidenceProblem::AllZero)
        } else if fz != 0 {
            Some(EvidenceProblem::Frozen)
        } else {
            None
        };
        let frozen = if stale { 0 } else { (fz & !holes & !all_zero).count_ones() };
        let all_spin = byte(eq_lo, F_UTIL_SPIN) & byte(eq_lo, F_POWER_KNOWN) & byte(eq_lo, F_POWER_SPIN_LOW) == 0xFF;
        let held_gpus = byte(eq_lo, F_MEM_HELD).count_ones();
        let mut sad = [0u64; 8];
        unsafe { _mm512_storeu_si512(sad.as_mut_ptr() as *mut _, _mm512_sad_epu8(c_lo, _mm512_setzero_si512())) };
        let pk = if st.out_len > 0 {
            _mm256_max_epu32(ld(&front.sfx), in_max)
        } else {
            in_max
        };
        let pk = _mm512_zextsi256_si512(pk);
        let hsum = |v: __m256i| _mm512_reduce_add_epi32(_mm512_zextsi256_si512(v)) as u32 as u64;
        black_box(short);
        let pooled = Pooled {
            first_t,
            n,
            problem,
            min_peak: _mm512_mask_reduce_min_epu32(0xFF, pk),
            peak: _mm512_mask_reduce_max_epu32(0xFF, pk),
            all_spin,
            util_sum: hsum(s_util),
            pw_sum: hsum(s_pw),
            mem_sum: hsum(s_mem),
            pw_n: sad[F_POWER_KNOWN],
            mem_n: sad[F_MEM_HELD] + sad[F_MEM_FREE],
            held_gpus,
            frozen,
            undetectable: (identical & !pk2).count_ones(),
        };
        finish(st, pooled, now, th, slow)
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Variant {
    Scalar,
    ScalarPrefetch,
    Avx512Gather,
    Avx512Loads,
    Avx512Prefetch,
    LoadOnlyGather,
    LoadOnlyScalar,
}

fn have_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

struct State {
    hdrs: Vec<Hdr>,
    rings: Vec<Ring>,
}

impl State {
    fn new(jobs: usize) -> State {
        State {
            hdrs: vec![Hdr::empty(); jobs],
            rings: vec![[Row::default(); CAP]; jobs],
        }
    }
}

/// Prefetches the rows a job will touch (D jobs before it is stepped): the push slot, the
/// evicted head and the front after it (its second line). The hardware prefetchers do not
/// follow these: each job's ring is its own 4 KiB page.
#[inline(always)]
fn prefetch_rows(h: &Scalars, ring: &Ring) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let ring = ring.as_ptr();
        let pf = |k: u32, line: usize| {
            // SAFETY: in bounds (masked slot, line 0 or 1 of a 128-byte row); a prefetch
            // never faults anyway.
            let p = unsafe { (ring.add((k as usize) & (CAP - 1)) as *const i8).add(64 * line) };
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        };
        pf(h.head + h.len, 0);
        pf(h.head + h.len, 1);
        pf(h.head, 0);
        pf(h.head, 1);
        pf(h.head + 1, 1);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (h, ring);
}

/// One cycle of one variant over all jobs.
#[inline(never)]
fn cycle(v: Variant, st: &mut State, samples: &[Sample], now: i64, th: &Th, slow: &mut u64, out: &mut Vec<Finding>) -> u64 {
    out.clear();
    let mut acc = 0u64;
    let it = st.hdrs.iter_mut().zip(st.rings.iter_mut()).zip(samples.chunks_exact(L));
    match v {
        Variant::Scalar => {
            for ((h, r), s) in it {
                out.push(job_step_scalar(h, r, s, now, th, slow));
            }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::Avx512Gather | Variant::Avx512Loads => {
            assert!(have_avx512());
            let g = v == Variant::Avx512Gather;
            for ((h, r), s) in it {
                // SAFETY: the features were detected above.
                out.push(unsafe { avx512::job_step(h, r, s, now, th, slow, g) });
            }
        }
        Variant::ScalarPrefetch | Variant::Avx512Prefetch => {
            let simd = v == Variant::Avx512Prefetch;
            assert!(!simd || have_avx512());
            const D: usize = 4;
            let n = st.hdrs.len();
            for j in 0..n {
                if j + D < n {
                    prefetch_rows(&st.hdrs[j + D].s, &st.rings[j + D]);
                }
                let s = &samples[j * L..(j + 1) * L];
                let (h, r) = (&mut st.hdrs[j], &mut st.rings[j]);
                #[cfg(target_arch = "x86_64")]
                if simd {
                    // SAFETY: the features were detected above.
                    out.push(unsafe { avx512::job_step(h, r, s, now, th, slow, false) });
                    continue;
                }
                out.push(job_step_scalar(h, r, s, now, th, slow));
            }
        }
        #[cfg(target_arch = "x86_64")]
        Variant::LoadOnlyGather | Variant::LoadOnlyScalar => {
            assert!(have_avx512());
            let g = v == Variant::LoadOnlyGather;
            for s in samples.chunks_exact(L) {
                // SAFETY: as above.
                acc = acc.wrapping_add(unsafe { avx512::load_only(s, g) });
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
    acc
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn thresholds() -> Th {
    Th {
        mem_held_frac: 0.05,
        mem_held_mib: 1024.0,
        idle_power_frac: 0.25,
        idle_power_w: 100.0,
        spin_power_frac: 0.3,
        spin_util_milli: 90_000,
        max_gap_s: 180,
        window_s: 1200,
        low_below_milli: 15_000,
        warmup_s: 900,
    }
}

fn stamp(samples: &mut [Sample], c: i64) {
    for (i, s) in samples.iter_mut().enumerate() {
        s.t_s = c * 60;
        s.power_w = (350.0 + ((c as usize + i) & 7) as f64 * 0.1).into();
    }
}

/// Random input, valid and not, at random instants: the AVX-512 path must give the scalar
/// path's findings and state exactly.
fn check_random(th: &Th) {
    let jobs = 64;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut a = State::new(jobs);
    let mut b = State::new(jobs);
    let (mut sa, mut sb) = (0u64, 0u64);
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    let mut samples: Vec<Sample> = vec![Sample::default(); jobs * L];
    let mut t = 0i64;
    let mut compared = 0usize;
    let mut valid = 0usize;
    let (mut frozen, mut healthy, mut watching) = (0usize, 0usize, 0usize);
    for _ in 0..3000 {
        t += [60, 60, 60, 60, 30, 1, 200, 400, 1300][(rnd() % 9) as usize];
        let now = t + (rnd() % 3) as i64 * 30;
        let mut jr = 0u64;
        for (i, s) in samples.iter_mut().enumerate() {
            let r = rnd();
            if i % L == 0 {
                jr = rnd();
            }
            let pick = |k: u64, vals: &[f64]| -> Reading {
                let v = vals[((r >> k) % vals.len() as u64) as usize];
                if v.to_bits() == MISSING_BITS {
                    Reading::MISSING
                } else {
                    v.into()
                }
            };
            let job_r = (i / L) as u64;
            // One GPU of the job late now and then (the job then goes slow).
            s.t_s = if (r >> 58) == 0 { t - 1 } else { t };
            // Mostly valid; sometimes one odd value (the job then goes slow).
            let odd = (r % 997) == 0;
            s.util_pct = pick(
                3,
                if odd {
                    &[-1.0, f64::NAN, 101.0, -0.0, M]
                } else {
                    &[0.0, 5.0, 95.0, 100.0, 95.0, 99.9, 14.9]
                },
            );
            s.sm_active = pick(8, if odd { &[1.5, M] } else { &[M, M, 0.0, 0.5, 1.0] });
            s.mem_total_mib = pick(12, &[81_920.0, 81_920.0, M, 40_000.0]);
            s.mem_used_mib = pick(
                16,
                if odd {
                    &[90_000.0, -3.0, M]
                } else {
                    &[0.0, 60_000.0, 1000.0, 3000.0, M, 39_999.6]
                },
            );
            s.power_w = if (r >> 20) % 4 == 0 {
                pick(22, &[M, 0.0, 1.0, 60.0, 99.0, 100.0, 119.0, 2000.0])
            } else {
                (60.0 + ((r >> 24) % 3000) as f64 * 0.1 + job_r as f64).into()
            };
            s.power_limit_w = pick(40, &[400.0, 400.0, M, 300.0]);
            s.procs = [None, Some(0), Some(1), Some(3), Some(1)][((r >> 44) % 5) as usize];
            if odd && (r >> 50) % 3 == 0 {
                s.procs = Some(2_000_000);
            }
            // A job that reports nothing this cycle: keep its old instant.
            if jr % 16 == 0 {
                s.t_s = t - 7;
            }
        }
        let _ = cycle(Variant::Scalar, &mut a, &samples, now, th, &mut sa, &mut oa);
        let _ = cycle(Variant::Avx512Gather, &mut b, &samples, now, th, &mut sb, &mut ob);
        assert_eq!(sa, sb, "slow-path counts differ");
        for (j, (x, y)) in oa.iter().zip(ob.iter()).enumerate() {
            assert_eq!(x, y, "job {j}: findings differ at t={t}");
            compared += 1;
            valid += (x.evidence.samples_min_per_gpu > 0) as usize;
            frozen += (x.evidence.frozen_gpus > 0) as usize;
            healthy += (x.verdict == Verdict::Healthy) as usize;
            watching += (x.verdict == Verdict::Watching) as usize;
        }
        assert!(a.hdrs == b.hdrs, "headers differ");
        for j in 0..jobs {
            let h = &a.hdrs[j].s;
            for k in 0..h.len {
                let i = ((h.head + k) as usize) & (CAP - 1);
                let (x, y) = (&a.rings[j][i], &b.rings[j][i]);
                assert_eq!(
                    (x.util, x.mem, x.power, x.t_off, x.flags),
                    (y.util, y.mem, y.power, y.t_off, y.flags)
                );
            }
        }
    }
    println!("random check: AVX-512 = scalar on {compared} findings ({valid} windowed: {healthy} healthy, {watching} breaching, {frozen} with a frozen GPU; {sa} slow-path)");
}

/// The spike against the engine on varied valid input (utilisation from 0 to 100, memory
/// free and held, missing fields, sm_active standing in for utilisation, gaps, frozen GPUs):
/// every finding of a job that has never left the common path must be the engine's
/// (verdict, cause, signature, evidence).
fn check_engine(th: &Th) {
    let jobs = 64;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let facts: Vec<JobFacts> = (0..jobs)
        .map(|j| JobFacts {
            job_id: format!("{}", 1_000_000 + j),
            alloc: (0..L as u16)
                .map(|g| GpuRef {
                    node: NodeId(j as u32),
                    gpu: g,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut engine = Engine::new(Policy::default(), Mode::Observe);
    let mut st = State::new(jobs);
    let mut dirty = vec![false; jobs];
    let mut samples: Vec<Sample> = (0..jobs * L)
        .map(|i| Sample {
            node: NodeId((i / L) as u32),
            gpu: (i % L) as u16,
            ..Default::default()
        })
        .collect();
    let mut out = Vec::new();
    let mut slow = 0u64;
    let (mut compared, mut mismatched) = (0usize, 0usize);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut t = 0i64;
    for _ in 0..400 {
        t += match rnd() % 40 {
            0 => 240,
            1 => 30,
            2 => 120,
            _ => 60,
        };
        // Now and then the cycle runs late: the newest sample is stale (the clock never goes
        // back: the next samples are stamped after this `now`).
        let now = if rnd() % 200 == 0 { t + 200 } else { t };
        for j in 0..jobs {
            for g in 0..L {
                let s = &mut samples[j * L + g];
                s.t_s = t;
                let r = rnd();
                let pick = |k: u32, vals: &[f64]| -> Reading {
                    let v = vals[((r >> k) % vals.len() as u64) as usize];
                    if v.to_bits() == MISSING_BITS {
                        Reading::MISSING
                    } else {
                        v.into()
                    }
                };
                if j % 16 == 3 || j % 16 == 7 {
                    // Frozen: the same readings every cycle (busy, at full or at idle power).
                    s.util_pct = 100.0.into();
                    s.sm_active = Reading::MISSING;
                    s.mem_used_mib = 60_000.0.into();
                    s.mem_total_mib = 81_920.0.into();
                    s.power_w = if j % 16 == 3 { 350.0 } else { 80.0 }.into();
                    s.power_limit_w = 400.0.into();
                    s.procs = Some(1);
                    continue;
                }
                s.util_pct = pick(0, &[20.0, 50.0, 95.0, 100.0, 99.9, 33.3, 0.0, 5.0, M]);
                s.sm_active = if s.util_pct.get().is_none() {
                    pick(8, &[0.5, 0.95, 0.0])
                } else {
                    pick(8, &[M, M, 0.3])
                };
                s.mem_total_mib = pick(12, &[81_920.0, 81_920.0, M]);
                s.mem_used_mib = pick(16, &[0.0, 1000.0, 3000.0, 60_000.0, M]);
                s.power_w = match (r >> 20) % 8 {
                    0 => Reading::MISSING,
                    k => (50.0 * k as f64 + ((r >> 24) % 10) as f64 * 0.1).into(),
                };
                s.power_limit_w = pick(28, &[400.0, 400.0, M, 300.0]);
                s.procs = [None, Some(0), Some(1), Some(2)][((r >> 32) % 4) as usize];
            }
        }
        let obs = Observation {
            jobs: &facts,
            samples: &samples,
            scope: Scope::Whole,
            drains: &[],
        };
        engine.step(now, &obs, &mut out);
        let t_sample = t;
        t = now;
        for j in 0..jobs {
            let before = slow;
            let f = job_step_scalar(&mut st.hdrs[j], &mut st.rings[j], &samples[j * L..(j + 1) * L], now, th, &mut slow);
            dirty[j] |= slow != before;
            if dirty[j] {
                continue;
            }
            let e = out.iter().find(|x| x.job_index == j as u32).expect("a finding per job");
            *kinds.entry(format!("{:?}/{:?}", e.verdict, e.cause)).or_default() += 1;
            compared += 1;
            if (f.verdict, f.cause, f.signature, f.evidence) != (e.verdict, e.cause, e.signature, e.evidence) {
                if mismatched < 3 {
                    println!(
                        "job {j} at t={t_sample} (now {now}) differs from the engine:\n  spike  {:?} {:?} {:?}\n  engine {:?} {:?} {:?} {:?}",
                        f.verdict, f.cause, f.evidence, e.verdict, e.cause, e.signature, e.evidence
                    );
                }
                mismatched += 1;
            }
        }
    }
    let clean = dirty.iter().filter(|d| !**d).count();
    println!("engine check on varied input: {} of {compared} findings as the engine's ({clean} of {jobs} jobs never slow; engine verdicts {kinds:?})", compared - mismatched);
}

/// Twenty cycles of one variant (or of the engine), for instruction counts: callgrind
/// (`--toggle-collect=*counted*`) or gdb single-stepping (valgrind 3.19 has no AVX-512).
#[inline(never)]
fn counted(
    v: Option<Variant>,
    st: &mut State,
    engine: &mut Engine,
    stamped: &[Vec<Sample>],
    facts: &[JobFacts],
    th: &Th,
    out: &mut Vec<Finding>,
) -> u64 {
    let mut slow = 0;
    let mut acc = 0;
    for (c, samples) in (41..=60i64).zip(stamped) {
        match v {
            Some(v) => acc += cycle(v, st, samples, c * 60, th, &mut slow, out),
            None => engine.step(
                c * 60,
                &Observation {
                    jobs: facts,
                    samples,
                    scope: Scope::Whole,
                    drains: &[],
                },
                out,
            ),
        }
    }
    acc + slow
}

fn count_mode(jobs: usize, which: &str, base: &[Sample]) {
    let th = thresholds();
    let v = [
        Variant::Scalar,
        Variant::ScalarPrefetch,
        Variant::Avx512Gather,
        Variant::Avx512Loads,
        Variant::Avx512Prefetch,
        Variant::LoadOnlyGather,
        Variant::LoadOnlyScalar,
    ]
    .into_iter()
    .find(|v| format!("{v:?}").eq_ignore_ascii_case(which));
    let facts: Vec<JobFacts> = (0..jobs)
        .map(|j| JobFacts {
            job_id: format!("{}", 1_000_000 + j),
            alloc: (0..L as u16)
                .map(|g| GpuRef {
                    node: NodeId(j as u32),
                    gpu: g,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut st = State::new(jobs);
    let mut engine = Engine::new(Policy::default(), Mode::Observe);
    let mut out = Vec::with_capacity(jobs);
    let mut slow = 0;
    let mut samples = base.to_vec();
    for c in 1..=40i64 {
        stamp(&mut samples, c);
        match v {
            Some(v) => {
                cycle(v, &mut st, &samples, c * 60, &th, &mut slow, &mut out);
            }
            None => engine.step(
                c * 60,
                &Observation {
                    jobs: &facts,
                    samples: &samples,
                    scope: Scope::Whole,
                    drains: &[],
                },
                &mut out,
            ),
        }
    }
    let stamped: Vec<Vec<Sample>> = (41..=60)
        .map(|c| {
            stamp(&mut samples, c);
            samples.clone()
        })
        .collect();
    black_box(counted(v, &mut st, &mut engine, &stamped, &facts, &th, &mut out));
    println!("{which}: {} findings", out.len());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let jobs: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let only: Option<&str> = args.iter().find_map(|a| a.strip_prefix("--only=")).map(|s| s as &str);
    let th = thresholds();
    let avx = have_avx512();
    {
        // The gathers read a Reading's f64 at the field's offset.
        let s = Sample {
            util_pct: 42.5.into(),
            ..Default::default()
        };
        let p = unsafe { *((&s as *const Sample as *const u8).add(offset_of!(Sample, util_pct)) as *const f64) };
        assert_eq!(p, 42.5);
    }
    println!(
        "Sample is {} bytes; Hdr {} bytes, Row {} bytes; AVX-512 {}",
        size_of::<Sample>(),
        size_of::<Hdr>(),
        size_of::<Row>(),
        if avx { "detected" } else { "absent: scalar only" }
    );
    let base: Vec<Sample> = (0..jobs * L)
        .map(|i| Sample {
            node: NodeId((i / L) as u32),
            gpu: (i % L) as u16,
            util_pct: 95.0.into(),
            mem_used_mib: 60_000.0.into(),
            mem_total_mib: 81_920.0.into(),
            power_w: 350.0.into(),
            power_limit_w: 400.0.into(),
            procs: Some(1),
            ..Default::default()
        })
        .collect();
    if let Some(w) = args.iter().find_map(|a| a.strip_prefix("--count=")) {
        count_mode(jobs, w, &base);
        return;
    }
    if only.is_none() {
        check_engine(&th);
    }
    if avx && only.is_none() {
        check_random(&th);
    }
    let mut variants = vec![Variant::Scalar, Variant::ScalarPrefetch];
    if avx {
        variants.extend([
            Variant::Avx512Gather,
            Variant::Avx512Loads,
            Variant::Avx512Prefetch,
            Variant::LoadOnlyGather,
            Variant::LoadOnlyScalar,
        ]);
    }
    let mut finals: Vec<(Variant, Vec<Finding>)> = Vec::new();
    for v in variants {
        if only.is_some_and(|o| !format!("{v:?}").eq_ignore_ascii_case(o)) {
            continue;
        }
        let mut st = State::new(jobs);
        let mut samples = base.clone();
        let mut out: Vec<Finding> = Vec::with_capacity(jobs);
        let mut best = f64::MAX;
        let mut all = Vec::new();
        let mut rebuild = Vec::new();
        let mut mean20 = 0.0;
        let mut slow = 0u64;
        for c in 1..=70i64 {
            stamp(&mut samples, c);
            let t0 = Instant::now();
            let acc = cycle(v, &mut st, &samples, c * 60, &th, &mut slow, &mut out);
            let ns = t0.elapsed().as_nanos() as f64 / (jobs * L) as f64;
            black_box((&out, acc));
            if c > 40 {
                // Cycles 41 and 61 rebuild every job's suffix maxima (the jobs started
                // together); best-of skips them, the median does not.
                if c == 41 || c == 61 {
                    rebuild.push(ns);
                }
                if c <= 60 {
                    // The policy bench's mean covers consecutive cycles, rebuilds included.
                    mean20 += ns / 20.0;
                }
                best = best.min(ns);
                all.push(ns);
                if std::env::var_os("SIMD_SPIKE_CYCLES").is_some() {
                    eprint!("{c}:{ns:.1} ");
                }
            }
        }
        let healthy = out.iter().filter(|f| f.verdict == Verdict::Healthy).count();
        println!("{v:?}: {jobs} jobs x {L} GPUs: {best:.1} ns per GPU-sample (best of 30 cycles; median {:.1}; mean of cycles 41-60 {mean20:.1}; the two rebuild cycles {:.1}, {:.1}); {healthy} healthy; {slow} slow-path", median(&mut all), rebuild[0], rebuild[1]);
        if !out.is_empty() {
            finals.push((v, out));
        }
    }
    if only.is_some_and(|o| o != "engine") {
        return;
    }
    // The engine on the same workload, same machine state, for comparison and for the check.
    let facts: Vec<JobFacts> = (0..jobs)
        .map(|j| JobFacts {
            job_id: format!("{}", 1_000_000 + j),
            alloc: (0..L as u16)
                .map(|g| GpuRef {
                    node: NodeId(j as u32),
                    gpu: g,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut engine = Engine::new(Policy::default(), Mode::Observe);
    let mut samples = base.clone();
    let mut out = Vec::with_capacity(jobs);
    let mut best_engine = f64::MAX;
    let mut all = Vec::new();
    let mut mean20 = 0.0;
    for c in 1..=70i64 {
        stamp(&mut samples, c);
        let obs = Observation {
            jobs: &facts,
            samples: &samples,
            scope: Scope::Whole,
            drains: &[],
        };
        let t0 = Instant::now();
        engine.step(c * 60, &obs, &mut out);
        let ns = t0.elapsed().as_nanos() as f64 / (jobs * L) as f64;
        black_box(&out);
        if c > 40 {
            best_engine = best_engine.min(ns);
            all.push(ns);
            if c <= 60 {
                mean20 += ns / 20.0;
            }
        }
    }
    println!(
        "engine: {jobs} jobs x {L} GPUs: {best_engine:.1} ns per GPU-sample (best of 30 cycles; median {:.1}; mean of cycles 41-60 {mean20:.1})",
        median(&mut all)
    );
    // The check: same verdict, cause, signature and evidence as the engine, job by job.
    for (v, mine) in &finals {
        assert_eq!(mine.len(), out.len());
        let mut bad = 0;
        for (j, (m, e)) in mine.iter().zip(out.iter()).enumerate() {
            let same = m.verdict == e.verdict && m.cause == e.cause && m.signature == e.signature && m.evidence == e.evidence;
            if !same {
                if bad == 0 {
                    println!(
                        "{v:?} job {j} differs from the engine:\n  spike  {:?} {:?} {:?}\n  engine {:?} {:?} {:?}",
                        m.verdict, m.cause, m.evidence, e.verdict, e.cause, e.evidence
                    );
                }
                bad += 1;
            }
        }
        println!("{v:?}: {} of {} findings as the engine's", mine.len() - bad, mine.len());
    }
}
