//! Pure parsers, one file per source: text in, typed values or an error naming the offending
//! text out. None of them runs a process, reads a file or looks at the clock; the callers in
//! [`crate::slurm`] and [`crate::telemetry`] do that and hand the text over.

pub mod cgroup;
pub mod hostlist;
pub mod scontrol_node;
pub mod smi;
pub mod squeue_format;
pub mod squeue_json;
pub mod tres;

use serde::Serialize;

/// One Slurm job as squeue reports it, whatever the source (JSON or `--Format`).
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
    /// Base state, e.g. `RUNNING`, `PENDING`.
    pub state: String,
    /// State flags, e.g. `CONFIGURING`, `COMPLETING`.
    pub state_flags: Vec<String>,
    /// User name.
    pub user: String,
    /// Account.
    pub account: String,
    /// Partition.
    pub partition: String,
    /// QOS.
    pub qos: String,
    /// Job name; any characters.
    pub name: String,
    /// Job comment; empty when the source does not carry it (the `--Format` fallback).
    pub comment: String,
    /// Start time, epoch seconds; `None` when Slurm prints none (N/A, Unknown, None, unset).
    pub start_s: Option<i64>,
    /// Allocated nodes, expanded from the hostlist, in order.
    pub nodes: Vec<String>,
    /// Whole GPUs allocated across all nodes, from the TRES string (see [`tres`]).
    pub gpus: u32,
}

impl SlurmJob {
    /// True when the base state is RUNNING and the job is not still CONFIGURING (nodes
    /// booting or prolog running: its GPUs are legitimately idle, so it is not judged).
    pub fn is_judgeable(&self) -> bool {
        self.state == "RUNNING" && !self.state_flags.iter().any(|f| f == "CONFIGURING")
    }
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

/// Splits state words into (base, flags). `OUT_OF_MEMORY` counts as a base state too.
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

/// Strips `#` comment lines, as the shared samples need (samples/README.md).
pub fn strip_comments(text: &str) -> String {
    text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect()
}
