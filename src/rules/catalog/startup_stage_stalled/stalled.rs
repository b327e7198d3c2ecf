//! Whether one input's start-up stalled, and the finding that says where:
//! the furthest stage, the line that gave up waiting, the conditions that
//! corroborate it, and the steps for the stage.

use super::advice::{Runner, cite_context, headline};
use super::ranks::{Connecting, clip, nccl_init_says_nothing_waits, ranks_seen, still_connecting};
use super::*;
use crate::rules::Action;
use crate::rules::support::{matches, round2};

/// The finding for one input's start-up that stopped making progress at a
/// stage, or `None` when it finished, failed, or may just have been cut.
pub(super) fn stalled<'a>(incident: &'a Incident, startup: &Startup<'a>) -> Option<Finding> {
    let s = read_stall(incident, startup)?;
    let mut f = Finding::new(META.id, META.category, META.severity);
    cite_stall(&mut f, &s);
    let corroborated = judge(
        &mut f,
        Seen {
            in_progress: s.in_progress,
            gave_up: s.gave_up.is_some(),
            stuck_counter: s.stuck_counter,
            silence: s.silence,
            ends_here: s.ends_here,
            ignored: s.ignored,
        },
    );
    count_at_stage(&mut f, startup, s.reached);
    // Weights being sent to a llama.cpp rpc-server (`RPC[host:port] model
    // buffer size`): the RPC exchange, not the disk.
    let rpc = s.reached == Stage::WeightsLoading
        && startup
            .lines
            .iter()
            .any(|(m, st, _)| *st == Stage::WeightsLoading && m.text.contains("RPC["));
    let members = super::members::missing(startup, s.reached);
    let hint = if rpc {
        RPC
    } else if members.is_some() {
        super::members::MEMBERS
    } else {
        advice(
            s.reached,
            multi_gpu(incident),
            over_network(incident, s.last.span.source),
        )
    };
    if rpc {
        cite_rpc_server(incident, &mut f);
    }
    cite_context(incident, &mut f, startup, s.reached, s.last.span.source);
    if [P2P.0, FIRST_COLLECTIVE.0, NETWORK.0].contains(&hint.0) {
        cite_ranks(incident, s.last.span.source, &mut f);
    }
    tell(&mut f, startup, &s, hint.0);
    push_actions(&mut f, s.lagging.as_ref(), hint, corroborated);
    say_how_it_ended(&mut f, s.ignored.is_some(), s.cut_only);
    Some(f)
}

/// What one input shows of a start-up that stalled: where, how far, and
/// what corroborates it.
struct Stall<'a> {
    /// The last stage line, the furthest one, and the one where the stage
    /// the finding names began.
    last: &'a Message,
    furthest: &'a Message,
    began: &'a Message,
    reached: Stage,
    stage_name: String,
    /// The words of the line where the stage began.
    quote: Option<String>,
    lagging: Option<Lagging<'a>>,
    /// The line that gave up waiting, the silence before it, and the
    /// interrupts the process ignored.
    gave_up: Option<&'a Message>,
    silence: Option<i64>,
    ignored: Option<usize>,
    /// A training loop's bar at its first draw, the last line.
    zero_bar: Option<Span>,
    stuck_counter: bool,
    connecting: Option<Connecting<'a>>,
    in_progress: bool,
    ends_here: bool,
    cut_only: bool,
}

/// Reads one input's start-up: `None` when it finished, failed, or may
/// just have been cut.
fn read_stall<'a>(incident: &'a Incident, startup: &Startup<'a>) -> Option<Stall<'a>> {
    let &(last, last_stage, last_done) = startup.lines.iter().max_by_key(|(m, _, _)| m.span)?;
    // A work counter part-way on the last stage line (`8/16`): under way,
    // not finished; a stall only if someone gave up waiting (below).
    let counting = last_stage == Stage::Ready && last_done.is_some_and(|d| d > 0);
    if finished(startup, counting.then_some(last.span)) {
        return None;
    }
    let reached = startup.lines.iter().map(|(_, s, _)| *s).max()?;
    let furthest = startup
        .lines
        .iter()
        .rev()
        .find(|(_, s, _)| *s == reached)
        .map(|(m, _, _)| *m)?;
    // One rank behind the others inside an operation they finished (rank 0
    // loaded its weights, rank 1 only began): that rank is the one stuck,
    // whatever the others reached.
    let lagging = lagging_rank(incident, startup);
    // A failure in the same input (of any rank: ranks interleave, and a
    // paste may come in any order) is the story, and its own rule tells it;
    // so is an error line no rule knows yet (before any interrupt, whose
    // own errors follow from it).
    if failed_in(incident, last.span.source) {
        return None;
    }
    let gave_up = gave_up(incident, last);
    if errored(incident, last, gave_up) {
        return None;
    }
    // A count part-way that ends the paste may just be where it was cut.
    if counting && gave_up.is_none() {
        return None;
    }
    // A training loop's bar at its first draw, the last line of the paste:
    // the loop's counter standing at 0.
    let zero_bar = (reached == Stage::Training)
        .then(|| startup.zero_bars.iter().filter(|s| **s > last.span).max())
        .flatten()
        .copied()
        .filter(|s| ends_on(incident, *s));
    let stuck_counter = last_done == Some(0) || zero_bar.is_some();
    // One NCCL rank still connecting after the others formed the group.
    let connecting = still_connecting(startup, last, reached);
    // A log that ends right after a stage completed (weights loaded, graphs
    // captured), or after the launch line alone, may just have been cut
    // there; one that ends inside an operation (NCCL forming, weights
    // loading, capture under way), or that someone gave up on, stopped there.
    let in_progress =
        under_way(reached) || last_done.is_some() || lagging.is_some() || connecting.is_some();
    let (reached, furthest) = match &lagging {
        Some(l) => (l.stage, l.line),
        None => (reached, furthest),
    };
    let cut_only = gave_up.is_none() && !stuck_counter && !in_progress;
    if cut_only && !ends_before_a_long_step(incident, startup, last, reached) {
        return None;
    }
    // A model step's trace goes on while the engine serves: stopped only
    // where it ends the paste (or someone gave up after it).
    if last_stage == Stage::Forward && gave_up.is_none() && !ends_on(incident, last.span) {
        return None;
    }
    // Someone stopped it: whatever it printed before, it never got further.
    if gave_up.is_none() && went_on(incident, last, last_stage, last_done) {
        return None;
    }
    // The line where the stage began, quoted as the log says it.
    let began = match &lagging {
        Some(l) => l.line,
        None => startup
            .lines
            .iter()
            .filter(|(_, s, _)| *s == reached)
            .map(|(m, _, _)| *m)
            .min_by_key(|m| m.span)
            .unwrap_or(furthest),
    };
    Some(Stall {
        last,
        furthest,
        began,
        reached,
        stage_name: stage_name(reached, lagging.as_ref(), counting),
        quote: startup.quotes.get(&began.span).map(|q| clip(q)),
        lagging,
        gave_up,
        silence: gave_up.and_then(|m| seconds_between(incident, last.span, m.span)),
        ignored: gave_up.and_then(|m| ignored_interrupts(incident, m)),
        zero_bar,
        stuck_counter,
        connecting,
        in_progress,
        ends_here: ends_on(incident, last.span) || zero_bar.is_some(),
        cut_only,
    })
}

/// Cites the lines of the stall: a rank still connecting, the furthest
/// stage and the last milestone, where the stage began, the bar at 0, a
/// lagging rank and the line that gave up.
fn cite_stall(f: &mut Finding, s: &Stall<'_>) {
    if let Some(c) = &s.connecting {
        f.evidence(
            c.line.span,
            format!(
                "NCCL process {} is still connecting its communicator (its last line) after other ranks printed Init COMPLETE: it never completed",
                c.pid
            ),
        );
        f.condition(
            "a rank was still connecting its NCCL communicator after the others completed theirs",
            true,
        );
    }
    let counter_at_zero = s.stuck_counter && s.zero_bar.is_none();
    let who = if s.reached == Stage::Generating {
        "the request"
    } else {
        "the start-up"
    };
    cite_progress(f, s.last, s.furthest, (who, &s.stage_name), counter_at_zero);
    if s.began.span != s.furthest.span
        && s.began.span != s.last.span
        && let Some(q) = &s.quote
    {
        f.evidence(s.began.span, format!("where this stage began: \"{q}\""));
    }
    if let Some(bar) = s.zero_bar {
        f.evidence(
            bar,
            "the training loop's progress bar at its first draw (0 steps done) is the last line: no step finished",
        );
    }
    if let Some(l) = &s.lagging {
        cite_lagging(f, l);
    }
    if let Some(m) = s.gave_up {
        cite_gave_up(f, m, s.silence, s.ignored);
    }
}

/// The finding's title, headline (the stage, its words, the ranks seen
/// there) and causal chain, ending in `why`.
fn tell(f: &mut Finding, startup: &Startup<'_>, s: &Stall<'_>, why: &str) {
    let stage_name = &s.stage_name;
    if s.reached == Stage::Generating {
        super::advice::tell_generation(f, s.quote.as_deref(), s.gave_up.is_some(), why);
        return;
    }
    if s.reached == Stage::Forward {
        super::advice::tell_forward(f, s.quote.as_deref(), s.gave_up.is_some(), why);
        return;
    }
    f.title = format!("the start-up stopped making progress at: {stage_name}");
    let runner = if s.reached == Stage::Training {
        Runner::TrainingJob
    } else if startup.benchmark {
        Runner::Benchmark
    } else {
        Runner::Server
    };
    f.headline = headline(
        stage_name,
        s.quote.as_deref(),
        runner,
        s.gave_up.is_some(),
        s.silence,
    );
    if let Some(seen) = ranks_seen(startup, s.reached) {
        f.headline.push(' ');
        f.headline.push_str(&seen);
    }
    f.chain
        .push(runner.never(s.reached == Stage::Ready).to_owned());
    f.chain
        .push(format!("its start-up went silent at: {stage_name}"));
    if s.ignored.is_some() {
        f.chain.push(IGNORES_SIGINT.to_owned());
    }
    f.chain.push(why.to_owned());
    f.explanation = why.to_owned();
}

/// Whether `stage` is an operation under way (NCCL forming, the first
/// collective posted, weights loading, capture begun), not a milestone.
fn under_way(stage: Stage) -> bool {
    matches!(
        stage,
        Stage::DistributedInit
            | Stage::FirstCollective
            | Stage::WeightsLoading
            | Stage::GraphCapture
            | Stage::Forward
            | Stage::Generating
    )
}

/// The seconds from the line `from` to the line `to`, when both are timed.
fn seconds_between(incident: &Incident, from: Span, to: Span) -> Option<i64> {
    let (from, to) = (incident.time_of(from)?, incident.time_of(to)?);
    Some(to.utc_seconds() - from.utc_seconds())
}

/// Whether a start-up that completed the stage `reached` (no operation
/// under way, nobody gave up) ends the paste there, before a long step of
/// a server's start-up: the group formed (the weights load next), the
/// weights loaded (memory is profiled), the KV cache sized (graphs are
/// captured), an engine built (what embeds it, an RL trainer, goes on),
/// NCCL's communicators initialised, whatever the transport and
/// however many ranks printed it, or a training job set up (its first
/// step, with its first collective, comes next). One line and no clock
/// are enough, read at a confidence that says the paste may just be cut.
/// Not on the launch line alone, nor after the graphs are captured (only
/// quick steps to ready remain: a healthy start-up pasted to there), nor
/// when anything failed in any input.
fn ends_before_a_long_step(
    incident: &Incident,
    startup: &Startup<'_>,
    last: &Message,
    reached: Stage,
) -> bool {
    let long_next = matches!(
        reached,
        Stage::DistributedReady
            | Stage::WeightsLoaded
            | Stage::KvCache
            | Stage::EngineReady
            | Stage::Training
    );
    long_next
        && ends_on(incident, last.span)
        && !failed_anywhere(incident)
        && !(reached == Stage::DistributedReady && nccl_init_says_nothing_waits(incident, startup))
}

/// The headline's last words and the step for a process that ignored its
/// interrupts, or for a paste that may only be cut.
fn say_how_it_ended(f: &mut Finding, ignored: bool, cut_only: bool) {
    if ignored {
        f.headline
            .push_str(" Repeated Ctrl-C did not stop it: the process ignores SIGINT.");
        f.actions.push(Action::advice(
            "Dump the stuck process's stacks, then kill it with SIGKILL; if it survives even that (state D, in the driver), the GPU or driver is stuck: reboot the node",
            Some("py-spy dump --pid PID; kill -9 PID; ps -o pid,stat,wchan:32,cmd -p PID"),
        ));
    } else if cut_only {
        f.headline.push_str(
            " The paste may simply be cut there: check that the process is still running.",
        );
    }
}

/// How many lines reached `reached` and no further (`seen N times`), and
/// every process that wrote one, cited or only counted: the writer a
/// line's prefix names (`(VllmWorkerProcess pid=N)`).
fn count_at_stage(f: &mut Finding, startup: &Startup<'_>, reached: Stage) {
    let at_stage: Vec<&Message> = startup
        .lines
        .iter()
        .filter(|(_, s, _)| *s == reached)
        .map(|(m, _, _)| *m)
        .collect();
    f.occurrences = u32::try_from(at_stage.len()).unwrap_or(u32::MAX);
    f.entities
        .pids
        .extend(at_stage.iter().filter_map(|m| m.pid).filter(|p| *p > 1));
}

/// The first line after the `last` milestone, in its input, that says
/// someone or something gave up waiting: a stop, a timeout or an
/// interrupt.
fn gave_up<'a>(incident: &'a Incident, last: &Message) -> Option<&'a Message> {
    matches(incident, &GAVE_UP)
        .map(|(m, _)| m)
        .chain(interrupts(incident))
        .filter(|m| m.span.source == last.span.source && m.span > last.span)
        .min_by_key(|m| m.span)
}

/// Whether the `last` milestone's input has an error line (before the line
/// that gave up, whose own errors follow from it).
fn errored(incident: &Incident, last: &Message, gave_up: Option<&Message>) -> bool {
    incident.facts.messages.iter().any(|m| {
        m.span.source == last.span.source
            && gave_up.is_none_or(|g| m.span < g.span)
            && crate::rules::unknown::ERRORISH.is_match(&m.text)
    })
}

/// The stage the start-up stopped at, in words, with the rank that lags
/// behind when one does.
fn stage_name(reached: Stage, lagging: Option<&Lagging<'_>>, counting: bool) -> String {
    let stage_name = if reached == Stage::Ready && counting {
        "working through its requests or task steps"
    } else if reached == Stage::Ready {
        "processing its first request"
    } else {
        reached.doing()
    };
    match lagging {
        Some(l) => format!("rank {}, {stage_name}", l.rank),
        None => stage_name.to_owned(),
    }
}

/// Cites the furthest stage the start-up got to and its last milestone,
/// with a progress counter that stands at 0 (`stuck_counter`).
fn cite_progress(
    f: &mut Finding,
    last: &Message,
    furthest: &Message,
    (who, stage_name): (&str, &str),
    stuck_counter: bool,
) {
    const AT_ZERO: &str = "its progress counter stands at 0: the first step never finished";
    if last.span == furthest.span && stuck_counter {
        f.evidence(
            furthest.span,
            format!("the furthest {who} got: {stage_name}; {AT_ZERO}"),
        );
    } else {
        f.evidence(
            furthest.span,
            format!("the furthest {who} got: {stage_name}"),
        );
    }
    if last.span != furthest.span {
        let note = if stuck_counter {
            format!("the last start-up milestone in the log; {AT_ZERO}")
        } else {
            "the last start-up milestone in the log".to_owned()
        };
        f.evidence(last.span, note);
    }
}

/// Cites the rank that got further than the lagging one, as the condition
/// that the log was not cut before the lagging rank could have.
fn cite_lagging(f: &mut Finding, l: &Lagging<'_>) {
    f.evidence(
        l.ahead.span,
        format!(
            "rank {} got further ({}): the log was not cut before rank {} could have",
            l.ahead_rank,
            l.ahead_stage.doing(),
            l.rank
        ),
    );
    f.condition(
        format!(
            "another rank finished the operation rank {} never finished",
            l.rank
        ),
        true,
    );
}

/// What a process that shrugs off Ctrl-C is doing.
const IGNORES_SIGINT: &str = "repeated interrupts (^C) did not stop it and nothing shut down: Python runs its SIGINT handler only between bytecodes, so the process is blocked in native code (a collective, the driver)";

/// Cites the line `m` that gave up waiting, with the silence before it
/// when measured, and the interrupts the process ignored.
fn cite_gave_up(f: &mut Finding, m: &Message, silence: Option<i64>, ignored: Option<usize>) {
    let note = match (silence, ignored) {
        (_, Some(n)) => format!(
            "{n} interrupts (^C) echoed and nothing after them: no shutdown, no traceback; the process ignored SIGINT"
        ),
        (Some(s), None) if s >= 60 => format!(
            "{} later, still nothing: then it was stopped or interrupted",
            duration(s)
        ),
        _ => "the next thing the log shows is a stop, an interrupt or a timeout".to_owned(),
    };
    f.evidence(m.span, note);
}

/// How many interrupts (`^C`, as a terminal echoes Ctrl-C) stand from the
/// line `first` to the end of its input, when that is all there is after
/// it (no shutdown line, no `KeyboardInterrupt`) and there are two or
/// more: a process that ignored them.
fn ignored_interrupts(incident: &Incident, first: &Message) -> Option<usize> {
    let after: Vec<&Message> = incident
        .facts
        .messages
        .iter()
        .filter(|m| m.span.source == first.span.source && m.span >= first.span)
        .collect();
    let echoed = |t: &str| t.contains("^C") && t.replace("^C", "").trim().is_empty();
    if !after.iter().all(|m| echoed(&m.text)) {
        return None;
    }
    if !ends_on(incident, after.last()?.span) {
        return None;
    }
    let n: usize = after.iter().map(|m| m.text.matches("^C").count()).sum();
    (n >= 2).then_some(n)
}

/// Whether `span` is the last line of its input that is not blank: the
/// paste ends there.
fn ends_on(incident: &Incident, span: Span) -> bool {
    incident.facts.input_ends.contains(&span)
}

/// Whether any input shows a failure (the story, told by its own rule).
fn failed_anywhere(incident: &Incident) -> bool {
    incident
        .facts
        .input_ends
        .iter()
        .any(|end| failed_in(incident, end.source))
}

/// What the input shows around the stall, for [`judge`].
struct Seen {
    in_progress: bool,
    gave_up: bool,
    stuck_counter: bool,
    silence: Option<i64>,
    /// The last milestone is the last line of its input.
    ends_here: bool,
    /// Interrupts the process ignored (`^C` echoed, nothing after).
    ignored: Option<usize>,
}

/// Adds the conditions of a stall and sets the confidence from them;
/// returns whether something corroborates it (someone gave up waiting, or
/// a progress counter stands at 0).
fn judge(f: &mut Finding, seen: Seen) -> bool {
    let Seen {
        in_progress,
        gave_up,
        stuck_counter,
        silence,
        ends_here,
        ignored,
    } = seen;
    f.condition("the start-up reached a stage and no later one", true);
    // Said where it decides: a stage completed, nothing else to go by.
    if !(in_progress || gave_up || stuck_counter) {
        f.condition(
            "the paste ends on this milestone (nothing after it, so it may be cut there)",
            ends_here,
        );
    }
    f.condition(
        "the log ends inside an operation (a stage begun, not finished)",
        in_progress,
    );
    f.condition("no error, exception or exit follows it in the log", true);
    let corroborated = f.condition(
        "someone or something gave up waiting (an interrupt, a stop, a timeout), or a progress counter stands at 0",
        gave_up || stuck_counter,
    );
    let long = f.condition(
        format!(
            "the silence is measured: {} or more",
            duration(LONG_SILENCE_SECS)
        ),
        silence.is_some_and(|s| s >= LONG_SILENCE_SECS),
    );
    let shrugged = ignored.is_some()
        && f.condition(
            "the process ignored repeated interrupts (^C), with no shutdown after them",
            true,
        );
    // A log that merely ends says less than one someone interrupted: the
    // paste may have been cut; less still when it ends on a stage that
    // completed (the next one may simply not be in the paste).
    f.confidence = round2(match (corroborated, long || shrugged, in_progress) {
        (true, true, _) => 0.85,
        (true, false, _) => 0.7,
        (false, _, true) => 0.45,
        (false, _, false) => 0.3,
    });
    corroborated
}

/// Adds the steps: compare a lagging rank's GPU with the one ahead, the
/// stage's `hint`, and (not `corroborated`) check the log was not cut.
fn push_actions(
    f: &mut Finding,
    lagging: Option<&Lagging<'_>>,
    hint: (&str, &str, &str),
    corroborated: bool,
) {
    if let Some(l) = lagging {
        f.actions.push(Action::advice(
            format!(
                "check rank {}'s GPU against rank {}'s: a rank that alone never finishes {} often has the smaller or busier GPU (mixed capacities split the model evenly) and ran out of memory there",
                l.rank,
                l.ahead_rank,
                l.stage.doing()
            ),
            Some("nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv"),
        ));
    }
    f.actions.push(Action::advice(hint.1, Some(hint.2)));
    if !corroborated {
        f.actions.push(Action::advice(
            "Check that the log was not simply cut: is the process still running, and busy?",
            Some("ps -o pid,etimes,stat,cmd -p PID; py-spy dump --pid PID"),
        ));
    }
}
