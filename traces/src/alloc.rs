//! The `alloc` column of `jobs.csv`: the GPUs a job holds, per node.
//!
//! Syntax: `node:list` groups separated by `;`, where `list` is comma-separated GPU indices
//! and inclusive ranges, e.g. `node001:0-3;node002:0,2,5-7`. Indices are Slurm's (`GRES_IDX`),
//! 0–65535. A node may appear in several groups; a GPU may appear only once. The empty string
//! is an allocation with no GPUs.

use crate::{GpuRef, NodeTable};

/// Why `name` cannot be a node name in an `alloc` string (and so in a trace), or `None`: it
/// must be non-empty, without the separators `:` `;` `,`, and without whitespace or control
/// characters. Importers check names against this at import, so that `sim replay` never
/// refuses what `sim import` wrote (trial 11: `--node "node 001"`).
pub fn node_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.contains([':', ';', ',']) {
        Some("it holds a separator of the alloc format (':', ';' or ',')")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it holds a blank or a control character")
    } else {
        None
    }
}

/// Parses an `alloc` string, interning node names into `nodes`. The GPUs come back in the
/// order written. Errors name the offending group or index.
pub fn parse_alloc(text: &str, nodes: &mut NodeTable) -> Result<Vec<GpuRef>, String> {
    let mut out: Vec<GpuRef> = Vec::new();
    let text = text.trim();
    if text.is_empty() {
        return Ok(out);
    }
    for group in text.split(';') {
        let group = group.trim();
        let Some((node, list)) = group.split_once(':') else {
            return Err(format!("group {group:?} is not node:gpus"));
        };
        let node = node.trim();
        if let Some(why) = node_name_problem(node) {
            return Err(format!("bad node name {node:?} in group {group:?}: {why}"));
        }
        let id = nodes.intern(node);
        if list.trim().is_empty() {
            return Err(format!("group {group:?} lists no GPUs"));
        }
        for item in list.split(',') {
            let item = item.trim();
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (parse_index(a, group)?, parse_index(b, group)?),
                None => {
                    let i = parse_index(item, group)?;
                    (i, i)
                }
            };
            if hi < lo {
                return Err(format!("range {item:?} runs backwards in group {group:?}"));
            }
            for gpu in lo..=hi {
                let g = GpuRef { node: id, gpu };
                if out.contains(&g) {
                    return Err(format!("GPU {node}:{gpu} listed twice"));
                }
                out.push(g);
            }
        }
    }
    Ok(out)
}

fn parse_index(s: &str, group: &str) -> Result<u16, String> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| format!("GPU index {:?} in group {group:?} is not an integer 0-65535", s.trim()))
}

/// Writes an allocation in the syntax [`parse_alloc`] reads, keeping the order of `alloc`:
/// consecutive GPUs of one node become one group, ascending runs become ranges.
pub fn format_alloc(alloc: &[GpuRef], nodes: &NodeTable) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < alloc.len() {
        let node = alloc[i].node;
        if !s.is_empty() {
            s.push(';');
        }
        s.push_str(nodes.name(node));
        s.push(':');
        let mut first = true;
        while i < alloc.len() && alloc[i].node == node {
            let lo = alloc[i].gpu;
            let mut hi = lo;
            while i + 1 < alloc.len() && alloc[i + 1].node == node && hi < u16::MAX && alloc[i + 1].gpu == hi + 1 {
                hi += 1;
                i += 1;
            }
            i += 1;
            if !first {
                s.push(',');
            }
            first = false;
            if hi == lo {
                s.push_str(&lo.to_string());
            } else {
                s.push_str(&format!("{lo}-{hi}"));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_documented_example() {
        let mut nodes = NodeTable::new();
        let a = parse_alloc("node001:0-3;node002:0-3", &mut nodes).unwrap();
        assert_eq!(a.len(), 8);
        assert_eq!(nodes.name(a[0].node), "node001");
        assert_eq!(nodes.name(a[7].node), "node002");
        assert_eq!(a[7].gpu, 3);
        assert_eq!(format_alloc(&a, &nodes), "node001:0-3;node002:0-3");
    }

    #[test]
    fn lists_and_ranges_mix() {
        let mut nodes = NodeTable::new();
        let a = parse_alloc("n1:0,2,5-7", &mut nodes).unwrap();
        let g: Vec<u16> = a.iter().map(|g| g.gpu).collect();
        assert_eq!(g, vec![0, 2, 5, 6, 7]);
        assert_eq!(format_alloc(&a, &nodes), "n1:0,2,5-7");
        assert!(parse_alloc("", &mut nodes).unwrap().is_empty());
    }

    #[test]
    fn rejects_bad_allocations_with_the_offending_text() {
        let mut nodes = NodeTable::new();
        for (bad, needle) in [
            ("node001", "not node:gpus"),
            ("node001:", "lists no GPUs"),
            ("node001:a", "\"a\""),
            ("node001:3-1", "backwards"),
            ("node001:0,0", "twice"),
            (":0", "bad node name"),
            ("node001:-1", "not an integer"),
            ("node001:70000", "70000"),
        ] {
            let e = parse_alloc(bad, &mut nodes).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(groups in proptest::collection::vec((0u8..4, proptest::collection::btree_set(0u16..16, 1..6)), 0..5)) {
            let mut nodes = NodeTable::new();
            let mut alloc = Vec::new();
            for (n, set) in &groups {
                let id = nodes.intern(&format!("node{n:03}"));
                for &g in set {
                    let r = GpuRef { node: id, gpu: g };
                    if !alloc.contains(&r) { alloc.push(r); }
                }
            }
            let text = format_alloc(&alloc, &nodes);
            let mut nodes2 = nodes.clone();
            let back = parse_alloc(&text, &mut nodes2).unwrap();
            prop_assert_eq!(back, alloc);
        }
    }
}

#[cfg(test)]
mod node_name_tests {
    use super::*;

    /// Trial 11: `sim import` took `--node "node 001"`, which `sim replay` then refused. One
    /// rule serves both now.
    #[test]
    fn a_node_name_the_alloc_format_cannot_carry_is_named_with_why() {
        for bad in ["", "node 001", "a\tb", "n:1", "n;1", "n,1", "n\u{7}"] {
            assert!(node_name_problem(bad).is_some(), "{bad:?}");
            let mut nodes = NodeTable::default();
            if !bad.is_empty() && !bad.contains([':', ';']) {
                assert!(parse_alloc(&format!("{bad}:0"), &mut nodes).is_err(), "{bad:?}");
            }
        }
        for good in ["gpu001", "node[1]", "ñode", "a.b-c_d"] {
            assert_eq!(node_name_problem(good), None, "{good:?}");
            assert!(parse_alloc(&format!("{good}:0-1"), &mut NodeTable::default()).is_ok(), "{good:?}");
        }
        let o = crate::import::nvidia_smi::SmiOptions {
            node: "node 001".into(),
            zone: crate::import::Zone::parse("UTC").unwrap(),
            query: crate::import::nvidia_smi::DEFAULT_QUERY.into(),
            lenient: false,
        };
        let e = crate::import::nvidia_smi::parse("", std::path::Path::new("x.csv"), &o, &mut Default::default()).unwrap_err();
        assert!(e.to_string().contains("\"node 001\" is not a usable node name"), "{e}");
    }
}
