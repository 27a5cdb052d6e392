//! # traces: the gpu-reaper trace format
//!
//! A trace is a folder with `jobs.csv` and `samples.csv` (documented in `traces/README.md`).
//! In memory it is a [`Trace`]: jobs with their Slurm facts, and GPU samples in time order,
//! optionally labelled with ground truth. The simulator generates traces, `sim replay` reads
//! them, and the importers turn public traces and operators' own logs into them.
//!
//! * [`mod@format`]: read and write the folder ([`read_trace`], [`write_trace`]); strict by
//!   default (the first bad row is a [`TraceError`] naming file, line and column), lenient on
//!   request (bad rows skipped and listed in the [`ReadReport`]).
//! * [`alloc`]: the `alloc` column syntax, `node001:0-3;node002:0-3`.
//! * [`replay`]: the replay driver over `policy::Engine` (observe mode, whole allocations),
//!   its `findings.csv` / `jobs-summary.csv` writers and the drain/cancel safety check;
//!   [`score`] scores it against `truth` with the sweep's rules.
//! * [`import`]: Philly, Alibaba GenAI, nvidia-smi CSV logs and dcgm-exporter pages.
//! * [`cdf`]: AcmeTrace quantile CDFs and the Kolmogorov–Smirnov distance (`sim calibrate`).
//!
//! The crate reads no clock and holds no RNG; missing values stay `None` everywhere.

pub mod alloc;
pub mod cdf;
pub mod error;
pub mod format;
pub mod import;
mod records;
pub mod replay;
pub mod score;

pub use error::{RowProblem, TraceError};
pub use format::{read_trace, write_trace, ReadReport};
pub use policy::{GpuRef, JobFacts, NodeId, NodeTable, Sample};
use serde::{Deserialize, Serialize};

/// Ground truth for one GPU at one time (the optional `truth` column of `samples.csv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Truth {
    /// The GPU does useful work.
    Productive,
    /// Productive but inefficient: a starved data loader.
    Starved,
    /// Hung, idle, or an unused GPU of a partial job.
    Wasted,
}

impl Truth {
    /// `productive`, `starved` or `wasted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Truth::Productive => "productive",
            Truth::Starved => "starved",
            Truth::Wasted => "wasted",
        }
    }

    /// Inverse of [`Truth::as_str`].
    pub fn from_name(s: &str) -> Option<Truth> {
        [Truth::Productive, Truth::Starved, Truth::Wasted]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// One job of a trace (a row of `jobs.csv`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceJob {
    /// Slurm facts; `facts.alloc` uses ids from [`Trace::nodes`].
    pub facts: JobFacts,
    /// When the job left RUNNING (end of its allocation), epoch seconds.
    pub end_s: i64,
    /// The job's time limit, seconds, when known.
    pub time_limit_s: Option<i64>,
}

/// A whole trace in memory.
///
/// Invariants: `jobs` is sorted by (`start_s`, `job_id`); `samples`, `sample_job` and
/// `truth` have the same length; samples are sorted by (`t_s`, job index, node, gpu);
/// `sample_job[i]` indexes `jobs`.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Node names for the ids used in jobs and samples.
    pub nodes: NodeTable,
    /// The jobs.
    pub jobs: Vec<TraceJob>,
    /// The samples, in time order.
    pub samples: Vec<Sample>,
    /// For each sample, the index of its job in `jobs`.
    pub sample_job: Vec<u32>,
    /// For each sample, its ground truth when the trace has a `truth` column.
    pub truth: Vec<Option<Truth>>,
}

impl Trace {
    /// Appends one sample of job `job` (an index into `jobs`) with its ground truth, keeping
    /// `samples`, `sample_job` and `truth` the same length. Call [`Trace::normalize`]
    /// afterwards to restore the time order.
    pub fn push_sample(&mut self, sample: Sample, job: u32, truth: Option<Truth>) {
        self.samples.push(sample);
        self.sample_job.push(job);
        self.truth.push(truth);
    }
}
