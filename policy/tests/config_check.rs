//! `Policy::check` lists every `[policy]` mistake at once; `Policy::new` refuses with the
//! first of them (operator trials 16 and 19: check-config named one mistake per run).

#![allow(clippy::field_reassign_with_default)]
use policy::{DurationS, Policy, PolicyConfig, StageConfig};
use proptest::prelude::*;

fn stage(after_s: i64, verdict: &str) -> StageConfig {
    StageConfig {
        after: DurationS(after_s),
        verdict: verdict.into(),
    }
}

/// Input: one config with six independent mistakes: a zero `util_threshold_pct`, an
/// `idle_power_frac` above its limit, a repeated exempt user, a stage verdict that is not a
/// verdict, a ceiling for an unknown signature and a regex that does not compile.
/// Expected: `check` names all six keys, in `new`'s order, and `new`'s error is the first.
#[test]
fn every_independent_mistake_is_listed_and_new_gives_the_first() {
    let mut c = PolicyConfig::default();
    c.util_threshold_pct = 0.0;
    c.idle_power_frac = 0.9;
    c.exempt.users = vec!["alice".into(), "ALICE".into()];
    c.stages = vec![stage(0, "alert"), stage(3600, "drian")];
    c.ceilings.insert("hungg".into(), "alert".into());
    c.exempt.name_regex = "(".into();
    let errs = Policy::check(&c);
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "policy.util_threshold_pct",
            "policy.idle_power_frac",
            "policy.exempt.users[1]",
            "policy.stages[1].verdict",
            "policy.ceilings.hungg",
            "policy.exempt.name_regex",
        ]
    );
    assert_eq!(Policy::new(&c).err().as_ref(), errs.first());
}

/// Input: `hung_util_pct` out of range (150) and `starved_mean_util_pct` 20 above
/// `util_threshold_pct` 15. Expected: the range error for hung, the starved-above-threshold
/// error, and no comparison of hung with starved (hung has its own error already).
#[test]
fn a_comparison_is_left_out_when_one_side_is_already_wrong() {
    let mut c = PolicyConfig::default();
    c.hung_util_pct = 150.0;
    c.starved_mean_util_pct = 20.0;
    let errs = Policy::check(&c);
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["policy.hung_util_pct", "policy.starved_mean_util_pct"], "{errs:#?}");
    assert!(errs[0].problem.contains("between 0 and 100"), "{}", errs[0].problem);
    assert!(errs[1].problem.contains("util_threshold_pct"), "{}", errs[1].problem);
}

/// Input: stages `drain` at 0s, `alert` at 10m and a second `drain`. Expected: the repeated
/// verdict is named (with the stage that gave it first); the order check (alert after drain)
/// waits until every stage is valid, so it is not listed too.
#[test]
fn stage_errors_are_listed_each_and_the_order_waits_for_valid_stages() {
    let mut c = PolicyConfig::default();
    c.stages = vec![stage(0, "drain"), stage(600, "alert"), stage(900, "drain"), stage(-5, "cancel")];
    let errs = Policy::check(&c);
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["policy.stages[2].verdict", "policy.stages[3].after"], "{errs:#?}");
    assert!(
        errs[0].problem.contains("policy.stages[0] already gives drain"),
        "{}",
        errs[0].problem
    );
    c.stages.truncate(2);
    let errs = Policy::check(&c);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].key, "policy.stages");
}

proptest! {
    /// For any mix of valid and invalid values, `check` is empty exactly when `new` accepts,
    /// and otherwise its first error is `new`'s.
    #[test]
    fn check_agrees_with_new(
        util in prop_oneof![Just(15.0), -5.0..120.0f64],
        hung in prop_oneof![Just(1.0), -1.0..20.0f64],
        starved in prop_oneof![Just(10.0), 0.0..30.0f64],
        idle_frac in prop_oneof![Just(0.25), 0.0..1.2f64],
        window_s in prop_oneof![Just(1200i64), -60..4000i64],
        gap_s in prop_oneof![Just(180i64), 0..1500i64],
        stage_v in prop_oneof![Just("drain"), Just("alert"), Just("nope"), Just("cancel")],
        stage_after in prop_oneof![Just(3600i64), -10..7200i64],
        ceiling in prop_oneof![Just(("hung", "alert")), Just(("hungry", "alert")), Just(("idle", "kill"))],
        regex in prop_oneof![Just(""), Just("^tmp"), Just("(")],
    ) {
        let mut c = PolicyConfig::default();
        c.util_threshold_pct = util;
        c.hung_util_pct = hung;
        c.starved_mean_util_pct = starved;
        c.idle_power_frac = idle_frac;
        c.window = DurationS(window_s);
        c.max_sample_gap = DurationS(gap_s);
        c.stages = vec![stage(0, "alert"), stage(stage_after, stage_v)];
        c.ceilings.insert(ceiling.0.into(), ceiling.1.into());
        c.exempt.name_regex = regex.into();
        let errs = Policy::check(&c);
        match Policy::new(&c) {
            Ok(_) => prop_assert!(errs.is_empty(), "{errs:#?}"),
            Err(e) => prop_assert_eq!(Some(&e), errs.first()),
        }
    }
}
