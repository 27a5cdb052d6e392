//! How often a failure that lasts is said in the log.
//!
//! A tool that keeps failing (squeue, `scontrol show node`, nvidia-smi) is logged when it
//! starts to fail, then at most every [`crate::unlisted::WARN_EVERY_S`] while it lasts, with
//! how long and how many cycles, and once more when it recovers. The metrics
//! (`gpu_reaper_read_errors_total`) count every cycle; the log only has to let an operator see
//! that it started, that it goes on, and that it ended. Operator trial 18 found
//! `squeue failed; cycle skipped` at ERROR in every cycle: 60 lines an hour that said nothing
//! the first did not.

use std::collections::BTreeMap;

/// One failure that lasts: since when, how many cycles, when it was last logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streak {
    /// The first failing cycle's time, epoch seconds.
    pub since_s: i64,
    /// The failing cycles so far, this one included.
    pub cycles: u64,
    /// When it was last logged, epoch seconds.
    pub logged_s: i64,
}

/// What to log about a failure this cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Say {
    /// Log it in full: it started this cycle, or its last line is at least
    /// [`crate::unlisted::WARN_EVERY_S`] old (or the clock went back since).
    Log(Streak),
    /// Say nothing this cycle; the metric still counts it.
    Quiet,
}

/// The failures that are going on, per key (`squeue`, `scontrol`, `nvidia-smi`). Not
/// persisted: a restart logs a failure that goes on again at once, which is what an operator
/// restarting the daemon wants to see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repeats {
    open: BTreeMap<&'static str, Streak>,
}

impl Repeats {
    /// Notes a failure of `key` in the cycle at `now_s` and says whether to log it.
    pub fn failed(&mut self, key: &'static str, now_s: i64) -> Say {
        let every_s = crate::unlisted::WARN_EVERY_S;
        match self.open.get_mut(key) {
            None => {
                let s = Streak {
                    since_s: now_s,
                    cycles: 1,
                    logged_s: now_s,
                };
                self.open.insert(key, s);
                Say::Log(s)
            }
            Some(s) => {
                s.cycles += 1;
                if now_s < s.logged_s || now_s.saturating_sub(s.logged_s) >= every_s {
                    s.logged_s = now_s;
                    Say::Log(*s)
                } else {
                    Say::Quiet
                }
            }
        }
    }

    /// Notes that `key` worked this cycle; returns the streak it ends, if one was going on, so
    /// the recovery can be logged.
    pub fn worked(&mut self, key: &'static str) -> Option<Streak> {
        self.open.remove(key)
    }
}

/// The words added to a failure's log line after its first: `" (failing since <since_s>,
/// <n> cycles; said at most every 10 minutes while it lasts, the metric counts every
/// cycle)"`, or nothing for the first cycle.
pub fn still_text(s: &Streak, now_s: i64) -> String {
    if s.cycles <= 1 {
        return String::new();
    }
    format!(
        " (still failing: {} s and {} cycles since the first failure at {}; said at most every 10 minutes while it lasts, gpu_reaper_read_errors_total counts every cycle)",
        now_s.saturating_sub(s.since_s),
        s.cycles,
        s.since_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lasting_failure_is_said_first_then_every_ten_minutes_then_at_recovery() {
        let mut r = Repeats::default();
        let mut said = Vec::new();
        for t in (0..=1800).step_by(60) {
            if let Say::Log(s) = r.failed("squeue", t) {
                said.push((t, s.cycles));
            }
        }
        assert_eq!(said, vec![(0, 1), (600, 11), (1200, 21), (1800, 31)]);
        let end = r.worked("squeue").expect("a streak was open");
        assert_eq!((end.since_s, end.cycles), (0, 31));
        assert_eq!(r.worked("squeue"), None, "a recovery is said once");
        assert!(
            matches!(r.failed("squeue", 1860), Say::Log(Streak { cycles: 1, .. })),
            "a new failure is said at once"
        );
    }

    #[test]
    fn keys_are_separate_and_a_clock_step_back_says_it_again() {
        let mut r = Repeats::default();
        assert!(matches!(r.failed("squeue", 100), Say::Log(_)));
        assert!(matches!(r.failed("scontrol", 160), Say::Log(_)));
        assert_eq!(r.failed("squeue", 160), Say::Quiet);
        assert!(matches!(r.failed("squeue", 50), Say::Log(_)), "the clock went back");
    }

    #[test]
    fn the_still_text_is_empty_only_for_the_first_cycle() {
        let s = Streak {
            since_s: 0,
            cycles: 1,
            logged_s: 0,
        };
        assert_eq!(still_text(&s, 0), "");
        let s = Streak {
            since_s: 0,
            cycles: 11,
            logged_s: 600,
        };
        assert!(still_text(&s, 600).contains("600 s and 11 cycles"), "{}", still_text(&s, 600));
    }
}
