//! Every lane's [`GpuStats`] at once, for the signatures of a breaching lane job: what
//! [`LaneJob::stats`] of each lane's [`LaneJob::brief`] gives, without deciding each lane's
//! coverage (the engine has it from [`LaneJob::pool`]). `lane_pool_agrees_with_briefs` holds
//! the two forms together.

use super::*;

impl LaneJob {
    /// The [`L`] lanes' statistics, lane by lane: exactly `self.stats(i, &self.brief(i, ..))`
    /// for each lane `i` (neither depends on the cycle). An empty window gives
    /// [`GpuStats::default`], as [`stats_of`] does for a brief of no sample and nothing
    /// invalid (the lanes never keep an invalid sample).
    pub(crate) fn stats_all(&self) -> [GpuStats; L] {
        let n = self.len;
        if n == 0 {
            return [GpuStats::default(); L];
        }
        let h = self.head as usize;
        let first_t_s = self.base_t_s + self.t_off[h] as i64;
        std::array::from_fn(|i| {
            let out = if self.out_len > 0 { self.rows[h].suffix_max_milli[i] } else { 0 };
            let c = |f: u16| self.count(f, i);
            let (held, free) = (c(MEM_HELD), c(MEM_FREE));
            GpuStats {
                samples: n,
                first_t_s,
                last_t_s: self.last_valid_t_s,
                peak_util_milli: out.max(self.in_max_milli[i]),
                sum_util_milli: u64::from(self.sum_util_milli[i]),
                mem_known: held + free,
                mem_held: held,
                mem_free: free,
                sum_mem_mib: u64::from(self.sum_mem_mib[i]),
                procs_pos: c(PROCS_POS),
                procs_zero: c(PROCS_ZERO),
                power_known: c(POWER_KNOWN),
                power_idle: c(POWER_IDLE),
                power_spin_low: c(POWER_SPIN_LOW),
                util_spin: c(UTIL_SPIN),
                sum_power_dw: u64::from(self.sum_power_dw[i]),
                sum_power_sq: self.sum_power_sq[i],
                invalid: 0,
            }
        })
    }
}
