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
/// Errors: an entry without `=`, or a GPU count that is not a whole number.
pub fn parse(text: &str) -> Result<Tres, TresError> {
    let mut t = text.trim();
    if let Some(r) = t.strip_prefix("TRES=") {
        t = r;
    }
    let mut entries = BTreeMap::new();
    let mut untyped: Option<u32> = None;
    let mut typed: u32 = 0;
    for item in t.split(',').filter(|s| !s.is_empty()) {
        let err = |p: &str| TresError {
            text: text.to_string(),
            entry: item.to_string(),
            problem: p.to_string(),
        };
        let (k, v) = item.split_once('=').ok_or_else(|| err("no '='"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(err("empty key"));
        }
        let is_untyped = k == "gres/gpu";
        let is_typed = k.starts_with("gres/gpu:");
        if is_untyped || is_typed {
            let n: u32 = v.trim().parse().map_err(|_| err("GPU count is not a whole number"))?;
            if is_untyped {
                untyped = Some(untyped.map_or(n, |u| u.max(n)));
            } else {
                typed = typed.saturating_add(n);
            }
        }
        entries.insert(k.to_string(), v.trim().to_string());
    }
    Ok(Tres {
        entries,
        gpus: untyped.unwrap_or(typed),
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
}
