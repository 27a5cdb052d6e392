//! The eighth adversarial review of the policy engine. Each test named below failed on the
//! engine as reviewed and shows one finding, fixed since; the others passed and are kept for
//! the coverage they add. The last two tests come from the fifth operator trial.
//!
//! * `a_duration_of_i64_min_is_refused_not_a_panic`: `Policy::new` panics while formatting
//!   its own error for a duration of `i64::MIN`.
//! * `restore_under_a_new_config_does_not_judge_on_the_old_thresholds`: a snapshot keeps the
//!   predicates decided at ingest under the old config, so after a restore under a new one a
//!   job the new config calls working is alerted as `spin`.
//! * `restore_under_a_shorter_gap_does_not_alert_on_a_window_with_holes`: the same for hole
//!   flags: holes above the new `max_sample_gap` are alerted as idle.
//! * `large_late_counts_in_a_state_file_do_not_panic`: late counts overflow `u32`.
//! * `samples_from_before_the_job_started_do_not_cover_its_window`: samples stamped before
//!   `start_s` cover the window (alert at the end of warmup, or at once with warmup 0).
//! * `an_all_zero_exporter_with_an_occasional_na_power_is_not_idle`: one `[N/A]` power in a
//!   window of 0 %, 0 MiB, 0 W samples turns a broken exporter into `idle` evidence, up to drain.
//! * `a_frozen_collector_with_an_occasional_na_power_is_not_acted_on`: the same hole in the
//!   frozen guard; one cached hung reading is cancelled.
//! * `a_spin_power_fraction_of_one_is_refused_or_never_calls_a_busy_job_spin`: with
//!   `spin_power_frac = 1` a steady, fully busy job is alerted as `spin`.
//! * `a_per_node_view_does_not_call_half_a_job_spin`: a per-node enforcer alerts half of a
//!   two-node job as `spin` though its other node draws 380 W.
//! * `reason_has_no_unicode_line_separator`: a U+2028 in a job id reaches the reason line.
//! * Passing: two jobs claiming one GPU, a repeated job id, a job id reused with a new start,
//!   an allocation that moves, and a clock that goes back stay below alert or restart; config
//!   errors name the key; job order changing every cycle changes no finding; guards 1, 2 and
//!   10 hold against an independent oracle under jitter, late samples, drops, clock steps
//!   and requeues.

mod harness;
use harness::*;
use policy::{DurationS, Engine, Mode, NodeId, Policy, PolicyConfig, Reading, Sample, StageConfig, Verdict};

/// A spin-looking sample of GPU 0 on node 0: `util_pct` util, memory held, one process, about
/// 70 W of a 400 W limit with a little noise.
fn spinning(t_s: i64, util_pct: f64) -> Sample {
    Sample {
        util_pct: util_pct.into(),
        mem_used_mib: 40_000.0.into(),
        power_w: (70.0 + (t_s / 60 % 5) as f64 * 0.3).into(),
        procs: Some(1),
        ..base_sample(t_s)
    }
}

/// `Policy::new` must answer every duration with a value or an error naming the key. A
/// `DurationS(i64::MIN)` (the field is public, so any caller can build one) is caught by the
/// "must not be negative" checks, but the error message formats the value with `Display`,
/// which negates it: `attempt to negate with overflow`.
#[test]
fn a_duration_of_i64_min_is_refused_not_a_panic() {
    let min = DurationS(i64::MIN);
    type Set = fn(&mut PolicyConfig, DurationS);
    let cases: [(&str, Set); 7] = [
        ("policy.window", |c, d| c.window = d),
        ("policy.interval", |c, d| c.interval = d),
        ("policy.max_sample_gap", |c, d| c.max_sample_gap = d),
        ("policy.warmup", |c, d| c.warmup = d),
        ("policy.notice", |c, d| c.notice = d),
        ("policy.clock_skew", |c, d| c.clock_skew = d),
        ("policy.stages[1].after", |c, d| c.stages[1].after = d),
    ];
    for (key, set) in cases {
        let mut c = PolicyConfig::default();
        set(&mut c, min);
        let got = std::panic::catch_unwind(|| Policy::new(&c).map(|_| ()));
        match got {
            Ok(Err(e)) => assert_eq!(e.key, key, "{e}"),
            Ok(Ok(())) => panic!("{key} = i64::MIN s was accepted"),
            Err(_) => panic!("{key} = i64::MIN s panicked inside Policy::new"),
        }
    }
}

/// A snapshot stores each sample's predicates (memory held, power at idle, util at spin
/// level …) as decided at ingest under the config in force then, not the readings. After a
/// restore under a different config the engine judges those old predicates with the new
/// policy. Here the old config had `spin_util_pct = 50`; the new one is the default (90).
/// The job reads 60 % util at a flat 70 W: under the new config that is a working GPU (peak
/// 60 % ≥ 15 %), and an engine of the new config alone calls it healthy. The restored
/// engine, in a cycle where the collector missed one sample (the window is still fresh),
/// alerts it as `spin`.
///
/// Spec: "a healthy job must never be called wasted"; guard 7/3 thresholds are the config's
/// ("The numbers below are defaults: config can change them").
#[test]
fn restore_under_a_new_config_does_not_judge_on_the_old_thresholds() {
    let old = PolicyConfig {
        spin_util_pct: 50.0,
        ..PolicyConfig::default()
    };
    let new = PolicyConfig::default();
    let jobs = vec![job("9", 0, &[(0, 1)])];
    let mut out = Vec::new();

    // Under the old config the job is spin and alerted.
    let mut e = Engine::new(Policy::new(&old).unwrap(), Mode::Observe);
    let mut t = 0;
    for tick in 1..=40 {
        t = tick * 60;
        step_whole(&mut e, &jobs, t, &[spinning(t, 60.0)], &mut out);
    }
    assert_eq!((out[0].verdict, out[0].signature_name()), (Verdict::Alert, "spin"), "precondition");

    // Control: the new config alone calls the same job healthy, on the same samples.
    let mut control = Engine::new(Policy::new(&new).unwrap(), Mode::Observe);
    let mut cout = Vec::new();
    for tick in 1..=41 {
        let tc = tick * 60;
        let s: Vec<Sample> = if tick == 41 { vec![] } else { vec![spinning(tc, 60.0)] };
        step_whole(&mut control, &jobs, tc, &s, &mut cout);
    }
    assert_eq!(cout[0].verdict, Verdict::Healthy, "control");

    // Restart under the new config; the first cycle after it misses its sample.
    let json = serde_json::to_string(&e.snapshot(t)).unwrap();
    let snap = serde_json::from_str(&json).unwrap();
    let mut r = Engine::restore(Policy::new(&new).unwrap(), Mode::Observe, snap, t);
    step_whole(&mut r, &jobs, t + 60, &[], &mut out);
    assert!(
        out[0].verdict < Verdict::Alert,
        "a 60 %-util job under spin_util_pct 90 was judged {} {} after the restore",
        out[0].verdict,
        out[0].signature_name()
    );
}

/// The same cause, on guard 2: a hole between samples is flagged at ingest against the
/// `max_sample_gap` in force then, and the flag is what the snapshot keeps. The old config
/// allowed holes of 10 minutes and the collector sampled every 4; the new config (the
/// default) allows 3. Right after the restore the collector samples every minute again.
/// Under the new config the window still holds 4-minute holes, which guard 2 calls
/// insufficient evidence (an engine of the new config alone says so on the same samples);
/// the restored engine alerts the job as idle on it.
///
/// Spec, guard 2: "no hole between samples is larger than `max_sample_gap` … Otherwise the
/// verdict is `insufficient_evidence`."
#[test]
fn restore_under_a_shorter_gap_does_not_alert_on_a_window_with_holes() {
    let old = PolicyConfig {
        max_sample_gap: DurationS(10 * 60),
        ..PolicyConfig::default()
    };
    let new = PolicyConfig::default();
    let jobs = vec![job("8", 0, &[(0, 1)])];
    let idle = |t_s: i64| Sample {
        util_pct: 0.0.into(),
        power_w: (60.0 + (t_s / 60 % 7) as f64).into(),
        ..base_sample(t_s)
    };
    // Every 4 minutes until t = 2400, then every minute.
    let samples_at = |t_s: i64| if t_s <= 2400 && t_s % 240 != 0 { vec![] } else { vec![idle(t_s)] };
    let mut out = Vec::new();
    let mut e = Engine::new(Policy::new(&old).unwrap(), Mode::Observe);
    for t in (60..=2400).step_by(60) {
        step_whole(&mut e, &jobs, t, &samples_at(t), &mut out);
    }
    assert_eq!((out[0].verdict, out[0].signature_name()), (Verdict::Alert, "idle"), "precondition");

    let mut control = Engine::new(Policy::new(&new).unwrap(), Mode::Observe);
    let mut cout = Vec::new();
    for t in (60..=2460).step_by(60) {
        step_whole(&mut control, &jobs, t, &samples_at(t), &mut cout);
    }
    assert_eq!(cout[0].verdict, Verdict::InsufficientEvidence, "control: {:?}", cout[0].cause);

    let json = serde_json::to_string(&e.snapshot(2400)).unwrap();
    let mut r = Engine::restore(
        Policy::new(&new).unwrap(),
        Mode::Observe,
        serde_json::from_str(&json).unwrap(),
        2400,
    );
    step_whole(&mut r, &jobs, 2460, &samples_at(2460), &mut out);
    assert!(
        out[0].verdict < Verdict::Alert,
        "4-minute holes under a 3-minute max_sample_gap were judged {} {} after the restore",
        out[0].verdict,
        out[0].signature_name()
    );
}

/// A state file is input too, and `EngineSnapshot` is deserialised from it. Each GPU window
/// keeps its life-time count of late samples as a `u32`; `look` adds them up across the job's
/// GPUs in a `u32`, and `ingest` adds one per late sample, both unchecked. A state file whose
/// counts are large (a long-lived job fed re-sent history, or a damaged file) makes the next
/// cycle panic with `attempt to add with overflow` in a debug build (and wrap in release).
/// Brief: "nothing may panic on any input".
#[test]
fn large_late_counts_in_a_state_file_do_not_panic() {
    let jobs = vec![job("2", 0, &[(0, 2)])];
    let mut e = Engine::new(Policy::default(), Mode::Observe);
    let mut out = Vec::new();
    let busy = |t_s: i64, gpu: u16| Sample {
        gpu,
        util_pct: 80.0.into(),
        mem_used_mib: 50_000.0.into(),
        power_w: (250.0 + (t_s / 60 % 9) as f64).into(),
        procs: Some(1),
        ..base_sample(t_s)
    };
    for t in (60..=1800).step_by(60) {
        step_whole(&mut e, &jobs, t, &[busy(t, 0), busy(t, 1)], &mut out);
    }
    let mut v = serde_json::to_value(e.snapshot(1800)).unwrap();
    for g in v["jobs"][0]["gpus"].as_array_mut().unwrap() {
        g["late"] = serde_json::json!(3_000_000_000u32);
    }
    let snap: policy::EngineSnapshot = serde_json::from_value(v).unwrap();
    let mut r = Engine::restore(Policy::default(), Mode::Observe, snap, 1800);
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // One fresh sample per GPU, and one re-sent (late) one.
        step_whole(&mut r, &jobs, 1860, &[busy(1860, 0), busy(1860, 1), busy(1800, 0)], &mut out);
        out[0].verdict
    }));
    assert!(got.is_ok(), "the cycle after restoring large late counts panicked");
}

/// Samples stamped before the job started are not evidence about the job, but the engine
/// takes them into its window. The default warmup (15 m) is shorter than the window (20 m),
/// so at the end of warmup the window reaches 5 minutes back before the start. Here the
/// driver's first cycle for a new job hands the GPU's recent history (a replay, or an
/// exporter scrape that returns a range), stamped from 20 minutes before the job started.
/// At age 15 m the engine finds the window covered and alerts; on the job's own samples the
/// window is not covered until age 17 m (watching). With `warmup = "0s"` the same batch
/// gets a one-minute-old job alerted on its first cycle, entirely on readings from before
/// it existed.
///
/// Spec, guard 2: "Every observed GPU must have valid samples across the whole window"; a
/// window reaching before the start cannot be covered by the job's samples.
#[test]
fn samples_from_before_the_job_started_do_not_cover_its_window() {
    let start = 3600;
    let idle = |t_s: i64| Sample {
        util_pct: 0.0.into(),
        power_w: (60.0 + (t_s / 60 % 7) as f64).into(),
        ..base_sample(t_s)
    };
    for warmup_s in [0, 900] {
        let c = PolicyConfig {
            warmup: DurationS(warmup_s),
            ..PolicyConfig::default()
        };
        let jobs = vec![job("10", start, &[(0, 1)])];
        let mut e = Engine::new(Policy::new(&c).unwrap(), Mode::Observe);
        let mut out = Vec::new();
        let first = start + 60;
        let history: Vec<Sample> = (start - 1200..=first).step_by(60).map(idle).collect();
        step_whole(&mut e, &jobs, first, &history, &mut out);
        let mut worst = out[0].verdict;
        let mut t = first;
        while t < start + 16 * 60 {
            t += 60;
            step_whole(&mut e, &jobs, t, &[idle(t)], &mut out);
            if t - start <= 16 * 60 {
                worst = worst.max(out[0].verdict);
            }
        }
        assert!(
            worst <= Verdict::Watching,
            "warmup {warmup_s}s: a job under 16 minutes old reached {worst} on a window reaching before its start"
        );
    }
}

/// `spin` is a whole-job pattern ("every GPU of the job at util ≥ 90 % on every sample, yet
/// power ≤ 30 %"), and the regression case says a two-node job whose second node draws 380 W
/// "is not `spin`". A per-node enforcer on the first node (`Scope::Node`) sees only the
/// 70 W half and alerts the job as `spin`: guard 9 caps it at alert, but spin's ceiling is
/// alert anyway, so the cap changes nothing and the user is told their working job is
/// deadlocked. A partial view cannot show "every GPU of the job".
///
/// Spec (regression cases): "Partial breach across nodes. The same job with one node's GPUs
/// at 380 W is not `spin`."
#[test]
fn a_per_node_view_does_not_call_half_a_job_spin() {
    let j = job("1", 0, &[(0, 8), (1, 8)]);
    let mut r = Run::new(cfg(), Mode::Observe, vec![j]);
    r.scope = policy::Scope::Node(NodeId(0));
    r.now_s = 3600;
    for _ in 0..30 {
        let t = r.now_s + 60;
        // The per-node enforcer on node 0 reads only its own GPUs; node 1's are at 380 W.
        let samples: Vec<Sample> = (0..8u16)
            .map(|gpu| sample(Gpu::Spin, t, policy::GpuRef { node: NodeId(0), gpu }).unwrap())
            .collect();
        let f = &r.tick_samples(samples)[0];
        assert!(
            !(f.signature_name() == "spin" && f.verdict >= Verdict::Alert),
            "{} {} on the node-0 half of a job whose node 1 works",
            f.verdict,
            f.signature_name()
        );
    }
}

/// The broken-exporter guard looks for a window in which *every* sample reads 0 %, 0 MiB and
/// 0 W. An exporter that reports 0 %, 0 MiB, 0 W but now and then leaves the power out
/// (`[N/A]`, a transient NVML error) escapes it: the one sample without power is not the
/// all-zero pattern, so the window is judged, and its zeros are read as memory free and
/// util 0 on every sample: `idle`, ceiling cancel, drain at 60 minutes. The samples that
/// break the pattern carry *less* information than the all-zero ones, not more.
///
/// Spec (regression cases): "An all-zero exporter. A healthy job whose exporter reports all
/// zeros (0 %, 0 MiB, 0 W) for hours never goes above `watching`." Rule #1: "broken is not
/// idle".
#[test]
fn an_all_zero_exporter_with_an_occasional_na_power_is_not_idle() {
    let worst = worst_of(Policy::default(), 240, |tick, t| Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        power_w: if tick % 10 == 0 { Reading::MISSING } else { 0.0.into() },
        procs: None,
        ..base_sample(t)
    });
    assert!(worst.0 <= Verdict::Watching, "reached {} {}", worst.0, worst.1);
}

/// The frozen-collector guard has the same hole: a collector that repeats one cached
/// reading bit for bit, but leaves the power out now and then (a failed read), is no longer
/// "identical across the window", so the cached reading is judged as if it were live. Here
/// the reading cached is a hung-looking one (memory held, 0 %, one process): `hung`,
/// ceiling cancel, and the job is drained and, with a cancel stage, cancelled on one reading
/// repeated for four hours.
///
/// Spec, guard 3: "every reading, power included, is bit-identical across the whole window.
/// That is a frozen collector" (invalid evidence); regression case "Frozen collector. The
/// same values repeated bit for bit for an hour are `insufficient_evidence`."
#[test]
fn a_frozen_collector_with_an_occasional_na_power_is_not_acted_on() {
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, |tick, t| Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 40_000.0.into(),
        power_w: if tick % 10 == 0 { Reading::MISSING } else { 71.0.into() },
        procs: Some(1),
        ..base_sample(t)
    });
    assert!(worst.0 <= Verdict::Watching, "reached {} {}", worst.0, worst.1);
}

/// `spin_power_frac = 1` is accepted, and then "power at most 100 % of the limit" holds for
/// every sample: a fully busy job at a steady 350 W of 400 W is alerted as a deadlock. The
/// config refuses `spin_util_pct = 0` for the same kind of reason ("an idle GPU at flat low
/// power would be called spin"); the same holds here for a busy one. Either refusing the
/// value (naming the key) or not calling the job spin passes this test.
#[test]
fn a_spin_power_fraction_of_one_is_refused_or_never_calls_a_busy_job_spin() {
    let c = PolicyConfig {
        spin_power_frac: 1.0,
        ..PolicyConfig::default()
    };
    let p = match Policy::new(&c) {
        Err(e) => {
            assert_eq!(e.key, "policy.spin_power_frac", "{e}");
            return;
        }
        Ok(p) => p,
    };
    let worst = worst_of(p, 90, |tick, t| Sample {
        util_pct: (95.0 + (tick % 4) as f64).into(),
        mem_used_mib: 70_000.0.into(),
        power_w: (350.0 + (tick % 5) as f64 * 2.0).into(),
        procs: Some(1),
        ..base_sample(t)
    });
    assert!(worst.0 < Verdict::Alert, "a busy job reached {} {}", worst.0, worst.1);
}

/// The reason line goes to Slurm's AdminComment and the logs as one line. `one_line` replaces
/// control characters, but U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR are not
/// control characters (category Zl/Zp), so a job id (or an exempt user name) carrying one
/// reaches the reason as a line break. Spec: "Reason. One line a user can read … no newlines".
#[test]
fn reason_has_no_unicode_line_separator() {
    for sep in ['\u{2028}', '\u{2029}'] {
        let j = policy::JobFacts {
            job_id: format!("12{sep}34"),
            ..job("x", 0, &[(0, 1)])
        };
        let jobs = vec![j];
        let mut e = Engine::new(Policy::default(), Mode::Observe);
        let mut out = Vec::new();
        step_whole(&mut e, &jobs, 60, &[], &mut out);
        let reason = out[0].reason(&jobs[0]);
        assert!(!reason.contains(sep), "{reason:?}");
    }
}

/// Two running jobs both idle, each claiming the GPU the other claims too, plus a GPU of its
/// own: the shared GPU's samples belong to neither, so both jobs lack evidence on one GPU and
/// never go above insufficient evidence, whatever the other GPUs show.
#[test]
fn a_gpu_claimed_by_two_jobs_blocks_both_even_with_other_gpus_idle() {
    let a = policy::JobFacts {
        alloc: vec![
            policy::GpuRef { node: NodeId(0), gpu: 0 },
            policy::GpuRef { node: NodeId(0), gpu: 1 },
        ],
        ..job("a", 0, &[])
    };
    let b = policy::JobFacts {
        alloc: vec![
            policy::GpuRef { node: NodeId(0), gpu: 0 },
            policy::GpuRef { node: NodeId(1), gpu: 0 },
        ],
        ..job("b", 0, &[])
    };
    let mut r = Run::new(cfg_with_cancel(90 * 60), Mode::Observe, vec![a, b]);
    r.run_until(4 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.max_verdict(0), Verdict::InsufficientEvidence);
    assert_eq!(r.max_verdict(1), Verdict::InsufficientEvidence);
}

/// A job id listed twice in one cycle: the second listing is judged as a job without
/// evidence, and the first is judged as usual; the two never trade state.
#[test]
fn a_job_id_listed_twice_judges_the_second_without_evidence() {
    let j = job("5", 0, &[(0, 1)]);
    let mut r = Run::new(cfg(), Mode::Observe, vec![j.clone(), j]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.verdict(0), Verdict::Drain);
    assert_eq!(r.max_verdict(1), Verdict::InsufficientEvidence);
}

/// A job id reused with a new start time (a requeue), an allocation that moves to other GPUs,
/// and a clock that goes back each start the escalation again from the first alert: no
/// finding after them is above alert until a fresh drain dwell has passed.
#[test]
fn requeue_move_and_clock_jump_restart_escalation() {
    type Edit = fn(&mut Run);
    let edits: [(&str, Edit); 3] = [
        ("requeue", |r| r.jobs[0].start_s = r.now_s - 3600),
        ("move", |r| {
            for g in &mut r.jobs[0].alloc {
                g.node = NodeId(7);
            }
        }),
        ("clock back", |r| r.now_s -= 30 * 60),
    ];
    for (what, edit) in edits {
        let mut r = Run::new(cfg_with_cancel(2 * 3600), Mode::Observe, vec![job("6", 0, &[(0, 2)])]);
        r.run_until(2 * 3600, |_, _, _| Gpu::Idle);
        assert_eq!(r.verdict(0), Verdict::Drain, "{what}: precondition");
        edit(&mut r);
        let from = r.now_s;
        for _ in 0..60 {
            r.tick(|_, _, _| Gpu::Idle);
            if r.now_s - from < 60 * 60 {
                assert!(r.verdict(0) <= Verdict::Alert, "{what}: {} at +{}s", r.verdict(0), r.now_s - from);
            }
        }
    }
}

/// A stage list whose drain needs less dwell than its alert is refused naming the stages;
/// an unknown key and a ceiling for an unknown signature are refused naming the key.
#[test]
fn config_errors_name_the_key() {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[allow(dead_code)]
        policy: PolicyConfig,
    }
    let e = toml::from_str::<File>("[policy]\nwindw = \"20m\"\n")
        .err()
        .expect("unknown key refused");
    assert!(e.to_string().contains("windw"), "{e}");
    let c = PolicyConfig {
        stages: vec![
            StageConfig {
                after: DurationS(3600),
                verdict: "alert".into(),
            },
            StageConfig {
                after: DurationS(60),
                verdict: "drain".into(),
            },
        ],
        ..PolicyConfig::default()
    };
    assert_eq!(Policy::new(&c).unwrap_err().key, "policy.stages");
    let c = PolicyConfig {
        ceilings: [("stuck".to_string(), "cancel".to_string())].into_iter().collect(),
        ..PolicyConfig::default()
    };
    assert_eq!(Policy::new(&c).unwrap_err().key, "policy.ceilings.stuck");
}

/// Findings do not depend on the order jobs are listed in, even when that order changes
/// every cycle (the engine's by-position hint misses every time) and jobs leave and arrive.
#[test]
fn job_order_changing_every_cycle_does_not_change_any_finding() {
    let states = [Gpu::Idle, Gpu::Hung, Gpu::Busy, Gpu::Starved, Gpu::Spin];
    let all: Vec<policy::JobFacts> = (0..5u32).map(|i| job(&format!("j{i}"), 0, &[(i, 2)])).collect();
    let run = |shuffle: bool| {
        let mut e = Engine::new(Policy::new(&cfg_with_cancel(100 * 60)).unwrap(), Mode::Observe);
        let mut seen: Vec<Vec<(String, Verdict, &'static str, i64)>> = Vec::new();
        let mut out = Vec::new();
        for tick in 1..=200i64 {
            let t = tick * 60;
            // Job j4 leaves at tick 120 and comes back at tick 150.
            let mut jobs: Vec<policy::JobFacts> = all
                .iter()
                .filter(|j| j.job_id != "j4" || !(120..150).contains(&tick))
                .cloned()
                .collect();
            if shuffle {
                let k = tick as usize % jobs.len();
                jobs.rotate_left(k);
                if tick % 2 == 0 {
                    jobs.reverse();
                }
            }
            let mut samples = Vec::new();
            for j in &jobs {
                let i: usize = j.job_id[1..].parse().unwrap();
                for &g in &j.alloc {
                    samples.push(sample(states[i], t, g).unwrap());
                }
            }
            step_whole(&mut e, &jobs, t, &samples, &mut out);
            let mut row: Vec<_> = out
                .iter()
                .map(|f| (jobs[f.job_index as usize].job_id.clone(), f.verdict, f.signature_name(), f.dwell_s))
                .collect();
            row.sort_by(|a, b| a.0.cmp(&b.0));
            seen.push(row);
        }
        seen
    };
    let (a, b) = (run(false), run(true));
    assert_eq!(a, b);
    assert!(a.iter().flatten().any(|r| r.1 == Verdict::Cancel), "the scenario reaches cancel");
}

/// A small deterministic generator for the randomised test below (no RNG crate needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }
}

/// Guards 1, 2 and 10 against an independent oracle. Three jobs (two of them sharing their
/// GPUs) switch between idle, hung, busy, `[N/A]` util, missing, all-zero and future-stamped
/// samples; samples are jittered (so some arrive late or out of order), one in eight is
/// dropped, the clock steps back by 90 s to 5 min or jumps 10 min ahead now and then, and jobs
/// are requeued with new start times. The oracle keeps, per job incarnation and GPU, the valid
/// samples the spec says the engine takes (not late, not beyond `now + clock_skew`, with a
/// compute reading) and checks every finding at alert or above: past warmup, and on every GPU
/// a first valid sample no later than `now − window + gap`, no hole above the gap, the last
/// no older than the gap.
#[test]
fn alerts_only_on_full_window_evidence_by_an_independent_oracle() {
    use std::collections::BTreeMap;
    let c = cfg_with_cancel(90 * 60);
    let (win, gap, skew, warm) = (c.window.secs(), c.max_sample_gap.secs(), c.clock_skew.secs(), c.warmup.secs());
    let states = [
        Gpu::Idle,
        Gpu::Hung,
        Gpu::Busy,
        Gpu::NaUtil,
        Gpu::Missing,
        Gpu::AllZero,
        Gpu::Future,
    ];
    let mut alerts = 0;
    for seed in 0..600u64 {
        let mut r = Lcg(seed * 104_729 + 3);
        let mode = [Mode::Observe, Mode::Enforce, Mode::ObserveReported][(r.next() % 3) as usize];
        let mut e = Engine::new(Policy::new(&c).unwrap(), mode);
        let mut out = Vec::new();
        let mut now: i64 = 10_000;
        let mut jobs: Vec<policy::JobFacts> = (0..3).map(|i| job(&format!("{i}"), 0, &[(i % 2, 2)])).collect();
        // (job id, node, GPU) → (newest time taken, times of the valid samples taken).
        let mut taken: BTreeMap<(String, u32, u16), (i64, Vec<i64>)> = BTreeMap::new();
        let mut state = [Gpu::Idle; 3];
        for _ in 0..300 {
            let step = match r.next() % 40 {
                0 => -120,
                1 => 600,
                2 => -300,
                3 => -90,
                _ => 60,
            };
            now += step;
            // A clock that goes back empties every window (review 14): nothing taken before
            // the step counts, and nothing after it is late against what came before.
            if step < 0 {
                taken.clear();
            }
            for (k, j) in jobs.iter_mut().enumerate() {
                if r.next() % 60 == 0 {
                    let start = now - (r.next() % 2000) as i64;
                    if start != j.start_s {
                        j.start_s = start;
                        taken.retain(|key, _| key.0 != j.job_id);
                    }
                }
                if r.next() % 20 == 0 {
                    state[k] = states[(r.next() % states.len() as u64) as usize];
                }
            }
            let mut samples = Vec::new();
            for (k, j) in jobs.iter().enumerate() {
                for &g in &j.alloc {
                    let st = if r.next() % 8 == 0 { Gpu::Missing } else { state[k] };
                    let t = (now + (r.next() % 90) as i64 - 30).max(j.start_s);
                    let Some(s) = sample(st, t, g) else { continue };
                    samples.push(s);
                    let h = taken.entry((j.job_id.clone(), g.node.0, g.gpu)).or_insert((i64::MIN, vec![]));
                    if s.t_s > now + skew || s.t_s <= h.0 {
                        continue;
                    }
                    h.0 = s.t_s;
                    if st != Gpu::NaUtil {
                        h.1.push(s.t_s);
                    }
                }
            }
            step_whole(&mut e, &jobs, now, &samples, &mut out);
            for f in out.iter().filter(|f| f.verdict >= Verdict::Alert) {
                alerts += 1;
                let j = &jobs[f.job_index as usize];
                assert!(
                    now - j.start_s >= warm,
                    "seed {seed} at {now}: job {} in warmup is {}",
                    j.job_id,
                    f.verdict
                );
                for g in &j.alloc {
                    let v: Vec<i64> = taken
                        .get(&(j.job_id.clone(), g.node.0, g.gpu))
                        .map(|h| h.1.iter().copied().filter(|&t| t > now - win && t <= now + skew).collect())
                        .unwrap_or_default();
                    let why = if v.is_empty() {
                        Some("no valid sample".to_string())
                    } else if v[0] > now - win + gap {
                        Some(format!("first valid sample {} after {}", v[0], now - win + gap))
                    } else if now - v[v.len() - 1] > gap {
                        Some("stale".to_string())
                    } else {
                        v.windows(2).find(|w| w[1] - w[0] > gap).map(|w| format!("hole {}..{}", w[0], w[1]))
                    };
                    assert!(
                        why.is_none(),
                        "seed {seed} at {now}: job {} {} on {g:?}: {why:?}",
                        j.job_id,
                        f.verdict
                    );
                }
            }
        }
    }
    assert!(alerts > 100, "the scenarios reach alert ({alerts} findings)");
}

/// Fifth operator trial: a GPU whose readings stay bit-identical (0 %, 3 MiB) while its power
/// reads 0 W (rejected: no live GPU draws 0 W) or `[N/A]` cannot be told from a frozen
/// collector. The engine used to drain and cancel it as idle. Guard 3 ("where power is
/// missing, freezing cannot be told from a quiet GPU") now holds it at alert, and says why.
#[test]
fn identical_readings_without_power_are_never_drained() {
    for power in [Reading::from(0.0), Reading::MISSING] {
        let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, |_, t| Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 3.0.into(),
            power_w: power,
            procs: None,
            ..base_sample(t)
        });
        assert_eq!(worst.0, Verdict::Alert, "power {power:?}: reached {} {}", worst.0, worst.1);
    }
    // Control: the same GPU with power that moves is judged, up to the cancel stage.
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, |tick, t| Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 3.0.into(),
        power_w: (60.0 + (tick % 7) as f64 * 0.1).into(),
        procs: None,
        ..base_sample(t)
    });
    assert_eq!(worst.0, Verdict::Cancel, "control: {} {}", worst.0, worst.1);
}

/// The freeze check compares the GPU's readings only: a process count (from another query,
/// which can stay live while the GPU metrics are stuck) that changes does not make a window
/// of bit-identical util, memory and power look alive.
#[test]
fn a_frozen_collector_with_a_changing_process_count_is_not_acted_on() {
    let worst = worst_of(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), 240, |tick, t| Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 40_000.0.into(),
        power_w: 71.0.into(),
        procs: Some(1 + (tick % 2) as u32),
        ..base_sample(t)
    });
    assert!(worst.0 <= Verdict::Watching, "reached {} {}", worst.0, worst.1);
}
