//! The Slurm side: reading jobs and node state, and the four actions (drain, resume,
//! AdminComment, cancel), behind [`SlurmClient`] so a later central mode or a CI against a
//! real slurmctld can supply its own. [`SlurmCli`] runs squeue, scontrol and scancel through
//! [`crate::run::run`].

use crate::parse::scontrol_node::{self, NodeState};
use crate::parse::{squeue_format, squeue_json, JobsRead};
use crate::run::{run, Leftovers, RunOptions, RunOutcome};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A failed read or action: which command, and what went wrong (never contains a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{command}: {problem}")]
pub struct CommandError {
    /// The program as configured (a name on PATH or a path) and its first argument(s), e.g.
    /// `/opt/slurm/bin/squeue --json` (see [`command_line`]).
    pub command: String,
    /// Outcome label (`timeout`, `exit_1`, `controller_error`, `parse`, ...).
    pub kind: String,
    /// Details: stderr excerpt or parse error.
    pub problem: String,
}

/// How a cancel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CancelOutcome {
    /// scancel accepted the request.
    Cancelled,
    /// The job had already finished (scancel: "already completing or completed", "Invalid
    /// job id specified").
    AlreadyGone,
}

/// Everything the daemon needs from Slurm.
pub trait SlurmClient {
    /// All jobs squeue reports (every state; the caller filters). A controller timeout, a
    /// non-zero exit, error text on stderr or unparsable output is an error, never "no jobs".
    fn jobs(&mut self) -> Result<JobsRead, CommandError>;
    /// `scontrol show node NODE`.
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError>;
    /// `scontrol update NodeName=NODE State=DRAIN Reason=REASON`.
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError>;
    /// `scontrol update NodeName=NODE State=RESUME`.
    fn resume(&mut self, node: &str) -> Result<(), CommandError>;
    /// `scontrol update JobId=ID AdminComment=TEXT`.
    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), CommandError>;
    /// `scancel --verbose ID` with the exact id (array task `N_M`, het component `N+K`).
    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError>;
}

/// Which squeue output to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JobSource {
    /// `squeue --json --all`.
    #[default]
    Json,
    /// `squeue --all --Format=...` with the header line, which must be there (see
    /// [`squeue_format::parse_own`]).
    Format,
}

/// [`SlurmClient`] over the Slurm command-line tools.
#[derive(Debug, Clone)]
pub struct SlurmCli {
    /// squeue program (name on PATH or path).
    pub squeue: String,
    /// scontrol program.
    pub scontrol: String,
    /// scancel program.
    pub scancel: String,
    /// Which squeue output to read.
    pub source: JobSource,
    /// Timeout for every command ([`TIMEOUT_KEY`]).
    pub timeout: Duration,
}

/// The config key [`SlurmCli::timeout`] comes from, named when a command times out.
pub const TIMEOUT_KEY: &str = "enforcer.command_timeout";

/// Variables removed from squeue's environment (squeue(1) ENVIRONMENT VARIABLES).
pub const SQUEUE_ENV_REMOVE: [&str; 3] = ["SQUEUE_*", "SLURM_TIME_FORMAT", "SLURM_CLUSTERS"];

fn stderr_says_error(stderr: &str) -> bool {
    let l = stderr.to_ascii_lowercase();
    l.contains("error") || l.contains("timed out") || l.contains("unable to contact")
}

/// `exit_N` for an exit code, `signal` when the process was killed by a signal (the same
/// labels as [`crate::run::RunOutcome::label`]).
pub(crate) fn exit_kind(code: Option<i32>) -> String {
    code.map_or_else(|| "signal".to_string(), |c| format!("exit_{c}"))
}

fn excerpt(s: &str) -> String {
    policy::one_line(s.trim(), 300)
}

/// How a command is named in errors and logs: the program as configured (a name on PATH or a
/// path, so that an operator sees which executable was run) and `what`, the arguments that say
/// which query or action it was (`--json`, `show node`), never the data passed to it.
pub fn command_line(program: &str, what: &str) -> String {
    format!("{program} {what}").trim_end().to_string()
}

/// Why a command is run, which decides what a cut-off output ([`RunOutcome::OutputCutOff`])
/// means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// For what it prints (squeue, `scontrol show`): output that may be incomplete is a failed
    /// read, never parsed as a whole answer.
    Read,
    /// For its effect (`scontrol update`): the exit status is the answer.
    Act,
}

impl SlurmCli {
    fn exec(&self, program: &str, args: Vec<String>, env_remove: &[&str], purpose: Purpose) -> Result<(String, String), CommandError> {
        let mut o = RunOptions::new(self.timeout);
        o.env_remove = env_remove.iter().map(|s| s.to_string()).collect();
        if purpose == Purpose::Act {
            o.leftovers = Leftovers::Leave;
        }
        let command = command_line(program, args.first().map(String::as_str).unwrap_or(""));
        let out = run(program, &args, &o);
        let exit = match (&out, purpose) {
            (RunOutcome::Exited { .. }, _) | (RunOutcome::OutputCutOff { .. }, Purpose::Act) => out.exit(),
            _ => None,
        };
        match exit {
            Some((Some(0), stdout, stderr)) => Ok((stdout.to_string(), stderr.to_string())),
            Some((code, _, stderr)) => Err(CommandError {
                kind: exit_kind(code),
                problem: format!("failed: {}", excerpt(stderr)),
                command,
            }),
            None => Err(CommandError {
                kind: out.label(),
                problem: out.describe_timeout(self.timeout, TIMEOUT_KEY),
                command,
            }),
        }
    }

    fn update(&self, args: Vec<String>) -> Result<(), CommandError> {
        let (_, stderr) = self.exec(&self.scontrol, args, &[], Purpose::Act)?;
        if stderr_says_error(&stderr) {
            return Err(CommandError {
                command: command_line(&self.scontrol, "update"),
                kind: "stderr_error".into(),
                problem: excerpt(&stderr),
            });
        }
        Ok(())
    }

    /// The squeue argv for the configured source.
    pub fn squeue_args(&self) -> Vec<String> {
        match self.source {
            JobSource::Json => vec!["--json".into(), "--all".into()],
            // No --noheader: the header is what shows the queue was read (header, no rows = empty).
            JobSource::Format => vec!["--all".into(), squeue_format::format_arg()],
        }
    }
}

impl SlurmClient for SlurmCli {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        let args = self.squeue_args();
        // An unreadable answer names the squeue that was run, as configured (operator trial 16:
        // "squeue: not JSON" did not say which executable printed it).
        let command = command_line(&self.squeue, &args[0]);
        let (stdout, stderr) = self.exec(&self.squeue, args, &SQUEUE_ENV_REMOVE, Purpose::Read)?;
        if stderr_says_error(&stderr) {
            return Err(CommandError {
                command,
                kind: "controller_error".into(),
                problem: excerpt(&stderr),
            });
        }
        match self.source {
            JobSource::Json => squeue_json::parse(&stdout).map_err(|e| CommandError {
                command,
                kind: "parse".into(),
                problem: e.to_string(),
            }),
            JobSource::Format => match squeue_format::parse_own(&stdout, &chrono::Local) {
                Ok((read, cluster)) => {
                    if let Some(c) = cluster {
                        tracing::warn!(cluster = %c, "squeue printed a CLUSTER: line the enforcer did not ask for (no -M is passed; a wrapper?); skipped, the rows below it are read as this node's cluster");
                    }
                    Ok(read)
                }
                Err(problem) => Err(CommandError {
                    command,
                    kind: "no_header".into(),
                    problem,
                }),
            },
        }
    }

    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
        let (stdout, _) = self.exec(&self.scontrol, vec!["show".into(), "node".into(), node.into()], &[], Purpose::Read)?;
        scontrol_node::parse(&stdout).map_err(|e| CommandError {
            command: command_line(&self.scontrol, "show node"),
            kind: "parse".into(),
            problem: e.to_string(),
        })
    }

    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError> {
        self.update(vec![
            "update".into(),
            format!("NodeName={node}"),
            "State=DRAIN".into(),
            format!("Reason={reason}"),
        ])
    }

    fn resume(&mut self, node: &str) -> Result<(), CommandError> {
        self.update(vec!["update".into(), format!("NodeName={node}"), "State=RESUME".into()])
    }

    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), CommandError> {
        self.update(vec!["update".into(), format!("JobId={job_id}"), format!("AdminComment={text}")])
    }

    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError> {
        // A second safeguard behind the planner: `scancel N+0` cancels every component of a
        // het job (scancel(1)), so no het component is ever handed to scancel.
        if crate::parse::is_het_component(job_id) {
            return Err(CommandError {
                command: command_line(&self.scancel, ""),
                kind: "refused_het_job".into(),
                problem: format!("{job_id} is a het-job component; scancel would cancel the whole het job"),
            });
        }
        let mut o = RunOptions::new(self.timeout);
        o.env_remove = vec!["SCANCEL_*".into()];
        o.leftovers = Leftovers::Leave;
        let gone = |s: &str| s.contains("already completing or completed") || s.contains("Invalid job id");
        // `--verbose`: without it scancel says nothing and exits 0 for a job that already
        // ended, or an id it does not know (seen on Slurm 22.05.8), and a cancel that did
        // nothing would be recorded as done.
        // Run for its effect: the exit status (and the errors in what stderr was read) is the
        // answer, even when a child left running cut the output off.
        let out = run(&self.scancel, &["--verbose".to_string(), job_id.to_string()], &o);
        match out.exit() {
            Some((Some(0), _, stderr)) if !stderr_says_error(stderr) => Ok(CancelOutcome::Cancelled),
            Some((_, _, stderr)) if gone(stderr) => Ok(CancelOutcome::AlreadyGone),
            Some((code, _, stderr)) => Err(CommandError {
                command: command_line(&self.scancel, "--verbose"),
                kind: exit_kind(code),
                problem: excerpt(stderr),
            }),
            None => Err(CommandError {
                command: command_line(&self.scancel, "--verbose"),
                kind: out.label(),
                problem: out.describe_timeout(self.timeout, TIMEOUT_KEY),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An executable `#!/bin/sh` script `name` in `dir` running `body`; returns its path.
    fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }

    #[test]
    fn a_missing_program_is_a_failed_read_that_says_why() {
        let mut s = SlurmCli {
            squeue: "/nonexistent/squeue".into(),
            scontrol: "/nonexistent/scontrol".into(),
            scancel: "/nonexistent/scancel".into(),
            source: JobSource::Json,
            timeout: Duration::from_secs(2),
        };
        let e = s.jobs().expect_err("a missing squeue is a failed read, never an empty job list");
        assert_eq!(e.kind, "spawn_failed");
        assert!(
            e.problem.contains("/nonexistent/squeue") && e.problem.contains("No such file"),
            "{}",
            e.problem
        );
    }

    /// Review 15: output still held open by a child the program left running is cut off
    /// ([`RunOutcome::OutputCutOff`]) and may miss anything the child would have printed, so a
    /// read of it fails (never "no jobs", never a node record taken as whole), while a command
    /// run for its effect takes the program's exit status.
    #[test]
    fn output_a_left_child_holds_open_fails_a_read_but_not_an_action() {
        let dir = tempfile::tempdir().unwrap();
        let program = |name: &str, body: &str| script(dir.path(), name, body);
        // The header, then the rows from a child, after the program exited 0: a queue read at
        // the cut would be empty.
        let header = squeue_format::own_header();
        let squeue = program(
            "squeue",
            &format!("echo '{header}'\n(sleep 3; echo '5|5|0|N/A|RUNNING|bob|ml|gpu|normal|N/A|gpu001|gres/gpu=1|x') &\nexit 0"),
        );
        let scontrol = program(
            "scontrol",
            "if [ \"$1\" = show ]; then echo 'NodeName=gpu001 State=IDLE'; (sleep 3; echo 'NodeName=gpu003 State=MIXED') &\nelse (sleep 3; echo late) & fi\nexit 0",
        );
        let scancel = program("scancel", "echo 'scancel: Terminating job 77' >&2\n(sleep 3; echo late) &\nexit 0");
        let mut s = SlurmCli {
            squeue,
            scontrol,
            scancel,
            source: JobSource::Format,
            timeout: Duration::from_secs(10),
        };
        let e = s
            .jobs()
            .expect_err("a queue a left child cut off is a failed read, never the jobs above the cut");
        assert_eq!(e.kind, "output_cut_off", "{e:?}");
        let e = s.node_state("gpu001").expect_err("a cut-off node record is a failed read");
        assert_eq!(e.kind, "output_cut_off", "{e:?}");
        s.drain("gpu001", "gpu-reaper: idle job 77").expect("scontrol update exited 0");
        assert_eq!(s.cancel("77").unwrap(), CancelOutcome::Cancelled, "scancel exited 0");
    }

    /// Operator trial 17: a squeue timeout was logged `squeue --json: timeout`, without the
    /// limit or the config key it came from; scontrol and scancel the same.
    #[test]
    fn a_timeout_names_the_limit_and_its_config_key() {
        let dir = tempfile::tempdir().unwrap();
        let hung = script(dir.path(), "hung", "exec sleep 30");
        let mut s = SlurmCli {
            squeue: hung.clone(),
            scontrol: hung.clone(),
            scancel: hung.clone(),
            source: JobSource::Json,
            timeout: Duration::from_secs(1),
        };
        let said = "timed out after 1s (enforcer.command_timeout)";
        let e = s.jobs().expect_err("a hung squeue is a failed read");
        assert_eq!(e.to_string(), format!("{hung} --json: {said}"));
        assert_eq!(e.kind, "timeout");
        let e = s.node_state("gpu001").expect_err("a hung scontrol show is a failed read");
        assert_eq!(e.to_string(), format!("{hung} show: {said}"));
        let e = s.drain("gpu001", "r").expect_err("a hung scontrol update failed");
        assert_eq!(e.to_string(), format!("{hung} update: {said}"));
        let e = s.cancel("77").expect_err("a hung scancel failed");
        assert_eq!(e.to_string(), format!("{hung} --verbose: {said}"));
    }

    #[test]
    fn a_het_component_never_reaches_scancel() {
        // `true` would report success: the refusal must come before any program runs.
        let mut s = SlurmCli {
            squeue: "true".into(),
            scontrol: "true".into(),
            scancel: "true".into(),
            source: JobSource::Json,
            timeout: Duration::from_secs(2),
        };
        for id in ["1229+0", "1229+1"] {
            let e = s.cancel(id).expect_err("a het component is refused");
            assert_eq!(e.kind, "refused_het_job");
            assert!(e.problem.contains(id), "{}", e.problem);
        }
        assert!(matches!(s.cancel("1230"), Ok(CancelOutcome::Cancelled)));
    }

    #[test]
    fn scancel_is_verbose_so_a_job_already_gone_is_told_from_a_cancel() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // The repository's fake scancel, with FAKE_DIR set for it alone.
        let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fakes/scancel");
        let wrapper = dir.path().join("scancel");
        let body = format!("#!/bin/sh\nFAKE_DIR='{}' exec '{fake}' \"$@\"\n", dir.path().display());
        std::fs::write(&wrapper, body).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut s = SlurmCli {
            squeue: "true".into(),
            scontrol: "true".into(),
            scancel: wrapper.display().to_string(),
            source: JobSource::Json,
            timeout: Duration::from_secs(5),
        };
        let mode = |m: &str| std::fs::write(dir.path().join("scancel.mode"), m).unwrap();
        mode("ok");
        assert_eq!(s.cancel("77_3").unwrap(), CancelOutcome::Cancelled);
        mode("gone");
        assert_eq!(s.cancel("77_3").unwrap(), CancelOutcome::AlreadyGone);
        mode("fail");
        let e = s.cancel("77_3").unwrap_err();
        assert!(e.kind == "exit_1" && e.problem.contains("permission denied"), "{e:?}");
        let argv = std::fs::read_to_string(dir.path().join("scancel.argv")).unwrap();
        for call in argv.split('\u{1e}').filter(|c| !c.is_empty()) {
            assert_eq!(call, "--verbose\u{1f}77_3\u{1f}");
        }
    }
}
