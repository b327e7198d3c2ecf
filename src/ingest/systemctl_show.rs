//! `systemctl show UNIT…`: one `Key=value` property per line, one block per
//! unit, blocks separated by a blank line. Every property is kept with its
//! line; the ones correlation and rules read (`Id`, `MainPID`, states,
//! `ExecStart`, `ControlGroup`, …) are typed.
//!
//! `systemctl show -p MainPID sglang` prints no `Id=`; the unit is then taken
//! from the `$ systemctl show …` prompt line when the paste kept it.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, UnitProperties};
use crate::source::Span;

static PROPERTY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<key>[A-Z][A-Za-z0-9]*)=(?P<value>.*)$").expect("property regex")
});

/// `root@host:~# systemctl show sglang.service -p MainPID`.
static PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?systemctl\s+show\b(?P<args>.*)$")
        .expect("show prompt regex")
});

/// `ExecStart={ path=… ; argv[]=… ; … }`: the command line of the first command.
static ARGV: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"argv\[\]=(?P<argv>.*?)\s+;\s").expect("argv regex"));
static EXEC_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{\s*path=(?P<path>\S+)").expect("exec path regex"));

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut block: Vec<(&str, &str, Span)> = Vec::new();
    // Units named on the last prompt, for blocks without `Id=`.
    let mut named: Vec<String> = Vec::new();
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim_end();
        if text.trim().is_empty() {
            close(&mut block, &mut named, facts);
            continue;
        }
        if let Some(c) = PROMPT.captures(text) {
            close(&mut block, &mut named, facts);
            named = units_on_command_line(&c["args"]);
            continue;
        }
        let Some(c) = PROPERTY.captures(text) else {
            missed.push(i);
            continue;
        };
        let (key, value) = (
            c.name("key").map_or("", |m| m.as_str()),
            c.name("value").map_or("", |m| m.as_str()),
        );
        // A key seen twice means the blank line between two units was lost.
        if block.iter().any(|(k, _, _)| *k == key) {
            close(&mut block, &mut named, facts);
        }
        block.push((key, value, line.span));
    }
    close(&mut block, &mut named, facts);
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// Turns the properties read so far into one record.
fn close(block: &mut Vec<(&str, &str, Span)>, named: &mut Vec<String>, facts: &mut Facts) {
    let Some(&(_, _, first)) = block.first() else {
        return;
    };
    let properties: BTreeMap<String, (String, Span)> = block
        .drain(..)
        .map(|(k, v, s)| (k.to_owned(), (v.to_owned(), s)))
        .collect();
    let text = |key: &str| {
        properties
            .get(key)
            .map(|(v, _)| v.trim())
            .filter(|v| !v.is_empty() && *v != "[not set]")
            .map(str::to_owned)
    };
    let number = |key: &str| text(key).and_then(|v| v.parse::<u32>().ok());
    let pid = |key: &str| number(key).filter(|p| *p != 0);
    let from_prompt = (!named.is_empty()).then(|| named.remove(0));
    let unit = text("Id")
        .or_else(|| text("Names").and_then(|n| n.split_whitespace().next().map(str::to_owned)))
        .or(from_prompt);
    let exec_start = text("ExecStart").or_else(|| text("ExecStartEx")).map(|v| {
        ARGV.captures(&v)
            .map(|c| c["argv"].to_owned())
            .or_else(|| EXEC_PATH.captures(&v).map(|c| c["path"].to_owned()))
            .unwrap_or(v)
    });
    facts.unit_properties.push(UnitProperties {
        unit,
        description: text("Description"),
        load_state: text("LoadState"),
        active_state: text("ActiveState"),
        sub_state: text("SubState"),
        result: text("Result"),
        main_pid: pid("MainPID"),
        exec_main_pid: pid("ExecMainPID"),
        exec_main_code: number("ExecMainCode"),
        exec_main_status: text("ExecMainStatus").and_then(|v| v.parse().ok()),
        exec_start,
        kill_mode: text("KillMode"),
        restart: text("Restart"),
        n_restarts: number("NRestarts"),
        control_group: text("ControlGroup"),
        properties,
        span: first,
    });
}

/// The units a `systemctl show` command line names, in order, skipping
/// options and their values. systemctl appends `.service` to a bare name.
fn units_on_command_line(args: &str) -> Vec<String> {
    let mut units = Vec::new();
    let mut skip_next = false;
    for arg in args.split_whitespace() {
        if skip_next {
            skip_next = false;
            continue;
        }
        match arg {
            "-p" | "--property" | "-P" | "-H" | "--host" | "-M" | "--machine" => skip_next = true,
            a if a.starts_with('-') => {}
            a if a.starts_with('|') || a == ">" => break,
            a if a.contains('.') => units.push(a.to_owned()),
            a => units.push(format!("{a}.service")),
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    #[test]
    fn several_units_separated_by_blank_lines() {
        let (facts, unrecognized) = run("\
Type=notify
Restart=always
MainPID=4242
ExecMainPID=4242
ExecMainCode=0
ExecMainStatus=0
ExecStart={ path=/opt/sglang/venv/bin/python3 ; argv[]=/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Llama-3.1-70B-Instruct --tp 2 ; ignore_errors=no ; start_time=[Sat 2024-06-01 12:00:00 UTC] ; stop_time=[n/a] ; pid=4242 ; code=(null) ; status=0/0 }
ControlGroup=/system.slice/sglang.service
KillMode=control-group
NRestarts=0
Id=sglang.service
Description=SGLang inference server
LoadState=loaded
ActiveState=active
SubState=running
Result=success

MainPID=0
ExecMainPID=20629
ExecMainCode=2
ExecMainStatus=9
Restart=on-failure
NRestarts=3
Id=ddtree-qwen.service
ActiveState=failed
SubState=failed
Result=signal
ControlGroup=
");
        assert_eq!(unrecognized, 0);
        assert_eq!(facts.unit_properties.len(), 2);
        let a = &facts.unit_properties[0];
        assert_eq!(a.unit.as_deref(), Some("sglang.service"));
        assert_eq!(a.main_pid, Some(4242));
        assert_eq!(a.span_of("MainPID").map(|s| s.line), Some(3));
        assert_eq!(a.span.line, 1);
        assert_eq!(
            a.exec_start.as_deref(),
            Some(
                "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Llama-3.1-70B-Instruct --tp 2"
            )
        );
        assert_eq!(
            (
                a.active_state.as_deref(),
                a.sub_state.as_deref(),
                a.result.as_deref()
            ),
            (Some("active"), Some("running"), Some("success"))
        );
        assert_eq!(
            a.control_group.as_deref(),
            Some("/system.slice/sglang.service")
        );
        assert_eq!(a.kill_mode.as_deref(), Some("control-group"));
        assert_eq!(a.restart.as_deref(), Some("always"));
        assert_eq!(a.n_restarts, Some(0));
        assert_eq!(a.description.as_deref(), Some("SGLang inference server"));
        let b = &facts.unit_properties[1];
        assert_eq!(b.unit.as_deref(), Some("ddtree-qwen.service"));
        assert_eq!(b.main_pid, None);
        assert_eq!(b.exec_main_pid, Some(20629));
        assert_eq!((b.exec_main_code, b.exec_main_status), (Some(2), Some(9)));
        assert_eq!(b.n_restarts, Some(3));
        assert_eq!(b.control_group, None);
        assert_eq!(b.span.line, 18);
    }

    #[test]
    fn the_prompt_names_units_that_print_no_id() {
        let (facts, unrecognized) = run("\
root@gpu-node-7:~# systemctl show sglang -p MainPID -p ActiveState
MainPID=4242
ActiveState=active
$ systemctl show --property=MainPID vllm.service ddtree-qwen
MainPID=77101

MainPID=20629");
        assert_eq!(unrecognized, 0);
        let got: Vec<(Option<&str>, Option<u32>, u32)> = facts
            .unit_properties
            .iter()
            .map(|p| (p.unit.as_deref(), p.main_pid, p.span.line))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some("sglang.service"), Some(4242), 2),
                (Some("vllm.service"), Some(77101), 5),
                (Some("ddtree-qwen.service"), Some(20629), 7),
            ]
        );
    }

    #[test]
    fn a_lost_blank_line_is_noticed_by_a_repeated_key() {
        let (facts, _) = run("Id=a.service\nMainPID=10\nId=b.service\nMainPID=11");
        let got: Vec<(Option<&str>, Option<u32>)> = facts
            .unit_properties
            .iter()
            .map(|p| (p.unit.as_deref(), p.main_pid))
            .collect();
        assert_eq!(
            got,
            vec![(Some("a.service"), Some(10)), (Some("b.service"), Some(11))]
        );
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (facts, unrecognized) = run("\
Id=x.service
MainPID=notanumber
ExecMainStatus=-1
lower=case
= no key
\u{1b}\u{0}\u{ff}
MainPID=99999999999999999999");
        assert_eq!(unrecognized, 3);
        assert_eq!(facts.unit_properties.len(), 2);
        assert_eq!(facts.unit_properties[0].main_pid, None);
        assert_eq!(facts.unit_properties[0].exec_main_status, Some(-1));
        assert_eq!(facts.unit_properties[1].main_pid, None);
    }
}
