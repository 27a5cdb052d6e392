//! The eighteenth adversarial review, enforcer side. Each test failed as reviewed (746c6fe)
//! and shows one finding; all pass since their fixes.

use enforcer::config::RunMode;
use enforcer::parse::scontrol_node;
use enforcer::plan::{plan, Action, ActionState, JobView, Limits, PlanInput};
use policy::{Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Reading, Sample, Scope, Verdict};

/// Input: the engine (enforce mode, default policy with a cancel stage at 2h) and the planner,
/// driven together over a job whose single GPU is hung (0 %, memory held, a process, idle
/// power that varies). The user is noticed at the first alert. Two minutes later the collector
/// freezes for five minutes (it re-serves its last answer with fresh stamps): the window
/// reads `frozen`, the finding is `insufficient_evidence`, and the breach ends (guard 5).
/// When the readings move again a new breach begins at once.
///
/// What happens: the new breach's `dwell_s` counts from its window's start, about 20 minutes
/// back, which is before the first notice; plan.rs counts every record made "at or after the
/// breach's start (now − dwell_s)" as this breach's, so the notice of the breach that ended
/// is taken as this one's: no notice for the new breach (nor alert), and the planner's own
/// notice-period check counts from the old notice.
///
/// What should happen (ARCHITECTURE.md, plan.rs invariants: "a notice or alert record counts
/// only when made at or after the current breach's start; records of an earlier breach are
/// ignored and replaced"; `ActionState::noticed`: "a breach that ended (recovery, an evidence
/// outage, ...) needs a new notice, and its cancel waits `notice` from that one"): the new
/// breach is noticed (and alerted) afresh.
#[test]
fn a_breach_that_starts_again_after_a_freeze_is_noticed_again() {
    let mut c = PolicyConfig::default();
    c.stages.push(policy::StageConfig {
        after: policy::DurationS(2 * 3600),
        verdict: "cancel".into(),
    });
    let policy = Policy::new(&c).unwrap();
    let mut engine = Engine::new(policy.clone(), Mode::Enforce);
    let job = JobFacts {
        job_id: "7".into(),
        user: "alice".into(),
        partition: "gpu".into(),
        start_s: 0,
        alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
        ..JobFacts::default()
    };
    let jobs = [job.clone()];
    let nodes = vec!["gpu001".to_string()];
    let ns = scontrol_node::parse("NodeName=gpu001 State=MIXED\n").unwrap();
    let limits = Limits {
        max_drains_per_hour: 2,
        max_cancels_per_hour: 1,
        suspect_min_jobs: 10,
        suspect_frac: 0.2,
        suspect_hold_s: 0,
        notify: true,
        notice_s: 1800,
        notice_retry_first_s: 60,
        notice_retry_max_s: 1800,
    };
    let mut st = ActionState::default();
    let mut out = Vec::new();
    let mut first_notice: Option<i64> = None;
    let mut freeze: Option<(i64, Sample)> = None;
    let mut breach_ended_at: Option<i64> = None;
    let mut log = Vec::new();
    let mut t = 0;
    while t < 90 * 60 {
        t += 60;
        let live = Sample {
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
        let s = match (first_notice, freeze) {
            (Some(n), None) if t == n + 120 => {
                freeze = Some((t, live));
                live
            }
            (_, Some((f, frozen))) if t < f + 300 => Sample { t_s: t, ..frozen },
            _ => live,
        };
        engine.step(
            t,
            &Observation {
                jobs: &jobs,
                samples: &[s],
                scope: Scope::Whole,
                drains: &[],
            },
            &mut out,
        );
        let f = out[0].clone();
        if f.verdict == Verdict::InsufficientEvidence && first_notice.is_some() {
            breach_ended_at.get_or_insert(t);
        }
        let views = [JobView {
            job: &job,
            finding: &f,
            nodes: &nodes,
            reachable: Verdict::Cancel,
            alert_only: false,
            level_dwells_s: engine.level_dwells_s(0, t),
        }];
        let p = plan(&PlanInput {
            now_s: t,
            mode: RunMode::Enforce,
            node: "gpu001",
            node_state: Some(&ns),
            jobs: &views,
            running: None,
            paused: false,
            not_this_host: false,
            limits,
            state: &st,
            unread: &Default::default(),
            recovered: &Default::default(),
        });
        for a in &p.actions {
            if matches!(a, Action::Notice { .. }) {
                first_notice.get_or_insert(t);
                log.push(format!("{}m: notice (verdict {}, dwell {}m)", t / 60, f.verdict, f.dwell_s / 60));
            }
            st.record(a, t, false);
        }
        if f.verdict >= Verdict::Alert {
            if let Some(e) = breach_ended_at {
                if t > e && !log.iter().any(|l| l.starts_with(&format!("{}m:", t / 60))) {
                    // The first cycle of the new breach: it must have been noticed.
                    let noticed_after_end = st.noticed.get("7").is_some_and(|n| *n > e);
                    assert!(
                        noticed_after_end,
                        "breach ended at {}m (freeze), breaching again at {}m (dwell {}m), but no new notice: {log:#?}",
                        e / 60,
                        t / 60,
                        f.dwell_s / 60
                    );
                    return;
                }
            }
        }
    }
    panic!("the scenario did not reach a second breach: {log:#?}");
}

/// Input: stages alert 0 / drain 60m / cancel 65m (the config of review 16's case), the
/// engine in enforce mode told every cycle of our drain from the cycle after its first drain
/// verdict on (as the daemon reports a drain that stands until the job leaves). The job
/// stalls (0 %, memory held, a process) for 70 minutes (drained at 60m), works for ten, then
/// stalls again for good. At the second breach's first alert the user's notice is written
/// (`notice::text`, with our drain standing, the level dwells from the engine), as the daemon
/// writes it.
///
/// What happens: the notice counts the cancel from the drain that still stands ("The node is
/// drained now ... may cancel the job in about 45m, at the earliest"), but since d43ead2 the
/// engine counts a standing drain only from the cycle after this breach's own drain verdict
/// (at the 60m drain stage), plus one window: the cancel comes about 16 minutes later than
/// named. README.md (the paragraph on our drain staying while its job runs) still says "if
/// the breach comes back, the cancel counts from the drain that still stands".
///
/// What should happen (notice.rs: "The times are the earliest the engine and the planner
/// allow"): the notice names the cancel the engine can give, within a cycle.
#[test]
fn a_new_breach_notice_names_the_cancel_the_engine_can_give_with_a_standing_drain() {
    let mut c = PolicyConfig::default();
    let stage = |after: i64, verdict: &str| policy::StageConfig {
        after: policy::DurationS(after),
        verdict: verdict.into(),
    };
    c.stages = vec![stage(0, "alert"), stage(3600, "drain"), stage(65 * 60, "cancel")];
    let policy = Policy::new(&c).unwrap();
    let mut engine = Engine::new(policy.clone(), Mode::Enforce);
    let job = JobFacts {
        job_id: "7".into(),
        user: "alice".into(),
        partition: "gpu".into(),
        start_s: 0,
        alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
        ..JobFacts::default()
    };
    let jobs = [job.clone()];
    let nodes = vec!["gpu001".to_string()];
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
                nodes: vec![NodeId(0)],
                confirmed_s: d + 60,
                hypothetical: false,
            })
            .into_iter()
            .collect();
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
        let f = out[0].clone();
        if f.verdict >= Verdict::Drain && drained_s.is_none() {
            drained_s = Some(t);
        }
        if busy {
            seen_busy_end = true;
        }
        if seen_busy_end && !busy && f.verdict == Verdict::Alert && breach2_notice.is_none() {
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
                (named - t).abs() <= 60,
                "notice at {}m named the cancel at {}m; the engine cancels at {}m: {text}",
                at / 60,
                named / 60,
                t / 60
            );
            return;
        }
    }
    panic!("no cancel");
}
