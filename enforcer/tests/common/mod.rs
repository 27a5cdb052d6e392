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
