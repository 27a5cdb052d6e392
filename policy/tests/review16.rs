//! The sixteenth adversarial review, policy side. Each ignored test fails on the engine as
//! reviewed and shows one finding.
//!
//! * `a_standing_drain_does_not_bring_a_second_breach_s_cancel_earlier_than_the_simulator_shows`:
//!   this session made the simulator's score keep a job's drain standing until the job leaves,
//!   "as the enforcer's does", but the engine the simulator (and replay) drives runs in observe
//!   mode with no drain confirmations: a job's second breach must climb to drain again, be
//!   confirmed one cycle later and wait a window more before any cancel. The enforcer reports
//!   its standing drain every cycle (daemon.rs), and the engine counts that drain as confirmed
//!   from the new breach's start, so the second breach skips the drain stage, its confirmation
//!   and the window after it. A trap phase on a job with a standing (often false) drain is
//!   cancelled by the enforcer where the sweep showed none, and summary.md's "earliest cancel"
//!   (`sim::report::earliest_cancel_s`), built on the first breach, overstates the margin.

mod harness;
use harness::*;
use policy::{DrainConfirmation, Mode, NodeId, StageConfig, Verdict};

/// Stages alert 0 / drain 60m / cancel 65m, window 20m, notice 30m (earliest cancel after the
/// onset, as summary.md counts it: max(65m, 60m + 1m + 20m, 20m + 30m) = 81m).
fn config() -> policy::PolicyConfig {
    let mut c = cfg();
    let stage = |after: i64, verdict: &str| StageConfig {
        after: policy::DurationS(after),
        verdict: verdict.into(),
    };
    c.stages = vec![stage(0, "alert"), stage(3600, "drain"), stage(65 * 60, "cancel")];
    c
}

/// One job, one GPU: a checkpoint-like stall (memory held, 0 %, process resident) for 70
/// minutes, 10 minutes of work, a second stall of 75 minutes (shorter than the 81-minute
/// earliest cancel), then work to the end at 4h. Returns the first cancel's time, if any.
/// `enforcer`: the engine in enforce mode told of the drain each cycle from the cycle after
/// it was first given, as the daemon does while its drain stands (the node's Reason names the
/// job until the job leaves); otherwise observe mode with no confirmations, as `sim sweep`
/// and `sim replay` drive it.
fn first_cancel_s(enforcer: bool) -> Option<i64> {
    let mode = if enforcer { Mode::Enforce } else { Mode::Observe };
    let mut run = Run::new(config(), mode, vec![job("1", 0, &[(0, 1)])]);
    let gpu = |t: i64| match t / 60 {
        0..=70 => Gpu::Stall,
        71..=80 => Gpu::Busy,
        81..=155 => Gpu::Stall,
        _ => Gpu::Busy,
    };
    let mut drained_s: Option<i64> = None;
    while run.now_s < 4 * 3600 {
        if let (true, Some(d)) = (enforcer, drained_s) {
            run.drains = vec![DrainConfirmation {
                job_id: "1".into(),
                nodes: vec![NodeId(0)],
                confirmed_s: d + 60,
                hypothetical: false,
            }];
        }
        let v = run.tick(|t, _, _| gpu(t))[0].verdict;
        if v >= Verdict::Drain && drained_s.is_none() {
            drained_s = Some(run.now_s);
        }
        if v == Verdict::Cancel {
            return Some(run.now_s);
        }
    }
    None
}

/// Input: the job above, once as the simulator judges it and once as the enforcer does.
///
/// What happens: both drain in the first stall (the drain the enforcer then keeps until the
/// job leaves, and the simulator's score now counts as standing). In the second stall the
/// simulator's engine starts over (alert, drain at 60 minutes of dwell, confirmation, a
/// window) and the stall ends first: no cancel. The enforcer's engine takes its standing
/// drain as confirmed from the second breach's start and cancels the job at 65 minutes of
/// dwell, ten minutes before its stall ends: a false cancel the sweep never shows.
///
/// What should happen: the simulator judges as the enforcer does (its engine told of the
/// drain it counts as standing), so the sweep's false cancels and summary.md's margins are the
/// enforcer's: here neither cancels (or both, and the sweep counts it).
#[test]
fn a_standing_drain_does_not_bring_a_second_breach_s_cancel_earlier_than_the_simulator_shows() {
    let sim = first_cancel_s(false);
    let enforcer = first_cancel_s(true);
    assert_eq!(sim, None, "control: the simulator cancels no stall");
    assert_eq!(
        enforcer,
        sim,
        "the enforcer cancelled at minute {:?} (the second stall, 81..155, still on); the simulator never did",
        enforcer.map(|t| t / 60)
    );
}
