//! Pure parsers, one file per source: text in, typed values or an error naming the offending
//! text out. None of them runs a process, reads a file or looks at the clock; the callers in
//! [`crate::slurm`] and [`crate::telemetry`] do that and hand the text over.

pub mod cgroup;
pub mod gres_detail;
pub mod hostlist;
pub mod scontrol_node;
pub mod smi;
pub mod squeue_format;
pub mod squeue_json;
pub mod tres;

use serde::Serialize;

/// Serializes an empty text field as `null`: `enforcer parse` shows a field the source did not
/// give (or gave empty) as null, never as a value.
fn empty_as_null<S: serde::Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
    if v.is_empty() {
        s.serialize_none()
    } else {
        s.serialize_str(v)
    }
}

/// One Slurm job as squeue reports it, whatever the source (JSON or `--Format`). Text fields
/// the source does not give are empty here and `null` in `enforcer parse` output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct SlurmJob {
    /// The exact job id: `N`, array task `N_M`, het component `N+K`. This is what scancel
    /// and scontrol are given, so an array's base id or a het leader is never hit by accident.
    pub job_id: String,
    /// The numeric job id unique to this job, array task or het component (squeue `JobID`,
    /// JSON `job_id`); cgroup paths before Slurm 26.05 carry it as `job_<raw_id>`.
    pub raw_id: Option<u64>,
    /// The Slurm 26.05 SLUID (`s` + 13 Crockford base32 characters), when the source has it.
    pub sluid: Option<String>,
    /// Base state, e.g. `RUNNING`, `PENDING`; empty when the source gave none (see
    /// [`SlurmJob::state_unknown`]).
    #[serde(serialize_with = "empty_as_null")]
    pub state: String,
    /// State flags, e.g. `CONFIGURING`, `COMPLETING`.
    pub state_flags: Vec<String>,
    /// User name.
    #[serde(serialize_with = "empty_as_null")]
    pub user: String,
    /// Account.
    #[serde(serialize_with = "empty_as_null")]
    pub account: String,
    /// Partition.
    #[serde(serialize_with = "empty_as_null")]
    pub partition: String,
    /// QOS.
    #[serde(serialize_with = "empty_as_null")]
    pub qos: String,
    /// Job name; any characters.
    #[serde(serialize_with = "empty_as_null")]
    pub name: String,
    /// Job comment; empty when the source does not carry it (the `--Format` fallback).
    #[serde(serialize_with = "empty_as_null")]
    pub comment: String,
    /// Start time, epoch seconds; `None` when Slurm prints none (N/A, Unknown, None, unset).
    pub start_s: Option<i64>,
    /// Allocated nodes, expanded from the hostlist, in order.
    pub nodes: Vec<String>,
    /// The fields an exemption may read (`user_name`, `account`, `partition`, `qos`, `name`,
    /// `comment`, by their squeue JSON keys) that the source did not give as text: absent,
    /// `null` or another type. Their value above is empty, but unknown, not known empty: the
    /// daemon holds such a job at alert when a configured exemption reads the field.
    pub unknown_fields: Vec<String>,
    /// Whole GPUs allocated across all nodes, from the TRES string (see [`tres`]); with squeue
    /// JSON, from `gres_detail` (see [`gres_detail`]) when the TRES string has no GPU entry
    /// (a cluster without `gres/gpu` in `AccountingStorageTRES`).
    pub gpus: u32,
    /// The GPU device indices Slurm allocated to the job on each of its nodes, one entry per
    /// `gres_detail` string, in the order squeue gives them (source: `squeue --json`
    /// `gres_detail`, Slurm 21.08+; see [`gres_detail::gpu_indices`]). An entry is `None`
    /// when that node's string gives no indices (a `CNT:` count, a bare count). The whole list
    /// is empty when the source has no `gres_detail` (the `--Format` source, older JSON), and
    /// also when any of its strings could not be read (the row itself is still read as
    /// before: the GPU count comes from the TRES string then).
    ///
    /// Slurm's index is the GPU's device-file index on its node, i.e. the NVIDIA minor number
    /// (`/dev/nvidia<minor>`), which need not be nvidia-smi's `index`. That the entries follow
    /// the order of [`SlurmJob::nodes`] is not verified here for jobs on several nodes, so
    /// attribution uses this only for jobs on one node.
    pub gres_idx: Vec<Option<Vec<u32>>>,
    /// The GPU count of each `gres_detail` string, in the order squeue gives them (`None`: the
    /// string could not be read), for the same source as [`SlurmJob::gres_idx`]; counts come
    /// from `CNT:` items too. Empty when the source has no `gres_detail`.
    pub gres_counts: Vec<Option<u32>>,
    /// The job holds MIG slices: a `gres/gpu:TYPE` TRES entry or a `gres_detail` GPU item
    /// whose type is a MIG profile ([`tres::is_mig_profile`], e.g. `1g.10gb`). Its GPU count
    /// then counts slices, not whole GPUs, so it cannot be used to place jobs by elimination.
    pub mig: bool,
}

impl SlurmJob {
    /// True when the base state is RUNNING with no flag but those of [`JUDGED_FLAGS`] (see
    /// [`judged_state`]).
    pub fn is_judgeable(&self) -> bool {
        judged_state(&self.state, &self.state_flags)
    }

    /// True when the row gave no base state. squeue's `--Format` State, and the string
    /// `job_state` of older JSON, print one word: a recognised flag (`SIGNALING`, `RESIZING`,
    /// `CONFIGURING`, `COMPLETING`...) "will be reported instead of the base state" (Slurm
    /// job_state_codes.html), so a running job being signalled shows only `SIGNALING`. A
    /// word that is neither a base state nor a known flag lands here too. Such a job's state
    /// is unknown: never judged, and never read as ended while it lists the node (see
    /// [`SlurmJob::may_hold`]).
    pub fn state_unknown(&self) -> bool {
        self.state.is_empty()
    }

    /// True when the job may still hold its allocation on `node`: it lists `node` and is
    /// RUNNING, SUSPENDED (a suspended job keeps its GPUs and their memory, squeue(1)) or of
    /// unknown state ([`SlurmJob::state_unknown`]). A job for which this is false has
    /// positively left `node` (ended, pending, requeued, or running elsewhere).
    pub fn may_hold(&self, node: &str) -> bool {
        (self.state == "RUNNING" || self.state == "SUSPENDED" || self.state_unknown()) && self.nodes.iter().any(|n| n == node)
    }
}

/// True when `job_id` names a component of a heterogeneous job: the `N+K` form (het job `N`,
/// offset `K`) that [`squeue_json`] and [`squeue_format`] give every component (from
/// `het_job_id`/`het_job_offset`, `HetJobID`/`HetJobOffset`; a component without its offset
/// is a row error, never a plain id). No other Slurm job id contains `+`, so any id with one
/// counts, even one that is not a well-formed `N+K`: the planner never drains or cancels a het
/// component (scancel(1): cancelling component 0 cancels the whole het job).
pub fn is_het_component(job_id: &str) -> bool {
    job_id.contains('+')
}

/// Base job states (slurm.h `job_states`); anything else in a state list is a flag.
pub const BASE_JOB_STATES: [&str; 12] = [
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETE",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
];

/// The one flag with which a RUNNING job is still judged: UPDATE_DB (slurm.h `JOB_UPDATE_DB`,
/// "send job start to database again": slurmdbd was unreachable, the job itself runs as
/// usual, and the flag can stay for as long as slurmdbd is down).
///
/// Every other flag keeps a RUNNING job from being judged, as squeue's `--Format` State
/// source reads such a job (the flag replaces the base state there, and the state is
/// unknown): among them (squeue(1) JOB STATE CODES) CONFIGURING, "allocated nodes booting" or
/// the prolog running, so its GPUs are idle on Slurm's account; STOPPED, "execution has been
/// stopped with SIGSTOP signal", as a user does with `scancel --signal=STOP` to pause a job:
/// its processes keep their GPU memory at 0 % and look `hung` (review 15: drained and
/// cancelled); COMPLETING, SIGNALING, REQUEUED, REQUEUE_HOLD, RESIZING, STAGE_OUT and flags of
/// later releases: a job ending, being signalled, requeued or resized is not one to drain or
/// cancel (operator trial 22: JSON jobs RUNNING with COMPLETING, SIGNALING and REQUEUED were
/// drained and cancelled, while the same jobs read from `--Format` were never judged; a
/// cancel drops a requeue). Such a job is judged afresh once it is plain RUNNING again.
pub const JUDGED_FLAGS: [&str; 1] = ["UPDATE_DB"];

/// True when a job of base state `state` with state flags `flags` is judged: RUNNING, with no
/// flag outside [`JUDGED_FLAGS`].
pub fn judged_state(state: &str, flags: &[String]) -> bool {
    state == "RUNNING" && flags.iter().all(|f| JUDGED_FLAGS.contains(&f.as_str()))
}

/// Flags squeue prints only for a job that holds its allocation (Slurm job_state_codes.html):
/// CONFIGURING (allocated nodes booting), RESIZING (a running job changing size), SIGNALING
/// (a running job being signalled), STOPPED (squeue(1): "has an allocation, but execution has
/// been stopped"). COMPLETING is left out on purpose: a job stuck
/// completing can stay listed for hours, whether squeue still names its nodes then is not
/// confirmed here, and a row error would keep every read incomplete (no resume anywhere on
/// the node) for that long.
pub const ALLOCATED_FLAGS: [&str; 4] = ["CONFIGURING", "RESIZING", "SIGNALING", "STOPPED"];

/// Checks that a row which says its job holds an allocation names where: a base state of
/// RUNNING, or no base state and a flag from [`ALLOCATED_FLAGS`], with no node is an error
/// (a running job always has nodes; read as "no node" it would look gone from every node).
/// `given` says what the source gave for the node list (`NodeList ""`, `nodes null`), for the
/// message. Other states (PENDING, a finished job, COMPLETING alone) may have no nodes.
pub fn check_nodes(state: &str, flags: &[String], nodes: &[String], given: &str) -> Result<(), String> {
    let holds = state == "RUNNING" || (state.is_empty() && flags.iter().any(|f| ALLOCATED_FLAGS.contains(&f.as_str())));
    if holds && nodes.is_empty() {
        let shown = if state.is_empty() { flags.join("+") } else { state.to_string() };
        return Err(format!("state {shown} but no nodes ({given}): where the job runs is unknown"));
    }
    Ok(())
}

/// Splits state words into (base, flags). `OUT_OF_MEMORY` counts as a base state too. The
/// base is empty when no word is a base state (a flag printed in its place; see
/// [`SlurmJob::state_unknown`]).
pub fn split_state<'a>(words: impl IntoIterator<Item = &'a str>) -> (String, Vec<String>) {
    let mut base = String::new();
    let mut flags = Vec::new();
    for w in words {
        let w = w.trim().to_ascii_uppercase();
        if w.is_empty() {
            continue;
        }
        if base.is_empty() && (BASE_JOB_STATES.contains(&w.as_str()) || w == "OUT_OF_MEMORY") {
            base = w;
        } else {
            flags.push(w);
        }
    }
    (base, flags)
}

/// A row of a multi-row text that could not be read; the other rows still count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobRowError {
    /// 1-based line number (text) or 0-based index in `jobs` (JSON).
    pub row: usize,
    /// The job id if it could be read.
    pub job_id: Option<String>,
    /// What is wrong.
    pub problem: String,
}

/// Jobs read from one squeue output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct JobsRead {
    /// Jobs read, every state (callers filter for RUNNING themselves).
    pub jobs: Vec<SlurmJob>,
    /// Rows that could not be read.
    pub row_errors: Vec<JobRowError>,
}

/// Keeps each job once. A job id listed on several rows that disagree (another user, other
/// nodes, another state...) cannot be believed either way, so every one of those rows becomes
/// a [`JobRowError`] and the job is unknown; identical repeats say the same thing and are kept
/// once. `rows` holds (row number as in [`JobRowError::row`], job); `label` formats a row
/// number for the problem text (`jobs[3]`, `line 4`).
pub fn reject_disagreeing_jobs(
    rows: Vec<(usize, SlurmJob)>,
    errors: &mut Vec<JobRowError>,
    label: &dyn Fn(usize) -> String,
) -> Vec<SlurmJob> {
    let mut by_id: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
    for (p, (_, j)) in rows.iter().enumerate() {
        by_id.entry(j.job_id.as_str()).or_default().push(p);
    }
    let mut bad: std::collections::BTreeMap<usize, String> = std::collections::BTreeMap::new();
    let mut repeat: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    for (id, ps) in &by_id {
        let Some((&first, rest)) = ps.split_first() else { continue };
        if rest.iter().all(|&p| rows[p].1 == rows[first].1) {
            repeat.extend(rest.iter().copied());
            continue;
        }
        let at: Vec<String> = ps.iter().map(|&p| label(rows[p].0)).collect();
        for &p in ps {
            bad.insert(
                p,
                format!(
                    "job {id} is listed at {} with different fields; that job is unknown this read",
                    at.join(", ")
                ),
            );
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for (p, (row, j)) in rows.into_iter().enumerate() {
        if let Some(problem) = bad.remove(&p) {
            errors.push(JobRowError {
                row,
                job_id: Some(j.job_id),
                problem,
            });
        } else if !repeat.contains(&p) {
            out.push(j);
        }
    }
    errors.sort_by_key(|e| e.row);
    out
}

/// Strips `#` comment lines, as the shared samples need (samples/README.md).
pub fn strip_comments(text: &str) -> String {
    text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect()
}
