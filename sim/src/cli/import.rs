//! `sim import FORMAT SRC [options] --out DIR`: convert a public trace or an operator's own
//! telemetry log into the trace format (see `traces/README.md`).

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::PathBuf;
use traces::import::{self, Attribution, ImportReport};

/// The source formats `sim import` reads.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Philly per-minute GPU utilisation excerpt; needs `--jobs` (the JSON job list).
    Philly,
    /// Alibaba GenAI serving pods (duty cycle and memory per pod).
    AlibabaGenai,
    /// `nvidia-smi --query-gpu=... --format=csv -l N` log; needs `--node`.
    NvidiaSmiLog,
    /// A folder of dcgm-exporter pages named `<unix_seconds>.prom`.
    Dcgm,
}

impl Format {
    /// The name typed on the command line (`nvidia-smi-log` …).
    pub fn name(self) -> &'static str {
        match self {
            Format::Philly => "philly",
            Format::AlibabaGenai => "alibaba-genai",
            Format::NvidiaSmiLog => "nvidia-smi-log",
            Format::Dcgm => "dcgm",
        }
    }
}

/// The format-specific flags and the formats that read each.
const FLAG_FORMATS: [(&str, &[Format]); 5] = [
    ("--jobs", &[Format::Philly, Format::NvidiaSmiLog, Format::Dcgm]),
    ("--node", &[Format::NvidiaSmiLog, Format::Dcgm]),
    ("--tz", &[Format::NvidiaSmiLog]),
    ("--query", &[Format::NvidiaSmiLog]),
    ("--epoch-s", &[Format::AlibabaGenai]),
];

/// Arguments of `sim import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Source format.
    #[arg(value_enum)]
    pub format: Format,
    /// Source file (or folder, for `dcgm`).
    pub src: PathBuf,
    /// Job metadata: the Philly JSON job list, or a trace-format `jobs.csv` for
    /// `nvidia-smi-log` and `dcgm` (without it, each GPU becomes one pseudo-job).
    #[arg(long)]
    pub jobs: Option<PathBuf>,
    /// Host name the log was taken on (`nvidia-smi-log`; `dcgm` series without a host label:
    /// a `Hostname`/`hostname` label wins, with a warning naming the host it gave).
    #[arg(long)]
    pub node: Option<String>,
    /// Zone of nvidia-smi's local timestamps (`nvidia-smi-log`): `local` (the default), an
    /// IANA name or `+HH:MM`.
    #[arg(long)]
    pub tz: Option<String>,
    /// Field list of a headerless nvidia-smi log (`nvidia-smi-log`). Default:
    /// timestamp,index,uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit.
    /// A name (here or in the log's header) that looks like a misspelling of a field the
    /// importer reads is an error; other fields it does not read are ignored (unknown ones
    /// are listed in a note).
    #[arg(long)]
    pub query: Option<String>,
    /// Seconds added to relative timestamps (`alibaba-genai`; default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub epoch_s: Option<i64>,
    /// Skip malformed rows (counted) instead of failing on the first.
    #[arg(long)]
    pub lenient: bool,
    /// Output trace folder.
    #[arg(long)]
    pub out: PathBuf,
}

/// Refuses a format-specific flag given with a format that does not read it.
fn check_flags(args: &Args) -> Result<()> {
    let given = [
        args.jobs.is_some(),
        args.node.is_some(),
        args.tz.is_some(),
        args.query.is_some(),
        args.epoch_s.is_some(),
    ];
    for ((flag, formats), set) in FLAG_FORMATS.iter().zip(given) {
        if set && !formats.contains(&args.format) {
            let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
            bail!(
                "{flag} does not apply to format {} (only to {}); drop it",
                args.format.name(),
                names.join(", ")
            );
        }
    }
    Ok(())
}

fn attribution(jobs: Option<&PathBuf>, lenient: bool) -> Result<Attribution> {
    Ok(match jobs {
        None => Attribution::PseudoJobPerGpu,
        Some(p) => {
            let mut log = traces::error::RowLog::new(lenient);
            Attribution::Jobs(traces::format::read_jobs_file(p, &mut log).with_context(|| format!("reading --jobs {}", p.display()))?)
        }
    })
}

/// Why an import produced no samples, with what to check, followed by the import's warnings
/// (operator trial 13: the one saying which host `--node` lost to was never printed).
fn no_samples_reason(args: &Args, report: &ImportReport) -> String {
    let warnings: String = report.warnings.iter().map(|w| format!("\n  warning: {w}")).collect();
    format!("{}{warnings}", no_samples_cause(args, report))
}

fn no_samples_cause(args: &Args, report: &ImportReport) -> String {
    let src = args.src.display();
    let unattributed = report.count("unattributed_samples");
    let skipped = report.skipped.len();
    if unattributed > 0 {
        let jobs = args.jobs.as_ref().map_or_else(String::new, |p| p.display().to_string());
        let tz = if matches!(args.format, Format::NvidiaSmiLog) {
            format!(
                "check --tz (the timestamps were read in zone {}) and ",
                args.tz.as_deref().unwrap_or("local")
            )
        } else {
            String::new()
        };
        format!(
            "{src}: none of its {unattributed} samples falls on a GPU and time of a job in --jobs {jobs}, so nothing was imported; {tz}check that --jobs lists the jobs that ran on these nodes at these times"
        )
    } else if skipped > 0 {
        // Their reasons, lines before whole files (operator trial 13: line timestamps in
        // seconds, all skipped; review 26: a stray file beside the pages was named instead).
        let reasons: Vec<String> = report
            .skipped
            .iter()
            .filter(|p| p.line > 0)
            .chain(report.skipped.iter().filter(|p| p.line == 0))
            .take(3)
            .map(ToString::to_string)
            .collect();
        let mig = report.count("mig_series_skipped");
        let mig = if mig > 0 {
            format!("; besides, {mig} MIG series were skipped by design (a MIG slice is not judged on whole-GPU terms)")
        } else {
            String::new()
        };
        format!(
            "{src}: all {skipped} rows were malformed and skipped (--lenient), so nothing was imported; {}: {}{mig}",
            if reasons.len() == 1 { "the reason" } else { "the first reasons" },
            reasons.join("; ")
        )
    } else if report.count("mig_series_skipped") > 0 {
        format!(
            "{src}: holds only MIG series ({} skipped by design: a MIG slice is not judged on whole-GPU terms), so nothing was imported",
            report.count("mig_series_skipped")
        )
    } else {
        format!("{src}: holds no samples, so nothing was imported (is it empty, or only a header?)")
    }
}

/// A reading the policy uses, as [`absent_readings`] names it.
struct PolicyReading {
    /// The nvidia-smi field name (or, for the process count, a description); importers'
    /// own notes that name it already cover it.
    name: &'static str,
    /// The dcgm-exporter series the `dcgm` importer reads it from, or why it has none.
    dcgm: &'static str,
    /// True when the sample has the reading.
    has: fn(&policy::Sample) -> bool,
    /// What the policy does without it.
    without: &'static str,
}

/// The readings the policy uses: `sample_check.rs` and `window.rs` in `policy/` (a missing
/// memory.total or power.limit changes the threshold used; a missing process count leaves
/// idle and hung to the other readings).
const POLICY_READINGS: [PolicyReading; 6] = {
    const UNKNOWN: &str = "the policy sees it as unknown everywhere";
    const fn r(name: &'static str, dcgm: &'static str, has: fn(&policy::Sample) -> bool, without: &'static str) -> PolicyReading {
        PolicyReading { name, dcgm, has, without }
    }
    [
        r("utilization.gpu", "DCGM_FI_DEV_GPU_UTIL", |s| !s.util_pct.is_missing(), UNKNOWN),
        r("memory.used", "DCGM_FI_DEV_FB_USED", |s| !s.mem_used_mib.is_missing(), UNKNOWN),
        r("power.draw", "DCGM_FI_DEV_POWER_USAGE", |s| !s.power_w.is_missing(), UNKNOWN),
        r(
            "memory.total",
            "DCGM_FI_DEV_FB_TOTAL, or DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE",
            |s| !s.mem_total_mib.is_missing(),
            "memory held is judged against mem_held_mib instead of mem_held_frac of memory.total",
        ),
        r(
            "power.limit",
            "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            |s| !s.power_limit_w.is_missing(),
            "idle and spin power are judged against idle_power_w instead of a share of power.limit",
        ),
        r(
            "process count",
            "dcgm-exporter gives none",
            |s| s.procs.is_some(),
            "idle and hung are judged without it, and their findings say \"processes unknown\" (the enforcer reads it with nvidia-smi --query-compute-apps)",
        ),
    ]
};

/// Notes for the readings the policy uses that no imported sample has: the source lacks them,
/// or every value was missing. Named by their nvidia-smi field (and, for `dcgm`, the series),
/// each with what the policy does without it. A reading the importer's `notes` already name is
/// not repeated. A missing util with SM activity present is noted as read from SM activity,
/// which the policy uses in util's place.
fn absent_readings(format: Format, trace: &traces::Trace, notes: &[String]) -> Vec<String> {
    let has_sm_active = trace.samples.iter().any(|s| !s.sm_active.is_missing());
    POLICY_READINGS
        .iter()
        .filter(|r| !trace.samples.iter().any(r.has) && !notes.iter().any(|n| n.contains(r.name)))
        .map(|r| {
            let what = if r.name == "process count" {
                "a process count".to_string()
            } else {
                format!("a {} reading", r.name)
            };
            let source = match format {
                Format::Dcgm => format!(" ({})", r.dcgm),
                _ => String::new(),
            };
            let without = if r.name == "utilization.gpu" && has_sm_active {
                "the policy reads SM activity in its place, but only its 0 (no kernel ran): above 0 it is a lower bound of utilization.gpu, and such a sample has no compute reading"
            } else {
                r.without
            };
            format!("no sample has {what}{source}: {without}")
        })
        .collect()
}

/// Runs `sim import`.
///
/// # Errors
/// A format-specific flag given with another format (naming both), bad options or source rows (from the importer, naming file, line and column), and an
/// import that yields no sample at all (empty source, every row skipped, or every sample
/// outside the `--jobs` jobs — then naming `--tz` and `--jobs` to check); nothing is written
/// then.
pub fn run(args: Args) -> Result<()> {
    check_flags(&args)?;
    let src = &args.src;
    let ctx = || format!("importing {} as {}", src.display(), args.format.name());
    let (trace, report): (traces::Trace, ImportReport) = match args.format {
        Format::Philly => {
            let Some(jobs) = &args.jobs else {
                bail!("philly needs --jobs philly_dre_jobs_excerpt.json")
            };
            import::philly::import(src, jobs, args.lenient).with_context(ctx)?
        }
        Format::AlibabaGenai => import::alibaba::import(src, args.epoch_s.unwrap_or(0), args.lenient).with_context(ctx)?,
        Format::NvidiaSmiLog => {
            let Some(node) = &args.node else {
                bail!("nvidia-smi-log needs --node NAME (the host the log was taken on)")
            };
            let opts = import::nvidia_smi::SmiOptions {
                node: node.clone(),
                zone: import::Zone::parse(args.tz.as_deref().unwrap_or("local"))?,
                query: args.query.clone().unwrap_or_else(|| import::nvidia_smi::DEFAULT_QUERY.to_string()),
                lenient: args.lenient,
            };
            import::nvidia_smi::import(src, &opts, attribution(args.jobs.as_ref(), args.lenient)?).with_context(ctx)?
        }
        Format::Dcgm => import::dcgm::import(
            src,
            args.node.as_deref(),
            args.lenient,
            attribution(args.jobs.as_ref(), args.lenient)?,
        )
        .with_context(ctx)?,
    };
    if trace.samples.is_empty() {
        bail!("{}", no_samples_reason(&args, &report));
    }
    traces::write_trace(&args.out, &trace).with_context(|| format!("writing {}", args.out.display()))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "imported {} jobs, {} samples into {}",
        trace.jobs.len(),
        trace.samples.len(),
        args.out.display()
    );
    for (k, v) in &report.counts {
        let _ = writeln!(out, "  {k}: {v}");
    }
    if !report.skipped.is_empty() {
        let _ = writeln!(out, "  malformed rows skipped: {}", report.skipped.len());
        for p in report.skipped.iter().take(5) {
            let _ = writeln!(out, "    {p}");
        }
    }
    for w in &report.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    for n in report.notes.iter().chain(&absent_readings(args.format, &trace, &report.notes)) {
        let _ = writeln!(out, "  note: {n}");
    }
    if args.format == Format::Philly {
        let _ = writeln!(out, "  GPUs at 0 % or with no reading, by minute after the job's start:");
        for m in import::philly::start_profile(&trace) {
            let share = |k: u64| 100.0 * k as f64 / m.gpus.max(1) as f64;
            let _ = writeln!(
                out,
                "    +{} min: {} GPUs, {} at 0 % ({:.1} %), {} missing ({:.1} %), together {:.1} %",
                m.minute,
                m.gpus,
                m.zero,
                share(m.zero),
                m.missing,
                share(m.missing),
                share(m.zero + m.missing)
            );
        }
    }
    super::emit(&out);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_query_help_names_the_default_query() {
        use clap::CommandFactory;
        let mut cmd = crate::cli::Cli::command();
        let help = cmd.find_subcommand_mut("import").unwrap().render_long_help().to_string();
        assert!(help.contains(traces::import::nvidia_smi::DEFAULT_QUERY), "{help}");
    }
}
