//! `hung`: memory held, zero compute, processes resident where known. Low power is not asked
//! for (a deadlocked rank often draws idle power, but need not), but high power rules it out:
//! zero compute at more than `spin_power_frac` of the power limit (or `idle_power_w` where the
//! limit is unknown) is contradictory evidence (a util counter that broke, or work on the copy
//! engines), never hung. Default ceiling: cancel.
//!
//! A job whose GPUs are all hung or idle (a rank died, the others exited) is `hung`.

use super::{gpu_is_idle, gpu_is_low, power_mostly_unknown, Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `hung` signature.
pub struct Hung;

/// True when one GPU's window looks hung: peak util below `hung_util_pct` (and below the
/// threshold), memory held on every sample, no sample with a process count of 0, and no
/// sample with known power above the spin limit (`spin_power_frac` of `power.limit`, or
/// `idle_power_w` without a limit). Where no sample carries a process count, memory and
/// compute alone decide.
pub fn gpu_is_hung(g: &GpuStats, cfg: &PolicyConfig) -> bool {
    gpu_is_low(g, cfg)
        && g.samples > 0
        && g.peak_util_pct() < cfg.hung_util_pct
        && g.mem_held == g.samples
        && g.procs_zero == 0
        && g.power_spin_low == g.power_known
}

impl Signature for Hung {
    fn name(&self) -> &'static str {
        "hung"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Cancel
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        let mut any_hung = false;
        for g in gpus {
            if gpu_is_hung(g, cfg) {
                any_hung = true;
            } else if !gpu_is_idle(g, cfg) {
                return None;
            }
        }
        any_hung.then(|| Match {
            wasted_gpus: gpus.len() as u32,
            waste_frac: 1.0,
            procs_unknown: gpus.iter().all(|g| g.procs_pos == 0 && g.procs_zero == 0),
            // Power on fewer than half the samples is too little to tell (review 14: one
            // reading in twenty lifted the hold), on a hung GPU or on an idle one beside it.
            power_unknown: gpus.iter().any(power_mostly_unknown),
        })
    }
}
