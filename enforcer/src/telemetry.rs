//! This node's GPU readings, behind [`Telemetry`] so central mode can read dcgm-exporter
//! through Prometheus instead. [`NvidiaSmi`] runs the two nvidia-smi queries through
//! [`crate::run::run`].
//!
//! No data is ever zero: an nvidia-smi error text, a non-zero exit (smi-exit-codes: even rc
//! 14 with a printed table), a timeout, or a hung earlier nvidia-smi all give a read with no
//! GPUs and the reason recorded.

use crate::parse::smi::{self, AppsTable, GpuReading, APPS_QUERY, GPU_QUERY, GPU_QUERY_WITHOUT_MIG, GPU_QUERY_WITHOUT_MINOR};
use crate::run::{self, KillMode, RunOptions, RunOutcome};
use std::time::Duration;

/// One cycle's telemetry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TelemetryRead {
    /// GPU rows with a readable index. Empty when `no_data` is set.
    pub gpus: Vec<GpuReading>,
    /// `--query-compute-apps` rows; `None` when that query failed (process counts unknown).
    pub apps: Option<AppsTable>,
    /// Why there is no GPU data this cycle: `timeout`, `exit_N`, `hung_child`,
    /// `output_cut_off` (nvidia-smi exited while a child it left running held its output
    /// open: the table may be incomplete), an error-text
    /// kind (`no_devices`, `gpu_lost`, ...), `spawn_failed`, `bad_header`, `no_gpus` (a
    /// table with no row), `no_readable_rows`.
    pub no_data: Option<String>,
    /// nvidia-smi's own words when `no_data` is set and it printed any: the first two
    /// non-blank lines of stderr (else stdout), one line, at most 240 characters (e.g. `Unable
    /// to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to
    /// recover this GPU`); for a `bad_header` whose unit or repeated column was refused, the
    /// parser's reason naming the column. For the log only, never a metric label.
    pub no_data_detail: Option<String>,
    /// Other problems: `--query-gpu` rows that could not be read, the compute-apps query
    /// failing. (Unreadable compute-apps rows are in `apps`' own `row_errors`.)
    pub errors: Vec<TelemetryProblem>,
    /// The video engines' utilisation (`utilization.encoder`, `.decoder`) was not asked for
    /// in this read: the driver refused those fields. Video work is then unseen, so the
    /// daemon holds jobs that look `hung`, `idle`, `starved` or `partial` at alert (review 33).
    pub codec_unread: bool,
}

/// One problem with one read, for a log line and a `gpu_reaper_read_errors_total` count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryProblem {
    /// The query: `nvidia-smi` (`--query-gpu`) or `compute-apps` (`--query-compute-apps`).
    pub source: &'static str,
    /// A metric label from a fixed set, never a line number or a value: `bad_row`,
    /// `no_index`, `parse`, or a run outcome label (`timeout`, `exit_N`, ...).
    pub kind: String,
    /// 1-based line in the query's output, when the problem is one row.
    pub line: Option<usize>,
    /// What is wrong, with the offending text (for the log only).
    pub problem: String,
}

impl TelemetryProblem {
    fn new(source: &'static str, kind: &str, line: Option<usize>, problem: String) -> Self {
        TelemetryProblem {
            source,
            kind: kind.to_string(),
            line,
            problem,
        }
    }
}

/// Compute processes per GPU, in the order of `gpus`, for the policy's `Sample::procs`
/// (from `--query-compute-apps`). A 0 is only given when it is known: when the query failed,
/// when one of its rows could not be read, or when a process's `gpu_uuid` is missing or names
/// no GPU of `gpus` (a new-style MIG UUID, say), that process may sit on any GPU, so every GPU
/// without a process of its own is `None`; a GPU with processes keeps its count (a lower
/// bound, still proof that processes are there). A GPU whose own UUID is missing is `None`.
pub fn process_counts(gpus: &[GpuReading], apps: Option<&AppsTable>) -> Vec<Option<u32>> {
    let Some(apps) = apps else {
        return vec![None; gpus.len()];
    };
    let by_uuid: std::collections::BTreeMap<&str, u16> = gpus.iter().filter_map(|g| Some((g.uuid.as_deref()?, g.index?))).collect();
    let mut per_index: std::collections::BTreeMap<u16, u32> = std::collections::BTreeMap::new();
    let mut stray = !apps.row_errors.is_empty();
    for a in &apps.apps {
        match a.gpu_uuid.as_deref().and_then(|u| crate::attribution::resolve_uuid(u, &by_uuid)) {
            Some(i) => *per_index.entry(i).or_insert(0) += 1,
            None => stray = true,
        }
    }
    gpus.iter()
        .map(|g| match (g.uuid.as_ref(), g.index.and_then(|i| per_index.get(&i))) {
            (_, Some(&n)) => Some(n),
            (Some(_), None) if !stray => Some(0),
            _ => None,
        })
        .collect()
}

/// Memory on a GPU beyond what its listed processes use, MiB, from which processes are taken
/// to be hidden: 256. An idle GPU's `memory.used` reads a few MiB, and a process's
/// `used_memory` includes its CUDA context (a few hundred MiB), so even a hidden process that
/// does nothing but hold a context shows about this much (review 34: 5 % of an 80 GB GPU
/// missed a hidden 3.5 GB inference job).
pub const HIDDEN_MEMORY_MIB: f64 = 256.0;

/// Whether this read shows every process on the node's GPUs (see
/// [`unaccounted_memory`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unaccounted {
    /// GPUs (index) with positive evidence of hidden processes: `memory.used` at least
    /// [`HIDDEN_MEMORY_MIB`] above the sum of its processes' `used_memory`, memory held by a
    /// listed process that belongs to no Slurm job (an MPS server holds its clients' memory),
    /// or a listed process whose `used_memory` is unknown or impossible on a GPU with that
    /// much memory in use.
    pub hidden: Vec<u16>,
    /// Why this read cannot show that every process is listed, when it cannot: the process
    /// list is unknown or has unreadable rows, or a GPU's `memory.used` is unknown.
    pub unknown: Option<&'static str>,
}

impl Unaccounted {
    /// True when every process may not show: hidden memory seen, or the accounting unknown.
    pub fn any(&self) -> bool {
        !self.hidden.is_empty() || self.unknown.is_some()
    }
}

/// Which GPUs hold memory that no listed compute process of a Slurm job accounts for, and
/// whether that can be told at all. Placing jobs by elimination assumes every process shows,
/// so on a node with more than one GPU job the daemon holds jobs placed that way at alert
/// unless this read accounts for every GPU's memory: for the cycle when the accounting is
/// unknown, for the rest of their run when hidden memory is seen (operator
/// trial 20: job 902's processes were hidden on its GPU 2, where job 901's stray helper
/// showed; 902 was placed by elimination on two idle GPUs of 901's and cancelled as `idle`;
/// review 34 and trial 21: small hidden memory, `[N/A]` or sentinel process memory, an MPS
/// server's memory and unreadable rows each let it through).
///
/// `job_of(pid)` says whether a process belongs to a Slurm job (its cgroup names one). GPUs in
/// MIG mode or of unknown mode are left out (MIG is handled on its own).
pub fn unaccounted_memory(gpus: &[GpuReading], apps: Option<&AppsTable>, job_of: &dyn Fn(u32) -> bool) -> Unaccounted {
    let mut out = Unaccounted::default();
    let Some(apps) = apps else {
        out.unknown = Some("the process list (--query-compute-apps) is unknown");
        return out;
    };
    if !apps.row_errors.is_empty() {
        out.unknown = Some("a row of the process list could not be read");
        return out;
    }
    for g in gpus {
        if g.mig_enabled == Some(true) || g.mig_mode_unknown {
            continue;
        }
        let (Some(index), Some(uuid)) = (g.index, g.uuid.as_deref()) else {
            continue;
        };
        let Some(used) = g.mem_used_mib.filter(|u| u.is_finite() && *u >= 0.0) else {
            out.unknown = Some("a GPU's memory.used is unknown");
            continue;
        };
        let total = g.mem_total_mib.filter(|t| t.is_finite() && *t > 0.0);
        let mut listed = 0.0;
        let mut hidden = false;
        for a in apps.apps.iter().filter(|a| a.gpu_uuid.as_deref() == Some(uuid)) {
            match a.used_memory_mib {
                Some(m) if m.is_finite() && m >= 0.0 && !policy::is_sentinel(m) && total.is_none_or(|t| m <= t) => {
                    if a.pid.is_some_and(job_of) {
                        listed += m;
                    } else if m >= HIDDEN_MEMORY_MIB {
                        // A process of no Slurm job holding memory: an MPS server (its
                        // clients' memory is its own), or one whose job is not known.
                        hidden = true;
                    } else {
                        listed += m;
                    }
                }
                // Unknown or impossible: on a GPU with memory in use, it may hide anything.
                _ => hidden |= used >= HIDDEN_MEMORY_MIB,
            }
        }
        if hidden || used - listed >= HIDDEN_MEMORY_MIB {
            out.hidden.push(index);
        }
    }
    out
}

/// A source of this node's GPU readings.
pub trait Telemetry {
    /// Reads every GPU once. `now_s` is the cycle time (epoch seconds).
    fn read(&mut self, now_s: i64) -> TelemetryRead;
}

/// The config key [`NvidiaSmi::timeout`] comes from, named when nvidia-smi times out.
pub const TIMEOUT_KEY: &str = "enforcer.nvidia_smi_timeout";

/// [`Telemetry`] over `nvidia-smi --query-gpu` and `--query-compute-apps`.
///
/// The GPU query is [`GPU_QUERY`], which asks for `minor_number` and `mig.mode.current`, then
/// [`smi::CODEC_FIELDS`] (the video engines' utilisation; dropped the same way if refused). An
/// nvidia-smi that does not know such a field (an old driver) answers `Field "minor_number"
/// is not a valid field to query.` and exits 2 ("a supplied argument or flag is invalid",
/// nvidia-smi(1) RETURN VALUE): the same cycle then asks without it
/// ([`GPU_QUERY_WITHOUT_MIG`], or [`GPU_QUERY_WITHOUT_MINOR`] without either), a warning is
/// logged the first time in the run (later refusals at INFO), and later cycles use that list
/// ([`NvidiaSmi::mig_refused`], [`NvidiaSmi::minor_refused`]) but for a try of the full one
/// every [`NvidiaSmi::RETRY_REFUSED_S`], so telemetry never breaks. Without minor numbers the
/// device-index placement rule stays off; without MIG modes only MIG processes and MIG gres
/// types show MIG in use, as before.
#[derive(Debug, Clone)]
pub struct NvidiaSmi {
    /// Program (name on PATH or path).
    pub program: String,
    /// Timeout per query (default 10 s; [`TIMEOUT_KEY`]).
    pub timeout: Duration,
    /// How a timed-out nvidia-smi is stopped (tests use [`KillMode::Ignore`]).
    pub kill: KillMode,
    /// True while nvidia-smi's last answer refused `minor_number` as a query field (until the
    /// next try of the full query); start with false.
    pub minor_refused: bool,
    /// The same for `mig.mode.current`; start with false.
    pub mig_refused: bool,
    /// The same for `utilization.encoder` and `utilization.decoder` ([`smi::CODEC_FIELDS`]);
    /// start with false.
    pub codec_refused: bool,
    /// When a field was last refused (epoch seconds): the full query is asked again
    /// [`NvidiaSmi::RETRY_REFUSED_S`] later, since a driver upgraded under a running daemon
    /// knows it (review 25: MIG turned on after such an upgrade went unseen for the rest of
    /// the run, and a slice job was drained and cancelled).
    pub refused_at_s: Option<i64>,
    /// The fields whose refusal has been warned of in this run (bit 0 `minor_number`, bit 1
    /// `mig.mode.current`, bit 2 the codec fields): later refusals of the same field are logged at INFO, since an old
    /// driver refuses every 5 minutes (review 26); start with 0.
    pub refusals_warned: u8,
}

impl NvidiaSmi {
    /// An nvidia-smi reader that asks for minor numbers until nvidia-smi refuses them.
    pub fn new(program: impl Into<String>, timeout: Duration, kill: KillMode) -> Self {
        NvidiaSmi {
            program: program.into(),
            timeout,
            kill,
            minor_refused: false,
            mig_refused: false,
            codec_refused: false,
            refused_at_s: None,
            refusals_warned: 0,
        }
    }

    /// How long a refused query field stays unasked: five minutes. MIG mode can be turned on
    /// only on a GPU without processes, so a slice job starts after it, and a job placed on
    /// fresh evidence needs a full window before its first alert: with the default 20-minute
    /// window a MIG mode that appears after a driver upgrade is seen before any such job can
    /// be acted on. The cost is one refused nvidia-smi call every five minutes on an old
    /// driver.
    pub const RETRY_REFUSED_S: i64 = 300;
}

enum Query {
    Table(String),
    /// The kind (a metric label) and nvidia-smi's own words, if it printed any.
    NoData(String, Option<String>),
    /// nvidia-smi refused a query field (`Field "…" is not a valid field to query.`); the
    /// line that said so.
    FieldRefused(String),
}

/// The line in which nvidia-smi refuses a `--query-gpu` field, if `text` has one.
fn field_refused(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| l.contains("is not a valid field to query"))
}

/// The first two non-blank lines of `stderr`, or else of `stdout`, as one line of at most 240
/// characters; `None` when both are blank.
pub fn output_excerpt(stdout: &str, stderr: &str) -> Option<String> {
    let first = |t: &str| -> Option<String> {
        let lines: Vec<&str> = t.lines().map(str::trim).filter(|l| !l.is_empty()).take(2).collect();
        (!lines.is_empty()).then(|| policy::one_line(&lines.join(" / "), 240))
    };
    first(stderr).or_else(|| first(stdout))
}

impl NvidiaSmi {
    fn query(&self, args: Vec<String>) -> Query {
        let mut o = RunOptions::new(self.timeout);
        o.kill = self.kill;
        let out = run::run(&self.program, &args, &o);
        let label = out.label();
        if let RunOutcome::Exited { stdout, stderr, .. } = &out {
            if let Some(line) = field_refused(stdout).or_else(|| field_refused(stderr)) {
                return Query::FieldRefused(policy::one_line(line, 240));
            }
        }
        match out {
            RunOutcome::Exited { code: Some(0), stdout, .. } => match smi::no_data(&stdout) {
                Some(smi::SmiError::NoData { kind, line }) => Query::NoData(kind.to_string(), Some(policy::one_line(&line, 240))),
                _ => Query::Table(stdout),
            },
            RunOutcome::Refused => Query::NoData(
                "hung_child".into(),
                Some(format!(
                    "{}: an earlier run is still hung (abandoned); not started again until it ends",
                    self.program
                )),
            ),
            // A failed nvidia-smi says why on stdout or stderr ("GPU is lost. Reboot the
            // system to recover this GPU"): keep its words for the log.
            RunOutcome::Exited { stdout, stderr, .. } => Query::NoData(label, output_excerpt(&stdout, &stderr)),
            // Not started: name the program and the OS error (`nvidia-smi-missing: No such
            // file or directory`), which the label alone does not say.
            RunOutcome::SpawnFailed(why) => Query::NoData(label, Some(format!("could not run {why}"))),
            // A table a leftover child cut off may miss rows: no table at all.
            RunOutcome::OutputCutOff { .. } => Query::NoData(
                label,
                Some(format!(
                    "{} exited, but a child it left running held its output open; the output may be incomplete",
                    self.program
                )),
            ),
            // A timeout names the limit and its key (operator trial 17: `kind=timeout
            // nvidia_smi_said=` was logged with an empty field).
            other => Query::NoData(
                label,
                Some(format!("{}: {}", self.program, other.describe_timeout(self.timeout, TIMEOUT_KEY))),
            ),
        }
    }
}

impl Telemetry for NvidiaSmi {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let mut r = TelemetryRead::default();
        if self
            .refused_at_s
            .is_some_and(|t| now_s.saturating_sub(t) >= Self::RETRY_REFUSED_S || now_s < t)
        {
            // Asked again in full: a refusal falls back as the first time did, once more
            // warned.
            self.minor_refused = false;
            self.mig_refused = false;
            self.codec_refused = false;
            self.refused_at_s = None;
        }
        let gpu_args = |fields: &[&str]| vec![format!("--query-gpu={}", fields.join(",")), "--format=csv,nounits".into()];
        let fields = |me: &Self| -> Vec<&'static str> {
            let list: &[&str] = if me.minor_refused {
                &GPU_QUERY_WITHOUT_MINOR
            } else if me.mig_refused {
                &GPU_QUERY_WITHOUT_MIG
            } else {
                &GPU_QUERY
            };
            let codec: &[&'static str] = if me.codec_refused { &[] } else { &smi::CODEC_FIELDS };
            list.iter().chain(codec).copied().collect()
        };
        let gpu_query = crate::slurm::command_line(&self.program, "--query-gpu");
        let mut answer = self.query(gpu_args(&fields(self)));
        // A field's first refusal in the run is a warning; later ones (an old driver, asked
        // again every 5 minutes) are told at INFO.
        macro_rules! log_refusal {
            ($bit:expr, $($t:tt)*) => {
                if self.refusals_warned & $bit != 0 {
                    tracing::info!($($t)*)
                } else {
                    tracing::warn!($($t)*)
                }
            };
        }
        // At most one retry per field nvidia-smi may refuse.
        for _ in 0..3 {
            let Query::FieldRefused(line) = &answer else { break };
            if smi::CODEC_FIELDS.iter().any(|f| line.contains(f)) && !self.codec_refused {
                log_refusal!(
                    4,
                    nvidia_smi_said = %line,
                    "nvidia-smi does not know the query fields utilization.encoder/utilization.decoder; GPUs are read without them until they are asked again in 5 minutes, so video encode and decode work (which utilization.gpu does not count) is not seen meanwhile"
                );
                self.codec_refused = true;
                self.refused_at_s = Some(now_s);
                self.refusals_warned |= 4;
            } else if line.contains("minor_number") && !self.minor_refused {
                log_refusal!(
                    1,
                    nvidia_smi_said = %line,
                    "nvidia-smi does not know the query field minor_number (an older driver); GPUs are read without it (and without MIG modes) until it is asked again in 5 minutes, and placing jobs by Slurm's device index stays off meanwhile"
                );
                self.minor_refused = true;
                self.refused_at_s = Some(now_s);
                self.refusals_warned |= 1;
            } else if line.contains("mig.mode.current") && !self.mig_refused && !self.minor_refused {
                log_refusal!(
                    2,
                    nvidia_smi_said = %line,
                    "nvidia-smi does not know the query field mig.mode.current (a driver from before MIG); GPUs are read without it until it is asked again in 5 minutes"
                );
                self.mig_refused = true;
                self.refused_at_s = Some(now_s);
                self.refusals_warned |= 2;
            } else {
                break;
            }
            answer = self.query(gpu_args(&fields(self)));
        }
        match answer {
            Query::FieldRefused(line) => {
                r.no_data = Some("field_refused".into());
                r.no_data_detail = Some(line);
                return r;
            }
            Query::NoData(k, detail) => {
                r.no_data = Some(k);
                r.no_data_detail = detail;
                return r;
            }
            Query::Table(text) => match smi::parse_gpus(&text, None) {
                Ok(t) => {
                    r.codec_unread = self.codec_refused;
                    let no_gpus = smi::no_gpus_kind(&t);
                    let rows = t.gpus.len() + t.row_errors.len();
                    for e in &t.row_errors {
                        let problem = format!("{}: {:?}", e.problem, policy::one_line(&e.text, 160));
                        r.errors.push(TelemetryProblem::new("nvidia-smi", "bad_row", Some(e.line), problem));
                    }
                    for g in t.gpus {
                        if g.index.is_some() {
                            r.gpus.push(g);
                        } else {
                            let problem = format!("GPU {} has no readable index", g.uuid.as_deref().unwrap_or("(no uuid)"));
                            r.errors.push(TelemetryProblem::new("nvidia-smi", "no_index", None, problem));
                        }
                    }
                    // No GPU listed on a GPU node is a configuration or driver problem
                    // (smi-no-devices), the same as the error texts: no data, never idle.
                    // The detail says what nvidia-smi printed, never an empty field (operator
                    // trial 17: `kind=no_gpus nvidia_smi_said=`).
                    if let Some(kind) = no_gpus {
                        r.no_data = Some(kind.into());
                        r.no_data_detail = Some(if rows == 0 {
                            format!("{gpu_query}: printed only its header line, no GPU rows")
                        } else {
                            format!("{gpu_query}: printed {rows} GPU rows, none with a readable index (each is a read error of its own)")
                        });
                        return r;
                    }
                }
                Err(smi::SmiError::Empty) => {
                    r.no_data = Some("no_gpus".into());
                    r.no_data_detail = Some(format!("{gpu_query}: exited 0 but printed nothing, not even the header line"));
                    return r;
                }
                Err(smi::SmiError::NoData { kind, line }) => {
                    r.no_data = Some(kind.to_string());
                    r.no_data_detail = Some(policy::one_line(&line, 240));
                    return r;
                }
                // Output that is no table names the nvidia-smi that was run, as configured, and
                // the offending text (operator trial 16), as squeue's and scontrol's do.
                Err(e @ (smi::SmiError::BadHeader(_) | smi::SmiError::BadColumn { .. })) => {
                    r.no_data = Some("bad_header".into());
                    r.no_data_detail = Some(format!("{gpu_query}: {e}"));
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
                Err(e) => {
                    let problem = format!("{}: {e}", crate::slurm::command_line(&self.program, "--query-compute-apps"));
                    r.errors.push(TelemetryProblem::new("compute-apps", "parse", None, problem))
                }
            },
            Query::FieldRefused(line) => {
                let problem = format!("--query-compute-apps refused a field ({line}); process counts unknown");
                r.errors.push(TelemetryProblem::new("compute-apps", "field_refused", None, problem));
            }
            Query::NoData(k, detail) => {
                let said = detail.map(|d| format!(": {d}")).unwrap_or_default();
                let problem = format!("--query-compute-apps gave no table ({k}{said}); process counts unknown");
                r.errors.push(TelemetryProblem::new("compute-apps", &k, None, problem));
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::smi::{ComputeApp, RowError};

    fn gpu(i: u16, uuid: Option<&str>) -> GpuReading {
        GpuReading {
            index: Some(i),
            uuid: uuid.map(str::to_string),
            ..Default::default()
        }
    }

    /// Operator trial 20, review 34, trial 21: memory no listed process of a Slurm job accounts
    /// for (256 MiB or more) marks a GPU, as does memory held by a process of no job (an MPS
    /// server) or a process of unknown or impossible memory on a GPU in use; an unknown list,
    /// an unreadable row or an unknown memory.used makes the accounting unknown.
    #[test]
    fn unaccounted_memory_marks_gpus_whose_memory_no_listed_job_process_holds() {
        let g = |i: u16, used: Option<f64>| GpuReading {
            mem_used_mib: used,
            mem_total_mib: Some(81_920.0),
            mig_enabled: Some(false),
            ..gpu(i, Some(&format!("GPU-{i}")))
        };
        let app = |i: u16, pid: u32, mib: Option<f64>| ComputeApp {
            gpu_uuid: Some(format!("GPU-{i}")),
            pid: Some(pid),
            used_memory_mib: mib,
            ..Default::default()
        };
        let table = |a: Vec<ComputeApp>| AppsTable {
            apps: a,
            ..Default::default()
        };
        // PIDs under 100 belong to no job (an MPS server, say).
        let job_of = |pid: u32| pid >= 100;
        // 0: 30 GB, 500 MiB listed: marked. 1: 30 GB, all listed: not. 2: 3000 MiB hidden
        // beside 1000 listed: marked. 3: 200 MiB unlisted (a context's worth of driver
        // slack): not. 4: idle, nothing listed: not. 5: a process of unknown memory: marked.
        // 6: a sentinel: marked. 7: 30 GB all an MPS server's (no job): marked.
        let gpus: Vec<GpuReading> = [30_000.0, 30_000.0, 4_000.0, 1_200.0, 3.0, 30_000.0, 30_000.0, 30_000.0]
            .iter()
            .enumerate()
            .map(|(i, u)| g(i as u16, Some(*u)))
            .collect();
        let apps = table(vec![
            app(0, 101, Some(500.0)),
            app(1, 102, Some(10_000.0)),
            app(1, 103, Some(20_000.0)),
            app(2, 104, Some(1_000.0)),
            app(3, 105, Some(1_000.0)),
            app(5, 106, Some(100.0)),
            app(5, 107, None),
            app(6, 108, Some(4_294_967_295.0)),
            app(7, 9, Some(30_000.0)),
        ]);
        let u = unaccounted_memory(&gpus, Some(&apps), &job_of);
        assert_eq!(u.hidden, vec![0, 2, 5, 6, 7]);
        assert_eq!(u.unknown, None);
        assert!(unaccounted_memory(&gpus, None, &job_of).unknown.is_some());
        let mut mig = gpus.clone();
        for x in &mut mig {
            x.mig_enabled = Some(true);
        }
        assert!(!unaccounted_memory(&mig, Some(&apps), &job_of).any());
        let mut broken = apps.clone();
        broken.row_errors.push(RowError {
            line: 2,
            text: "x".into(),
            problem: "bad".into(),
        });
        assert!(unaccounted_memory(&gpus, Some(&broken), &job_of).unknown.is_some());
        let mut na = gpus.clone();
        na[4].mem_used_mib = None;
        assert!(unaccounted_memory(&na, Some(&apps), &job_of).unknown.is_some());
        // Every GPU accounted for: nothing.
        let clean = table(vec![app(0, 101, Some(30_000.0))]);
        assert!(!unaccounted_memory(&gpus[..1], Some(&clean), &job_of).any());
    }

    fn apps(uuids: &[Option<&str>]) -> AppsTable {
        AppsTable {
            apps: uuids
                .iter()
                .map(|u| ComputeApp {
                    gpu_uuid: u.map(str::to_string),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn process_counts_are_known_or_none_never_a_guessed_zero() {
        let g = [gpu(0, Some("GPU-a")), gpu(1, Some("GPU-b"))];
        let ok = apps(&[Some("GPU-a"), Some("MIG-GPU-a/1/0"), Some("GPU-a")]);
        assert_eq!(process_counts(&g, Some(&ok)), vec![Some(3), Some(0)]);
        assert_eq!(process_counts(&g, None), vec![None, None]);
        let mut bad_row = ok.clone();
        bad_row.row_errors.push(RowError {
            line: 3,
            text: "GPU-b".into(),
            problem: "1 fields, expected 3".into(),
        });
        // GPU-a's processes are still known to be there; GPU-b's 0 no longer is.
        assert_eq!(process_counts(&g, Some(&bad_row)), vec![Some(3), None]);
        for stray in [None, Some("MIG-33333333-3333-3333-3333-333333333330"), Some("GPU-gone")] {
            let a = apps(&[Some("GPU-a"), stray]);
            assert_eq!(process_counts(&g, Some(&a)), vec![Some(1), None], "{stray:?}");
        }
        let no_uuid = [gpu(0, Some("GPU-a")), gpu(1, None)];
        assert_eq!(process_counts(&no_uuid, Some(&apps(&[]))), vec![Some(0), None]);
    }

    /// Trial 6 #6: `nvidia_smi = "nvidia-smi-missing"` logged `kind=spawn_failed
    /// nvidia_smi_said=` without the program's name.
    #[test]
    fn an_nvidia_smi_that_cannot_start_is_named_with_the_os_error() {
        let mut smi = NvidiaSmi::new("nvidia-smi-missing-for-test", Duration::from_secs(5), KillMode::Kill);
        let r = smi.read(0);
        assert_eq!(r.no_data.as_deref(), Some("spawn_failed"));
        let d = r.no_data_detail.unwrap_or_default();
        assert!(
            d.contains("nvidia-smi-missing-for-test") && d.contains("No such file or directory"),
            "{d}"
        );
        assert!(r.gpus.is_empty());
    }

    /// Review 15: a table still held open by a child nvidia-smi left running may be cut
    /// anywhere (GPUs missing below the cut): no GPU data, never the rows above the cut.
    #[test]
    fn a_table_a_left_child_holds_open_is_no_data() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nvidia-smi");
        let header = GPU_QUERY.join(", ");
        std::fs::write(&p, format!("#!/bin/sh\necho '{header}'\n(sleep 3; echo late) &\nexit 0\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut smi = NvidiaSmi::new(p.display().to_string(), Duration::from_secs(10), KillMode::Kill);
        let r = smi.read(0);
        assert_eq!(r.no_data.as_deref(), Some("output_cut_off"), "{r:?}");
        assert!(r.gpus.is_empty() && r.no_data_detail.is_some_and(|d| d.contains("may be incomplete")));
    }

    /// Operator trial 17: a hung nvidia-smi logged `kind=timeout nvidia_smi_said=`, and one that
    /// printed only its header `kind=no_gpus nvidia_smi_said=`, with an empty field.
    #[test]
    fn a_timeout_or_a_header_only_table_says_what_happened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nvidia-smi");
        let smi_says = |body: &str, timeout_s: u64| {
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            let r = NvidiaSmi::new(p.display().to_string(), Duration::from_secs(timeout_s), KillMode::Kill).read(0);
            assert!(r.gpus.is_empty(), "{r:?}");
            (r.no_data.unwrap_or_default(), r.no_data_detail.unwrap_or_default())
        };
        let prog = p.display().to_string();
        assert_eq!(
            smi_says("exec sleep 30", 1),
            (
                "timeout".into(),
                format!("{prog}: timed out after 1s (enforcer.nvidia_smi_timeout)")
            )
        );
        let header = GPU_QUERY.join(", ");
        assert_eq!(
            smi_says(&format!("echo '{header}'"), 5),
            (
                "no_gpus".into(),
                format!("{prog} --query-gpu: printed only its header line, no GPU rows")
            )
        );
        assert_eq!(
            smi_says("exit 0", 5),
            (
                "no_gpus".into(),
                format!("{prog} --query-gpu: exited 0 but printed nothing, not even the header line")
            )
        );
    }

    #[test]
    fn output_excerpt_is_two_lines_bounded_and_prefers_stderr() {
        assert_eq!(output_excerpt("", " \n"), None);
        assert_eq!(
            output_excerpt("out one\n", "\n  err one  \nerr two\nerr three\n").as_deref(),
            Some("err one / err two")
        );
        assert_eq!(output_excerpt("GPU is lost\n", "").as_deref(), Some("GPU is lost"));
        let long = output_excerpt(&"x".repeat(5000), "").unwrap();
        assert!(long.chars().count() <= 241 && !long.contains('\n'), "{}", long.len());
    }
}
