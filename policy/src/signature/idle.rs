//! `idle`: the allocation is held but nothing runs: memory not held on any sample, no
//! processes where known, power at idle where known. Default ceiling: cancel; held at alert
//! while power is unknown on more than half of some GPU's samples ([`crate::Cap::PowerUnknown`]).

use super::{gpu_is_low, power_mostly_unknown, Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `idle` signature.
pub struct Idle;

/// True when one GPU's window looks idle: low util (guard 4), memory known and not held on
/// every sample, no sample with processes, and every sample with known power at idle.
pub fn gpu_is_idle(g: &GpuStats, cfg: &PolicyConfig) -> bool {
    gpu_is_low(g, cfg) && g.samples > 0 && g.mem_free == g.samples && g.procs_pos == 0 && g.power_idle == g.power_known
}

impl Signature for Idle {
    fn name(&self) -> &'static str {
        "idle"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Cancel
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        if gpus.is_empty() || !gpus.iter().all(|g| gpu_is_idle(g, cfg)) {
            return None;
        }
        Some(Match {
            wasted_gpus: gpus.len() as u32,
            waste_frac: 1.0,
            procs_unknown: gpus.iter().all(|g| g.procs_zero == 0),
            // As for `hung` (review 14 #8): without power, util and memory are all that say
            // idle, and trial 7 showed both can miss work a GPU does (and a process count
            // can miss processes in another PID namespace). Power on fewer than half the
            // samples holds the job at alert.
            power_unknown: gpus.iter().any(power_mostly_unknown),
        })
    }
}
