//! Review 30: attacks on session 11's changes (the invalid-share cap, the all-zero rule for
//! identical windows, restores, and the AVX2 lane path against the scalar and general paths).

mod harness;
use harness::*;
use policy::{Cap, Policy, Verdict};

/// A hung GPU (0 %, 30 GB held, a process, about 60 W) whose power reads `bad_w` on the ticks
/// `bad` picks; the highest verdict over four hours, the cap of the finding that reached it,
/// and the largest invalid share any finding showed (invalid ÷ (invalid + valid kept)).
fn hung_with(bad_w: f64, bad: impl Fn(i64) -> bool) -> (Verdict, Option<Cap>) {
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = policy::Engine::new(Policy::new(&cfg_with_cancel(3600)).expect("valid"), policy::Mode::Observe);
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, None);
    for tick in 1..=240 {
        let t = tick * 60;
        let s = policy::Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 30_000.0.into(),
            procs: Some(1),
            power_w: if bad(tick) {
                bad_w.into()
            } else {
                (60.0 + (tick % 7) as f64 * 0.1).into()
            },
            ..base_sample(t)
        };
        step_whole(&mut e, &jobs, t, &[s], &mut out);
        if out[0].verdict >= worst.0 {
            worst = (out[0].verdict, out[0].cap);
        }
    }
    worst
}

/// The reference: a collector whose power is implausible (0.5 W) on one read in four is
/// wrong on 25 % of its reads, more than one in five: held at alert (these samples are
/// dropped, so the formula `invalid × 4 > valid` is "more than one in five").
#[test]
fn implausible_power_on_one_read_in_four_is_held_at_alert() {
    assert_eq!(hung_with(0.5, |t| t % 4 == 0), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

/// FAILS today (WRONG, guard 3): the same collector fault rate, one read in four (25 %), but
/// the bad power is a vendor sentinel (0xFFFFFFFF). Such a sample is counted invalid *and*
/// kept (the field unknown), so `samples_min_per_gpu` already includes it and
/// `Evidence::mostly_invalid` (`invalid × 4 > samples × gpus`, policy/src/finding.rs) is really
/// "more than one in four", not "more than one in five" as `Cap::InvalidSamples` documents.
/// The job is drained and cancelled on a window of which 25 % of samples were invalid.
#[test]
fn sentinel_power_on_one_read_in_four_is_held_at_alert_too() {
    assert_eq!(
        hung_with(4_294_967_295.0, |t| t % 4 == 0),
        (Verdict::Alert, Some(Cap::InvalidSamples))
    );
}

/// As above with power 0 W ("not supported" in some tools: unknown, counted invalid, kept).
/// FAILS today for the same reason.
#[test]
fn zero_watt_power_on_one_read_in_four_is_held_at_alert_too() {
    assert_eq!(hung_with(0.0, |t| t % 4 == 0), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

// ---------------------------------------------------------------------------------------------
// Restores (`Engine::restore_dropped`, `GpuWindow::implausible_entry`).
// ---------------------------------------------------------------------------------------------

mod trio;
use policy::{Engine, Mode, Observation, Scope};

fn hung_cycle(e: &mut Engine, jobs: &[policy::JobFacts], now: i64) -> policy::Finding {
    let s = trio::samples_of(jobs, now, trio::Look::Hung, now);
    let mut out = Vec::new();
    e.step(
        now,
        &Observation {
            jobs,
            samples: &s,
            scope: Scope::Whole,
            drains: &[],
        },
        &mut out,
    );
    out.swap_remove(0)
}

/// A hung 8-GPU job's snapshot after `cycles` cycles, and the time of the last.
fn hung_snapshot(cycles: usize, lanes: bool) -> (serde_json::Value, i64, Vec<policy::JobFacts>) {
    let jobs = vec![trio::eight("A", 1, 0)];
    let mut e = trio::build(&[restore_policy()], Mode::Enforce, lanes);
    let mut now = 100_000;
    for _ in 0..cycles {
        now += 60;
        hung_cycle(&mut e, &jobs, now);
    }
    (serde_json::from_str(&trio::json(&e, now)).expect("json"), now, jobs)
}

fn restore_policy() -> Policy {
    Policy::new(&trio::cfg_with(600, 60, 180)).expect("valid")
}

fn restore_from(v: &serde_json::Value, now: i64, lanes: bool) -> Engine {
    let snap: policy::EngineSnapshot = serde_json::from_value(v.clone()).expect("edited snapshot reads back");
    let mut e = Engine::restore(restore_policy(), Mode::Enforce, snap, now);
    e.set_lane_path(lanes);
    e
}

/// The first time, from `now` on, a restored engine's finding for the hung job reaches
/// `Verdict::Drain` (hung samples every 60 s), within 40 cycles.
fn first_drain(mut e: Engine, jobs: &[policy::JobFacts], now: i64) -> Option<i64> {
    (0..40)
        .map(|k| now + 60 * k)
        .find(|&t| hung_cycle(&mut e, jobs, t).verdict >= Verdict::Drain)
}

/// FAILS today (ROUGH, restore): a window whose `base_t_s` is `i64::MIN` (the engine's "no
/// sample yet") but which holds entries is not what any engine writes, and
/// `implausible_entry` (policy/src/window/mod.rs) does not look at the base, so it is
/// restored. The next sample sets the base to now (`GpuWindow::ingest`: `base_t_s ==
/// NO_TIME`), which re-dates every old entry (ten days old here) into the last minutes, and
/// puts the ring's times out of order. Here that only delays the drain (12 minutes after the
/// restore, against 8 for a job whose evidence is gathered afresh: the first assert holds),
/// but the window is no longer one any engine keeps.
#[test]
fn a_window_with_entries_but_no_base_is_not_restored() {
    for lanes in [false, true] {
        let (mut v, now, jobs) = hung_snapshot(10, lanes);
        for g in v["jobs"][0]["gpus"].as_array_mut().expect("gpus") {
            for k in ["base_t_s", "newest_t_s", "last_valid_t_s"] {
                g[k] = serde_json::json!(i64::MIN);
            }
        }
        let later = now + 10 * 86_400;
        let e = restore_from(&v, later, lanes);
        let dropped = e.restore_dropped().to_vec();
        let edited = first_drain(e, &jobs, later);
        let mut fresh_v = v.clone();
        fresh_v["jobs"] = serde_json::json!([]);
        let fresh = first_drain(restore_from(&fresh_v, later, lanes), &jobs, later);
        assert!(
            edited >= fresh,
            "lanes {lanes}: drain at {edited:?} on ten-day-old entries, {fresh:?} on fresh evidence (restore_dropped {dropped:?})"
        );
        assert!(
            !dropped.is_empty(),
            "lanes {lanes}: the job's windows are restored (drain at {edited:?}, fresh {fresh:?})"
        );
    }
}

/// FAILS today (WRONG): an entry flagged `POWER_KNOWN | POWER_IDLE` whose power is 0 dW (no
/// ingest writes that: power known is at least 1 W, 10 dW) is restored, and its 0 W counts
/// in the job's mean power, the figure every alert and notice shows.
#[test]
fn an_entry_with_power_known_but_no_power_is_not_restored() {
    let (mut v, now, _) = hung_snapshot(6, false);
    let flags = v["jobs"][0]["gpus"][0]["entries"][2]["flags"].as_u64().expect("flags");
    v["jobs"][0]["gpus"][0]["entries"][2]["power_dw"] = serde_json::json!(0);
    assert_eq!(flags & 0x30, 0x30, "the hung entry has power known and idle");
    let e = restore_from(&v, now, false);
    assert!(!e.restore_dropped().is_empty(), "an entry with power known at 0 dW is restored");
}

// ---------------------------------------------------------------------------------------------
// The invalid share pooled over GPUs.
// ---------------------------------------------------------------------------------------------

/// An 8-GPU hung job (0 %, 30 GB held, a process, about 60 W on every GPU) whose GPU 3 reads
/// power 0.5 W on the ticks `bad` picks; the highest verdict over four hours and its cap.
fn hung_eight_with_one_bad_gpu(bad: impl Fn(i64) -> bool) -> (Verdict, Option<Cap>) {
    let jobs = vec![job("1", 0, &[(0, 8)])];
    let mut e = policy::Engine::new(Policy::new(&cfg_with_cancel(3600)).expect("valid"), policy::Mode::Observe);
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, None);
    for tick in 1..=240 {
        let t = tick * 60;
        let samples: Vec<policy::Sample> = (0..8u16)
            .map(|g| policy::Sample {
                gpu: g,
                util_pct: 0.0.into(),
                mem_used_mib: 30_000.0.into(),
                procs: Some(1),
                power_w: if g == 3 && bad(tick) {
                    0.5.into()
                } else {
                    (60.0 + ((tick + i64::from(g)) % 7) as f64 * 0.1).into()
                },
                ..base_sample(t)
            })
            .collect();
        step_whole(&mut e, &jobs, t, &samples, &mut out);
        if out[0].verdict >= worst.0 {
            worst = (out[0].verdict, out[0].cap);
        }
    }
    worst
}

/// FAILS today (WRONG, judgment call): one GPU of eight whose collector is impossible on
/// three reads in five (60 %, three times the one-in-five limit; never more than two in a
/// row, so no hole exceeds `max_sample_gap`) does not hold the job at
/// alert: `mostly_invalid` sums the invalid samples over GPUs but compares them with the
/// fewest valid samples of one GPU × 8, so one GPU's share must exceed two in three before
/// the cap applies. The job is drained and cancelled as hung, partly on that GPU's readings
/// (trial 15's case, on one GPU of a node instead of all).
#[test]
fn one_gpu_wrong_on_three_reads_in_five_holds_its_job_at_alert() {
    assert_eq!(
        hung_eight_with_one_bad_gpu(|t| matches!(t % 5, 0 | 1 | 3)),
        (Verdict::Alert, Some(Cap::InvalidSamples))
    );
}
