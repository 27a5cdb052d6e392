//! In process: drains and cancels are held while the audit log or the state file cannot be
//! written; the metrics of a cycle that evaluated nothing are not the last good cycle's; a
//! corrupt state file is moved aside; the cycle report counts the jobs it skipped.

mod common;

use common::cluster::{config_with, job, Cluster, FakeSlurm, NoProc, NODE, T0};
use enforcer::config::Config;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi::{AppsTable, GpuReading};
use enforcer::parse::SlurmJob;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

/// `gpus` idle GPUs (0 % util, 3 MiB used, no process); `no_data` makes a read say so.
#[derive(Clone)]
struct IdleGpus {
    gpus: u16,
    no_data: Rc<Cell<bool>>,
    reads: u32,
}

impl Telemetry for IdleGpus {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.reads += 1;
        if self.no_data.get() {
            return TelemetryRead {
                no_data: Some("timeout".into()),
                ..Default::default()
            };
        }
        TelemetryRead {
            gpus: (0..self.gpus)
                .map(|i| GpuReading {
                    index: Some(i),
                    uuid: Some(format!("GPU-{i}")),
                    util_pct: Some(0.0),
                    mem_used_mib: Some(3.0),
                    mem_total_mib: Some(81920.0),
                    // Jitter, so no window looks frozen.
                    power_w: Some(60.0 + f64::from(self.reads % 3)),
                    power_limit_w: Some(400.0),
                    ..Default::default()
                })
                .collect(),
            apps: Some(AppsTable::default()),
            ..Default::default()
        }
    }
}

/// Enforce mode; alert at once, drain after 10 min, cancel after 20 min, notice 5 min.
const POLICY: &str = r#"
[policy]
window = "10m"
warmup = "10m"
interval = "60s"
notice = "5m"
stages = [{ after = "0s", verdict = "alert" }, { after = "10m", verdict = "drain" }, { after = "20m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

fn config(dir: &Path) -> Config {
    config_with(POLICY, dir, "enforce", "")
}

type D = Daemon<FakeSlurm, IdleGpus, RealExecutor<FakeSlurm>>;

struct World {
    cluster: Rc<RefCell<Cluster>>,
    no_data: Rc<Cell<bool>>,
}

fn daemon(dir: &Path, jobs: Vec<SlurmJob>, gpus: u16) -> (World, D) {
    let cluster = Rc::new(RefCell::new(Cluster {
        jobs,
        node_state: "MIXED".into(),
        honour_drain: true,
        ..Default::default()
    }));
    let no_data = Rc::new(Cell::new(false));
    let exec = RealExecutor {
        slurm: FakeSlurm(cluster.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(1),
    };
    let tel = IdleGpus {
        gpus,
        no_data: no_data.clone(),
        reads: 0,
    };
    let d = Daemon::new(config(dir), FakeSlurm(cluster.clone()), tel, exec, Box::new(NoProc), T0);
    (World { cluster, no_data }, d)
}

/// Cycles `from`, `from + 60`, … (`n` of them).
fn cycles(d: &mut D, from: i64, n: i64) {
    for i in 0..n {
        d.cycle(from + i * 60);
    }
}

fn calls(w: &World, prefix: &str) -> usize {
    w.cluster.borrow().calls.iter().filter(|c| c.starts_with(prefix)).count()
}

fn metric(d: &D, line_start: &str) -> f64 {
    let page = d.metrics.render();
    let line = page
        .lines()
        .find(|l| l.starts_with(line_start) && l[line_start.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("{line_start} not on the page:\n{page}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn audit_records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `/dev/full` (every write fails with ENOSPC), or `None` (test skipped) where it is absent.
fn dev_full() -> Option<&'static Path> {
    let p = Path::new("/dev/full");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: /dev/full not on this system");
        None
    }
}

#[test]
fn no_drain_while_the_audit_log_cannot_be_written_and_drains_once_it_can() {
    let Some(full) = dev_full() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(full, dir.path().join("audit.jsonl")).unwrap();
    let (w, mut d) = daemon(dir.path(), vec![job("4242", 4242, 1, &[NODE])], 1);
    cycles(&mut d, T0, 40);
    assert_eq!(calls(&w, "drain"), 0, "{:?}", w.cluster.borrow().calls);
    assert_eq!(calls(&w, "scancel"), 0);
    assert!(d.metrics.skipped.get("records_unwritable").copied().unwrap_or(0) > 0);
    assert_eq!(d.records_unwritable(), Some("audit"));
    assert!(metric(&d, "gpu_reaper_record_write_failures_total{file=\"audit\"}") > 0.0);
    assert_eq!(metric(&d, "gpu_reaper_record_write_failures_total{file=\"state\"}"), 0.0);
    assert_eq!(metric(&d, "gpu_reaper_records_unwritable"), 1.0);
    // The disk is back: the next write (the held drain's skip record) succeeds, and the drain
    // follows on the cycle after.
    std::fs::remove_file(dir.path().join("audit.jsonl")).unwrap();
    cycles(&mut d, T0 + 40 * 60, 3);
    assert_eq!(calls(&w, "drain"), 1, "{:?}", w.cluster.borrow().calls);
    assert_eq!(d.records_unwritable(), None);
    assert_eq!(metric(&d, "gpu_reaper_records_unwritable"), 0.0);
    let a = audit_records(dir.path());
    let held: Vec<_> = a.iter().filter(|r| r["skip"] == "records_unwritable").collect();
    assert_eq!(held.len(), 1, "the first skip record written after recovery: {a:?}");
    assert_eq!(held[0]["action"], "drain");
}

#[test]
fn no_cancel_once_the_audit_log_fails_after_the_drain() {
    let Some(full) = dev_full() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (w, mut d) = daemon(dir.path(), vec![job("4242", 4242, 1, &[NODE])], 1);
    // Up to the drain, with the audit log fine.
    let mut t = T0;
    while calls(&w, "drain") == 0 {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 60 * 60, "no drain within an hour");
    }
    std::fs::remove_file(dir.path().join("audit.jsonl")).unwrap();
    std::os::unix::fs::symlink(full, dir.path().join("audit.jsonl")).unwrap();
    cycles(&mut d, t, 60);
    assert_eq!(calls(&w, "scancel"), 0, "{:?}", w.cluster.borrow().calls);
    assert_eq!(calls(&w, "admincomment"), 0);
    assert_eq!(w.cluster.borrow().jobs.len(), 1, "the job still runs");
}

#[test]
fn the_evidence_record_of_a_cancel_is_written_before_the_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let (w, mut d) = daemon(dir.path(), vec![job("4242", 4242, 1, &[NODE])], 1);
    cycles(&mut d, T0, 60);
    assert_eq!(calls(&w, "scancel"), 1, "{:?}", w.cluster.borrow().calls);
    let a = audit_records(dir.path());
    let pos = |record: &str, action: &str| {
        a.iter()
            .position(|r| r["record"] == record && r["action"] == action)
            .unwrap_or_else(|| panic!("no {record} {action} in {a:?}"))
    };
    for action in ["drain", "cancel"] {
        assert!(pos("starting", action) < pos("action", action), "{action}");
        let s = &a[pos("starting", action)];
        assert_eq!(s["job_id"], "4242");
        assert_eq!(s["evidence"]["signature"], "idle", "{s}");
    }
}

#[test]
fn no_drain_while_the_state_file_cannot_be_saved() {
    let dir = tempfile::tempdir().unwrap();
    // A directory in the place of the state file's temporary file: every save fails. (A
    // directory at state.json itself is unreadable at start, so it is moved aside.)
    let tmp = dir.path().join(".state.json.tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let (w, mut d) = daemon(dir.path(), vec![job("4242", 4242, 1, &[NODE])], 1);
    cycles(&mut d, T0, 40);
    assert_eq!(calls(&w, "drain"), 0, "{:?}", w.cluster.borrow().calls);
    assert_eq!(d.records_unwritable(), Some("state"));
    assert!(metric(&d, "gpu_reaper_record_write_failures_total{file=\"state\"}") >= 40.0);
    let a = audit_records(dir.path());
    assert!(
        a.iter().any(|r| r["skip"] == "records_unwritable" && r["action"] == "drain"),
        "{a:?}"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
    cycles(&mut d, T0 + 40 * 60, 2);
    assert_eq!(calls(&w, "drain"), 1);
    assert!(dir.path().join("state.json").is_file());
}

#[test]
fn a_skipped_cycle_leaves_no_stale_gauges_and_last_evaluated_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (w, mut d) = daemon(dir.path(), vec![job("1", 1, 1, &[NODE])], 1);
    cycles(&mut d, T0, 3);
    let good = T0 + 2 * 60;
    assert_eq!(metric(&d, "gpu_reaper_jobs_evaluated"), 1.0);
    assert_eq!(metric(&d, "gpu_reaper_last_evaluated_timestamp_seconds"), good as f64);
    assert!(d.metrics.render().contains("gpu_reaper_findings{"));
    // squeue fails: the cycle is counted, nothing is evaluated, no finding is shown.
    w.cluster.borrow_mut().squeue_fails = true;
    cycles(&mut d, good + 60, 2);
    assert_eq!(metric(&d, "gpu_reaper_last_cycle_timestamp_seconds"), (good + 120) as f64);
    assert_eq!(metric(&d, "gpu_reaper_last_evaluated_timestamp_seconds"), good as f64);
    assert_eq!(metric(&d, "gpu_reaper_jobs_evaluated"), 0.0);
    let page = d.metrics.render();
    assert!(!page.contains("gpu_reaper_findings{"), "{page}");
    assert!(!page.contains("gpu_reaper_wasted_gpu_hours{"), "{page}");
    // squeue back, nvidia-smi without data: the jobs are judged (insufficient evidence) but
    // nothing was evaluated on fresh telemetry.
    w.cluster.borrow_mut().squeue_fails = false;
    w.no_data.set(true);
    d.cycle(good + 180);
    assert_eq!(metric(&d, "gpu_reaper_last_evaluated_timestamp_seconds"), good as f64);
    w.no_data.set(false);
    d.cycle(good + 240);
    assert_eq!(metric(&d, "gpu_reaper_last_evaluated_timestamp_seconds"), (good + 240) as f64);
}

#[test]
fn a_corrupt_state_file_is_moved_aside_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state.json"), "{\"version\": 3, truncated").unwrap();
    let (_w, mut d) = daemon(dir.path(), vec![job("1", 1, 1, &[NODE])], 1);
    d.cycle(T0);
    let aside = dir.path().join(format!("state.json.corrupt-{T0}"));
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), "{\"version\": 3, truncated");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("state.json")).unwrap()).unwrap();
    assert_eq!(saved["saved_s"], T0);
}

#[test]
fn the_cycle_report_counts_every_job_it_did_not_evaluate() {
    let dir = tempfile::tempdir().unwrap();
    let mut no_start = job("2", 2, 3, &[NODE]);
    no_start.start_s = None;
    let mut configuring = job("3", 3, 1, &[NODE]);
    configuring.state_flags = vec!["CONFIGURING".into()];
    let (w, mut d) = daemon(dir.path(), vec![job("1", 1, 1, &[NODE]), no_start, configuring], 3);
    // Jobs of 1 and 3 GPUs on three GPUs with no processes: neither can be placed.
    let rep = d.cycle(T0);
    let mut skipped = rep.jobs_skipped.clone();
    skipped.sort();
    assert_eq!(
        skipped,
        vec![
            ("1".to_string(), "ambiguous_attribution"),
            ("2".to_string(), "ambiguous_attribution"),
            ("3".to_string(), "not_judgeable"),
        ]
    );
    assert!(rep.findings.is_empty());
    // Without telemetry nothing is placed; with no start time a placed job (the only GPU job,
    // holding every GPU) is not judged.
    w.no_data.set(true);
    let rep = d.cycle(T0 + 60);
    assert_eq!(rep.jobs_skipped.len(), 3, "{:?}", rep.jobs_skipped);
    assert!(rep.jobs_skipped.iter().any(|(j, w)| j == "1" && *w == "not_placed"));
    w.no_data.set(false);
    w.cluster.borrow_mut().jobs.retain(|j| j.job_id == "2");
    let rep = d.cycle(T0 + 120);
    assert_eq!(rep.jobs_skipped, vec![("2".to_string(), "no_start_time")]);
}

/// Input: one idle 1-GPU job, window and warmup 10m, one cycle a minute for 25 minutes.
/// Expected: `gpu_reaper_wasted_gpu_hours` ("GPU-hours wasted in current breaches") has no
/// series while the job is only `watching` (its samples breach but do not yet cover a
/// window: no breach is confirmed), and a positive one once it is at alert (operator trial
/// 19: the gauge counted watching jobs).
#[test]
fn the_wasted_hours_gauge_counts_confirmed_breaches_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_w, mut d) = daemon(dir.path(), vec![job("1", 1, 1, &[NODE])], 1);
    let (mut watching, mut alerting) = (0, 0);
    for i in 0..25 {
        d.cycle(T0 + i * 60);
        let page = d.metrics.render();
        let at = |v: &str| {
            page.lines()
                .any(|l| l.starts_with(&format!("gpu_reaper_findings{{verdict=\"{v}\"")))
        };
        let wasted = page.lines().find(|l| l.starts_with("gpu_reaper_wasted_gpu_hours{"));
        if at("watching") {
            watching += 1;
            assert_eq!(wasted, None, "cycle {i}, watching:\n{page}");
        }
        if at("alert") {
            alerting += 1;
            let h: f64 = wasted
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            assert!(h > 0.0, "cycle {i}, alert:\n{page}");
        }
    }
    assert!(
        watching > 0 && alerting > 0,
        "control: watching {watching} cycles, alert {alerting}"
    );
}
