//! The ranks a start-up's lines name: those seen at a stage, NCCL's
//! processes and hosts, a rank still connecting after the others formed
//! the group, and whether NCCL's `Init COMPLETE` alone says anyone waits.

use super::*;

/// Whether the input's NCCL `Init COMPLETE` lines, the last thing it
/// shows, say nothing about anyone waiting: one node's group, shown whole
/// (every rank of `nranks`) or by one rank's line alone, as healthy
/// start-ups are pasted too. Not when the group spans nodes (NCCL routes
/// traffic `via NET/Socket` or `via NET/IB`, or its lines name two hosts:
/// the other nodes' state is not in the paste, and a node that never
/// joins is how such jobs hang), nor when several ranks are shown and
/// others of the group are not (they never completed here).
pub(super) fn nccl_init_says_nothing_waits(incident: &Incident, startup: &Startup<'_>) -> bool {
    let mut ranks = std::collections::BTreeSet::new();
    let mut hosts = std::collections::BTreeSet::new();
    let mut nranks = None;
    for (m, s, _) in &startup.lines {
        if !startup.nccl.contains(&m.span) {
            continue;
        }
        if let Some(host) = NCCL_PID.captures(&m.text).and_then(|c| c.get(1)) {
            hosts.insert(host.as_str());
        }
        if *s != Stage::DistributedReady {
            continue;
        }
        if let Some(&(rank, n, _)) = startup.ranks.get(&m.span) {
            ranks.insert(rank);
            nranks = nranks.max(n);
        }
    }
    let Some(n) = nranks else {
        return false;
    };
    let Some((first, _, _)) = startup.lines.first() else {
        return false;
    };
    let spans_nodes = hosts.len() > 1 || over_network(incident, first.span.source);
    let some_missing = ranks.len() >= 2 && ranks.len() < n as usize;
    !(spans_nodes || some_missing)
}

/// A quoted stage line, at most 120 characters.
pub(super) fn clip(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The ranks whose lines reached `reached`, as the lines number them, with
/// the group's size when a line says it: `Ranks seen there: 9, 10, 11 (of
/// 16).`
pub(super) fn ranks_seen(startup: &Startup<'_>, reached: Stage) -> Option<String> {
    let mut ranks = std::collections::BTreeSet::new();
    let mut of = None;
    let mut local = false;
    for (m, s, _) in &startup.lines {
        if *s != reached {
            continue;
        }
        if let Some(&(rank, nranks, is_local)) = startup.ranks.get(&m.span) {
            ranks.insert(rank);
            of = of.max(nranks);
            local |= is_local;
        }
    }
    if ranks.is_empty() {
        return None;
    }
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    let of = of.map(|n| format!(" (of {n})")).unwrap_or_default();
    let what = if local { "Local ranks (GPUs)" } else { "Ranks" };
    Some(format!("{what} seen there: {}{of}.", list.join(", ")))
}

/// An NCCL process still connecting (its rings, trees, channels).
pub(super) struct Connecting<'a> {
    pub(super) line: &'a Message,
    pub(super) pid: u32,
}

/// The host and process of an NCCL line (`host:PID:TID [dev] NCCL INFO …`).
static NCCL_PID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"([^\s:\]>]+):([0-9]+):[0-9]+ \[[0-9]+\] NCCL ").expect("regex"));

fn nccl_pid(m: &Message) -> Option<u32> {
    NCCL_PID
        .captures(&m.text)
        .and_then(|c| c[2].parse().ok())
        .or(m.pid)
}

/// The last stage line, when it is an NCCL process's connecting line
/// (the group forming) and that process never printed `Init COMPLETE`
/// while another one did: a rank still forming its communicator, the one
/// the others wait for.
pub(super) fn still_connecting<'a>(
    startup: &Startup<'a>,
    last: &'a Message,
    reached: Stage,
) -> Option<Connecting<'a>> {
    let last_stage = startup
        .lines
        .iter()
        .find(|(m, _, _)| m.span == last.span)
        .map(|(_, s, _)| *s)?;
    if reached != Stage::DistributedReady || last_stage != Stage::DistributedInit {
        return None;
    }
    let pid = nccl_pid(last)?;
    let ready = startup
        .lines
        .iter()
        .any(|(m, s, _)| *s == Stage::DistributedReady && nccl_pid(m) == Some(pid));
    (!ready).then_some(Connecting { line: last, pid })
}
