//! Serving engines under their own process titles, and the teardowns that
//! miss them. Serving stacks rename their engine processes
//! (`VLLM::EngineCore`, `sglang::scheduler_TP0`, `sgl_diffusion::scheduler_U0`)
//! or run them as binaries of their own (`ollama runner`,
//! `text-generation-server`, LM Studio's `.internal/utils/node`): a
//! teardown by the server's name (`pkill -9 sglang`, `pkill -f vllm`,
//! `killall python`, `ray stop`) does not reach them, and they keep their
//! GPUs after their server is gone (fixtures/real/742).
//! The names are titles.rs's table.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use super::META;
use super::titles::{COMM_LEN, Engine, Role, Spelling, classify};
use crate::correlate::Incident;
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Finding};
use crate::source::Span;

/// A teardown command of the paste (a prompt line, a script's line).
struct Teardown {
    span: Span,
    /// The command as typed, without prompt and comment.
    text: String,
    how: Kill,
}

enum Kill {
    /// `pkill [-f] PATTERN`: an extended regex against the name (or with
    /// `-f` the whole command line).
    Pkill { full: bool, pattern: String },
    /// `killall [-r] NAME`: the name exactly (or with `-r` a regex).
    Killall { regex: bool, name: String },
    /// `ray stop`: ends Ray's own processes (raylet, GCS, `ray::` actors).
    RayStop,
}

/// `pkill`'s and `killall`'s options that take a value.
const VALUE_OPTIONS: &[&str] = &[
    "-u",
    "-U",
    "-g",
    "-G",
    "-P",
    "-s",
    "-t",
    "-F",
    "--signal",
    "--ns",
    "--nslist",
    "-O",
    "--older",
    "--user",
    "--pidfile",
];

fn teardown(text: &str) -> Option<(String, Kill)> {
    // The command's words, up to a comment or the next command.
    let words: Vec<&str> = text
        .split_whitespace()
        .enumerate()
        .take_while(|(i, w)| {
            !matches!(*w, "|" | ";" | "&&" | "||") && (*i == 0 || !w.starts_with('#'))
        })
        .map(|(_, w)| w)
        .collect();
    let at = words
        .iter()
        .position(|w| matches!(w.rsplit('/').next(), Some("pkill" | "killall" | "ray")))?;
    // Only a prompt, `sudo` and its options stand before the command.
    let prompt = |w: &&str| {
        w.ends_with('$')
            || w.ends_with('#')
            || w.ends_with('>')
            || *w == "sudo"
            || w.starts_with('-')
    };
    if !words[..at].iter().all(prompt) {
        return None;
    }
    let program = words[at].rsplit('/').next()?;
    if program == "ray" {
        return (words.get(at + 1) == Some(&"stop"))
            .then(|| (words[at..].join(" "), Kill::RayStop));
    }
    let mut full = false;
    let mut regex = false;
    let mut args = words[at + 1..].iter().enumerate();
    while let Some((i, w)) = args.next() {
        if VALUE_OPTIONS.contains(w) {
            args.next();
        } else if *w == "-f" || *w == "--full" {
            full = true;
        } else if *w == "-r" || *w == "--regexp" {
            regex = true;
        } else if w.starts_with('-') {
            continue;
        } else {
            let name = quoted(&words[at + 1 + i..]);
            let how = if program == "pkill" {
                Kill::Pkill {
                    full,
                    pattern: name,
                }
            } else {
                Kill::Killall { regex, name }
            };
            return Some((words[at..].join(" "), how));
        }
    }
    None
}

/// The argument that starts `words`, its quotes removed and its quoted
/// words joined (`"vllm serve"`).
fn quoted(words: &[&str]) -> String {
    let first = words[0];
    let Some(q) = first.chars().next().filter(|c| *c == '"' || *c == '\'') else {
        return first.to_owned();
    };
    let mut out: Vec<&str> = Vec::new();
    for w in words {
        out.push(w);
        if (out.len() > 1 || w.len() > 1) && w.ends_with(q) {
            break;
        }
    }
    out.join(" ").trim_matches(q).to_owned()
}

fn teardowns(incident: &Incident) -> Vec<Teardown> {
    incident
        .facts
        .messages
        .iter()
        .filter(|m| {
            m.text.contains("pkill") || m.text.contains("killall") || m.text.contains("ray stop")
        })
        .filter_map(|m| {
            let (text, how) = teardown(&m.text)?;
            Some(Teardown {
                span: m.span,
                text,
                how,
            })
        })
        .collect()
}

/// Whether a teardown reaches a process whose name (`comm`) and command
/// line are these.
fn reaches(how: &Kill, comm: &str, cmdline: &str) -> bool {
    let matches = |pattern: &str, target: &str| match Regex::new(pattern) {
        Ok(re) => re.is_match(target),
        Err(_) => target.contains(pattern),
    };
    match how {
        Kill::Pkill {
            full: true,
            pattern,
        } => matches(pattern, cmdline),
        Kill::Pkill {
            full: false,
            pattern,
        } => matches(pattern, comm),
        Kill::Killall { regex: true, name } => matches(name, comm),
        Kill::Killall { regex: false, name } => {
            name == comm || (name.len() >= COMM_LEN && name.starts_with(comm))
        }
        Kill::RayStop => comm.starts_with("ray::") || comm == "raylet" || comm == "gcs_server",
    }
}

/// One engine process of the paste: its rows in `ps` and GPU tables.
struct Seen<'a> {
    engine: &'static Engine,
    /// The name a report shows: the title, or the stack's program.
    name: &'a str,
    comm: String,
    cmdline: &'a str,
    rows: Vec<(Span, String)>,
    gpus: BTreeSet<u32>,
    used: Option<u64>,
}

/// The name the kernel keeps: a title's first 15 bytes, else the
/// program's file name's.
fn comm_of(e: &Engine, word: &str, cmd: &str) -> String {
    let name = if e.spelling == Spelling::Title {
        word
    } else {
        let first = cmd.split_whitespace().next().unwrap_or(cmd);
        first.rsplit('/').next().unwrap_or(first)
    };
    name.chars().take(COMM_LEN).collect()
}

fn seen(incident: &Incident) -> BTreeMap<u32, Seen<'_>> {
    let mut out: BTreeMap<u32, Seen<'_>> = BTreeMap::new();
    for p in &incident.facts.ps {
        let Some((e, word)) = classify(&p.cmd) else {
            continue;
        };
        let s = out.entry(p.pid).or_insert_with(|| Seen {
            engine: e,
            name: if e.spelling == Spelling::Title {
                word
            } else {
                e.text
            },
            comm: comm_of(e, word, &p.cmd),
            cmdline: if e.spelling == Spelling::Title {
                word
            } else {
                &p.cmd
            },
            rows: Vec::new(),
            gpus: BTreeSet::new(),
            used: None,
        });
        s.rows.push((p.span, ps_note(p)));
    }
    for g in &incident.gpu_processes {
        let Some((e, word)) = classify(&g.name) else {
            continue;
        };
        let s = out.entry(g.pid).or_insert_with(|| Seen {
            engine: e,
            name: if e.spelling == Spelling::Title {
                word
            } else {
                e.text
            },
            comm: comm_of(e, word, &g.name),
            cmdline: if e.spelling == Spelling::Title {
                word
            } else {
                &g.name
            },
            rows: Vec::new(),
            gpus: BTreeSet::new(),
            used: None,
        });
        if let Some(gpu) = g.gpu {
            s.gpus.insert(gpu);
        }
        if let Some(m) = g.used_mib {
            s.used = Some(s.used.unwrap_or(0) + m);
        }
        if let Some(span) = g.spans.first() {
            s.rows.push((
                *span,
                format!(
                    "PID {} `{}` holds {}{}",
                    g.pid,
                    g.name,
                    g.used_mib
                        .map_or("GPU memory".to_owned(), |m| format!("{m}MiB")),
                    g.gpu.map_or(String::new(), |i| format!(" on GPU {i}"))
                ),
            ));
        }
    }
    // A listing's other rows of those PIDs (a command cut short, a start
    // time): the same process.
    for p in &incident.facts.ps {
        if let Some(s) = out.get_mut(&p.pid) {
            if !s.rows.iter().any(|(span, _)| *span == p.span) {
                s.rows.push((p.span, ps_note(p)));
            }
        }
    }
    out
}

fn ps_note(p: &crate::model::PsRecord) -> String {
    format!(
        "PID {} runs `{}`{}",
        p.pid,
        p.cmd.trim(),
        p.started
            .as_deref()
            .map_or(String::new(), |t| format!(", started {t}"))
    )
}

/// Findings for engine processes whose server is gone: listed with no
/// front end of their stack, and a teardown in the paste that their name
/// escapes. A lone engine on a GPU with no teardown is no finding: a live
/// server's engines look the same in a GPU table. `named` are PIDs the
/// rule reported.
pub(super) fn engines(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let kills = teardowns(incident);
    if kills.is_empty() {
        return Vec::new();
    }
    let seen = seen(incident);
    let fronts: BTreeSet<&str> = seen
        .values()
        .filter(|s| s.engine.role != Role::Engine)
        .map(|s| s.engine.stack)
        .collect();
    let mut out = Vec::new();
    for (pid, s) in &seen {
        if named.contains(pid) || s.engine.role == Role::FrontEnd || fronts.contains(s.engine.stack)
        {
            continue;
        }
        let (missed, reached): (Vec<&Teardown>, Vec<&Teardown>) = kills
            .iter()
            .partition(|t| !reaches(&t.how, &s.comm, s.cmdline));
        if !missed.is_empty() {
            out.push(finding(*pid, s, &missed, &reached));
        }
    }
    out
}

fn finding(pid: u32, s: &Seen<'_>, missed: &[&Teardown], reached: &[&Teardown]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.pids.insert(pid);
    f.entities.gpus.extend(s.gpus.iter().copied());
    for (span, note) in &s.rows {
        f.evidence(*span, note.clone());
    }
    for t in missed {
        let line = if s.cmdline == s.comm {
            String::new()
        } else {
            format!(" and its command line `{}`", s.cmdline)
        };
        f.evidence(
            t.span,
            format!(
                "`{}` does not reach PID {pid}: its name is `{}`{line}",
                t.text, s.comm
            ),
        );
    }
    for t in reached {
        f.evidence(t.span, format!("`{}` reaches PID {pid}", t.text));
    }
    let gpus: Vec<String> = s.gpus.iter().map(|g| g.to_string()).collect();
    let on = match gpus.len() {
        0 => String::new(),
        1 => format!(" on GPU {}", gpus[0]),
        _ => format!(" on GPUs {}", gpus.join(", ")),
    };
    let held = s
        .used
        .map_or(String::new(), |m| format!(", holding {}", mib(Some(m))));
    let what = format!("{}'s engine process `{}`", s.engine.stack, s.name);
    f.condition(
        format!("PID {pid} bears {what}, which its server starts and ends"),
        true,
    );
    f.condition(
        format!("no front end of {} is listed beside it", s.engine.stack),
        true,
    );
    f.condition(
        "a teardown in the inputs does not reach it (its name escapes the pattern)",
        true,
    );
    f.condition(
        "its parent is gone (missing: ps -o pid,ppid,lstart,args -p PID)",
        false,
    );
    f.title = format!("PID {pid} ({what}) outlives the teardown{on}");
    f.headline = format!(
        "PID {pid} is {what}{on}{held}; `{}` does not reach it, because the engine runs under its own name, so it outlives its server and keeps its GPU memory (inferred from the names; its parent settles it).",
        missed[0].text
    );
    f.explanation = format!(
        "{} renames its engine processes (or runs them as programs of their own), so a teardown by the server's name (pkill, killall, ray stop) does not match them: they stay alive after their server, re-parented to PID 1, with their GPU memory, and the next start finds the GPUs taken.",
        s.engine.stack
    );
    f.chain.push(format!("GPU memory stays in use{on}"));
    f.chain.push(format!("PID {pid} outlived its server"));
    push_actions(&mut f, pid, s.engine);
    f.confidence = confidence(&f, 0.35, 0.8);
    f
}

/// The steps: check it is a leftover, end it by PID, tear down by name.
fn push_actions(f: &mut Finding, pid: u32, engine: &Engine) {
    f.actions.push(Action::advice(
        "check that it is a leftover: PPID 1 or its server gone, started before the current run",
        Some(&format!("ps -o pid,ppid,stat,lstart,args -p {pid}")),
    ));
    f.actions.push(Action::advice(
        "then end it by PID (SIGTERM, then SIGKILL) and check that its memory is freed",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    let by_name = if engine.spelling == Spelling::Title {
        format!("^{}", engine.text)
    } else {
        engine.text.to_owned()
    };
    f.actions.push(Action::advice(
        format!(
            "tear the server down by its process group, or by its engines' names too (`pkill -f '{by_name}'`)"
        ),
        None,
    ));
}

#[cfg(test)]
mod tests {
    use super::{Kill, reaches, teardown};
    use crate::rules::Severity;
    use crate::testing::findings_of;

    /// fixtures/real/742 (radixark/miles_diffusion#165):
    /// the renamed diffusion scheduler and the teardown that missed it.
    const REAL_742: &str = "$ ps -eo pid,comm,args | grep sgl_diffusion\n3636386 sgl_diffusion:: sgl_diffusion::scheduler_U0\n$ pkill -9 sglang        # still alive\n$ pkill -9 sgl_diffusion # killed\n";

    #[test]
    fn a_renamed_engine_outlives_a_teardown_by_the_servers_name() {
        let f = findings_of(super::META.id, REAL_742);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.pids.contains(&3636386));
        assert!(
            f[0].headline.contains("pkill -9 sglang"),
            "{}",
            f[0].headline
        );
        // The ps row alone, with no teardown and no GPU figure: no claim.
        let alone = "$ ps -eo pid,comm,args | grep sgl_diffusion\n3636386 sgl_diffusion:: sgl_diffusion::scheduler_U0\n";
        assert!(findings_of(super::META.id, alone).is_empty());
    }

    /// The next such paste: vLLM's engine core in nvidia-smi's process
    /// rows after `pkill -f "vllm serve"` (the rows' layout is nvidia-smi's,
    /// fixtures/real/631's title; assembled, not copied). The same rows
    /// beside the API server's row are a live server.
    #[test]
    fn vllms_engine_core_after_a_kill_of_its_api_server() {
        let rows =
            "|    1   N/A  N/A    396079      C   VLLM::EngineCore                  108862MiB |\n";
        let killed = format!("$ pkill -f \"vllm serve\"\n$ nvidia-smi\n{rows}");
        let f = findings_of(super::META.id, &killed);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.gpus.contains(&1));
        let live = format!(
            "$ pkill -f \"vllm serve\"\n$ nvidia-smi\n{rows}\n$ ps -ef | grep vllm\nroot      396001       1  2 10:02 ?        00:01:10 /usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen2.5-7B\n"
        );
        assert!(findings_of(super::META.id, &live).is_empty());
    }

    /// fixtures/real/793 (lmstudio-ai/lmstudio-bug-tracker#588):
    /// LM Studio's node utility on seven GPUs, no teardown in the paste: no
    /// finding (a live app's engine looks the same).
    #[test]
    fn a_lone_engine_on_the_gpus_is_no_finding() {
        let rows: String = (0..7)
            .map(|g| format!("|    {g}   N/A  N/A     18146      C   ...ache/lm-studio/.internal/utils/node        254MiB |\n"))
            .collect();
        assert!(findings_of(super::META.id, &rows).is_empty());
        // With a teardown that misses it (`pkill lm-studio`: its name is
        // `node`; assembled, not copied), it is named on every GPU.
        let killed = format!("$ pkill lm-studio\n{rows}");
        let f = findings_of(super::META.id, &killed);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].entities.gpus.len(), 7);
        assert!(f[0].entities.pids.contains(&18146));
    }

    #[test]
    fn names_and_teardowns() {
        let Some((text, Kill::Pkill { full, pattern })) =
            teardown("$ pkill -9 sglang        # still alive")
        else {
            panic!("a pkill");
        };
        assert!(!full && pattern == "sglang" && text == "pkill -9 sglang");
        assert!(!reaches(
            &teardown("pkill -9 sglang").unwrap().1,
            "sgl_diffusion::",
            "sgl_diffusion::scheduler_U0"
        ));
        assert!(reaches(
            &teardown("pkill -9 sgl_diffusion").unwrap().1,
            "sgl_diffusion::",
            "sgl_diffusion::scheduler_U0"
        ));
        assert!(!reaches(
            &teardown("pkill -f vllm").unwrap().1,
            "VLLM::EngineCor",
            "VLLM::EngineCore"
        ));
        assert!(reaches(
            &teardown("killall text-generation-server").unwrap().1,
            "text-generation",
            "text-generation-server serve"
        ));
        let Some((
            _,
            Kill::Pkill {
                full: true,
                pattern,
            },
        )) = teardown("user@host:~$ sudo pkill -f \"vllm serve\"")
        else {
            panic!("a pkill -f");
        };
        assert_eq!(pattern, "vllm serve");
        assert!(!reaches(
            &teardown("ray stop --force").unwrap().1,
            "VLLM::EngineCor",
            "VLLM::EngineCore"
        ));
        assert!(teardown("$ echo pkill").is_none());
    }
}
