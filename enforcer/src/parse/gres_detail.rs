//! Per-node GRES detail strings: squeue JSON's `gres_detail` (one string per node of the job,
//! in node order) and the `GRES=` of each `Nodes=` line of `scontrol -d show job`.
//!
//! Forms (see `../shared/samples/scontrol-show-job-d-gres.txt`): `gpu:2(IDX:0-1)`,
//! `gpu(IDX:0-7)`, `gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)`, `gpu:rtx2080:1(IDX:1),gg:g0(CNT:1)`.
//! Slurm 22.05.8's `squeue --json` (openapi/v0.0.38) gives `"gres_detail": ["gpu:2(IDX:0-1)"]`
//! for a job submitted with `--gres=gpu:2` (checked on a loopback cluster).
//!
//! Why the enforcer reads it: squeue's TRES strings carry `gres/gpu` only when the cluster
//! lists `gres/gpu` in `AccountingStorageTRES`, and Slurm refuses that setting without
//! slurmdbd (22.05.8's slurmctld exits with "slurmdbd is required to run with TRES gres/gpu").
//! On such a cluster every job shows no GPUs in its TRES, and the GPU count must come from here.

use serde::Serialize;

/// Why a GRES detail string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("GRES detail {text:?}: {problem}")]
pub struct GresDetailError {
    /// The rejected input.
    pub text: String,
    /// What is wrong, naming the offending item.
    pub problem: String,
}

/// Whole GPUs one node's GRES detail string allocates: the number of GPU indices in each
/// `gpu…(IDX:…)` item (the index list is the allocation itself, so it wins over the count
/// printed before it), the count of a `gpu…(CNT:N)` item (GPUs without device files), or the
/// printed count of a `gpu[:type]:N` item without either.
/// Items of other GRES (`gg:g0(CNT:1)`, `shard…`, `mps…`) are not GPUs and are skipped. Empty
/// text (or `(null)`, `N/A`) is no GPU.
///
/// Errors: a GPU item with no index list and no count, an index list that is not
/// `N`, `N-M` (M ≥ N) items separated by commas, unbalanced parentheses.
pub fn gpu_count(text: &str) -> Result<u32, GresDetailError> {
    let err = |problem: String| GresDetailError {
        text: text.to_string(),
        problem,
    };
    let t = text.trim();
    if t.is_empty() || t == "(null)" || t == "N/A" {
        return Ok(0);
    }
    let mut total = 0u32;
    for item in split_top_level(t).map_err(|p| err(p.to_string()))? {
        let (head, detail) = match item.find('(') {
            Some(open) => {
                let Some(inner) = item[open + 1..].strip_suffix(')') else {
                    return Err(err(format!("item {item:?} does not end with ')'")));
                };
                (&item[..open], Some(inner))
            }
            None => (item, None),
        };
        let mut parts = head.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let printed: Option<u32> = head.split(':').skip(1).last().and_then(|c| c.parse().ok());
        let n = match detail {
            Some(d) => match (d.strip_prefix("IDX:"), d.strip_prefix("CNT:")) {
                (Some(list), _) => index_count(list).map_err(|p| err(format!("item {item:?}: {p}")))?,
                // GPUs configured without device files (no `File=` in gres.conf) have no
                // index; Slurm prints their count (src/common/gres.c).
                (None, Some(count)) => count
                    .parse()
                    .map_err(|_| err(format!("item {item:?}: count {count:?} is not a whole number")))?,
                _ => return Err(err(format!("item {item:?} has neither an IDX list nor a CNT count"))),
            },
            None => printed.ok_or_else(|| err(format!("item {item:?} gives no GPU count")))?,
        };
        total = total.checked_add(n).ok_or_else(|| err("GPU count overflows".to_string()))?;
    }
    Ok(total)
}

/// Splits on commas outside parentheses.
fn split_top_level(t: &str) -> Result<Vec<&str>, &'static str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0u32, 0usize);
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("')' without '('")?,
            ',' if depth == 0 => {
                items.push(&t[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("'(' without ')'");
    }
    items.push(&t[start..]);
    if items.iter().any(|s| s.trim().is_empty()) {
        return Err("empty item");
    }
    Ok(items)
}

/// The number of indices in `0,2-3,5`.
fn index_count(list: &str) -> Result<u32, String> {
    let mut n = 0u32;
    for part in list.split(',') {
        let bad = || format!("index list {list:?} is not N or N-M items separated by commas");
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().map_err(|_| bad())?, b.parse::<u32>().map_err(|_| bad())?),
            None => {
                let a = part.parse::<u32>().map_err(|_| bad())?;
                (a, a)
            }
        };
        if hi < lo {
            return Err(format!("index range {part:?} runs backwards"));
        }
        n = (hi - lo).checked_add(1).and_then(|k| n.checked_add(k)).ok_or_else(bad)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_index_list_of_every_gpu_item() {
        assert_eq!(gpu_count("gpu:2(IDX:0-1)").unwrap(), 2);
        assert_eq!(gpu_count("gpu(IDX:0-7)").unwrap(), 8);
        assert_eq!(gpu_count("gpu(IDX:0,2-3,5)").unwrap(), 4);
        assert_eq!(gpu_count("gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)").unwrap(), 3);
        assert_eq!(gpu_count("gpu:rtx2080:1(IDX:1),gg:g0(CNT:1)").unwrap(), 1);
        assert_eq!(gpu_count("gpu:h200:2(IDX:0-1)").unwrap(), 2);
        // A numeric type name is not read as a count when the index list is there.
        assert_eq!(gpu_count("gpu:1080:1(IDX:3)").unwrap(), 1);
        assert_eq!(gpu_count("gpu:4").unwrap(), 4);
        assert_eq!(gpu_count("gpu(CNT:3)").unwrap(), 3);
        assert_eq!(gpu_count("gpu:a100(CNT:2),gg:g0(CNT:1)").unwrap(), 2);
        assert_eq!(gpu_count("gpu:a100:4").unwrap(), 4);
    }

    #[test]
    fn no_gres_is_no_gpu_and_other_gres_are_not_gpus() {
        for t in ["", "  ", "(null)", "N/A", "gg:g0(CNT:1)", "mps:100(100/100)", "gpumem:10G"] {
            assert_eq!(gpu_count(t).unwrap(), 0, "{t:?}");
        }
    }

    #[test]
    fn what_cannot_be_read_is_an_error_naming_it() {
        for (t, says) in [
            ("gpu", "no GPU count"),
            ("gpu(IDX:N/A)", "index list"),
            ("gpu(IDX:3-1)", "backwards"),
            ("gpu(MAX:2)", "neither an IDX list nor a CNT count"),
            ("gpu(CNT:two)", "not a whole number"),
            ("gpu:2(IDX:0-1", "'(' without ')'"),
            ("gpu:2(IDX:0-1))", "')' without '('"),
            ("gpu:2(IDX:0-1),,gpu:1(IDX:2)", "empty item"),
            ("gpu:2(IDX:0-1)x", "does not end with ')'"),
        ] {
            let e = gpu_count(t).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(&format!("{t:?}")), "{t:?}: {e}");
        }
    }
}
