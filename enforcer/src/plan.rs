//! The pure half of a cycle: findings and remembered actions in, [`Action`]s and [`Skip`]s
//! out. No I/O, no clock. The damage limits live here: per-hour drain and cancel budgets,
//! the suspect-collector rule, the pause file, special node states, and the rules that a
//! multi-node job is never drained or cancelled on one node's evidence and that no component
//! of a heterogeneous job is ever drained or cancelled.

use crate::config::RunMode;
use crate::parse::scontrol_node::{self, NodeState};
use policy::{Finding, JobFacts, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One thing to do (or, in observe mode, to log as would-do).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Tell the admins (log line, webhook) that a job reached a rung. Once per rung per breach.
    Alert {
        /// Exact job id.
        job_id: String,
        /// Job owner.
        user: String,
        /// Partition (metrics label).
        partition: String,
        /// The rung reached.
        verdict: Verdict,
        /// Signature name.
        signature: String,
        /// One-line reason from the finding.
        reason: String,
    },
    /// Run the notify command for the job's user, at the first alert of each breach.
    Notice {
        /// Exact job id.
        job_id: String,
        /// Job owner.
        user: String,
        /// One-line reason.
        reason: String,
    },
    /// `scontrol update NodeName=node State=DRAIN Reason=node_reason`.
    Drain {
        /// This node.
        node: String,
        /// The job the drain is for.
        job_id: String,
        /// Signature name.
        signature: String,
        /// `gpu-reaper: <signature> job <id>`.
        node_reason: String,
        /// The finding's reason.
        reason: String,
    },
    /// AdminComment then scancel of the exact id.
    Cancel {
        /// Exact job id.
        job_id: String,
        /// Signature name.
        signature: String,
        /// The finding's reason (also the AdminComment).
        reason: String,
    },
    /// `scontrol update NodeName=node State=RESUME`: our drain's job has gone, or works again
    /// (`recovered`).
    Resume {
        /// This node.
        node: String,
        /// The job our drain was for.
        job_id: String,
        /// The job still runs here and has recovered (`policy::Recovery`: its findings said
        /// `healthy` on valid evidence for two windows); false: it left the node.
        recovered: bool,
    },
    /// Tell the admins something about the enforcer itself (the suspect-collector rule).
    AdminAlert {
        /// What happened.
        text: String,
    },
}

impl Action {
    /// Every value of [`Action::kind`].
    pub const KINDS: [&'static str; 6] = ["alert", "notice", "drain", "cancel", "resume", "admin_alert"];

    /// `alert`, `notice`, `drain`, `cancel`, `resume` or `admin_alert`.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Alert { .. } => "alert",
            Action::Notice { .. } => "notice",
            Action::Drain { .. } => "drain",
            Action::Cancel { .. } => "cancel",
            Action::Resume { .. } => "resume",
            Action::AdminAlert { .. } => "admin_alert",
        }
    }

    /// The job concerned, if any.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            Action::Alert { job_id, .. }
            | Action::Notice { job_id, .. }
            | Action::Drain { job_id, .. }
            | Action::Cancel { job_id, .. }
            | Action::Resume { job_id, .. } => Some(job_id),
            Action::AdminAlert { .. } => None,
        }
    }

    /// True for the actions that change Slurm state (drain, cancel, resume) or contact a
    /// user (notice): the ones observe mode only logs.
    pub fn changes_something(&self) -> bool {
        matches!(
            self,
            Action::Notice { .. } | Action::Drain { .. } | Action::Cancel { .. } | Action::Resume { .. }
        )
    }
}

/// Why a verdict did not become an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// The pause file exists.
    Paused,
    /// Too many jobs alerting at once: the collector is suspect.
    SuspectCollector,
    /// The per-hour drain or cancel budget is spent.
    RateLimit,
    /// The node is drained, down, failed, in maintenance or reserved, and not by us for this job.
    #[serde(rename = "node_special_state")]
    NodeSpecial,
    /// `scontrol show node` failed this cycle.
    NodeStateUnknown,
    /// A job on several nodes: per-node mode stops at alert.
    MultiNode,
    /// A component of a heterogeneous job (`N+K`): its other components run elsewhere or on
    /// other GPUs and are judged apart, and cancelling component 0 cancels the whole het job
    /// (scancel(1)), so no component is ever drained or cancelled; it stops at alert.
    HetJob,
    /// No confirmed drain of ours for the job: no cancel.
    DrainUnconfirmed,
    /// A cancel was already sent and the job has not left yet.
    CancelPending,
    /// The user's notice has not gone out, or went out less than `notice` ago, or named a
    /// later time for this drain or cancel than now ([`Announced`]).
    NoticePending,
    /// Set by the daemon, not the planner: the last write of the audit log or the state file
    /// failed, so no drain or cancel is made until one succeeds (its record could be lost).
    RecordsUnwritable,
    /// The last notice attempt for the job failed less than its retry delay ago (see
    /// [`notice_retry_delay_s`]): the notice is not sent again yet.
    NoticeBackoff,
    /// An admin resumed the node while our confirmed drain for this job stood and the job
    /// still ran: for the rest of that run the job is never drained or cancelled again.
    AdminOverride,
    /// `scontrol show node` names a `NodeHostName` that is not this host: the configured
    /// `enforcer.node` is another node, so nothing is drained, cancelled, resumed or noticed.
    NodeNotThisHost,
    /// Set by the daemon, not the planner: nvidia-smi gave no data this cycle (a timeout, an
    /// error exit, no GPU rows), so no drain, cancel or notice is made in it. The engine's
    /// windows tolerate a hole of up to `policy.max_sample_gap`, so a job can keep its rung
    /// through such a cycle; acting on it would act on evidence missing now (operator trial
    /// 18: a job was cancelled in the cycle nvidia-smi hung, on readings two minutes old, and
    /// a slow nvidia-smi goes with busy GPUs).
    TelemetryNoData,
    /// The last alert for the job failed (its webhook) less than its retry delay ago: it is
    /// not sent again yet. The delay is a notice's ([`notice_retry_delay_s`]).
    AlertBackoff,
    /// Our drain for a job that has left (or works again) is not resumed: another job on the node is due a
    /// drain that is held back (the hourly budget, a notice still due), and will take it over
    /// (its Reason replaces ours) once it may. The node's Reason names the job that left until
    /// then (operator trial 16: nothing said why the node stayed drained).
    HandoverPending,
    /// Set from the daemon's reading: some GPU of the job gave no complete reading this cycle
    /// (no row for it, a value printed but unreadable such as `ERR!`, no utilisation, an
    /// unknown MIG mode; see `policy::is_complete_reading`), so no drain, cancel or notice is
    /// made for the job in it, as for [`SkipKind::TelemetryNoData`] (review 32: a job whose
    /// GPU had just started working but read `ERR!` for power was cancelled on readings a
    /// minute old).
    GpuUnread,
}

impl SkipKind {
    /// Every kind, for the metrics page (each reason is shown from the first scrape).
    pub const ALL: [SkipKind; 18] = [
        SkipKind::Paused,
        SkipKind::SuspectCollector,
        SkipKind::RateLimit,
        SkipKind::NodeSpecial,
        SkipKind::NodeStateUnknown,
        SkipKind::MultiNode,
        SkipKind::HetJob,
        SkipKind::DrainUnconfirmed,
        SkipKind::CancelPending,
        SkipKind::NoticePending,
        SkipKind::RecordsUnwritable,
        SkipKind::NoticeBackoff,
        SkipKind::AdminOverride,
        SkipKind::NodeNotThisHost,
        SkipKind::TelemetryNoData,
        SkipKind::AlertBackoff,
        SkipKind::HandoverPending,
        SkipKind::GpuUnread,
    ];

    /// A few plain words for people who do not know the labels (an alert's text reaches
    /// users through the webhook and the job's AdminComment; operator trial 18).
    pub fn plain(self) -> &'static str {
        match self {
            SkipKind::Paused => "enforcement is paused",
            SkipKind::SuspectCollector => "too many jobs look idle at once",
            SkipKind::RateLimit => "the hourly drain limit is reached",
            SkipKind::NodeSpecial => "the node is already drained or down",
            SkipKind::NodeStateUnknown => "the node's state is unknown",
            SkipKind::MultiNode => "the job spans nodes",
            SkipKind::HetJob => "the job is heterogeneous",
            SkipKind::DrainUnconfirmed => "no drain is confirmed",
            SkipKind::CancelPending => "a cancel is under way",
            SkipKind::NoticePending => "the notice period runs",
            SkipKind::RecordsUnwritable => "the enforcer cannot write its records",
            SkipKind::NoticeBackoff => "the notice could not be sent yet",
            SkipKind::AdminOverride => "an admin overrode it",
            SkipKind::NodeNotThisHost => "the enforcer is misconfigured",
            SkipKind::TelemetryNoData => "the GPUs could not be read just now",
            SkipKind::AlertBackoff => "the alert could not be sent yet",
            SkipKind::HandoverPending => "another job's drain is due",
            SkipKind::GpuUnread => "a GPU could not be read just now",
        }
    }

    /// Snake-case label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipKind::Paused => "paused",
            SkipKind::SuspectCollector => "suspect_collector",
            SkipKind::RateLimit => "rate_limit",
            SkipKind::NodeSpecial => "node_special_state",
            SkipKind::NodeStateUnknown => "node_state_unknown",
            SkipKind::MultiNode => "multi_node",
            SkipKind::HetJob => "het_job",
            SkipKind::DrainUnconfirmed => "drain_unconfirmed",
            SkipKind::CancelPending => "cancel_pending",
            SkipKind::NoticePending => "notice_pending",
            SkipKind::RecordsUnwritable => "records_unwritable",
            SkipKind::NoticeBackoff => "notice_backoff",
            SkipKind::AdminOverride => "admin_override",
            SkipKind::NodeNotThisHost => "node_not_this_host",
            SkipKind::TelemetryNoData => "telemetry_no_data",
            SkipKind::AlertBackoff => "alert_backoff",
            SkipKind::HandoverPending => "handover_pending",
            SkipKind::GpuUnread => "gpu_unread",
        }
    }
}

/// A verdict that did not become an action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skip {
    /// Why.
    pub kind: SkipKind,
    /// The action that was not taken.
    pub action: &'static str,
    /// The job, if any.
    pub job_id: Option<String>,
    /// The job whose drain, planned this same cycle, is the only reason this drain was
    /// skipped (one drain per node: `node_special_state` because the node is about to carry
    /// that job's drain). When the daemon then holds that drain back (records unwritable), the
    /// node stays as it was and this skip takes the same reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind_drain_of: Option<String>,
}

/// A drain the enforcer made (or, in observe mode, would have made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainRecord {
    /// The job the drain is for.
    pub job_id: String,
    /// The node.
    pub node: String,
    /// When it was made, epoch seconds.
    pub made_s: i64,
    /// True for an observe-mode would-drain.
    pub hypothetical: bool,
    /// When `scontrol show node` first showed this drain standing (drained, with our Reason
    /// for this job), epoch seconds; `None` until then, and always for a would-drain. Only a
    /// confirmed drain that later disappears while the job runs is an admin override. Absent
    /// in state files written before this field (read as `None`; confirmed again at the next
    /// cycle if the drain still stands).
    #[serde(default)]
    pub confirmed_s: Option<i64>,
}

/// An admin's resume of our drain, taken as an override for one run of the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminOverride {
    /// The job's start time (squeue `start_time`), epoch seconds: the override holds for this
    /// run only; `None` when squeue gave none (then it holds for whatever run has this id).
    pub start_s: Option<i64>,
    /// When the resume was noticed, epoch seconds.
    pub found_s: i64,
}

/// The earliest times a job's notice named for what may follow, epoch seconds (see
/// `crate::notice::text`). The planner holds a drain or cancel until the time the notice named
/// for it, so that a user is never acted on earlier than they were told, even when the
/// policy's stages were shortened (and the daemon restarted) after the notice went out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Announced {
    /// When the notice said the node may be drained, if it announced a drain yet to come.
    pub drain_at_s: Option<i64>,
    /// When the notice said the job may be cancelled, if it announced a cancel.
    pub cancel_at_s: Option<i64>,
}

/// A failed notice, for the retry backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoticeRetry {
    /// Failed attempts in a row (at least 1).
    pub failures: u32,
    /// When the last attempt failed, epoch seconds.
    pub last_s: i64,
}

/// The longest wait between two attempts at a failed notice: 30 minutes.
pub const NOTICE_RETRY_MAX_S: i64 = 30 * 60;

/// How long after its `failures`-th failed attempt in a row a notice is tried again: `first_s`
/// (the cycle interval) after the first failure, doubling with each further failure, at most
/// `max_s`. With a 60 s interval: 1, 2, 4, 8, 16, 30, 30, ... minutes.
pub fn notice_retry_delay_s(failures: u32, first_s: i64, max_s: i64) -> i64 {
    let doublings = failures.saturating_sub(1).min(32);
    first_s.max(1).saturating_mul(1i64 << doublings).min(max_s.max(first_s))
}

/// What the enforcer remembers of its own actions; persisted in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ActionState {
    /// Highest rung alerted per job, in the breach of its `alerted_s`.
    pub alerted: BTreeMap<String, Verdict>,
    /// When each job's `alerted` rung was recorded, epoch seconds. An alert counts only for
    /// the breach it was made in (recorded at or after that breach's start, `now − dwell_s`
    /// of the finding): a later breach of the same job alerts again from its first rung. A
    /// rung without a time here (a state file from before this field) counts for no breach.
    pub alerted_s: BTreeMap<String, i64>,
    /// When each job's user was given notice (or would have been), epoch seconds. A notice
    /// counts only for the breach it was delivered in (at or after that breach's start,
    /// `now − dwell_s` of the finding): a breach that ended (recovery, an evidence outage, a
    /// restart of the engine's escalation) needs a new notice, and its cancel waits `notice`
    /// from that one.
    pub noticed: BTreeMap<String, i64>,
    /// What each job's last notice announced ([`JobView::reachable`] then). Absent in older
    /// files: such a notice counts as covering everything, as it did.
    #[serde(default)]
    pub noticed_top: BTreeMap<String, Verdict>,
    /// The times each job's last notice named (see [`Announced`]). Absent in older files:
    /// such a notice holds nothing back, as before.
    #[serde(default)]
    pub announced: BTreeMap<String, Announced>,
    /// Drains made, per job.
    pub drains: BTreeMap<String, DrainRecord>,
    /// Cancels sent, per job, epoch seconds.
    pub cancels: BTreeMap<String, i64>,
    /// Times of drains in the last hour, for the budget: real ones, and, in files from before
    /// `would_drain_times_s`, observe mode's would-drains too.
    pub drain_times_s: Vec<i64>,
    /// Times of cancels in the last hour, for the budget (as `drain_times_s`).
    pub cancel_times_s: Vec<i64>,
    /// Times of observe mode's would-drains in the last hour: they spend observe mode's budget
    /// (with the real ones) and are dropped when the mode changes.
    #[serde(default)]
    pub would_drain_times_s: Vec<i64>,
    /// Times of observe mode's would-cancels in the last hour (as `would_drain_times_s`).
    #[serde(default)]
    pub would_cancel_times_s: Vec<i64>,
    /// Jobs whose last notice was observe mode's would-notice, which told nobody: dropped
    /// (with the times it named) when the mode changes. A real notice stays across mode
    /// changes (review 14): its user was told, and its times still hold.
    #[serde(default)]
    pub would_noticed: BTreeSet<String>,
    /// Last suspect-collector admin alert.
    pub suspect_alerted_s: Option<i64>,
    /// The last cycle in which the suspect-collector rule tripped (see
    /// [`Limits::suspect_hold_s`]). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect_last_s: Option<i64>,
    /// Failed notices per job, for the retry backoff; cleared when a notice goes out. A
    /// failure made before the current breach began counts for nothing.
    pub notice_retries: BTreeMap<String, NoticeRetry>,
    /// Jobs whose failed notice a daemon start has already tried again at once (see
    /// [`ActionState::retry_failed_notices_at_start`]): later starts leave their backoff alone,
    /// until a notice of theirs goes out or they end. Absent in older files.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub notice_start_retried: BTreeSet<String>,
    /// Failed alerts per job (a webhook that failed), for the same retry backoff as notices;
    /// cleared when an alert of the job goes out. Absent in older files.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub alert_retries: BTreeMap<String, NoticeRetry>,
    /// Jobs whose confirmed drain an admin resumed while they ran (see
    /// [`ActionState::observe_node`]): never drained or cancelled again in that run.
    pub overrides: BTreeMap<String, AdminOverride>,
}

/// Counts a failure of `job_id` at `now_s` in `retries`, starting the count afresh when the
/// last one was before `breach_start_s` (an earlier breach).
fn failed_at(retries: &mut BTreeMap<String, NoticeRetry>, job_id: &str, now_s: i64, breach_start_s: i64) {
    let r = retries.entry(job_id.to_string()).or_insert(NoticeRetry {
        failures: 0,
        last_s: now_s,
    });
    if r.last_s < breach_start_s {
        r.failures = 0;
    }
    r.failures = r.failures.saturating_add(1);
    r.last_s = now_s;
}

impl ActionState {
    /// Forgets jobs that are no longer running and budget entries older than an hour. With
    /// `running = None` (squeue failed) nothing job-related is forgotten.
    pub fn prune(&mut self, now_s: i64, running: Option<&BTreeSet<String>>) {
        for times in [
            &mut self.drain_times_s,
            &mut self.cancel_times_s,
            &mut self.would_drain_times_s,
            &mut self.would_cancel_times_s,
        ] {
            times.retain(|t| *t > now_s.saturating_sub(3600));
        }
        if let Some(r) = running {
            self.alerted.retain(|j, _| r.contains(j));
            self.alerted_s.retain(|j, _| r.contains(j));
            self.noticed.retain(|j, _| r.contains(j));
            self.noticed_top.retain(|j, _| r.contains(j));
            self.announced.retain(|j, _| r.contains(j));
            self.would_noticed.retain(|j| r.contains(j));
            self.cancels.retain(|j, _| r.contains(j));
            self.drains.retain(|j, _| r.contains(j));
            self.notice_retries.retain(|j, _| r.contains(j));
            self.notice_start_retried.retain(|j| r.contains(j));
            self.alert_retries.retain(|j, _| r.contains(j));
        }
    }

    /// At a daemon start (an operator's restart is how they say the notice channel is fixed):
    /// each failed notice is tried again in the first cycle, its backoff starting over, once
    /// per job until one of its notices goes out. A start after that leaves the backoff as it
    /// is (review 31: a daemon restarted every other cycle, with a notify command that delivers
    /// and then fails, told the user at every start). Returns how many are tried at once.
    pub fn retry_failed_notices_at_start(&mut self) -> usize {
        let granted = &mut self.notice_start_retried;
        let before = self.notice_retries.len();
        self.notice_retries.retain(|j, _| !granted.insert(j.clone()));
        before - self.notice_retries.len()
    }

    /// Forgets the admin overrides of jobs that squeue no longer lists in any state (`listed`,
    /// from a read without row errors). An override lasts the job's run, and a suspended job,
    /// or one whose state is unknown, is still in that run (the override is keyed by its start
    /// time, so a requeue ends it anyway).
    pub fn prune_overrides(&mut self, listed: &BTreeSet<String>) {
        self.overrides.retain(|j, _| listed.contains(j));
    }

    /// Drops the records of the other mode after a mode change: hypothetical drains never
    /// count toward a real cancel, no cancel is pending across the change, and notices are
    /// forgotten (observe mode's would-notice told nobody, so enforce mode gives the notice
    /// for real and counts `notice` from then).
    pub fn drop_hypothetical(&mut self) {
        self.drains.retain(|_, d| !d.hypothetical);
        self.cancels.clear();
        for job in std::mem::take(&mut self.would_noticed) {
            self.noticed.remove(&job);
            self.noticed_top.remove(&job);
            self.announced.remove(&job);
        }
        self.notice_retries.clear();
        self.notice_start_retried.clear();
        self.alert_retries.clear();
        // Observe mode's would-drains and would-cancels spend no real budget; real drains and
        // cancels keep theirs across the change (review 14).
        self.would_drain_times_s.clear();
        self.would_cancel_times_s.clear();
    }

    /// Records a failed notice attempt at `now_s`, for the retry backoff, in the breach that
    /// began at `breach_start_s`: failures of an earlier breach are not counted on.
    pub fn notice_failed(&mut self, job_id: &str, now_s: i64, breach_start_s: i64) {
        failed_at(&mut self.notice_retries, job_id, now_s, breach_start_s);
    }

    /// Records a failed alert (its webhook) at `now_s`, as [`ActionState::notice_failed`]
    /// does a notice (operator trial 18: a webhook that took the post and then timed out was
    /// posted to every cycle, 9 alerts in 10 minutes).
    pub fn alert_failed(&mut self, job_id: &str, now_s: i64, breach_start_s: i64) {
        failed_at(&mut self.alert_retries, job_id, now_s, breach_start_s);
    }

    /// Compares the real drains remembered for `node` with the node's state this cycle
    /// (enforce mode; `node_state` from `scontrol show node`, `running_here` the jobs squeue
    /// shows RUNNING on this node with their start times). A drain shown standing (drained,
    /// our Reason for its job) is marked confirmed. A confirmed drain that is gone (the node
    /// is no longer drained and no longer carries our Reason for the job) while its job still
    /// runs here was resumed by an admin: the drain record is dropped and an
    /// [`AdminOverride`] is recorded for that run of the job. Returns the jobs newly
    /// overridden. Nothing happens when the node state is unknown.
    pub fn observe_node(
        &mut self,
        now_s: i64,
        node: &str,
        node_state: Option<&NodeState>,
        running_here: &BTreeMap<String, Option<i64>>,
    ) -> Vec<String> {
        let Some(ns) = node_state else { return Vec::new() };
        let ours = our_drain(Some(ns));
        // Our drain standing for a running job without a record of it (the drain command
        // reported a failure, a timeout say, though Slurm applied it): it is recorded as seen,
        // so that an admin's later resume of it is an override like any other.
        if let Some(j) = ours
            .as_deref()
            .filter(|j| running_here.contains_key(*j) && !self.drains.contains_key(*j))
        {
            self.drains.insert(
                j.to_string(),
                DrainRecord {
                    job_id: j.to_string(),
                    node: node.to_string(),
                    made_s: now_s,
                    hypothetical: false,
                    confirmed_s: Some(now_s),
                },
            );
        }
        let mut found = Vec::new();
        for d in self.drains.values_mut().filter(|d| !d.hypothetical && d.node == node) {
            if ours.as_deref() == Some(d.job_id.as_str()) {
                d.confirmed_s.get_or_insert(now_s);
            } else if d.confirmed_s.is_some()
                && !ns.has_drain()
                && ns.our_reason_job().as_deref() != Some(d.job_id.as_str())
                && running_here.contains_key(&d.job_id)
            {
                found.push(d.job_id.clone());
            }
        }
        for j in &found {
            self.drains.remove(j);
            self.overrides.insert(
                j.clone(),
                AdminOverride {
                    start_s: running_here.get(j).copied().flatten(),
                    found_s: now_s,
                },
            );
        }
        found
    }

    /// True when an admin's override holds for this run of the job (`start_s`, squeue's
    /// start time): it is never drained or cancelled again in that run.
    pub fn overridden(&self, job_id: &str, start_s: i64) -> bool {
        self.overrides.get(job_id).is_some_and(|o| o.start_s.is_none_or(|s| s == start_s))
    }

    /// Drops the record of our drain for `job_id` (see the daemon's handling of a failed
    /// resume).
    pub fn forget_drain(&mut self, job_id: &str) {
        self.drains.remove(job_id);
    }

    /// Marks our real drain for `job_id` on `node` as seen standing at `now_s` (read back from
    /// `scontrol show node` right after the drain command), so that an admin's resume before
    /// the next cycle's read is an override (review 35). No record, a hypothetical one, or one
    /// for another node: nothing changes.
    pub fn drain_seen(&mut self, job_id: &str, node: &str, now_s: i64) {
        if let Some(d) = self.drains.get_mut(job_id).filter(|d| !d.hypothetical && d.node == node) {
            d.confirmed_s.get_or_insert(now_s);
        }
    }

    /// Records an action that was carried out (or logged as would-do in observe mode).
    pub fn record(&mut self, a: &Action, now_s: i64, hypothetical: bool) {
        match a {
            // The planner alerts only above the rung already alerted in this breach, so the
            // new rung replaces the old one: a rung from an earlier breach is not kept.
            Action::Alert { job_id, verdict, .. } => {
                self.alerted.insert(job_id.clone(), *verdict);
                self.alerted_s.insert(job_id.clone(), now_s);
                self.alert_retries.remove(job_id);
            }
            Action::Notice { job_id, .. } => {
                self.noticed.insert(job_id.clone(), now_s);
                self.notice_retries.remove(job_id);
                self.notice_start_retried.remove(job_id);
                if hypothetical {
                    self.would_noticed.insert(job_id.clone());
                } else {
                    self.would_noticed.remove(job_id);
                }
            }
            Action::Drain { job_id, node, .. } => {
                if hypothetical {
                    self.would_drain_times_s.push(now_s);
                } else {
                    self.drain_times_s.push(now_s);
                    // The node carries one Reason of ours: a drain for this job takes it over
                    // from any other job's (one that left, or works again), whose record is
                    // then over. Kept, it would make the node's later resume look like an
                    // admin's while that job runs (review 33).
                    self.drains.retain(|j, d| d.hypothetical || d.node != *node || j == job_id);
                }
                self.drains.insert(
                    job_id.clone(),
                    DrainRecord {
                        job_id: job_id.clone(),
                        node: node.clone(),
                        made_s: now_s,
                        hypothetical,
                        confirmed_s: None,
                    },
                );
            }
            Action::Cancel { job_id, .. } => {
                if hypothetical {
                    self.would_cancel_times_s.push(now_s);
                } else {
                    self.cancel_times_s.push(now_s);
                }
                self.cancels.insert(job_id.clone(), now_s);
            }
            // A job that works again keeps running: our drain for it is over, and a later
            // breach needs a drain of its own (its record is otherwise dropped once the job
            // has left, with the rest of what is kept for it).
            Action::Resume {
                job_id, recovered: true, ..
            } => {
                self.drains.remove(job_id);
            }
            Action::Resume { .. } => {}
            Action::AdminAlert { .. } => self.suspect_alerted_s = Some(now_s),
        }
    }
}

/// Damage limits and switches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Drains per rolling hour.
    pub max_drains_per_hour: u32,
    /// Cancels per rolling hour.
    pub max_cancels_per_hour: u32,
    /// Suspect-collector rule: minimum evaluated GPU jobs.
    pub suspect_min_jobs: u32,
    /// Suspect-collector rule: fraction at alert or above that trips it (strictly more).
    pub suspect_frac: f64,
    /// Suspect-collector rule: how long the hold lasts after the last cycle that tripped it,
    /// seconds (the daemon gives `policy.window`): the windows then still hold the readings
    /// the rule distrusted, whatever the jobs alerting now (review 36: one job of three
    /// leaving lifted the hold, and the next was drained on those readings).
    pub suspect_hold_s: i64,
    /// A channel that tells the job's user is configured (`notify_command`, or the webhook
    /// with `webhook_reaches_users`): a notice action is planned at the first alert of each
    /// breach of a job, and a drain waits until that notice was delivered in an earlier cycle
    /// (`notice_pending` until then).
    pub notify: bool,
    /// `policy.notice`, seconds: with a channel, and always in enforce mode, a cancel also
    /// needs a notice delivered in the current breach at least this long ago (the engine
    /// counts from the first alert; this counts from the notice that really went out, so a
    /// failed notice holds the cancel, and a notice from an earlier breach counts for nothing).
    pub notice_s: i64,
    /// Wait after a first failed notice before it is tried again, seconds (the daemon gives
    /// `policy.interval`); it doubles with each further failure (see [`notice_retry_delay_s`]).
    pub notice_retry_first_s: i64,
    /// The longest wait between notice attempts, seconds ([`NOTICE_RETRY_MAX_S`]).
    pub notice_retry_max_s: i64,
}

/// One judged job.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    /// The facts given to the engine.
    pub job: &'a JobFacts,
    /// The engine's finding.
    pub finding: &'a Finding,
    /// Slurm node names of the allocation (length > 1 means multi-node).
    pub nodes: &'a [String],
    /// The most the enforcer may do to the job while it looks as it does now: the lower of
    /// its signature's ceiling and the highest stage (`Alert` for a job it never drains or
    /// cancels). A notice covers what it announced: when this rises above what the user was
    /// told (a job noticed as `partial`, alert only, that now looks `idle`), a new notice is
    /// due and a cancel waits `notice` from that one.
    pub reachable: Verdict,
    /// The enforcer never drains or cancels this job while this holds: it runs on several
    /// nodes, is a het-job component, an admin overrode our drain in this run, or squeue left
    /// a field an exemption reads unknown (it may have opted out).
    pub alert_only: bool,
    /// How long the breach has stood at a level whose ceiling allows a drain, and a cancel,
    /// seconds (`policy::Engine::level_dwells_s`): the notice counts the stages from them, as
    /// the engine does. `None`: not at such a level (the finding's dwell is used).
    pub level_dwells_s: (Option<i64>, Option<i64>),
}

/// Everything [`plan`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// Cycle time, epoch seconds.
    pub now_s: i64,
    /// Observe or enforce.
    pub mode: RunMode,
    /// This node's name.
    pub node: &'a str,
    /// This node's state this cycle; `None` when `scontrol show node` failed.
    pub node_state: Option<&'a NodeState>,
    /// The judged jobs.
    pub jobs: &'a [JobView<'a>],
    /// Ids of every RUNNING job in squeue; `None` when squeue failed this cycle.
    pub running: Option<&'a BTreeSet<String>>,
    /// The pause file exists.
    pub paused: bool,
    /// `scontrol show node` named a `NodeHostName` that is not this host (see
    /// `config::host_mismatch`): the configured node is another one, and nothing is drained,
    /// cancelled, resumed or noticed this cycle. Alerts (log, webhook) still go out.
    pub not_this_host: bool,
    /// Damage limits.
    pub limits: Limits,
    /// What was done before.
    pub state: &'a ActionState,
    /// Jobs whose evidence this cycle is not read whole, with the hold to report: every job
    /// when nvidia-smi gave no data ([`SkipKind::TelemetryNoData`]), or those with a GPU
    /// whose reading is incomplete ([`SkipKind::GpuUnread`]). No drain, cancel or notice is
    /// planned for them: the engine's windows tolerate a hole of up to `max_sample_gap`, so
    /// its verdict may stand on readings from before this cycle. Alerts go on.
    pub unread: &'a BTreeMap<String, SkipKind>,
    /// Jobs our drain (enforce mode) or would-drain (observe mode) on this node is for that
    /// still run here and have recovered this cycle (`policy::Recovery`, kept by the daemon):
    /// the drain is resumed, or taken over by another job due for one, as for a job that left.
    pub recovered: &'a BTreeSet<String>,
}

/// The actions and skips of one cycle.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// To carry out, in order.
    pub actions: Vec<Action>,
    /// Verdicts that did not become actions.
    pub skips: Vec<Skip>,
    /// The suspect-collector rule holds this cycle: it tripped now, or within
    /// [`Limits::suspect_hold_s`] of now.
    pub suspect: bool,
    /// The suspect-collector rule tripped this cycle (the caller records it as
    /// [`ActionState::suspect_last_s`]).
    pub suspect_tripped: bool,
}

/// The job named by our drain on this node, if the node is drained with one of our Reasons.
fn our_drain(node: Option<&NodeState>) -> Option<String> {
    node.filter(|n| n.has_drain()).and_then(|n| n.our_reason_job())
}

/// Plans one cycle. Pure: the same input gives the same plan.
pub fn plan(inp: &PlanInput<'_>) -> Plan {
    let mut p = Plan::default();
    let st = inp.state;
    let evaluated = inp.jobs.len() as u32;
    let alerting = inp.jobs.iter().filter(|j| j.finding.verdict >= Verdict::Alert).count() as f64;
    p.suspect_tripped = evaluated >= inp.limits.suspect_min_jobs && evaluated > 0 && alerting > inp.limits.suspect_frac * evaluated as f64;
    // A clock stepped back keeps the hold (the difference is negative).
    p.suspect = p.suspect_tripped
        || st
            .suspect_last_s
            .is_some_and(|t| inp.now_s.saturating_sub(t) <= inp.limits.suspect_hold_s);
    if p.suspect_tripped && st.suspect_alerted_s.is_none_or(|t| inp.now_s.saturating_sub(t) >= 3600) {
        p.actions.push(Action::AdminAlert {
            text: format!(
                "gpu-reaper on {}: {alerting} of {evaluated} GPU jobs at alert or above in one cycle; suspecting the collector, no drain or cancel for a window",
                inp.node
            ),
        });
    }
    let mut drains_left = inp.limits.max_drains_per_hour.saturating_sub(
        st.drain_times_s
            .iter()
            .chain(&st.would_drain_times_s)
            .filter(|t| **t > inp.now_s - 3600)
            .count() as u32,
    );
    let mut cancels_left = inp.limits.max_cancels_per_hour.saturating_sub(
        st.cancel_times_s
            .iter()
            .chain(&st.would_cancel_times_s)
            .filter(|t| **t > inp.now_s - 3600)
            .count() as u32,
    );
    let ours = our_drain(inp.node_state);
    // Our drain whose job no longer runs here (squeue answered), on a node in no other special
    // state: due for a resume. Another job of ours due for a drain on this node takes the drain
    // over instead (the Reason is rewritten), so the node never returns to service between
    // the two and no new job lands on it in the gap.
    // Our drain whose job still runs here but works again (trial 17: a drain stood until its
    // job ended, hours after a long checkpoint or staging phase was over) is over too.
    let done_with = |j: &String| inp.running.is_some_and(|r| !r.contains(j) || inp.recovered.contains(j));
    let handover_from: Option<String> = ours
        .clone()
        .filter(|j| inp.mode == RunMode::Enforce && done_with(j) && !inp.node_state.is_some_and(NodeState::is_special_besides_drain));
    // Observe mode never really drains, so it mirrors what enforce would see: its own
    // would-drain on this node makes the node drained-by-us for that job.
    let mut drain_planned: Option<String> = None;
    // Some job due for a drain would take over our drain for a job that has left (see below).
    let mut takeover_wanted = false;
    let would_ours: Option<String> = st
        .drains
        .values()
        .find(|d| d.hypothetical && d.node == inp.node)
        .map(|d| d.job_id.clone());
    let skip = |p: &mut Plan, kind, action, job: &str| {
        p.skips.push(Skip {
            kind,
            action,
            job_id: Some(job.to_string()),
            behind_drain_of: None,
        })
    };

    for jv in inp.jobs {
        let f = jv.finding;
        let v = f.verdict;
        if v < Verdict::Alert {
            continue;
        }
        let job = jv.job;
        let id = job.job_id.as_str();
        let reason = f.reason(job);
        let sig = f.signature_name().to_string();
        // Records made before this breach began belong to an earlier breach that ended (the
        // engine ends a breach on recovery, broken evidence or a restart): they count for
        // nothing here, so each breach is alerted and noticed on its own. This rests on the
        // engine: whatever ended the earlier breach (a busy sample, a hole, a stretch of
        // frozen copies, a clock step) stays in the window until it has left it, so the new
        // breach's start, `now − dwell_s`, comes after it (review 18: before frozen copies
        // counted as a hole once they ended, a breach resumed a minute after a freeze with its
        // start backdated past the earlier notice, and was not noticed again).
        let breach_start_s = inp.now_s.saturating_sub(f.dwell_s.max(0));
        let in_breach = |t: Option<&i64>| t.copied().filter(|t| *t >= breach_start_s);
        let alerted = st.alerted.get(id).filter(|_| in_breach(st.alerted_s.get(id)).is_some());
        // A notice counts only for what it announced: a rise in what may follow needs a new one.
        let covered = st.noticed_top.get(id).is_none_or(|top| *top >= jv.reachable);
        let noticed_s = in_breach(st.noticed.get(id)).filter(|_| covered);
        // What the job's last notice named, in this breach or an earlier one of the same run
        // (a restart or an evidence gap starts a new breach, review 14): nothing comes
        // earlier than it said. Times in the past hold nothing.
        let announced = st.announced.get(id).copied().unwrap_or_default();
        let too_early = |at: Option<i64>| at.is_some_and(|t| inp.now_s < t);
        // A failed alert is tried again after the notices' growing delay, not every cycle.
        let unread = inp.unread.get(id);
        let lim = &inp.limits;
        let alert_waiting = st.alert_retries.get(id).filter(|r| r.last_s >= breach_start_s).is_some_and(|r| {
            inp.now_s.saturating_sub(r.last_s) < notice_retry_delay_s(r.failures, lim.notice_retry_first_s, lim.notice_retry_max_s)
        });
        if alerted.is_none_or(|r| *r < v) && alert_waiting {
            skip(&mut p, SkipKind::AlertBackoff, "alert", id);
        } else if alerted.is_none_or(|r| *r < v) {
            p.actions.push(Action::Alert {
                job_id: id.into(),
                user: job.user.clone(),
                partition: job.partition.clone(),
                verdict: v,
                signature: sig.clone(),
                reason: reason.clone(),
            });
        }
        if inp.limits.notify && noticed_s.is_none() {
            // A failed notice is tried again after a growing delay, never every cycle: a
            // notify command that delivers and then times out would otherwise tell the user
            // once a cycle. A failure from an earlier breach does not delay this one's notice.
            let lim = &inp.limits;
            let waiting = st.notice_retries.get(id).filter(|r| r.last_s >= breach_start_s).is_some_and(|r| {
                inp.now_s.saturating_sub(r.last_s) < notice_retry_delay_s(r.failures, lim.notice_retry_first_s, lim.notice_retry_max_s)
            });
            if waiting {
                skip(&mut p, SkipKind::NoticeBackoff, "notice", id);
            } else if let Some(&k) = unread {
                skip(&mut p, k, "notice", id);
            } else if inp.mode == RunMode::Enforce && inp.node_state.is_none() {
                // What the notice says depends on the node: drained by us or not, and since
                // when. Without its state this cycle, the notice waits for the next (trial 8:
                // one said "drained now" of a drain an admin had just resumed).
                skip(&mut p, SkipKind::NodeStateUnknown, "notice", id);
            } else {
                p.actions.push(Action::Notice {
                    job_id: id.into(),
                    user: job.user.clone(),
                    reason: reason.clone(),
                });
            }
        }
        if v < Verdict::Drain {
            continue;
        }
        // An admin resumed our drain while this run of the job went on: their call stands for
        // the rest of the run (alerts go on, drains and cancels do not).
        if st.overridden(id, job.start_s) {
            skip(&mut p, SkipKind::AdminOverride, "drain", id);
            if v >= Verdict::Cancel {
                skip(&mut p, SkipKind::AdminOverride, "cancel", id);
            }
            continue;
        }
        // One component's evidence says nothing about the others, and scancel of component 0
        // ends them all: a het job stops at alert, like a multi-node job.
        if crate::parse::is_het_component(id) {
            skip(&mut p, SkipKind::HetJob, "drain", id);
            continue;
        }
        if jv.nodes.len() != 1 || jv.nodes[0] != inp.node {
            skip(&mut p, SkipKind::MultiNode, "drain", id);
            continue;
        }
        // Is there a drain of ours for this job? Enforce: the node's Reason says so (this
        // survives restarts). Observe: our would-drain record.
        let drained_for_job = match inp.mode {
            RunMode::Enforce => ours.as_deref() == Some(id),
            RunMode::Observe => would_ours.as_deref() == Some(id),
        };
        // One drain per node: a drain planned earlier this cycle for another job makes the node
        // special for the rest of the cycle (its Reason names that job).
        let node_special = match handover_from {
            Some(_) => inp.node_state.is_some_and(NodeState::is_special_besides_drain),
            None => inp.node_state.is_some_and(NodeState::is_special),
        };
        let special_already = node_special || (inp.mode == RunMode::Observe && would_ours.is_some());
        let behind = drain_planned.as_deref().filter(|j| *j != id);
        // A user whose last notice said no drain would follow is told before one does
        // (review 14: the drain came in the cycle the rise was noticed, before the notice).
        let told_no_drain = st.noticed.contains_key(id) && st.noticed_top.get(id).is_some_and(|top| *top < Verdict::Drain);
        // With a channel to the user the user is told before the node is drained: the drain
        // waits for a notice of this breach (covering what may now follow) delivered in an
        // earlier cycle (operator trial 16: after a pause, whose cycles notice nobody, the first
        // unpaused cycle drained before any notice went out). Not without such a channel: no
        // notice is ever planned then, and enforce mode accepts a drain-only policy whose only
        // channel is a webhook to the admins; holding its drains for a notice that cannot come
        // would stop every drain (a cancel there is refused at load, and held below).
        let notice_first = inp.limits.notify && noticed_s.is_none_or(|t| t >= inp.now_s);
        // Enforce mode without the node's state this cycle cannot see our drain, but may have
        // it on record, confirmed: then no drain is due, and what is held is the cancel, for
        // `node_state_unknown` (operator trial 17: the log said a drain was skipped, and the
        // cancel `drain_unconfirmed`). Reporting only: nothing is done either way.
        let drain_on_record = inp.mode == RunMode::Enforce
            && inp.node_state.is_none()
            && st
                .drains
                .get(id)
                .is_some_and(|d| !d.hypothetical && d.confirmed_s.is_some() && d.node == inp.node);
        if !drained_for_job && !drain_on_record {
            // The structural reasons (a suspect collector, the node's state, the budget) are
            // reported first; the notice's hold comes last.
            if p.suspect {
                skip(&mut p, SkipKind::SuspectCollector, "drain", id);
            } else if inp.node_state.is_none() {
                skip(&mut p, SkipKind::NodeStateUnknown, "drain", id);
            } else if special_already {
                skip(&mut p, SkipKind::NodeSpecial, "drain", id);
            } else if let Some(first) = behind {
                p.skips.push(Skip {
                    kind: SkipKind::NodeSpecial,
                    action: "drain",
                    job_id: Some(id.to_string()),
                    behind_drain_of: Some(first.to_string()),
                });
            } else if let Some(&k) = unread {
                // Not read whole this cycle: held like a notice still due (a takeover waits).
                skip(&mut p, k, "drain", id);
                takeover_wanted |= handover_from.is_some();
            } else if drains_left == 0 {
                skip(&mut p, SkipKind::RateLimit, "drain", id);
                // A job due for a drain while our drain for a job that has left still stands
                // takes it over; held back only by the hourly budget, or (below) by a notice
                // still due, our drain is not resumed in between (trial 15: the node was open
                // for 29 minutes while a hung job still held it). Not on a suspect collector's
                // word, nor with a budget of 0, which never refills (review 30).
                takeover_wanted |= handover_from.is_some() && inp.limits.max_drains_per_hour > 0;
            } else if too_early(announced.drain_at_s) || told_no_drain || notice_first {
                skip(&mut p, SkipKind::NoticePending, "drain", id);
                takeover_wanted |= handover_from.is_some();
            } else {
                drains_left -= 1;
                drain_planned = Some(id.to_string());
                p.actions.push(Action::Drain {
                    node: inp.node.into(),
                    job_id: id.into(),
                    node_reason: scontrol_node::reason(&sig, id),
                    signature: sig.clone(),
                    reason: reason.clone(),
                });
            }
        }
        if v < Verdict::Cancel {
            continue;
        }
        if drain_on_record {
            skip(&mut p, SkipKind::NodeStateUnknown, "cancel", id);
        } else if !drained_for_job {
            skip(&mut p, SkipKind::DrainUnconfirmed, "cancel", id);
        } else if st.cancels.contains_key(id) {
            skip(&mut p, SkipKind::CancelPending, "cancel", id);
        } else if inp.node_state.is_none() {
            skip(&mut p, SkipKind::NodeStateUnknown, "cancel", id);
        } else if inp.node_state.is_some_and(|n| match inp.mode {
            // Our drain stands; anything else (down, not responding, failed, maintenance,
            // reserved, a reboot) means the node is not in the state the cancel was planned
            // for: an admin decides, as for the resume.
            RunMode::Enforce => n.is_special_besides_drain(),
            // Observe mode never really drained, so any special state counts.
            RunMode::Observe => n.is_special(),
        }) {
            skip(&mut p, SkipKind::NodeSpecial, "cancel", id);
        } else if let Some(&k) = unread {
            skip(&mut p, k, "cancel", id);
        } else if ((inp.limits.notify || inp.mode == RunMode::Enforce)
            && noticed_s.is_none_or(|t| inp.now_s.saturating_sub(t) < inp.limits.notice_s))
            || too_early(announced.cancel_at_s)
        {
            // Guard 6 counts `notice` from the first alert because that is when the user is
            // told; here it counts from the notice that was really delivered. Enforce mode
            // never cancels without one (a config with no channel is refused at load, and
            // this holds even if one slipped through).
            skip(&mut p, SkipKind::NoticePending, "cancel", id);
        } else if p.suspect {
            skip(&mut p, SkipKind::SuspectCollector, "cancel", id);
        } else if cancels_left == 0 {
            skip(&mut p, SkipKind::RateLimit, "cancel", id);
        } else {
            cancels_left -= 1;
            p.actions.push(Action::Cancel {
                job_id: id.into(),
                signature: sig,
                reason,
            });
        }
    }

    // Undrain: our Reason, job no longer running (only when squeue answered). A node that
    // has meanwhile gone down, failed, stopped responding, entered maintenance or a reboot
    // keeps its drain: Slurm keeps an existing Reason when it marks a node down, so our Reason
    // alone does not say the node is fit to return; an admin decides.
    if let (Some(job), Some(running)) = (ours, inp.running) {
        let recovered = running.contains(&job) && inp.recovered.contains(&job);
        if !running.contains(&job) || recovered {
            if handover_from.is_some() && drain_planned.is_some() {
                // Taken over by this cycle's drain for another job: no resume in between.
            } else if handover_from.is_some() && takeover_wanted {
                // Wanted by a job whose drain is held back: no resume in between, and said.
                skip(&mut p, SkipKind::HandoverPending, "resume", &job);
            } else if inp.node_state.is_some_and(NodeState::is_special_besides_drain) {
                skip(&mut p, SkipKind::NodeSpecial, "resume", &job);
            } else {
                p.actions.push(Action::Resume {
                    node: inp.node.into(),
                    job_id: job,
                    recovered,
                });
            }
        }
    }
    // Observe mode: our would-drain whose job works again would be resumed (the node is not
    // really drained, so no takeover is mirrored: another job due for a drain makes its own
    // would-drain in a later cycle).
    if inp.mode == RunMode::Observe && drain_planned.is_none() {
        if let Some(job) = would_ours.filter(|j| inp.running.is_some_and(|r| r.contains(j)) && inp.recovered.contains(j)) {
            p.actions.push(Action::Resume {
                node: inp.node.into(),
                job_id: job,
                recovered: true,
            });
        }
    }

    // The configured node is another host's: this node's GPUs were judged against that
    // node's jobs, so nothing that changes Slurm or contacts a user is done.
    if inp.not_this_host {
        hold_back(&mut p, SkipKind::NodeNotThisHost, Action::changes_something);
    }

    // An alert at drain or above whose drain this cycle holds back says what holds it
    // (operator trial 16: the alert said only `held by drain_unconfirmed`, the policy's cap
    // on the cancel, while the drain itself waited for the user's notice). After the hold for
    // a node that is another host's, which renames every skip (review 31: the alert named the
    // hold it replaced); the pause holds the alerts too.
    for a in &mut p.actions {
        if let Action::Alert {
            job_id, verdict, reason, ..
        } = a
        {
            let held = p
                .skips
                .iter()
                .find(|s| s.action == "drain" && s.job_id.as_deref() == Some(job_id.as_str()));
            if let (true, Some(s)) = (*verdict >= Verdict::Drain, held) {
                say_drain_held(reason, s.kind);
            }
        }
    }

    // The pause file comes first: while it exists it is the reason nothing is done, whatever
    // else would also have held an action back (a special node, a budget, a suspect
    // collector), so every skip says `paused`.
    if inp.paused {
        hold_back(&mut p, SkipKind::Paused, |_| true);
    }
    p
}

/// Ends an alert's `reason` with what holds its job's drain back: `; drain held: <plain
/// words> (<kind>)`, kept to one line under 200 characters.
pub fn say_drain_held(reason: &mut String, kind: SkipKind) {
    *reason = policy::one_line(&format!("{reason}; drain held: {} ({})", kind.plain(), kind.as_str()), 199);
}

/// Turns every planned action that `held` selects into a skip of `kind`; the skips already
/// made keep their own reasons (unlike [`hold_back`]'s).
fn hold_actions(p: &mut Plan, kind: SkipKind, held: impl Fn(&Action) -> bool) {
    let (gone, keep): (Vec<Action>, Vec<Action>) = std::mem::take(&mut p.actions).into_iter().partition(|a| held(a));
    p.actions = keep;
    for a in gone {
        p.skips.push(Skip {
            kind,
            action: a.kind(),
            job_id: a.job_id().map(str::to_string),
            behind_drain_of: None,
        });
    }
}

/// Turns every planned action that `held` selects into a skip of `kind`, and gives every skip
/// already made that kind too: it is then the reason the action is not taken.
fn hold_back(p: &mut Plan, kind: SkipKind, held: impl Fn(&Action) -> bool) {
    for s in &mut p.skips {
        s.kind = kind;
    }
    hold_actions(p, kind, held);
}
