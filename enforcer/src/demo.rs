//! `enforcer demo`: observe mode against the fake executables the repo carries
//! (`enforcer/tests/fakes`), with a simulated clock so an hour and a half of escalation
//! takes a few seconds. The fakes are real processes spawned through [`crate::run::run`]; only
//! the clock is simulated (time is data handed to each cycle, so nothing else changes).

use crate::attribution::ProcFs;
use crate::config::Config;
use crate::daemon::Daemon;
use crate::executor::{ObserveExecutor, Outcome};
use crate::plan::Action;
use crate::run::KillMode;
use crate::slurm::SlurmCli;
use crate::telemetry::NvidiaSmi;
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the fakes live in the source tree.
pub fn fakes_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fakes"))
}

/// The simulated clock's start, epoch seconds (the demo jobs started one hour before).
pub const DEMO_START_S: i64 = 1_800_000_000;

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

/// Runs `cycles` cycles of the demo scenario, writing a readable account to `out`.
/// Sets `FAKE_DIR` in this process's environment (the fakes read it).
pub fn run_demo(cycles: u64, out: &mut dyn Write) -> anyhow::Result<()> {
    let fakes = fakes_dir();
    let scenario = fakes.join("demo");
    anyhow::ensure!(
        scenario.is_dir(),
        "demo scenario {} not found; run the demo from a source checkout",
        scenario.display()
    );
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let work = tmp.path().join("scenario");
    copy_dir(&scenario, &work).with_context(|| format!("copying {}", scenario.display()))?;
    std::env::set_var("FAKE_DIR", &work);
    let cfg_path = work.join("config.toml");
    let mut cfg = Config::load(&cfg_path)?;
    let prog = |n: &str| fakes.join(n).display().to_string();
    cfg.enforcer.state_dir = tmp.path().join("state");
    cfg.enforcer.proc_root = work.join("proc");
    let slurm = SlurmCli {
        squeue: prog("squeue"),
        scontrol: prog("scontrol"),
        scancel: prog("scancel"),
        source: cfg.enforcer.job_source,
        timeout: Duration::from_secs(cfg.enforcer.command_timeout.secs() as u64),
    };
    let smi = NvidiaSmi {
        program: prog("nvidia-smi"),
        timeout: Duration::from_secs(cfg.enforcer.nvidia_smi_timeout.secs() as u64),
        kill: KillMode::Kill,
        minor_refused: false,
        mig_refused: false,
        codec_refused: false,
        refused_at_s: None,
        refusals_warned: 0,
    };
    let step = cfg.policy.config().interval.secs();
    let proc = Box::new(ProcFs {
        root: cfg.enforcer.proc_root.clone(),
    });
    let mut d = Daemon::new(cfg, slurm, smi, ObserveExecutor { webhook: None }, proc, DEMO_START_S);
    writeln!(
        out,
        "gpu-reaper demo: observe mode, node gpu001, 8 GPUs, 5 jobs; fake squeue/nvidia-smi/scontrol/scancel from {}",
        fakes.display()
    )?;
    writeln!(
        out,
        "simulated clock: one cycle = {step} s; jobs started 60 min before t=0; stages alert 0m, drain 30m, cancel 60m\n"
    )?;
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut skips_shown: BTreeMap<(String, &'static str), &'static str> = BTreeMap::new();
    for i in 0..cycles {
        let now = DEMO_START_S + i as i64 * step;
        let rep = d.cycle(now);
        let t = format!("t={:>3}m", (now - DEMO_START_S) / 60);
        for f in &rep.findings {
            let v = format!("{} {}", f.verdict, f.signature);
            if last.get(&f.job_id) != Some(&v) {
                writeln!(out, "{t}  job {:<6} {:<22} {}", f.job_id, f.verdict.as_str(), f.reason)?;
                last.insert(f.job_id.clone(), v);
            }
        }
        for (a, o) in &rep.actions {
            let what = match a {
                Action::Alert {
                    job_id,
                    verdict,
                    signature,
                    ..
                } => format!("alert   job {job_id}: {verdict} ({signature})"),
                Action::Notice { job_id, user, .. } => format!("notice  job {job_id} to {user}"),
                Action::Drain { node, node_reason, .. } => format!("drain   {node} Reason=\"{node_reason}\""),
                Action::Cancel { job_id, .. } => format!("cancel  job {job_id} (AdminComment, then scancel {job_id})"),
                Action::Resume {
                    node,
                    job_id,
                    recovered: false,
                } => format!("resume  {node} (job {job_id} gone)"),
                Action::Resume { node, job_id, .. } => format!("resume  {node} (job {job_id} works again)"),
                Action::AdminAlert { text } => format!("admin   {text}"),
            };
            let tag = if *o == Outcome::Would { "WOULD" } else { o.as_str() };
            writeln!(out, "{t}    -> {tag:<5} {what}")?;
        }
        for s in &rep.skips {
            let key = (s.job_id.clone().unwrap_or_default(), s.action);
            if skips_shown.insert(key, s.kind.as_str()) != Some(s.kind.as_str()) {
                writeln!(
                    out,
                    "{t}    -> skip  {} job {} ({}; repeats not shown)",
                    s.action,
                    s.job_id.as_deref().unwrap_or("-"),
                    s.kind.as_str()
                )?;
            }
        }
    }
    writeln!(out, "\nmetrics after {cycles} cycles (excerpt; series still at 0 left out):")?;
    for l in d.metrics.render().lines().filter(|l| {
        !l.starts_with('#') && !l.ends_with(" 0") && (l.contains("actions_total") || l.contains("skipped") || l.contains("wasted"))
    }) {
        writeln!(out, "  {l}")?;
    }
    writeln!(
        out,
        "\naudit log lines written: {}",
        std::fs::read_to_string(d.audit_path()).map(|s| s.lines().count()).unwrap_or(0)
    )?;
    Ok(())
}
