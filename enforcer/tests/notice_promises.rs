//! End to end, trial 7: a user's notice is a promise. It names what may follow and the
//! earliest time for each; nothing comes earlier, even after the operator shortened the stages
//! and restarted the daemon; and a job the enforcer will hold at alert is not threatened with
//! a drain or a cancel.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NoProc, OneIdleGpu, NODE, T0};
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, Outcome, RealExecutor};
use enforcer::plan::Action;
use std::cell::RefCell;
use std::rc::Rc;

/// The real executor, keeping each notice's text with the cycle time it went out.
struct Recording {
    inner: RealExecutor<FakeSlurm>,
    now_s: Rc<RefCell<i64>>,
    notices: Rc<RefCell<Vec<(i64, String)>>>,
}

impl Executor for Recording {
    fn execute(&mut self, action: &Action) -> Outcome {
        if let Action::Notice { reason, .. } = action {
            self.notices.borrow_mut().push((*self.now_s.borrow(), reason.clone()));
        }
        self.inner.execute(action)
    }
}

fn policy(drain: &str, cancel: &str) -> String {
    format!(
        "[policy]\nwindow = \"20m\"\nwarmup = \"15m\"\ninterval = \"60s\"\nnotice = \"30m\"\nstages = [{{ after = \"0s\", verdict = \"alert\" }}, {{ after = \"{drain}\", verdict = \"drain\" }}, {{ after = \"{cancel}\", verdict = \"cancel\" }}]\nceilings = {{ idle = \"cancel\" }}\n"
    )
}

/// The time a notice names after `what` ("drain the node (...) in about 40m (2030-03-17
/// 18:40 UTC)"): the UTC minute in the parenthesis.
fn stated_s(text: &str, what: &str) -> Option<i64> {
    let rest = &text[text.find(what)?..];
    let open = rest
        .find(" UTC)")
        .and_then(|close| rest[..close].rfind('(').map(|o| (o + 1, close)))?;
    let t = chrono::NaiveDateTime::parse_from_str(&rest[open.0..open.1], "%Y-%m-%d %H:%M").ok()?;
    Some(t.and_utc().timestamp())
}

type Run = (
    Rc<RefCell<common::cluster::Cluster>>,
    Rc<RefCell<i64>>,
    Rc<RefCell<Vec<(i64, String)>>>,
);

fn daemon(policy: &str, state: &std::path::Path, run: &Run, power_known: bool, start_s: i64) -> Daemon<FakeSlurm, OneIdleGpu, Recording> {
    daemon_with(policy, state, run, power_known, start_s, "")
}

/// [`daemon`], with more `[enforcer]` keys.
fn daemon_with(
    policy: &str,
    state: &std::path::Path,
    run: &Run,
    power_known: bool,
    start_s: i64,
    extra: &str,
) -> Daemon<FakeSlurm, OneIdleGpu, Recording> {
    let (c, now_s, notices) = run;
    Daemon::new(
        config_with(policy, state, "enforce", extra),
        FakeSlurm(c.clone()),
        OneIdleGpu { cycle: 0, power_known },
        Recording {
            inner: real_executor(c),
            now_s: now_s.clone(),
            notices: notices.clone(),
        },
        Box::new(NoProc),
        start_s,
    )
}

/// Input: job 802 idles from T0 under stages drain 1h, cancel 2h; its user is told when the
/// drain and the cancel may come at the earliest. Eight minutes later the operator shortens
/// the stages to drain 20m, cancel 40m and restarts the daemon.
///
/// Trial 7 saw the node drained a minute after the restart and the job cancelled half an
/// hour later, long before the times the user had been given. Now neither comes before the
/// time its notice named.
#[test]
fn shortened_stages_and_a_restart_do_not_act_before_the_times_the_user_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let run: Run = (c.clone(), Rc::new(RefCell::new(T0)), Rc::new(RefCell::new(Vec::new())));
    let mut d = daemon(&policy("1h", "2h"), &state, &run, true, T0);
    let mut i = 0;
    while run.2.borrow().is_empty() && i < 60 {
        *run.1.borrow_mut() = T0 + i * 60;
        d.cycle(T0 + i * 60);
        i += 1;
    }
    let (told_s, text) = run.2.borrow().first().cloned().expect("the user was told");
    let drain_at = stated_s(&text, "drain the node").expect("a drain time");
    let cancel_at = stated_s(&text, "cancel the job").expect("a cancel time");
    // The daemon goes on for eight minutes, then restarts without missing a cycle (a longer
    // gap would end the breach, and a new breach rightly brings a new notice).
    let restart_s = told_s + 8 * 60;
    for now_s in (told_s + 60..restart_s).step_by(60) {
        *run.1.borrow_mut() = now_s;
        d.cycle(now_s);
    }
    drop(d);
    let mut d = daemon(&policy("20m", "40m"), &state, &run, true, restart_s);
    let (mut drained_s, mut cancelled_s) = (None, None);
    for k in 0..200 {
        let now_s = restart_s + k * 60;
        *run.1.borrow_mut() = now_s;
        d.cycle(now_s);
        let calls = c.borrow().calls.clone();
        if drained_s.is_none() && calls.iter().any(|c| c.starts_with("drain")) {
            drained_s = Some(now_s);
        }
        if calls.iter().any(|c| c == "scancel 802") {
            cancelled_s = Some(now_s);
            break;
        }
    }
    let (drained_s, cancelled_s) = (drained_s.expect("drained"), cancelled_s.expect("cancelled"));
    assert_eq!(run.2.borrow().len(), 1, "no new notice: {:?}", run.2.borrow());
    // The notice names whole minutes (rounded down), so a time within the named minute keeps it.
    assert!(drained_s >= drain_at, "drained at {drained_s}, told not before {drain_at}: {text}");
    assert!(
        cancelled_s >= cancel_at,
        "cancelled at {cancelled_s}, told not before {cancel_at}: {text}"
    );
}

/// Trial 7: with power `[N/A]` and every other reading repeating, the engine holds the job at
/// alert (a freeze it cannot tell from a quiet GPU), yet the notice said the node may be
/// drained and the job cancelled. It now says this is an alert only, and why.
#[test]
fn a_job_held_at_alert_for_unreadable_power_is_not_threatened_with_a_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let run: Run = (c.clone(), Rc::new(RefCell::new(T0)), Rc::new(RefCell::new(Vec::new())));
    let mut d = daemon(&policy("30m", "1h"), &dir.path().join("state"), &run, false, T0);
    for i in 0..150 {
        *run.1.borrow_mut() = T0 + i * 60;
        d.cycle(T0 + i * 60);
    }
    let notices = run.2.borrow().clone();
    assert!(!notices.is_empty(), "the user is told");
    for (_, t) in &notices {
        assert!(!t.contains("cancel the job in") && !t.contains("drain the node (no new"), "{t}");
        assert!(t.contains("alert only while the GPUs' power cannot be read"), "{t}");
    }
    assert!(!c.borrow().calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")));
}

/// Trial 7: a job whose comment squeue left unknown may have opted out, so the enforcer holds
/// it at alert; its notice threatened a drain and a cancel. It now says alert only.
#[test]
fn a_job_that_may_have_opted_out_is_told_alert_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = job("802", 802, 1, &[NODE]);
    j.unknown_fields = vec!["comment".into()];
    let c = cluster(vec![j]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let run: Run = (c.clone(), Rc::new(RefCell::new(T0)), Rc::new(RefCell::new(Vec::new())));
    let mut d = daemon(&policy("30m", "1h"), &dir.path().join("state"), &run, true, T0);
    for i in 0..150 {
        *run.1.borrow_mut() = T0 + i * 60;
        d.cycle(T0 + i * 60);
    }
    let notices = run.2.borrow().clone();
    assert!(!notices.is_empty(), "the user is told");
    for (_, t) in &notices {
        assert!(
            t.contains("This is an alert only: gpu-reaper does not drain the node or cancel this job"),
            "{t}"
        );
    }
    assert!(!c.borrow().calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")));
}

/// Trial 7: after the clock went back the daemon said nothing, and nothing told the operator
/// why escalation had restarted. The cycle reports (and logs) the step; the engine ends every
/// breach and empties every window, so the job is judged again only on a full window gathered
/// after the step, and nothing is cancelled on the repeated hour.
#[test]
fn a_clock_that_goes_back_is_reported_and_restarts_escalation() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let run: Run = (c.clone(), Rc::new(RefCell::new(T0)), Rc::new(RefCell::new(Vec::new())));
    let mut d = daemon(&policy("30m", "1h"), &dir.path().join("state"), &run, true, T0);
    for i in 0..50 {
        *run.1.borrow_mut() = T0 + i * 60;
        assert_eq!(d.cycle(T0 + i * 60).clock_went_back_s, None);
    }
    assert!(c.borrow().calls.iter().any(|c| c.starts_with("drain")), "{:?}", c.borrow().calls);
    // An hour back, then on at one minute a cycle: the hour is lived again.
    let back = T0 + 50 * 60 - 3600;
    let r = d.cycle(back);
    assert_eq!(r.clock_went_back_s, Some(T0 + 49 * 60 - back));
    for i in 1..=60 {
        *run.1.borrow_mut() = back + i * 60;
        let r = d.cycle(back + i * 60);
        assert_eq!(r.clock_went_back_s, None);
        // Until a window of samples taken after the step covers it (17 minutes with the
        // defaults), the job is not alerted again.
        if i < 17 {
            assert!(
                r.findings.iter().all(|f| f.verdict < policy::Verdict::Alert),
                "{i}: {:?}",
                r.findings
            );
        }
    }
    assert!(!c.borrow().calls.iter().any(|c| c.starts_with("scancel")), "{:?}", c.borrow().calls);
}

/// Trial 8: on a node an admin had drained, and under a zero cancel budget, notices named a
/// drain and a cancel that could not come. They now say what can: alert only on the admin's
/// node; no cancel under a zero cancel budget.
#[test]
fn notices_name_only_what_the_node_and_the_budgets_allow() {
    let notices = |node_state: &str, extra: &str| {
        let dir = tempfile::tempdir().unwrap();
        let c = cluster(vec![job("802", 802, 1, &[NODE])]);
        c.borrow_mut().node_gres = Some("gpu:1".into());
        c.borrow_mut().node_state = node_state.into();
        if node_state.contains("DRAIN") {
            c.borrow_mut().node_reason = Some("bad PSU".into());
        }
        let run: Run = (c.clone(), Rc::new(RefCell::new(T0)), Rc::new(RefCell::new(Vec::new())));
        let mut d = daemon_with(&policy("30m", "1h"), &dir.path().join("state"), &run, true, T0, extra);
        for i in 0..40 {
            *run.1.borrow_mut() = T0 + i * 60;
            d.cycle(T0 + i * 60);
        }
        let n = run.2.borrow().clone();
        n
    };
    let n = notices("IDLE+DRAIN", "");
    assert!(
        !n.is_empty()
            && n.iter()
                .all(|(_, t)| t.contains("This is an alert only") && !t.contains("cancel the job in")),
        "{n:?}"
    );
    let n = notices("MIXED", "max_cancels_per_hour = 0");
    assert!(
        !n.is_empty()
            && n.iter()
                .all(|(_, t)| t.contains("may drain the node") && !t.contains("cancel the job in")),
        "{n:?}"
    );
    let n = notices("MIXED", "");
    assert!(n.iter().any(|(_, t)| t.contains("cancel the job in")), "{n:?}");
}
