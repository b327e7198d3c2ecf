//! The built-in rule catalog: one file per rule, listed here once. The
//! catalog tests fail when a file in this folder is missing from `RULES` or
//! its id does not match its file name.

mod sglang_unbalanced_memory;

use super::Rule;

/// Every built-in rule, in id order.
pub static RULES: &[&dyn Rule] = &[&sglang_unbalanced_memory::RULE];
