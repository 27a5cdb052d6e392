//! The sweep grid: policy configurations to score, from a TOML file (`--grid FILE`), from
//! flags, or the built-in default (`sim/grids/default.toml`).
//!
//! A grid file has an optional `[policy]` section (any `[policy]` key; the base every
//! configuration starts from) and one or more `[[sweep]]` blocks. Each block lists values per
//! parameter; its configurations are the cartesian product. Blocks are concatenated in order.
//! A value given twice in one list, and a configuration that two blocks both give, are errors:
//! each configuration comes from exactly one place in the file. Configuration ids (`c000`,
//! `c001`, …) follow that order, so they are stable for a given grid file (and shards of one
//! sweep agree on them).

use crate::score::RowParams;
use policy::{DurationS, Policy, PolicyConfig, StageConfig};
use serde::{Deserialize, Serialize};

/// The built-in default grid, embedded so the sweep runs from a fresh clone.
pub const DEFAULT_GRID_TOML: &str = include_str!("../grids/default.toml");

/// A grid that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// The file could not be read.
    #[error("{file}: cannot read")]
    Io {
        /// The file.
        file: String,
        /// The error.
        source: std::io::Error,
    },
    /// Malformed TOML, an unknown key or a wrong type (toml's message gives line and column).
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// toml's message.
        message: String,
    },
    /// A value the policy rejects, or an empty list.
    #[error("{file}: `{key}` = {value}: {problem}")]
    Invalid {
        /// The file (or `flags`).
        file: String,
        /// Dotted key, e.g. `sweep[0].window`.
        key: String,
        /// The bad value.
        value: String,
        /// What is wrong.
        problem: String,
    },
    /// The grid would hold more configurations than [`MAX_CONFIGS`].
    #[error("{file}: the grid would have {count} configurations (the product of each [[sweep]] block's list lengths, summed over the blocks), above the limit of {limit}; sweep fewer values, or split the sweep into several runs")]
    TooLarge {
        /// The file (or `flags`).
        file: String,
        /// Configurations the blocks would give (saturating at `u64::MAX`).
        count: u64,
        /// [`MAX_CONFIGS`].
        limit: usize,
    },
    /// Two `[[sweep]]` blocks give the same configuration (it would be scored twice under two
    /// ids).
    #[error("{file}: [[sweep]] block {first} (sweep[{first_index}]) and block {second} (sweep[{second_index}]) both give the configuration {config}; each configuration may come from one block only: remove it from one of them", first_index = first - 1, second_index = second - 1)]
    RepeatedAcrossBlocks {
        /// The file (or `flags`).
        file: String,
        /// The earlier block, 1-based.
        first: usize,
        /// The later block, 1-based.
        second: usize,
        /// The configuration's values, as the summary describes a configuration.
        config: String,
    },
    /// The grid holds no configuration.
    #[error("{file}: the grid has no configurations; add a [[sweep]] block with at least one value per list")]
    Empty {
        /// The file.
        file: String,
    },
}

/// The most configurations a grid may have. Each is a validated policy held for the whole
/// sweep and gives one result row per workload and seed; 10,000 configurations are already
/// 20,000 runs per seed of the two built-in workloads.
pub const MAX_CONFIGS: usize = 10_000;

/// One `[[sweep]]` block: a list of values per parameter; an absent list keeps the base value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweepBlock {
    /// `util_threshold_pct` values.
    pub util_threshold_pct: Option<Vec<f64>>,
    /// `window` values, e.g. `["10m", "20m"]`.
    pub window: Option<Vec<DurationS>>,
    /// `warmup` values.
    pub warmup: Option<Vec<DurationS>>,
    /// `max_sample_gap` values.
    pub max_sample_gap: Option<Vec<DurationS>>,
    /// Dwell of the drain stage; the stages are alert at 0, drain at this, cancel at
    /// `cancel_after`.
    pub drain_after: Option<Vec<DurationS>>,
    /// Dwell of the cancel stage, or `"none"` for no cancel stage.
    pub cancel_after: Option<Vec<String>>,
    /// `notice` values.
    pub notice: Option<Vec<DurationS>>,
    /// Ceiling of the spin signature: `watching`, `alert`, `drain` or `cancel`.
    pub spin_ceiling: Option<Vec<String>>,
    /// `exempt.qos` values: each entry is one list of exempt QOS names (`[]`: none), e.g.
    /// `[[], ["serving"]]` sweeps without and with an exempt serving QOS.
    pub exempt_qos: Option<Vec<Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GridFile {
    #[serde(default)]
    policy: PolicyConfig,
    #[serde(default)]
    sweep: Vec<SweepBlock>,
}

/// One configuration of the grid: its id, its parameters as written to the CSV, and the
/// validated policy.
#[derive(Clone, Debug)]
pub struct GridConfig {
    /// Parameters and id.
    pub params: RowParams,
    /// The validated policy.
    pub policy: Policy,
}

/// Reads a grid file.
///
/// # Errors
/// [`GridError`] naming the file, the key and the value.
pub fn load(path: &std::path::Path) -> Result<Vec<GridConfig>, GridError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| GridError::Io {
        file: file.clone(),
        source,
    })?;
    from_toml(&text, &file)
}

/// Parses a grid; `file` names it in errors.
///
/// # Errors
/// [`GridError`]; an empty grid is [`GridError::Empty`].
pub fn from_toml(text: &str, file: &str) -> Result<Vec<GridConfig>, GridError> {
    let g: GridFile = toml::from_str(text).map_err(|e| GridError::Parse {
        file: file.to_string(),
        message: e.to_string().trim_end().replace('\n', "\n  "),
    })?;
    expand(&g.policy, &g.sweep, file)
}

/// The built-in default grid.
pub fn builtin_default() -> Vec<GridConfig> {
    from_toml(DEFAULT_GRID_TOML, "sim/grids/default.toml").expect("the built-in grid is valid")
}

/// Expands blocks over a base policy into validated configurations.
///
/// # Errors
/// [`GridError::Invalid`] naming `sweep[i].key` (and for `file` `flags` the flag) and the value,
/// including a value given twice in one list; [`GridError::TooLarge`] before expanding a grid
/// of more than [`MAX_CONFIGS`] configurations; [`GridError::Empty`].
pub fn expand(base: &PolicyConfig, blocks: &[SweepBlock], file: &str) -> Result<Vec<GridConfig>, GridError> {
    let mut out: Vec<GridConfig> = Vec::new();
    // Each configuration's fingerprint, and the block (0-based) that gave it first.
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let base_drain = base
        .stages
        .iter()
        .find(|s| s.verdict == "drain")
        .map_or(DurationS(3600), |s| s.after);
    let base_cancel = base.stages.iter().find(|s| s.verdict == "cancel").map(|s| s.after);
    let mut count: u64 = 0;
    for (bi, b) in blocks.iter().enumerate() {
        let inv = |key: &str, value: String, problem: &str| GridError::Invalid {
            file: file.to_string(),
            key: if file == "flags" {
                format!("--{} (sweep[{bi}].{key})", key.replace('_', "-"))
            } else {
                format!("sweep[{bi}].{key}")
            },
            value,
            problem: problem.to_string(),
        };
        fn list<T: Clone>(v: &Option<Vec<T>>, base: T) -> Vec<T> {
            v.clone().unwrap_or_else(|| vec![base])
        }
        let utils = list(&b.util_threshold_pct, base.util_threshold_pct);
        let windows = list(&b.window, base.window);
        let warmups = list(&b.warmup, base.warmup);
        let gaps = list(&b.max_sample_gap, base.max_sample_gap);
        let drains = list(&b.drain_after, base_drain);
        let cancels_raw = list(&b.cancel_after, base_cancel.map_or("none".to_string(), |d| d.to_string()));
        let notices = list(&b.notice, base.notice);
        let spins = list(
            &b.spin_ceiling,
            base.ceilings.get("spin").cloned().unwrap_or_else(|| "alert".to_string()),
        );
        let exempts = list(&b.exempt_qos, base.exempt.qos.clone());
        for (key, n) in [
            ("util_threshold_pct", utils.len()),
            ("window", windows.len()),
            ("warmup", warmups.len()),
            ("max_sample_gap", gaps.len()),
            ("drain_after", drains.len()),
            ("cancel_after", cancels_raw.len()),
            ("notice", notices.len()),
            ("spin_ceiling", spins.len()),
            ("exempt_qos", exempts.len()),
        ] {
            if n == 0 {
                return Err(inv(key, "[]".into(), "an empty list gives no configurations"));
            }
        }
        count = [
            utils.len(),
            windows.len(),
            warmups.len(),
            gaps.len(),
            drains.len(),
            cancels_raw.len(),
            notices.len(),
            spins.len(),
            exempts.len(),
        ]
        .into_iter()
        .fold(1u64, |acc, n| acc.saturating_mul(n as u64))
        .saturating_add(count);
        if count > MAX_CONFIGS as u64 {
            return Err(GridError::TooLarge {
                file: file.to_string(),
                count,
                limit: MAX_CONFIGS,
            });
        }
        let twice = |key: &str, value: String| inv(key, value, "given twice in one list; each value may appear once");
        if let Some(u) = first_repeat(&utils, |a, b| a == b) {
            return Err(twice("util_threshold_pct", u.to_string()));
        }
        for (key, list) in [
            ("window", &windows),
            ("warmup", &warmups),
            ("max_sample_gap", &gaps),
            ("drain_after", &drains),
            ("notice", &notices),
        ] {
            if let Some(d) = first_repeat(list, |a, b| a == b) {
                return Err(twice(key, d.to_string()));
            }
        }
        if let Some(v) = first_repeat(&spins, |a, b| a == b) {
            return Err(twice("spin_ceiling", v.clone()));
        }
        // The policy matches QOS names case-insensitively, so an exemption list is a set of
        // lowercase names.
        if let Some(v) = first_repeat(&exempts, |a, b| qos_set(a) == qos_set(b)) {
            return Err(twice("exempt_qos", format!("{v:?}")));
        }
        for e in &exempts {
            if let Some(bad) = e.iter().find(|q| q.trim().is_empty() || q.contains('+')) {
                return Err(inv(
                    "exempt_qos",
                    format!("{bad:?}"),
                    "a QOS name must be non-empty and must not contain '+'",
                ));
            }
            if let Some(name) = first_repeat(e, |a, b| a.to_lowercase() == b.to_lowercase()) {
                return Err(inv(
                    "exempt_qos",
                    format!("{e:?}"),
                    &format!("names QOS {name:?} twice in one exemption list (names match case-insensitively); each name may appear once"),
                ));
            }
        }
        let mut cancels: Vec<Option<DurationS>> = Vec::new();
        for c in &cancels_raw {
            if c == "none" {
                cancels.push(None);
            } else {
                cancels.push(Some(
                    DurationS::parse(c).map_err(|e| inv("cancel_after", format!("{c:?}"), &e.to_string()))?,
                ));
            }
        }
        if let Some(c) = first_repeat(&cancels, |a, b| a == b) {
            return Err(twice("cancel_after", c.map_or_else(|| "none".to_string(), |c| c.to_string())));
        }
        for &u in &utils {
            for &w in &windows {
                for &wu in &warmups {
                    for &gap in &gaps {
                        for &d in &drains {
                            for &c in &cancels {
                                for &nt in &notices {
                                    for (spin, exempt) in spins.iter().flat_map(|s| exempts.iter().map(move |e| (s, e))) {
                                        let mut cfg = base.clone();
                                        cfg.exempt.qos = exempt.clone();
                                        cfg.util_threshold_pct = u;
                                        cfg.window = w;
                                        cfg.warmup = wu;
                                        cfg.max_sample_gap = gap;
                                        cfg.notice = nt;
                                        cfg.stages = vec![
                                            StageConfig {
                                                after: DurationS(0),
                                                verdict: "alert".into(),
                                            },
                                            StageConfig {
                                                after: d,
                                                verdict: "drain".into(),
                                            },
                                        ];
                                        if let Some(c) = c {
                                            cfg.stages.push(StageConfig {
                                                after: c,
                                                verdict: "cancel".into(),
                                            });
                                        }
                                        cfg.ceilings.insert("spin".into(), spin.clone());
                                        let policy = Policy::new(&cfg).map_err(|e| {
                                            if e.key == "policy.starved_mean_util_pct" && b.util_threshold_pct.is_some() {
                                                // Refused against this block's threshold: name
                                                // the swept value and the base key both.
                                                // The policy's reason, after its own "is at or
                                                // above policy.util_threshold_pct (…): ".
                                                let why = e.problem.split_once("): ").map_or(e.problem.as_str(), |x| x.1);
                                                return inv(
                                                    "util_threshold_pct",
                                                    u.to_string(),
                                                    &format!("is at or below the [policy] starved_mean_util_pct ({}): {why}", e.value),
                                                );
                                            }
                                            let key = e.key.trim_start_matches("policy.");
                                            let key = match key {
                                                "stages" | "stages[1].after" | "stages[2].after" => "drain_after/cancel_after",
                                                "ceilings.spin" => "spin_ceiling",
                                                k if k.starts_with("exempt.qos") => "exempt_qos",
                                                k @ ("util_threshold_pct" | "window" | "warmup" | "max_sample_gap" | "notice") => k,
                                                // A key no [[sweep]] block sets: it comes from
                                                // the [policy] section.
                                                _ => {
                                                    return GridError::Invalid {
                                                        file: file.to_string(),
                                                        key: format!("{} (in sweep[{bi}])", e.key),
                                                        value: e.value.clone(),
                                                        problem: e.problem.clone(),
                                                    }
                                                }
                                            };
                                            inv(key, e.value.clone(), &e.problem)
                                        })?;
                                        let params = RowParams {
                                            policy: "gpu-reaper".into(),
                                            config_id: format!("c{:03}", out.len()),
                                            util_threshold_pct: Some(u),
                                            window_s: Some(w.0),
                                            warmup_s: Some(wu.0),
                                            max_sample_gap_s: Some(gap.0),
                                            drain_after_s: Some(d.0),
                                            cancel_after_s: c.map(|c| c.0),
                                            notice_s: Some(nt.0),
                                            spin_ceiling: spin.clone(),
                                            exempt_qos: exempt.join("+"),
                                        };
                                        // The same configuration whatever the order and case
                                        // of its exempt QOS names.
                                        let mut canonical = cfg;
                                        canonical.exempt.qos = qos_set(exempt).into_iter().collect();
                                        if let Some(&first) = seen.get(&format!("{canonical:?}")) {
                                            return Err(GridError::RepeatedAcrossBlocks {
                                                file: file.to_string(),
                                                first: first + 1,
                                                second: bi + 1,
                                                config: crate::report::describe(&params),
                                            });
                                        }
                                        seen.insert(format!("{canonical:?}"), bi);
                                        out.push(GridConfig { params, policy });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(GridError::Empty { file: file.to_string() });
    }
    Ok(out)
}

/// An exemption list as the policy matches it: a set of lowercase QOS names.
fn qos_set(names: &[String]) -> std::collections::BTreeSet<String> {
    names.iter().map(|q| q.to_lowercase()).collect()
}

/// The first value of `list` equal (by `eq`) to an earlier one.
fn first_repeat<T>(list: &[T], eq: impl Fn(&T, &T) -> bool) -> Option<&T> {
    list.iter()
        .enumerate()
        .find(|(i, v)| list[..*i].iter().any(|w| eq(w, v)))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_grid_is_large_enough_and_has_cancel_stages_and_spin_ceilings() {
        let g = builtin_default();
        assert!(g.len() >= 100, "{} configs", g.len());
        assert!(g.iter().any(|c| c.params.cancel_after_s.is_some()));
        assert!(g.iter().any(|c| c.params.cancel_after_s.is_none()));
        assert!(g.iter().any(|c| c.params.spin_ceiling == "cancel"));
        assert!(g.iter().any(|c| c.params.spin_ceiling == "alert"));
        let ids: std::collections::BTreeSet<_> = g.iter().map(|c| c.params.config_id.clone()).collect();
        assert_eq!(ids.len(), g.len());
    }

    #[test]
    fn a_grid_above_the_limit_is_refused_before_expanding_with_its_count() {
        // 80 × 80 × 1000 = 6.4 million configurations: refused at once, naming the count.
        let block = SweepBlock {
            util_threshold_pct: Some((0..80).map(f64::from).collect()),
            window: Some((1..=80).map(|m| DurationS(m * 60)).collect()),
            warmup: Some((1..=1000).map(|m| DurationS(m * 60)).collect()),
            ..SweepBlock::default()
        };
        let e = expand(&PolicyConfig::default(), &[block], "flags").unwrap_err().to_string();
        assert!(e.contains("6400000 configurations") && e.contains("10000"), "{e}");
        // Two blocks of 6,000 each: 12,000 together is above the limit too.
        let six = SweepBlock {
            util_threshold_pct: Some((2..=61).map(f64::from).collect()),
            warmup: Some((1..=100).map(|m| DurationS(m * 60)).collect()),
            ..SweepBlock::default()
        };
        let e = expand(&PolicyConfig::default(), &[six.clone(), six], "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("12000 configurations"), "{e}");
    }

    #[test]
    fn a_value_given_twice_in_one_list_is_an_error_naming_it() {
        let e = from_toml("[[sweep]]\nutil_threshold_pct = [5.0, 5.0]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sweep[0].util_threshold_pct") && e.contains("= 5") && e.contains("twice"),
            "{e}"
        );
        let e = from_toml("[[sweep]]\nwindow = [\"1h\", \"60m\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sweep[0].window") && e.contains("twice"), "{e}");
        let e = from_toml("[[sweep]]\ncancel_after = [\"none\", \"2h\", \"none\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sweep[0].cancel_after") && e.contains("none") && e.contains("twice"),
            "{e}"
        );
        let e = from_toml("[[sweep]]\nexempt_qos = [[\"a\", \"b\"], [\"b\", \"a\"]]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sweep[0].exempt_qos") && e.contains("twice"), "{e}");
        let block = SweepBlock {
            util_threshold_pct: Some(vec![5.0, 5.0]),
            ..SweepBlock::default()
        };
        let e = expand(&PolicyConfig::default(), &[block], "flags").unwrap_err().to_string();
        assert!(e.contains("--util-threshold-pct") && e.contains("twice"), "{e}");
    }

    #[test]
    fn exempt_qos_is_a_dimension_of_the_grid() {
        let g = from_toml(
            "[[sweep]]\nwindow = [\"20m\", \"40m\"]\nexempt_qos = [[], [\"serving\"], [\"serving\", \"infer\"]]",
            "g.toml",
        )
        .unwrap();
        assert_eq!(g.len(), 6);
        let e: Vec<&str> = g.iter().map(|c| c.params.exempt_qos.as_str()).collect();
        assert_eq!(e, ["", "serving", "serving+infer", "", "serving", "serving+infer"]);
        let job = policy::JobFacts {
            qos: "serving".into(),
            ..Default::default()
        };
        assert_eq!(g[0].policy.exemption(&job), None);
        assert!(g[1].policy.exemption(&job).is_some());
        let e = from_toml("[[sweep]]\nexempt_qos = [[\"a+b\"]]", "g.toml").unwrap_err().to_string();
        assert!(e.contains("sweep[0].exempt_qos") && e.contains("a+b"), "{e}");
        // The default grid sweeps it, both ways.
        let d = builtin_default();
        assert!(d.iter().any(|c| c.params.exempt_qos == "serving"));
        assert!(d
            .iter()
            .any(|c| c.params.exempt_qos.is_empty() && c.params.cancel_after_s.is_some()));
    }

    #[test]
    fn zero_configurations_is_an_error() {
        let e = from_toml("", "g.toml").unwrap_err().to_string();
        assert!(e.contains("g.toml") && e.contains("no configurations"), "{e}");
        let e = from_toml("[[sweep]]\nwindow = []", "g.toml").unwrap_err().to_string();
        assert!(e.contains("sweep[0].window") && e.contains("[]"), "{e}");
    }

    #[test]
    fn bad_values_name_file_key_and_value() {
        let e = from_toml("[[sweep]]\nwindow = [\"20m\", \"0s\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.toml") && e.contains("sweep[0].window") && e.contains("0s"), "{e}");
        let e = from_toml("[[sweep]]\nspin_ceiling = [\"explode\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("spin_ceiling") && e.contains("explode"), "{e}");
        let e = from_toml("[[sweep]]\ncancel_after = [\"soon\"]", "g.toml").unwrap_err().to_string();
        assert!(e.contains("sweep[0].cancel_after") && e.contains("soon"), "{e}");
        let e = from_toml("[[sweep]]\nwindw = [\"20m\"]", "g.toml").unwrap_err().to_string();
        assert!(e.contains("g.toml") && e.contains("windw"), "{e}");
        let e = from_toml("[[sweep]]\nutil_threshold_pct = [150]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("util_threshold_pct") && e.contains("150"), "{e}");
        // A swept threshold at or below the base's starved_mean_util_pct (1 by default).
        let e = from_toml("[[sweep]]\nutil_threshold_pct = [5, 1]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("g.toml: `sweep[0].util_threshold_pct` = 1: is at or below the [policy] starved_mean_util_pct (1)"),
            "{e}"
        );
        let e = from_toml("[policy]\nstarved_mean_util_pct = 20\n[[sweep]]\nwindow = [\"20m\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`policy.starved_mean_util_pct (in sweep[0])` = 20") && e.contains("policy.util_threshold_pct (15)"),
            "{e}"
        );
        let e = from_toml("[policy]\nspin_util_pct = 0\n[[sweep]]\nwindow = [\"20m\"]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.toml: `policy.spin_util_pct (in sweep[0])` = 0"), "{e}");
    }

    #[test]
    fn blocks_concatenate_in_order() {
        let g = from_toml(
            "[[sweep]]\nutil_threshold_pct = [5, 15]\n[[sweep]]\nutil_threshold_pct = [30]\nwindow = [\"40m\"]",
            "g.toml",
        )
        .unwrap();
        let u: Vec<_> = g.iter().map(|c| c.params.util_threshold_pct.unwrap()).collect();
        assert_eq!(u, vec![5.0, 15.0, 30.0]);
        assert_eq!(g[2].params.config_id, "c002");
        assert_eq!(g[2].params.window_s, Some(2400));
    }

    #[test]
    fn a_configuration_two_blocks_give_is_an_error_naming_both_blocks_and_its_values() {
        let e = from_toml(
            "[[sweep]]\nutil_threshold_pct = [5, 15]\n[[sweep]]\nwindow = [\"40m\"]\n[[sweep]]\nutil_threshold_pct = [15, 30]",
            "g.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("g.toml")
                && e.contains("block 1 (sweep[0])")
                && e.contains("block 3 (sweep[2])")
                && e.contains("util_threshold_pct 15, window 20m, warmup 15m, max_sample_gap 3m, drain after 1h, cancel after none"),
            "{e}"
        );
        // The same values written differently are the same configuration: "1h" is "60m", and
        // exempt QOS names match in any order and case.
        let e = from_toml(
            "[[sweep]]\nwindow = [\"1h\"]\nexempt_qos = [[\"serving\", \"infer\"]]\n[[sweep]]\nwindow = [\"60m\"]\nexempt_qos = [[\"Infer\", \"serving\"]]",
            "g.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("block 1 (sweep[0]) and block 2 (sweep[1])") && e.contains("window 1h"),
            "{e}"
        );
        // A block that repeats the base configuration (no lists at all) next to one that
        // sweeps it.
        let e = from_toml("[[sweep]]\n[[sweep]]\nutil_threshold_pct = [5, 15]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("block 1 (sweep[0]) and block 2 (sweep[1])") && e.contains("util_threshold_pct 15,"),
            "{e}"
        );
    }

    #[test]
    fn a_qos_named_twice_in_one_exemption_list_is_an_error() {
        for (list, name) in [
            ("[\"serving\", \"serving\"]", "serving"),
            ("[\"a\", \"serving\", \"SERVING\"]", "SERVING"),
        ] {
            let e = from_toml(&format!("[[sweep]]\nexempt_qos = [[], {list}]"), "g.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("g.toml") && e.contains("sweep[0].exempt_qos") && e.contains(&format!("QOS {name:?} twice")),
                "{e}"
            );
        }
        // Two lists that differ only in case are one exemption given twice.
        let e = from_toml("[[sweep]]\nexempt_qos = [[\"serving\"], [\"Serving\"]]", "g.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sweep[0].exempt_qos") && e.contains("twice"), "{e}");
    }
}
