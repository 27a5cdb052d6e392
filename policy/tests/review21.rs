//! review21: tests that failed as reviewed (6cade91) and pass since their fixes; the probe of
//! frozen copies with power `[N/A]` held up.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Verdict};

fn strip(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("last_change");
            m.values_mut().for_each(strip);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// review20's scenario (hung, collector frozen 41m..70m re-serving the 40m answer), restarted
/// at 65m from a state file. `old_file`: the file is the previous release's (no `last_change`).
fn after_a_long_freeze(restart_at: Option<i64>, old_file: bool) -> Vec<(i64, Verdict)> {
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
            let mut v = serde_json::to_value(e.snapshot(t - 1)).unwrap();
            if old_file {
                strip(&mut v);
            }
            let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
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
            seen.push((t, out[0].verdict));
        }
    }
    seen
}

/// An upgrade restart during a long freeze (the state file is the previous release's, which
/// has no `last_change`) still forgets that the copies are a hole: the job drains sooner than
/// without the restart.
#[test]
fn review21_an_old_state_file_during_a_freeze_still_drains_early() {
    let plain = after_a_long_freeze(None, false);
    let new_file = after_a_long_freeze(Some(65 * 60), false);
    let old_file = after_a_long_freeze(Some(65 * 60), true);
    let drain = |v: &Vec<(i64, Verdict)>| v.iter().find(|x| x.1 >= Verdict::Drain).map(|x| x.0 / 60);
    eprintln!(
        "first drain: plain {:?}m, new file {:?}m, old file {:?}m",
        drain(&plain),
        drain(&new_file),
        drain(&old_file)
    );
    assert_eq!(drain(&plain), drain(&new_file), "control");
    assert_eq!(drain(&plain), drain(&old_file), "old-format state file: drain moved");
}

fn forge(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("last_change").is_some_and(|x| !x.is_null()) {
                let off = m["last_valid_t_s"].as_i64().unwrap() - m["base_t_s"].as_i64().unwrap();
                m.insert("last_change".into(), serde_json::json!({"off": off, "copies": 0}));
            }
            m.values_mut().for_each(forge);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(forge),
        _ => {}
    }
}

/// Hung, collector frozen from 41m (re-serving the 40m answer, never resuming). Restart at
/// 55m from a state file whose `last_change` names the newest entry (54m, 0 copies), though
/// every entry after 40m repeats the 40m readings: the entries themselves say the newest
/// change is 40m. Returns (t, verdict) per cycle from 55m.
fn frozen_with_state(forged: bool) -> Vec<(i64, Verdict)> {
    let c = cfg_with_cancel(3 * 3600);
    let policy = Policy::new(&c).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy.clone(), Mode::Observe);
    let mut out = Vec::new();
    let g0 = GpuRef { node: NodeId(0), gpu: 0 };
    let mut at40 = None;
    let mut seen = Vec::new();
    for tick in 1..=70i64 {
        let t = tick * 60;
        if t == 55 * 60 {
            let mut v = serde_json::to_value(e.snapshot(t - 1)).unwrap();
            if forged {
                forge(&mut v);
            }
            let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
            e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
        }
        let live = sample(Gpu::Hung, t, g0).unwrap();
        if t == 40 * 60 {
            at40 = Some(live);
        }
        let s = if t > 40 * 60 {
            policy::Sample { t_s: t, ..at40.unwrap() }
        } else {
            live
        };
        step_whole(&mut e, &jobs, t, &[s], &mut out);
        if t >= 55 * 60 {
            seen.push((t / 60, out[0].verdict));
        }
    }
    seen
}

/// The "plausibility check" on `last_change` (window.rs:499-507) believes a change the
/// entries contradict: the frozen tail is judged as live evidence after the restart.
#[test]
fn review21_a_last_change_the_entries_contradict_is_believed() {
    let honest = frozen_with_state(false);
    let forged = frozen_with_state(true);
    eprintln!("honest {:?}\nforged {:?}", &honest[..6], &forged[..6]);
    assert_eq!(honest, forged, "a last_change newer than the entries show changed the verdicts");
}

/// Probe (held): the frozen answer's power reads [N/A]; live samples before and after have
/// power. Prints the verdicts; fails if the job reaches drain sooner than the plain control.
#[test]
fn review21_probe_frozen_copies_with_power_na() {
    let run = |na: bool| {
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
            let live = sample(Gpu::Hung, t, g0).unwrap();
            if t == 40 * 60 {
                at40 = Some(if na {
                    policy::Sample {
                        power_w: policy::Reading::MISSING,
                        ..live
                    }
                } else {
                    live
                });
            }
            let s = if (40 * 60..=70 * 60).contains(&t) {
                policy::Sample { t_s: t, ..at40.unwrap() }
            } else {
                live
            };
            step_whole(&mut e, &jobs, t, &[s], &mut out);
            seen.push((t / 60, out[0].verdict));
        }
        seen
    };
    let plain = run(false);
    let na = run(true);
    let drain = |v: &Vec<(i64, Verdict)>| v.iter().filter(|x| x.0 > 40).find(|x| x.1 >= Verdict::Drain).map(|x| x.0);
    let compact = |v: &Vec<(i64, Verdict)>| {
        let mut r: Vec<(i64, Verdict)> = Vec::new();
        for x in v {
            if r.last().is_none_or(|l| l.1 != x.1) {
                r.push(*x);
            }
        }
        r
    };
    eprintln!("plain {:?}\nna    {:?}", compact(&plain), compact(&na));
    eprintln!("first drain after 40m: plain {:?} na {:?}", drain(&plain), drain(&na));
    assert!(drain(&na) >= drain(&plain));
}
