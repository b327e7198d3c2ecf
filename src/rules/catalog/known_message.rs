//! `known-message`: a line that is a message of an upstream catalog whose
//! meaning needs no reasoning (a row with a category and a fix) is a
//! finding by itself, at the confidence the row says the line alone gives.
//! Where a rule reasons further about the same line (numbers, holders,
//! causal order), that rule's finding stands instead (`rules::diagnose`
//! drops this one when another finding cites all its lines).

use std::collections::BTreeMap;

use crate::catalogs::{Hit, Origin, Row, Via};
use crate::correlate::{Incident, UnitEventKind};
use crate::model::Message;
use crate::rules::support::{capitalise, distinct, warning_lines};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: KnownMessage = KnownMessage;

pub struct KnownMessage;

/// A kept line and how it was read as its row.
pub(super) type Line<'a> = (&'a Message, &'a Hit<'static>);

/// Lines cited per row at most; the count says how many there were.
const CITED: usize = 3;

pub static META: RuleMeta = RuleMeta {
    id: super::KNOWN_MESSAGE,
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "a message of an upstream catalog (CUDA, NCCL, systemd, the kernel, a serving stack) that says by itself what failed",
    // The catalogs' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
A line of the inputs is one of the messages upstream projects list in
their own catalogs (docs/catalogs/): a CUDA runtime or driver error, an
NCCL result or warning, a systemd unit result, a kernel message, a serving
stack's fatal error. Its catalog row says what it means, which category of
failure it establishes and how much the line alone proves.

## Why it happens
As the row says; the finding quotes the row's meaning and names the
upstream source of the wording.

## How to confirm
The row's confirmation command, shown as a step; the finding's conditions
say that only the line itself was read.

## How to fix
The row's fix.

## Safety
Advice only: a line alone never justifies a destructive step.
"#,
};

impl Rule for KnownMessage {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // Rows in catalog order, each with its lines in input order.
        let mut by_row: BTreeMap<&str, (&Row, Vec<Line<'_>>)> = BTreeMap::new();
        let warnings = warning_lines(incident);
        for k in &incident.known {
            let Some(row) = k.hit.row else { continue };
            if row.category.is_none() {
                continue;
            }
            if row.id == DUMPED_CORE && death_told(incident, &k.hit) {
                continue;
            }
            // A code read out of a line (not by a wording of its own) that
            // another row reads as a warning quotes the code, not raises it.
            if !matches!(k.hit.via, Via::Wording(_))
                && warnings.contains(&incident.facts.messages[k.message].span)
            {
                continue;
            }
            by_row
                .entry(row.id.as_str())
                .or_insert_with(|| (row, Vec::new()))
                .1
                .push((&incident.facts.messages[k.message], &k.hit));
        }
        let read_with = supersede(incident, &mut by_row);
        for (id, (row, hits)) in by_row {
            if hits.is_empty() {
                continue;
            }
            let mut f = finding(row, &hits);
            cite_nccl_trace(incident, &mut f, hits[0].0);
            let also = read_with.get(id).map(Vec::as_slice).unwrap_or_default();
            cite_superseded(&mut f, also);
            // Every line's facts, the counted ones too; the cited lines'
            // (and their blocks') are added again with every finding's.
            for (m, hit) in hits.iter().chain(also.iter().map(|(_, line)| line)) {
                crate::rules::support::entities::from_hit(incident, &mut f, hit, true);
                // The process the line reports on, named by the row's
                // subject line before it (each attempt's PID).
                if let Some(subject) = row.subject.as_deref()
                    && let Some((_, named)) = incident
                        .known(subject)
                        .filter(|(s, _)| s.span.source == m.span.source && s.span < m.span)
                        .last()
                {
                    crate::rules::support::entities::from_hit(incident, &mut f, named, true);
                }
            }
            out.push(f);
        }
    }
}

/// An `NCCL WARN` line's trace back up through NCCL's initialisation: its
/// last `init.cc` frame (`init.cc:878 -> 2`), the step of the init that
/// returned the error, as printed.
fn cite_nccl_trace(incident: &Incident, f: &mut Finding, first: &crate::model::Message) {
    use crate::rules::support::nccl_trace;
    if !first.text.contains("NCCL WARN") {
        return;
    }
    if let Some(frame) = nccl_trace::last_init_frame(incident, first)
        && let Some(text) = nccl_trace::frame_text(frame)
    {
        f.evidence_marked(
            frame.span,
            format!("NCCL traces this failure back up through its initialisation: {text} is the init step that returned it"),
            text,
        );
    }
}

/// systemd-coredump's `Process N (comm) of user U dumped core.`: a death
/// of its own only where nothing else in the inputs tells it.
const DUMPED_CORE: &str = "systemd.coredump-process-dumped-core";

/// Whether the death a dumped-core line reports is told by the records
/// `process-died` (or the crash-loop rule) reads as that death: the
/// `coredumpctl info` record of the same PID (the line is its `Message:`),
/// or the unit that owns the PID (or is named by its comm) dying by a
/// signal or a core dump in its own events. Those findings say how and
/// when it died, with its last words; the line alone says less.
fn death_told(incident: &Incident, hit: &Hit<'_>) -> bool {
    let pid = hit.get("pid").and_then(|p| p.trim().parse::<u32>().ok());
    let comm = hit.get("comm").map(str::trim).filter(|c| !c.is_empty());
    if incident
        .facts
        .core_dumps
        .iter()
        .any(|c| Some(c.pid) == pid || (c.comm.is_some() && c.comm.as_deref() == comm))
    {
        return true;
    }
    let owner = pid.and_then(|p| incident.owner(p)).map(|o| o.unit.as_str());
    incident.units.iter().any(|(unit, facts)| {
        let named = Some(unit.as_str()) == owner
            || comm.is_some_and(|c| unit.strip_suffix(".service") == Some(c));
        named
            && facts.events.iter().any(|e| match &e.kind {
                UnitEventKind::MainProcessExited { code, .. } => code == "dumped",
                UnitEventKind::FailedWithResult(r) => r == "core-dump",
                _ => false,
            })
    })
}

/// The lines of a row that another row of the same event supersedes
/// (its `superseded_by`), where a line of that row is in the same input:
/// taken from their own row, and returned under the row whose finding
/// cites them instead (the first of `superseded_by` that is there).
fn supersede<'a>(
    incident: &'a Incident,
    by_row: &mut BTreeMap<&'a str, (&'a Row, Vec<Line<'a>>)>,
) -> BTreeMap<&'a str, Vec<(&'a Row, Line<'a>)>> {
    let mut moved: BTreeMap<&'a str, Vec<(&'a Row, Line<'a>)>> = BTreeMap::new();
    for (row, hits) in by_row.values_mut() {
        if row.superseded_by.is_empty() {
            continue;
        }
        hits.retain(|line| {
            let source = line.0.span.source;
            let stronger = row
                .superseded_by
                .iter()
                .find(|id| incident.known(id).any(|(m, _)| m.span.source == source));
            match stronger {
                Some(id) => {
                    moved.entry(id.as_str()).or_default().push((*row, *line));
                    false
                }
                None => true,
            }
        });
    }
    moved
}

/// Cites the superseded lines a finding reads with its own: each row's
/// first lines, said to be the same event.
pub(super) fn cite_superseded(f: &mut Finding, lines: &[(&Row, Line<'_>)]) {
    let mut cited: BTreeMap<&str, usize> = BTreeMap::new();
    for (row, (m, hit)) in lines {
        let n = cited.entry(row.id.as_str()).or_default();
        if *n == CITED || f.evidence.iter().any(|e| e.span == m.span) {
            continue;
        }
        *n += 1;
        f.evidence_marked(
            m.span,
            format!("{}: the same event, read with it", row.title),
            hit.matched.trim(),
        );
    }
}

/// The finding of a row's lines (the symptom rule's too, which rewrites
/// its headline and conditions).
pub(super) fn finding(row: &Row, hits: &[Line<'_>]) -> Finding {
    let category = row.category.unwrap_or(Category::Unknown);
    let mut f = Finding::new(META.id, category, row.severity);
    let lines = distinct(hits.iter().map(|(m, _)| *m));
    let total: usize = lines.iter().map(|(_, n)| n).sum();
    for (m, n) in lines.iter().take(CITED) {
        let hit = hits
            .iter()
            .find(|(h, _)| h.span == m.span)
            .map(|(_, h)| *h)
            .expect("a cited line is one of the row's");
        let times = if *n > 1 {
            format!(" ({n}x)")
        } else {
            String::new()
        };
        f.evidence_marked(
            m.span,
            format!("{}{times}{}", row.title, how_read(hit)),
            hit.matched.trim(),
        );
    }
    f.occurrences = u32::try_from(total).unwrap_or(u32::MAX);
    let first = hits[0].1;
    f.title = row.title.clone();
    f.headline = format!("{}.", row.headline_for(first).trim_end_matches('.'));
    f.explanation = row.meaning.clone();
    f.chain.push(row.headline_for(first));
    f.chain.push(decapitalise(&row.meaning));
    f.condition(
        format!("the line is catalog row `{}` ({})", row.id, upstream(row)),
        true,
    );
    f.condition(
        "only the line itself was read: no other input confirms or rules out its cause",
        false,
    );
    f.confidence = row.confidence;
    if let Some(fix) = &row.fix {
        f.actions
            .push(Action::advice(capitalise(fix), row.confirm.as_deref()));
    } else if let Some(confirm) = &row.confirm {
        f.actions
            .push(Action::advice("Confirm what the line says", Some(confirm)));
    }
    f
}

/// `The kernel's …` → `the kernel's …`, for a chain's "because" line; an
/// acronym (`NCCL …`, `GPU …`) keeps its case.
fn decapitalise(s: &str) -> String {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => {
            first.to_lowercase().chain(s.chars().skip(1)).collect()
        }
        _ => s.to_owned(),
    }
}

/// How the line was read, for the evidence note: the wrapper and the code
/// (`, cudaErrorDevicesUnavailable (46) as THC prints it`), or nothing
/// when the row's own wording matched.
fn how_read(hit: &Hit<'_>) -> String {
    let code = hit
        .row
        .map(|r| match (&r.name, r.code) {
            (Some(name), Some(code)) => format!("{name} ({code})"),
            (Some(name), None) => name.clone(),
            (None, Some(code)) => format!("code {code}"),
            (None, None) => String::new(),
        })
        .unwrap_or_default();
    match hit.via {
        Via::Wrapper(w) if !code.is_empty() => format!(": {code}, as {} prints it", w.title),
        Via::Wrapper(w) => format!(": as {} prints it", w.title),
        _ if !code.is_empty() => format!(": {code}"),
        _ => String::new(),
    }
}

/// Where the row's wordings come from, shortened to the first wording's
/// source or the catalog's.
fn upstream(row: &Row) -> String {
    let first = row
        .wordings
        .first()
        .map(|w| w.upstream.as_str())
        .or_else(|| row.strings.first().and_then(|s| s.upstream.as_deref()))
        .unwrap_or("the catalog's upstream source");
    let sampled = row
        .samples
        .iter()
        .any(|s| matches!(s.origin, Origin::Page(_)));
    let short: String = first.chars().take(120).collect();
    if sampled {
        short
    } else {
        format!("{short}; no public sample yet")
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// system76-power issue 448, verbatim: a row of a held GPU names the
    /// GPU by the bus id its line prints (no nvidia-smi maps it here).
    #[test]
    fn a_held_gpu_row_names_its_gpu_by_bus_id() {
        let line = "Feb 26 18:22:12 adder kernel: NVRM: Attempting to remove device 0000:01:00.0 with non-zero usage count!\n";
        let f = findings_of(super::META.id, line);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].entities.gpu_bus_ids.contains("0000:01:00.0"),
            "{:?}",
            f[0].entities
        );
    }

    /// NVIDIA/open-gpu-kernel-modules#1118, verbatim: an SXid names the
    /// NVSwitch by the bus id its line prints, so that a user searching
    /// the report for the switch finds it.
    #[test]
    fn an_sxid_names_its_switch_by_bus_id() {
        let line = "192.168.11.119: kern:     err: [2026-04-22T21:25:20.466440686Z]: nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00\n";
        let f = findings_of(super::META.id, line);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].entities.gpu_bus_ids.contains("0000:aa:00.0"),
            "{:?}",
            f[0].entities
        );
        assert!(f[0].headline.contains("0000:aa:00.0"), "{}", f[0].headline);
    }

    /// Ollama's Windows app (ollama/ollama#4999, batch-h/800): the respawn
    /// finding names the PID of the attempt that crashed, from the app's
    /// `started ollama server with pid 15024` before it (the row's
    /// subject); in a loop (a variant: a second attempt, assembled from the same two
    /// lines) the loop's own rule names each crash's PID.
    #[test]
    fn a_respawn_names_the_pid_of_each_attempt() {
        let app = r#"time=2024-06-12T18:35:12.068+08:00 level=INFO source=server.go:135 msg="starting server..."
time=2024-06-12T18:35:12.069+08:00 level=INFO source=server.go:121 msg="started ollama server with pid 15024"
time=2024-06-12T18:35:12.116+08:00 level=WARN source=server.go:157 msg="server crash 21 - exit code 1 - respawning"
"#;
        let respawn = |text: &str| {
            findings_of(super::META.id, text)
                .into_iter()
                .find(|f| f.title.contains("respawned"))
                .expect("the respawn finding")
        };
        let f = respawn(app);
        assert_eq!(f.entities.pids.iter().copied().collect::<Vec<_>>(), [15024]);
        let again = format!(
            "{app}{}",
            r#"time=2024-06-12T18:35:13.120+08:00 level=INFO source=server.go:121 msg="started ollama server with pid 15188"
time=2024-06-12T18:35:13.170+08:00 level=WARN source=server.go:157 msg="server crash 22 - exit code 1 - respawning"
"#
        );
        // Two quick crashes with a rising count are a loop: the row names
        // `ollama-app-respawn-loop` as its rule, which reports them (both
        // PIDs), and this rule's warning gives way to it.
        assert!(
            findings_of(super::META.id, &again)
                .iter()
                .all(|f| !f.title.contains("respawned"))
        );
        let looped = findings_of("ollama-app-respawn-loop", &again);
        assert_eq!(looped.len(), 1, "{looped:#?}");
        assert_eq!(
            looped[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [15024, 15188]
        );
        // A start with no crash after it names nobody.
        let started = app.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(
            findings_of(super::META.id, &started)
                .iter()
                .all(|f| f.entities.pids.is_empty())
        );
    }

    /// lmm-r1#71 (batch-k/871): `ray job submit` kept only the end of the
    /// job's logs, the top users' rows and Ray's advice, without the
    /// kill's own line: the advice alone is a host-OOM finding at its
    /// row's lower confidence. With the raylet's kill summary in the same
    /// input (EasyR1#185's two lines), the kill's finding cites the advice
    /// and there is one finding for the one kill, not two.
    #[test]
    fn rays_advice_alone_is_a_kill_and_beside_the_kill_line_is_read_with_it() {
        let advice = "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.\n";
        let tail =
            format!("95412   14.05   ray::LLMRayActor\n95410   13.86   ray::LLMRayActor\n{advice}");
        let f = findings_of(super::META.id, &tail);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
        assert!(f[0].confidence <= 0.5, "{}", f[0].confidence);
        let easyr1 = "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.95.143.76`\n(raylet)\n(raylet) Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.\n";
        let f = findings_of(super::META.id, easyr1);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].title.contains("killed workers (memory pressure)"),
            "{}",
            f[0].title
        );
        let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(lines, [1, 3], "{:?}", f[0].evidence);
        assert!(f[0].confidence >= 0.8, "{}", f[0].confidence);
    }

    /// The next paste: the error a Ray Serve replica's or a task's caller
    /// gets, `Task was killed due to the node running low on memory.`
    /// (OpenRLHF#936's title, verbatim) alone is a host-OOM kill; with the
    /// node's figures under it (a variant, assembled from Ray's OOM
    /// prevention docs' header and ray#32730's detail line) the detail's
    /// finding, with its figures, is the one finding and cites the header.
    #[test]
    fn rays_low_memory_kill_header_is_read_with_its_figures() {
        let header = "ERROR - An error occurred during score calculation: Task was killed due to the node running low on memory.\n";
        let f = findings_of(super::META.id, header);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
        let both = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node (IP: 172.31.237.1, ID: 2c0ca846c8a9b1630ce2a4aae5ce82dd974531325a67acab1801dbf1) where the task (task ID: 76b2551f16836f9d58427a0096d8ccf5ba077e2703000000, name=pi4_sample, pid=664672, memory used=0.05GB) was running was 219.41GB / 230.40GB (0.952289), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: ba84684289453ec054c6d0aa4293b77bdf7d3f3e0c77b2724ee41479) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip 172.31.237.1`. To see the logs of the worker, use `ray logs worker-ba84684289453ec054c6d0aa4293b77bdf7d3f3e0c77b2724ee41479*out -ip 172.31.237.1. Top 10 memory users:\n";
        let f = findings_of(super::META.id, both);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].headline.contains("219.41"), "{}", f[0].headline);
        crate::testing::cites_line(&f[0], 1);
        assert!(f[0].entities.pids.contains(&664672), "{:?}", f[0].entities);
    }

    /// kitty#5743 (batch-k/887): systemd-oomd's own line gives the
    /// finding, with the watched cgroup, the pressure and the limit in its
    /// headline, and cites the user manager's `systemd-oomd killed 65
    /// process(es)`; neither oomd's PID (970) nor the user manager's
    /// (`systemd[1348]`) is taken as a killed process. The next paste:
    /// oomd killing `ollama.service` on a GPU host (a variant, assembled
    /// from the same format), and v254's `Marked … for killing` wording
    /// (systemd/systemd#42321, verbatim) read the same.
    #[test]
    fn oomds_own_line_gives_the_figures_and_no_speakers_pid() {
        let kitty = "Dec 04 20:15:55 fedora systemd-oomd[970]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/app-kitty-47f7730eb1474ba3848f1b5d6135a33f.scope due to memory pressure for /user.slice/user-1000.slice/user@1000.service being 77.97% > 50.00% for > 20s with reclaim activity
Dec 04 20:15:55 fedora systemd[1348]: app-kitty-47f7730eb1474ba3848f1b5d6135a33f.scope: systemd-oomd killed 65 process(es) in this unit.
Dec 04 20:15:55 fedora systemd[1348]: app-kitty-47f7730eb1474ba3848f1b5d6135a33f.scope: Consumed 5h 50min 18.998s CPU time.
";
        let a = crate::testing::analyze_paste(kitty);
        let f = &a.diagnosis.findings;
        assert_eq!(f.len(), 1, "{f:#?}");
        for said in [
            "77.97%",
            "50.00%",
            "/user.slice/user-1000.slice/user@1000.service",
            "20s",
        ] {
            assert!(f[0].headline.contains(said), "{said}: {}", f[0].headline);
        }
        let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(lines, [1, 2], "{:?}", f[0].evidence);
        assert!(f[0].entities.pids.is_empty(), "{:?}", f[0].entities);
        assert!(
            f[0].entities
                .units
                .contains("app-kitty-47f7730eb1474ba3848f1b5d6135a33f.scope")
        );
        let ollama = "Mar 02 10:00:01 gpu1 systemd-oomd[812]: Killed /system.slice/ollama.service due to memory pressure for /system.slice being 62.10% > 50.00% for > 20s with reclaim activity
Mar 02 10:00:01 gpu1 systemd[1]: ollama.service: systemd-oomd killed 3 process(es) in this unit.
";
        let f = findings_of(super::META.id, ollama);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].headline.contains("ollama.service") && f[0].headline.contains("62.10%"),
            "{}",
            f[0].headline
        );
        let marked = "[   77.749670] systemd-oomd[659]: Marked /system.slice/systemd-journald.service for killing due to memory pressure for /system.slice being 85.03% > 80.00% for > 2s with reclaim activity\n";
        let f = findings_of(super::META.id, marked);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].headline.contains("85.03%"), "{}", f[0].headline);
        assert!(f[0].entities.pids.is_empty(), "{:?}", f[0].entities);
    }

    /// oomd's other trigger, memory and swap both nearly full (a variant,
    /// assembled from src/oom/oomd-manager.c's format; the line of
    /// systemd/systemd#24185 was not at hand whole): its figures in the
    /// headline, and PID 1's line read with it.
    #[test]
    fn oomds_swap_kill_gives_its_figures() {
        let swap = "Aug 02 10:00:01 koji systemd-oomd[2261673]: Killed /system.slice/httpd.service due to memory used (32305733632) / total (33046962176) and swap used (7650000000) / total (8589930496) being more than 90.00%
Aug 02 10:00:01 koji systemd[1]: httpd.service: systemd-oomd killed 12 process(es) in this unit.
";
        let f = findings_of(super::META.id, swap);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].headline.contains("httpd.service"), "{}", f[0].headline);
        assert!(f[0].headline.contains("90.00%"), "{}", f[0].headline);
        assert!(f[0].entities.pids.is_empty(), "{:?}", f[0].entities);
    }

    /// A unit the inputs name only in PID 1's line about it (no event
    /// systemd's other lines give) is still the one unit of the paste: its
    /// start timeout is the answer, an error, though no GPU is shown
    /// (flux-framework's broker replaying its jobs past TimeoutStartSec=,
    /// reduced; the same line as systemd's fwupd sample).
    #[test]
    fn a_unit_named_only_by_pid1s_line_about_it_is_the_pastes_one_unit() {
        use crate::rules::{Category, Severity};
        let journal = "\
May 04 11:56:30 fluke1 flux[3196616]: job-manager.info[0]: restart: 26229 jobs
May 04 11:57:10 fluke1 systemd[1]: flux.service: start operation timed out. Terminating.
May 04 11:57:10 fluke1 flux[3196616]: broker.info[0]: signal 15
";
        let findings = crate::testing::analyze_paste(journal).diagnosis.findings;
        assert_eq!(
            (findings[0].category, findings[0].severity),
            (Category::UnitCrashLoop, Severity::Error),
            "{findings:?}"
        );
        // Beside another unit's line, the host's unit is outside serving.
        let two = format!(
            "{journal}May 04 11:57:11 fluke1 systemd[1]: cron.service: Deactivated successfully.\n"
        );
        let findings = crate::testing::analyze_paste(&two).diagnosis.findings;
        assert_eq!(findings[0].severity, Severity::Warning, "{findings:?}");
    }
}
