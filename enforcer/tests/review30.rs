//! Review 30: the drain takeover held back (`takeover_wanted`, enforcer/src/plan.rs).

use enforcer::config::RunMode;
use enforcer::parse::scontrol_node::{self, NodeState};
use enforcer::plan::{plan, Action, ActionState, JobView, Limits, Plan, PlanInput};
use policy::{Cause, Evidence, Finding, JobFacts, SignatureId, Verdict};
use std::collections::BTreeSet;

const NODE: &str = "gpu001";

fn limits() -> Limits {
    Limits {
        max_drains_per_hour: 2,
        max_cancels_per_hour: 1,
        suspect_min_jobs: 10,
        suspect_frac: 0.2,
        suspect_hold_s: 0,
        notify: true,
        notice_s: 1800,
        notice_retry_first_s: 60,
        notice_retry_max_s: 1800,
    }
}

/// Our drain for job 55_2, which has left; job 100 (running on the node) at `v`; planned
/// under `lim`.
fn plan_with(v: Verdict, lim: Limits) -> Plan {
    let ns: NodeState = scontrol_node::parse(&format!(
        "NodeName={NODE} State=MIXED+DRAIN\n   Reason={} [root@2026-01-01T00:00:00]\n",
        scontrol_node::reason("hung", "55_2")
    ))
    .expect("parses");
    let job = JobFacts {
        job_id: "100".into(),
        user: "alice".into(),
        partition: "gpu".into(),
        ..JobFacts::default()
    };
    let f = Finding {
        job_index: 0,
        verdict: v,
        signature: SignatureId::from_name("idle"),
        cause: Cause::Breach,
        cap: None,
        dwell_s: 3600,
        signature_dwell_s: 3600,
        evidence: Evidence::default(),
        wasted_gpu_h: 1.0,
        hypothetical: false,
        exempt: None,
    };
    let nodes = vec![NODE.to_string()];
    let views = [JobView {
        job: &job,
        finding: &f,
        nodes: &nodes,
        reachable: Verdict::Cancel,
        alert_only: false,
        level_dwells_s: (None, None),
    }];
    let running: BTreeSet<String> = ["100".to_string()].into();
    // Job 100's user was told a cycle ago (a drain waits for that since operator trial 16).
    let mut told = ActionState::default();
    told.noticed.insert("100".into(), 9_940);
    plan(&PlanInput {
        now_s: 10_000,
        mode: RunMode::Enforce,
        node: NODE,
        node_state: Some(&ns),
        jobs: &views,
        running: Some(&running),
        paused: false,
        not_this_host: false,
        limits: lim,
        state: &told,
        unread: &Default::default(),
        recovered: &Default::default(),
    })
}

fn resumes(p: &Plan) -> bool {
    p.actions
        .iter()
        .any(|a| matches!(a, Action::Resume { job_id, .. } if job_id == "55_2"))
}

/// The reference: with nothing holding it back, the takeover is made (no resume).
#[test]
fn a_takeover_made_is_no_resume() {
    let p = plan_with(Verdict::Drain, limits());
    assert!(!resumes(&p));
    assert!(p
        .actions
        .iter()
        .any(|a| matches!(a, Action::Drain { job_id, .. } if job_id == "100")));
}

/// With no job due for a drain, our drain for the job that left is resumed.
#[test]
fn no_job_due_for_a_drain_resumes() {
    assert!(resumes(&plan_with(Verdict::Alert, limits())));
}

/// FAILS today (SAFETY, judgment call for the lead): the suspect-collector rule has tripped
/// (the plan's own AdminAlert says "suspecting the collector, no drain or cancel this
/// cycle"), yet the only reason our drain for a job that left is not resumed is that same
/// collector's verdict on job 100. `takeover_wanted` (plan.rs:776) is set before the
/// suspect check, so a collector that stays suspect keeps the node out of service for as
/// long as it stays suspect, on evidence the daemon itself distrusts (README: "When that
/// takeover is held back (... the collector is suspect), our drain also stays"). Guard 3
/// says broken evidence is no ground for an action; keeping a drain is one.
#[test]
fn a_suspect_collector_does_not_keep_our_drain_for_a_job_that_left() {
    let lim = Limits {
        suspect_min_jobs: 1,
        suspect_frac: 0.0,
        suspect_hold_s: 0,
        ..limits()
    };
    let p = plan_with(Verdict::Drain, lim);
    assert!(p.suspect, "the suspect rule trips");
    assert!(
        resumes(&p),
        "our drain for 55_2 stands on a suspect collector's word: {:?}",
        p.actions
    );
}

/// FAILS today (ROUGH, judgment call): `enforcer.max_drains_per_hour = 0` (accepted with a
/// warning: "no drain is ever made") turns a takeover into one that is held back every
/// cycle, so our drain for a job that has left stands for as long as any job on the node is
/// at drain: an operator who set the budget to 0 to stop drains gets a node held drained
/// with no end (plan.rs:776, `takeover_wanted` set whatever holds the takeover back). A
/// budget of 0 is not "spent for this hour"; it never refills.
#[test]
fn a_drain_budget_of_zero_does_not_keep_our_drain_forever() {
    let lim = Limits {
        max_drains_per_hour: 0,
        ..limits()
    };
    assert!(resumes(&plan_with(Verdict::Drain, lim)), "our drain stands while drains are off");
}
