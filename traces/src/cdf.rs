//! Distributions for calibration: the quantile CDF tables of AcmeTrace
//! (`../shared/traces/acme_util_cdfs/*.csv`, columns `value,cdf_pct`) and the two-sample
//! Kolmogorov–Smirnov distance between such a table and a set of simulated samples.

use crate::error::{RowLog, TraceError};
use crate::records::{fixed_csv, problem_at};
use std::path::Path;

/// A reference CDF: points (`value`, `cdf` as a fraction 0–1), sorted by value then cdf.
/// `F(x)` is the largest `cdf` of a point with `value ≤ x` (0 below the first point).
#[derive(Clone, Debug, PartialEq)]
pub struct QuantileCdf {
    /// (value, cumulative fraction) pairs.
    pub points: Vec<(f64, f64)>,
}

impl QuantileCdf {
    /// Reads an AcmeTrace CDF table (`value,cdf_pct`, percent 0–100). Errors name file, line
    /// and column; values must be finite and `cdf_pct` within 0–100 and non-decreasing.
    pub fn read(path: &Path) -> Result<QuantileCdf, TraceError> {
        let names: Vec<String> = vec!["value".into(), "cdf_pct".into()];
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut log = RowLog::new(false);
        fixed_csv(path, &["value", "cdf_pct"], &mut log, |rec, line| {
            let num = |i: usize| -> Result<f64, crate::RowProblem> {
                let t = rec[i].trim();
                t.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| problem_at(path, &names, line, i, format!("{t:?} is not a finite number")))
            };
            let (v, c) = (num(0)?, num(1)?);
            if !(0.0..=100.0).contains(&c) {
                return Err(problem_at(path, &names, line, 1, format!("cdf_pct {c} is outside 0-100")));
            }
            if let Some(&(pv, pc)) = points.last() {
                if v < pv || c < pc * 100.0 - 1e-9 {
                    return Err(problem_at(path, &names, line, 0, format!("({v}, {c}) is below the previous point")));
                }
            }
            points.push((v, c / 100.0));
            Ok(())
        })?;
        if points.is_empty() {
            return Err(TraceError::file(path, "no points"));
        }
        Ok(QuantileCdf { points })
    }

    /// `F(x)`: the fraction of the reference at or below `x`.
    pub fn at(&self, x: f64) -> f64 {
        let i = self.points.partition_point(|p| p.0 <= x);
        if i == 0 {
            0.0
        } else {
            self.points[i - 1].1
        }
    }

    /// `F(x−)`: the fraction strictly below `x`.
    pub fn below(&self, x: f64) -> f64 {
        let i = self.points.partition_point(|p| p.0 < x);
        if i == 0 {
            0.0
        } else {
            self.points[i - 1].1
        }
    }
}

/// The empirical CDF of `samples` (sorted ascending, finite) at `x` and just below `x`.
fn empirical(sorted: &[f64], x: f64) -> (f64, f64) {
    let n = sorted.len() as f64;
    let le = sorted.partition_point(|&v| v <= x) as f64 / n;
    let lt = sorted.partition_point(|&v| v < x) as f64 / n;
    (le, lt)
}

/// Kolmogorov–Smirnov distance `sup_x |F_sim(x) − F_ref(x)|` between sorted, finite samples
/// and a reference CDF, checked at every jump of either function (both sides of each jump).
/// Returns 1 when `sorted` is empty.
pub fn ks_distance(sorted: &[f64], reference: &QuantileCdf) -> f64 {
    if sorted.is_empty() {
        return 1.0;
    }
    let mut d: f64 = 0.0;
    let mut check = |x: f64| {
        let (le, lt) = empirical(sorted, x);
        d = d.max((le - reference.at(x)).abs()).max((lt - reference.below(x)).abs());
    };
    for &(v, _) in &reference.points {
        check(v);
    }
    let mut last = f64::NAN;
    for &v in sorted {
        if v != last {
            check(v);
            last = v;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdf(points: &[(f64, f64)]) -> QuantileCdf {
        QuantileCdf { points: points.to_vec() }
    }

    #[test]
    fn identical_distributions_are_at_distance_zero() {
        // 30 % at 0, then uniform steps to 100.
        let r = cdf(&[(0.0, 0.3), (50.0, 0.65), (100.0, 1.0)]);
        let mut s = vec![0.0; 30];
        s.extend(std::iter::repeat_n(50.0, 35));
        s.extend(std::iter::repeat_n(100.0, 35));
        assert!(ks_distance(&s, &r) < 1e-12);
    }

    #[test]
    fn a_point_mass_shift_is_measured_exactly() {
        let r = cdf(&[(0.0, 0.3), (100.0, 1.0)]);
        // 50 % at zero instead of 30 %: distance 0.2.
        let mut s = vec![0.0; 50];
        s.extend(std::iter::repeat_n(100.0, 50));
        assert!((ks_distance(&s, &r) - 0.2).abs() < 1e-12);
        // Everything far above the reference: distance 1.
        assert!((ks_distance(&[1000.0], &r) - 1.0).abs() < 1e-12);
        assert_eq!(ks_distance(&[], &r), 1.0);
    }

    #[test]
    fn reads_the_seren_tables_when_shared_is_there() {
        let p = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/traces/acme_util_cdfs/seren_GPU_UTIL_pct.csv"
        ));
        if !p.exists() {
            if std::env::var("GPU_REAPER_REQUIRE_SHARED").as_deref() == Ok("1") {
                panic!("{} is absent", p.display());
            }
            eprintln!("skipped: {} is absent", p.display());
            return;
        }
        let c = QuantileCdf::read(p).unwrap();
        assert_eq!(c.points.len(), 1000);
        // SUMMARY.csv: 31.4 % of Seren GPU samples at 0 % util, p50 99 %.
        assert!((c.at(0.0) - 0.314).abs() < 0.002, "{}", c.at(0.0));
        assert!(c.at(98.0) < 0.5 && c.at(99.0) >= 0.5);
    }
}
