//! TRES strings (`cpu=8,mem=64G,node=1,billing=8,gres/gpu=4,gres/gpu:a100=4`), as printed by
//! squeue's `tres-alloc`, squeue JSON's `tres_alloc_str` and scontrol's `TRES=` / `AllocTRES=`.
//!
//! GPU count rule (Slurm gres.shtml, gpu_common.c): the untyped `gres/gpu=N` entry wins
//! wherever it appears; typed `gres/gpu:TYPE=N` entries are a breakdown of it and are summed
//! only when no untyped entry exists. `gres/gpumem`, `gres/gpuutil` and `gres/shard` are not
//! GPU counts.

use serde::Serialize;
use std::collections::BTreeMap;

/// A parsed TRES string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tres {
    /// Every `key=value` entry, in key order.
    pub entries: BTreeMap<String, String>,
    /// Whole GPUs allocated, by the rule above; 0 when no GPU entry exists.
    pub gpus: u32,
}

/// Why a TRES string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("TRES {text:?}: {problem} in entry {entry:?}")]
pub struct TresError {
    /// The rejected input.
    pub text: String,
    /// The offending entry.
    pub entry: String,
    /// What is wrong.
    pub problem: String,
}

/// Parses a TRES string. A leading `TRES=` (scontrol) is accepted. Empty text is no TRES.
/// Errors: an entry without `=`, a GPU count that is not a whole number, or a key repeated
/// with a different value (`gres/gpu=4,gres/gpu=8`).
pub fn parse(text: &str) -> Result<Tres, TresError> {
    let mut t = text.trim();
    if let Some(r) = t.strip_prefix("TRES=") {
        t = r;
    }
    let mut entries: BTreeMap<String, String> = BTreeMap::new();
    let mut untyped: Option<u32> = None;
    // Typed counts by key, so the same entry repeated is counted once.
    let mut typed: BTreeMap<String, u32> = BTreeMap::new();
    for item in t.split(',').filter(|s| !s.is_empty()) {
        let err = |p: &str| TresError {
            text: text.to_string(),
            entry: item.to_string(),
            problem: p.to_string(),
        };
        let (k, v) = item.split_once('=').ok_or_else(|| err("no '='"))?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(err("empty key"));
        }
        // A key given twice with different values cannot be read either way.
        if let Some(prev) = entries.get(k).filter(|p| *p != v) {
            return Err(err(&format!("{k} is given twice with different values ({prev} and {v})")));
        }
        if k == "gres/gpu" || k.starts_with("gres/gpu:") {
            let n: u32 = v.parse().map_err(|_| err("GPU count is not a whole number"))?;
            if k == "gres/gpu" {
                untyped = Some(n);
            } else {
                typed.insert(k.to_string(), n);
            }
        }
        entries.insert(k.to_string(), v.to_string());
    }
    let typed_sum = typed.values().fold(0u32, |a, n| a.saturating_add(*n));
    Ok(Tres {
        entries,
        gpus: untyped.unwrap_or(typed_sum),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untyped_wins_wherever_it_is() {
        assert_eq!(parse("gres/gpu:a100=2,cpu=1,gres/gpu=2").unwrap().gpus, 2);
        assert_eq!(parse("gres/gpu:a100=4,gres/gpu:h100=2").unwrap().gpus, 6);
        assert_eq!(parse("gres/gpumem=10G,gres/gpuutil=100,gres/shard=8").unwrap().gpus, 0);
        assert!(parse("gres/gpu=x").is_err());
        assert!(parse("cpu").is_err());
        assert_eq!(parse("").unwrap().gpus, 0);
    }

    #[test]
    fn a_key_repeated_with_another_value_is_an_error() {
        let e = parse("gres/gpu=4,gres/gpu=8").unwrap_err();
        assert!(e.problem.contains("gres/gpu") && e.problem.contains("twice"), "{e}");
        assert!(parse("cpu=8,mem=1G,cpu=16").is_err());
        assert!(parse("gres/gpu:a100=2,gres/gpu:a100=3").is_err());
        // The same value twice says the same thing.
        assert_eq!(parse("gres/gpu=4,cpu=1,gres/gpu=4").unwrap().gpus, 4);
        assert_eq!(parse("gres/gpu:a100=2,gres/gpu:a100=2").unwrap().gpus, 2);
    }
}
