//! End-to-end runs of the `sim` binary for the guards against silent wrong results: shards of
//! different sweeps, duplicates, incomplete shard sets, repeated seeds and workloads, the
//! timing line, and error text that names the file and says the OS error once.

use std::path::Path;
use std::process::Command;

/// Runs `sim` in `dir`; returns (success, stdout, stderr).
fn sim(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (good, stdout, stderr) = sim(dir, args);
    assert!(good, "sim {args:?} failed: {stderr}");
    stdout
}

fn fails(dir: &Path, args: &[&str]) -> String {
    let (good, stdout, stderr) = sim(dir, args);
    assert!(!good, "sim {args:?} succeeded: {stdout}");
    stderr
}

/// `sim sweep` on one seed and 0.05 days, then `extra`.
fn small_sweep<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["sweep", "--quiet", "--seeds", "1", "--days", "0.05"];
    v.extend_from_slice(extra);
    v
}

fn shard(dir: &Path, pcts: &str, days: &str, shard: &str, out: &str) {
    ok(
        dir,
        &[
            "sweep",
            "--quiet",
            "--seeds",
            "1",
            "--days",
            days,
            "--util-threshold-pct",
            pcts,
            "--shard",
            shard,
            "--out",
            out,
        ],
    );
}

#[test]
fn merge_refuses_shards_of_other_sweeps_duplicates_and_missing_shards() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    shard(d, "5,15", "0.05", "0/2", "sh0");
    shard(d, "5,15", "0.05", "1/2", "sh1");
    shard(d, "30,50", "0.05", "1/2", "sh1c");
    shard(d, "5,15", "0.1", "1/2", "sh1d");
    let e = fails(d, &["merge", "sh0", "sh1c", "--out", "m"]);
    assert!(e.contains("sh1c") && e.contains("grid_fingerprint"), "{e}");
    let e = fails(d, &["merge", "sh0", "sh1d", "--out", "m"]);
    assert!(e.contains("sh1d") && e.contains("days"), "{e}");
    let e = fails(d, &["merge", "sh0", "--out", "m"]);
    assert!(e.contains("missing --shard 1/2"), "{e}");
    let e = fails(d, &["merge", "sh0", "sh1", "sh0", "--out", "m"]);
    assert!(e.contains("sh0") && e.contains("both shard 0/2"), "{e}");
    assert!(!d.join("m").exists(), "a refused merge wrote reports");
    // A shard folder without its manifest is refused, naming the folder.
    std::fs::create_dir(d.join("bare")).unwrap();
    std::fs::copy(d.join("sh1/sweep.csv"), d.join("bare/sweep.csv")).unwrap();
    let e = fails(d, &["merge", "sh0", "bare", "--out", "m"]);
    assert!(e.contains("bare") && e.contains("shard.toml"), "{e}");
    // A complete set, given as a folder and as a file, equals the unsharded run byte for byte.
    ok(d, &["merge", "sh1/sweep.csv", "sh0", "--out", "m"]);
    ok(d, &small_sweep(&["--util-threshold-pct", "5,15", "--out", "whole"]));
    assert_eq!(
        std::fs::read(d.join("m/sweep.csv")).unwrap(),
        std::fs::read(d.join("whole/sweep.csv")).unwrap()
    );
}

#[test]
fn repeated_seeds_or_workloads_are_errors_naming_the_value() {
    let d = tempfile::tempdir().unwrap();
    let base = ["sweep", "--quiet", "--days", "0.05", "--util-threshold-pct", "5", "--out", "o"];
    let mut a = base.to_vec();
    a.extend(["--seed-list", "3,7,3"]);
    let e = fails(d.path(), &a);
    assert!(e.contains("seed 3 ") && e.contains("more than once"), "{e}");
    let mut a = base.to_vec();
    a.extend([
        "--seeds",
        "1",
        "--workload",
        "traps",
        "--workload",
        "default",
        "--workload",
        "traps",
    ]);
    let e = fails(d.path(), &a);
    assert!(e.contains("\"traps\"") && e.contains("more than once"), "{e}");
    assert!(!d.path().join("o").exists());
}

#[test]
fn the_timing_line_says_whether_baselines_ran() {
    let d = tempfile::tempdir().unwrap();
    let a = small_sweep(&["--util-threshold-pct", "5", "--workload", "traps", "--out", "o"]);
    let with = ok(d.path(), &a);
    assert!(with.contains("1 configs + baselines on"), "{with}");
    let mut b = a.clone();
    b.push("--no-baselines");
    let without = ok(d.path(), &b);
    let line = without.lines().find(|l| l.starts_with("timing:")).unwrap();
    assert!(line.contains("no baselines") && !line.contains("+ baselines"), "{line}");
    assert!(line.starts_with("timing: 1 runs"), "{line}");
}

#[test]
fn a_missing_file_is_named_and_its_os_error_given_once() {
    let d = tempfile::tempdir().unwrap();
    let cases: [&[&str]; 6] = [
        &["sweep", "--grid", "nonexist.toml"],
        &["sweep", "--workload", "nonexist.toml"],
        &["replay", "--trace", "nonexist"],
        &["import", "dcgm", "nonexist", "--out", "o"],
        &["import", "nvidia-smi-log", "nonexist.csv", "--node", "n1", "--out", "o"],
        &["calibrate", "--cdfs", "nonexist", "--svg", "o.svg"],
    ];
    for args in cases {
        let e = fails(d.path(), args);
        assert_eq!(e.matches("os error 2").count(), 1, "sim {args:?}: {e}");
        assert!(e.contains("nonexist"), "sim {args:?}: {e}");
    }
}
