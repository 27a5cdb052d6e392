//! trial14 (operator trial): `sim sweep` with non-default flags and no `--out`, run from the
//! repository root, wrote its reports into `reports/`, replacing the committed default-run
//! reports (which CI checks byte for byte). Now `--out` defaults to `reports` for the default
//! run only; any other run without `--out` is refused before anything runs, naming the flags
//! that make it non-default and suggesting `--out DIR`.

use clap::Parser;
use sim::cli::{Cli, Command};
use std::path::{Path, PathBuf};

/// Runs `sim` in `dir`; returns (success, stdout, stderr).
fn sim(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .current_dir(dir)
        .args(args)
        .env_remove("RAYON_NUM_THREADS")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A folder laid out as the repository root: `reports/` holding committed reports.
fn checkout() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("reports")).unwrap();
    for f in ["sweep.csv", "summary.md", "frontier.svg"] {
        std::fs::write(d.path().join("reports").join(f), format!("committed {f}\n")).unwrap();
    }
    d
}

fn untouched(d: &Path) {
    for f in ["sweep.csv", "summary.md", "frontier.svg"] {
        let text = std::fs::read_to_string(d.join("reports").join(f)).unwrap();
        assert_eq!(text, format!("committed {f}\n"), "reports/{f} was replaced");
    }
    assert_eq!(
        std::fs::read_dir(d.join("reports")).unwrap().count(),
        3,
        "a file was added to reports/"
    );
}

#[test]
fn a_non_default_sweep_without_out_leaves_the_committed_reports_alone() {
    let d = checkout();
    let (ok, stdout, e) = sim(d.path(), &["sweep", "--quiet", "--seeds", "1", "--days", "0.05"]);
    assert!(!ok, "succeeded: {stdout}");
    untouched(d.path());
    // The message names the flags that made the run non-default, and the way out.
    assert!(e.contains("--seeds 1") && e.contains("--days 0.05"), "{e}");
    assert!(
        e.contains("default run") && e.contains("--out DIR") && e.contains("reports/"),
        "{e}"
    );
    // Refused before any work: no timing line, nothing written anywhere.
    assert_eq!(stdout, "");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);

    // Grid flags, a grid file, another workload, no baselines, a shard: each is named.
    let g = d.path().join("g.toml");
    std::fs::write(&g, "[[sweep]]\nutil_threshold_pct = [5]\n").unwrap();
    for (args, named) in [
        (
            vec!["--window", "10m", "--cancel-after", "2h"],
            "the grid flags --window --cancel-after",
        ),
        // One grid flag: singular, and the verb agrees (review 30).
        (vec!["--window", "10m"], "the grid flag --window makes this run"),
        (vec!["--grid", "g.toml"], "--grid g.toml"),
        (vec!["--workload", "traps"], "--workload traps"),
        (vec!["--no-baselines"], "--no-baselines"),
        (vec!["--shard", "0/4"], "--shard 0/4"),
    ] {
        let mut v = vec!["sweep", "--quiet"];
        v.extend_from_slice(&args);
        let (ok, stdout, e) = sim(d.path(), &v);
        assert!(!ok, "{args:?} succeeded: {stdout}");
        assert!(e.contains(named) && e.contains("--out DIR"), "{args:?}: {e}");
        untouched(d.path());
    }

    // With --out the same run writes there, and reports/ stays as committed.
    let (ok, stdout, e) = sim(d.path(), &["sweep", "--quiet", "--seeds", "1", "--days", "0.05", "--out", "mine"]);
    assert!(ok, "{e}");
    assert!(stdout.contains("reports written to mine/"), "{stdout}");
    assert!(d.path().join("mine/summary.md").is_file());
    untouched(d.path());
}

fn out_of(args: &[&str]) -> anyhow::Result<PathBuf> {
    let mut v = vec!["sim", "sweep"];
    v.extend_from_slice(args);
    let Command::Sweep(a) = Cli::try_parse_from(v).unwrap().command else {
        panic!("not sweep")
    };
    let spec = a.spec().unwrap();
    a.out_dir(&spec)
}

/// The default run, however it is spelled, still writes `reports/` (what CI and the README's
/// first command rely on); `--out` always wins.
#[test]
fn the_default_run_still_defaults_to_reports() {
    assert_eq!(out_of(&[]).unwrap(), PathBuf::from("reports"));
    let restated = [
        "--quiet",
        "--threads",
        "1",
        "--seeds",
        "2",
        "--days",
        "7",
        "--workload",
        "default",
        "--workload",
        "traps",
        "--grid",
        concat!(env!("CARGO_MANIFEST_DIR"), "/grids/default.toml"),
    ];
    assert_eq!(out_of(&restated).unwrap(), PathBuf::from("reports"));
    assert_eq!(out_of(&["--seed-list", "1,2"]).unwrap(), PathBuf::from("reports"));
    assert_eq!(out_of(&["--out", "x"]).unwrap(), PathBuf::from("x"));
    assert_eq!(out_of(&["--days", "1", "--out", "reports"]).unwrap(), PathBuf::from("reports"));
    let e = format!("{:#}", out_of(&["--seed-list", "2,1"]).unwrap_err());
    assert!(e.contains("--seed-list 2,1"), "{e}");
    let e = format!("{:#}", out_of(&["--days", "1", "--seeds", "3"]).unwrap_err());
    assert!(e.contains("--seeds 3, --days 1 make this run differ"), "{e}");
}

/// The same class as the sweep's: `sim merge` wrote into `reports/` by default, so merging
/// any shards without `--out` replaced the committed reports; `--out` is now required.
#[test]
fn merge_without_out_is_refused_before_it_reads_anything() {
    let d = checkout();
    let (ok, stdout, e) = sim(d.path(), &["merge", "shard0", "shard1"]);
    assert!(!ok, "succeeded: {stdout}");
    assert!(e.contains("--out"), "{e}");
    untouched(d.path());
    // Refused by the argument parser itself, whatever the shards: no default folder.
    let parsed = Cli::try_parse_from(["sim", "merge", "shard0", "shard1"]);
    let err = parsed
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("merge without --out parsed"));
    assert!(err.contains("--out <OUT>") && err.contains("required"), "{err}");
}

/// And `sim calibrate`: without `--svg` it wrote `reports/calibration.svg` whatever the
/// run. Now only the default run writes it without `--svg`; any other is refused before
/// it simulates, naming the flags.
#[test]
fn a_non_default_calibrate_without_svg_leaves_the_committed_figure_alone() {
    let d = checkout();
    std::fs::write(d.path().join("reports/calibration.svg"), "committed\n").unwrap();
    for (args, names) in [
        (&["calibrate", "--seed", "2"][..], &["--seed 2"][..]),
        (
            &["calibrate", "--workload", "traps", "--days", "1"],
            &["--workload traps", "--days 1"],
        ),
        (&["calibrate", "--cdfs", "elsewhere"], &["--cdfs elsewhere"]),
    ] {
        let (ok, stdout, e) = sim(d.path(), args);
        assert!(!ok, "{args:?} succeeded: {stdout}");
        for n in names {
            assert!(e.contains(n), "{args:?}: {n} not named: {e}");
        }
        assert!(e.contains("--svg FILE") && e.contains("reports/calibration.svg"), "{e}");
        let svg = std::fs::read_to_string(d.path().join("reports/calibration.svg")).unwrap();
        assert_eq!(svg, "committed\n", "{args:?} replaced the committed figure");
    }
}
