//! Scoring, exactly as issue 3 defines it, against the ground truth of a [`World`].
//!
//! * A cancel is correct only if every GPU of the job is `wasted` at that tick and stays so
//!   until the job's end; every other cancel is false (starved and partial jobs included). A
//!   false cancel loses the GPU-hours since the job's last checkpoint.
//! * A drain is false when the job is not wholly wasted at the drain. A job's drain stands
//!   until the job leaves its nodes or works again, as the enforcer's does
//!   (enforcer/src/plan.rs, "Undrain": a node is resumed once our drain's job no longer runs
//!   on it, or once its findings have said `healthy` on valid evidence for two windows,
//!   `policy::Recovery`; not merely when the breach ends). A job counts one drain per drain
//!   that stood (a job resumed and drained again counts two), and `drained_gpu_h` is the GPUs
//!   of the drained nodes the job does not hold, from each drain to its resume (the cycle of
//!   the recovery, the job's end within the simulated span, or the cycle after its cancel).
//!   The baselines model tools that do not resume: theirs stand until the job leaves.
//! * An alert (a job's verdict reaching alert or above from below) is true when the job has
//!   wasted or starved GPUs at that tick.
//! * Recovered GPU-hours: per correct cancel, GPUs × the time the job would otherwise have held
//!   them (to its end, within the simulated span). `recovered_single_node_gpu_h`: the part
//!   from jobs on one node, the only cancels a per-node enforcer makes (it holds a multi-node
//!   job at alert). `drains_single_node` and `false_drains_single_node`: likewise the drains
//!   (and false drains) of jobs on one node, the only drains a per-node enforcer makes.
//! * Latency: onset of the non-productive episode to the alert (true alerts), onset of whole
//!   waste to the cancel (correct cancels).
//! * By signature: a cancel (and its recovery or loss) counts under the signature its
//!   finding named. A job's alerts all count under one signature: the one named by its latest
//!   finding at its highest verdict (for a cancelled job, the cancel's). So a signature never
//!   shows more cancels than alerts, though a job alerted as `idle` and cancelled as `hung`
//!   counts its alert under `hung`.

use crate::drive::Judgement;
use crate::world::{World, TICK_S};
use policy::{signature::REGISTRY, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The QOS of the simulated inference servers (`serving` kind of `sim/workloads/*.toml`); their
/// false cancels get their own column, `false_cancels_serving`.
pub const SERVING_QOS: &str = "serving";

/// Number of registered signatures, plus one bucket for "none".
pub const SIG_BUCKETS: usize = 7;

/// Counts accumulated over one run, in ticks and GPU-ticks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Jobs in the world.
    pub jobs: u64,
    /// Job-GPU-ticks evaluated (allocated GPUs of running jobs, summed over ticks).
    pub job_gpu_ticks: u64,
    /// GPU-ticks labelled wasted in the ground truth.
    pub wasted_gpu_ticks: u64,
    /// GPU-ticks labelled starved in the ground truth.
    pub starved_gpu_ticks: u64,
    /// What the oracle recovers, GPU-ticks.
    pub oracle_gpu_ticks: u64,
    /// Alerts on jobs with wasted or starved GPUs.
    pub true_alerts: u64,
    /// Alerts on wholly productive jobs.
    pub false_alerts: u64,
    /// Drains: a job's verdict reaching drain while no drain of it stands (the drain stands
    /// until the job leaves or works again; see the module doc).
    pub drains: u64,
    /// Drains of jobs that were not wholly wasted at the drain.
    pub false_drains: u64,
    /// Drains of jobs on one node (the only drains a per-node enforcer makes).
    pub drains_single_node: u64,
    /// False drains of jobs on one node.
    pub false_drains_single_node: u64,
    /// Capacity withheld by drains, GPU-ticks: per drained job, the GPUs of its nodes it does
    /// not hold, from its first drain to the cycle after it leaves (see the module doc).
    pub drained_gpu_ticks: u64,
    /// Jobs (index into the world's jobs) whose drain stands, with the tick of the drain.
    pub drained_since: BTreeMap<u32, u32>,
    /// The window by which a drained job that works again has its drain resumed
    /// (`policy::Recovery`), seconds; `None`: a drain stands until its job leaves (the
    /// baselines). Set by the driver from the judge.
    pub recovery_window_s: Option<i64>,
    /// Per drained job: its count toward recovery.
    pub recovery: BTreeMap<u32, policy::Recovery>,
    /// Drains resumed because their job worked again.
    pub drains_resumed: u64,
    /// Cancels.
    pub cancels: u64,
    /// False cancels.
    pub false_cancels: u64,
    /// Work lost by false cancels since each job's last checkpoint, GPU-ticks.
    pub false_cancel_lost_gpu_ticks: u64,
    /// Recovered by correct cancels, GPU-ticks.
    pub recovered_gpu_ticks: u64,
    /// Recovered by correct cancels of jobs on one node (what a per-node enforcer can
    /// recover), GPU-ticks.
    pub recovered_single_node_gpu_ticks: u64,
    /// Onset-to-alert latencies of true alerts, ticks.
    pub alert_latency: Vec<u32>,
    /// Onset-to-cancel latencies of correct cancels, ticks.
    pub cancel_latency: Vec<u32>,
    /// Per job (index into the world's jobs) whose verdict reached alert: its alerts, its
    /// highest verdict and the signature bucket of its latest finding at that verdict. See
    /// [`Tally::alerts_by_sig`].
    pub job_alerts: BTreeMap<u32, JobAlerts>,
    /// Cancels by signature bucket.
    pub cancels_by_sig: [u64; SIG_BUCKETS],
    /// False cancels by signature bucket.
    pub false_cancels_by_sig: [u64; SIG_BUCKETS],
    /// False cancels of jobs in QOS [`SERVING_QOS`] (inference servers run as batch jobs).
    pub false_cancels_serving: u64,
    /// Recovered GPU-ticks by signature bucket.
    pub recovered_by_sig: [u64; SIG_BUCKETS],
}

/// The alerts of one job, and the signature they count under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobAlerts {
    /// Times its verdict reached alert or above from below.
    pub alerts: u64,
    /// Its highest verdict so far.
    pub highest: Verdict,
    /// Signature bucket (registry index; last = none) of its latest finding at `highest`.
    pub bucket: usize,
}

impl Tally {
    /// Alerts by signature bucket (registry index; last = none): each job's alerts count under
    /// the signature of its latest finding at its highest verdict, so that a signature's cancels
    /// (counted under the cancel's signature, a cancel being a job's last and highest verdict)
    /// never exceed its alerts.
    pub fn alerts_by_sig(&self) -> [u64; SIG_BUCKETS] {
        let mut by = [0u64; SIG_BUCKETS];
        for a in self.job_alerts.values() {
            by[a.bucket] += a.alerts;
        }
        by
    }

    /// An empty tally carrying the world's ground-truth totals.
    pub fn new(world: &World) -> Tally {
        Tally {
            jobs: world.jobs.len() as u64,
            wasted_gpu_ticks: world.wasted_gpu_ticks(),
            starved_gpu_ticks: world.jobs.iter().map(|j| world.truth_ticks(j, traces::Truth::Starved)).sum(),
            oracle_gpu_ticks: world.oracle_gpu_ticks(),
            ..Tally::default()
        }
    }

    /// True while a drain of job `j` stands (the driver then scores every judgement of it, so
    /// that its recovery is seen).
    pub fn is_drained(&self, j: u32) -> bool {
        !self.drained_since.is_empty() && self.drained_since.contains_key(&j)
    }

    /// Scores job `j`'s judgement at `tick`, given its previous verdict. Returns true when the
    /// judgement is a cancel (the driver then removes the job).
    pub fn observe(&mut self, world: &World, tick: u32, j: u32, before: Verdict, jd: Judgement) -> bool {
        let job = &world.jobs[j as usize];
        let v = jd.verdict;
        // A drained job that works again has its drain resumed in this cycle, as the
        // enforcer does (policy::Recovery): the node is back from this tick.
        if let (Some(window_s), true) = (self.recovery_window_s, self.is_drained(j)) {
            let now_s = i64::from(tick) * TICK_S;
            if self.recovery.entry(j).or_default().observe(jd.healthy, now_s, window_s) {
                let left = job.end.min(world.horizon);
                self.drained_gpu_ticks -= job.drain_extra_gpus as u64 * left.saturating_sub(tick) as u64;
                self.drained_since.remove(&j);
                self.recovery.remove(&j);
                self.drains_resumed += 1;
            }
        }
        let sig = jd.signature.map_or(SIG_BUCKETS - 1, |s| (s.0 as usize).min(SIG_BUCKETS - 2));
        if v >= Verdict::Alert {
            let a = self.job_alerts.entry(j).or_insert(JobAlerts {
                alerts: 0,
                highest: v,
                bucket: sig,
            });
            if v >= a.highest {
                a.highest = v;
                a.bucket = sig;
            }
            a.alerts += u64::from(before < Verdict::Alert);
        }
        if before < Verdict::Alert && v >= Verdict::Alert {
            if job.nonproductive_at(tick) {
                self.true_alerts += 1;
                self.alert_latency.push(tick - job.episode_onset(tick).min(tick));
            } else {
                self.false_alerts += 1;
            }
        }
        let left = job.end.min(world.horizon);
        if v >= Verdict::Drain && !self.drained_since.contains_key(&j) {
            // The enforcer's drain stands until the job leaves or works again: counted to its
            // end here, and cut back at its recovery (above) or to the cycle after its cancel
            // (below).
            self.drained_since.insert(j, tick);
            self.drains += 1;
            let single = job.single_node();
            self.drains_single_node += u64::from(single);
            if !job.wholly_wasted_at(tick) {
                self.false_drains += 1;
                self.false_drains_single_node += u64::from(single);
            }
            self.drained_gpu_ticks += job.drain_extra_gpus as u64 * left.saturating_sub(tick) as u64;
        }
        if v == Verdict::Cancel {
            self.recovery.remove(&j);
            if let Some(since) = self.drained_since.remove(&j) {
                debug_assert!(since <= tick);
                // Resumed on the first cycle that finds the job gone: the one after the cancel.
                let resumed = (tick + 1).min(left);
                self.drained_gpu_ticks -= job.drain_extra_gpus as u64 * (left - resumed) as u64;
            }
            self.cancels += 1;
            self.cancels_by_sig[sig] += 1;
            if job.wholly_wasted_at(tick) {
                let rec = job.gpus as u64 * job.end.min(world.horizon).saturating_sub(tick) as u64;
                self.recovered_gpu_ticks += rec;
                self.recovered_by_sig[sig] += rec;
                if job.single_node() {
                    self.recovered_single_node_gpu_ticks += rec;
                }
                self.cancel_latency.push(tick - job.wholly_wasted_from.unwrap_or(tick).min(tick));
            } else {
                self.false_cancels += 1;
                self.false_cancels_by_sig[sig] += 1;
                self.false_cancels_serving += u64::from(job.facts.qos == SERVING_QOS);
                self.false_cancel_lost_gpu_ticks += job.gpus as u64 * (tick - job.last_checkpoint(tick).min(tick)) as u64;
            }
            return true;
        }
        false
    }

    /// The oracle: cancels every job that becomes wholly wasted at the tick it does, alerting
    /// at the same tick. It is the ceiling on recovery.
    pub fn oracle(world: &World) -> Tally {
        let mut t = Tally::new(world);
        for job in &world.jobs {
            if let Some(w) = job.wholly_wasted_from.filter(|&w| w < world.horizon && w < job.end) {
                t.true_alerts += 1;
                t.alert_latency.push(0);
                t.cancels += 1;
                let rec = job.gpus as u64 * (job.end.min(world.horizon) - w) as u64;
                t.recovered_gpu_ticks += rec;
                if job.single_node() {
                    t.recovered_single_node_gpu_ticks += rec;
                }
                t.cancel_latency.push(0);
            }
        }
        t.job_gpu_ticks = world.job_gpu_ticks();
        t
    }
}

/// Nearest-rank percentile `p` (0–100) of `ticks`, in seconds; `None` when empty.
pub fn percentile_s(ticks: &[u32], p: f64) -> Option<i64> {
    if ticks.is_empty() {
        return None;
    }
    let mut v = ticks.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1] as i64 * TICK_S)
}

/// GPU-ticks to GPU-hours, rounded to 3 decimals.
pub fn gpu_h(gpu_ticks: u64) -> f64 {
    round3(gpu_ticks as f64 * TICK_S as f64 / 3600.0)
}

/// Rounds to 3 decimals (keeps the CSV short and stable).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The parameters of the configuration a row was run with (blank for baselines that lack one).
/// Serialised into a shard's `shard.toml` (one `[[runners]]` table each) so that `sim merge`
/// can check every row's parameter columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowParams {
    /// `gpu-reaper`, `jds`, `reaper-v0.1`, `naive-mean` or `oracle`.
    pub policy: String,
    /// Grid configuration id (`c000`…) or the baseline's name.
    pub config_id: String,
    /// `util_threshold_pct`.
    pub util_threshold_pct: Option<f64>,
    /// `window`, seconds.
    pub window_s: Option<i64>,
    /// `warmup`, seconds.
    pub warmup_s: Option<i64>,
    /// `max_sample_gap`, seconds.
    pub max_sample_gap_s: Option<i64>,
    /// Dwell of the drain stage, seconds.
    pub drain_after_s: Option<i64>,
    /// Dwell of the cancel stage, seconds; none without a cancel stage.
    pub cancel_after_s: Option<i64>,
    /// `notice`, seconds.
    pub notice_s: Option<i64>,
    /// Ceiling of the spin signature.
    pub spin_ceiling: String,
    /// `exempt.qos`, joined with `+`; empty: no QOS exempt (and for baselines).
    pub exempt_qos: String,
}

/// One row of `reports/sweep.csv`: a (policy, configuration, workload, seed). The first 25
/// fields are issue 3's columns in its order; the rest follow. Documented in reports/README.md.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Row {
    pub policy: String,
    pub config_id: String,
    pub workload: String,
    pub seed: u64,
    pub util_threshold_pct: Option<f64>,
    pub window_s: Option<i64>,
    pub warmup_s: Option<i64>,
    pub max_sample_gap_s: Option<i64>,
    pub drain_after_s: Option<i64>,
    pub cancel_after_s: Option<i64>,
    pub jobs: u64,
    pub wasted_gpu_h: f64,
    pub recovered_gpu_h: f64,
    pub recovered_share: Option<f64>,
    pub oracle_recovered_gpu_h: f64,
    pub false_cancels: u64,
    pub false_cancel_lost_gpu_h: f64,
    pub false_drains: u64,
    pub drained_gpu_h: f64,
    pub true_alerts: u64,
    pub false_alerts: u64,
    pub alert_latency_p50_s: Option<i64>,
    pub alert_latency_p95_s: Option<i64>,
    pub cancel_latency_p50_s: Option<i64>,
    pub cancel_latency_p95_s: Option<i64>,
    // Further columns.
    pub notice_s: Option<i64>,
    pub spin_ceiling: String,
    pub exempt_qos: String,
    pub days: f64,
    pub cancels: u64,
    pub drains: u64,
    pub starved_gpu_h: f64,
    pub job_gpu_ticks: u64,
    pub alerts_spin: u64,
    pub alerts_hung: u64,
    pub alerts_idle: u64,
    pub alerts_starved: u64,
    pub alerts_partial: u64,
    pub alerts_unknown: u64,
    pub cancels_spin: u64,
    pub cancels_hung: u64,
    pub cancels_idle: u64,
    pub cancels_starved: u64,
    pub cancels_partial: u64,
    pub cancels_unknown: u64,
    pub false_cancels_spin: u64,
    pub false_cancels_hung: u64,
    pub false_cancels_idle: u64,
    pub false_cancels_starved: u64,
    pub false_cancels_partial: u64,
    pub false_cancels_unknown: u64,
    pub false_cancels_serving: u64,
    pub recovered_gpu_h_spin: f64,
    pub recovered_gpu_h_hung: f64,
    pub recovered_gpu_h_idle: f64,
    pub recovered_gpu_h_starved: f64,
    pub recovered_gpu_h_partial: f64,
    pub recovered_gpu_h_unknown: f64,
    pub recovered_single_node_gpu_h: f64,
    pub drains_single_node: u64,
    pub false_drains_single_node: u64,
}

/// The signature names of the per-signature columns, in column order.
pub const SIG_COLUMNS: [&str; 6] = ["spin", "hung", "idle", "starved", "partial", "unknown"];

/// The `alerts_<sig>` column names, in [`SIG_COLUMNS`] order.
const SIG_ALERT_COLUMNS: [&str; 6] = [
    "alerts_spin",
    "alerts_hung",
    "alerts_idle",
    "alerts_starved",
    "alerts_partial",
    "alerts_unknown",
];

/// The `cancels_<sig>` column names, in [`SIG_COLUMNS`] order.
const SIG_CANCEL_COLUMNS: [&str; 6] = [
    "cancels_spin",
    "cancels_hung",
    "cancels_idle",
    "cancels_starved",
    "cancels_partial",
    "cancels_unknown",
];

/// The `false_cancels_<sig>` column names, in [`SIG_COLUMNS`] order.
const SIG_FALSE_CANCEL_COLUMNS: [&str; 6] = [
    "false_cancels_spin",
    "false_cancels_hung",
    "false_cancels_idle",
    "false_cancels_starved",
    "false_cancels_partial",
    "false_cancels_unknown",
];

/// The `recovered_gpu_h_<sig>` column names, in [`SIG_COLUMNS`] order.
const SIG_RECOVERED_COLUMNS: [&str; 6] = [
    "recovered_gpu_h_spin",
    "recovered_gpu_h_hung",
    "recovered_gpu_h_idle",
    "recovered_gpu_h_starved",
    "recovered_gpu_h_partial",
    "recovered_gpu_h_unknown",
];

/// A column of a `sweep.csv` row that is not what it must be: (column, value as read, what is
/// wrong).
pub type BadColumn = (&'static str, String, String);

impl RowParams {
    /// The first parameter column of `row` that differs from these parameters, with the
    /// expected value in the message; `None` when all agree.
    pub fn mismatch(&self, row: &Row) -> Option<BadColumn> {
        fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
            v.map_or_else(|| "(empty)".to_string(), |v| v.to_string())
        }
        let columns: [(&'static str, bool, String, String); 11] = [
            ("policy", row.policy == self.policy, row.policy.clone(), self.policy.clone()),
            (
                "config_id",
                row.config_id == self.config_id,
                row.config_id.clone(),
                self.config_id.clone(),
            ),
            (
                "util_threshold_pct",
                row.util_threshold_pct == self.util_threshold_pct,
                opt(row.util_threshold_pct),
                opt(self.util_threshold_pct),
            ),
            ("window_s", row.window_s == self.window_s, opt(row.window_s), opt(self.window_s)),
            ("warmup_s", row.warmup_s == self.warmup_s, opt(row.warmup_s), opt(self.warmup_s)),
            (
                "max_sample_gap_s",
                row.max_sample_gap_s == self.max_sample_gap_s,
                opt(row.max_sample_gap_s),
                opt(self.max_sample_gap_s),
            ),
            (
                "drain_after_s",
                row.drain_after_s == self.drain_after_s,
                opt(row.drain_after_s),
                opt(self.drain_after_s),
            ),
            (
                "cancel_after_s",
                row.cancel_after_s == self.cancel_after_s,
                opt(row.cancel_after_s),
                opt(self.cancel_after_s),
            ),
            ("notice_s", row.notice_s == self.notice_s, opt(row.notice_s), opt(self.notice_s)),
            (
                "spin_ceiling",
                row.spin_ceiling == self.spin_ceiling,
                row.spin_ceiling.clone(),
                self.spin_ceiling.clone(),
            ),
            (
                "exempt_qos",
                row.exempt_qos == self.exempt_qos,
                row.exempt_qos.clone(),
                self.exempt_qos.clone(),
            ),
        ];
        columns
            .into_iter()
            .find(|c| !c.1)
            .map(|(name, _, got, want)| (name, got, format!("the configuration {} of this sweep has {want}", self.config_id)))
    }
}

impl Row {
    /// The parameter columns of this row.
    pub fn params(&self) -> RowParams {
        RowParams {
            policy: self.policy.clone(),
            config_id: self.config_id.clone(),
            util_threshold_pct: self.util_threshold_pct,
            window_s: self.window_s,
            warmup_s: self.warmup_s,
            max_sample_gap_s: self.max_sample_gap_s,
            drain_after_s: self.drain_after_s,
            cancel_after_s: self.cancel_after_s,
            notice_s: self.notice_s,
            spin_ceiling: self.spin_ceiling.clone(),
            exempt_qos: self.exempt_qos.clone(),
        }
    }

    /// Checks the value columns of a row read back from a `sweep.csv`: GPU-hours, days and
    /// latencies finite and non-negative (days positive), `recovered_share` in [0, 1],
    /// `util_threshold_pct` in [0, 100] and the durations non-negative, then the relations
    /// between columns that hold by construction ([`Row::check_relations`]). Counts are
    /// integral and non-negative by type (`u64`; [`crate::sweep::read_csv`] names a count that
    /// is not). Returns the first bad column.
    pub fn check_values(&self) -> Result<(), BadColumn> {
        let hours: [(&'static str, f64); 13] = [
            ("wasted_gpu_h", self.wasted_gpu_h),
            ("recovered_gpu_h", self.recovered_gpu_h),
            ("oracle_recovered_gpu_h", self.oracle_recovered_gpu_h),
            ("false_cancel_lost_gpu_h", self.false_cancel_lost_gpu_h),
            ("drained_gpu_h", self.drained_gpu_h),
            ("starved_gpu_h", self.starved_gpu_h),
            ("recovered_gpu_h_spin", self.recovered_gpu_h_spin),
            ("recovered_gpu_h_hung", self.recovered_gpu_h_hung),
            ("recovered_gpu_h_idle", self.recovered_gpu_h_idle),
            ("recovered_gpu_h_starved", self.recovered_gpu_h_starved),
            ("recovered_gpu_h_partial", self.recovered_gpu_h_partial),
            ("recovered_gpu_h_unknown", self.recovered_gpu_h_unknown),
            ("recovered_single_node_gpu_h", self.recovered_single_node_gpu_h),
        ];
        for (name, v) in hours {
            if !v.is_finite() || v < 0.0 {
                return Err((name, v.to_string(), "GPU-hours must be a finite number ≥ 0".into()));
            }
        }
        if !self.days.is_finite() || self.days <= 0.0 {
            return Err(("days", self.days.to_string(), "days must be a finite number > 0".into()));
        }
        if let Some(v) = self.recovered_share {
            if !(0.0..=1.0).contains(&v) {
                return Err(("recovered_share", v.to_string(), "a share must lie in [0, 1]".into()));
            }
        }
        if let Some(v) = self.util_threshold_pct {
            if !(0.0..=100.0).contains(&v) {
                return Err(("util_threshold_pct", v.to_string(), "a percentage must lie in [0, 100]".into()));
            }
        }
        let seconds: [(&'static str, Option<i64>); 10] = [
            ("window_s", self.window_s),
            ("warmup_s", self.warmup_s),
            ("max_sample_gap_s", self.max_sample_gap_s),
            ("drain_after_s", self.drain_after_s),
            ("cancel_after_s", self.cancel_after_s),
            ("notice_s", self.notice_s),
            ("alert_latency_p50_s", self.alert_latency_p50_s),
            ("alert_latency_p95_s", self.alert_latency_p95_s),
            ("cancel_latency_p50_s", self.cancel_latency_p50_s),
            ("cancel_latency_p95_s", self.cancel_latency_p95_s),
        ];
        for (name, v) in seconds {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Err((name, v.to_string(), "a duration must be ≥ 0 seconds".into()));
            }
        }
        self.check_relations()
    }

    /// Checks the relations between columns that every row [`Row::new`] writes obeys, for
    /// policies, baselines and the oracle alike (see [`Tally::observe`], [`Tally::oracle`]):
    ///
    /// * `recovered_gpu_h` ≤ `oracle_recovered_gpu_h` ≤ `wasted_gpu_h`: a correct cancel
    ///   recovers a wholly wasted job's GPUs from the cancel to the job's end, the oracle the
    ///   same from the onset of whole waste, and both are wasted GPU-time (each side is rounded
    ///   from GPU-ticks the same way, so rounding keeps the order);
    /// * each `recovered_gpu_h_<sig>` and `recovered_single_node_gpu_h` ≤ `recovered_gpu_h`;
    /// * `false_cancels` ≤ `cancels` ≤ `jobs` (a cancelled job is no longer judged), and
    ///   `cancels` ≤ `true_alerts + false_alerts` (a job's verdict reaches alert, counted as an
    ///   alert, no later than its cancel); `false_drains` ≤ `drains`;
    /// * `false_drains_single_node` ≤ `drains_single_node` ≤ `drains`, and
    ///   `false_drains_single_node` ≤ `false_drains`;
    /// * `false_cancels_serving` and the sum of `false_cancels_<sig>` ≤ `false_cancels`; each
    ///   `false_cancels_<sig>` ≤ `cancels_<sig>` ≤ `alerts_<sig>` (see [`Tally::alerts_by_sig`]); the sum of `cancels_<sig>` ≤ `cancels`; the
    ///   sum of `alerts_<sig>` ≤ `true_alerts + false_alerts` (a finding with no signature
    ///   counts in the totals only);
    /// * `recovered_gpu_h` above 0 only with a correct cancel (`cancels` > `false_cancels`),
    ///   `false_cancel_lost_gpu_h` only with a false cancel, `drained_gpu_h` only with a drain;
    /// * `recovered_share` present exactly when `wasted_gpu_h` is above 0 (one GPU-tick is
    ///   1/60 GPU-hour, written as 0.017);
    /// * latencies: p50 and p95 both present or both empty, p50 ≤ p95; alert latencies present
    ///   exactly when `true_alerts` > 0, cancel latencies exactly when a cancel was correct.
    ///
    /// Returns the first column that breaks one, with its value and the relation.
    pub fn check_relations(&self) -> Result<(), BadColumn> {
        fn at_most<T: PartialOrd + std::fmt::Display>(col: &'static str, v: T, limit_col: &str, limit: T) -> Result<(), BadColumn> {
            if v <= limit {
                Ok(())
            } else {
                Err((col, v.to_string(), format!("must not exceed {limit_col} ({limit})")))
            }
        }
        at_most("recovered_gpu_h", self.recovered_gpu_h, "wasted_gpu_h", self.wasted_gpu_h)?;
        at_most(
            "recovered_gpu_h",
            self.recovered_gpu_h,
            "oracle_recovered_gpu_h",
            self.oracle_recovered_gpu_h,
        )?;
        at_most(
            "oracle_recovered_gpu_h",
            self.oracle_recovered_gpu_h,
            "wasted_gpu_h",
            self.wasted_gpu_h,
        )?;
        for (name, x) in SIG_RECOVERED_COLUMNS.iter().zip(self.by_signature()) {
            at_most(name, x.3, "recovered_gpu_h", self.recovered_gpu_h)?;
        }
        at_most(
            "recovered_single_node_gpu_h",
            self.recovered_single_node_gpu_h,
            "recovered_gpu_h",
            self.recovered_gpu_h,
        )?;
        at_most("false_cancels", self.false_cancels, "cancels", self.cancels)?;
        at_most("cancels", self.cancels, "jobs", self.jobs)?;
        let alerts = self.true_alerts.saturating_add(self.false_alerts);
        at_most("cancels", self.cancels, "true_alerts + false_alerts", alerts)?;
        at_most("false_drains", self.false_drains, "drains", self.drains)?;
        at_most(
            "false_drains_single_node",
            self.false_drains_single_node,
            "drains_single_node",
            self.drains_single_node,
        )?;
        at_most("drains_single_node", self.drains_single_node, "drains", self.drains)?;
        at_most(
            "false_drains_single_node",
            self.false_drains_single_node,
            "false_drains",
            self.false_drains,
        )?;
        at_most(
            "false_cancels_serving",
            self.false_cancels_serving,
            "false_cancels",
            self.false_cancels,
        )?;
        let by = self.by_signature();
        for (i, name) in SIG_FALSE_CANCEL_COLUMNS.iter().enumerate() {
            at_most(name, by[i].2, SIG_CANCEL_COLUMNS[i], by[i].1)?;
            at_most(SIG_CANCEL_COLUMNS[i], by[i].1, SIG_ALERT_COLUMNS[i], by[i].0)?;
        }
        let sum = |f: fn(&(u64, u64, u64, f64)) -> u64| by.iter().map(f).fold(0u64, u64::saturating_add);
        at_most("cancels_<sig> (summed)", sum(|x| x.1), "cancels", self.cancels)?;
        at_most("false_cancels_<sig> (summed)", sum(|x| x.2), "false_cancels", self.false_cancels)?;
        at_most("alerts_<sig> (summed)", sum(|x| x.0), "true_alerts + false_alerts", alerts)?;
        let correct_cancels = self.cancels - self.false_cancels;
        let only_with = |col: &'static str, v: f64, count: u64, what: &str| -> Result<(), BadColumn> {
            if v > 0.0 && count == 0 {
                Err((col, v.to_string(), format!("is above 0 without {what}")))
            } else {
                Ok(())
            }
        };
        only_with(
            "recovered_gpu_h",
            self.recovered_gpu_h,
            correct_cancels,
            "a correct cancel (cancels equals false_cancels)",
        )?;
        only_with(
            "false_cancel_lost_gpu_h",
            self.false_cancel_lost_gpu_h,
            self.false_cancels,
            "a false cancel (false_cancels is 0)",
        )?;
        only_with("drained_gpu_h", self.drained_gpu_h, self.drains, "a drain (drains is 0)")?;
        if self.recovered_share.is_some() != (self.wasted_gpu_h > 0.0) {
            return Err((
                "recovered_share",
                self.recovered_share.map_or_else(|| "(empty)".to_string(), |v| v.to_string()),
                format!("must be given exactly when wasted_gpu_h is above 0 (it is {})", self.wasted_gpu_h),
            ));
        }
        let latencies = [
            (
                "alert_latency_p50_s",
                self.alert_latency_p50_s,
                "alert_latency_p95_s",
                self.alert_latency_p95_s,
                self.true_alerts > 0,
                "true_alerts is above 0",
            ),
            (
                "cancel_latency_p50_s",
                self.cancel_latency_p50_s,
                "cancel_latency_p95_s",
                self.cancel_latency_p95_s,
                correct_cancels > 0,
                "a cancel was correct (cancels above false_cancels)",
            ),
        ];
        for (p50_col, p50, p95_col, p95, expected, when) in latencies {
            let show = |v: Option<i64>| v.map_or_else(|| "(empty)".to_string(), |v| v.to_string());
            if p50.is_some() != expected {
                return Err((p50_col, show(p50), format!("must be given exactly when {when}")));
            }
            if p95.is_some() != expected {
                return Err((p95_col, show(p95), format!("must be given exactly when {when}")));
            }
            if let (Some(a), Some(b)) = (p50, p95) {
                at_most(p50_col, a, p95_col, b)?;
            }
        }
        Ok(())
    }

    /// Builds a row from a run's tally.
    pub fn new(p: &RowParams, world: &World, days: f64, t: &Tally) -> Row {
        // Map registry order to the fixed column order (they match today; this keeps the CSV
        // stable if the registry is reordered).
        let by = |arr: &[u64; SIG_BUCKETS], name: &str| -> u64 {
            REGISTRY
                .iter()
                .position(|s| s.name() == name)
                .map_or(0, |i| arr[i.min(SIG_BUCKETS - 2)])
        };
        let alerts_by_sig = t.alerts_by_sig();
        let wasted = gpu_h(t.wasted_gpu_ticks);
        let recovered = gpu_h(t.recovered_gpu_ticks);
        Row {
            policy: p.policy.clone(),
            config_id: p.config_id.clone(),
            workload: world.workload.clone(),
            seed: world.seed,
            util_threshold_pct: p.util_threshold_pct,
            window_s: p.window_s,
            warmup_s: p.warmup_s,
            max_sample_gap_s: p.max_sample_gap_s,
            drain_after_s: p.drain_after_s,
            cancel_after_s: p.cancel_after_s,
            jobs: t.jobs,
            wasted_gpu_h: wasted,
            recovered_gpu_h: recovered,
            recovered_share: (t.wasted_gpu_ticks > 0).then(|| round3(t.recovered_gpu_ticks as f64 / t.wasted_gpu_ticks as f64)),
            oracle_recovered_gpu_h: gpu_h(t.oracle_gpu_ticks),
            false_cancels: t.false_cancels,
            false_cancel_lost_gpu_h: gpu_h(t.false_cancel_lost_gpu_ticks),
            false_drains: t.false_drains,
            drained_gpu_h: gpu_h(t.drained_gpu_ticks),
            true_alerts: t.true_alerts,
            false_alerts: t.false_alerts,
            alert_latency_p50_s: percentile_s(&t.alert_latency, 50.0),
            alert_latency_p95_s: percentile_s(&t.alert_latency, 95.0),
            cancel_latency_p50_s: percentile_s(&t.cancel_latency, 50.0),
            cancel_latency_p95_s: percentile_s(&t.cancel_latency, 95.0),
            notice_s: p.notice_s,
            spin_ceiling: p.spin_ceiling.clone(),
            exempt_qos: p.exempt_qos.clone(),
            days,
            cancels: t.cancels,
            drains: t.drains,
            starved_gpu_h: gpu_h(t.starved_gpu_ticks),
            job_gpu_ticks: t.job_gpu_ticks,
            alerts_spin: by(&alerts_by_sig, "spin"),
            alerts_hung: by(&alerts_by_sig, "hung"),
            alerts_idle: by(&alerts_by_sig, "idle"),
            alerts_starved: by(&alerts_by_sig, "starved"),
            alerts_partial: by(&alerts_by_sig, "partial"),
            alerts_unknown: by(&alerts_by_sig, "unknown"),
            cancels_spin: by(&t.cancels_by_sig, "spin"),
            cancels_hung: by(&t.cancels_by_sig, "hung"),
            cancels_idle: by(&t.cancels_by_sig, "idle"),
            cancels_starved: by(&t.cancels_by_sig, "starved"),
            cancels_partial: by(&t.cancels_by_sig, "partial"),
            cancels_unknown: by(&t.cancels_by_sig, "unknown"),
            false_cancels_spin: by(&t.false_cancels_by_sig, "spin"),
            false_cancels_hung: by(&t.false_cancels_by_sig, "hung"),
            false_cancels_idle: by(&t.false_cancels_by_sig, "idle"),
            false_cancels_starved: by(&t.false_cancels_by_sig, "starved"),
            false_cancels_partial: by(&t.false_cancels_by_sig, "partial"),
            false_cancels_unknown: by(&t.false_cancels_by_sig, "unknown"),
            false_cancels_serving: t.false_cancels_serving,
            recovered_gpu_h_spin: gpu_h(by(&t.recovered_by_sig, "spin")),
            recovered_gpu_h_hung: gpu_h(by(&t.recovered_by_sig, "hung")),
            recovered_gpu_h_idle: gpu_h(by(&t.recovered_by_sig, "idle")),
            recovered_gpu_h_starved: gpu_h(by(&t.recovered_by_sig, "starved")),
            recovered_gpu_h_partial: gpu_h(by(&t.recovered_by_sig, "partial")),
            recovered_gpu_h_unknown: gpu_h(by(&t.recovered_by_sig, "unknown")),
            recovered_single_node_gpu_h: gpu_h(t.recovered_single_node_gpu_ticks),
            drains_single_node: t.drains_single_node,
            false_drains_single_node: t.false_drains_single_node,
        }
    }

    /// Per-signature (alerts, cancels, false cancels, recovered GPU-h), in [`SIG_COLUMNS`] order.
    pub fn by_signature(&self) -> [(u64, u64, u64, f64); 6] {
        [
            (
                self.alerts_spin,
                self.cancels_spin,
                self.false_cancels_spin,
                self.recovered_gpu_h_spin,
            ),
            (
                self.alerts_hung,
                self.cancels_hung,
                self.false_cancels_hung,
                self.recovered_gpu_h_hung,
            ),
            (
                self.alerts_idle,
                self.cancels_idle,
                self.false_cancels_idle,
                self.recovered_gpu_h_idle,
            ),
            (
                self.alerts_starved,
                self.cancels_starved,
                self.false_cancels_starved,
                self.recovered_gpu_h_starved,
            ),
            (
                self.alerts_partial,
                self.cancels_partial,
                self.false_cancels_partial,
                self.recovered_gpu_h_partial,
            ),
            (
                self.alerts_unknown,
                self.cancels_unknown,
                self.false_cancels_unknown,
                self.recovered_gpu_h_unknown,
            ),
        ]
    }
}
