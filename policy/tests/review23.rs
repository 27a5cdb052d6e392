//! review23: probes of review 22's window fix (empty window restored with `last_change`). The
//! older-file probe failed as reviewed (8b903d2) and passes since its fix; the restart sweep held up.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Verdict};

fn strip(v: &mut serde_json::Value, key: &str) -> usize {
    match v {
        serde_json::Value::Object(m) => {
            let mut n = usize::from(m.remove(key).is_some());
            for (_, x) in m.iter_mut() {
                n += strip(x, key);
            }
            n
        }
        serde_json::Value::Array(a) => a.iter_mut().map(|x| strip(x, key)).sum(),
        _ => 0,
    }
}

/// As review22's `outage_then_copies`: hung GPU live until 40m, outage 41..64m (window
/// empties), copies of the 40m answer 65..75m, live after. `restart_at`: snapshot -> JSON ->
/// (optionally without `last_change`, a file from before the key) -> restore.
fn run(restart_at: Option<i64>, old_file: bool) -> Vec<(i64, Verdict, String)> {
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
        if Some(tick) == restart_at {
            let mut v = serde_json::to_value(e.snapshot(t - 1)).unwrap();
            if old_file {
                assert!(strip(&mut v, "last_change") > 0, "the file held a last_change");
            }
            let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
            e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
        }
        let live = sample(Gpu::Hung, t, g0).unwrap();
        if t == 40 * 60 {
            at40 = Some(live);
        }
        let s: Vec<policy::Sample> = if (41..=64).contains(&tick) {
            vec![]
        } else if (65..=75).contains(&tick) {
            vec![policy::Sample { t_s: t, ..at40.unwrap() }]
        } else {
            vec![live]
        };
        step_whole(&mut e, &jobs, t, &s, &mut out);
        seen.push((
            tick,
            out[0].verdict,
            format!("{:?}/{:?}/{:?}", out[0].cause, out[0].cap, out[0].signature),
        ));
    }
    seen
}

fn first_at_least(v: &[(i64, Verdict, String)], at: Verdict) -> Option<i64> {
    v.iter().find(|x| x.1 >= at).map(|x| x.0)
}

/// The fix, at every restart minute: restored equals plain.
#[test]
fn review23_restart_at_any_minute_equals_plain() {
    let plain = run(None, false);
    let mut bad = Vec::new();
    for r in 2..=199 {
        let restored = run(Some(r), false);
        // Sooner: a higher rung than plain at some minute (a restart itself starts escalation
        // again from the first alert, so later is expected).
        if let Some(d) = plain.iter().zip(&restored).find(|(p, q)| q.1 > p.1) {
            bad.push((r, d.0.clone(), d.1.clone()));
        }
        // Held back forever: never drains although plain does.
        if first_at_least(&plain, Verdict::Drain).is_some() && first_at_least(&restored[r as usize..], Verdict::Drain).is_none() && r < 150
        {
            bad.push((r, (0, Verdict::Healthy, "never drains".into()), restored[199].clone()));
        }
    }
    assert!(bad.is_empty(), "restart minutes whose verdicts run ahead of plain: {bad:?}");
}

/// A file from before `last_change` (review 20's key), restored while the window is empty:
/// the non-empty branch takes the change at the first entry (review 21, the conservative
/// choice); the empty branch leaves no change at all, and the copies count as evidence.
#[test]
fn review23_an_older_file_restored_empty_acts_sooner() {
    let plain = run(None, false);
    let restored = run(Some(63), true);
    eprintln!(
        "first alert: plain {:?} old-file restored {:?}; first drain: plain {:?} restored {:?}",
        first_at_least(&plain, Verdict::Alert),
        first_at_least(&restored, Verdict::Alert),
        first_at_least(&plain, Verdict::Drain),
        first_at_least(&restored, Verdict::Drain)
    );
    for (p, r) in plain.iter().zip(&restored) {
        if p != r {
            eprintln!("{}m plain {:?} {}  restored {:?} {}", p.0, p.1, p.2, r.1, r.2);
        }
    }
    let ahead: Vec<_> = plain
        .iter()
        .zip(&restored)
        .filter(|(p, q)| q.1 > p.1)
        .map(|(p, q)| (p.0, p.1, q.1))
        .collect();
    assert!(
        ahead.is_empty(),
        "an older file restored during the outage ran ahead of plain: (minute, plain, restored) {ahead:?}"
    );
}
