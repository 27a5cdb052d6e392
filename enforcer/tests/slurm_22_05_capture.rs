//! Golden tests over our own captures from a real Slurm 22.05.8 on a loopback cluster
//! (`tests/data/slurm-22.05-loopback/README.md` says how they were made).

use enforcer::parse::{scontrol_node, squeue_format, squeue_json, SlurmJob};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/slurm-22.05-loopback");

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}/{name}")).unwrap_or_else(|e| panic!("{DIR}/{name}: {e}"))
}

fn job<'a>(jobs: &'a [SlurmJob], id: &str) -> &'a SlurmJob {
    jobs.iter()
        .find(|j| j.job_id == id)
        .unwrap_or_else(|| panic!("job {id} not read: {jobs:?}"))
}

#[test]
fn squeue_json_without_gpu_tres_takes_gpus_from_gres_detail() {
    let r = squeue_json::parse(&read("squeue.json")).unwrap();
    assert!(r.row_errors.is_empty(), "{:?}", r.row_errors);
    assert_eq!(r.jobs.len(), 7);
    let train = job(&r.jobs, "5");
    assert_eq!(
        (train.state.as_str(), train.gpus, train.nodes.as_slice()),
        ("RUNNING", 2, &["node1".to_string()][..])
    );
    assert_eq!(
        (train.name.as_str(), train.user.as_str(), train.partition.as_str()),
        ("train", "root", "gpu")
    );
    assert!(train.is_judgeable());
    // Every field an exemption reads is given as text, empty or not.
    assert!(r.jobs.iter().all(|j| j.unknown_fields.is_empty()), "{:?}", r.jobs);
    let idle = job(&r.jobs, "6");
    assert_eq!((idle.state.as_str(), idle.gpus), ("RUNNING", 1));
    // The pending array's record and the cancelled jobs are read but never judged.
    let arr = job(&r.jobs, "7");
    assert_eq!((arr.state.as_str(), arr.gpus), ("PENDING", 0));
    for id in ["1", "2", "3", "4", "7"] {
        assert!(!job(&r.jobs, id).is_judgeable(), "{id}");
    }
    assert_eq!(r.jobs.iter().filter(|j| j.state == "CANCELLED").count(), 4);
}

#[test]
fn squeue_json_gres_detail_gives_each_running_jobs_device_indices() {
    let r = squeue_json::parse(&read("squeue.json")).unwrap();
    // `gpu:2(IDX:0-1)` and `gpu:1(IDX:2)`: one list per node, the only node.
    assert_eq!(job(&r.jobs, "5").gres_idx, vec![Some(vec![0, 1])]);
    assert_eq!(job(&r.jobs, "6").gres_idx, vec![Some(vec![2])]);
    assert_eq!(
        enforcer::attribution::single_node_indices(job(&r.jobs, "6")),
        Some(&[2][..]),
        "a one-node job's list is the one the device-index rule reads"
    );
    // The pending array and the cancelled jobs have an empty gres_detail: no list.
    for id in ["1", "2", "3", "4", "7"] {
        assert!(job(&r.jobs, id).gres_idx.is_empty(), "{id}");
    }
}

#[test]
fn squeue_format_header_is_ours_on_22_05_and_tres_shows_no_gpus() {
    let text = read("squeue-format.txt");
    assert_eq!(text.lines().next().unwrap(), squeue_format::own_header());
    let (r, cluster) = squeue_format::parse_own(&text, &chrono::Utc).unwrap();
    assert_eq!(cluster, None);
    assert!(r.row_errors.is_empty(), "{:?}", r.row_errors);
    assert_eq!(r.jobs.len(), 4);
    let train = job(&r.jobs, "127");
    assert_eq!(
        (train.state.as_str(), train.nodes.as_slice()),
        ("RUNNING", &["node1".to_string()][..])
    );
    // No `gres/gpu` in the TRES: the --Format source cannot see this job's GPUs.
    assert_eq!(train.gpus, 0);
    // The enforcer's own format has no name and no comment column: both are unknown.
    assert_eq!(train.unknown_fields, ["name", "comment"]);
    assert_eq!(job(&r.jobs, "129_[0-1]").state, "PENDING");
    // Job 130's name holds a line break and a made-up row; without names it is one pending
    // row, and no job 999 exists.
    assert_eq!(job(&r.jobs, "130").state, "PENDING");
    assert!(r.jobs.iter().all(|j| j.job_id != "999"), "{:?}", r.jobs);
}

/// Review 15, on real output: with the job's name as the last column (the format before),
/// a name holding a line break prints a line that reads as a job of its own, RUNNING on
/// node1; that format's header is now refused as no data.
#[test]
fn a_name_with_a_line_break_forges_a_row_in_the_format_with_names() {
    let text = read("squeue-format-name-last.txt");
    let mut columns = squeue_format::own_columns();
    columns.push("Name");
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let r = squeue_format::parse(&body, &columns, &chrono::Utc);
    let forged = job(&r.jobs, "999");
    assert_eq!(
        (forged.state.as_str(), forged.nodes.as_slice()),
        ("RUNNING", &["node1".to_string()][..])
    );
    assert_eq!(job(&r.jobs, "130").name, "x");
    let e = squeue_format::parse_own(&text, &chrono::Utc).unwrap_err();
    assert!(e.contains("NAME column"), "{e}");
}

#[test]
fn scontrol_show_node_reads_the_idle_node() {
    let n = scontrol_node::parse(&read("scontrol-show-node.txt")).unwrap();
    assert_eq!(n.name, "node1");
    assert_eq!(n.state, ["ALLOCATED"]);
    assert!(!n.is_special(), "{n:?}");
    assert_eq!(n.reason, None);
}

#[test]
fn enforcer_parse_squeue_reads_the_capture_as_the_daemon_does() {
    let bin = env!("CARGO_BIN_EXE_enforcer");
    let run = |text: &str| {
        let mut child = std::process::Command::new(bin)
            .args(["parse", "squeue", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let text = read("squeue-format.txt");
    // With its header: four jobs, no row error (the header is not a row).
    let out = run(&text);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 4, "{v}");
    assert_eq!(v["row_errors"].as_array().unwrap().len(), 0, "{v}");
    // The header alone is an empty queue; a CLUSTER: line above it is skipped and named.
    let header = text.lines().next().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&run(&format!("{header}\n")).stdout).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "{v}");
    let v: serde_json::Value = serde_json::from_slice(&run(&format!("CLUSTER: c1\n{text}")).stdout).unwrap();
    assert_eq!(
        (v["jobs"].as_array().unwrap().len(), v["cluster_line_skipped"].as_str()),
        (4, Some("c1")),
        "{v}"
    );
    // Without the header it is no data, as the daemon reads it.
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let out = run(&body);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("no data") && said.contains("expected the header line"), "{said}");
}
