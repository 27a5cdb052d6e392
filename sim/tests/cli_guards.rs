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
    // A path that does not exist, or a plain file with no shard.toml beside it, is named as given.
    let e = fails(d, &["merge", "/nonexistent-shard", "sh0", "--out", "m"]);
    assert!(e.contains("/nonexistent-shard: no such file or directory"), "{e}");
    std::fs::write(d.join("notes.txt"), "x\n").unwrap();
    let e = fails(d, &["merge", "notes.txt", "sh0", "--out", "m"]);
    assert!(
        e.contains("notes.txt: not a directory, and there is no shard.toml next to it"),
        "{e}"
    );
    // A row edited to another workload (or seed) is not a run of that shard.
    std::fs::create_dir(d.join("sh1e")).unwrap();
    std::fs::copy(d.join("sh1/shard.toml"), d.join("sh1e/shard.toml")).unwrap();
    let csv = std::fs::read_to_string(d.join("sh1/sweep.csv")).unwrap();
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let mut fields: Vec<&str> = lines[2].split(',').collect();
    let edited = format!("{}X", fields[2]);
    fields[2] = &edited;
    lines[2] = fields.join(",");
    std::fs::write(d.join("sh1e/sweep.csv"), lines.join("\n") + "\n").unwrap();
    let e = fails(d, &["merge", "sh0", "sh1e", "--out", "m"]);
    assert!(
        e.contains("shard sh1e: sweep.csv line 3") && e.contains(&format!("workload {edited} ")),
        "{e}"
    );
    assert!(!d.join("m").exists(), "a refused merge wrote reports");
    // A row whose columns disagree with each other (more GPU-hours recovered than wasted),
    // in a file not called sweep.csv: the file, line and column are named.
    std::fs::create_dir(d.join("sh1f")).unwrap();
    std::fs::copy(d.join("sh1/shard.toml"), d.join("sh1f/shard.toml")).unwrap();
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let mut fields: Vec<String> = lines[2].split(',').map(str::to_string).collect();
    let wasted: f64 = fields[col("wasted_gpu_h")].parse().unwrap();
    fields[col("recovered_gpu_h")] = format!("{}", wasted + 1.0);
    lines[2] = fields.join(",");
    std::fs::write(d.join("sh1f/edited.csv"), lines.join("\n") + "\n").unwrap();
    let e = fails(d, &["merge", "sh0", "sh1f/edited.csv", "--out", "m"]);
    assert!(
        e.contains("shard sh1f: edited.csv line 3")
            && e.contains(&format!(
                "column recovered_gpu_h is {}: must not exceed wasted_gpu_h ({wasted})",
                wasted + 1.0
            )),
        "{e}"
    );
    assert!(!d.join("m").exists(), "a refused merge wrote reports");
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
    assert!(with.contains("1 config + baselines on"), "{with}");
    let mut b = a.clone();
    b.push("--no-baselines");
    let without = ok(d.path(), &b);
    let line = without.lines().find(|l| l.starts_with("timing:")).unwrap();
    assert!(line.contains("no baselines") && !line.contains("+ baselines"), "{line}");
    assert!(line.starts_with("timing: 1 run (1 config, no baselines on "), "{line}");
    assert!(
        !line.contains(" 1 runs") && !line.contains(" 1 threads") && !line.contains(" 1 days"),
        "{line}"
    );
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
        // Trial 7: calibrate run away from the repository said only "file not found".
        if args[0] == "calibrate" {
            assert!(e.contains("--cdfs") && e.contains("repository's root"), "{e}");
        }
    }
}

/// Writes a 10-minute nvidia-smi log of GPUs 0-1 on `n1` (12:00 local time on 2024-05-01),
/// without the field `drop` when given, and a jobs.csv with one job on n1:0-1 from 12:00 to
/// 13:00 UTC.
fn smi_log(dir: &Path, name: &str, drop: Option<&str>) {
    let header = "timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]";
    let keep: Vec<bool> = header.split(", ").map(|h| drop.is_none_or(|d| !h.starts_with(d))).collect();
    let pick = |line: &str| -> String {
        let fields: Vec<&str> = line.split(", ").zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f).collect();
        fields.join(", ") + "\n"
    };
    let mut text = pick(header);
    for m in 0..10 {
        for g in 0..2 {
            text += &pick(&format!(
                "2024/05/01 12:{m:02}:00.000, {g}, GPU-{g}, 50 %, 1000 MiB, 81920 MiB, 200.00 W, 400.00 W"
            ));
        }
    }
    std::fs::write(dir.join(name), text).unwrap();
    std::fs::write(
        dir.join("jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\nj1,u,a,p,q,n,,1714564800,1714568400,,2,n1:0-1\n",
    )
    .unwrap();
}

#[test]
fn an_import_with_no_usable_sample_fails_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    smi_log(d, "smi.csv", None);
    let import = |tz: &str, out: &str| {
        [
            "import",
            "nvidia-smi-log",
            "smi.csv",
            "--node",
            "n1",
            "--jobs",
            "jobs.csv",
            "--tz",
            tz,
            "--out",
            out,
        ]
        .map(String::from)
    };
    let right = import("+00:00", "o1");
    let s = ok(d, &right.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(s.contains("imported 1 jobs, 20 samples"), "{s}");
    // Five hours off: every sample falls before the job.
    let wrong = import("+05:00", "o2");
    let e = fails(d, &wrong.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        e.contains("20 samples") && e.contains("--tz") && e.contains("+05:00") && e.contains("--jobs"),
        "{e}"
    );
    assert!(!d.join("o2").exists(), "a failed import wrote a trace");
    std::fs::write(d.join("empty.csv"), "").unwrap();
    let e = fails(d, &["import", "nvidia-smi-log", "empty.csv", "--node", "n1", "--out", "o3"]);
    assert!(e.contains("empty.csv") && e.contains("no samples"), "{e}");
}

#[test]
fn an_import_says_when_the_source_lacks_a_field_the_policy_needs() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    smi_log(d, "smi.csv", None);
    smi_log(d, "noutil.csv", Some("utilization.gpu"));
    let run = |src: &str, out: &str| {
        ok(
            d,
            &["import", "nvidia-smi-log", src, "--node", "n1", "--tz", "+00:00", "--out", out],
        )
    };
    // The note on the video engines' fields (absent from both logs) names utilization.gpu
    // too; it is left out of the counts below.
    let but_codec = |out: &str| {
        out.lines()
            .filter(|l| !l.contains("utilization.encoder"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let full = run("smi.csv", "o1");
    assert!(full.contains("no utilization.encoder, utilization.decoder column"), "{full}");
    assert!(!but_codec(&full).contains("utilization.gpu"), "{full}");
    let s = run("noutil.csv", "o2");
    assert!(s.contains("20 samples"), "{s}");
    assert_eq!(but_codec(&s).matches("utilization.gpu").count(), 1, "{s}");
    assert!(s.contains("no utilization.gpu column"), "{s}");
    let samples = std::fs::read_to_string(d.join("o2/samples.csv")).unwrap();
    let header: Vec<&str> = samples.lines().next().unwrap().split(',').collect();
    let util = header.iter().position(|h| *h == "util_pct").unwrap();
    assert!(
        samples.lines().skip(1).all(|l| l.split(',').nth(util) == Some("")),
        "util must stay unknown"
    );
}

#[test]
fn generate_and_calibrate_cap_days_and_refuse_worlds_above_the_memory_budget_up_front() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    for days in ["400", "0", "inf", "NaN"] {
        let e = fails(
            d,
            &["generate", "--workload", "default", "--seed", "1", "--days", days, "--out", "t"],
        );
        assert!(e.contains(&format!("--days {days}")) && e.contains("at most 366"), "{e}");
    }
    // 200 days of 512 GPUs: about 38 GiB for the world and the trace; refused before allocating.
    let e = fails(
        d,
        &["generate", "--workload", "default", "--seed", "1", "--days", "200", "--out", "t"],
    );
    assert!(
        e.contains("sim generate") && e.contains("default (512 GPUs)") && e.contains("8 GiB"),
        "{e}"
    );
    assert!(e.contains("use at most"), "{e}");
    assert!(!d.join("t").exists());
    let e = fails(d, &["calibrate", "--days", "366", "--svg", "c.svg"]);
    assert!(e.contains("sim calibrate") && e.contains("8 GiB"), "{e}");
    let e = fails(d, &["calibrate", "--days", "400", "--svg", "c.svg"]);
    assert!(e.contains("--days 400") && e.contains("at most 366"), "{e}");
}

#[test]
fn empty_results_are_errors_not_reports() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // One tick: no job arrives, so every row would be 0 and summary.md would still recommend.
    let e = fails(d, &["sweep", "--quiet", "--seeds", "1", "--days", "0.0001", "--out", "o"]);
    assert!(e.contains("workload default seed 1 over 0.0001 days generated no job"), "{e}");
    assert!(e.contains("jobs per day") && e.contains("use --days"), "{e}");
    assert!(!d.join("o").exists(), "an empty sweep wrote reports");
    // Calibrate: --days 0 like the sweep, and no simulated sample at all.
    let e = fails(d, &["calibrate", "--days", "0", "--svg", "c.svg"]);
    assert!(e.contains("--days 0") && e.contains("above 0"), "{e}");
    let e = fails(d, &["calibrate", "--days", "0.0001", "--svg", "c.svg"]);
    assert!(e.contains("no simulated sample with a util_pct reading (0 samples in all)"), "{e}");
    assert!(!d.join("c.svg").exists());
}

#[test]
fn replay_of_a_trace_with_no_job_or_no_sample_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let jobs_header = "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n";
    let samples_header = "t_s,job_id,node,gpu,util_pct,mem_used_mib,mem_total_mib,power_w,power_limit_w,procs,sm_active\n";
    let job = "7,u,a,p,q,n,,1000,5000,,1,node001:0\n";
    let write = |jobs: &str, samples: &str| {
        std::fs::create_dir_all(d.join("t")).unwrap();
        std::fs::write(d.join("t/jobs.csv"), jobs).unwrap();
        std::fs::write(d.join("t/samples.csv"), samples).unwrap();
    };
    write(&format!("{jobs_header}{job}"), samples_header);
    let e = fails(d, &["replay", "--trace", "t", "--out", "o"]);
    assert!(e.contains("t/samples.csv: holds no sample"), "{e}");
    write(
        &format!("{jobs_header}{job}"),
        &format!("{samples_header}abc,7,node001,0,1,,,,,,\n"),
    );
    let e = fails(d, &["replay", "--trace", "t", "--out", "o", "--lenient"]);
    assert!(
        e.contains("t/samples.csv: all 1 rows were malformed and skipped (--lenient)"),
        "{e}"
    );
    write(jobs_header, samples_header);
    let e = fails(d, &["replay", "--trace", "t", "--out", "o"]);
    assert!(e.contains("t/jobs.csv: holds no job"), "{e}");
    write(&format!("{jobs_header}7,u,a,p,q,n,,x,5000,,1,node001:0\n"), samples_header);
    let e = fails(d, &["replay", "--trace", "t", "--out", "o", "--lenient"]);
    assert!(e.contains("t/jobs.csv: all 1 rows were malformed and skipped (--lenient)"), "{e}");
    assert!(!d.join("o").exists());
}

#[test]
fn import_flags_of_another_format_are_errors_naming_flag_and_format() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    smi_log(d, "smi.csv", None);
    let e = fails(
        d,
        &[
            "import",
            "alibaba-genai",
            "pods.csv",
            "--node",
            "x",
            "--tz",
            "Europe/Berlin",
            "--out",
            "o",
        ],
    );
    assert!(
        e.contains("--node does not apply to format alibaba-genai (only to nvidia-smi-log, dcgm)"),
        "{e}"
    );
    let e = fails(d, &["import", "alibaba-genai", "pods.csv", "--tz", "Europe/Berlin", "--out", "o"]);
    assert!(
        e.contains("--tz does not apply to format alibaba-genai (only to nvidia-smi-log)"),
        "{e}"
    );
    let e = fails(
        d,
        &[
            "import",
            "nvidia-smi-log",
            "smi.csv",
            "--node",
            "n1",
            "--epoch-s",
            "5",
            "--out",
            "o",
        ],
    );
    assert!(
        e.contains("--epoch-s does not apply to format nvidia-smi-log (only to alibaba-genai)"),
        "{e}"
    );
    let e = fails(d, &["import", "dcgm", "pages", "--query", "timestamp,index", "--out", "o"]);
    assert!(e.contains("--query does not apply to format dcgm"), "{e}");
    let e = fails(d, &["import", "alibaba-genai", "pods.csv", "--jobs", "jobs.csv", "--out", "o"]);
    assert!(e.contains("--jobs does not apply to format alibaba-genai"), "{e}");
    assert!(!d.join("o").exists());
}

#[test]
fn import_messages_use_the_command_line_names() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    smi_log(d, "smi.csv", None);
    let smi = |src: &str, tz: &str, out: &str| ok(d, &["import", "nvidia-smi-log", src, "--node", "n1", "--tz", tz, "--out", out]);
    let s = smi("smi.csv", "Europe/Berlin", "o1");
    // The offset in use is named (trial 11: "local" alone let a wrong zone pass unnoticed).
    assert!(
        s.contains("note: timestamps read in zone Europe/Berlin, UTC+02:00 at the first sample"),
        "{s}"
    );
    let s = smi("smi.csv", "+02:00", "o2");
    assert!(
        s.contains("note: timestamps read in zone +02:00, UTC+02:00 at the first sample"),
        "{s}"
    );
    let s = smi("smi.csv", "America/New_York", "o4");
    assert!(s.contains("zone America/New_York, UTC-04:00 at the first sample"), "{s}");
    // The format by its command-line name.
    std::fs::write(d.join("bad.csv"), "timestamp, index\nyesterday, 0\n").unwrap();
    let e = fails(d, &["import", "nvidia-smi-log", "bad.csv", "--node", "n1", "--out", "o3"]);
    assert!(e.contains("importing bad.csv as nvidia-smi-log:"), "{e}");
    assert!(e.contains("bad.csv: line 2, column 1 (timestamp): timestamp \"yesterday\""), "{e}");
    // A dcgm folder holding a file that is not a page: no "line 0, column 0".
    std::fs::create_dir(d.join("pages")).unwrap();
    std::fs::write(d.join("pages/notes.txt"), "x\n").unwrap();
    let e = fails(d, &["import", "dcgm", "pages", "--node", "n1", "--out", "o4"]);
    assert!(e.contains("importing pages as dcgm:"), "{e}");
    assert!(
        e.contains("notes.txt: the file name \"notes.txt\" is not a dcgm-exporter page name"),
        "{e}"
    );
    assert!(!e.contains("line 0"), "{e}");
    // A header in another column order is read by name.
    let text = std::fs::read_to_string(d.join("smi.csv")).unwrap();
    let swapped: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(", ").collect();
            f.swap(0, 1);
            f.join(", ") + "\n"
        })
        .collect();
    std::fs::write(d.join("swapped.csv"), &swapped).unwrap();
    let s = smi("swapped.csv", "+00:00", "o5");
    assert!(s.contains("imported 2 jobs, 20 samples"), "{s}");
    smi("smi.csv", "+00:00", "o6");
    assert_eq!(
        std::fs::read(d.join("o5/samples.csv")).unwrap(),
        std::fs::read(d.join("o6/samples.csv")).unwrap()
    );
    // Without the header, the --query order is named.
    let headerless: String = swapped.lines().skip(1).map(|l| l.to_string() + "\n").collect();
    std::fs::write(d.join("noheader.csv"), headerless).unwrap();
    let e = fails(d, &["import", "nvidia-smi-log", "noheader.csv", "--node", "n1", "--out", "o7"]);
    assert!(e.contains("line 1") && e.contains("--query order timestamp,index,"), "{e}");
    // A header without a timestamp column says what to log.
    std::fs::write(d.join("nots.csv"), "index, utilization.gpu [%]\n0, 50 %\n").unwrap();
    let e = fails(d, &["import", "nvidia-smi-log", "nots.csv", "--node", "n1", "--out", "o8"]);
    assert!(
        e.contains("nots.csv: line 1: the header has no timestamp column") && e.contains("--query-gpu="),
        "{e}"
    );
}

#[test]
fn generate_of_a_span_with_no_job_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let e = fails(
        d,
        &["generate", "--workload", "default", "--seed", "1", "--days", "0.0001", "--out", "t"],
    );
    assert!(
        e.contains("workload default seed 1 over 0.0001 days generated no job") && e.contains("use --days"),
        "{e}"
    );
    assert!(!d.join("t").exists());
    // A workload error with --nodes has no stray empty file name.
    let e = fails(
        d,
        &["generate", "--workload", "default", "--seed", "1", "--nodes", "0", "--out", "t"],
    );
    assert!(e.contains("--nodes 0: `cluster.nodes` = 0"), "{e}");
}

#[test]
fn sweep_sizes_are_capped_before_allocating() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // Seeds: refused before the list is built (it was an 800 GB allocation abort).
    let e = fails(d, &["sweep", "--quiet", "--days", "1", "--seeds", "99999999999"]);
    assert!(e.contains("--seeds 99999999999") && e.contains("10000"), "{e}");
    let list: Vec<String> = (1..=10_001).map(|s| s.to_string()).collect();
    let list = list.join(",");
    let e = fails(d, &["sweep", "--quiet", "--days", "1", "--seed-list", &list]);
    assert!(e.contains("--seed-list") && e.contains("10001 seeds"), "{e}");
    // Threads.
    let e = fails(d, &small_sweep(&["--threads", "100000"]));
    assert!(e.contains("--threads 100000") && e.contains("1024"), "{e}");
    // Operator trial 13: someone who gave --threads 1025 was told "(give --threads)".
    let e = fails(d, &small_sweep(&["--threads", "1025"]));
    assert!(
        e.contains("--threads 1025: at most 1024 worker threads; give --threads 1024 or fewer"),
        "{e}"
    );
    assert!(!e.contains("(give --threads)"), "{e}");
    // A flag grid of 6.4 million configurations: refused up front with the count.
    let pcts: Vec<String> = (1..=80).map(|p| p.to_string()).collect();
    let windows: Vec<String> = (1..=80).map(|m| format!("{m}m")).collect();
    let warmups: Vec<String> = (1..=1000).map(|m| format!("{m}m")).collect();
    let e = fails(
        d,
        &small_sweep(&[
            "--util-threshold-pct",
            &pcts.join(","),
            "--window",
            &windows.join(","),
            "--warmup",
            &warmups.join(","),
        ]),
    );
    assert!(e.contains("6400000 configurations") && e.contains("10000"), "{e}");
    // Results beyond the memory budget: (9,000 configurations + 4 baselines) × 2 workloads × 10,000 seeds.
    // (Thresholds from 2 %: at 1 % the default starved_mean_util_pct of 1 % is refused.)
    let pcts: Vec<String> = (2..=91).map(|p| p.to_string()).collect();
    let warmups: Vec<String> = (1..=100).map(|m| format!("{m}m")).collect();
    let e = fails(
        d,
        &[
            "sweep",
            "--quiet",
            "--days",
            "0.05",
            "--seeds",
            "10000",
            "--util-threshold-pct",
            &pcts.join(","),
            "--warmup",
            &warmups.join(","),
        ],
    );
    assert!(e.contains("180080000 runs") && e.contains("GiB"), "{e}");
}

#[test]
fn grid_flags_refuse_repeated_values_and_none_joined_with_names() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let e = fails(d, &small_sweep(&["--util-threshold-pct", "5,5"]));
    assert!(
        e.contains("--util-threshold-pct") && e.contains("= 5") && e.contains("twice"),
        "{e}"
    );
    let e = fails(d, &small_sweep(&["--exempt-qos", "none+serving"]));
    assert!(e.contains("--exempt-qos \"none+serving\"") && e.contains("`none`"), "{e}");
}

#[test]
fn merge_refuses_to_write_into_a_shard_folder_and_leaves_it_intact() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    shard(d, "5,15", "0.05", "0/2", "s0");
    shard(d, "5,15", "0.05", "1/2", "s1");
    let before = std::fs::read(d.join("s0/sweep.csv")).unwrap();
    for out in ["s0", "./s0/", "s1"] {
        let err = fails(d, &["merge", "s0", "s1/sweep.csv", "--out", out]);
        assert!(err.contains("would overwrite that shard's sweep.csv"), "{err}");
    }
    assert_eq!(std::fs::read(d.join("s0/sweep.csv")).unwrap(), before);
    ok(d, &["merge", "s0", "s1", "--out", "merged"]);
}

#[test]
fn a_sweep_whose_out_is_a_file_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("afile"), "x").unwrap();
    // A sweep far too long to finish in a test: the refusal must come first.
    let err = fails(d, &["sweep", "--quiet", "--seeds", "2", "--days", "100", "--out", "afile"]);
    assert!(err.contains("--out afile: exists and is not a folder"), "{err}");
}

#[test]
fn a_sweep_of_very_few_jobs_warns_that_its_recommendation_says_little() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let stdout = ok(d, &["sweep", "--quiet", "--seeds", "1", "--days", "0.01", "--out", "tiny"]);
    assert!(stdout.contains("warning: world") && stdout.contains("says little"), "{stdout}");
    let summary = std::fs::read_to_string(d.join("tiny/summary.md")).unwrap();
    assert!(summary.contains("**Too few jobs to choose from:**"), "{summary}");
}

#[test]
fn replay_says_which_policy_it_ran_and_refuses_what_the_enforcer_refuses() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    std::fs::create_dir_all(d.join("t")).unwrap();
    std::fs::write(
        d.join("t/jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n7,u,a,p,q,n,,1000,5000,,1,node001:0\n",
    )
    .unwrap();
    std::fs::write(
        d.join("t/samples.csv"),
        "t_s,job_id,node,gpu,util_pct,mem_used_mib,mem_total_mib,power_w,power_limit_w,procs,sm_active\n1060,7,node001,0,97,,,,,,\n",
    )
    .unwrap();
    let s = ok(d, &["replay", "--trace", "t", "--policy", "/dev/null", "--out", "o1"]);
    assert!(s.starts_with("policy: the default policy (/dev/null has no [policy] table"), "{s}");
    std::fs::write(d.join("p.toml"), "[policy]\nwindow = \"30m\"\n\n[enforcer]\nnode = \"gpu001\"\n").unwrap();
    let s = ok(d, &["replay", "--trace", "t", "--policy", "p.toml", "--out", "o2"]);
    assert!(s.starts_with("policy: p.toml\n"), "{s}");
    // The trial's file: a policy key at the top level next to [enforcer].
    std::fs::write(d.join("p.toml"), "window = \"30m\"\n\n[enforcer]\nnode = \"gpu001\"\n").unwrap();
    let e = fails(d, &["replay", "--trace", "t", "--policy", "p.toml", "--out", "o3"]);
    assert!(e.contains("p.toml: unknown top-level key(s) `window`"), "{e}");
    assert!(!d.join("o3").exists(), "a refused policy wrote a replay");
}

/// Writes ten one-minute dcgm-exporter pages of GPUs 0-1 on host n1 into `dir/name`, each
/// holding the series in `series` (metric names; every GPU reads 40 on each).
fn dcgm_pages(dir: &Path, name: &str, series: &[&str]) {
    let pages = dir.join(name);
    std::fs::create_dir_all(&pages).unwrap();
    for m in 0..10 {
        let mut text = String::new();
        for s in series {
            for g in 0..2 {
                text += &format!("{s}{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"n1\"}} 40\n");
            }
        }
        std::fs::write(pages.join(format!("{}.prom", 1_714_564_800 + 60 * m)), text).unwrap();
    }
}

#[test]
fn a_dcgm_import_notes_every_reading_the_policy_uses_that_no_sample_has() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // What a default dcgm-exporter counters file gives: util, memory used and free, power;
    // no total, no power limit, and dcgm has no process count at all.
    dcgm_pages(
        d,
        "plain",
        &["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"],
    );
    let s = ok(d, &["import", "dcgm", "plain", "--out", "o1"]);
    assert!(s.contains("20 samples"), "{s}");
    let notes: Vec<&str> = s.lines().filter(|l| l.trim_start().starts_with("note:")).collect();
    let has = |what: &str| notes.iter().any(|n| n.contains(what));
    assert!(has("memory.total") && has("DCGM_FI_DEV_FB_TOTAL") && has("mem_held_mib"), "{s}");
    assert!(
        has("power.limit") && has("DCGM_FI_DEV_POWER_MGMT_LIMIT") && has("idle_power_w"),
        "{s}"
    );
    assert!(has("process count") && has("processes unknown"), "{s}");
    assert!(!has("utilization.gpu") && !has("memory.used") && !has("power.draw"), "{s}");
    // Every reading there: only the process count is missing.
    dcgm_pages(
        d,
        "full",
        &[
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        ],
    );
    let s = ok(d, &["import", "dcgm", "full", "--out", "o2"]);
    let notes: Vec<&str> = s.lines().filter(|l| l.trim_start().starts_with("note:")).collect();
    assert_eq!(notes.len(), 2, "{s}");
    assert!(notes[0].contains("process count") || notes[1].contains("process count"), "{s}");
    // The pages carry no device label: the numbering written is named (trial 12).
    assert!(notes.iter().any(|n| n.contains("no page carries a device label")), "{s}");
    // SM activity without util: the policy reads SM activity in util's place, so util is not
    // "unknown everywhere".
    dcgm_pages(
        d,
        "sm",
        &["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"],
    );
    let s = ok(d, &["import", "dcgm", "sm", "--out", "o3"]);
    let util: Vec<&str> = s.lines().filter(|l| l.contains("DCGM_FI_DEV_GPU_UTIL")).collect();
    assert_eq!(util.len(), 1, "{s}");
    assert!(util[0].contains("SM activity") && !util[0].contains("unknown everywhere"), "{s}");
}

/// Operator trial 13: `--node node7` lost to the pages' `Hostname` label (n1) without a word,
/// and the import failed with "none of its samples falls on a GPU and time of a job". The
/// failure now carries the warning naming the host the samples were read as, and why.
#[test]
fn a_dcgm_import_failing_on_jobs_says_which_host_the_node_flag_lost_to() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    dcgm_pages(d, "pages", &["DCGM_FI_DEV_GPU_UTIL"]);
    std::fs::write(
        d.join("jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n7,u,a,p,q,n,,1714564800,1714568400,,2,node7:0-1\n",
    )
    .unwrap();
    let e = fails(
        d,
        &["import", "dcgm", "pages", "--node", "node7", "--jobs", "jobs.csv", "--out", "o"],
    );
    assert!(e.contains("none of its 20 samples falls on a GPU and time of a job"), "{e}");
    assert!(
        e.contains("warning: --node node7 was not used") && e.contains("read as host n1 (the Hostname label"),
        "{e}"
    );
    // Where the import succeeds the warning is printed with the others.
    let s = ok(d, &["import", "dcgm", "pages", "--node", "node7", "--out", "o2"]);
    assert!(s.contains("warning: --node node7 was not used"), "{s}");
    // Line timestamps in seconds, skipped with --lenient: the failure gives the first reason.
    std::fs::create_dir(d.join("secs")).unwrap();
    std::fs::write(
        d.join("secs/1795946400.prom"),
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n1\"} 50 1795946400\n",
    )
    .unwrap();
    let e = fails(d, &["import", "dcgm", "secs", "--lenient", "--out", "o3"]);
    assert!(
        e.contains("all 1 rows were malformed") && e.contains("secs/1795946400.prom: line 1"),
        "{e}"
    );
    assert!(e.contains("they look like seconds"), "{e}");
}

/// The operator trial's renumbering: GPU 0 (busy, job 1) falls off the bus after 30 minutes
/// and nvidia-smi shows GPU 1 (idle, job 2) at index 0 from then on. Imported by UUID, the idle
/// readings stay job 2's, job 1 has a gap (never drained or cancelled), and the import says
/// what it saw.
#[test]
fn a_gpu_lost_from_the_bus_does_not_lend_its_index_to_another_gpus_readings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut log = String::from(
        "timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]\n",
    );
    for m in 0..150 {
        let ts = format!("2026/11/29 {:02}:{:02}:00.000", 10 + m / 60, m % 60);
        // Readings vary a little: identical ones would be judged frozen telemetry.
        if m < 30 {
            log += &format!(
                "{ts}, 0, GPU-a, {} %, 60000 MiB, 81920 MiB, {}.00 W, 400.00 W\n",
                95 + m % 5,
                350 + m % 7
            );
        }
        let idle_index = if m < 30 { 1 } else { 0 };
        log += &format!("{ts}, {idle_index}, GPU-b, 0 %, 0 MiB, 81920 MiB, {}.00 W, 400.00 W\n", 60 + m % 3);
    }
    std::fs::write(d.join("smi.csv"), log).unwrap();
    // 10:00 UTC is 1795946400; both jobs span the log.
    std::fs::write(
        d.join("jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n1,u,a,p,q,busy,,1795946400,1795955400,,1,node001:0\n2,u,a,p,q,idle,,1795946400,1795955400,,1,node001:1\n",
    )
    .unwrap();
    std::fs::write(
        d.join("p.toml"),
        "[policy]\nutil_threshold_pct = 5\nwindow = \"10m\"\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"20m\", verdict = \"drain\" }, { after = \"40m\", verdict = \"cancel\" }]\n",
    )
    .unwrap();
    let s = ok(
        d,
        &[
            "import",
            "nvidia-smi-log",
            "smi.csv",
            "--node",
            "node001",
            "--tz",
            "UTC",
            "--jobs",
            "jobs.csv",
            "--out",
            "t",
        ],
    );
    assert!(s.contains("  renumbered_samples: 120\n"), "{s}");
    assert!(
        s.contains("  warning: node001: GPUs were renumbered") && s.contains("GPU-b first at index 1, later at 0 (120 samples)"),
        "{s}"
    );
    ok(d, &["replay", "--trace", "t", "--policy", "p.toml", "--out", "r"]);
    let summary = std::fs::read_to_string(d.join("r/jobs-summary.csv")).unwrap();
    let row = |job: &str| -> Vec<String> {
        let line = summary.lines().find(|l| l.starts_with(&format!("{job},"))).unwrap();
        line.split(',').map(str::to_string).collect()
    };
    let head: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let busy = row("1");
    assert!(
        busy[col("first_alert_s")].is_empty() && busy[col("first_drain_s")].is_empty() && busy[col("first_cancel_s")].is_empty(),
        "the busy job on the lost GPU was judged on another GPU's readings: {summary}"
    );
    assert_eq!(row("2")[col("highest_verdict")], "cancel", "{summary}");
}

/// The longest run of digits in `text`.
fn longest_digit_run(text: &str) -> usize {
    text.split(|c: char| !c.is_ascii_digit()).map(str::len).max().unwrap_or(0)
}

/// Operator trial 17: `sim sweep --days 1e-300` wrote the value back as a decimal of about
/// 300 digits.
#[test]
fn a_tiny_or_huge_days_value_is_written_back_in_compact_form() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // Without --out: the flags that make the run non-default are named.
    let e = fails(d, &["sweep", "--quiet", "--days", "1e-300"]);
    assert!(e.contains("--days 1e-300 makes this run differ"), "{e}");
    assert!(longest_digit_run(&e) < 20, "{e}");
    // With --out: the world over that span holds no job.
    let e = fails(d, &["sweep", "--quiet", "--seeds", "1", "--days", "1e-300", "--out", "o"]);
    assert!(e.contains("over 1e-300 days generated no job"), "{e}");
    assert!(longest_digit_run(&e) < 20, "{e}");
    // Above the cap: the range check names the value as compactly.
    let e = fails(d, &["sweep", "--quiet", "--days", "1e300", "--out", "o"]);
    assert!(e.contains("--days 1e300: must be above 0 and at most 366"), "{e}");
    assert!(longest_digit_run(&e) < 20, "{e}");
}
