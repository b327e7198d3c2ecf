//! The failure under the timeouts: the first rank that stopped (its stall,
//! its exception, a kernel event) and the finding for an exception that
//! no other rule classifies.

use super::*;

/// What the stalled rank failed with.
pub(super) struct Stall<'a> {
    /// One line for the chain.
    pub(super) what: String,
    /// A few words for the headline.
    pub(super) short: String,
    pub(super) pid: Option<u32>,
    pub(super) gpu: Option<u32>,
    pub(super) evidence: Vec<(Span, String)>,
    /// Its exception, when that is the failure.
    pub(super) exception: Option<(&'a ServerEvent, &'a PyException)>,
}

/// The stalled rank's own failure before the timeouts: its exception (by
/// rank, or from a process of the server that did not report a timeout), an
/// Xid, or an OOM kill.
pub(super) fn first_failure<'a>(
    incident: &'a Incident,
    rank: u32,
    reporters: &BTreeSet<u32>,
    timeout: &'a ServerEvent,
    first_time: Option<crate::model::Timestamp>,
    timeout_s: u64,
) -> Option<Stall<'a>> {
    let events = &incident.facts.server_events;
    let before = |e: &ServerEvent| match (first_time, incident.time_of(e.span).or(e.time)) {
        (Some(f), Some(t)) => t.utc_seconds() <= f.utc_seconds(),
        _ => e.span.source == timeout.span.source && e.span.line < timeout.span.line,
    };
    // NCCL's own `rank N … pid` lines map the rank to its process.
    let rank_pid = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::Nccl(n) => match n.detail {
            NcclDetail::CommInit { rank: r, .. } if r == rank => Some(n.pid),
            _ => None,
        },
        _ => None,
    });
    let of_rank = |e: &ServerEvent| {
        e.rank
            .is_some_and(|r| r.global == Some(rank) || (r.global.is_none() && r.tp == Some(rank)))
            || (rank_pid.is_some() && e.pid == rank_pid)
            || (e.rank.is_none_or(|r| r.global.is_none() && r.tp.is_none())
                && e.pid.is_some_and(|p| !reporters.contains(&p))
                // The same server's stream: its input, or its unit.
                && (e.span.source == timeout.span.source
                    || (e.unit.is_some() && e.unit == timeout.unit))
                && e.process
                    .as_deref()
                    .is_some_and(|p| !p.starts_with("APIServer")))
    };
    let exception = events
        .iter()
        .filter(|e| before(e) && of_rank(e))
        .find_map(|e| match &e.kind {
            ServerEventKind::Exception(x) if !is_dist_noise(x) => {
                let root = root_cause(events, e);
                match &root.kind {
                    ServerEventKind::Exception(rx) => Some((root, rx)),
                    _ => Some((e, x)),
                }
            }
            _ => None,
        });
    if let Some((e, x)) = exception {
        let text = format!("{}: {}", x.name, shorten(&x.message));
        let mut evidence = vec![(
            e.span,
            format!("rank {rank}'s own error, before the timeouts: {text}"),
        )];
        // The line that announced it (vLLM's `Exception in worker …`).
        if let Some(lead) = incident.facts.messages.iter().rev().find(|m| {
            m.span.source == e.span.source
                && m.span.line < e.span.line
                && e.span.line - m.span.line <= 60
                && (m.text.contains("Exception in worker") || m.text.contains("hit an exception"))
        }) {
            evidence.insert(
                0,
                (
                    lead.span,
                    format!("rank {rank}'s process reported an exception"),
                ),
            );
        }
        return Some(Stall {
            what: format!("rank {rank} raised {text}"),
            short: text,
            pid: e.pid.or(rank_pid),
            gpu: None,
            evidence,
            exception: Some((e, x)),
        });
    }
    let near = |t: Option<crate::model::Timestamp>| match (first_time, t) {
        (Some(f), Some(t)) => {
            let d = f.utc_seconds() - t.utc_seconds();
            d >= 0 && d <= timeout_s as i64 + 120
        }
        _ => false,
    };
    kernel_failure(incident, near)
}

/// An Xid (other than 43 and 45) or an OOM kill in the kernel log at a time
/// `near` accepts (just before the timeouts): the first one, as the stalled
/// rank's failure; `None` if there is none.
fn kernel_failure<'a>(
    incident: &'a Incident,
    near: impl Fn(Option<crate::model::Timestamp>) -> bool,
) -> Option<Stall<'a>> {
    for k in &incident.facts.kernel_events {
        match &k.kind {
            KernelEventKind::Xid(x) if near(k.time.wall) && ![43, 45].contains(&x.code) => {
                let gpu = x
                    .bus_id
                    .as_deref()
                    .and_then(|b| incident.gpu_by_bus_id(b))
                    .map(|g| g.index);
                return Some(Stall {
                    what: format!("the GPU reported Xid {} before the timeouts", x.code),
                    short: format!("Xid {} on its GPU", x.code),
                    pid: x.pid,
                    gpu,
                    evidence: vec![(k.span, format!("Xid {} before the timeouts", x.code))],
                    exception: None,
                });
            }
            KernelEventKind::OomKill(o) if near(k.time.wall) => {
                return Some(Stall {
                    what: format!(
                        "the kernel's OOM killer killed PID {} before the timeouts",
                        o.pid.map_or("?".to_owned(), |p| p.to_string())
                    ),
                    short: "killed by the kernel's OOM killer".to_owned(),
                    pid: o.pid,
                    gpu: None,
                    evidence: vec![(k.span, "an OOM kill before the timeouts".to_owned())],
                    exception: None,
                });
            }
            _ => {}
        }
    }
    None
}

/// Exceptions that are the watchdog's own reports, not a cause.
pub(super) fn is_dist_noise(x: &PyException) -> bool {
    x.message
        .contains("Watchdog caught collective operation timeout")
        || x.message
            .contains("Process group watchdog thread terminated")
        || x.message.contains("NCCL communicator was aborted")
        || x.name.ends_with("DistBackendError") && x.message.contains("timeout")
}

/// Whether another rule classifies this exception (CUDA OOM and faults,
/// NCCL errors), so that no `server-exception` finding is needed.
pub(super) fn classified_elsewhere(incident: &Incident, e: &ServerEvent, x: &PyException) -> bool {
    let at = |span| {
        incident
            .facts
            .server_events
            .iter()
            .filter(move |c| c.span == span)
    };
    at(e.span).any(|c| {
        matches!(
            c.kind,
            ServerEventKind::CudaOom(_) | ServerEventKind::TorchDist(_)
        )
    }) || [
        "CUDA error",
        "Cuda failure",
        "NCCL error",
        "out of memory",
        "Not enough memory",
        "No available memory",
    ]
    .iter()
    .any(|t| x.message.contains(t))
}

/// The stalled rank's exception as the cause of the timeouts.
#[allow(clippy::too_many_arguments)]
pub(super) fn exception_finding(
    rank: u32,
    (_, x): &(&ServerEvent, &PyException),
    stall: &Stall<'_>,
    who: &str,
    first: Report<'_>,
    ranks_text: &str,
    timeout_ms: Option<u64>,
    timeouts: &Finding,
) -> Finding {
    let mut f = Finding::new(META.id, Category::ServerException, Severity::Critical);
    for (span, note) in &stall.evidence {
        f.evidence(*span, note.clone());
    }
    f.entities.units = timeouts.entities.units.clone();
    if let Some(p) = stall.pid {
        f.entities.pids.insert(p);
    }
    let text = format!("{}: {}", x.name, shorten(&x.message));
    if let Some(frame) = x.frames.last() {
        f.chain.push(format!(
            "{who}'s ranks {ranks_text} timed out waiting for rank {rank}"
        ));
        f.chain.push(format!(
            "rank {rank} raised {text} (in {} at {}:{})",
            frame.function.as_deref().unwrap_or("?"),
            frame.file.rsplit('/').next().unwrap_or(&frame.file),
            frame.line
        ));
    } else {
        f.chain.push(format!(
            "{who}'s ranks {ranks_text} timed out waiting for rank {rank}"
        ));
        f.chain.push(format!("rank {rank} raised {text}"));
    }
    f.condition(
        format!("rank {rank} raised an exception before the first timeout"),
        true,
    );
    f.condition(
        format!("rank {rank} is the only rank that did not report the timeout, or completed the least work"),
        true,
    );
    f.condition(
        "the traceback shows where it was raised",
        !x.frames.is_empty(),
    );
    f.title = format!("rank {rank} failed first: {}", x.name);
    f.headline = format!(
        "Rank {rank} of {who} raised {text} first; ranks {ranks_text} then waited in {} SeqNum={} until the NCCL watchdog aborted them {}.",
        first.op,
        first.seq,
        super::after(timeout_ms)
    );
    f.explanation = "The loudest errors, the NCCL timeouts and aborts on every other rank, are consequences: the other ranks waited for this one on their next collective. The exception is the place to start.".to_owned();
    if x.message.contains("Too many open files") {
        // EMFILE: the process hit its open-file limit, usually the unit's.
        f.actions.push(Action::advice(
            format!("rank {rank} hit its open-file limit: raise the unit's LimitNOFILE (e.g. 1048576) in a drop-in"),
            Some("systemctl show -p LimitNOFILE UNIT; systemctl edit UNIT   # [Service] LimitNOFILE=1048576"),
        ));
    } else {
        f.actions.push(Action::advice(
            format!(
                "fix the cause of rank {rank}'s {} (its traceback shows where it was raised)",
                x.name
            ),
            None,
        ));
    }
    f.actions.push(Action::advice(
        "then restart the whole server (every rank)",
        timeouts
            .entities
            .units
            .iter()
            .next()
            .map(|u| format!("systemctl restart {u}"))
            .as_deref(),
    ));
    f.confidence = confidence(&f, 0.6, 0.95);
    f
}
