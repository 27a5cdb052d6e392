//! The config file: a `[policy]` section (`policy::PolicyConfig`) and an `[enforcer]`
//! section. Validated once, at start, into [`Config`]; unknown keys, an interval longer than
//! the window, a bad regex, an unknown verdict or mode, a relative `state_dir`/`proc_root`, a
//! relative program path and a `webhook_url_env` that is not a variable name are errors that
//! name the key.

use crate::slurm::JobSource;
use policy::{DurationS, Policy, PolicyConfig, Verdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default metrics address: loopback only, on a port no common GPU exporter uses (9835 is
/// nvidia_gpu_exporter's, 9400 dcgm-exporter's, 9445 nvidia_gpu_prometheus_exporter's, 9100
/// node_exporter's).
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9776";

/// Whether the enforcer may change anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    /// Log what would be done; change nothing (the default).
    #[default]
    Observe,
    /// Drain, cancel and notify for real. Must be written explicitly.
    Enforce,
}

impl RunMode {
    /// `observe` or `enforce`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Observe => "observe",
            RunMode::Enforce => "enforce",
        }
    }
}

/// The `[enforcer]` section as written. Every key has a default; unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnforcerConfig {
    /// `observe` (default) or `enforce`.
    pub mode: RunMode,
    /// This node's Slurm NodeName; empty means the host name up to the first dot.
    pub node: String,
    /// Directory for the state file, the audit log and the pause file; must be absolute.
    pub state_dir: PathBuf,
    /// `host:port` for the Prometheus page; empty disables it.
    pub metrics_listen: String,
    /// `json` (default: `squeue --json`) or `format` (the `--Format` fallback).
    pub job_source: JobSource,
    /// squeue program.
    pub squeue: String,
    /// scontrol program.
    pub scontrol: String,
    /// scancel program.
    pub scancel: String,
    /// nvidia-smi program.
    pub nvidia_smi: String,
    /// curl program, for the webhook.
    pub curl: String,
    /// Timeout for squeue, scontrol, scancel, curl and the notify command. Default `"20s"`.
    pub command_timeout: DurationS,
    /// Timeout for each nvidia-smi query. Default `"10s"`.
    pub nvidia_smi_timeout: DurationS,
    /// Root of the proc filesystem, for PID → cgroup. Default `/proc`; must be absolute.
    pub proc_root: PathBuf,
    /// Directory of the node lock that enforce mode takes for as long as it runs
    /// (`gpu-reaper-enforce-<node>.lock`, flock(2)): one enforcing daemon per node, whatever
    /// its state_dir (trial 11: a second one with its own state_dir doubled every notice and
    /// cancel budget). Default `/run/gpu-reaper` (the unit's `RuntimeDirectory=`, writable
    /// under its `ProtectSystem=strict`); must be absolute. Observe mode takes no node lock.
    pub enforce_lock_dir: PathBuf,
    /// Most drains (or would-drains) per rolling hour. Default 2.
    pub max_drains_per_hour: u32,
    /// Most cancels (or would-cancels) per rolling hour. Default 1.
    pub max_cancels_per_hour: u32,
    /// The suspect-collector rule applies from this many evaluated GPU jobs. Default 3: the
    /// daemon judges only the jobs on its own node, at most one per GPU (8 on an 8-GPU node),
    /// so the default must be reachable there; from 3 jobs up, several jobs turning idle at
    /// once on one node (a broken nvidia-smi, driver or cgroup read) is more likely a collector
    /// fault than coincidence. With the default `suspect_frac` (0.5) it trips when more than
    /// half of them alert at once (2 of 3, 3 of 4–5, 5 of 8); one wasteful job among several
    /// busy ones stays actionable, and a node with one or two GPU jobs never trips.
    /// At least 2: below that one alerting job would make its node suspect (refused; set
    /// `suspect_frac = 1` to switch the rule off).
    pub suspect_min_jobs: u32,
    /// ... when more than this fraction of them reach alert or above. Default 0.5: a broken
    /// collector makes most of a node's jobs look idle at once, while ordinary waste is one
    /// job at a time.
    pub suspect_frac: f64,
    /// Argv of the notify command run at a job's first alert; the job's user, id and the
    /// reason are appended as three more arguments. Empty: notices go by the webhook when
    /// `webhook_reaches_users` is true, else nowhere. Enforce mode with a reachable cancel
    /// needs a channel that reaches the user (this, or such a webhook); with a reachable drain
    /// and no cancel, this or any webhook. A job whose squeue user is empty gets no notice: it
    /// counts as failed (logged), so no cancel follows.
    pub notify_command: Vec<String>,
    /// Name of the environment variable holding the Slack-compatible webhook URL
    /// (`^[A-Za-z_][A-Za-z0-9_]*$`); empty disables the webhook. The URL itself is never
    /// logged; a value that looks like a URL is rejected without being echoed.
    pub webhook_url_env: String,
    /// True when the webhook's channel is one the jobs' users read (a channel every user is
    /// in, or a bridge that messages the user named in the post). Only then is a post to it,
    /// without a notify command, the user's notice that starts the clock before a cancel.
    /// Default false: a webhook usually reaches the admins, and a post they may not relay is
    /// no notice to the user.
    pub webhook_reaches_users: bool,
    /// Lowest verdict written as a finding log line each cycle. Default `alert`. Whatever it
    /// says, a job whose verdict becomes `insufficient_evidence` has its reason logged once at
    /// INFO (see `Daemon::cycle`).
    pub log_findings_from: String,
}

impl Default for EnforcerConfig {
    fn default() -> Self {
        EnforcerConfig {
            mode: RunMode::Observe,
            node: String::new(),
            state_dir: PathBuf::from("/var/lib/gpu-reaper"),
            metrics_listen: DEFAULT_METRICS_LISTEN.into(),
            job_source: JobSource::Json,
            squeue: "squeue".into(),
            scontrol: "scontrol".into(),
            scancel: "scancel".into(),
            nvidia_smi: "nvidia-smi".into(),
            curl: "curl".into(),
            command_timeout: DurationS(20),
            nvidia_smi_timeout: DurationS(10),
            proc_root: PathBuf::from("/proc"),
            enforce_lock_dir: PathBuf::from("/run/gpu-reaper"),
            max_drains_per_hour: 2,
            max_cancels_per_hour: 1,
            suspect_min_jobs: 3,
            suspect_frac: 0.5,
            notify_command: Vec::new(),
            webhook_url_env: String::new(),
            webhook_reaches_users: false,
            log_findings_from: "alert".into(),
        }
    }
}

impl EnforcerConfig {
    /// True when a channel that reaches the job's user is configured: `notify_command`, or
    /// `webhook_url_env` with `webhook_reaches_users = true`. Only then are notices sent, and
    /// only a notice so sent lets a cancel follow. The AdminComment written at cancel does not
    /// count.
    pub fn has_user_channel(&self) -> bool {
        !self.notify_command.is_empty() || self.notice_by_webhook()
    }

    /// True when notices without a notify command go to the webhook: it is set and the
    /// operator said it reaches users.
    pub fn notice_by_webhook(&self) -> bool {
        !self.webhook_url_env.is_empty() && self.webhook_reaches_users
    }

    /// True when observe mode posts its alerts (marked `[observe]`) to the webhook: one is
    /// set and is not said to reach users. Observe mode contacts no user, so a webhook with
    /// `webhook_reaches_users = true` gets nothing in observe mode; its alerts are logged only.
    pub fn observe_posts_to_webhook(&self) -> bool {
        !self.webhook_url_env.is_empty() && !self.webhook_reaches_users
    }

    /// True when anyone is told of the enforcer's actions: a notify command or a webhook
    /// (which may reach only the admins).
    pub fn has_any_channel(&self) -> bool {
        !self.notify_command.is_empty() || !self.webhook_url_env.is_empty()
    }
}

impl Config {
    /// The webhook's failure in this process's environment: `Some(name)` when
    /// `webhook_url_env` names a variable that `env` (a variable lookup, `std::env::var`
    /// in production) finds unset or empty, so every webhook post would fail.
    pub fn webhook_env_unset(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<&str> {
        let name = self.enforcer.webhook_url_env.as_str();
        (!name.is_empty() && env(name).is_none_or(|v| v.trim().is_empty())).then_some(name)
    }

    /// What the notice channels look like in the environment `env` gives (see
    /// [`Config::webhook_env_unset`]): `Ok(None)` when nothing is wrong, `Ok(Some(warning))`
    /// when the webhook's variable is unset but another channel (or observe mode, or no
    /// reachable drain) means the daemon can still run, and `Err(refusal)` in enforce mode with
    /// a reachable drain or cancel when the webhook is the only channel and its variable is
    /// unset: no notice could go out, so every cancel would be held back forever.
    pub fn notice_channel_problem(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
        let Some(name) = self.webhook_env_unset(env) else { return Ok(None) };
        let unset = format!(
            "enforcer.webhook_url_env = {name:?}: the environment variable {name} is not set (or empty), so every webhook post would fail"
        );
        let e = &self.enforcer;
        if e.mode == RunMode::Enforce && drain_reachable(&self.policy) {
            if e.notify_command.is_empty() {
                let told = if e.webhook_reaches_users {
                    "no user could be told and no drain or cancel could ever go ahead"
                } else {
                    "nobody would be told of a drain"
                };
                return Err(format!(
                    "{unset}; it is the only notice channel, so {told}: set {name} in the daemon's environment (EnvironmentFile=/etc/gpu-reaper/enforcer.env in the unit), or set enforcer.notify_command"
                ));
            }
            return Ok(Some(format!("{unset}; notices go by notify_command only")));
        }
        Ok(Some(format!("{unset}; alerts to the webhook are lost")))
    }
}

/// True when some job can reach `drain` or `cancel` under `policy`: a stage at drain or above
/// and a signature whose ceiling allows it.
pub fn drain_reachable(policy: &Policy) -> bool {
    let staged = policy.stages().iter().any(|s| s.verdict >= Verdict::Drain);
    let allowed = (0..policy::signature::REGISTRY.len()).any(|i| policy.ceiling(policy::SignatureId(i as u8)) >= Verdict::Drain);
    staged && allowed
}

impl Config {
    /// The config as it takes effect, for `check-config` to print: every key with its value,
    /// defaults filled in, and `policy.ceilings` naming every signature with its effective
    /// ceiling (the defaults idle and hung `cancel` included), not only those written.
    pub fn effective_file(&self) -> ConfigFile {
        let mut policy = self.policy.config().clone();
        policy.ceilings = policy::signature::REGISTRY
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.name().to_string(),
                    self.policy.ceiling(policy::SignatureId(i as u8)).as_str().to_string(),
                )
            })
            .collect();
        ConfigFile {
            policy,
            enforcer: self.enforcer.clone(),
        }
    }

    /// What a valid config probably does not mean, one line each, for `check-config` and the
    /// daemon's start:
    /// - `policy.max_sample_gap` under twice `policy.interval`. The daemon samples once a
    ///   cycle, so samples are an interval apart at best; with less than one interval of
    ///   slack, a cycle that starts late (a slow squeue or nvidia-smi, up to their timeouts)
    ///   or one failed nvidia-smi read leaves a hole longer than the gap, which ends the
    ///   breach: jobs flip between alert and insufficient_evidence and never reach a drain.
    ///   Twice the interval is the least gap that absorbs a late cycle; three times (the
    ///   default 3m at 60s) also absorbs one failed read. (A gap under the interval is an
    ///   error: every sample would be late.)
    /// - a cancel stage at `"0s"` that some signature may reach: it does not cancel at once.
    ///   Guard 6 still needs the drain (one cycle after the alert, confirmed the cycle after)
    ///   to have stood one `window`, and `notice` since the user's notice (sent with the
    ///   first alert), so the cancel comes about max(2 × interval + window, notice) after
    ///   the first alert, with no other dwell.
    /// - observe mode with a reachable cancel and no channel to the user: enforce mode would
    ///   refuse the config, and observe mode's would-cancels wait for no notice.
    /// - observe mode with a webhook that reaches users: observe mode contacts no user, so
    ///   nothing is posted to it (see [`EnforcerConfig::observe_posts_to_webhook`]).
    pub fn warnings(&self) -> Vec<String> {
        let c = self.policy.config();
        let mut out = Vec::new();
        let (gap, interval) = (c.max_sample_gap, c.interval);
        if gap.0 < 2 * interval.0 {
            let late = match gap.0 - interval.0 {
                0 => "a cycle that starts even a second late".to_string(),
                slack => format!("a cycle that starts more than {} late", DurationS(slack)),
            };
            out.push(format!(
                "policy.max_sample_gap = \"{gap}\" is less than twice policy.interval (\"{interval}\"): {late}, or one failed nvidia-smi read, leaves a hole longer than the gap, the job's breach starts again, and jobs flip between alert and insufficient_evidence without ever reaching a drain; use at least {} (three times the interval, as the default 3m at 60s, also absorbs one failed read)",
                DurationS(2 * interval.0)
            ));
        }
        let zero_cancel = self.policy.stages().iter().any(|s| s.verdict == Verdict::Cancel && s.after_s == 0);
        if zero_cancel && cancel_reachable(&self.policy) {
            let after_alert = DurationS((2 * interval.0 + c.window.0).max(c.notice.0));
            out.push(format!(
                "policy.stages: cancel after \"0s\" does not cancel at once: a cancel still needs the job's drain (one cycle after the first alert, confirmed the cycle after) to have stood one policy.window (\"{}\") and policy.notice (\"{}\") since the user's notice, so an idle job is cancelled about {after_alert} after the first alert (which itself comes about one window into the waste), with no further time to react; give the cancel stage the dwell you mean (for example after = \"2h\")",
                c.window, c.notice
            ));
        }
        let e = &self.enforcer;
        if e.mode == RunMode::Observe && !e.has_user_channel() && cancel_reachable(&self.policy) {
            out.push(format!(
                "no channel reaches the job's user ({}), so mode = \"enforce\" would be refused with this cancel stage, and observe mode's would-cancels wait for no notice; set enforcer.notify_command, or webhook_reaches_users = true if the webhook's channel is one your users read",
                if e.webhook_url_env.is_empty() {
                    "no notify_command, no webhook"
                } else {
                    "no notify_command, and the webhook is not said to reach users"
                }
            ));
        }
        out.extend(self.risky_settings());
        out.extend(self.exemption_warnings());
        if e.mode == RunMode::Observe && !e.webhook_url_env.is_empty() && !e.observe_posts_to_webhook() {
            out.push(
                "enforcer.webhook_reaches_users = true in observe mode: observe mode contacts no user, so nothing is posted to the webhook (its channel reaches users); alerts and would-actions are logged and written to the audit log only. To see observe mode's alerts in a channel, point webhook_url_env at one only admins read and set webhook_reaches_users = false until you switch to enforce mode".to_string(),
            );
        }
        out
    }
}

impl Config {
    /// Exemptions that are valid but exempt far more, or less, than they seem to (operator
    /// trial 18: `name_regex = ".*"`, `users = ["*"]`, `partitions = [""]` and a blank
    /// `comment_marker` were taken silently).
    fn exemption_warnings(&self) -> Vec<String> {
        let x = &self.policy.config().exempt;
        let mut out = Vec::new();
        for (key, list) in [
            ("policy.exempt.users", &x.users),
            ("policy.exempt.accounts", &x.accounts),
            ("policy.exempt.partitions", &x.partitions),
            ("policy.exempt.qos", &x.qos),
        ] {
            for (i, v) in list.iter().enumerate() {
                if v.trim().is_empty() {
                    out.push(format!(
                        "{key}[{i}] = {v:?} is blank: names are compared whole, so it exempts only jobs whose name there is blank, which squeue does not give; remove it"
                    ));
                } else if v.contains(['*', '?']) {
                    out.push(format!(
                        "{key}[{i}] = {v:?}: names are compared whole (case-insensitively), and '*' and '?' are no wildcards, so it exempts only a name spelled exactly so; list the names, or use policy.exempt.name_regex for job names"
                    ));
                }
            }
        }
        // A regex that matches the empty string unanchored (".*", "a*", "jupyter|") matches
        // every name; an anchored one that does (`^(jupyter)?$`) exempts only what it spells,
        // so names unlike any interactive job are tried too (review 32).
        let every_name = |re: regex::Regex| ["", "x", "train.sh", "bert-large_run-7"].iter().all(|n| re.is_match(n));
        if !x.name_regex.is_empty() && regex::Regex::new(&x.name_regex).is_ok_and(every_name) {
            out.push(format!(
                "policy.exempt.name_regex = {:?} matches the empty string, so it matches every job name: every job is exempt and never goes above watching; anchor it (for example \"^jupyter\")",
                x.name_regex
            ));
        }
        let marker = &x.comment_marker;
        // With job_source = "format" a blank marker is what enforce mode asks for (that
        // source cannot read comments): said at load, not again here.
        if marker.is_empty() {
            if self.enforcer.job_source != JobSource::Format {
                out.push("policy.exempt.comment_marker = \"\": users cannot opt a job out with a comment (sbatch --comment); set a marker such as \"gpu-reaper:exempt\" unless you mean that".to_string());
            }
        } else if marker.trim().chars().count() < 3 {
            out.push(format!(
                "policy.exempt.comment_marker = {marker:?} is found in many comments (it is matched as a case-insensitive substring), so most jobs with a comment are exempt; use a distinct marker such as \"gpu-reaper:exempt\""
            ));
        }
        out
    }

    /// Settings that are valid but risky or probably not meant, one line each naming the key
    /// and what will happen (part of [`Config::warnings`]):
    /// - `starved`, `partial` or `unknown` with a `cancel` ceiling: those jobs do some work,
    ///   or their evidence fits no signature of waste;
    /// - `notice = "0s"` with a reachable cancel;
    /// - a cancel stage (after more than 0s) that is not when the cancel comes, because the
    ///   drain must stand one window first or `notice` must pass ([`earliest_cancel_s`]);
    /// - `max_sample_gap` of a third of the window or more: a window covered by one or two
    ///   samples counts as whole evidence;
    /// - `command_timeout` (plus nvidia-smi's two queries) longer than `max_sample_gap`: one
    ///   hung command delays the next sample past the gap;
    /// - `nvidia_smi_timeout` of half `interval` or more (when the above does not already
    ///   say): two hung queries hold a cycle past the next one's start;
    /// - an hourly budget of 0 where a drain or cancel can be reached, or one above what a
    ///   node can spend (more than 10);
    /// - a `warmup` of 12 hours or more, or under 5 minutes with a drain reachable, and a
    ///   `util_threshold_pct` of 50 or more.
    fn risky_settings(&self) -> Vec<String> {
        let c = self.policy.config();
        let e = &self.enforcer;
        let mut out = Vec::new();
        let cancel = cancel_reachable(&self.policy);
        for (i, sig) in policy::signature::REGISTRY.iter().enumerate() {
            let what = match sig.name() {
                "starved" => "a starved job computes, slowly (its GPUs wait on input), and better data loading would speed it up",
                "partial" => "a partial job works on some of its GPUs",
                "unknown" => "unknown is evidence that fits no signature of waste: the enforcer cannot explain it",
                _ => continue,
            };
            let ceiling = self.policy.ceiling(policy::SignatureId(i as u8));
            if cancel && ceiling >= Verdict::Cancel {
                out.push(format!(
                    "policy.ceilings.{0} = \"cancel\": {what}. Such jobs will be drained and cancelled like idle ones, their work lost; keep {0} at \"alert\" (the default) unless a replay of your own telemetry shows these cancels are right",
                    sig.name()
                ));
            } else if drain_reachable(&self.policy) && ceiling >= Verdict::Drain {
                // Review 13: a drain takes the node from every other user too.
                out.push(format!(
                    "policy.ceilings.{0} = \"{1}\": {what}. Such jobs' nodes will be drained (no new job starts there) like idle ones'; keep {0} at \"alert\" (the default) unless a replay of your own telemetry shows these drains are right",
                    sig.name(),
                    ceiling.as_str()
                ));
            }
        }
        let alert_at = earliest_alert_s(&self.policy);
        let cancel_at = earliest_cancel_s(&self.policy).filter(|_| cancel);
        if let Some(at) = cancel_at.filter(|_| c.notice.secs() == 0) {
            out.push(format!(
                "policy.notice = \"0s\": a cancel waits no time after the user's notice; users are told at the first alert and, with these stages, may be cancelled about {} later, with no notice period of their own; give notice the time a user needs to react (default 30m)",
                DurationS(at - alert_at)
            ));
        }
        let cancel_after = stage_after_s(&self.policy, Verdict::Cancel).filter(|a| *a > 0);
        if let (Some(after), Some(at)) = (cancel_after, cancel_at) {
            if at > after + c.interval.secs() {
                let why = if at == alert_at + c.notice.secs() {
                    format!(
                        "policy.notice (\"{}\") must pass after the user's notice, sent at the first alert (itself about {} into the breach: a covered window)",
                        c.notice,
                        DurationS(alert_at)
                    )
                } else {
                    // Guard 6 counts the drain's standing from its confirmation after the
                    // breach's own drain verdict, even for a drain of ours still standing from
                    // an earlier breach (review 16).
                    let on_its_way = if stage_after_s(&self.policy, Verdict::Drain).is_none() {
                        ", made on its way to the cancel as there is no drain stage,"
                    } else {
                        ""
                    };
                    format!(
                        "the drain{on_its_way} (earliest about {} into the breach) must be confirmed and stand one policy.window (\"{}\") first, even when a drain of ours still stands from an earlier breach of the same job",
                        DurationS(earliest_drain_s(&self.policy).unwrap_or(0)),
                        c.window,
                    )
                };
                out.push(format!(
                    "policy.stages: cancel after \"{}\" is not when the cancel comes: it comes at the earliest about {} into the breach ({} after the first alert), because {why}; set the stages (and notice) to the times you mean",
                    DurationS(after),
                    DurationS(at),
                    DurationS(at - alert_at)
                ));
            }
        }
        // Trial 8: without an alert stage the user's first notice comes one cycle before the
        // drain.
        if drain_reachable(&self.policy) && stage_after_s(&self.policy, Verdict::Alert).is_none() {
            out.push(format!(
                "policy.stages has no alert stage: users are first alerted and told about {} into a breach, on the way to the drain one interval later; add {{ after = \"0s\", verdict = \"alert\" }} to tell them as soon as the breach is confirmed",
                DurationS(alert_at)
            ));
        }
        let (gap, window) = (c.max_sample_gap.secs(), c.window.secs());
        if 3 * gap >= window {
            // First sample within `gap` of the window's start, last within `gap` of its end,
            // none more than `gap` apart.
            let fewest = 1 + ((window - 2 * gap).max(0) as u64).div_ceil(gap.max(1) as u64);
            out.push(format!(
                "policy.max_sample_gap = \"{}\" is a third of policy.window (\"{}\") or more: a window with as few as {} counts as whole evidence, so a collector that answers that rarely is judged as if it had watched the GPU all along; use at most a sixth of the window (the default 3m of 20m)",
                c.max_sample_gap,
                c.window,
                if fewest == 1 { "one sample".to_string() } else { format!("{fewest} samples") }
            ));
        }
        let held = e.command_timeout.secs() + 2 * e.nvidia_smi_timeout.secs();
        if held > gap {
            out.push(format!(
                "enforcer.command_timeout = \"{}\": one hung scontrol, scancel or notify command holds a cycle that long, which with nvidia-smi's two queries (nvidia_smi_timeout \"{}\" each) is longer than policy.max_sample_gap (\"{}\"), so the next sample comes too late and every job's breach starts again; use a timeout well under the gap (default 20s)",
                e.command_timeout, e.nvidia_smi_timeout, c.max_sample_gap
            ));
        }
        // Trial 18: a timeout just under the interval was taken without a word, though
        // nvidia-smi is queried twice a cycle (GPUs, then compute processes).
        let smi_held = 2 * e.nvidia_smi_timeout.secs();
        if held <= gap && smi_held >= c.interval.secs() {
            out.push(format!(
                "enforcer.nvidia_smi_timeout = \"{}\": nvidia-smi is queried twice a cycle, so a hung nvidia-smi holds a cycle {} or more, as long as policy.interval (\"{}\") or longer: cycles then start late and the metrics' last cycle time lags; keep it well under half the interval (default 10s of 60s)",
                e.nvidia_smi_timeout,
                DurationS(smi_held),
                c.interval
            ));
        }
        let drain = drain_reachable(&self.policy);
        if drain && e.max_drains_per_hour == 0 {
            out.push(
                "enforcer.max_drains_per_hour = 0: no drain is ever made (each is skipped as rate_limit), and so no cancel either (a cancel needs our drain); to only alert, remove the drain and cancel stages instead".into(),
            );
        } else if cancel && e.max_cancels_per_hour == 0 {
            out.push(
                "enforcer.max_cancels_per_hour = 0: no cancel is ever made (each is skipped as rate_limit) though a cancel stage is set; to stop at drain, remove the cancel stage instead".into(),
            );
        }
        // Trial 11: values that switch a guard off in effect were taken without a word.
        // One node holds at most a handful of GPU jobs: a budget above what it can ever
        // spend in an hour is no limit.
        for (key, n, reachable) in [
            ("enforcer.max_drains_per_hour", e.max_drains_per_hour, drain),
            ("enforcer.max_cancels_per_hour", e.max_cancels_per_hour, cancel),
        ] {
            if reachable && n > BUDGET_NO_LIMIT_ABOVE {
                out.push(format!(
                    "{key} = {n}: more than one node can spend in an hour, so the damage limit is off in effect (a broken collector that makes every job look idle meets no brake); keep it at a few (default 2 drains, 1 cancel)"
                ));
            }
        }
        if c.warmup.secs() >= WARMUP_NEVER_JUDGED_FROM_S {
            out.push(format!(
                "policy.warmup = \"{}\": a job is not judged until it has run that long, so shorter jobs are never judged at all; the default is 15m",
                c.warmup
            ));
        }
        // Operator trial 19: `warmup = "0s"` with a reachable cancel was taken without a word.
        if c.warmup.secs() < WARMUP_SHORT_BELOW_S && drain_reachable(&self.policy) {
            out.push(format!(
                "policy.warmup = \"{}\": jobs are judged from (almost) their first minute, so a job's start (loading data, compiling, waiting for its other ranks) reads as idle or hung and counts toward its drain{}; the default is 15m",
                c.warmup,
                if cancel { " and cancel" } else { "" }
            ));
        }
        if c.util_threshold_pct >= UTIL_THRESHOLD_HIGH_PCT || c.util_threshold_pct > policy::CODEC_UTIL_CAP_PCT {
            out.push(format!(
                "policy.util_threshold_pct = {}: a GPU whose utilization.gpu stays below that on every sample of a window counts as low, so GPUs doing real work at moderate load read as breaches (starved, partial, unknown alerts), and so do GPUs that only encode or decode video (their video-engine work counts up to {} %; such jobs are held at alert while their video engines work); the default is 15",
                c.util_threshold_pct,
                policy::CODEC_UTIL_CAP_PCT
            ));
        }
        out
    }
}

/// An hourly drain or cancel budget above this is no limit on one node (see
/// `Config::risky_settings`).
const BUDGET_NO_LIMIT_ABOVE: u32 = 10;
/// A `warmup` from this long on leaves most jobs never judged, seconds (12 h).
const WARMUP_NEVER_JUDGED_FROM_S: i64 = 12 * 3600;
/// A `warmup` below this, with a drain reachable, judges jobs' start-up, seconds (5 min).
const WARMUP_SHORT_BELOW_S: i64 = 300;
/// A `util_threshold_pct` from this on calls moderate real work low.
const UTIL_THRESHOLD_HIGH_PCT: f64 = 50.0;

/// The stage dwell (`after`, seconds) of `verdict`, if `policy` has that stage.
pub fn stage_after_s(policy: &Policy, verdict: Verdict) -> Option<i64> {
    policy.stages().iter().find(|s| s.verdict == verdict).map(|s| s.after_s)
}

/// When a job's first alert (and the user's notice) can come at the earliest, seconds into a
/// breach (its dwell, as the stages count it, from the breach's earliest sample): the later of
/// `window − max_sample_gap`, the least span of samples that covers the window (guard 2), and
/// the first stage at alert or above (with no alert stage the job is alerted on its way to
/// the first drain, one rung per cycle; trial 8).
pub fn earliest_alert_s(policy: &Policy) -> i64 {
    let c = policy.config();
    let covered = (c.window.secs() - c.max_sample_gap.secs()).max(0);
    let first_stage = policy
        .stages()
        .iter()
        .filter(|s| s.verdict >= Verdict::Alert)
        .map(|s| s.after_s)
        .min()
        .unwrap_or(0);
    covered.max(first_stage)
}

/// When a drain can come at the earliest, seconds into a breach (its dwell, as the stages
/// count it), or `None` without a stage at drain or above: the drain stage's `after` (a cancel
/// stage without a drain stage drains on the way, one rung per cycle), and at least one
/// `interval` after the first alert ([`earliest_alert_s`]).
pub fn earliest_drain_s(policy: &Policy) -> Option<i64> {
    let interval = policy.config().interval.secs();
    let after = stage_after_s(policy, Verdict::Drain).or_else(|| stage_after_s(policy, Verdict::Cancel))?;
    Some(after.max(earliest_alert_s(policy) + interval))
}

/// When a cancel can come at the earliest, seconds into a breach (its dwell, as the stages
/// count it), or `None` without a cancel stage: the latest of the cancel stage's `after`, the
/// earliest drain confirmed (one `interval` later) and standing one `window` (guard 6), and
/// `notice` after the first alert, when the user's notice goes out. Restarts, budgets and
/// failed notices only make it later. (Trial 7: alert 0s, drain 1m, cancel 2m was said to
/// cancel 30m into the breach; it came at 47m, the alert itself taking 17m.)
pub fn earliest_cancel_s(policy: &Policy) -> Option<i64> {
    let c = policy.config();
    let after = stage_after_s(policy, Verdict::Cancel)?;
    let drained = earliest_drain_s(policy)? + c.interval.secs() + c.window.secs();
    Some(after.max(drained).max(earliest_alert_s(policy) + c.notice.secs()))
}

/// True when some job can reach `cancel` under `policy`: a cancel stage and a signature whose
/// ceiling allows it.
pub fn cancel_reachable(policy: &Policy) -> bool {
    let staged = policy.stages().iter().any(|s| s.verdict >= Verdict::Cancel);
    let allowed = (0..policy::signature::REGISTRY.len()).any(|i| policy.ceiling(policy::SignatureId(i as u8)) >= Verdict::Cancel);
    staged && allowed
}

/// The whole file as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigFile {
    /// `[policy]`.
    pub policy: PolicyConfig,
    /// `[enforcer]`.
    pub enforcer: EnforcerConfig,
}

/// A validated config.
#[derive(Debug, Clone)]
pub struct Config {
    /// The validated policy.
    pub policy: Policy,
    /// The `[enforcer]` section, every value checked.
    pub enforcer: EnforcerConfig,
    /// `log_findings_from` as a verdict.
    pub log_findings_from: Verdict,
    /// This node's name (from config or the host name).
    pub node: String,
}

/// A rejected config: the key and the problem. Shown as ``FILE: `KEY`: PROBLEM``, or, for
/// a TOML error (empty `key`), `FILE:LINE:COLUMN: PROBLEM` with the position in `problem`;
/// then each of `also` on a line of its own, ``FILE: `KEY`: PROBLEM``.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}{}{problem}{}", if key.is_empty() { String::from(":") } else { format!(": `{key}`: ") }, also_lines(file, also))]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// Dotted key (`enforcer.mode`, `policy.window`), or empty for a TOML error (syntax, or a
    /// value of the wrong type), whose `problem` starts with `LINE:COLUMN: ` (1-based).
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// Further problems found in the same file, as (key, problem), each shown on a line of
    /// its own after the first: the enforcer section is checked whole, so one run of
    /// `check-config` names every mistake there. Empty for a TOML error. The `[policy]`
    /// section is checked first, each of its problems listed ([`Policy::check`]); the
    /// enforcer section is checked once the policy is valid.
    pub also: Vec<(String, String)>,
}

/// The further problems of a [`ConfigError`], one line each, in its own format.
fn also_lines(file: &str, also: &[(String, String)]) -> String {
    also.iter().map(|(k, p)| format!("\n{file}: `{k}`: {p}")).collect()
}

/// A TOML error as ``LINE:COLUMN: MESSAGE (in `LINE TEXT`)`` (1-based, column in characters)
/// from the error's span in `text`; the message alone when the error has no span.
fn toml_problem(text: &str, x: &toml::de::Error) -> String {
    // Long enough for serde's whole list of expected keys; URLs hidden (a webhook URL is a
    // secret, and check-config's output goes to the journal).
    let msg = hide_urls(&policy::one_line(x.message().trim(), 4000));
    let Some(span) = x.span() else { return format!(" {msg}") };
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    let shown = hide_urls(&policy::one_line(text.lines().nth(line - 1).unwrap_or("").trim(), 120));
    if shown.is_empty() {
        format!("{line}:{column}: {msg}")
    } else {
        format!("{line}:{column}: {msg} (in `{shown}`)")
    }
}

/// `s` with every URL (`scheme://…`, up to the next space or quote) replaced by
/// `<URL hidden>`.
fn hide_urls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let scheme = rest[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(i, |(j, _)| j);
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`'))
            .map_or(rest.len(), |k| i + k);
        out.push_str(&rest[..scheme]);
        out.push_str("<URL hidden>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// True when `s` can be an environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$` (POSIX
/// portable names, case allowed).
pub fn is_env_var_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphabetic() || c == b'_') && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Why `webhook_url_env` is not a variable name, without echoing a value that may be the
/// webhook URL itself (a secret): anything with `/` or `:` is only described, never shown.
fn webhook_env_problem(v: &str) -> String {
    if v.contains('/') || v.contains(':') {
        "looks like a URL, not an environment variable name; put the webhook URL in an environment variable (for example GPU_REAPER_WEBHOOK_URL in the unit's EnvironmentFile) and give that variable's name here".into()
    } else {
        format!(
            "{:?} is not an environment variable name (letters, digits and _, not starting with a digit)",
            policy::one_line(v, 64)
        )
    }
}

/// Why `p` cannot be a program to run (`None` when it can; empty is checked elsewhere):
/// it must be a bare name looked up in PATH (letters, digits, `.`, `_`, `+`, `-`) or an
/// absolute path, with no whitespace or control character in either.
fn program_problem(p: &str) -> Option<String> {
    let shown = policy::one_line(p, 80);
    if p.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
        return Some(format!(
            "{shown:?} contains whitespace: give the program alone (no shell runs it) and each argument as its own element"
        ));
    }
    if p.contains('/') {
        if !Path::new(p).is_absolute() {
            return Some(format!(
                "{shown:?} is a relative path; give a bare program name (looked up in PATH) or an absolute path"
            ));
        }
        return None;
    }
    if p.bytes()
        .any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-')))
    {
        return Some(format!(
            "{shown:?} is not a program name (letters, digits, '.', '_', '+', '-') or an absolute path"
        ));
    }
    None
}

/// Why `program` (a bare name looked up in `path`, the `PATH` value, or an absolute path; see
/// `program_problem`) cannot be started on this machine, or `None` when it can: a path that
/// does not exist or is not a regular file with an execute bit, or a bare name found in no
/// directory of `path`. Like `execvp(3)`, an empty `PATH` entry is the current directory.
pub fn program_unrunnable(program: &str, path: Option<&std::ffi::OsStr>) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| -> Result<(), String> {
        let m = std::fs::metadata(p).map_err(|e| e.to_string())?;
        if !m.is_file() {
            return Err("not a regular file".into());
        }
        if m.permissions().mode() & 0o111 == 0 {
            return Err("not executable (no execute permission)".into());
        }
        Ok(())
    };
    if program.contains('/') {
        return runnable(Path::new(program))
            .err()
            .map(|why| format!("{program:?} cannot be run: {why}"));
    }
    let path = path.unwrap_or_default();
    let found = std::env::split_paths(path).any(|dir| {
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        runnable(&dir.join(program)).is_ok()
    });
    (!found).then(|| {
        format!(
            "{program:?} is not found on PATH ({}) as an executable file",
            policy::one_line(&path.to_string_lossy(), 200)
        )
    })
}

impl Config {
    /// The configured programs that cannot be started on this machine (see
    /// [`program_unrunnable`], with `path` the `PATH` the daemon runs with): `(errors,
    /// warnings)`, one line each naming the key and what would happen. In enforce mode the
    /// program that delivers the user's notice (the notify command, or curl when the webhook
    /// is the notice channel) is an error: every notice would fail, so no cancel could ever go
    /// ahead. Every other one (and that one in observe mode) is a warning: squeue, scontrol,
    /// scancel, nvidia-smi, and curl when a webhook is set. `check-config` and `run` check
    /// this; [`Config::from_text`] does not (it reads no file system).
    pub fn program_checks(&self, path: Option<&std::ffi::OsStr>) -> (Vec<String>, Vec<String>) {
        let e = &self.enforcer;
        let notice_program = match e.notify_command.first() {
            Some(p) => Some(("enforcer.notify_command", p.as_str())),
            None if e.notice_by_webhook() => Some(("enforcer.curl", e.curl.as_str())),
            None => None,
        };
        let mut checks: Vec<(&str, &str, &str)> = vec![
            (
                "enforcer.squeue",
                e.squeue.as_str(),
                "no job would be read, so every cycle would be skipped",
            ),
            (
                "enforcer.scontrol",
                e.scontrol.as_str(),
                "the node's state could not be read, so nothing would be drained, cancelled or resumed",
            ),
            ("enforcer.scancel", e.scancel.as_str(), "no cancel could be made"),
            (
                "enforcer.nvidia_smi",
                e.nvidia_smi.as_str(),
                "no GPU would be read, so every job would stay insufficient_evidence",
            ),
        ];
        if !e.webhook_url_env.is_empty() {
            checks.push(("enforcer.curl", e.curl.as_str(), "every webhook post would fail"));
        }
        if let Some((key, p)) = notice_program.filter(|(k, _)| *k == "enforcer.notify_command") {
            checks.push((key, p, "every notice to a user would fail"));
        }
        let (mut errors, mut warnings) = (Vec::new(), Vec::new());
        for (key, program, then) in checks {
            let Some(why) = program_unrunnable(program, path) else { continue };
            if e.mode == RunMode::Enforce && notice_program == Some((key, program)) {
                // Trial 8: a drain-only policy was told no cancel could go ahead.
                // A drain waits for the user's notice too (operator trial 16).
                let so = if cancel_reachable(&self.policy) {
                    "no drain and no cancel could ever go ahead (each needs the user's notice)"
                } else if drain_reachable(&self.policy) {
                    "no user would ever be told of an alert, and no drain could go ahead (a drain needs the user's notice)"
                } else {
                    "no user would ever be told of an alert"
                };
                errors.push(format!("{key}: {why}; {then}, so {so}: install it, or give its absolute path"));
            } else {
                warnings.push(format!("{key}: {why}; {then}"));
            }
        }
        if let Some(why) = proc_root_problem(&e.proc_root) {
            warnings.push(format!(
                "enforcer.proc_root = {:?}: {why}; no process nvidia-smi lists can be tied to its Slurm job, so jobs are placed only by elimination, and never by Slurm's device index (which a job's processes must confirm first): most shared nodes stay unjudged",
                e.proc_root.display().to_string()
            ));
        }
        (errors, warnings)
    }
}

/// Why `root` cannot be the proc filesystem the daemon reads processes' cgroups from (trial
/// 10: a wrong `proc_root` left every job `ambiguous_attribution`, with a reason that pointed
/// elsewhere), or `None` when it looks like one: a directory with a process directory (a
/// decimal name) holding a `cgroup` file.
pub fn proc_root_problem(root: &std::path::Path) -> Option<String> {
    let entries = match std::fs::read_dir(root) {
        Ok(d) => d,
        Err(e) => return Some(format!("cannot be read ({e})")),
    };
    let has_process = entries.filter_map(Result::ok).any(|d| {
        d.file_name()
            .to_str()
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            && d.path().join("cgroup").is_file()
    });
    (!has_process).then(|| "holds no process directory with a cgroup file".to_string())
}

/// True when `s` can be a Slurm node name as slurm.conf's NodeName and `scontrol show node`
/// use it: a host name of letters, digits, `-`, `_` and `.`, starting with a letter or digit,
/// at most 255 characters.
pub fn is_node_name(s: &str) -> bool {
    s.len() <= 255
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The host name up to the first dot, from `/proc/sys/kernel/hostname` or `$HOSTNAME`.
pub fn short_hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    h.trim().split('.').next().unwrap_or("").to_string()
}

/// `name` up to its first dot, in lower case: the form in which two host names are compared
/// (`gpu001.cluster.example` and `GPU001` are the same host).
pub fn short_name(name: &str) -> String {
    name.trim().split('.').next().unwrap_or("").to_ascii_lowercase()
}

/// The `NodeHostName` a `scontrol show node` reading gives, when it gives one (absent,
/// empty and `(null)` are none).
pub fn node_hostname(fields: &std::collections::BTreeMap<String, String>) -> Option<&str> {
    fields
        .get("NodeHostName")
        .map(|h| h.trim())
        .filter(|h| !h.is_empty() && *h != "(null)")
}

/// True when `node_hostname` (slurm.conf's `NodeHostName` for the configured node, from
/// `scontrol show node`) and `this_host` (this machine's host name, see [`short_hostname`])
/// name different hosts, compared by [`short_name`]. False when either is empty (with nothing
/// to compare there is no evidence of a mismatch) and when `node_hostname` is `localhost`
/// (`NodeHostname=localhost` in slurm.conf, as on a single-machine cluster, names whichever
/// machine reads it).
pub fn host_mismatch(node_hostname: &str, this_host: &str) -> bool {
    let (a, b) = (short_name(node_hostname), short_name(this_host));
    !a.is_empty() && !b.is_empty() && a != "localhost" && a != b
}

impl Config {
    /// A warning for `check-config` when `enforcer.node` is written and, by [`short_name`],
    /// is not `this_host` (this machine's host name): one config pushed to every node names
    /// the same node everywhere. It is not an error, as a NodeName may legitimately differ
    /// from its host name (`NodeHostName=` in slurm.conf); the daemon checks the
    /// `NodeHostName` that `scontrol show node` gives each cycle and acts on nothing while it
    /// is another host. `None` when `node` is unset (it is then the host name) or matches, or
    /// when the host name could not be read.
    pub fn node_host_warning(&self, this_host: &str) -> Option<String> {
        let node = self.enforcer.node.as_str();
        (!node.is_empty() && host_mismatch(node, this_host)).then(|| {
            format!(
                "enforcer.node = {node:?} but this host is {:?}: unless slurm.conf gives {node} NodeHostName={}, `enforcer run` here will find that {node} is another host and take no action (no drain, cancel, resume or notice); if this file is shared by every node, leave enforcer.node unset (it defaults to the host name up to the first dot)",
                policy::one_line(this_host, 80),
                short_name(this_host)
            )
        })
    }

    /// Parses and validates config text. `file` names it in errors.
    pub fn from_text(text: &str, file: &str) -> Result<Config, ConfigError> {
        let e = |key: &str, problem: String| ConfigError {
            file: file.to_string(),
            key: key.to_string(),
            problem,
            also: Vec::new(),
        };
        let raw: ConfigFile = toml::from_str(text).map_err(|x| e("", toml_problem(text, &x)))?;
        // The key is shown once, by `ConfigError` (operator trial 16: it was written twice,
        // ``t.toml: `policy.window`: policy.window = 9d: …``).
        // Every `[policy]` problem is named, the first as the error and the rest after it
        // (operator trial 19); the enforcer section is checked once the policy is valid.
        let mut all = Policy::check(&raw.policy)
            .into_iter()
            .map(|x| e(&x.key, format!("{}: {}", x.value, x.problem)));
        if let Some(mut first) = all.next() {
            first.also = all.map(|x| (x.key, x.problem)).collect();
            return Err(first);
        }
        let policy = Policy::new(&raw.policy).map_err(|x| e(&x.key, format!("{}: {}", x.value, x.problem)))?;
        let c = raw.enforcer;
        // Every problem of the enforcer section is reported, not only the first (operator
        // trial 16: check-config had to be run once per mistake).
        let mut errs: Vec<ConfigError> = Vec::new();
        let log_findings_from = Verdict::from_name(&c.log_findings_from).unwrap_or_else(|| {
            errs.push(e(
                "enforcer.log_findings_from",
                format!("unknown verdict {:?}", c.log_findings_from),
            ));
            Verdict::Healthy
        });
        // Below 2, one alerting GPU job is "more than suspect_frac" of the node's jobs (for any
        // suspect_frac under 1), so every lone wasteful job would look like a broken collector
        // and never be drained. suspect_frac = 1 is the way to switch the rule off.
        if c.suspect_min_jobs < 2 {
            errs.push(e(
                "enforcer.suspect_min_jobs",
                format!(
                    "{} would make every node whose only GPU job alerts \"suspect\", so no lone job is ever drained; use 2 or more (default 3), or suspect_frac = 1 to switch the suspect-collector rule off",
                    c.suspect_min_jobs
                ),
            ));
        }
        if !(c.suspect_frac.is_finite() && c.suspect_frac > 0.0 && c.suspect_frac <= 1.0) {
            errs.push(e(
                "enforcer.suspect_frac",
                format!("{} must be above 0 and at most 1", c.suspect_frac),
            ));
        }
        for (k, d) in [
            ("enforcer.command_timeout", c.command_timeout),
            ("enforcer.nvidia_smi_timeout", c.nvidia_smi_timeout),
        ] {
            if d.0 <= 0 || d.0 > 600 {
                errs.push(e(k, format!("{d} must be between 1s and 10m")));
            }
        }
        if c.nvidia_smi_timeout.0 >= policy.config().interval.0 {
            errs.push(e(
                "enforcer.nvidia_smi_timeout",
                format!(
                    "{} must be shorter than policy.interval ({})",
                    c.nvidia_smi_timeout,
                    policy.config().interval
                ),
            ));
        }
        if !c.metrics_listen.is_empty() && c.metrics_listen.parse::<std::net::SocketAddr>().is_err() {
            errs.push(e(
                "enforcer.metrics_listen",
                format!("{:?} is not host:port (an IP address and a port)", c.metrics_listen),
            ));
        }
        if c.notify_command.first().is_some_and(|p| p.is_empty()) {
            errs.push(e("enforcer.notify_command", "the program (first element) is empty".into()));
        }
        for (k, p) in [
            ("enforcer.squeue", &c.squeue),
            ("enforcer.scontrol", &c.scontrol),
            ("enforcer.scancel", &c.scancel),
            ("enforcer.nvidia_smi", &c.nvidia_smi),
        ] {
            if p.is_empty() {
                errs.push(e(k, "the program must not be empty".into()));
            }
        }
        // The --Format fallback cannot read job comments, so a user's opt-out marker would go
        // unseen: enforce mode refuses it unless the marker is switched off explicitly.
        if c.mode == RunMode::Enforce && c.job_source == JobSource::Format && !raw.policy.exempt.comment_marker.is_empty() {
            errs.push(e(
                "enforcer.job_source",
                format!(
                    "\"format\" cannot read job comments, so the opt-out marker policy.exempt.comment_marker = {:?} would never be seen in enforce mode; use \"json\", or set comment_marker = \"\" to accept that",
                    raw.policy.exempt.comment_marker
                ),
            ));
        }
        // Nor job names (review 15: a name with a line break forges a row), so a name
        // exemption would hold every job at alert.
        if c.mode == RunMode::Enforce && c.job_source == JobSource::Format && !raw.policy.exempt.name_regex.is_empty() {
            errs.push(e(
                "enforcer.job_source",
                format!(
                    "\"format\" does not read job names (a name can hold a line break, which would print as a row of its own), so policy.exempt.name_regex = {:?} could never be checked and every job would stay at alert in enforce mode; use \"json\", or exempt by partition, QOS, account or user",
                    raw.policy.exempt.name_regex
                ),
            ));
        }
        if !c.webhook_url_env.is_empty() && !is_env_var_name(&c.webhook_url_env) {
            errs.push(e("enforcer.webhook_url_env", webhook_env_problem(&c.webhook_url_env)));
        }
        if !c.webhook_url_env.is_empty() && c.curl.is_empty() {
            errs.push(e(
                "enforcer.curl",
                "the program must not be empty when webhook_url_env is set".into(),
            ));
        }
        // A relative directory would follow the working directory (`/` under systemd, read-only
        // with ProtectSystem=strict), so the state file and the audit log would go astray.
        for (k, p) in [
            ("enforcer.state_dir", &c.state_dir),
            ("enforcer.proc_root", &c.proc_root),
            ("enforcer.enforce_lock_dir", &c.enforce_lock_dir),
        ] {
            if !p.is_absolute() {
                errs.push(e(k, format!("{:?} must be an absolute path", p.display().to_string())));
            }
        }
        // A program is a bare name looked up in PATH or an absolute path; `bin/squeue` or
        // `./squeue` would depend on the working directory. No shell ever runs it, so
        // whitespace means a command line pasted as one element.
        let notify = c.notify_command.first().map(String::as_str).unwrap_or("");
        for (k, p) in [
            ("enforcer.squeue", c.squeue.as_str()),
            ("enforcer.scontrol", c.scontrol.as_str()),
            ("enforcer.scancel", c.scancel.as_str()),
            ("enforcer.nvidia_smi", c.nvidia_smi.as_str()),
            ("enforcer.curl", c.curl.as_str()),
            ("enforcer.notify_command", notify),
        ] {
            if let Some(problem) = program_problem(p) {
                errs.push(e(k, problem));
            }
        }
        // Saying a webhook reaches users when there is no webhook is a mistake, whatever the
        // mode: it would otherwise surface as "no channel" blaming notify_command.
        if c.webhook_reaches_users && c.webhook_url_env.is_empty() {
            errs.push(e(
                "enforcer.webhook_reaches_users",
                "true, but there is no webhook: enforcer.webhook_url_env is empty; name the environment variable that holds the webhook URL, or remove webhook_reaches_users".into(),
            ));
        }
        // Guard 6: a cancel needs `notice` since the user was told. AdminComment (set at
        // cancel) and the audit log tell nobody, and a webhook may reach only the admins, so
        // enforce mode with a cancel reachable needs a channel that reaches the job's user; a
        // drain (which ends no job) needs someone told, the user or the admins.
        if c.mode == RunMode::Enforce && !c.has_any_channel() && drain_reachable(&policy) {
            errs.push(e(
                "enforcer.notify_command",
                "enforce mode with a drain or cancel stage needs a channel that tells someone: set enforcer.notify_command (a command that messages the job's user), or enforcer.webhook_url_env, which alone serves a drain stage and, for a cancel stage, counts as the user's notice only with webhook_reaches_users = true (both are empty; the AdminComment written at cancel is not a notice)".into(),
            ));
        } else if c.mode == RunMode::Enforce && !c.has_user_channel() && cancel_reachable(&policy) {
            // Only when some channel exists (the webhook): with none at all the problem above
            // is the one, and this one would name a webhook that is not there (review 31).
            errs.push(e(
                "enforcer.webhook_reaches_users",
                "enforce mode with a cancel stage needs a notice that reaches the job's user, and the only channel is the webhook, which counts as one only when you say so: set enforcer.notify_command (a command that messages the user), or, if the webhook's channel is one your users read, webhook_reaches_users = true".into(),
            ));
        }
        let node = if c.node.is_empty() { short_hostname() } else { c.node.clone() };
        if node.is_empty() {
            errs.push(e("enforcer.node", "empty, and the host name could not be read".into()));
        } else if !is_node_name(&node) {
            let from = if c.node.is_empty() { " (from the host name)" } else { "" };
            errs.push(e(
                "enforcer.node",
                format!(
                    "{:?}{from} is not a Slurm node name (letters, digits, '-', '_' and '.', starting with a letter or digit, at most 255 characters)",
                    policy::one_line(&node, 80)
                ),
            ));
        }
        if !errs.is_empty() {
            let mut first = errs.remove(0);
            first.also = errs.into_iter().map(|x| (x.key, x.problem)).collect();
            return Err(first);
        }
        Ok(Config {
            policy,
            enforcer: c,
            log_findings_from,
            node,
        })
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        // No key: the file itself could not be read (trial 14's helper: the error named a
        // key `file` that no config has).
        let text = std::fs::read_to_string(path).map_err(|x| ConfigError {
            file: path.display().to_string(),
            key: String::new(),
            problem: format!(" cannot read the config file: {x}"),
            also: Vec::new(),
        })?;
        Config::from_text(&text, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Config::from_text(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn host_names_compare_by_short_name_and_a_written_node_of_another_host_warns() {
        assert_eq!(short_name(" GPU001.cluster.example "), "gpu001");
        assert!(!host_mismatch("gpu001.cluster.example", "GPU001"));
        assert!(!host_mismatch("gpu001", "gpu001.other.example"));
        assert!(host_mismatch("gpu001.cluster.example", "gpu002"));
        assert!(!host_mismatch("", "gpu002") && !host_mismatch("gpu001", ""), "nothing to compare");
        assert!(!host_mismatch("localhost", "vm") && !host_mismatch("localhost.localdomain", "gpu002"));
        let fields = |h: &str| [("NodeHostName".to_string(), h.to_string())].into_iter().collect();
        assert_eq!(node_hostname(&fields("gpu001.x")), Some("gpu001.x"));
        assert_eq!(node_hostname(&fields("(null)")), None);
        assert_eq!(node_hostname(&fields(" ")), None);
        assert_eq!(node_hostname(&Default::default()), None);
        let c = Config::from_text("[enforcer]\nnode = \"gpu001\"\n", "t").unwrap();
        let w = c.node_host_warning("gpu002").unwrap();
        assert!(
            w.contains("enforcer.node = \"gpu001\"") && w.contains("\"gpu002\"") && w.contains("unset"),
            "{w}"
        );
        assert_eq!(c.node_host_warning("GPU001"), None);
        assert_eq!(c.node_host_warning(""), None, "host name unreadable: nothing to say");
        // Unset, the node is the host name: nothing to compare.
        let c = Config::from_text("[enforcer]\n", "t").unwrap();
        assert_eq!(c.node_host_warning("gpu002"), None);
    }

    #[test]
    fn defaults_are_observe_and_loopback() {
        let c = Config::from_text("[enforcer]\nnode = \"gpu001\"\n", "t").unwrap();
        assert_eq!(c.enforcer.mode, RunMode::Observe);
        assert!(c.enforcer.metrics_listen.starts_with("127.0.0.1:"));
        assert!(!c.enforcer.metrics_listen.ends_with(":9835") && !c.enforcer.metrics_listen.ends_with(":9400"));
        let c = Config::from_text(
            "[enforcer]\nnode = \"gpu001\"\nmode = \"enforce\"\nnotify_command = [\"notify\"]\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.enforcer.mode, RunMode::Enforce);
    }

    #[test]
    fn a_toml_error_hides_urls_and_lists_every_expected_key() {
        let e = Config::from_text(
            "[enforcer]\nwebhook_url = \"https://hooks.slack.com/services/T0/B0/secret\"\n",
            "w.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains("hooks.slack.com") && !e.contains("secret"), "{e}");
        assert!(e.contains("<URL hidden>"), "{e}");
        // The whole list of keys, the last ones included.
        assert!(e.contains("webhook_url_env") && e.contains("log_findings_from"), "{e}");
        let e = Config::from_text("[policy]\nstage = []\n", "p.toml").unwrap_err().to_string();
        assert!(e.contains("`stages`") && e.contains("`exempt`"), "{e}");
        assert_eq!(hide_urls("a http://x/y b 'ftp://z' c"), "a <URL hidden> b '<URL hidden>' c");
        assert_eq!(hide_urls("no url here: a:b"), "no url here: a:b");
    }

    #[test]
    fn a_toml_error_reads_file_line_column_and_never_names_a_key_toml() {
        let m = err("[enforcer]\nnode = \"n\"\nmode = enforce\n");
        assert!(m.starts_with("t.toml:3:8: ") && m.ends_with("(in `mode = enforce`)"), "{m}");
        assert!(!m.contains("`toml`") && !m.contains("TOML parse error") && !m.contains('\n'), "{m}");
        // A wrong type is a TOML error too, at the value's position.
        let m = err("[enforcer]\nnode = \"n\"\nsuspect_min_jobs = \"three\"\n");
        assert!(m.starts_with("t.toml:3:20: ") && m.contains("string"), "{m}");
        // Columns count characters, not bytes.
        let m = err("[enforcer]\nnode = \"ü\" x\n");
        assert!(m.starts_with("t.toml:2:"), "{m}");
        assert_eq!(m.split(':').nth(2), Some("12"), "{m}");
    }

    /// Review 33: video-engine work counts up to `policy::CODEC_UTIL_CAP_PCT`; a threshold
    /// above it is warned of, one at it is not.
    #[test]
    fn a_util_threshold_above_the_codec_cap_is_warned_of() {
        let warns = |t: f64| {
            let text = format!("[policy]\nutil_threshold_pct = {t}\nstarved_mean_util_pct = 10\n[enforcer]\nnode = \"gpu001\"\n");
            Config::from_text(&text, "t.toml").unwrap().warnings()
        };
        assert!(warns(60.0).iter().any(|w| w.contains("video-engine work")), "{:?}", warns(60.0));
        assert!(!warns(policy::CODEC_UTIL_CAP_PCT).iter().any(|w| w.contains("video-engine work")));
    }

    /// Operator trial 19 (carried from 16): the `[policy]` section's first mistake stopped the
    /// check. Each is named, on a line of its own, the first as the error's key.
    #[test]
    fn every_problem_of_the_policy_section_is_named_at_once() {
        let text = "[policy]\nwindow = \"20m\"\nutil_threshold_pct = 0\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drian\" }]\nceilings = { hungg = \"alert\" }\n[enforcer]\nnode = \"gpu001\"\n";
        let x = Config::from_text(text, "t.toml").unwrap_err();
        assert_eq!(x.key, "policy.util_threshold_pct", "{x}");
        let keys: Vec<&str> = x.also.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["policy.stages[1].verdict", "policy.ceilings.hungg"], "{x}");
        let m = x.to_string();
        assert_eq!(m.lines().count(), 3, "{m}");
        assert!(
            m.lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("t.toml: `policy.stages[1].verdict`: \"drian\": ")),
            "{m}"
        );
    }

    /// Operator trial 16 (ROUGH): check-config named only the first mistake, so a config with
    /// five took five runs. Every problem of the enforcer section is named, each once, on a
    /// line of its own, in the order of the checks.
    #[test]
    fn every_problem_of_the_enforcer_section_is_named_at_once() {
        let text = "[enforcer]\nnode = \"gpu001\"\nsuspect_min_jobs = 1\nsuspect_frac = 2.0\nsqueue = \"\"\nstate_dir = \"rel/dir\"\nlog_findings_from = \"bogus\"\n";
        let x = Config::from_text(text, "t.toml").unwrap_err();
        assert_eq!(x.key, "enforcer.log_findings_from");
        let keys: Vec<&str> = x.also.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "enforcer.suspect_min_jobs",
                "enforcer.suspect_frac",
                "enforcer.squeue",
                "enforcer.state_dir"
            ]
        );
        let m = x.to_string();
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines.len(), 5, "{m}");
        assert!(lines.iter().all(|l| l.starts_with("t.toml: `enforcer.")), "{m}");
        assert!(lines[4].contains("\"rel/dir\" must be an absolute path"), "{m}");
        // One problem: one line, as before.
        let m = err("[enforcer]\nnode = \"gpu001\"\nsuspect_frac = 0.0\n");
        assert_eq!(m.lines().count(), 1, "{m}");
        // A bad node name is one problem, not two.
        let x = Config::from_text("[enforcer]\nnode = \"-x\"\n", "t.toml").unwrap_err();
        assert!(x.key == "enforcer.node" && x.also.is_empty(), "{x}");
    }

    /// Operator trial 18 (ROUGH): exemptions that exempt every job, or none, were taken
    /// silently. Each is a warning naming the key; a sane exemption warns of nothing.
    #[test]
    fn exemptions_that_exempt_everything_or_nothing_warn() {
        let warn = |exempt: &str| {
            Config::from_text(&format!("[policy.exempt]\n{exempt}\n[enforcer]\nnode = \"n\"\n"), "t")
                .unwrap()
                .warnings()
        };
        let fine = warn("users = [\"svc-inference\"]\nname_regex = \"^jupyter\"\nqos = [\"serving\"]");
        assert!(!fine.iter().any(|w| w.contains("policy.exempt")), "{fine:?}");
        for (exempt, says) in [
            ("name_regex = \".*\"", "matches every job name"),
            ("name_regex = \"x?\"", "matches every job name"),
            ("users = [\"*\"]", "policy.exempt.users[0] = \"*\""),
            ("partitions = [\"gpu\", \"\"]", "policy.exempt.partitions[1] = \"\" is blank"),
            ("comment_marker = \"\"", "users cannot opt a job out"),
            ("comment_marker = \" \"", "is found in many comments"),
        ] {
            let w = warn(exempt);
            assert!(w.iter().any(|w| w.contains(says)), "{exempt}: {w:?}");
        }
    }

    #[test]
    fn suspect_min_jobs_below_2_is_refused_naming_the_key() {
        for n in [0, 1] {
            let m = err(&format!("[enforcer]\nnode = \"n\"\nsuspect_min_jobs = {n}\n"));
            assert!(m.contains("`enforcer.suspect_min_jobs`") && m.contains("suspect_frac = 1"), "{m}");
        }
        let c = Config::from_text("[enforcer]\nnode = \"n\"\nsuspect_min_jobs = 2\n", "t").unwrap();
        assert_eq!(c.enforcer.suspect_min_jobs, 2);
    }

    #[test]
    fn an_unset_webhook_variable_warns_and_refuses_enforce_when_it_is_the_only_channel() {
        let drain = "[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }]\n";
        let cfg = |mode: &str, notify: &str| {
            Config::from_text(
                &format!("{drain}[enforcer]\nnode = \"n\"\nmode = \"{mode}\"\nwebhook_url_env = \"NOPE_NOT_SET\"\n{notify}"),
                "t",
            )
            .unwrap()
        };
        let unset = |_: &str| None;
        let blank = |_: &str| Some(" ".to_string());
        let set = |k: &str| (k == "NOPE_NOT_SET").then(|| "https://hooks.example/x".to_string());
        let only = cfg("enforce", "");
        for env in [&unset as &dyn Fn(&str) -> Option<String>, &blank] {
            let why = only.notice_channel_problem(env).unwrap_err();
            assert!(why.contains("NOPE_NOT_SET") && why.contains("only notice channel"), "{why}");
        }
        assert_eq!(only.notice_channel_problem(&set), Ok(None));
        let both = cfg("enforce", "notify_command = [\"notify\"]\n");
        let w = both.notice_channel_problem(&unset).unwrap().unwrap();
        assert!(w.contains("NOPE_NOT_SET") && w.contains("notify_command only"), "{w}");
        let observe = cfg("observe", "");
        let w = observe.notice_channel_problem(&unset).unwrap().unwrap();
        assert!(w.contains("NOPE_NOT_SET") && w.contains("alerts to the webhook are lost"), "{w}");
        // No webhook configured: nothing to say here (the no-channel case is a config error).
        let none = Config::from_text("[enforcer]\nnode = \"n\"\n", "t").unwrap();
        assert_eq!(none.notice_channel_problem(&unset), Ok(None));
    }

    /// Operator trial 17: `window = "20M"` was told it "needs a unit after each number".
    #[test]
    fn an_upper_case_duration_unit_is_named_where_it_was_written() {
        let e = err("[policy]\nwindow = \"20M\"\n");
        assert_eq!(
            e,
            "t.toml:2:10: duration \"20M\": unit \"M\" is not one of s, m, h, d (units are lower-case) (in `window = \"20M\"`)"
        );
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err("[enforcer]\nmoed = \"enforce\"").contains("moed"));
        assert!(err("[enforcer]\nmode = \"enforcing\"").contains("mode"));
        assert!(err("[policy]\nwindow = \"5m\"\ninterval = \"10m\"\nmax_sample_gap = \"2m\"").contains("policy.interval"));
        assert!(err("[policy]\nexempt = { name_regex = \"(\" }").contains("policy.exempt.name_regex"));
        assert!(err("[policy]\nstages = [{ after = \"0s\", verdict = \"nuke\" }]").contains("policy.stages[0].verdict"));
        assert!(err("[enforcer]\nnode = \"n\"\nlog_findings_from = \"loud\"").contains("enforcer.log_findings_from"));
        assert!(err("[enforcer]\nnode = \"n\"\nmetrics_listen = \"localhost\"").contains("enforcer.metrics_listen"));
        assert!(err("[enforcer]\nnode = \"n\"\nsuspect_frac = 2.0").contains("enforcer.suspect_frac"));
        assert!(err("[enforcer]\nnode = \"n\"\nnvidia_smi_timeout = \"2m\"").contains("enforcer.nvidia_smi_timeout"));
        assert!(err("[polcy]\n").contains("polcy"));
        let fmt = "[enforcer]\nnode = \"n\"\nmode = \"enforce\"\njob_source = \"format\"\nnotify_command = [\"notify\"]\n";
        assert!(err(fmt).contains("enforcer.job_source"), "enforce would miss opt-out markers");
        assert!(Config::from_text(&format!("[policy.exempt]\ncomment_marker = \"\"\n{fmt}"), "t").is_ok());
        // Review 15: nor names.
        let e = err(&format!("[policy.exempt]\ncomment_marker = \"\"\nname_regex = \"^jupyter\"\n{fmt}"));
        assert!(
            e.contains("enforcer.job_source") && e.contains("name_regex") && e.contains("^jupyter"),
            "{e}"
        );
        assert!(Config::from_text(&fmt.replace("\"enforce\"", "\"observe\""), "t").is_ok());
    }

    /// Trial 10: a proc_root that is not a proc filesystem is named, with what it costs.
    #[test]
    fn a_proc_root_without_processes_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        assert!(proc_root_problem(&dir.path().join("nope")).is_some_and(|w| w.contains("cannot be read")));
        assert!(proc_root_problem(dir.path()).is_some_and(|w| w.contains("no process directory")));
        std::fs::create_dir_all(dir.path().join("4242")).unwrap();
        std::fs::write(dir.path().join("4242/cgroup"), "0::/\n").unwrap();
        assert_eq!(proc_root_problem(dir.path()), None);
        assert_eq!(proc_root_problem(std::path::Path::new("/proc")), None, "the real /proc");
        let cfg = Config::from_text(
            &format!("[enforcer]\nnode = \"n\"\nproc_root = \"{}/nope\"\n", dir.path().display()),
            "t",
        )
        .unwrap();
        let (_, warnings) = cfg.program_checks(None);
        assert!(
            warnings.iter().any(|w| w.contains("enforcer.proc_root") && w.contains("nope")),
            "{warnings:?}"
        );
    }

    #[test]
    fn webhook_url_env_must_be_a_variable_name_and_a_pasted_url_is_never_echoed() {
        let with = |v: &str| Config::from_text(&format!("[enforcer]\nnode = \"n\"\nwebhook_url_env = {v:?}\n"), "t");
        let url = "https://hooks.slack.com/services/T000/B000/XXXX";
        let m = with(url).unwrap_err().to_string();
        assert!(m.contains("enforcer.webhook_url_env") && m.contains("looks like a URL"), "{m}");
        assert!(!m.contains("hooks.slack.com") && !m.contains("XXXX") && !m.contains("https"), "{m}");
        for bad in ["1ABC", "MY-URL", "MY URL", "$GPU_REAPER_WEBHOOK", "hooks.slack.com", "a:b"] {
            let m = with(bad).unwrap_err().to_string();
            assert!(m.contains("enforcer.webhook_url_env"), "{bad}: {m}");
        }
        for good in ["", "GPU_REAPER_WEBHOOK_URL", "_x", "slack_url2"] {
            assert!(with(good).is_ok(), "{good}");
        }
        assert!(is_env_var_name("A_1") && !is_env_var_name("") && !is_env_var_name("9A") && !is_env_var_name("A-B"));
    }

    #[test]
    fn an_empty_or_relative_directory_or_program_path_is_rejected() {
        let with = |kv: &str| Config::from_text(&format!("[enforcer]\nnode = \"n\"\n{kv}\n"), "t");
        for (kv, key) in [
            ("state_dir = \"\"", "enforcer.state_dir"),
            ("state_dir = \"state\"", "enforcer.state_dir"),
            ("state_dir = \"./var/lib/gpu-reaper\"", "enforcer.state_dir"),
            ("proc_root = \"\"", "enforcer.proc_root"),
            ("proc_root = \"proc\"", "enforcer.proc_root"),
            ("enforce_lock_dir = \"run/lock\"", "enforcer.enforce_lock_dir"),
            ("squeue = \"./squeue\"", "enforcer.squeue"),
            ("scancel = \"bin/scancel\"", "enforcer.scancel"),
            ("curl = \"\"\nwebhook_url_env = \"HOOK\"", "enforcer.curl"),
            ("notify_command = [\"tools/notify\", \"-x\"]", "enforcer.notify_command"),
        ] {
            let m = with(kv).unwrap_err().to_string();
            assert!(m.contains(key), "{kv}: {m}");
        }
        for kv in [
            "state_dir = \"/var/lib/gpu-reaper\"",
            "proc_root = \"/proc\"",
            "squeue = \"squeue\"",
            "scancel = \"/opt/slurm/bin/scancel\"",
            "notify_command = [\"/usr/local/bin/notify\"]",
        ] {
            assert!(with(kv).is_ok(), "{kv}");
        }
    }

    #[test]
    fn enforce_with_a_reachable_drain_or_cancel_needs_a_channel_to_the_user() {
        let cancel = "[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"30m\", verdict = \"drain\" }, { after = \"60m\", verdict = \"cancel\" }]\nceilings = { idle = \"cancel\" }\n";
        let base = format!("{cancel}[enforcer]\nnode = \"n\"\nmode = \"enforce\"\nnotify_command = []\n");
        let m = err(&base);
        assert!(
            m.contains("enforcer.notify_command") && m.contains("enforcer.webhook_url_env") && m.contains("not a notice"),
            "{m}"
        );
        // The default stages drain at 60m: also refused.
        assert!(err("[enforcer]\nnode = \"n\"\nmode = \"enforce\"\n").contains("enforcer.notify_command"));
        // A notify command is enough; a webhook only when it reaches users (a cancel is
        // reachable here).
        let hook = format!("{base}webhook_url_env = \"GPU_REAPER_WEBHOOK_URL\"\n");
        assert!(err(&hook).contains("enforcer.webhook_reaches_users"));
        assert!(Config::from_text(&format!("{hook}webhook_reaches_users = true\n"), "t").is_ok());
        assert!(Config::from_text(
            &base.replace("notify_command = []", "notify_command = [\"/usr/local/bin/notify\"]"),
            "t"
        )
        .is_ok());
        // Observe mode, and enforce mode that can only alert, tell nobody but act on nothing.
        assert!(Config::from_text(&base.replace("\"enforce\"", "\"observe\""), "t").is_ok());
        let alert_only = "[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }]\n[enforcer]\nnode = \"n\"\nmode = \"enforce\"\n";
        assert!(Config::from_text(alert_only, "t").is_ok());
        // Drain staged but every ceiling below drain: nothing is reachable.
        let capped = "[policy]\nceilings = { spin = \"alert\", hung = \"alert\", idle = \"alert\", starved = \"alert\", partial = \"alert\", unknown = \"alert\" }\n[enforcer]\nnode = \"n\"\nmode = \"enforce\"\n";
        assert!(Config::from_text(capped, "t").is_ok(), "{:?}", Config::from_text(capped, "t"));
    }

    #[test]
    fn a_webhook_counts_as_the_users_notice_only_when_the_operator_says_it_reaches_users() {
        let stages = |cancel: bool| {
            format!(
                "[policy]\nstages = [{{ after = \"0s\", verdict = \"alert\" }}, {{ after = \"30m\", verdict = \"drain\" }}{}]\n",
                if cancel { ", { after = \"2h\", verdict = \"cancel\" }" } else { "" }
            )
        };
        let cfg = |cancel: bool, mode: &str, extra: &str| {
            format!(
                "{}[enforcer]\nnode = \"n\"\nmode = \"{mode}\"\nwebhook_url_env = \"GPU_REAPER_WEBHOOK_URL\"\n{extra}",
                stages(cancel)
            )
        };
        // Enforce, a reachable cancel (idle and hung default to cancel), only a webhook: refused.
        let m = err(&cfg(true, "enforce", ""));
        assert!(
            m.contains("`enforcer.webhook_reaches_users`") && m.contains("webhook_reaches_users = true") && m.contains("notify_command"),
            "{m}"
        );
        let c = Config::from_text(&cfg(true, "enforce", "webhook_reaches_users = true\n"), "t").unwrap();
        assert!(c.enforcer.has_user_channel());
        // A notify command reaches the user whatever the webhook is.
        assert!(Config::from_text(&cfg(true, "enforce", "notify_command = [\"notify\"]\n"), "t").is_ok());
        // Drains need no notice: an ops webhook is enough there, as before.
        let c = Config::from_text(&cfg(false, "enforce", ""), "t").unwrap();
        assert!(!c.enforcer.has_user_channel());
        // Observe mode tells nobody and changes nothing.
        let c = Config::from_text(&cfg(true, "observe", ""), "t").unwrap();
        assert!(!c.enforcer.has_user_channel());
        // Every ceiling below cancel: no cancel is reachable.
        let capped = "ceilings = { idle = \"drain\", hung = \"drain\" }\n";
        let text = cfg(true, "enforce", "").replacen("[enforcer]", &format!("{capped}[enforcer]"), 1);
        assert!(Config::from_text(&text, "t").is_ok(), "{:?}", Config::from_text(&text, "t"));
    }

    /// Trial 5 #5: check-config printed `ceilings = {}`, hiding that idle and hung reach
    /// cancel by default.
    #[test]
    fn the_effective_config_shows_every_signatures_ceiling() {
        let c = Config::from_text("[policy]\nceilings = { spin = \"drain\" }\n[enforcer]\nnode = \"n\"\n", "t").unwrap();
        let shown = c.effective_file();
        let want: std::collections::BTreeMap<String, String> = [
            ("hung", "cancel"),
            ("idle", "cancel"),
            ("partial", "alert"),
            ("spin", "drain"),
            ("starved", "alert"),
            ("unknown", "alert"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(shown.policy.ceilings, want);
        assert_eq!(shown.policy.ceilings.len(), policy::signature::REGISTRY.len());
        let text = toml::to_string(&shown).unwrap();
        assert!(text.contains("[policy.ceilings]\nhung = \"cancel\"\nidle = \"cancel\""), "{text}");
        // What it prints reads back as the same config.
        let again = Config::from_text(&text, "effective").unwrap();
        assert_eq!(again.policy.config(), &shown.policy);
        assert_eq!(again.enforcer, c.enforcer);
    }

    /// Trial 5 #4: `max_sample_gap` equal to `interval` was accepted silently; one late sample
    /// then breaks the evidence, and the job flips between alert and insufficient_evidence.
    #[test]
    fn a_sample_gap_under_twice_the_interval_warns() {
        let with =
            |gap: &str| Config::from_text(&format!("[policy]\nmax_sample_gap = \"{gap}\"\n[enforcer]\nnode = \"n\"\n"), "t").unwrap();
        for (gap, shown, late) in [("60s", "1m", "even a second late"), ("119s", "1m59s", "more than 59s late")] {
            let w = with(gap).warnings();
            assert_eq!(w.len(), 1, "{gap}: {w:?}");
            assert!(
                w[0].contains(&format!("policy.max_sample_gap = \"{shown}\""))
                    && w[0].contains("twice policy.interval")
                    && w[0].contains(late)
                    && w[0].contains("at least 2m"),
                "{}",
                w[0]
            );
        }
        for gap in ["120s", "3m"] {
            assert!(with(gap).warnings().is_empty(), "{gap}");
        }
        // Below the interval it is an error already (every sample would look late).
        assert!(err("[policy]\nmax_sample_gap = \"59s\"\n").contains("policy.max_sample_gap"));
    }

    /// Trial 5 #5: a cancel stage at "0s" was accepted silently; it does not cancel at once.
    #[test]
    fn a_cancel_stage_at_0s_warns_saying_when_the_cancel_really_comes() {
        let stages = "stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"0s\", verdict = \"cancel\" }]";
        let c = Config::from_text(
            &format!("[policy]\n{stages}\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n"),
            "t",
        )
        .unwrap();
        let w = c.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        // Defaults: window 20m, notice 30m, interval 60s: max(2 × 60s + 20m, 30m) = 30m.
        assert!(
            w[0].contains("policy.stages") && w[0].contains("cancel after \"0s\"") && w[0].contains("about 30m after the first alert"),
            "{}",
            w[0]
        );
        let c = Config::from_text(
            &format!("[policy]\nnotice = \"5m\"\n{stages}\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n"),
            "t",
        )
        .unwrap();
        assert!(c.warnings()[0].contains("about 22m after the first alert"), "{:?}", c.warnings());
        // No signature may reach cancel: the stage is never used.
        let capped = "ceilings = { idle = \"drain\", hung = \"drain\" }";
        let c = Config::from_text(
            &format!("[policy]\n{stages}\n{capped}\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n"),
            "t",
        )
        .unwrap();
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        let c = Config::from_text("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"2h\", verdict = \"cancel\" }]\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n", "t").unwrap();
        // No drain stage: the job drains at 2h on its way to cancel, and the cancel waits for
        // that drain to stand one window (trial 6 #7 warns about it).
        let w = c.warnings();
        assert!(
            w.len() == 1
                && w[0].contains("cancel after \"2h\" is not when the cancel comes")
                && w[0].contains("2h21m")
                && w[0].contains("made on its way to the cancel as there is no drain stage"),
            "{w:?}"
        );
        let c = Config::from_text("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n", "t").unwrap();
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    }

    /// Observe mode is the week before enforce: a config that enforce mode would refuse for
    /// want of a channel to the user says so now.
    #[test]
    fn observe_mode_warns_when_enforce_would_be_refused_for_want_of_a_user_channel() {
        let cancel = "[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]\n";
        let with = |extra: &str| {
            Config::from_text(&format!("{cancel}[enforcer]\nnode = \"n\"\n{extra}"), "t")
                .unwrap()
                .warnings()
        };
        let w = with("webhook_url_env = \"HOOK\"\n");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("mode = \"enforce\"") && w[0].contains("webhook_reaches_users"),
            "{}",
            w[0]
        );
        assert_eq!(with("").len(), 1);
        assert!(with("notify_command = [\"notify\"]\n").is_empty());
        // Only the warning that observe mode posts nothing to a webhook that reaches users.
        let w = with("webhook_url_env = \"HOOK\"\nwebhook_reaches_users = true\n");
        assert!(w.len() == 1 && w[0].contains("contacts no user"), "{w:?}");
    }

    /// Trial 6 #6: `notify_command = ["/nonexistent/mailer"]` was called valid; every notice
    /// then failed and every cancel was held forever.
    #[test]
    fn programs_that_cannot_be_run_are_an_error_for_the_notice_in_enforce_mode_and_a_warning_otherwise() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok-prog");
        std::fs::write(&ok, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&ok, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("plain-file");
        std::fs::write(&plain, "").unwrap();
        let path = dir.path().as_os_str();
        assert_eq!(program_unrunnable(ok.to_str().unwrap(), None), None);
        assert_eq!(program_unrunnable("ok-prog", Some(path)), None);
        let m = program_unrunnable(plain.to_str().unwrap(), Some(path)).unwrap();
        assert!(m.contains("not executable"), "{m}");
        let m = program_unrunnable("/nonexistent/mailer", Some(path)).unwrap();
        assert!(m.contains("/nonexistent/mailer") && m.contains("No such file"), "{m}");
        let m = program_unrunnable("mailer", Some(path)).unwrap();
        assert!(
            m.contains("not found on PATH") && m.contains(&dir.path().display().to_string()),
            "{m}"
        );
        assert!(
            program_unrunnable("plain-file", Some(path)).is_some(),
            "not executable, so not found"
        );
        assert!(program_unrunnable("ok-prog", Some(dir.path().join("sub").as_os_str())).is_some());

        let progs = format!(
            "squeue = \"{0}\"\nscontrol = \"{0}\"\nscancel = \"{0}\"\nnvidia_smi = \"{0}\"\n",
            ok.display()
        );
        let cfg = |mode: &str, extra: &str| {
            Config::from_text(
                &format!("[policy]\nstages = [{{ after = \"0s\", verdict = \"alert\" }}, {{ after = \"1h\", verdict = \"drain\" }}, {{ after = \"2h\", verdict = \"cancel\" }}]\n[enforcer]\nnode = \"n\"\nmode = \"{mode}\"\n{progs}{extra}"),
                "t",
            )
            .unwrap()
        };
        let missing = "notify_command = [\"/nonexistent/mailer\"]\n";
        let (errors, warnings) = cfg("enforce", missing).program_checks(Some(path));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("enforcer.notify_command") && errors[0].contains("/nonexistent/mailer") && errors[0].contains("no cancel"),
            "{}",
            errors[0]
        );
        let (errors, warnings) = cfg("observe", missing).program_checks(Some(path));
        assert!(
            errors.is_empty() && warnings.len() == 1 && warnings[0].contains("enforcer.notify_command"),
            "{warnings:?}"
        );
        let good = format!("notify_command = [\"{}\", \"--x\"]\n", ok.display());
        assert_eq!(cfg("enforce", &good).program_checks(Some(path)), (vec![], vec![]));
        // The webhook as the notice channel: its curl is the notice's program.
        let hook = "webhook_url_env = \"HOOK\"\nwebhook_reaches_users = true\ncurl = \"no-such-curl\"\n";
        let (errors, _) = cfg("enforce", hook).program_checks(Some(path));
        assert!(errors.len() == 1 && errors[0].contains("enforcer.curl"), "{errors:?}");
        // Other programs: warnings naming the key and what would happen, in either mode.
        let mut c = cfg("enforce", &good);
        c.enforcer.nvidia_smi = "nvidia-smi-missing".into();
        let (errors, warnings) = c.program_checks(Some(path));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(
            warnings.len() == 1
                && warnings[0].contains("enforcer.nvidia_smi")
                && warnings[0].contains("\"nvidia-smi-missing\"")
                && warnings[0].contains("insufficient_evidence"),
            "{warnings:?}"
        );
    }

    /// Trial 6 #4: observe mode posted every alert, hypothetical drains and cancels naming
    /// the user included, to a webhook said to reach users; README says it contacts no user.
    #[test]
    fn observe_mode_posts_nothing_to_a_webhook_that_reaches_users_and_says_so() {
        let with = |mode: &str, reaches: bool| {
            Config::from_text(
                &format!("[enforcer]\nnode = \"n\"\nmode = \"{mode}\"\nwebhook_url_env = \"HOOK\"\nwebhook_reaches_users = {reaches}\n"),
                "t",
            )
            .unwrap()
        };
        let c = with("observe", true);
        assert!(!c.enforcer.observe_posts_to_webhook());
        let w: Vec<String> = c
            .warnings()
            .into_iter()
            .filter(|w| w.contains("webhook_reaches_users = true"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", c.warnings());
        assert!(
            w[0].contains("observe mode contacts no user") && w[0].contains("nothing is posted"),
            "{}",
            w[0]
        );
        // An admins' webhook gets observe mode's alerts, with no warning.
        let c = with("observe", false);
        assert!(c.enforcer.observe_posts_to_webhook());
        assert!(c.warnings().iter().all(|w| !w.contains("contacts no user")), "{:?}", c.warnings());
        // Enforce mode is not observe mode: no such warning.
        let c = Config::from_text(
            "[enforcer]\nnode = \"n\"\nmode = \"enforce\"\nwebhook_url_env = \"HOOK\"\nwebhook_reaches_users = true\n",
            "t",
        )
        .unwrap();
        assert!(c.warnings().iter().all(|w| !w.contains("contacts no user")));
    }

    /// Trial 6 #7: check-config accepted each of these silently.
    #[test]
    fn risky_settings_warn_naming_the_key_and_what_will_happen() {
        let warn = |text: &str| {
            Config::from_text(&format!("{text}\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\n"), "t")
                .unwrap()
                .warnings()
        };
        let stages = "stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]";
        assert!(warn(&format!("[policy]\n{stages}")).is_empty());
        // c02: ceilings that let working or unexplained jobs be cancelled.
        let w = warn(&format!(
            "[policy]\n{stages}\nceilings = {{ starved = \"cancel\", partial = \"cancel\", unknown = \"cancel\", spin = \"cancel\" }}"
        ));
        for sig in ["starved", "partial", "unknown"] {
            let key = format!("policy.ceilings.{sig} = \"cancel\"");
            assert_eq!(
                w.iter().filter(|l| l.contains(&key) && l.contains("cancelled")).count(),
                1,
                "{sig}: {w:?}"
            );
        }
        assert_eq!(w.len(), 3, "{w:?}");
        // Review 13: a drain ceiling drains the node of such jobs; it warns too.
        let w = warn(&format!("[policy]\n{stages}\nceilings = {{ unknown = \"drain\" }}"));
        assert!(
            w.len() == 1 && w[0].contains("policy.ceilings.unknown = \"drain\"") && w[0].contains("drained"),
            "{w:?}"
        );
        // Without a cancel stage such a ceiling still lets the drain stage drain their nodes.
        let w = warn("[policy]\nceilings = { starved = \"cancel\" }");
        assert!(
            w.len() == 1 && w[0].contains("policy.ceilings.starved = \"cancel\"") && w[0].contains("drained"),
            "{w:?}"
        );
        // Without a drain or cancel stage it changes nothing.
        assert!(warn("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }]\nceilings = { starved = \"cancel\" }").is_empty());
        // c06: notice 0s, and a cancel stage at the drain's dwell.
        let w = warn("[policy]\nnotice = \"0s\"\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"1h\", verdict = \"cancel\" }]");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("policy.notice = \"0s\"") && w[0].contains("about 1h4m later"),
            "{}",
            w[0]
        );
        assert!(
            w[1].contains("cancel after \"1h\" is not when the cancel comes")
                && w[1].contains("about 1h21m")
                && w[1].contains("policy.window")
                && w[1].contains("even when a drain of ours still stands from an earlier breach"),
            "{}",
            w[1]
        );
        // d05: a notice longer than the cancel stage dominates it.
        let w = warn(
            "[policy]\nnotice = \"1h\"\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"30m\", verdict = \"cancel\" }]",
        );
        assert!(
            w.len() == 1
                && w[0].contains("cancel after \"30m\"")
                && w[0].contains("about 1h17m into the breach (1h after the first alert)")
                && w[0].contains("policy.notice (\"1h\")"),
            "{w:?}"
        );
        // Trial 8: no alert stage, drain 30m, cancel 60m, notice 45m: alerted (and noticed) at
        // 30m on the way to the drain at 31m, cancelled at 30m + 45m.
        let w = warn(
            "[policy]\nnotice = \"45m\"\nstages = [{ after = \"30m\", verdict = \"drain\" }, { after = \"60m\", verdict = \"cancel\" }]",
        );
        assert!(
            w.iter()
                .any(|l| l.contains("about 1h15m into the breach (45m after the first alert)")
                    && l.contains("itself about 30m into the breach")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|l| l.contains("no alert stage") && l.contains("about 30m into a breach")),
            "{w:?}"
        );
        // Trial 7: alert 0s, drain 1m, cancel 2m. The first alert needs a covered window (17m
        // into the breach), notice runs 30m from it: the cancel came 47m into the breach.
        let w = warn("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1m\", verdict = \"drain\" }, { after = \"2m\", verdict = \"cancel\" }]");
        assert!(
            w.len() == 1
                && w[0].contains("about 47m into the breach (30m after the first alert)")
                && w[0].contains("itself about 17m into the breach"),
            "{w:?}"
        );
        // c14: a gap of nearly the window; one sample is then whole evidence.
        let w = warn("[policy]\nwindow = \"20m\"\nmax_sample_gap = \"19m\"");
        assert!(
            w.len() == 1 && w[0].contains("policy.max_sample_gap = \"19m\"") && w[0].contains("one sample"),
            "{w:?}"
        );
        let w = warn("[policy]\nwindow = \"30m\"\nmax_sample_gap = \"10m\"");
        assert!(w.len() == 1 && w[0].contains("as few as 2 samples"), "{w:?}");
        assert!(warn("[policy]\nwindow = \"10m\"\nmax_sample_gap = \"3m\"").is_empty());
        // d09: a command timeout longer than the gap.
        let w = Config::from_text("[enforcer]\nnode = \"n\"\ncommand_timeout = \"10m\"\n", "t")
            .unwrap()
            .warnings();
        assert!(
            w.len() == 1 && w[0].contains("enforcer.command_timeout = \"10m\"") && w[0].contains("max_sample_gap"),
            "{w:?}"
        );
        // trial 19: a warmup under 5 minutes with a drain reachable.
        let warn_of = |t: &str| Config::from_text(t, "t").unwrap().warnings();
        let w = warn_of("[policy]\nwarmup = \"0s\"\n[enforcer]\nnode = \"n\"\n");
        assert!(
            w.len() == 1 && w[0].contains("policy.warmup = \"0s\"") && w[0].contains("toward its drain;"),
            "{w:?}"
        );
        assert!(warn_of("[policy]\nwarmup = \"5m\"\n[enforcer]\nnode = \"n\"\n").is_empty());
        assert!(
            warn_of("[policy]\nwarmup = \"0s\"\nstages = [{ after = \"0s\", verdict = \"alert\" }]\n[enforcer]\nnode = \"n\"\n").is_empty()
        );
        // trial 18: an nvidia-smi timeout of half the interval or more.
        let w = Config::from_text("[enforcer]\nnode = \"n\"\nnvidia_smi_timeout = \"30s\"\n", "t")
            .unwrap()
            .warnings();
        assert!(
            w.len() == 1 && w[0].contains("enforcer.nvidia_smi_timeout = \"30s\"") && w[0].contains("holds a cycle 1m"),
            "{w:?}"
        );
        let w = Config::from_text("[enforcer]\nnode = \"n\"\nnvidia_smi_timeout = \"29s\"\n", "t")
            .unwrap()
            .warnings();
        assert!(w.is_empty(), "{w:?}");
        // c12: hourly budgets of 0.
        let budgets = |d: u32, c: u32| {
            Config::from_text(
                &format!("[policy]\n{stages}\n[enforcer]\nnode = \"n\"\nnotify_command = [\"notify\"]\nmax_drains_per_hour = {d}\nmax_cancels_per_hour = {c}\n"),
                "t",
            )
            .unwrap()
            .warnings()
        };
        let w = budgets(0, 0);
        assert!(
            w.len() == 1 && w[0].contains("enforcer.max_drains_per_hour = 0") && w[0].contains("no cancel either"),
            "{w:?}"
        );
        let w = budgets(2, 0);
        assert!(w.len() == 1 && w[0].contains("enforcer.max_cancels_per_hour = 0"), "{w:?}");
        assert!(budgets(2, 1).is_empty());
        // Trial 11: a budget no node can spend, a warmup no job outlives, a threshold that
        // calls moderate work low: each named.
        let w = budgets(1_000_000, 1);
        assert!(
            w.len() == 1 && w[0].contains("enforcer.max_drains_per_hour = 1000000") && w[0].contains("off in effect"),
            "{w:?}"
        );
        let w = budgets(2, 11);
        assert!(w.len() == 1 && w[0].contains("enforcer.max_cancels_per_hour = 11"), "{w:?}");
        assert!(budgets(10, 10).is_empty());
        let w = warn("[policy]\nwarmup = \"366d\"");
        assert!(
            w.len() == 1 && w[0].contains("policy.warmup = \"366d\"") && w[0].contains("never judged"),
            "{w:?}"
        );
        assert!(warn("[policy]\nwarmup = \"11h\"").is_empty());
        let w = warn("[policy]\nutil_threshold_pct = 100");
        assert!(w.len() == 1 && w[0].contains("policy.util_threshold_pct = 100"), "{w:?}");
        assert!(warn("[policy]\nutil_threshold_pct = 49").is_empty());
        // e01: webhook_reaches_users without a webhook is an error naming that key, in either mode.
        for mode in ["observe", "enforce"] {
            let m = err(&format!(
                "[policy]\n{stages}\n[enforcer]\nnode = \"n\"\nmode = \"{mode}\"\nwebhook_reaches_users = true\n"
            ));
            assert!(
                m.contains("`enforcer.webhook_reaches_users`") && m.contains("webhook_url_env is empty"),
                "{mode}: {m}"
            );
        }
    }

    #[test]
    fn program_and_node_names_are_checked_naming_key_and_value() {
        let with = |kv: &str| Config::from_text(&format!("[enforcer]\nnode = \"gpu001\"\n{kv}\n"), "t");
        for (kv, key, says) in [
            (
                "notify_command = [\"sh -c rm\"]",
                "enforcer.notify_command",
                "\"sh -c rm\" contains whitespace",
            ),
            ("squeue = \"squeue --json\"", "enforcer.squeue", "whitespace"),
            ("scancel = \"/opt/slurm/bin/scancel \"", "enforcer.scancel", "whitespace"),
            ("curl = \"curl;id\"", "enforcer.curl", "not a program name"),
            ("nvidia_smi = \"$(nvidia-smi)\"", "enforcer.nvidia_smi", "not a program name"),
        ] {
            let m = with(kv).unwrap_err().to_string();
            assert!(m.contains(key) && m.contains(says), "{kv}: {m}");
        }
        for node in ["bad node; rm -rf", "-gpu001", "gpu001\n", "gpu[001-002]", ".gpu"] {
            let m = Config::from_text(&format!("[enforcer]\nnode = {node:?}\n"), "t")
                .unwrap_err()
                .to_string();
            assert!(m.contains("enforcer.node") && m.contains("not a Slurm node name"), "{node:?}: {m}");
        }
        for node in ["gpu001", "dgx-a100_07", "node1.cluster", "7gpu"] {
            assert!(Config::from_text(&format!("[enforcer]\nnode = {node:?}\n"), "t").is_ok(), "{node}");
        }
        for kv in [
            "notify_command = [\"gpu-reaper-mail\", \"--from\", \"hpc support\"]",
            "nvidia_smi = \"/usr/bin/nvidia-smi\"",
            "squeue = \"squeue.real\"",
        ] {
            assert!(with(kv).is_ok(), "{kv}: {:?}", with(kv));
        }
    }
}
