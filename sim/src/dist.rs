//! The small distributions a workload file is written in: uniform ranges, quantile tables,
//! weighted choices and clipped log-normals. Each one validates itself against the key it was
//! read from, so an error names the key and the bad value.

use crate::workload::WorkloadError;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// `[lo, hi]`: a uniform draw between two bounds (inclusive of `lo`). `[x, x]` is the constant
/// `x`. Units are those of the key holding it (`_min`, `_pct`, `_w`, `_mib`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Range(pub [f64; 2]);

impl Range {
    /// A constant.
    pub const fn constant(x: f64) -> Range {
        Range([x, x])
    }

    /// One uniform draw.
    #[inline]
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        let [lo, hi] = self.0;
        if hi > lo {
            lo + (hi - lo) * rng.random::<f64>()
        } else {
            lo
        }
    }

    /// Errors unless both bounds are finite, `lo ≤ hi`, and both lie in `[min, max]`.
    pub fn check(&self, key: &str, min: f64, max: f64) -> Result<(), WorkloadError> {
        let [lo, hi] = self.0;
        if !(lo.is_finite() && hi.is_finite() && lo <= hi && lo >= min && hi <= max) {
            return Err(WorkloadError::invalid(
                key,
                format!("[{lo}, {hi}]"),
                format!("must be [lo, hi] with {min} <= lo <= hi <= {max}"),
            ));
        }
        Ok(())
    }
}

/// A quantile table `[[value, cdf], …]`: the inverse CDF, linear between points. `cdf` runs
/// from 0 to 1, strictly increasing; values must not decrease. Used for distributions read
/// off published CDFs (the Seren per-GPU CDFs of AcmeTrace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quantiles(pub Vec<[f64; 2]>);

impl Quantiles {
    /// One draw by inverse-CDF sampling.
    #[inline]
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        self.at(rng.random::<f64>())
    }

    /// The value at cumulative probability `u` (0–1).
    pub fn at(&self, u: f64) -> f64 {
        let q = &self.0;
        let i = q.partition_point(|p| p[1] <= u);
        if i == 0 {
            return q[0][0];
        }
        if i >= q.len() {
            return q[q.len() - 1][0];
        }
        let (a, b) = (q[i - 1], q[i]);
        a[0] + (b[0] - a[0]) * (u - a[1]) / (b[1] - a[1])
    }

    /// Errors unless the table has ≥ 2 points, starts at cdf 0, ends at cdf 1, cdf strictly
    /// increases, values do not decrease and stay within `[min, max]`.
    pub fn check(&self, key: &str, min: f64, max: f64) -> Result<(), WorkloadError> {
        let q = &self.0;
        let bad = |problem: &str| {
            Err(WorkloadError::invalid(
                key,
                format!("{:?}", q.iter().map(|p| (p[0], p[1])).collect::<Vec<_>>()),
                problem.to_string(),
            ))
        };
        if q.len() < 2 || q[0][1] != 0.0 || q[q.len() - 1][1] != 1.0 {
            return bad("a quantile table needs >= 2 [value, cdf] points, the first at cdf 0 and the last at cdf 1");
        }
        for w in q.windows(2) {
            if w[1][1].partial_cmp(&w[0][1]) != Some(std::cmp::Ordering::Greater) || w[1][0] < w[0][0] {
                return bad("cdf must strictly increase and values must not decrease");
            }
        }
        if q.iter().any(|p| !p[0].is_finite() || p[0] < min || p[0] > max) {
            return bad(&format!("values must lie in [{min}, {max}]"));
        }
        Ok(())
    }
}

/// A weighted choice among values: `{ values = [...], weights = [...] }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The values.
    pub values: Vec<f64>,
    /// Their relative weights (need not sum to 1).
    pub weights: Vec<f64>,
}

impl Choice {
    /// One draw.
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        let total: f64 = self.weights.iter().sum();
        let mut u = rng.random::<f64>() * total;
        for (v, w) in self.values.iter().zip(&self.weights) {
            if u < *w {
                return *v;
            }
            u -= w;
        }
        self.values[self.values.len() - 1]
    }

    /// Weighted mean.
    pub fn mean(&self) -> f64 {
        let total: f64 = self.weights.iter().sum();
        self.values.iter().zip(&self.weights).map(|(v, w)| v * w).sum::<f64>() / total
    }

    /// Errors unless values and weights have the same, non-zero length, weights are ≥ 0 with a
    /// positive sum, and values lie in `[min, max]`.
    pub fn check(&self, key: &str, min: f64, max: f64) -> Result<(), WorkloadError> {
        let shown = || format!("values {:?} weights {:?}", self.values, self.weights);
        if self.values.is_empty() || self.values.len() != self.weights.len() {
            return Err(WorkloadError::invalid(
                key,
                shown(),
                "values and weights need the same, non-zero length",
            ));
        }
        if self.weights.iter().any(|w| !w.is_finite() || *w < 0.0) || self.weights.iter().sum::<f64>() <= 0.0 {
            return Err(WorkloadError::invalid(key, shown(), "weights must be >= 0 with a positive sum"));
        }
        if self.values.iter().any(|v| !v.is_finite() || *v < min || *v > max) {
            return Err(WorkloadError::invalid(key, shown(), format!("values must lie in [{min}, {max}]")));
        }
        Ok(())
    }
}

/// A log-normal clipped to `[min, max]`: `{ median = m, sigma = s, min = a, max = b }`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogNormal {
    /// The median (e^μ).
    pub median: f64,
    /// σ of the underlying normal.
    pub sigma: f64,
    /// Lower clip.
    pub min: f64,
    /// Upper clip.
    pub max: f64,
}

impl LogNormal {
    /// One draw (Box–Muller normal).
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        let z = std_normal(rng);
        (self.median * (self.sigma * z).exp()).clamp(self.min, self.max)
    }

    /// Errors unless `0 < min ≤ median ≤ max` and `sigma ≥ 0`.
    pub fn check(&self, key: &str) -> Result<(), WorkloadError> {
        let ok = self.min > 0.0
            && self.min <= self.median
            && self.median <= self.max
            && self.sigma >= 0.0
            && [self.min, self.median, self.max, self.sigma].iter().all(|v| v.is_finite());
        if !ok {
            return Err(WorkloadError::invalid(
                key,
                format!("{self:?}"),
                "needs 0 < min <= median <= max and sigma >= 0",
            ));
        }
        Ok(())
    }
}

/// A standard normal draw (Box–Muller; one of the pair is discarded to keep draws per call
/// fixed, which keeps generation order-independent per job).
#[inline]
pub fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn quantiles_interpolate_and_clip() {
        let q = Quantiles(vec![[0.0, 0.0], [0.0, 0.3], [100.0, 1.0]]);
        assert_eq!(q.at(0.0), 0.0);
        assert_eq!(q.at(0.29), 0.0);
        assert!((q.at(0.65) - 50.0).abs() < 1e-9);
        assert_eq!(q.at(1.0), 100.0);
        assert!(q.check("k", 0.0, 100.0).is_ok());
        let e = Quantiles(vec![[5.0, 0.0], [1.0, 1.0]])
            .check("telemetry.x", 0.0, 100.0)
            .unwrap_err();
        assert!(e.to_string().contains("telemetry.x"), "{e}");
    }

    #[test]
    fn choice_and_range_draw_within_bounds() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let c = Choice {
            values: vec![1.0, 8.0],
            weights: vec![0.0, 1.0],
        };
        for _ in 0..100 {
            assert_eq!(c.draw(&mut rng), 8.0);
            let x = Range([2.0, 3.0]).draw(&mut rng);
            assert!((2.0..=3.0).contains(&x));
        }
        assert!(Range([3.0, 2.0]).check("a.b", 0.0, 10.0).is_err());
    }
}
