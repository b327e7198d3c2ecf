//! A serving control plane's instance table, read by its header: a table
//! drawn in text (a Markdown table, a `+---+` box) whose titles name an
//! instance, its port and its state or worker (GPUStack's model instances:
//! `| name | worker_name | … | port | state | … |`). Each row becomes an
//! [`InstanceRow`]: what the control plane believes runs, which a rule
//! compares with the serving processes a process listing shows.

use crate::model::{Facts, InstanceRow};
use crate::source::Span;

/// Where an instance table keeps the cells a rule compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Columns {
    name: usize,
    port: usize,
    state: Option<usize>,
    worker: Option<usize>,
    cells: usize,
}

/// The cells of a `| a | b |` row, trimmed.
pub(crate) fn cells(row: &str) -> Vec<&str> {
    row.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

/// The columns of an instance table when `header` is one: a `name`, a
/// `port`, and a `state`/`status` or a `worker`/`worker_name`/`node`.
pub(crate) fn columns(header: &str) -> Option<Columns> {
    let titles: Vec<String> = cells(header)
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    let at = |names: &[&str]| titles.iter().position(|t| names.contains(&t.as_str()));
    let name = at(&["name", "instance", "instance_name"])?;
    let port = at(&["port"])?;
    let state = at(&["state", "status"]);
    let worker = at(&["worker_name", "worker", "node"]);
    (state.is_some() || worker.is_some()).then_some(Columns {
        name,
        port,
        state,
        worker,
        cells: titles.len(),
    })
}

/// Records `row` as an instance when it has the header's cells.
pub(crate) fn row(columns: &Columns, row: &str, span: Span, facts: &mut Facts) {
    let cells = cells(row);
    if cells.len() != columns.cells {
        return;
    }
    let name = cells[columns.name];
    if name.is_empty() || name.bytes().all(|b| b == b'-' || b == b':') {
        return;
    }
    let text = |at: Option<usize>| {
        at.map(|i| cells[i])
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
    };
    facts.instances.push(InstanceRow {
        name: name.to_owned(),
        worker: text(columns.worker),
        port: cells[columns.port].parse().ok(),
        state: text(columns.state),
        span,
    });
}

#[cfg(test)]
mod tests {
    use super::{columns, row};
    use crate::model::Facts;
    use crate::source::{SourceId, Span};

    /// fixtures/real/504 (gpustack/gpustack#2595): the header and a row of
    /// the reporter's instance table.
    #[test]
    fn gpustacks_instance_table_is_read_by_its_header() {
        let header = "  | source     | name                                   | worker_name | worker_ip   | port  | state   | state_message                        | model_name                       | id   | created_at          | updated_at          | gpu_indexes              |";
        let cols = columns(header).expect("an instance table");
        let mut facts = Facts::default();
        row(
            &cols,
            "  | LOCAL_PATH | Qwen/Qwen3-32B-20VvO                   | worker1     | 172.18.19.1 | 40058 | RUNNING |                                      | Qwen/Qwen3-32B                   | 192  | 2025-06-07 07:29:34 | 2025-06-07 07:32:28 | [0, 1, 2, 3, 4, 5, 6, 7] |",
            Span {
                source: SourceId(0),
                line: 3,
            },
            &mut facts,
        );
        let r = &facts.instances[0];
        assert_eq!(r.name, "Qwen/Qwen3-32B-20VvO");
        assert_eq!(r.port, Some(40058));
        assert_eq!(r.state.as_deref(), Some("RUNNING"));
        assert_eq!(r.worker.as_deref(), Some("worker1"));
        // The separator and a short row are no instances.
        row(
            &cols,
            "  | ---------- | --- |",
            Span {
                source: SourceId(0),
                line: 2,
            },
            &mut facts,
        );
        assert_eq!(facts.instances.len(), 1);
    }

    #[test]
    fn other_tables_are_not_instance_tables() {
        // Triton's model listing: no port.
        assert!(columns("| Model | Version | Status |").is_none());
        // A name and a port alone say nothing of an instance's state.
        assert!(columns("| name | port |").is_none());
        assert!(columns("| NAME | NODE | PORT | STATUS |").is_some());
    }
}
