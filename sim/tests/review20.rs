//! The twentieth adversarial review, sim side.

use std::process::Command;

/// Input: `RAYON_NUM_THREADS=2000 sim sweep ...` (no `--threads`).
///
/// What happens: "sim: error: --threads 2000: at most 1024 worker threads": the error names
/// a flag the user never gave (sim/src/cli/sweep.rs:221), though fd834ef's point was that an
/// environment value is named as such ("RAYON_NUM_THREADS=\"two\": not a thread count").
///
/// What should happen: the error names RAYON_NUM_THREADS, where the 2000 came from.
#[test]
fn a_thread_count_from_rayon_num_threads_is_named_as_such_when_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .current_dir(d.path())
        .env("RAYON_NUM_THREADS", "2000")
        .args(["sweep", "--quiet", "--seeds", "1", "--days", "0.05", "--out", "o"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("RAYON_NUM_THREADS"), "{err}");
    // Operator trial 13: the way out is named, and that it wins over the variable.
    assert!(
        err.contains("give --threads 1024 or fewer, which wins over RAYON_NUM_THREADS"),
        "{err}"
    );
}
