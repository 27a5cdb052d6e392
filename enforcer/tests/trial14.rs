//! trial14 (operator trial): `enforcer check-config` with no file printed
//! `Usage: enforcer check-config --config <FILE> [FILE]` and "required: --config <FILE>", as if
//! `--config` were required (the positional FILE works as well), while `--help` showed
//! `[OPTIONS] [FILE]`, as if neither were. What it does: exactly one of `--config FILE` and
//! `FILE` is required. The usage line and the error now say that.

use std::process::Command;

fn enforcer(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_enforcer")).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const USAGE: &str = "enforcer check-config <--config <FILE>|FILE>";

#[test]
fn check_config_usage_says_one_of_config_or_file_is_required() {
    let (code, help, _) = enforcer(&["check-config", "--help"]);
    assert_eq!(code, Some(0));
    let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap_or("");
    assert!(usage.contains("<--config <FILE>|FILE>"), "{usage}\n{help}");
    assert!(
        !usage.contains("[FILE]"),
        "FILE is not optional when --config is not given: {usage}"
    );
    // Neither form alone is presented as the required one.
    assert!(!usage.contains("check-config --config"), "{usage}");

    // No file: the error names both forms as the one thing missing.
    let (code, _, e) = enforcer(&["check-config"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("required arguments were not provided") && e.contains("<--config <FILE>|FILE>"),
        "{e}"
    );
    assert!(e.contains(USAGE), "{e}");

    // Both forms at once: refused, naming both.
    let (code, _, e) = enforcer(&["check-config", "a.toml", "--config", "b.toml"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("[FILE]") && e.contains("--config <FILE>") && e.contains("cannot be used with"),
        "{e}"
    );

    // Either form alone reaches the file (here: a missing one, named).
    for args in [
        &["check-config", "/nonexistent/x.toml"][..],
        &["check-config", "--config", "/nonexistent/x.toml"],
    ] {
        let (code, _, e) = enforcer(args);
        assert_eq!(code, Some(1), "{args:?}: {e}");
        assert!(e.contains("/nonexistent/x.toml") && e.contains("No such file"), "{args:?}: {e}");
    }
}

/// A config file that cannot be read is named with the reason, and no made-up key (it said
/// "/nonexist: `file`: No such file or directory").
#[test]
fn an_unreadable_config_file_is_named_without_a_key() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["check-config", "/nonexistent/gpu-reaper.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("/nonexistent/gpu-reaper.toml: cannot read the config file: No such file or directory"),
        "{err}"
    );
    assert!(!err.contains('`'), "a key was named: {err}");
}
