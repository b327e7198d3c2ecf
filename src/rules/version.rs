//! The rule catalog's version for `--version`: the number of built-in rules
//! and a fingerprint of their ids, conditions' documentation and summaries,
//! so two binaries that diagnose differently never claim the same catalog.
//! Computed, not written by hand: a rule added or changed in parallel
//! cannot forget to bump it.

use std::hash::Hasher as _;

use super::RULES;

/// `18 rules, 5f0c2a91d3e4b7a6`.
pub fn catalog_version() -> String {
    // FNV-1a, 64 bits: stable across Rust releases, unlike `DefaultHasher`.
    // Each text ends in a NUL, so ("ab", "c") and ("a", "bc") differ.
    let mut hash = fnv::FnvHasher::default();
    let mut feed = |text: &str| {
        hash.write(text.as_bytes());
        hash.write_u8(0);
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
    format!("{} rules, {:016x}", metas.len(), hash.finish())
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
