//! `pstree -p` (psmisc): the process tree, each process as `name(pid)`
//! (its comm, cut to 15 characters: `gunicorn: maste`), a parent's children
//! after it on its line (`───` one child, `─┬─` the first of several) and
//! the rest on the lines below, each under the column of its parent's `┬`
//! (`├─`, the last `└─`, ancestors' `│` before them); `-A` draws the same
//! with `---`, `-+-`, `|-`, `` `- `` and `|`; threads are `{name}(tid)`:
//!
//! ```text
//! init(1)
//!      ├─supervisord(10778)───airflow(20833)───gunicorn: maste(20838)─┬─gunicorn: worke(20852)
//!      │                                                              └─gunicorn: worke(20859)
//! ```
//!
//! Every process is a [`PsRecord`] with its parent (`ppid`): a tree pasted
//! twice, before and after a stop, shows a process that moved to PID 1.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{Facts, PsRecord};
use crate::source::Span;

/// A process or thread: `name(pid)`, `{name}(tid)`, `name(pid,user)` (`-u`).
static NODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<thread>\{)?(?P<name>[^(){}│├└┬─|`+]+?)\}?\((?P<pid>[0-9]+)(?:,[0-9A-Za-z_.-]+)?\)",
    )
    .expect("pstree node regex")
});

/// The tree read so far: the column of each open branch (a `┬` whose
/// children continue below) and whose child its rows are.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    branches: Vec<(usize, u32)>,
    /// The root of the tree (a process at the line's start).
    root: Option<u32>,
    /// The last line read as the tree's: a line after a gap starts over.
    last: Option<Span>,
    /// The root read alone on its line, recorded once a child's row
    /// follows it.
    pending: Option<PsRecord>,
}

fn record(pid: u32, ppid: Option<u32>, cmd: &str, span: Span) -> PsRecord {
    PsRecord {
        pid,
        ppid,
        user: None,
        stat: None,
        started: None,
        elapsed: None,
        cmd: cmd.to_owned(),
        span,
    }
}

/// What joins two processes on a line, and whether it opens a branch.
fn joint(s: &str) -> Option<(usize, bool)> {
    for (j, branch) in [("───", false), ("─┬─", true), ("---", false), ("-+-", true)] {
        if s.starts_with(j) {
            return Some((j.len(), branch));
        }
    }
    None
}

impl Tree {
    /// Whether `text` is a line of a process tree; its processes are
    /// recorded in `facts`.
    pub(crate) fn line(&mut self, text: &str, span: Span, facts: &mut Facts) -> bool {
        let text = text.trim_end();
        if !text.contains('(') {
            return false;
        }
        let follows = self
            .last
            .is_some_and(|l| l.source == span.source && l.line + 1 == span.line);
        if !follows {
            self.branches.clear();
            self.root = None;
            self.pending = None;
        }
        let Some((parent, at)) = self.branch(text, follows) else {
            return false;
        };
        let Some(records) = self.nodes(text, at, parent, span) else {
            return false;
        };
        // The root read alone on the line above, now that a child follows.
        facts.ps.extend(self.pending.take());
        for (pid, ppid, cmd) in records {
            facts.ps.push(record(pid, ppid, &cmd, span));
        }
        self.last = Some(span);
        true
    }

    /// The row's parent, by the branch mark after the ancestors' rules
    /// (`   │   ├─`), and the rest of the row after it; a row with no lead
    /// starts at its root (no parent). `None` when the row is no tree's.
    fn branch<'t>(&mut self, text: &'t str, follows: bool) -> Option<(Option<u32>, &'t str)> {
        let lead_end = text
            .char_indices()
            .find(|(_, c)| !matches!(c, ' ' | '│' | '|'))
            .map_or(text.len(), |(i, _)| i);
        let (lead, rest) = text.split_at(lead_end);
        let col = lead.chars().count();
        // The mark, its column (that of its parent's `┬`), whether it is
        // the last child's, and what follows it. ASCII's `|-` lost its bar
        // to the lead.
        let mark = if let Some(r) = rest.strip_prefix("├─") {
            Some((col, false, r))
        } else if let Some(r) = rest.strip_prefix("└─").or_else(|| rest.strip_prefix("`-")) {
            Some((col, true, r))
        } else if lead.ends_with('|') && rest.starts_with('-') {
            Some((col - 1, false, &rest[1..]))
        } else {
            None
        };
        let Some((mark_col, last, r)) = mark else {
            return lead.is_empty().then_some((None, rest));
        };
        if !follows || self.root.is_none() {
            return None;
        }
        // Deeper branches ended above this row.
        self.branches.retain(|(c, _)| *c <= mark_col);
        let open = self
            .branches
            .iter()
            .find(|(c, _)| *c == mark_col)
            .map(|(_, p)| *p);
        // A root alone on its line: its children's column is the first
        // mark under it.
        let parent = open.or(self.root);
        if open.is_none() {
            self.branches.extend(parent.map(|p| (mark_col, p)));
        }
        if last {
            self.branches.retain(|(c, _)| *c != mark_col);
        }
        Some((parent, r))
    }

    /// The processes of the row from `at` on (`name(pid)` joined by `───`
    /// or `─┬─`), each with its parent, threads (`{name}(tid)`) left out;
    /// the branches the row opens are remembered. `None` when the rest is
    /// not a chain of processes, or when it is a root alone on its line
    /// (kept pending until a child's row follows).
    fn nodes(
        &mut self,
        text: &str,
        mut at: &str,
        mut parent: Option<u32>,
        span: Span,
    ) -> Option<Vec<(u32, Option<u32>, String)>> {
        let mut records = Vec::new();
        let mut first = true;
        loop {
            let c = NODE.captures(at)?;
            let pid = c["pid"].parse::<u32>().ok()?;
            let whole = c.get(0).map_or(0, |m| m.end());
            if first && parent.is_none() {
                // A root: a tree of its own, or PID 1 alone on its line.
                self.branches.clear();
                self.root = None;
                self.pending = None;
                if at[whole..].trim().is_empty() {
                    // Alone on its line, only PID 1 named by one word
                    // (`init(1)`, `systemd(1)`) may start a tree, and it
                    // counts only once a child's row follows (`exit(1)`
                    // alone is code): the line stays a message till then.
                    let name = c["name"].trim();
                    if pid == 1 && !name.contains(char::is_whitespace) {
                        self.root = Some(pid);
                        self.pending = Some(record(pid, None, name, span));
                        self.last = Some(span);
                    }
                    return None;
                }
                self.root = Some(pid);
            }
            first = false;
            if c.name("thread").is_none() {
                records.push((pid, parent, c["name"].trim().to_owned()));
            }
            at = &at[whole..];
            if at.trim().is_empty() {
                return Some(records);
            }
            let (len, branch) = joint(at)?;
            if branch {
                // The `┬` (or `+`): its column, in characters.
                let done = text.len() - at.len();
                let c = text[..done].chars().count() + 1;
                self.branches.push((c, pid));
            }
            parent = Some(pid);
            at = &at[len..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tree;
    use crate::model::Facts;
    use crate::source::{SourceId, Span};

    fn read(text: &str) -> (Vec<bool>, Facts) {
        let mut tree = Tree::default();
        let mut facts = Facts::default();
        let read = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let span = Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                };
                tree.line(l, span, &mut facts)
            })
            .collect();
        (read, facts)
    }

    fn parent(facts: &Facts, pid: u32, nth: usize) -> Option<u32> {
        facts.ps.iter().filter(|p| p.pid == pid).nth(nth)?.ppid
    }

    /// https://github.com/apache/airflow/issues/852 (batch V 1383): the
    /// webserver's tree under supervisord, then its gunicorn master under
    /// init after supervisord stopped the program.
    #[test]
    fn a_tree_pasted_twice_shows_a_process_that_moved_to_init() {
        let text = "init(1)\n     ├─supervisord(10778)───airflow(20833)───gunicorn: maste(20838)─┬─gunicorn: worke(20852)\n     │                                                              ├─gunicorn: worke(20853)\n     │                                                              └─gunicorn: worke(20859)\ninit(1)\n     ├─gunicorn: maste(20838)─┬─gunicorn: worke(20852)\n     │                        └─gunicorn: worke(20859)\n";
        let (read, facts) = read(text);
        // The roots alone on their lines stay messages; every other row is
        // the tree's.
        assert_eq!(read, [false, true, true, true, false, true, true]);
        assert_eq!(parent(&facts, 10778, 0), Some(1));
        assert_eq!(facts.ps.iter().filter(|p| p.pid == 1).count(), 2);
        assert_eq!(parent(&facts, 20833, 0), Some(10778));
        assert_eq!(parent(&facts, 20838, 0), Some(20833));
        assert_eq!(parent(&facts, 20853, 0), Some(20838));
        assert_eq!(parent(&facts, 20859, 0), Some(20838));
        assert_eq!(parent(&facts, 20838, 1), Some(1));
        assert_eq!(parent(&facts, 20859, 1), Some(20838));
        assert!(facts.ps.iter().any(|p| p.cmd == "gunicorn: maste"));
    }

    /// `pstree -pA`: the ASCII rules, threads in braces (not processes).
    #[test]
    fn ascii_trees_and_threads() {
        let text = "systemd(1)-+-ollama(812)-+-{ollama}(813)\n           |             `-ollama(9001)\n           `-sshd(700)\n";
        let (read, facts) = read(text);
        assert!(read.iter().all(|r| *r), "{read:?}");
        assert_eq!(parent(&facts, 812, 0), Some(1));
        assert_eq!(parent(&facts, 9001, 0), Some(812));
        assert_eq!(parent(&facts, 700, 0), Some(1));
        assert!(facts.ps.iter().all(|p| p.pid != 813));
    }

    /// Words with a number in parentheses are no tree, nor is a call
    /// alone on its line (`exit(1)`) with no child's row under it.
    #[test]
    fn prose_with_parentheses_is_not_a_tree() {
        let (read, facts) = read("Loaded model (3) in 2.1s\nfoo(12)\nexit(1)\nprint(x)\n");
        assert_eq!(read, [false, false, false, false]);
        assert!(facts.ps.is_empty());
    }
}
