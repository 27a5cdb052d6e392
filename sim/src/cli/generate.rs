//! `sim generate --workload FILE --seed S [--days D] --out DIR`: write a generated workload in
//! the trace format, ground truth included.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// Arguments of `sim generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload TOML file, or `default` / `traps` for the built-in workloads.
    #[arg(long)]
    pub workload: String,
    /// RNG seed.
    #[arg(long, allow_negative_numbers = true)]
    pub seed: u64,
    /// Simulated span, days (above 0, at most 366; the world and the trace must fit the 8 GiB
    /// memory budget, see `sim::budget`).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0)]
    pub days: f64,
    /// Override the workload's node count (for small traces); the workload is validated again.
    #[arg(long, allow_negative_numbers = true)]
    pub nodes: Option<u32>,
    /// Output trace folder.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `sim generate`.
pub fn run(args: Args) -> Result<()> {
    crate::budget::check_days(args.days)?;
    let mut w = crate::load_workload(&args.workload).with_context(|| format!("loading workload {}", args.workload))?;
    if let Some(n) = args.nodes {
        w.cluster.nodes = n;
        w.validate()
            .with_context(|| format!("workload {} with --nodes {n}", args.workload))?;
    }
    use crate::budget::{check_memory, TRACE_SAMPLE_BYTES, WORLD_SAMPLE_BYTES};
    // The world and the trace written from it are held at once.
    check_memory("sim generate", &[&w], args.days, WORLD_SAMPLE_BYTES + TRACE_SAMPLE_BYTES)?;
    let world = crate::generate(&w, args.seed, args.days);
    anyhow::ensure!(
        !world.jobs.is_empty(),
        "{} (an empty trace would replay nothing); nothing was written",
        crate::sweep::no_jobs(&w, args.seed, args.days)
    );
    let trace = crate::trace::to_trace(&world);
    traces::write_trace(&args.out, &trace).with_context(|| format!("writing {}", args.out.display()))?;
    super::emit(&format!(
        "generated workload {} seed {} over {} days: {} jobs, {} samples into {}\n",
        w.name,
        args.seed,
        args.days,
        trace.jobs.len(),
        trace.samples.len(),
        args.out.display()
    ));
    Ok(())
}
