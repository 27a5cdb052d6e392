//! End-to-end runs of `sim generate`, `sim import`, `sim replay` and `sim calibrate`,
//! in-process through their `run` functions.

use sim::cli::{calibrate, generate, import, replay};
use std::path::{Path, PathBuf};

fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared"));
    if p.join("traces").is_dir() {
        return Some(p);
    }
    if std::env::var("GPU_REAPER_REQUIRE_SHARED").as_deref() == Ok("1") {
        panic!("{} is absent and GPU_REAPER_REQUIRE_SHARED=1", p.display());
    }
    eprintln!("skipped: {} is absent", p.display());
    None
}

fn replay_args(trace: &Path, out: &Path) -> replay::Args {
    replay::Args {
        trace: trace.to_path_buf(),
        policy: None,
        interval: None,
        out: out.to_path_buf(),
        lenient: false,
    }
}

#[test]
fn generate_then_replay_writes_scored_findings() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("trace");
    generate::run(generate::Args {
        workload: "default".into(),
        seed: 3,
        days: 0.25,
        nodes: Some(8),
        out: trace.clone(),
    })
    .unwrap();
    let jobs = std::fs::read_to_string(trace.join("jobs.csv")).unwrap();
    assert!(jobs.starts_with("job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n"));
    let samples = std::fs::read_to_string(trace.join("samples.csv")).unwrap();
    assert!(samples.lines().next().unwrap().ends_with(",truth"));
    let out = d.path().join("out");
    replay::run(replay_args(&trace, &out)).unwrap();
    let f = std::fs::read_to_string(out.join("findings.csv")).unwrap();
    assert!(f.starts_with("t_s,job_id,verdict,signature,reason,"));
    let s = std::fs::read_to_string(out.join("jobs-summary.csv")).unwrap();
    assert_eq!(s.lines().count(), jobs.lines().count());
    assert!(s.lines().skip(1).all(|l| l.ends_with(",true")), "every job scored");
    // Same seed, same bytes.
    let trace2 = d.path().join("trace2");
    generate::run(generate::Args {
        workload: "default".into(),
        seed: 3,
        days: 0.25,
        nodes: Some(8),
        out: trace2.clone(),
    })
    .unwrap();
    assert_eq!(samples, std::fs::read_to_string(trace2.join("samples.csv")).unwrap());
}

#[test]
fn replay_errors_name_the_place_and_lenient_counts() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t");
    std::fs::create_dir(&t).unwrap();
    std::fs::write(
        t.join("jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n1,u,a,p,q,n,,0,600,,1,n1:0\n",
    )
    .unwrap();
    std::fs::write(
        t.join("samples.csv"),
        "t_s,job_id,node,gpu,util_pct,mem_used_mib,mem_total_mib,power_w,power_limit_w,procs,sm_active\n60,1,n1,0,50,,,,,,\n120,1,n1,0,[N/A],,,,,,\n",
    )
    .unwrap();
    let e = format!("{:#}", replay::run(replay_args(&t, &d.path().join("o"))).unwrap_err());
    assert!(e.contains("samples.csv: line 3, column 5 (util_pct)"), "{e}");
    let mut a = replay_args(&t, &d.path().join("o"));
    a.lenient = true;
    replay::run(a).unwrap();
    // A bad policy file names itself and the key.
    let pol = d.path().join("p.toml");
    std::fs::write(&pol, "[policy]\nutil_threshold_pct = \"high\"\n").unwrap();
    let mut a = replay_args(&t, &d.path().join("o"));
    a.policy = Some(pol);
    let e = format!("{:#}", replay::run(a).unwrap_err());
    assert!(e.contains("p.toml") && e.contains("util_threshold_pct"), "{e}");
    let mut a = replay_args(&t, &d.path().join("o"));
    a.interval = Some("soon".into());
    assert!(format!("{:#}", replay::run(a).unwrap_err()).contains("soon"));
}

#[test]
fn import_alibaba_and_philly_then_replay() {
    let Some(sh) = shared() else { return };
    let d = tempfile::tempdir().unwrap();
    let base = |format, src: PathBuf, out: &str| import::Args {
        format,
        src,
        jobs: None,
        node: None,
        tz: None,
        query: None,
        epoch_s: None,
        lenient: false,
        out: d.path().join(out),
    };
    import::run(base(
        import::Format::AlibabaGenai,
        sh.join("traces/alibaba_gentd26_pod_gpu_excerpt.csv"),
        "ali",
    ))
    .unwrap();
    let mut p = base(import::Format::Philly, sh.join("traces/philly_dre_gpu_util_excerpt.csv"), "philly");
    assert!(
        import::run(base(import::Format::Philly, sh.join("traces/philly_dre_gpu_util_excerpt.csv"), "x")).is_err(),
        "philly needs --jobs"
    );
    p.jobs = Some(sh.join("traces/philly_dre_jobs_excerpt.json"));
    import::run(p).unwrap();
    for name in ["ali", "philly"] {
        let out = d.path().join(format!("{name}-out"));
        replay::run(replay_args(&d.path().join(name), &out)).unwrap();
        let s = std::fs::read_to_string(out.join("jobs-summary.csv")).unwrap();
        let col = s.lines().next().unwrap().split(',').position(|c| c == "safety_violations").unwrap();
        assert!(s.lines().skip(1).all(|l| l.split(',').nth(col) == Some("0")), "{name}");
    }
    let f = std::fs::read_to_string(d.path().join("philly-out/findings.csv")).unwrap();
    assert!(f.lines().skip(1).all(|l| l.contains(",healthy,none,") && l.contains("warmup")));
}

#[test]
fn import_nvidia_smi_log_needs_a_node_and_reads_the_zone() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("smi.csv");
    std::fs::write(
        &log,
        "timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]\n2026/11/29 10:00:00.000, 0, GPU-0, 97 %, 100 MiB, 81920 MiB, 300.00 W, 400.00 W\n2026/11/29 10:01:00.000, 0, GPU-0, [N/A], 100 MiB, 81920 MiB, 300.00 W, 400.00 W\n",
    )
    .unwrap();
    let args = |node: Option<&str>| import::Args {
        format: import::Format::NvidiaSmiLog,
        src: log.clone(),
        jobs: None,
        node: node.map(str::to_string),
        tz: Some("+01:00".into()),
        query: None,
        epoch_s: None,
        lenient: false,
        out: d.path().join("t"),
    };
    assert!(format!("{:#}", import::run(args(None)).unwrap_err()).contains("--node"));
    import::run(args(Some("node001"))).unwrap();
    let s = std::fs::read_to_string(d.path().join("t/samples.csv")).unwrap();
    // 10:00 at +01:00 is 09:00 UTC; [N/A] stays an empty cell.
    assert!(s.contains("\n1795942800,node001-gpu0,node001,0,97,100,81920,300,400,,\n"), "{s}");
    assert!(s.contains("\n1795942860,node001-gpu0,node001,0,,100,81920,300,400,,\n"), "{s}");
}

#[test]
fn calibrate_measures_three_distances_and_draws_them() {
    let Some(sh) = shared() else { return };
    let w = sim::load_workload("default").unwrap();
    let m = calibrate::measure(&w, 1, 0.25, &sh.join("traces/acme_util_cdfs")).unwrap();
    assert_eq!(
        m.iter().map(|x| x.name).collect::<Vec<_>>(),
        vec!["util_pct", "power_w", "mem_used_pct_of_80gib"]
    );
    for x in &m {
        assert!(x.ks > 0.0 && x.ks < 1.0, "{}: {}", x.name, x.ks);
        assert!(!x.sim.is_empty());
    }
    let d = tempfile::tempdir().unwrap();
    let svg = d.path().join("cal.svg");
    calibrate::draw(&m, &svg).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("KS"));
}

#[test]
fn output_to_a_closed_stdout_ends_quietly() {
    // `sim generate … | head -0`: the reader is gone before the summary line is written.
    // Rust ignores SIGPIPE, so a plain `println!` would panic with "failed printing to stdout".
    let d = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "generate",
            "--workload",
            "traps",
            "--seed",
            "1",
            "--days",
            "0.05",
            "--nodes",
            "4",
            "--out",
        ])
        .arg(d.path().join("t"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}, stderr: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(d.path().join("t/jobs.csv").is_file());
}

#[test]
fn replay_refuses_a_trace_spanning_more_than_366_days_instead_of_walking_it() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("trace");
    std::fs::create_dir(&trace).unwrap();
    std::fs::write(
        trace.join("jobs.csv"),
        "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n7,u,a,p,q,n,,1000,99999999999999,,1,node001:0\n",
    )
    .unwrap();
    std::fs::write(
        trace.join("samples.csv"),
        "t_s,job_id,node,gpu,util_pct,mem_used_mib,mem_total_mib,power_w,power_limit_w,procs,sm_active\n1060,7,node001,0,97,,,,,,\n",
    )
    .unwrap();
    let e = format!("{:#}", replay::run(replay_args(&trace, &d.path().join("out"))).unwrap_err());
    assert!(e.contains("jobs.csv: line 2, column 9 (end_s)") && e.contains("366 days"), "{e}");
}

#[test]
fn calibrate_names_the_line_of_a_bad_cdf_row_in_a_crlf_file() {
    // The AcmeTrace CDF tables have Windows line endings; line 3 is the second data row.
    let d = tempfile::tempdir().unwrap();
    for (_, file) in calibrate::SEREN {
        std::fs::write(d.path().join(file), "value,cdf_pct\r\n0.0,10.0\r\n50.0,60.0\r\n100.0,100.0\r\n").unwrap();
    }
    let util = d.path().join(calibrate::SEREN[0].1);
    std::fs::write(&util, "value,cdf_pct\r\n0.0,10.0\r\nabc,60.0\r\n100.0,100.0\r\n").unwrap();
    let w = sim::Workload::builtin_default();
    let e = calibrate::measure(&w, 1, 0.05, d.path()).unwrap_err().to_string();
    assert!(e.contains("line 3, column 1 (value)") && e.contains("\"abc\""), "{e}");
}

#[test]
fn an_interval_refused_by_the_policy_names_the_flag_not_the_policy() {
    let e = format!("{:#}", replay::policy_from_args(None, Some("1h")).unwrap_err());
    assert!(e.starts_with("--interval 1h: ") && !e.contains("default policy"), "{e}");
}
