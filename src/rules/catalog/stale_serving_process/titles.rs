//! The serving stacks' process titles, program names and default ports, as
//! the rule reads them: the one table is the correlator's
//! (`correlate/serving/programs.rs`), which the inventory's listing of
//! serving processes asks too. The rule's orphan check, its teardown check
//! (engines.rs) and the failed bind's same-server and own-instance checks
//! (address_already_in_use/) read them through here.

pub(crate) use crate::correlate::programs::{
    COMM_LEN, DEFAULT_PORTS, ENGINES, Engine, Role, Spelling, classify, default_port_of,
    defaults_on, is_server, is_worker_title, worker_title,
};
