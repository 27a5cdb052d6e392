//! The only place the enforcer starts a process.
//!
//! [`run`] takes a program and its argv (never a shell: hostile job names stay inert
//! arguments), sets `LC_ALL=C`, removes the variables the caller names, enforces a timeout
//! and returns an outcome value rather than an error. A child that will not die after
//! SIGKILL (uninterruptible sleep, the classic hung nvidia-smi) is abandoned without blocking
//! and kept in a registry; while any abandoned child of a program is still alive, [`run`]
//! refuses to start that program again, so hung children cannot pile up.
//!
//! A program that exits while a child it left running (`mailer "$@" &` in a wrapper) still
//! holds its stdout or stderr is over: its exit status is its answer, and the output is cut
//! off [`PIPE_GRACE`] after the exit ([`RunOutcome::OutputCutOff`]). What was read is kept;
//! the pipes go on being drained (never kept) until the last holder closes them, so that
//! child neither blocks on a full pipe nor dies of SIGPIPE.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest stdout or stderr kept, bytes; the rest is discarded.
pub const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// After the program exits, how long its stdout and stderr may stay open (held by a child it
/// left running) before the output is cut off.
pub const PIPE_GRACE: Duration = Duration::from_millis(500);

/// How a timed-out child is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillMode {
    /// SIGKILL to the child's process group (the child is a group leader).
    Kill,
    /// Send nothing: behaves exactly like a child in uninterruptible sleep, which ignores
    /// SIGKILL. Only tests use it, to exercise the abandon path.
    Ignore,
}

/// Options for one [`run`].
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Wall-clock limit for the child.
    pub timeout: Duration,
    /// After the kill, how long to wait for the child to go before abandoning it.
    pub kill_grace: Duration,
    /// Environment variables removed from the child's environment: exact names, or prefixes
    /// ending in `*` (e.g. `SQUEUE_*`).
    pub env_remove: Vec<String>,
    /// Bytes written to the child's stdin (then closed); `None` gives it /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// How a timed-out child is stopped.
    pub kill: KillMode,
    /// What becomes of children the program left holding its output when that output is cut
    /// off ([`RunOutcome::OutputCutOff`]).
    pub leftovers: Leftovers,
}

/// What [`run`] does with the children a program left running with its output pipes open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftovers {
    /// SIGKILL to the program's process group (the children are in it unless they made a
    /// session of their own): for commands whose output is the answer (squeue, nvidia-smi,
    /// scontrol show), which a cut-off makes a failed read anyway. Run every cycle, such a
    /// command would otherwise leave one more child behind each time (review 16).
    Kill,
    /// Leave them: for commands run for their effect, whose exit status is the answer, where a
    /// child may be doing the work (a notify command's `mailer "$@" &`). They run once per
    /// action, not per cycle.
    Leave,
}

impl RunOptions {
    /// Defaults: the given timeout, 500 ms kill grace, nothing removed, no stdin, SIGKILL on a
    /// timeout, and leftover children killed when the output is cut off.
    pub fn new(timeout: Duration) -> RunOptions {
        RunOptions {
            timeout,
            kill_grace: Duration::from_millis(500),
            env_remove: Vec::new(),
            stdin: None,
            kill: KillMode::Kill,
            leftovers: Leftovers::Kill,
        }
    }
}

/// What happened to one command. Expected outcomes, not errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The child exited. `code` is `None` when a signal ended it.
    Exited {
        /// Exit code.
        code: Option<i32>,
        /// Standard output (lossy UTF-8).
        stdout: String,
        /// Standard error (lossy UTF-8).
        stderr: String,
    },
    /// The child exited, but its stdout or stderr was still open [`PIPE_GRACE`] later, held by
    /// a child it left running: the output read until then, which may be incomplete. The exit
    /// status is the program's own: a command run for its effect (notify, `scontrol update`,
    /// `scancel`) may take it ([`RunOutcome::exit`]); a command run for what it prints
    /// (squeue, `scontrol show`, nvidia-smi) must treat this as a failed read, since a cut
    /// answer must never read as a whole one.
    OutputCutOff {
        /// Exit code; `None` when a signal ended the program.
        code: Option<i32>,
        /// Standard output read before the cut (lossy UTF-8).
        stdout: String,
        /// Standard error read before the cut (lossy UTF-8).
        stderr: String,
    },
    /// The timeout passed. `abandoned` is true when the child survived SIGKILL and was left
    /// behind (it is still tracked; see [`abandoned_alive`]).
    TimedOut {
        /// The child would not die.
        abandoned: bool,
    },
    /// The program could not be started (not found, not executable).
    SpawnFailed(String),
    /// Not started: an abandoned child of the same program is still alive.
    Refused,
    /// The child wrote more than [`MAX_OUTPUT_BYTES`] to stdout or stderr. What was kept is
    /// cut off somewhere, so none of it is returned: a cut answer must never read as a whole
    /// one (a queue missing the jobs below the cut).
    OutputTooLarge,
}

impl RunOutcome {
    /// A short label for logs and metrics: `ok`, `exit_N`, `signal`, `output_cut_off`,
    /// `timeout`, `abandoned`, `spawn_failed`, `refused`, `output_too_large`.
    pub fn label(&self) -> String {
        match self {
            RunOutcome::OutputCutOff { .. } => "output_cut_off".into(),
            RunOutcome::Exited { code: Some(0), .. } => "ok".into(),
            RunOutcome::Exited { code: Some(c), .. } => format!("exit_{c}"),
            RunOutcome::Exited { code: None, .. } => "signal".into(),
            RunOutcome::TimedOut { abandoned: false } => "timeout".into(),
            RunOutcome::TimedOut { abandoned: true } => "abandoned".into(),
            RunOutcome::SpawnFailed(_) => "spawn_failed".into(),
            RunOutcome::Refused => "refused".into(),
            RunOutcome::OutputTooLarge => "output_too_large".into(),
        }
    }

    /// [`RunOutcome::label`] with what the label alone does not say, for logs and error
    /// messages (never metrics): a spawn failure names the program and the OS error
    /// (`spawn_failed (/opt/bin/mailer: No such file or directory (os error 2))`), a refused
    /// start says an earlier run of the program is still hung. Output is not included (a
    /// caller that shows it chooses what may be shown).
    pub fn describe(&self) -> String {
        match self {
            RunOutcome::SpawnFailed(why) => format!("spawn_failed ({why})"),
            RunOutcome::Refused => "refused (an earlier run of the program is still hung and was abandoned)".into(),
            RunOutcome::OutputTooLarge => {
                format!(
                    "output_too_large (more than {} MiB on stdout or stderr; none of it is read)",
                    MAX_OUTPUT_BYTES >> 20
                )
            }
            other => other.label(),
        }
    }

    /// [`RunOutcome::describe`], with a timeout told as the limit that passed and the config
    /// key it came from (operator trial 17: `squeue --json: timeout` named neither):
    /// `timed out after 5s (enforcer.command_timeout)`, and for a child that survived SIGKILL
    /// `timed out after 5s (enforcer.command_timeout) and survived SIGKILL (abandoned)`.
    pub fn describe_timeout(&self, limit: Duration, key: &str) -> String {
        let after = if limit.subsec_nanos() == 0 {
            policy::DurationS(i64::try_from(limit.as_secs()).unwrap_or(i64::MAX)).to_string()
        } else {
            format!("{limit:?}")
        };
        match self {
            RunOutcome::TimedOut { abandoned: false } => format!("timed out after {after} ({key})"),
            RunOutcome::TimedOut { abandoned: true } => {
                format!("timed out after {after} ({key}) and survived SIGKILL (abandoned)")
            }
            other => other.describe(),
        }
    }

    /// For a command run for its effect, whose exit status is its answer: the exit code and
    /// the output read of a program that exited, whether or not a child it left running cut
    /// the output off ([`RunOutcome::Exited`] or [`RunOutcome::OutputCutOff`]); `None` when
    /// it did not exit on its own (timeout, not started, output over the limit). Never use it
    /// for a command whose output is read as data.
    pub fn exit(&self) -> Option<(Option<i32>, &str, &str)> {
        match self {
            RunOutcome::Exited { code, stdout, stderr } | RunOutcome::OutputCutOff { code, stdout, stderr } => {
                Some((*code, stdout.as_str(), stderr.as_str()))
            }
            _ => None,
        }
    }
}

struct Abandoned {
    program: String,
    child: Child,
}

static ABANDONED: Mutex<Vec<Abandoned>> = Mutex::new(Vec::new());
static ABANDONED_TOTAL: AtomicU64 = AtomicU64::new(0);

fn registry() -> std::sync::MutexGuard<'static, Vec<Abandoned>> {
    ABANDONED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reaps abandoned children that have finally exited; returns how many of `program`'s are
/// still alive (all programs when `program` is `None`).
pub fn abandoned_alive(program: Option<&str>) -> usize {
    let mut reg = registry();
    reg.retain_mut(|a| !matches!(a.child.try_wait(), Ok(Some(_)) | Err(_)));
    reg.iter().filter(|a| program.is_none_or(|p| a.program == p)).count()
}

/// Children abandoned since the process started.
pub fn abandoned_total() -> u64 {
    ABANDONED_TOTAL.load(Ordering::Relaxed)
}

/// What a pipe's reader thread sends.
enum Piece {
    /// Bytes read, within the first [`MAX_OUTPUT_BYTES`].
    Bytes(Vec<u8>),
    /// More than [`MAX_OUTPUT_BYTES`] came; the rest is drained and discarded.
    Over,
    /// The pipe's end: every holder closed it (`whole`), or reading it failed.
    End {
        /// Reached end of file.
        whole: bool,
    },
}

/// Reads a pipe to its end on a thread of its own, sending what it reads as it comes: the
/// first [`MAX_OUTPUT_BYTES`], whether there was more, and the end. Once the receiver is
/// gone (the output was cut off) it goes on draining, keeping nothing, so whoever still holds
/// the pipe never blocks on it nor gets SIGPIPE.
fn reader(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Piece> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        let mut kept: u64 = 0;
        let mut over = false;
        // The receiver is gone: nothing more is sent, the rest is only drained.
        let mut cut = false;
        let whole = loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break false,
            };
            let keep = n.min(usize::try_from(MAX_OUTPUT_BYTES - kept).unwrap_or(usize::MAX));
            kept += keep as u64;
            if keep > 0 && !cut {
                cut = tx.send(Piece::Bytes(buf[..keep].to_vec())).is_err();
            }
            if keep < n && !over {
                over = true;
                let _ = tx.send(Piece::Over);
            }
        };
        let _ = tx.send(Piece::End { whole });
    });
    rx
}

/// One stream's output as collected after the program exited.
#[derive(Default)]
struct Collected {
    bytes: Vec<u8>,
    over: bool,
    /// The stream reached its end (every holder closed it) and was read whole.
    whole: bool,
}

/// Takes what `rx`'s reader sends until the stream's end or `deadline`, whichever is first.
fn collect(rx: Option<mpsc::Receiver<Piece>>, deadline: Instant) -> Collected {
    let mut c = Collected::default();
    let Some(rx) = rx else { return c };
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Piece::Bytes(b)) => c.bytes.extend_from_slice(&b),
            Ok(Piece::Over) => c.over = true,
            Ok(Piece::End { whole }) => {
                c.whole = whole;
                return c;
            }
            Err(_) => return c,
        }
    }
}

fn remove_env(cmd: &mut Command, remove: &[String]) {
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        let hit = remove.iter().any(|r| match r.strip_suffix('*') {
            Some(prefix) => k.starts_with(prefix),
            None => k == r,
        });
        if hit {
            cmd.env_remove(k);
        }
    }
}

/// Runs `program` with `args` (argv, no shell), `LC_ALL=C`, and the options' timeout and
/// environment scrubbing. Never blocks longer than `timeout + kill_grace` plus
/// [`PIPE_GRACE`] for the output pipes.
pub fn run(program: &str, args: &[String], opts: &RunOptions) -> RunOutcome {
    if abandoned_alive(Some(program)) > 0 {
        return RunOutcome::Refused;
    }
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LC_ALL", "C")
        .stdin(if opts.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    remove_env(&mut cmd, &opts.env_remove);
    // ETXTBSY: the program file is still open for writing somewhere, as when another thread
    // forked while a script was being written (tests write fake programs); it passes at once.
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return RunOutcome::SpawnFailed(format!("{program}: {e}")),
        }
    };
    if let (Some(input), Some(mut sin)) = (opts.stdin.clone(), child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = sin.write_all(&input);
        });
    }
    let out_rx = child.stdout.take().map(reader);
    let err_rx = child.stderr.take().map(reader);
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() >= opts.timeout => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return RunOutcome::SpawnFailed(format!("{program}: wait: {e}")),
        }
    };
    let Some(status) = status else {
        if opts.kill == KillMode::Kill {
            // SAFETY: kill(2) with a negative pid signals the child's process group, which
            // process_group(0) made the child the leader of; no memory is touched.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
        }
        let kill_start = Instant::now();
        while kill_start.elapsed() < opts.kill_grace {
            if let Ok(Some(_)) = child.try_wait() {
                return RunOutcome::TimedOut { abandoned: false };
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        ABANDONED_TOTAL.fetch_add(1, Ordering::Relaxed);
        registry().push(Abandoned {
            program: program.to_string(),
            child,
        });
        return RunOutcome::TimedOut { abandoned: true };
    };
    // The program is gone; a child it left running may still hold the pipes. Wait briefly,
    // then cut the output off: the exit status stands, the output may be incomplete.
    let deadline = Instant::now() + PIPE_GRACE;
    let (out, err) = (collect(out_rx, deadline), collect(err_rx, deadline));
    if out.over || err.over {
        return RunOutcome::OutputTooLarge;
    }
    let (code, stdout, stderr) = (
        status.code(),
        String::from_utf8_lossy(&out.bytes).into_owned(),
        String::from_utf8_lossy(&err.bytes).into_owned(),
    );
    if out.whole && err.whole {
        RunOutcome::Exited { code, stdout, stderr }
    } else {
        if opts.leftovers == Leftovers::Kill {
            // SAFETY: kill(2) with a negative pid signals the process group the program led
            // (process_group(0)); the program itself has been reaped, so the group holds only
            // the children it left. No memory is touched.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
        }
        RunOutcome::OutputCutOff { code, stdout, stderr }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[test]
    fn captures_output_exit_code_and_env() {
        std::env::set_var("SQUEUE_FORMAT", "%i");
        let mut o = RunOptions::new(Duration::from_secs(5));
        o.env_remove = vec!["SQUEUE_*".into()];
        let r = run("/bin/sh", &sh("echo \"$LC_ALL:${SQUEUE_FORMAT-unset}\"; echo err >&2; exit 3"), &o);
        assert_eq!(
            r,
            RunOutcome::Exited {
                code: Some(3),
                stdout: "C:unset\n".into(),
                stderr: "err\n".into()
            }
        );
        assert_eq!(run("/nonexistent/prog", &[], &o).label(), "spawn_failed");
    }

    /// Trial 6 #6: a spawn failure was logged as `spawn_failed` alone, without the program or
    /// the OS error.
    #[test]
    fn a_spawn_failure_is_described_with_the_program_and_the_os_error() {
        let o = RunOptions::new(Duration::from_secs(5));
        let d = run("/nonexistent/mailer", &[], &o).describe();
        assert!(
            d.starts_with("spawn_failed") && d.contains("/nonexistent/mailer") && d.contains("No such file or directory"),
            "{d}"
        );
        let dir = tempfile::tempdir().unwrap();
        let not_exec = dir.path().join("mailer");
        std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
        let d = run(not_exec.to_str().unwrap(), &[], &o).describe();
        assert!(d.contains(not_exec.to_str().unwrap()) && d.contains("Permission denied"), "{d}");
        assert_eq!(run("/bin/sh", &sh("exit 3"), &o).describe(), "exit_3");
    }

    #[test]
    fn output_over_the_limit_is_never_returned_as_a_whole_answer() {
        let o = RunOptions::new(Duration::from_secs(60));
        // One byte over the limit, on stdout, then on stderr; exactly the limit is kept whole.
        let over = format!("head -c {} /dev/zero", MAX_OUTPUT_BYTES + 1);
        assert_eq!(run("/bin/sh", &sh(&over), &o), RunOutcome::OutputTooLarge);
        assert_eq!(run("/bin/sh", &sh(&format!("{over} >&2")), &o), RunOutcome::OutputTooLarge);
        assert_eq!(RunOutcome::OutputTooLarge.label(), "output_too_large");
        match run("/bin/sh", &sh(&format!("head -c {MAX_OUTPUT_BYTES} /dev/zero")), &o) {
            RunOutcome::Exited { code: Some(0), stdout, .. } => assert_eq!(stdout.len() as u64, MAX_OUTPUT_BYTES),
            other => panic!("{other:?}"),
        }
    }

    /// Review 15: a program that exited while a child it left running held its output open
    /// was a `timeout`, so a notify wrapper (`mailer "$@" &`) that exited 0 was a failed
    /// notice. Now the exit status stands and the output is cut off, marked as possibly
    /// incomplete.
    #[test]
    fn a_child_left_holding_the_pipes_cuts_the_output_off_and_the_exit_status_stands() {
        let o = RunOptions::new(Duration::from_secs(10));
        let t = Instant::now();
        let r = run("/bin/sh", &sh("echo before; echo said >&2; (sleep 3; echo after) & exit 3"), &o);
        assert!(
            t.elapsed() < Duration::from_millis(2500),
            "waited for the left child: {:?}",
            t.elapsed()
        );
        assert_eq!(
            r,
            RunOutcome::OutputCutOff {
                code: Some(3),
                stdout: "before\n".into(),
                stderr: "said\n".into()
            }
        );
        assert_eq!(
            (r.label().as_str(), r.exit()),
            ("output_cut_off", Some((Some(3), "before\n", "said\n")))
        );
        // A child that lets go of the pipes leaves the output whole.
        let r = run("/bin/sh", &sh("echo whole; sleep 3 >/dev/null 2>&1 & exit 0"), &o);
        assert_eq!(
            r,
            RunOutcome::Exited {
                code: Some(0),
                stdout: "whole\n".into(),
                stderr: String::new()
            }
        );
        // Only a program that exited has an exit status to take.
        assert_eq!(RunOutcome::TimedOut { abandoned: false }.exit(), None);
        assert_eq!(RunOutcome::OutputTooLarge.exit(), None);
    }

    /// After the cut the pipes are still drained: the child left running neither blocks on a
    /// full pipe nor dies of SIGPIPE (a mailer writing after its wrapper exited).
    #[test]
    fn the_child_left_running_can_go_on_writing_after_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let script = format!(
            "(sleep 1; head -c 1048576 /dev/zero && head -c 1048576 /dev/zero >&2 && touch '{}') & exit 0",
            done.display()
        );
        let mut o = RunOptions::new(Duration::from_secs(10));
        o.leftovers = Leftovers::Leave;
        let r = run("/bin/sh", &sh(&script), &o);
        assert_eq!(r.label(), "output_cut_off");
        let t = Instant::now();
        while !done.exists() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(done.exists(), "the child left running could not finish writing");
    }

    /// Review 16: with the default (a command read for its output), the children left holding
    /// it are ended with the program's process group, not left to pile up one per cycle.
    #[test]
    fn the_children_left_holding_a_reader_s_output_are_ended() {
        let dir = tempfile::tempdir().unwrap();
        let pid = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > '{}'; echo header; exit 0", pid.display());
        let r = run("/bin/sh", &sh(&script), &RunOptions::new(Duration::from_secs(10)));
        assert_eq!(r.label(), "output_cut_off");
        let pid: libc::pid_t = std::fs::read_to_string(&pid).unwrap().trim().parse().unwrap();
        let t = Instant::now();
        // SAFETY: kill(2) with signal 0 only asks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // A killed child not yet reaped by its parent (init) could still answer; a zombie
        // left by a dead shell is reaped by init quickly.
        assert!(unsafe { libc::kill(pid, 0) } != 0, "the sleep left holding the output is alive");
    }

    #[test]
    fn arguments_are_inert() {
        let o = RunOptions::new(Duration::from_secs(5));
        let hostile = "$(touch /tmp/gpu-reaper-pwned); rm -rf / | x\nnext".to_string();
        let r = run("/bin/echo", std::slice::from_ref(&hostile), &o);
        match r {
            RunOutcome::Exited { stdout, .. } => assert_eq!(stdout, format!("{hostile}\n")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timeout_kills_the_child() {
        let mut o = RunOptions::new(Duration::from_millis(200));
        o.kill_grace = Duration::from_millis(500);
        let t = Instant::now();
        let r = run("/bin/sleep", &["5".into()], &o);
        assert_eq!(r, RunOutcome::TimedOut { abandoned: false });
        assert!(t.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn unkillable_child_is_abandoned_and_blocks_new_starts_until_it_dies() {
        // A private copy of sleep so no other test shares the program name.
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("fake-smi");
        std::fs::write(&prog, "#!/bin/sh\nexec sleep \"$1\"\n").unwrap();
        std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let prog = prog.to_str().unwrap();
        let mut o = RunOptions::new(Duration::from_millis(100));
        o.kill = KillMode::Ignore;
        o.kill_grace = Duration::from_millis(50);
        let before = abandoned_total();
        let t = Instant::now();
        assert_eq!(run(prog, &["1".into()], &o), RunOutcome::TimedOut { abandoned: true });
        assert!(t.elapsed() < Duration::from_millis(900), "abandoning must not block");
        assert!(abandoned_total() > before);
        assert_eq!(abandoned_alive(Some(prog)), 1);
        assert_eq!(run(prog, &["0".into()], &o), RunOutcome::Refused);
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(abandoned_alive(Some(prog)), 0);
        assert_eq!(run(prog, &["0".into()], &RunOptions::new(Duration::from_secs(5))).label(), "ok");
    }
}
