//! This node's GPU readings, behind [`Telemetry`] so central mode can read dcgm-exporter
//! through Prometheus instead. [`NvidiaSmi`] runs the two nvidia-smi queries through
//! [`crate::run::run`].
//!
//! No data is ever zero: an nvidia-smi error text, a non-zero exit (smi-exit-codes: even rc
//! 14 with a printed table), a timeout, or a hung earlier nvidia-smi all give a read with no
//! GPUs and the reason recorded.

use crate::parse::smi::{self, AppsTable, GpuReading, APPS_QUERY, GPU_QUERY};
use crate::run::{self, KillMode, RunOptions, RunOutcome};
use std::time::Duration;

/// One cycle's telemetry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TelemetryRead {
    /// GPU rows with a readable index. Empty when `no_data` is set.
    pub gpus: Vec<GpuReading>,
    /// `--query-compute-apps` rows; `None` when that query failed (process counts unknown).
    pub apps: Option<AppsTable>,
    /// Why there is no GPU data this cycle: `timeout`, `exit_N`, `hung_child`, an error-text
    /// kind (`no_devices`, `gpu_lost`, ...), `spawn_failed`, `bad_header`.
    pub no_data: Option<String>,
    /// Other problems (bad rows, the compute-apps query failing), as `source:kind` labels.
    pub errors: Vec<String>,
}

/// A source of this node's GPU readings.
pub trait Telemetry {
    /// Reads every GPU once. `now_s` is the cycle time (epoch seconds).
    fn read(&mut self, now_s: i64) -> TelemetryRead;
}

/// [`Telemetry`] over `nvidia-smi --query-gpu` and `--query-compute-apps`.
#[derive(Debug, Clone)]
pub struct NvidiaSmi {
    /// Program (name on PATH or path).
    pub program: String,
    /// Timeout per query (default 10 s).
    pub timeout: Duration,
    /// How a timed-out nvidia-smi is stopped (tests use [`KillMode::Ignore`]).
    pub kill: KillMode,
}

enum Query {
    Table(String),
    NoData(String),
}

impl NvidiaSmi {
    fn query(&self, args: Vec<String>) -> Query {
        let mut o = RunOptions::new(self.timeout);
        o.kill = self.kill;
        match run::run(&self.program, &args, &o) {
            RunOutcome::Exited { code: Some(0), stdout, .. } => match smi::no_data(&stdout) {
                Some(smi::SmiError::NoData { kind, .. }) => Query::NoData(kind.to_string()),
                _ => Query::Table(stdout),
            },
            RunOutcome::Refused => Query::NoData("hung_child".into()),
            other => Query::NoData(other.label()),
        }
    }
}

impl Telemetry for NvidiaSmi {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        let mut r = TelemetryRead::default();
        let gpu_args = vec![format!("--query-gpu={}", GPU_QUERY.join(",")), "--format=csv,nounits".into()];
        match self.query(gpu_args) {
            Query::NoData(k) => {
                r.no_data = Some(k);
                return r;
            }
            Query::Table(text) => match smi::parse_gpus(&text, None) {
                Ok(t) => {
                    for e in &t.row_errors {
                        r.errors.push(format!("nvidia-smi:bad_row:{}", e.line));
                    }
                    for g in t.gpus {
                        if g.index.is_some() {
                            r.gpus.push(g);
                        } else {
                            r.errors.push("nvidia-smi:no_index".into());
                        }
                    }
                }
                Err(smi::SmiError::NoData { kind, .. }) => {
                    r.no_data = Some(kind.to_string());
                    return r;
                }
                Err(smi::SmiError::BadHeader(_)) => {
                    r.no_data = Some("bad_header".into());
                    return r;
                }
            },
        }
        let app_args = vec![
            format!("--query-compute-apps={}", APPS_QUERY.join(",")),
            "--format=csv,nounits".into(),
        ];
        match self.query(app_args) {
            Query::Table(text) => match smi::parse_apps(&text, None) {
                Ok(t) => r.apps = Some(t),
                Err(_) => r.errors.push("compute-apps:parse".into()),
            },
            Query::NoData(k) => r.errors.push(format!("compute-apps:{k}")),
        }
        r
    }
}
