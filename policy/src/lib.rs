//! # policy: gpu-reaper's decision engine
//!
//! Samples go in, findings come out. The crate is pure: it does no I/O, reads no clock (time
//! is the `now_s` argument, epoch seconds as i64), holds no RNG and no global state, and
//! never lets a HashMap's order reach its output.
//!
//! * [`PolicyConfig`] is the `[policy]` TOML section shared by the simulator, the replay and
//!   the enforcer; [`Policy::new`] validates it.
//! * [`Engine::step`] takes one cycle's [`Observation`] (running jobs, new samples, scope,
//!   drain confirmations) and writes one [`Finding`] per job: a [`Verdict`] on the ladder
//!   `healthy → watching → alert → drain → cancel` (or `insufficient_evidence`), a signature
//!   from [`signature::REGISTRY`], the evidence and an estimate of wasted GPU-hours.
//! * [`Recovery`] is the rule by which a drained job that works again has its drain resumed,
//!   shared by the enforcer and the simulator.
//!
//! The safety guards (warmup, full-window evidence, missing-is-not-zero, peak-not-mean,
//! dwell and stages, cancel-needs-history, ceilings, exemptions, whole allocation, clock
//! sanity) are listed as invariants in ARCHITECTURE.md, each with its tests.

#![deny(missing_docs)]

mod config;
mod duration;
mod engine;
mod finding;
mod input;
mod recovery;
mod sample_check;
pub mod signature;
mod window;

pub use config::{ConfigError, ExemptConfig, Policy, PolicyConfig, Stage, StageConfig, DEFAULT_COMMENT_MARKER};
pub use duration::{DurationError, DurationS};
pub use engine::{alloc_nodes, Engine, EngineCounters, EngineSnapshot, Mode, RestoreDrop, SharedWindowError};
pub use finding::{one_line, Cap, Cause, Evidence, Finding};
pub use input::{DrainConfirmation, GpuRef, JobFacts, NodeId, NodeTable, Observation, Reading, Sample, Scope};
pub use recovery::{Recovery, RECOVERY_WINDOWS};
pub use sample_check::{
    fold_codec_util, is_complete_reading, is_sentinel, CODEC_UTIL_CAP_PCT, DCGM_FP64_BLANK, DCGM_INT32_BLANK, DCGM_INT64_BLANK,
    MAX_MEM_MIB, MAX_POWER_W, SENTINEL_U32,
};
pub use signature::SignatureId;
pub use verdict::Verdict;
pub use window::{EvidenceProblem, GpuStats};

mod verdict;
