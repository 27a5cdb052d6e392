//! The seventeenth adversarial review, enforcer side. Each ignored test fails on the enforcer
//! as reviewed and shows one finding.
//!
//! * `check_config_promises_no_sooner_cancel_from_a_standing_drain`: d43ead2 made the engine
//!   count a drain confirmation only after the breach's own drain verdict, from the cycle that
//!   hears of it, so a drain of ours standing from an earlier breach no longer brings a cancel
//!   sooner (ARCHITECTURE: "brings no cancel sooner than a new one would"). check-config's
//!   earliest-cancel warning still tells the operator that such a drain "lets it come sooner,
//!   at about" the cancel stage's dwell.

use enforcer::config::Config;
use policy::{DrainConfirmation, Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Reading, Sample, Scope, Verdict};

const CONFIG: &str = "[enforcer]\nnode = \"n\"\n[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"1h\", verdict = \"cancel\" }]\n";

/// The dwell (breach start to verdict) of the first cancel of a job hung from its start, in
/// enforce mode, told every cycle of a drain of ours that stood before the breach began (the
/// daemon reports its standing drain every cycle, stamped with when it first found it).
fn first_cancel_dwell_with_a_standing_drain(cfg: &Config) -> Option<i64> {
    let job = JobFacts {
        job_id: "7".into(),
        user: "u".into(),
        account: "a".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        name: "train".into(),
        comment: String::new(),
        start_s: 0,
        alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
    };
    let mut engine = Engine::new(cfg.policy.clone(), Mode::Enforce);
    let interval_s = cfg.policy.config().interval.secs();
    let mut out = Vec::new();
    let mut t = 0;
    while t < 4 * 3600 {
        t += interval_s;
        let s = Sample {
            t_s: t,
            node: NodeId(0),
            gpu: 0,
            util_pct: 0.0.into(),
            mem_used_mib: 40_000.0.into(),
            mem_total_mib: 81_920.0.into(),
            power_w: (70.0 + (t / 60 % 11) as f64 * 0.37).into(),
            power_limit_w: 400.0.into(),
            procs: Some(1),
            sm_active: Reading::MISSING,
        };
        let drains = [DrainConfirmation {
            job_id: "7".into(),
            nodes: vec![NodeId(0)],
            confirmed_s: 0,
            hypothetical: false,
        }];
        let jobs = [job.clone()];
        engine.step(
            t,
            &Observation {
                jobs: &jobs,
                samples: &[s],
                scope: Scope::Whole,
                drains: &drains,
            },
            &mut out,
        );
        if out[0].verdict == Verdict::Cancel {
            return Some(out[0].dwell_s);
        }
    }
    None
}

/// Input: stages alert 0s / drain 1h / cancel 1h (the config of check-config's own unit
/// test), defaults otherwise; check-config's warnings; and the engine, in enforce mode, told
/// every cycle of a drain of ours that stood before the breach began.
///
/// What happens: the engine cancels no sooner than without the standing drain (drain verdict
/// at 1h, confirmation counted a cycle later, a window more: about 1h21m of dwell), but the
/// warning says "only a drain of ours still standing from an earlier breach of the same job
/// lets it come sooner, at about 1h": an operator reads a shorter margin that no longer
/// exists (and may lengthen stages or notice for a case that cannot happen).
///
/// What should happen: the warning says what the engine does (a standing drain brings no
/// cancel sooner), as ARCHITECTURE now does. Code: enforcer/src/config.rs, `Config::warnings`
/// (the `on_its_way` branch), and its unit test `c06`, which pins the old text.
#[test]
fn check_config_promises_no_sooner_cancel_from_a_standing_drain() {
    let cfg = Config::from_text(CONFIG, "t").expect("valid config");
    let dwell = first_cancel_dwell_with_a_standing_drain(&cfg).expect("the hung job is cancelled");
    assert!(
        dwell >= 80 * 60,
        "engine: a standing drain still brings the cancel at {}m of dwell",
        dwell / 60
    );
    let sooner: Vec<String> = cfg.warnings().into_iter().filter(|w| w.contains("lets it come sooner")).collect();
    assert!(
        sooner.is_empty(),
        "the engine's first cancel with a standing drain comes at {}m of dwell, but check-config says: {sooner:#?}",
        dwell / 60
    );
}
