//! Several copies of Ollama's app at once: their crash counts interleave
//! (batch M's 954). Each copy respawns its own server and each server
//! exits at once, because another copy's server (or another Ollama) holds
//! the port: the loop is a symptom of the duplicates.

use super::{BOOKKEEPING, Crash};
use crate::correlate::Incident;
use crate::rules::{Action, Category, Finding};

pub(super) fn finding(incident: &Incident, crashes: &[Crash], back: usize) -> Finding {
    let mut f = Finding::new(
        super::META.id,
        Category::StaleServingInstance,
        super::META.severity,
    );
    f.occurrences = crashes.len() as u32;
    for (i, c) in crashes.iter().enumerate() {
        let note = if i == back {
            format!(
                "crash {} right after crash {}: a count that goes back is another copy of the app counting its own",
                c.count,
                crashes[i - 1].count
            )
        } else {
            format!(
                "crash {} - exit code {}: an app respawns its server",
                c.count,
                c.exit.unwrap_or("?")
            )
        };
        f.evidence(c.msg.span, note);
    }
    let restarts: Vec<_> = incident.known(BOOKKEEPING).map(|(m, _)| m.span).collect();
    for span in &restarts {
        f.evidence(
            *span,
            "failed to restart server exec: already started: an app's respawn finds a server already running",
        );
    }
    let counts: Vec<String> = crashes.iter().map(|c| c.count.to_string()).collect();
    let exit = crashes[back].exit.unwrap_or("?");
    f.condition(
        format!(
            "the crash counts interleave ({}): one app's count only rises",
            counts.join(", ")
        ),
        true,
    );
    f.condition(
        format!(
            "crash {} follows crash {} within seconds",
            crashes[back].count,
            crashes[back - 1].count
        ),
        true,
    );
    f.condition(
        "the apps' processes are listed (missing: Get-Process ollama* | Format-Table Id,ProcessName,StartTime)",
        false,
    );
    f.title = format!(
        "Several copies of Ollama's app respawn servers at once: crash counts {} interleave",
        counts.join(", ")
    );
    let already = if restarts.is_empty() {
        String::new()
    } else {
        " and `failed to restart server exec: already started` repeats".to_owned()
    };
    f.headline = format!(
        "More than one copy of Ollama's app is running, each respawning its own server: the crash counts interleave ({}) within seconds{already}, and every server exits at once (exit code {exit}). One app's count only rises, so these are duplicate instances fighting over one port (11434), not one broken server. Quit every Ollama app, check who holds 11434, then start one app.",
        counts.join(", ")
    );
    f.chain.push(
        "two or more copies of Ollama's app run at once, each starting its own server".to_owned(),
    );
    f.chain.push(
        "only one server can hold 11434; the others exit at once and their apps respawn them"
            .to_owned(),
    );
    f.explanation = "Ollama's desktop app restarts `ollama serve` whenever it exits and counts the crashes; each copy of the app keeps its own count. Counts that go back and forth within seconds come from several copies of the app (a second tray icon, an app started at login and again by hand), each respawning a server that loses the race for the port.".to_owned();
    f.actions.push(Action::advice(
        "quit every copy of Ollama's app (Task Manager, or Get-Process ollama* | Stop-Process), then start one",
        Some("Get-Process ollama* | Format-Table Id,ProcessName,StartTime"),
    ));
    f.actions.push(Action::advice(
        "find who holds Ollama's port once the apps are gone: another Ollama (a hand-started `ollama serve`, a service) is the usual holder",
        Some("netstat -ano | findstr :11434"),
    ));
    f.confidence = 0.6;
    f
}
