//! The figures README.md's "What the default run recommends" gives for the configurations it
//! names must be the committed `reports/sweep.csv`'s (operator trial 14: the section left out
//! c041's extra drained GPU-hours over c037 and the false alerts of c098/c099, which are only
//! in `sweep.csv`; figures typed by hand drift from the reports they quote).
//!
//! Each figure is a column summed over the configuration's rows (both workloads × seeds 1 and
//! 2), rounded to a whole number and written with thousands separators, as the README writes
//! them. `.ci/run` checks that `reports/sweep.csv` is what the code produces; this checks that
//! the README says what `reports/sweep.csv` says.

use std::collections::BTreeMap;

/// (config id, column) → the column summed over that configuration's rows, per workload
/// (`None`: every workload).
fn sums() -> BTreeMap<(String, String, Option<String>), f64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../reports/sweep.csv");
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (policy, config, workload) = (col("policy"), col("config_id"), col("workload"));
    let mut out = BTreeMap::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        if &rec[policy] != "gpu-reaper" {
            continue;
        }
        for (i, name) in header.iter().enumerate() {
            let Ok(v) = rec[i].parse::<f64>() else { continue };
            for w in [None, Some(rec[workload].to_string())] {
                *out.entry((rec[config].to_string(), name.to_string(), w)).or_insert(0.0) += v;
            }
        }
    }
    out
}

/// A whole number with thousands separators, as the README writes GPU-hours and counts.
fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.abs().to_string();
    let mut s = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            s.push(',');
        }
        s.push(c);
    }
    if n < 0 {
        format!("-{s}")
    } else {
        s
    }
}

/// README.md's section "What the default run recommends", up to the next heading.
fn section() -> String {
    let readme = include_str!("../../README.md");
    let start = readme.find("### What the default run recommends").expect("the section exists");
    let rest = &readme[start + 4..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    // One line, so a figure's words may wrap anywhere.
    rest[..end].split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn thousands_writes_as_the_readme_does() {
    assert_eq!(thousands(4378.517), "4,379");
    assert_eq!(thousands(999.4), "999");
    assert_eq!(thousands(1_000_000.0), "1,000,000");
    assert_eq!(thousands(16933.8), "16,934");
}

#[test]
fn the_recommendation_section_quotes_sweep_csv() {
    let s = sums();
    let all = |c: &str, col: &str| s[&(c.to_string(), col.to_string(), None)];
    let of = |c: &str, col: &str, w: &str| s[&(c.to_string(), col.to_string(), Some(w.to_string()))];
    let text = section();
    let has = |phrase: String| assert!(text.contains(&phrase), "README's recommendation section lacks {phrase:?}:\n{text}");

    // The recommended, deployed and margin configurations: recovered GPU-hours, drains.
    for c in ["c039", "c037", "c041"] {
        assert!(text.contains(&thousands(all(c, "recovered_gpu_h"))), "{c} recovered_gpu_h");
        assert!(text.contains(&thousands(all(c, "recovered_single_node_gpu_h"))), "{c} single-node");
    }
    has(format!("{} false alerts", thousands(all("c037", "false_alerts"))));
    has(format!("{} drained GPU-hours", thousands(all("c037", "drained_gpu_h"))));

    // c041 over c037: drained GPU-hours, their difference and ratio, and where it comes from.
    let (d41, d37) = (all("c041", "drained_gpu_h"), all("c037", "drained_gpu_h"));
    let pct = ((d41 / d37 - 1.0) * 100.0).round();
    has(format!(
        "{pct} % more drained GPU-hours than c037: {} against {}",
        thousands(d41),
        thousands(d37)
    ));
    has(format!("(+{})", thousands(d41 - d37)));
    has(format!(
        "default workload ({} against {})",
        thousands(of("c041", "drained_gpu_h", "default")),
        thousands(of("c037", "drained_gpu_h", "default"))
    ));
    let traps = of("c037", "drained_gpu_h", "traps");
    assert_eq!(
        traps,
        of("c041", "drained_gpu_h", "traps"),
        "the README says both withhold the same on traps"
    );
    has(format!("on the trap workload both withhold {}", thousands(traps)));

    // c098 and c099: no false drains, and the false alerts they make instead.
    for c in ["c098", "c099"] {
        assert_eq!(all(c, "false_drains"), 0.0, "{c}: the README says 0 false drains");
        assert!(text.contains(&thousands(all(c, "recovered_single_node_gpu_h"))), "{c} single-node");
    }
    let (a98, a99, a37) = (
        all("c098", "false_alerts"),
        all("c099", "false_alerts"),
        all("c037", "false_alerts"),
    );
    has(format!(
        "c098 makes {} and c099 {}, against c037's {}",
        thousands(a98),
        thousands(a99),
        thousands(a37)
    ));
    has(format!("({:.1} and {:.1} times;", a98 / a37, a99 / a37));
    has(format!(
        "{} and {} of them on the trap workload",
        thousands(of("c098", "false_alerts", "traps")),
        thousands(of("c099", "false_alerts", "traps"))
    ));
}
