//! Carrying actions out. [`RealExecutor`] changes things (enforce mode); [`ObserveExecutor`]
//! changes nothing and reports would-do; [`RecordingExecutor`] records for tests. Alerts
//! and admin alerts go to the webhook in both real modes; the log lines and the audit log
//! are written by the daemon for every executor alike.

use crate::plan::Action;
use crate::run::{run, Leftovers, RunOptions};
use crate::slurm::{CancelOutcome, SlurmClient};
use serde::Serialize;
use std::time::Duration;

/// How one action ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    /// Carried out.
    Done,
    /// Observe mode: logged as would-do, nothing changed.
    Would,
    /// A cancel found the job already gone.
    AlreadyGone,
    /// Failed; the detail (never a secret).
    Failed(String),
}

impl Outcome {
    /// `done`, `would`, `already_gone` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Would => "would",
            Outcome::AlreadyGone => "already_gone",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// Carries out one action.
pub trait Executor {
    /// Does (or logs) `action`.
    fn execute(&mut self, action: &Action) -> Outcome;
}

/// Posts Slack-compatible JSON (`{"text": ...}`) with curl. The URL is read from an
/// environment variable at each post and handed to curl on stdin (`curl -K -`), so it never
/// appears in argv, in `ps`, or in any log.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// curl program.
    pub curl: String,
    /// Name of the variable holding the URL.
    pub url_env: String,
    /// Timeout.
    pub timeout: Duration,
}

fn curl_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Webhook {
    /// Posts `text`. Errors never contain the URL, nor `url_env` unless it is a variable name
    /// (a URL pasted into `webhook_url_env` would otherwise be logged).
    pub fn post(&self, text: &str) -> Result<(), String> {
        if !crate::config::is_env_var_name(&self.url_env) {
            return Err("webhook: webhook_url_env is not an environment variable name (value not shown)".into());
        }
        let url = std::env::var(&self.url_env).map_err(|_| format!("webhook: ${} is not set", self.url_env))?;
        let body = serde_json::json!({ "text": text }).to_string();
        let cfg = format!(
            "url = {}\nheader = \"Content-Type: application/json\"\ndata-binary = {}\n",
            curl_quote(&url),
            curl_quote(&body)
        );
        let mut o = RunOptions::new(self.timeout);
        o.stdin = Some(cfg.into_bytes());
        o.leftovers = Leftovers::Leave;
        let args: Vec<String> = [
            "--silent",
            "--show-error",
            "--fail",
            "--max-time",
            &self.timeout.as_secs().max(1).to_string(),
            "-K",
            "-",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Run for its effect: the exit status is curl's answer, even when a child it left
        // running cut its output off.
        let out = run(&self.curl, &args, &o);
        match out.exit() {
            Some((Some(0), _, _)) => Ok(()),
            // curl's stderr is not shown: it may quote the URL (a secret). Its exit code says
            // what failed (operator trial 17: `curl (curl) exit_7` alone did not).
            Some((code, _, _)) => Err(format!(
                "webhook: curl ({}) {}{}",
                self.curl,
                crate::slurm::exit_kind(code),
                code.and_then(|c| curl_exit_meaning(c, self.timeout))
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )),
            None => Err(format!(
                "webhook: curl ({}) {}",
                self.curl,
                out.describe_timeout(self.timeout, crate::slurm::TIMEOUT_KEY)
            )),
        }
    }
}

/// What curl's common exit codes mean, from curl(1), section "EXIT CODES" (curl 7.x and 8.x):
/// 6 "Could not resolve host", 7 "Failed to connect to host", 22 "HTTP page not retrieved
/// ... returned another error with the HTTP error code being 400 or above. This return code
/// only appears if -f, --fail is used", 28 "Operation timeout", 35 "SSL connect error. The
/// SSL handshaking failed", 60 "Peer certificate cannot be authenticated with known CA
/// certificates". `None` for any other code. `max_time` is the `--max-time` the webhook
/// passes, from `enforcer.command_timeout`.
fn curl_exit_meaning(code: i32, max_time: Duration) -> Option<String> {
    Some(match code {
        6 => "could not resolve the webhook's host".to_string(),
        7 => "failed to connect to the webhook's host".to_string(),
        22 => "the webhook answered with an HTTP error status, 400 or above".to_string(),
        28 => format!(
            "timed out after {}s, the --max-time set from {}",
            max_time.as_secs().max(1),
            crate::slurm::TIMEOUT_KEY
        ),
        35 => "the TLS handshake with the webhook's host failed".to_string(),
        60 => "the webhook's TLS certificate could not be verified against the known CA certificates".to_string(),
        _ => return None,
    })
}

fn alert_text(a: &Action, observe: bool) -> Option<String> {
    let tag = if observe { "[observe] " } else { "" };
    match a {
        Action::Alert { reason, user, .. } => Some(format!("{tag}gpu-reaper: {reason} (user {})", policy::one_line(user, 64))),
        Action::AdminAlert { text } => Some(format!("{tag}{text}")),
        _ => None,
    }
}

/// The webhook text of a user notice (sent when no notify command is configured): the
/// notice's text (`crate::notice::text`: the reason, what may follow and when), the same the
/// notify command gets as its message argument.
fn notice_text(user: &str, text: &str) -> String {
    format!("gpu-reaper: notice to user {}: {text}", policy::one_line(user, 64))
}

/// Enforce mode: drains, cancels, resumes and notices for real.
pub struct RealExecutor<S: SlurmClient> {
    /// Slurm.
    pub slurm: S,
    /// Notify command argv prefix (empty: none).
    pub notify_command: Vec<String>,
    /// Webhook, if configured: alerts go there.
    pub webhook: Option<Webhook>,
    /// Notices without a notify command go to the webhook (`webhook_reaches_users`); false:
    /// such a notice fails, as a post the user may never see is no notice.
    pub notice_by_webhook: bool,
    /// Timeout for the notify command.
    pub timeout: Duration,
}

impl<S: SlurmClient> Executor for RealExecutor<S> {
    fn execute(&mut self, action: &Action) -> Outcome {
        let r: Result<Outcome, String> = match action {
            Action::Alert { .. } | Action::AdminAlert { .. } => match (&self.webhook, alert_text(action, false)) {
                (Some(w), Some(t)) => w.post(&t).map(|_| Outcome::Done),
                _ => Ok(Outcome::Done),
            },
            Action::Notice { job_id, user, reason } => {
                // A notice is delivered by the notify command, or else by a webhook the
                // operator said reaches users. With neither it fails: a notice the user did
                // not receive must never start the clock that lets a cancel follow.
                if self.notify_command.is_empty() {
                    match &self.webhook {
                        Some(w) if self.notice_by_webhook => w.post(&notice_text(user, reason)).map(|_| Outcome::Done),
                        Some(_) => Err(
                            "no channel to the user: notify_command is empty and the webhook is not one users read (webhook_reaches_users = false)"
                                .into(),
                        ),
                        None => Err("no notification channel (notify_command or webhook_url_env) configured".into()),
                    }
                } else {
                    let mut args: Vec<String> = self.notify_command[1..].to_vec();
                    args.extend([user.clone(), job_id.clone(), reason.clone()]);
                    let program = &self.notify_command[0];
                    // Its exit status is its answer: a command that exits 0 has delivered,
                    // even when a child it left running (`mailer "$@" &`) still holds its
                    // output open (review 15).
                    let mut o = RunOptions::new(self.timeout);
                    o.leftovers = Leftovers::Leave;
                    let out = run(program, &args, &o);
                    match out.exit() {
                        Some((Some(0), _, _)) => Ok(Outcome::Done),
                        // Its own words say why (a mail relay refusing, a bad address); the
                        // notify command is the site's, its stderr is no secret of ours.
                        Some((code, stdout, stderr)) => Err(format!(
                            "notify command {program}: {}{}",
                            crate::slurm::exit_kind(code),
                            crate::telemetry::output_excerpt(stdout, stderr)
                                .map(|s| format!(": {s}"))
                                .unwrap_or_default()
                        )),
                        None => Err(format!(
                            "notify command {program}: {}",
                            out.describe_timeout(self.timeout, crate::slurm::TIMEOUT_KEY)
                        )),
                    }
                }
            }
            Action::Drain { node, node_reason, .. } => self
                .slurm
                .drain(node, node_reason)
                .map(|_| Outcome::Done)
                .map_err(|e| e.to_string()),
            Action::Resume { node, .. } => self.slurm.resume(node).map(|_| Outcome::Done).map_err(|e| e.to_string()),
            Action::Cancel { job_id, reason, .. } => {
                // The AdminComment is best effort: a failure is logged but does not stop the
                // cancel (the audit log is the record).
                let comment = self.slurm.set_admin_comment(job_id, reason).err();
                match self.slurm.cancel(job_id) {
                    Ok(CancelOutcome::Cancelled) => match comment {
                        None => Ok(Outcome::Done),
                        Some(e) => {
                            tracing::warn!(job_id = %job_id, error = %e, "AdminComment not set");
                            Ok(Outcome::Done)
                        }
                    },
                    Ok(CancelOutcome::AlreadyGone) => Ok(Outcome::AlreadyGone),
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        r.unwrap_or_else(Outcome::Failed)
    }
}

/// Observe mode: alerts still reach the webhook (marked `[observe]`; the binary gives it no
/// webhook when `webhook_reaches_users` says the webhook reaches users); everything that would
/// change Slurm or contact a user is reported as [`Outcome::Would`].
pub struct ObserveExecutor {
    /// Webhook, if configured.
    pub webhook: Option<Webhook>,
}

impl Executor for ObserveExecutor {
    fn execute(&mut self, action: &Action) -> Outcome {
        if action.changes_something() {
            return Outcome::Would;
        }
        match (&self.webhook, alert_text(action, true)) {
            (Some(w), Some(t)) => w.post(&t).map_or_else(Outcome::Failed, |_| Outcome::Done),
            _ => Outcome::Done,
        }
    }
}

/// Records every action; fails the kinds listed in `fail`. For tests.
#[derive(Debug, Default)]
pub struct RecordingExecutor {
    /// Every action seen, in order.
    pub actions: Vec<Action>,
    /// Action kinds (`drain`, `cancel`, ...) that fail.
    pub fail: Vec<&'static str>,
    /// Report would-do for state-changing actions, like observe mode.
    pub observe: bool,
}

impl Executor for RecordingExecutor {
    fn execute(&mut self, action: &Action) -> Outcome {
        self.actions.push(action.clone());
        if self.fail.contains(&action.kind()) {
            Outcome::Failed("recording executor: told to fail".into())
        } else if self.observe && action.changes_something() {
            Outcome::Would
        } else {
            Outcome::Done
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Slurm client whose every command fails (`false`): these tests reach no Slurm.
    fn no_slurm() -> crate::slurm::SlurmCli {
        crate::slurm::SlurmCli {
            squeue: "false".into(),
            scontrol: "false".into(),
            scancel: "false".into(),
            source: crate::slurm::JobSource::Json,
            timeout: Duration::from_secs(5),
        }
    }

    /// A notice to bob for job 7.
    fn notice_of_bob() -> Action {
        Action::Notice {
            job_id: "7".into(),
            user: "bob".into(),
            reason: "job 7: alert idle".into(),
        }
    }

    /// A fake curl in `dir` that writes its argv to `log.argv` and its stdin to `log.stdin`,
    /// and exits 22 while `log.fail` exists (the code it holds, when it holds one). Returns
    /// (curl, log).
    fn fake_curl(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let curl = dir.join("curl");
        let log = dir.join("log");
        std::fs::write(
            &curl,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > {0}.argv\ncat > {0}.stdin\n[ -s {0}.fail ] && exit $(cat {0}.fail)\n[ -e {0}.fail ] && exit 22\nexit 0\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&curl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        (curl, log)
    }

    #[test]
    fn a_notice_goes_by_the_webhook_without_a_notify_command_and_fails_with_no_channel() {
        let dir = tempfile::tempdir().unwrap();
        let (curl, log) = fake_curl(dir.path());
        std::env::set_var("GPU_REAPER_TEST_NOTICE_URL", "https://hooks.example.invalid/x");
        let slurm = no_slurm();
        let webhook = Webhook {
            curl: curl.display().to_string(),
            url_env: "GPU_REAPER_TEST_NOTICE_URL".into(),
            timeout: Duration::from_secs(5),
        };
        let mut e = RealExecutor {
            slurm,
            notify_command: vec![],
            webhook: Some(webhook),
            notice_by_webhook: true,
            timeout: Duration::from_secs(5),
        };
        let notice = Action::Notice {
            job_id: "42".into(),
            user: "alice".into(),
            reason: "job 42: alert idle".into(),
        };
        assert_eq!(e.execute(&notice), Outcome::Done);
        let stdin = std::fs::read_to_string(format!("{}.stdin", log.display())).unwrap();
        assert!(stdin.contains("notice to user alice: job 42: alert idle"), "{stdin}");
        // The webhook failing is a failed notice (the notice clock does not start).
        std::fs::write(format!("{}.fail", log.display()), "").unwrap();
        assert!(matches!(e.execute(&notice), Outcome::Failed(_)));
        // No channel at all: failed, never a silent done.
        e.webhook = None;
        match e.execute(&notice) {
            Outcome::Failed(why) => assert!(why.contains("notify_command") && why.contains("webhook_url_env"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    /// Trial 6 #6: a notify command that could not start failed as `notify command:
    /// spawn_failed`, naming neither the program nor the OS error.
    #[test]
    fn a_failed_notify_command_names_its_program_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = RealExecutor {
            slurm: no_slurm(),
            notify_command: vec!["/nonexistent/mailer".into()],
            webhook: None,
            notice_by_webhook: false,
            timeout: Duration::from_secs(5),
        };
        let notice = notice_of_bob();
        match e.execute(&notice) {
            Outcome::Failed(why) => assert!(
                why.contains("/nonexistent/mailer") && why.contains("spawn_failed") && why.contains("No such file or directory"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // One that runs and fails says so in its own words.
        let mailer = dir.path().join("mailer");
        std::fs::write(&mailer, "#!/bin/sh\necho 'relay refused: no such user' >&2\nexit 75\n").unwrap();
        std::fs::set_permissions(&mailer, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        e.notify_command = vec![mailer.display().to_string()];
        match e.execute(&notice) {
            Outcome::Failed(why) => assert!(
                why.contains(&mailer.display().to_string()) && why.contains("exit_75") && why.contains("relay refused"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // A curl that cannot start is named too.
        std::env::set_var("GPU_REAPER_TEST_MISSING_CURL_URL", "https://hooks.example.invalid/x");
        let w = Webhook {
            curl: "/nonexistent/curl".into(),
            url_env: "GPU_REAPER_TEST_MISSING_CURL_URL".into(),
            timeout: Duration::from_secs(5),
        };
        let why = w.post("x").unwrap_err();
        assert!(why.contains("/nonexistent/curl") && why.contains("No such file"), "{why}");
    }

    /// Operator trial 17: a failed webhook logged only `curl (curl) exit_7`.
    #[test]
    fn a_failed_webhook_says_what_curls_exit_code_means() {
        let dir = tempfile::tempdir().unwrap();
        let (curl, log) = fake_curl(dir.path());
        std::env::set_var("GPU_REAPER_TEST_EXIT_URL", "https://hooks.example.invalid/secret");
        let w = Webhook {
            curl: curl.display().to_string(),
            url_env: "GPU_REAPER_TEST_EXIT_URL".into(),
            timeout: Duration::from_secs(5),
        };
        let fail = format!("{}.fail", log.display());
        for (code, says) in [
            ("6", "exit_6 (could not resolve the webhook's host)"),
            ("7", "exit_7 (failed to connect to the webhook's host)"),
            ("22", "exit_22 (the webhook answered with an HTTP error status, 400 or above)"),
            (
                "28",
                "exit_28 (timed out after 5s, the --max-time set from enforcer.command_timeout)",
            ),
            ("35", "exit_35 (the TLS handshake with the webhook's host failed)"),
            ("60", "exit_60 (the webhook's TLS certificate could not be verified"),
        ] {
            std::fs::write(&fail, code).unwrap();
            let e = w.post("hello").unwrap_err();
            assert!(e.contains(says), "exit {code}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
        // A code with no common meaning is named alone.
        std::fs::write(&fail, "3").unwrap();
        assert!(w.post("hello").unwrap_err().ends_with("exit_3"));
    }

    #[test]
    fn a_notice_is_never_posted_to_a_webhook_that_does_not_reach_users() {
        let dir = tempfile::tempdir().unwrap();
        let (curl, log) = fake_curl(dir.path());
        std::env::set_var("GPU_REAPER_TEST_OPS_URL", "https://hooks.example.invalid/ops");
        let mut e = RealExecutor {
            slurm: no_slurm(),
            notify_command: vec![],
            webhook: Some(Webhook {
                curl: curl.display().to_string(),
                url_env: "GPU_REAPER_TEST_OPS_URL".into(),
                timeout: Duration::from_secs(5),
            }),
            notice_by_webhook: false,
            timeout: Duration::from_secs(5),
        };
        let notice = notice_of_bob();
        match e.execute(&notice) {
            Outcome::Failed(why) => assert!(why.contains("webhook_reaches_users"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(
            !std::path::Path::new(&format!("{}.stdin", log.display())).exists(),
            "nothing posted"
        );
        // Alerts still go to the ops webhook.
        let alert = Action::AdminAlert { text: "x".into() };
        assert_eq!(e.execute(&alert), Outcome::Done);
    }

    #[test]
    fn webhook_url_never_reaches_argv_or_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (curl, log) = fake_curl(dir.path());
        let secret = "https://hooks.example.invalid/services/T0/B0/secret-token";
        std::env::set_var("GPU_REAPER_TEST_WEBHOOK_URL", secret);
        let w = Webhook {
            curl: curl.display().to_string(),
            url_env: "GPU_REAPER_TEST_WEBHOOK_URL".into(),
            timeout: Duration::from_secs(5),
        };
        w.post("job 1: alert idle \"quoted\" \\ back").unwrap();
        let argv = std::fs::read_to_string(format!("{}.argv", log.display())).unwrap();
        assert!(!argv.contains("secret-token"), "{argv}");
        assert!(argv.lines().any(|l| l == "-K"));
        let stdin = std::fs::read_to_string(format!("{}.stdin", log.display())).unwrap();
        assert!(stdin.contains(&format!("url = \"{secret}\"")));
        // The body is Slack-compatible JSON, escaped once for JSON and once for curl's config.
        assert!(
            stdin.contains(r#"data-binary = "{\"text\":\"job 1: alert idle \\\"quoted\\\" \\\\ back\"}""#),
            "{stdin}"
        );
        std::fs::write(format!("{}.fail", log.display()), "").unwrap();
        let e = w.post("x").unwrap_err();
        assert!(!e.contains("secret") && e.contains("exit_22"), "{e}");
        let missing = Webhook {
            url_env: "GPU_REAPER_TEST_WEBHOOK_UNSET".into(),
            ..w
        };
        assert!(missing.post("x").unwrap_err().contains("GPU_REAPER_TEST_WEBHOOK_UNSET"));
        // A URL pasted in place of the variable name never reaches the error (and the log).
        let pasted = Webhook {
            url_env: secret.into(),
            ..missing
        };
        let e = pasted.post("x").unwrap_err();
        assert!(
            !e.contains("secret") && !e.contains("hooks") && e.contains("not an environment variable name"),
            "{e}"
        );
    }
}
