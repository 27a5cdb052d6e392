//! Regression cases: each has already happened in an existing tool of this kind.

mod harness;
use harness::*;
use policy::{Cause, EvidenceProblem, GpuRef, Mode, NodeId, Reading, Sample, Verdict};

#[test]
fn collector_stops_falls_to_insufficient_evidence_within_the_gap() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 4)])]);
    r.run_until(2400, |_, _, _| Gpu::Idle);
    assert_eq!(r.verdict(0), Verdict::Alert, "idle job is alerted before the collector stops");
    let last_sample_s = r.now_s;
    let gap_s = cfg().max_sample_gap.secs();
    let before = r.verdict(0);
    while r.now_s < last_sample_s + 3 * 3600 {
        r.tick(|_, _, _| Gpu::Missing);
        let v = r.verdict(0);
        assert!(v <= before, "escalated to {v} on a stale window at {}", r.now_s);
        if r.now_s - last_sample_s > gap_s {
            assert_eq!(v, Verdict::InsufficientEvidence, "at {} (last sample {last_sample_s})", r.now_s);
            let cause = r.out[0].cause;
            assert!(
                matches!(cause, Cause::Evidence(EvidenceProblem::Stale | EvidenceProblem::NoSamples)),
                "{cause:?}"
            );
        }
    }
}

#[test]
fn short_coverage_does_not_alert() {
    // 8 idle samples spanning 7 minutes of a 20-minute window, on a job well past warmup.
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.now_s = 3600 - 8 * 60;
    for _ in 0..8 {
        r.tick(|_, _, _| Gpu::Idle);
        assert!(r.verdict(0) < Verdict::Alert, "alerted at {} on short coverage", r.now_s);
    }
    assert_eq!(r.verdict(0), Verdict::Watching);
    assert_eq!(r.out[0].cause, Cause::ShortCoverage);
}

#[test]
fn all_zero_exporter_never_goes_above_watching() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 8)])]);
    r.run_until(6 * 3600, |_, _, _| Gpu::AllZero);
    assert!(r.max_verdict(0) <= Verdict::Watching, "reached {}", r.max_verdict(0));
    assert_eq!(r.verdict(0), Verdict::InsufficientEvidence);
    assert_eq!(r.out[0].cause, Cause::Evidence(EvidenceProblem::AllZero));
}

#[test]
fn mig_na_utilisation_is_never_read_as_zero() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(4 * 3600, |_, _, _| Gpu::NaUtil);
    for (_, f) in &r.history {
        assert!(f[0].signature.is_none(), "a signature from [N/A] util: {:?}", f[0].signature_name());
        assert!(f[0].verdict <= Verdict::InsufficientEvidence);
    }
    assert_eq!(r.verdict(0), Verdict::InsufficientEvidence);
    assert!(r.out[0].evidence.invalid_samples > 0, "[N/A] samples are counted as invalid");
    // Trial 9: and the reason says so, not "no_samples".
    assert_eq!(r.out[0].cause, policy::Cause::Evidence(policy::EvidenceProblem::NoValidSamples));
    assert!(
        r.out[0].reason(&r.jobs[0]).contains("no_valid_samples"),
        "{}",
        r.out[0].reason(&r.jobs[0])
    );
}

#[test]
fn checkpoint_stall_of_25_minutes_never_reaches_drain() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 8)])]);
    let (stall_from, stall_to) = (3 * 3600, 3 * 3600 + 25 * 60);
    r.run_until(6 * 3600, |t, _, _| {
        if (stall_from..stall_to).contains(&t) {
            Gpu::Stall
        } else {
            Gpu::Busy
        }
    });
    assert!(r.max_verdict(0) < Verdict::Drain, "reached {}", r.max_verdict(0));
    assert_eq!(r.verdict(0), Verdict::Healthy);
}

#[test]
fn over_allocation_is_partial_with_seven_gpus_of_waste() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 8)])]);
    r.run_until(2 * 3600, |_, _, g| if g.gpu == 0 { Gpu::Busy } else { Gpu::Idle });
    let f = &r.out[0];
    assert_eq!(f.signature_name(), "partial");
    assert_eq!(f.evidence.wasted_gpus, 7);
    assert_eq!(f.verdict, Verdict::Alert, "partial's default ceiling is alert");
    let expected_h = 7.0 * f.dwell_s as f64 / 3600.0;
    assert!((f.wasted_gpu_h - expected_h).abs() < 1e-9, "{} vs {expected_h}", f.wasted_gpu_h);
}

fn two_node_job() -> policy::JobFacts {
    job("1", 0, &[(0, 8), (1, 8)])
}

fn spin_samples(t_s: i64, node1_power_w: Option<f64>) -> Vec<Sample> {
    let mut v = Vec::new();
    for node in 0..2u32 {
        for gpu in 0..8u16 {
            let mut s = sample(Gpu::Spin, t_s, GpuRef { node: NodeId(node), gpu }).unwrap();
            if node == 1 {
                if let Some(p) = node1_power_w {
                    s.power_w = (p + (t_s / 60 % 5) as f64).into();
                }
            }
            v.push(s);
        }
    }
    v
}

#[test]
fn spin_on_sixteen_gpus_across_two_nodes() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![two_node_job()]);
    r.now_s = 3600;
    for _ in 0..30 {
        r.tick_samples(spin_samples(r.now_s + 60, None));
    }
    let f = &r.out[0];
    assert_eq!(f.signature_name(), "spin");
    assert_eq!(f.verdict, Verdict::Alert);
    assert_eq!(f.evidence.wasted_gpus, 16);
    assert!(f.evidence.peak_util_pct >= 99.0);
}

#[test]
fn one_node_at_380_w_is_not_spin() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![two_node_job()]);
    r.now_s = 3600;
    for _ in 0..30 {
        r.tick_samples(spin_samples(r.now_s + 60, Some(380.0)));
        assert_ne!(r.out[0].signature_name(), "spin");
    }
    assert_eq!(r.verdict(0), Verdict::Healthy);
}

#[test]
fn frozen_collector_is_insufficient_evidence() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 2)])]);
    let frozen = |t_s: i64, gpu: u16| Sample {
        t_s,
        node: NodeId(0),
        gpu,
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        mem_total_mib: 81_920.0.into(),
        power_w: 61.0.into(),
        power_limit_w: 400.0.into(),
        procs: Some(0),
        sm_active: Reading::MISSING,
    };
    r.now_s = 3600;
    for _ in 0..60 {
        let t = r.now_s + 60;
        r.tick_samples(vec![frozen(t, 0), frozen(t, 1)]);
        assert!(r.verdict(0) <= Verdict::Watching, "acted on a frozen collector at {}", r.now_s);
    }
    assert_eq!(r.verdict(0), Verdict::InsufficientEvidence);
    assert_eq!(r.out[0].cause, Cause::Evidence(EvidenceProblem::Frozen));
    assert_eq!(r.out[0].evidence.frozen_gpus, 2);
}

#[test]
fn partial_job_that_stalls_for_a_checkpoint_is_not_escalated_on_its_partial_dwell() {
    // 8 GPUs, 4 used: a `partial` breach (ceiling alert) for hours. A 45-minute checkpoint
    // stall makes every GPU look low, so the job matches `hung` (ceiling cancel) for a while.
    // Drain and cancel dwell must count from when the job started to look hung, not from the
    // start of the partial breach. Found by the simulator's scoring tests.
    let c = cfg_with_cancel(2 * 3600);
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 8)])]);
    let (stall_from, stall_to) = (5 * 3600, 5 * 3600 + 45 * 60);
    r.run_until(8 * 3600, |t, _, g| {
        if g.gpu >= 4 {
            Gpu::Idle
        } else if (stall_from..stall_to).contains(&t) {
            Gpu::Stall
        } else {
            Gpu::Busy
        }
    });
    assert!(
        r.history.iter().any(|(_, f)| f[0].signature_name() == "hung"),
        "the stall looks hung"
    );
    assert_eq!(r.max_verdict(0), Verdict::Alert);
    assert_eq!(r.out[0].signature_name(), "partial");
}

#[test]
fn a_job_whose_gpus_change_starts_afresh() {
    // Found by a review of the enforcer: a driver's view of a running job's GPUs can change
    // without its start time or GPU count changing (the enforcer re-attributes a requeued job
    // it never saw pending). The old GPUs' windows must not judge the new ones.
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(2 * 3600, |_, _, _| Gpu::Idle);
    assert!(r.verdict(0) >= Verdict::Alert, "an idle job alerts: {}", r.verdict(0));
    // Same id, start and count; now GPU 1 of node 0 instead of GPU 0.
    r.jobs[0].alloc = vec![GpuRef { node: NodeId(0), gpu: 1 }];
    r.tick(|_, _, _| Gpu::Idle);
    assert!(
        r.verdict(0) < Verdict::Alert,
        "the new GPU has one sample; verdict {} cause {:?}",
        r.verdict(0),
        r.out[0].cause
    );
    assert_eq!(r.out[0].evidence.samples_max_per_gpu, 1);
}

/// A hung-looking GPU (0 % util, memory held, a process) whose collector also reports one
/// implausible value on every sample: a negative power, memory used above the total, or a
/// util of 150 % beside a valid SM activity. Broken is not idle: the whole sample is invalid
/// evidence, so the job never goes above `insufficient_evidence`, even with a cancel stage.
#[test]
fn a_collector_reporting_an_implausible_value_every_sample_is_never_acted_on() {
    let broken: [fn(Sample) -> Sample; 3] = [
        |s| Sample {
            power_w: (-50.0).into(),
            ..s
        },
        |s| Sample {
            mem_used_mib: 90_000.0.into(),
            mem_total_mib: 81_920.0.into(),
            ..s
        },
        |s| Sample {
            util_pct: 150.0.into(),
            sm_active: 0.0.into(),
            ..s
        },
    ];
    for (k, edit) in broken.into_iter().enumerate() {
        let mut r = Run::new(cfg_with_cancel(2 * 3600), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
        let g = GpuRef { node: NodeId(0), gpu: 0 };
        while r.now_s < 6 * 3600 {
            let t = r.now_s + 60;
            let s = sample(Gpu::Hung, t, g).expect("a hung GPU reports");
            r.tick_samples(vec![edit(s)]);
        }
        assert!(
            r.max_verdict(0) <= Verdict::InsufficientEvidence,
            "case {k}: reached {}",
            r.max_verdict(0)
        );
        assert!(r.out[0].evidence.invalid_samples > 0, "case {k}: {:?}", r.out[0].evidence);
    }
}

/// A vendor "no value" sentinel is only a missing field: a hung GPU whose power reads DCGM's
/// blank on every sample is still judged on its memory and compute (hung needs no power).
#[test]
fn a_sentinel_in_one_field_leaves_the_rest_of_the_sample_usable() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let g = GpuRef { node: NodeId(0), gpu: 0 };
    while r.now_s < 3 * 3600 {
        let t = r.now_s + 60;
        let s = sample(Gpu::Hung, t, g).expect("a hung GPU reports");
        r.tick_samples(vec![Sample {
            power_w: policy::DCGM_FP64_BLANK.into(),
            ..s
        }]);
    }
    assert!(r.verdict(0) >= Verdict::Alert, "{:?}", r.out[0]);
    assert_eq!(r.out[0].signature_name(), "hung");
    assert!(r.out[0].evidence.invalid_samples > 0, "the sentinel samples are still counted");
}

/// Trial 10: a collector that freezes partway through a window. The job is hung (a real
/// breach) until 90 minutes in; from then on every sample repeats the 90-minute one bit for
/// bit, power included (a stuck exporter re-serving its last answer, freshly stamped). The
/// whole-window freeze check needed the entire window to repeat, so for the next 20 minutes
/// the job was judged, drained and could be cancelled on readings up to 20 minutes old. Now
/// the window is stale from the moment the copies span more than `max_sample_gap`.
#[test]
fn a_collector_that_freezes_partway_through_a_window_is_stale_evidence() {
    let cfg = cfg_with_cancel(2 * 3600);
    let gap_s = cfg.max_sample_gap.secs();
    let mut r = Run::new(cfg, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let freeze_s = 90 * 60;
    let frozen = sample(Gpu::Hung, freeze_s, policy::GpuRef { node: NodeId(0), gpu: 0 }).unwrap();
    while r.now_s < 4 * 3600 {
        let t = r.now_s + r.interval_s;
        let s = if t < freeze_s {
            sample(Gpu::Hung, t, policy::GpuRef { node: NodeId(0), gpu: 0 }).unwrap()
        } else {
            policy::Sample { t_s: t, ..frozen }
        };
        r.tick_samples(vec![s]);
    }
    assert!(
        r.first_at(0, Verdict::Drain).is_some_and(|t| t < freeze_s),
        "control: drained before the freeze"
    );
    for (now, f) in &r.history {
        if *now > freeze_s + gap_s {
            assert_eq!(
                (f[0].verdict, f[0].cause),
                (
                    Verdict::InsufficientEvidence,
                    policy::Cause::Evidence(policy::EvidenceProblem::Frozen)
                ),
                "at {now}: {}",
                f[0].reason(&r.jobs[0])
            );
        }
    }
}
