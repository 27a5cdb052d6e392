//! # enforcer: gpu-reaper's per-node daemon
//!
//! Each cycle the daemon reads running jobs from Slurm (`squeue --json`, or a `--Format`
//! fallback) and this node's GPUs from nvidia-smi, attributes GPUs to jobs, feeds the
//! [`policy`] engine with `Scope::Node(this node)`, plans actions from the findings, carries
//! them out (or only logs them in observe mode), persists its state and exports metrics.
//!
//! Layers, inside out:
//! * [`parse`]: pure parsers, text in, values out; one file per source.
//! * [`run`]: the only place a process is started (argv only, timeouts, hung children).
//! * [`slurm`] and [`telemetry`]: the [`slurm::SlurmClient`] and [`telemetry::Telemetry`]
//!   traits and their command-line implementations.
//! * [`attribution`]: which of this node's GPUs belong to which job; [`unlisted`]: jobs on
//!   them that squeue does not list.
//! * [`gpu_slots`]: a GPU is its UUID; the engine's GPU id per UUID.
//! * [`repeats`]: a failure that lasts is logged at its start, every 10 minutes and at its end.
//! * [`plan`]: the pure cycle: findings and state in, `Vec<Action>` out, with damage limits.
//! * [`notice`]: the text of a user's notice (what may follow, and when).
//! * [`executor`]: carries actions out (real, observe-only, recording for tests).
//! * [`daemon`]: one cycle end to end; [`state`] persists it; [`metrics`] exports it.

pub mod attribution;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod executor;
pub mod gpu_slots;
pub mod metrics;
pub mod notice;
pub mod parse;
pub mod plan;
pub mod repeats;
pub mod run;
pub mod slurm;
pub mod state;
pub mod telemetry;
pub mod unlisted;
