//! review24: adversarial probes of the window-restore fixes (6b74fc3, e453dc4, 3159dff).
//!
//! The rule under test: a restart (snapshot -> JSON -> restore) never makes the engine act
//! earlier than an engine that never restarted. Each probe runs one hung single-GPU job for
//! 200 one-minute cycles twice, plain and with a restart, and lists the minutes where the
//! restored engine stands at alert or above while plain stands lower.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Sample, Verdict};
use serde_json::Value;

type Seen = Vec<(i64, Verdict, String)>;
/// An edit of a snapshot's JSON.
type Edit<'a> = &'a dyn Fn(&mut Value);

const G0: GpuRef = GpuRef { node: NodeId(0), gpu: 0 };

/// Applies `f` to every serialised window (an object with `entries` and `last_valid_t_s`);
/// returns how many.
fn each_window(v: &mut Value, f: &mut dyn FnMut(&mut serde_json::Map<String, Value>)) -> usize {
    match v {
        Value::Object(m) => {
            let here = if m.contains_key("entries") && m.contains_key("last_valid_t_s") {
                f(m);
                1
            } else {
                0
            };
            here + m.values_mut().map(|x| each_window(x, f)).sum::<usize>()
        }
        Value::Array(a) => a.iter_mut().map(|x| each_window(x, f)).sum(),
        _ => 0,
    }
}

/// A file from before review 20 (no `last_change`).
fn no_last_change(v: &mut Value) {
    each_window(v, &mut |m| {
        m.remove("last_change");
    });
}

/// A file from before review 18 as well: no entry carries the COPY_GAP mark (bit 12), which
/// that release did not set, and its window key has no `rules` version (added with the fix
/// of this finding: such a file's windows are no longer kept).
fn no_copy_gap(v: &mut Value) {
    no_last_change(v);
    v["windows_key"].as_object_mut().unwrap().remove("rules");
    each_window(v, &mut |m| {
        for e in m["entries"].as_array_mut().unwrap() {
            let f = e["flags"].as_u64().unwrap();
            e["flags"] = (f & !(1 << 12)).into();
        }
    });
}

/// One run. `gpu(tick, t)` gives the tick's samples. `restart`: (tick, edit of the JSON).
/// `clock_back`: (tick, seconds): from that tick on, the clock reads `seconds` less (in the
/// plain run the engine sees the step; in the restarted run the restart happens across it
/// when `restart` names the same tick).
fn run(gpu: &dyn Fn(i64, i64) -> Vec<Sample>, restart: Option<(i64, Edit)>, clock_back: Option<(i64, i64)>) -> Seen {
    let c = cfg_with_cancel(3 * 3600);
    let policy = Policy::new(&c).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy.clone(), Mode::Observe);
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let time = |tick: i64| tick * 60 - clock_back.filter(|&(at, _)| tick >= at).map_or(0, |(_, s)| s);
    for tick in 1..=200i64 {
        let t = time(tick);
        if let Some((at, edit)) = restart {
            if at == tick {
                let mut v = serde_json::to_value(e.snapshot(time(tick - 1))).unwrap();
                edit(&mut v);
                let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
                e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
            }
        }
        step_whole(&mut e, &jobs, t, &gpu(tick, t), &mut out);
        seen.push((
            tick,
            out[0].verdict,
            format!("{:?}/{:?}/{:?}", out[0].cause, out[0].cap, out[0].signature),
        ));
    }
    seen
}

/// Minutes where `restored` stands at alert or above and above `plain`: (minute, plain,
/// restored).
fn ahead(plain: &Seen, restored: &Seen) -> Vec<(i64, Verdict, Verdict)> {
    plain
        .iter()
        .zip(restored)
        .filter(|(p, q)| q.1 >= Verdict::Alert && q.1 > p.1)
        .map(|(p, q)| (p.0, p.1, q.1))
        .collect()
}

fn first_at_least(v: &Seen, at: Verdict) -> Option<i64> {
    v.iter().find(|x| x.1 >= at).map(|x| x.0)
}

fn show(plain: &Seen, restored: &Seen) {
    for (p, r) in plain.iter().zip(restored) {
        if p.1 != r.1 {
            eprintln!("{}m plain {:?} {}  restored {:?} {}", p.0, p.1, p.2, r.1, r.2);
        }
    }
    eprintln!(
        "first alert: plain {:?} restored {:?}; first drain: plain {:?} restored {:?}",
        first_at_least(plain, Verdict::Alert),
        first_at_least(restored, Verdict::Alert),
        first_at_least(plain, Verdict::Drain),
        first_at_least(restored, Verdict::Drain)
    );
}

/// Review 22/23's scenario: hung until 40m, outage 41..64m (the 20m window empties), copies
/// of the 40m answer 65..75m, live after.
fn outage_then_copies(tick: i64, t: i64) -> Vec<Sample> {
    let at40 = sample(Gpu::Hung, 40 * 60, G0).unwrap();
    if (41..=64).contains(&tick) {
        vec![]
    } else if (65..=75).contains(&tick) {
        vec![Sample { t_s: t, ..at40 }]
    } else {
        vec![sample(Gpu::Hung, t, G0).unwrap()]
    }
}

/// A freeze that ends inside the window: hung until 40m, copies of the 40m answer 41..50m
/// (ten minutes, more than the 3m gap), live after. The 51m entry carries COPY_GAP: a hole.
fn freeze_then_live(tick: i64, t: i64) -> Vec<Sample> {
    let at40 = sample(Gpu::Hung, 40 * 60, G0).unwrap();
    if (41..=50).contains(&tick) {
        vec![Sample { t_s: t, ..at40 }]
    } else {
        vec![sample(Gpu::Hung, t, G0).unwrap()]
    }
}

fn hung(_tick: i64, t: i64) -> Vec<Sample> {
    vec![sample(Gpu::Hung, t, G0).unwrap()]
}

/// Review 23 probed an older file (no `last_change`) only at 63m (window empty). Every
/// restart minute, with the older file: never at alert or above ahead of plain.
#[test]
fn review24_older_file_at_any_minute_of_the_outage_scenario() {
    let plain = run(&outage_then_copies, None, None);
    let mut bad = Vec::new();
    for r in 2..=199 {
        let restored = run(&outage_then_copies, Some((r, &no_last_change)), None);
        let a = ahead(&plain, &restored);
        if !a.is_empty() {
            bad.push((r, a));
        }
    }
    assert!(
        bad.is_empty(),
        "restart minutes (older file) whose verdicts run ahead of plain: {bad:?}"
    );
}

/// The same sweep over a freeze that ends inside the window, current file format.
#[test]
fn review24_current_file_at_any_minute_of_an_ended_freeze() {
    let plain = run(&freeze_then_live, None, None);
    let mut bad = Vec::new();
    for r in 2..=199 {
        let restored = run(&freeze_then_live, Some((r, &|_: &mut Value| {})), None);
        let a = ahead(&plain, &restored);
        if !a.is_empty() {
            bad.push((r, a));
        }
    }
    assert!(bad.is_empty(), "restart minutes whose verdicts run ahead of plain: {bad:?}");
}

/// The same, with a file from before review 20 (no `last_change`).
#[test]
fn review24_older_file_at_any_minute_of_an_ended_freeze() {
    let plain = run(&freeze_then_live, None, None);
    let mut bad = Vec::new();
    for r in 2..=199 {
        let restored = run(&freeze_then_live, Some((r, &no_last_change)), None);
        let a = ahead(&plain, &restored);
        if !a.is_empty() {
            bad.push((r, a));
        }
    }
    assert!(
        bad.is_empty(),
        "restart minutes (older file) whose verdicts run ahead of plain: {bad:?}"
    );
}

/// A file from before review 18 (no entry marked COPY_GAP; the window key and `last_bits`
/// are older than that, so the windows load). Restarted at 55m, after a ten-minute freeze
/// ended at 51m: plain holds the window as `gap` until the hole leaves it; the restored engine
/// sees no hole and breaches at once, on a window whose start lies before the freeze.
#[test]
fn review24_a_file_from_before_copy_gap_hides_an_ended_freeze() {
    let plain = run(&freeze_then_live, None, None);
    let restored = run(&freeze_then_live, Some((55, &no_copy_gap)), None);
    show(&plain, &restored);
    let a = ahead(&plain, &restored);
    assert!(
        a.is_empty(),
        "a pre-COPY_GAP file ran ahead of plain: (minute, plain, restored) {a:?}"
    );
}

/// The clock steps back across a restart: the restart's cycle runs 30 s before the last
/// cycle's time (the snapshot's `taken_s`; within `clock_skew`, so the enforcer's start-up
/// check at main.rs:459 lets the file through). With one-minute ticks that is a 90 s step. Plain sees the step and empties every
/// window (engine.rs:539-548: "a job is judged again only on a full window gathered after
/// it"); `Engine::restore` never compares `snap.taken_s` with `now_s` and `last_now_s` starts
/// as `None`, so the restored engine keeps the window of samples taken before the step.
#[test]
fn review24_a_clock_step_back_across_a_restart_keeps_the_windows() {
    let plain = run(&hung, None, Some((100, 90)));
    let restored = run(&hung, Some((100, &|_: &mut Value| {})), Some((100, 90)));
    show(&plain, &restored);
    let a = ahead(&plain, &restored);
    assert!(
        a.is_empty(),
        "restored 30 s before the snapshot's time ran ahead of plain: (minute, plain, restored) {a:?}"
    );
}

/// The same with a 10-minute step (the enforcer refuses to start on such a file, but the
/// engine's own `restore` accepts it): the restored engine holds `future` until the clock
/// passes the file's newest sample, dropping every sample of those ten minutes as late, and
/// then judges the pre-step window as if current.
#[test]
fn review24_engine_restore_across_a_ten_minute_step_back() {
    let plain = run(&hung, None, Some((100, 600)));
    let restored = run(&hung, Some((100, &|_: &mut Value| {})), Some((100, 600)));
    show(&plain, &restored);
    let a = ahead(&plain, &restored);
    assert!(
        a.is_empty(),
        "restored across a 10 min clock step ran ahead of plain: (minute, plain, restored) {a:?}"
    );
}

/// A file whose `last_valid_t_s` contradicts its entries (later than the newest entry).
/// The samples stopped at 40m; restarted at 50m with `last_valid_t_s` edited to 49m. Plain
/// reads `stale`; `brief` takes `last_valid_t_s` as the newest entry's time (window.rs
/// "no need to read the ring's other end"), and `From<WindowRepr>` never checks it.
#[test]
fn review24_a_file_whose_last_valid_time_contradicts_its_entries() {
    let stops = |tick: i64, t: i64| if tick <= 40 { hung(tick, t) } else { vec![] };
    let plain = run(&stops, None, None);
    let edit = |v: &mut Value| {
        assert_eq!(
            each_window(v, &mut |m| {
                m.insert("last_valid_t_s".into(), (49 * 60).into());
                m.insert("newest_t_s".into(), (49 * 60).into());
            }),
            1
        );
    };
    let restored = run(&stops, Some((50, &edit)), None);
    show(&plain, &restored);
    let a = ahead(&plain, &restored);
    assert!(
        a.is_empty(),
        "a contradicting file ran ahead of plain: (minute, plain, restored) {a:?}"
    );
}

/// A restart with downtime: the daemon's last cycle (its snapshot) is at `r - down`, its
/// next at `r`; no samples are read in between (nvidia-smi is read at cycle time). Plain
/// sees the same stream with the downtime's cycles empty (an outage). Returns, per tick, the
/// verdict (`None` while the restarted daemon was down).
fn run_down(gpu: &dyn Fn(i64, i64) -> Vec<Sample>, restart: Option<(i64, i64, Edit)>) -> Seen {
    let c = cfg_with_cancel(3 * 3600);
    let policy = Policy::new(&c).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy.clone(), Mode::Observe);
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for tick in 1..=200i64 {
        let t = tick * 60;
        let down = restart.is_some_and(|(r, k, _)| tick > r - k && tick < r);
        let samples = if restart.is_none_or(|(r, k, _)| !(tick > r - k && tick < r)) {
            gpu(tick, t)
        } else {
            vec![]
        };
        if let Some((r, k, edit)) = restart {
            if tick == r {
                let mut v = serde_json::to_value(e.snapshot((r - k) * 60)).unwrap();
                edit(&mut v);
                let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
                e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
            }
        }
        if down {
            seen.push((tick, Verdict::Healthy, "down".into()));
            continue;
        }
        step_whole(&mut e, &jobs, t, &samples, &mut out);
        seen.push((
            tick,
            out[0].verdict,
            format!("{:?}/{:?}/{:?}", out[0].cause, out[0].cap, out[0].signature),
        ));
    }
    seen
}

/// Every restart minute, downtimes of 2 to 90 minutes, three scenarios, current and older
/// files: the restarted engine never stands at alert or above ahead of plain (plain sees the
/// downtime as an outage).
#[test]
fn review24_restarts_with_downtime_never_run_ahead() {
    type Scenario = (&'static str, &'static dyn Fn(i64, i64) -> Vec<Sample>);
    let scenarios: [Scenario; 3] = [
        ("hung", &hung),
        ("freeze_then_live", &freeze_then_live),
        ("outage_then_copies", &outage_then_copies),
    ];
    let files: [(&str, Edit); 2] = [("current", &|_: &mut Value| {}), ("no last_change", &no_last_change)];
    let mut bad = Vec::new();
    for (name, gpu) in scenarios {
        for (fname, edit) in files {
            for k in [2, 4, 10, 19, 21, 30, 90] {
                for r in (k + 1)..=199 {
                    let plain: Seen = {
                        // The plain run: cycles in the downtime run with no samples.
                        let c = cfg_with_cancel(3 * 3600);
                        let policy = Policy::new(&c).unwrap();
                        let jobs = vec![job("1", 0, &[(0, 1)])];
                        let mut e = Engine::new(policy, Mode::Observe);
                        let mut out = Vec::new();
                        (1..=200i64)
                            .map(|tick| {
                                let t = tick * 60;
                                let s = if tick > r - k && tick < r { vec![] } else { gpu(tick, t) };
                                step_whole(&mut e, &jobs, t, &s, &mut out);
                                (tick, out[0].verdict, String::new())
                            })
                            .collect()
                    };
                    let restored = run_down(gpu, Some((r, k, edit)));
                    let a = ahead(&plain, &restored);
                    if !a.is_empty() {
                        bad.push((name, fname, k, r, a[0], a.len()));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "(scenario, file, downtime, restart minute, first minute ahead, minutes ahead): {bad:?}"
    );
}

/// A two-policy engine (shared windows; policy B has another util threshold and quicker
/// stages) snapshotted and restored under policy B alone (`Engine::restore` takes one
/// policy: a multi-policy engine has no restore of its own). At every restart minute, over
/// the ended-freeze and outage scenarios, B's restored verdicts never run ahead of B's in
/// the plain two-policy engine.
#[test]
fn review24_a_multi_policy_snapshot_restored_under_its_second_policy() {
    let a = Policy::new(&cfg_with_cancel(3 * 3600)).unwrap();
    let mut cb = cfg_with_cancel(90 * 60);
    cb.util_threshold_pct = 25.0;
    cb.stages[1].after = policy::DurationS(30 * 60);
    let b = Policy::new(&cb).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let go = |gpu: &dyn Fn(i64, i64) -> Vec<Sample>, restart: Option<i64>| -> Seen {
        let mut e = Engine::with_policies(vec![a.clone(), b.clone()], Mode::Observe).unwrap();
        let mut outs = vec![Vec::new(), Vec::new()];
        let mut seen = Vec::new();
        let mut single: Option<Engine> = None;
        for tick in 1..=200i64 {
            let t = tick * 60;
            if Some(tick) == restart {
                let v = serde_json::to_value(e.snapshot(t - 60)).unwrap();
                let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
                single = Some(Engine::restore(b.clone(), Mode::Observe, snap, t));
            }
            let s = gpu(tick, t);
            let obs = policy::Observation {
                jobs: &jobs,
                samples: &s,
                scope: policy::Scope::Whole,
                drains: &[],
            };
            let f = match &mut single {
                Some(se) => {
                    se.step(t, &obs, &mut outs[0]);
                    outs[0][0].clone()
                }
                None => {
                    e.step_each(t, &obs, &mut outs);
                    outs[1][0].clone()
                }
            };
            seen.push((tick, f.verdict, format!("{:?}/{:?}", f.cause, f.signature)));
        }
        seen
    };
    let mut bad = Vec::new();
    for (name, gpu) in [
        ("freeze_then_live", &freeze_then_live as &dyn Fn(i64, i64) -> Vec<Sample>),
        ("outage_then_copies", &outage_then_copies),
        ("hung", &hung),
    ] {
        let plain = go(gpu, None);
        for r in 2..=199 {
            let x = ahead(&plain, &go(gpu, Some(r)));
            if !x.is_empty() {
                bad.push((name, r, x[0], x.len()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "(scenario, restart minute, first minute ahead, minutes ahead): {bad:?}"
    );
}
