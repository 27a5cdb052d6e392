//! The `sim` command line. Each subcommand is one module here with an `Args` struct (clap
//! derive) and a `run(args)` function; adding one is that module plus one [`Command`] variant.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod calibrate;
pub mod generate;
pub mod import;
pub mod merge;
pub mod replay;
pub mod sweep;

/// gpu-reaper's simulator: generate workloads, sweep policy configurations, merge shards.
#[derive(Debug, Parser)]
#[command(name = "sim", version, about)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Score policy configurations and baselines on generated workloads (the main job).
    Sweep(sweep::Args),
    /// Merge the sweep.csv files of `sweep --shard i/N` runs and write the reports.
    Merge(merge::Args),
    /// Write a generated workload in the trace format, ground truth included.
    Generate(generate::Args),
    /// Run the policy over a trace folder: findings.csv and jobs-summary.csv.
    Replay(replay::Args),
    /// Convert a public trace or an nvidia-smi / dcgm log into the trace format.
    Import(import::Args),
    /// KS distance of the default workload's util, power and memory against Seren, with an SVG.
    Calibrate(calibrate::Args),
}

/// Parses the arguments, runs the subcommand, prints the error chain on failure.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sweep(a) => sweep::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Import(a) => import::run(a),
        Command::Calibrate(a) => calibrate::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sim: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes command output to stdout. A closed stdout (`sim sweep | head`) is not an error: the
/// rest of the output is dropped quietly (Rust ignores SIGPIPE, so `println!` would panic).
pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes `sweep.csv`, `frontier.svg` and `summary.md` into `out` (created if missing).
///
/// # Errors
/// I/O or drawing errors, with the path.
/// Refuses, before any work is done, an `--out` that exists but is not a folder. (The folder
/// itself is created only when there are reports to write.)
///
/// # Errors
/// Names the path and what is wrong.
pub fn check_out(out: &std::path::Path) -> anyhow::Result<()> {
    if out.exists() && !out.is_dir() {
        anyhow::bail!("--out {}: exists and is not a folder; give a folder for the reports", out.display());
    }
    Ok(())
}

/// `workloads`: the sweep's workloads (for the trap durations in `summary.md`); empty when not
/// at hand.
pub fn write_reports(out: &std::path::Path, rows: &[crate::score::Row], workloads: &[crate::Workload]) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    crate::sweep::write_csv(&out.join("sweep.csv"), rows)?;
    let svg = crate::report::frontier_svg(rows)?;
    std::fs::write(out.join("frontier.svg"), svg).with_context(|| format!("writing {}", out.join("frontier.svg").display()))?;
    std::fs::write(out.join("summary.md"), crate::report::summary_md(rows, workloads))
        .with_context(|| format!("writing {}", out.join("summary.md").display()))?;
    Ok(())
}
