//! review25: adversarial probes of `Engine::restore` taking a first cycle before the
//! snapshot's `taken_s` as a clock step (537226b), of the window key's `rules` version, and of
//! a restored window's entries deciding its last valid time.
//!
//! The rule under test: a restart (snapshot -> JSON -> restore) never makes the engine act
//! earlier than an engine that never restarted.

mod harness;
use harness::*;
use policy::{Engine, EngineSnapshot, GpuRef, Mode, NodeId, Policy, Sample, Verdict};
use serde_json::Value;

type Seen = Vec<(i64, Verdict)>;
type Edit<'a> = &'a dyn Fn(&mut Value);

const G0: GpuRef = GpuRef { node: NodeId(0), gpu: 0 };

fn hung(_tick: i64, t: i64) -> Vec<Sample> {
    vec![sample(Gpu::Hung, t, G0).unwrap()]
}

/// Hung until 40m, copies of the 40m answer 41..50m, live (hung) after.
fn freeze_then_live(tick: i64, t: i64) -> Vec<Sample> {
    let at40 = sample(Gpu::Hung, 40 * 60, G0).unwrap();
    if (41..=50).contains(&tick) {
        vec![Sample { t_s: t, ..at40 }]
    } else {
        vec![sample(Gpu::Hung, t, G0).unwrap()]
    }
}

/// One run of 200 one-minute ticks. `restarts`: ticks at which the engine is snapshotted (at
/// the previous tick's time), the JSON edited, and restored at this tick's time.
/// `clock_back`: (tick, seconds): from that tick on, the clock reads `seconds` less.
fn run(gpu: &dyn Fn(i64, i64) -> Vec<Sample>, restarts: &[i64], edit: Edit, clock_back: Option<(i64, i64)>) -> Seen {
    let c = cfg_with_cancel(3 * 3600);
    let policy = Policy::new(&c).unwrap();
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy.clone(), Mode::Observe);
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let time = |tick: i64| tick * 60 - clock_back.filter(|&(at, _)| tick >= at).map_or(0, |(_, s)| s);
    for tick in 1..=200i64 {
        let t = time(tick);
        if restarts.contains(&tick) {
            let mut v = serde_json::to_value(e.snapshot(time(tick - 1))).unwrap();
            edit(&mut v);
            let snap: EngineSnapshot = serde_json::from_value(v).unwrap();
            e = Engine::restore(policy.clone(), Mode::Observe, snap, t);
        }
        step_whole(&mut e, &jobs, t, &gpu(tick, t), &mut out);
        seen.push((tick, out[0].verdict));
    }
    seen
}

fn ahead(plain: &Seen, restored: &Seen) -> Vec<(i64, Verdict, Verdict)> {
    plain
        .iter()
        .zip(restored)
        .filter(|(p, q)| q.1 >= Verdict::Alert && q.1 > p.1)
        .map(|(p, q)| (p.0, p.1, q.1))
        .collect()
}

fn none(_: &mut Value) {}

/// A file from before the window key's `rules` version.
fn no_rules(v: &mut Value) {
    if let Some(k) = v["windows_key"].as_object_mut() {
        k.remove("rules");
    }
}

/// Restarts every 5 minutes across clock steps back of 90 s and 10 min (a tick is 60 s, so a
/// step of 90 s reads 30 s before the last cycle) (the restart
/// at the step's tick), with the current file and one from before `rules`, on a steady hang
/// and on an ended freeze: never ahead of the engine that never restarted.
#[test]
fn review25_a_restart_across_a_step_back_at_any_minute() {
    let mut bad = Vec::new();
    for gpu in [&hung as &dyn Fn(i64, i64) -> Vec<Sample>, &freeze_then_live] {
        for back in [90, 600] {
            for r in (5..=180).step_by(5).chain(41..=52) {
                let plain = run(gpu, &[], &none, Some((r, back)));
                for edit in [&none as Edit, &no_rules] {
                    let restored = run(gpu, &[r], edit, Some((r, back)));
                    let a = ahead(&plain, &restored);
                    if !a.is_empty() {
                        bad.push((back, r, a[0]));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "(step back s, restart minute, first (minute, plain, restored)): {bad:?}"
    );
}

/// Two restarts in a row around a step back: one at the step, one a minute later (the
/// second file's `taken_s` is the stepped clock's). Never ahead of plain.
#[test]
fn review25_two_restarts_around_a_step_back() {
    let mut bad = Vec::new();
    for back in [90, 600] {
        for r in (5..=180).step_by(5) {
            let plain = run(&hung, &[], &none, Some((r, back)));
            for restarts in [[r, r + 1], [r - 1, r]] {
                let restored = run(&hung, &restarts, &none, Some((r, back)));
                let a = ahead(&plain, &restored);
                if !a.is_empty() {
                    bad.push((back, restarts, a[0]));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// A file whose `taken_s` says a time later than the restart (a daemon whose clock ran
/// ahead, within the skew the enforcer accepts): the restored engine takes its first cycle
/// as a step back, so it empties the windows and starts the breach again; it is then behind,
/// never ahead, of plain.
#[test]
fn review25_a_file_taken_ahead_of_the_clock() {
    let plain = run(&hung, &[], &none, None);
    for r in (5..=180).step_by(5) {
        let restored = run(
            &hung,
            &[r],
            &|v: &mut Value| {
                let t = v["taken_s"].as_i64().unwrap();
                v["taken_s"] = (t + 90).into();
            },
            None,
        );
        let a = ahead(&plain, &restored);
        assert!(a.is_empty(), "restart at {r}m: {a:?}");
    }
}

/// A file from before `rules` restored during a freeze that is about to end (review 24's
/// `freeze_then_live`: copies of the 40m answer 41..50m, live after), no clock step. The
/// file's windows are dropped (537226b), and with them what the window knew of the freeze
/// (`last_bits`, `last_change`): the fresh window takes the copies it sees after the restart
/// for readings, and a restart on one of the freeze's last copies makes its stretch look
/// shorter than the gap, so it never becomes a hole. Lists the restart minutes at which the
/// restored engine stands above plain, and compares a fresh start (no file at all).
///
/// Decided: such a restart is a fresh start, which by design knows nothing of the freeze
/// either (up to 3 minutes ahead of plain here; 16 before the `rules` key). The test holds
/// that a file from an older release is never ahead of starting with no file at all.
#[test]
fn review25_an_older_file_restored_on_the_last_copies_of_a_freeze() {
    let plain = run(&freeze_then_live, &[], &none, None);
    let first = |v: &Seen, at: Verdict| v.iter().find(|x| x.1 >= at).map(|x| x.0);
    let mut found = Vec::new();
    for r in 41..=52 {
        let restored = run(&freeze_then_live, &[r], &no_rules, None);
        let a = ahead(&plain, &restored);
        eprintln!(
            "restart at {r}m from a pre-rules file: first alert {:?} (plain {:?}), first drain {:?} (plain {:?})",
            first(&restored, Verdict::Alert),
            first(&plain, Verdict::Alert),
            first(&restored, Verdict::Drain),
            first(&plain, Verdict::Drain)
        );
        let fresh = run(&freeze_then_live, &[r], &|v: &mut Value| v["jobs"] = Value::Array(vec![]), None);
        eprintln!(
            "  fresh start at {r}m: first alert {:?}, first drain {:?}",
            first(&fresh, Verdict::Alert),
            first(&fresh, Verdict::Drain)
        );
        if !a.is_empty() {
            found.push((r, a.len(), a[0], a[a.len() - 1]));
        }
        let past_fresh = ahead(&fresh, &restored);
        assert!(
            past_fresh.is_empty(),
            "restart at {r}m from a pre-rules file ran ahead of a fresh start: {past_fresh:?}"
        );
    }
    eprintln!("ahead of plain, as a fresh start is (restart minute, minutes ahead, first, last): {found:?}");
}
