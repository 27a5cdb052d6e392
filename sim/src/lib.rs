//! # sim: gpu-reaper's seeded workload simulator and `sim sweep`
//!
//! Operators run the sweep to choose thresholds before they let anything act on their
//! cluster: every policy configuration of a grid, and the baselines, are scored on the same
//! generated workloads for false cancels against recovered GPU-hours.
//!
//! * [`workload`]: workload files (`sim/workloads/*.toml`): cluster, job mix, per-phase
//!   telemetry, collector faults.
//! * [`generate()`]: (workload, seed, days) → [`World`], the compact in-memory form with
//!   per-GPU-tick ground truth. Discrete time, one tick = 60 s, ChaCha8 seeded; nothing reads
//!   the clock.
//! * [`drive`]: runs a [`drive::Judge`] (the policy engine, or a [`baseline`]) over a world,
//!   tick by tick; [`score`] scores what it does against the ground truth.
//! * [`grid`], [`sweep`], [`report`]: the sweep, its CSV, `summary.md` and `frontier.svg`;
//!   [`manifest`]: what each `--shard i/N` run ran, checked by `sim merge`.
//! * [`trace::to_trace`]: a world as a [`traces::Trace`] (for `sim generate` and replay).
//! * [`budget`]: the `--days` cap and the up-front memory estimate of the generated worlds.
//! * [`cli`]: the `sim` command; each subcommand is one module under `cli`.

pub mod baseline;
pub mod budget;
pub mod cli;
pub mod dist;
pub mod drive;
pub mod generate;
pub mod grid;
pub mod manifest;
pub mod report;
pub mod score;
pub mod sweep;
pub mod trace;
pub mod workload;
pub mod world;

pub use generate::generate;
pub use workload::Workload;
pub use world::World;

/// Loads a workload file, or a built-in one by name (`default`, `traps`).
///
/// # Errors
/// [`workload::WorkloadError`] naming the file, key and value.
pub fn load_workload(spec: &str) -> Result<Workload, workload::WorkloadError> {
    match spec {
        "default" => Ok(Workload::builtin_default()),
        "traps" => Ok(Workload::builtin_traps()),
        path => Workload::load(std::path::Path::new(path)),
    }
}
