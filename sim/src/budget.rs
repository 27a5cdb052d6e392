//! Up-front limits on what a command may generate: the span cap ([`MAX_DAYS`]) and an estimate
//! of the memory the generated worlds take, refused above [`MEMORY_BUDGET_BYTES`] before any
//! allocation (rather than aborting out of memory halfway).
//!
//! The estimate is an upper bound on the per-sample storage: every GPU of the cluster sampled on
//! every tick, each sample taking `size_of` of the structures that hold it (a
//! [`CompactSample`] in the [`World`](crate::World); for `sim generate` also the
//! [`policy::Sample`], job index and truth of the [`traces::Trace`] it writes), plus the
//! per-tick indexes. Jobs and their phase scripts are left out: at the built-in workloads they
//! are a few percent of the samples.

use crate::world::{CompactSample, TICK_S};
use crate::Workload;
use std::mem::size_of;

/// The longest simulated span, days (`--days` of `sweep`, `generate` and `calibrate`).
pub const MAX_DAYS: f64 = 366.0;

/// The memory the generated worlds of one command may take, bytes: 8 GiB.
pub const MEMORY_BUDGET_BYTES: u64 = 8 << 30;

/// The most seeds one sweep may run (`--seeds N`, `--seed-list`): every seed is a world
/// generated per workload and a result row per configuration.
pub const MAX_SEEDS: u64 = 10_000;

/// The most worker threads (`--threads`).
pub const MAX_THREADS: usize = 1024;

/// Bytes one run of a sweep holds until the reports are written: its [`crate::score::Row`],
/// the heap text of its five string columns (allocator-rounded, 32 bytes each) and its work
/// item.
pub const RUN_BYTES: u64 = (size_of::<crate::score::Row>() + 5 * 32 + size_of::<(crate::sweep::Runner, usize)>()) as u64;

/// Bytes of one GPU sample in a [`World`](crate::World) (24).
pub const WORLD_SAMPLE_BYTES: u64 = size_of::<CompactSample>() as u64;

/// Bytes per tick of a world and of generating it: the two offset tables and the generator's
/// list of jobs ending at each tick.
pub const WORLD_TICK_BYTES: u64 = (2 * size_of::<u32>() + size_of::<Vec<(u32, usize)>>()) as u64;

/// Bytes of one sample in a [`traces::Trace`]: the [`policy::Sample`], its job index and truth.
pub const TRACE_SAMPLE_BYTES: u64 = (size_of::<policy::Sample>() + size_of::<u32>() + size_of::<Option<traces::Truth>>()) as u64;

/// Ticks of a span of `days` (the generator's horizon: `days × 1440`, rounded, at least 1).
pub fn horizon_ticks(days: f64) -> u32 {
    (days * 86_400.0 / TICK_S as f64).round().max(1.0) as u32
}

/// Checks `days` against (0, [`MAX_DAYS`]].
///
/// # Errors
/// A message naming `--days` and the value.
pub fn check_days(days: f64) -> anyhow::Result<()> {
    anyhow::ensure!(
        days > 0.0 && days <= MAX_DAYS,
        "--days {}: must be above 0 and at most {MAX_DAYS}",
        days_text(days)
    );
    Ok(())
}

/// A `--days` value for a message or a command line, in its shorter exact form: `7`, `0.5`,
/// `1e-300` (operator trial 17: `--days 1e-300` was written back as a 300-digit decimal).
/// Both forms parse back to the same number.
pub fn days_text(days: f64) -> String {
    let plain = days.to_string();
    let sci = format!("{days:?}");
    if sci.len() < plain.len() {
        sci
    } else {
        plain
    }
}

/// GPUs of a workload's cluster.
pub fn cluster_gpus(w: &Workload) -> u64 {
    u64::from(w.cluster.nodes) * u64::from(w.cluster.gpus_per_node)
}

/// Estimated bytes of one world of `w` over `days`, each sample taking `sample_bytes`.
pub fn world_bytes(w: &Workload, days: f64, sample_bytes: u64) -> u64 {
    let ticks = u64::from(horizon_ticks(days));
    ticks
        .saturating_mul(cluster_gpus(w))
        .saturating_mul(sample_bytes)
        .saturating_add(ticks.saturating_mul(WORLD_TICK_BYTES))
}

/// Refuses up front a command that would hold the worlds of `workloads` (one world each,
/// repeats allowed) over `days` at once, each sample taking `sample_bytes`, when the estimate
/// exceeds [`MEMORY_BUDGET_BYTES`] or a world would hold more samples than its `u32` indexes
/// can count.
///
/// # Errors
/// A message naming the command, the workloads, days and GPUs, the estimate, the budget and
/// the most days that fit.
pub fn check_memory(command: &str, workloads: &[&Workload], days: f64, sample_bytes: u64) -> anyhow::Result<()> {
    check_memory_with_runs(command, workloads, days, sample_bytes, 0)
}

/// [`check_memory`] for a sweep that also holds `runs` result rows ([`RUN_BYTES`] each)
/// besides its worlds.
///
/// # Errors
/// As [`check_memory`]; when the runs alone exceed the budget, a message naming the run count
/// (configurations × workloads × seeds) and its estimate.
pub fn check_memory_with_runs(command: &str, workloads: &[&Workload], days: f64, sample_bytes: u64, runs: u64) -> anyhow::Result<()> {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let runs_bytes = runs.saturating_mul(RUN_BYTES);
    if runs_bytes > MEMORY_BUDGET_BYTES {
        anyhow::bail!(
            "{command}: {runs} runs (configurations and baselines × workloads × seeds) would hold {:.1} GiB of results in memory ({RUN_BYTES} bytes per run), above the budget of {:.0} GiB; use fewer configurations, workloads or seeds, or split the sweep with --shard i/N",
            gib(runs_bytes),
            gib(MEMORY_BUDGET_BYTES)
        );
    }
    let total: u64 = workloads
        .iter()
        .fold(runs_bytes, |acc, w| acc.saturating_add(world_bytes(w, days, sample_bytes)));
    let samples_max = workloads
        .iter()
        .map(|w| u64::from(horizon_ticks(days)).saturating_mul(cluster_gpus(w)))
        .max()
        .unwrap_or(0);
    if total <= MEMORY_BUDGET_BYTES && samples_max < u64::from(u32::MAX) {
        return Ok(());
    }
    // Bytes per day of all the worlds together, for the most days that fit.
    let per_day: u64 = workloads.iter().fold(0u64, |acc, w| {
        acc.saturating_add((86_400 / TICK_S as u64).saturating_mul(cluster_gpus(w).saturating_mul(sample_bytes) + WORLD_TICK_BYTES))
    });
    let fit_days = ((MEMORY_BUDGET_BYTES - runs_bytes) / per_day.max(1)).min(u64::from(u32::MAX) / (86_400 / TICK_S as u64));
    let fit = if fit_days == 0 {
        "not even one day fits: use fewer nodes, seeds or workloads".to_string()
    } else {
        format!("use at most {fit_days} days here, or fewer nodes, seeds or workloads")
    };
    let mut names: Vec<String> = Vec::new();
    for w in workloads {
        let n = format!("{} ({} GPUs)", w.name, cluster_gpus(w));
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let results = if runs > 0 {
        format!(" together with the results of {runs} runs ({:.1} GiB)", gib(runs_bytes))
    } else {
        String::new()
    };
    anyhow::bail!(
        "{command}: {} world(s) of workload {} over {} days would hold up to {:.1} GiB in memory{results} \
         (every GPU sampled every {TICK_S} s, {sample_bytes} bytes per sample), above the budget of {:.0} GiB; {fit}",
        workloads.len(),
        names.join(", "),
        days_text(days),
        gib(total),
        gib(MEMORY_BUDGET_BYTES)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_uses_the_measured_sizes() {
        // CompactSample's documented 24 bytes; the trace's Sample is far larger.
        assert_eq!(WORLD_SAMPLE_BYTES, 24);
        assert_eq!(TRACE_SAMPLE_BYTES as usize, std::mem::size_of::<policy::Sample>() + 4 + 1);
        let w = Workload::builtin_default();
        // 512 GPUs × 1440 ticks × 24 bytes + 1440 × per-tick bytes.
        assert_eq!(world_bytes(&w, 1.0, 24), 512 * 1440 * 24 + 1440 * WORLD_TICK_BYTES);
    }

    #[test]
    fn result_rows_count_against_the_budget() {
        let w = Workload::builtin_default();
        check_memory_with_runs("sim sweep", &[&w], 1.0, WORLD_SAMPLE_BYTES, 1000).unwrap();
        // 10,000 configurations × 2 workloads × 10,000 seeds: refused on the results alone.
        let e = check_memory_with_runs("sim sweep", &[&w], 1.0, WORLD_SAMPLE_BYTES, 200_000_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("200000000 runs") && e.contains("8 GiB"), "{e}");
        // Results that fit alone but not beside the worlds: named in the message.
        let runs = (MEMORY_BUDGET_BYTES - 1000) / RUN_BYTES;
        let e = check_memory_with_runs("sim sweep", &[&w], 1.0, WORLD_SAMPLE_BYTES, runs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("the results of {runs} runs")), "{e}");
    }

    #[test]
    fn the_budget_refuses_what_would_not_fit_and_says_how_much_would() {
        let w = Workload::builtin_default();
        check_memory("sim generate", &[&w], 7.0, WORLD_SAMPLE_BYTES + TRACE_SAMPLE_BYTES).unwrap();
        let e = check_memory("sim generate", &[&w], 300.0, WORLD_SAMPLE_BYTES + TRACE_SAMPLE_BYTES)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("default (512 GPUs)") && e.contains("300 days") && e.contains("8 GiB"),
            "{e}"
        );
        let fit: u64 = e.split("at most ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        check_memory("sim generate", &[&w], fit as f64, WORLD_SAMPLE_BYTES + TRACE_SAMPLE_BYTES).unwrap();
        assert!(check_memory("sim generate", &[&w], (fit + 1) as f64, WORLD_SAMPLE_BYTES + TRACE_SAMPLE_BYTES).is_err());
    }
}
