//! `sim replay`: run the policy over a trace folder and write `findings.csv` and
//! `jobs-summary.csv` (see `traces/README.md`).

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `sim replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace folder (`jobs.csv` + `samples.csv`).
    #[arg(long)]
    pub trace: PathBuf,
    /// A TOML file read as the enforcer reads its config: a `[policy]` table (an `[enforcer]`
    /// table is allowed and not read; any other top-level key is an error). Without it, or
    /// when the file has no `[policy]` table, the default policy (said in the output).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Cycle interval, e.g. `60s`, `2m`. Default: the policy's `interval` (60 s).
    #[arg(long)]
    pub interval: Option<String>,
    /// Output folder for `findings.csv` and `jobs-summary.csv`.
    #[arg(long, default_value = "replay-out")]
    pub out: PathBuf,
    /// Skip malformed rows (counted in the summary) instead of failing on the first.
    #[arg(long)]
    pub lenient: bool,
}

/// A policy file as the enforcer reads its config file (`enforcer/src/config.rs`,
/// `ConfigFile`): a `[policy]` table and an `[enforcer]` table, both optional, nothing else.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    /// `[policy]`: `None` when the file has no such table.
    #[serde(default)]
    policy: Option<policy::PolicyConfig>,
    /// `[enforcer]`: must be a table; its keys are the enforcer's and are not checked here
    /// (`enforcer check-config` does that).
    #[serde(default, rename = "enforcer")]
    _enforcer: Option<toml::Table>,
}

/// The top-level keys a policy file may hold: those of the enforcer's config file.
const TOP_LEVEL_KEYS: [&str; 2] = ["policy", "enforcer"];

/// A TOML error in `file`: toml's own message, which gives the line, the column and the
/// offending text, indented under the file's name.
fn toml_error(file: &Path, e: &toml::de::Error) -> anyhow::Error {
    anyhow::anyhow!("{}: {}", file.display(), e.to_string().trim_end().replace('\n', "\n  "))
}

/// Reads a policy file exactly as the enforcer reads its config file: the `[policy]` table
/// (every key optional, unknown keys refused), an `[enforcer]` table that is not read here,
/// and no other top-level key. `Ok(None)`: the file has no `[policy]` table (an empty file,
/// `/dev/null`, a file with only `[enforcer]`), so the enforcer would run the default policy.
///
/// # Errors
/// An unreadable file; invalid TOML or a value of the wrong type (naming file, line and
/// column); any top-level key but `policy` and `enforcer` (naming every such key: policy keys
/// belong under a `[policy]` header, as in the enforcer's config). The policy's own checks are
/// `Policy::new`'s, in [`policy_from_args`].
pub fn read_policy_file(path: &Path) -> Result<Option<policy::PolicyConfig>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading policy file {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| toml_error(path, &e))?;
    let mut stray: Vec<&str> = table.keys().map(String::as_str).filter(|k| !TOP_LEVEL_KEYS.contains(k)).collect();
    stray.sort_unstable();
    if !stray.is_empty() {
        bail!(
            "{}: unknown top-level key(s) {}: a policy file is read as the enforcer reads its config, which holds only a [policy] and an [enforcer] table; put policy keys under a [policy] header",
            path.display(),
            stray.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let file: PolicyFile = toml::from_str(&text).map_err(|e| toml_error(path, &e))?;
    Ok(file.policy)
}

/// The policy a replay runs, its cycle interval, and where it came from.
#[derive(Debug)]
pub struct ReplayPolicy {
    /// The validated policy.
    pub policy: policy::Policy,
    /// Cycle interval, seconds: `--interval`, else the policy's `interval`.
    pub interval_s: i64,
    /// Where the policy came from, for the replay's output: the file's path, or "the default
    /// policy (...)" saying why (no `--policy`, or a file with no `[policy]` table).
    pub source: String,
}

/// The policy from `--policy` (read by [`read_policy_file`]; the default without it, or when
/// the file has no `[policy]` table) with `--interval` applied.
///
/// # Errors
/// As [`read_policy_file`]; a policy `Policy::new` refuses (naming the file, or `--interval`
/// when the flag's value is the one refused), with each further problem
/// [`policy::Policy::check`] finds on a line of its own; an unparsable or non-positive
/// `--interval`.
pub fn policy_from_args(policy: Option<&Path>, interval: Option<&str>) -> Result<ReplayPolicy> {
    let (mut cfg, source) = match policy {
        None => (
            policy::PolicyConfig::default(),
            "the default policy (no --policy given)".to_string(),
        ),
        Some(p) => match read_policy_file(p)? {
            Some(cfg) => (cfg, p.display().to_string()),
            None => (
                policy::PolicyConfig::default(),
                format!(
                    "the default policy ({} has no [policy] table; the enforcer would run the default policy too)",
                    p.display()
                ),
            ),
        },
    };
    if let Some(i) = interval {
        cfg.interval = policy::DurationS::parse(i.trim()).map_err(|e| anyhow::anyhow!("--interval {i:?}: {e}"))?;
        if cfg.interval.secs() <= 0 {
            bail!("--interval must be positive, got {i:?}");
        }
    }
    // A zero interval from the policy file is named by `Policy::new` below, as
    // `policy.interval` in that file.
    let interval_s = cfg.interval.secs();
    // The policy's further problems, each on a line of its own after the first (operator
    // trial 19: one mistake named per run).
    let rest = |src: &str| -> String {
        policy::Policy::check(&cfg)
            .iter()
            .skip(1)
            .map(|x| format!("\n{src}: {x}"))
            .collect()
    };
    let p = policy::Policy::new(&cfg).map_err(|e| match interval {
        // The interval came from the flag, not from the policy: name the flag.
        Some(i) if e.key == "policy.interval" => anyhow::anyhow!("--interval {i}: {}{}", e.problem, rest(&source)),
        // A limit of the policy's that the flag's interval breaks (`max_sample_gap` shorter
        // than it, or a window it does not fit): name the flag as well as the key (trial 13:
        // the refusal blamed the policy's interval, which the flag had replaced).
        Some(i) if e.problem.contains("policy.interval") => {
            anyhow::anyhow!(
                "--interval {i} does not fit {source}: {e} (policy.interval here is the --interval given){}",
                rest(&source)
            )
        }
        _ => anyhow::anyhow!("{source}: {e}{}", rest(&source)),
    })?;
    Ok(ReplayPolicy {
        policy: p,
        interval_s,
        source,
    })
}

/// Why a trace read without error has nothing to replay (no job, or no sample), or `None`.
fn nothing_to_replay(dir: &Path, trace: &traces::Trace, report: &traces::ReadReport) -> Option<String> {
    let (what, file) = if trace.jobs.is_empty() {
        ("job", "jobs.csv")
    } else if trace.samples.is_empty() {
        ("sample", "samples.csv")
    } else {
        return None;
    };
    let path = dir.join(file);
    let skipped = report.skipped.iter().filter(|p| p.file == path).count();
    let dropped = report.conflicting_duplicates;
    Some(if skipped > 0 {
        format!(
            "{}: all {skipped} rows were malformed and skipped (--lenient), so there is no {what} to replay",
            path.display()
        )
    } else if what == "sample" && dropped > 0 {
        format!(
            "{}: all {dropped} rows were conflicting duplicates (same t_s, node, gpu with other values) and were dropped, so there is no sample to replay",
            path.display()
        )
    } else {
        format!(
            "{}: holds no {what} (is it empty, or only a header?), so there is nothing to replay",
            path.display()
        )
    })
}

/// Runs `sim replay`.
///
/// # Errors
/// Bad policy or interval, an unreadable or malformed trace (naming file, line and column), a
/// trace with no job or no sample (none left after `--lenient`), output errors.
pub fn run(args: Args) -> Result<()> {
    let rp = policy_from_args(args.policy.as_deref(), args.interval.as_deref())?;
    let (trace, report) =
        traces::read_trace(&args.trace, args.lenient).with_context(|| format!("reading trace {}", args.trace.display()))?;
    if let Some(why) = nothing_to_replay(&args.trace, &trace, &report) {
        bail!("{why}");
    }
    let res = traces::replay::replay(&trace, rp.policy, rp.interval_s);
    traces::replay::write_replay(&args.out, &trace, &res).with_context(|| format!("writing {}", args.out.display()))?;
    let mut out = format!("policy: {}\n", rp.source);
    out.push_str(&traces::replay::summary_text(&trace, &res));
    let _ = writeln!(out,
        "input: {} malformed rows skipped, {} out-of-order rows sorted, {} exact duplicate samples collapsed, {} conflicting duplicates dropped",
        report.skipped.len(),
        report.out_of_order_rows,
        report.exact_duplicates,
        report.conflicting_duplicates
    );
    for p in report.skipped.iter().take(5) {
        let _ = writeln!(out, "  skipped: {p}");
    }
    let _ = writeln!(
        out,
        "wrote {}/findings.csv and {}/jobs-summary.csv",
        args.out.display(),
        args.out.display()
    );
    super::emit(&out);
    Ok(())
}
