//! `sim replay --policy FILE` reads a policy file as the enforcer reads its config file: the
//! same `[policy]` table, an unknown top-level key an error naming it, and a file with no
//! `[policy]` table the default policy, said so. Checked against the enforcer's own loader
//! (`enforcer::config::Config::from_text`), so that a file that replays also works as an
//! enforcer config and the two never drift apart.

use sim::cli::replay;
use std::path::Path;

/// Writes `text` to `dir/name` and returns the path.
fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The enforcer's verdict on `text`, with `[enforcer] node` set when the text has no
/// `[enforcer]` table (so the answer does not depend on this machine's host name): the
/// policy it would run, or its error.
fn enforcer_reads(text: &str) -> Result<policy::PolicyConfig, String> {
    let text = if text.contains("[enforcer]") {
        text.to_string()
    } else {
        format!("{text}\n[enforcer]\nnode = \"gpu001\"\n")
    };
    enforcer::config::Config::from_text(&text, "f.toml")
        .map(|c| c.policy.config().clone())
        .map_err(|e| e.to_string())
}

#[test]
fn replay_accepts_a_policy_file_exactly_when_the_enforcer_does_and_reads_the_same_policy() {
    let d = tempfile::tempdir().unwrap();
    let files = [
        "",
        "[policy]\n",
        "[policy]\nwindow = \"30m\"\n",
        "[policy]\nwindow = \"30m\"\n\n[enforcer]\nnode = \"gpu001\"\n",
        "[enforcer]\nnode = \"gpu001\"\n",
        "[policy]\nutil_threshold_pct = 5\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]\nexempt = { qos = [\"serving\"] }\n",
        "[policy]\n[policy.ceilings]\nspin = \"cancel\"\n[policy.exempt]\nusers = [\"alice\"]\n",
        // The trial's file: policy keys at the top level next to [enforcer].
        "window = \"30m\"\n\n[enforcer]\nnode = \"gpu001\"\n",
        // Policy keys at the top level alone.
        "window = \"40m\"\n",
        // Both forms at once.
        "window = \"40m\"\nwarmup = \"5m\"\n\n[policy]\nwindow = \"20m\"\n",
        // A misspelt table and a misspelt key.
        "[polcy]\nwindow = \"20m\"\n",
        "[policy]\nwindw = \"20m\"\n",
        // Wrong types.
        "policy = 3\n",
        "enforcer = 3\n",
        "[policy]\nwindow = 30\n",
        // Values the policy refuses.
        "[policy]\nwindow = \"0s\"\n",
        "[policy]\nstages = []\n",
        "[policy]\nhung_util_pct = 0\n",
        // Not TOML.
        "[policy\nwindow = \"20m\"\n",
        "[policy]\nwindow = \"20m\"\nwindow = \"30m\"\n",
    ];
    for (i, text) in files.iter().enumerate() {
        let p = write(d.path(), &format!("p{i}.toml"), text);
        let replayed = replay::policy_from_args(Some(&p), None).map(|r| r.policy.config().clone());
        let enforced = enforcer_reads(text);
        match (&replayed, &enforced) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}: replay and the enforcer read different policies"),
            (Err(_), Err(_)) => {}
            _ => panic!(
                "{text:?}: replay {} but the enforcer {}",
                replayed
                    .as_ref()
                    .map_or_else(|e| format!("refuses it ({e:#})"), |_| "accepts it".into()),
                enforced
                    .as_ref()
                    .map_or_else(|e| format!("refuses it ({e})"), |_| "accepts it".into()),
            ),
        }
    }
}

#[test]
fn an_unknown_top_level_key_is_an_error_naming_it_and_the_file() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "p.toml", "window = \"30m\"\n\n[enforcer]\nnode = \"gpu001\"\n");
    let e = format!("{:#}", replay::policy_from_args(Some(&p), None).unwrap_err());
    assert!(e.contains("p.toml") && e.contains("`window`") && e.contains("[policy]"), "{e}");
    let p = write(
        d.path(),
        "p.toml",
        "warmup = \"5m\"\nwindow = \"40m\"\n\n[policy]\nwindow = \"20m\"\n",
    );
    let e = format!("{:#}", replay::policy_from_args(Some(&p), None).unwrap_err());
    assert!(e.contains("p.toml") && e.contains("`warmup`, `window`"), "{e}");
    let p = write(d.path(), "p.toml", "[polcy]\nwindow = \"20m\"\n");
    let e = format!("{:#}", replay::policy_from_args(Some(&p), None).unwrap_err());
    assert!(e.contains("p.toml") && e.contains("`polcy`"), "{e}");
    // A misspelt key inside [policy]: named, with its line and column.
    let p = write(d.path(), "p.toml", "[policy]\nwindw = \"20m\"\n");
    let e = format!("{:#}", replay::policy_from_args(Some(&p), None).unwrap_err());
    assert!(
        e.contains("p.toml") && e.contains("line 2, column 1") && e.contains("`windw`"),
        "{e}"
    );
}

/// Operator trial 19: a policy file's mistakes were named one per run. Each is named, on a
/// line of its own, each line naming the file.
#[test]
fn every_policy_mistake_of_a_file_is_named_at_once() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.toml",
        "[policy]\nidle_power_frac = 0.9\nceilings = { hungg = \"alert\" }\nexempt = { name_regex = \"(\" }\n",
    );
    let e = format!("{:#}", replay::policy_from_args(Some(&p), None).unwrap_err());
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    for (line, key) in lines
        .iter()
        .zip(["policy.idle_power_frac", "policy.ceilings.hungg", "policy.exempt.name_regex"])
    {
        assert!(line.contains("p.toml") && line.contains(&format!("`{key}`")), "{line:?} in {e}");
    }
}

#[test]
fn a_policy_file_with_no_policy_table_replays_the_default_policy_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("empty.toml", ""),
        ("comments.toml", "# nothing here yet\n"),
        ("enforcer.toml", "[enforcer]\nnode = \"gpu001\"\n"),
    ] {
        let p = write(d.path(), name, text);
        let r = replay::policy_from_args(Some(&p), None).unwrap();
        assert_eq!(r.policy.config(), &policy::PolicyConfig::default(), "{name}");
        assert!(
            r.source.contains(name) && r.source.contains("default policy") && r.source.contains("no [policy] table"),
            "{name}: {}",
            r.source
        );
    }
    let r = replay::policy_from_args(Some(Path::new("/dev/null")), None).unwrap();
    assert!(
        r.source.contains("/dev/null") && r.source.contains("default policy"),
        "{}",
        r.source
    );
    // With a [policy] table the file is named alone; with no --policy, the default is said.
    let p = write(d.path(), "p.toml", "[policy]\nwindow = \"30m\"\n");
    let r = replay::policy_from_args(Some(&p), None).unwrap();
    assert!(r.source.ends_with("p.toml") && !r.source.contains("default"), "{}", r.source);
    let r = replay::policy_from_args(None, None).unwrap();
    assert!(
        r.source.contains("default policy") && r.source.contains("no --policy"),
        "{}",
        r.source
    );
}
