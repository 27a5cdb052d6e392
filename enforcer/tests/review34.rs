//! Review 34 (of f85c79a). Each test below but the last two failed on that commit (a finding
//! each) and passes since the hold was made fail-closed and lasting, with a fixed 256 MiB
//! margin, `codec_unread` holding every signature and `codec_active` holding a job whose
//! video engines work:
//! * r34_the_memory_unaccounted_hold_lapses_with_one_cycle_of_accounted_memory,
//!   r34_a_job_of_short_hidden_processes_is_placed_by_elimination_in_the_gaps_and_cancelled:
//!   the memory_unaccounted hold and the elimination ban last only for cycles that show the
//!   unaccounted memory; r34_a_failed_compute_apps_query_lifts_the_memory_unaccounted_hold:
//!   a failed (or partly unreadable) compute-apps read lifts it too.
//! * r34_hidden_memory_under_five_percent_still_eliminates: hidden memory under the "held"
//!   measure (5 % of memory.total) is not seen.
//! * r34_hidden_memory_beside_a_process_of_unknown_memory_still_eliminates: a listed process
//!   with `[N/A]` used_memory makes the GPU's hidden memory count as none.
//! * r34_codec_unread_does_not_hold_unknown: the codec_unread hold leaves out `unknown`.
//! * r34_with_util_threshold_above_the_codec_cap_a_transcoder_is_cancelled_as_idle.
//!
//! Passing then too (sound areas; trial20.rs holds the controls that are acted on): r34_trial20_as_given_is_held, r34_codec_seen_survives_a_restart.

#![allow(clippy::single_range_in_vec_init)]

mod common;

use common::cluster::{cluster, config_with, job, real_executor, NODE, POLICY, T0};
use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// As trial20.rs: 0 busy (job 901, PID 1001, 30 GB listed); 2 busy, its memory.used
/// `gpu2_used` MiB, one listed process (901's helper, PID 1003) of `helper_mib` (None:
/// `[N/A]`); 1 and 3 idle. Job 902's processes on GPU 2 are hidden.
struct Node {
    cycle: u32,
    gpu2_used: f64,
    helper_mib: Option<f64>,
    /// Reads in which the hidden processes' memory is not there (GPU 2 reads just the helper's).
    gap: Vec<std::ops::Range<u32>>,
    /// Reads in which the compute-apps query fails (`apps` None).
    apps_fail: std::ops::Range<u32>,
}

impl Telemetry for Node {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let gpu2_used = if self.gap.iter().any(|g| g.contains(&n)) {
            self.helper_mib.unwrap_or(500.0)
        } else {
            self.gpu2_used
        };
        let gpu = |i: u16, busy: bool| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            util_pct: Some(if busy { 78.0 + (n % 5) as f64 } else { 0.0 }),
            mem_used_mib: Some(match (i, busy) {
                (2, _) => gpu2_used,
                (_, true) => 30_000.0,
                _ => 3.0,
            }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(if busy { 300.0 } else { 55.0 } + ((n + u32::from(i)) % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(u32::from(i)),
            mig_enabled: Some(false),
            ..Default::default()
        };
        let app = |uuid: &str, pid: u32, mib: Option<f64>| ComputeApp {
            gpu_uuid: Some(uuid.into()),
            pid: Some(pid),
            used_memory_mib: mib,
            ..Default::default()
        };
        let apps_fail = self.apps_fail.contains(&n);
        TelemetryRead {
            gpus: vec![gpu(0, true), gpu(1, false), gpu(2, true), gpu(3, false)],
            apps: (!apps_fail).then(|| AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: vec![app("GPU-0", 1001, Some(30_000.0)), app("GPU-2", 1003, self.helper_mib)],
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

struct Procs;
impl enforcer::attribution::ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 1001 | 1003).then(|| "0::/system.slice/slurmstepd.scope/job_901/step_0/user/task_0\n".to_string())
    }
}

fn run(gpu2_used: f64, helper_mib: Option<f64>) -> Vec<String> {
    run_gap(gpu2_used, helper_mib, vec![])
}

fn run_gap(gpu2_used: f64, helper_mib: Option<f64>, gap: Vec<std::ops::Range<u32>>) -> Vec<String> {
    run_full(gpu2_used, helper_mib, gap, 0..0)
}

fn run_full(gpu2_used: f64, helper_mib: Option<f64>, gap: Vec<std::ops::Range<u32>>, apps_fail: std::ops::Range<u32>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("901", 901, 2, &[NODE]), job("902", 902, 2, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:4".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, dir.path(), "enforce", ""),
        common::cluster::FakeSlurm(c.clone()),
        Node {
            cycle: 0,
            gpu2_used,
            helper_mib,
            gap,
            apps_fail,
        },
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    for m in 0..180 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    calls
        .into_iter()
        .filter(|c| (c.starts_with("drain") || c.starts_with("scancel")) && c.contains("902"))
        .collect()
}

/// Sanity: trial 20 as given (30 GB on GPU 2, helper 500 MiB): no action.
#[test]
fn r34_trial20_as_given_is_held() {
    assert!(run(30_000.0, Some(500.0)).is_empty());
}

/// The helper's used_memory is `[N/A]` (as nvidia-smi prints for processes it cannot query):
/// GPU 2's 30 GB cannot be summed, the GPU is not marked, and elimination goes ahead.
#[test]
fn r34_hidden_memory_beside_a_process_of_unknown_memory_still_eliminates() {
    let acted = run(30_000.0, None);
    assert!(
        acted.is_empty(),
        "GPU 2 holds 30 GB beside a process of [N/A] memory, yet 902 was: {acted:?}"
    );
}

/// 902's hidden processes hold 3.5 GB on GPU 2 (a small inference job), under 5 % of 80 GB:
/// not marked, elimination goes ahead, and the working job 902 is cancelled.
#[test]
fn r34_hidden_memory_under_five_percent_still_eliminates() {
    let acted = run(4_000.0, Some(500.0));
    assert!(
        acted.is_empty(),
        "3.5 GB on GPU 2 no listed process accounts for, yet 902 was: {acted:?}"
    );
}

/// Job 802's one GPU transcoding on an old driver that refuses utilization.encoder/.decoder
/// (`codec_unread`): utilization.gpu 0 % (NVENC/NVDEC work does not show there), 30 GB held, ~80 W; no compute process listed
/// (processes are counted 0), so the window matches `unknown` (memory held, no process).
struct OldDriverTranscoder {
    cycle: u32,
}

impl Telemetry for OldDriverTranscoder {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let mut r = common::cluster::OneIdleGpu {
            cycle: n,
            power_known: true,
        }
        .read(now_s);
        let g = &mut r.gpus[0];
        g.util_pct = Some(0.0);
        g.mem_used_mib = Some(30_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        r.codec_unread = true;
        r
    }
}

/// The `codec_unread` hold names hung/idle/starved/partial, but `unknown` is a low-util
/// signature too (every GPU below util_threshold_pct), and its ceiling may be raised: the
/// transcoding job is drained and cancelled as `unknown` while its video work is unseen.
#[test]
fn r34_codec_unread_does_not_hold_unknown() {
    let policy = common::cluster::POLICY.replace(
        "ceilings = { idle = \"cancel\" }",
        "ceilings = { idle = \"cancel\", unknown = \"cancel\" }",
    );
    assert!(policy.contains("unknown = \"cancel\""));
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(&policy, dir.path(), "enforce", OldDriverTranscoder { cycle: 0 });
    let mut sigs = std::collections::BTreeSet::new();
    for m in 0..140 {
        let rep = d.cycle(T0 + m * 60);
        for f in &rep.findings {
            if f.verdict >= policy::Verdict::Alert {
                sigs.insert(format!("{}:{}", f.verdict, f.signature));
            }
        }
    }
    let calls = c.borrow().calls.clone();
    eprintln!("signatures: {sigs:?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "video fields refused by the driver, yet judged {sigs:?}; Slurm calls: {calls:#?}"
    );
}

/// Trial 20's node as in trial20.rs's second test (GPU 2's memory all accounted for in the
/// first 25 minutes, so 902 is placed by elimination on {1, 3} and kept), but 902's hidden
/// processes also free their memory for three minutes (a worker restart) at minute 100: the `memory_unaccounted` hold holds only in
/// cycles that show the unaccounted memory, so 902 (kept placed by elimination on idle {1, 3}
/// since minute 0, its breach long past the cancel stage) is cancelled in the gap.
#[test]
fn r34_the_memory_unaccounted_hold_lapses_with_one_cycle_of_accounted_memory() {
    let acted = run_gap(30_000.0, Some(500.0), vec![0..25, 100..103]);
    assert!(
        acted.is_empty(),
        "hidden processes for 100 minutes, 3 minutes without, and 902 was: {acted:?}"
    );
}

/// Job 902 hidden on GPU 2 from the start (trial 20's first test), but it runs its GPU work
/// as a series of processes, with one minute between two in every ten (the hidden memory is
/// gone in those reads). No GPU is accounted in most cycles, yet each one-minute gap lets
/// elimination place 902 on idle {1, 3} (kept afterwards), and the gaps in which the hold is
/// not applied carry out the drain and the cancel.
#[test]
fn r34_a_job_of_short_hidden_processes_is_placed_by_elimination_in_the_gaps_and_cancelled() {
    let gaps: Vec<std::ops::Range<u32>> = (0..18).map(|k| (k * 10 + 9)..(k * 10 + 10)).collect();
    let acted = run_gap(30_000.0, Some(500.0), gaps);
    assert!(acted.is_empty(), "hidden processes in 9 reads of 10, and 902 was: {acted:?}");
}

/// Job 802's GPU transcoding (review33.rs's Transcoder: utilization.gpu 2 %, decoder ~95 %,
/// 4 GB of 80 GB, ~80 W, its process not listed) under `util_threshold_pct = 60`, which
/// check-config only warns of ("starved, partial, unknown alerts"; the README: "video work
/// alone can look starved or partial"). The codec cap (49) leaves it below the threshold, and
/// with memory under the held measure and power under idle_power_w it is `idle`, whose
/// ceiling is cancel: the transcoding job is drained and cancelled.
struct Transcoder {
    cycle: u32,
}

impl Telemetry for Transcoder {
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
        g.dec_pct = Some(94.0 + (n % 3) as f64);
        g.enc_pct = Some(0.0);
        g.mem_used_mib = Some(4_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        r
    }
}

#[test]
fn r34_with_util_threshold_above_the_codec_cap_a_transcoder_is_cancelled_as_idle() {
    let policy = common::cluster::POLICY.replace("[policy]", "[policy]\nutil_threshold_pct = 60");
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(&policy, dir.path(), "enforce", Transcoder { cycle: 0 });
    let mut sigs = std::collections::BTreeSet::new();
    for m in 0..140 {
        let rep = d.cycle(T0 + m * 60);
        for f in &rep.findings {
            if f.verdict >= policy::Verdict::Alert {
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

/// Round trip of `codec_seen` through the state file: 10 minutes of decode at ~95 %, a
/// restart, and the decoder `[N/A]` from then on. Expected (as without the restart,
/// review33.rs finding B): never drained or cancelled.
#[test]
fn r34_codec_seen_survives_a_restart() {
    struct NoDec(Transcoder);
    impl Telemetry for NoDec {
        fn read(&mut self, now_s: i64) -> TelemetryRead {
            let mut r = self.0.read(now_s);
            r.gpus[0].dec_pct = None;
            r
        }
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let (_c, mut d) = common::cluster::daemon_802(common::cluster::POLICY, dir.path(), "enforce", Transcoder { cycle: 0 });
        for m in 0..10 {
            d.cycle(T0 + m * 60);
        }
    }
    let state = std::fs::read_to_string(dir.path().join("state.json")).unwrap_or_default();
    eprintln!("codec_seen in state: {}", state.contains("codec_seen"));
    let (c, mut d) = common::cluster::daemon_802(common::cluster::POLICY, dir.path(), "enforce", NoDec(Transcoder { cycle: 10 }));
    for m in 10..150 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "decoder [N/A] after a restart: {calls:#?}"
    );
}

/// trial20.rs's second test (902 placed by elimination in the first 25 minutes and kept,
/// processes hidden from then on), with the compute-apps query failing (a timeout) for 3
/// reads at minute 100: the unaccounted-memory test then returns nothing, so the hold is off.
#[test]
fn r34_a_failed_compute_apps_query_lifts_the_memory_unaccounted_hold() {
    let acted = run_full(30_000.0, Some(500.0), vec![0..25], 100..103);
    assert!(acted.is_empty(), "compute-apps failing 3 reads, and 902 was: {acted:?}");
}
