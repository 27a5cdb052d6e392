//! Scoring a replayed job against the trace's `truth` column, with the sweep's rules
//! (issue "sim: seeded workload simulator", section Scoring):
//!
//! * an **alert** is true when the job has a `wasted` or `starved` GPU at that tick;
//! * a **drain** is false when the job is not wholly wasted at that tick, i.e. unless every GPU
//!   is `wasted` then and stays so until the job's end (the cancel rule). A job's drain stands
//!   until it leaves or works again (`policy::Recovery`), as the enforcer's does, so a drain
//!   is scored only when none stands;
//! * a **cancel** is correct only when every GPU of the job is `wasted` at that tick and stays
//!   so until the job's end; any other cancel is a false cancel;
//! * **recovered GPU-hours** of a correct cancel: GPUs × the time the job would still have
//!   held them (`end_s − cancel tick`);
//! * the **oracle** cancels a wholly wasted job at the onset of its wasted tail.
//!
//! A GPU's truth "at a tick" is the truth of its newest sample at or before the tick; a GPU
//! with no sample yet, or whose sample has no truth, counts as not wasted (and not starved),
//! so unknown truth can only make a cancel false, never correct. Only the first cancel of a
//! job is scored (after it the job would be gone), and a drain only while none stands (a drain
//! stands until the job leaves or recovers); alerts are scored each time the job climbs onto
//! alert.
//!
//! GPU-hours of truth are counted per sample: each sample stands for one replay interval.
//!
//! These are the rules of `sim/src/score.rs` (the sweep's `Tally::observe`), restated over a
//! trace: the simulator knows truth per tick from each job's phase script, a trace only per
//! sample, so the two differ only where samples are missing (collector outages). The sweep's
//! `false_cancel_lost_gpu_h` needs each job's checkpoint times, which a trace does not carry.

use crate::Truth;

/// The scored outcome of one job. Present only when the trace has truth.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobScore {
    /// Samples labelled `wasted` × interval, GPU-hours.
    pub wasted_gpu_h: f64,
    /// Samples labelled `starved` × interval, GPU-hours.
    pub starved_gpu_h: f64,
    /// Alerts raised while the job had a wasted or starved GPU.
    pub true_alerts: u32,
    /// Alerts raised while every GPU was productive (or of unknown truth).
    pub false_alerts: u32,
    /// 1 when the job's first drain came while it was not wholly wasted (a drain stands until
    /// the job leaves, so a job has one at most), else 0.
    pub false_drains: u32,
    /// 1 when the job's first drain came while it was wholly wasted, else 0.
    pub true_drains: u32,
    /// `Some(true)` for a correct first cancel, `Some(false)` for a false cancel, `None` when
    /// the job was never cancelled.
    pub cancel_correct: Option<bool>,
    /// GPU-hours a correct cancel gives back: GPUs × (`end_s` − cancel tick).
    pub recovered_gpu_h: f64,
    /// GPU-hours the oracle recovers: GPUs × (`end_s` − onset of the wholly wasted tail).
    pub oracle_recovered_gpu_h: f64,
}

/// Truth bookkeeping for one job during a replay.
#[derive(Clone, Debug)]
pub(crate) struct JobTruth {
    /// Newest truth per allocated GPU (slot order of `alloc`).
    pub current: Vec<Option<Truth>>,
    /// Latest sample time whose truth is not `wasted` (unknown counts), over the whole job.
    pub last_not_wasted_s: Option<i64>,
    /// Earliest sample time after `last_not_wasted_s` (the onset of the wasted tail).
    pub wasted_tail_onset_s: Option<i64>,
    pub score: JobScore,
    pub cancelled: bool,
    /// Its drain stands (until it leaves or works again).
    pub drained: bool,
    /// While drained: its count toward recovery (`policy::Recovery`).
    pub recovery: policy::Recovery,
}

impl JobTruth {
    pub(crate) fn new(gpus: usize) -> JobTruth {
        JobTruth {
            current: vec![None; gpus],
            last_not_wasted_s: None,
            wasted_tail_onset_s: None,
            score: JobScore::default(),
            cancelled: false,
            drained: false,
            recovery: policy::Recovery::default(),
        }
    }

    /// Feeds one cycle's finding of a drained job to its recovery (`healthy`:
    /// `policy::Recovery::counts`; `window_s`: the policy's window): once it has recovered,
    /// its drain no longer stands (the enforcer resumes it), and a later drain is scored
    /// afresh.
    pub(crate) fn on_cycle(&mut self, healthy: bool, now_s: i64, window_s: i64) {
        if self.drained && self.recovery.observe(healthy, now_s, window_s) {
            self.drained = false;
            self.recovery = policy::Recovery::default();
        }
    }

    /// Every GPU's newest truth is `wasted`.
    pub(crate) fn wholly_wasted(&self) -> bool {
        !self.current.is_empty() && self.current.iter().all(|t| *t == Some(Truth::Wasted))
    }

    /// Some GPU's newest truth is `wasted` or `starved`.
    pub(crate) fn any_waste(&self) -> bool {
        self.current.iter().any(|t| matches!(t, Some(Truth::Wasted | Truth::Starved)))
    }

    /// Scores the job climbing onto `verdict` at `now_s`.
    pub(crate) fn on_rung(&mut self, verdict: policy::Verdict, now_s: i64, end_s: i64) {
        use policy::Verdict::*;
        if self.cancelled {
            return;
        }
        match verdict {
            Alert => {
                if self.any_waste() {
                    self.score.true_alerts += 1;
                } else {
                    self.score.false_alerts += 1;
                }
            }
            Drain if self.drained => {}
            Drain => {
                self.drained = true;
                if self.wholly_wasted() && self.last_not_wasted_s.is_none_or(|t| t <= now_s) {
                    self.score.true_drains += 1;
                } else {
                    self.score.false_drains += 1;
                }
            }
            Cancel => {
                self.cancelled = true;
                let stays = self.last_not_wasted_s.is_none_or(|t| t <= now_s);
                let ok = self.wholly_wasted() && stays;
                self.score.cancel_correct = Some(ok);
                if ok {
                    self.score.recovered_gpu_h = self.current.len() as f64 * (end_s - now_s).max(0) as f64 / 3600.0;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::Verdict;

    #[test]
    fn a_drain_resumed_for_recovery_no_longer_stands_and_the_next_is_scored() {
        let mut t = JobTruth::new(1);
        t.current[0] = Some(Truth::Productive);
        t.on_rung(Verdict::Drain, 600, 20_000);
        // Healthy from 660 for two windows of 1200 s: recovered at 3060.
        for now in (660..3060).step_by(60) {
            t.on_cycle(true, now, 1200);
            assert!(t.drained, "{now}");
        }
        t.on_cycle(true, 3060, 1200);
        assert!(!t.drained);
        t.on_rung(Verdict::Drain, 6000, 20_000);
        assert_eq!((t.score.true_drains, t.score.false_drains), (0, 2));
        // Not drained: cycles change nothing.
        let mut u = JobTruth::new(1);
        u.on_cycle(true, 0, 1);
        u.on_cycle(true, 10, 1);
        assert!(!u.drained && u.recovery.since_s().is_none());
    }

    #[test]
    fn a_job_drained_twice_scores_one_drain_because_the_first_still_stands() {
        let mut t = JobTruth::new(1);
        t.current[0] = Some(Truth::Productive);
        t.on_rung(Verdict::Drain, 600, 6000);
        // The breach ended and came back: the enforcer's drain never left, so no new drain.
        t.on_rung(Verdict::Drain, 1800, 6000);
        assert_eq!((t.score.true_drains, t.score.false_drains), (0, 1));
    }
}
