//! The verdict ladder: `healthy → watching → alert → drain → cancel`, plus `insufficient_evidence`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What the engine concludes about one job in one cycle.
///
/// The strings returned by [`Verdict::as_str`] are the ones written to every CSV and log.
/// The derived order is the ladder order; `InsufficientEvidence` sits between `Healthy` and
/// `Watching` so that "highest verdict reached" summaries rank it above healthy, but it never
/// escalates: no rung above it is reachable without a full window of valid evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No breach, or the job is in warmup, or it is exempt and below watching.
    #[default]
    Healthy,
    /// The evidence is broken: gaps, stale, invalid, frozen or all-zero data, or a missing node.
    InsufficientEvidence,
    /// The samples breach but do not yet cover a full window, or no stage applies yet.
    Watching,
    /// Breach confirmed over a full window: tell the user and the admins.
    Alert,
    /// Drain the job's nodes so no new work lands there.
    Drain,
    /// Cancel the job.
    Cancel,
}

impl Verdict {
    /// Every verdict, in ladder order.
    pub const ALL: [Verdict; 6] = [
        Verdict::Healthy,
        Verdict::InsufficientEvidence,
        Verdict::Watching,
        Verdict::Alert,
        Verdict::Drain,
        Verdict::Cancel,
    ];

    /// The lowercase string used in CSV, logs and config: `healthy`, `insufficient_evidence`,
    /// `watching`, `alert`, `drain`, `cancel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::InsufficientEvidence => "insufficient_evidence",
            Verdict::Watching => "watching",
            Verdict::Alert => "alert",
            Verdict::Drain => "drain",
            Verdict::Cancel => "cancel",
        }
    }

    /// Inverse of [`Verdict::as_str`]; `None` for any other text.
    pub fn from_name(s: &str) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// True for `alert`, `drain` and `cancel`: the rungs that lead to action.
    pub fn is_actionable(self) -> bool {
        self >= Verdict::Alert
    }

    /// The next rung up among the action rungs (`alert → drain → cancel`); `cancel` stays.
    pub(crate) fn next_action_rung(self) -> Verdict {
        match self {
            Verdict::Alert => Verdict::Drain,
            Verdict::Drain | Verdict::Cancel => Verdict::Cancel,
            _ => Verdict::Alert,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ladder_is_ordered() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_name(v.as_str()), Some(v));
        }
        assert!(Verdict::Healthy < Verdict::Watching);
        assert!(Verdict::Watching < Verdict::Alert);
        assert!(Verdict::Alert < Verdict::Drain);
        assert!(Verdict::Drain < Verdict::Cancel);
        assert_eq!(Verdict::from_name("idle"), None);
    }
}
