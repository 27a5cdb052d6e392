//! trial18 (operator trial): what an operator found trying to break the enforcer.
//!
//! 1. CRITICAL: in a cycle in which nvidia-smi gave no data (it hung, or exited 15, "GPU is
//!    lost"), a job whose window was still fresh enough (the engine tolerates a hole of up to
//!    `policy.max_sample_gap`) was cancelled on readings two minutes old; drains and notices
//!    likewise. A slow nvidia-smi goes with busy GPUs (shared sample A8), so a job that had
//!    just started working could be killed on readings from before. Expected: no drain, cancel
//!    or notice in a cycle without telemetry (skipped as `telemetry_no_data`); they come in the
//!    first cycle with data again, if the evidence still says so.
//! 2. Repeated lines: `squeue failed; cycle skipped` at ERROR in every cycle (60 an hour), and
//!    likewise `scontrol show node failed` and `nvidia-smi gave no data`. Expected: each said
//!    when it starts, at most every 10 minutes while it lasts (with how long), and once when
//!    it ends; the metric counts every cycle.

mod common;

use common::cluster::{cycles_802, daemon_802, first_done, Cycle802, Outage, POLICY, T0};
use common::with_log;
use enforcer::plan::SkipKind;
use policy::Verdict;

/// Job 802 (one idle GPU) for `cycles` one-minute cycles, with nvidia-smi giving no data in
/// the cycles `outage`.
fn run(outage: std::ops::Range<u32>, cycles: i64) -> Vec<Cycle802> {
    cycles_802(Outage::of_idle_gpu(outage), cycles)
}

fn first(cycles: &[Cycle802], kind: &str) -> usize {
    first_done(cycles, kind)
}

/// trial18 item 1. The control finds the cycles of the first notice, drain and cancel; then
/// nvidia-smi gives no data for two cycles from each of them. The engine still says drain (or
/// cancel) in those cycles, since the window's hole is within `max_sample_gap` (3m): that is
/// what makes the hold matter. Expected: nothing is done in them, each held action is skipped
/// as `telemetry_no_data`, and it is done in the first cycle with data again.
#[test]
fn no_drain_cancel_or_notice_in_a_cycle_without_telemetry() {
    let control = run(0..0, 140);
    for kind in ["notice", "drain", "cancel"] {
        let at = first(&control, kind);
        let out = run(at as u32..at as u32 + 2, 140);
        for (c, (done, skips, v)) in out.iter().enumerate().skip(at).take(2) {
            assert!(
                !done.iter().any(|k| ["notice", "drain", "cancel"].contains(k)),
                "{kind}: cycle {c} had no telemetry, yet: {done:?}"
            );
            assert!(skips.contains(&(SkipKind::TelemetryNoData, kind)), "{kind}: cycle {c}: {skips:?}");
            if c == at && kind != "notice" {
                let due = if kind == "drain" { Verdict::Drain } else { Verdict::Cancel };
                assert!(
                    *v >= due,
                    "{kind}: the engine still says {v} at cycle {c}, so the hold is what stops it"
                );
            }
        }
        assert!(out[at + 2].0.contains(&kind), "{kind}: done once data is back: {:?}", out[at + 2]);
    }
}

/// The cycles of the first notice, drain and cancel without any outage.
fn control_action_cycles() -> [u32; 3] {
    static AT: std::sync::OnceLock<[u32; 3]> = std::sync::OnceLock::new();
    *AT.get_or_init(|| {
        let control = run(0..0, 140);
        ["notice", "drain", "cancel"].map(|k| first(&control, k) as u32)
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]
    /// The guard as a property: an outage of one to three cycles (short enough that the
    /// engine's windows stay fresh) starting at or up to two cycles before the control's first
    /// notice, drain or cancel: nothing of the three is done in any cycle without data.
    #[test]
    fn nothing_is_done_in_any_cycle_without_telemetry(which in 0usize..3, back in 0u32..3, len in 1u32..4) {
        let from = control_action_cycles()[which].saturating_sub(back);
        let out = run(from..from + len, 140);
        for c in from..from + len {
            let (done, _, _) = &out[c as usize];
            proptest::prop_assert!(
                !done.iter().any(|k| ["notice", "drain", "cancel"].contains(k)),
                "cycle {} had no telemetry, yet: {:?}", c, done
            );
        }
    }
}

/// trial18 item 2. squeue fails for 25 one-minute cycles, then works; nvidia-smi gives no data
/// in reads 3..20 of the cycles that read it. Expected: the squeue failure said at minutes 0,
/// 10 and 20 (the later ones with how long), its end said once; the same for nvidia-smi; and
/// the read-error metric counting every failed cycle.
#[test]
fn a_lasting_failure_is_said_at_its_start_every_ten_minutes_and_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (c, mut d) = daemon_802(POLICY, &state, "observe", Outage::of_idle_gpu(3..20));
    let ((), log) = with_log(tracing::Level::INFO, || {
        c.borrow_mut().squeue_fails = true;
        for m in 0..25 {
            d.cycle(T0 + m * 60);
        }
        c.borrow_mut().squeue_fails = false;
        for m in 25..60 {
            d.cycle(T0 + m * 60);
        }
    });
    let lines = |what: &str| log.lines().filter(|l| l.contains(what)).collect::<Vec<_>>();
    let sq = lines("squeue failed; cycle skipped");
    assert_eq!(sq.len(), 3, "{sq:#?}");
    assert!(!sq[0].contains("still failing"), "{}", sq[0]);
    assert!(sq[1].contains("600 s and 11 cycles"), "{}", sq[1]);
    assert!(sq[2].contains("1200 s and 21 cycles"), "{}", sq[2]);
    let back = lines("squeue works again");
    assert_eq!(back.len(), 1, "{log}");
    assert!(back[0].contains("after 25 failed cycles"), "{}", back[0]);
    // nvidia-smi is read from minute 25 on: reads 3..20 are minutes 28..45, 17 cycles.
    let smi = lines("nvidia-smi gave no data");
    assert_eq!(smi.len(), 2, "{smi:#?}");
    assert!(smi[1].contains("600 s and 11 cycles"), "{}", smi[1]);
    let smi_back = lines("nvidia-smi gives data again");
    assert_eq!(smi_back.len(), 1, "{log}");
    assert!(smi_back[0].contains("after 17 failed cycles"), "{}", smi_back[0]);
    let m = d.metrics.render();
    assert!(
        m.contains("gpu_reaper_read_errors_total{source=\"squeue\",kind=\"exit_1\"} 25"),
        "{m}"
    );
    assert!(
        m.contains("gpu_reaper_read_errors_total{source=\"nvidia-smi\",kind=\"timeout\"} 17"),
        "{m}"
    );
}
