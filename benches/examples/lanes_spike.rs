//! A feasibility spike for issue 2's 20 ns target, not the engine: the common path of a
//! job-lane core, where a job's GPUs are worked together (one lane each) and its window state
//! is laid out by GPU within the job, in one allocation per job.
//!
//! It does what the engine does for a job whose GPUs all report one valid sample each at the
//! same instant (the common case: one nvidia-smi read per node): every field check of guard
//! 3, the entry flags, the freeze and gap marks, eviction, counts and sums, the sliding peak,
//! per-GPU coverage, pooling, and a finding per job. Anything else is counted as "slow path"
//! and skipped, so the figure is a floor for that design, not a result. It is not checked
//! against the engine, and models less than the engine's coverage rules (no copy gaps or
//! frozen tail, no `freeze_undetectable_gpus`, `NoBreach` for broken evidence: on varied input
//! 18,044 of 25,600 of its findings differ). `simd_spike.rs` models them exactly and is
//! checked; read its figures, not these, as the floor of a job-lane core.
//!
//! Usage: `lanes_spike [jobs]` (default 10,000 jobs × 8 GPUs); prints the best of 30 cycles,
//! then the engine's best on the same all-busy workload in the same process, so the two
//! figures share the machine's load. Window headers and rings are kept in two arrays (rings
//! inline in the headers cost about 5 ns more at 10,000 jobs).
//!
//! Measured 2026-11-30 on the 2-core machine, under load from other builds: 45 ns (spike)
//! against 58 ns (engine) at 10,000 × 8, and 26.5 ns against 45 ns at 64 × 8 (in cache). Built
//! with `-C target-cpu=native` (AVX-512), the spike is no faster at 10,000 × 8 and slower in
//! cache (37 ns): the compiler's own vectorisation of these lane loops does not pay. So the
//! layout alone is worth 20–40 %; issue 2's 20 ns needs hand-written SIMD and a smaller
//! state as well (ARCHITECTURE.md, "Where the time goes").

// Lane loops index several arrays by GPU at once; that is the point of the layout.
#![allow(clippy::needless_range_loop)]

use policy::{Cause, Engine, Evidence, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, Reading, Sample, Scope, Verdict};
use std::hint::black_box;
use std::time::Instant;

const L: usize = 8;
const CAP: usize = 32;
const NFLAGS: usize = 12;

const MEM_HELD: u32 = 1 << 0;
const MEM_FREE: u32 = 1 << 1;
const PROCS_POS: u32 = 1 << 2;
const PROCS_ZERO: u32 = 1 << 3;
const POWER_KNOWN: u32 = 1 << 4;
const POWER_IDLE: u32 = 1 << 5;
const POWER_SPIN_LOW: u32 = 1 << 6;
const UTIL_SPIN: u32 = 1 << 7;
const ZERO_OR_MISSING: u32 = 1 << 8;
const CHANGED: u32 = 1 << 9;
const GAP_BEFORE: u32 = 1 << 10;
const ALL_ZERO: u32 = 1 << 11;

/// One instant of a job's window, one lane per GPU.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Row {
    t_off: u32,
    util_milli: [u32; L],
    flags: [u32; L],
    mem_mib: [u32; L],
    power_dw: [u32; L],
    suffix_max: [u32; L],
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct JobLanes {
    base_t: i64,
    head: u32,
    len: u32,
    out_len: u32,
    last_valid_t: i64,
    newest_t: i64,
    in_max: [u32; L],
    counts: [[u32; L]; NFLAGS],
    sum_util: [u64; L],
    sum_pw: [u64; L],
    sum_pw2: [u64; L],
    sum_mem: [u64; L],
    last_bits: [[u64; L]; 4],
    // ladder state, as the engine keeps it per job
    breach_start: Option<i64>,
    rung: u8,
}

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

#[inline(always)]
fn job_step(st: &mut JobLanes, ring: &mut [Row; CAP], s: &[Sample], now: i64, th: &Th, slow: &mut u64) -> Finding {
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
    if !synced || t <= st.newest_t || t > now + 60 {
        *slow += 1;
        return Finding {
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
        };
    }
    st.newest_t = t;
    let mut flags = [0u32; L];
    let mut util_milli = [0u32; L];
    let mut mem_mib = [0u32; L];
    let mut power_dw = [0u32; L];
    let mut known = [[false; L]; 4];
    let mut bad_any = false;
    let b = |c: bool, f: u32| (c as u32) * f;
    for i in 0..L {
        let u_ok = (u[i] >= 0.0) & (u[i] <= 100.0);
        let sm_ok = (sm[i] >= 0.0) & (sm[i] <= 1.0);
        let mt_ok = (mt[i] > 0.0) & (mt[i] <= 1_048_576.0);
        let mu_in = (mu[i] >= 0.0) & (mu[i] <= 1_048_576.0);
        let mu_over = mu_in & mt_ok & (mu[i] > mt[i]);
        let mu_ok = mu_in & !mu_over;
        let p_ok = (p[i] >= 1.0) & (p[i] <= 2000.0);
        let l_ok = (l[i] >= 1.0) & (l[i] <= 2000.0);
        let miss = |x: f64| x.to_bits() == Reading::MISSING.to_bits();
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
        flags[i] = b(mu_ok & held, MEM_HELD)
            | b(mu_ok & !held, MEM_FREE)
            | b(procs[i] == 0, PROCS_ZERO)
            | b((procs[i] != 0) & (procs[i] <= 1_000_000), PROCS_POS)
            | b(p_ok, POWER_KNOWN)
            | b(p_ok & idle, POWER_IDLE)
            | b(p_ok & spin_low, POWER_SPIN_LOW)
            | b(um >= th.spin_util_milli, UTIL_SPIN)
            | b((compute == 0.0) & (mu[i] == 0.0) & (p[i] == 0.0), ALL_ZERO)
            | b((compute == 0.0) & ((mu[i] == 0.0) | !mu_ok) & !p_ok, ZERO_OR_MISSING);
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
    }
    // Freeze and gap marks.
    let first = st.last_valid_t == i64::MIN;
    let gap = !first && t - st.last_valid_t > th.max_gap_s;
    for i in 0..L {
        let mut changed = first;
        for f in 0..4 {
            changed |= known[f][i] & (bits[f][i] != st.last_bits[f][i]);
            st.last_bits[f][i] = if known[f][i] { bits[f][i] } else { st.last_bits[f][i] };
        }
        flags[i] |= b(changed, CHANGED) | b(gap, GAP_BEFORE);
    }
    st.last_valid_t = t;
    if st.base_t == i64::MIN {
        st.base_t = t;
    }
    // Evict.
    let cutoff = now - th.window_s;
    let off_cut = (cutoff - st.base_t).max(-1);
    while st.len > 0 && ring[st.head as usize].t_off as i64 <= off_cut {
        if st.out_len == 0 {
            let mut m = [0u32; L];
            for k in (0..st.len).rev() {
                let r = &mut ring[((st.head + k) as usize) & (CAP - 1)];
                for i in 0..L {
                    m[i] = m[i].max(r.util_milli[i]);
                }
                r.suffix_max = m;
            }
            st.out_len = st.len;
            st.in_max = [0; L];
        }
        let r = ring[st.head as usize];
        for f in 0..NFLAGS {
            for i in 0..L {
                st.counts[f][i] -= (r.flags[i] >> f) & 1;
            }
        }
        for i in 0..L {
            let pw = r.power_dw[i] as u64;
            st.sum_util[i] -= r.util_milli[i] as u64;
            st.sum_pw[i] -= pw;
            st.sum_pw2[i] -= pw * pw;
            st.sum_mem[i] -= r.mem_mib[i] as u64;
        }
        st.head = (st.head + 1) & (CAP as u32 - 1);
        st.len -= 1;
        st.out_len -= 1;
    }
    // Push.
    let slot = ((st.head + st.len) as usize) & (CAP - 1);
    let r = &mut ring[slot];
    r.t_off = (t - st.base_t) as u32;
    r.util_milli = util_milli;
    r.flags = flags;
    r.mem_mib = mem_mib;
    r.power_dw = power_dw;
    st.len += 1;
    for f in 0..NFLAGS {
        for i in 0..L {
            st.counts[f][i] += (flags[i] >> f) & 1;
        }
    }
    for i in 0..L {
        let pw = power_dw[i] as u64;
        st.sum_util[i] += util_milli[i] as u64;
        st.sum_pw[i] += pw;
        st.sum_pw2[i] += pw * pw;
        st.sum_mem[i] += mem_mib[i] as u64;
        st.in_max[i] = st.in_max[i].max(util_milli[i]);
    }
    // Brief and pool.
    let front = &ring[st.head as usize];
    let n = st.len;
    let first_t = st.base_t + front.t_off as i64;
    let stale = now - st.last_valid_t > th.max_gap_s;
    let short = first_t > cutoff + th.max_gap_s;
    let mut problem = stale;
    let mut min_peak = u32::MAX;
    let mut all_spin = true;
    let (mut util_sum, mut pw_sum, mut mem_sum, mut pw_n, mut mem_n, mut held_gpus, mut frozen, mut peak) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u32, 0u32, 0u32);
    for i in 0..L {
        let c = |f: u32| st.counts[f.trailing_zeros() as usize][i];
        let holes = c(GAP_BEFORE) - ((front.flags[i] & GAP_BEFORE != 0) as u32);
        let identical = n >= 2 && c(CHANGED) - ((front.flags[i] & CHANGED != 0) as u32) == 0;
        let power_known = c(POWER_KNOWN);
        let all_zero = c(ZERO_OR_MISSING) == n && c(ALL_ZERO) > 0;
        let fz = identical & (power_known >= 2);
        frozen += fz as u32;
        problem |= (holes > 0) | all_zero | fz;
        let pk = if st.out_len > 0 {
            front.suffix_max[i].max(st.in_max[i])
        } else {
            st.in_max[i]
        };
        min_peak = min_peak.min(pk);
        peak = peak.max(pk);
        all_spin &= (c(UTIL_SPIN) == n) & (power_known == n) & (c(POWER_SPIN_LOW) == n);
        util_sum += st.sum_util[i];
        pw_sum += st.sum_pw[i];
        mem_sum += st.sum_mem[i];
        pw_n += power_known as u64;
        mem_n += (c(MEM_HELD) + c(MEM_FREE)) as u64;
        held_gpus += (c(MEM_HELD) == n) as u32;
    }
    let ev = Evidence {
        window_start_s: first_t,
        window_end_s: st.last_valid_t,
        gpus_allocated: L as u32,
        gpus_observed: L as u32,
        samples_min_per_gpu: n,
        samples_max_per_gpu: n,
        frozen_gpus: frozen,
        peak_util_pct: peak as f64 / 1000.0,
        mean_util_pct: util_sum as f64 / (n as u64 * L as u64) as f64 / 1000.0,
        mem_used_mean_mib: (mem_n > 0).then(|| mem_sum as f64 / mem_n as f64),
        mem_held_gpus: held_gpus,
        power_mean_w: (pw_n > 0).then(|| pw_sum as f64 / pw_n as f64 / 10.0),
        ..Evidence::default()
    };
    // The ladder, for a job that does not breach (the common case).
    let (verdict, cause) = if now < th.warmup_s {
        (Verdict::Healthy, Cause::Warmup)
    } else if problem {
        (Verdict::InsufficientEvidence, Cause::NoBreach)
    } else if min_peak < th.low_below_milli || all_spin {
        // A breach: the engine would classify here (not modelled: counted as slow).
        *slow += 1;
        (Verdict::Watching, Cause::Breach)
    } else {
        (Verdict::Healthy, Cause::NoBreach)
    };
    if verdict == Verdict::Healthy {
        st.breach_start = None;
        st.rung = 0;
    }
    black_box(short);
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

fn main() {
    let jobs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let th = Th {
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
    };
    let empty = JobLanes {
        base_t: i64::MIN,
        head: 0,
        len: 0,
        out_len: 0,
        last_valid_t: i64::MIN,
        newest_t: i64::MIN,
        in_max: [0; L],
        counts: [[0; L]; NFLAGS],
        sum_util: [0; L],
        sum_pw: [0; L],
        sum_pw2: [0; L],
        sum_mem: [0; L],
        last_bits: [[Reading::MISSING.to_bits(); L]; 4],
        breach_start: None,
        rung: 0,
    };
    let mut states: Vec<JobLanes> = vec![empty; jobs];
    let mut rings: Vec<[Row; CAP]> = vec![[Row::default(); CAP]; jobs];
    // The bench's workload: all busy (the spike models no breach path).
    let mut samples: Vec<Sample> = (0..jobs * L)
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
    let mut out: Vec<Finding> = Vec::with_capacity(jobs);
    let mut best = f64::MAX;
    let mut slow = 0u64;
    for c in 1..=70i64 {
        let now = c * 60;
        for (i, s) in samples.iter_mut().enumerate() {
            s.t_s = now;
            s.power_w = (350.0 + ((c as usize + i) & 7) as f64 * 0.1).into();
        }
        let t0 = Instant::now();
        out.clear();
        for ((st, ring), s) in states.iter_mut().zip(rings.iter_mut()).zip(samples.chunks_exact(L)) {
            out.push(job_step(st, ring, s, now, &th, &mut slow));
        }
        let ns = t0.elapsed().as_nanos() as f64 / (jobs * L) as f64;
        black_box(&out);
        if c > 40 {
            best = best.min(ns);
        }
    }
    let healthy = out.iter().filter(|f| f.verdict == Verdict::Healthy).count();
    println!("{jobs} jobs x {L} GPUs: {best:.1} ns per GPU-sample (best of 30 cycles); {healthy} healthy findings; {slow} slow-path jobs");
    // The engine on the same workload, same machine state, for comparison.
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
    let mut best_engine = f64::MAX;
    for c in 1..=70i64 {
        let now = c * 60;
        for (i, s) in samples.iter_mut().enumerate() {
            s.t_s = now;
            s.power_w = (350.0 + ((c as usize + i) & 7) as f64 * 0.1).into();
        }
        let obs = Observation {
            jobs: &facts,
            samples: &samples,
            scope: Scope::Whole,
            drains: &[],
        };
        let t0 = Instant::now();
        engine.step(now, &obs, &mut out);
        let ns = t0.elapsed().as_nanos() as f64 / (jobs * L) as f64;
        black_box(&out);
        if c > 40 {
            best_engine = best_engine.min(ns);
        }
    }
    println!("engine, same workload: {best_engine:.1} ns per GPU-sample");
}
