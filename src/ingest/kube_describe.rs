//! `kubectl describe`'s own layout (kubectl's pkg/describe, `describe.go`:
//! a `PrefixWriter` over a tabwriter): `Key:` and a value at an indentation
//! level of two spaces each, a key alone on its line opening a block
//! (`Containers:`, a container's `  name:`, `Limits:`, `Conditions:`,
//! `Events:`; an empty value, `Reason:\t\t\t\t`, is a key alone too), the
//! conditions' `Type  Status` table and the events' table. Read as a state
//! over the lines of an unknown segment: a describe opens at its first
//! line, `Name:` and a value at the left margin (or `Events:` alone there,
//! a describe pasted from its events on), and ends at a blank line
//! or a line none of its grammars reads. Each grammar is `nom`'s.
//!
//! It makes no fact: the messages the rules ask about (`Restart Count:`, a
//! `Limits:` memory, `Reason: OOMKilled`, `Exit Code: 137`) are catalog rows
//! (`catalogs/stacks-k8s.toml`) kept by the prefilter; here the lines
//! around them are read as what they are.
//!
//! The events table: the columns of kubectl ≥ 1.5 (`Type  Reason  Age  From
//! Message`, padded by spaces) are read by `ingest::tables`' title-case
//! header; this reads the tab-separated ones before it (`FirstSeen
//! LastSeen  Count  From  SubobjectPath  Reason  Message`, kubectl 1.0, as
//! kubernetes/kubernetes#10861 pastes it) and any row under an events
//! header, indented, until the block ends.

use nom::Parser;
use nom::bytes::complete::{take_while, take_while1};
use nom::character::complete::{char, satisfy, space0};
use nom::combinator::{all_consuming, opt, recognize, rest};
use nom::multi::many0;
use nom::sequence::preceded;

/// Where in a describe the last line was.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// No describe open.
    #[default]
    Closed,
    /// `Key: value` lines.
    Fields,
    /// Under `Conditions:`: its `Type  Status` header came, or not yet.
    Conditions { header: bool },
    /// Under `Events:`: its header came, or not yet.
    Events { header: bool },
}

/// The state of one unknown segment's describe.
#[derive(Debug, Default)]
pub(super) struct Describe {
    block: Block,
}

/// A field line: its indentation, key and value (empty for a key alone).
#[derive(Debug, PartialEq, Eq)]
struct Field<'a> {
    indent: usize,
    key: &'a str,
    value: &'a str,
}

type Error<'a> = nom::error::Error<&'a str>;

fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '(' | ')' | '-' | '.' | '/' | '_')
}

/// `Key:` then the end or whitespace and a value: a key is words of
/// [`key_char`]s one space apart, starting with a letter (`Restart Count`,
/// `Image(s)`, `Replication Controllers`, `Node-Selectors`).
fn field(text: &str) -> Option<Field<'_>> {
    let indent = take_while::<_, _, Error<'_>>(|c| c == ' ' || c == '\t');
    let word = recognize((satisfy(|c| c.is_ascii_alphabetic()), take_while(key_char)));
    let key = recognize((word, many0(preceded(char(' '), take_while1(key_char)))));
    let value = opt(preceded(take_while1(|c| c == ' ' || c == '\t'), rest));
    let (_, (indent, key, _, value)) = all_consuming((indent, key, char(':'), value))
        .parse(text)
        .ok()?;
    Some(Field {
        indent: indent.len(),
        key,
        value: value.map_or("", str::trim_end),
    })
}

/// A conditions row: an indented condition type and `True`, `False` or
/// `Unknown` (`  Ready \tFalse `, `  PodScheduled      True`).
fn condition_row(text: &str) -> bool {
    let row = (
        take_while1::<_, _, Error<'_>>(|c| c == ' ' || c == '\t'),
        take_while1(|c: char| c.is_ascii_alphanumeric()),
        take_while1(|c| c == ' ' || c == '\t'),
        take_while1(|c: char| c.is_ascii_alphabetic()),
        space0,
    );
    all_consuming(row)
        .parse(text)
        .is_ok_and(|(_, (_, _, _, status, _))| matches!(status, "True" | "False" | "Unknown"))
}

/// The header of the conditions table: `Type` and `Status` columns.
fn conditions_header(text: &str) -> bool {
    let mut words = text.split_whitespace();
    text.starts_with([' ', '\t'])
        && words.next() == Some("Type")
        && words.next() == Some("Status")
        && words.next().is_none()
}

/// The header of the events table, old (`FirstSeen  LastSeen  Count  From
/// SubobjectPath  Reason  Message`) or new (`Type  Reason  Age  From
/// Message`), and its rule of dashes.
fn events_header(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    text.starts_with([' ', '\t'])
        && (words
            .first()
            .is_some_and(|w| *w == "FirstSeen" || *w == "Type")
            && words.contains(&"Reason")
            && words.last() == Some(&"Message")
            || words.len() >= 3 && words.iter().all(|w| w.bytes().all(|b| b == b'-')))
}

impl Describe {
    /// Whether `text` is a line of the describe in progress, or opens
    /// one; the state follows.
    pub(super) fn read(&mut self, text: &str) -> bool {
        if text.trim().is_empty() {
            self.block = Block::Closed;
            return false;
        }
        let f = field(text);
        if self.block == Block::Closed {
            // A describe opens at its `Name:`, or, pasted cut to its
            // events, at `Events:` alone at the left margin.
            return match f.as_ref().map(|f| (f.indent, f.key, f.value.is_empty())) {
                Some((0, "Name", false)) => {
                    self.block = Block::Fields;
                    true
                }
                Some((0, "Events", true)) => {
                    self.block = Block::Events { header: false };
                    true
                }
                _ => false,
            };
        }
        if let Some(f) = f {
            self.block = match (f.indent, f.key, f.value.is_empty()) {
                (0, "Conditions", true) => Block::Conditions { header: false },
                (0, "Events", true) => Block::Events { header: false },
                _ if f.indent == 0 => Block::Fields,
                _ => self.block,
            };
            return true;
        }
        match self.block {
            Block::Conditions { header: false } if conditions_header(text) => {
                self.block = Block::Conditions { header: true };
                true
            }
            Block::Conditions { header: true } if condition_row(text) => true,
            Block::Events { .. } if events_header(text) => {
                self.block = Block::Events { header: true };
                true
            }
            // An event's row: indented, under the header.
            Block::Events { header: true } if text.starts_with([' ', '\t']) => true,
            // A value continued on the lines below its key (`Labels:` and
            // `Annotations:`' further `key=value`, `Tolerations:`' further
            // taints, `Mounts:`' paths), deep in the padding.
            Block::Fields
                if text.starts_with("      ")
                    && text.split_whitespace().next().is_some_and(|w| {
                        w.contains('=') || w.contains(':') || w.starts_with('/')
                    }) =>
            {
                true
            }
            _ => {
                self.block = Block::Closed;
                false
            }
        }
    }
}

/// A Kubernetes Event object pasted as its fields (core/v1 `Event`, as
/// `kubectl get events -o json` or a CI job's `events.json` holds it,
/// quoted or not, indented or not): it opens at `involvedObject: {` and
/// goes on over `key: value` fields (a string, a number, `{` opening the
/// object's own fields) and the `}` that close them, until any other line.
/// It makes no fact: the event's `reason:` and `message:` are catalog
/// rows kept by the prefilter.
#[derive(Debug, Default)]
pub(super) struct EventObject {
    depth: usize,
    open: bool,
}

impl EventObject {
    /// Whether `text` is a line of the event object in progress, or opens
    /// one.
    pub(super) fn read(&mut self, text: &str) -> bool {
        let t = text.trim();
        let key = |k: &str| t.trim_start_matches('"').starts_with(k);
        if !self.open {
            if key("involvedObject") && t.ends_with('{') {
                (self.open, self.depth) = (true, 1);
                return true;
            }
            return false;
        }
        if matches!(t, "}" | "},") {
            self.depth = self.depth.saturating_sub(1);
            return true;
        }
        let Some((k, v)) = t.split_once(": ") else {
            self.open = false;
            return false;
        };
        let k = k.trim_matches('"');
        let v = v.trim_end_matches(',');
        let is_key = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric());
        let is_value = v == "{"
            || (v.len() >= 2 && v.starts_with('"') && v.ends_with('"'))
            || v.parse::<f64>().is_ok()
            || matches!(v, "true" | "false" | "null");
        if is_key && is_value {
            self.depth += usize::from(v == "{");
            return true;
        }
        self.open = false;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openshift/release#57180 (batch Q 1062), verbatim: one event of the
    /// job's events.json as its author quoted it, every line read.
    #[test]
    fn an_event_objects_fields_are_read() {
        let text = "involvedObject: {\nkind: \"Pod\",\nnamespace: \"ci-op-h615593z\",\nname: \"vllm-build-ibm-dev-cuda-amd64-build\",\nuid: \"9c81ed6b-7f87-4d67-8b9e-ffa175b838df\",\napiVersion: \"v1\",\nresourceVersion: \"3304763294\"\n},\nreason: \"Evicted\",\nmessage: \"The node was low on resource: memory. Threshold quantity: 100Mi, available: 20948Ki. Container docker-build was using 25378008Ki, request is 15234375Ki, has larger consumption of memory. \",";
        let mut e = EventObject::default();
        for line in text.lines() {
            assert!(e.read(line), "{line}");
        }
        // Not without its opening field, and it ends at any other line.
        let mut e = EventObject::default();
        assert!(!e.read("kind: \"Pod\","));
        assert!(e.read("  \"involvedObject\": {"));
        assert!(!e.read("Traceback (most recent call last):"));
        assert!(!e.read("reason: \"Evicted\","));
    }

    /// kubectl 1.0's describe of a pod restarted under a 50Mi limit, as
    /// kubernetes/kubernetes#10861 pastes it (fixtures/real/939): every
    /// line from `Name:` on is read.
    const OLD: &str = "Name:\t\t\t\tsimmemleak-hra99
Namespace:\t\t\tdefault
Image(s):\t\t\tsaadali/simmemleak
Node:\t\t\t\tkubernetes-minion-tf0f/10.240.216.66
Labels:\t\t\t\tname=simmemleak
Status:\t\t\t\tRunning
Reason:\t\t\t\t
Message:\t\t\t
IP:\t\t\t\t10.244.2.75
Replication Controllers:\tsimmemleak (1/1 replicas created)
Containers:
  simmemleak:
    Image:\tsaadali/simmemleak
    Limits:
      cpu:\t\t100m
      memory:\t\t50Mi
    State:\t\tRunning
      Started:\t\tTue, 07 Jul 2015 12:54:41 -0700
    Ready:\t\tFalse
    Restart Count:\t5
Conditions:
  Type\t\tStatus
  Ready \tFalse 
Events:
  FirstSeen\t\t\t\tLastSeen\t\t\tCount\tFrom\t\t\t\t\tSubobjectPath\t\t\t\tReason\t\tMessage
  Tue, 07 Jul 2015 12:53:51 -0700\tTue, 07 Jul 2015 12:53:51 -0700\t1\t{scheduler }\t\t\t\t\t\tscheduled\tSuccessfully assigned simmemleak-hra99 to kubernetes-minion-tf0f
";

    fn unread(text: &str) -> Vec<usize> {
        let mut d = Describe::default();
        text.lines()
            .enumerate()
            .filter(|(_, l)| !d.read(l))
            .map(|(i, _)| i + 1)
            .collect()
    }

    #[test]
    fn an_old_describe_is_read_whole() {
        assert_eq!(unread(OLD), Vec::<usize>::new());
    }

    #[test]
    fn fields_and_tables_have_their_grammar() {
        assert_eq!(
            field("    Restart Count:\t5"),
            Some(Field {
                indent: 4,
                key: "Restart Count",
                value: "5"
            })
        );
        assert_eq!(field("Reason:\t\t\t\t").map(|f| f.value), Some(""));
        assert_eq!(field("  simmemleak:").map(|f| f.key), Some("simmemleak"));
        // Not a field: a time, an exception's message, a URL.
        assert_eq!(field("Dec 06 07:19:51 host kernel: x"), None);
        assert_eq!(field("http://host:8000/v1"), None);
        assert!(condition_row("  Ready \tFalse "));
        assert!(!condition_row("  Ready \tMaybe"));
        assert!(events_header(
            "  Type    Reason   Age   From               Message"
        ));
        assert!(events_header(
            "  ----    ------   ----  ----               -------"
        ));
    }

    /// Nothing opens without `Name:` at the margin, a line no grammar
    /// reads closes the describe, and so does a blank line.
    #[test]
    fn a_describe_opens_and_ends() {
        assert_eq!(unread("Containers:\n  x:\n"), vec![1, 2]);
        let text =
            "Name:         gpu-pod\nStatus:       Running\nRuntimeError: CUDA error\nConditions:\n";
        // A Python exception line is a `Key: value` line in shape: the
        // segment's server parser reads it before this is asked.
        assert_eq!(unread(text), Vec::<usize>::new());
        let text = "Name:         gpu-pod\nsome words here\nConditions:\n";
        assert_eq!(unread(text), vec![2, 3]);
        // A describe cut to its events (fixtures/real 660, 666) opens at
        // `Events:`; a blank line closes it.
        let text = "Name:         gpu-pod\n\nEvents:\n";
        assert_eq!(unread(text), vec![2]);
        let text = "Events:\n  FirstSeen\tLastSeen\tCount\tFrom\tSubobjectPath\tReason\tMessage\n\nEvents: none\n";
        assert_eq!(unread(text), vec![3, 4]);
    }
}
