//! The rule catalog's version for `--version`: the number of built-in rules
//! and a fingerprint of their ids, conditions' documentation and summaries,
//! so two binaries that diagnose differently never claim the same catalog.
//! Computed, not written by hand: a rule added or changed in parallel
//! cannot forget to bump it.

use super::RULES;

/// `18 rules, 5f0c2a91d3e4b7a6`.
pub fn catalog_version() -> String {
    // FNV-1a, 64 bits: stable across Rust releases, unlike `DefaultHasher`.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |text: &str| {
        for b in text.bytes().chain([0]) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut metas: Vec<_> = RULES.iter().map(|r| r.meta()).collect();
    metas.sort_by_key(|m| m.id);
    for m in &metas {
        feed(m.id);
        feed(m.category.name());
        feed(m.severity.name());
        feed(m.summary);
        feed(m.doc);
    }
    format!("{} rules, {hash:016x}", metas.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalog_version_counts_the_rules() {
        let v = super::catalog_version();
        assert!(
            v.starts_with(&format!("{} rules, ", super::RULES.len())),
            "{v}"
        );
        assert_eq!(v, super::catalog_version());
    }
}
