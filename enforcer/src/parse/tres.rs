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

impl Tres {
    /// True when some `gres/gpu:TYPE` entry with a count above 0 is a MIG slice
    /// ([`is_mig_profile`]).
    pub fn mig_slices(&self) -> bool {
        self.entries
            .iter()
            .any(|(k, v)| k.strip_prefix("gres/gpu:").is_some_and(is_mig_profile) && gpu_count(v).is_ok_and(|n| n > 0))
    }
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

/// A GPU count: a whole number from 0 to `u32::MAX`. A number too large for that is named
/// as out of range, not as "not a whole number".
fn gpu_count(v: &str) -> Result<u32, String> {
    v.parse::<u32>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => {
            format!("GPU count {v} is out of range (at most {})", u32::MAX)
        }
        _ => format!("GPU count {v:?} is not a whole number"),
    })
}

/// True when `gpu_type`, the type of a `gres/gpu:TYPE` entry or a `gpu:TYPE:N` GRES item,
/// names a MIG profile: `<n>g.<m>gb` anywhere in it, case-insensitively (`1g.10gb`,
/// `3g.40gb`, `nvidia_a100_1g.5gb`, `1g.10gb+me`). Slurm names MIG slices by their profile
/// (gres.conf(5) `Type`, and AutoDetect=nvml's names; Slurm gres.shtml "MIG Support"). Such a
/// GRES is a slice of a GPU, not a whole GPU, so a count of them says nothing about how many of
/// the node's GPUs the job holds.
pub fn is_mig_profile(gpu_type: &str) -> bool {
    let t = gpu_type.to_ascii_lowercase();
    let b = t.as_bytes();
    // Each "g." preceded by a digit and followed by digits and "gb".
    t.match_indices("g.").any(|(i, _)| {
        let digits_after = b[i + 2..].iter().take_while(|c| c.is_ascii_digit()).count();
        i > 0 && b[i - 1].is_ascii_digit() && digits_after > 0 && t[i + 2 + digits_after..].starts_with("gb")
    })
}

/// Parses a TRES string. A leading `TRES=` (scontrol) is accepted. Empty text is no TRES.
/// Errors: an entry without `=`, a GPU count that is not a whole number or is above
/// `u32::MAX` (said as out of range), or a key repeated
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
            let n = gpu_count(v).map_err(|p| err(&p))?;
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
    fn mig_profiles_are_told_from_gpu_models() {
        for t in [
            "1g.10gb",
            "3g.40gb",
            "7g.80gb",
            "1g.5gb+me",
            "nvidia_a100_1g.5gb",
            "A100_2G.20GB",
            "1g.12gb",
        ] {
            assert!(is_mig_profile(t), "{t}");
        }
        for t in [
            "a100",
            "h100_80gb",
            "rtx2080",
            "g.10gb",
            "1g.gb",
            "1g.10",
            "gb",
            "",
            "tesla_v100-sxm2-16gb",
        ] {
            assert!(!is_mig_profile(t), "{t}");
        }
        assert!(parse("gres/gpu=1,gres/gpu:1g.10gb=1").unwrap().mig_slices());
        assert!(!parse("gres/gpu=1,gres/gpu:1g.10gb=0,gres/gpu:a100=1").unwrap().mig_slices());
        assert!(!parse("gres/gpu=2,gres/gpumem=10G").unwrap().mig_slices());
    }

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
    fn a_gpu_count_out_of_range_says_so_and_names_the_value() {
        let e = parse("cpu=1,gres/gpu=99999999999").unwrap_err();
        assert_eq!(e.entry, "gres/gpu=99999999999");
        assert!(
            e.problem.contains("99999999999") && e.problem.contains("out of range") && !e.problem.contains("not a whole number"),
            "{e}"
        );
        let e = parse("gres/gpu:a100=4294967296").unwrap_err();
        assert!(e.problem.contains("out of range") && e.problem.contains("4294967295"), "{e}");
        assert_eq!(parse("gres/gpu=4294967295").unwrap().gpus, u32::MAX);
        for bad in ["gres/gpu=-1", "gres/gpu=2.5", "gres/gpu=", "gres/gpu=4x"] {
            let e = parse(bad).unwrap_err();
            assert!(e.problem.contains("not a whole number"), "{bad}: {e}");
        }
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
