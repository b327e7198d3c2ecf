//! Which kept lines are messages of the upstream catalogs
//! ([`crate::catalogs`]): each line is matched once here, and rules ask by
//! row id.

use crate::catalogs::{Hit, catalogs};
use crate::model::Message;

/// A kept line that is an instance of a catalog row (or of a wrapper whose
/// code no row knows).
#[derive(Debug, Clone)]
pub struct Known {
    /// Its index in `Facts::messages`.
    pub message: usize,
    pub hit: Hit<'static>,
}

/// Every catalog hit of every kept line, in input order.
pub fn match_messages(messages: &[Message]) -> Vec<Known> {
    let all = catalogs();
    messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            all.hits(&m.text)
                .into_iter()
                .map(move |hit| Known { message: i, hit })
        })
        .collect()
}
