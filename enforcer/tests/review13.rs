//! The thirteenth adversarial review, enforcer side: the notice's "what may follow and when"
//! (`notice::text`, `JobView::reachable`, `ActionState::noticed_top`) against what the engine
//! and the planner then do. Each ignored test fails on the enforcer as reviewed and shows one
//! finding.
//!
//! * `a_drain_ceiling_without_a_drain_stage_is_never_promised_a_drain`: with stages
//!   `[alert 0s, cancel 2h]` (no drain stage) and `ceilings = { hung = "drain" }`, the notice
//!   tells the user of a hung job "gpu-reaper may drain the node in about 2h", but the engine
//!   never drains it: the cancel stage is counted against the cancel level
//!   (`cancel_level_start_s`), which a drain-ceiling signature never starts, so the job stays
//!   at `alert` for ever (`cap: ceiling`). The notice promises an action that never comes
//!   (and the operator's "drain hung jobs at 2h" is silently not done).
//! * `a_rise_notice_names_the_drain_and_cancel_the_engine_allows`: the new notice for a rise
//!   (a job noticed "alert only" while `partial` that now looks `idle`, same breach) counts
//!   the drain and cancel stages from the breach's start (`Finding::dwell_s`), but the engine
//!   counts each from the start of its own level (`drain_level_start_s`,
//!   `cancel_level_start_s`: when the signature's ceiling first allowed it, here the idle
//!   window's start). After two hours of `partial` the notice says "drain the node ... in
//!   about 1m" and "cancel the job in about 30m"; the drain comes 11 minutes later and the
//!   cancel 41. On the safe side ("at the earliest"), but the notice's "the earliest the engine
//!   allows" is wrong by up to a stage's dwell, and a user told "drained in a minute" acts on
//!   it.
//! * `a_notice_in_a_cycle_without_the_node_state_does_not_understate_when_the_cancel_comes`:
//!   `notice::text` counts the cancel from a standing drain only when scontrol showed it
//!   (`Daemon::drain_found`) or the drain is planned in the same cycle. A notice that goes
//!   out (late) in a cycle whose `scontrol show node` fails, the cycle after our drain, says
//!   the drain is still to come and names a cancel one interval later than the real one
//!   (the same class as reviews 11 and 12; after a restart whose first scontrol read fails,
//!   `drain_found` is empty too).
//! * `a_notice_does_not_say_drained_before_the_drain_is_made`: the notice's text is made
//!   before the cycle's actions run, and a drain merely planned in that cycle counts as made
//!   ("The node is drained now"). The notice goes out first; the drain may then be held
//!   (`records_unwritable`) or fail, and the user has been told of a drain that did not
//!   happen.
//!
//! Probed and not failing (kept out of this file): randomized end-to-end runs (one job,
//! GPUs idle, hung, busy or partial by segments, the notify channel, scontrol, squeue and
//! nvidia-smi failing at random, restarts) checking that every cancel comes `notice` after the
//! last notice and no earlier than the time it names: only the scontrol-failure case above
//! fails. Randomized attribution runs (4 GPUs, 1-2 GPU jobs, successive jobs on the same GPUs,
//! hidden processes, minor numbers permuted, Slurm's device order permuted, a GPU missing for
//! a cycle or from the start with `Gres=` unread, GPUs without UUID, stray non-Slurm
//! processes, admin resumes and maintenance drains, restarts) checking that no job is drained
//! or cancelled while one of its own GPUs was busy within its window less `max_sample_gap`,
//! that a cancel follows our drain for that job standing one window, and that an admin's
//! resume of our confirmed drain is never followed by a drain or cancel of that job: none
//! failed in 500 seeds.

use enforcer::plan::JobView;
use policy::{Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Sample, Scope, Verdict};

/// A cycle time, epoch seconds (2030-03-17 17:46:40 UTC).
const T0: i64 = 1_900_000_000;

fn policy(text: &str) -> Policy {
    let cfg: PolicyConfig = toml::from_str(text).unwrap();
    Policy::new(&cfg).unwrap()
}

fn one_gpu_job(id: &str) -> JobFacts {
    JobFacts {
        job_id: id.into(),
        user: "alice".into(),
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        name: "train".into(),
        start_s: T0 - 7200,
        alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
        ..Default::default()
    }
}

/// A hung GPU at `t_s`: 0 %, 40 GB held, one process, about 70 W of 400 W (a little noise,
/// so nothing looks frozen).
fn hung(t_s: i64) -> Sample {
    Sample {
        t_s,
        node: NodeId(0),
        gpu: 0,
        util_pct: 0.0.into(),
        mem_used_mib: (40_000.0 + (t_s / 60 % 7) as f64).into(),
        mem_total_mib: 81_920.0.into(),
        power_w: (70.0 + (t_s / 60 % 5) as f64 * 0.4).into(),
        power_limit_w: 400.0.into(),
        procs: Some(1),
        sm_active: policy::Reading::MISSING,
    }
}

/// Input: stages `[alert 0s, cancel 2h]` (no drain stage; `notice.rs` and
/// `config::earliest_drain_s`: a cancel stage without a drain stage drains on its way),
/// `ceilings = { hung = "drain" }`, a job hung for five hours (observe-mode engine: a drain
/// verdict counts as confirmed one cycle later). `config::drain_reachable` says true for this
/// policy too, and with `ceilings = { idle = "drain", hung = "drain" }` nothing is ever
/// drained at all.
///
/// What happens: the notice at the first alert says "gpu-reaper may drain the node ... in
/// about 2h"; the engine keeps the job at `alert` for five hours (its cancel stage is counted
/// against the cancel level, which a drain-ceiling signature never starts), so no drain ever
/// comes.
///
/// What should happen: the notice promises only what can follow (here: the drain, capped at
/// the ceiling, at 2h), and the engine does it; or, if a drain-ceiling signature is never to
/// reach a cancel-only stage, the notice says "alert only".
#[test]
fn a_drain_ceiling_without_a_drain_stage_is_never_promised_a_drain() {
    let p = policy(
        "stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"2h\", verdict = \"cancel\" }]\nceilings = { hung = \"drain\" }",
    );
    let jobs = vec![one_gpu_job("7")];
    let mut e = Engine::new(p.clone(), Mode::Observe);
    let mut out = Vec::new();
    let mut first_notice: Option<String> = None;
    let mut worst = Verdict::Healthy;
    let mut cap = None;
    for i in 1..=300 {
        let t = T0 + i * 60;
        let obs = Observation {
            jobs: &jobs,
            samples: &[hung(t)],
            scope: Scope::Node(NodeId(0)),
            drains: &[],
        };
        e.step(t, &obs, &mut out);
        let f = &out[0];
        if f.verdict >= Verdict::Alert && first_notice.is_none() {
            let nodes = vec!["gpu001".to_string()];
            let view = JobView {
                job: &jobs[0],
                finding: f,
                nodes: &nodes,
                reachable: enforcer::notice::reachable(&p, f, false),
                alert_only: false,
                level_dwells_s: e.level_dwells_s(0, t),
            };
            first_notice = Some(enforcer::notice::text(&p, &view, t, false, None, None).0);
        }
        if f.verdict > worst {
            worst = f.verdict;
        }
        cap = f.cap;
    }
    let notice = first_notice.expect("the hung job is alerted");
    assert_eq!(out[0].signature_name(), "hung");
    let promises_drain = notice.contains("may drain the node");
    assert!(
        !promises_drain || worst >= Verdict::Drain,
        "notice: {notice:?}\nbut over five hours hung the job never went above {worst} (last cap {cap:?})"
    );
}

// ---------------------------------------------------------------------------------------
// End-to-end scenarios: one 2-GPU job on a 2-GPU node, each GPU's look given per minute.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY_DRAIN_32M};
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, Outcome, RealExecutor};
use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
use enforcer::plan::Action;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::RefCell;
use std::rc::Rc;

/// What one GPU shows in one minute.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Look {
    Busy,
    Idle,
}

/// GPUs 0 and 1 (index = minor), each as `look(minute, gpu)` says; a process on every GPU
/// that is not idle (PIDs that resolve to no job here: the job is placed as the node's only
/// GPU job).
struct Scripted {
    t0: i64,
    look: fn(i64, u16) -> Look,
}

impl Telemetry for Scripted {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let minute = (now_s - self.t0) / 60;
        let noise = (minute % 5) as f64 * 0.4;
        let mut gpus = Vec::new();
        let mut apps = Vec::new();
        for i in 0..2u16 {
            let l = (self.look)(minute, i);
            let (util, mem, power) = match l {
                Look::Busy => (95.0, 60_000.0, 300.0 + 5.0 * noise),
                Look::Idle => (0.0, 3.0, 55.0 + noise),
            };
            gpus.push(GpuReading {
                index: Some(i),
                uuid: Some(format!("GPU-{i}")),
                util_pct: Some(util),
                mem_used_mib: Some(mem),
                mem_total_mib: Some(81_920.0),
                power_w: Some(power),
                power_limit_w: Some(400.0),
                minor: Some(u32::from(i)),
                ..Default::default()
            });
            if l != Look::Idle {
                apps.push(ComputeApp {
                    gpu_uuid: Some(format!("GPU-{i}")),
                    pid: Some(5000 + u32::from(i)),
                    used_memory_mib: Some(mem),
                    process_name: None,
                });
            }
        }
        TelemetryRead {
            gpus,
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps,
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Notices delivered, with their cycle time; a notice fails while `down(now_s)`.
struct Recorder {
    inner: RealExecutor<FakeSlurm>,
    now_s: Rc<RefCell<i64>>,
    delivered: Rc<RefCell<Vec<(i64, String)>>>,
    down: fn(i64) -> bool,
}

impl Executor for Recorder {
    fn execute(&mut self, action: &Action) -> Outcome {
        if let Action::Notice { reason, .. } = action {
            let t = *self.now_s.borrow();
            if (self.down)(t) {
                return Outcome::Failed("notify command: mail server unreachable".into());
            }
            self.delivered.borrow_mut().push((t, reason.clone()));
        }
        self.inner.execute(action)
    }
}

/// The cancel time a notice gives: the UTC minute after "cancel the job in about ...".
fn stated_cancel_s(text: &str) -> Option<i64> {
    stated_s(text, "cancel the job in about ")
}

/// The time a notice gives after `lead` ("... in about 1m (2030-03-17 19:46 UTC)").
fn stated_s(text: &str, lead: &str) -> Option<i64> {
    let rest = &text[text.find(lead)? + lead.len()..];
    let open = rest.find('(')? + 1;
    let close = rest.find(" UTC)")?;
    let t = chrono::NaiveDateTime::parse_from_str(&rest[open..close], "%Y-%m-%d %H:%M").ok()?;
    Some(t.and_utc().timestamp())
}

/// What a scenario did: notices delivered, drains and the cancel, each with its cycle time.
#[derive(Debug, Default)]
struct Outcomes {
    notices: Vec<(i64, String)>,
    drains: Vec<i64>,
    cancel: Option<i64>,
    /// Per cycle: the node's Reason after the cycle.
    reasons: Vec<(i64, Option<String>)>,
}

/// Runs job 900 (2 GPUs, the node's only job, `Gres=gpu:2`) for `minutes` one-minute cycles
/// under `policy_text`, the GPUs as `look` says, the notice channel down while `down`, with
/// `each(minute, cluster, state_dir)` run before each cycle (to make a Slurm read fail, or
/// the audit log unwritable, say).
fn scenario_with(
    policy_text: &str,
    minutes: i64,
    look: fn(i64, u16) -> Look,
    down: fn(i64) -> bool,
    each: fn(i64, &mut common::cluster::Cluster, &std::path::Path),
) -> Outcomes {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("900", 900, 2, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    let now = Rc::new(RefCell::new(T0));
    let delivered = Rc::new(RefCell::new(Vec::new()));
    let mut d = Daemon::new(
        config_with(policy_text, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Scripted { t0: T0, look },
        Recorder {
            inner: real_executor(&c),
            now_s: now.clone(),
            delivered: delivered.clone(),
            down,
        },
        Box::new(common::cluster::NoProc),
        T0,
    );
    let mut out = Outcomes::default();
    let mut seen_calls = 0;
    for i in 0..minutes {
        let t = T0 + i * 60;
        *now.borrow_mut() = t;
        each(i, &mut c.borrow_mut(), &dir.path().join("state"));
        d.cycle(t);
        let calls = c.borrow().calls.clone();
        for call in &calls[seen_calls..] {
            if call.starts_with("drain") && call.ends_with("job 900") {
                out.drains.push(t);
            }
            if call == "scancel 900" {
                out.cancel = Some(t);
            }
        }
        seen_calls = calls.len();
        out.reasons.push((t, c.borrow().node_reason.clone()));
        if out.cancel.is_some() {
            break;
        }
    }
    out.notices = delivered.borrow().clone();
    out
}

/// Both GPUs idle all along.
fn idle(_: i64, _: u16) -> Look {
    Look::Idle
}

/// The notify channel fails before minute 32.
fn down_before_32(t: i64) -> bool {
    t < T0 + 32 * 60
}

/// Input: job 900 (2 GPUs, the node's only job) idles from the start; drain after 31
/// minutes, cancel after 42, `notice` 10 minutes, window 20. The user's notify command fails
/// until minute 32 (the notice first tried at minute 17 is retried 1, 2, 4, 8 minutes apart:
/// at 18, 20, 24, 32). The node is drained at minute 31; at minute 32, the cycle in which the
/// notice finally goes out, `scontrol show node` gives no usable answer (here: another node's
/// record; a timeout does the same), so the drain is not seen standing in that cycle.
///
/// What happens: `notice::text` learns of a standing drain only from `Daemon::drain_found`
/// (drains seen by scontrol) or a drain planned in the same cycle, not from our own record of
/// the drain made a cycle before (`ActionState::drains`). The notice says the node "may
/// drain ... in about 1m" (it was drained a minute ago) and "cancel the job in about 22m
/// (18:40 UTC), at the earliest"; the drain is found at minute 33, and the job is cancelled at
/// minute 53, 18:39:40 UTC, before the earliest time the notice names (one interval early,
/// as in review 12's finding).
///
/// What should happen: a notice never names a cancel later than the real one: a drain we
/// made (our `DrainRecord`, confirmed or not) counts as standing from when it was made, or a
/// notice whose cycle cannot read the node state waits for one that can.
///
/// Since operator trial 16 a drain waits for a notice delivered in an earlier cycle, so the
/// node is no longer drained at minute 31, before the user was told: the notice goes out at
/// minute 33 (the first cycle with the channel up and the node state read), naming the
/// drain to come, and the drain follows at minute 34.
#[test]
fn a_notice_in_a_cycle_without_the_node_state_does_not_understate_when_the_cancel_comes() {
    fn scontrol_wrong_at_32(m: i64, c: &mut common::cluster::Cluster, _: &std::path::Path) {
        c.node_name_shown = (m == 32).then(|| "gpu999".to_string());
    }
    let o = scenario_with(POLICY_31M, 120, idle, down_before_32, scontrol_wrong_at_32);
    let (noticed_s, text) = o.notices.last().cloned().expect("a notice went out");
    // The notice waits for a cycle that reads the node state (trial 8), and the drain for
    // the cycle after the notice.
    assert_eq!((noticed_s - T0) / 60, 33, "{o:?}");
    assert_eq!(o.drains.first().map(|t| (t - T0) / 60), Some(34), "{o:?}");
    assert!(text.contains("may drain the node"), "{text}");
    let cancel_s = o.cancel.expect("job 900 is cancelled");
    let stated = stated_cancel_s(&text).expect("the notice names a cancel time");
    assert!(
        stated <= cancel_s,
        "notice at +33m: {text:?}\nnames a cancel at {} at the earliest; drained at +34m, cancelled at +{}m ({})",
        chrono::DateTime::from_timestamp(stated, 0).unwrap().format("%H:%M"),
        (cancel_s - T0) / 60,
        chrono::DateTime::from_timestamp(cancel_s, 0).unwrap().format("%H:%M:%S"),
    );
}

/// Drain after 31 minutes, cancel after 42, `notice` 10 minutes, window 20, idle may be
/// cancelled.
const POLICY_31M: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "10m"
stages = [{ after = "0s", verdict = "alert" }, { after = "31m", verdict = "drain" }, { after = "42m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// Input: job 900 (2 GPUs, the node's only job): GPU 0 busy and GPU 1 idle (`partial`, alert
/// only) for 100 minutes, then both idle; window 20m, drain after 30m, cancel after 60m,
/// `notice` 30m. The user is noticed "alert only" at +17m; at +119m, once the idle window is
/// whole, the rise gets a new notice.
///
/// What happens: that notice counts the stages from the breach's start (dwell 119m): "may
/// drain the node ... in about 1m (19:46 UTC) and cancel the job in about 30m (20:15 UTC)".
/// The engine counts them from the idle level's start (+99m): the drain comes at +130m
/// (19:56), the cancel at +160m (20:26).
///
/// What should happen: the notice names the times the engine allows (the level's dwell, as
/// `Engine::judge` counts it), so the drain comes about when it says.
#[test]
fn a_rise_notice_names_the_drain_and_cancel_the_engine_allows() {
    fn partial_then_idle(m: i64, g: u16) -> Look {
        if m < 100 && g == 0 {
            Look::Busy
        } else {
            Look::Idle
        }
    }
    fn up(_: i64) -> bool {
        false
    }
    let o = scenario_with(POLICY_RISE, 300, partial_then_idle, up, |_, _, _| {});
    assert_eq!(o.notices.len(), 2, "an alert-only notice, then one for the rise: {o:?}");
    assert!(o.notices[0].1.contains("alert only"), "{o:?}");
    let (_, text) = &o.notices[1];
    let drain_s = *o.drains.first().expect("job 900's node is drained");
    let cancel_s = o.cancel.expect("job 900 is cancelled");
    let said_drain = stated_s(text, "drain the node (no new job starts on it) in about ").expect("a drain time");
    let said_cancel = stated_cancel_s(text).expect("a cancel time");
    let late = |real: i64, said: i64| (real - said) / 60;
    assert!(
        late(drain_s, said_drain) <= 2 && late(cancel_s, said_cancel) <= 2,
        "rise notice: {text:?}\ndrain {}m after the time it names, cancel {}m after",
        late(drain_s, said_drain),
        late(cancel_s, said_cancel)
    );
}

/// Window 20m, drain after 30m, cancel after 60m, `notice` 30m; idle may be cancelled,
/// partial is alert only (its default ceiling).
const POLICY_RISE: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "30m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// Input: as `a_notice_in_a_cycle_without_the_node_state_does_not_understate_when_the_cancel_comes`,
/// drain after 32 minutes (review 12's policy), the notify command failing until minute 32,
/// so the notice goes out in the drain's own cycle; in that cycle the audit log cannot be
/// written (`audit.jsonl` replaced by a directory: disk full, a read-only file system), and it
/// is writable again from minute 33.
///
/// What happens: the notice's text is made before the actions run, with the drain planned
/// that cycle counted as made (`drains_now`): it tells the user "The node is drained now (no
/// new job starts on it)". The notice goes out (notices go on while records are unwritable);
/// the drain is then held (`records_unwritable`) and made a cycle later. The user was told of
/// a drain that had not happened (had the drain command failed, the same).
///
/// What should happen: the notice says "drained now" only for a drain that stands (seen, or
/// made before the notice in the same cycle), else it announces the drain as coming.
#[test]
fn a_notice_does_not_say_drained_before_the_drain_is_made() {
    fn audit_unwritable_at_32(m: i64, _: &mut common::cluster::Cluster, state: &std::path::Path) {
        let audit = state.join("audit.jsonl");
        if m == 32 {
            let _ = std::fs::remove_file(&audit);
            std::fs::create_dir_all(&audit).unwrap();
        } else if audit.is_dir() {
            std::fs::remove_dir(&audit).unwrap();
        }
    }
    let o = scenario_with(POLICY_DRAIN_32M, 120, idle, down_before_32, audit_unwritable_at_32);
    let (noticed_s, text) = o.notices.last().cloned().expect("a notice went out");
    assert_eq!((noticed_s - T0) / 60, 32, "{o:?}");
    let drained_then = o
        .reasons
        .iter()
        .find(|(t, _)| *t == noticed_s)
        .and_then(|(_, r)| r.clone())
        .is_some_and(|r| r.ends_with("job 900"));
    assert!(
        drained_then || !text.contains("drained now"),
        "notice at +32m: {text:?}\nbut after that cycle the node was not drained (drains at {:?})",
        o.drains.iter().map(|t| (t - T0) / 60).collect::<Vec<_>>()
    );
}
