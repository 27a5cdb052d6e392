//! Review 35 (of 796f4c6). Each test below but the control failed on that commit for the
//! reason its comment gives, and passes since the `codec_active` hold lasts a window past the
//! last video work, the hidden-memory hold covers placements by a job's processes (and
//! nodes with one GPU job), and the daemon reads a drain back right after making it:
//! * A (CRITICAL): the `codec_active` hold lasts one cycle while the engine's ladder climbs
//!   under it; one 0 % decoder read drains, a second cancels (default policy included):
//!   r35_default_policy_one_idle_decoder_read_drains_a_light_decode,
//!   r35_default_policy_two_idle_decoder_reads_cancel_a_light_decode,
//!   r35_one_read_of_a_paused_decoder_drains_a_transcoder,
//!   r35_two_reads_of_a_paused_decoder_cancel_a_transcoder
//!   (control, passing: r35_control_light_decode_without_a_pause_is_not_drained).
//! * C (CRITICAL): hidden memory holds only jobs placed by elimination; a job placed by a
//!   visible stray helper (no device indices) is cancelled on the idle GPU once it ends:
//!   r35_beside_hidden_memory_a_job_placed_by_its_helper_is_cancelled_on_an_idle_gpu,
//!   r35_a_lone_job_placed_by_its_helper_is_cancelled_on_a_free_gpu.
//! * B (MINOR, then documented in the README): an admin resume before the next scontrol read
//!   was no override: r35_an_admin_resume_within_one_interval_of_the_drain_is_not_an_override.

#![allow(clippy::single_range_in_vec_init)]

mod common;

use common::cluster::{HiddenMainVisibleHelper, Proc9202, T0};
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// review34.rs's Transcoder (utilization.gpu 2 %, decoder ~95 %, 4 GB of 80 GB, ~80 W),
/// except that the decoder reads 0 % in the reads of `idle_dec` (a pause between two
/// segments of a stream: NVDEC is sampled over a short period).
struct Transcoder {
    cycle: u32,
    idle_dec: Vec<u32>,
}

/// A light decode (one stream on a big GPU's NVDEC: ~8-10 %), utilization.gpu 2 %, 4 GB of
/// 80 GB, ~80 W; the decoder reads 0 % in the reads of `idle_dec`.
struct LightDecode {
    cycle: u32,
    idle_dec: Vec<u32>,
}

impl Telemetry for LightDecode {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let idle = self.idle_dec.contains(&self.cycle);
        let n = self.cycle;
        let mut r = Transcoder {
            cycle: self.cycle,
            idle_dec: vec![],
        }
        .read(now_s);
        self.cycle += 1;
        r.gpus[0].dec_pct = Some(if idle { 0.0 } else { 8.0 + (n % 3) as f64 });
        r
    }
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
        g.dec_pct = Some(if self.idle_dec.contains(&n) { 0.0 } else { 94.0 + (n % 3) as f64 });
        g.enc_pct = Some(0.0);
        g.mem_used_mib = Some(4_000.0);
        g.power_w = Some(80.0 + 0.5 * (n % 3) as f64);
        r
    }
}

/// Finding A: the `codec_active` hold is for the cycle only. Under `util_threshold_pct = 60`
/// (allowed; check-config only warns) a GPU decoding video at ~95 % for 70 minutes is
/// `idle` by its window (the codec cap, 49 %, leaves it below the threshold); the engine's
/// ladder climbs under the hold, and the one read in which the decoder samples 0 % releases
/// the drain the engine reached meanwhile. Expected: no drain (the window is full of video
/// work). On 796f4c6: drained at minute 70.
#[test]
fn r35_one_read_of_a_paused_decoder_drains_a_transcoder() {
    let policy = common::cluster::POLICY.replace("[policy]", "[policy]\nutil_threshold_pct = 60");
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        &policy,
        dir.path(),
        "enforce",
        Transcoder {
            cycle: 0,
            idle_dec: vec![70],
        },
    );
    for m in 0..90 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "a GPU decoding at ~95 % for 70 minutes, 0 % in one read: {calls:#?}"
    );
}

/// Finding A, to the cancel: the decoder pauses for one read at minute 70 (the drain) and
/// once more at minute 100 (a window and the notice later). Expected: neither drain nor
/// cancel. On 796f4c6: drained at 70 and cancelled at 100.
#[test]
fn r35_two_reads_of_a_paused_decoder_cancel_a_transcoder() {
    let policy = common::cluster::POLICY.replace("[policy]", "[policy]\nutil_threshold_pct = 60");
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        &policy,
        dir.path(),
        "enforce",
        Transcoder {
            cycle: 0,
            idle_dec: vec![70, 100],
        },
    );
    for m in 0..110 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("scancel")),
        "a GPU decoding at ~95 % for 100 minutes, 0 % in two reads: {calls:#?}"
    );
}

/// Finding B: an admin's resume of our drain is an override only once this daemon has seen
/// the drain standing (`DrainRecord::confirmed_s`, set by `observe_node` in a later cycle).
/// An admin who resumes the node before the next cycle's `scontrol show node` (within one
/// interval of the drain: the alert came, they looked, the job works) is not heard: the
/// next cycle drains the node again, and the job is cancelled against the admin's call.
/// Expected: one drain, no second drain, no cancel. On 796f4c6: drained again next cycle,
/// then cancelled.
#[test]
fn r35_an_admin_resume_within_one_interval_of_the_drain_is_not_an_override() {
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
    let mut m = 0;
    while !c.borrow().calls.iter().any(|x| x.starts_with("drain")) && m < 200 {
        d.cycle(T0 + m * 60);
        m += 1;
    }
    assert!(m < 200, "control: the idle job is drained");
    // The admin: `scontrol update NodeName=gpu001 State=RESUME` (clears DRAIN and the Reason).
    {
        let mut cl = c.borrow_mut();
        cl.node_state = "MIXED".into();
        cl.node_reason = None;
    }
    for k in m..m + 120 {
        d.cycle(T0 + k * 60);
    }
    let calls = c.borrow().calls.clone();
    let drains = calls.iter().filter(|x| x.starts_with("drain")).count();
    assert!(
        drains == 1 && !calls.iter().any(|x| x.starts_with("scancel")),
        "the admin resumed our drain before our next read; Slurm calls after: {calls:#?}"
    );
}

/// Finding A under the default policy (util_threshold_pct 15): a light decode (NVDEC at
/// 8-10 %, folded in below the threshold) is held only by the per-cycle `codec_active`
/// hold; the one read in which the decoder samples 0 % drains the node. Expected: no drain.
#[test]
fn r35_default_policy_one_idle_decoder_read_drains_a_light_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        LightDecode {
            cycle: 0,
            idle_dec: vec![70],
        },
    );
    for m in 0..90 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "NVDEC at 8-10 % for 70 minutes, 0 % in one read: {calls:#?}"
    );
}

/// Finding A under the default policy, to the cancel: the light decode's decoder samples 0 %
/// at minute 70 (the drain) and at minute 100 (a window and `notice` later). Expected: no
/// cancel. On 796f4c6: drained at 70, cancelled at 100.
#[test]
fn r35_default_policy_two_idle_decoder_reads_cancel_a_light_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        LightDecode {
            cycle: 0,
            idle_dec: vec![70, 100],
        },
    );
    for m in 0..110 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("scancel")),
        "NVDEC at 8-10 % for 100 minutes, 0 % in two reads: {calls:#?}"
    );
}

/// Control for finding A (passes on 796f4c6): the same light decode without a 0 % read is
/// held by `codec_active` in every cycle and never drained; the drain above comes from the
/// one read alone.
#[test]
fn r35_control_light_decode_without_a_pause_is_not_drained() {
    let dir = tempfile::tempdir().unwrap();
    let (c, mut d) = common::cluster::daemon_802(
        common::cluster::POLICY,
        dir.path(),
        "enforce",
        LightDecode {
            cycle: 0,
            idle_dec: vec![],
        },
    );
    // Since review 36 a job whose GPUs do video work is left out of the cycle (never judged
    // while it does): it was alerted and held at alert before.
    let mut skipped_for_video = 0;
    for m in 0..110 {
        let rep = d.cycle(T0 + m * 60);
        assert!(rep.findings.is_empty(), "judged while decoding: {:?}", rep.findings);
        skipped_for_video += rep.jobs_skipped.iter().filter(|(_, why)| *why == "codec_active").count();
    }
    let calls = c.borrow().calls.clone();
    assert_eq!(skipped_for_video, 110, "control: skipped for its video work every cycle");
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:#?}"
    );
}

/// Finding C: the hidden-memory hold (`memory_unaccounted`, `hidden_runs`) covers only jobs
/// placed by elimination, yet a placement by a job's own visible process assumes as much:
/// that the process shown is where the job works. Here GPU-0's 30 GB are unaccounted in
/// every read (hidden processes, marked in `hidden_runs` for both jobs), 902 is placed by its
/// helper on GPU-1 and 901 by elimination on GPU-0. The helper ends at read 40; 902's
/// placement is kept on GPU-1, now idle, and 902 (working at 85 % on GPU-0 all along) is
/// drained and cancelled as `idle`, while 901 is held. Expected: 902 never drained or
/// cancelled.
#[test]
fn r35_beside_hidden_memory_a_job_placed_by_its_helper_is_cancelled_on_an_idle_gpu() {
    use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("901", 901, 1, &[NODE]), job("902", 902, 1, &[NODE])]);
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
        "{:?}; Slurm calls: {calls:#?}",
        seen.iter().take(4).collect::<Vec<_>>()
    );
}

/// Finding C with one GPU job on the node (GPU-1 free): `unaccounted_memory` is not even
/// consulted ("hidden processes can only be its own"), and they are: 902, working at 85 % on
/// GPU-0, placed by its helper on the free GPU-1, is drained and cancelled as `idle` once the
/// helper ends. Expected: never drained or cancelled.
#[test]
fn r35_a_lone_job_placed_by_its_helper_is_cancelled_on_a_free_gpu() {
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
    for m in 0..200 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "Slurm calls: {calls:#?}"
    );
}
