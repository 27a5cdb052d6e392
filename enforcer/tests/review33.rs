//! The thirty-third review (of 91ab0da..2b88ba0): each test failed on the code as reviewed.
//!
//! * CRITICAL: the `index_disagrees` hold was in memory only; after a restart (or the switch
//!   from observe to enforce) the job was judged on the kept placement on another job's GPU
//!   and cancelled. The hold is now kept in the state file.
//! * A steady video decode (95 % NVDEC, 80 W) folded into `util_pct` looked like a `spin`
//!   deadlock: codec work now counts up to `policy::CODEC_UTIL_CAP_PCT`.
//! * A decoder field that turned `[N/A]` after giving values read as "no video work": such a
//!   reading is now unknown.
//! * A recovered job's drain record outlived a takeover by another job, or a resume that
//!   timed out after applying, and the next resume read as an admin's override.
//! * The enforcer's recovery restarted its count at every missed read, while the sweep and the
//!   replay counted the cycle as the engine judged it: the enforcer now counts as they do.

mod common;

use common::cluster::{cluster, config_with, cycles_802, daemon_802, job, real_executor, FakeSlurm, OneIdleGpu, NODE, POLICY, T0};
use enforcer::executor::Outcome;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use policy::Verdict;

/// Job 802's one GPU doing steady video decode: `utilization.gpu` 2 % (NVDEC work does not
/// show there), `utilization.decoder` ~95 %, 4 GB held, ~80 W of 400 W (NVDEC draws little),
/// power moving a little each read. In the reads `dec_na` the decoder field prints `[N/A]`
/// (`dec_pct` None); in the reads `util_na` `utilization.gpu` prints `[N/A]` instead.
struct Transcoder {
    cycle: u32,
    dec_na: std::ops::Range<u32>,
    util_na: std::ops::Range<u32>,
}

impl Telemetry for Transcoder {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let mut r = OneIdleGpu {
            cycle: n,
            power_known: true,
        }
        .read(now_s);
        let g = &mut r.gpus[0];
        g.util_pct = Some(2.0);
        g.dec_pct = Some(94.0 + (n % 3) as f64);
        g.enc_pct = Some(0.0);
        g.mem_used_mib = Some(4_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        if self.dec_na.contains(&n) {
            g.dec_pct = None;
        }
        if self.util_na.contains(&n) {
            g.util_pct = None;
        }
        r
    }
}

fn kinds_done(cycles: &[common::cluster::Cycle802], kind: &str) -> Vec<usize> {
    cycles
        .iter()
        .enumerate()
        .filter(|(_, (done, _, _))| done.contains(&kind))
        .map(|(i, _)| i)
        .collect()
}

/// Finding A: the decoder's utilisation is folded into the compute reading that `spin` judges
/// ("util at least spin_util_pct on every sample, power low and flat": an NCCL deadlock). A
/// steady transcode at NVDEC ~95 % and ~80 W is exactly that. With `ceilings.spin = "cancel"`
/// (which the README's sweep section supports and the demo config uses) the transcoding job
/// of trial 19 is still drained and cancelled, now as `spin` instead of `hung`.
#[test]
fn a_steady_video_decode_is_not_a_spin_deadlock() {
    let policy = POLICY.replace(
        "ceilings = { idle = \"cancel\" }",
        "ceilings = { idle = \"cancel\", spin = \"cancel\" }",
    );
    assert!(policy.contains("spin = \"cancel\""));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let tel = Transcoder {
        cycle: 0,
        dec_na: 0..0,
        util_na: 0..0,
    };
    let (c, mut d) = daemon_802(&policy, &state, "enforce", tel);
    let mut sigs = std::collections::BTreeSet::new();
    for m in 0..140 {
        let rep = d.cycle(T0 + m * 60);
        for f in &rep.findings {
            if f.verdict >= Verdict::Alert {
                sigs.insert(format!("{}:{}", f.verdict, f.signature));
            }
        }
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "a GPU decoding video at 95 % was judged {sigs:?}; Slurm calls: {calls:#?}"
    );
}

/// Finding B: a codec field that reads `[N/A]` after the GPU has shown the engine at work is
/// taken as "no codec work" (utilization.gpu alone), where `[N/A]` in utilization.gpu itself
/// is unknown (`gpu_unread`, then insufficient evidence). A transcoding job whose decoder
/// column turns `[N/A]` from minute 10 is judged `hung` on utilization.gpu's 2 % and drained
/// and cancelled; the same job with utilization.gpu `[N/A]` instead is never acted on.
#[test]
fn a_decoder_reading_lost_to_not_available_is_unknown_not_idle() {
    // Control: utilization.gpu [N/A] from read 10 on: nothing is done.
    let control = cycles_802(
        Transcoder {
            cycle: 0,
            dec_na: 0..0,
            util_na: 10..1000,
        },
        140,
    );
    assert!(kinds_done(&control, "drain").is_empty() && kinds_done(&control, "cancel").is_empty());
    // The decoder column [N/A] from read 10 on.
    let out = cycles_802(
        Transcoder {
            cycle: 0,
            dec_na: 10..1000,
            util_na: 0..0,
        },
        140,
    );
    let drains = kinds_done(&out, "drain");
    let cancels = kinds_done(&out, "cancel");
    assert!(
        drains.is_empty() && cancels.is_empty(),
        "decoder [N/A] after 10 minutes of 95 % decode: drained at {drains:?}, cancelled at {cancels:?} (verdicts: {:?})",
        out.iter().map(|c| c.2).collect::<Vec<_>>()
    );
}

/// Two GPUs, job 801's process on GPU-0 and job 802's on GPU-1. Each GPU is `hung` (0 %,
/// 30 GB held, power near idle) except in its `busy` reads, where it works (90 %, ~300 W).
struct TwoJobs {
    cycle: u32,
    busy0: std::ops::Range<u32>,
    busy1: std::ops::Range<u32>,
}

impl Telemetry for TwoJobs {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        common::cluster::jobs_801_802_read(n, [self.busy0.contains(&n), self.busy1.contains(&n)])
    }
}

/// Finding C: a recovery whose drain is taken over by another job leaves the recovered job's
/// (confirmed) drain record in place. Job 801 is drained, works again; two windows later job
/// 802, due for a drain, takes our drain over (Reason rewritten to 802) instead of a resume.
/// When 802's drain ends (802 cancelled, the node resumed as "job gone"), the next cycle finds
/// 801 running, the node not drained and 801's old record confirmed: it is taken for an
/// admin's resume of our drain. A false `admin_override` record and WARN, and 801 is never
/// drained or cancelled again in its run, however long it then idles.
#[test]
fn a_recovery_taken_over_by_another_job_is_not_an_admin_override() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let c = cluster(vec![job("801", 801, 1, &[NODE]), job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    // GPU-0 (801) works from read 52 to 110, idle before and after; GPU-1 (802) idle throughout.
    let tel = TwoJobs {
        cycle: 0,
        busy0: 52..110,
        busy1: 0..0,
    };
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, &state, "enforce", ""),
        FakeSlurm(c.clone()),
        tel,
        real_executor(&c),
        Box::new(common::cluster::Procs801And802),
        T0,
    );
    let mut log = Vec::new();
    for m in 0..260 {
        let rep = d.cycle(T0 + m * 60);
        for (a, o) in &rep.actions {
            if a.kind() != "alert" && matches!(o, Outcome::Done) {
                log.push(format!("{m}: {} {}", a.kind(), a.job_id().unwrap_or("")));
            }
        }
        for s in &rep.skips {
            if s.kind == enforcer::plan::SkipKind::AdminOverride {
                log.push(format!(
                    "{m}: skip admin_override {} {}",
                    s.action,
                    s.job_id.as_deref().unwrap_or("")
                ));
            }
        }
    }
    let calls = c.borrow().calls.clone();
    let overrides: Vec<_> = common::audit(&state)
        .into_iter()
        .filter(|r| r["record"] == "admin_override")
        .collect();
    assert!(
        overrides.is_empty(),
        "no admin touched the node, yet: {overrides:?}\nactions: {log:#?}\nSlurm calls: {calls:#?}"
    );
}

/// Trial 19's node: job 901's Slurm GPU is index 1 (GPU-1, minor 1), where it works (85 %,
/// ~300 W; its own process is not listed). A process of the job (a helper, PID 9101) runs on
/// GPU-0 (minor 0), holding 30 GB at 0 %, in the reads before `helper_ends`; after that GPU-0
/// is empty and idle (3 MiB, ~55 W) and nvidia-smi lists no process.
struct OutsideHelper {
    cycle: u32,
    helper_ends: u32,
}

impl Telemetry for OutsideHelper {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let helper = n < self.helper_ends;
        let gpu0 = enforcer::parse::smi::GpuReading {
            index: Some(0),
            uuid: Some("GPU-0".into()),
            util_pct: Some(0.0),
            mem_used_mib: Some(if helper { 30_000.0 } else { 3.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(55.0 + (n % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(0),
            ..Default::default()
        };
        let gpu1 = enforcer::parse::smi::GpuReading {
            index: Some(1),
            uuid: Some("GPU-1".into()),
            util_pct: Some(83.0 + (n % 5) as f64),
            mem_used_mib: Some(30_000.0),
            mem_total_mib: Some(81_920.0),
            power_w: Some(300.0 + (n % 7) as f64),
            power_limit_w: Some(400.0),
            minor: Some(1),
            ..Default::default()
        };
        let apps = if helper {
            vec![enforcer::parse::smi::ComputeApp {
                gpu_uuid: Some("GPU-0".into()),
                pid: Some(9101),
                used_memory_mib: Some(30_000.0),
                ..Default::default()
            }]
        } else {
            vec![]
        };
        TelemetryRead {
            gpus: vec![gpu0, gpu1],
            apps: Some(enforcer::parse::smi::AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps,
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

struct Proc9101;
impl enforcer::attribution::ProcReader for Proc9101 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 9101).then(|| "0::/system.slice/slurmstepd.scope/job_901/step_0/user/task_0\n".to_string())
    }
}

/// Finding D: the `index_disagrees` hold ("held at alert for the rest of its run", README)
/// lives in memory only. Trial 19's job, whose helper ran on a GPU outside its Slurm index,
/// is held while the daemon runs; the helper ends; the daemon restarts (an upgrade, a
/// crash, a reboot of the unit). The new process has forgotten the hold, while the state file
/// kept the job's placement on the GPU outside its allocation (GPU-0, now empty and idle):
/// the job, working at 85 % on its own GPU-1 all along, is drained and cancelled as `idle` on
/// GPU-0's readings.
#[test]
fn the_index_disagrees_hold_survives_a_restart() {
    index_hold_run("enforce");
}

/// Finding D through the README's "three steps to production": a week in observe mode, then
/// a restart with `mode = "enforce"`: the hold is forgotten at the switch.
#[test]
fn the_index_disagrees_hold_survives_the_switch_from_observe_to_enforce() {
    index_hold_run("observe");
}

fn index_hold_run(first_mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let mut j = job("901", 901, 1, &[NODE]);
    j.gres_idx = vec![Some(vec![1])];
    let c = cluster(vec![j]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    let make = |first_read: u32, t0: i64, mode: &str| {
        enforcer::daemon::Daemon::new(
            config_with(POLICY, &state, mode, ""),
            FakeSlurm(c.clone()),
            OutsideHelper {
                cycle: first_read,
                helper_ends: 40,
            },
            real_executor(&c),
            Box::new(Proc9101),
            t0,
        )
    };
    let mut held_before_restart = false;
    {
        let mut d = make(0, T0, first_mode);
        for m in 0..60 {
            let rep = d.cycle(T0 + m * 60);
            held_before_restart |= rep.findings.iter().any(|f| f.job_id == "901" && f.verdict >= Verdict::Alert);
        }
    }
    let before = c.borrow().calls.clone();
    assert!(
        !before.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "held while the first process ran: {before:#?}"
    );
    // Restart at minute 60.
    let mut d = make(60, T0 + 3600, "enforce");
    let mut sigs = Vec::new();
    let mut seen = before.len();
    for m in 60..240 {
        let rep = d.cycle(T0 + m * 60);
        for f in rep.findings.iter().filter(|f| f.job_id == "901" && f.verdict >= Verdict::Drain) {
            sigs.push(format!("{m}: {} {}", f.verdict, f.signature));
        }
        let now = c.borrow().calls.len();
        for call in &c.borrow().calls[seen..now] {
            sigs.insert(0, format!("minute {m}: {call}"));
        }
        seen = now;
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{first_mode} before the restart, held: {held_before_restart}; after it: {:?}…; Slurm calls: {calls:#?}",
        sigs.iter().take(8).collect::<Vec<_>>()
    );
}

/// Job 802's one GPU: idle (hung-free `idle`: 0 %, 3 MiB) before read 40, working (90 %,
/// 30 GB, ~300 W) from read 40 on; nvidia-smi gives no data in every read `n` with
/// `n % 10 == 5` from read 40 on (a one-minute miss every ten minutes, well inside
/// `max_sample_gap`).
struct WorksWithMisses {
    cycle: u32,
}

impl Telemetry for WorksWithMisses {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        if n >= 40 && n % 10 == 5 {
            return TelemetryRead {
                no_data: Some("timeout".into()),
                ..Default::default()
            };
        }
        job_802_read(n, now_s, n >= 40)
    }
}

/// Finding E: the sim's recovery (`Tally`, fed `Recovery::counts` of every finding) counts a
/// cycle in which the job's GPU was not read as healthy when the engine's window bridges the
/// hole, as it does up to `max_sample_gap`; the enforcer counted no such cycle and started
/// over. A job that works again under a collector that misses one read in ten was resumed two
/// windows later in the sweep and the replay, and never by the enforcer. The enforcer now
/// counts as they do (resuming is the safe direction).
#[test]
fn a_drained_job_that_works_again_is_resumed_despite_one_missed_read_in_ten() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (c, mut d) = daemon_802(POLICY, &state, "enforce", WorksWithMisses { cycle: 0 });
    let mut log = Vec::new();
    let mut seen = 0;
    for m in 0..200 {
        d.cycle(T0 + m * 60);
        let now = c.borrow().calls.len();
        for call in &c.borrow().calls[seen..now] {
            log.push(format!("minute {m}: {call}"));
        }
        seen = now;
    }
    assert!(log.iter().any(|l| l.contains("drain")), "{log:#?}");
    assert!(
        log.iter().any(|l| l.contains("resume")),
        "drained, worked from minute 40 to 200 with one missed read in ten, never resumed: {log:#?}"
    );
}

/// [`FakeSlurm`] whose `scontrol update … State=RESUME` times out once (reported as failed)
/// after Slurm applied it.
struct ResumeTimesOut {
    inner: FakeSlurm,
    failed_once: bool,
}

impl enforcer::slurm::SlurmClient for ResumeTimesOut {
    fn jobs(&mut self) -> Result<enforcer::parse::JobsRead, enforcer::slurm::CommandError> {
        self.inner.jobs()
    }
    fn node_state(&mut self, node: &str) -> Result<enforcer::parse::scontrol_node::NodeState, enforcer::slurm::CommandError> {
        self.inner.node_state(node)
    }
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), enforcer::slurm::CommandError> {
        self.inner.drain(node, reason)
    }
    fn resume(&mut self, node: &str) -> Result<(), enforcer::slurm::CommandError> {
        self.inner.resume(node)?;
        if !self.failed_once {
            self.failed_once = true;
            return Err(common::cluster::err("scontrol update (timed out)"));
        }
        Ok(())
    }
    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), enforcer::slurm::CommandError> {
        self.inner.set_admin_comment(job_id, text)
    }
    fn cancel(&mut self, job_id: &str) -> Result<enforcer::slurm::CancelOutcome, enforcer::slurm::CommandError> {
        self.inner.cancel(job_id)
    }
}

/// Job 802's GPU idle except in the reads `busy`.
struct Phases802 {
    cycle: u32,
    busy: std::ops::Range<u32>,
}

impl Telemetry for Phases802 {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        job_802_read(n, now_s, self.busy.contains(&n))
    }
}

/// Read `n` of job 802's one GPU: idle ([`OneIdleGpu`]), or at work when `busy` (88–92 %,
/// 30 GB, ~300 W).
fn job_802_read(n: u32, now_s: i64, busy: bool) -> TelemetryRead {
    let mut r = OneIdleGpu {
        cycle: n,
        power_known: true,
    }
    .read(now_s);
    if busy {
        let g = &mut r.gpus[0];
        g.util_pct = Some(88.0 + (n % 5) as f64);
        g.mem_used_mib = Some(30_000.0);
        g.power_w = Some(300.0 + (n % 7) as f64);
    }
    r
}

/// Finding C, second path: a recovery resume that Slurm applied but whose command reported a
/// failure (a timeout) keeps the job's confirmed drain record; the next cycle sees the node
/// resumed while the job runs and takes it for an admin's override. drain_recovery.rs's
/// scenario (idle, drained, works 40..90, idle again) then never drains the second breach.
#[test]
fn a_recovery_resume_that_timed_out_after_applying_is_not_an_admin_override() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, &state, "enforce", ""),
        FakeSlurm(c.clone()),
        Phases802 { cycle: 0, busy: 40..90 },
        enforcer::executor::RealExecutor {
            slurm: ResumeTimesOut {
                inner: FakeSlurm(c.clone()),
                failed_once: false,
            },
            notify_command: vec!["true".into()],
            webhook: None,
            notice_by_webhook: false,
            timeout: std::time::Duration::from_secs(1),
        },
        Box::new(common::cluster::NoProc),
        T0,
    );
    for m in 0..160 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    let overrides: Vec<_> = common::audit(&state)
        .into_iter()
        .filter(|r| r["record"] == "admin_override")
        .collect();
    assert!(
        overrides.is_empty() && calls.iter().filter(|c| c.starts_with("drain")).count() == 2,
        "overrides {overrides:?}; Slurm calls {calls:#?}"
    );
}
