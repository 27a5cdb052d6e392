//! When a drained job has recovered, so that our drain of its node is resumed while it runs.
//!
//! The enforcer and the simulator share this rule: a drain stands until its job leaves, or
//! until the job's findings have said `healthy` on valid evidence (cause `NoBreach`: the
//! window shows work, or nothing that breaches) in every cycle for at least
//! [`RECOVERY_WINDOWS`] windows. Any other finding (watching, a breach, broken evidence,
//! warmup) or a cycle in which the job was not judged starts the count again. Two windows,
//! not one: a breach needs every sample of a window quiet (peak, not mean), so one busy
//! sample keeps a job `healthy` for a whole window, and work lasting W keeps it `healthy`
//! for W plus a window. Two windows of `healthy` thus need work seen at least once a window
//! for a window or more: a 10-minute burst in a 20-minute window does not resume the drain,
//! 25 minutes of work do. A job that stalled for a long checkpoint and then works again thus
//! gives its node back to the scheduler two windows after it resumed work, instead of
//! holding it drained to its end (operator trial 17). Resuming is the safe direction: it only lets the scheduler
//! place new jobs on the node's other GPUs; should the job stall again, a new breach is
//! alerted, noticed and drained afresh.

use crate::{Cause, Finding, Verdict};

/// How many windows of unbroken `healthy` findings make a drained job recovered.
pub const RECOVERY_WINDOWS: i64 = 2;

/// One drained job's count toward recovery. `Default` is "not yet healthy".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The first cycle of the current unbroken run of healthy findings, epoch seconds.
    since_s: Option<i64>,
}

impl Recovery {
    /// True for a finding that counts toward recovery: `healthy` with cause `NoBreach`.
    pub fn counts(f: &Finding) -> bool {
        f.verdict == Verdict::Healthy && f.cause == Cause::NoBreach
    }

    /// Feeds one cycle at `now_s` (epoch seconds): `healthy` is [`Recovery::counts`] of the
    /// job's finding this cycle (false when the job was not judged), `window_s` the policy's
    /// window. Returns true once the healthy run has lasted [`RECOVERY_WINDOWS`] windows or
    /// more; a cycle earlier than the run's start (the clock went back) starts it again.
    pub fn observe(&mut self, healthy: bool, now_s: i64, window_s: i64) -> bool {
        if !healthy || self.since_s.is_some_and(|s| now_s < s) {
            self.since_s = healthy.then_some(now_s);
            return false;
        }
        let since = *self.since_s.get_or_insert(now_s);
        now_s.saturating_sub(since) >= window_s.saturating_mul(RECOVERY_WINDOWS)
    }

    /// The first cycle of the current healthy run, if one is going on.
    pub fn since_s(&self) -> Option<i64> {
        self.since_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_windows_of_unbroken_health_are_recovery_and_any_break_starts_again() {
        let mut r = Recovery::default();
        let w = 1200;
        // Healthy from t = 0: recovered at t = 2400, not before.
        for t in (0..2400).step_by(60) {
            assert!(!r.observe(true, t, w), "t = {t}");
        }
        assert!(r.observe(true, 2400, w));
        // One cycle not healthy starts again.
        assert!(!r.observe(false, 2460, w));
        assert_eq!(r.since_s(), None);
        assert!(!r.observe(true, 2520, w));
        assert!(!r.observe(true, 4860, w));
        assert!(r.observe(true, 4920, w));
        // The clock went back: the run starts again at the new time.
        assert!(!r.observe(true, 600, w));
        assert_eq!(r.since_s(), Some(600));
        assert!(!r.observe(true, 2940, w));
        assert!(r.observe(true, 3000, w));
    }
}
