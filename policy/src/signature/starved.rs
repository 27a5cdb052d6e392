//! `starved`: memory held, compute low but not zero (peak below the threshold, mean at least
//! `starved_mean_util_pct`). The GPUs do some work; a data loader cannot keep up. Default
//! ceiling: alert. Waste counts the idle share of each GPU's time.

use super::{gpu_is_low, Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `starved` signature.
pub struct Starved;

fn gpu_starves(g: &GpuStats, cfg: &PolicyConfig) -> bool {
    gpu_is_low(g, cfg) && g.samples > 0 && g.mean_util_pct() >= cfg.starved_mean_util_pct && g.mem_held == g.samples
}

impl Signature for Starved {
    fn name(&self) -> &'static str {
        "starved"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Alert
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        if gpus.is_empty() || !gpus.iter().all(|g| gpu_starves(g, cfg)) {
            return None;
        }
        let mean = gpus.iter().map(|g| g.mean_util_pct()).sum::<f64>() / gpus.len() as f64;
        Some(Match {
            wasted_gpus: gpus.len() as u32,
            waste_frac: (1.0 - mean / 100.0).clamp(0.0, 1.0),
            procs_unknown: false,
            power_unknown: false,
        })
    }
}
