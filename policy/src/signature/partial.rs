//! `partial`: some GPUs of the allocation are idle or hung while others work (peak at or above
//! the threshold). Only the idle or hung GPUs count as waste. Default ceiling: alert.

use super::{gpu_is_hung, gpu_is_idle, gpu_is_low, power_mostly_unknown, Match, Signature};
use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

/// The `partial` signature.
pub struct Partial;

impl Signature for Partial {
    fn name(&self) -> &'static str {
        "partial"
    }
    fn default_ceiling(&self) -> Verdict {
        Verdict::Alert
    }
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match> {
        let mut wasted = 0u32;
        let mut working = 0u32;
        let mut power_unknown = false;
        for g in gpus {
            if !gpu_is_low(g, cfg) {
                working += 1;
            } else if gpu_is_idle(g, cfg) || gpu_is_hung(g, cfg) {
                wasted += 1;
                // The wasted GPUs are judged idle or hung, so they carry those signatures'
                // power hold (review 18: a rank with a broken util counter and power `[N/A]`
                // beside a busy one was drained and cancelled under a raised ceiling).
                power_unknown |= power_mostly_unknown(g);
            }
        }
        (wasted > 0 && working > 0).then_some(Match {
            wasted_gpus: wasted,
            waste_frac: 1.0,
            procs_unknown: false,
            power_unknown,
        })
    }
}
