//! The rule catalog. Adding a rule is one file plus one line here; the
//! catalog tests fail when a rule file is missing from this list.

use super::Rule;

pub static RULES: &[&dyn Rule] = &[&super::sglang_unbalanced_memory::RULE];
