//! What the serving rules ask about the failing server: its launch
//! arguments, its command line and flags, the PIDs of its current run, the
//! server events of a line, and suggested flag changes as actions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, OwnerBasis, UnitEventKind};
use crate::model::{
    Framework, PyException, ServerArgs, ServerEvent, ServerEventKind, ServerFlag, UnitName,
};
use crate::rules::{Action, ActionKind, ExpectedCmdline, Finding, Safety};
use crate::source::{SourceId, Span};

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Bytes as GiB.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB
}

/// The server events parsed from the line at `span`.
/// A binary search: the events are in line order (`correlate_with`), and a
/// rule asking for each of its lines must not scan them all each time (2
/// million distinct error lines would take hours).
pub fn events_at(incident: &Incident, span: Span) -> impl Iterator<Item = &ServerEvent> {
    let events = &incident.facts.server_events;
    let first = events.partition_point(|e| e.span < span);
    events[first..].iter().take_while(move |e| e.span == span)
}

/// The Python exception stated on the line at `span`, if the traceback
/// reader made one of it.
pub fn exception_at(incident: &Incident, span: Span) -> Option<(&ServerEvent, &PyException)> {
    events_at(incident, span).find_map(|e| match &e.kind {
        ServerEventKind::Exception(x) => Some((e, x)),
        _ => None,
    })
}

/// The outermost exception of the chain the exception at `span` belongs to:
/// the one that propagated (and that a wrapper such as SGLang's CUDA graph
/// message raised).
pub fn outermost_at(incident: &Incident, span: Span) -> Option<&PyException> {
    let (_, mut x) = exception_at(incident, span)?;
    for _ in 0..incident.facts.server_events.len() {
        let Some(up) = x.wrapped_by else { break };
        match exception_at(incident, up) {
            Some((_, outer)) => x = outer,
            None => break,
        }
    }
    Some(x)
}

/// Whether the line at `span` is SGLang's CUDA graph capture failure or an
/// exception inside one: `sglang-cuda-graph-capture-failed` reports those.
pub fn in_graph_capture(incident: &Incident, span: Span, text: &str) -> bool {
    text.contains(GRAPH_CAPTURE)
        || outermost_at(incident, span).is_some_and(|x| x.message.contains(GRAPH_CAPTURE))
}

pub const GRAPH_CAPTURE: &str = "Capture cuda graph failed";

/// The launch arguments of the server, merged over every line that states
/// them (vLLM logs `non-default args` and its engine config separately); a
/// later run's values win. The span is the last such line.
pub fn launch_args(incident: &Incident, framework: Framework) -> Option<(ServerArgs, Span)> {
    let mut merged: Option<(ServerArgs, Span)> = None;
    for e in &incident.facts.server_events {
        let ServerEventKind::Args(a) = &e.kind else {
            continue;
        };
        if framework != Framework::Unknown && e.framework != framework {
            continue;
        }
        let (m, span) = merged.get_or_insert_with(|| (ServerArgs::default(), e.span));
        *span = e.span;
        macro_rules! take {
            ($($field:ident),*) => { $( if a.$field.is_some() { m.$field = a.$field.clone(); } )* };
        }
        take!(
            model_path,
            served_model_name,
            tp_size,
            pp_size,
            dp_size,
            ep_size,
            base_gpu_id,
            gpu_id_step,
            mem_fraction_static,
            gpu_memory_utilization,
            max_model_len,
            host,
            port,
            dist_init_addr,
            nnodes,
            node_rank
        );
    }
    merged
}

/// The command line the unit runs, as recorded: `ExecStart=` of `systemctl
/// show`, else the main PID's command line.
pub fn unit_cmdline<'a>(incident: &'a Incident, unit: &str) -> Option<(&'a str, Span)> {
    if let Some(p) = incident
        .facts
        .unit_properties
        .iter()
        .rev()
        .find(|p| p.unit.as_deref() == Some(unit) && p.exec_start.is_some())
    {
        let span = p.span_of("ExecStart").unwrap_or(p.span);
        return p.exec_start.as_deref().map(|c| (c, span));
    }
    let main = incident
        .facts
        .unit_statuses
        .iter()
        .rev()
        .filter(|s| s.unit == unit)
        .find_map(|s| s.main_pid)?;
    incident
        .cmdlines
        .get(&main)
        .map(|c| (c.text.as_str(), c.span))
}

/// Command lines that start a server of `framework`: the unit's, then every
/// recorded process command line that runs one.
pub fn server_cmdlines<'a>(
    incident: &'a Incident,
    unit: Option<&str>,
    framework: Framework,
) -> Vec<(&'a str, Span)> {
    let marker = match framework {
        Framework::Sglang => "sglang",
        Framework::Vllm => "vllm",
        Framework::Unknown => "",
    };
    let mut out: Vec<(&str, Span)> = unit
        .and_then(|u| unit_cmdline(incident, u))
        .into_iter()
        .collect();
    let launches = |t: &str| {
        t.contains(marker)
            && (t.contains("launch_server") || t.contains(" serve") || t.contains("api_server"))
    };
    for c in incident.cmdlines.values() {
        if launches(&c.text) && !out.iter().any(|(t, _)| *t == c.text) {
            out.push((c.text.as_str(), c.span));
        }
    }
    // A launch typed at a prompt, or pasted as the first line of its
    // output (`vllm serve MODEL --gpu_memory_utilization 1`).
    for c in &incident.facts.typed_commands {
        if launches(&c.command) && !out.iter().any(|(t, _)| *t == c.command) {
            out.push((c.command.as_str(), c.span));
        }
    }
    out
}

static FLAG_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^--([a-z0-9_-]+)(?:=(\S+))?$").expect("flag regex"));

/// The value of `flag` (`--mem-fraction-static`) when the server's command
/// line sets it explicitly (`--flag V` or `--flag=V`), with the line.
pub fn explicit_flag(
    incident: &Incident,
    unit: Option<&str>,
    framework: Framework,
    flag: &str,
) -> Option<(String, Span)> {
    printed_flag(incident, unit, framework, flag).map(|p| (p.value, p.span))
}

/// A flag as a server's command line prints it: `--gpu_memory_utilization
/// 1`, `--mem-fraction-static=0.95`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrintedFlag {
    /// The flag and its value as written, one space between them.
    pub printed: String,
    pub value: String,
    pub span: Span,
}

/// [`explicit_flag`] with the flag as the command line spells it.
pub fn printed_flag(
    incident: &Incident,
    unit: Option<&str>,
    framework: Framework,
    flag: &str,
) -> Option<PrintedFlag> {
    // vLLM and SGLang accept `_` for `-` in flag names.
    let wanted = flag.trim_start_matches('-').replace('_', "-");
    for (cmd, span) in server_cmdlines(incident, unit, framework) {
        let tokens: Vec<&str> = cmd.split_whitespace().collect();
        for (i, t) in tokens.iter().enumerate() {
            let Some(c) = FLAG_VALUE.captures(t) else {
                continue;
            };
            if c[1].replace('_', "-") != wanted {
                continue;
            }
            let (value, printed) = match c.get(2) {
                Some(v) => (v.as_str().to_owned(), (*t).to_owned()),
                None => {
                    let v = tokens.get(i + 1)?;
                    (v.to_string(), format!("{t} {v}"))
                }
            };
            return Some(PrintedFlag {
                printed,
                value,
                span,
            });
        }
    }
    None
}

/// A suggested flag change: a `set-server-flag` step (an ExecStart diff,
/// never applied) when the server's unit is known and the value valid,
/// otherwise the same suggestion as advice.
pub fn flag_action(
    incident: &Incident,
    f: &mut Finding,
    unit: Option<&str>,
    flag: &str,
    value: &str,
    why: impl Into<String>,
    evidence: impl IntoIterator<Item = Span>,
) -> Action {
    let why = why.into();
    let flag_value = match ServerFlag::new(flag, value) {
        Ok(v) => v,
        Err(e) => {
            f.refused.push(e.to_string());
            return Action::advice(why, None);
        }
    };
    let unit_name = match unit.map(UnitName::new) {
        Some(Ok(u)) => Some(u),
        Some(Err(e)) => {
            f.refused.push(e.to_string());
            None
        }
        None => None,
    };
    let Some(unit_name) = unit_name else {
        return Action::advice(format!("restart the server with {flag_value}: {why}"), None)
            .with_evidence(evidence);
    };
    let current = unit_cmdline(incident, unit_name.as_str()).and_then(|(c, _)| {
        ExpectedCmdline::new(c)
            .map_err(|e| f.refused.push(e.to_string()))
            .ok()
    });
    Action::new(
        ActionKind::SetServerFlag {
            unit: unit_name,
            flag: flag_value,
            current,
        },
        Safety::AdvisoryOnly,
        why,
    )
    .with_evidence(evidence)
}

/// The unit of the failing server, from its events or a failed unit that
/// runs it (see [`server_unit`]).
pub fn target<'e>(
    incident: &Incident,
    events: impl IntoIterator<Item = &'e ServerEvent>,
    framework: Framework,
) -> Option<(String, OwnerBasis, Span)> {
    let marker = match framework {
        Framework::Sglang => "sglang",
        Framework::Vllm => "vllm",
        Framework::Unknown => "python",
    };
    server_unit(incident, events, marker)
}

/// The unit that runs the failing server: the unit of the failure's own
/// lines, else a unit that failed (PID 1's messages, a failed status) whose
/// command lines or name mention `marker` (`sglang`, `vllm`), else the unit
/// of any server line. Never a unit that owns a
/// process on a GPU (other than the failing lines' own) unless PID 1 or its
/// status says that unit failed: a holder that once logged `Uvicorn running
/// on` is not the server to restart.
pub fn server_unit<'e>(
    incident: &Incident,
    events: impl IntoIterator<Item = &'e ServerEvent>,
    marker: &str,
) -> Option<(String, OwnerBasis, Span)> {
    let events: Vec<&ServerEvent> = events.into_iter().collect();
    let failing: BTreeSet<u32> = events.iter().filter_map(|e| e.pid).collect();
    let failed = |unit: &str| {
        incident.units.get(unit).is_some_and(|u| u.failed())
            || incident
                .facts
                .unit_statuses
                .iter()
                .any(|s| s.unit == unit && s.active_state.as_deref() == Some("failed"))
    };
    let holds_gpu = |unit: &str| {
        incident
            .gpu_processes
            .iter()
            .filter(|p| !failing.contains(&p.pid))
            .any(|p| incident.owner(p.pid).is_some_and(|o| o.unit == unit))
    };
    let eligible = |found: &(String, OwnerBasis, Span)| failed(&found.0) || !holds_gpu(&found.0);
    if let Some(found) = events
        .iter()
        .filter_map(|e| incident.unit_of_event(e))
        .find(|f| eligible(f))
    {
        return Some(found);
    }
    // A failed unit that runs the server, by its command lines or its name.
    let runs_server = |unit: &str| {
        incident
            .owners
            .iter()
            .filter(|(_, o)| o.unit == unit)
            .any(|(pid, _)| {
                incident
                    .cmdlines
                    .get(pid)
                    .is_some_and(|c| c.text.contains(marker))
            })
            || unit.contains(marker)
    };
    incident
        .units
        .iter()
        .filter(|(name, u)| u.failed() && runs_server(name))
        .find_map(|(name, u)| {
            let span = u
                .events
                .iter()
                .find(|e| {
                    matches!(
                        e.kind,
                        UnitEventKind::MainProcessExited { .. }
                            | UnitEventKind::FailedWithResult(_)
                    )
                })?
                .span;
            Some((name.clone(), OwnerBasis::SystemdMessage, span))
        })
        .or_else(|| {
            incident
                .facts
                .unit_statuses
                .iter()
                .find(|s| s.active_state.as_deref() == Some("failed") && runs_server(&s.unit))
                .map(|s| (s.unit.clone(), OwnerBasis::MainPid, s.span))
        })
        // Last, the unit of any server line: one that did not fail is the
        // server only when it holds no GPU the server needed.
        .or_else(|| {
            incident
                .facts
                .server_events
                .iter()
                .filter_map(|e| incident.unit_of_event(e))
                .find(|f| eligible(f))
        })
}

/// Names the failing server's unit in `f` and cites the line that ties the
/// server to it; returns the unit.
pub fn cite_target(f: &mut Finding, target: &Option<(String, OwnerBasis, Span)>) -> Option<String> {
    let (unit, basis, span) = target.as_ref()?;
    f.entities.units.insert(unit.clone());
    f.evidence(
        *span,
        format!("the server runs as {unit} ({})", basis.describe()),
    );
    Some(unit.clone())
}

/// The PIDs of the run of the server that wrote `failure`: the PIDs of the
/// server lines from the start of that run (its last launch-arguments or
/// version line before the failure) on, in the failure's input and, by
/// time, in the others. A PID systemd reported as left over from an earlier
/// run is never one of them.
pub fn run_pids(incident: &Incident, failure: &ServerEvent) -> BTreeSet<u32> {
    let events = &incident.facts.server_events;
    let same_server = |e: &ServerEvent| {
        e.framework == failure.framework || (failure.unit.is_some() && e.unit == failure.unit)
    };
    let starts_run = |e: &ServerEvent| {
        matches!(
            &e.kind,
            ServerEventKind::Args(_) | ServerEventKind::Version { .. }
        )
    };
    // The run starts at the first of the last group of start lines before
    // the failure (a launch logs its version and arguments together).
    let mut start = None;
    let mut in_group = false;
    for e in events.iter().filter(|e| {
        e.span.source == failure.span.source && e.span.line <= failure.span.line && same_server(e)
    }) {
        if starts_run(e) {
            if !in_group {
                start = Some(e);
            }
            in_group = true;
        } else {
            in_group = false;
        }
    }
    let start_time = start.and_then(|s| incident.time_of(s.span).or(s.time));
    let left_over: BTreeSet<u32> = incident
        .units
        .values()
        .flat_map(|u| &u.events)
        .filter_map(|e| match e.kind {
            UnitEventKind::RemainsRunning { pid } | UnitEventKind::LeftOverProcess { pid } => {
                Some(pid)
            }
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter(|e| same_server(e))
        .filter(|e| {
            if e.span.source == failure.span.source {
                start.is_none_or(|s| e.span.line >= s.span.line)
            } else {
                let t = incident.time_of(e.span).or(e.time);
                match (start_time, t) {
                    (Some(s), Some(t)) => t.utc_seconds() >= s.utc_seconds() - 5,
                    _ => false,
                }
            }
        })
        .filter_map(|e| e.pid)
        .filter(|p| !left_over.contains(p))
        .chain(failure.pid)
        .collect()
}

/// [`run_pids`] of every failure in `failures`, together. A crash loop
/// fails the same way hundreds of times: each failure's run goes from its
/// start to the end of the input, and the start of a later failure's run is
/// never before an earlier one's (the times of one input run forward), so
/// the union is the earliest failure's run for each input and server (with
/// every failure's own PID), found once instead of once a failure.
pub fn runs_pids<'a>(
    incident: &Incident,
    failures: impl IntoIterator<Item = &'a ServerEvent>,
) -> BTreeSet<u32> {
    let mut earliest: BTreeMap<(SourceId, Framework, Option<&str>), &ServerEvent> = BTreeMap::new();
    let mut pids = BTreeSet::new();
    for f in failures {
        pids.extend(f.pid);
        let key = (f.span.source, f.framework, f.unit.as_deref());
        let first = earliest.entry(key).or_insert(f);
        if f.span < first.span {
            *first = f;
        }
    }
    for f in earliest.values() {
        pids.extend(run_pids(incident, f));
    }
    pids
}

/// Whether a memory fraction (`gpu_memory_utilization`,
/// `mem_fraction_static`) is the knob at fault when the log lacks the sizes
/// that would recompute it: a stated value below `low_below` (well under
/// the server's own defaults) is; an unstated one is only when
/// `unknown_is_knob` (the server's message names the knob as the cure).
/// Records the missing sizes as an unmet condition, so the finding's
/// confidence drops: the headline line alone is partial evidence.
pub fn unsized_fraction_at_fault(
    f: &mut Finding,
    stated: Option<f64>,
    low_below: f64,
    unknown_is_knob: bool,
) -> bool {
    f.condition(
        "the log shows the sizes that would confirm the fraction is the limit",
        false,
    );
    stated.map_or(unknown_is_knob, |v| v < low_below)
}

/// `0.87` → `"0.87"`: fractions as the servers print them.
pub fn fraction(x: f64) -> String {
    format!("{x:.2}")
}

/// Rounds `x` up (or down) to two decimals.
pub fn ceil2(x: f64) -> f64 {
    (x * 100.0 - 1e-9).ceil() / 100.0
}

pub fn floor2(x: f64) -> f64 {
    (x * 100.0 + 1e-9).floor() / 100.0
}

/// The first line of a message, cut to fit a headline.
pub fn shorten(text: &str) -> String {
    let text = text.lines().next().unwrap_or("");
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Server events written before `span` in its input, latest first.
pub fn before(incident: &Incident, span: Span) -> impl Iterator<Item = &ServerEvent> {
    incident
        .facts
        .server_events
        .iter()
        .rev()
        .filter(move |e| e.span.source == span.source && e.span.line < span.line)
}

/// The nvidia-smi index of the GPU a TP rank runs on: `base_gpu_id +
/// tp_rank * gpu_id_step` (SGLang), the rank itself otherwise. A CUDA
/// ordinal, so only right without `CUDA_VISIBLE_DEVICES`.
pub fn gpu_of_rank(args: Option<&ServerArgs>, tp_rank: u32) -> u32 {
    let base = args.and_then(|a| a.base_gpu_id).unwrap_or(0);
    let step = args.and_then(|a| a.gpu_id_step).unwrap_or(1);
    base + tp_rank * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_round_outwards_to_two_decimals() {
        for (x, up, down) in [
            (0.7502, 0.76, 0.75),
            (0.90, 0.90, 0.90),
            (0.9349, 0.94, 0.93),
        ] {
            assert_eq!(ceil2(x), up, "{x}");
            assert_eq!(floor2(x), down, "{x}");
        }
        assert_eq!(fraction(0.9), "0.90");
    }

    #[test]
    fn explicit_flags_are_read_in_both_spellings() {
        use crate::correlate::{Cmdline, Incident};
        let span = Span {
            source: crate::source::SourceId(0),
            line: 1,
        };
        for (cmd, want) in [
            (
                "python3 -m sglang.launch_server --tp 2 --mem-fraction-static 0.94 --port 30000",
                Some("0.94"),
            ),
            (
                "python3 -m sglang.launch_server --mem_fraction_static=0.6",
                Some("0.6"),
            ),
            ("python3 -m sglang.launch_server --tp 2", None),
            ("python3 train.py --mem-fraction-static 0.5", None),
        ] {
            let mut incident = Incident::default();
            incident.cmdlines.insert(
                4242,
                Cmdline {
                    text: cmd.to_owned(),
                    span,
                },
            );
            let got = explicit_flag(&incident, None, Framework::Sglang, "--mem-fraction-static");
            assert_eq!(got.as_ref().map(|g| g.0.as_str()), want, "{cmd}");
        }
    }
}
