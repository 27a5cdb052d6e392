//! The twelfth adversarial review, enforcer side: the last fixes (notices counting the cancel
//! from a standing drain, `Kept::marked`, dropping `Kept::by_elimination` placements under
//! the `Gres=` floor, `slurm_gpus` persisted). Each ignored test fails on the enforcer as
//! reviewed and shows one finding.
//!
//! * `an_unmarked_kept_placement_is_not_marked_by_a_cycle_without_telemetry`: the eleventh
//!   review's fix drops an unmarked kept placement (an older state file) in
//!   `revalidate_kept`, but that runs only when nvidia-smi answered. A first cycle after the
//!   upgrade without GPU data carries the unmarked entry over (`kept_for`) and the rebuild of
//!   `Daemon::kept` writes it back with `marked: true` and no `by_elimination`: from then on it
//!   is trusted as a placement by processes and the `Gres=` floor never drops it.
//! * `a_notice_sent_in_the_drain_cycle_does_not_understate_when_the_cancel_comes`: a notice
//!   that goes out (late, after failed attempts) in the very cycle whose plan drains the node
//!   has no standing drain yet (`drain_found` is set the next cycle), so `notice::text`
//!   announces a drain "in about 1m" (one interval away) and counts the cancel from that
//!   drain plus an interval plus a window. The drain is made now, found one interval later:
//!   the cancel comes one interval earlier than the notice says.
//! * `a_hostile_would_drain_time_in_the_state_file_does_not_panic`: observe mode's
//!   confirmations compute `made_s + interval` unchecked (daemon.rs; the new notice code next
//!   to it saturates): a state file with `made_s` near `i64::MAX` panics the daemon.
//! * `a_hostile_suspect_alert_time_in_the_state_file_does_not_panic`: the planner computes
//!   `now_s - suspect_alerted_s` unchecked: a state file with `i64::MIN` there panics the
//!   daemon once the suspect-collector rule trips.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, OneIdleGpu, NODE, POLICY_DRAIN_32M, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, Outcome, RealExecutor};
use enforcer::parse::smi::{AppsTable, GpuReading};
use enforcer::plan::Action;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::RefCell;
use std::rc::Rc;

/// 20-minute window, alert at once, drain after 30 minutes, cancel after 60, `notice` 10
/// minutes, idle may be cancelled.
const POLICY: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "10m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// PIDs 100 and 101 are job 10's; PID 999 (job 40's) does not exist in this /proc.
struct Procs10;
impl ProcReader for Procs10 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 100 | 101).then(|| "0::/system.slice/slurmstepd.scope/job_10/step_0/user/task_0\n".to_string())
    }
}

/// A node of 4 GPUs whose nvidia-smi lists GPUs 0-2 (GPU 3, job 40's, is hidden): GPUs 0 and 1
/// busy with job 10's processes (PIDs 100, 101), GPU 2 free and idle. The first
/// `no_data_reads` reads have no GPU data (nvidia-smi timed out).
struct ShortList {
    cycle: u32,
    no_data_reads: u32,
}

impl Telemetry for ShortList {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
        if self.cycle <= self.no_data_reads {
            return TelemetryRead {
                no_data: Some("timeout".into()),
                ..Default::default()
            };
        }
        let gpu = |i: u16, busy: bool| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            util_pct: Some(if busy { 95.0 } else { 0.0 }),
            mem_used_mib: Some(if busy { 40_000.0 } else { 3.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(if busy { 300.0 } else { 55.0 } + (self.cycle % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(u32::from(i)),
            ..Default::default()
        };
        let app = |g: u16, pid: u32| enforcer::parse::smi::ComputeApp {
            gpu_uuid: Some(format!("GPU-{g}")),
            pid: Some(pid),
            used_memory_mib: Some(40_000.0),
            process_name: None,
        };
        TelemetryRead {
            gpus: vec![gpu(0, true), gpu(1, true), gpu(2, false)],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: vec![app(0, 100), app(1, 101)],
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Input: as review11's `a_kept_placement_from_before_the_mark_is_not_trusted` (job 40 placed
/// by elimination on the free GPU 2 of a 3-GPU list while `Gres=` was unreadable; the state
/// file then stripped of `marked` and `by_elimination`, as the previous release wrote it),
/// except that the upgraded daemon's first cycle has no GPU data (nvidia-smi timed out once;
/// `Gres=gpu:4` is read every cycle).
///
/// What happens: that cycle re-marks the entry (`marked: true`, `by_elimination: None`), so
/// the next cycles trust it: job 40 is judged on GPU 2 (idle), drained and cancelled.
///
/// What should happen: an unmarked entry is never re-marked; it is derived afresh at the
/// first cycle with GPU data (or dropped at load), and job 40 is never judged.
#[test]
fn an_unmarked_kept_placement_is_not_marked_by_a_cycle_without_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut j40 = job("40", 40, 1, &[NODE]);
    j40.gres_idx.clear();
    let c = cluster(vec![job("10", 10, 2, &[NODE]), j40]);
    c.borrow_mut().node_gres = None;
    let start = |at: i64, no_data_reads: u32| {
        Daemon::new(
            config_with(POLICY, &state, "enforce", ""),
            FakeSlurm(c.clone()),
            ShortList { cycle: 0, no_data_reads },
            real_executor(&c),
            Box::new(Procs10),
            at,
        )
    };
    let mut d = start(T0, 0);
    for i in 0..3 {
        d.cycle(T0 + i * 60);
    }
    let placed = d.kept.get("40").map(|k| (k.gpus.clone(), k.by_elimination));
    assert_eq!(placed, Some((vec![2], Some(3))), "job 40 placed by elimination on GPU 2");
    drop(d);
    // The previous release's state file: the same, without the mark nor `marked`.
    let path = state.join("state.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    fn strip(v: &mut serde_json::Value) -> usize {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("marked");
                m.remove("by_elimination").map_or(0, |_| 1) + m.values_mut().map(strip).sum::<usize>()
            }
            serde_json::Value::Array(a) => a.iter_mut().map(strip).sum(),
            _ => 0,
        }
    }
    assert_eq!(strip(&mut json), 1, "one mark in the state file");
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    c.borrow_mut().node_gres = Some("gpu:4".into());
    let mut d = start(T0 + 3 * 60, 1);
    let mut worst = None;
    for i in 3..150 {
        for f in d.cycle(T0 + i * 60).findings {
            if f.job_id == "40" {
                worst = worst.max(Some(f.verdict));
            }
        }
        if i == 3 {
            let k = d.kept.get("40").map(|k| (k.gpus.clone(), k.marked, k.by_elimination));
            eprintln!("after the cycle without GPU data, job 40 kept as {k:?}");
        }
    }
    assert_eq!(d.slurm_gpus, Some(4));
    let calls = c.borrow().calls.clone();
    let acted: Vec<&String> = calls
        .iter()
        .filter(|c| *c == "scancel 40" || (c.starts_with("drain") && c.ends_with("job 40")))
        .collect();
    assert!(
        worst.is_none() && acted.is_empty(),
        "after the upgrade, first cycle without GPU data, then Gres=gpu:4 (3 listed): job 40 kept on {:?}, worst verdict {worst:?}, Slurm calls naming job 40: {acted:?}",
        d.kept.get("40").map(|k| &k.gpus),
    );
}

/// PID 200 is job 802's.
struct Procs802;
impl ProcReader for Procs802 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 200).then(|| "0::/system.slice/slurmstepd.scope/job_802/step_0/user/task_0\n".to_string())
    }
}

/// The notify channel: notices fail while `now_s < up_from_s`; attempts and delivered texts
/// are kept with the cycle time.
#[derive(Default)]
struct Channel {
    up_from_s: i64,
    now_s: i64,
    attempts: Vec<i64>,
    delivered: Vec<(i64, String)>,
}

/// The real executor, with the user's notice channel as [`Channel`] says.
struct FlakyNotify {
    inner: RealExecutor<FakeSlurm>,
    channel: Rc<RefCell<Channel>>,
}

impl Executor for FlakyNotify {
    fn execute(&mut self, action: &Action) -> Outcome {
        if let Action::Notice { reason, .. } = action {
            let mut ch = self.channel.borrow_mut();
            let t = ch.now_s;
            ch.attempts.push(t);
            if t < ch.up_from_s {
                return Outcome::Failed("notify command: mail server unreachable".into());
            }
            ch.delivered.push((t, reason.clone()));
        }
        self.inner.execute(action)
    }
}

/// The cancel time a notice gives: the UTC minute after "cancel the job in about ...".
fn stated_cancel_s(text: &str) -> Option<i64> {
    let rest = &text[text.find("cancel the job in about ")?..];
    let open = rest.find('(')? + 1;
    let close = rest.find(" UTC)")?;
    let t = chrono::NaiveDateTime::parse_from_str(&rest[open..close], "%Y-%m-%d %H:%M").ok()?;
    Some(t.and_utc().timestamp())
}

/// Runs job 802 (idle) with the notice channel down before `up_from_s`; returns the drain
/// time, the cancel time, and the channel.
fn run_802(up_from_s: i64) -> (Option<i64>, Option<i64>, Channel) {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let channel = Rc::new(RefCell::new(Channel {
        up_from_s,
        ..Default::default()
    }));
    let mut d = Daemon::new(
        config_with(POLICY_DRAIN_32M, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        FlakyNotify {
            inner: real_executor(&c),
            channel: channel.clone(),
        },
        Box::new(Procs802),
        T0,
    );
    let (mut drain_s, mut cancel_s) = (None, None);
    for i in 0..200 {
        let now_s = T0 + i * 60;
        channel.borrow_mut().now_s = now_s;
        d.cycle(now_s);
        let calls = c.borrow().calls.clone();
        if drain_s.is_none() && calls.iter().any(|c| c.starts_with("drain") && c.ends_with("job 802")) {
            drain_s = Some(now_s);
        }
        if calls.iter().any(|c| c == "scancel 802") {
            cancel_s = Some(now_s);
            break;
        }
    }
    drop(d);
    let ch = Rc::try_unwrap(channel).ok().expect("one owner").into_inner();
    (drain_s, cancel_s, ch)
}

/// Input: job 802 (1 GPU, this node) idles from the start; the user's notify command fails
/// until the cycle in which the planner drains the node (found by a first run with the
/// channel always down; the notice's retries, 1, 2, 4, 8, 16 minutes apart, land on it).
/// The notice is then delivered in the drain's cycle, before the drain is seen standing.
///
/// What happens: the notice says the node may be drained "in about 1m" and the job cancelled
/// in about 22 minutes (drain one interval away, found one interval later, one window); the
/// drain is made in that very cycle, found one interval later, and the job is cancelled 21
/// minutes after the notice, in the minute before the one the notice names (observed:
/// drain and notice at T0+32m, "cancel the job in about 22m (18:40 UTC)", scancel at T0+53m,
/// 18:39:40 UTC).
///
/// What should happen: a notice never names a cancel later than the real one: a notice sent
/// in a cycle that drains for the job counts the drain from now (or the notice goes after
/// the drain, with the drain counted as standing).
///
/// Since operator trial 16 a drain waits for a notice delivered in an earlier cycle, so the
/// notice can no longer share the drain's cycle: with the channel down the node is not
/// drained at all, and once a retry gets through (the fifth, where the drain used to land)
/// the drain follows in a later cycle; the cancel is still no earlier than the notice said.
#[test]
fn a_notice_sent_in_the_drain_cycle_does_not_understate_when_the_cancel_comes() {
    let (drain_s, _, probe) = run_802(i64::MAX);
    assert_eq!(drain_s, None, "no drain while no notice could be delivered");
    let up_s = *probe.attempts.get(4).expect("the notice was retried at least five times");
    let (drain_s, cancel_s, ch) = run_802(up_s);
    let drain_s = drain_s.expect("job 802's node was drained once the notice went out");
    let (notice_s, text) = ch.delivered.first().cloned().expect("a notice was delivered");
    assert_eq!(notice_s, up_s, "the notice went out at the first attempt after the channel came up");
    assert!(
        notice_s < drain_s,
        "the drain (T0+{}s) came after the notice (T0+{}s)",
        drain_s - T0,
        notice_s - T0
    );
    let cancel_s = cancel_s.expect("job 802 was cancelled");
    let stated = stated_cancel_s(&text).unwrap_or_else(|| panic!("no cancel time in {text}"));
    // The notice names the UTC minute (seconds dropped, so a true time is never later than
    // the minute named): a cancel before the start of that minute is earlier than the
    // notice said.
    assert!(
        cancel_s >= stated,
        "drained at T0+{}s, notice delivered at T0+{}s saying \"{text}\"; it gives the cancel at the earliest at T0+{}s (the minute named), the job was cancelled at T0+{}s",
        drain_s - T0,
        notice_s - T0,
        stated - T0,
        cancel_s - T0,
    );
}

/// Input: an observe-mode state file whose would-drain record for job 802 (running on this
/// node) has `made_s` = `i64::MAX` (a hostile or corrupted time; the file is otherwise valid).
///
/// What happens: the first cycle computes `made_s + interval` unchecked (daemon.rs, the
/// observe-mode confirmations) and panics on overflow (debug builds; release wraps to a time
/// in the far past, so the would-drain counts as confirmed long ago).
///
/// What should happen: no panic; saturating arithmetic (a would-drain from the future is no
/// confirmation).
#[test]
fn a_hostile_would_drain_time_in_the_state_file_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let start = |at: i64| {
        Daemon::new(
            config_with(POLICY_DRAIN_32M, &state, "observe", ""),
            FakeSlurm(c.clone()),
            OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            real_executor(&c),
            Box::new(Procs802),
            at,
        )
    };
    let mut d = start(T0);
    for i in 0..3 {
        d.cycle(T0 + i * 60);
    }
    drop(d);
    let path = state.join("state.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["actions"]["drains"] = serde_json::json!({
        "802": { "job_id": "802", "node": NODE, "made_s": i64::MAX, "hypothetical": true }
    });
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    let mut d = start(T0 + 3 * 60);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for i in 3..60 {
            d.cycle(T0 + i * 60);
        }
    }));
    assert!(ran.is_ok(), "the daemon panicked on a would-drain made at i64::MAX");
}

/// PIDs 100 and 101 are jobs 11's and 12's.
struct Procs1112;
impl ProcReader for Procs1112 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        let job = match pid {
            100 => 11,
            101 => 12,
            _ => return None,
        };
        Some(format!("0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"))
    }
}

/// Two GPUs, each holding 40 GB for one job's process (PID 100 on GPU 0, PID 101 on GPU 1)
/// at 0 % utilization and idle power: both jobs breach.
struct TwoHeld {
    cycle: u32,
}

impl Telemetry for TwoHeld {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
        let gpu = |i: u16| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            util_pct: Some(0.0),
            mem_used_mib: Some(40_000.0),
            mem_total_mib: Some(81_920.0),
            power_w: Some(60.0 + (self.cycle % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(u32::from(i)),
            ..Default::default()
        };
        let app = |g: u16, pid: u32| enforcer::parse::smi::ComputeApp {
            gpu_uuid: Some(format!("GPU-{g}")),
            pid: Some(pid),
            used_memory_mib: Some(40_000.0),
            process_name: None,
        };
        TelemetryRead {
            gpus: vec![gpu(0), gpu(1)],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: vec![app(0, 100), app(1, 101)],
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Input: a state file whose `actions.suspect_alerted_s` is `i64::MIN` (a hostile or corrupted
/// time; the file is otherwise valid), on a node where the suspect-collector rule trips
/// (`suspect_min_jobs = 2`, both jobs alerting).
///
/// What happens: the planner computes `now_s - suspect_alerted_s` unchecked (plan.rs) and
/// panics on overflow (debug builds).
///
/// What should happen: no panic (saturating arithmetic), the admin alert goes out.
#[test]
fn a_hostile_suspect_alert_time_in_the_state_file_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![job("11", 11, 1, &[NODE]), job("12", 12, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    let start = |at: i64| {
        Daemon::new(
            config_with(POLICY_DRAIN_32M, &state, "enforce", "suspect_min_jobs = 2"),
            FakeSlurm(c.clone()),
            TwoHeld { cycle: 0 },
            real_executor(&c),
            Box::new(Procs1112),
            at,
        )
    };
    let mut d = start(T0);
    d.cycle(T0);
    drop(d);
    let path = state.join("state.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["actions"]["suspect_alerted_s"] = serde_json::json!(i64::MIN);
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    let mut d = start(T0 + 60);
    let mut worst = None;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for i in 1..60 {
            for f in d.cycle(T0 + i * 60).findings {
                worst = worst.max(Some(f.verdict));
            }
        }
    }));
    assert!(
        ran.is_ok(),
        "the daemon panicked on suspect_alerted_s = i64::MIN (worst verdict before: {worst:?})"
    );
    assert!(
        worst >= Some(policy::Verdict::Alert),
        "both jobs alert, so the suspect rule trips: worst {worst:?}"
    );
}
