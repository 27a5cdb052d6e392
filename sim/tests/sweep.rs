//! End-to-end sweep tests: determinism across thread counts, shards and merge, bad input.

use clap::Parser;
use sim::cli::{Cli, Command};
use sim::sweep::{self, SweepSpec};

fn small_spec() -> SweepSpec {
    let cli = Cli::try_parse_from([
        "sim",
        "sweep",
        "--days",
        "0.2",
        "--seeds",
        "2",
        "--window",
        "10m,20m",
        "--cancel-after",
        "1h",
        "--spin-ceiling",
        "cancel",
    ])
    .unwrap();
    let Command::Sweep(args) = cli.command else { panic!("not sweep") };
    args.spec().unwrap()
}

fn csv_with_threads(spec: &SweepSpec, threads: usize, dir: &std::path::Path) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let result = pool.install(|| sweep::run(spec, &|| {})).unwrap();
    let path = dir.join(format!("sweep-{threads}.csv"));
    sweep::write_csv(&path, &result.rows).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn same_seeds_and_config_give_byte_identical_csv_with_1_and_2_threads() {
    let spec = small_spec();
    assert_eq!(spec.workloads.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let one = csv_with_threads(&spec, 1, dir.path());
    let two = csv_with_threads(&spec, 2, dir.path());
    assert!(one == two, "sweep.csv differs between --threads 1 and --threads 2");
    let text = String::from_utf8(one).unwrap();
    // 2 configs + 4 baselines, each on 2 workloads × 2 seeds, plus the header.
    assert_eq!(text.lines().count(), 1 + 6 * 4);
    assert!(text.starts_with(
        "policy,config_id,workload,seed,util_threshold_pct,window_s,warmup_s,max_sample_gap_s,drain_after_s,cancel_after_s,jobs,wasted_gpu_h,recovered_gpu_h,recovered_share,oracle_recovered_gpu_h,false_cancels,false_cancel_lost_gpu_h,false_drains,drained_gpu_h,true_alerts,false_alerts,alert_latency_p50_s,alert_latency_p95_s,cancel_latency_p50_s,cancel_latency_p95_s,"
    ));
    // The columns added since end the header, in the order reports/README.md documents them.
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with(",recovered_gpu_h_unknown,recovered_single_node_gpu_h,drains_single_node,false_drains_single_node"),
        "{}",
        text.lines().next().unwrap()
    );
    for p in ["gpu-reaper", "jds", "reaper-v0.1", "naive-mean", "oracle"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{p},"))), "no {p} row");
    }
}

#[test]
fn shards_merge_into_the_unsharded_result() {
    let spec = small_spec();
    let whole = sweep::run(&spec, &|| {}).unwrap().rows;
    let mut parts = Vec::new();
    for i in 0..3 {
        let s = SweepSpec {
            shard: Some((i, 3)),
            ..spec.clone()
        };
        parts.push(sweep::run(&s, &|| {}).unwrap().rows);
    }
    assert!(parts.iter().all(|p| !p.is_empty()));
    let merged = sweep::merge_rows(parts.clone()).unwrap();
    assert_eq!(merged, whole);
    // The same shard twice is refused.
    let dup = vec![parts[0].clone(), parts[0].clone()];
    let e = sweep::merge_rows(dup).unwrap_err().to_string();
    assert!(e.contains("duplicate row"), "{e}");
}

fn spec_error(args: &[&str]) -> String {
    let mut v = vec!["sim", "sweep"];
    v.extend_from_slice(args);
    let cli = Cli::try_parse_from(v).unwrap();
    let Command::Sweep(a) = cli.command else { panic!("not sweep") };
    format!("{:#}", a.spec().unwrap_err())
}

#[test]
fn zero_seeds_and_empty_grids_are_errors_not_empty_reports() {
    assert!(spec_error(&["--seeds", "0"]).contains("seed"));
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("empty.toml");
    std::fs::write(&g, "# no [[sweep]] blocks\n").unwrap();
    let e = spec_error(&["--grid", g.to_str().unwrap()]);
    assert!(e.contains("empty.toml") && e.contains("no configurations"), "{e}");
    std::fs::write(&g, "[[sweep]]\nutil_threshold_pct = []\n").unwrap();
    let e = spec_error(&["--grid", g.to_str().unwrap()]);
    assert!(e.contains("sweep[0].util_threshold_pct"), "{e}");
    assert!(spec_error(&["--shard", "3/2"]).contains("3/2"));
    assert!(spec_error(&["--days", "0"]).contains("days"));
    // Four worlds of 512 GPUs over 366 days: about 24 GiB held at once.
    let e = spec_error(&["--days", "366"]);
    assert!(
        e.contains("sim sweep: 4 world(s)") && e.contains("8 GiB") && e.contains("use at most 121 days"),
        "{e}"
    );
    // One of them fits.
    let cli = Cli::try_parse_from(["sim", "sweep", "--days", "366", "--seeds", "1", "--workload", "default"]).unwrap();
    let Command::Sweep(args) = cli.command else { panic!("not sweep") };
    args.spec().unwrap();
}

#[test]
fn a_malformed_workload_file_names_the_file_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mine.toml");
    std::fs::write(&p, sim::workload::DEFAULT_TOML.replacen("mig_nodes = 2", "mig_nodes = 500", 1)).unwrap();
    let e = spec_error(&["--workload", p.to_str().unwrap()]);
    assert!(
        e.contains("mine.toml") && e.contains("faults.mig_nodes") && e.contains("500"),
        "{e}"
    );
    std::fs::write(
        &p,
        sim::workload::DEFAULT_TOML.replacen("power_limit_w = 400", "power_limit_w = \"lots\"", 1),
    )
    .unwrap();
    let e = spec_error(&["--workload", p.to_str().unwrap()]);
    assert!(e.contains("mine.toml") && e.contains("power_limit_w") && e.contains("lots"), "{e}");
    let e = spec_error(&["--workload", "/nonexistent/w.toml"]);
    assert!(e.contains("/nonexistent/w.toml"), "{e}");
}

#[test]
fn reports_are_written_from_rows() {
    let spec = small_spec();
    let rows = sweep::run(&spec, &|| {}).unwrap().rows;
    let dir = tempfile::tempdir().unwrap();
    sim::cli::write_reports(dir.path(), &rows, &[]).unwrap();
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(summary.contains("## Recommended configuration"));
    for p in ["jds", "reaper-v0.1", "naive-mean", "oracle"] {
        assert!(summary.contains(&format!("| {p} |")), "summary lacks {p}");
    }
    let svg = std::fs::read_to_string(dir.path().join("frontier.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Pareto front"));
    let back = sweep::read_csv(&dir.path().join("sweep.csv")).unwrap();
    assert_eq!(back, rows);
}

#[test]
fn spin_ceiling_help_and_error_list_what_is_accepted() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let help = cmd.find_subcommand_mut("sweep").unwrap().render_help().to_string();
    let line = help.lines().skip_while(|l| !l.contains("--spin-ceiling")).nth(1).unwrap_or("");
    let listed = "watching, alert, drain, cancel";
    assert!(help.contains(&format!("spin ceilings ({listed})")), "{line}\n{help}");
    let e = spec_error(&["--spin-ceiling", "explode"]);
    assert!(e.contains(listed), "{e}");
    // Every value listed is accepted.
    for v in listed.split(", ") {
        let cli = Cli::try_parse_from(["sim", "sweep", "--spin-ceiling", v]).unwrap();
        let Command::Sweep(a) = cli.command else { panic!("not sweep") };
        a.spec().unwrap_or_else(|e| panic!("--spin-ceiling {v}: {e:#}"));
    }
}

#[test]
fn negative_numbers_reach_the_range_check() {
    let e = spec_error(&["--days", "-1"]);
    assert!(e.contains("--days -1: must be above 0 and at most 366"), "{e}");
    let e = spec_error(&["--util-threshold-pct", "-5"]);
    assert!(e.contains("util_threshold_pct") && e.contains("-5"), "{e}");
    for args in [
        [
            "sim",
            "generate",
            "--workload",
            "default",
            "--seed",
            "1",
            "--days",
            "-1",
            "--out",
            "o",
        ],
        [
            "sim",
            "calibrate",
            "--days",
            "-1",
            "--seed",
            "1",
            "--svg",
            "c.svg",
            "--workload",
            "default",
        ],
    ] {
        let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let e = match cli.command {
            Command::Generate(a) => sim::cli::generate::run(a).unwrap_err(),
            Command::Calibrate(a) => sim::cli::calibrate::run(a).unwrap_err(),
            _ => unreachable!(),
        };
        assert!(format!("{e:#}").contains("--days -1: must be above 0"), "{e:#}");
    }
}

#[test]
fn read_csv_names_the_line_column_and_value_of_a_count_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.csv");
    let row = sim::score::Row {
        policy: "gpu-reaper".into(),
        config_id: "c000".into(),
        workload: "default".into(),
        seed: 1,
        days: 1.0,
        jobs: 3,
        ..Default::default()
    };
    sweep::write_csv(&path, &[row.clone(), row]).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "false_cancels").unwrap();
    // Make the second row's false_cancels negative.
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut cells: Vec<String> = lines[2].split(',').map(String::from).collect();
    cells[col] = "-1".into();
    lines[2] = cells.join(",");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let e = format!("{:#}", sweep::read_csv(&path).unwrap_err());
    assert!(e.contains("sweep.csv: line 3, column false_cancels = \"-1\""), "{e}");
}
