//! proptest properties: one per safety guard, plus order independence and threshold
//! monotonicity. Scenarios are small random clusters whose GPUs switch between behaviours,
//! including collector faults.

mod harness;
use harness::*;
use policy::{Cause, Finding, GpuRef, JobFacts, Mode, NodeId, PolicyConfig, Reading, Sample, Scope, SignatureId, Verdict};
use proptest::prelude::*;

const TICKS: usize = 200;

#[derive(Clone, Debug)]
struct JobSpec {
    start_tick: i64,
    nodes: u32,
    gpus: u16,
    /// Per GPU: (state, ticks) segments, repeated to cover the run.
    segments: Vec<Vec<(Gpu, u16)>>,
}

fn gpu_state() -> impl Strategy<Value = Gpu> {
    prop_oneof![
        4 => Just(Gpu::Idle),
        3 => Just(Gpu::Hung),
        3 => Just(Gpu::Busy),
        1 => Just(Gpu::Spin),
        1 => Just(Gpu::Starved),
        1 => Just(Gpu::Stall),
        1 => Just(Gpu::Missing),
        1 => Just(Gpu::NaUtil),
        1 => Just(Gpu::AllZero),
        1 => Just(Gpu::Future),
        1 => (0u8..=100).prop_map(Gpu::Util),
    ]
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (0i64..30, 1u32..=2, 1u16..=2).prop_flat_map(|(start_tick, nodes, gpus)| {
        let per_gpu = prop::collection::vec((gpu_state(), 1u16..120), 1..5);
        prop::collection::vec(per_gpu, (nodes as usize) * (gpus as usize)).prop_map(move |segments| JobSpec {
            start_tick,
            nodes,
            gpus,
            segments,
        })
    })
}

fn scenario() -> impl Strategy<Value = Vec<JobSpec>> {
    prop::collection::vec(job_spec(), 1..4)
}

fn test_cfg() -> PolicyConfig {
    cfg_with_cancel(90 * 60)
}

fn jobs_of(spec: &[JobSpec]) -> Vec<JobFacts> {
    spec.iter()
        .enumerate()
        .map(|(j, s)| {
            let nodes: Vec<(u32, u16)> = (0..s.nodes).map(|n| (j as u32 * 2 + n, s.gpus)).collect();
            job(&format!("{}", 100 + j), s.start_tick * 60, &nodes)
        })
        .collect()
}

fn state_at(spec: &JobSpec, gpu_index: usize, tick: i64) -> Gpu {
    let segs = &spec.segments[gpu_index];
    let total: i64 = segs.iter().map(|s| s.1 as i64).sum();
    let mut t = tick.rem_euclid(total.max(1));
    for &(g, len) in segs {
        if t < len as i64 {
            return g;
        }
        t -= len as i64;
    }
    segs[0].0
}

/// The samples of every job at cycle `tick` (cycle time `tick × 60`).
fn samples_at(spec: &[JobSpec], jobs: &[JobFacts], tick: i64) -> Vec<Sample> {
    let now = tick * 60;
    let mut v = Vec::new();
    for (s, j) in spec.iter().zip(jobs) {
        for (gi, &r) in j.alloc.iter().enumerate() {
            if let Some(x) = sample(state_at(s, gi, tick), now, r) {
                v.push(x);
            }
        }
    }
    v
}

/// Runs a scenario and returns (now_s, findings, samples) per cycle.
fn run_with(
    spec: &[JobSpec],
    cfg: PolicyConfig,
    mode: Mode,
    scope: Scope,
    mut edit: impl FnMut(i64, &mut Vec<Sample>),
) -> Vec<(i64, Vec<Finding>, Vec<Sample>)> {
    let jobs = jobs_of(spec);
    let mut r = Run::new(cfg, mode, jobs.clone());
    r.scope = scope;
    let mut out = Vec::new();
    for tick in 1..=TICKS as i64 {
        let mut samples = samples_at(spec, &jobs, tick);
        edit(tick, &mut samples);
        r.now_s = tick * 60;
        r.tick_with(samples.clone());
        out.push((r.now_s, r.out.clone(), samples));
    }
    out
}

fn run(spec: &[JobSpec]) -> Vec<(i64, Vec<Finding>, Vec<Sample>)> {
    run_with(spec, test_cfg(), Mode::Observe, Scope::Whole, |_, _| {})
}

fn verdicts(h: &[(i64, Vec<Finding>, Vec<Sample>)]) -> Vec<Vec<(Verdict, Option<SignatureId>)>> {
    h.iter()
        .map(|(_, f, _)| f.iter().map(|x| (x.verdict, x.signature)).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Guard 1: a job younger than warmup is never judged.
    #[test]
    fn prop_guard_1_warmup(spec in scenario()) {
        let c = test_cfg();
        let jobs = jobs_of(&spec);
        for (now, f, _) in run(&spec) {
            for x in &f {
                if now - jobs[x.job_index as usize].start_s < c.warmup.secs() {
                    prop_assert_eq!((x.verdict, x.cause), (Verdict::Healthy, Cause::Warmup));
                }
            }
        }
    }

    /// Guard 2: a verdict at alert or above has valid samples covering the whole window on
    /// every observed GPU, checked against the raw samples.
    #[test]
    fn prop_guard_2_full_window(spec in scenario()) {
        let c = test_cfg();
        let (w, gap) = (c.window.secs(), c.max_sample_gap.secs());
        let jobs = jobs_of(&spec);
        let h = run(&spec);
        for (i, (now, f, _)) in h.iter().enumerate() {
            for x in f.iter().filter(|x| x.verdict >= Verdict::Alert) {
                for r in &jobs[x.job_index as usize].alloc {
                    // Valid = present, in the window, not from the future when it arrived,
                    // util readable.
                    let mut times: Vec<i64> = h[..=i].iter().flat_map(|(at, _, s)| s.iter().filter(move |s| s.t_s <= *at + c.clock_skew.secs()))
                        .filter(|s| s.node == r.node && s.gpu == r.gpu && s.t_s > now - w && s.t_s <= *now && !s.util_pct.is_missing())
                        .map(|s| s.t_s).collect();
                    times.sort_unstable();
                    prop_assert!(!times.is_empty());
                    prop_assert!(times[0] <= now - w + gap, "first {} now {}", times[0], now);
                    prop_assert!(now - times[times.len() - 1] <= gap);
                    prop_assert!(times.windows(2).all(|p| p[1] - p[0] <= gap));
                }
            }
        }
    }

    /// Guard 3: missing data never escalates. A GPU whose last `max_sample_gap` holds no
    /// readable sample keeps its job at or below insufficient_evidence.
    #[test]
    fn prop_guard_3_missing_never_escalates(spec in scenario()) {
        let c = test_cfg();
        let gap = c.max_sample_gap.secs();
        let jobs = jobs_of(&spec);
        let h = run(&spec);
        for (i, (now, f, _)) in h.iter().enumerate() {
            for x in f {
                let blind = jobs[x.job_index as usize].alloc.iter().any(|r| {
                    !h[..=i].iter().flat_map(|(at, _, s)| s.iter().filter(move |s| s.t_s <= *at + 60))
                        .any(|s| s.node == r.node && s.gpu == r.gpu && s.t_s >= now - gap && s.t_s <= *now && !s.util_pct.is_missing())
                });
                if blind {
                    prop_assert!(x.verdict <= Verdict::InsufficientEvidence, "{} at {now}", x.verdict);
                }
            }
        }
    }

    /// Guard 3 (trial 10): a collector that freezes at some tick (every later sample of the
    /// frozen GPUs a bit-for-bit copy of that tick's, power included, freshly stamped) gives
    /// no drain or cancel, and no alert either, once the copies span more than
    /// `max_sample_gap`: they are no newer than the first of them. (A window left with one
    /// copy after a long outage may read `watching`: short coverage, which never acts.)
    #[test]
    fn prop_guard_3_a_collector_frozen_partway_is_stale(spec in scenario(), freeze_tick in 20i64..200, every_gpu in any::<bool>()) {
        let gap = test_cfg().max_sample_gap.secs();
        let mut kept: std::collections::BTreeMap<(u32, u16), Sample> = std::collections::BTreeMap::new();
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Whole, |tick, s| {
            for x in s.iter_mut().filter(|x| every_gpu || x.gpu == 0) {
                // Frozen on an on-time sample (one the scenario stamped in the future was never
                // taken in, so its first copy would be new information).
                if tick == freeze_tick && x.t_s == tick * 60 {
                    kept.insert((x.node.0, x.gpu), *x);
                } else if tick > freeze_tick {
                    // Re-served and freshly stamped by the collector's clock (a sample the
                    // scenario stamped in the future is stamped now here).
                    if let Some(k) = kept.get(&(x.node.0, x.gpu)) {
                        *x = Sample { t_s: tick * 60, ..*k };
                    }
                }
            }
        });
        let jobs = jobs_of(&spec);
        for (now, f, _) in &h {
            if *now <= freeze_tick * 60 + gap {
                continue;
            }
            for x in f {
                // Only GPUs whose frozen copy carried power are told apart from a quiet GPU.
                let frozen_with_power = jobs[x.job_index as usize].alloc.iter().any(|r| {
                    kept.get(&(r.node.0, r.gpu)).is_some_and(|k| k.power_w.get().is_some_and(|p| p > 0.0))
                });
                if frozen_with_power {
                    prop_assert!(x.verdict < Verdict::Alert, "{} at {now} (frozen at {})", x.verdict, freeze_tick * 60);
                }
            }
        }
    }

    /// Guard 3 (review 18): a freeze that has ended is a hole while its copies lie in the
    /// window. A collector re-serves one tick's sample for longer than `max_sample_gap`, then
    /// recovers; until the last copy has left the window, no job that ran on a frozen GPU
    /// (with power on the frozen sample) through the freeze reaches alert: the copies say
    /// nothing about what the GPU did, as an outage of the same length would not.
    #[test]
    fn prop_guard_3_a_freeze_that_ended_is_a_hole_while_in_the_window(
        spec in scenario(), freeze_tick in 20i64..200, extra_ticks in 1i64..8, every_gpu in any::<bool>(),
    ) {
        let c = test_cfg();
        let (gap, w) = (c.max_sample_gap.secs(), c.window.secs());
        let thaw_tick = freeze_tick + gap / 60 + extra_ticks;
        let mut kept: std::collections::BTreeMap<(u32, u16), Sample> = std::collections::BTreeMap::new();
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Whole, |tick, s| {
            for x in s.iter_mut().filter(|x| every_gpu || x.gpu == 0) {
                if tick == freeze_tick && x.t_s == tick * 60 {
                    kept.insert((x.node.0, x.gpu), *x);
                } else if tick > freeze_tick && tick < thaw_tick {
                    if let Some(k) = kept.get(&(x.node.0, x.gpu)) {
                        *x = Sample { t_s: tick * 60, ..*k };
                    }
                }
            }
        });
        let last_copy_s = (thaw_tick - 1) * 60;
        let jobs = jobs_of(&spec);
        for (now, f, _) in &h {
            if *now < thaw_tick * 60 || *now >= last_copy_s + w {
                continue;
            }
            for x in f {
                let job = &jobs[x.job_index as usize];
                // Copies of a sample with no readable util are no entries at all (invalid
                // samples), so they leave no stretch of copies to count.
                let through = job.start_s <= freeze_tick * 60 && job.alloc.iter().any(|r| {
                    kept.get(&(r.node.0, r.gpu)).is_some_and(|k| {
                        k.power_w.get().is_some_and(|p| p > 0.0) && k.util_pct.get().is_some_and(|u| (0.0..=100.0).contains(&u))
                    })
                });
                if through {
                    prop_assert!(x.verdict < Verdict::Alert, "{} at {now} (frozen {}..{})", x.verdict, freeze_tick * 60, last_copy_s);
                }
            }
        }
    }

    /// Guard 4: if every GPU of a job had a sample at or above the threshold in the window,
    /// no low-utilisation signature names it. Samples stamped before the job started are the
    /// GPU's earlier history, not the job's evidence (they count as invalid), so they do not
    /// count here either.
    #[test]
    fn prop_guard_4_peak_not_mean(spec in scenario()) {
        let c = test_cfg();
        let w = c.window.secs();
        let jobs = jobs_of(&spec);
        let h = run(&spec);
        for (i, (now, f, _)) in h.iter().enumerate() {
            for x in f {
                let job = &jobs[x.job_index as usize];
                let all_busy = job.alloc.iter().all(|r| {
                    h[..=i].iter().flat_map(|(at, _, s)| s.iter().filter(move |s| s.t_s <= *at + 60))
                        .any(|s| s.node == r.node && s.gpu == r.gpu && s.t_s > now - w && s.t_s <= *now && s.t_s >= job.start_s && s.util_pct.get().is_some_and(|u| u >= c.util_threshold_pct && u <= 100.0))
                });
                if all_busy {
                    prop_assert!(matches!(x.signature_name(), "none" | "spin"), "{} at {now}", x.signature_name());
                }
            }
        }
    }

    /// Guards 5 and 6: above alert, verdicts climb at most one rung per cycle; a cancel comes
    /// after a drain at least one window earlier within an unbroken escalation that began at
    /// least `notice` ago.
    #[test]
    fn prop_guard_5_6_one_rung_and_cancel_history(spec in scenario()) {
        let c = test_cfg();
        let h = run(&spec);
        let v = verdicts(&h);
        for j in 0..spec.len() {
            for i in 1..v.len() {
                let (prev, cur) = (v[i - 1][j].0, v[i][j].0);
                if cur > Verdict::Alert {
                    prop_assert!(prev >= Verdict::Alert && (cur as u8) <= prev as u8 + 1, "{prev} → {cur}");
                }
                if cur == Verdict::Cancel {
                    let now = h[i].0;
                    let run_start = (0..=i).rev().take_while(|&k| v[k][j].0 >= Verdict::Alert).last().unwrap();
                    prop_assert!(now - h[run_start].0 >= c.notice.secs());
                    let first_drain = (run_start..=i).find(|&k| v[k][j].0 >= Verdict::Drain).unwrap();
                    prop_assert!(h[first_drain].0 + 60 <= now - c.window.secs());
                }
            }
        }
    }

    /// Guard 7 with guard 5: a cancel needs a signature whose ceiling allows cancel on every
    /// cycle of the cancel stage's dwell (less the window that confirms it), not merely a long
    /// breach under some other signature.
    #[test]
    fn prop_guard_5_7_cancel_dwell_is_under_a_cancel_ceiling(spec in scenario()) {
        let c = test_cfg();
        let p = policy::Policy::new(&c).unwrap();
        let cancel_after = p.stage_after_s(Verdict::Cancel).unwrap();
        let h = run(&spec);
        for (i, (now, f, _)) in h.iter().enumerate() {
            for x in f.iter().filter(|x| x.verdict == Verdict::Cancel) {
                let j = x.job_index as usize;
                for (t, g, _) in &h[..=i] {
                    if *t >= now - (cancel_after - c.window.secs()) {
                        let sig = g[j].signature;
                        prop_assert!(sig.is_some_and(|s| p.ceiling(s) == Verdict::Cancel), "at {t} before a cancel at {now}: {}", g[j].signature_name());
                    }
                }
            }
        }
    }

    /// Guard 6: an engine built for enforcement never cancels on hypothetical confirmations
    /// (it gets none here, so it never cancels at all).
    #[test]
    fn prop_guard_6_enforce_needs_real_drains(spec in scenario()) {
        let h = run_with(&spec, test_cfg(), Mode::Enforce, Scope::Whole, |_, _| {});
        prop_assert!(h.iter().all(|(_, f, _)| f.iter().all(|x| x.verdict < Verdict::Cancel && !x.hypothetical)));
        // Likewise an observer that reports no (hypothetical) drains never reaches cancel.
        let h = run_with(&spec, test_cfg(), Mode::ObserveReported, Scope::Whole, |_, _| {});
        prop_assert!(h.iter().all(|(_, f, _)| f.iter().all(|x| x.verdict < Verdict::Cancel && (x.verdict < Verdict::Drain || x.hypothetical))));
    }

    /// Guard 7: no verdict exceeds its signature's ceiling.
    #[test]
    fn prop_guard_7_ceilings(spec in scenario(), spin in prop_oneof![Just("watching"), Just("alert"), Just("drain")]) {
        let mut c = test_cfg();
        c.ceilings.insert("spin".into(), spin.into());
        c.ceilings.insert("hung".into(), "drain".into());
        let p = policy::Policy::new(&c).unwrap();
        let h = run_with(&spec, c, Mode::Observe, Scope::Whole, |_, _| {});
        for (_, f, _) in &h {
            for x in f {
                if let Some(sig) = x.signature {
                    prop_assert!(x.verdict <= p.ceiling(sig), "{} {}", x.signature_name(), x.verdict);
                }
            }
        }
    }

    /// Guard 8: exempt jobs never go above watching.
    #[test]
    fn prop_guard_8_exempt(spec in scenario()) {
        let mut c = test_cfg();
        c.exempt.accounts = vec!["ML".into()];
        let h = run_with(&spec, c, Mode::Observe, Scope::Whole, |_, _| {});
        prop_assert!(h.iter().all(|(_, f, _)| f.iter().all(|x| x.verdict <= Verdict::Watching)));
    }

    /// Guard 9: a per-node observer never takes a multi-node job above alert.
    #[test]
    fn prop_guard_9_whole_allocation(spec in scenario()) {
        let jobs = jobs_of(&spec);
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Node(NodeId(0)), |_, _| {});
        for (_, f, _) in &h {
            for x in f {
                let nodes = policy::alloc_nodes(&jobs[x.job_index as usize].alloc);
                if nodes.len() > 1 || nodes[0] != NodeId(0) {
                    prop_assert!(x.verdict <= Verdict::Alert);
                }
            }
        }
    }

    /// Guard 10: samples stamped in the future are no reason to act. They are invalid
    /// evidence, so they change no verdict, except that enough of them hold a window at alert
    /// (guard 3's `Cap::InvalidSamples`): never a higher rung.
    #[test]
    fn prop_guard_10_future_samples_are_ignored(spec in scenario(), every in 2i64..9) {
        let base = run(&spec);
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Whole, |tick, s| {
            if tick % every == 0 {
                let extra: Vec<Sample> = s.iter().map(|x| Sample { t_s: x.t_s + 7200, util_pct: 100.0.into(), ..*x }).collect();
                s.extend(extra);
            }
        });
        // Once held, a job climbs again one rung a cycle, so it may stay below for a while.
        let mut held = std::collections::BTreeSet::new();
        for ((now, without, _), (_, with, _)) in base.iter().zip(&h) {
            prop_assert_eq!(without.len(), with.len());
            for (j, (a, b)) in without.iter().zip(with).enumerate() {
                if b.cap == Some(policy::Cap::InvalidSamples) {
                    held.insert(j);
                }
                if held.contains(&j) {
                    // Never a higher rung: insufficient evidence or below what it would be.
                    prop_assert!(b.verdict <= a.verdict || b.verdict == Verdict::InsufficientEvidence, "at {now}: {:?} with future samples, {:?} without", b.verdict, a.verdict);
                    prop_assert!(b.verdict <= Verdict::Alert || b.verdict <= a.verdict, "at {now}: {:?} with future samples, {:?} without", b.verdict, a.verdict);
                } else {
                    prop_assert_eq!((a.verdict, a.signature), (b.verdict, b.signature), "at {}", now);
                }
            }
        }
    }

    /// Guard 10, when the clock goes back: no verdict at alert or above rests on a sample
    /// taken before the step (every window is emptied), nor on a window whose newest sample
    /// is stamped beyond now + `clock_skew`.
    #[test]
    fn prop_guard_10_a_clock_that_goes_back_never_acts_on_samples_ahead_of_it(spec in scenario(), jump_tick in 30i64..150, back_ticks in 2i64..90) {
        let c = test_cfg();
        let jobs = jobs_of(&spec);
        let mut r = Run::new(c.clone(), Mode::Observe, jobs.clone());
        for tick in 1..=TICKS as i64 {
            let t = if tick <= jump_tick { tick } else { tick - back_ticks };
            r.now_s = t * 60;
            r.tick_with(samples_at(&spec, &jobs, t));
            for f in r.out.iter().filter(|f| f.verdict >= Verdict::Alert) {
                prop_assert!(f.evidence.window_end_s <= r.now_s + c.clock_skew.secs(), "{} at {} on a window ending {}", f.verdict, r.now_s, f.evidence.window_end_s);
                // Review 14: and never on a sample taken before the step.
                if tick > jump_tick {
                    prop_assert!(f.evidence.window_start_s >= (jump_tick + 1 - back_ticks) * 60, "{} at {} on a window from {}", f.verdict, r.now_s, f.evidence.window_start_s);
                }
            }
        }
    }

    /// Guard 3 (reviews 13, 14): with no power reading, zero compute, with memory held
    /// (`hung`) or without (`idle`), is no ground for a drain or cancel: only power tells a
    /// deadlock or an idle GPU from a util counter that broke.
    #[test]
    fn prop_guard_3_hung_or_idle_without_power_stays_at_alert(spec in scenario(), every_gpu in any::<bool>()) {
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Whole, |tick, s| {
            for x in s.iter_mut().filter(|x| every_gpu || x.gpu == 0) {
                x.power_w = Reading::MISSING;
                x.power_limit_w = Reading::MISSING;
                // Memory moves a little, so the window is not one a frozen collector could
                // have written (that cap would hold it at alert anyway).
                // An idle GPU's empty memory moves between 0 and 1 MiB.
                if let Some(m) = x.mem_used_mib.get() {
                    x.mem_used_mib = if m > 0.0 { m + (tick % 5) as f64 } else { (tick % 2) as f64 }.into();
                }
            }
        });
        for (now, f, _) in &h {
            for x in f.iter().filter(|x| matches!(x.signature_name(), "hung" | "idle")) {
                if every_gpu {
                    prop_assert!(x.verdict <= Verdict::Alert, "{} at {now}", x.verdict);
                }
                if x.verdict > Verdict::Alert {
                    prop_assert!(!x.evidence.power_unknown);
                }
            }
        }
    }

    /// Within one cycle, findings do not depend on the order samples arrive in, nor on
    /// duplicates and stale resends mixed in.
    #[test]
    fn prop_sample_order_does_not_matter(spec in scenario(), seed in any::<u64>()) {
        let base = run(&spec);
        let mut state = seed | 1;
        let h = run_with(&spec, test_cfg(), Mode::Observe, Scope::Whole, |_, s| {
            for i in (1..s.len()).rev() {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                s.swap(i, (state % (i as u64 + 1)) as usize);
            }
        });
        let strip = |h: &[(i64, Vec<Finding>, Vec<Sample>)]| h.iter().map(|(_, f, _)| f.clone()).collect::<Vec<_>>();
        prop_assert_eq!(strip(&base), strip(&h));
    }

    /// Jobs that leave are forgotten without disturbing the others: dropping one job from the
    /// input at some cycle leaves every other job's findings unchanged.
    #[test]
    fn prop_jobs_leaving_do_not_disturb_the_others(spec in scenario(), leave_tick in 1i64..200, who in 0usize..3) {
        let who = who % spec.len();
        let jobs = jobs_of(&spec);
        let full = run(&spec);
        let mut r = Run::new(test_cfg(), Mode::Observe, jobs.clone());
        for tick in 1..=TICKS as i64 {
            if tick == leave_tick {
                r.jobs.remove(who);
            }
            let samples = samples_at(&spec, &jobs, tick);
            r.now_s = tick * 60;
            r.tick_with(samples);
            let kept: Vec<usize> = (0..spec.len()).filter(|&j| tick < leave_tick || j != who).collect();
            for (k, &j) in kept.iter().enumerate() {
                let (a, b) = (&full[tick as usize - 1].1[j], &r.out[k]);
                prop_assert_eq!((a.verdict, a.signature, a.dwell_s), (b.verdict, b.signature, b.dwell_s));
            }
        }
    }

    /// A stricter (lower) util threshold never produces more cancels. (From 2 %: at 1 % the
    /// default `starved_mean_util_pct` of 1 % would leave `starved` unreachable, a refused
    /// config.)
    #[test]
    fn prop_stricter_threshold_never_cancels_more(spec in scenario(), lo in 2u8..15, hi in 15u8..60) {
        let cancels = |thr: u8| {
            let mut c = test_cfg();
            c.util_threshold_pct = thr as f64;
            let h = run_with(&spec, c, Mode::Observe, Scope::Whole, |_, _| {});
            (0..spec.len()).filter(|&j| h.iter().any(|(_, f, _)| f[j].verdict == Verdict::Cancel)).collect::<Vec<_>>()
        };
        let (strict, loose) = (cancels(lo), cancels(hi));
        prop_assert!(strict.iter().all(|j| loose.contains(j)), "strict {strict:?} loose {loose:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// An engine judging several policies over shared windows gives each policy exactly the
    /// findings an engine of that policy alone gives, cycle by cycle, whatever the policies'
    /// thresholds, warmups, stages, ceilings and exemptions.
    #[test]
    fn prop_shared_windows_match_single_engines(
        spec in scenario(),
        policies in prop::collection::vec(
            // Thresholds from 2 %: see prop_stricter_threshold_never_cancels_more.
            (2u8..60, 0i64..40, prop::option::of(61i64..150), prop_oneof![Just("alert"), Just("cancel")], any::<bool>()),
            1..4,
        ),
        leave_tick in 1i64..(TICKS as i64),
    ) {
        let cfgs: Vec<PolicyConfig> = policies
            .iter()
            .map(|&(thr, warmup_m, cancel_m, spin, exempt_ml)| {
                let mut c = match cancel_m {
                    Some(m) => cfg_with_cancel(m * 60),
                    None => PolicyConfig::default(),
                };
                c.util_threshold_pct = thr as f64;
                c.warmup = policy::DurationS(warmup_m * 60);
                c.ceilings.insert("spin".into(), spin.into());
                if exempt_ml {
                    c.exempt.accounts = vec!["ml".into()];
                }
                c
            })
            .collect();
        let built: Vec<policy::Policy> = cfgs.iter().map(|c| policy::Policy::new(c).unwrap()).collect();
        let mut shared = policy::Engine::with_policies(built.clone(), Mode::Observe).unwrap();
        let mut singles: Vec<policy::Engine> = built.into_iter().map(|p| policy::Engine::new(p, Mode::Observe)).collect();
        let all_jobs = jobs_of(&spec);
        let mut outs: Vec<Vec<Finding>> = vec![Vec::new(); cfgs.len()];
        let mut single_out = Vec::new();
        for tick in 1..=TICKS as i64 {
            // The first job leaves part way, so forgetting a job is covered too.
            let jobs: Vec<JobFacts> = if tick >= leave_tick { all_jobs[1..].to_vec() } else { all_jobs.clone() };
            let samples = samples_at(&spec, &all_jobs, tick);
            let obs = policy::Observation { jobs: &jobs, samples: &samples, scope: Scope::Whole, drains: &[] };
            shared.step_each(tick * 60, &obs, &mut outs);
            for (p, e) in singles.iter_mut().enumerate() {
                e.step(tick * 60, &obs, &mut single_out);
                prop_assert_eq!(&outs[p], &single_out, "policy {} at tick {}", p, tick);
            }
        }
    }
}

/// A time near either end of i64, or anywhere at all.
fn any_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        (0i64..100_000).prop_map(|d| i64::MIN + d),
        (0i64..100_000).prop_map(|d| i64::MAX - d),
    ]
}

proptest! {
    /// Input-driven times are never trusted to be sane: clocks at the ends of i64, samples and
    /// job starts anywhere, never overflow the engine (a panic in debug builds, nonsense in
    /// release), and every job still gets its one finding.
    #[test]
    fn prop_any_times_never_overflow(
        nows in proptest::collection::vec(any_time(), 1..6),
        start_s in any_time(),
        sample_ts in proptest::collection::vec(any_time(), 0..6),
    ) {
        let cfg = test_cfg();
        let mut engine = policy::Engine::new(policy::Policy::new(&cfg).expect("valid"), Mode::Observe);
        let job = JobFacts {
            job_id: "1".into(),
            start_s,
            alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
            ..JobFacts::default()
        };
        let mut out = Vec::new();
        for (i, &now) in nows.iter().enumerate() {
            let samples: Vec<Sample> = sample_ts.iter().map(|&t| Sample {
                t_s: t,
                node: NodeId(0),
                gpu: 0,
                util_pct: ((i % 2) as f64).into(),
                mem_used_mib: 0.0.into(),
                mem_total_mib: 81_920.0.into(),
                power_w: 60.0.into(),
                power_limit_w: 400.0.into(),
                procs: Some(0),
                sm_active: Reading::MISSING,
            }).collect();
            let obs = policy::Observation { jobs: std::slice::from_ref(&job), samples: &samples, scope: Scope::Whole, drains: &[] };
            engine.step(now, &obs, &mut out);
            prop_assert_eq!(out.len(), 1);
        }
    }
}

#[test]
fn generated_scenarios_reach_every_rung() {
    // The properties above are only worth something if scenarios reach cancel at all.
    let spec = vec![JobSpec {
        start_tick: 0,
        nodes: 1,
        gpus: 2,
        segments: vec![vec![(Gpu::Idle, 200)], vec![(Gpu::Hung, 200)]],
    }];
    let h = run(&spec);
    assert!(h.iter().any(|(_, f, _)| f[0].verdict == Verdict::Cancel));
    let _ = GpuRef { node: NodeId(0), gpu: 0 };
}
