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

/// True when a GPU item of one node's GRES detail string has a MIG profile as its type
/// (`gpu:1g.10gb:1(IDX:0)`; see [`super::tres::is_mig_profile`]). Text that cannot be split
/// into items says no.
pub fn names_mig(text: &str) -> bool {
    split_top_level(text.trim()).is_ok_and(|items| {
        items.iter().any(|item| {
            let head = item.split('(').next().unwrap_or(item);
            let mut parts = head.split(':');
            parts.next() == Some("gpu") && parts.any(super::tres::is_mig_profile)
        })
    })
}

/// What one GPU item of a GRES detail string says about its GPUs.
enum GpuItem<'a> {
    /// `gpu…(IDX:list)`: the device indices (the list's text, checked by [`index_ranges`]).
    Indices(&'a str),
    /// `gpu…(CNT:N)`: N GPUs without device files, so without indices.
    Count(u32),
    /// `gpu[:type]:N` without a parenthesis: N GPUs, indices not given.
    Printed(u32),
}

/// The GPU items of one node's GRES detail string, each with its item text for messages.
/// Items of other GRES are skipped; empty text (or `(null)`, `N/A`) has none.
fn gpu_items(text: &str) -> Result<Vec<(&str, GpuItem<'_>)>, GresDetailError> {
    let err = |problem: String| GresDetailError {
        text: text.to_string(),
        problem,
    };
    let t = text.trim();
    if t.is_empty() || t == "(null)" || t == "N/A" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
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
        if head.split(':').next() != Some("gpu") {
            continue;
        }
        let printed: Option<u32> = head.split(':').skip(1).last().and_then(|c| c.parse().ok());
        let it = match detail {
            Some(d) => match (d.strip_prefix("IDX:"), d.strip_prefix("CNT:")) {
                (Some(list), _) => {
                    // Checked here, so that every reader of the item sees the same errors.
                    let ranges = index_ranges(list).map_err(|p| err(format!("item {item:?}: {p}")))?;
                    // A count printed before the list must be the list's length: the two
                    // disagreeing is never resolved by picking one.
                    let listed: u64 = ranges.iter().map(|(lo, hi)| u64::from(hi - lo) + 1).sum();
                    if let Some(n) = printed.filter(|n| u64::from(*n) != listed) {
                        return Err(err(format!("item {item:?} gives {n} GPUs but lists {listed} indices")));
                    }
                    GpuItem::Indices(list)
                }
                // GPUs configured without device files (no `File=` in gres.conf) have no
                // index; Slurm prints their count (src/common/gres.c).
                (None, Some(count)) => GpuItem::Count(
                    count
                        .parse()
                        .map_err(|_| err(format!("item {item:?}: count {count:?} is not a whole number")))?,
                ),
                _ => return Err(err(format!("item {item:?} has neither an IDX list nor a CNT count"))),
            },
            None => GpuItem::Printed(printed.ok_or_else(|| err(format!("item {item:?} gives no GPU count")))?),
        };
        out.push((item, it));
    }
    Ok(out)
}

/// Whole GPUs one node's GRES detail string allocates: the number of GPU indices in each
/// `gpu…(IDX:…)` item (the index list is the allocation itself, so it wins over the count
/// printed before it), the count of a `gpu…(CNT:N)` item (GPUs without device files), or the
/// printed count of a `gpu[:type]:N` item without either.
/// Items of other GRES (`gg:g0(CNT:1)`, `shard…`, `mps…`) are not GPUs and are skipped. Empty
/// text (or `(null)`, `N/A`) is no GPU.
///
/// Errors: a GPU item with no index list and no count, an index list that is not
/// `N`, `N-M` (M ≥ N) items separated by commas, a count printed before an index list that
/// is not its length (`gpu:3(IDX:0-1)`), unbalanced parentheses.
pub fn gpu_count(text: &str) -> Result<u32, GresDetailError> {
    let mut total = 0u32;
    for (_, item) in gpu_items(text)? {
        let n = match item {
            GpuItem::Indices(list) => index_ranges(list).ok().and_then(|r| {
                r.iter()
                    .try_fold(0u32, |n, (lo, hi)| (hi - lo).checked_add(1).and_then(|k| n.checked_add(k)))
            }),
            GpuItem::Count(n) | GpuItem::Printed(n) => Some(n),
        };
        total = n.and_then(|n| total.checked_add(n)).ok_or_else(|| GresDetailError {
            text: text.to_string(),
            problem: "GPU count overflows".to_string(),
        })?;
    }
    Ok(total)
}

/// The most GPU indices [`gpu_indices`] lists for one node. No node has nearly this many
/// GPUs; a longer list is refused rather than expanded (an `IDX:0-4294967295` would otherwise
/// take 16 GiB).
pub const MAX_INDICES: usize = 4096;

/// The GPU device indices one node's GRES detail string allocates, sorted: the union of the
/// `IDX:` lists of its GPU items (typed and untyped alike: `gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)`
/// gives `[0, 1, 2]`). Items of other GRES are skipped; empty text (or `(null)`, `N/A`) is
/// `Some([])`, no GPU.
///
/// Slurm's index is the GPU's position among the node's GPU device files in gres.conf
/// order, which for NVIDIA GPUs is the device's minor number (`/dev/nvidia<minor>`), not
/// necessarily nvidia-smi's `index` (see [`crate::attribution`]).
///
/// `Ok(None)` when a GPU item gives no indices: a `CNT:` count (GPUs without device files) or
/// a bare printed count. Errors: everything [`gpu_count`] rejects, an index given twice (two
/// items or two ranges naming one GPU), and more than [`MAX_INDICES`] indices.
pub fn gpu_indices(text: &str) -> Result<Option<Vec<u32>>, GresDetailError> {
    let err = |problem: String| GresDetailError {
        text: text.to_string(),
        problem,
    };
    let mut out: Vec<u32> = Vec::new();
    for (item, it) in gpu_items(text)? {
        let GpuItem::Indices(list) = it else { return Ok(None) };
        for (lo, hi) in index_ranges(list).map_err(|p| err(format!("item {item:?}: {p}")))? {
            if (hi - lo) as usize >= MAX_INDICES || out.len() + (hi - lo) as usize >= MAX_INDICES {
                return Err(err(format!("more than {MAX_INDICES} GPU indices")));
            }
            out.extend(lo..=hi);
        }
    }
    let n = out.len();
    out.sort_unstable();
    out.dedup();
    if out.len() != n {
        return Err(err("a GPU index is given twice".to_string()));
    }
    Ok(Some(out))
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

/// The ranges of `0,2-3,5` as (first, last) pairs, in the order given.
fn index_ranges(list: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut out = Vec::new();
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
        out.push((lo, hi));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_mig_reads_the_type_of_gpu_items_only() {
        assert!(names_mig("gpu:1g.10gb:1(IDX:0)"));
        assert!(names_mig("gpu:a100:1(IDX:0),gpu:3g.40gb:1(IDX:1)"));
        assert!(!names_mig("gpu:a100:2(IDX:0-1)"));
        assert!(!names_mig("gpu(IDX:0-7)"));
        assert!(!names_mig("mps:1g.10gb:1"));
        assert!(!names_mig("(null)"));
    }

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

    #[test]
    fn indices_of_typed_and_untyped_gpu_items() {
        let idx = |t: &str| gpu_indices(t).unwrap();
        assert_eq!(idx("gpu:2(IDX:0-1)"), Some(vec![0, 1]));
        assert_eq!(idx("gpu(IDX:5)"), Some(vec![5]));
        assert_eq!(idx("gpu(IDX:0,2-3,5)"), Some(vec![0, 2, 3, 5]));
        assert_eq!(idx("gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)"), Some(vec![0, 1, 2]));
        // Items out of order are sorted; non-GPU GRES are ignored.
        assert_eq!(idx("gpu:v100:2(IDX:6-7),gg:g0(CNT:1),gpu:a100:1(IDX:3)"), Some(vec![3, 6, 7]));
        assert_eq!(idx("gpu:rtx2080:1(IDX:1),gg:g0(CNT:1)"), Some(vec![1]));
        // A numeric type name is a type, not a count.
        assert_eq!(idx("gpu:1080:1(IDX:3)"), Some(vec![3]));
        // No GPU at all.
        for t in ["", "(null)", "N/A", "gg:g0(CNT:1)", "mps:100(100/100)"] {
            assert_eq!(idx(t), Some(vec![]), "{t:?}");
        }
    }

    #[test]
    fn count_only_gpus_have_no_indices() {
        for t in [
            "gpu(CNT:3)",
            "gpu:4",
            "gpu:a100:4",
            "gpu:a100:1(IDX:0),gpu:v100(CNT:2)",
            "gpu:a100(CNT:2),gg:g0(CNT:1)",
        ] {
            assert_eq!(gpu_indices(t).unwrap(), None, "{t:?}");
        }
    }

    /// Second operator trial: `gpu:3(IDX:0-1)` was read as 2 GPUs and `gpu:2(IDX:0-0)` as 1.
    #[test]
    fn a_count_that_disagrees_with_its_index_list_is_an_error() {
        for text in [
            "gpu:3(IDX:0-1)",
            "gpu:2(IDX:0-0)",
            "gpu:a100:1(IDX:0-1)",
            "gpu:1(IDX:0),gpu:v100:3(IDX:1-2)",
        ] {
            let e = gpu_count(text).unwrap_err();
            assert!(e.problem.contains("lists"), "{text}: {e}");
            assert!(gpu_indices(text).is_err(), "{text}");
        }
        // Agreeing, untyped without a count, and typed without a count are read.
        assert_eq!(gpu_count("gpu:2(IDX:0-1)"), Ok(2));
        assert_eq!(gpu_count("gpu(IDX:0,2-3,5)"), Ok(4));
        assert_eq!(gpu_count("gpu:a100(IDX:3)"), Ok(1));
    }

    #[test]
    fn malformed_or_repeated_indices_are_errors_naming_the_text() {
        for (t, says) in [
            ("gpu(IDX:N/A)", "index list"),
            ("gpu(IDX:3-1)", "backwards"),
            ("gpu(IDX:)", "index list"),
            ("gpu(IDX:0-1", "'(' without ')'"),
            ("gpu(MAX:2)", "neither an IDX list"),
            ("gpu(IDX:0-2,1)", "given twice"),
            ("gpu:a100:1(IDX:0),gpu:v100:2(IDX:0-1)", "given twice"),
            ("gpu(IDX:0-100000)", "more than 4096"),
            ("gpu(IDX:0-4294967295)", "index list"),
            ("gpu(IDX:0-2047,3000-6000)", "more than 4096"),
        ] {
            let e = gpu_indices(t).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(&format!("{t:?}")), "{t:?}: {e}");
        }
        // The count reader still counts what it always counted.
        assert_eq!(gpu_count("gpu(IDX:0-2,1)").unwrap(), 4);
        assert_eq!(gpu_indices("gpu(IDX:0-4095)").unwrap().map(|v| v.len()), Some(4096));
    }
}
