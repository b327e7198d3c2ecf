//! Tables drawn in text, read by their header whatever their columns: the
//! boxes `dcgmi` (discovery, health, diag), Triton's model and backend
//! listings and GPUStack's CLI draw (`+----+----+` borders, `| a | b |`
//! rows), Markdown tables (`|---|---|` under the header), and `dcgmi
//! dmon`'s columns (`#Entity  XIDER`, `ID`, then `GPU 1  120`). A row is
//! read when a border, a separator or a header of its table came first and
//! it has as many cells as its header; a lone `| x |` line is not a table.

use std::sync::LazyLock;

use regex::Regex;

/// `+----+---+`, `+====+`, `|----|:---:|`.
static BORDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:\+[-=+]{3,}\+|\|(?:\s*:?-{3,}:?\s*\|)+)\s*$").expect("table border regex")
});

/// `dcgmi dmon`'s header (`#Entity   XIDER   POWER`) and entity rows.
static DMON_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^#Entity(?:\s+[A-Z0-9_]+)+\s*$").expect("dmon header regex"));
static DMON_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:GPU|GPU-I|GPU-CI|Switch|Link|CPU|CPU-Core)\s+[0-9]+(?:\s+(?:-?[0-9.]+|N/A|[A-Z_]+))+\s*$")
        .expect("dmon row regex")
});

/// A table in progress: how many cells its rows have (0 before a header
/// row), or `dcgmi dmon`'s columns.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    open: Option<Open>,
}

#[derive(Debug, Clone, Copy)]
enum Open {
    Box { cells: usize },
    Dmon { columns: usize },
}

impl Tables {
    /// Whether `text` is a line of a table this reader is in (or opens
    /// one); any other line closes it.
    pub(crate) fn read(&mut self, text: &str) -> bool {
        let t = text.trim();
        let first = t.as_bytes().first().copied();
        match first {
            Some(b'+' | b'|') => {
                if BORDER.is_match(t) {
                    if self.open.is_none() {
                        self.open = Some(Open::Box { cells: 0 });
                    }
                    return true;
                }
                let cells = cells(t);
                match self.open {
                    Some(Open::Box { cells: 0 }) if cells >= 2 => {
                        self.open = Some(Open::Box { cells });
                        true
                    }
                    // A cell may hold a `|` of its own, or a wrapped line
                    // leave one empty: a row is within one of its header.
                    Some(Open::Box { cells: n }) if cells >= 2 && cells.abs_diff(n) <= 1 => true,
                    _ => {
                        // A header row opens a Markdown table only with its
                        // separator below: remember it as a candidate.
                        self.open = (cells >= 2).then_some(Open::Box { cells: 0 });
                        false
                    }
                }
            }
            Some(b'#') if DMON_HEADER.is_match(t) => {
                self.open = Some(Open::Dmon {
                    columns: t.split_whitespace().count(),
                });
                true
            }
            _ => match self.open {
                Some(Open::Dmon { columns }) => {
                    let ok = t == "ID"
                        || (DMON_ROW.is_match(t) && t.split_whitespace().count() == columns + 1);
                    if !ok {
                        self.open = None;
                    }
                    ok
                }
                _ => {
                    self.open = None;
                    false
                }
            },
        }
    }
}

/// The cells of `| a | b |` (or `a | b`, a Markdown row without its outer bars).
fn cells(row: &str) -> usize {
    let inner = row.trim_start_matches('|').trim_end_matches('|');
    inner.split('|').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Vec<bool> {
        let mut tables = Tables::default();
        text.lines().map(|l| tables.read(l)).collect()
    }

    /// `dcgmi discovery -l` as the DCGM user guide prints it ("Getting
    /// Started", verifying the installation; cut after the first GPU), then
    /// text that is no table. The `dmon` block is written to the shape
    /// dcgmi dmon prints (a `#Entity` header of field tags, `ID`, one row
    /// per entity), not copied.
    #[test]
    fn tables_are_read_from_their_first_border_or_header() {
        let got = read_all(
            "\
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: A100-SXM4-40GB                                                 |
|        | PCI Bus ID: 00000000:07:00.0                                         |
|        | Device UUID: GPU-1d82f4df-3cf9-150d-088b-52f18f8654e1                |
+--------+----------------------------------------------------------------------+
a sentence after it
| lone | row |
",
        );
        assert_eq!(
            got,
            [true, true, true, true, true, true, true, false, false]
        );
        let got = read_all(
            "\
#Entity   SMACT         SMOCC         TENSO         DRAMA
ID
GPU 0     0.000         0.000         0.000         0.000
GPU 1     0.000         0.000         0.000         0.000
done
",
        );
        assert_eq!(got, [true, true, true, true, false]);
        // A Markdown table: the header counts once its separator is seen.
        let got = read_all("| Model | Version | Status |\n|---|---|---|\n| a | 1 | READY |\n");
        assert_eq!(got, [false, true, true]);
    }
}
