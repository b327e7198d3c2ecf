//! `docker inspect` (and `docker container inspect`, and `-f '{{json
//! .State}}'` pretty-printed by `jq` or `python -m json.tool`): JSON
//! printed one member or element a line, as Go's `json.MarshalIndent`
//! prints it. Each line is read by its grammar (a `"key": ` and the start
//! of a value, or a closing bracket), the path of keys above it kept, so
//! that a paste cut anywhere is read from its first whole line. A
//! container object becomes a [`ContainerState`]: moby's
//! `api/types/container` `ContainerState` (`Status`, `Running`,
//! `OOMKilled`, `Dead`, `Pid`, `ExitCode`, `Error`, `StartedAt`,
//! `FinishedAt`), `Path`/`Args` or `Config.Cmd`, `Config.Image`,
//! `HostConfig.Runtime` and `HostConfig.DeviceRequests`' GPUs
//! (`DeviceIDs`, or `Count`: -1 is `--gpus all`). An object is a
//! container's only where a key only Docker prints is in it (`OOMKilled`,
//! `FinishedAt`, `HostConfig`, `DeviceRequests`, a `State` object):
//! another tool's `"Status"` makes no record. The `"OOMKilled": true` line
//! itself is a catalog row (`stacks-containers.inspect-state-oomkilled`),
//! which rules ask.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, multispace0, space0};
use nom::combinator::{opt, recognize, value};
use nom::sequence::{delimited, preceded};

use crate::model::{ContainerState, Facts};
use crate::source::Span;

/// What a line of pretty-printed JSON holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    /// `{` or `[`: an object or array opens; its members follow.
    Open(bool),
    /// `{}`, `[]`, or a scalar: the raw JSON text of a string, number,
    /// `true`, `false`, `null`.
    Done(&'a str),
}

/// One line: its key (a member's), its value, or neither (a closing
/// bracket, `}` / `],`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct JsonLine<'a> {
    key: Option<&'a str>,
    value: Option<Value<'a>>,
    /// Brackets closed after the value (`}`, `]`, `},`).
    closes: usize,
}

type Res<'a, T> = nom::IResult<&'a str, T>;

/// A JSON string with its quotes, escapes left as printed.
fn string(i: &str) -> Res<'_, &str> {
    recognize((
        char('"'),
        nom::multi::many0_count(alt((
            take_while1(|c| c != '"' && c != '\\'),
            recognize((char('\\'), nom::character::complete::anychar)),
        ))),
        char('"'),
    ))
    .parse(i)
}

fn scalar(i: &str) -> Res<'_, &str> {
    alt((
        string,
        tag("true"),
        tag("false"),
        tag("null"),
        recognize((
            opt(char('-')),
            take_while1(|c: char| c.is_ascii_digit()),
            take_while(|c: char| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')),
        )),
    ))
    .parse(i)
}

fn json_value(i: &str) -> Res<'_, Value<'_>> {
    alt((
        value(Value::Done("{}"), (char('{'), space0, char('}'))),
        value(Value::Done("[]"), (char('['), space0, char(']'))),
        value(Value::Open(false), char('{')),
        value(Value::Open(true), char('[')),
        scalar.map(Value::Done),
    ))
    .parse(i)
}

/// A whole line of pretty-printed JSON (leading white space already
/// trimmed); `None` for anything else.
fn json_line(t: &str) -> Option<JsonLine<'_>> {
    let key = opt((string, delimited(space0, char(':'), space0)).map(|(k, _)| k));
    let closers = nom::multi::many0_count(preceded(space0, alt((char('}'), char(']')))));
    let mut line = (
        key,
        opt(json_value),
        closers,
        opt(preceded(space0, char(','))),
        multispace0,
    );
    let (rest, (key, value, closes, _, _)) = line.parse(t).ok()?;
    // A key needs a value; a line needs something.
    if !rest.is_empty() || (key.is_some() && value.is_none()) || (value.is_none() && closes == 0) {
        return None;
    }
    Some(JsonLine {
        key: key.map(|k| &k[1..k.len() - 1]),
        value,
        closes,
    })
}

/// Whether `t` (trimmed) is a line of pretty-printed JSON.
#[cfg(test)]
pub(crate) fn is_json_line(t: &str) -> bool {
    json_line(t).is_some()
}

/// An object or array open above the current line: its key, whether an
/// array.
#[derive(Debug)]
struct Level {
    key: Option<String>,
    array: bool,
}

/// The sections of a container object whose fields are read.
const SECTIONS: [&str; 3] = ["State", "Config", "HostConfig"];

/// The `State` fields whose lines a record keeps.
const STATE_FIELDS: [&str; 9] = [
    "Status",
    "Running",
    "OOMKilled",
    "Dead",
    "Pid",
    "ExitCode",
    "Error",
    "StartedAt",
    "FinishedAt",
];

/// One JSON document being read line by line.
#[derive(Debug, Default)]
pub(crate) struct Doc {
    stack: Vec<Level>,
    /// The container object being read: its record (pushed to the facts
    /// once it is a container's, at `pushed`), the depth of its object.
    current: Option<(ContainerState, usize)>,
    pushed: Option<usize>,
    /// Only Docker prints a key the current object holds.
    docker: bool,
    /// `Config.Cmd`'s words: the command where `Path` and `Args` are not
    /// shown.
    cmd: Vec<String>,
}

impl Doc {
    /// Reads one line (trimmed); false when it is not a line of
    /// pretty-printed JSON.
    pub(crate) fn line(&mut self, t: &str, span: Span, facts: &mut Facts) -> bool {
        let Some(line) = json_line(t) else {
            return false;
        };
        if let Some(key) = line.key {
            self.field(key, line.value, span, facts);
        } else if let Some(Value::Done(raw)) = line.value {
            self.element(raw, facts);
        }
        // Every line of the object is its (a paste may stop anywhere).
        if let Some((record, _)) = self.current.as_mut() {
            record.end = span;
            if let Some(stored) = self.pushed.and_then(|i| facts.containers.get_mut(i)) {
                stored.end = span;
            }
        }
        if let Some(Value::Open(array)) = line.value {
            // A document's own object (`{{json .State}}`), or an element of
            // `docker inspect`'s list, may be a container.
            let top = self.stack.is_empty() && line.key.is_none();
            if self.current.is_none() && !array && (top || self.in_container_list()) {
                self.begin(span, self.stack.len() + 1);
            }
            self.stack.push(Level {
                key: line.key.map(str::to_owned),
                array,
            });
        }
        for _ in 0..line.closes {
            self.stack.pop();
            if self
                .current
                .as_ref()
                .is_some_and(|(_, depth)| self.stack.len() < *depth)
            {
                self.end(facts);
            }
        }
        true
    }

    /// Whether the open level is the top array of `docker inspect`'s
    /// output, whose elements are containers.
    fn in_container_list(&self) -> bool {
        matches!(
            self.stack.as_slice(),
            [Level {
                key: None,
                array: true
            }]
        )
    }

    fn begin(&mut self, span: Span, depth: usize) {
        self.current = Some((ContainerState::new(span), depth));
        self.pushed = None;
        self.docker = false;
        self.cmd.clear();
    }

    fn end(&mut self, facts: &mut Facts) {
        self.store(facts);
        self.current = None;
        self.pushed = None;
        self.docker = false;
    }

    /// Puts the record in the facts once it is a container's, and keeps it
    /// there up to date.
    fn store(&mut self, facts: &mut Facts) {
        let Some((record, _)) = &self.current else {
            return;
        };
        if !self.docker {
            return;
        }
        let mut record = record.clone();
        if record.command.is_empty() {
            record.command.clone_from(&self.cmd);
        }
        match self.pushed {
            Some(i) if i < facts.containers.len() => facts.containers[i] = record,
            _ => {
                self.pushed = Some(facts.containers.len());
                facts.containers.push(record);
            }
        }
    }

    /// The section (`State`, `Config`, `HostConfig`) the open level is in,
    /// and how deep below it; `None` for the container object's own level.
    fn section(&self) -> Option<(&str, usize)> {
        let base = self.current.as_ref().map_or(0, |(_, d)| *d);
        let level = self.stack.get(base)?;
        let key = level.key.as_deref()?;
        SECTIONS
            .contains(&key)
            .then_some((key, self.stack.len() - base - 1))
    }

    fn field(&mut self, key: &str, value: Option<Value<'_>>, span: Span, facts: &mut Facts) {
        if self.current.is_none() {
            // A cut paste, or `{{json .State}}`: the object of this line is
            // the container's, or its State.
            self.begin(span, self.stack.len());
        }
        let depth = self.current.as_ref().map_or(0, |(_, d)| *d);
        // The container object's own fields, or its State's.
        let own = self.stack.len() == depth;
        let section = self.section().map(|(s, below)| (s.to_owned(), below));
        let state = own
            || section
                .as_ref()
                .is_some_and(|(s, b)| s == "State" && *b == 0);
        let in_request = self.stack.last().is_some_and(|l| l.key.is_none());
        let raw = match value {
            Some(Value::Done(raw)) => Some(raw),
            _ => None,
        };
        let text = raw.and_then(decode);
        let flag = raw.and_then(|r| r.parse::<bool>().ok());
        let Some((record, _)) = self.current.as_mut() else {
            return;
        };
        if state {
            if let Some(k) = STATE_FIELDS.iter().find(|k| **k == key) {
                record.lines.push((k, span));
            }
        }
        let place = section.as_ref().map(|(s, b)| (s.as_str(), *b));
        match (place, key) {
            (None, "Id") if own => record.id = text,
            (None, "Name") if own => record.name = text,
            (None, "Path") if own => record.command.insert(0, text.unwrap_or_default()),
            (None, "Image") if own && record.image.is_none() => record.image = text,
            (None, "State" | "HostConfig") if own => self.docker = true,
            (Some(("Config", 0)), "Image") => record.image = text,
            (Some(("HostConfig", 0)), "Runtime") => record.runtime = text,
            (Some(("HostConfig", 0)), "DeviceRequests") => self.docker = true,
            (Some(("HostConfig", 2)), "Count") if in_request => {
                match raw.and_then(|r| r.parse::<i64>().ok()) {
                    Some(-1) => record.gpus.push("all".to_owned()),
                    Some(n) if n > 0 => record.gpus.push(n.to_string()),
                    _ => {}
                }
            }
            (_, "Status") if state => record.status = text,
            (_, "Running") if state => record.running = flag,
            (_, "Dead") if state => record.dead = flag,
            (_, "OOMKilled") if state => {
                record.oom_killed = flag;
                self.docker = true;
            }
            (_, "Pid") if state => record.pid = raw.and_then(|r| r.parse().ok()),
            (_, "ExitCode") if state => record.exit_code = raw.and_then(|r| r.parse().ok()),
            (_, "Error") if state => record.error = text.filter(|e| !e.is_empty()),
            (_, "StartedAt") if state => record.started_at = text,
            (_, "FinishedAt") if state => {
                record.finished_at = text;
                self.docker = true;
            }
            _ => return,
        }
        self.store(facts);
    }

    /// An element of an array: `Args`' and `Config.Cmd`'s words,
    /// `DeviceIDs`' GPUs.
    fn element(&mut self, raw: &str, facts: &mut Facts) {
        let depth = self.current.as_ref().map_or(0, |(_, d)| *d);
        let key = self.stack.last().and_then(|l| l.key.clone());
        let section = self.section().map(|(s, below)| (s.to_owned(), below));
        let own = self.stack.len() == depth + 1;
        let (Some((record, _)), Some(text)) = (self.current.as_mut(), decode(raw)) else {
            return;
        };
        match (
            section.as_ref().map(|(s, b)| (s.as_str(), *b)),
            key.as_deref(),
        ) {
            (None, Some("Args")) if own => record.command.push(text),
            (Some(("Config", 1)), Some("Cmd")) => self.cmd.push(text),
            (Some(("HostConfig", 3)), Some("DeviceIDs")) => record.gpus.push(text),
            _ => return,
        }
        self.store(facts);
    }
}

/// A raw scalar's text: a string decoded, anything else as printed.
fn decode(raw: &str) -> Option<String> {
    if raw.starts_with('"') {
        serde_json::from_str(raw).ok()
    } else {
        Some(raw.to_owned())
    }
}

#[cfg(test)]
mod tests;
