//! `systemctl status UNIT…` (docs/formats/systemd.md): one block per unit, opened by
//! a bullet line and followed by right-aligned `Label: value` fields. Owns
//! the unit's state, its main PID, and the `CGroup:` tree, which is the
//! strongest PID → unit evidence any input carries.
//!
//! The journal lines systemctl prints under each block are another segment
//! (detection hands them to the journal parser).

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{CgroupMember, Facts, UnitProcess, UnitStatus};
use crate::source::Span;

const UNIT_NAME: &str = r"[A-Za-z0-9:_.@\\-]+\.(?:service|socket|device|mount|automount|swap|target|path|timer|slice|scope)";

/// `● sglang.service - SGLang inference server`; `×` failed, `○` inactive,
/// `*`/`x` without UTF-8.
static BULLET: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"^(?:●|×|○|\*|x)\x20(?P<unit>{UNIT_NAME})(?:\x20-\x20(?P<desc>.*))?$");
    Regex::new(&pattern).expect("bullet regex")
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

/// `failed (Result: signal) since …`, `activating (auto-restart) (Result:
/// exit-code) since …`, `inactive (dead)`.
static ACTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<state>[a-z-]+)(?:\x20\((?P<sub>[a-z-]+)\))?(?:\x20\(Result:\x20(?P<result>[a-z-]+)\))?",
    )
    .expect("active regex")
});

/// `4242 (python3)` or `5120 (code=killed, signal=KILL)`.
static MAIN_PID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<pid>[0-9]+)(?:\x20\((?P<paren>[^)]*)\)?)?").expect("main pid regex")
});

static NOT_FOUND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Unit \S+ could not be found\.$").expect("not-found regex"));

/// A path's last component when it names a unit: `/etc/systemd/system/x.service`.
static UNIT_AT_END: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"(?:^|/)(?P<unit>{UNIT_NAME})$");
    Regex::new(&pattern).expect("unit path regex")
});

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
        match label {
            "Active" => {
                status.active_span = Some(span);
                if let Some(c) = ACTIVE.captures(value) {
                    let state = c["state"].to_owned();
                    // systemctl omits the sub-state when it equals the
                    // active state (`failed (Result: signal)`).
                    status.sub_state =
                        Some(c.name("sub").map_or(&*state, |m| m.as_str()).to_owned());
                    status.result = c.name("result").map(|m| m.as_str().to_owned());
                    status.active_state = Some(state);
                }
                status.in_state_secs = value
                    .rsplit_once("; ")
                    .and_then(|(_, ago)| ago.strip_suffix(" ago"))
                    .and_then(span_secs);
            }
            "Duration" => {
                status.duration_secs = span_secs(value.trim());
                status.duration_span = Some(span);
            }
            "TriggeredBy" => status.triggered = true,
            "Main PID" => {
                status.main_pid_span = Some(span);
                if let Some(c) = MAIN_PID.captures(value) {
                    status.main_pid = c["pid"].parse().ok();
                    if let Some(paren) = c.name("paren").map(|m| m.as_str()) {
                        if paren.starts_with("code=") {
                            status.main_exit = Some(paren.to_owned());
                        } else {
                            status.main_comm = Some(paren.to_owned());
                        }
                    }
                }
            }
            "Process" => {
                let pid = MAIN_PID.captures(value).and_then(|c| c["pid"].parse().ok());
                if let Some(pid) = pid {
                    status.processes.push(UnitProcess { pid, span });
                }
            }
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

    fn remember_unit(&mut self, path: Option<&str>) {
        if self.unit_from_paths.is_none() {
            self.unit_from_paths = path
                .and_then(|p| UNIT_AT_END.captures(p.trim()))
                .map(|c| c["unit"].to_owned());
        }
    }
}

/// A time span as systemd prints one (`format_timespan`): `2.102s`,
/// `1min 50s`, `2h 3min`, `3 days 4h`, `1 weeks 2 days`, `450ms`, `1y 2month`.
fn span_secs(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    let mut words = text.split_whitespace().peekable();
    while let Some(word) = words.next() {
        let digits = word
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(word.len());
        let n: f64 = word[..digits].parse().ok()?;
        // `3 days`: the unit is the next word.
        let unit = match &word[digits..] {
            "" => words.next()?,
            u => u,
        };
        let scale = match unit {
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" | "sec" => 1.0,
            "min" | "m" => 60.0,
            "h" | "hr" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            "w" | "week" | "weeks" => 604_800.0,
            "month" | "months" => 2_629_800.0,
            "y" | "year" | "years" => 31_557_600.0,
            _ => return None,
        };
        total += n * scale;
        any = true;
    }
    any.then_some(total)
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut block: Option<Block> = None;
    // The field whose indented continuation lines may follow.
    let mut open_label: Option<&str> = None;
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() {
            open_label = None;
            continue;
        }
        if let Some(c) = BULLET.captures(text) {
            if let Some(b) = block.take() {
                b.finish(facts);
            }
            let desc = c.name("desc").map(|m| m.as_str());
            block = Some(Block::new(&c["unit"], desc, line.span));
            open_label = None;
            continue;
        }
        if let Some(c) = FIELD.captures(text) {
            let label = c.name("label").map_or("", |m| m.as_str());
            let value = c.name("value").map_or("", |m| m.as_str());
            block
                .get_or_insert_with(|| Block::new("", None, line.span))
                .field(label, value, line.span);
            open_label = Some(label);
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

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

enum TreeLine<'a> {
    /// `├─4318 sglang::scheduler_TP0`
    Member { pid: u32, cmdline: &'a str },
    /// A nested cgroup: `├─init.scope`, `└─docker-<id>.scope`.
    Branch,
}

/// Reads one line of the `CGroup:` tree, box-drawing or ASCII (`|-`, `` `- ``).
fn tree_line(text: &str) -> Option<TreeLine<'_>> {
    const GLYPHS: [&str; 7] = ["├─", "└─", "│", "|-", "`-", "|", " "];
    let mut rest = text.trim_start();
    let mut drew_branch = false;
    while let Some(g) = GLYPHS.iter().find(|g| rest.starts_with(**g)) {
        drew_branch |= matches!(*g, "├─" | "└─" | "|-" | "`-");
        rest = &rest[g.len()..];
    }
    if !drew_branch || rest.is_empty() {
        return None;
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // Digits are ASCII, so `digits` is a char boundary.
    let (pid, after) = rest.split_at(digits);
    if digits > 0 && (after.is_empty() || after.starts_with(' ')) {
        if let Ok(pid) = pid.parse() {
            return Some(TreeLine::Member {
                pid,
                cmdline: after.strip_prefix(' ').unwrap_or(after),
            });
        }
    }
    Some(TreeLine::Branch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn run(text: &str) -> (Vec<UnitStatus>, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts.unit_statuses, unrecognized)
    }

    fn span(line: u32) -> Span {
        Span {
            source: SourceId(0),
            line,
        }
    }

    fn members(status: &UnitStatus) -> Vec<(u32, &str, u32)> {
        status
            .cgroup
            .iter()
            .map(|m| (m.pid, m.cmdline.as_str(), m.span.line))
            .collect()
    }

    #[test]
    fn multi_unit_paste_with_failed_and_running_units() {
        let (units, unrecognized) = run("\
× sglang-k26.service - SGLang K2 server
     Loaded: loaded (/etc/systemd/system/sglang-k26.service; enabled; preset: enabled)
    Drop-In: /etc/systemd/system/sglang-k26.service.d
             └─override.conf
     Active: failed (Result: signal) since Fri 2026-11-27 09:38:53 UTC; 2min 19s ago
   Duration: 13.420s
    Process: 31544 ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 8 (code=killed, signal=KILL)
   Main PID: 31544 (code=killed, signal=KILL)
        CPU: 1min 12.402s

● ddtree-qwen.service - DDTree Qwen server
     Loaded: loaded (/etc/systemd/system/ddtree-qwen.service; enabled; preset: enabled)
     Active: active (running) since Thu 2026-11-26 22:51:33 UTC; 10h ago
       Docs: https://example.invalid/ddtree
             man:ddtree(8)
   Main PID: 20629 (python3)
      Tasks: 211 (limit: 1647636)
     Memory: 38.2G (peak: 40.1G)
        CPU: 1h 12min 3.114s
 Invocation: 0f1e2d3c4b5a69788796a5b4c3d2e1f0
     CGroup: /system.slice/ddtree-qwen.service
             ├─20629 /opt/ddtree/venv/bin/python3 serve.py --port 30000
             ├─20700 sglang::scheduler_TP0
             └─20701

Hint: Some lines were ellipsized, use -l to show in full.
Unit nope.service could not be found.");
        assert_eq!(unrecognized, 0);
        assert_eq!(units.len(), 2);

        let failed = &units[0];
        assert_eq!(failed.unit, "sglang-k26.service");
        assert_eq!(failed.description.as_deref(), Some("SGLang K2 server"));
        assert_eq!(failed.active_state.as_deref(), Some("failed"));
        assert_eq!(failed.sub_state.as_deref(), Some("failed"));
        assert_eq!(failed.result.as_deref(), Some("signal"));
        assert_eq!(failed.main_pid, Some(31544));
        assert_eq!(failed.main_comm, None);
        assert_eq!(
            failed.main_exit.as_deref(),
            Some("code=killed, signal=KILL")
        );
        assert!(failed.cgroup.is_empty());
        assert_eq!(
            (failed.span, failed.active_span, failed.main_pid_span),
            (span(1), Some(span(5)), Some(span(8)))
        );

        let running = &units[1];
        assert_eq!(running.unit, "ddtree-qwen.service");
        assert_eq!(
            (
                running.active_state.as_deref(),
                running.sub_state.as_deref()
            ),
            (Some("active"), Some("running"))
        );
        assert_eq!(running.result, None);
        assert_eq!(
            (running.main_pid, running.main_comm.as_deref()),
            (Some(20629), Some("python3"))
        );
        assert_eq!(
            (running.span, running.active_span, running.main_pid_span),
            (span(11), Some(span(13)), Some(span(16)))
        );
        assert_eq!(
            members(running),
            vec![
                (
                    20629,
                    "/opt/ddtree/venv/bin/python3 serve.py --port 30000",
                    22
                ),
                (20700, "sglang::scheduler_TP0", 23),
                (20701, "", 24),
            ]
        );
    }

    #[test]
    fn activating_between_restarts_247() {
        let (units, unrecognized) = run("\
● sglang.service - SGLang inference server
     Loaded: loaded (/etc/systemd/system/sglang.service; enabled; vendor preset: enabled)
     Active: activating (auto-restart) (Result: exit-code) since Sat 2024-06-01 12:01:37 UTC; 4s ago
    Process: 4242 ExecStart=/opt/sglang/start.sh (code=exited, status=137)
   Main PID: 4242 (code=exited, status=137)");
        assert_eq!(unrecognized, 0);
        let u = &units[0];
        assert_eq!(
            (
                u.active_state.as_deref(),
                u.sub_state.as_deref(),
                u.result.as_deref()
            ),
            (Some("activating"), Some("auto-restart"), Some("exit-code"))
        );
        assert_eq!(u.main_exit.as_deref(), Some("code=exited, status=137"));
    }

    #[test]
    fn nested_ascii_tree_with_named_branches() {
        let (units, unrecognized) = run("\
* docker.service - Docker Application Container Engine
     Active: active (running) since Sat 2024-06-01 12:00:00 UTC; 1h ago
     CGroup: /system.slice/docker.service
             |-init.scope
             | `-900 /usr/bin/dockerd
             `-docker-0123abcd.scope
               |-4242 python3 -m sglang.launch_server
               | `-4318 sglang::scheduler_TP0
               `-4320 sglang::detokenizer
x stopped.service
     Active: inactive (dead)");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            members(&units[0]),
            vec![
                (900, "/usr/bin/dockerd", 5),
                (4242, "python3 -m sglang.launch_server", 7),
                (4318, "sglang::scheduler_TP0", 8),
                (4320, "sglang::detokenizer", 9),
            ]
        );
        assert_eq!(units[1].unit, "stopped.service");
        assert_eq!(units[1].description, None);
        assert_eq!(units[1].sub_state.as_deref(), Some("dead"));
    }

    #[test]
    fn a_block_pasted_without_its_bullet_takes_the_unit_from_its_paths() {
        // The paste starts mid-block, so its first line keeps its indentation.
        let (units, unrecognized) = run(concat!(
            "     Active: deactivating (stop-sigterm) since Sat 2024-06-01 12:05:00 UTC; 30s ago\n",
            "     CGroup: /system.slice/sglang.service\n",
            "             └─4318 sglang::scheduler_TP0\n",
        ));
        assert_eq!(unrecognized, 0);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].unit, "sglang.service");
        assert_eq!(units[0].span, span(1));
        assert_eq!(members(&units[0]), vec![(4318, "sglang::scheduler_TP0", 3)]);
    }

    #[test]
    fn how_long_a_unit_ran_and_has_been_in_its_state() {
        // https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/122
        let (units, unrecognized) = run("\
○ nvidia-persistenced.service - NVIDIA Persistence Daemon
     Loaded: loaded (/x86_64-bottlerocket-linux-gnu/sys-root/usr/lib/systemd/system/nvidia-persistenced.service; enabled; preset: enabled)
     Active: inactive (dead) since Fri 2024-09-06 17:24:31 UTC; 1min 50s ago
   Duration: 2.102s
   Main PID: 1424 (code=exited, status=0/SUCCESS)
        CPU: 2.814s
");
        assert_eq!(unrecognized, 0);
        let u = &units[0];
        assert_eq!(u.description.as_deref(), Some("NVIDIA Persistence Daemon"));
        assert_eq!(u.duration_secs, Some(2.102));
        assert_eq!(u.duration_span, Some(span(4)));
        assert_eq!(u.in_state_secs, Some(110.0));
        assert_eq!(
            u.main_exit.as_deref(),
            Some("code=exited, status=0/SUCCESS")
        );
        assert!(!u.triggered);
        // https://github.com/gpustack/gpustack/issues/154
        let (units, _) = run("\
● gpustack.service - GPUStack Service
     Loaded: loaded (/etc/systemd/system/gpustack.service; enabled; vendor preset: enabled)
     Active: deactivating (stop-sigterm) since Wed 2024-08-07 12:11:53 GMT; 12s ago
   Main PID: 2982989 (gpustack)
");
        let u = &units[0];
        assert_eq!(
            (u.active_state.as_deref(), u.sub_state.as_deref()),
            (Some("deactivating"), Some("stop-sigterm"))
        );
        assert_eq!(u.in_state_secs, Some(12.0));
        assert_eq!(u.duration_secs, None);
    }

    #[test]
    fn systemd_time_spans() {
        // As format_timespan() prints them (src/basic/time-util.c).
        for (text, secs) in [
            ("2.102s", 2.102),
            ("1min 50s", 110.0),
            ("2h 3min", 7380.0),
            ("3 days 4h", 273_600.0),
            ("1 weeks 2 days", 777_600.0),
            ("450ms", 0.45),
        ] {
            assert_eq!(span_secs(text), Some(secs), "{text}");
        }
        for text in ["", "soon", "12 parsecs", "1min x"] {
            assert_eq!(span_secs(text), None, "{text}");
        }
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (units, unrecognized) = run("\
● sglang.service - SGLang
   Main PID: 99999999999 (python3
     CGroup: /system.slice/sglang.service
             no tree glyph here
             └─ü
something else entirely
             └─4318 after the tree was closed
\u{1b}\u{0}\u{ff}");
        assert_eq!(unrecognized, 4);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].main_pid, None);
        assert_eq!(units[0].main_comm.as_deref(), Some("python3"));
        assert!(units[0].cgroup.is_empty());
    }
}
