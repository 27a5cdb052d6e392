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
    /// A TOML file with a `[policy]` section (or the policy keys at top level, but not both).
    /// Default: the built-in default policy.
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

/// Reads a policy file: a `[policy]` table, or the policy keys at the top level. The
/// enforcer's config file is accepted: its `[enforcer]` table is not read here, next to a
/// `[policy]` table or to top-level policy keys; a file holding only `[enforcer]` gives the
/// default policy. A file with a `[policy]` table may hold no other top-level key: a policy key
/// there would be silently ignored. Notes for stderr (e.g. "no [policy] section: the default
/// policy") are printed by [`load_policy_config`] and returned by [`read_policy_file`].
///
/// # Errors
/// Unreadable or invalid TOML, top-level keys next to a `[policy]` table (naming them), an
/// invalid policy section; each naming the file.
pub fn load_policy_config(path: &Path) -> Result<policy::PolicyConfig> {
    let (cfg, notes) = read_policy_file(path)?;
    for n in notes {
        eprintln!("sim: note: {n}");
    }
    Ok(cfg)
}

/// [`load_policy_config`] without printing: the configuration and the notes for stderr.
///
/// # Errors
/// As [`load_policy_config`].
pub fn read_policy_file(path: &Path) -> Result<(policy::PolicyConfig, Vec<String>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading policy file {}", path.display()))?;
    let mut value: toml::Table = toml::from_str(&text).with_context(|| format!("parsing {} as TOML", path.display()))?;
    let mut notes = Vec::new();
    let table = match value.get("policy") {
        Some(toml::Value::Table(t)) => {
            let stray: Vec<&str> = value
                .keys()
                .map(String::as_str)
                .filter(|k| !matches!(*k, "policy" | "enforcer"))
                .collect();
            if !stray.is_empty() {
                bail!(
                    "{}: top-level key(s) {} next to the [policy] table would be ignored; move them into [policy] (or drop the [policy] header and keep every policy key at the top level)",
                    path.display(),
                    stray.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                );
            }
            t.clone()
        }
        Some(_) => bail!("{}: key `policy` is not a table", path.display()),
        None => {
            if matches!(value.get("enforcer"), Some(toml::Value::Table(_))) {
                value.remove("enforcer");
                if value.is_empty() {
                    notes.push(format!(
                        "{}: no [policy] section (only [enforcer], which replay does not read): replaying the default policy",
                        path.display()
                    ));
                }
            }
            value
        }
    };
    let cfg = toml::Value::Table(table)
        .try_into::<policy::PolicyConfig>()
        .with_context(|| format!("{}: invalid [policy] section", path.display()))?;
    Ok((cfg, notes))
}

/// The policy config from `--policy` (or the default) with `--interval` applied.
pub fn policy_from_args(policy: Option<&Path>, interval: Option<&str>) -> Result<(policy::Policy, i64)> {
    let mut cfg = match policy {
        Some(p) => load_policy_config(p)?,
        None => policy::PolicyConfig::default(),
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
    let source = policy.map_or_else(|| "the default policy".to_string(), |p| p.display().to_string());
    let p = policy::Policy::new(&cfg).map_err(|e| match interval {
        // The interval came from the flag, not from the policy: name the flag.
        Some(i) if e.key == "policy.interval" => anyhow::anyhow!("--interval {i}: {}", e.problem),
        _ => anyhow::anyhow!("{source}: {e}"),
    })?;
    Ok((p, interval_s))
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
    let (policy, interval_s) = policy_from_args(args.policy.as_deref(), args.interval.as_deref())?;
    let (trace, report) =
        traces::read_trace(&args.trace, args.lenient).with_context(|| format!("reading trace {}", args.trace.display()))?;
    if let Some(why) = nothing_to_replay(&args.trace, &trace, &report) {
        bail!("{why}");
    }
    let res = traces::replay::replay(&trace, policy, interval_s);
    traces::replay::write_replay(&args.out, &trace, &res).with_context(|| format!("writing {}", args.out.display()))?;
    let mut out = traces::replay::summary_text(&trace, &res);
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
