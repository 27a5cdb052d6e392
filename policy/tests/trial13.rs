//! trial13 (operator trial, 2026-11-30): two config values the README's rule ("settings that
//! would let a cancel-capable signature take working GPUs ... are refused") does not yet
//! refuse. Each probe first shows the config is accepted and the GPU is called wasteful and
//! cancelled with it, while the default thresholds leave the same GPU below any drain.
//! Both fail as reported (the config is accepted); they pass once the config is refused.

mod harness;
use harness::*;
use policy::{Policy, PolicyConfig, Reading, Sample, Verdict};

/// Default config with alert 0, drain 1h, cancel 2h (as in the README's c037).
fn c037ish() -> PolicyConfig {
    cfg_with_cancel(2 * 3600)
}

/// GPU 0 on node 0: 0 % util, **nothing in memory**, 190-192 W of a 400 W limit (above
/// idle_power_frac 0.25, so not idle; nothing in memory, so not hung), process count unknown
/// (a DCGM or nvidia-smi-log trace, the planned central mode).
fn empty_gpu_drawing_power(t_s: i64) -> Sample {
    Sample {
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        power_w: (190.0 + (t_s / 60 % 7) as f64 / 3.0).into(),
        procs: None,
        sm_active: Reading::MISSING,
        ..base_sample(t_s)
    }
}

#[test]
fn mem_held_frac_zero_makes_an_empty_gpu_hung_and_cancellable() {
    // Baseline: the same GPU under the defaults (spin_power_frac raised to 0.5, which is
    // allowed) is `unknown`, alert at most.
    let mut base = c037ish();
    base.spin_power_frac = 0.5;
    let (v, sig) = worst_of(Policy::new(&base).unwrap(), 240, |_, t| empty_gpu_drawing_power(t));
    assert!(v <= Verdict::Alert, "baseline reached {v:?} ({sig})");

    // mem_held_frac = 0: 0 MiB >= 0 x total counts as "memory held", so a GPU with nothing
    // in memory is `hung` (zero compute, memory held) and climbs to cancel. The guard on
    // idle_power_frac (<= 0.4: "a GPU with nothing in memory drawing more is doing work its
    // counters miss") is sidestepped. Expected: refused, naming policy.mem_held_frac.
    let mut c = base.clone();
    c.mem_held_frac = 0.0;
    match Policy::new(&c) {
        Err(e) => assert!(e.to_string().contains("policy.mem_held_frac"), "{e}"),
        Ok(p) => {
            let (v, sig) = worst_of(p, 240, |_, t| empty_gpu_drawing_power(t));
            panic!("mem_held_frac = 0 accepted; an empty GPU at 190 W of 400 W reached {v:?} ({sig})");
        }
    }
}

#[test]
fn mem_held_mib_zero_does_the_same_where_memory_total_is_unknown() {
    // memory.total unknown (power.limit known): memory held is judged against mem_held_mib.
    let no_total = |t: i64| Sample {
        mem_total_mib: Reading::MISSING,
        ..empty_gpu_drawing_power(t)
    };
    let mut base = c037ish();
    base.spin_power_frac = 0.5;
    let (v, sig) = worst_of(Policy::new(&base).unwrap(), 240, |_, t| no_total(t));
    assert!(v <= Verdict::Alert, "baseline reached {v:?} ({sig})");

    let mut c = base.clone();
    c.mem_held_mib = 0.0;
    match Policy::new(&c) {
        Err(e) => assert!(e.to_string().contains("policy.mem_held_mib"), "{e}"),
        Ok(p) => {
            let (v, sig) = worst_of(p, 240, |_, t| no_total(t));
            panic!("mem_held_mib = 0 accepted; an empty GPU at 190 W of 400 W reached {v:?} ({sig})");
        }
    }
}

/// GPU 0: 8-20 % util on every sample (peak 20 %, above the default 15 % threshold: working
/// by the tool's own rule), memory held, one process, flat power ~101 W of 400 W.
fn light_steady_work(tick: i64, t_s: i64) -> Sample {
    Sample {
        util_pct: (8.0 + (tick * 7 % 13) as f64).into(),
        mem_used_mib: 30_000.0.into(),
        power_w: (100.0 + (tick % 5) as f64 * 0.5).into(),
        procs: Some(1),
        sm_active: Reading::MISSING,
        ..base_sample(t_s)
    }
}

#[test]
fn spin_util_pct_below_the_util_threshold_lets_spin_cancel_a_working_gpu() {
    let mut base = c037ish();
    base.ceilings.insert("spin".into(), "cancel".into()); // as c039, which the sweep supports
    let (v, sig) = worst_of(Policy::new(&base).unwrap(), 240, light_steady_work);
    assert_eq!(v, Verdict::Healthy, "baseline reached {v:?} ({sig})");

    // spin_util_pct = 5 (only 0 is refused): the working GPU is `spin` and is cancelled.
    // Expected: refused (at least below util_threshold_pct), naming policy.spin_util_pct.
    let mut c = base.clone();
    c.spin_util_pct = 5.0;
    match Policy::new(&c) {
        Err(e) => assert!(e.to_string().contains("policy.spin_util_pct"), "{e}"),
        Ok(p) => {
            let (v, sig) = worst_of(p, 240, light_steady_work);
            panic!("spin_util_pct = 5 accepted; a GPU working at 8-20 % util reached {v:?} ({sig})");
        }
    }
}
