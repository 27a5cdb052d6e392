//! The daemon reads the node back right after a drain command (review 35 B, operator trial
//! 22): a drain that shows is recorded as seen at once, and one that Slurm accepted but does
//! not show is warned about and counted (`drain_not_applied`), with no cancel behind it.

mod common;

use common::cluster::{OneIdleGpu, POLICY, T0};

/// Job 802 idle on its one GPU under `POLICY` (drain at 30m, cancel at 60m); the fake scontrol
/// accepts every drain (exit 0) but, with `honour_drain` false, the node never shows it.
#[test]
fn a_drain_accepted_but_not_applied_is_warned_and_counted_and_nothing_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        POLICY,
        dir.path(),
        "enforce",
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
    );
    c.borrow_mut().honour_drain = false;
    let ((), log) = common::with_log(tracing::Level::WARN, || {
        for m in 0..150 {
            d.cycle(T0 + m * 60);
        }
    });
    let calls = c.borrow().calls.clone();
    let drains = calls.iter().filter(|c| c.starts_with("drain")).count();
    assert!(drains >= 1, "a drain was due: {calls:#?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("scancel")),
        "cancelled behind a drain that never showed: {calls:#?}"
    );
    let warned = log.lines().filter(|l| l.contains("does not show our drain")).count();
    assert_eq!(warned, drains, "one warning per drain not applied:\n{log}");
    assert_eq!(d.metrics.skipped.get("drain_not_applied").copied(), Some(drains as u64));
}

/// The control: with the drain applied, no such warning, and the job is cancelled.
#[test]
fn a_drain_applied_is_not_warned() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        POLICY,
        dir.path(),
        "enforce",
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
    );
    assert!(c.borrow().honour_drain, "the fake applies drains by default");
    let ((), log) = common::with_log(tracing::Level::WARN, || {
        for m in 0..150 {
            d.cycle(T0 + m * 60);
        }
    });
    let calls = c.borrow().calls.clone();
    assert!(calls.iter().any(|c| c.starts_with("scancel")), "{calls:#?}");
    assert!(!log.contains("does not show our drain"), "{log}");
}

/// Operator trial 22 (finding 4): an admin keeps our drained node drained but replaces our
/// Reason with theirs. The job is not cancelled, and the daemon says why once (WARN and an
/// audit record), not only in an INFO skip line every cycle.
#[test]
fn an_admin_reason_over_our_drain_is_said_once_and_nothing_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        POLICY,
        dir.path(),
        "enforce",
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
    );
    let ((), log) = common::with_log(tracing::Level::WARN, || {
        let mut replaced = false;
        for m in 0..150 {
            d.cycle(T0 + m * 60);
            let drained = c.borrow().calls.iter().any(|c| c.starts_with("drain"));
            if drained && !replaced {
                c.borrow_mut().node_reason = Some("hw check: fan (admin)".into());
                replaced = true;
            }
        }
    });
    let calls = c.borrow().calls.clone();
    assert!(calls.iter().any(|c| c.starts_with("drain")), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("scancel")),
        "cancelled on a node an admin took over: {calls:#?}"
    );
    assert_eq!(log.matches("the Reason of our drain was replaced").count(), 1, "{log}");
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    assert_eq!(audit.matches("\"drain_reason_replaced\"").count(), 1, "{audit}");
}
