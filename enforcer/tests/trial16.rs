//! trial16 (operator trial): rough edges an operator found in the enforcer.
//!
//! 1. After the pause file was removed, the first unpaused cycle drained the node of a job
//!    whose user had not been told anything: a paused cycle sends no notice, and the drain
//!    did not wait for one. Expected: with notices on (or in enforce mode) a drain is held as
//!    `notice_pending` until the job's notice was delivered in an earlier cycle.
//! 2. Why a job is `insufficient_evidence` was logged only with `log_findings_from` at that
//!    verdict or below. Expected: one INFO line with the job id and the finding's reason when
//!    the verdict changes to it, whatever `log_findings_from` says, not repeated every cycle.

mod common;

use common::cluster::{daemon_802, OneIdleGpu, POLICY, T0};
use enforcer::executor::Outcome;
use enforcer::plan::SkipKind;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use policy::Verdict;

/// trial16 item 1. Job 802 (one idle GPU, this node) under the common policy (drain after 30
/// minutes of breach), with the pause file in place for the first 70 minutes, well past the
/// drain stage. Before the fix the first unpaused cycle (minute 70) both noticed the user and
/// drained the node, in enforce and in observe mode (notify command configured). Expected:
/// minute 70 sends the notice and holds the drain as `notice_pending`; minute 71 drains.
#[test]
fn after_a_pause_the_drain_waits_for_a_notice_of_an_earlier_cycle() {
    for mode in ["enforce", "observe"] {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let idle = OneIdleGpu {
            cycle: 0,
            power_known: true,
        };
        let (c, mut d) = daemon_802(POLICY, &state, mode, idle);
        std::fs::write(d.pause_path(), "").unwrap();
        let mut worst = Verdict::Healthy;
        for m in 0..70 {
            let rep = d.cycle(T0 + m * 60);
            assert!(rep.actions.is_empty(), "{mode}: paused at minute {m}: {:?}", rep.actions);
            worst = rep.findings.iter().map(|f| f.verdict).fold(worst, Verdict::max);
        }
        assert!(
            worst >= Verdict::Drain,
            "{mode}: job 802 reached its drain stage while paused ({worst})"
        );
        std::fs::remove_file(d.pause_path()).unwrap();

        let rep = d.cycle(T0 + 70 * 60);
        let done: Vec<&str> = rep
            .actions
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Done | Outcome::Would))
            .map(|(a, _)| a.kind())
            .collect();
        assert!(
            done.contains(&"notice"),
            "{mode}: the first unpaused cycle tells the user: {done:?}"
        );
        assert!(
            !done.contains(&"drain"),
            "{mode}: the node was drained in the cycle the user was first told: {done:?}"
        );
        assert!(
            rep.skips
                .iter()
                .any(|s| (s.kind, s.action, s.job_id.as_deref()) == (SkipKind::NoticePending, "drain", Some("802"))),
            "{mode}: {:?}",
            rep.skips
        );
        if mode == "enforce" {
            assert!(!c.borrow().calls.iter().any(|c| c.starts_with("drain")), "{:?}", c.borrow().calls);
        }

        let rep = d.cycle(T0 + 71 * 60);
        assert!(
            rep.actions
                .iter()
                .any(|(a, o)| a.kind() == "drain" && matches!(o, Outcome::Done | Outcome::Would)),
            "{mode}: the drain follows in the next cycle: {:?} {:?}",
            rep.actions,
            rep.skips
        );
    }
}

/// [`OneIdleGpu`] whose nvidia-smi gives no data (a timeout) in the cycles `from..to`
/// (counted from 0).
struct Outage {
    gpu: OneIdleGpu,
    cycle: u32,
    from: u32,
    to: u32,
}

impl Telemetry for Outage {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        if (self.from..self.to).contains(&n) {
            return TelemetryRead {
                no_data: Some("timeout".into()),
                ..Default::default()
            };
        }
        self.gpu.read(now_s)
    }
}

/// trial16 item 2. Job 802 (one idle GPU) is judged for 40 minutes, then nvidia-smi gives no
/// data for 10 minutes, then data again, with the default `log_findings_from = "alert"`.
/// Before the fix nothing in the log said why the job could not be judged. Expected: one INFO
/// line naming job 802 and the finding's reason when the verdict changes to
/// `insufficient_evidence`, not one per cycle while it stays there.
#[test]
fn why_a_job_cannot_be_judged_is_logged_once_when_it_becomes_so() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let gpu = OneIdleGpu {
        cycle: 0,
        power_known: true,
    };
    let outage = Outage {
        gpu,
        cycle: 0,
        from: 40,
        to: 50,
    };
    let (_c, mut d) = daemon_802(POLICY, &state, "observe", outage);
    let mut insufficient_cycles = 0;
    let mut reasons = Vec::new();
    let ((), log) = common::with_log(tracing::Level::INFO, || {
        for m in 0..60 {
            for f in d.cycle(T0 + m * 60).findings {
                if f.verdict == Verdict::InsufficientEvidence {
                    insufficient_cycles += 1;
                    reasons.push(f.reason);
                }
            }
        }
    });
    assert!(insufficient_cycles > 1, "the outage made job 802 insufficient_evidence for a while");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("insufficient_evidence") && l.contains("802"))
        .collect();
    let first = reasons.first().unwrap();
    assert!(
        lines.iter().any(|l| l.contains(" INFO ") && l.contains(first.as_str())),
        "no INFO line gives job 802's reason {first:?}:\n{log}"
    );
    let distinct = reasons.iter().collect::<std::collections::BTreeSet<_>>().len();
    assert!(
        lines.len() <= distinct,
        "{} lines for {insufficient_cycles} cycles at insufficient_evidence ({distinct} reasons):\n{}",
        lines.len(),
        lines.join("\n")
    );
}
