//! trial16 (operator trial): `sim sweep`'s terminal table named c039 as the recommendation
//! while README.md says deploy c037. Both come from the committed reports: c039 is what
//! `summary.md`'s rule picks (most GPU-hours with zero false cancels; c097 ties it on every
//! metric the rule reads and the lower id wins), and c037 is its twin with the spin ceiling at
//! `alert`, which `summary.md` names "To deploy" (the simulator lacks long healthy spins). The
//! table showed only the first. Expected: the terminal names the same configurations as
//! `summary.md`, the one to deploy included.

use std::path::Path;

/// The config id in `text` right after `marker` (up to the next `*`, `,`, `;` or space).
fn id_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let end = rest.find(|c: char| c == '*' || c == ',' || c == ';' || c.is_whitespace())?;
    Some(&rest[..end])
}

#[test]
fn the_terminal_table_names_the_configurations_summary_md_recommends() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let rows = sim::sweep::read_csv(&root.join("reports/sweep.csv")).unwrap();
    let summary = std::fs::read_to_string(root.join("reports/summary.md")).unwrap();
    let section = &summary[summary.find("## Recommended configuration\n").expect("summary.md recommends")..];
    let recommended = id_after(section, "\n**").expect("summary.md names the recommended configuration");
    let deploy = id_after(section, "**To deploy: ").expect("summary.md names the configuration to deploy");
    // The default sweep's workloads, as `sim sweep` passes them (the trap check of the rule).
    let table = sim::report::short_table(&rows, &[sim::Workload::builtin_default(), sim::Workload::builtin_traps()]);
    assert_eq!(
        id_after(&table, "recommended by the rule: "),
        Some(recommended),
        "summary.md recommends {recommended} by its rule; the terminal says:\n{table}"
    );
    assert_eq!(
        id_after(&table, "to deploy: "),
        Some(deploy),
        "summary.md says to deploy {deploy}; the terminal says:\n{table}"
    );
    // The one to deploy has its own row in the table, next to the rule's choice.
    for id in [recommended, deploy] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("gpu-reaper") && l.split_whitespace().nth(1) == Some(id)),
            "no row for {id}:\n{table}"
        );
    }
    // And the README says to deploy the same one.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert_eq!(id_after(&readme, "**What you deploy: "), Some(deploy), "README.md");
}
