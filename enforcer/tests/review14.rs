//! The fourteenth adversarial review, enforcer side: today's changes (`plan::Announced`, drains
//! before notices, `JobView::alert_only`, MIG, slurmd restarts, mode changes clearing the
//! budgets, the state file of another node). Each ignored test fails on the enforcer as
//! reviewed and shows one finding.
//!
//! * `a_mode_change_and_back_keeps_the_real_cancels_in_the_budget`: `drop_hypothetical` (run
//!   at load when the state file's mode differs) now clears both hourly budgets whichever way
//!   the mode changed. Enforce -> observe clears the real cancels and drains of the last hour;
//!   observe -> enforce (the operator switching back) then starts with a full budget, so
//!   `max_cancels_per_hour = 1` lets two real cancels through within minutes.
//! * `a_mode_change_and_back_keeps_the_times_a_real_notice_named`: the same
//!   `drop_hypothetical` forgets real notices, and with them `announced`, on enforce ->
//!   observe. Back in enforce mode (say after the operator shortened the stages and tried them
//!   in observe mode first), the drain comes as soon as the new stages allow, before the time
//!   the user's real notice named; the new notice goes out after the drain.
//! * `a_mig_job_placed_on_a_whole_gpu_before_the_upgrade_is_not_judged_there`: MIG slices now
//!   switch off placement by elimination, but a placement made by elimination before (trial
//!   7's very case, by the previous version, kept in `state.json` as `Kept { by_elimination,
//!   marked }`) is not re-examined: the MIG job stays placed on the free whole GPU, is judged
//!   idle on its readings and cancelled after the upgrade meant to stop exactly that.
//! * `a_restart_more_than_a_window_after_the_notice_keeps_its_times`: `announced` holds a
//!   drain only while the notice counts for the breach (`noticed >= now - dwell`). A restart
//!   ends the engine's escalation, and the breach it then finds starts at the restored
//!   window's start, so a notice older than one window no longer counts: after shortened
//!   stages and a restart 25 minutes after the notice, the node is drained 16 minutes and the
//!   job cancelled 48 minutes before the times the notice named (a second notice, a minute
//!   before the drain, says a new breach began; today's promise held for a restart within the
//!   window only).
//! * `a_job_told_it_will_not_be_drained_is_not_drained_without_a_new_notice_first`: a job
//!   whose exemption field squeue left unknown is now `alert_only`, and its notice says with no
//!   condition "gpu-reaper does not drain the node or cancel this job". Once the field is read
//!   the drain comes in that very cycle (the ladder went on under the daemon's cap), and the
//!   notice for the rise goes out after it (drains now run first).

use enforcer::config::RunMode;
use enforcer::parse::scontrol_node::{self, NodeState};
use enforcer::plan::{plan, Action, ActionState, Announced, JobView, Limits, Plan, PlanInput, SkipKind};
use policy::{Cause, Evidence, Finding, JobFacts, SignatureId, Verdict};

use common::cluster::NODE;

fn finding(v: Verdict, dwell_s: i64) -> Finding {
    Finding {
        job_index: 0,
        verdict: v,
        signature: SignatureId::from_name("idle"),
        cause: Cause::Breach,
        cap: None,
        dwell_s,
        signature_dwell_s: dwell_s,
        evidence: Evidence::default(),
        wasted_gpu_h: 1.0,
        hypothetical: false,
        exempt: None,
    }
}

fn job(id: &str) -> JobFacts {
    JobFacts {
        job_id: id.into(),
        user: "alice".into(),
        partition: "gpu".into(),
        ..JobFacts::default()
    }
}

fn node(state: &str, reason: Option<&str>) -> NodeState {
    let mut t = format!("NodeName={NODE} State={state}\n");
    if let Some(r) = reason {
        t.push_str(&format!("   Reason={r} [root@2026-01-01T00:00:00]\n"));
    }
    scontrol_node::parse(&t).unwrap()
}

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

/// Plans one cycle at `now_s` in enforce mode for one job on this node.
fn plan_one(now_s: i64, j: &JobFacts, f: &Finding, ns: &NodeState, st: &ActionState) -> Plan {
    let nodes = vec![NODE.to_string()];
    let views = vec![JobView {
        job: j,
        finding: f,
        nodes: &nodes,
        reachable: Verdict::Cancel,
        alert_only: false,
        level_dwells_s: (Some(f.dwell_s), Some(f.dwell_s)),
    }];
    plan(&PlanInput {
        now_s,
        mode: RunMode::Enforce,
        node: NODE,
        node_state: Some(ns),
        jobs: &views,
        running: None,
        paused: false,
        not_this_host: false,
        limits: limits(),
        state: st,
        unread: &Default::default(),
        recovered: &Default::default(),
    })
}

/// Input: enforce mode, `max_cancels_per_hour = 1`. At t = 10 000 job 100 was cancelled for
/// real (its node drained for it, notice given). At 10 300 the operator restarts the daemon in
/// observe mode (the state file's mode differs: `ActionState::drop_hypothetical`), and at
/// 10 600 back in enforce mode (again `drop_hypothetical`). Job 200, on the same node, has
/// stood drained (our Reason) and noticed for long enough by 12 500.
///
/// What happens: the first mode change cleared `cancel_times_s` (the real cancel of 10 000
/// with it), so at 12 500 job 200 is cancelled: two real cancels 2 500 s apart under a budget
/// of one an hour.
///
/// What should happen: only the other mode's (hypothetical) budget entries are freed; a real
/// cancel stays in the budget across any number of mode changes, so job 200 is skipped as
/// `rate_limit` until 13 600.
#[test]
fn a_mode_change_and_back_keeps_the_real_cancels_in_the_budget() {
    let mut st = ActionState::default();
    // The real cancel of job 100 at 10 000 (enforce mode).
    st.record(
        &Action::Cancel {
            job_id: "100".into(),
            signature: "idle".into(),
            reason: "x".into(),
        },
        10_000,
        false,
    );
    assert_eq!(st.cancel_times_s, vec![10_000]);
    // Restart in observe mode, then back in enforce mode.
    st.drop_hypothetical();
    st.drop_hypothetical();
    // Job 200: our drain stands for it (made 11 000 and confirmed), its notice went out at
    // 10 600 after the restart. Its finding says cancel.
    st.record(
        &Action::Drain {
            node: NODE.into(),
            job_id: "200".into(),
            signature: "idle".into(),
            node_reason: scontrol_node::reason("idle", "200"),
            reason: "x".into(),
        },
        10_000,
        false,
    );
    st.drain_times_s.clear();
    st.record(
        &Action::Notice {
            job_id: "200".into(),
            user: "alice".into(),
            reason: "x".into(),
        },
        10_600,
        false,
    );
    let ns = node("MIXED+DRAIN", Some(&scontrol_node::reason("idle", "200")));
    let j = job("200");
    let f = finding(Verdict::Cancel, 7200);
    let p = plan_one(12_500, &j, &f, &ns, &st);
    let cancels: Vec<&Action> = p.actions.iter().filter(|a| matches!(a, Action::Cancel { .. })).collect();
    assert!(
        cancels.is_empty() && p.skips.iter().any(|s| s.kind == SkipKind::RateLimit && s.action == "cancel"),
        "a real cancel at 10 000 and max_cancels_per_hour = 1, yet at 12 500 the plan is {:?} (skips {:?})",
        p.actions,
        p.skips
    );
}

/// Input: enforce mode. At 10 000 job 200's user is really told (notice delivered) that the
/// node may be drained at 13 600 at the earliest and the job cancelled at 17 200
/// (`ActionState::announced`, as `note_notice_top` records it). The operator restarts the
/// daemon in observe mode and, a few minutes later, back in enforce mode with shorter stages
/// (two mode changes: `drop_hypothetical` twice). At 10 660 the engine's verdict for the job,
/// in the same breach, is drain.
///
/// What happens: the real notice and the times it named are gone; the drain is planned at
/// 10 660, 49 minutes before the time the user was given (control: without the two mode
/// changes it is held as `notice_pending`).
///
/// What should happen: a notice that was really delivered is kept across mode changes (only
/// observe mode's would-notices told nobody), so its times still hold the drain and cancel.
#[test]
fn a_mode_change_and_back_keeps_the_times_a_real_notice_named() {
    let mut st = ActionState::default();
    st.record(
        &Action::Notice {
            job_id: "200".into(),
            user: "alice".into(),
            reason: "x".into(),
        },
        10_000,
        false,
    );
    st.noticed_top.insert("200".into(), Verdict::Cancel);
    st.announced.insert(
        "200".into(),
        Announced {
            drain_at_s: Some(13_600),
            cancel_at_s: Some(17_200),
        },
    );
    let ns = node("MIXED", None);
    let j = job("200");
    let f = finding(Verdict::Drain, 3_600);
    let drains = |p: &Plan| p.actions.iter().filter(|a| matches!(a, Action::Drain { .. })).count();
    // Control: the notice's time holds the drain.
    let p = plan_one(10_660, &j, &f, &ns, &st);
    assert_eq!(drains(&p), 0, "control: {:?}", p.actions);
    assert!(
        p.skips.iter().any(|s| s.kind == SkipKind::NoticePending && s.action == "drain"),
        "{:?}",
        p.skips
    );
    // Restart in observe mode, then back in enforce mode.
    st.drop_hypothetical();
    st.drop_hypothetical();
    let p = plan_one(10_660, &j, &f, &ns, &st);
    assert_eq!(
        drains(&p),
        0,
        "the user was really told 'not before 13 600'; after two mode changes the plan at 10 660 is {:?}",
        p.actions
    );
}

// ---------------------------------------------------------------------------------------
// End to end: one idle 1-GPU job on a 1-GPU node.

mod common;

use common::cluster::{cluster, config_with, job as slurm_job, real_executor, FakeSlurm, NoProc, OneIdleGpu, T0};
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, Outcome, RealExecutor};
use std::cell::RefCell;
use std::rc::Rc;

/// The real executor, keeping every notice and drain in the order they were carried out.
struct Sequence {
    inner: RealExecutor<FakeSlurm>,
    now_s: Rc<RefCell<i64>>,
    events: Rc<RefCell<Vec<(i64, String)>>>,
}

impl Executor for Sequence {
    fn execute(&mut self, action: &Action) -> Outcome {
        let t = *self.now_s.borrow();
        match action {
            Action::Notice { reason, .. } => self.events.borrow_mut().push((t, format!("notice: {reason}"))),
            Action::Drain { .. } => self.events.borrow_mut().push((t, "drain".into())),
            Action::Cancel { .. } => self.events.borrow_mut().push((t, "cancel".into())),
            _ => {}
        }
        self.inner.execute(action)
    }
}

fn stages_policy(drain: &str, cancel: &str) -> String {
    format!(
        "[policy]\nwindow = \"20m\"\nwarmup = \"15m\"\ninterval = \"60s\"\nnotice = \"30m\"\nstages = [{{ after = \"0s\", verdict = \"alert\" }}, {{ after = \"{drain}\", verdict = \"drain\" }}, {{ after = \"{cancel}\", verdict = \"cancel\" }}]\nceilings = {{ idle = \"cancel\" }}\n"
    )
}

type Events = Rc<RefCell<Vec<(i64, String)>>>;

/// Runs job 802 (1 GPU, idle, the node's only job) for `minutes` one-minute cycles under
/// `policy_text`, `each(minute, cluster)` run before each cycle; returns every notice, drain
/// and cancel in order.
fn run_802(policy_text: &str, minutes: i64, each: fn(i64, &mut common::cluster::Cluster)) -> Vec<(i64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![slurm_job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let now = Rc::new(RefCell::new(T0));
    let events: Events = Rc::new(RefCell::new(Vec::new()));
    let mut d = Daemon::new(
        config_with(policy_text, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        Sequence {
            inner: real_executor(&c),
            now_s: now.clone(),
            events: events.clone(),
        },
        Box::new(NoProc),
        T0,
    );
    for i in 0..minutes {
        let t = T0 + i * 60;
        *now.borrow_mut() = t;
        each(i, &mut c.borrow_mut());
        d.cycle(t);
    }
    let out = events.borrow().clone();
    out
}

/// Input: job 802 idles from T0; drain after 30m, cancel after 1h, notice 30m (the default
/// `comment_marker` makes the job's comment an exemption field). For its first 45 minutes
/// squeue leaves the job's comment unknown (`unknown_fields = ["comment"]`: a Slurm version
/// or a `--Format` without it, a read of the field that failed); from then on it is read,
/// and carries no exemption.
///
/// What happens: the notice at the first alert (+17m) goes out under today's
/// `JobView::alert_only` (which now includes "an exemption field is unknown") and says, with
/// no condition, "This is an alert only: gpu-reaper does not drain the node or cancel this
/// job". At +45m the comment is read; the engine's ladder had gone on underneath the
/// daemon's cap, the drain stage has passed, and the node is drained in that very cycle. The
/// notice for the rise goes out after the drain (drains now run before notices): the user
/// learns of the drain only once it is made, having been told it would not happen.
///
/// What should happen: a hold that may lift (an unknown field) is said as one ("while squeue
/// cannot show the job's comment ..."), like the power and freeze holds; or a job noticed
/// "alert only" is not drained before a notice that announces the drain has gone out (and
/// the time it names has come).
#[test]
fn a_job_told_it_will_not_be_drained_is_not_drained_without_a_new_notice_first() {
    fn comment_unknown_until_45(m: i64, c: &mut common::cluster::Cluster) {
        if let Some(j) = c.jobs.first_mut() {
            j.unknown_fields = if m < 45 { vec!["comment".into()] } else { Vec::new() };
        }
    }
    let events = run_802(&stages_policy("30m", "1h"), 120, comment_unknown_until_45);
    let first_drain = events.iter().position(|(_, e)| e == "drain").expect("job 802's node is drained");
    let told_before = events[..first_drain]
        .iter()
        .rev()
        .find(|(_, e)| e.starts_with("notice"))
        .cloned()
        .expect("a notice before the drain");
    assert!(
        !told_before.1.contains("does not drain the node"),
        "drained at +{}m; the last notice before it (+{}m) said: {:?}\nevents: {:?}",
        (events[first_drain].0 - T0) / 60,
        (told_before.0 - T0) / 60,
        told_before.1,
        events
            .iter()
            .map(|(t, e)| ((t - T0) / 60, e.chars().take(60).collect::<String>()))
            .collect::<Vec<_>>()
    );
}

// ---------------------------------------------------------------------------------------
// MIG (as enforcer/tests/mig.rs): GPU 0 in MIG mode with two 1g.10gb slices (jobs 601 and
// 602), GPU 1 a whole GPU, free.

/// PID 6001 is in job 601's cgroup.
struct MigProcs;
impl enforcer::attribution::ProcReader for MigProcs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 6001).then(|| "0::/system.slice/slurmstepd.scope/job_601/step_0/user/task_0\n".to_string())
    }
}

const MIG_GPUS: &str = "\
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 [N/A] 0 [N/A] [N/A] 120 400 0
1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 0 81920 50 400 1
";

/// Input: the node of enforcer/tests/mig.rs (jobs 601 and 602 each hold a 1g.10gb slice of
/// GPU 0, their TRES name the MIG type, job 601 has a process on its MIG device; GPU 1 is a
/// whole GPU, free). The state file, written by the previous version before the MIG rule
/// existed, keeps job 602 placed by elimination on GPU 1 (trial 7: "a MIG job was cancelled
/// on a free whole GPU's readings"): `Kept { gpus: [1], uuids: [GPU 1's], by_elimination:
/// Some(2), marked: true }` for the same run of the job. 90 one-minute cycles in enforce mode.
///
/// What happens: the kept placement is used every cycle (the MIG rule only stops new
/// placements); job 602 is judged on GPU 1's idle readings, its node drained and the job
/// cancelled.
///
/// What should happen: a placement that elimination or device indices made stands only
/// while those rules may place jobs on the node: with MIG slices in use, kept placements
/// made by them are dropped (as a slurmd restart now drops device-index ones) and the job is
/// placed by its own processes or not at all.
#[test]
fn a_mig_job_placed_on_a_whole_gpu_before_the_upgrade_is_not_judged_there() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = [("601", 0), ("602", 1)]
        .iter()
        .map(|(id, idx)| {
            let mut j = slurm_job(id, id.parse().unwrap(), 1, &[NODE]);
            j.mig = true;
            j.gres_idx = vec![Some(vec![*idx])];
            j.gres_counts = vec![Some(1)];
            j
        })
        .collect();
    let c = cluster(jobs);
    std::fs::write(dir.path().join("gpus.txt"), MIG_GPUS).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("smi.mode"), "ok").unwrap();
    let smi = common::fake_nvidia_smi(dir.path());
    let mut d = Daemon::new(
        config_with(common::cluster::POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(MigProcs),
        T0,
    );
    // As loaded from the previous version's state file.
    d.kept.insert(
        "602".into(),
        enforcer::attribution::Kept {
            start_s: T0 - 7200,
            gpus: vec![1],
            uuids: vec!["GPU-aaaaaaaa-0000-0000-0000-000000000001".into()],
            by_device_index: false,
            by_elimination: Some(2),
            marked: true,
        },
    );
    let worst = common::cluster::worst_verdicts(&mut d, 0, 90);
    let calls = c.borrow().calls.clone();
    assert!(
        worst.get("602").is_none_or(|v| *v < Verdict::Alert) && !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "job 602 (a MIG slice of GPU 0) judged on GPU 1: worst {worst:?}, calls {calls:?}"
    );
}

/// Input: as notice_promises.rs `shortened_stages_and_a_restart_do_not_act_before_the_times_the_user_was_given`,
/// but the daemon restarts 25 minutes after the notice (more than the 20-minute window)
/// instead of 8: job 802 idles from T0 under drain 1h, cancel 2h; its user is told when the
/// drain and the cancel may come at the earliest; then the operator shortens the stages to
/// drain 20m, cancel 40m and restarts the daemon, no cycle missed.
///
/// What happens: the restored breach starts after the notice, so the notice (and its
/// `announced` times) count for nothing; a new notice goes out and the node is drained a
/// minute later, long before the time the first notice named.
///
/// What should happen: a notice's times hold for the rest of the job's run of idleness that
/// the restart did not interrupt (or at least until a new notice names times no earlier):
/// no drain before the time the user was given.
#[test]
fn a_restart_more_than_a_window_after_the_notice_keeps_its_times() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![slurm_job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let now = Rc::new(RefCell::new(T0));
    let events: Events = Rc::new(RefCell::new(Vec::new()));
    let mk = |policy_text: &str, start_s: i64| {
        Daemon::new(
            config_with(policy_text, &state, "enforce", ""),
            FakeSlurm(c.clone()),
            OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            Sequence {
                inner: real_executor(&c),
                now_s: now.clone(),
                events: events.clone(),
            },
            Box::new(NoProc),
            start_s,
        )
    };
    let mut d = mk(&stages_policy("1h", "2h"), T0);
    let mut t = T0;
    while events.borrow().is_empty() && t < T0 + 3600 {
        *now.borrow_mut() = t;
        d.cycle(t);
        t += 60;
    }
    let (told_s, text) = events.borrow().first().cloned().expect("the user was told");
    let drain_at = stated_drain_s(&text).expect("a drain time");
    let restart_s = told_s + 25 * 60;
    while t < restart_s {
        *now.borrow_mut() = t;
        d.cycle(t);
        t += 60;
    }
    drop(d);
    let mut d = mk(&stages_policy("20m", "40m"), restart_s);
    let mut drained_s = None;
    for k in 0..120 {
        let now_s = restart_s + k * 60;
        *now.borrow_mut() = now_s;
        d.cycle(now_s);
        if drained_s.is_none() && c.borrow().calls.iter().any(|c| c.starts_with("drain")) {
            drained_s = Some(now_s);
        }
    }
    let drained_s = drained_s.expect("drained");
    assert!(
        drained_s >= drain_at,
        "drained at +{}m, told at +{}m not before +{}m: {text}\nevents: {:?}",
        (drained_s - T0) / 60,
        (told_s - T0) / 60,
        (drain_at - T0) / 60,
        events
            .borrow()
            .iter()
            .map(|(t, e)| ((t - T0) / 60, e.chars().take(50).collect::<String>()))
            .collect::<Vec<_>>()
    );
}

/// The drain time a notice names: the UTC minute after "drain the node (...) in about ...".
fn stated_drain_s(text: &str) -> Option<i64> {
    let rest = &text[text.find("drain the node")?..];
    let close = rest.find(" UTC)")?;
    let open = rest[..close].rfind('(')? + 1;
    let t = chrono::NaiveDateTime::parse_from_str(&rest[open..close], "%Y-%m-%d %H:%M").ok()?;
    Some(t.and_utc().timestamp())
}
