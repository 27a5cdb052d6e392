//! review21: the notice at a new breach's drain verdict, when that verdict was held back
//! after the drain stage (here by a partial scope for 30 minutes), names the cancel more than
//! a cycle before the engine can give it (11 minutes here).
//!
//! Decided, not fixed: the notice cannot see when the breach's drain verdict first came, only
//! the level's dwell, so it assumes the verdict came at the drain stage. The time it names is
//! "at the earliest": it may come early, never late (the planner holds the cancel until it,
//! and the engine until its own rules allow). The test holds that: never later than the real
//! cancel.

use enforcer::plan::JobView;
use policy::{Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Reading, Sample, Scope, Verdict};

#[test]
fn review21_a_drain_verdict_held_back_by_a_cap_names_the_cancel_too_early() {
    let mut c = PolicyConfig::default();
    let stage = |after: i64, verdict: &str| policy::StageConfig {
        after: policy::DurationS(after),
        verdict: verdict.into(),
    };
    c.notice = policy::DurationS(10 * 60);
    c.stages = vec![stage(0, "alert"), stage(3600, "drain"), stage(65 * 60, "cancel")];
    let policy = Policy::new(&c).unwrap();
    let mut engine = Engine::new(policy.clone(), Mode::Enforce);
    let job = JobFacts {
        job_id: "7".into(),
        user: "alice".into(),
        partition: "gpu".into(),
        start_s: 0,
        alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }, GpuRef { node: NodeId(1), gpu: 0 }],
        ..JobFacts::default()
    };
    let jobs = [job.clone()];
    let nodes = vec!["gpu001".to_string(), "gpu002".to_string()];
    let mut out = Vec::new();
    let mut drained_s: Option<i64> = None;
    let mut breach2_notice: Option<(i64, Option<i64>, String)> = None;
    let mut seen_busy_end = false;
    let mut t = 0;
    while t < 5 * 3600 {
        t += 60;
        let busy = (71..=80).contains(&(t / 60));
        let s = Sample {
            t_s: t,
            node: NodeId(0),
            gpu: 0,
            util_pct: (if busy { 95.0 } else { 0.0 }).into(),
            mem_used_mib: 40_000.0.into(),
            mem_total_mib: 81_920.0.into(),
            power_w: (if busy { 300.0 } else { 70.0 } + (t / 60 % 11) as f64 * 0.37).into(),
            power_limit_w: 400.0.into(),
            procs: Some(1),
            sm_active: Reading::MISSING,
        };
        let drains: Vec<policy::DrainConfirmation> = drained_s
            .map(|d| policy::DrainConfirmation {
                job_id: "7".into(),
                nodes: vec![NodeId(0), NodeId(1)],
                confirmed_s: d + 60,
                hypothetical: false,
            })
            .into_iter()
            .collect();
        engine.step(
            t,
            &Observation {
                jobs: &jobs,
                samples: &[s, Sample { node: NodeId(1), ..s }],
                scope: if (140..170).contains(&(t / 60)) {
                    Scope::Node(NodeId(0))
                } else {
                    Scope::Whole
                },
                drains: &drains,
            },
            &mut out,
        );
        let f = out[0].clone();
        if t / 60 >= 135 && t / 60 <= 200 && t % 300 == 0 {
            eprintln!("{}m {:?} {:?}", t / 60, f.verdict, f.cap);
        }
        if f.verdict >= Verdict::Drain && drained_s.is_none() {
            drained_s = Some(t);
        }
        if busy {
            seen_busy_end = true;
        }
        if seen_busy_end && !busy && f.verdict == Verdict::Drain && breach2_notice.is_none() {
            let view = JobView {
                job: &job,
                finding: &f,
                nodes: &nodes,
                reachable: Verdict::Cancel,
                alert_only: false,
                level_dwells_s: engine.level_dwells_s(0, t),
            };
            let (text, announced) = enforcer::notice::text(&policy, &view, t, false, None, drained_s.map(|d| d + 60));
            breach2_notice = Some((t, announced.cancel_at_s, text));
        }
        if f.verdict == Verdict::Cancel {
            let (at, named, text) = breach2_notice.expect("the second breach was noticed before its cancel");
            let named = named.expect("the notice names a cancel");
            assert!(
                named <= t,
                "notice at {}m named the cancel at {}m, after the engine's at {}m: {text}",
                at / 60,
                named / 60,
                t / 60
            );
            return;
        }
    }
    panic!("no cancel");
}
