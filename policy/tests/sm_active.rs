//! SM activity (`DCGM_FI_PROF_SM_ACTIVE`) where `utilization.gpu` is missing: a compute
//! reading only at 0 (operator trial 23: a GPU kept busy by a kernel on one SM of 132 read
//! 0.8 % as `sm_active × 100`, below `hung_util_pct`, and a replay of dcgm pages cancelled it
//! as `hung`, where the enforcer, reading utilization.gpu at ~100 %, would see it working).

mod harness;
use harness::*;
use policy::{Engine, Mode, Observation, Policy, Reading, Sample, Scope, Verdict};

/// One 1-GPU job, memory held, no process count, power ~80 W of 400, `util_pct` missing and
/// `sm_active` at `sm` on every sample; three hours at one cycle a minute under a config with
/// a cancel stage at 2h. Returns the highest verdict reached.
fn highest_verdict(sm: f64) -> Verdict {
    let jobs = vec![job("9", 0, &[(0, 1)])];
    let mut engine = Engine::new(Policy::new(&cfg_with_cancel(2 * 3600)).unwrap(), Mode::Observe);
    let mut out = Vec::new();
    let mut worst = Verdict::Healthy;
    let mut drains = Vec::new();
    for k in 1..=180i64 {
        let now = k * 60;
        let s = Sample {
            t_s: now,
            node: jobs[0].alloc[0].node,
            gpu: jobs[0].alloc[0].gpu,
            util_pct: Reading::MISSING,
            sm_active: Reading::from(sm),
            mem_used_mib: Reading::from(30_000.0),
            mem_total_mib: Reading::from(81_920.0),
            power_w: Reading::from(80.0 + (k % 3) as f64),
            power_limit_w: Reading::from(400.0),
            procs: None,
        };
        let obs = Observation {
            jobs: &jobs,
            samples: std::slice::from_ref(&s),
            scope: Scope::Whole,
            drains: &drains,
        };
        engine.step(now, &obs, &mut out);
        worst = worst.max(out[0].verdict);
        if out[0].verdict == Verdict::Drain && drains.is_empty() {
            drains.push(policy::DrainConfirmation {
                job_id: "9".into(),
                nodes: vec![jobs[0].alloc[0].node],
                confirmed_s: now + 60,
                hypothetical: true,
            });
        }
    }
    worst
}

#[test]
fn sm_activity_above_zero_without_util_is_no_evidence() {
    for sm in [0.008, 0.05, 0.6] {
        assert_eq!(highest_verdict(sm), Verdict::InsufficientEvidence, "sm_active {sm}");
    }
}

/// The control: SM activity of exactly 0 says no kernel ran; memory held at idle power with
/// processes unknown is `hung`, escalated to the cancel stage.
#[test]
fn sm_activity_of_zero_without_util_is_zero_compute() {
    assert_eq!(highest_verdict(0.0), Verdict::Cancel);
}
