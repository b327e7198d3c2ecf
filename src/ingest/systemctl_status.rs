//! `systemctl status UNIT…` (docs/formats/systemd.md): one block per unit, opened by
//! a bullet line and followed by right-aligned `Label: value` fields. Owns
//! the unit's state, its main PID, and the `CGroup:` tree, which is the
//! strongest PID → unit evidence any input carries.
//!
//! The journal lines systemctl prints under each block are another segment
//! (detection hands them to the journal parser). The fields' values (the
//! `Active:` state, a PID with its exit, a time span, a tree line) are `nom`
//! grammars in [`values`].

use std::sync::LazyLock;

use regex::Regex;

use self::values::{TreeLine, span_secs, tree_line};
use super::Line;
use crate::model::{CgroupMember, Facts, UnitProcess, UnitStatus};
use crate::source::Span;

const UNIT_NAME: &str = r"[A-Za-z0-9:_.@\\-]+\.(?:service|socket|device|mount|automount|swap|target|path|timer|slice|scope)";

/// `● sglang.service - SGLang inference server`; `×` failed, `○` inactive,
/// `*`/`x` without UTF-8. A paste whose lines the terminal re-wrapped may
/// glue the next field to it (`… - Service for snap application x Loaded:
/// loaded`), and a harness that prints the unit's name before its status
/// puts that name in front (`x.service × x.service - …`, snapd's spread).
static BULLET: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"^(?:(?P<echo>{UNIT_NAME})\x20)?(?:●|×|○|\*|x)\x20(?P<unit>{UNIT_NAME})(?:\x20-\x20(?P<desc>.*?))?(?:\x20Loaded:\x20(?P<loaded>.*))?$"
    );
    Regex::new(&pattern).expect("bullet regex")
});

/// The same line with its bullet lost in the copy (`wsdd.service - Web
/// Services Dynamic Discovery host daemon`): a block's head only when the
/// next line is its `Loaded:` field.
static BARE_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"^(?P<unit>{UNIT_NAME})\x20-\x20(?P<desc>.*)$");
    Regex::new(&pattern).expect("bare head regex")
});

/// Every label systemctl prints (right-aligned, so any indentation).
static FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\s+
        (?P<label>Loaded|Transient|Drop-In|Active|Duration|Until|Trigger|Triggers|TriggeredBy
          |Follows|Where|What|Listen|Accepted|Connected|Refused|Device|Docs|Process
          |Main\x20PID|Cntrl\x20PID|Status|Error|Tasks|FD\x20Store|Memory|Mem\x20peak
          |Swap\x20peak|Zswap\x20peak|CPU|IO|IP|Invocation|Notify\x20Access|CGroup)
        :(?:\x20(?P<value>.*))?$",
    )
    .expect("field regex")
});

static NOT_FOUND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Unit \S+ could not be found\.$").expect("not-found regex"));

/// A path's last component when it names a unit: `/etc/systemd/system/x.service`.
static UNIT_AT_END: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"(?:^|/)(?P<unit>{UNIT_NAME})$");
    Regex::new(&pattern).expect("unit path regex")
});

/// Labels systemctl prints a value for on one line; a re-wrapped paste may
/// put such a label at the start of a line without its indentation.
const UNINDENTED: [&str; 4] = ["Loaded", "Active", "Process", "Main PID"];

/// The part of a field's value that systemctl ends it with in parentheses
/// and that a re-wrapped paste may carry to the next line on its own:
/// `Loaded: loaded` then `(/etc/systemd/system/x.service; enabled; …)`;
/// `Process: 6221 ExecStart=/usr/bin/snap run` then `x (code=killed,
/// signal=ABRT)` (print_status_info()). Whether `text` is that rest of
/// the field `label` whose value so far is `value`.
fn wrapped_rest(label: &str, value: &str, text: &str) -> bool {
    let text = text.trim();
    match label {
        "Loaded" => !value.contains('(') && text.starts_with('(') && text.ends_with(')'),
        "Process" | "Main PID" => {
            !value.contains("(code=")
                && text.ends_with(')')
                && text.contains("(code=")
                && !text.contains(": ")
        }
        _ => false,
    }
}

/// Lines systemctl adds around the blocks.
const NOTICES: [&str; 4] = [
    "Hint: Some lines were ellipsized, use -l to show in full.",
    "Warning: The unit file, source configuration file or drop-ins of ",
    "Warning: Journal has been rotated since unit was started",
    "Notice: journal has been rotated since unit was started",
];

/// Labels whose value may go on over indented lines of its own.
const MULTI_LINE: [&str; 6] = [
    "Drop-In",
    "Docs",
    "TriggeredBy",
    "Triggers",
    "Listen",
    "CGroup",
];

/// A block being read. A paste may start below the bullet line; such a block
/// takes its unit from the `Loaded:` path or the `CGroup:` path.
struct Block {
    status: UnitStatus,
    unit_from_paths: Option<String>,
}

impl Block {
    fn new(unit: &str, description: Option<&str>, span: Span) -> Block {
        Block {
            status: UnitStatus {
                description: description.map(str::to_owned),
                end: Some(span),
                ..UnitStatus::new(unit, span)
            },
            unit_from_paths: None,
        }
    }

    fn finish(self, facts: &mut Facts) {
        let mut status = self.status;
        if status.unit.is_empty() {
            // Nothing names the unit: its fields cannot be attributed.
            let Some(unit) = self.unit_from_paths else {
                return;
            };
            status.unit = unit;
        }
        facts.unit_statuses.push(status);
    }

    fn field(&mut self, label: &str, value: &str, span: Span) {
        let status = &mut self.status;
        status.end = Some(span);
        match label {
            "Active" => {
                status.active_span = Some(span);
                if let Some(a) = values::active(value) {
                    // systemctl omits the sub-state when it equals the
                    // active state (`failed (Result: signal)`).
                    status.sub_state = Some(a.sub.unwrap_or(a.state).to_owned());
                    status.result = a.result.map(str::to_owned);
                    status.active_state = Some(a.state.to_owned());
                }
                status.in_state_secs = value
                    .rsplit_once("; ")
                    .and_then(|(_, ago)| ago.strip_suffix(" ago"))
                    .and_then(span_secs);
                status.since = since(value);
            }
            "Duration" => {
                status.duration_secs = span_secs(value.trim());
                status.duration_span = Some(span);
            }
            "TriggeredBy" => status.triggered = true,
            "Main PID" => {
                status.main_pid_span = Some(span);
                if let Some((pid, paren)) = values::main_pid(value) {
                    status.main_pid = pid.parse().ok();
                    if let Some(paren) = paren {
                        if paren.starts_with("code=") {
                            status.main_exit = Some(paren.to_owned());
                        } else {
                            status.main_comm = Some(paren.to_owned());
                        }
                    }
                }
            }
            "Process" => {
                if let Some(p) = values::process(value) {
                    if let Ok(pid) = p.pid.parse() {
                        status.processes.push(UnitProcess {
                            pid,
                            setting: p.setting.map(str::to_owned),
                            exit: p.exit.map(str::to_owned),
                            span,
                        });
                    }
                }
            }
            "Drop-In" => self.drop_in(value, span),
            "Loaded" => {
                // `loaded (/etc/systemd/system/x.service; enabled; preset: enabled)`
                let path = value
                    .split_once('(')
                    .and_then(|(_, rest)| rest.split([';', ')']).next());
                self.remember_unit(path);
            }
            "CGroup" => self.remember_unit(Some(value.trim())),
            _ => {}
        }
    }

    /// A `Drop-In:` line or its continuation: a folder
    /// (`/etc/systemd/system/docker.service.d`), then its files in a tree
    /// (`└─override.conf`, `├─10-a.conf, 20-b.conf`).
    fn drop_in(&mut self, value: &str, span: Span) {
        let files = value
            .trim_start_matches(|c: char| c.is_whitespace() || "├└│─|`-".contains(c))
            .split(", ");
        for file in files {
            let file = file.trim();
            if file.ends_with(".conf") && !file.contains(char::is_whitespace) {
                self.status.drop_ins.push((file.to_owned(), span));
            }
        }
    }

    fn remember_unit(&mut self, path: Option<&str>) {
        if self.unit_from_paths.is_none() {
            self.unit_from_paths = path
                .and_then(|p| UNIT_AT_END.captures(p.trim()))
                .map(|c| c["unit"].to_owned());
        }
    }
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut block: Option<Block> = None;
    // The field whose indented continuation lines may follow.
    let mut open_label: Option<&str> = None;
    // The field of the line before, with its value, which a re-wrapped
    // paste may go on with on this line (`wrapped_rest`).
    let mut last_field: Option<(&str, String, Span)> = None;
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() {
            open_label = None;
            last_field = None;
            continue;
        }
        if let Some((label, value, span)) = last_field.take() {
            if block.is_some() && wrapped_rest(label, &value, text) {
                let joined = format!("{value} {}", text.trim());
                if let Some(b) = &mut block {
                    if label == "Process" {
                        b.status.processes.retain(|p| p.span != span);
                    }
                    b.field(label, &joined, span);
                    b.status.end = Some(line.span);
                }
                continue;
            }
        }
        let head = BULLET
            .captures(text)
            .filter(|c| c.name("echo").is_none_or(|e| e.as_str() == &c["unit"]))
            .or_else(|| {
                let loaded_next = lines
                    .get(i + 1)
                    .and_then(|next| FIELD.captures(next.text))
                    .is_some_and(|f| &f["label"] == "Loaded");
                BARE_HEAD.captures(text).filter(|_| loaded_next)
            });
        if let Some(c) = head {
            if let Some(b) = block.take() {
                b.finish(facts);
            }
            let desc = c.name("desc").map(|m| m.as_str());
            let mut b = Block::new(&c["unit"], desc, line.span);
            open_label = None;
            if let Some(loaded) = c.name("loaded") {
                b.field("Loaded", loaded.as_str(), line.span);
                last_field = Some(("Loaded", loaded.as_str().to_owned(), line.span));
            }
            block = Some(b);
            continue;
        }
        let field = FIELD.captures(text);
        // Inside a block, a one-line field whose indentation the paste
        // lost is still the field.
        if field.is_none() && block.is_some() {
            let padded = format!(" {text}");
            let unindented = FIELD.captures(&padded).and_then(|c| {
                let label = UNINDENTED.iter().copied().find(|l| *l == &c["label"])?;
                Some((label, c.name("value").map_or("", |m| m.as_str()).to_owned()))
            });
            if let Some((label, value)) = unindented {
                if let Some(b) = &mut block {
                    b.field(label, &value, line.span);
                }
                open_label = Some(label);
                last_field = Some((label, value, line.span));
                continue;
            }
        }
        if let Some(c) = field {
            let label = c.name("label").map_or("", |m| m.as_str());
            let value = c.name("value").map_or("", |m| m.as_str());
            block
                .get_or_insert_with(|| Block::new("", None, line.span))
                .field(label, value, line.span);
            open_label = Some(label);
            last_field = Some((label, value.to_owned(), line.span));
            continue;
        }
        if NOT_FOUND.is_match(text) {
            if let Some(b) = block.take() {
                b.finish(facts);
            }
            open_label = None;
            continue;
        }
        if NOTICES.iter().any(|n| text.starts_with(n)) {
            continue;
        }
        let continues =
            text.starts_with([' ', '\t']) && open_label.is_some_and(|l| MULTI_LINE.contains(&l));
        if continues {
            if let Some(b) = &mut block {
                b.status.end = Some(line.span);
            }
            if open_label == Some("CGroup") {
                match tree_line(text) {
                    Some(TreeLine::Member { pid, cmdline }) => {
                        if let Some(b) = &mut block {
                            b.status.cgroup.push(CgroupMember {
                                pid,
                                cmdline: cmdline.to_owned(),
                                span: line.span,
                            });
                        }
                    }
                    Some(TreeLine::Branch) => {}
                    None => missed.push(i),
                }
            } else if open_label == Some("Drop-In") {
                if let Some(b) = &mut block {
                    b.drop_in(text, line.span);
                }
            }
            continue;
        }
        open_label = None;
        missed.push(i);
    }
    if let Some(b) = block {
        b.finish(facts);
    }
    missed
}

/// The time after `since` in an `Active:` value (`inactive (dead) since Tue
/// 2020-12-01 10:18:15 UTC; 5min ago`): the date and time as printed, the
/// weekday and zone words dropped.
fn since(value: &str) -> Option<chrono::NaiveDateTime> {
    let (_, rest) = value.split_once(" since ")?;
    let when = rest.split(';').next()?;
    let mut words = when.split_whitespace().skip_while(|w| !w.contains('-'));
    let date = words.next()?;
    let time = words.next()?;
    chrono::NaiveDateTime::parse_from_str(&format!("{date} {time}"), "%Y-%m-%d %H:%M:%S").ok()
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

#[cfg(test)]
mod tests;
mod values;
