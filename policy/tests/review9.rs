//! The ninth adversarial review of the policy engine (the changes after d3fe330: freeze
//! detection by the last present value of each field, the all-zero rule, the
//! `freeze_undetectable` hold, the snapshot's window key, samples from before a job's start,
//! spin needing the whole allocation). Each ignored test fails on the engine as reviewed and
//! shows one finding; the others pass and are kept for the coverage they add.
//!
//! * `a_frozen_collector_with_an_occasional_unknown_value_is_not_acted_on`: the freeze check
//!   skips a *missing* reading, but a reading that guard 3 makes unknown in another way (a
//!   power of exactly 0 W, a vendor sentinel such as 4294967295 or DCGM's blank, a sentinel
//!   SM activity) is compared as if it were a value. One such reading now and then makes a
//!   collector repeating one cached hung reading look live: cancelled as `hung` (0 W and
//!   the power sentinels); a sentinel SM activity, whose last present value is then the
//!   sentinel itself, breaks the run once and gets one `hung` alert.
//! * `an_all_zero_exporter_with_an_occasional_sentinel_power_is_not_idle`: the same hole in
//!   the all-zero rule: `ZERO_OR_MISSING` accepts 0 or missing, not a sentinel, so an
//!   exporter reading 0 %, 0 MiB, 0 W with now and then a sentinel power is judged `idle`,
//!   drained and cancelled (with a sentinel memory instead: alerted as `unknown`).
//! * Passing: a snapshot taken under one config restores its windows under the same config
//!   only (and an old snapshot, without a window key and with `prev_raw`, loads and restores
//!   none); samples from before a
//!   job's start never cover its window, even when they arrive late in the same cycle as
//!   current ones.

mod harness;
use harness::*;
use policy::{Engine, Mode, Policy, Reading, Sample, Verdict};

/// The highest verdict, with its signature, that a single-GPU job reaches over four hours
/// under the default policy with a cancel stage at 2h, its GPU reporting `steady(t_s)` every
/// minute except one tick in ten, which reports `odd(steady(t_s))`. Returns a line naming
/// `what` when that verdict is above `watching`.
fn acted_on(what: &str, steady: impl Fn(i64) -> Sample, odd: impl Fn(Sample) -> Sample) -> Option<String> {
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, |tick, t| {
        if tick % 10 == 0 {
            odd(steady(t))
        } else {
            steady(t)
        }
    });
    (worst.0 > Verdict::Watching).then(|| format!("{what} one tick in ten: reached {} {}", worst.0, worst.1))
}

/// One cached hung reading, as a frozen collector repeats it: 0 %, 40 GB held, 71 W, one
/// process.
fn cached(t_s: i64) -> Sample {
    Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 40_000.0.into(),
        power_w: 71.0.into(),
        procs: Some(1),
        ..base_sample(t_s)
    }
}

/// Values guard 3 reads as "no value" for one field (README: "A vendor 'no value' sentinel
/// (4294967295, DCGM's blanks) or a power of exactly 0 makes that one field unknown"), as
/// (name, power, SM activity) to put in an otherwise frozen sample.
fn unknown_variants() -> Vec<(&'static str, Reading, Reading)> {
    vec![
        ("power 0 W", 0.0.into(), Reading::MISSING),
        ("power 4294967295", 4_294_967_295.0.into(), Reading::MISSING),
        ("power DCGM_FP64_BLANK", 140_737_488_355_328.0.into(), Reading::MISSING),
        ("SM activity DCGM_FP64_BLANK", 71.0.into(), 140_737_488_355_328.0.into()),
    ]
}

/// Review 8 found that a frozen collector which leaves the power out (`[N/A]`) now and then
/// escaped the frozen guard, and the fix compares each field with its last *present* value.
/// But "present" there means "not `Reading::MISSING`": a power of exactly 0 W or a vendor
/// sentinel, which guard 3 treats exactly like a missing field (unknown, the sample is kept),
/// is compared bit for bit with the cached 71 W, so the sample with it and the one after it
/// are "changed". A collector repeating one cached hung reading (0 %, 40 GB held, 71 W, one
/// process) with one such reading in ten is judged `hung`, drained and cancelled on one
/// reading repeated for four hours.
///
/// What should happen: an unknown value is no new value; the window stays frozen and the job
/// never goes above `watching`.
#[test]
fn a_frozen_collector_with_an_occasional_unknown_value_is_not_acted_on() {
    let acted: Vec<String> = unknown_variants()
        .into_iter()
        .filter_map(|(what, power_w, sm_active)| acted_on(what, cached, |s| Sample { power_w, sm_active, ..s }))
        .collect();
    assert!(acted.is_empty(), "{acted:#?}");
}

/// Control for the test above: the same cached reading with the odd tick's power simply
/// missing is held (review 8's fix), and a live hung GPU (power that moves) is cancelled, so
/// the test above can only fail on the unknown values themselves.
#[test]
fn control_missing_power_is_held_and_live_power_is_judged() {
    let missing = acted_on("power missing", cached, |s| Sample {
        power_w: Reading::MISSING,
        ..s
    });
    assert_eq!(missing, None);
    let live = acted_on(
        "power moving",
        |t| Sample {
            power_w: (71.0 + (t / 60 % 5) as f64 * 0.2).into(),
            ..cached(t)
        },
        |s| s,
    );
    assert_eq!(live.as_deref(), Some("power moving one tick in ten: reached cancel hung"));
}

/// The all-zero rule now takes "0 or missing" on memory and power with at least one sample
/// of true zeros (review 8). A vendor sentinel power, which guard 3 reads as unknown like
/// `[N/A]`, is neither 0 nor missing: an exporter reading 0 %, 0 MiB, 0 W with a sentinel
/// power one tick in ten escapes the all-zero rule, and the sentinel also breaks the
/// "identical" run, so the freeze hold does not apply either. Its zeros read as an idle GPU:
/// `idle`, drained at 60 minutes and cancelled at the cancel stage.
///
/// What should happen: the window is the broken exporter's (`insufficient_evidence`), never
/// above `watching` (spec regression case: "A healthy job whose exporter reports all zeros
/// (0 %, 0 MiB, 0 W) for hours never goes above `watching`").
#[test]
fn an_all_zero_exporter_with_an_occasional_sentinel_power_is_not_idle() {
    let zeros = |t: i64| Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        power_w: 0.0.into(),
        procs: None,
        ..base_sample(t)
    };
    let mut acted: Vec<String> = [4_294_967_295.0, 140_737_488_355_328.0, 2_147_483_632.0]
        .into_iter()
        .filter_map(|p: f64| acted_on(&format!("sentinel power {p}"), zeros, |s| Sample { power_w: p.into(), ..s }))
        .collect();
    // The same with the memory used (a sentinel there is unknown memory too).
    acted.extend(acted_on("sentinel memory used 4294967295", zeros, |s| Sample {
        mem_used_mib: 4_294_967_295.0.into(),
        ..s
    }));
    assert!(acted.is_empty(), "{acted:#?}");
}

/// A snapshot restores its windows only under the config it was taken under: restored under
/// the same config, an idle job's window is full at once (alert on the first cycle after the
/// restore); under a config with another ingest threshold, or from a snapshot written before
/// the window key existed (no key, and `prev_raw` in place of `last_bits`: it still loads), the
/// windows start afresh (no
/// verdict above `insufficient_evidence`/`watching` until a new window is gathered).
#[test]
fn a_snapshot_restores_windows_only_under_its_own_config() {
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let idle = |t: i64| Sample {
        util_pct: 0.0.into(),
        power_w: (60.0 + (t / 60 % 4) as f64 * 0.3).into(),
        ..base_sample(t)
    };
    let mut e = Engine::new(Policy::default(), Mode::Observe);
    let mut out = Vec::new();
    let mut t = 0;
    for tick in 1..=40 {
        t = tick * 60;
        step_whole(&mut e, &jobs, t, &[idle(t)], &mut out);
    }
    assert_eq!(out[0].verdict, Verdict::Alert, "before the snapshot: {:?}", out[0]);
    let snap = e.snapshot(t);
    let json = serde_json::to_string(&snap).unwrap();
    let next = t + 60;
    let first_after = |policy: Policy, snap| {
        let mut e = Engine::restore(policy, Mode::Observe, snap, next);
        let mut out = Vec::new();
        step_whole(&mut e, &jobs, next, &[idle(next)], &mut out);
        out[0].verdict
    };
    assert_eq!(first_after(Policy::default(), serde_json::from_str(&json).unwrap()), Verdict::Alert);
    let mut other = cfg();
    other.idle_power_w += 1.0;
    assert!(first_after(Policy::new(&other).unwrap(), serde_json::from_str(&json).unwrap()) <= Verdict::Watching);
    // The snapshot as the engine before these changes wrote it: no window key, and each window
    // with the old 64-bit `prev_raw` mix in place of `last_bits`.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v.as_object_mut().unwrap().remove("windows_key").is_some(), "{json}");
    assert_eq!(to_old_windows(&mut v), 1, "{json}");
    let old = serde_json::from_value(v).unwrap();
    assert!(first_after(Policy::default(), old) <= Verdict::Watching);
}

/// Replaces every window's `last_bits` with an old-style `prev_raw`; returns how many.
fn to_old_windows(v: &mut serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(o) => {
            let here = o.remove("last_bits").map_or(0, |_| {
                o.insert("prev_raw".into(), serde_json::json!(0x1234_5678_9abc_def0_u64));
                1
            });
            here + o.values_mut().map(to_old_windows).sum::<usize>()
        }
        serde_json::Value::Array(a) => a.iter_mut().map(to_old_windows).sum(),
        _ => 0,
    }
}

/// Samples stamped before the job's start (an exporter re-sending the GPU's history, late in
/// the same cycle as the current sample) never count toward the job's window: a job that
/// started 25 minutes ago with 20 minutes of real idle samples is not judged on a window
/// that reaches back before its start, whatever the order of arrival.
#[test]
fn samples_before_start_never_cover_the_window_even_in_one_batch() {
    let start = 100_000;
    let jobs = vec![job("1", start, &[(0, 1)])];
    let mut e = Engine::new(
        Policy::new(&{
            let mut c = cfg();
            c.warmup = policy::DurationS(0);
            c
        })
        .unwrap(),
        Mode::Observe,
    );
    let mut out = Vec::new();
    let idle = |t: i64| Sample {
        util_pct: 0.0.into(),
        power_w: (60.0 + (t / 60 % 4) as f64 * 0.3).into(),
        ..base_sample(t)
    };
    // First cycle, 5 minutes in: the GPU's last half hour arrives at once.
    let now = start + 300;
    let batch: Vec<Sample> = (0..=35).map(|k| idle(now - 35 * 60 + k * 60)).collect();
    step_whole(&mut e, &jobs, now, &batch, &mut out);
    assert!(out[0].verdict <= Verdict::Watching, "{:?}", out[0]);
    for k in 1..=10 {
        let t = now + k * 60;
        step_whole(&mut e, &jobs, t, &[idle(t)], &mut out);
        assert!(out[0].verdict <= Verdict::Watching, "at +{k} min: {:?}", out[0]);
    }
}

/// Second operator trial: two GPUs at 0 % util with memory held and processes resident, but
/// drawing 330–340 W of a 400 W limit, were cancelled as `hung`. Zero compute at that power
/// contradicts itself (a util counter that broke, or work on the copy engines): it is never
/// `hung`. Control: the same GPU at 70 W is hung and reaches the cancel stage.
#[test]
fn zero_util_at_high_power_is_not_hung() {
    let at = |power_w: f64| {
        move |tick: i64, t: i64| Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 30_000.0.into(),
            power_w: (power_w + (tick % 5) as f64 * 2.0).into(),
            procs: Some(1),
            ..base_sample(t)
        }
    };
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, at(330.0));
    assert!(worst.0 <= Verdict::Alert && worst.1 != "hung", "{} {}", worst.0, worst.1);
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, at(70.0));
    assert_eq!(worst, (Verdict::Cancel, "hung"), "control");
}
