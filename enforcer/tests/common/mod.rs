//! Helpers shared by the enforcer's integration tests.
#![allow(dead_code)]

pub mod cluster;

use std::path::PathBuf;

/// `../shared` relative to the workspace root, or `None` (test skipped, with a message) when
/// it is absent. With `GPU_REAPER_REQUIRE_SHARED=1` absence is a failure.
pub fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared"));
    if p.join("samples").is_dir() {
        return Some(p);
    }
    if std::env::var("GPU_REAPER_REQUIRE_SHARED").as_deref() == Ok("1") {
        panic!("{} is missing and GPU_REAPER_REQUIRE_SHARED=1", p.display());
    }
    eprintln!(
        "skipped: {} not found (set GPU_REAPER_REQUIRE_SHARED=1 to make this a failure)",
        p.display()
    );
    None
}

/// A sample file's text, raw.
pub fn sample_raw(name: &str) -> Option<String> {
    let p = shared()?.join("samples").join(name);
    Some(std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// A sample file's text with `#` comment lines stripped (samples/README.md conventions).
pub fn sample(name: &str) -> Option<String> {
    sample_raw(name).map(|t| enforcer::parse::strip_comments(&t))
}

/// The fakes directory.
pub fn fakes() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fakes"))
}

/// Writes an executable shell script.
pub fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.display().to_string()
}

/// The fake nvidia-smi of `tests/fakes` with `dir` as its FAKE_DIR (its inputs, `gpus.txt`
/// and `apps.csv`, are the caller's), through a wrapper script, since the daemon passes no
/// environment of its own.
pub fn fake_nvidia_smi(dir: &std::path::Path) -> enforcer::telemetry::NvidiaSmi {
    let fake = fakes().join("nvidia-smi");
    let program = script(
        dir,
        "nvidia-smi-wrapper",
        &format!("FAKE_DIR='{}' exec '{}' \"$@\"", dir.display(), fake.display()),
    );
    enforcer::telemetry::NvidiaSmi::new(program, std::time::Duration::from_secs(5), enforcer::run::KillMode::Ignore)
}

/// The records of `audit.jsonl` in `state_dir` (none when it is absent).
pub fn audit(state_dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(state_dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `MakeWriter` into a shared buffer, for reading what the daemon logs.
#[derive(Clone, Default)]
pub struct LogBuf(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuf {
    /// The text logged since the last call, which it clears.
    pub fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

/// Runs `f` with every event at `level` or above written, without colour, to a buffer; returns
/// what `f` returned and the log text.
pub fn with_log<R>(level: tracing::Level, f: impl FnOnce() -> R) -> (R, String) {
    let buf = LogBuf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    let r = tracing::subscriber::with_default(sub, f);
    let log = String::from_utf8_lossy(&buf.0.lock().unwrap()).into_owned();
    (r, log)
}
