//! The `enforcer` binary: `run`, `check-config`, `parse`, `demo`.

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use enforcer::attribution::ProcFs;
use enforcer::config::{Config, RunMode};
use enforcer::daemon::Daemon;
use enforcer::executor::{Executor, ObserveExecutor, Outcome, RealExecutor, Webhook};
use enforcer::parse::{hostlist, scontrol_node, smi, squeue_format, squeue_json, tres};
use enforcer::plan::Action;
use enforcer::run::KillMode;
use enforcer::slurm::SlurmCli;
use enforcer::telemetry::NvidiaSmi;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Parser)]
#[command(
    name = "enforcer",
    version,
    about = "gpu-reaper's per-node daemon: finds wasted GPU allocations; observe mode by default"
)]
struct Cli {
    /// Log line format (stderr).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    NvidiaSmi,
    ComputeApps,
    SqueueJson,
    Squeue,
    ScontrolNode,
    Tres,
    Hostlist,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon: one cycle every policy.interval.
    Run {
        /// Config file (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Run one cycle and exit.
        #[arg(long)]
        once: bool,
        /// Tests and demos only: use a simulated clock starting at START_S (epoch seconds)
        /// and advancing STEP_S per cycle, without sleeping (START_S from 0 to the end of year
        /// 9999, STEP_S from 1 s to 366 days). Refused with mode = "enforce"
        /// (unless the test-only GPU_REAPER_ALLOW_SIMULATED_ENFORCE=1 is set) and with a
        /// state_dir holding a real-clock run's state.json, and when START_S is earlier than
        /// the saved_s of the state.json it resumes. Without it (the real clock), a state_dir
        /// marked by a simulated run, or a state.json saved later than now + policy.clock_skew,
        /// is refused.
        #[arg(long, value_name = "START_S:STEP_S")]
        simulated_clock: Option<String>,
        /// Stop after this many cycles.
        #[arg(long)]
        cycles: Option<u64>,
    },
    /// Validate a config file (`--config FILE` as for `run`, or FILE); prints the effective
    /// config as TOML.
    // Exactly one of the two forms is required (operator trial 14: clap's usage line, built
    // from `required_unless_present`, read `check-config --config <FILE> [FILE]` when none was
    // given, and `[OPTIONS] [FILE]` in --help, as if --config were required, or nothing).
    #[command(group(clap::ArgGroup::new("config_file").required(true).multiple(false).args(["config", "file"])))]
    CheckConfig {
        /// Config file (TOML), as for `run`.
        #[arg(long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Config file (TOML), the positional form.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Print as JSON exactly what the enforcer reads from a text.
    Parse {
        /// What the text is.
        #[arg(value_enum)]
        kind: Kind,
        /// File to read, or `-` for stdin (the default).
        file: Option<String>,
        /// Column names for headerless nvidia-smi / compute-apps text (required for headerless
        /// nvidia-smi text: the --query-gpu list it was produced with), or the --Format
        /// columns of squeue text. A name within two edits of a field the enforcer reads
        /// (utilisation.gpu) is refused with that field suggested.
        #[arg(long, value_delimiter = ',')]
        columns: Option<Vec<String>>,
    },
    /// Observe mode against the fake squeue, nvidia-smi, scontrol and scancel in
    /// enforcer/tests/fakes, with a simulated clock, showing jobs escalating.
    Demo {
        /// Cycles to run (one simulated minute each).
        #[arg(long, default_value_t = 100)]
        cycles: u64,
    },
}

/// The log's writer: standard error, never failing. A line that cannot be written (whatever
/// read the log went away: EPIPE) is dropped and the daemon goes on (trial 13: the log
/// library reported the failed write on the same closed stderr, which panicked mid-cycle).
struct LogSink;

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

fn init_logging(f: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("GPU_REAPER_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal; the journal and files get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogSink)
        .with_ansi(ansi);
    match f {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Parse { kind, file, columns } => parse_cmd(kind, file, columns),
        cmd => {
            if !matches!(cmd, Cmd::Demo { .. } | Cmd::CheckConfig { .. }) {
                init_logging(cli.log_format);
            }
            match dispatch(cmd) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("enforcer: error: {e:#}");
                    1
                }
            }
        }
    };
    std::process::exit(code);
}

fn dispatch(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::CheckConfig { config, file } => {
            let file = config.or(file).context("check-config: give the config file, --config FILE")?;
            let c = Config::load(&file)?;
            // The environment here may not be the daemon's (the unit's EnvironmentFile), so an
            // unset webhook variable is a warning in check-config; `run` refuses when it matters.
            match c.notice_channel_problem(&|k| std::env::var(k).ok()) {
                Ok(None) => {}
                Ok(Some(w)) => eprintln!("enforcer: warning: {}: {w}", file.display()),
                Err(w) => eprintln!(
                    "enforcer: warning: {}: {w} (`enforcer run` refuses to start like this)",
                    file.display()
                ),
            }
            // check-config runs no Slurm command, so it cannot read NodeHostName: it only
            // compares a written enforcer.node with this host's name (the daemon checks
            // NodeHostName each cycle).
            if let Some(w) = c.node_host_warning(&enforcer::config::short_hostname()) {
                eprintln!("enforcer: warning: {}: {w}", file.display());
            }
            for w in c.warnings() {
                eprintln!("enforcer: warning: {}: {w}", file.display());
            }
            let (errors, warnings) = c.program_checks(std::env::var_os("PATH").as_deref());
            for w in warnings {
                eprintln!("enforcer: warning: {}: {w}", file.display());
            }
            if !errors.is_empty() {
                anyhow::bail!("{}: {}", file.display(), errors.join("; "));
            }
            say(&format!("# {}: valid; node = {:?}", file.display(), c.node));
            say(toml::to_string(&c.effective_file())
                .context("rendering the effective config")?
                .trim_end());
            Ok(())
        }
        Cmd::Demo { cycles } => {
            let mut out = std::io::stdout().lock();
            enforcer::demo::run_demo(cycles, &mut out)
        }
        Cmd::Run {
            config,
            once,
            simulated_clock,
            cycles,
        } => run_daemon(config, once, simulated_clock, cycles),
        Cmd::Parse { .. } => unreachable!("handled in main"),
    }
}

/// Observe or enforce, chosen at start.
enum AnyExecutor {
    Real(RealExecutor<SlurmCli>),
    Observe(ObserveExecutor),
}

impl Executor for AnyExecutor {
    fn execute(&mut self, a: &Action) -> Outcome {
        match self {
            AnyExecutor::Real(e) => e.execute(a),
            AnyExecutor::Observe(e) => e.execute(a),
        }
    }
}

fn epoch_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn run_daemon(path: PathBuf, once: bool, simulated: Option<String>, cycles: Option<u64>) -> anyhow::Result<()> {
    hangup::install();
    let cfg = Config::load(&path)?;
    let e = cfg.enforcer.clone();
    // Before anything is read or written: an enforce run whose only notice channel cannot work
    // would hold every cancel back forever, so it does not start.
    match cfg.notice_channel_problem(&|k| std::env::var(k).ok()) {
        Ok(None) => {}
        Ok(Some(w)) => tracing::warn!(problem = %w, "notice channel will fail"),
        Err(why) => anyhow::bail!("{}: {why}", path.display()),
    }
    for w in cfg.warnings() {
        tracing::warn!(config = %path.display(), problem = %w, "config warning");
    }
    let (errors, warnings) = cfg.program_checks(std::env::var_os("PATH").as_deref());
    for w in warnings {
        tracing::warn!(config = %path.display(), problem = %w, "config warning");
    }
    if !errors.is_empty() {
        anyhow::bail!("{}: {}", path.display(), errors.join("; "));
    }
    let sim = simulated.as_deref().map(parse_simulated_clock).transpose()?;
    if cycles == Some(0) {
        anyhow::bail!("--cycles 0: give at least 1 cycle (or leave --cycles out to run until stopped)");
    }
    // Every cycle's time must exist before the first one runs.
    if let (Some((start, step)), Some(n)) = (sim, if once { Some(1) } else { cycles }) {
        simulated_time(start, step, n - 1)?;
    }
    if sim.is_some() {
        check_simulated_clock_allowed(e.mode, &e.state_dir, std::env::var_os(ALLOW_SIMULATED_ENFORCE_ENV).as_deref())?;
    }
    std::fs::create_dir_all(&e.state_dir).with_context(|| format!("creating state_dir {}", e.state_dir.display()))?;
    // Held for the whole run (dropped when this function returns; the kernel releases it if
    // the process dies). A second `run` on the same state_dir, `--once` included, stops here.
    let lock = enforcer::state::lock_state_dir(&e.state_dir)?;
    // Enforce mode: one enforcing daemon per node, whatever its state_dir (trial 11). Taken
    // after the state_dir lock, so a second run on the same state_dir is told about that.
    let node_lock = match e.mode {
        RunMode::Enforce => Some(enforcer::state::lock_node_for_enforce(&e.enforce_lock_dir, &cfg.node)?),
        RunMode::Observe => None,
    };
    enforcer::state::check_readable(&e.state_dir.join("state.json"))?;
    enforcer::state::check_not_newer(&e.state_dir.join("state.json"))?;
    check_state_clock(
        &e.state_dir,
        sim.map(|(start, _)| start),
        epoch_now(),
        cfg.policy.config().clock_skew.secs(),
    )?;
    if sim.is_some() {
        let marker = e.state_dir.join(SIMULATED_MARKER);
        std::fs::write(&marker, "this state_dir holds state written by enforcer run --simulated-clock\n")
            .with_context(|| format!("writing {}", marker.display()))?;
    }
    let timeout = Duration::from_secs(e.command_timeout.secs() as u64);
    let slurm = SlurmCli {
        squeue: e.squeue.clone(),
        scontrol: e.scontrol.clone(),
        scancel: e.scancel.clone(),
        source: e.job_source,
        timeout,
    };
    let webhook = (!e.webhook_url_env.is_empty()).then(|| Webhook {
        curl: e.curl.clone(),
        url_env: e.webhook_url_env.clone(),
        timeout,
    });
    let executor = match e.mode {
        RunMode::Enforce => AnyExecutor::Real(RealExecutor {
            slurm: slurm.clone(),
            notify_command: e.notify_command.clone(),
            webhook,
            notice_by_webhook: e.notice_by_webhook(),
            timeout,
        }),
        // Observe mode contacts no user: a webhook said to reach users gets nothing, alerts
        // are logged only (a warning at start says so, Config::warnings).
        RunMode::Observe => AnyExecutor::Observe(ObserveExecutor {
            webhook: webhook.filter(|_| e.observe_posts_to_webhook()),
        }),
    };
    let smi = NvidiaSmi {
        program: e.nvidia_smi.clone(),
        timeout: Duration::from_secs(e.nvidia_smi_timeout.secs() as u64),
        kill: KillMode::Kill,
        minor_refused: false,
        mig_refused: false,
        codec_refused: false,
        refused_at_s: None,
        refusals_warned: 0,
    };
    let interval = cfg.policy.config().interval.secs();
    let clock = |i: u64| -> anyhow::Result<i64> {
        match sim {
            None => Ok(epoch_now()),
            Some((start, step)) => simulated_time(start, step, i),
        }
    };
    tracing::info!(mode = e.mode.as_str(), node = %cfg.node, interval_s = interval, simulated_clock = sim.is_some(), "enforcer starting");
    if e.job_source == enforcer::slurm::JobSource::Format {
        tracing::warn!("job_source = \"format\": job comments are not read, so the comment opt-out marker is not seen");
    }
    let proc = Box::new(ProcFs { root: e.proc_root.clone() });
    let mut d = Daemon::new(cfg, slurm, smi, executor, proc, clock(0)?);
    let page = Arc::new(Mutex::new(d.metrics.render()));
    if !e.metrics_listen.is_empty() {
        let addr = enforcer::metrics::serve(&e.metrics_listen, page.clone())
            .with_context(|| format!("binding metrics_listen {}", e.metrics_listen))?;
        tracing::info!(%addr, "metrics page at http://{addr}/metrics");
    }
    let mut i: u64 = 0;
    loop {
        let started = Instant::now();
        // The lock keeps a second enforcer out only while its file is still the one at the
        // path: once removed or replaced (or the state_dir moved), stop rather than share it.
        if !lock.is_current() {
            anyhow::bail!(
                "the state_dir lock file {} was removed or replaced, or the state_dir moved: another enforcer could now take this state_dir, so this one stops; restart it",
                lock.path().display()
            );
        }
        if let Some(l) = node_lock.as_ref().filter(|l| !l.is_current()) {
            anyhow::bail!(
                "the node's enforce lock file {} was removed or replaced: another enforcer could now enforce this node too, so this one stops; restart it",
                l.path().display()
            );
        }
        d.cycle(clock(i)?);
        if let Ok(mut p) = page.lock() {
            *p = d.metrics.render();
        }
        hangup::log_if_received(&path);
        i += 1;
        if once || cycles.is_some_and(|n| i >= n) {
            return Ok(());
        }
        if sim.is_none() {
            // In short steps, so a SIGHUP is answered in the log within a second.
            let until = started + Duration::from_secs(interval as u64);
            while let Some(left) = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
                std::thread::sleep(left.min(Duration::from_millis(500)));
                hangup::log_if_received(&path);
            }
        }
    }
}

/// SIGHUP. Its default action ends the process silently, and systemd counts a death by SIGHUP
/// as a clean exit, so `Restart=on-failure` would not bring the daemon back. Many daemons
/// reload their config on SIGHUP; this one reads its config only at start, so a SIGHUP is
/// logged (saying a restart is needed) and the daemon keeps running with the config it has.
/// SIGTERM and SIGINT keep their default action (the process ends at once; the state file
/// is written atomically, so a stop at any point is safe).
mod hangup {
    use std::sync::atomic::{AtomicBool, Ordering};

    static RECEIVED: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_hangup(_: libc::c_int) {
        // Only an atomic store: async-signal-safe.
        RECEIVED.store(true, Ordering::SeqCst);
    }

    /// Installs the SIGHUP handler (SA_RESTART, so no system call of a cycle fails with EINTR).
    pub fn install() {
        // SAFETY: sigaction with a zeroed struct, an empty mask and a handler that only
        // stores to an atomic; the old action is not needed.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_hangup as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut()) != 0 {
                tracing::warn!(error = %std::io::Error::last_os_error(), "SIGHUP handler not installed; a SIGHUP will end the daemon");
            }
        }
    }

    /// Logs a SIGHUP received since the last call.
    pub fn log_if_received(config: &std::path::Path) {
        if RECEIVED.swap(false, Ordering::SeqCst) {
            tracing::warn!(
                config = %config.display(),
                "SIGHUP received: config reload is not supported; still running with the config read at start. Restart the daemon (systemctl restart gpu-reaper-enforcer) to apply a changed config"
            );
        }
    }
}

/// Test-only environment variable: set to `1` to allow `--simulated-clock` with `mode =
/// "enforce"`. Only the repository's end-to-end tests set it, and only with the fake Slurm
/// and nvidia-smi executables; with real commands a simulated clock would escalate an idle job
/// to a real drain and cancel within seconds.
const ALLOW_SIMULATED_ENFORCE_ENV: &str = "GPU_REAPER_ALLOW_SIMULATED_ENFORCE";

/// File in `state_dir` marking state written under `--simulated-clock`.
const SIMULATED_MARKER: &str = "simulated-clock";

/// Refuses `--simulated-clock` (a) in enforce mode unless `allow` (the value of
/// [`ALLOW_SIMULATED_ENFORCE_ENV`]) is `1`, and (b) when `state_dir` holds a `state.json` not
/// written under a simulated clock (no [`SIMULATED_MARKER`] beside it), so simulated
/// timestamps never mix with a real daemon's state.
fn check_simulated_clock_allowed(mode: RunMode, state_dir: &std::path::Path, allow: Option<&std::ffi::OsStr>) -> anyhow::Result<()> {
    let allowed = allow.is_some_and(|v| v == "1");
    if mode == RunMode::Enforce && !allowed {
        anyhow::bail!(
            "--simulated-clock with mode = \"enforce\": refused (a simulated clock runs cycles back to back, so an idle job would be really drained and cancelled within seconds); use mode = \"observe\", or the `enforcer demo` (only the repository's tests, with fake executables, set {ALLOW_SIMULATED_ENFORCE_ENV}=1)"
        );
    }
    let state = state_dir.join("state.json");
    if state.exists() && !state_dir.join(SIMULATED_MARKER).exists() {
        anyhow::bail!(
            "--simulated-clock: state_dir {} already holds {} written by a real-clock run; refused so simulated timestamps never reach a real daemon's state (use an empty state_dir)",
            state_dir.display(),
            state.display()
        );
    }
    Ok(())
}

/// Refuses to resume a state_dir whose clock does not match this run's, before anything is
/// read or written:
/// - a real-clock run (`simulated_start_s` = `None`) on a state_dir marked by a simulated run
///   ([`SIMULATED_MARKER`]), whatever its `state.json` says, so simulated state and audit
///   records never become a real daemon's;
/// - a real-clock run on a `state.json` whose `saved_s` is later than `now_s + clock_skew_s`
///   (`policy.clock_skew`): its windows and records come from a clock ahead of this one;
/// - a simulated run starting before the `saved_s` of the state it resumes: a simulated
///   clock continues from its state, it never runs backwards.
///
/// A missing or unreadable `state.json` is not refused here (the daemon logs it and starts
/// fresh).
fn check_state_clock(state_dir: &std::path::Path, simulated_start_s: Option<i64>, now_s: i64, clock_skew_s: i64) -> anyhow::Result<()> {
    let marker = state_dir.join(SIMULATED_MARKER);
    let path = state_dir.join("state.json");
    if simulated_start_s.is_none() && marker.exists() {
        anyhow::bail!(
            "state_dir {} was written by `enforcer run --simulated-clock` (marker file {}); a real-clock run refuses it so simulated timestamps and records never become a real daemon's state. Move the state_dir aside (or at least its state.json, audit.jsonl and simulated-clock files), or point state_dir at an empty directory, then start again",
            state_dir.display(),
            marker.display()
        );
    }
    // The daemon loads the file again, and warns about what it leaves out then.
    let saved_s = match enforcer::state::load_quietly(&path) {
        enforcer::state::Loaded::State(s) => s.saved_s,
        _ => return Ok(()),
    };
    match simulated_start_s {
        None if saved_s > now_s.saturating_add(clock_skew_s) => anyhow::bail!(
            "state_dir {}: {} was saved at {saved_s} (epoch s), {} s after this clock's {now_s}, beyond policy.clock_skew ({clock_skew_s} s); refused, so no window or record from a clock ahead of this one is resumed. Check the system clock; if it is right, either wait until the clock passes {saved_s} (the state, with its notices, overrides and budgets, is then resumed; systemd's Restart= retries on its own) or move {} aside and start again (losing them; escalation starts afresh either way)",
            state_dir.display(),
            path.display(),
            saved_s - now_s,
            path.display()
        ),
        Some(start) if start < saved_s => anyhow::bail!(
            "--simulated-clock START_S {start} is earlier than the saved_s {saved_s} of {}: a simulated run continues its state_dir's clock, never runs it backwards. Give START_S {saved_s} or later, or use an empty state_dir",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// The latest `--simulated-clock` START_S: 9999-12-31T23:59:59Z, epoch seconds.
const SIMULATED_START_MAX_S: i64 = 253_402_300_799;

/// The largest `--simulated-clock` STEP_S: 366 days, the longest stage dwell a policy takes.
const SIMULATED_STEP_MAX_S: i64 = 366 * 86_400;

/// Parses `--simulated-clock START_S:STEP_S`: START_S from 0 (1970) to
/// [`SIMULATED_START_MAX_S`] (the end of year 9999), STEP_S from 1 s to
/// [`SIMULATED_STEP_MAX_S`]. Within these bounds no cycle's time can leave i64 (that takes
/// about 290 billion cycles), so a run without `--cycles` is refused here, up front, or never.
fn parse_simulated_clock(s: &str) -> anyhow::Result<(i64, i64)> {
    let (a, b) = s
        .split_once(':')
        .with_context(|| format!("--simulated-clock {s:?}: expected START_S:STEP_S"))?;
    let start = a
        .trim()
        .parse::<i64>()
        .with_context(|| format!("--simulated-clock START_S {a:?}: not a whole number of epoch seconds"))?;
    let step = b
        .trim()
        .parse::<i64>()
        .with_context(|| format!("--simulated-clock STEP_S {b:?}: not a whole number of seconds"))?;
    if step < 1 {
        anyhow::bail!("--simulated-clock STEP_S {step}: must be at least 1 second (the clock must advance)");
    }
    if !(0..=SIMULATED_START_MAX_S).contains(&start) {
        anyhow::bail!(
            "--simulated-clock START_S {start}: must be an epoch second from 0 (1970-01-01) to {SIMULATED_START_MAX_S} (9999-12-31T23:59:59Z)"
        );
    }
    if step > SIMULATED_STEP_MAX_S {
        anyhow::bail!("--simulated-clock STEP_S {step}: must be at most {SIMULATED_STEP_MAX_S} (366 days)");
    }
    Ok((start, step))
}

/// The simulated time of cycle `i`: `start + i * step`, or an error when it leaves i64.
fn simulated_time(start: i64, step: i64, i: u64) -> anyhow::Result<i64> {
    i64::try_from(i)
        .ok()
        .and_then(|i| i.checked_mul(step))
        .and_then(|d| start.checked_add(d))
        .with_context(|| format!("--simulated-clock {start}:{step}: cycle {i} is past the largest representable time"))
}

fn read_input(file: Option<String>) -> anyhow::Result<String> {
    match file.as_deref() {
        None | Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
            Ok(s)
        }
        Some(p) => std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .with_context(|| format!("reading {p}")),
    }
}

fn parse_cmd(kind: Kind, file: Option<String>, columns: Option<Vec<String>>) -> i32 {
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => return print_error(&format!("{e:#}")),
    };
    // Empty text is never an empty list: say what the daemon makes of it.
    if text.trim().is_empty() {
        let what = match kind {
            Kind::NvidiaSmi => Some("nvidia-smi printed nothing; the daemon reads this as no data this cycle (no_gpus), never as idle GPUs"),
            Kind::ComputeApps => Some("nvidia-smi --query-compute-apps printed nothing (not even its header); the daemon reads this as process counts unknown, never as no processes"),
            Kind::Squeue | Kind::SqueueJson => Some("squeue printed nothing; no job was read"),
            _ => None,
        };
        if let Some(w) = what {
            return print_error(&format!("empty input: {w}"));
        }
    }
    let cols: Option<Vec<&str>> = columns.as_ref().map(|c| c.iter().map(String::as_str).collect());
    let read = match kind {
        Kind::NvidiaSmi => &smi::GPU_QUERY[..],
        Kind::ComputeApps => &smi::APPS_QUERY[..],
        _ => &[][..],
    };
    if let Some(e) = cols.iter().flatten().find_map(|c| misspelt_column(c, read)) {
        return print_error(&e);
    }
    let result: Result<serde_json::Value, String> = match kind {
        Kind::NvidiaSmi => {
            let first = text.lines().find(|l| !l.trim().is_empty());
            let header = first.is_none_or(smi::looks_like_header);
            // Headerless rows cannot say which query made them; guessing the enforcer's own
            // list would read another query's columns as the wrong fields.
            if !header && cols.is_none() && smi::no_data(&text).is_none() {
                Err(format!(
                    "headerless nvidia-smi text: give --columns with the --query-gpu list it was produced with (the enforcer's own is {}, or {} where nvidia-smi refuses mig.mode.current, or {} where it refuses minor_number), or keep the header (--format=csv,nounits)",
                    smi::GPU_QUERY.join(","),
                    smi::GPU_QUERY_WITHOUT_MIG.join(","),
                    smi::GPU_QUERY_WITHOUT_MINOR.join(",")
                ))
            } else {
                match smi::parse_gpus(&text, cols.as_deref()) {
                    // As the daemon: a table with no GPU to judge is no data, never idle.
                    Ok(t) => match smi::no_gpus_kind(&t) {
                        Some(k) => Err(format!(
                            "no GPU read ({k}; {} row errors{}): the daemon reads this as no data this cycle, never as idle GPUs",
                            t.row_errors.len(),
                            t.row_errors
                                .first()
                                .map(|e| format!(", first: line {}: {}", e.line, e.problem))
                                .unwrap_or_default()
                        )),
                        None => Ok(to_json(t)),
                    },
                    Err(e) => Err(e.to_string()),
                }
            }
        }
        Kind::ComputeApps => {
            let header = text
                .lines()
                .find(|l| !l.trim().is_empty() && l.trim() != "No running processes found")
                .is_none_or(smi::looks_like_apps_header);
            let c = cols.clone().or_else(|| (!header).then(|| smi::APPS_QUERY.to_vec()));
            smi::parse_apps(&text, c.as_deref()).map(to_json).map_err(|e| e.to_string())
        }
        Kind::SqueueJson => squeue_json::parse(&text).map(to_json).map_err(|e| e.to_string()),
        Kind::Squeue => match cols {
            // Other columns: the rows as they are, no header expected.
            Some(c) => Ok(to_json(squeue_format::parse(&text, &c, &chrono::Local))),
            // The enforcer's own format, read exactly as the daemon reads it: the header line
            // first (a lone header is an empty queue), one CLUSTER: line above it skipped, and
            // anything else no data.
            None => squeue_format::parse_own(&text, &chrono::Local)
                .map(|(read, cluster)| {
                    let mut v = to_json(read);
                    if let Some(c) = cluster {
                        v["cluster_line_skipped"] = serde_json::Value::String(c);
                    }
                    v
                })
                .map_err(|e| format!("no data, as the daemon would read it: {e}")),
        },
        Kind::ScontrolNode => scontrol_node::parse(&text).map(to_json).map_err(|e| e.to_string()),
        Kind::Tres => tres::parse(text.trim()).map(to_json).map_err(|e| e.to_string()),
        Kind::Hostlist => hostlist::parse(text.trim())
            .map(|h| serde_json::json!({ "hosts": h }))
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(v) => {
            say(&serde_json::to_string_pretty(&v).unwrap_or_default());
            0
        }
        Err(e) => print_error(&e),
    }
}

/// Why `--columns` name `c` is refused: it is not one of `read` (the fields the enforcer
/// reads) but within 2 edits of one, so it is most likely a misspelling, and its readings
/// would silently be null. `None` for a field the enforcer reads and for any other name (a
/// field it does not read is read and ignored). The same rule as `sim import nvidia-smi-log`.
fn misspelt_column(c: &str, read: &[&str]) -> Option<String> {
    let c = c.trim();
    if read.contains(&c) {
        return None;
    }
    let (d, meant) = read.iter().map(|k| (strsim::levenshtein(c, k), *k)).min()?;
    (d <= 2).then(|| {
        format!(
            "--columns: {c:?} is not a field the enforcer reads; did you mean {meant:?}? (it reads {})",
            read.join(",")
        )
    })
}

fn to_json<T: serde::Serialize>(v: T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

fn print_error(e: &str) -> i32 {
    say(&serde_json::json!({ "error": e }).to_string());
    2
}

/// Writes a line to stdout. A reader that went away (`| head`) ends the program quietly
/// with status 0 instead of a panic.
fn say(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("enforcer: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
