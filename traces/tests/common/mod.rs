//! Shared test helpers: the `../shared` folder rule and small trace builders.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared` relative to the workspace root, or `None` (test skipped, reason printed) when it
/// is absent — unless `GPU_REAPER_REQUIRE_SHARED=1`, which makes absence a failure.
pub fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared"));
    if p.join("traces").is_dir() {
        return Some(p);
    }
    if std::env::var("GPU_REAPER_REQUIRE_SHARED").as_deref() == Ok("1") {
        panic!("{} is absent and GPU_REAPER_REQUIRE_SHARED=1", p.display());
    }
    eprintln!(
        "skipped: {} is absent (set GPU_REAPER_REQUIRE_SHARED=1 to fail instead)",
        p.display()
    );
    None
}

/// Writes `jobs` and `samples` CSV text into a fresh temp folder.
pub fn trace_dir(jobs: &str, samples: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("jobs.csv"), jobs).unwrap();
    std::fs::write(d.path().join("samples.csv"), samples).unwrap();
    d
}

pub const JOBS_HEADER: &str = "job_id,user,account,partition,qos,name,comment,start_s,end_s,time_limit_s,gpus,alloc\n";
pub const SAMPLES_HEADER: &str = "t_s,job_id,node,gpu,util_pct,mem_used_mib,mem_total_mib,power_w,power_limit_w,procs,sm_active\n";
