//! Golden tests: every reading in ../shared/samples/README.md that concerns a format the
//! enforcer parses is an explicit assertion here (the dcgm pages belong to other crates).

mod common;

use chrono::FixedOffset;
use common::{sample, sample_raw, script};
use enforcer::parse::cgroup::{self, CgroupJob};
use enforcer::parse::smi::{self, SmiError};
use enforcer::parse::{gres_detail, hostlist, squeue_format, squeue_json, tres};
use enforcer::run::KillMode;
use enforcer::slurm::{JobSource, SlurmCli, SlurmClient, SQUEUE_ENV_REMOVE};
use enforcer::telemetry::{NvidiaSmi, Telemetry};
use std::time::Duration;

#[test]
fn smi_gpu_normal_noheader_8_gpus_integers_mib() {
    let Some(t) = sample("smi-gpu-normal-noheader.csv") else { return };
    let cols = [
        "index",
        "uuid",
        "name",
        "temperature.gpu",
        "utilization.gpu",
        "memory.used",
        "memory.total",
    ];
    let g = smi::parse_gpus(&t, Some(&cols)).unwrap();
    assert_eq!(g.gpus.len(), 8, "8 GPUs");
    assert!(g.row_errors.is_empty());
    let idx: Vec<u16> = g.gpus.iter().map(|g| g.index.unwrap()).collect();
    assert_eq!(idx, (0..8).collect::<Vec<_>>());
    let util: Vec<f64> = g.gpus.iter().map(|g| g.util_pct.unwrap()).collect();
    assert_eq!(util, vec![0.0, 86.0, 85.0, 60.0, 84.0, 83.0, 83.0, 82.0]);
    assert_eq!(g.gpus[0].mem_used_mib, Some(802.0));
    assert_eq!(g.gpus[1].mem_used_mib, Some(10032.0));
    assert!(g.gpus.iter().all(|g| g.mem_total_mib == Some(12206.0)));
    assert_eq!(g.gpus[0].uuid.as_deref(), Some("GPU-00000000-0000-0000-0000-000000000000"));
    assert_eq!(g.gpus[7].name.as_deref(), Some("GeForce GTX TITAN X"));
    assert_eq!(g.gpus[0].power_w, None, "a column not queried is missing, not 0");
    let temps: Vec<u16> = t.lines().map(|l| l.split(", ").nth(3).unwrap().parse().unwrap()).collect();
    assert_eq!(temps, vec![25, 54, 55, 58, 55, 54, 56, 55], "temperature.gpu is read and ignored");
    assert!(t.lines().all(|l| l.split(", ").count() == 7), "\", \" separator, 7 fields");

    // Without the query list it was produced with, the file is rejected, never misread.
    assert!(
        matches!(smi::parse_gpus(&t, None), Err(SmiError::BadHeader(_))),
        "no header to go by"
    );
    let nine = smi::parse_gpus(&t, Some(&smi::GPU_QUERY)).unwrap();
    assert!(nine.gpus.is_empty() && nine.row_errors.iter().all(|e| e.problem.starts_with("7 fields, expected 9")));
    let eight = smi::parse_gpus(&t, Some(&smi::GPU_QUERY_WITHOUT_MIG)).unwrap();
    assert!(eight.gpus.is_empty() && eight.row_errors.iter().all(|e| e.problem.starts_with("7 fields, expected 8")));
    let wrong = smi::parse_gpus(&t, Some(&smi::GPU_QUERY_WITHOUT_MINOR)).unwrap();
    assert!(wrong.gpus.is_empty(), "name text in utilization.gpu: every row rejected: {wrong:?}");
    assert_eq!(wrong.row_errors.len(), 8);
    assert!(wrong.row_errors[0]
        .problem
        .contains("utilization.gpu \"GeForce GTX TITAN X\" is not a number"));
    let short = smi::parse_gpus(&t, Some(&cols[..6])).unwrap();
    assert!(short.gpus.is_empty() && short.row_errors.iter().all(|e| e.problem == "7 fields, expected 6"));
    // `enforcer parse nvidia-smi` without --columns refuses it too.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["parse", "nvidia-smi"])
        .arg(common::shared().unwrap().join("samples/smi-gpu-normal-noheader.csv"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !o.status.success() && out.contains("headerless") && !out.contains("mem_used_mib"),
        "{out}"
    );
}

#[test]
fn smi_mig_na_and_insufficient_permissions_are_missing() {
    let Some(t) = sample("smi-mig-na-insufficient-perms.csv") else {
        return;
    };
    let g = smi::parse_gpus(&t, None).unwrap();
    assert_eq!(g.gpus.len(), 1);
    let r = &g.gpus[0];
    assert_eq!(r.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(r.util_pct, None, "utilization [N/A] is missing, not 0");
    assert_eq!(r.mem_used_mib, None, "memory [Insufficient Permissions] is missing, not 0 MiB");
    assert_eq!(r.mem_total_mib, None);
}

#[test]
fn smi_power_not_supported_is_missing() {
    let Some(t) = sample("smi-power-not-supported.csv") else { return };
    let g = smi::parse_gpus(&t, Some(&["power.draw"])).unwrap();
    assert_eq!(g.gpus.len(), 1);
    assert_eq!(g.gpus[0].power_w, None, "power [Not Supported] is never 0 W");
}

#[test]
fn smi_error_texts_mean_no_data() {
    for (file, kind) in [
        ("smi-gpu-lost.txt", "gpu_lost"),
        ("smi-no-devices.txt", "no_devices"),
        ("smi-nvml-driver-mismatch.txt", "nvml_init_failed"),
    ] {
        let Some(t) = sample(file) else { return };
        match smi::parse_gpus(&t, None) {
            Err(SmiError::NoData { kind: k, .. }) => assert_eq!(k, kind, "{file}"),
            other => panic!("{file}: {other:?}"),
        }
        assert!(matches!(smi::parse_apps(&t, None), Err(SmiError::NoData { .. })), "{file}");
    }
    // Zero GPUs visible is no data even when nvidia-smi exits 0 with an empty table, and so
    // is a table none of whose rows can be read.
    let dir = tempfile::tempdir().unwrap();
    let header = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]";
    for (body, kind) in [
        (format!("echo '{header}'"), "no_gpus"),
        (String::new(), "no_gpus"),
        (format!("echo '{header}'\necho '0, GPU-1, 0'"), "no_readable_rows"),
    ] {
        let r = smi_script(dir.path(), &body).read(0);
        assert_eq!(r.no_data.as_deref(), Some(kind), "{body:?}");
        assert!(r.gpus.is_empty());
    }
    // The mismatch sample documents rc 18 after the error text.
    let raw = sample_raw("smi-nvml-driver-mismatch.txt").unwrap();
    assert!(raw.lines().any(|l| l.trim() == "18"));
}

fn smi_script(dir: &std::path::Path, body: &str) -> NvidiaSmi {
    NvidiaSmi {
        program: script(dir, "nvidia-smi", body),
        timeout: Duration::from_secs(5),
        kill: KillMode::Kill,
        minor_refused: false,
        mig_refused: false,
        codec_refused: false,
        refused_at_s: None,
        refusals_warned: 0,
    }
}

#[test]
fn smi_every_nonzero_exit_code_is_no_data_even_with_a_table() {
    let Some(codes) = sample("smi-exit-codes.txt") else { return };
    let codes: Vec<i32> = codes.lines().filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect();
    assert!(codes.contains(&14) && codes.contains(&255) && codes.contains(&0));
    let mismatch = sample_raw("smi-nvml-driver-mismatch.txt").unwrap();
    let mut all = codes.clone();
    all.extend(mismatch.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    let dir = tempfile::tempdir().unwrap();
    for rc in all {
        // rc 14 came with a normal table printed (GPU Operator troubleshooting): still no data.
        let mut smi = smi_script(
            dir.path(),
            &format!("echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'\necho '0, GPU-1, 0, 0, 81920, 60, 400'\nexit {rc}"),
        );
        let r = smi.read(0);
        if rc == 0 {
            assert_eq!(r.no_data, None);
            assert_eq!(r.gpus.len(), 1);
        } else {
            assert_eq!(r.no_data.as_deref(), Some(format!("exit_{rc}").as_str()), "rc {rc}");
            assert!(r.gpus.is_empty(), "rc {rc}: no reading may survive a failed nvidia-smi");
        }
    }
}

#[test]
fn smi_hang_is_unknown_not_idle() {
    let Some(t) = sample_raw("smi-hang-timeout.txt") else { return };
    assert!(t.contains("timeout") || t.contains("Hung"));
    let dir = tempfile::tempdir().unwrap();
    let mut smi = smi_script(dir.path(), "exec sleep 10");
    smi.timeout = Duration::from_millis(300);
    let start = std::time::Instant::now();
    let r = smi.read(0);
    assert_eq!(r.no_data.as_deref(), Some("timeout"));
    assert!(r.gpus.is_empty());
    assert!(start.elapsed() < Duration::from_secs(3));
}

/// smi-hang-timeout: "is nvidia-smi unkillable (stuck in 'D' state)?". A child that survives
/// the kill is abandoned at once (counted), and no new nvidia-smi starts while it lives: the
/// next reads are `hung_child`, without running anything. Once it is gone, reads work again.
#[test]
fn smi_unkillable_child_is_abandoned_and_not_restarted() {
    let Some(t) = sample_raw("smi-hang-timeout.txt") else { return };
    assert!(t.contains("unkillable"));
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let mut smi = smi_script(
        dir.path(),
        &format!(
            "echo x >> '{}'\n[ -e '{}.done' ] && exec echo 'index, uuid, utilization.gpu [%]' && exit 0\nexec sleep 1",
            starts.display(),
            starts.display()
        ),
    );
    smi.timeout = Duration::from_millis(100);
    smi.kill = KillMode::Ignore;
    let before = enforcer::run::abandoned_total();
    let t0 = std::time::Instant::now();
    assert_eq!(smi.read(0).no_data.as_deref(), Some("abandoned"));
    for _ in 0..3 {
        assert_eq!(smi.read(0).no_data.as_deref(), Some("hung_child"));
    }
    assert!(t0.elapsed() < Duration::from_millis(900), "never blocks on the hung child");
    assert!(enforcer::run::abandoned_total() > before, "counted");
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 1, "started once");
    std::fs::write(format!("{}.done", starts.display()), "").unwrap();
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        smi.read(0).no_data.as_deref(),
        Some("no_gpus"),
        "a new nvidia-smi runs once it died"
    );
}

#[test]
fn smi_util_without_processes_is_not_idle() {
    let Some(t) = sample("smi-util-without-processes.txt") else {
        return;
    };
    // The table shows 14 % util and 11637 MiB used with an empty process list.
    let row = t.lines().find(|l| l.contains("MiB /")).unwrap();
    let util: f64 = row.split('|').nth(3).unwrap().split('%').next().unwrap().trim().parse().unwrap();
    let used: f64 = row.split('|').nth(2).unwrap().split("MiB").next().unwrap().trim().parse().unwrap();
    assert_eq!((util, used), (14.0, 11637.0));
    let apps = smi::parse_apps("gpu_uuid, pid, used_gpu_memory [MiB]\n", None).unwrap();
    assert!(apps.apps.is_empty(), "an empty list is zero rows, read as such");
    // The same GPU in query form: the reading keeps its util, so the GPU cannot look idle.
    let g = smi::parse_gpus(
        &format!("index, uuid, utilization.gpu [%], memory.used [MiB]\n0, GPU-x, {util}, {used}\n"),
        None,
    )
    .unwrap();
    assert_eq!(g.gpus[0].util_pct, Some(14.0));
    assert_eq!(g.gpus[0].mem_used_mib, Some(11637.0));
}

#[test]
fn smi_mig_uuid_formats_old_and_new() {
    let Some(t) = sample("smi-mig-uuid-formats.txt") else { return };
    let d = smi::parse_list(&t);
    assert_eq!(d.len(), 6);
    assert_eq!((d[0].kind, d[0].uuid.as_str()), ("gpu", "GPU-11111111-1111-1111-1111-111111111111"));
    assert_eq!(d[1].uuid, "MIG-GPU-11111111-1111-1111-1111-111111111111/1/0");
    assert_eq!(d[1].parent_uuid.as_deref(), Some("GPU-11111111-1111-1111-1111-111111111111"));
    assert_eq!(d[2].number, 1);
    assert_eq!(d[4].uuid, "MIG-33333333-3333-3333-3333-333333333330");
    assert_eq!(
        d[4].parent_uuid.as_deref(),
        Some("GPU-22222222-2222-2222-2222-222222222222"),
        "new form: parent from the GPU line"
    );
    assert_eq!((d[5].kind, d[5].number), ("mig", 1), "variable whitespace");
}

#[test]
fn smi_compute_apps_rows_may_share_a_gpu() {
    let Some(t) = sample_raw("smi-compute-apps-vgpu.csv") else { return };
    let a = smi::parse_apps(&t, None).unwrap();
    assert_eq!(a.apps.len(), 3);
    assert!(a.apps.iter().all(|x| x.process_name.as_deref() == Some("vgpu") && x.pid.is_none()));
    let shared = a
        .apps
        .iter()
        .filter(|x| x.gpu_uuid.as_deref() == Some("GPU-44444444-4444-4444-4444-444444444441"))
        .count();
    assert_eq!(shared, 2, "several rows share one gpu_uuid");
}

#[test]
fn smi_power_query_uses_power_draw_not_average() {
    let Some(t) = sample("smi-help-query-power.txt") else { return };
    assert!(t.contains("\"power.draw.average\""));
    // power.draw.average is N/A on GA100; power.draw is available wherever power is.
    assert!(smi::GPU_QUERY.contains(&"power.draw") && !smi::GPU_QUERY.contains(&"power.draw.average"));
    // MIG util is unsupported: it reads [N/A], which is missing (see the MIG test above).
}

#[test]
fn squeue_json_v0040_shape() {
    let Some(t) = sample("squeue-json-v0.0.40-slurm23.11-shape.json") else {
        return;
    };
    let r = squeue_json::parse(&t).unwrap();
    assert!(r.row_errors.is_empty(), "{:?}", r.row_errors);
    assert_eq!(r.jobs.len(), 3, "non-RUNNING rows appear");
    let a = &r.jobs[0];
    assert_eq!(a.job_id, "1230_4", "array task id from array_job_id/array_task_id");
    assert_eq!(a.raw_id, Some(1234));
    assert_eq!((a.state.as_str(), a.state_flags.len()), ("RUNNING", 0));
    assert_eq!(a.start_s, Some(1_700_000_000), "start_time {{set, number}}");
    assert_eq!(a.nodes, vec!["gpu001", "gpu002"]);
    assert_eq!(a.gpus, 8, "untyped gres/gpu=8, not 16");
    assert_eq!(
        (
            a.user.as_str(),
            a.account.as_str(),
            a.partition.as_str(),
            a.qos.as_str(),
            a.name.as_str()
        ),
        ("user1", "acct1", "gpu", "normal", "train")
    );
    assert!(a.is_judgeable());
    let b = &r.jobs[1];
    assert_eq!(b.state_flags, vec!["CONFIGURING"]);
    assert!(!b.is_judgeable(), "CONFIGURING jobs are not judged");
    let c = &r.jobs[2];
    assert_eq!(c.state, "PENDING");
    assert_eq!(c.start_s, None, "set: false is no start time");
    assert!(c.nodes.is_empty());
    assert!(!c.is_judgeable());
    // The older shape: job_state a string, numbers plain.
    let old = r#"{"jobs": [{"job_id": 7, "job_state": "RUNNING", "start_time": 1700000000, "nodes": "n1", "tres_alloc_str": "gres/gpu=1", "array_task_id": 4294967294}]}"#;
    let o = squeue_json::parse(old).unwrap();
    assert_eq!(
        (o.jobs[0].job_id.as_str(), o.jobs[0].start_s, o.jobs[0].gpus),
        ("7", Some(1_700_000_000), 1)
    );
    // `set` is checked, and so is `infinite`: neither an unset nor an infinite start_time is
    // a start time, whatever its `number` says.
    for (set, inf) in [(false, false), (true, true), (false, true)] {
        let t = format!(
            r#"{{"jobs": [{{"job_id": 8, "job_state": ["RUNNING"], "nodes": "n1", "tres_alloc_str": "gres/gpu=1", "start_time": {{"set": {set}, "infinite": {inf}, "number": 1700000000}}}}]}}"#
        );
        assert_eq!(squeue_json::parse(&t).unwrap().jobs[0].start_s, None, "set {set}, infinite {inf}");
    }
}

#[test]
fn squeue_json_filters_ignored_so_we_filter() {
    let Some(t) = sample_raw("squeue-json-filters-ignored.txt") else {
        return;
    };
    assert!(t.contains("filtering arguments"));
    let cli = SlurmCli {
        squeue: "squeue".into(),
        scontrol: "scontrol".into(),
        scancel: "scancel".into(),
        source: JobSource::Json,
        timeout: Duration::from_secs(1),
    };
    // No state or node filter is relied on; every row is re-filtered by the daemon.
    assert!(!cli
        .squeue_args()
        .iter()
        .any(|a| a.starts_with("--states") || a.starts_with("-t") || a.starts_with("--nodelist")));
    let json = sample("squeue-json-v0.0.40-slurm23.11-shape.json").unwrap();
    let r = squeue_json::parse(&json).unwrap();
    let judged: Vec<&str> = r.jobs.iter().filter(|j| j.is_judgeable()).map(|j| j.job_id.as_str()).collect();
    assert_eq!(judged, vec!["1230_4"]);
}

#[test]
fn squeue_starttime_literals() {
    // Not comment-stripped: the `###...` overflow literal starts with '#'; skip "# " prose.
    let Some(raw) = sample_raw("squeue-starttime-values.txt") else {
        return;
    };
    let t: String = raw.lines().filter(|l| !l.starts_with("# ")).map(|l| format!("{l}\n")).collect();
    let tz = FixedOffset::east_opt(3600).unwrap();
    let mut seen = 0;
    for line in t.lines() {
        let lit = line.split("<-").next().unwrap().trim();
        if lit.is_empty() {
            continue;
        }
        seen += 1;
        let r = squeue_format::start_time(lit, &tz);
        match lit {
            "N/A" | "Unknown" | "None" => assert_eq!(r, Ok(None), "{lit}: no start time"),
            "2019-01-31T10:35:53" => assert_eq!(r, Ok(Some(1_548_927_353)), "local time, UTC+1 here"),
            _ => assert!(r.is_err(), "{lit:?} must be rejected, not guessed"),
        }
    }
    assert!(seen >= 8);
    for rel in [
        "10:35:53",
        "Tomorr 10:35",
        "Ystday 10:35",
        "Mon 10:35",
        "25 Apr",
        "6 Jun 2012",
        "Mon 12:34:56",
        "###############",
    ] {
        assert!(squeue_format::start_time(rel, &tz).is_err(), "{rel}");
    }
}

#[test]
fn squeue_field_truncation_width_zero_fields() {
    let Some(t) = sample("squeue-field-truncation.txt") else { return };
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("1234")).collect();
    assert_eq!(lines.len(), 2);
    let cols = ["JobID", "NodeList", "tres-alloc"];
    let tz = FixedOffset::east_opt(0).unwrap();
    let cut = squeue_format::parse(lines[0], &cols, &tz);
    assert!(
        cut.jobs.is_empty() && cut.row_errors.len() == 1,
        "a width-less (cut) row is an error, never read"
    );
    let ok = squeue_format::parse(lines[1], &cols, &tz);
    assert!(ok.row_errors.is_empty(), "{:?}", ok.row_errors);
    assert_eq!(ok.jobs[0].nodes.len(), 9);
    assert_eq!(ok.jobs[0].nodes[8], "gpu012");
    assert_eq!(ok.jobs[0].gpus, 32);
    // Our own format: every field `:|` (width 0), and no Name at all (review 15: a name with
    // a line break would print a row of its own).
    let arg = squeue_format::format_arg();
    assert!(
        arg.ends_with(",tres-alloc:|") && !arg.to_ascii_lowercase().contains(",name:"),
        "{arg}"
    );
    for f in squeue_format::FIELDS {
        assert!(arg.contains(&format!("{f}:|")), "{f}");
    }
}

#[test]
fn squeue_name_with_pipe_never_shifts_columns() {
    let Some(t) = sample("squeue-name-with-pipe.txt") else { return };
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("43")).collect();
    let cols = [
        "JobID",
        "Name",
        "UserName",
        "Account",
        "Partition",
        "QOS",
        "State",
        "StartTime",
        "NodeList",
        "tres-alloc",
    ];
    let tz = FixedOffset::east_opt(0).unwrap();
    let r = squeue_format::parse(&rows.join("\n"), &cols, &tz);
    assert_eq!(r.row_errors.len(), 1, "the 'crazy|name' row has one field too many");
    assert!(r.row_errors[0].problem.contains("11 fields"));
    assert_eq!(r.jobs.len(), 1);
    assert_eq!(r.jobs[0].job_id, "4322");
    assert_eq!(r.jobs[0].name, "my run ü 2");
    assert_eq!(r.jobs[0].user, "user1");
    assert_eq!(r.jobs[0].nodes, vec!["node002"]);
    // Name last (a site's own columns, as `enforcer parse squeue --columns` reads them): the
    // pipe stays in the name.
    let mut own = squeue_format::own_columns();
    own.push("Name");
    let line =
        "4321|4321|N/A|N/A|RUNNING|user1|acct1|gpu|normal|2025-11-06T10:00:00|node001|cpu=1,mem=4G,node=1,billing=1,gres/gpu=1|crazy|name";
    let r = squeue_format::parse(line, &own, &tz);
    assert_eq!(r.jobs[0].name, "crazy|name");
    assert_eq!(r.jobs[0].gpus, 1);
}

/// The header squeue prints for the enforcer's own `--Format` (print.c titles, width 0).
fn own_header() -> String {
    "JOBID|JOBID|HET_JOB_ID|HET_JOB_OFFSET|STATE|USER|ACCOUNT|PARTITION|QOS|START_TIME|NODELIST|TRES_ALLOC|".to_string()
}

/// B8 with the stderr gone (a wrapper that drops it, or a squeue that printed nothing there):
/// what is left on stdout, `CLUSTER: cluster1` alone, or nothing at all, is still not "no
/// jobs" from either source. Only a header (format) or a `jobs` list (JSON) shows the queue.
#[test]
fn squeue_timeout_stdout_alone_is_no_data_in_both_sources() {
    let Some(t) = sample("squeue-timeout-exit0.txt") else { return };
    let cluster = t.lines().find(|l| l.starts_with("CLUSTER:")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (source, body) in [
        (JobSource::Format, format!("echo '{cluster}'")),
        (JobSource::Format, "true".to_string()),
        (JobSource::Format, "echo".to_string()),
        (
            JobSource::Format,
            format!("echo '{cluster}'\necho '4321|4321|N/A|N/A|RUNNING|u|a|p|q|N/A|node001|gres/gpu=1|x'"),
        ),
        (
            JobSource::Format,
            format!("echo '{cluster}'\necho '{}'\necho 'CLUSTER: cluster2'", own_header()),
        ),
        (JobSource::Json, format!("echo '{cluster}'")),
        (JobSource::Json, "true".to_string()),
        (JobSource::Json, "echo '{}'".to_string()),
        (JobSource::Json, "echo '[]'".to_string()),
        (JobSource::Json, "echo null".to_string()),
        (JobSource::Json, "echo '{\"jobs\": null}'".to_string()),
        (JobSource::Json, "echo '{\"jobs\": {}}'".to_string()),
        (JobSource::Json, "echo '{\"errors\": []}'".to_string()),
    ] {
        let mut s = slurm_with(dir.path(), &body);
        s.source = source;
        let e = s
            .jobs()
            .expect_err(&format!("{source:?} {body:?} must be no data, never an empty queue"));
        assert!(matches!(e.kind.as_str(), "no_header" | "parse"), "{source:?} {body:?}: {e:?}");
    }
    // The positive readings of an empty queue: a header alone, with or without one CLUSTER:
    // line above it; an empty `jobs` list.
    for body in [
        format!("echo '{}'", own_header()),
        format!("echo '{cluster}'\necho '{}'", own_header()),
    ] {
        let mut s = slurm_with(dir.path(), &body);
        s.source = JobSource::Format;
        let r = s.jobs().unwrap_or_else(|e| panic!("{body}: {e}"));
        assert!(r.jobs.is_empty() && r.row_errors.is_empty(), "{r:?}");
    }
    // The enforcer expects exactly the titles written out above.
    assert_eq!(squeue_format::own_header(), own_header());
    let mut s = slurm_with(dir.path(), "echo '{\"jobs\": []}'");
    assert!(s.jobs().unwrap().jobs.is_empty());
}

fn slurm_with(dir: &std::path::Path, squeue_body: &str) -> SlurmCli {
    SlurmCli {
        squeue: script(dir, "squeue", squeue_body),
        scontrol: "scontrol".into(),
        scancel: "scancel".into(),
        source: JobSource::Json,
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn squeue_timeout_with_exit_0_is_a_failed_read() {
    let Some(t) = sample_raw("squeue-timeout-exit0.txt") else { return };
    let stdout = t.lines().find(|l| l.starts_with("CLUSTER:")).unwrap();
    let stderr: Vec<&str> = t.lines().filter(|l| l.contains("Socket timed out")).collect();
    assert_eq!(stderr.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    for err in stderr {
        let mut s = slurm_with(dir.path(), &format!("echo '{stdout}'\necho '{err}' >&2\nexit 0"));
        let e = s.jobs().unwrap_err();
        assert_eq!(e.kind, "controller_error", "{err}");
    }
    // And an empty but clean answer is an empty job list, not an error.
    let mut s = slurm_with(dir.path(), "echo '{\"jobs\": [], \"errors\": []}'");
    assert!(s.jobs().unwrap().jobs.is_empty());
}

/// The `--Format` fallback through the real command path: our own argv (width-0 fields, Name
/// last), the name-with-pipe row read whole, and the same failed-read rules as JSON.
#[test]
fn squeue_format_fallback_end_to_end() {
    let Some(t) = sample("squeue-name-with-pipe.txt") else { return };
    let name = t
        .lines()
        .find(|l| l.starts_with("4321"))
        .unwrap()
        .split('|')
        .skip(1)
        .take(2)
        .collect::<Vec<_>>()
        .join("|");
    assert_eq!(name, "crazy|name");
    let dir = tempfile::tempdir().unwrap();
    // The enforcer's own format asks for no name, so none can shift a column there; the
    // daemon reads the same job with its name unknown.
    let row = "4321|4321|N/A|N/A|RUNNING|user1|acct1|gpu|normal|2025-11-06T10:00:00|node001|cpu=1,mem=4G,node=1,billing=1,gres/gpu=1|";
    let header = own_header();
    let mut s = slurm_with(
        dir.path(),
        &format!("printf '%s\\n' \"$@\" > \"$(dirname \"$0\")/argv\"\necho '{header}'\necho '{row}'"),
    );
    s.source = JobSource::Format;
    let r = s.jobs().unwrap();
    assert!(r.row_errors.is_empty(), "{:?}", r.row_errors);
    assert_eq!((r.jobs[0].job_id.as_str(), r.jobs[0].gpus), ("4321", 1));
    assert!(r.jobs[0].unknown_fields.iter().any(|f| f == "name"), "{:?}", r.jobs[0]);
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    assert!(
        !argv.lines().any(|a| a == "--noheader") && argv.lines().any(|a| a == squeue_format::format_arg()),
        "the header is asked for (it shows the queue was read): {argv}"
    );
    let mut s = slurm_with(
        dir.path(),
        "echo 'CLUSTER: cluster1'\necho 'slurm_load_jobs error: Socket timed out on send/recv operation' >&2",
    );
    s.source = JobSource::Format;
    assert_eq!(s.jobs().unwrap_err().kind, "controller_error");
}

#[test]
fn squeue_env_overrides_are_scrubbed() {
    let Some(t) = sample("squeue-env-overrides.txt") else { return };
    let mut names: Vec<String> = Vec::new();
    for l in t.lines() {
        for w in l.split(|c: char| c.is_whitespace() || c == '/' || c == '=') {
            if (w.starts_with("SQUEUE_") && w.len() > 7) || w == "SLURM_TIME_FORMAT" || w == "SLURM_CLUSTERS" {
                names.push(w.trim_end_matches("...").to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    assert!(names.len() >= 10, "{names:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut s = slurm_with(dir.path(), "env > \"$(dirname \"$0\")/env.txt\"\necho '{\"jobs\": []}'");
    for n in &names {
        std::env::set_var(n, "poison");
    }
    s.jobs().unwrap();
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    for n in &names {
        assert!(!env.lines().any(|l| l.starts_with(&format!("{n}="))), "{n} reached squeue");
        assert!(SQUEUE_ENV_REMOVE
            .iter()
            .any(|r| r.strip_suffix('*').map_or(r == n, |p| n.starts_with(p))));
    }
    assert!(env.lines().any(|l| l == "LC_ALL=C"));
}

#[test]
fn scontrol_show_job_d_gres_tres_and_nodes() {
    let Some(t) = sample("scontrol-show-job-d-gres.txt") else { return };
    let tres_lines: Vec<&str> = t.lines().map(str::trim).filter(|l| l.starts_with("TRES=")).collect();
    let counts: Vec<u32> = tres_lines.iter().map(|l| tres::parse(l).unwrap().gpus).collect();
    assert_eq!(
        counts,
        vec![4, 1, 1],
        "(a) 4 GPUs, (b) 1, (c) 1 despite gres/gg and the typed breakdown"
    );
    let nodelists: Vec<&str> = t.lines().filter_map(|l| l.trim().strip_prefix("NodeList=")).collect();
    assert_eq!(hostlist::parse(nodelists[0]).unwrap(), vec!["node006"]);
    assert!(
        hostlist::parse(nodelists[1]).unwrap().is_empty(),
        "(e) NodeList=(null): no allocation yet"
    );
    assert_eq!(hostlist::parse("gpu[04-07]").unwrap().len(), 4, "one Nodes= line for several nodes");
}

/// The per-node GRES detail forms of `scontrol -d show job` (B10) read as squeue JSON's
/// `gres_detail` strings: the index lists of `GRES_IDX=` (2019) and `GRES=` lines, typed and
/// untyped items, a non-GPU `CNT:` item ignored, an empty `GRES=` (no GPU), and the public
/// variants quoted in the sample's comments.
#[test]
fn scontrol_show_job_d_gres_index_lists() {
    let Some(raw) = sample_raw("scontrol-show-job-d-gres.txt") else {
        return;
    };
    // The records, then the public variants quoted in the closing comment (the comments
    // above the records only name the syntaxes).
    let variants = raw.find("# Other public variants").map_or("", |at| &raw[at..]);
    let t = format!("{}\n{variants}", enforcer::parse::strip_comments(&raw));
    let values: Vec<&str> = t
        .split_whitespace()
        .map(|w| w.trim_start_matches('"'))
        .filter_map(|w| w.strip_prefix("GRES_IDX=").or_else(|| w.strip_prefix("GRES=")))
        .map(|v| v.trim_end_matches(['"', ',', '.']))
        .collect();
    assert_eq!(
        values,
        [
            "gpu(IDX:0,2-3,5)",
            "gpu(IDX:5)",
            "gpu:rtx2080:1(IDX:1),gg:g0(CNT:1)",
            "",
            "gpu(IDX:0-7)",
            "gpu:h200:2(IDX:0-1)",
            "gpu:a100:1(IDX:0),gpu:v100:2(IDX:1-2)",
        ],
        "the GRES detail values of the sample, in order"
    );
    let lists: Vec<Option<Vec<u32>>> = values.iter().map(|v| gres_detail::gpu_indices(v).unwrap()).collect();
    assert_eq!(
        lists,
        [
            Some(vec![0, 2, 3, 5]),
            Some(vec![5]),
            Some(vec![1]),
            Some(vec![]),
            Some((0..8).collect()),
            Some(vec![0, 1]),
            Some(vec![0, 1, 2]),
        ],
        "(a) GRES_IDX= 0,2-3,5; (b) 5; (c) the typed GPU at 1, gg ignored; (d) empty: no GPU"
    );
    // Each index list agrees with the count the same string gives.
    for (v, l) in values.iter().zip(&lists) {
        assert_eq!(gres_detail::gpu_count(v).unwrap() as usize, l.as_ref().unwrap().len(), "{v}");
    }
}

#[test]
fn squeue_array_ids_are_strings() {
    let Some(t) = sample("squeue-array-ids.txt") else { return };
    let ids: Vec<&str> = t.lines().filter_map(|l| l.split_whitespace().next()).collect();
    for want in [
        "2653343_[3-4%2]",
        "2651316",
        "2653325_1",
        "2653325_2",
        "57829110_[5-100]",
        "123456_[9201-10000%500]",
        "1080_1",
    ] {
        assert!(ids.contains(&want), "{want}");
    }
    // Format rows built from the sample's ids keep each id as an exact string.
    let tz = FixedOffset::east_opt(0).unwrap();
    let own = squeue_format::own_columns();
    let rows = [
        ("2653343", "2653343_[3-4%2]", "PENDING", ""),
        ("2653325", "2653325_1", "RUNNING", "node053"),
        ("2653326", "2653325_2", "RUNNING", "node054"),
        ("1081", "1080_1", "RUNNING", "tux0"),
    ];
    let text: String = rows
        .iter()
        .map(|(raw, id, st, n)| format!("{raw}|{id}|N/A|N/A|{st}|user3|a|defq|normal|2025-01-01T00:00:00|{n}|gres/gpu=1|\n"))
        .collect();
    let r = squeue_format::parse(&text, &own, &tz);
    assert!(r.row_errors.is_empty(), "{:?}", r.row_errors);
    let got: Vec<(&str, bool)> = r.jobs.iter().map(|j| (j.job_id.as_str(), j.is_judgeable())).collect();
    assert_eq!(
        got,
        vec![
            ("2653343_[3-4%2]", false),
            ("2653325_1", true),
            ("2653325_2", true),
            ("1080_1", true)
        ]
    );
    assert_eq!(r.jobs[2].raw_id, Some(2653326), "the raw id of the task, for cgroup lookup");
}

#[test]
fn squeue_hetjob_components_are_distinct_jobs() {
    let Some(t) = sample("squeue-hetjob.txt") else { return };
    assert!(t.contains("93+1") && t.contains("scancel 93 "));
    let json = r#"{"jobs": [
      {"job_id": 93, "het_job_id": {"set": true, "number": 93}, "het_job_offset": {"set": true, "number": 0}, "job_state": ["RUNNING"], "nodes": "nid00001", "tres_alloc_str": "gres/gpu=1"},
      {"job_id": 94, "het_job_id": {"set": true, "number": 93}, "het_job_offset": {"set": true, "number": 1}, "job_state": ["RUNNING"], "nodes": "nid00011", "tres_alloc_str": "gres/gpu=1"}]}"#;
    let r = squeue_json::parse(json).unwrap();
    let ids: Vec<(&str, Option<u64>)> = r.jobs.iter().map(|j| (j.job_id.as_str(), j.raw_id)).collect();
    assert_eq!(
        ids,
        vec![("93+0", Some(93)), ("93+1", Some(94))],
        "the leader is 93+0, never bare 93"
    );
    assert!(
        r.jobs.iter().all(|j| enforcer::parse::is_het_component(&j.job_id)),
        "every component is known as one, so the planner never drains or cancels it"
    );
    // The --Format fallback: JobArrayID is squeue's %i, which prints the component as 93+1.
    let tz = chrono::FixedOffset::east_opt(0).unwrap();
    let line = "94|93+1|93|1|RUNNING|user1|a|debug|normal|N/A|nid00011|gres/gpu=1|";
    let f = squeue_format::parse(line, &squeue_format::own_columns(), &tz);
    assert!(f.row_errors.is_empty(), "{f:?}");
    assert_eq!((f.jobs[0].job_id.as_str(), f.jobs[0].raw_id), ("93+1", Some(94)));
}

#[test]
fn slurm_2605_sluid_cgroup_layout() {
    let Some(t) = sample("slurm-26.05-sluid.txt") else { return };
    let sluids: Vec<&str> = t
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with('s') && w.len() == 14)
        .collect();
    assert_eq!(sluids, vec!["sBR1JB8J1YM400", "sEKNKTV3WPV500"]);
    assert!(sluids.iter().all(|s| cgroup::is_sluid(s)));
    let paths: Vec<&str> = t
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("/sys/fs/cgroup") || w.starts_with("0::"))
        .collect();
    assert_eq!(paths.len(), 3);
    let as_proc = |p: &str| {
        if p.starts_with("0::") {
            p.to_string()
        } else {
            format!("0::{}", p.trim_start_matches("/sys/fs/cgroup"))
        }
    };
    assert_eq!(
        cgroup::parse(&as_proc(paths[0])).unwrap(),
        Some(CgroupJob::JobId(123)),
        "pre-26.05 job_123"
    );
    assert_eq!(
        cgroup::parse(&as_proc(paths[1])).unwrap(),
        Some(CgroupJob::Sluid("sEKNKTV3WPV500".into())),
        "26.05 default"
    );
    assert_eq!(
        cgroup::parse(paths[2]).unwrap(),
        Some(CgroupJob::Sluid("sEKNKTV3WPV500".into())),
        "a GPU process's /proc/PID/cgroup"
    );
}

#[test]
fn hostlists_expand_in_order() {
    let Some(t) = sample("hostlists.txt") else { return };
    let mut checked = 0;
    for line in t.lines() {
        let Some((expr, rest)) = line.split_once("->") else { continue };
        let expr = expr.trim();
        let expect = rest.split("  ").find(|s| !s.trim().is_empty()).unwrap().trim();
        let expr = if expr == "\"\"" { "" } else { expr };
        let got = hostlist::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        checked += 1;
        if expect == "no nodes" || expect.starts_with("no nodes") {
            assert!(got.is_empty(), "{expr}");
        } else if expect.contains("...") {
            assert_eq!(got.len(), 1024, "{expr}");
            assert_eq!((got[0].as_str(), got[1023].as_str()), ("linux0000", "linux1023"));
        } else if let Some(n) = expect
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<usize>().ok())
            .or_else(|| expect.strip_prefix("64*42").map(|_| 64 * 42))
        {
            assert_eq!(got.len(), n, "{expr}");
        } else if expect.starts_with("64*42") {
            assert_eq!(got.len(), 2688, "{expr}");
        } else {
            let want: Vec<&str> = expect.split_whitespace().collect();
            assert_eq!(got, want, "{expr}");
        }
    }
    assert_eq!(checked, 15);
    let rb = hostlist::parse("rack[0-63]_blade[0-41]").unwrap();
    assert_eq!(
        (rb.len(), rb[0].as_str(), rb[1].as_str(), rb[42].as_str()),
        (2688, "rack0_blade0", "rack0_blade1", "rack1_blade0")
    );
    assert_eq!(hostlist::parse("foo-[10-20]-[01-02]").unwrap()[..2], ["foo-10-01", "foo-10-02"]);
    let raw = sample_raw("hostlists.txt").unwrap();
    let bad = raw.lines().find(|l| l.contains("malformed inputs")).unwrap();
    let bad: Vec<&str> = bad.split(':').nth(1).unwrap().split_whitespace().collect();
    assert_eq!(bad.len(), 6);
    for b in bad {
        assert!(hostlist::parse(b).is_err(), "{b} must be rejected");
    }
}

#[test]
fn tres_gpu_counts() {
    let Some(t) = sample("tres-strings.txt") else { return };
    let mut n = 0;
    for line in t.lines() {
        let s = line.split_whitespace().next().unwrap_or("");
        let want = line
            .split("->")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|w| w.parse::<u32>().ok());
        let Some(want) = want else { continue };
        assert_eq!(tres::parse(s).unwrap().gpus, want, "{s}");
        n += 1;
    }
    assert_eq!(n, 6);
    let raw = sample_raw("tres-strings.txt").unwrap();
    let gpumem = raw
        .lines()
        .find(|l| l.contains("gres/gpumem"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(tres::parse(gpumem).unwrap().gpus, 0, "gpumem/gpuutil are not GPU counts");
    let shard = raw
        .lines()
        .find(|l| l.starts_with("TRES=gres/shard"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(tres::parse(shard).unwrap().gpus, 0, "shard is a fraction of a GPU, not a GPU");
    // AutoDetect=nvml type names: lower case, '_' for spaces, hyphens and dots kept, MIG
    // profiles such as nvidia_a100_3g.20gb; typed entries still only count without an untyped one.
    assert!(raw.contains("nvidia_a100_3g.20gb") && raw.contains("hyphen"));
    let typed = "cpu=4,gres/gpu:nvidia_a100_3g.20gb=2,gres/gpu:a100-pcie-40gb=1";
    let t = tres::parse(typed).unwrap();
    assert_eq!(t.gpus, 3, "{typed}");
    assert_eq!(t.entries["gres/gpu:a100-pcie-40gb"], "1");
    assert_eq!(tres::parse(&format!("{typed},gres/gpu=3")).unwrap().gpus, 3);
}
