//! Slurm hostlist expressions (`gpu[001-004,007]`, `rack[0-63]_blade[0-41]`), as printed in
//! squeue's NodeList, `scontrol show job`'s `NodeList=` and squeue JSON's `nodes`.
//!
//! Syntax (slurm.conf(5) "NodeName", `scontrol show hostnames`): a comma-separated list of
//! expressions; an expression is text with zero or more `[...]` groups, each group a
//! comma-separated list of numbers or `lo-hi` ranges. Leading zeros fix the width. Several
//! groups expand as a cartesian product, leftmost group outermost; order is kept as written.
//! `""`, `(null)`, `None assigned` and `N/A` (what Slurm prints for an unset text field; no
//! node name contains `/`) mean no nodes.

use serde::Serialize;

/// Most names one expression may expand to; more is treated as malformed input rather than
/// allocating without bound.
pub const MAX_HOSTS: usize = 1 << 20;

/// Why a hostlist was rejected. `text` is the whole input, `at` a byte offset into it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("hostlist {text:?}: {problem} at byte {at}")]
pub struct HostlistError {
    /// The rejected input.
    pub text: String,
    /// Byte offset of the problem.
    pub at: usize,
    /// What is wrong.
    pub problem: String,
}

/// Expands a hostlist into node names, in order. Errors name the offending byte offset.
pub fn parse(text: &str) -> Result<Vec<String>, HostlistError> {
    let t = text.trim();
    if t.is_empty() || t == "(null)" || t == "None assigned" || t == "N/A" {
        return Ok(Vec::new());
    }
    let err = |at: usize, p: &str| HostlistError {
        text: text.to_string(),
        at,
        problem: p.to_string(),
    };
    let mut out = Vec::new();
    let bytes = t.as_bytes();
    let mut depth = 0;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => {
                if depth > 0 {
                    return Err(err(i, "nested '['"));
                }
                depth = 1;
            }
            b']' => {
                if depth == 0 {
                    return Err(err(i, "']' without '['"));
                }
                depth = 0;
            }
            b',' if depth == 0 => {
                expand(&t[start..i], start, &mut out, &err)?;
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(err(t.len(), "unclosed '['"));
    }
    expand(&t[start..], start, &mut out, &err)?;
    Ok(out)
}

enum Part {
    Text(String),
    Group(Vec<String>),
}

fn expand(expr: &str, base: usize, out: &mut Vec<String>, err: &dyn Fn(usize, &str) -> HostlistError) -> Result<(), HostlistError> {
    if expr.is_empty() {
        return Err(err(base, "empty host name"));
    }
    if expr.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err(base, "whitespace or control character in host name"));
    }
    let mut parts = Vec::new();
    let mut rest = expr;
    let mut off = base;
    while let Some(open) = rest.find('[') {
        if open > 0 {
            parts.push(Part::Text(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find(']')
            .map(|c| c + open)
            .ok_or_else(|| err(off + open, "unclosed '['"))?;
        parts.push(Part::Group(group(&rest[open + 1..close], off + open + 1, err)?));
        off += close + 1;
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_string()));
    }
    let mut names = vec![String::new()];
    for p in &parts {
        match p {
            Part::Text(t) => names.iter_mut().for_each(|n| n.push_str(t)),
            Part::Group(g) => {
                if names.len().saturating_mul(g.len()).saturating_add(out.len()) > MAX_HOSTS {
                    return Err(err(base, "expands to too many names"));
                }
                names = names.iter().flat_map(|n| g.iter().map(move |x| format!("{n}{x}"))).collect();
            }
        }
    }
    if names.len() + out.len() > MAX_HOSTS {
        return Err(err(base, "expands to too many names"));
    }
    out.extend(names);
    Ok(())
}

fn group(body: &str, at: usize, err: &dyn Fn(usize, &str) -> HostlistError) -> Result<Vec<String>, HostlistError> {
    if body.is_empty() {
        return Err(err(at, "empty '[]'"));
    }
    let mut v = Vec::new();
    let mut off = at;
    for item in body.split(',') {
        if item.is_empty() {
            return Err(err(off, "empty range in '[...]'"));
        }
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a, b),
            None => (item, item),
        };
        let digits = |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(err(off, "a range is N or N-M with decimal digits"));
        }
        let width = lo.len();
        let (a, b): (u64, u64) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
        if b < a {
            return Err(err(off, "range end is below its start"));
        }
        if (b - a) as usize >= MAX_HOSTS || v.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(err(off, "range expands to too many names"));
        }
        for n in a..=b {
            v.push(format!("{n:0width$}"));
        }
        off += item.len() + 1;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_groups_in_order() {
        assert_eq!(parse("gpu[001-002],node5").unwrap(), vec!["gpu001", "gpu002", "node5"]);
        assert_eq!(parse("lx[32-33,15]").unwrap(), vec!["lx32", "lx33", "lx15"]);
        assert_eq!(parse("a[1-2]b[3-4]").unwrap(), vec!["a1b3", "a1b4", "a2b3", "a2b4"]);
    }

    #[test]
    fn the_empty_forms_are_no_nodes() {
        for empty in ["", "  ", "(null)", "None assigned", "N/A", " N/A "] {
            assert_eq!(parse(empty).unwrap(), Vec::<String>::new(), "{empty:?}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "node[01",
            "node01]",
            "node[[01]]",
            "node[]",
            "node[01,]",
            "node[,01]",
            "n[2-1]",
            "n[a-b]",
            "a,,b",
            "n[1-99999999999]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
