//! `shard.toml`: what one `sim sweep --shard i/N` run ran, written next to its `sweep.csv`, so
//! that `sim merge` can refuse shards of different sweeps, duplicates and incomplete sets
//! instead of mixing them into a report that recommends a configuration that never ran.

use crate::sweep::SweepSpec;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the manifest inside a shard's output folder.
pub const FILE_NAME: &str = "shard.toml";

/// What one shard ran. Every field but `shard` must agree across the shards of one sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardManifest {
    /// Version of `sim` that wrote the shard (`CARGO_PKG_VERSION`).
    pub version: String,
    /// This shard's index `i` of `--shard i/N`.
    pub shard: usize,
    /// The shard count `N` of `--shard i/N`.
    pub shards: usize,
    /// Number of grid configurations.
    pub configs: usize,
    /// FNV-1a 64 (hex) of every configuration's id and full policy configuration, in grid order.
    pub grid_fingerprint: String,
    /// Workload names, in sweep order.
    pub workloads: Vec<String>,
    /// FNV-1a 64 (hex) of every workload's full content, in sweep order.
    pub workload_fingerprint: String,
    /// Seeds, in sweep order.
    pub seeds: Vec<u64>,
    /// Simulated span per world, days.
    pub days: f64,
    /// Whether the baselines ran.
    pub baselines: bool,
    /// Rows this shard wrote to `sweep.csv`.
    pub rows: usize,
    /// The parameter columns of every runner of the sweep (each grid configuration, then
    /// each baseline when `baselines`), in sweep order: `sim merge` checks each row's
    /// parameter columns against its runner's.
    pub runners: Vec<crate::score::RowParams>,
}

/// FNV-1a 64 of `text`, as 16 hex digits. Not cryptographic: it tells apart grids and
/// workloads given by mistake, not by an adversary.
fn fnv1a_hex(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl ShardManifest {
    /// The sweep's workloads when they are the built-in ones (every name is `default` or
    /// `traps` and the fingerprint matches theirs), for `summary.md`'s trap durations; empty
    /// otherwise (a shard records only the workloads' names and fingerprint).
    pub fn builtin_workloads(&self) -> Vec<crate::Workload> {
        let builtins: Option<Vec<crate::Workload>> = self
            .workloads
            .iter()
            .map(|n| match n.as_str() {
                "default" => Some(crate::Workload::builtin_default()),
                "traps" => Some(crate::Workload::builtin_traps()),
                _ => None,
            })
            .collect();
        let Some(builtins) = builtins else { return Vec::new() };
        let text: String = builtins.iter().map(|w| format!("{w:?}\n")).collect();
        if fnv1a_hex(&text) == self.workload_fingerprint {
            builtins
        } else {
            Vec::new()
        }
    }

    /// The manifest of a sharded spec that wrote `rows` rows; `None` for an unsharded spec.
    /// The fingerprints hash the `Debug` text of the configurations and workloads, which is
    /// stable within one `version`.
    pub fn of(spec: &SweepSpec, rows: usize) -> Option<ShardManifest> {
        let (shard, shards) = spec.shard?;
        let grid: String = spec
            .configs
            .iter()
            .map(|c| format!("{}={:?}\n", c.params.config_id, c.policy.config()))
            .collect();
        let workloads: String = spec.workloads.iter().map(|w| format!("{w:?}\n")).collect();
        Some(ShardManifest {
            version: env!("CARGO_PKG_VERSION").to_string(),
            shard,
            shards,
            configs: spec.configs.len(),
            grid_fingerprint: fnv1a_hex(&grid),
            workloads: spec.workloads.iter().map(|w| w.name.clone()).collect(),
            workload_fingerprint: fnv1a_hex(&workloads),
            seeds: spec.seeds.clone(),
            days: spec.days,
            baselines: spec.baselines,
            rows,
            runners: spec
                .configs
                .iter()
                .map(|c| c.params.clone())
                .chain(
                    crate::baseline::Baseline::ALL
                        .into_iter()
                        .filter(|_| spec.baselines)
                        .map(|b| b.params()),
                )
                .collect(),
        })
    }

    /// Writes the manifest as TOML to `dir/shard.toml`.
    ///
    /// # Errors
    /// I/O errors, naming the file.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(FILE_NAME);
        let text = toml::to_string(self).context("serialising the shard manifest")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// Reads `dir/shard.toml`.
    ///
    /// # Errors
    /// A missing, unreadable or malformed file, naming it.
    pub fn read(dir: &Path) -> anyhow::Result<ShardManifest> {
        let path = dir.join(FILE_NAME);
        if !path.is_file() {
            bail!(
                "{}: no {FILE_NAME} next to sweep.csv, so what this shard ran is unknown; re-run it with `sim sweep --shard i/N`",
                dir.display()
            );
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("{}: not a shard manifest", path.display()))
    }

    /// The (policy, config id, workload, seed) of every row this shard ran, in the sweep's
    /// canonical order ([`SweepSpec::items`]: configurations `c000…`, then the baselines, each
    /// over every workload and seed), filtered to this shard.
    pub fn expected_keys(&self) -> Vec<(String, String, String, u64)> {
        let mut runners: Vec<(String, String)> = (0..self.configs).map(|c| ("gpu-reaper".to_string(), format!("c{c:03}"))).collect();
        if self.baselines {
            runners.extend(
                crate::baseline::Baseline::ALL
                    .into_iter()
                    .map(|b| (b.name().to_string(), b.name().to_string())),
            );
        }
        let mut keys = Vec::new();
        let mut k = 0usize;
        for (policy, config) in &runners {
            for w in &self.workloads {
                for &seed in &self.seeds {
                    if self.shards == 0 || k % self.shards == self.shard {
                        keys.push((policy.clone(), config.clone(), w.clone(), seed));
                    }
                    k += 1;
                }
            }
        }
        keys
    }

    /// Checks that every row of this shard's `sweep.csv` (in `dir`) is one the shard ran: its
    /// (policy, config id, workload, seed) among [`Self::expected_keys`] and its `days` the
    /// manifest's, with at least one job; its parameter columns those of its runner in
    /// [`Self::runners`]; its value columns valid ([`crate::score::Row::check_values`]). With the row count checked against `rows` and duplicates refused by
    /// [`crate::sweep::merge_rows`], this makes the rows exactly the shard's.
    ///
    /// # Errors
    /// The first row that is not, naming the shard folder, the file (`file`, the shard's
    /// `sweep.csv` as given), the line and the column or the row's key.
    pub fn check_rows(&self, dir: &Path, file: &Path, rows: &[crate::score::Row]) -> anyhow::Result<()> {
        let expected: std::collections::BTreeSet<(String, String, String, u64)> = self.expected_keys().into_iter().collect();
        let runners: std::collections::BTreeMap<(&str, &str), &crate::score::RowParams> = self
            .runners
            .iter()
            .map(|p| ((p.policy.as_str(), p.config_id.as_str()), p))
            .collect();
        for (i, r) in rows.iter().enumerate() {
            let key = (r.policy.clone(), r.config_id.clone(), r.workload.clone(), r.seed);
            let bad = if !expected.contains(&key) {
                Some(format!(
                    "policy {} config {} workload {} seed {} is not a run of this shard (its {FILE_NAME}: shard {}/{}, {} configs, workloads {:?}, seeds {:?}, baselines {})",
                    r.policy, r.config_id, r.workload, r.seed, self.shard, self.shards, self.configs, self.workloads, self.seeds, self.baselines
                ))
            } else if let Some((column, value, why)) = runner_mismatch(&runners, r) {
                Some(format!("column {column} is {value} but {why}"))
            } else if let Err((column, value, why)) = r.check_values() {
                Some(format!("column {column} is {value}: {why}"))
            } else if r.days != self.days {
                Some(format!("days is {} but its {FILE_NAME} says {}", r.days, self.days))
            } else if r.jobs == 0 {
                Some(format!(
                    "workload {} seed {} has 0 jobs, so every score of the row is an empty 0 (re-run the shards with more --days)",
                    r.workload, r.seed
                ))
            } else {
                None
            };
            if let Some(why) = bad {
                let name = file
                    .file_name()
                    .map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
                bail!(
                    "shard {}: {name} line {}: {why}; was {name} edited or overwritten?",
                    dir.display(),
                    i + 2
                );
            }
        }
        Ok(())
    }

    /// The fields that must agree across shards, as (name, value) pairs.
    fn sweep_fields(&self) -> [(&'static str, String); 10] {
        [
            ("version", self.version.clone()),
            ("shards", self.shards.to_string()),
            ("configs", self.configs.to_string()),
            ("grid_fingerprint", self.grid_fingerprint.clone()),
            ("workloads", format!("{:?}", self.workloads)),
            ("workload_fingerprint", self.workload_fingerprint.clone()),
            ("seeds", format!("{:?}", self.seeds)),
            ("days", self.days.to_string()),
            ("baselines", self.baselines.to_string()),
            ("runners", fnv1a_hex(&format!("{:?}", self.runners))),
        ]
    }
}

/// The first parameter column of `row` that differs from its runner's (a runner missing from
/// the manifest is reported as a mismatch of `config_id`).
fn runner_mismatch(
    runners: &std::collections::BTreeMap<(&str, &str), &crate::score::RowParams>,
    row: &crate::score::Row,
) -> Option<crate::score::BadColumn> {
    match runners.get(&(row.policy.as_str(), row.config_id.as_str())) {
        Some(p) => p.mismatch(row),
        None => Some((
            "config_id",
            row.config_id.clone(),
            format!("its {FILE_NAME} lists no runner {} {}", row.policy, row.config_id),
        )),
    }
}

/// Checks that `shards` (folder, manifest) are exactly the shards `0..N` of one sweep, each
/// once.
///
/// # Errors
/// Names the offending folder and field: a field that differs from the first shard's, a shard
/// index given twice or out of range, or the missing indices.
pub fn check_set(shards: &[(PathBuf, ShardManifest)]) -> anyhow::Result<()> {
    let Some((first_dir, first)) = shards.first() else {
        bail!("no shards given");
    };
    let reference = first.sweep_fields();
    for (dir, m) in &shards[1..] {
        for ((name, want), (_, got)) in reference.iter().zip(m.sweep_fields()) {
            if *want != got {
                bail!(
                    "shard {} ran a different sweep from shard {}: {name} is {got} there but {want} in {}; merge only the shards of one sweep",
                    dir.display(),
                    first_dir.display(),
                    first_dir.display()
                );
            }
        }
    }
    let n = first.shards;
    let mut seen: Vec<Option<&PathBuf>> = vec![None; n];
    for (dir, m) in shards {
        if m.shard >= n {
            bail!("shard {}: shard index {} is not below the shard count {n}", dir.display(), m.shard);
        }
        if let Some(prev) = seen[m.shard] {
            bail!(
                "shard {} and shard {} are both shard {}/{n}: each shard may be given once",
                prev.display(),
                dir.display(),
                m.shard
            );
        }
        seen[m.shard] = Some(dir);
    }
    let missing: Vec<String> = (0..n).filter(|&i| seen[i].is_none()).map(|i| format!("{i}/{n}")).collect();
    if !missing.is_empty() {
        bail!(
            "incomplete set of shards: missing --shard {} (the sweep {} was split into {n} shards)",
            missing.join(", "),
            first_dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(shard: usize) -> (PathBuf, ShardManifest) {
        (
            PathBuf::from(format!("sh{shard}")),
            ShardManifest {
                version: "1".into(),
                shard,
                shards: 2,
                configs: 2,
                grid_fingerprint: "aa".into(),
                workloads: vec!["default".into()],
                workload_fingerprint: "bb".into(),
                seeds: vec![1],
                days: 0.2,
                baselines: true,
                rows: 3,
                runners: (0..2)
                    .map(|c| crate::score::RowParams {
                        policy: "gpu-reaper".into(),
                        config_id: format!("c{c:03}"),
                        util_threshold_pct: Some(5.0),
                        window_s: Some(600),
                        ..Default::default()
                    })
                    .chain(crate::baseline::Baseline::ALL.into_iter().map(|b| b.params()))
                    .collect(),
            },
        )
    }

    #[test]
    fn a_merge_gets_the_workload_files_only_when_they_are_the_built_in_ones() {
        let (_, mut man) = m(0);
        // A fingerprint that is not the built-in default's: a custom file named "default".
        assert!(man.builtin_workloads().is_empty());
        man.workloads = vec!["default".into(), "traps".into()];
        let builtins = [crate::Workload::builtin_default(), crate::Workload::builtin_traps()];
        man.workload_fingerprint = fnv1a_hex(&builtins.iter().map(|w| format!("{w:?}\n")).collect::<String>());
        assert_eq!(man.builtin_workloads(), builtins);
        man.workloads = vec!["default".into(), "mine".into()];
        assert!(man.builtin_workloads().is_empty());
    }

    #[test]
    fn a_complete_agreeing_set_passes_and_each_defect_is_named() {
        check_set(&[m(1), m(0)]).unwrap();
        let e = check_set(&[m(0)]).unwrap_err().to_string();
        assert!(e.contains("missing --shard 1/2"), "{e}");
        let e = check_set(&[m(0), m(0), m(1)]).unwrap_err().to_string();
        assert!(e.contains("sh0") && e.contains("both shard 0/2"), "{e}");
        let mut other = m(1);
        other.0 = PathBuf::from("sh1c");
        other.1.grid_fingerprint = "cc".into();
        let e = check_set(&[m(0), other]).unwrap_err().to_string();
        assert!(e.contains("sh1c") && e.contains("grid_fingerprint"), "{e}");
        let mut other = m(1);
        other.1.days = 0.1;
        let e = check_set(&[m(0), other]).unwrap_err().to_string();
        assert!(e.contains("sh1") && e.contains("days is 0.1"), "{e}");
    }

    #[test]
    fn rows_are_checked_against_the_runs_of_the_shard() {
        let (dir, m1) = m(1);
        let keys = m1.expected_keys();
        assert_eq!(keys[0], ("gpu-reaper".into(), "c001".into(), "default".into(), 1));
        assert!(!keys.iter().any(|k| k.1 == "c000"), "c000 is item 0: shard 0");
        let row = |config: &str, workload: &str, days: f64, jobs: u64| crate::score::Row {
            policy: "gpu-reaper".into(),
            config_id: config.into(),
            workload: workload.into(),
            seed: 1,
            days,
            jobs,
            util_threshold_pct: Some(5.0),
            window_s: Some(600),
            ..Default::default()
        };
        m1.check_rows(&dir, &dir.join("sweep.csv"), &[row("c001", "default", 0.2, 5)])
            .unwrap();
        for (bad, want) in [
            (row("c000", "default", 0.2, 5), "config c000"),
            (row("c001", "defaultX", 0.2, 5), "workload defaultX"),
            (row("c001", "default", 0.1, 5), "days is 0.1"),
            (row("c001", "default", 0.2, 0), "0 jobs"),
        ] {
            let e = m1
                .check_rows(&dir, &dir.join("sweep.csv"), &[row("c001", "default", 0.2, 5), bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("shard sh1: sweep.csv line 3") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn rows_with_bad_values_or_tampered_parameters_are_refused() {
        let (dir, m1) = m(1);
        let good = crate::score::Row {
            policy: "gpu-reaper".into(),
            config_id: "c001".into(),
            workload: "default".into(),
            seed: 1,
            days: 0.2,
            jobs: 5,
            util_threshold_pct: Some(5.0),
            window_s: Some(600),
            wasted_gpu_h: 2.0,
            oracle_recovered_gpu_h: 1.5,
            recovered_gpu_h: 1.0,
            recovered_share: Some(0.5),
            recovered_gpu_h_idle: 1.0,
            cancels: 2,
            cancels_hung: 1,
            cancels_idle: 1,
            false_cancels: 1,
            false_cancels_hung: 1,
            false_cancels_serving: 1,
            false_cancel_lost_gpu_h: 0.3,
            drains: 2,
            false_drains: 1,
            drained_gpu_h: 0.5,
            true_alerts: 2,
            false_alerts: 1,
            alerts_hung: 2,
            alerts_idle: 1,
            alert_latency_p50_s: Some(60),
            alert_latency_p95_s: Some(120),
            cancel_latency_p50_s: Some(60),
            cancel_latency_p95_s: Some(60),
            ..Default::default()
        };
        m1.check_rows(&dir, &dir.join("sweep.csv"), std::slice::from_ref(&good)).unwrap();
        type Edit = fn(&mut crate::score::Row);
        let cases: Vec<(Edit, &str)> = vec![
            (|r| r.recovered_gpu_h = f64::NAN, "column recovered_gpu_h is NaN"),
            (|r| r.recovered_gpu_h = -50.0, "column recovered_gpu_h is -50"),
            (|r| r.drained_gpu_h = f64::INFINITY, "column drained_gpu_h is inf"),
            (|r| r.recovered_share = Some(1.5), "column recovered_share is 1.5"),
            (|r| r.alert_latency_p50_s = Some(-1), "column alert_latency_p50_s is -1"),
            (
                |r| r.util_threshold_pct = Some(6.0),
                "column util_threshold_pct is 6 but the configuration c001 of this sweep has 5",
            ),
            (|r| r.window_s = None, "column window_s is (empty)"),
            (|r| r.exempt_qos = "serving".into(), "column exempt_qos is serving"),
            // Relations between columns that every row the sweep writes obeys.
            (
                |r| r.recovered_gpu_h = 2.5,
                "column recovered_gpu_h is 2.5: must not exceed wasted_gpu_h (2)",
            ),
            (
                |r| r.recovered_gpu_h = 1.8,
                "column recovered_gpu_h is 1.8: must not exceed oracle_recovered_gpu_h (1.5)",
            ),
            (
                |r| r.oracle_recovered_gpu_h = 2.5,
                "column oracle_recovered_gpu_h is 2.5: must not exceed wasted_gpu_h (2)",
            ),
            (
                |r| r.recovered_gpu_h_idle = 1.2,
                "column recovered_gpu_h_idle is 1.2: must not exceed recovered_gpu_h (1)",
            ),
            (|r| r.false_cancels = 3, "column false_cancels is 3: must not exceed cancels (2)"),
            (|r| r.cancels = 6, "column cancels is 6: must not exceed jobs (5)"),
            (
                |r| r.true_alerts = 0,
                "column cancels is 2: must not exceed true_alerts + false_alerts (1)",
            ),
            (|r| r.false_drains = 3, "column false_drains is 3: must not exceed drains (2)"),
            (
                |r| r.drains_single_node = 3,
                "column drains_single_node is 3: must not exceed drains (2)",
            ),
            (
                |r| r.false_drains_single_node = 1,
                "column false_drains_single_node is 1: must not exceed drains_single_node (0)",
            ),
            (
                |r| {
                    r.drains_single_node = 2;
                    r.false_drains_single_node = 2;
                },
                "column false_drains_single_node is 2: must not exceed false_drains (1)",
            ),
            (
                |r| r.false_cancels_serving = 2,
                "column false_cancels_serving is 2: must not exceed false_cancels (1)",
            ),
            (
                |r| r.false_cancels_spin = 1,
                "column false_cancels_spin is 1: must not exceed cancels_spin (0)",
            ),
            (
                |r| r.false_cancels_idle = 1,
                "column false_cancels_<sig> (summed) is 2: must not exceed false_cancels (1)",
            ),
            (|r| r.alerts_idle = 0, "column cancels_idle is 1: must not exceed alerts_idle (0)"),
            (
                |r| {
                    r.cancels_spin = 1;
                    r.alerts_spin = 1;
                    r.alerts_hung = 1;
                },
                "column cancels_<sig> (summed) is 3: must not exceed cancels (2)",
            ),
            (
                |r| r.alerts_unknown = 1,
                "column alerts_<sig> (summed) is 4: must not exceed true_alerts + false_alerts (3)",
            ),
            (
                |r| {
                    r.false_cancels = 2;
                    r.false_cancels_idle = 1;
                },
                "column recovered_gpu_h is 1: is above 0 without a correct cancel",
            ),
            (
                |r| {
                    r.false_cancels = 0;
                    r.false_cancels_hung = 0;
                    r.false_cancels_serving = 0;
                },
                "column false_cancel_lost_gpu_h is 0.3: is above 0 without a false cancel",
            ),
            (
                |r| {
                    r.drains = 0;
                    r.false_drains = 0;
                },
                "column drained_gpu_h is 0.5: is above 0 without a drain",
            ),
            (
                |r| r.recovered_share = None,
                "column recovered_share is (empty): must be given exactly when wasted_gpu_h is above 0",
            ),
            (
                |r| r.alert_latency_p95_s = None,
                "column alert_latency_p95_s is (empty): must be given exactly when true_alerts is above 0",
            ),
            (
                |r| r.alert_latency_p50_s = Some(200),
                "column alert_latency_p50_s is 200: must not exceed alert_latency_p95_s (120)",
            ),
            (
                |r| {
                    r.recovered_gpu_h = 0.0;
                    r.recovered_gpu_h_idle = 0.0;
                    r.false_cancels = 2;
                    r.false_cancels_idle = 1;
                    r.false_cancels_serving = 0;
                },
                "column cancel_latency_p50_s is 60: must be given exactly when a cancel was correct",
            ),
        ];
        for (edit, want) in cases {
            let mut bad = good.clone();
            edit(&mut bad);
            let e = m1
                .check_rows(&dir, &dir.join("sweep.csv"), &[good.clone(), bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("shard sh1: sweep.csv line 3") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn the_manifest_round_trips_through_toml() {
        let dir = tempfile::tempdir().unwrap();
        let (_, want) = m(1);
        want.write(dir.path()).unwrap();
        assert_eq!(ShardManifest::read(dir.path()).unwrap(), want);
    }
}
