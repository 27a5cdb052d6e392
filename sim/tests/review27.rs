//! review27: `sim import` when nothing was imported (sim/src/cli/import.rs `no_samples_cause`,
//! 2e3b97c counts MIG series only in the "all rows malformed" branch).

use std::process::Command;

/// A dcgm folder whose page holds MIG series only (a node of MIG GPUs: every series skipped by
/// design, counted as `mig_series_skipped`) and no malformed line: the message is "holds no
/// samples ... (is it empty, or only a header?)" (import.rs:159-160), though the page holds
/// two series, both skipped as MIG. Expected: the MIG series named as why nothing was
/// imported, as the malformed branch now does. (WRONG message; fails.)
#[test]
fn review27_a_page_of_mig_series_only_is_called_empty() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    std::fs::create_dir(d.join("pages")).unwrap();
    std::fs::write(
        d.join("pages/1795946400.prom"),
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",GPU_I_ID=\"1\",Hostname=\"n1\"} 50\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",GPU_I_ID=\"2\",Hostname=\"n1\"} 50\n",
    )
    .unwrap();
    for lenient in [false, true] {
        let mut args = vec!["import", "dcgm", "pages", "--out", "o"];
        if lenient {
            args.push("--lenient");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_sim")).current_dir(d).args(&args).output().unwrap();
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!("lenient {lenient}: status {:?}: {e}", out.status);
        assert!(e.contains("MIG"), "lenient {lenient}: MIG series not named: {e}");
    }
}
