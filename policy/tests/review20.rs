//! The twentieth adversarial review, policy side. Each test failed on the engine as reviewed (302cf6d) and passes since its fix.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Verdict};

/// Hung from the start (cancel at 3h). At 40m the collector freezes: its 40m answer is
/// re-served with fresh stamps until 70m (30 minutes, longer than the 20m window), then live
/// hung readings resume. `restart_at`: the engine is restarted from a JSON round-trip of its
/// snapshot at that time (the daemon's state file). Returns (t, verdict) per cycle from 70m.
fn after_a_long_freeze(restart_at: Option<i64>) -> Vec<(i64, Verdict, String)> {
    let c = cfg_with_cancel(3 * 3600);
    let policy = Policy::new(&c).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy.clone(), Mode::Observe);
    let mut out = Vec::new();
    let g0 = GpuRef { node: NodeId(0), gpu: 0 };
    let mut at40 = None;
    let mut seen = Vec::new();
    for tick in 1..=200i64 {
        let t = tick * 60;
        if Some(t) == restart_at {
            let snap: EngineSnapshot = serde_json::from_str(&serde_json::to_string(&e.snapshot(t - 1)).unwrap()).unwrap();
            e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
        }
        let live = sample(Gpu::Hung, t, g0).unwrap();
        if t == 40 * 60 {
            at40 = Some(live);
        }
        let s = if (41 * 60..=70 * 60).contains(&t) {
            policy::Sample { t_s: t, ..at40.unwrap() }
        } else {
            live
        };
        step_whole(&mut e, &jobs, t, &[s], &mut out);
        if t > 70 * 60 {
            seen.push((t, out[0].verdict, format!("{:?}", out[0].cause)));
        }
    }
    seen
}

/// Input: the scenario above, with and without a restart from the state file at 65m (during
/// the freeze, when the freeze's last change, at 40m, has already left the 20m window).
///
/// What happens: without a restart, the first live sample (71m) is flagged as a hole after
/// the copies and the job reads insufficient_evidence until the copies have left the window.
/// After the restart the window's `last_change_off` is rebuilt only from the entries still
/// in the window, none of which changed, so it is "none": the new rule (window.rs:716-723)
/// does not fire, the 71m sample makes the window look whole, and the breach resumes at once
/// with its start backdated to the window's start (51m), on a window of 20 frozen copies.
///
/// What should happen: the restored window reads the evidence the saved one did (engine.rs
/// `Engine::restore`: each kept sample's predicates, "a hole before it", were decided at
/// ingest and are kept); the copies are a hole in both runs, and the drain comes no sooner.
#[test]
fn a_restore_during_a_long_freeze_forgets_that_the_copies_are_a_hole() {
    let plain = after_a_long_freeze(None);
    let restored = after_a_long_freeze(Some(65 * 60));
    let drain = |v: &Vec<(i64, Verdict, String)>| v.iter().find(|x| x.1 >= Verdict::Drain).map(|x| x.0 / 60);
    eprintln!(
        "first drain after the freeze: plain {:?}m, restored {:?}m",
        drain(&plain),
        drain(&restored)
    );
    assert_eq!(plain[0].1, Verdict::InsufficientEvidence, "control: {:?}", &plain[..3]);
    let diff: Vec<_> = plain.iter().zip(&restored).filter(|(a, b)| a.1 != b.1).take(4).collect();
    assert!(
        diff.is_empty(),
        "restore changed the verdicts after the freeze (plain, restored): {diff:#?}"
    );
}

/// A hung-looking GPU (0 %, 40 GB held, one process) whose power reads `[N/A]` on every
/// sample (smi-power-not-supported.csv: such boards exist); its memory moves by 1 MiB every
/// `every_min` minutes and is otherwise constant, as a quiet process's is. One-minute samples,
/// none missing, for 6 hours. Returns the cycles per verdict and the number of breaches
/// (entries into alert from below).
fn power_na_quiet(every_min: i64) -> (usize, usize, usize) {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let g0 = GpuRef { node: NodeId(0), gpu: 0 };
    while r.now_s < 6 * 3600 {
        let t = r.now_s + r.interval_s;
        let s = policy::Sample {
            power_w: policy::Reading::MISSING,
            mem_used_mib: (40_000 + (t / 60 / every_min) % 2).into_f(),
            ..sample(Gpu::Hung, t, g0).unwrap()
        };
        r.tick_samples(vec![s]);
    }
    let v: Vec<Verdict> = r.history.iter().filter(|(t, _)| *t > 3600).map(|(_, f)| f[0].verdict).collect();
    let alert = v.iter().filter(|x| **x >= Verdict::Alert).count();
    let insufficient = v.iter().filter(|x| **x == Verdict::InsufficientEvidence).count();
    let breaches = v.windows(2).filter(|w| w[0] < Verdict::Alert && w[1] >= Verdict::Alert).count();
    (alert, insufficient, breaches)
}

trait IntoF {
    fn into_f(self) -> policy::Reading;
}
impl IntoF for i64 {
    fn into_f(self) -> policy::Reading {
        (self as f64).into()
    }
}

/// Input: the GPU above, memory moving every 4 minutes (or every 25).
///
/// What happens: nothing in its readings is a freeze the engine can see (power is never
/// known: `frozen_tail` and the `identical` rule both leave such a GPU alone, and guard 3 holds
/// it at alert through `Cap::PowerUnknown`). But the new rule (window.rs:716-723) has no such
/// exception: each memory step ends a "stretch of copies" longer than max_sample_gap, so it is
/// a hole. Every 4 minutes: the job reads insufficient_evidence for all 5 hours (it was an
/// alert before the change). Every 25 minutes: the breach ends and restarts every 25 minutes,
/// and each restart is a new breach, alerted and noticed afresh (plan.rs: records from before
/// the breach count for nothing).
///
/// What should happen: as `frozen_tail` says, a GPU that never reports power "looks the same
/// when quiet, and is held at alert instead": one standing alert, one notice.
#[test]
fn a_quiet_gpu_without_power_is_not_a_string_of_holes() {
    let (alert4, insufficient4, _) = power_na_quiet(4);
    let (_, insufficient25, breaches25) = power_na_quiet(25);
    assert!(
        insufficient4 == 0 && alert4 > 0,
        "memory stepping every 4m: {insufficient4} cycles insufficient_evidence, {alert4} alert, of 300"
    );
    assert!(
        breaches25 <= 1,
        "memory stepping every 25m: {breaches25} separate breaches in 5 hours ({insufficient25} cycles insufficient_evidence)"
    );
}
