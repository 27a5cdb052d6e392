//! The `[policy]` TOML section shared by the simulator, the replay and the enforcer, and its
//! validation into a [`Policy`] that cannot hold a bad value.

use crate::duration::DurationS;
use crate::signature::{self, SignatureId};
use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A stage as written in config: once a breach has dwelt `after`, the verdict is at least
/// `verdict` (one of `alert`, `drain`, `cancel`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// Dwell needed, e.g. `"60m"`. Dwell is `now − breach start`.
    pub after: DurationS,
    /// `alert`, `drain` or `cancel`.
    pub verdict: String,
}

/// Exemptions: jobs matching any rule are never taken above `watching`, and the finding
/// records which rule matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExemptConfig {
    /// User names, matched case-insensitively.
    pub users: Vec<String>,
    /// Slurm accounts, case-insensitive.
    pub accounts: Vec<String>,
    /// Partitions, case-insensitive.
    pub partitions: Vec<String>,
    /// QOS names, case-insensitive.
    pub qos: Vec<String>,
    /// A regex (Rust `regex` syntax) over the job name; empty means none.
    pub name_regex: String,
    /// A marker a user puts in the job comment (`sbatch --comment=gpu-reaper:exempt`) to opt
    /// out. Matched as a case-insensitive substring. Empty disables the marker.
    pub comment_marker: String,
}

impl Default for ExemptConfig {
    fn default() -> Self {
        ExemptConfig {
            users: Vec::new(),
            accounts: Vec::new(),
            partitions: Vec::new(),
            qos: Vec::new(),
            name_regex: String::new(),
            comment_marker: DEFAULT_COMMENT_MARKER.to_string(),
        }
    }
}

/// The documented opt-out marker for the job comment.
pub const DEFAULT_COMMENT_MARKER: &str = "gpu-reaper:exempt";

/// The `[policy]` section as written. Every key has a default; unknown keys are rejected.
/// Build a [`Policy`] with [`Policy::new`] before use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// A GPU whose peak `utilization.gpu` over the window reaches this is working. Percent.
    /// Default 15.
    pub util_threshold_pct: f64,
    /// The evidence window. Default `"20m"`.
    pub window: DurationS,
    /// A job younger than this is never judged. Default `"15m"`.
    pub warmup: DurationS,
    /// The largest hole allowed between valid samples, and the largest age of the newest
    /// one. Default `"3m"`.
    pub max_sample_gap: DurationS,
    /// How often the driver evaluates. Must not exceed `window`. Default `"60s"`.
    pub interval: DurationS,
    /// Samples stamped later than `now + clock_skew` are invalid. Default `"60s"`.
    pub clock_skew: DurationS,
    /// The least time between a job's first alert (when its user is told) and a cancel.
    /// Default `"30m"`.
    pub notice: DurationS,
    /// Power at idle when `power.limit` is unknown, watts. Default 100; at most
    /// [`MAX_IDLE_POWER_W`].
    pub idle_power_w: f64,
    /// Power at idle as a fraction of `power.limit`. Default 0.25; at most
    /// [`MAX_IDLE_POWER_FRAC`].
    pub idle_power_frac: f64,
    /// Memory held when `memory.total` is unknown, MiB. Default 1024; at most
    /// [`MAX_MEM_HELD_MIB`].
    pub mem_held_mib: f64,
    /// Memory held as a fraction of `memory.total`. Default 0.05; at most
    /// [`MAX_MEM_HELD_FRAC`].
    pub mem_held_frac: f64,
    /// Zero compute: peak util below this, percent. Default 1.
    pub hung_util_pct: f64,
    /// `starved` needs mean util at least this, percent. Default 1.
    pub starved_mean_util_pct: f64,
    /// `spin` needs util at least this on every sample, percent. Default 90.
    pub spin_util_pct: f64,
    /// `spin` needs power at most this fraction of `power.limit`. Default 0.30.
    pub spin_power_frac: f64,
    /// `spin` needs power this flat: coefficient of variation at most this. Default 0.05; at
    /// most [`MAX_SPIN_POWER_CV`].
    pub spin_power_cv: f64,
    /// Stages, in any order. Default: alert at 0, drain at 60m, no cancel.
    pub stages: Vec<StageConfig>,
    /// Highest verdict per signature name, e.g. `{ spin = "alert" }`. Signatures not named
    /// keep their default ceiling.
    pub ceilings: BTreeMap<String, String>,
    /// Exemptions.
    pub exempt: ExemptConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            util_threshold_pct: 15.0,
            window: DurationS(20 * 60),
            warmup: DurationS(15 * 60),
            max_sample_gap: DurationS(3 * 60),
            interval: DurationS(60),
            clock_skew: DurationS(60),
            notice: DurationS(30 * 60),
            idle_power_w: 100.0,
            idle_power_frac: 0.25,
            mem_held_mib: 1024.0,
            mem_held_frac: 0.05,
            hung_util_pct: 1.0,
            starved_mean_util_pct: 1.0,
            spin_util_pct: 90.0,
            spin_power_frac: 0.30,
            spin_power_cv: 0.05,
            stages: vec![
                StageConfig {
                    after: DurationS(0),
                    verdict: "alert".into(),
                },
                StageConfig {
                    after: DurationS(60 * 60),
                    verdict: "drain".into(),
                },
            ],
            ceilings: BTreeMap::new(),
            exempt: ExemptConfig::default(),
        }
    }
}

/// A config value that was rejected. `key` is the dotted path of the offending key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("policy config: `{key}` = {value}: {problem}")]
pub struct ConfigError {
    /// Dotted key, e.g. `policy.window` or `policy.stages[2].verdict`.
    pub key: String,
    /// The offending value as written.
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// The same error with `why` added to its problem, after a colon.
    fn because(mut self, why: String) -> ConfigError {
        self.problem = format!("{}: {why}", self.problem);
        self
    }
}

fn err(key: impl Into<String>, value: impl ToString, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        value: value.to_string(),
        problem: problem.into(),
    }
}

/// A validated stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    /// Dwell needed, seconds.
    pub after_s: i64,
    /// `Alert`, `Drain` or `Cancel`.
    pub verdict: Verdict,
}

/// A validated policy: every value in range, stages sorted, regex compiled, ceilings resolved
/// against the signature registry. Build it with [`Policy::new`].
#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) cfg: PolicyConfig,
    pub(crate) stages: Vec<Stage>,
    pub(crate) ceilings: Vec<Verdict>,
    pub(crate) name_regex: Option<regex::Regex>,
    pub(crate) lower_users: Vec<String>,
    pub(crate) lower_accounts: Vec<String>,
    pub(crate) lower_partitions: Vec<String>,
    pub(crate) lower_qos: Vec<String>,
    pub(crate) lower_marker: String,
}

/// The longest accepted `policy.window`: 7 days. Sample windows are kept in memory, and a
/// window longer than the jobs it judges never fills.
pub const MAX_WINDOW_S: i64 = 7 * 86_400;
/// The longest accepted `warmup`, `notice`, `clock_skew` and stage dwell: 366 days, past any
/// Slurm time limit a site sets in practice.
pub const MAX_SPAN_S: i64 = 366 * 86_400;
/// The highest accepted `hung_util_pct`: 2 %. `hung` means zero compute (issue 2: "peak util
/// < 1 %"); `utilization.gpu` and DCGM's GPU_UTIL are whole percents, so the default 1 %
/// already means every reading 0 %, and 2 % tolerates one percent of counter noise. A GPU
/// computing at a few percent is `starved` (alert only), not hung (trial 7: at 5 % a
/// dataloader-starved job at 2–4 % util was cancelled as hung).
pub const MAX_HUNG_UTIL_PCT: f64 = 2.0;
/// The highest accepted `idle_power_frac`: 40 % of `power.limit`. GPUs at rest draw about
/// 10–25 % of their limit (an A100 about 50–60 W of 400 W); a GPU with no memory held and no
/// process that draws more is doing something the counters do not show (copy engines, a
/// util counter that is wrong), which `idle` must not call idle (trial 7: at 0.6 such a GPU
/// was cancelled as idle).
pub const MAX_IDLE_POWER_FRAC: f64 = 0.4;
/// The highest accepted `idle_power_w` (the idle test where `power.limit` is unknown): 300 W.
/// GPUs at rest draw about 20-100 W (an A100 50-60 W, an H100 about 70 W); 300 W is 40 % of
/// the largest common limit (700 W), as [`MAX_IDLE_POWER_FRAC`] is of any (trial 9: at
/// 1000 W a GPU at 500 W with nothing in memory was cancelled as idle).
pub const MAX_IDLE_POWER_W: f64 = 300.0;
/// The highest accepted `mem_held_frac`: 25 % of `memory.total`. The "memory held" is
/// 5 %; a CUDA context alone is well under 1 % of a datacenter GPU's memory.
pub const MAX_MEM_HELD_FRAC: f64 = 0.25;
/// The highest accepted `mem_held_mib` (memory held where `memory.total` is unknown): 8 GiB,
/// eight times the default; a GPU with more in use holds a job's data.
pub const MAX_MEM_HELD_MIB: f64 = 8192.0;

/// Least `mem_held_mib`: a GPU with nothing loaded reports a few MiB used (0-10, driver and
/// persistence daemon), a bare CUDA context a few hundred; at 0 every reading, 0 MiB included,
/// counts as memory held (trial 13).
pub const MIN_MEM_HELD_MIB: f64 = 64.0;

/// Least `mem_held_frac`: 0.2 % of memory.total (16 MiB of 8 GiB, 164 MiB of 80 GiB), above
/// what a GPU with nothing loaded reports (trial 13: at 0, 0 MiB counted as held).
pub const MIN_MEM_HELD_FRAC: f64 = 0.002;

/// Least `spin_util_pct`: spin is a GPU reported busy nearly all the time at idle power (a
/// spinning NCCL kernel reads about 100 %); a GPU at a few tens of percent and low power is a
/// light job at work (trial 13: at 5, one computing at 8-20 % was called spin and cancelled).
pub const MIN_SPIN_UTIL_PCT: f64 = 50.0;
/// The highest accepted `spin_power_cv`: 0.25, five times the default 0.05. A deadlocked
/// kernel's power varies by a few percent of its mean; a working GPU's swings by much more.
pub const MAX_SPIN_POWER_CV: f64 = 0.25;
/// The highest accepted `spin_power_frac`: half of `power.limit`. A GPU at full util that draws
/// more is working; at 1 every sample would count as low power.
pub const MAX_SPIN_POWER_FRAC: f64 = 0.5;

impl Policy {
    /// True when an engine can judge `self` and `other` over one set of windows (see
    /// [`crate::Engine::with_policies`]): they agree on `window`, `max_sample_gap`,
    /// `clock_skew` and every threshold decided at ingest (not necessarily `interval`).
    pub fn shares_windows_with(&self, other: &Policy) -> bool {
        crate::window::IngestThresholds::new(self.config()).same_windows(&crate::window::IngestThresholds::new(other.config()))
    }

    /// Validates `cfg`. Errors name the key and the value: a zero window or one above
    /// [`MAX_WINDOW_S`], a duration above [`MAX_SPAN_S`], an interval longer than the window, a gap not shorter than the window, an out-of-range threshold, a stage
    /// with an unknown verdict, a verdict given two stages, a ceiling for an unknown signature,
    /// a bad regex, and thresholds under which a signature could never match or would match
    /// what it does not mean: `hung_util_pct` of 0, above [`MAX_HUNG_UTIL_PCT`] or above
    /// `starved_mean_util_pct`, `starved_mean_util_pct` at or above `util_threshold_pct` (a
    /// window's mean never exceeds its peak), `spin_util_pct` of 0, `idle_power_frac` above
    /// [`MAX_IDLE_POWER_FRAC`], `spin_power_frac` above [`MAX_SPIN_POWER_FRAC`].
    pub fn new(cfg: &PolicyConfig) -> Result<Policy, ConfigError> {
        Policy::build(cfg).map_err(|mut errs| errs.swap_remove(0))
    }

    /// Every problem of `cfg` that [`Policy::new`] refuses, in the order `new` checks them,
    /// so the first is `new`'s error; empty when `cfg` is valid. A check that compares two
    /// keys is left out when either key already has an error of its own, and the durations
    /// are one group that stops at its first error (each of their checks needs the earlier
    /// ones to hold), so every error listed is one to fix (operator trials 16 and 19:
    /// `check-config` named one `[policy]` mistake per run).
    pub fn check(cfg: &PolicyConfig) -> Vec<ConfigError> {
        Policy::build(cfg).err().unwrap_or_default()
    }

    fn build(cfg: &PolicyConfig) -> Result<Policy, Vec<ConfigError>> {
        let c = cfg;
        let mut errs: Vec<ConfigError> = Vec::new();
        if let Err(e) = check_durations(c) {
            errs.push(e);
        }
        check_thresholds(c, &mut errs);
        check_exempt_lists(c, &mut errs);
        let stages = check_stages(c, &mut errs);
        let ceilings = check_ceilings(c, &mut errs);
        let name_regex = if c.exempt.name_regex.is_empty() {
            None
        } else {
            match regex::Regex::new(&c.exempt.name_regex) {
                Ok(re) => Some(re),
                Err(e) => {
                    errs.push(err(
                        "policy.exempt.name_regex",
                        format!("{:?}", c.exempt.name_regex),
                        e.to_string().replace('\n', " "),
                    ));
                    None
                }
            }
        };
        if !errs.is_empty() {
            return Err(errs);
        }
        let lower = |v: &[String]| v.iter().map(|s| s.to_lowercase()).collect::<Vec<_>>();
        Ok(Policy {
            cfg: c.clone(),
            stages,
            ceilings,
            name_regex,
            lower_users: lower(&c.exempt.users),
            lower_accounts: lower(&c.exempt.accounts),
            lower_partitions: lower(&c.exempt.partitions),
            lower_qos: lower(&c.exempt.qos),
            lower_marker: c.exempt.comment_marker.to_lowercase(),
        })
    }

    /// The config this policy was built from.
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// Validated stages, sorted by dwell.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The ceiling in force for a signature.
    pub fn ceiling(&self, sig: SignatureId) -> Verdict {
        self.ceilings[sig.0 as usize]
    }

    /// Dwell at which `verdict` is first reached, if some stage reaches it.
    pub fn stage_after_s(&self, verdict: Verdict) -> Option<i64> {
        self.stages.iter().filter(|s| s.verdict >= verdict).map(|s| s.after_s).min()
    }

    /// Which exemption rule, if any, matches the job. Returns a short description such as
    /// `user=alice` or `comment marker`.
    pub fn exemption(&self, job: &crate::JobFacts) -> Option<String> {
        let eq = |list: &[String], v: &str| list.iter().any(|x| x.eq_ignore_ascii_case(v) || *x == v.to_lowercase());
        if eq(&self.lower_users, &job.user) {
            return Some(format!("user={}", job.user));
        }
        if eq(&self.lower_accounts, &job.account) {
            return Some(format!("account={}", job.account));
        }
        if eq(&self.lower_partitions, &job.partition) {
            return Some(format!("partition={}", job.partition));
        }
        if eq(&self.lower_qos, &job.qos) {
            return Some(format!("qos={}", job.qos));
        }
        if let Some(re) = &self.name_regex {
            if re.is_match(&job.name) {
                return Some("name matches exempt.name_regex".to_string());
            }
        }
        if !self.lower_marker.is_empty() && job.comment.to_lowercase().contains(&self.lower_marker) {
            return Some("comment marker".to_string());
        }
        None
    }
}

/// The durations, in order; each check needs the earlier ones to hold, so the first error
/// stops the group (see [`Policy::check`]).
fn check_durations(c: &PolicyConfig) -> Result<(), ConfigError> {
    if c.window.0 <= 0 {
        return Err(err("policy.window", c.window, "must be longer than 0s"));
    }
    if c.interval.0 <= 0 {
        return Err(err("policy.interval", c.interval, "must be longer than 0s"));
    }
    if c.interval.0 > c.window.0 {
        return Err(err(
            "policy.interval",
            c.interval,
            format!("is longer than policy.window ({})", c.window),
        ));
    }
    if c.max_sample_gap.0 <= 0 || c.max_sample_gap.0 >= c.window.0 {
        return Err(err(
            "policy.max_sample_gap",
            c.max_sample_gap,
            format!("must be above 0s and below policy.window ({})", c.window),
        ));
    }
    if c.max_sample_gap.0 < c.interval.0 {
        return Err(err(
            "policy.max_sample_gap",
            c.max_sample_gap,
            format!("is shorter than policy.interval ({}); every sample would look late", c.interval),
        ));
    }
    if c.window.0 > MAX_WINDOW_S {
        return Err(err(
            "policy.window",
            c.window,
            format!(
                "is longer than {}; a window that long is never filled before jobs end",
                DurationS(MAX_WINDOW_S)
            ),
        ));
    }
    for (key, d) in [
        ("policy.warmup", c.warmup),
        ("policy.clock_skew", c.clock_skew),
        ("policy.notice", c.notice),
    ] {
        if d.0 < 0 {
            return Err(err(key, d, "must not be negative"));
        }
        if d.0 > MAX_SPAN_S {
            return Err(err(key, d, format!("is longer than {}", DurationS(MAX_SPAN_S))));
        }
    }
    if c.clock_skew.0 > c.window.0 {
        return Err(err(
            "policy.clock_skew",
            c.clock_skew,
            format!(
                "is longer than policy.window ({}); samples that far ahead are not evidence",
                c.window
            ),
        ));
    }
    Ok(())
}

/// True when none of `keys` has an error in `errs` yet: a check comparing keys is made only
/// when each is valid on its own.
fn ok(errs: &[ConfigError], keys: &[&str]) -> bool {
    !errs.iter().any(|e| keys.contains(&e.key.as_str()))
}

/// The thresholds, each one's range first, then the settings that would leave a signature
/// meaningless (see [`Policy::new`]).
fn check_thresholds(c: &PolicyConfig, errs: &mut Vec<ConfigError>) {
    let pct = |key: &str, v: f64, lo: f64, hi: f64| -> Result<(), ConfigError> {
        if v.is_finite() && v >= lo && v <= hi {
            Ok(())
        } else {
            Err(err(key, v, format!("must be between {lo} and {hi}")))
        }
    };
    if let Err(e) = pct("policy.util_threshold_pct", c.util_threshold_pct, 0.0, 100.0) {
        errs.push(e);
    }
    if ok(errs, &["policy.util_threshold_pct"]) && c.util_threshold_pct <= 0.0 {
        errs.push(err(
            "policy.util_threshold_pct",
            c.util_threshold_pct,
            "must be above 0; at 0 nothing can breach",
        ));
    }
    if let Err(e) = pct("policy.hung_util_pct", c.hung_util_pct, 0.0, 100.0) {
        errs.push(e);
    }
    if let Err(e) = pct("policy.starved_mean_util_pct", c.starved_mean_util_pct, 0.0, 100.0) {
        errs.push(e);
    }
    if let Err(e) = pct("policy.spin_util_pct", c.spin_util_pct, 0.0, 100.0) {
        errs.push(e);
    }
    // Settings that leave a signature meaningless. Each refusal below is proved from the
    // signature's own test (`signature/*.rs`), not assumed.
    if ok(errs, &["policy.hung_util_pct"]) && c.hung_util_pct <= 0.0 {
        // `hung` needs a peak below `hung_util_pct`; no reading is below 0.
        errs.push(err(
            "policy.hung_util_pct",
            c.hung_util_pct,
            "must be above 0: hung needs a window's peak util below it, and no reading is below 0 %, so hung could never match (to keep hung jobs from being cancelled, set ceilings.hung instead)",
        ));
    }
    if ok(errs, &["policy.hung_util_pct"]) && c.hung_util_pct > MAX_HUNG_UTIL_PCT {
        errs.push(err(
            "policy.hung_util_pct",
            c.hung_util_pct,
            format!("must be at most {MAX_HUNG_UTIL_PCT}: hung means zero compute (util is read in whole percents, so the default 1 means every reading 0 %), and a GPU computing at a few percent is starved, which only alerts; a higher value would cancel slow-but-working jobs as hung"),
        ));
    }
    if ok(errs, &["policy.hung_util_pct", "policy.starved_mean_util_pct"]) && c.hung_util_pct > c.starved_mean_util_pct {
        // A window with peak below `hung_util_pct` and mean at least
        // `starved_mean_util_pct` would match both; hung comes first and may cancel.
        errs.push(err(
            "policy.hung_util_pct",
            c.hung_util_pct,
            format!(
                "is above policy.starved_mean_util_pct ({}): a GPU computing at a mean between the two would be called hung (which may be cancelled) rather than starved (alert only); set hung_util_pct at most starved_mean_util_pct",
                c.starved_mean_util_pct
            ),
        ));
    }
    if ok(errs, &["policy.starved_mean_util_pct", "policy.util_threshold_pct"]) && c.starved_mean_util_pct >= c.util_threshold_pct {
        // `starved` needs a peak below the threshold and a mean at or above
        // `starved_mean_util_pct`; a window's mean never exceeds its peak.
        errs.push(err(
            "policy.starved_mean_util_pct",
            c.starved_mean_util_pct,
            format!(
                "is at or above policy.util_threshold_pct ({}): starved needs a window's mean util at least starved_mean_util_pct while its peak stays below util_threshold_pct, and a mean never exceeds its peak, so starved could never match; set starved_mean_util_pct below {}",
                c.util_threshold_pct, c.util_threshold_pct
            ),
        ));
    }
    if ok(errs, &["policy.spin_util_pct"]) && c.spin_util_pct < MIN_SPIN_UTIL_PCT {
        errs.push(err(
            "policy.spin_util_pct",
            c.spin_util_pct,
            format!("must be at least {MIN_SPIN_UTIL_PCT}: spin means a GPU reported busy nearly all the time at low, flat power (a spinning NCCL kernel reads about 100 %); a GPU at a few tens of percent and low power is a light job at work, and at 0 every sample, 0 % included, would count as busy"),
        ));
    }
    if let Err(e) = pct("policy.idle_power_frac", c.idle_power_frac, 0.0, 1.0) {
        errs.push(e);
    }
    if ok(errs, &["policy.idle_power_frac"]) && c.idle_power_frac > MAX_IDLE_POWER_FRAC {
        errs.push(err(
            "policy.idle_power_frac",
            c.idle_power_frac,
            format!("must be at most {MAX_IDLE_POWER_FRAC}: a GPU at rest draws about 10-25 % of its power.limit, and one with no memory held and no process that draws more is doing work its counters do not show, so a higher value would call it idle (which may be cancelled)"),
        ));
    }
    if let Err(e) = pct("policy.spin_power_frac", c.spin_power_frac, 0.0, 1.0) {
        errs.push(e);
    }
    if ok(errs, &["policy.spin_power_frac"]) && c.spin_power_frac > MAX_SPIN_POWER_FRAC {
        // Every sample at or below its limit would pass "low power" at 1; above half the
        // limit a GPU at full util is doing real work, whatever its power's flatness.
        errs.push(err(
            "policy.spin_power_frac",
            c.spin_power_frac,
            format!("must be at most {MAX_SPIN_POWER_FRAC}: spin is full util at low power (a deadlocked NCCL kernel draws near idle power), and a GPU at full util drawing more than half its power.limit is working, so a higher value would call steady busy jobs spin"),
        ));
    }
    // Trial 9: each of these, set high, lets `idle` (which may cancel) take a GPU that
    // works: memory in use that does not count as held, power at work that counts as
    // idle, power that swings and counts as flat.
    if let Err(e) = pct("policy.mem_held_frac", c.mem_held_frac, MIN_MEM_HELD_FRAC, MAX_MEM_HELD_FRAC) {
        errs.push(e.because(format!("a GPU with more than {MAX_MEM_HELD_FRAC} of its memory in use holds a job's data, and a higher value would call it free, so idle; one with nothing loaded reports a few MiB, which a value below {MIN_MEM_HELD_FRAC} would call held, so hung (which may be cancelled)"))
    );
    }
    if let Err(e) = pct("policy.spin_power_cv", c.spin_power_cv, 0.0, MAX_SPIN_POWER_CV) {
        errs.push(e.because(format!("spin needs flat power (a deadlocked kernel's varies by a few percent); at more than {MAX_SPIN_POWER_CV} a working GPU's swinging power would count as flat"))
    );
    }
    if let Err(e) = pct("policy.idle_power_w", c.idle_power_w, 0.0, MAX_IDLE_POWER_W) {
        errs.push(e.because(format!("GPUs at rest draw about 20-100 W, and one with no memory held and no process drawing more than {MAX_IDLE_POWER_W} W is doing work its counters do not show, which a higher value would call idle"))
    );
    }
    if let Err(e) = pct("policy.mem_held_mib", c.mem_held_mib, MIN_MEM_HELD_MIB, MAX_MEM_HELD_MIB) {
        errs.push(e.because(format!(
            "a GPU with more than {MAX_MEM_HELD_MIB} MiB in use holds a job's data, and a higher value would call it free, so idle; one with nothing loaded reports a few MiB, which a value below {MIN_MEM_HELD_MIB} would call held, so hung (which may be cancelled)"
        ))
    );
    }
}

/// Names repeated in an exemption list.
fn check_exempt_lists(c: &PolicyConfig, errs: &mut Vec<ConfigError>) {
    for (key, list) in [
        ("policy.exempt.users", &c.exempt.users),
        ("policy.exempt.accounts", &c.exempt.accounts),
        ("policy.exempt.partitions", &c.exempt.partitions),
        ("policy.exempt.qos", &c.exempt.qos),
    ] {
        for (i, v) in list.iter().enumerate() {
            if let Some(k) = list[..i].iter().position(|w| w.eq_ignore_ascii_case(v)) {
                errs.push(err(
                    format!("{key}[{i}]"),
                    format!("{v:?}"),
                    format!(
                        "repeats {key}[{k}] ({:?}; names are matched case-insensitively): a typo for another name?",
                        list[k]
                    ),
                ));
            }
        }
    }
}

/// The stages, validated and sorted by dwell; the valid ones when some are not.
fn check_stages(c: &PolicyConfig, errs: &mut Vec<ConfigError>) -> Vec<Stage> {
    if c.stages.is_empty() {
        errs.push(err(
            "policy.stages",
            "[]",
            "needs at least one stage; with none no job is ever alerted (to only watch, keep the alert stage and run the enforcer in observe mode)",
        ));
        return Vec::new();
    }
    let before = errs.len();
    // Each valid stage with its index in the config.
    let mut stages: Vec<(usize, Stage)> = Vec::with_capacity(c.stages.len());
    for (i, s) in c.stages.iter().enumerate() {
        let mut valid = true;
        let v = match Verdict::from_name(&s.verdict) {
            Some(v @ (Verdict::Alert | Verdict::Drain | Verdict::Cancel)) => Some(v),
            _ => {
                errs.push(err(
                    format!("policy.stages[{i}].verdict"),
                    format!("{:?}", s.verdict),
                    "a stage verdict is one of alert, drain, cancel",
                ));
                None
            }
        };
        if let Some(&(k, Stage { verdict: given, .. })) = v.and_then(|v| stages.iter().find(|(_, st)| st.verdict == v)) {
            errs.push(err(
                format!("policy.stages[{i}].verdict"),
                format!("{:?}", s.verdict),
                format!(
                    "policy.stages[{k}] already gives {given} (after {}, here after {}); each verdict may have one stage: the shorter dwell alone decides",
                    c.stages[k].after, s.after
                ),
            ));
            valid = false;
        }
        if s.after.0 < 0 {
            errs.push(err(format!("policy.stages[{i}].after"), s.after, "must not be negative"));
            valid = false;
        } else if s.after.0 > MAX_SPAN_S {
            errs.push(err(
                format!("policy.stages[{i}].after"),
                s.after,
                format!("is longer than {}", DurationS(MAX_SPAN_S)),
            ));
            valid = false;
        }
        if let (Some(v), true) = (v, valid) {
            stages.push((
                i,
                Stage {
                    after_s: s.after.0,
                    verdict: v,
                },
            ));
        }
    }
    let mut stages: Vec<Stage> = stages.into_iter().map(|(_, s)| s).collect();
    stages.sort_by_key(|s| (s.after_s, s.verdict));
    // A higher rung must not need less dwell than a lower one (judged once every stage is
    // valid).
    if errs.len() == before {
        if let Some(w) = stages.windows(2).find(|w| w[1].verdict < w[0].verdict) {
            errs.push(err(
                "policy.stages",
                format!("{} at {}", w[1].verdict, DurationS(w[1].after_s)),
                format!(
                    "comes after {} at {}; higher verdicts need longer dwell",
                    w[0].verdict,
                    DurationS(w[0].after_s)
                ),
            ));
        }
    }
    stages
}

/// The ceiling of each signature, by [`SignatureId`] index: the default unless configured.
fn check_ceilings(c: &PolicyConfig, errs: &mut Vec<ConfigError>) -> Vec<Verdict> {
    let mut ceilings: Vec<Verdict> = signature::REGISTRY.iter().map(|s| s.default_ceiling()).collect();
    for (name, v) in &c.ceilings {
        let Some(id) = SignatureId::from_name(name) else {
            errs.push(err(
                format!("policy.ceilings.{name}"),
                format!("{v:?}"),
                format!("unknown signature; known: {}", signature::names().join(", ")),
            ));
            continue;
        };
        match Verdict::from_name(v) {
            Some(v @ (Verdict::Watching | Verdict::Alert | Verdict::Drain | Verdict::Cancel)) => ceilings[id.0 as usize] = v,
            _ => errs.push(err(
                format!("policy.ceilings.{name}"),
                format!("{v:?}"),
                "a ceiling is one of watching, alert, drain, cancel",
            )),
        }
    }
    ceilings
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new(&PolicyConfig::default()).expect("the default policy config is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            policy: PolicyConfig,
        }
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        Policy::new(&f.policy).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_as_documented() {
        let p = Policy::default();
        let c = p.config();
        assert_eq!(c.util_threshold_pct, 15.0);
        assert_eq!(c.window.secs(), 1200);
        assert_eq!(c.warmup.secs(), 900);
        assert_eq!(c.max_sample_gap.secs(), 180);
        assert_eq!(c.notice.secs(), 1800);
        assert_eq!(c.idle_power_w, 100.0);
        assert_eq!(c.mem_held_mib, 1024.0);
        assert_eq!(
            p.stages(),
            &[
                Stage {
                    after_s: 0,
                    verdict: Verdict::Alert
                },
                Stage {
                    after_s: 3600,
                    verdict: Verdict::Drain
                }
            ]
        );
        assert_eq!(p.stage_after_s(Verdict::Cancel), None);
    }

    #[test]
    fn validation_errors_name_the_key() {
        let e = parse("[policy]\nwindow = \"0s\"").unwrap_err();
        assert!(e.contains("policy.window"), "{e}");
        let e = parse("[policy]\nwindow = \"5m\"\ninterval = \"10m\"\nmax_sample_gap = \"2m\"").unwrap_err();
        assert!(e.contains("policy.interval"), "{e}");
        let e = parse("[policy]\nstages = [{ after = \"0s\", verdict = \"explode\" }]").unwrap_err();
        assert!(e.contains("policy.stages[0].verdict") && e.contains("explode"), "{e}");
        let e = parse("[policy]\nwindwo = \"20m\"").unwrap_err();
        assert!(e.contains("windwo"), "{e}");
        let e = parse("[policy]\nexempt = { name_regex = \"(\" }").unwrap_err();
        assert!(e.contains("policy.exempt.name_regex"), "{e}");
        let e = parse("[policy]\nceilings = { sleepy = \"cancel\" }").unwrap_err();
        assert!(e.contains("policy.ceilings.sleepy"), "{e}");
        let e = parse("[policy]\nwindow = 20").unwrap_err();
        assert!(e.contains("window"), "{e}");
    }

    #[test]
    fn absurd_durations_are_rejected_by_key() {
        let e = parse("[policy]\nwindow = \"1000000000000h\"").unwrap_err();
        assert!(e.contains("policy.window") && e.contains("7d"), "{e}");
        assert!(parse("[policy]\nwindow = \"7d\"").is_ok());
        let e = parse("[policy]\nwindow = \"7d1s\"").unwrap_err();
        assert!(e.contains("policy.window"), "{e}");
        let e = parse("[policy]\nwarmup = \"400d\"").unwrap_err();
        assert!(e.contains("policy.warmup"), "{e}");
        let e = parse("[policy]\nnotice = \"367d\"").unwrap_err();
        assert!(e.contains("policy.notice"), "{e}");
        let e = parse("[policy]\nclock_skew = \"1h\"").unwrap_err();
        assert!(e.contains("policy.clock_skew") && e.contains("policy.window"), "{e}");
        let e =
            parse("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"500d\", verdict = \"cancel\" }]").unwrap_err();
        assert!(e.contains("policy.stages[1].after"), "{e}");
        let e = parse("[policy]\nwindow = \"-5m\"").unwrap_err();
        assert!(e.contains("-5m") && e.contains("negative"), "{e}");
        let e = parse("[policy]\nstages = []").unwrap_err();
        assert!(e.contains("policy.stages") && e.contains("at least one"), "{e}");
    }

    #[test]
    fn stages_sorted_and_ceilings_resolved() {
        let p = parse("[policy]\nstages = [{ after = \"2h\", verdict = \"cancel\" }, { after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }]\nceilings = { spin = \"cancel\" }").unwrap();
        assert_eq!(
            p.stages().iter().map(|s| s.verdict).collect::<Vec<_>>(),
            vec![Verdict::Alert, Verdict::Drain, Verdict::Cancel]
        );
        assert_eq!(p.ceiling(SignatureId::from_name("spin").unwrap()), Verdict::Cancel);
        assert_eq!(p.stage_after_s(Verdict::Cancel), Some(7200));
        let e =
            parse("[policy]\nstages = [{ after = \"0s\", verdict = \"cancel\" }, { after = \"1h\", verdict = \"alert\" }]").unwrap_err();
        assert!(e.contains("policy.stages"), "{e}");
    }

    /// The stage-order error writes durations as the config does ("1h"), not as seconds.
    #[test]
    fn stage_order_error_writes_durations_as_configured() {
        let e = parse("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"2h\", verdict = \"drain\" }, { after = \"1h30m\", verdict = \"cancel\" }]").unwrap_err();
        assert!(
            e.contains("drain at 2h") && e.contains("comes after cancel at 1h30m;") && !e.contains("5400"),
            "{e}"
        );
        let e = parse("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"cancel\" }, { after = \"90m\", verdict = \"drain\" }]").unwrap_err();
        assert!(e.contains("drain at 1h30m") && e.contains("comes after cancel at 1h;"), "{e}");
    }

    #[test]
    fn a_verdict_given_two_stages_is_refused_naming_both() {
        let e = parse("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"drain\" }]").unwrap_err();
        assert!(
            e.contains("policy.stages[2].verdict")
                && e.contains("\"drain\"")
                && e.contains("policy.stages[1] already gives drain (after 1h, here after 2h)"),
            "{e}"
        );
        let e = parse("[policy]\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"0s\", verdict = \"alert\" }]").unwrap_err();
        assert!(
            e.contains("policy.stages[1].verdict") && e.contains("policy.stages[0] already gives alert"),
            "{e}"
        );
        // One stage per verdict, in any order, is fine.
        assert!(parse("[policy]\nstages = [{ after = \"2h\", verdict = \"cancel\" }, { after = \"0s\", verdict = \"alert\" }]").is_ok());
    }

    #[test]
    fn thresholds_that_leave_a_signature_meaningless_are_refused_naming_the_keys() {
        let e = parse("[policy]\nspin_util_pct = 0").unwrap_err();
        assert!(
            e.contains("policy.spin_util_pct") && e.contains("= 0:") && e.contains("spin"),
            "{e}"
        );
        // Below 50 a GPU at a few tens of percent, a light job at work, would count as spinning
        // (trial 13); at or below util_threshold_pct one working by the policy's own threshold.
        for v in ["0.0005", "5", "49.9"] {
            let e = parse(&format!("[policy]\nspin_util_pct = {v}")).unwrap_err();
            assert!(e.contains("policy.spin_util_pct") && e.contains("at least 50"), "{e}");
        }
        assert!(parse("[policy]\nspin_util_pct = 50").is_ok());
        // Spin's util test is its own: a threshold above it (as in a policy that breaches below
        // 100 %) does not make a spinning GPU a working one.
        assert!(parse("[policy]\nutil_threshold_pct = 100\nspin_util_pct = 90").is_ok());
        // An empty GPU's few MiB never count as memory held (trial 13).
        for (key, v) in [
            ("mem_held_mib", "0"),
            ("mem_held_mib", "63"),
            ("mem_held_frac", "0"),
            ("mem_held_frac", "0.0019"),
        ] {
            let e = parse(&format!("[policy]\n{key} = {v}")).unwrap_err();
            assert!(e.contains(&format!("policy.{key}")) && e.contains("nothing loaded"), "{e}");
        }
        assert!(parse("[policy]\nmem_held_mib = 64\nmem_held_frac = 0.002").is_ok());
        let e = parse("[policy]\nhung_util_pct = 0").unwrap_err();
        assert!(
            e.contains("policy.hung_util_pct") && e.contains("= 0:") && e.contains("ceilings.hung"),
            "{e}"
        );
        assert!(parse("[policy]\nhung_util_pct = 0.001").is_ok());
        // starved: mean at least starved_mean_util_pct, peak below util_threshold_pct.
        let e = parse("[policy]\nutil_threshold_pct = 10\nstarved_mean_util_pct = 10").unwrap_err();
        assert!(
            e.contains("policy.starved_mean_util_pct` = 10") && e.contains("policy.util_threshold_pct (10)"),
            "{e}"
        );
        let e = parse("[policy]\nutil_threshold_pct = 0.5").unwrap_err();
        assert!(
            e.contains("policy.starved_mean_util_pct` = 1") && e.contains("policy.util_threshold_pct (0.5)"),
            "{e}"
        );
        assert!(parse("[policy]\nutil_threshold_pct = 10\nstarved_mean_util_pct = 9.99").is_ok());
        // Trial 7: hung means zero compute; a GPU at a few percent is starved (alert only).
        let e = parse("[policy]\nhung_util_pct = 5\nstarved_mean_util_pct = 6").unwrap_err();
        assert!(e.contains("policy.hung_util_pct` = 5") && e.contains("at most 2"), "{e}");
        let e = parse("[policy]\nhung_util_pct = 1.5").unwrap_err();
        assert!(
            e.contains("policy.hung_util_pct` = 1.5") && e.contains("policy.starved_mean_util_pct (1)"),
            "{e}"
        );
        assert!(parse("[policy]\nhung_util_pct = 2\nstarved_mean_util_pct = 2").is_ok());
        assert!(parse("[policy]\nhung_util_pct = 0.5").is_ok());
        // Trial 7: a GPU with nothing in memory drawing more than 40 % of its limit is not idle.
        // Trial 9: settings under which idle takes working GPUs, and a repeated exemption.
        for (toml, key, says) in [
            ("idle_power_w = 1000", "policy.idle_power_w", "between 0 and 300"),
            ("mem_held_frac = 1.0", "policy.mem_held_frac", "between 0.002 and 0.25"),
            ("mem_held_mib = 20000", "policy.mem_held_mib", "between 64 and 8192"),
            ("spin_power_cv = 5", "policy.spin_power_cv", "between 0 and 0.25"),
            (
                "exempt = { qos = [\"serving\", \"Serving\"] }",
                "policy.exempt.qos[1]",
                "repeats policy.exempt.qos[0]",
            ),
        ] {
            let e = parse(&format!("[policy]\n{toml}")).unwrap_err();
            assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
        }
        for toml in [
            "idle_power_w = 300",
            "mem_held_frac = 0.25",
            "mem_held_mib = 8192",
            "spin_power_cv = 0.25",
            "exempt = { qos = [\"serving\", \"debug\"] }",
        ] {
            assert!(parse(&format!("[policy]\n{toml}")).is_ok(), "{toml}");
        }
        let e = parse("[policy]\nidle_power_frac = 0.6").unwrap_err();
        assert!(e.contains("policy.idle_power_frac` = 0.6") && e.contains("at most 0.4"), "{e}");
        assert!(parse("[policy]\nidle_power_frac = 0.4").is_ok());
    }

    proptest::proptest! {
        /// The refusals above are sound: for any window of readings, `starved` cannot match
        /// when `starved_mean_util_pct` is at or above `util_threshold_pct` (a mean never
        /// exceeds its peak, in the engine's own arithmetic), nor `hung` at a `hung_util_pct`
        /// of 0.
        #[test]
        fn refused_thresholds_really_leave_the_signature_unreachable(
            utils in proptest::collection::vec(0u32..=100_000, 1..200),
            threshold in 0.001f64..=100.0,
            over in 0.0f64..=100.0,
        ) {
            let n = utils.len() as u32;
            let g = crate::window::GpuStats {
                samples: n,
                peak_util_milli: *utils.iter().max().unwrap(),
                sum_util_milli: utils.iter().map(|&u| u as u64).sum(),
                mem_known: n,
                mem_held: n,
                procs_pos: n,
                power_known: n,
                ..Default::default()
            };
            let cfg = PolicyConfig {
                util_threshold_pct: threshold,
                starved_mean_util_pct: (threshold + over).min(100.0).max(threshold),
                hung_util_pct: 0.0,
                ..PolicyConfig::default()
            };
            let name = crate::signature::classify(&[g], &cfg).map(|(id, _)| id.name());
            proptest::prop_assert_ne!(name, Some("starved"));
            proptest::prop_assert_ne!(name, Some("hung"));
            proptest::prop_assert!(g.mean_util_pct() <= g.peak_util_pct());
        }

        /// Trial 7: under any accepted config, `hung` (which may cancel) takes only GPUs that
        /// compute nothing: peak below [`MAX_HUNG_UTIL_PCT`], and never a window `starved`'s
        /// mean test would also take. And `idle_power_frac` is accepted only up to
        /// [`MAX_IDLE_POWER_FRAC`].
        #[test]
        fn accepted_thresholds_keep_hung_to_zero_compute(
            // Near the bounds, where the refusals matter: util up to 2.5 %, hung and starved thresholds up to 3 %.
            utils in proptest::collection::vec(0u32..=2_500, 1..6),
            threshold in 0.001f64..=20.0,
            hung in 0.0f64..=3.0,
            starved in 0.0f64..=3.0,
            idle_frac in 0.0f64..=1.0,
        ) {
            let n = utils.len() as u32;
            let g = crate::window::GpuStats {
                samples: n,
                peak_util_milli: *utils.iter().max().unwrap(),
                sum_util_milli: utils.iter().map(|&u| u as u64).sum(),
                mem_known: n,
                mem_held: n,
                procs_pos: n,
                power_known: n,
                power_spin_low: n,
                ..Default::default()
            };
            let cfg = PolicyConfig {
                util_threshold_pct: threshold,
                hung_util_pct: hung,
                starved_mean_util_pct: starved,
                ..PolicyConfig::default()
            };
            proptest::prop_assert_eq!(
                Policy::new(&PolicyConfig { idle_power_frac: idle_frac, ..PolicyConfig::default() }).is_ok(),
                idle_frac <= MAX_IDLE_POWER_FRAC
            );
            if Policy::new(&cfg).is_ok() && crate::signature::gpu_is_hung(&g, &cfg) {
                proptest::prop_assert!(g.peak_util_pct() < MAX_HUNG_UTIL_PCT);
                proptest::prop_assert!(g.mean_util_pct() < cfg.starved_mean_util_pct);
            }
        }
    }

    #[test]
    fn exemptions_match_case_insensitively() {
        let p = parse("[policy]\nexempt = { users = [\"Alice\"], qos = [\"interactive\"], name_regex = \"^jupyter\" }").unwrap();
        let mut j = crate::JobFacts {
            user: "alice".into(),
            ..Default::default()
        };
        assert_eq!(p.exemption(&j).as_deref(), Some("user=alice"));
        j.user = "bob".into();
        j.qos = "INTERACTIVE".into();
        assert!(p.exemption(&j).is_some());
        j.qos = "normal".into();
        j.name = "jupyter-lab".into();
        assert!(p.exemption(&j).is_some());
        j.name = "train".into();
        assert_eq!(p.exemption(&j), None);
        j.comment = "please keep GPU-REAPER:EXEMPT debugging".into();
        assert_eq!(p.exemption(&j).as_deref(), Some("comment marker"));
    }
}
