//! Workload files: the cluster, the job mix, per-phase telemetry distributions and collector
//! faults, read from TOML (`sim/workloads/default.toml`, `sim/workloads/traps.toml`).
//!
//! Every key is required unless marked optional, unknown keys are rejected, and every value is
//! range-checked: an error names the file, the key and the bad value.

use crate::dist::{Choice, LogNormal, Quantiles, Range};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The built-in default workload, `sim/workloads/default.toml`, embedded at build time so the
/// sweep runs from a fresh clone wherever it is started.
pub const DEFAULT_TOML: &str = include_str!("../workloads/default.toml");
/// The built-in trap workload, `sim/workloads/traps.toml`: only jobs that look wasted for a
/// while but are not, plus collector faults. Any cancel on it is a false cancel.
pub const TRAPS_TOML: &str = include_str!("../workloads/traps.toml");

/// A workload file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("{file}: cannot read")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is malformed, a key is unknown or missing, or a value has the wrong type. The
    /// message carries toml's line, column and the offending text.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// toml's message (line, column, key and value).
        message: String,
    },
    /// A value is out of range. `file` is empty until [`Workload::from_toml`] fills it in.
    #[error("{}`{key}` = {value}: {problem}", file_prefix(.file))]
    Invalid {
        /// The file.
        file: String,
        /// Dotted key, e.g. `kinds[2].share`.
        key: String,
        /// The bad value as read.
        value: String,
        /// What is wrong.
        problem: String,
    },
}

/// `file: `, or nothing when the workload has no file (a built-in, or `--nodes` applied).
fn file_prefix(file: &str) -> String {
    if file.is_empty() {
        String::new()
    } else {
        format!("{file}: ")
    }
}

impl WorkloadError {
    /// An out-of-range value; the file is filled in by the loader.
    pub fn invalid(key: &str, value: impl ToString, problem: impl Into<String>) -> WorkloadError {
        WorkloadError::Invalid {
            file: String::new(),
            key: key.to_string(),
            value: value.to_string(),
            problem: problem.into(),
        }
    }

    fn in_file(self, name: &str) -> WorkloadError {
        match self {
            WorkloadError::Invalid { key, value, problem, .. } => WorkloadError::Invalid {
                file: name.to_string(),
                key,
                value,
                problem,
            },
            e => e,
        }
    }
}

/// How jobs are placed on nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Packing {
    /// Jobs below a node's GPU count share nodes (first fit); larger jobs take whole nodes.
    Shared,
    /// Every job takes whole nodes; a 1-GPU job leaves its node's other GPUs unallocated.
    Exclusive,
}

/// `[cluster]`: the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Nodes, named `node001…`.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u16,
    /// Placement.
    pub packing: Packing,
    /// `memory.total` of every GPU, MiB.
    pub mem_total_mib: f64,
    /// `power.limit` of every GPU, watts.
    pub power_limit_w: f64,
}

/// `[arrivals]`: how much work is offered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    /// Offered load: expected GPU-hours requested per GPU-hour of capacity (0–2). Poisson
    /// arrivals at the rate that gives this load.
    pub load: f64,
}

/// `[telemetry]`: per-phase, per-sample distributions. Utilisation is `utilization.gpu` in
/// percent (written as an integer, as nvidia-smi prints it), memory `memory.used`, power
/// `power.draw` (two decimals).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// Idle draw of a GPU, drawn once per job, watts.
    pub idle_power_w: Range,
    /// Standard deviation of per-sample power noise, watts.
    pub power_noise_w: f64,
    /// Standard deviation of power noise during spin (flat power), watts.
    pub spin_power_noise_w: f64,
    /// Compute phases: per-sample util, percent (quantile table).
    pub compute_util_pct: Quantiles,
    /// Compute phases: the job's draw at full util, drawn once per job, watts.
    pub compute_power_w: Quantiles,
    /// Memory the job holds while it runs, drawn once per job, percent of `memory.total`.
    pub job_mem_pct: Quantiles,
    /// Per-sample memory jitter, percent of `memory.total` (uniform ±).
    pub mem_jitter_pct: f64,
    /// Staging: memory used (CUDA context or nothing), MiB.
    pub staging_mem_mib: Range,
    /// Staging: share of jobs whose process has not yet opened the GPU (procs = 0).
    pub staging_procs_zero_share: f64,
    /// Checkpoint stalls: power, watts.
    pub checkpoint_power_w: Range,
    /// Eval or CPU phases: util, percent.
    pub eval_util_pct: Range,
    /// Starved jobs: util, percent.
    pub starved_util_pct: Range,
    /// Quiet periods of bursty jobs: util, percent.
    pub quiet_util_pct: Range,
    /// Spin (hung or brief): util, percent.
    pub spin_util_pct: Range,
    /// Spin: flat power, drawn once per episode, watts.
    pub spin_power_w: Range,
    /// Hung with memory held: power, drawn once per job, watts.
    pub hung_power_w: Range,
}

/// How a job ends: relative weights.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcomes {
    /// Runs to completion and releases its GPUs.
    pub complete: f64,
    /// Fails part-way and releases its GPUs.
    pub fail: f64,
    /// Hangs with 0 % util and memory held, holding its GPUs until the time limit.
    pub hung: f64,
    /// Hangs spinning (high util, flat near-idle power) until the time limit.
    pub spin: f64,
    /// Its process exits; the allocation is held idle until the time limit.
    pub idle: f64,
}

/// `[[kinds]]`: one kind of job in the mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobKind {
    /// Name, used in job names and reports.
    pub name: String,
    /// Share of arrivals (relative weight).
    pub share: f64,
    /// GPUs requested.
    pub gpus: Choice,
    /// True runtime if nothing goes wrong, minutes.
    pub runtime_min: LogNormal,
    /// Time limit, minutes (the runtime is clipped to it).
    pub time_limit_min: Choice,
    /// Staging at the start, 0 % util, minutes.
    pub staging_min: Range,
    /// Time between checkpoint stalls, minutes; absent: none.
    #[serde(default)]
    pub checkpoint_every_min: Option<Range>,
    /// Length of a checkpoint stall, minutes.
    #[serde(default = "zero_range")]
    pub checkpoint_min: Range,
    /// Time between eval or CPU phases, minutes; absent: none.
    #[serde(default)]
    pub eval_every_min: Option<Range>,
    /// Length of an eval phase, minutes.
    #[serde(default = "zero_range")]
    pub eval_min: Range,
    /// Time between quiet periods (bursty RL or eval jobs), minutes; absent: none.
    #[serde(default)]
    pub quiet_every_min: Option<Range>,
    /// Length of a quiet period, minutes.
    #[serde(default = "zero_range")]
    pub quiet_min: Range,
    /// Util during this kind's quiet periods, percent; absent: `telemetry.quiet_util_pct`.
    /// Serving jobs between bursts read exactly 0 % (the Alibaba GenAI excerpt).
    #[serde(default)]
    pub quiet_util_pct: Option<Range>,
    /// Time between brief, productive spins (waiting on a straggler), minutes; absent: none.
    #[serde(default)]
    pub brief_spin_every_min: Option<Range>,
    /// Length of a brief spin, minutes.
    #[serde(default = "zero_range")]
    pub brief_spin_min: Range,
    /// Starved: compute runs at low util throughout (ground truth `starved`).
    #[serde(default)]
    pub starved: bool,
    /// Share of the job's GPUs never used (a partial job), rounded down, leaving ≥ 1 used.
    #[serde(default = "zero_range")]
    pub unused_gpu_share: Range,
    /// How jobs of this kind end.
    pub outcomes: Outcomes,
    /// Slurm partition.
    #[serde(default = "default_partition")]
    pub partition: String,
    /// Slurm QOS.
    #[serde(default = "default_qos")]
    pub qos: String,
}

fn zero_range() -> Range {
    Range::constant(0.0)
}
fn default_partition() -> String {
    "gpu".into()
}
fn default_qos() -> String {
    "normal".into()
}

/// `[faults]`: collector faults, independent of the jobs. Rates are per node per day unless
/// named otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Node outages (no samples from the node), per node per day.
    pub node_outages_per_node_day: f64,
    /// Node outage length, minutes.
    pub node_outage_min: Range,
    /// Cluster-wide outages (no samples at all), per day.
    pub cluster_outages_per_day: f64,
    /// Cluster outage length, minutes.
    pub cluster_outage_min: Range,
    /// Frozen collector (the node's last values resent bit for bit), per node per day.
    pub frozen_per_node_day: f64,
    /// Freeze length, minutes.
    pub frozen_min: Range,
    /// Exporter reporting all zeros (0 %, 0 MiB, 0 W), per node per day.
    pub all_zero_per_node_day: f64,
    /// All-zero episode length, minutes.
    pub all_zero_min: Range,
    /// Nodes whose GPUs are MIG-partitioned: `utilization.gpu` is `[N/A]` on every sample.
    pub mig_nodes: u32,
    /// Share of samples whose `power.draw` is `[N/A]`.
    pub na_power_share: f64,
}

/// A whole workload file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Short name, used in reports (`default`, `traps`).
    pub name: String,
    /// The machine.
    pub cluster: Cluster,
    /// Offered load.
    pub arrivals: Arrivals,
    /// Per-phase telemetry.
    pub telemetry: Telemetry,
    /// The job mix.
    pub kinds: Vec<JobKind>,
    /// Collector faults.
    pub faults: Faults,
}

impl Workload {
    /// Reads and validates a workload file.
    ///
    /// # Errors
    /// [`WorkloadError`] naming the file, the key and the bad value.
    pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
            file: path.display().to_string(),
            source,
        })?;
        Workload::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates workload TOML; `file` names its source in errors.
    ///
    /// # Errors
    /// [`WorkloadError::Parse`] for malformed TOML, unknown or missing keys and wrong types;
    /// [`WorkloadError::Invalid`] for out-of-range values.
    pub fn from_toml(text: &str, file: &str) -> Result<Workload, WorkloadError> {
        let w: Workload = toml::from_str(text).map_err(|e| WorkloadError::Parse {
            file: file.to_string(),
            message: e.to_string().trim_end().replace('\n', "\n  "),
        })?;
        w.validate().map_err(|e| e.in_file(file))?;
        Ok(w)
    }

    /// The built-in default workload.
    pub fn builtin_default() -> Workload {
        Workload::from_toml(DEFAULT_TOML, "sim/workloads/default.toml").expect("the built-in default workload is valid")
    }

    /// The built-in trap workload.
    pub fn builtin_traps() -> Workload {
        Workload::from_toml(TRAPS_TOML, "sim/workloads/traps.toml").expect("the built-in trap workload is valid")
    }

    /// Range checks every value; errors name the dotted key.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        fn inv(key: &str, value: impl ToString, problem: impl Into<String>) -> WorkloadError {
            WorkloadError::invalid(key, value, problem)
        }
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(inv(
                "name",
                format!("{:?}", self.name),
                "a non-empty name of letters, digits, - and _",
            ));
        }
        let c = &self.cluster;
        if c.nodes == 0 || c.nodes > 9999 {
            return Err(inv("cluster.nodes", c.nodes, "must be 1..=9999"));
        }
        if c.gpus_per_node == 0 || c.gpus_per_node > 64 {
            return Err(inv("cluster.gpus_per_node", c.gpus_per_node, "must be 1..=64"));
        }
        if !(c.mem_total_mib > 0.0 && c.mem_total_mib <= policy::MAX_MEM_MIB) {
            return Err(inv("cluster.mem_total_mib", c.mem_total_mib, "must be above 0 and at most 1 TiB"));
        }
        if !(c.power_limit_w > 0.0 && c.power_limit_w <= 2000.0) {
            return Err(inv("cluster.power_limit_w", c.power_limit_w, "must be in (0, 2000]"));
        }
        if !(self.arrivals.load > 0.0 && self.arrivals.load <= 2.0) {
            return Err(inv("arrivals.load", self.arrivals.load, "must be in (0, 2]"));
        }
        let t = &self.telemetry;
        let pw = c.power_limit_w * 1.25;
        t.idle_power_w.check("telemetry.idle_power_w", 1.0, pw)?;
        for (k, v) in [
            ("telemetry.power_noise_w", t.power_noise_w),
            ("telemetry.spin_power_noise_w", t.spin_power_noise_w),
        ] {
            if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
                return Err(inv(k, v, "must be in [0, 100]"));
            }
        }
        t.compute_util_pct.check("telemetry.compute_util_pct", 0.0, 100.0)?;
        t.compute_power_w.check("telemetry.compute_power_w", 1.0, pw)?;
        t.job_mem_pct.check("telemetry.job_mem_pct", 0.0, 100.0)?;
        if !(t.mem_jitter_pct.is_finite() && (0.0..=10.0).contains(&t.mem_jitter_pct)) {
            return Err(inv("telemetry.mem_jitter_pct", t.mem_jitter_pct, "must be in [0, 10]"));
        }
        t.staging_mem_mib.check("telemetry.staging_mem_mib", 0.0, c.mem_total_mib)?;
        share("telemetry.staging_procs_zero_share", t.staging_procs_zero_share)?;
        t.checkpoint_power_w.check("telemetry.checkpoint_power_w", 1.0, pw)?;
        t.eval_util_pct.check("telemetry.eval_util_pct", 0.0, 100.0)?;
        t.starved_util_pct.check("telemetry.starved_util_pct", 0.0, 100.0)?;
        t.quiet_util_pct.check("telemetry.quiet_util_pct", 0.0, 100.0)?;
        t.spin_util_pct.check("telemetry.spin_util_pct", 0.0, 100.0)?;
        t.spin_power_w.check("telemetry.spin_power_w", 1.0, pw)?;
        t.hung_power_w.check("telemetry.hung_power_w", 1.0, pw)?;

        if self.kinds.is_empty() {
            return Err(inv("kinds", "[]", "a workload needs at least one [[kinds]] entry"));
        }
        let cap = c.nodes as f64 * c.gpus_per_node as f64;
        let mut total = 0.0;
        for (i, k) in self.kinds.iter().enumerate() {
            let key = |f: &str| format!("kinds[{i}].{f}");
            if k.name.is_empty() {
                return Err(inv(&key("name"), "\"\"", "must not be empty"));
            }
            if !(k.share.is_finite() && k.share >= 0.0) {
                return Err(inv(&key("share"), k.share, "must be >= 0"));
            }
            total += k.share;
            k.gpus.check(&key("gpus"), 1.0, cap)?;
            if k.gpus.values.iter().any(|v| v.fract() != 0.0) {
                return Err(inv(
                    &key("gpus"),
                    format!("{:?}", k.gpus.values),
                    "GPU counts must be whole numbers",
                ));
            }
            if c.packing == Packing::Shared
                && k.gpus
                    .values
                    .iter()
                    .any(|&v| v > c.gpus_per_node as f64 && v % c.gpus_per_node as f64 != 0.0)
            {
                return Err(inv(
                    &key("gpus"),
                    format!("{:?}", k.gpus.values),
                    format!("jobs above one node must use whole nodes ({} GPUs each)", c.gpus_per_node),
                ));
            }
            k.runtime_min.check(&key("runtime_min"))?;
            k.time_limit_min.check(&key("time_limit_min"), 1.0, 60.0 * 24.0 * 30.0)?;
            let day = 60.0 * 24.0;
            k.staging_min.check(&key("staging_min"), 0.0, day)?;
            for (f, every, len) in [
                ("checkpoint", &k.checkpoint_every_min, &k.checkpoint_min),
                ("eval", &k.eval_every_min, &k.eval_min),
                ("quiet", &k.quiet_every_min, &k.quiet_min),
                ("brief_spin", &k.brief_spin_every_min, &k.brief_spin_min),
            ] {
                if let Some(e) = every {
                    e.check(&key(&format!("{f}_every_min")), 1.0, 30.0 * day)?;
                }
                len.check(&key(&format!("{f}_min")), 0.0, day)?;
            }
            if let Some(q) = &k.quiet_util_pct {
                q.check(&key("quiet_util_pct"), 0.0, 100.0)?;
            }
            k.unused_gpu_share.check(&key("unused_gpu_share"), 0.0, 1.0)?;
            let o = &k.outcomes;
            let ws = [o.complete, o.fail, o.hung, o.spin, o.idle];
            if ws.iter().any(|w| !w.is_finite() || *w < 0.0) || ws.iter().sum::<f64>() <= 0.0 {
                return Err(inv(&key("outcomes"), format!("{o:?}"), "weights must be >= 0 with a positive sum"));
            }
        }
        if total <= 0.0 {
            return Err(inv("kinds[*].share", total, "the shares must have a positive sum"));
        }
        let f = &self.faults;
        for (k, v) in [
            ("faults.node_outages_per_node_day", f.node_outages_per_node_day),
            ("faults.cluster_outages_per_day", f.cluster_outages_per_day),
            ("faults.frozen_per_node_day", f.frozen_per_node_day),
            ("faults.all_zero_per_node_day", f.all_zero_per_node_day),
        ] {
            if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
                return Err(inv(k, v, "must be in [0, 100]"));
            }
        }
        f.node_outage_min.check("faults.node_outage_min", 0.0, 7.0 * 1440.0)?;
        f.cluster_outage_min.check("faults.cluster_outage_min", 0.0, 7.0 * 1440.0)?;
        f.frozen_min.check("faults.frozen_min", 0.0, 7.0 * 1440.0)?;
        f.all_zero_min.check("faults.all_zero_min", 0.0, 7.0 * 1440.0)?;
        if f.mig_nodes > c.nodes {
            return Err(inv(
                "faults.mig_nodes",
                f.mig_nodes,
                format!("more than cluster.nodes ({})", c.nodes),
            ));
        }
        share("faults.na_power_share", f.na_power_share)?;
        Ok(())
    }
}

fn share(key: &str, v: f64) -> Result<(), WorkloadError> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(WorkloadError::invalid(key, v, "must be a share in [0, 1]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        let d = Workload::builtin_default();
        assert_eq!((d.cluster.nodes, d.cluster.gpus_per_node), (64, 8));
        let t = Workload::builtin_traps();
        assert_eq!(t.name, "traps");
        // No trap job ever becomes wholly wasted, so any cancel there is false.
        for k in &t.kinds {
            assert_eq!((k.outcomes.hung, k.outcomes.spin, k.outcomes.idle), (0.0, 0.0, 0.0), "{}", k.name);
            assert!(k.unused_gpu_share.0[1] < 1.0, "{}", k.name);
        }
    }

    #[test]
    fn bad_values_name_file_key_and_value() {
        let text = DEFAULT_TOML.replacen("load = ", "load = 7.5 # was ", 1);
        let e = Workload::from_toml(&text, "w.toml").unwrap_err().to_string();
        assert!(e.contains("w.toml") && e.contains("arrivals.load") && e.contains("7.5"), "{e}");

        let text = DEFAULT_TOML.replacen("\nshare = ", "\nshare = -1.0 # was ", 1);
        let e = Workload::from_toml(&text, "w.toml").unwrap_err().to_string();
        assert!(e.contains("kinds[0].share") && e.contains("-1"), "{e}");

        let text = DEFAULT_TOML.replacen("nodes = 64", "nodes = \"many\"", 1);
        let e = Workload::from_toml(&text, "w.toml").unwrap_err().to_string();
        assert!(e.contains("w.toml") && e.contains("nodes") && e.contains("many"), "{e}");

        let text = DEFAULT_TOML.replacen("[cluster]", "[cluster]\nnodez = 3", 1);
        let e = Workload::from_toml(&text, "w.toml").unwrap_err().to_string();
        assert!(e.contains("nodez"), "{e}");

        let text = DEFAULT_TOML.replacen("staging_min = [", "staging_min = [50, ", 1);
        let e = Workload::from_toml(&text, "w.toml").unwrap_err().to_string();
        assert!(e.contains("staging_min"), "{e}");
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let e = Workload::load(Path::new("/nonexistent/w.toml")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/w.toml"), "{e}");
    }
}
