//! The `codec_unread` hold lasts a full window past the stretch in which nvidia-smi refused
//! utilization.encoder/.decoder (operator trial 21, B4): the window behind the first cycle with
//! the fields read again holds readings in which video work was unseen, so a drain then would
//! rest on them. Also across a restart (the stretch's end is kept in the state file).

mod common;

use common::cluster::{OneIdleGpu, POLICY, T0};
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// Job 802's one GPU: utilization.gpu 0 %, 3 MiB, ~55 W throughout. nvidia-smi refuses the
/// codec fields for the reads `..unread_until` (counted from `first`), and reads them as 0 %
/// from then on. So during the refusal the job may have been transcoding, unseen; after it,
/// it is idle.
struct RefusedThenRead {
    gpu: OneIdleGpu,
    read: u32,
    unread_until: u32,
}

impl Telemetry for RefusedThenRead {
    fn read(&mut self, now_s: i64) -> TelemetryRead {
        let n = self.read;
        self.read += 1;
        let mut r = self.gpu.read(now_s);
        if n < self.unread_until {
            r.codec_unread = true;
        } else {
            r.gpus[0].enc_pct = Some(0.0);
            r.gpus[0].dec_pct = Some(0.0);
        }
        r
    }
}

/// Minutes after [`T0`] of the first drain and the first cancel in cycles at minutes
/// `from..to` of `d`.
fn first_actions<D: FnMut(i64)>(mut cycle: D, calls: impl Fn() -> Vec<String>, from: i64, to: i64) -> (Option<i64>, Option<i64>) {
    let (mut drain, mut cancel) = (None, None);
    for m in from..to {
        let before = calls().len();
        cycle(T0 + m * 60);
        for c in &calls()[before..] {
            if c.starts_with("drain") && drain.is_none() {
                drain = Some(m);
            }
            if c.starts_with("scancel") && cancel.is_none() {
                cancel = Some(m);
            }
        }
    }
    (drain, cancel)
}

const WINDOW_MIN: i64 = 20;

/// Refused for the first 80 minutes (the breach long past the drain stage), read from then on:
/// no drain before a full window of readings with the codec fields, and a drain after it (the
/// hold ends: the job is idle).
#[test]
fn a_drain_waits_a_full_window_after_the_codec_fields_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let tel = RefusedThenRead {
        gpu: OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        read: 0,
        unread_until: 80,
    };
    let (c, mut d) = common::cluster::daemon_802(POLICY, dir.path(), "enforce", tel);
    let calls = || c.borrow().calls.clone();
    let (drain, cancel) = first_actions(|t| drop(d.cycle(t)), calls, 0, 200);
    let drain = drain.expect("the job idle for a full window with the codec fields read is drained");
    assert!(
        drain >= 80 + WINDOW_MIN,
        "drained at minute {drain}, within a window of the codec fields being read again at minute 80"
    );
    assert!(
        cancel.is_some_and(|m| m > drain),
        "cancel after the drain: {cancel:?}, drain {drain}"
    );
}

/// As above, with a restart at minute 85: the hold's end is kept in the state file.
#[test]
fn the_hold_after_a_codec_refusal_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let tel = RefusedThenRead {
            gpu: OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            read: 0,
            unread_until: 80,
        };
        let (c, mut d) = common::cluster::daemon_802(POLICY, dir.path(), "enforce", tel);
        let calls = || c.borrow().calls.clone();
        let (drain, _) = first_actions(|t| drop(d.cycle(t)), calls, 0, 85);
        assert_eq!(drain, None, "drained before the restart");
    }
    let tel = RefusedThenRead {
        gpu: OneIdleGpu {
            cycle: 85,
            power_known: true,
        },
        read: 85,
        unread_until: 80,
    };
    let (c, mut d) = common::cluster::daemon_802(POLICY, dir.path(), "enforce", tel);
    let calls = || c.borrow().calls.clone();
    let (drain, _) = first_actions(|t| drop(d.cycle(t)), calls, 85, 200);
    let drain = drain.expect("drained once the hold ends");
    assert!(drain >= 80 + WINDOW_MIN, "drained at minute {drain} after a restart at 85");
}

/// Job 802's GPU gives decoder values for 10 minutes, then `[N/A]`: its readings are unknown
/// from then on, and the daemon says so, naming the GPU and the field, at most every 10
/// minutes (trial 21: nothing said why the GPU was never judged again, nor how to clear it).
#[test]
fn a_codec_field_lost_is_warned_with_the_gpu_and_how_to_clear_it() {
    struct DecoderGone {
        gpu: OneIdleGpu,
        read: u32,
    }
    impl Telemetry for DecoderGone {
        fn read(&mut self, now_s: i64) -> TelemetryRead {
            let n = self.read;
            self.read += 1;
            let mut r = self.gpu.read(now_s);
            r.gpus[0].enc_pct = Some(0.0);
            r.gpus[0].dec_pct = (n < 10).then_some(30.0);
            r
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let tel = DecoderGone {
        gpu: OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        read: 0,
    };
    let (c, mut d) = common::cluster::daemon_802(POLICY, dir.path(), "enforce", tel);
    let ((), log) = common::with_log(tracing::Level::WARN, || {
        for m in 0..40 {
            d.cycle(T0 + m * 60);
        }
    });
    let warned: Vec<&str> = log.lines().filter(|l| l.contains("codec_seen")).collect();
    assert_eq!(warned.len(), 3, "warned at minutes 10, 20 and 30: {warned:#?}");
    assert!(warned[0].contains("GPU-0 utilization.decoder"), "{}", warned[0]);
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:#?}"
    );
}
