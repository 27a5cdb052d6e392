//! `spin`: the common NCCL deadlock. Every GPU reads high `utilization.gpu` on every sample,
//! yet draws near-idle, flat power (e.g. 100 % at ~70 W on a 400 W part). Default ceiling:
//! alert, until the sweep shows a higher one makes no false cancels on the trap workload.

use super::{Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `spin` signature.
pub struct Spin;

fn gpu_spins(g: &GpuStats, cfg: &PolicyConfig) -> bool {
    g.samples > 0
        && g.util_spin == g.samples
        && g.power_known == g.samples
        && g.power_spin_low == g.samples
        && g.power_cv().is_some_and(|cv| cv <= cfg.spin_power_cv)
}

impl Signature for Spin {
    fn name(&self) -> &'static str {
        "spin"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Alert
    }
    /// "Every GPU of the job": half a job at low power says nothing of the other half, which
    /// may be working (the regression case of a two-node job with one node at 380 W).
    fn needs_whole_allocation(&self) -> bool {
        true
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        (!gpus.is_empty() && gpus.iter().all(|g| gpu_spins(g, cfg))).then_some(Match {
            wasted_gpus: gpus.len() as u32,
            waste_frac: 1.0,
            procs_unknown: false,
            power_unknown: false,
        })
    }
}
