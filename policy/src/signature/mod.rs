//! Signatures: why an allocation looks wasted. One file per signature, registered once in
//! [`REGISTRY`]. Precedence is registry order: the first signature that matches names the
//! breach.
//!
//! To add a signature: write `signature/<name>.rs` with a unit struct implementing
//! [`Signature`], and add one line to [`REGISTRY`]. The registry-wide tests at the bottom of
//! this file then cover it.

use crate::config::PolicyConfig;
use crate::verdict::Verdict;
use crate::window::GpuStats;

mod hung;
mod idle;
mod partial;
mod spin;
mod starved;
mod unknown;

pub use hung::gpu_is_hung;
pub use idle::gpu_is_idle;

/// What a matching signature reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    /// How many observed GPUs count as wasted.
    pub wasted_gpus: u32,
    /// The share of each wasted GPU's time counted as waste (1 for idle and hung; lower for
    /// starved, where the GPU does some work).
    pub waste_frac: f64,
    /// True when no sample carried a process count, so `hung` rests on memory and compute only.
    pub procs_unknown: bool,
    /// True when some GPU counted as `hung` or `idle` had power on fewer than half of its
    /// samples in the window ([`power_mostly_unknown`]): the reading that tells a deadlock or
    /// an idle GPU from a util counter that broke (trial 6: 0 % at 336 W; trial 7: nothing in
    /// memory, no process, 300 W) is missing, so the engine holds the job at alert
    /// ([`crate::Cap::PowerUnknown`]).
    pub power_unknown: bool,
}

/// One way an allocation can look wasted.
pub trait Signature: Sync {
    /// Unique lowercase name, used in config (`ceilings`), CSV and logs.
    fn name(&self) -> &'static str;
    /// The highest verdict this signature may reach unless config says otherwise.
    fn default_ceiling(&self) -> Verdict;
    /// Does the window match? `gpus` holds the stats of every observed GPU, each with full,
    /// valid coverage (the engine checks evidence first). Must return `None` for an empty slice.
    fn matches(&self, gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<Match>;
    /// True when the signature is a claim about every GPU of the job, so that a view of part
    /// of the allocation (a per-node enforcer's) can never show it. Default: false.
    fn needs_whole_allocation(&self) -> bool {
        false
    }
}

/// Every signature, in precedence order. Adding a signature is one line here.
pub static REGISTRY: &[&dyn Signature] = &[
    &spin::Spin,
    &hung::Hung,
    &idle::Idle,
    &starved::Starved,
    &partial::Partial,
    &unknown::Unknown,
];

/// A signature, as its index in [`REGISTRY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SignatureId(pub u8);

impl SignatureId {
    /// The id of the signature called `name`.
    pub fn from_name(name: &str) -> Option<SignatureId> {
        REGISTRY.iter().position(|s| s.name() == name).map(|i| SignatureId(i as u8))
    }

    /// The signature's name.
    pub fn name(self) -> &'static str {
        REGISTRY[self.0 as usize].name()
    }
}

/// Every registered name, in precedence order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|s| s.name()).collect()
}

/// The first matching signature, in precedence order, for `gpus`: every GPU of the job.
pub fn classify(gpus: &[GpuStats], cfg: &PolicyConfig) -> Option<(SignatureId, Match)> {
    classify_view(gpus, cfg, true)
}

/// [`classify`] for `gpus`, the observed GPUs of a job; `whole` says whether they are every
/// GPU of its allocation. Without the whole allocation, signatures that need it
/// ([`Signature::needs_whole_allocation`]) are skipped.
pub fn classify_view(gpus: &[GpuStats], cfg: &PolicyConfig, whole: bool) -> Option<(SignatureId, Match)> {
    if gpus.is_empty() {
        return None;
    }
    REGISTRY
        .iter()
        .enumerate()
        .filter(|(_, s)| whole || !s.needs_whole_allocation())
        .find_map(|(i, s)| s.matches(gpus, cfg).map(|m| (SignatureId(i as u8), m)))
}

/// Guard 4, peak not mean: a GPU is low only if no sample reached the threshold.
pub fn gpu_is_low(g: &GpuStats, cfg: &PolicyConfig) -> bool {
    peak_is_low(g.peak_util_milli, cfg)
}

/// True when one GPU's window had a power reading on fewer than half of its samples: too
/// little to tell an idle GPU or a deadlock from work its util counter does not show
/// (`power.draw` `[N/A]`, a sentinel, 0 W). Every signature whose match counts a GPU that
/// looks `hung` or `idle` sets [`Match::power_unknown`] from it (`hung`, `idle`, `partial` for
/// its wasted GPUs, `unknown`); the property `power_hold_reaches_every_signature` checks the
/// registry.
pub fn power_mostly_unknown(g: &GpuStats) -> bool {
    g.power_known.saturating_mul(2) < g.samples
}

/// True when a window's peak (thousandths of a percent) is below `util_threshold_pct`.
///
/// The engine relies on this contract to skip matching for busy jobs: every signature needs
/// at least one low GPU, except `spin`, which needs every GPU at spin util on every sample
/// with known power at or below the spin limit. A new signature must keep to it, or widen the
/// engine's test; `busy_jobs_match_nothing` checks every registered signature.
#[inline]
pub fn peak_is_low(peak_util_milli: u32, cfg: &PolicyConfig) -> bool {
    peak_util_milli as f64 / 1000.0 < cfg.util_threshold_pct
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn gpu(peak: f64, mean: f64, mem_held: bool, procs: Option<u32>, power_w: f64) -> GpuStats {
        let n = 20;
        GpuStats {
            samples: n,
            peak_util_milli: (peak * 1000.0) as u32,
            sum_util_milli: (mean * 1000.0) as u64 * n as u64,
            mem_known: n,
            mem_held: if mem_held { n } else { 0 },
            mem_free: if mem_held { 0 } else { n },
            procs_pos: if procs.is_some_and(|p| p > 0) { n } else { 0 },
            procs_zero: if procs == Some(0) { n } else { 0 },
            power_known: n,
            power_idle: if power_w <= 100.0 { n } else { 0 },
            power_spin_low: if power_w <= 120.0 { n } else { 0 },
            util_spin: if mean >= 90.0 { n } else { 0 },
            sum_power_dw: (power_w * 10.0) as u64 * n as u64,
            sum_power_sq: ((power_w * 10.0) as u64).pow(2) * n as u64,
            ..GpuStats::default()
        }
    }

    proptest::proptest! {
        /// The engine skips matching for jobs with no low GPU unless every GPU is a spin
        /// candidate (see `peak_is_low`); no registered signature may match such a job.
        #[test]
        fn busy_jobs_match_nothing(
            threshold in 1.0f64..100.0,
            gpus in proptest::collection::vec(
                (1u32..40, 0u32..=100_000, proptest::array::uniform12(0u32..=40), 0u64..2_000_000, 0u64..40_000_000_000),
                1..10,
            ),
            spin_gpu in 0usize..10,
        ) {
            let cfg = PolicyConfig { util_threshold_pct: threshold, ..PolicyConfig::default() };
            let stats: Vec<GpuStats> = gpus.iter().map(|&(n, peak, c, pw, sq)| {
                let k = |i: usize| c[i].min(n);
                GpuStats {
                    samples: n,
                    // Not low: the peak reaches the threshold.
                    peak_util_milli: peak.max((threshold * 1000.0).ceil() as u32).min(100_000),
                    sum_util_milli: peak as u64 * n as u64,
                    mem_known: k(0), mem_held: k(1), mem_free: k(2), procs_pos: k(3), procs_zero: k(4),
                    power_known: k(5), power_idle: k(6), power_spin_low: k(7), util_spin: k(8),
                    sum_power_dw: pw, sum_power_sq: sq, sum_mem_mib: 0, invalid: k(9),
                    first_t_s: 0, last_t_s: 0,
                }
            }).collect();
            let spin_candidate = |g: &GpuStats| g.util_spin == g.samples && g.power_known == g.samples && g.power_spin_low == g.samples;
            let mut stats = stats;
            // Make sure at least one GPU is not a spin candidate.
            let i = spin_gpu % stats.len();
            stats[i].util_spin = stats[i].samples - 1;
            proptest::prop_assert!(stats.iter().all(|g| !gpu_is_low(g, &cfg)));
            proptest::prop_assert!(!stats.iter().all(spin_candidate));
            proptest::prop_assert_eq!(classify(&stats, &cfg), None);
        }
    }

    proptest::proptest! {
        /// Guard 3's power hold, registry-wide (review 18: `partial` escaped it): whatever
        /// signature names a breach, a GPU that looks idle or hung with power on fewer than
        /// half its samples makes the match `power_unknown`, so the engine holds it at alert.
        #[test]
        fn power_hold_reaches_every_signature(
            gpus in proptest::collection::vec(
                (1u32..40, 0u32..=100_000, proptest::array::uniform12(0u32..=40), 0u64..2_000_000, 0u64..40_000_000_000),
                1..6,
            ),
            held in 0usize..6,
        ) {
            let cfg = PolicyConfig::default();
            let mut stats: Vec<GpuStats> = gpus.iter().map(|&(n, peak, c, pw, sq)| {
                let k = |i: usize| c[i].min(n);
                GpuStats {
                    samples: n,
                    // Half the GPUs idle or hung often enough to matter.
                    peak_util_milli: if c[11] % 2 == 0 { peak % 500 } else { peak },
                    sum_util_milli: (peak % 500) as u64 * n as u64,
                    mem_known: k(0), mem_held: k(1), mem_free: k(2), procs_pos: k(3), procs_zero: k(4),
                    power_known: k(5), power_idle: k(6), power_spin_low: k(7), util_spin: k(8),
                    sum_power_dw: pw, sum_power_sq: sq, sum_mem_mib: 0, invalid: k(9),
                    first_t_s: 0, last_t_s: 0,
                }
            }).collect();
            // One GPU made to look idle or hung with power on fewer than half its samples.
            let i = held % stats.len();
            let g = &mut stats[i];
            g.peak_util_milli = 0;
            g.sum_util_milli = 0;
            g.power_known = g.samples.saturating_sub(1) / 2;
            g.power_idle = g.power_known;
            g.power_spin_low = g.power_known;
            g.procs_zero = 0;
            if gpus[i].2[10] % 2 == 0 {
                (g.mem_held, g.mem_free, g.procs_pos) = (0, g.samples, 0);
            } else {
                (g.mem_held, g.mem_free) = (g.samples, 0);
            }
            proptest::prop_assert!(gpu_is_idle(&stats[i], &cfg) || gpu_is_hung(&stats[i], &cfg));
            proptest::prop_assert!(power_mostly_unknown(&stats[i]));
            if let Some((id, m)) = classify(&stats, &cfg) {
                proptest::prop_assert!(m.power_unknown, "{} matched without the power hold: {:?}", id.name(), stats);
            }
        }
    }

    #[test]
    fn names_are_unique_and_resolvable() {
        let names = names();
        let set: BTreeSet<_> = names.iter().collect();
        assert_eq!(set.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(SignatureId::from_name(n), Some(SignatureId(i as u8)));
            assert_eq!(SignatureId(i as u8).name(), *n);
        }
    }

    #[test]
    fn no_signature_matches_an_empty_window() {
        let cfg = PolicyConfig::default();
        for s in REGISTRY {
            assert_eq!(s.matches(&[], &cfg), None, "{}", s.name());
        }
    }

    #[test]
    fn classification_is_deterministic() {
        let cfg = PolicyConfig::default();
        let cases = [
            vec![gpu(0.0, 0.0, false, Some(0), 60.0); 4],
            vec![gpu(0.0, 0.0, true, Some(1), 60.0); 4],
            vec![gpu(10.0, 5.0, true, Some(1), 90.0); 2],
            vec![gpu(100.0, 100.0, true, Some(1), 300.0), gpu(0.0, 0.0, false, Some(0), 60.0)],
        ];
        for c in &cases {
            assert_eq!(classify(c, &cfg), classify(c, &cfg));
        }
    }

    #[test]
    fn classification_is_monotone_in_the_util_threshold() {
        // A looser (higher) threshold never loses a breach that a stricter one found, and
        // never lowers the default ceiling of what it finds.
        let cases = [
            vec![gpu(0.0, 0.0, false, Some(0), 60.0); 2],
            vec![gpu(0.5, 0.1, true, Some(1), 60.0); 2],
            vec![gpu(12.0, 6.0, true, Some(1), 90.0); 2],
            vec![gpu(40.0, 30.0, true, Some(1), 200.0), gpu(0.0, 0.0, false, None, 60.0)],
            vec![gpu(40.0, 30.0, true, Some(1), 200.0), gpu(0.0, 0.0, true, Some(1), 60.0)],
        ];
        let thresholds = [1.0, 5.0, 10.0, 15.0, 30.0, 50.0];
        for c in &cases {
            for w in thresholds.windows(2) {
                let strict = PolicyConfig {
                    util_threshold_pct: w[0],
                    ..PolicyConfig::default()
                };
                let loose = PolicyConfig {
                    util_threshold_pct: w[1],
                    ..PolicyConfig::default()
                };
                if let Some((s, _)) = classify(c, &strict) {
                    let (l, _) = classify(c, &loose).unwrap_or_else(|| panic!("breach at {} lost at {}", w[0], w[1]));
                    let ceil = |id: SignatureId| REGISTRY[id.0 as usize].default_ceiling();
                    assert!(ceil(l) >= ceil(s), "{} at {} became {} at {}", s.name(), w[0], l.name(), w[1]);
                }
            }
        }
    }

    #[test]
    fn precedence_picks_the_specific_signature() {
        let cfg = PolicyConfig::default();
        let name = |g: &[GpuStats]| classify(g, &cfg).map(|(id, _)| id.name());
        assert_eq!(name(&[gpu(0.0, 0.0, false, Some(0), 60.0); 2]), Some("idle"));
        assert_eq!(name(&[gpu(0.0, 0.0, true, Some(2), 60.0); 2]), Some("hung"));
        assert_eq!(name(&[gpu(0.0, 0.0, true, None, 60.0); 2]), Some("hung"));
        assert_eq!(name(&[gpu(0.0, 0.0, true, Some(0), 60.0); 2]), Some("unknown"));
        assert_eq!(name(&[gpu(12.0, 6.0, true, Some(1), 90.0); 2]), Some("starved"));
        assert_eq!(name(&[gpu(100.0, 100.0, true, Some(1), 70.0); 2]), Some("spin"));
        assert_eq!(
            name(&[gpu(100.0, 100.0, true, Some(1), 300.0), gpu(0.0, 0.0, false, Some(0), 60.0)]),
            Some("partial")
        );
        assert_eq!(name(&[gpu(100.0, 100.0, true, Some(1), 300.0); 2]), None);
    }
}
