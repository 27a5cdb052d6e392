//! The eighteenth adversarial review, policy side. Each finding's test failed on the engine as
//! reviewed (746c6fe) and passes since its fix; the random walk is a check that held up.

mod harness;
use harness::*;
use policy::{GpuRef, Mode, NodeId, Reading, Verdict};

/// A two-GPU job: GPU 0 trains (busy, power known); GPU 1's util counter reads 0 % and its
/// power reads `[N/A]` on every sample, while memory is held and a process is resident (a
/// rank that works, seen through a broken util counter: trial 6's "0 % at 336 W" with the
/// power missing). `ceilings.partial = "cancel"` and a cancel stage at 2h.
///
/// ARCHITECTURE.md guard 3: "a GPU that matches `hung` or `idle` with power on fewer than half
/// its samples in the window" is held at alert (`Cap::PowerUnknown`): only power tells a
/// deadlock or an idle GPU from a util counter that broke. GPU 1 matches `hung` with no power
/// at all, yet the job is classified `partial`, whose `Match::power_unknown` is always false
/// (policy/src/signature/partial.rs), so nothing caps it: the job is drained and cancelled.
#[test]
fn partial_whose_wasted_gpu_has_no_power_is_held_at_alert() {
    let mut c = cfg_with_cancel(2 * 3600);
    c.ceilings.insert("partial".into(), "cancel".into());
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 2)])]);
    while r.now_s < 5 * 3600 {
        let t = r.now_s + r.interval_s;
        let g0 = GpuRef { node: NodeId(0), gpu: 0 };
        let g1 = GpuRef { node: NodeId(0), gpu: 1 };
        let busy = sample(Gpu::Busy, t, g0).unwrap();
        let broken = policy::Sample {
            power_w: Reading::MISSING,
            // memory moves a little, as a working rank's does: no freeze
            mem_used_mib: (40_000.0 + (t / 60 % 7) as f64).into(),
            ..sample(Gpu::Hung, t, g1).unwrap()
        };
        r.tick_samples(vec![busy, broken]);
    }
    let worst = r.history.iter().map(|(_, f)| f[0].clone()).max_by_key(|f| f.verdict).unwrap();
    assert!(
        worst.verdict <= Verdict::Alert,
        "a GPU matching hung with power unknown on every sample was acted on: {:?} {} (cap {:?})",
        worst.verdict,
        worst.signature_name(),
        worst.cap
    );
}

/// A seeded random walk (no proptest: plain xorshift) over one job's GPU states with stretches
/// of `[N/A]` power, frozen copies (the last sample re-served with a fresh stamp), missing
/// samples, and restarts of the engine from a JSON round-trip of its snapshot; enforce mode,
/// with the drain reported every cycle from the cycle after the first drain verdict until the
/// end, as the daemon reports a standing drain. Checks guard 6 (one rung per cycle above
/// alert; a cancel only after a drain verdict at least interval + window earlier within the
/// same breach and the same engine life) and guard 3 (no drain or cancel later than
/// max_sample_gap + interval after a freeze began, while it lasts).
#[test]
fn random_walks_keep_guard_6_and_the_frozen_rule_across_restarts() {
    use policy::{DrainConfirmation, Engine, EngineSnapshot, Observation, Policy, Scope};
    let mut failures = Vec::new();
    let mut reached = [0usize; 3];
    for seed in 1..=400u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut c = cfg_with_cancel(90 * 60);
        c.stages[1].after = policy::DurationS(30 * 60);
        let policy = Policy::new(&c).unwrap();
        let (window, gap, interval) = (c.window.secs(), c.max_sample_gap.secs(), c.interval.secs());
        let ngpu = 1 + rnd(2) as u16;
        let jobs = vec![job("1", 0, &[(0, ngpu)])];
        let mut e = Engine::new(policy.clone(), Mode::Enforce);
        let mut out = Vec::new();
        let mut state = Gpu::Hung;
        let mut power_na = false;
        let mut frozen_since: Option<i64> = None;
        let mut last: Vec<Option<policy::Sample>> = vec![None; ngpu as usize];
        let mut drained_at: Option<i64> = None;
        // (t, verdict, boundary before it: restart)
        let mut hist: Vec<(i64, Verdict, bool)> = Vec::new();
        let mut restarted = false;
        let mut t = 0;
        while t < 8 * 3600 {
            t += interval;
            if rnd(100) < 3 {
                state = [Gpu::Hung, Gpu::Idle, Gpu::Busy, Gpu::Stall, Gpu::Starved][rnd(5) as usize];
            }
            if rnd(100) < 3 {
                power_na = !power_na;
            }
            if frozen_since.is_some() && rnd(100) < 5 {
                frozen_since = None;
            } else if frozen_since.is_none() && rnd(100) < 2 {
                frozen_since = Some(t);
            }
            let missing = rnd(100) < 2;
            let mut samples = Vec::new();
            for g in 0..ngpu {
                let r = GpuRef { node: NodeId(0), gpu: g };
                let s = match (frozen_since, last[g as usize]) {
                    (Some(_), Some(prev)) => policy::Sample { t_s: t, ..prev },
                    _ => {
                        let mut s = sample(state, t, r).unwrap();
                        if power_na {
                            s.power_w = Reading::MISSING;
                        }
                        s
                    }
                };
                last[g as usize] = Some(s);
                if !missing {
                    samples.push(s);
                }
            }
            if rnd(1000) < 8 {
                let snap: EngineSnapshot = serde_json::from_str(&serde_json::to_string(&e.snapshot(t - 1)).unwrap()).unwrap();
                e = Engine::restore(policy.clone(), Mode::Enforce, snap, t);
                restarted = true;
            }
            let drains: Vec<DrainConfirmation> = drained_at
                .filter(|d| *d < t)
                .map(|d| DrainConfirmation {
                    job_id: "1".into(),
                    nodes: vec![NodeId(0)],
                    confirmed_s: d + interval,
                    hypothetical: false,
                })
                .into_iter()
                .collect();
            let obs = Observation {
                jobs: &jobs,
                samples: &samples,
                scope: Scope::Whole,
                drains: &drains,
            };
            e.step(t, &obs, &mut out);
            let v = out[0].verdict;
            if v >= Verdict::Drain && drained_at.is_none() {
                drained_at = Some(t);
            }
            hist.push((t, v, std::mem::take(&mut restarted)));
            if v >= Verdict::Alert {
                reached[(v as usize).saturating_sub(Verdict::Alert as usize).min(2)] += 1;
            }
            // Guard 3: a freeze older than the gap (plus a cycle) is never acted on.
            if let Some(f) = frozen_since {
                if t - f > gap + interval && v >= Verdict::Drain {
                    failures.push(format!(
                        "seed {seed}: {v:?} at {}m on a freeze since {}m: {}",
                        t / 60,
                        f / 60,
                        out[0].reason(&jobs[0])
                    ));
                }
            }
        }
        for i in 0..hist.len() {
            let (t, v, _) = hist[i];
            let prev = if i == 0 || hist[i].2 { Verdict::Healthy } else { hist[i - 1].1 };
            if v > Verdict::Alert {
                let allowed = match prev {
                    Verdict::Alert => Verdict::Drain,
                    Verdict::Drain | Verdict::Cancel => Verdict::Cancel,
                    _ => Verdict::Alert,
                };
                if v > allowed {
                    failures.push(format!("seed {seed}: {prev:?} -> {v:?} at {}m", t / 60));
                }
            }
            if v == Verdict::Cancel {
                // Same breach and engine life back to a drain verdict at least interval + window ago.
                let mut ok = false;
                let mut j = i;
                loop {
                    let (tj, vj, restart) = hist[j];
                    if vj < Verdict::Alert {
                        break;
                    }
                    if vj >= Verdict::Drain && tj <= t - interval - window {
                        ok = true;
                        break;
                    }
                    if restart || j == 0 {
                        break;
                    }
                    j -= 1;
                }
                if !ok {
                    failures.push(format!(
                        "seed {seed}: cancel at {}m without a drain verdict a window earlier in the breach",
                        t / 60
                    ));
                }
            }
        }
    }
    eprintln!("alert/drain/cancel cycles: {reached:?}");
    assert!(reached[2] > 0, "the walk reaches cancel");
    assert!(
        failures.is_empty(),
        "{} failures: {:#?}",
        failures.len(),
        &failures[..failures.len().min(12)]
    );
}

/// Hung throughout, except that from 21m to 24m the GPU truly works (a busy spell); drain
/// stage at 10m. What the engine is handed for 21m..=24m: with `frozen`, the collector's 20m
/// answer re-served with fresh stamps; otherwise nothing (an outage). Returns the first
/// drain-or-higher verdict's time after 24m.
fn first_drain_around_a_hidden_busy_spell(frozen: bool) -> Option<i64> {
    let mut c = cfg_with_cancel(3 * 3600);
    c.stages[1].after = policy::DurationS(10 * 60);
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let g0 = GpuRef { node: NodeId(0), gpu: 0 };
    let mut at20 = None;
    while r.now_s < 60 * 60 {
        let t = r.now_s + r.interval_s;
        let truth = if (21 * 60..=24 * 60).contains(&t) { Gpu::Busy } else { Gpu::Hung };
        let s = sample(truth, t, g0).unwrap();
        if t == 20 * 60 {
            at20 = Some(s);
        }
        let handed = if (21 * 60..=24 * 60).contains(&t) {
            if frozen {
                vec![policy::Sample { t_s: t, ..at20.unwrap() }]
            } else {
                vec![]
            }
        } else {
            vec![s]
        };
        r.tick_samples(handed);
    }
    // The first drain-or-higher verdict after the busy spell (the job was drained before it).
    r.history
        .iter()
        .find(|(t, f)| *t > 24 * 60 && f[0].verdict >= Verdict::Drain)
        .map(|(t, _)| *t)
}

/// Input: a hung GPU whose collector freezes for four cycles (21m..24m, longer than
/// `max_sample_gap`, 3m) while the GPU in truth works, then resumes with live readings of
/// the hung GPU; drain stage at 10m.
///
/// What happens: during the freeze the window reads `frozen` and the breach ends (right), but
/// at 25m, with one live sample after the copies, the window counts as whole evidence again
/// (the copies are samples, so there is no hole), the breach restarts with its dwell counted
/// from the window's start 20 minutes back, and the job is drained at 26m on a window whose
/// 21m..24m part is four copies of one old reading, hiding a busy spell that would have
/// cleared the window (guard 4) until 44m.
/// The same four cycles with no sample at all keep the job from a drain until 43m.
///
/// What should happen: the copies are no evidence (guard 3, "a repeated sample is no evidence
/// that the GPU still reads so"): a frozen stretch longer than `max_sample_gap` is a hole
/// (guard 2) for as long as it lies in the window, as the same four cycles with no sample at
/// all are (the control: no drain before 43m).
#[test]
fn a_frozen_stretch_that_ended_is_a_hole_while_it_lies_in_the_window() {
    let outage = first_drain_around_a_hidden_busy_spell(false);
    assert!(
        outage.is_none_or(|t| t >= 40 * 60),
        "control: the outage is a gap for about a window: {outage:?}"
    );
    let frozen = first_drain_around_a_hidden_busy_spell(true);
    assert!(
        frozen.is_none_or(|t| t >= 40 * 60),
        "drained at {}m on a window holding four frozen copies (21m..24m) that hid a busy spell (outage control: {:?})",
        frozen.unwrap_or(0) / 60,
        outage.map(|t| t / 60)
    );
}

/// Default stages (drain 60m) plus cancel at 2h. Hung from the start, except 50m..=52m, when
/// the GPU in truth works. `frozen`: the collector re-serves its 49m answer for those three
/// cycles (fresh stamps); otherwise it sends nothing for them. Returns the first drain verdict.
fn first_drain_with_a_three_cycle_hidden_spell(frozen: bool) -> Option<i64> {
    let mut r = Run::new(cfg_with_cancel(2 * 3600), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let g0 = GpuRef { node: NodeId(0), gpu: 0 };
    let spell = 50 * 60..=52 * 60;
    let mut at49 = None;
    while r.now_s < 4 * 3600 {
        let t = r.now_s + r.interval_s;
        let s = sample(if spell.contains(&t) { Gpu::Busy } else { Gpu::Hung }, t, g0).unwrap();
        if t == 49 * 60 {
            at49 = Some(s);
        }
        let handed = match (spell.contains(&t), frozen) {
            (true, true) => vec![policy::Sample { t_s: t, ..at49.unwrap() }],
            (true, false) => vec![],
            _ => vec![s],
        };
        r.tick_samples(handed);
    }
    r.first_at(0, Verdict::Drain)
}

/// Input: default stages, a hung job; at 50m..52m the GPU works for three minutes, and just
/// then the collector freezes: it re-serves its 49m answer three times, then resumes.
///
/// What happens: three copies stay within `max_sample_gap` of the last change, so the window
/// never reads frozen; when live readings resume the copies count as samples, the breach was
/// never interrupted, and the job is drained at 61m as if hung throughout. The same three
/// cycles with no sample at all are a hole of 4m > `max_sample_gap` (guard 2): the breach
/// ends, and the busy spell's window has passed before it starts again (drain at about
/// 110m). With the true readings the busy sample would have cleared the window (guard 4).
///
/// What should happen: readings that repeat are no evidence (guard 3); a stretch of copies
/// whose readings last changed more than `max_sample_gap` before the next change is a hole
/// like an outage, also once it has ended.
#[test]
fn three_frozen_copies_are_not_evidence_that_three_missing_samples_are_not() {
    let outage = first_drain_with_a_three_cycle_hidden_spell(false);
    let frozen = first_drain_with_a_three_cycle_hidden_spell(true);
    assert!(outage.is_some_and(|t| t > 100 * 60), "control: {outage:?}");
    assert!(
        frozen.is_none_or(|t| t >= outage.unwrap()),
        "drained at {}m across three frozen copies hiding a busy spell; with an outage instead: {}m",
        frozen.unwrap_or(0) / 60,
        outage.unwrap() / 60
    );
}
