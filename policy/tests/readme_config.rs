//! The `[policy]` block in README.md must parse, validate, and equal the defaults it claims.

use policy::{Policy, PolicyConfig};

#[test]
fn readme_policy_block_is_the_default_config() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```toml\n[policy]").expect("README has a [policy] toml block") + "```toml\n".len();
    let end = start + readme[start..].find("```").expect("block is closed");
    #[derive(serde::Deserialize)]
    struct File {
        policy: PolicyConfig,
    }
    let f: File = toml::from_str(&readme[start..end]).expect("README policy block parses");
    Policy::new(&f.policy).expect("README policy block validates");
    assert_eq!(f.policy, PolicyConfig::default());
}

#[test]
fn every_policy_block_in_the_readme_validates() {
    let readme = include_str!("../../README.md");
    let mut n = 0;
    for (i, _) in readme.match_indices("```toml\n[policy]") {
        let start = i + "```toml\n".len();
        let end = start + readme[start..].find("```").expect("block is closed");
        #[derive(serde::Deserialize)]
        struct File {
            policy: PolicyConfig,
        }
        let f: File = toml::from_str(&readme[start..end]).unwrap_or_else(|e| panic!("README block {n}: {e}"));
        Policy::new(&f.policy).unwrap_or_else(|e| panic!("README block {n}: {e}"));
        n += 1;
    }
    assert!(n >= 2, "the defaults and the recommended configuration");
}
