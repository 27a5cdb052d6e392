//! review22: probes of the review-21 fixes.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Verdict};

/// Hung GPU, live until 40m; then an outage (no samples) 41m..64m, long enough that the
/// 20m window empties; the collector comes back re-serving the 40m answer 65m..75m, then
/// live readings again. `restart_at`: snapshot -> JSON -> restore at that minute.
fn outage_then_copies(restart_at: Option<i64>) -> Vec<(i64, Verdict, String)> {
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
            let v = serde_json::to_value(e.snapshot(t - 1)).unwrap();
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
        if tick >= 60 {
            seen.push((
                tick,
                out[0].verdict,
                format!("{:?}/{:?}/{:?}", out[0].cause, out[0].cap, out[0].signature),
            ));
        }
    }
    seen
}

fn first_at_least(v: &[(i64, Verdict, String)], at: Verdict) -> Option<i64> {
    v.iter().find(|x| x.1 >= at).map(|x| x.0)
}

/// A restart while the window is empty (outage longer than the window) drops the file's
/// `last_change` (window.rs:507-515 only runs with a first entry): the copies that follow
/// are no hole when the readings change again, and the restored engine breaches sooner.
#[test]
fn review22_restart_with_an_empty_window_forgets_the_last_change() {
    let plain = outage_then_copies(None);
    let restored = outage_then_copies(Some(63));
    for (p, r) in plain.iter().zip(&restored) {
        if p.1 != r.1 || p.2 != r.2 {
            eprintln!("{}m plain {:?} {}  restored {:?} {}", p.0, p.1, p.2, r.1, r.2);
        }
    }
    eprintln!(
        "first alert: plain {:?} restored {:?}; first drain: plain {:?} restored {:?}",
        first_at_least(&plain, Verdict::Alert),
        first_at_least(&restored, Verdict::Alert),
        first_at_least(&plain, Verdict::Drain),
        first_at_least(&restored, Verdict::Drain)
    );
    assert_eq!(plain, restored, "the restart changed the verdicts");
}
