//! The only place the enforcer starts a process.
//!
//! [`run`] takes a program and its argv (never a shell: hostile job names stay inert
//! arguments), sets `LC_ALL=C`, removes the variables the caller names, enforces a timeout
//! and returns an outcome value rather than an error. A child that will not die after
//! SIGKILL (uninterruptible sleep, the classic hung nvidia-smi) is abandoned without blocking
//! and kept in a registry; while any abandoned child of a program is still alive, [`run`]
//! refuses to start that program again, so hung children cannot pile up.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest stdout or stderr kept, bytes; the rest is discarded.
pub const MAX_OUTPUT_BYTES: u64 = 64 << 20;

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
}

impl RunOptions {
    /// Defaults: the given timeout, 500 ms kill grace, nothing removed, no stdin, SIGKILL.
    pub fn new(timeout: Duration) -> RunOptions {
        RunOptions {
            timeout,
            kill_grace: Duration::from_millis(500),
            env_remove: Vec::new(),
            stdin: None,
            kill: KillMode::Kill,
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
    /// A short label for logs and metrics: `ok`, `exit_N`, `signal`, `timeout`, `abandoned`,
    /// `spawn_failed`, `refused`, `output_too_large`.
    pub fn label(&self) -> String {
        match self {
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
            other => other.label(),
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

/// Reads a pipe to its end: the first [`MAX_OUTPUT_BYTES`], and whether there was more.
fn reader(mut r: impl Read + Send + 'static) -> mpsc::Receiver<(Vec<u8>, bool)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut r).take(MAX_OUTPUT_BYTES).read_to_end(&mut buf);
        // Drain the rest so the child never blocks on a full pipe.
        let more = std::io::copy(&mut r, &mut std::io::sink()).unwrap_or(0) > 0;
        let _ = tx.send((buf, more));
    });
    rx
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
/// environment scrubbing. Never blocks longer than `timeout + kill_grace` plus a short wait
/// for the output pipes.
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
    // The child is gone; a grandchild may still hold the pipes. Wait briefly, then treat the
    // output as incomplete.
    let grace = Duration::from_millis(500);
    let take = |rx: Option<mpsc::Receiver<(Vec<u8>, bool)>>| rx.and_then(|r| r.recv_timeout(grace).ok());
    match (take(out_rx), take(err_rx)) {
        (Some((_, true)), Some(_)) | (Some(_), Some((_, true))) => RunOutcome::OutputTooLarge,
        (Some((o, false)), Some((e, false))) => RunOutcome::Exited {
            code: status.code(),
            stdout: String::from_utf8_lossy(&o).into_owned(),
            stderr: String::from_utf8_lossy(&e).into_owned(),
        },
        _ => RunOutcome::TimedOut { abandoned: false },
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
