//! Inputs that try to get around "an implausible reading makes the whole sample invalid
//! evidence" and the broken-exporter guard: conflicting same-time samples, vanishing powers,
//! an all-zero exporter without util. Each test states the safe outcome.

mod harness;
use harness::*;
use policy::{Engine, Mode, Policy, Reading, Sample, Verdict};

/// The mirror of `equivalence::same_time_tie_break_keeps_the_sample_the_old_engine_kept`: at
/// every timestamp the GPU's collector hands in an idle-looking sample and an implausible one
/// (util 150 %, power −50 W), the idle one sorting first. Two samples of one instant that
/// disagree leave that instant without usable evidence, whichever sorts first, so the job
/// never goes above insufficient evidence.
#[test]
fn an_implausible_twin_sorted_second_does_not_discredit_the_idle_sample() {
    let cfg = cfg_with_cancel(90 * 60);
    let mut e = Engine::new(Policy::new(&cfg).unwrap(), Mode::Observe);
    let jobs = vec![job("7", 0, &[(0, 1)])];
    let mut out = Vec::new();
    let mut worst = Verdict::Healthy;
    for tick in 1..=240i64 {
        let t = tick * 60;
        let idle = Sample {
            util_pct: 0.0.into(),
            power_w: (60.0 + (tick % 5) as f64).into(),
            ..base_sample(t)
        };
        let broken = Sample {
            util_pct: 150.0.into(),
            mem_used_mib: 60_000.0.into(),
            power_w: (-50.0).into(),
            procs: Some(1),
            ..base_sample(t)
        };
        step_whole(&mut e, &jobs, t, &[broken, idle], &mut out);
        worst = worst.max(out[0].verdict);
    }
    assert!(
        worst <= Verdict::InsufficientEvidence,
        "reached {worst:?}; evidence {:?}",
        out[0].evidence
    );
}

/// Runs one job whose GPU reads ~100 % util, memory held, one process, and `power_w` on every
/// sample, for four hours under a cancel stage and a spin ceiling of cancel; returns the worst
/// verdict and its signature.
fn spin_at_power(power_w: f64) -> (Verdict, &'static str) {
    // A spin ceiling of cancel, as in the sweep grid's `spin_ceiling = "cancel"` rows.
    let mut cfg = cfg_with_cancel(90 * 60);
    cfg.ceilings.insert("spin".to_string(), "cancel".to_string());
    let mut e = Engine::new(Policy::new(&cfg).unwrap(), Mode::Observe);
    let jobs = vec![job("7", 0, &[(0, 1)])];
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, "");
    for tick in 1..=240i64 {
        let t = tick * 60;
        let s = Sample {
            util_pct: (99.0 + (tick % 3) as f64 * 0.5).into(),
            mem_used_mib: (60_000.0 + (tick % 4) as f64).into(),
            power_w: power_w.into(),
            procs: Some(1),
            ..base_sample(t)
        };
        step_whole(&mut e, &jobs, t, &[s], &mut out);
        if out[0].verdict > worst.0 {
            worst = (out[0].verdict, out[0].signature_name());
        }
    }
    worst
}

/// A power of exactly 0 W is "no value" (unknown); a positive power below a watt (a subnormal,
/// 1e-9 W, 0.01 W: a unit slip or a broken exporter, never a real board draw) is implausible
/// and discards its sample. Otherwise a GPU at ~100 % util with such a power would read as an
/// NCCL spin and, with `spin = "cancel"`, be cancelled, while the same GPU at 0 W stays healthy.
#[test]
fn a_vanishing_power_is_not_idle_power_evidence() {
    let (zero, _) = spin_at_power(0.0);
    eprintln!("zero => {zero:?}");
    assert!(zero < Verdict::Drain, "control: power 0 W is unknown, reached {zero:?}");
    for p in [f64::from_bits(1), f64::MIN_POSITIVE, 1e-9, 0.01] {
        let (v, sig) = spin_at_power(p);
        eprintln!("power {p:e} => {v:?} {sig}");
        assert!(
            v < Verdict::Drain,
            "power {p:e} W: reached {v:?} ({sig}) while 0 W stays below drain"
        );
    }
}

/// Worst verdict of one job whose GPU reports `s` (stamped each minute) for four hours
/// under a cancel stage.
fn worst_for(edit: impl Fn(Sample) -> Sample) -> (Verdict, String) {
    let cfg = cfg_with_cancel(90 * 60);
    let mut e = Engine::new(Policy::new(&cfg).unwrap(), Mode::Observe);
    let jobs = vec![job("7", 0, &[(0, 1)])];
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, String::new());
    for tick in 1..=240i64 {
        let t = tick * 60;
        step_whole(&mut e, &jobs, t, &[edit(base_sample(t))], &mut out);
        if out[0].verdict > worst.0 {
            worst = (out[0].verdict, format!("{} {:?}", out[0].signature_name(), out[0].cause));
        }
    }
    worst
}

/// The all-zero-exporter guard looks at the compute reading in use: `utilization.gpu`, or SM
/// activity when util is missing (`[N/A]`, a sentinel, or a DCGM profile that only exports
/// `DCGM_FI_PROF_SM_ACTIVE`). An exporter reading SM activity 0, memory 0 and power 0 on every
/// sample is the broken exporter, insufficient evidence, never an idle job to cancel.
#[test]
fn an_all_zero_exporter_without_util_is_not_idle() {
    let z = |s: Sample| Sample {
        util_pct: Reading::MISSING,
        sm_active: 0.0.into(),
        mem_used_mib: 0.0.into(),
        power_w: 0.0.into(),
        ..s
    };
    for (what, procs) in [("procs unknown", None), ("procs 0", Some(0))] {
        for util in [Reading::MISSING, policy::SENTINEL_U32.into()] {
            let (v, why) = worst_for(|s| Sample {
                util_pct: util,
                procs,
                ..z(s)
            });
            assert!(v <= Verdict::InsufficientEvidence, "{what}, util {util:?}: reached {v:?} ({why})");
        }
    }
}
