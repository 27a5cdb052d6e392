//! A drain of ours is resumed once its job works again (operator trial 17: a drain stood
//! until its job ended, hours after a long checkpoint or staging phase was over, keeping the
//! node's other GPUs from the scheduler). The rule is `policy::Recovery`: the job's findings
//! say `healthy` on valid evidence, with its GPUs read whole, in every cycle for two windows.

mod common;

use common::cluster::{cluster, config_with, daemon_802, job, FakeSlurm, NoProc, NODE, POLICY, T0};
use enforcer::executor::Outcome;
use enforcer::plan::Action;
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// Job 802's one GPU: idle (0 %, 3 MiB, ~56 W) except in the reads `busy` (counted from 0),
/// where it works (90 %, 30 GB held, ~300 W).
struct Phases {
    cycle: u32,
    busy: std::ops::Range<u32>,
}

impl Telemetry for Phases {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let mut r = common::cluster::OneIdleGpu {
            cycle: n,
            power_known: true,
        }
        .read(now_s);
        if self.busy.contains(&n) {
            let g = &mut r.gpus[0];
            g.util_pct = Some(88.0 + (n % 5) as f64);
            g.mem_used_mib = Some(30_000.0);
            g.power_w = Some(300.0 + (n % 7) as f64);
        }
        r
    }
}

/// What happened in one run: per cycle (minute from T0), the actions with their outcome.
type Log = Vec<(i64, Vec<(Action, Outcome)>)>;

/// Job 802 under [`POLICY`] for `cycles` one-minute cycles, its GPU working in the reads
/// `busy`: enforce mode through the real executor, observe mode through the observe one.
fn run(mode: &str, busy: std::ops::Range<u32>, cycles: i64) -> (Log, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let tel = Phases { cycle: 0, busy };
    let (c, log): (_, Log) = if mode == "observe" {
        let c = cluster(vec![job("802", 802, 1, &[NODE])]);
        c.borrow_mut().node_gres = Some("gpu:1".into());
        let ex = enforcer::executor::ObserveExecutor { webhook: None };
        let cfg = config_with(POLICY, &state, mode, "");
        let mut d = enforcer::daemon::Daemon::new(cfg, FakeSlurm(c.clone()), tel, ex, Box::new(NoProc), T0);
        let log = (0..cycles).map(|m| (m, d.cycle(T0 + m * 60).actions)).collect();
        (c, log)
    } else {
        let (c, mut d) = daemon_802(POLICY, &state, mode, tel);
        let log = (0..cycles).map(|m| (m, d.cycle(T0 + m * 60).actions)).collect();
        (c, log)
    };
    let calls = c.borrow().calls.clone();
    (log, calls)
}

/// The minutes at which an action `kind` was done (or would have been, in observe mode).
fn minutes(log: &Log, kind: &str) -> Vec<i64> {
    log.iter()
        .filter(|(_, acts)| {
            acts.iter()
                .any(|(a, o)| a.kind() == kind && matches!(o, Outcome::Done | Outcome::Would))
        })
        .map(|(m, _)| *m)
        .collect()
}

/// Idle until minute 40 (drained on the way), working from 40 to 90, idle again after. The
/// drain is resumed two windows (40 minutes) after the work began, while the job runs; the
/// second breach is alerted, noticed and drained afresh. Without the work, or with only a
/// short burst of it, the drain stands.
#[test]
fn a_drained_job_that_works_again_for_two_windows_has_its_drain_resumed() {
    let (log, calls) = run("enforce", 40..90, 140);
    let drains = minutes(&log, "drain");
    let resumes = minutes(&log, "resume");
    assert!(!drains.is_empty() && drains[0] < 40, "drained while idle: {drains:?}");
    assert_eq!(
        resumes,
        vec![80],
        "resumed once, two windows after the work began at 40: {calls:#?}"
    );
    let (_, acts) = &log[80];
    assert!(
        acts.iter()
            .any(|(a, _)| matches!(a, Action::Resume { job_id, recovered: true, .. } if job_id == "802")),
        "{acts:?}"
    );
    assert!(calls.iter().any(|c| c == "resume gpu001"), "{calls:#?}");
    assert!(!calls.iter().any(|c| c.starts_with("scancel")), "never cancelled: {calls:#?}");
    // The second breach, from minute 90: drained again, after its own notice.
    assert_eq!(drains.len(), 2, "{drains:?}");
    assert!(drains[1] >= 90 + 30, "{drains:?}");
    let notices = minutes(&log, "notice");
    assert!(notices.iter().any(|m| *m > 90 && *m < drains[1]), "{notices:?}");

    // Control: idle throughout: the drain stands to the cancel.
    let (log, _) = run("enforce", 0..0, 160);
    assert!(minutes(&log, "resume").is_empty() || minutes(&log, "cancel").first() < minutes(&log, "resume").first());
    // A burst of work shorter than a window (10 minutes) ends the breach but resumes nothing.
    let (log, calls) = run("enforce", 40..50, 160);
    assert!(
        !calls.iter().any(|c| c == "resume gpu001") || minutes(&log, "cancel").first() < minutes(&log, "resume").first(),
        "{calls:#?}"
    );
}

/// Observe mode mirrors it: the would-drain is would-resumed, and the second breach
/// would-drains again.
#[test]
fn observe_mode_would_resume_a_would_drain_whose_job_works_again() {
    let (log, calls) = run("observe", 40..90, 140);
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("resume")),
        "{calls:#?}"
    );
    assert_eq!(minutes(&log, "resume"), vec![80]);
    assert_eq!(minutes(&log, "drain").len(), 2);
}
