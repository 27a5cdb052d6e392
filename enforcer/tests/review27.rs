//! review27: adversarial probes of 2e3b97c and ef7ab5e: an unknown MIG mode
//! (`smi.rs` `read_mig_mode`, `GpuReading::mig_mode_unknown`), its effect on placement, judging
//! and resume (`daemon.rs` `mig_mode`, the `mig.mode.current` NaN rule), and the refused-field
//! warning (`telemetry.rs` `refusal_warned`).

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi;
use enforcer::telemetry::{NvidiaSmi, Telemetry};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 6001 | 6003).then(|| format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 5400))
    }
}

type D = Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>>;
type C = std::rc::Rc<std::cell::RefCell<common::cluster::Cluster>>;

/// A daemon in enforce mode over the fake nvidia-smi, whose `MARK0` / `MARK1` / `P1` fields
/// are replaced on every call by the contents of the files `mark0`, `mark1`, `p1` in `dir`
/// (so a test can change them between cycles); a numeric `p1` gets a jitter `.0`-`.3` (a
/// flat power reads as frozen data). Job 603 (1 GPU) runs on the node.
fn daemon(dir: &Path, gpus: &str, apps: &str, gres: &str) -> (D, C) {
    let c = cluster(vec![job("603", 603, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some(gres.into());
    std::fs::write(dir.join("gpus.txt"), gpus).unwrap();
    std::fs::write(dir.join("apps.csv"), apps).unwrap();
    for (f, v) in [("mark0", "Disabled"), ("mark1", "Disabled"), ("p1", "62")] {
        std::fs::write(dir.join(f), v).unwrap();
    }
    let fake = common::fakes().join("nvidia-smi");
    let program = common::script(
        dir,
        "nvidia-smi-marked",
        &format!(
            "out=$(FAKE_DIR='{d}' '{f}' \"$@\"); rc=$?; n=$(cat '{d}/smi.count' 2>/dev/null || echo 0); p=$(cat '{d}/p1'); case \"$p\" in \\[*) ;; *) p=\"$p.$((n % 4))\" ;; esac\n\
             printf '%s\\n' \"$out\" | sed -e \"s|MARK0|$(cat '{d}/mark0')|\" -e \"s|MARK1|$(cat '{d}/mark1')|\" -e \"s|\\[P1\\]|$p|\"; exit $rc",
            d = dir.display(),
            f = fake.display()
        ),
    );
    let smi = NvidiaSmi::new(program, std::time::Duration::from_secs(5), enforcer::run::KillMode::Ignore);
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    (d, c)
}

fn set(dir: &Path, file: &str, v: &str) {
    std::fs::write(dir.join(file), v).unwrap();
}

fn drained(c: &C) -> bool {
    c.borrow().calls.iter().any(|x| x.starts_with("drain"))
}

const TWO: &str = "0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 3 81920 55 400 0 MARK0\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 40000 81920 [P1] 400 1 MARK1\n";
const APPS_603: &str = "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n";

/// Job 603 hung on GPU 1 (placed by its process) with GPU 0's / GPU 1's MIG modes `m0`, `m1`
/// every cycle; runs until our drain (at most 150 cycles), then the job leaves, 30 more
/// cycles. Returns (drained, resumed).
fn hung_then_gone(m0: &str, m1: &str) -> (bool, bool) {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), TWO, APPS_603, "gpu:2");
    set(dir.path(), "mark0", m0);
    set(dir.path(), "mark1", m1);
    let mut i = 0;
    while i < 150 && !drained(&c) {
        d.cycle(T0 + i * 60);
        i += 1;
    }
    if !drained(&c) {
        return (false, false);
    }
    c.borrow_mut().jobs.clear();
    set(dir.path(), "apps.csv", "");
    for k in 0..30 {
        d.cycle(T0 + (i + k) * 60);
    }
    let calls = c.borrow().calls.clone();
    eprintln!("{m0:?} / {m1:?}: calls {calls:?}");
    (true, calls.iter().any(|x| x.starts_with("resume")))
}

/// Parser: the missing markers every reading column accepts (`value()`, smi.rs:296-300: empty
/// text and bare `N/A`) are, in `mig.mode.current` alone, an unknown mode AND a row error
/// (smi.rs:364-372). Before 2e3b97c both read "no MIG". (Shows the mechanism; fails.)
#[test]
fn review27_bare_na_and_empty_mig_modes_are_row_errors() {
    let h = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W], minor_number, mig.mode.current\n";
    for mode in ["N/A", ""] {
        let t = smi::parse_gpus(&format!("{h}0, GPU-a, 0, 3, 81920, 62.00, 400.00, 0, {mode}\n"), None).unwrap();
        // The same marker in a reading column is missing and no row error.
        let ctl = smi::parse_gpus(&format!("{h}0, GPU-a, 0, 3, 81920, {mode}, 400.00, 0, [N/A]\n"), None).unwrap();
        assert!(
            ctl.row_errors.is_empty() && ctl.gpus[0].power_w.is_none(),
            "control {mode:?}: {ctl:?}"
        );
        assert!(
            t.row_errors.is_empty(),
            "mig.mode.current {mode:?}: a row error (the node's GPU list never reads whole): {:?}",
            t.row_errors
        );
    }
}

/// GPU 0's MIG mode reads bare `N/A` (or empty) every cycle: job 603, hung on GPU 1, is
/// drained, but once it has left our drain is never resumed (the row error makes
/// `gpus_whole` false, daemon.rs:659-669, 1162-1176). Review 26 fixed exactly this for
/// `[Insufficient Permissions]` only. Control `[N/A]`: resumed. Expected: resumed. (Fails.)
#[test]
fn review27_a_bare_na_mig_mode_holds_our_drain_forever() {
    assert_eq!(hung_then_gone("[N/A]", "Disabled"), (true, true), "control");
    assert_eq!(
        hung_then_gone("[Insufficient Permissions]", "Disabled"),
        (true, true),
        "control: review 26's fix"
    );
    assert_eq!(
        hung_then_gone("N/A", "Disabled"),
        (true, true),
        "bare N/A: drain kept after its job left"
    );
}

#[test]
fn review27_an_empty_mig_mode_holds_our_drain_forever() {
    assert_eq!(
        hung_then_gone("", "Disabled"),
        (true, true),
        "empty mode: drain kept after its job left"
    );
}

/// The job's OWN GPU reads `[Insufficient Permissions]` for its MIG mode (unknown: it "may be
/// split into slices", smi.rs:96-98), its readings are the parent's. With `Enabled` the job is
/// skipped as `mig` (daemon.rs:886-891, `mig_gpus` holds only `Some(true)`), with the unknown
/// mode it is judged on the parent's readings and drained: the unknown mode stops placement by
/// count/index but not judging a job placed by a parent-UUID process (how current drivers
/// list MIG processes, README "MIG processes nvidia-smi lists under the parent GPU").
/// Expected (never act on absent evidence): not drained. (Fails.)
#[test]
fn review27_a_job_on_a_gpu_of_unknown_mig_mode_is_judged_on_the_parents_readings() {
    assert!(!hung_then_gone("Disabled", "Enabled").0, "control: Enabled is skipped as mig");
    assert!(hung_then_gone("Disabled", "Disabled").0, "control: whole GPU is drained");
    assert!(
        !hung_then_gone("Disabled", "[Insufficient Permissions]").0,
        "job drained on a GPU whose MIG mode is unknown"
    );
}

/// A one-GPU node; job 603 shows no process (placed by elimination, which the daemon takes
/// no further than an alert). `f` is called before each cycle `i` (0..80). Returns the cycles
/// in 40..80 in which 603 was not at Alert (it is from minute ~20 on).
fn elim_cycles_off_alert(f: &dyn Fn(&Path, i64)) -> usize {
    let dir = tempfile::tempdir().unwrap();
    // Index and minor number 0: a lone GPU numbered 1 would say that a GPU 0 fell off the
    // bus, and then nothing is placed by elimination (operator trial 17).
    let (mut d, _c) = daemon(
        dir.path(),
        "0 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 40000 81920 [P1] 400 0 MARK1\n",
        "",
        "gpu:1",
    );
    let mut off = 0;
    for i in 0..80 {
        f(dir.path(), i);
        let r = d.cycle(T0 + i * 60);
        let alert = r.findings.iter().any(|f| f.job_id == "603" && f.verdict >= policy::Verdict::Alert);
        if i >= 40 && !alert {
            off += 1;
        }
        if i == 39 {
            assert!(alert, "control: 603 at Alert by minute 39");
        }
    }
    off
}

/// One cycle's `[Insufficient Permissions]` in `mig.mode.current` (no error on the GPU, "says
/// nothing else", README) at minute 40, or one cycle's `[Unknown Error]` there, versus one
/// cycle's `[Unknown Error]` in power.draw (a NaN sample): the unknown mode drops the job's
/// kept placement by elimination (daemon.rs:774-791), the job sits out and is judged afresh.
/// Expected: no more cycles off Alert than for one unreadable sample. (Measurement.)
#[test]
fn review27_a_single_unknown_mode_read_resets_a_placed_jobs_evidence() {
    let base = elim_cycles_off_alert(&|_, _| {});
    let nan = elim_cycles_off_alert(&|d, i| set(d, "p1", if i == 40 { "[Unknown Error]" } else { "62" }));
    let denied = elim_cycles_off_alert(&|d, i| set(d, "mark1", if i == 40 { "[Insufficient Permissions]" } else { "Disabled" }));
    let mark = elim_cycles_off_alert(&|d, i| set(d, "mark1", if i == 40 { "[Unknown Error]" } else { "Disabled" }));
    eprintln!("cycles off Alert in 40..80: none {base}, NaN power {nan}, denied mode {denied}, error mark in mode {mark}");
    assert_eq!(base, 0, "control");
    assert!(
        denied <= nan + 1 && mark <= nan + 1,
        "cycles off Alert: NaN sample {nan}, denied mode {denied}, error mark in mode {mark}"
    );
}

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);
impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `refusal_warned` is one flag for both fields and for the whole run (telemetry.rs:245-275):
/// nvidia-smi refuses `mig.mode.current` (warned), then, swapped for an older one, refuses
/// `minor_number` too: device-index placement now stops, a new condition, told only at INFO.
/// Expected: the first refusal of each field warned. (ROUGH; fails.)
#[test]
fn review27_a_later_refusal_of_the_other_field_is_not_warned() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gpus.txt"), "0 GPU-a 0 0 3 81920 55 400 0 Disabled\n").unwrap();
    std::fs::write(dir.path().join("smi.mode"), "nomig").unwrap();
    let mut s = common::fake_nvidia_smi(dir.path());
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    tracing::subscriber::with_default(sub, || {
        for i in 0..12 {
            if i == 6 {
                std::fs::write(dir.path().join("smi.mode"), "nominor").unwrap();
            }
            s.read(T0 + i * 60);
        }
    });
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    eprintln!("{log}");
    assert!(log.contains("field mig.mode.current"), "control: {log}");
    assert!(log.contains("field minor_number"), "minor_number's refusal not warned");
}
