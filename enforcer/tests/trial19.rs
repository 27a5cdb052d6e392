//! trial19 (operator trial): what an operator found trying to break the enforcer, besides
//! the two CRITICAL findings tested in `e2e_fakes.rs` (`video_engine_work_counts_as_work`,
//! `a_job_with_a_process_outside_its_device_indices_is_held_at_alert`).
//!
//! ROUGH: a forward clock jump (or a suspended host) changed every verdict without a word,
//! where a step back is logged. Expected: a cycle that comes more than `max_sample_gap` after
//! the last is logged at WARN, naming how long.

mod common;

use common::cluster::{daemon_802, OneIdleGpu, POLICY, T0};
use common::with_log;

#[test]
fn a_cycle_long_after_the_last_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let gpu = OneIdleGpu {
        cycle: 0,
        power_known: true,
    };
    let (_c, mut d) = daemon_802(POLICY, &state, "observe", gpu);
    let ((), log) = with_log(tracing::Level::WARN, || {
        for t in [T0, T0 + 60, T0 + 120, T0 + 120 + 900, T0 + 120 + 960] {
            d.cycle(t);
        }
    });
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("after the last, more than policy.max_sample_gap"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(said[0].contains("comes 900 s after the last"), "{}", said[0]);
    // A cycle at most max_sample_gap (3m) late says nothing.
    let ((), log) = with_log(tracing::Level::WARN, || {
        d.cycle(T0 + 1080 + 180);
    });
    assert!(!log.contains("after the last"), "{log}");
}
