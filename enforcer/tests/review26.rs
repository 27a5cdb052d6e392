//! review26: adversarial probes of ef7ab5e: a refused `--query-gpu` field asked again every 5
//! minutes (telemetry.rs `refused_at_s`, `RETRY_REFUSED_S`) and a MIG mode that reads neither
//! Enabled, Disabled nor a missing marker being a row error (smi.rs `mig_mode`).

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi;
use enforcer::telemetry::{NvidiaSmi, Telemetry};
use policy::Verdict;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Two GPUs with minor numbers and MIG modes (gpus.txt's 9th and 10th fields).
const TWO_GPUS: &str = "0 GPU-aaaaaaaa-0000-0000-0000-000000000000 50 0 1000 81920 200 400 0 Disabled\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 60 0 2000 81920 210 400 1 Disabled\n";

fn smi_in(dir: &std::path::Path, mode: &str) -> NvidiaSmi {
    std::fs::write(dir.join("gpus.txt"), TWO_GPUS).unwrap();
    std::fs::write(dir.join("smi.mode"), mode).unwrap();
    common::fake_nvidia_smi(dir)
}

/// The `--query-gpu` argument of every nvidia-smi call so far (the fake logs its argv).
fn gpu_queries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("nvidia-smi.argv"))
        .unwrap_or_default()
        .split('\u{1e}')
        .filter_map(|call| call.split('\u{1f}').find(|a| a.starts_with("--query-gpu=")).map(str::to_string))
        .collect()
}

/// An nvidia-smi that refuses one field (`nomig`, `nominor`) for 16 one-minute cycles: every
/// cycle has both GPUs (the retry never costs a cycle its data), and the full query is asked
/// at 0, 5, 10 and 15 minutes only (holds).
#[test]
fn review26_the_retry_never_loses_a_cycle_and_asks_every_five_minutes() {
    for (mode, field) in [("nomig", "mig.mode.current"), ("nominor", "minor_number")] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = smi_in(dir.path(), mode);
        for i in 0..16 {
            let r = s.read(T0 + i * 60);
            assert!(r.no_data.is_none() && r.gpus.len() == 2, "{mode} cycle {i}: {r:?}");
            assert!(r.gpus.iter().all(|g| g.mig_enabled.is_none()), "{mode}: {r:?}");
            assert_eq!(r.gpus[1].minor.is_some(), mode == "nomig", "{mode}: {r:?}");
        }
        let asked = gpu_queries(dir.path()).iter().filter(|q| q.contains(field)).count();
        assert_eq!(asked, 4, "{mode}: the refused field asked {asked} times in 16 minutes");
    }
}

/// The clock steps back an hour after a refusal: asked again at once (now < refused_at_s),
/// then not before 5 minutes on the new clock; data every cycle (holds).
#[test]
fn review26_a_clock_step_back_asks_once_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = smi_in(dir.path(), "nomig");
    let times = [T0, T0 - 3600, T0 - 3540, T0 - 3480, T0 - 3360, T0 - 3300, T0 - 3240];
    for t in times {
        let r = s.read(t);
        assert!(r.no_data.is_none() && r.gpus.len() == 2, "at {t}: {r:?}");
    }
    let asked = gpu_queries(dir.path()).iter().filter(|q| q.contains("mig.mode.current")).count();
    assert_eq!(
        asked, 3,
        "full query asked {asked} times (expected at T0, at the step, 5 minutes after it)"
    );
}

/// An nvidia-smi that refuses `mig.mode.current` (3 minutes), then, swapped for an older one,
/// `minor_number` (3 minutes), then is upgraded: every cycle has data, and the MIG mode is read
/// within 5 minutes of the last refusal (holds).
#[test]
fn review26_one_field_refused_then_the_other_then_neither() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = smi_in(dir.path(), "nomig");
    let mut first_mig_read = None;
    for i in 0..20 {
        match i {
            3 => std::fs::write(dir.path().join("smi.mode"), "nominor").unwrap(),
            6 => std::fs::write(dir.path().join("smi.mode"), "ok").unwrap(),
            _ => {}
        }
        let r = s.read(T0 + i * 60);
        assert!(r.no_data.is_none() && r.gpus.len() == 2, "cycle {i}: {r:?}");
        if (3..6).contains(&i) {
            assert!(r.gpus.iter().all(|g| g.minor.is_none()), "cycle {i}: {r:?}");
        }
        if first_mig_read.is_none() && r.gpus[0].mig_enabled.is_some() {
            first_mig_read = Some(i);
        }
    }
    // The last refusal: minor_number at minute 5 (asked in full at minute 5, after the mig
    // refusal at 0); the MIG mode is back by minute 10.
    assert!(
        first_mig_read.is_some_and(|i| i <= 10),
        "MIG mode first read at minute {first_mig_read:?}"
    );
}

/// A `MakeWriter` into a shared buffer.
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

/// A node on a driver from before MIG (R450) for an hour: the refusal is warned at WARN on
/// every retry, 12 times an hour, 288 a day per node, for a condition that does not change
/// until the driver does (telemetry.rs:242-256; README: "warned, and asked again every 5
/// minutes"). The first warning says all there is to say. Expected: warned once (or once a
/// long while), the retries at INFO/DEBUG. (ROUGH: fails.)
#[test]
fn review26_an_unchanged_refusal_is_warned_twelve_times_an_hour() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = smi_in(dir.path(), "nomig");
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    tracing::subscriber::with_default(sub, || {
        for i in 0..60 {
            s.read(T0 + i * 60);
        }
    });
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let warned = log.lines().filter(|l| l.contains("does not know the query field")).count();
    eprintln!("{warned} warnings in one hour");
    assert!(warned <= 1, "an unchanged refusal warned {warned} times in one hour");
}

const HEADER: &str = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W], minor_number, mig.mode.current\n";

/// nvidia-smi's error marks (`[GPU requires reset]`, `[Unknown Error]`) in a reading column
/// make the GPU's sample no evidence (`GpuReading::unreadable`, smi.rs:9-10 and :301-308:
/// "reports an error on the GPU"). The same mark in `mig.mode.current` makes a row error but
/// leaves `unreadable` empty (smi.rs:533 returns before the `unreadable` push at :545), so a
/// GPU that reports an error is still judged on its 0 % and idle power: a job placed on it by
/// its own processes can be drained and cancelled on readings of a GPU nvidia-smi says needs a
/// reset. Expected: the same as in any other column. (Fails.)
#[test]
fn review26_an_error_mark_in_the_mig_column_leaves_the_readings_as_evidence() {
    for mark in ["[GPU requires reset]", "[Unknown Error]"] {
        let control = smi::parse_gpus(&format!("{HEADER}0, GPU-a, 0, 3, 81920, {mark}, 400.00, 0, Disabled\n"), None).unwrap();
        assert_eq!(control.gpus[0].unreadable, ["power.draw"], "control {mark}: {control:?}");
        let t = smi::parse_gpus(&format!("{HEADER}0, GPU-a, 0, 3, 81920, 62.00, 400.00, 0, {mark}\n"), None).unwrap();
        assert_eq!(t.row_errors.len(), 1, "{mark}: {t:?}");
        assert!(
            !t.gpus[0].unreadable.is_empty(),
            "{mark} in mig.mode.current: the GPU's 0 % and 62 W stay evidence ({:?})",
            t.gpus[0]
        );
    }
}

/// An empty `mig.mode.current` field (a wrapper or a cut field; nvidia-smi prints a marker)
/// was read as a GPU without MIG. It is now an unknown mode, without a row error (review 27:
/// a row error kept the node's GPU list from reading whole and held our drain's resume).
#[test]
fn review26_an_empty_mig_mode_reads_as_no_mig() {
    let t = smi::parse_gpus(&format!("{HEADER}0, GPU-a, 0, 3, 81920, 62.00, 400.00, 0, \n"), None).unwrap();
    eprintln!("{t:?}");
    assert!(t.gpus[0].mig_mode_unknown && t.row_errors.is_empty(), "{t:?}");
}

struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 6001 | 6003).then(|| format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 5400))
    }
}

/// Review 25's slice scenario (GPU 0 in MIG mode; 601's slice process shows until cycle 10,
/// 602 never shows one; GPU 1 busy with 603), with GPU 0's mode flapping between `Enabled`
/// and `[Unknown Error]` on alternate reads: 602 is never placed on the parent (holds: an
/// Enabled read drops elimination placements, an error read allows none).
#[test]
fn review26_a_mig_mode_flapping_with_errors_never_places_the_slice_job() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for id in ["601", "602"] {
        let mut j = job(id, id.parse().unwrap(), 1, &[NODE]);
        j.gres_counts = vec![Some(1)];
        jobs.push(j);
    }
    jobs.push(job("603", 603, 1, &[NODE]));
    let c = cluster(jobs);
    let gpus = |mem: u32| {
        format!("0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 {mem} 81920 62 400 0 MARK\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 90 5 40000 81920 300 400 1\n")
    };
    std::fs::write(dir.path().join("gpus.txt"), gpus(5000)).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\nGPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let fake = common::fakes().join("nvidia-smi");
    let program = common::script(
        dir.path(),
        "nvidia-smi-flapping",
        &format!(
            "n=$(cat '{d}/smi.count' 2>/dev/null || echo 0); if [ $((n % 2)) = 0 ]; then m=Enabled; else m='[Unknown Error]'; fi\n\
             out=$(FAKE_DIR='{d}' '{f}' \"$@\"); rc=$?; printf '%s\\n' \"$out\" | sed \"s/MARK/$m/\"; exit $rc",
            d = dir.path().display(),
            f = fake.display()
        ),
    );
    let smi = NvidiaSmi::new(program, std::time::Duration::from_secs(5), enforcer::run::KillMode::Ignore);
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    for i in 0..10 {
        d.cycle(T0 + i * 60);
    }
    c.borrow_mut().jobs.retain(|j| j.job_id != "601");
    std::fs::write(dir.path().join("gpus.txt"), gpus(3)).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let mut worst: Option<Verdict> = None;
    for i in 10..130 {
        for f in d.cycle(T0 + i * 60).findings.into_iter().filter(|f| f.job_id == "602") {
            worst = Some(worst.map_or(f.verdict, |w| w.max(f.verdict)));
        }
    }
    let calls: Vec<String> = c
        .borrow()
        .calls
        .iter()
        .filter(|c| c.contains("602") || c.starts_with("drain"))
        .cloned()
        .collect();
    assert!(
        worst.is_none_or(|v| v < Verdict::Alert) && calls.is_empty(),
        "602: {worst:?} {calls:?}"
    );
}

/// Job 603 on GPU 1, placed by its own process, at 0 % with 40 GB held and idle power (hung),
/// in enforce mode; GPU 0 idle. `gpu0_mig` and `gpu1_power` are what GPU 0's MIG mode and GPU
/// 1's power draw read (the fake passes a bracketed `[P1]` through untouched, and it is replaced
/// after); `gpu1_mig` GPU 1's MIG mode. Runs until our drain (at most 150
/// cycles), then the job leaves, and 30 more cycles. Returns (drained, resumed).
fn hung_job_then_gone(gpu0_mig: &str, gpu1_power: &str, gpu1_mig: &str) -> (bool, bool) {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("603", 603, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:2".into());
    // A number goes through the fake, which jitters it (a flat power reads as frozen data).
    let p1 = if gpu1_power.starts_with('[') { "[P1]" } else { gpu1_power };
    std::fs::write(
        dir.path().join("gpus.txt"),
        format!("0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 3 81920 55 400 0 MARK0\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 40000 81920 {p1} 400 1 MARK1\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let fake = common::fakes().join("nvidia-smi");
    let program = common::script(
        dir.path(),
        "nvidia-smi-marked",
        &format!(
            "out=$(FAKE_DIR='{d}' '{f}' \"$@\"); rc=$?; printf '%s\\n' \"$out\" | sed -e 's/MARK0/{gpu0_mig}/' -e 's/MARK1/{gpu1_mig}/' -e 's/\\[P1\\]/{gpu1_power}/'; exit $rc",
            d = dir.path().display(),
            f = fake.display()
        ),
    );
    let smi = NvidiaSmi::new(program, std::time::Duration::from_secs(5), enforcer::run::KillMode::Ignore);
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    let drained = |c: &std::rc::Rc<std::cell::RefCell<common::cluster::Cluster>>| c.borrow().calls.iter().any(|x| x.starts_with("drain"));
    let mut i = 0;
    while i < 150 && !drained(&c) {
        d.cycle(T0 + i * 60);
        i += 1;
    }
    if !drained(&c) {
        return (false, false);
    }
    // The job leaves (ended, or cancelled by us).
    c.borrow_mut().jobs.clear();
    std::fs::write(dir.path().join("apps.csv"), "").unwrap();
    for k in 0..30 {
        d.cycle(T0 + (i + k) * 60);
    }
    let calls = c.borrow().calls.clone();
    eprintln!("{gpu0_mig:?} / {gpu1_power:?} / {gpu1_mig:?}: calls {calls:?}");
    (true, calls.iter().any(|x| x.starts_with("resume")))
}

/// One GPU whose MIG mode reads `[Insufficient Permissions]` every cycle (before ef7ab5e: "no
/// MIG"; now a row error each cycle), and job 603 hung on whole GPU 1: 603 is judged and
/// drained (placement by processes needs no whole list), but once it has left, our drain is
/// never resumed: the node's GPU list never reads whole (daemon.rs:659, 669, 1159-1165). A
/// denial on a field the resume does not need holds the node out of service until an operator
/// resumes it by hand. Control: with `Disabled` the drain is resumed. Expected: resumed.
/// (Fails.)
#[test]
fn review26_a_permanently_denied_mig_mode_holds_our_drain_forever() {
    assert_eq!(hung_job_then_gone("Disabled", "62", "Disabled"), (true, true), "control");
    assert_eq!(
        hung_job_then_gone("[Insufficient Permissions]", "62", "Disabled"),
        (true, true),
        "drain kept 30 minutes after its job left, for GPU 0's MIG mode alone"
    );
}

/// The error mark in the job's own GPU's row: in `power.draw` the GPU's samples are no
/// evidence and the hung job is never drained (control); in `mig.mode.current` the same mark
/// leaves the readings as evidence and the job is drained on a GPU nvidia-smi says needs a
/// reset. Expected: no drain either way. (Fails.)
#[test]
fn review26_a_gpu_reporting_an_error_only_in_its_mig_mode_is_drained_on() {
    assert!(!hung_job_then_gone("Disabled", "[GPU requires reset]", "Disabled").0, "control");
    assert!(
        !hung_job_then_gone("Disabled", "62", "[GPU requires reset]").0,
        "job drained on readings of a GPU whose MIG mode reads [GPU requires reset]"
    );
}
