//! Review 36 (of 6014c67). Each test but the controls failed on that commit for the reason its
//! comment gives, and passes since: the node-exclusive exemption needs a whole GPU list of the
//! node's known size; a job whose GPUs do video work is left out of the cycle (no hold on its
//! verdict); a GPU's reading is unknown while the driver refuses the codec fields; and the
//! suspect-collector hold lasts a window past its last trip.

#![allow(clippy::single_range_in_vec_init)]

mod common;

use common::cluster::{HiddenMainVisibleHelper, Proc9202, T0};
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// Finding 1 (CRITICAL): `node_exclusive` compares the lone job's GPU count with the GPUs
/// read THIS cycle after rows without a UUID are dropped (daemon.rs, `node_exclusive`), not
/// with the GPUs the node has (`most_gpus_seen`, `Gres=gpu:2`). Review 35 C's lone job 902
/// (1 GPU, placed by its helper on the free GPU-1, its main process hidden on GPU-0, marked
/// in `hidden_runs`) is held at alert until, in one read, GPU-0's row gives no UUID: the
/// node then "has" one GPU, 902 "holds every GPU there", the hidden-memory hold (run-long by
/// design) is lifted for that cycle, and the rung the engine reached under the hold drains at
/// once; a second such read a window later cancels. Expected: never drained or cancelled.
#[test]
fn r36_one_read_without_a_uuid_lifts_the_hidden_memory_hold_on_a_lone_job() {
    use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("902", 902, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, dir.path(), "enforce", ""),
        FakeSlurm(c.clone()),
        HiddenMainVisibleHelper {
            cycle: 0,
            helper_ends: 40,
            no_uuid: vec![150, 180],
        },
        real_executor(&c),
        Box::new(Proc9202),
        T0,
    );
    let mut seen = Vec::new();
    for m in 0..200 {
        let rep = d.cycle(T0 + m * 60);
        for f in rep.findings.iter().filter(|f| f.verdict >= policy::Verdict::Drain) {
            seen.push(format!("{m}: {} {} {}", f.job_id, f.verdict, f.signature));
        }
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{seen:?}; Slurm calls: {calls:#?}"
    );
}

/// A light decode (NVDEC 8-10 %, utilization.gpu 2 %, ~80 W, 4 GB) whose decoder reads 0 %
/// from read `pause_from` on (the stream ended or paused).
struct LightDecodeThenPause {
    cycle: u32,
    pause_from: u32,
}

impl Telemetry for LightDecodeThenPause {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let mut r = common::cluster::OneIdleGpu {
            cycle: n,
            power_known: true,
        }
        .read(now_s);
        let g = &mut r.gpus[0];
        g.util_pct = Some(2.0);
        g.dec_pct = Some(if n >= self.pause_from { 0.0 } else { 8.0 + (n % 3) as f64 });
        g.enc_pct = Some(0.0);
        g.mem_used_mib = Some(4_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        r
    }
}

/// Finding 2 (MAJOR): the `codec_active` hold (daemon.rs, after `Engine::step`) still lowers
/// the verdict AFTER the engine stored its rung and counted drain/cancel dwell, so when it
/// lifts a window after the last video work the job goes straight to drain, and a window
/// later to cancel. The daemon itself calls a GPU whose video engines worked within the
/// window "working", yet the policy's stages (drain after 30 min of breach, cancel after
/// 60) are not applied to the idleness that follows: a decoder paused from minute 70 is
/// drained at minute 90 (20 min of idleness) and cancelled at 110 (40 min), where a GPU
/// idle from the start (control below) is drained at 30 and cancelled at 60.
/// Expected: no drain before 70 + 30, no cancel before 70 + 60.
#[test]
fn r36_a_paused_decoder_is_drained_and_cancelled_sooner_than_the_stages_allow() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        LightDecodeThenPause { cycle: 0, pause_from: 70 },
    );
    let mut drain_at = None;
    let mut cancel_at = None;
    for m in 0..200 {
        d.cycle(T0 + m * 60);
        let calls = c.borrow().calls.clone();
        if drain_at.is_none() && calls.iter().any(|c| c.starts_with("drain")) {
            drain_at = Some(m);
        }
        if cancel_at.is_none() && calls.iter().any(|c| c.starts_with("scancel")) {
            cancel_at = Some(m);
        }
    }
    assert!(
        drain_at.is_none_or(|m| m >= 70 + 30) && cancel_at.is_none_or(|m| m >= 70 + 60),
        "decoder idle from minute 70: drained at {drain_at:?}, cancelled at {cancel_at:?}"
    );
}

/// Control for finding 2 (passes): a GPU idle from the first read is drained no sooner than
/// 30 minutes and cancelled no sooner than 60 (the stages).
#[test]
fn r36_control_an_idle_gpu_waits_for_the_stages() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        common::cluster::OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
    );
    let mut drain_at = None;
    let mut cancel_at = None;
    for m in 0..120 {
        d.cycle(T0 + m * 60);
        let calls = c.borrow().calls.clone();
        if drain_at.is_none() && calls.iter().any(|c| c.starts_with("drain")) {
            drain_at = Some(m);
        }
        if cancel_at.is_none() && calls.iter().any(|c| c.starts_with("scancel")) {
            cancel_at = Some(m);
        }
    }
    assert!(
        drain_at.is_some_and(|m| m >= 29) && cancel_at.is_some_and(|m| m >= 59),
        "drain {drain_at:?} cancel {cancel_at:?}"
    );
}

/// PIDs 1801..1803 belong to jobs 801..803.
struct Procs3;
impl enforcer::attribution::ProcReader for Procs3 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (1801..=1803)
            .contains(&pid)
            .then(|| format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 1000))
    }
}

/// A node of 3 GPUs whose collector reads every GPU at 0 % and near-idle power though each
/// holds a job's process and 30 GB (the broken collector the suspect rule is for). The
/// process of job 803 (GPU-2) is gone from read `803_ends` on.
struct AllLookHung {
    cycle: u32,
    ends: u32,
}

impl Telemetry for AllLookHung {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
        let n = self.cycle;
        self.cycle += 1;
        let gone = n >= self.ends;
        let gpu = |i: u16| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            util_pct: Some(0.0),
            mem_used_mib: Some(if i == 2 && gone { 3.0 } else { 30_000.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(55.0 + ((n + u32::from(i)) % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(u32::from(i)),
            mig_enabled: Some(false),
            ..Default::default()
        };
        let app = |i: u16| ComputeApp {
            gpu_uuid: Some(format!("GPU-{i}")),
            pid: Some(1801 + u32::from(i)),
            used_memory_mib: Some(29_800.0),
            ..Default::default()
        };
        let apps = if gone { vec![app(0), app(1)] } else { vec![app(0), app(1), app(2)] };
        TelemetryRead {
            gpus: vec![gpu(0), gpu(1), gpu(2)],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps,
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Finding 3 (MAJOR): the suspect-collector hold (plan.rs, `p.suspect`) is decided per cycle
/// from how many jobs alert, and is applied after `Engine::step` has let the ladder climb.
/// When the count drops (here one of three "hung" jobs ends) the very next cycle drains the
/// others on the same readings the rule distrusted a minute earlier. Expected: no drain in
/// the cycle after the suspect rule stops tripping (the readings it distrusted still fill
/// the windows); on 6014c67 job 801 is drained at once.
#[test]
fn r36_the_suspect_collector_hold_lapses_when_one_job_leaves() {
    use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![
        job("801", 801, 1, &[NODE]),
        job("802", 802, 1, &[NODE]),
        job("803", 803, 1, &[NODE]),
    ]);
    c.borrow_mut().node_gres = Some("gpu:3".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, dir.path(), "enforce", ""),
        FakeSlurm(c.clone()),
        AllLookHung { cycle: 0, ends: 90 },
        real_executor(&c),
        Box::new(Procs3),
        T0,
    );
    let mut suspect_seen = false;
    for m in 0..90 {
        let rep = d.cycle(T0 + m * 60);
        suspect_seen |= rep.skips.iter().any(|s| s.kind == enforcer::plan::SkipKind::SuspectCollector);
    }
    assert!(suspect_seen, "control: the suspect rule holds the three jobs");
    assert!(
        !c.borrow().calls.iter().any(|c| c.starts_with("drain")),
        "control: no drain while suspect"
    );
    // Job 803 ends.
    c.borrow_mut().jobs.retain(|j| j.job_id != "803");
    d.cycle(T0 + 90 * 60);
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain")),
        "one job left and the other two, read by the same suspect collector, are drained at once: {calls:#?}"
    );
}

/// An idle-looking GPU (utilization.gpu 2 %, ~80 W, 4 GB) whose driver refuses the codec
/// fields (`codec_unread`) until read `readable_from`; from then on both read 0 %.
struct CodecRefusedThenIdle {
    cycle: u32,
    readable_from: u32,
}

impl Telemetry for CodecRefusedThenIdle {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let mut r = common::cluster::OneIdleGpu {
            cycle: n,
            power_known: true,
        }
        .read(now_s);
        let readable = n >= self.readable_from;
        r.codec_unread = !readable;
        let g = &mut r.gpus[0];
        g.util_pct = Some(2.0);
        g.dec_pct = readable.then_some(0.0);
        g.enc_pct = readable.then_some(0.0);
        g.mem_used_mib = Some(4_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        r
    }
}

/// Finding 2, the `codec_unread` form: the engine counts drain dwell over the readings in
/// which video work was unseen (the hold is applied after `Engine::step`), so the cycle the
/// hold ends (a window after the fields are read again) drains at once: 20 minutes after
/// the first read that could show video work, where the stages want 30 of breach.
/// Expected: no drain before 70 + 30.
#[test]
fn r36_the_codec_unread_hold_ends_in_a_drain_counted_over_unseen_readings() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        CodecRefusedThenIdle {
            cycle: 0,
            readable_from: 70,
        },
    );
    let mut drain_at = None;
    for m in 0..150 {
        d.cycle(T0 + m * 60);
        if drain_at.is_none() && c.borrow().calls.iter().any(|c| c.starts_with("drain")) {
            drain_at = Some(m);
        }
    }
    assert!(
        drain_at.is_none_or(|m| m >= 70 + 30),
        "codec fields read from minute 70: drained at {drain_at:?}"
    );
}

/// Control for finding 1 (passes): the same node with every row's UUID read is held at alert
/// throughout (review 35's fix); the drain above comes from the reads without GPU-0's UUID.
#[test]
fn r36_control_with_every_uuid_read_the_lone_job_is_held() {
    use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("902", 902, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, dir.path(), "enforce", ""),
        FakeSlurm(c.clone()),
        HiddenMainVisibleHelper {
            cycle: 0,
            helper_ends: 40,
            no_uuid: vec![],
        },
        real_executor(&c),
        Box::new(Proc9202),
        T0,
    );
    let mut alerted = false;
    for m in 0..200 {
        let rep = d.cycle(T0 + m * 60);
        alerted |= rep
            .findings
            .iter()
            .any(|f| f.job_id == "902" && f.verdict == policy::Verdict::Alert);
    }
    let calls = c.borrow().calls.clone();
    assert!(alerted, "control: 902 is judged idle on GPU-1 and held at alert");
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:#?}"
    );
}
