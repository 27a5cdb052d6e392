//! `unknown`: every observed GPU is below the threshold, but no specific signature explains
//! it (for example memory held while the process count is known to be 0, or memory unknown).
//! A breach nonetheless, so it alerts; default ceiling: alert.

use super::{gpu_is_low, power_mostly_unknown, Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `unknown` signature.
pub struct Unknown;

impl Signature for Unknown {
    fn name(&self) -> &'static str {
        "unknown"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Alert
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        (!gpus.is_empty() && gpus.iter().all(|g| gpu_is_low(g, cfg))).then(|| Match {
            wasted_gpus: gpus.len() as u32,
            waste_frac: 1.0,
            procs_unknown: gpus.iter().all(|g| g.procs_pos == 0 && g.procs_zero == 0),
            // Under a ceiling raised above alert, the same power hold as `hung` and `idle`
            // (review 18): zero compute without power is no evidence of waste.
            power_unknown: gpus.iter().any(power_mostly_unknown),
        })
    }
}
