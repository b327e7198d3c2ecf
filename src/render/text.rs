//! The terminal report: the root cause in one sentence first, the GPUs'
//! memory at a glance, then each finding's causal chain, its evidence as
//! annotated source excerpts (rustc style) and the remediation. `-v` adds
//! the rule conditions, competing hypotheses and the inputs; `-q` keeps
//! only the first line.

use std::fmt::Write as _;

use super::gpus::{GpuBar, mib, thousands};
use super::{RenderOptions, Report, Verbosity, clean, excerpt, style};
use crate::rules::{Evidence, Finding, Safety, Severity};

struct Style {
    color: bool,
}

impl Style {
    fn paint(&self, style: anstyle::Style, text: &str) -> String {
        style::paint(self.color, style, text)
    }
    fn bold(&self, text: &str) -> String {
        self.paint(style::BOLD, text)
    }
    fn dim(&self, text: &str) -> String {
        self.paint(style::DIM, text)
    }
    /// Line numbers and the excerpt frame, as rustc draws them.
    fn gutter(&self, text: &str) -> String {
        self.paint(style::GUTTER, text)
    }
    fn severity_style(s: Severity) -> anstyle::Style {
        match s {
            Severity::Critical | Severity::Error => style::BOLD_RED,
            Severity::Warning => style::BOLD_YELLOW,
            Severity::Info => style::BOLD_CYAN,
        }
    }
    fn severity(&self, s: Severity, text: &str) -> String {
        self.paint(Self::severity_style(s), text)
    }
}

pub fn render(report: &Report<'_>, options: RenderOptions) -> String {
    let st = Style {
        color: options.color,
    };
    let mut out = String::new();
    headline(&mut out, report, &st);
    if options.verbosity == Verbosity::Quiet {
        return out;
    }
    let verbose = options.verbosity == Verbosity::Verbose;
    gpu_picture(&mut out, report, &st);
    let root = report.root_cause();
    let is_symptom = |f: &Finding| root.is_some_and(|r| r.explains.contains(&f.id));
    for f in report.findings() {
        if verbose || !is_symptom(f) {
            out.push('\n');
            finding(&mut out, report, f, &st, options);
        }
    }
    if !verbose {
        symptoms(&mut out, report, &st);
    }
    unknown_errors(&mut out, report, &st);
    super::timeline::text_gaps(&mut out, report, &st.bold("Gaps in the capture"));
    inventory(&mut out, report, &st);
    out.push('\n');
    if verbose {
        inputs(&mut out, report, &st);
    } else {
        inputs_summary(&mut out, report, &st);
    }
    repeats(&mut out, report, &st);
    out
}

/// The one line: what broke and why.
fn headline(out: &mut String, report: &Report<'_>, st: &Style) {
    let label = st.bold("Root cause:");
    match report.root_cause() {
        Some(f) => {
            let _ = writeln!(out, "{label} {}", clean(&f.headline));
        }
        None if report.findings().is_empty() => {
            let _ = writeln!(out, "{label} no known failure found in the inputs.");
        }
        None => {
            let _ = writeln!(out, "{label} none of the findings is an error.");
        }
    }
}

/// Width of the memory bars, in cells.
const BAR_CELLS: usize = 24;

/// One bar per GPU, so the GPU that differs shows at a glance.
fn gpu_picture(out: &mut String, report: &Report<'_>, st: &Style) {
    let bars = &report.gpus;
    if bars.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} {}",
        st.bold("GPU memory"),
        st.dim("(used / total, and who holds it)")
    );
    let used_w = bars
        .iter()
        .map(|b| b.used_mib.map_or(1, |u| thousands(u).len()))
        .max()
        .unwrap_or(1);
    let total_w = bars
        .iter()
        .map(|b| b.total_mib.map_or(1, |t| thousands(t).len()))
        .max()
        .unwrap_or(1);
    let index_w = bars
        .iter()
        .map(|b| b.index.to_string().len())
        .max()
        .unwrap_or(1);
    for b in bars {
        let standout = b.cited || b.odd;
        let (filled, empty) = cells(b);
        let bar = if standout {
            st.paint(style::RED, &"█".repeat(filled))
        } else {
            st.paint(style::GREEN, &"█".repeat(filled))
        } + &st.dim(&"░".repeat(empty));
        let used = b.used_mib.map_or("?".to_owned(), thousands);
        let total = b.total_mib.map_or("?".to_owned(), thousands);
        let mut line = format!(
            "  GPU {:<index_w$}  {bar}  {used:>used_w$} / {total:>total_w$} MiB",
            b.index
        );
        if let Some(h) = b.holders.first() {
            let who = match &h.unit {
                Some(u) => format!("PID {} {}", h.pid, st.bold(&clean(u))),
                None => format!("PID {} {}", h.pid, clean(short_name(&h.name))),
            };
            let _ = write!(
                line,
                "  {who}{}",
                h.used_mib
                    .map(|m| format!(" ({})", mib(m)))
                    .unwrap_or_default()
            );
            if b.holders.len() > 1 {
                let _ = write!(line, " +{} more", b.holders.len() - 1);
            }
        }
        if b.cited {
            let _ = write!(line, "  {}", st.paint(style::BOLD_RED, "◀ root cause"));
        } else if b.odd {
            let _ = write!(line, "  {}", st.paint(style::BOLD_YELLOW, "◀ differs"));
        }
        let _ = writeln!(out, "{line}");
    }
}

/// Filled and empty cells of a bar.
fn cells(b: &GpuBar) -> (usize, usize) {
    let (Some(used), Some(total)) = (b.used_mib, b.total_mib) else {
        return (0, BAR_CELLS);
    };
    if total == 0 {
        return (0, BAR_CELLS);
    }
    let share = used.min(total) as f64 / total as f64;
    let mut filled = (share * BAR_CELLS as f64).round() as usize;
    // A percent or more always shows; a CUDA context's few MiB do not.
    if share >= 0.01 && filled == 0 {
        filled = 1;
    }
    (filled, BAR_CELLS - filled)
}

/// `/opt/ddtree/venv/bin/python3` → `python3`.
fn short_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn finding(out: &mut String, report: &Report<'_>, f: &Finding, st: &Style, options: RenderOptions) {
    let verbose = options.verbosity == Verbosity::Verbose;
    let seen = if f.occurrences > 1 {
        format!(" · seen {} times", f.occurrences)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} {} · {} · {} · confidence {:.2}{seen}",
        st.bold(&format!("[{}]", f.id)),
        st.severity(f.severity, f.severity.name()),
        f.category.name(),
        f.rule,
        f.confidence
    );
    let _ = writeln!(out, "  {}", st.bold(&clean(&f.title)));

    if !f.chain.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Causal chain (symptom → cause)"));
        for (depth, link) in f.chain.iter().enumerate() {
            if depth == 0 {
                let _ = writeln!(out, "    {}", clean(link));
            } else {
                let _ = writeln!(
                    out,
                    "    {}└─ because {}",
                    "   ".repeat(depth - 1),
                    clean(link)
                );
            }
        }
    }
    if verbose && !f.explanation.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Why"));
        let _ = writeln!(out, "    {}", clean(&f.explanation));
    }
    if !f.explains.is_empty() {
        let _ = writeln!(
            out,
            "\n  Explains: {} (symptoms of this cause)",
            f.explains.join(", ")
        );
    }
    if verbose && !f.competing.is_empty() {
        let list: Vec<String> = f
            .competing
            .iter()
            .map(|(id, c)| format!("{id} ({c:.2})"))
            .collect();
        let _ = writeln!(out, "  Competing hypotheses: {}", list.join(", "));
    }

    if !f.evidence.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Evidence"));
        evidence(out, report, f, st, options.width);
    }

    if verbose {
        let _ = writeln!(
            out,
            "\n  {}",
            st.bold(&format!("Confidence {:.2}", f.confidence))
        );
        for c in &f.conditions {
            let mark = if c.met {
                st.paint(style::GREEN, "[x]")
            } else {
                st.dim("[ ]")
            };
            let _ = writeln!(out, "    {mark} {}", clean(&c.text));
        }
    }

    if !f.actions.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Remediation"));
        for (i, a) in f.actions.iter().enumerate() {
            let tag = match a.safety {
                Safety::Safe => String::new(),
                Safety::NeedsConfirmation => {
                    format!("{} ", st.paint(style::YELLOW, "[needs-confirmation]"))
                }
                s => format!("{} ", st.dim(&format!("[{}]", s.name()))),
            };
            let why = if a.why.is_empty() {
                String::new()
            } else {
                st.dim(&format!(" — {}", clean(&a.why)))
            };
            let _ = writeln!(out, "    {}. {tag}{}{why}", i + 1, clean(&a.describe()));
            if let Some(cmd) = a.command() {
                let _ = writeln!(
                    out,
                    "       {}",
                    st.paint(style::CYAN, &format!("$ {}", clean(&cmd)))
                );
            }
            for line in a.details() {
                let _ = writeln!(out, "       {}", clean(&line));
            }
        }
        let _ = writeln!(
            out,
            "    {}",
            st.dim("`--script FILE` writes these steps as a guarded bash script (dry run unless --apply).")
        );
    }
    for r in &f.refused {
        let _ = writeln!(out, "  note: {}", clean(r));
    }
}

/// Each cited line as an annotated excerpt:
///
/// ```text
///     --> nvidia-smi.txt:47
///   47 | |    0   N/A  N/A     20629      C   /opt/ddtree/venv/bin/python3     55286MiB |
///      |                                                                       ^^^^^^^^ PID 20629 holds …
/// ```
fn evidence(out: &mut String, report: &Report<'_>, f: &Finding, st: &Style, width: usize) {
    let groups = report.evidence_groups(f);
    let digits = groups
        .iter()
        .map(|g| g[0].span.line.to_string().len())
        .max()
        .unwrap_or(1);
    let pad = " ".repeat(digits);
    // "    " + digits + " | " before the text.
    let avail = width.saturating_sub(4 + digits + 3);
    let bar = st.gutter("|");
    for group in groups {
        let e = group[0];
        let m = report.marked(e);
        let _ = writeln!(
            out,
            "    {pad}{} {}:{}",
            st.gutter("-->"),
            clean(&m.input),
            m.line
        );
        let w = if m.key.is_empty() && m.focus > 0 {
            let at = m
                .before
                .char_indices()
                .nth(m.focus)
                .map_or(m.before.len(), |(i, _)| i);
            let message = format!("{}{}", &m.before[at..], m.after);
            excerpt::window_on(&m.before[..at], &message, avail)
        } else {
            excerpt::window(&m.before, &m.key, &m.after, avail)
        };
        let text = match w.mark {
            Some((col, len)) => {
                let chars: Vec<char> = w.text.chars().collect();
                let head: String = chars[..col].iter().collect();
                let key: String = chars[col..col + len].iter().collect();
                let tail: String = chars[col + len..].iter().collect();
                format!("{head}{}{tail}", st.bold(&key))
            }
            None => w.text.clone(),
        };
        let _ = writeln!(
            out,
            "    {} {bar} {text}",
            st.gutter(&format!("{:>digits$}", m.line))
        );
        let label = clean(&e.note);
        match w.mark {
            Some((col, len)) => {
                let carets = "^".repeat(len);
                let label_len = label.chars().count();
                if col + len + 1 + label_len <= avail {
                    let _ = writeln!(
                        out,
                        "    {pad} {bar} {}{}",
                        " ".repeat(col),
                        st.severity(f.severity, &format!("{carets} {label}"))
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "    {pad} {bar} {}{}",
                        " ".repeat(col),
                        st.severity(f.severity, &carets)
                    );
                    let at = col.min(avail.saturating_sub(label_len));
                    let _ = writeln!(
                        out,
                        "    {pad} {bar} {}{}",
                        " ".repeat(at),
                        st.severity(f.severity, &label)
                    );
                }
            }
            None => {
                let _ = writeln!(out, "    {pad} {} {label}", st.gutter("="));
            }
        }
        if group.len() > 1 {
            let _ = writeln!(
                out,
                "    {pad} {} {}",
                st.gutter("="),
                same_text(report, &group[1..])
            );
        }
    }
}

/// `the same line also at journal.txt:59, 88 and 98`.
pub(super) fn same_text(report: &Report<'_>, rest: &[&Evidence]) -> String {
    let mut rest = rest.to_vec();
    rest.sort_by_key(|e| (report.sources.name(e.span), e.span.line));
    let mut cites: Vec<String> = Vec::new();
    let mut last_input = None;
    for e in rest {
        let input = report.sources.name(e.span);
        if last_input == Some(input) {
            cites.push(e.span.line.to_string());
        } else {
            cites.push(format!("{}:{}", clean(input), e.span.line));
        }
        last_input = Some(input);
    }
    let list = match cites.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => cites.join(""),
    };
    format!("the same line also at {list}")
}

/// Findings the root cause explains, one line each (`-v` shows them in full).
fn symptoms(out: &mut String, report: &Report<'_>, st: &Style) {
    let Some(root) = report.root_cause() else {
        return;
    };
    let listed: Vec<&Finding> = report
        .findings()
        .iter()
        .filter(|f| root.explains.contains(&f.id))
        .collect();
    if listed.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} {}",
        st.bold(&format!("Symptoms explained by {}", root.id)),
        st.dim("(-v shows them in full)")
    );
    for f in listed {
        let first = f.evidence.first();
        let cite = first
            .map(|e| format!("  {}", st.dim(&report.cite(e.span))))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {} · {}{cite}",
            st.bold(&format!("[{}]", f.id)),
            st.severity(f.severity, f.severity.name()),
            clean(&f.title)
        );
        // The line itself, whole as in the unrecognised errors: a death's
        // last words, a figure or a code a reader searches the report for
        // is on it (what the title says about it is a summary).
        if let Some(e) = first {
            let line = report.resolve(e.span);
            let text = clean(&line.text);
            let text = text.trim();
            if !text.is_empty() {
                let _ = writeln!(out, "      {}", st.dim(&fit(text, MAX_UNRECOGNISED_CHARS)));
            }
        }
    }
}

/// How much of an unrecognised error a report shows: the whole message of
/// any real line (they run to a few hundred characters, and the message is
/// at their end), never a megabyte.
const MAX_UNRECOGNISED_CHARS: usize = 480;

/// Text cut to `max` characters, `…` marking the cut: an unrecognised line
/// may be megabytes long.
fn fit(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max.saturating_sub(1).max(1)) {
        Some((cut, _)) if text[cut..].chars().nth(1).is_some() => {
            format!("{}…", &text[..cut]).into()
        }
        _ => text.into(),
    }
}

fn unknown_errors(out: &mut String, report: &Report<'_>, st: &Style) {
    let groups = &report.diagnosis.unknown_errors;
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{}",
        st.bold("Errors no rule explains (lines read, but no finding cites them)")
    );
    for g in groups {
        let first = report.resolve(g.first);
        let head = format!("  {}x [{}] ", g.count, g.fingerprint);
        let template = clean(&g.template);
        let _ = writeln!(out, "{head}{}", fit(&template, MAX_UNRECOGNISED_CHARS));
        let at = format!("first at {}:{}: ", clean(&first.input), first.line);
        let text = clean(&first.text);
        let _ = writeln!(
            out,
            "      {}",
            st.dim(&format!("{at}{}", fit(&text, MAX_UNRECOGNISED_CHARS)))
        );
    }
}

/// A container's inventory row: its name and status, its PID while it
/// runs, else how it ended (exit code, OOMKilled, dead, the daemon's
/// error), its times as printed, the server it runs, and its line.
fn container_row(report: &Report<'_>, c: &crate::render::InventoryContainer) -> String {
    let name = c.name.as_deref().map_or("a container".to_owned(), |n| {
        format!("container {}", clean(n))
    });
    let mut parts: Vec<String> = Vec::new();
    if let Some(p) = c.pid {
        parts.push(format!("PID {p}"));
    }
    if let Some(code) = c.exit_code {
        parts.push(format!("exit code {code}"));
    }
    if c.oom_killed {
        parts.push("OOMKilled".to_owned());
    }
    if c.dead {
        parts.push("dead".to_owned());
    }
    if let Some(e) = &c.error {
        parts.push(format!("error: {}", fit(&clean(e), 100)));
    }
    if let Some(t) = &c.started_at {
        parts.push(format!("started {}", clean(t)));
    }
    if let Some(t) = &c.finished_at {
        parts.push(format!("finished {}", clean(t)));
    }
    if let Some(s) = &c.server {
        let name = clean(&s.name);
        let name = match name.char_indices().nth(60) {
            Some((i, _)) => format!("{}…", &name[..i]),
            None => name.into_owned(),
        };
        parts.push(format!("its server PID {} {name}", s.pid));
    }
    let status = c
        .status
        .as_deref()
        .map(|s| format!(" ({})", clean(s)))
        .unwrap_or_default();
    let what = if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    };
    format!("  {name}{status}{what}  [{}]", report.cite(c.span))
}

/// Rows of the inventory shown before the rest is summarised.
const INVENTORY_ROWS: usize = 16;

/// What the inputs show, whatever failed: GPUs, their processes, units with
/// their PIDs, Xids. A compact section; `-q` hides it, JSON has the detail.
fn inventory(out: &mut String, report: &Report<'_>, st: &Style) {
    let inv = &report.inventory;
    if inv.gpus.is_empty()
        && inv.gpu_bus_ids.is_empty()
        && inv.processes.is_empty()
        && inv.units.is_empty()
        && inv.xids.is_empty()
        && inv.servers.is_empty()
        && inv.containers.is_empty()
    {
        return;
    }
    let _ = writeln!(out, "\n{}", st.bold("Inventory"));
    // As nvidia-smi prints them (`12799 MiB`, not `12,799 MiB`): a reader
    // searching the report for the number the input showed finds it.
    let mib = |v: Option<u64>| v.map_or_else(|| "? MiB".to_owned(), |n| format!("{n} MiB"));
    let more = |out: &mut String, n: usize| {
        if n > INVENTORY_ROWS {
            let _ = writeln!(
                out,
                "  {}",
                st.dim(&format!("… {} more (JSON lists all)", n - INVENTORY_ROWS))
            );
        }
    };
    for g in inv.gpus.iter().take(INVENTORY_ROWS) {
        let mut row = format!("  GPU {}:", g.index);
        if let Some(name) = &g.name {
            let _ = write!(row, " {}", clean(name));
        }
        if g.used_mib.is_some() || g.total_mib.is_some() {
            let _ = write!(row, "  {} / {}", mib(g.used_mib), mib(g.total_mib));
        }
        if let Some(bus) = &g.bus_id {
            let _ = write!(row, "  {}", clean(bus));
        }
        if let Some(uuid) = &g.uuid {
            let _ = write!(row, "  {}", clean(uuid));
        }
        if let Some(by) = g.named_by {
            let _ = write!(row, " named only by {by}");
        }
        if !g.xids.is_empty() {
            let codes: Vec<String> = g.xids.iter().map(u32::to_string).collect();
            let _ = write!(row, "  Xid {}", codes.join(", "));
        }
        let _ = writeln!(out, "{row}");
    }
    more(out, inv.gpus.len());
    for b in &inv.gpu_bus_ids {
        let _ = writeln!(out, "  GPU at {} (no index in the inputs)", clean(b));
    }
    for p in inv.processes.iter().take(INVENTORY_ROWS) {
        let gpu = p.gpu.map_or("GPU ?".to_owned(), |g| format!("GPU {g}"));
        let unit = p
            .unit
            .as_deref()
            .map(|u| format!(" ({})", clean(u)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  PID {} {} {} on {gpu}{unit}",
            p.pid,
            clean(&p.name),
            mib(p.used_mib)
        );
    }
    more(out, inv.processes.len());
    for u in inv.units.iter().take(INVENTORY_ROWS) {
        let mut row = format!("  unit {}", clean(&u.name));
        if let Some(state) = &u.active_state {
            let _ = write!(row, " ({})", clean(state));
        }
        if !u.pids.is_empty() {
            let shown: Vec<String> = u.pids.iter().take(8).map(u32::to_string).collect();
            let _ = write!(
                row,
                "  PID{} {}{}",
                if u.pids.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if u.pids.len() > 8 { ", …" } else { "" }
            );
        }
        let _ = writeln!(out, "{row}");
    }
    more(out, inv.units.len());
    // Server processes the rows above did not already show.
    let shown = |pid: u32| {
        inv.processes.iter().any(|p| p.pid == pid)
            || inv.units.iter().any(|u| u.pids.contains(&pid))
    };
    let servers: Vec<_> = inv.servers.iter().filter(|s| !shown(s.pid)).collect();
    for s in servers.iter().take(INVENTORY_ROWS) {
        let unit = s
            .unit
            .as_deref()
            .map(|u| format!(" ({})", clean(u)))
            .unwrap_or_default();
        let name = clean(&s.name);
        let name = match name.char_indices().nth(60) {
            Some((i, _)) => format!("{}…", &name[..i]),
            None => name.into_owned(),
        };
        let seen = match s.seen {
            "ps" => "in ps",
            "MainPID" => "a unit's MainPID",
            "shell" => "ended by a signal, as its shell reported",
            _ => "uvicorn's server process",
        };
        let _ = writeln!(out, "  PID {} {name}{unit}: {seen}", s.pid);
    }
    more(out, servers.len());
    for c in inv.containers.iter().take(INVENTORY_ROWS) {
        let _ = writeln!(out, "{}", container_row(report, c));
    }
    more(out, inv.containers.len());
    for x in inv.xids.iter().take(INVENTORY_ROWS) {
        let on = match (x.gpu, &x.bus_id) {
            (Some(g), _) => format!("GPU {g}"),
            (None, Some(b)) => format!("GPU at {}", clean(b)),
            (None, None) => "an unknown GPU".to_owned(),
        };
        let pids = if x.pids.is_empty() {
            String::new()
        } else {
            let shown: Vec<String> = x.pids.iter().take(8).map(u32::to_string).collect();
            format!(
                ", PID{} {}{}",
                if x.pids.len() == 1 { "" } else { "s" },
                shown.join(", "),
                if x.pids.len() > 8 { ", …" } else { "" }
            )
        };
        let _ = writeln!(
            out,
            "  Xid {} on {on}{}{pids}",
            x.code,
            if x.count > 1 {
                format!(" ({} times)", x.count)
            } else {
                String::new()
            }
        );
    }
    more(out, inv.xids.len());
}

/// One line: how much was read, and whether any of it was not understood.
fn inputs_summary(out: &mut String, report: &Report<'_>, st: &Style) {
    let files: std::collections::BTreeSet<_> =
        report.inputs.iter().map(|i| i.segment.source).collect();
    let lines: u32 = report.inputs.iter().map(|i| i.lines).sum();
    let unrecognized = report.unrecognized();
    let prose: u32 = report.inputs.iter().map(|i| i.prose).sum();
    let prompts: u32 = report.inputs.iter().map(|i| i.prompts).sum();
    let files = files.len();
    // Prose and prompts only when there are some: most inputs have none.
    let mut split = format!("{unrecognized} unrecognised");
    // The error lines no finding cites (listed above) are read lines, not
    // unrecognised ones: counted apart, so the two numbers never disagree.
    let unexplained: usize = report
        .diagnosis
        .unknown_errors
        .iter()
        .map(|g| g.count)
        .sum();
    if unexplained > 0 {
        split.push_str(&format!(
            ", {unexplained} error line{} no rule explains",
            if unexplained == 1 { "" } else { "s" }
        ));
    }
    if prose > 0 {
        split.push_str(&format!(", {prose} prose"));
    }
    if prompts > 0 {
        split.push_str(&format!(
            ", {prompts} shell prompt{}",
            if prompts == 1 { "" } else { "s" }
        ));
    }
    let _ = writeln!(
        out,
        "{}",
        st.dim(&format!(
            "Read {files} input{} ({lines} lines, {split}); -v lists them.",
            if files == 1 { "" } else { "s" },
        ))
    );
}

/// Lines seen more often than read: how often, the first and the last.
fn repeats(out: &mut String, report: &Report<'_>, st: &Style) {
    const SHOWN: usize = 5;
    for r in report.repeats.iter().take(SHOWN) {
        let (first, last) = (report.resolve(r.first), report.resolve(r.last));
        let _ = writeln!(
            out,
            "{}",
            st.dim(&format!(
                "Seen {} times between {}:{} and {}:{} ({}, the rest counted): {}",
                r.count,
                clean(&first.input),
                first.line,
                clean(&last.input),
                last.line,
                // The last line of a template whose ring gave it up is
                // kept for citing, not read.
                match r.kept_last {
                    0 => format!("the first {} read", r.read),
                    kept => format!("the first {} and the last {kept} read", r.read),
                },
                clean(&first.text)
            ))
        );
    }
    if report.repeats.len() > SHOWN {
        let _ = writeln!(
            out,
            "{}",
            st.dim(&format!(
                "… and {} more repeated lines (--output json lists them).",
                report.repeats.len() - SHOWN
            ))
        );
    }
}

fn inputs(out: &mut String, report: &Report<'_>, st: &Style) {
    let _ = writeln!(out, "{}", st.bold("Inputs"));
    let width = report
        .inputs
        .iter()
        .map(|i| report.sources.get(i.segment.source).name.chars().count())
        .max()
        .unwrap_or(0);
    for i in report.inputs {
        let name = &report.sources.get(i.segment.source).name;
        let _ = writeln!(
            out,
            "  {:<width$}  lines {:>5}-{:<5}  {:<28} {} unrecognised",
            clean(name),
            i.segment.first_line,
            i.segment.last_line,
            i.segment.format.name(),
            i.unrecognized,
        );
    }
}
