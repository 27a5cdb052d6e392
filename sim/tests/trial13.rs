//! trial13 (operator trial, 2026-11-30): `sim replay --interval 5m` with a policy whose
//! max_sample_gap is the default 3m is refused with a message that blames the policy (file or
//! default) and calls the flag's 5m `policy.interval`, while the policy's own interval is 60s.
//! Expected: the flag named as the source, as `--interval 25m` is ("--interval 25m: is longer
//! than policy.window"). Fails as reported.

use sim::cli::replay;

#[test]
fn an_interval_flag_above_max_sample_gap_is_blamed_on_the_flag() {
    let e = format!("{:#}", replay::policy_from_args(None, Some("5m")).unwrap_err());
    assert!(
        e.contains("--interval"),
        "the refusal should name --interval, the value the operator gave; got: {e}"
    );
}
