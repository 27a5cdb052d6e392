//! `sim generate --workload FILE --seed S [--days D] --out DIR`: write a generated workload in
//! the trace format, ground truth included.

use anyhow::{Context, Result};
use sim::workload::Workload;
use std::path::{Path, PathBuf};

/// Arguments of `sim generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// Workload TOML file, or `default` / `traps` for the built-in workloads.
    #[arg(long)]
    pub workload: PathBuf,
    /// RNG seed.
    #[arg(long)]
    pub seed: u64,
    /// Simulated span, days.
    #[arg(long, default_value_t = 1.0)]
    pub days: f64,
    /// Output trace folder.
    #[arg(long)]
    pub out: PathBuf,
}

/// A workload by file, or a built-in one by name when no such file exists.
pub fn load_workload(path: &Path) -> Result<Workload> {
    if !path.exists() {
        match path.to_str() {
            Some("default") => return Ok(Workload::builtin_default()),
            Some("traps") => return Ok(Workload::builtin_traps()),
            _ => {}
        }
    }
    Workload::load(path).with_context(|| format!("loading workload {}", path.display()))
}

/// Runs `sim generate`.
pub fn run(args: &GenerateArgs) -> Result<()> {
    anyhow::ensure!(args.days > 0.0 && args.days.is_finite(), "--days must be positive, got {}", args.days);
    let w = load_workload(&args.workload)?;
    let world = sim::generate::generate(&w, args.seed, args.days);
    let trace = sim::world_trace::world_to_trace(&world);
    traces::write_trace(&args.out, &trace).with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "generated workload {} seed {} over {} days: {} jobs, {} samples into {}",
        w.name,
        args.seed,
        args.days,
        trace.jobs.len(),
        trace.samples.len(),
        args.out.display()
    );
    Ok(())
}
