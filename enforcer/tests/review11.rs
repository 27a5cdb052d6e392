//! The eleventh adversarial review, enforcer side: the notice text (what may follow and
//! when), unlisted jobs, observe mode's webhook, config checks, placements by elimination and
//! the `Gres=` floor. Each ignored test fails on the enforcer as reviewed and shows one
//! finding.
//!
//! * `a_late_notice_does_not_understate_when_the_cancel_comes`: `notice::text` assumes the
//!   notice goes out at the start of the breach, before any drain: it counts the drain from
//!   now (at least one interval away) and the cancel no sooner than that drain plus an
//!   interval and a window. But the drain does not wait for the notice; a notice that failed
//!   (the notify command down, retried with backoff) goes out late, when the node is already
//!   drained and the engine's verdict is cancel. Then only `notice` holds the cancel, and it
//!   comes `notice` after the notice, earlier than the time the notice gives.
//! * `a_notice_with_our_drain_standing_does_not_understate_when_the_cancel_comes`: the same
//!   assumption on a new breach of a job whose node is still drained for it (the first breach
//!   ended when the job worked a while; the drain stays while the job runs). The drain is
//!   confirmed long since, so the cancel comes at the cancel stage's dwell, before the
//!   "drain + interval + window" the notice gives.
//! * `a_kept_placement_from_before_the_mark_is_not_trusted`: a state file written before
//!   `Kept::by_elimination` existed (same state version) loads placements made by
//!   elimination as unmarked, and the `Gres=` floor never drops them. (With the mark kept,
//!   the same scenario passes.)

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, Outcome, RealExecutor};
use enforcer::parse::smi::{AppsTable, GpuReading};
use enforcer::plan::Action;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::RefCell;
use std::rc::Rc;

/// PID 200 is job 802's.
struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 200).then(|| "0::/system.slice/slurmstepd.scope/job_802/step_0/user/task_0\n".to_string())
    }
}

/// One GPU (index 0, UUID `GPU-0`), idle (0 %, 3 MiB, 55 W, no compute process); job 802
/// (the node's only job, `Gres=gpu:1`) is placed on it by elimination.
struct IdleNode {
    cycle: u32,
    /// While set, the GPU works (95 %, 40 GB, 300 W).
    busy: Rc<RefCell<bool>>,
}

impl Telemetry for IdleNode {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
        let busy = *self.busy.borrow();
        TelemetryRead {
            gpus: vec![GpuReading {
                index: Some(0),
                uuid: Some("GPU-0".into()),
                util_pct: Some(if busy { 95.0 } else { 0.0 }),
                mem_used_mib: Some(if busy { 40_000.0 } else { 3.0 }),
                mem_total_mib: Some(81_920.0),
                power_w: Some(if busy { 300.0 } else { 55.0 } + (self.cycle % 3) as f64),
                power_limit_w: Some(400.0),
                minor: Some(0),
                ..Default::default()
            }],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: Vec::new(),
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// What the notify channel did: notices fail while `down`; each delivered notice's text is
/// kept with the cycle time.
#[derive(Default)]
struct Channel {
    down: bool,
    now_s: i64,
    delivered: Vec<(i64, String)>,
    attempts: u32,
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
            ch.attempts += 1;
            if ch.down {
                return Outcome::Failed("notify command: mail server unreachable".into());
            }
            let t = ch.now_s;
            ch.delivered.push((t, reason.clone()));
        }
        self.inner.execute(action)
    }
}

/// The cycle's policy: 20-minute window, alert at once, drain after 30 minutes, cancel after
/// 60, `notice` 10 minutes (shorter than a window), idle may be cancelled.
const POLICY_SHORT_NOTICE: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "10m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// The cancel time a notice gives: the UTC minute after "cancel the job in about ...".
fn stated_cancel_s(text: &str) -> Option<i64> {
    let rest = &text[text.find("cancel the job in about ")?..];
    let open = rest.find('(')? + 1;
    let close = rest.find(" UTC)")?;
    let t = chrono::NaiveDateTime::parse_from_str(&rest[open..close], "%Y-%m-%d %H:%M").ok()?;
    Some(t.and_utc().timestamp())
}

/// See the module doc. Job 802 (1 GPU, this node) is idle; its user's notify command fails
/// for the first 80 minutes. The engine alerts, the planner drains at 30 minutes into the
/// breach (the drain does not wait for the notice) and the engine reaches cancel at 60; the
/// cancel waits for a delivered notice. The notice goes out at last (about 80-90 minutes in)
/// and says the cancel comes at the earliest one interval + one interval + one window (22
/// minutes) from now; the cancel follows `notice` (10 minutes) after it.
///
/// Observed: drained at T0+30m, cancel verdict from T0+60m, notice delivered at T0+108m
/// saying the node may be drained "in about 1m" (it has been drained for 78 minutes) and the
/// job cancelled "in about 22m" (T0+129m); the job is cancelled at T0+118m.
///
/// What should happen: the notice never gives a time later than the cancel can come: a
/// notice sent after the drain counts the cancel from the drain that stands (here: `notice`
/// from now), and does not promise a drain that already happened.
#[test]
fn a_late_notice_does_not_understate_when_the_cancel_comes() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let channel = Rc::new(RefCell::new(Channel {
        down: true,
        ..Default::default()
    }));
    let mut d = Daemon::new(
        config_with(POLICY_SHORT_NOTICE, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        IdleNode {
            cycle: 0,
            busy: Rc::new(RefCell::new(false)),
        },
        FlakyNotify {
            inner: real_executor(&c),
            channel: channel.clone(),
        },
        Box::new(Procs),
        T0,
    );
    let mut cancel_s = None;
    let mut drain_s = None;
    for i in 0..240 {
        let now_s = T0 + i * 60;
        {
            let mut ch = channel.borrow_mut();
            ch.now_s = now_s;
            ch.down = i < 80;
        }
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
    let ch = channel.borrow();
    assert!(ch.attempts > 1, "the notice was tried while the channel was down");
    let (notice_s, text) = ch.delivered.first().cloned().expect("a notice was delivered");
    let cancel_s = cancel_s.expect("job 802 was cancelled");
    let drain_s = drain_s.expect("job 802's node was drained");
    let stated = stated_cancel_s(&text).unwrap_or_else(|| panic!("no cancel time in {text}"));
    // The notice's times are to the minute; allow that rounding.
    assert!(
        cancel_s >= stated - 59,
        "drained at T0+{}m, notice delivered at T0+{}m saying \"{text}\"; it gives the cancel at T0+{}m, the job was cancelled at T0+{}m",
        (drain_s - T0) / 60,
        (notice_s - T0) / 60,
        (stated - T0) / 60,
        (cancel_s - T0) / 60,
    );
}

/// Stages 30m drain, 40m cancel, `notice` 10m (check-config warns that the cancel comes at
/// the earliest about 51 minutes into a breach, after the drain has stood a window).
const POLICY_TIGHT_CANCEL: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "10m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "40m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// Job 802 idles from T0: alerted and noticed at T0+20m, the node drained for it at T0+30m.
/// At T0+45m it works again (the breach ends; our drain stays, as the job still runs and has
/// not worked for a window: session 14 resumes a drain once its job has); from T0+55m it idles
/// again (T0+70m before that change). The new breach is alerted, and its notice says the node may be
/// drained in some minutes (it has been drained for the job since T0+30m) and the job
/// cancelled no sooner than a drain plus an interval plus a window from now. But the drain
/// stands already: only the cancel stage (40m into the breach) and `notice` hold the cancel,
/// and it comes earlier than the notice says.
///
/// Observed: drained at T0+30m; the second notice, at T0+89m, says the node may be drained
/// "in about 11m" and the job cancelled "in about 32m" (T0+120m); the job is cancelled at
/// T0+110m, 21 minutes after the notice.
///
/// What should happen: a notice sent while our drain for the job stands counts the cancel from
/// that drain (and does not announce a drain to come); check-config's "cancel comes at the
/// earliest about 51m" is wrong the same way.
#[test]
fn a_notice_with_our_drain_standing_does_not_understate_when_the_cancel_comes() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let channel = Rc::new(RefCell::new(Channel::default()));
    let busy = Rc::new(RefCell::new(false));
    let mut d = Daemon::new(
        config_with(POLICY_TIGHT_CANCEL, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        IdleNode {
            cycle: 0,
            busy: busy.clone(),
        },
        FlakyNotify {
            inner: real_executor(&c),
            channel: channel.clone(),
        },
        Box::new(Procs),
        T0,
    );
    let mut cancel_s = None;
    let mut drain_s = None;
    for i in 0..240 {
        let now_s = T0 + i * 60;
        channel.borrow_mut().now_s = now_s;
        // Work shorter than a window: the breach ends, but the job is not recovered
        // (`policy::Recovery`), so our drain stands (25 minutes of work would resume it).
        *busy.borrow_mut() = (45..55).contains(&i);
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
    let ch = channel.borrow();
    let cancel_s = cancel_s.expect("job 802 was cancelled");
    let drain_s = drain_s.expect("job 802's node was drained");
    let resumed = c.borrow().calls.iter().any(|c| c.starts_with("resume"));
    assert!(!resumed && drain_s < T0 + 45 * 60, "the drain of the first breach stands");
    let (notice_s, text) = ch.delivered.last().cloned().expect("a notice was delivered");
    assert!(
        ch.delivered.len() == 2 && notice_s > T0 + 55 * 60,
        "a second notice, for the second breach: {:?}",
        ch.delivered
    );
    let stated = stated_cancel_s(&text).unwrap_or_else(|| panic!("no cancel time in {text}"));
    assert!(
        cancel_s >= stated - 59,
        "drained at T0+{}m, second notice at T0+{}m saying \"{text}\"; it gives the cancel at T0+{}m, the job was cancelled at T0+{}m",
        (drain_s - T0) / 60,
        (notice_s - T0) / 60,
        (stated - T0) / 60,
        (cancel_s - T0) / 60,
    );
}

// A state file written before placements by elimination were marked.

/// PIDs 100 and 101 are job 10's; PID 999 (job 40's) does not exist in this /proc.
struct Procs10;
impl ProcReader for Procs10 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 100 | 101).then(|| "0::/system.slice/slurmstepd.scope/job_10/step_0/user/task_0\n".to_string())
    }
}

/// A node of 4 GPUs whose nvidia-smi lists GPUs 0-2 (GPU 3, job 40's, is hidden): GPUs 0 and 1
/// busy with job 10's processes (PIDs 100, 101), GPU 2 free and idle.
struct ShortList {
    cycle: u32,
}

impl Telemetry for ShortList {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
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

/// The tenth review's fix marks a placement made by elimination (`Kept::by_elimination`, the
/// GPUs listed then) and drops it once the node should have more GPUs. A state file written
/// by the enforcer before that fix (the same `STATE_VERSION` 3) has kept placements without
/// the mark, and they load as placements by processes: kept by rule 1 whatever the floor.
///
/// Here: `Gres=` cannot be read (absent) while the daemon runs 3 cycles; the 3 GPUs listed
/// read as whole, and job 40 (1 GPU, no device index) is placed on the free GPU 2 by
/// elimination. The state file is then as the previous release wrote it (the same JSON
/// without `by_elimination`). After the upgrade the daemon starts with `Gres=gpu:4` read
/// every cycle: the list is known short, yet job 40 stays on GPU 2, judged idle, drained
/// and cancelled.
///
/// What should happen: a kept placement that does not say how it was made (a state file
/// from before the mark) is not trusted as a placement by processes: it is derived afresh
/// (or the state version is bumped so such placements are dropped); job 40 is never judged.
#[test]
fn a_kept_placement_from_before_the_mark_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut j40 = job("40", 40, 1, &[NODE]);
    j40.gres_idx.clear();
    let c = cluster(vec![job("10", 10, 2, &[NODE]), j40]);
    c.borrow_mut().node_gres = None;
    let start = |at: i64| {
        Daemon::new(
            config_with(POLICY_SHORT_NOTICE, &state, "enforce", ""),
            FakeSlurm(c.clone()),
            ShortList { cycle: 0 },
            real_executor(&c),
            Box::new(Procs10),
            at,
        )
    };
    let mut d = start(T0);
    for i in 0..3 {
        d.cycle(T0 + i * 60);
    }
    let placed = d.kept.get("40").map(|k| (k.gpus.clone(), k.by_elimination));
    assert_eq!(placed, Some((vec![2], Some(3))), "job 40 placed by elimination on GPU 2");
    drop(d);
    // The previous release's state file: the same, without the mark.
    let path = state.join("state.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    fn strip(v: &mut serde_json::Value) -> usize {
        match v {
            serde_json::Value::Object(m) => {
                // The previous release wrote neither the mark nor `marked`.
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
    let mut d = start(T0 + 3 * 60);
    let mut worst = None;
    for i in 3..150 {
        for f in d.cycle(T0 + i * 60).findings {
            if f.job_id == "40" {
                worst = worst.max(Some(f.verdict));
            }
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
        "after the upgrade, with Gres=gpu:4 (3 listed): job 40 kept on {:?}, worst verdict {worst:?}, Slurm calls naming job 40: {acted:?}",
        d.kept.get("40").map(|k| &k.gpus),
    );
}
