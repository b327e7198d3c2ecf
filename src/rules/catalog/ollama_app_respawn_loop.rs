//! `ollama-app-respawn-loop`: Ollama's desktop app (the Windows tray app of
//! `app/lifecycle`, before 0.12.10) respawns its server again and again,
//! and each server dies at once: a crash loop outside systemd, read from the app's own
//! counter (`server crash 8 - exit code 1 - respawning`, 9, 10 …) and the
//! PIDs it started (`started ollama server with pid 8792`).
//!
//! A loop is the counter rising across the paste's crash lines with each
//! server dying soon after its start (within [`QUICK_SECS`] of the start
//! line, or of the crash before when the paste shows no start). Not a loop:
//! one crash line (a server that died once), or the app before 0.1.33
//! whose respawn failed with `exec: already started` (its count rises by
//! itself: bookkeeping, fixtures/real/801). A server that exits with code
//! 1 within milliseconds fails before serving: most often it cannot bind
//! 11434 because another Ollama holds it (ollama/ollama#9960, batch L's
//! 919); when the paste also shows that bind error, the bind's finding
//! (address-already-in-use, bind-refused) names the cause and this one the
//! loop it drives.
//!
//! One app's count only rises. Counts that interleave (1, 24, 2, 3: a count
//! below the one before it, seconds later, that goes on from an earlier,
//! lower one) are two or more copies of the app, each respawning its own
//! server, all fighting for one port (batch M's 954, ollama/ollama#2727):
//! duplicate instances, filed as such, whatever the bookkeeping says.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod duplicates;

pub static RULE: OllamaAppRespawnLoop = OllamaAppRespawnLoop;

pub struct OllamaAppRespawnLoop;

/// The app's `server crash N - exit code C - respawning`.
const ROW: &str = "stacks-ollama.app-server-respawn";
/// The app's `started ollama server with pid N`.
const STARTED: &str = "stacks-ollama.app-started-server";
/// The app's `failed to restart server exec: already started` (before
/// 0.1.33): its count then rises by itself.
const BOOKKEEPING: &str = "stacks-ollama.app-restart-already-started";
/// A server that dies within this long of its start (or of the crash
/// before) never got to serve.
const QUICK_SECS: i64 = 30;

static META: RuleMeta = RuleMeta {
    id: "ollama-app-respawn-loop",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "Ollama's app respawns its server and each one dies at once (the app's crash count rising)",
    anchors: &[],
    doc: r#"
## What it means
Ollama's Windows tray app (before 0.12.10) runs `ollama serve` as its
child and restarts it when it exits. Its log (app.log) counts the crashes: `server crash 8 - exit code 1 - respawning`, then 9, 10, each
after `started ollama server with pid N`. A count that rises across the
paste with each server dying within seconds of its start is a crash loop:
nothing serves.

One crash line alone is not a loop; nor is the app before 0.1.33 whose
respawn failed with `exec: already started` (its count rises by itself).

One app's count only rises. Counts that interleave within seconds (1, 24,
2, 3, 11: a count that goes back and goes on from an earlier, lower one)
come from several copies of the app at once, each respawning its own
server: that is filed as duplicate instances (stale-serving-instance),
with the advice to quit every copy and start one.

## Why it happens
1. The server cannot bind 11434: another Ollama already holds it (an
   `ollama serve` started by hand, an earlier server the app lost track
   of, a service), or Windows reserved the port (exit code 1 within
   milliseconds of the start).
2. The server cannot start at all: a bad `OLLAMA_HOST` or `OLLAMA_MODELS`,
   a directory it cannot create.

## How to confirm
The last lines of server.log (`%LOCALAPPDATA%\Ollama\server.log`), or
quit the app and run `ollama serve` in a terminal: it prints its error.
`netstat -ano | findstr :11434` names the port's holder.

## How to fix
Stop the other Ollama that holds the port (or quit the app when serving by
hand), or fix what the server's error names; then start the app once.

## Safety
Advice only: the holder of the port may be an Ollama someone uses.
"#,
};

/// One crash line: its count and exit code.
struct Crash<'a> {
    msg: &'a Message,
    count: u64,
    exit: Option<&'a str>,
}

impl Rule for OllamaAppRespawnLoop {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let crashes: Vec<Crash> = incident
            .known(ROW)
            .filter_map(|(msg, h)| {
                Some(Crash {
                    msg,
                    count: h.get("crashes")?.parse().ok()?,
                    exit: h.get("exit"),
                })
            })
            .collect();
        if let Some(back) = interleaved(incident, &crashes) {
            out.push(duplicates::finding(incident, &crashes, back));
            return;
        }
        if incident.known(BOOKKEEPING).next().is_some() {
            return;
        }
        let rising = crashes.len() >= 2 && crashes.windows(2).all(|w| w[1].count > w[0].count);
        if !rising {
            return;
        }
        let starts: Vec<(&Message, u32)> = incident
            .known(STARTED)
            .filter_map(|(m, h)| Some((m, h.get("pid")?.parse().ok()?)))
            .collect();
        // Each crash after the first: how soon after the start before it
        // (or, with none shown, the crash before).
        let mut quick = Vec::new();
        for w in crashes.windows(2) {
            let start = starts
                .iter()
                .rfind(|(m, _)| m.span > w[0].msg.span && m.span < w[1].msg.span);
            let from = start.map_or(w[0].msg.span, |(m, _)| m.span);
            quick.push((
                start.map(|(_, p)| *p),
                millis(incident, from, w[1].msg.span),
            ));
        }
        if !quick
            .iter()
            .all(|(_, ms)| ms.is_some_and(|ms| (0..=QUICK_SECS * 1000).contains(&ms)))
        {
            return;
        }
        out.push(finding(&crashes, &starts, &quick));
    }
}

/// Milliseconds from the line at `from` to the line at `to`, when both
/// are timed.
fn millis(incident: &Incident, from: Span, to: Span) -> Option<i64> {
    let (a, b) = (incident.time_of(from)?, incident.time_of(to)?);
    Some((b.local - a.local).num_milliseconds())
}

/// The first crash whose count goes back below the one before it, within
/// [`QUICK_SECS`], and goes on from a lower count seen earlier: a second
/// copy of the app counting its own crashes.
fn interleaved(incident: &Incident, crashes: &[Crash]) -> Option<usize> {
    (1..crashes.len()).find(|&i| {
        let (before, now) = (&crashes[i - 1], &crashes[i]);
        let soon = millis(incident, before.msg.span, now.msg.span)
            .is_some_and(|ms| (0..=QUICK_SECS * 1000).contains(&ms));
        soon && now.count < before.count && crashes[..i - 1].iter().any(|c| c.count < now.count)
    })
}

fn finding(
    crashes: &[Crash],
    starts: &[(&Message, u32)],
    quick: &[(Option<u32>, Option<i64>)],
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let first = &crashes[0];
    let last = &crashes[crashes.len() - 1];
    let exit = last.exit.unwrap_or("?");
    f.occurrences = crashes.len() as u32;
    for c in crashes {
        f.evidence(
            c.msg.span,
            format!(
                "crash {} - exit code {}: the app respawns its server",
                c.count,
                c.exit.unwrap_or("?")
            ),
        );
    }
    for (m, pid) in starts {
        f.evidence_marked(
            m.span,
            format!("the app started server PID {pid}"),
            pid.to_string(),
        );
        f.entities.pids.insert(*pid);
    }
    let pids: Vec<String> = starts.iter().map(|(_, p)| p.to_string()).collect();
    let fastest = quick.iter().filter_map(|(_, ms)| *ms).max().unwrap_or(0);
    let within = if fastest < 1000 {
        format!("{fastest} ms")
    } else {
        format!("{} s", fastest / 1000)
    };
    f.condition(
        format!(
            "the app's crash count rises across the paste ({} to {})",
            first.count, last.count
        ),
        true,
    );
    f.condition(
        format!("each server died within {within} of its start"),
        true,
    );
    f.title = format!(
        "Ollama's app respawns its server in a loop: crash {} to {}, exit code {exit}",
        first.count, last.count
    );
    let started = if pids.is_empty() {
        String::new()
    } else {
        format!(" (PIDs {})", pids.join(", "))
    };
    // The app that logs these lines (app/lifecycle) was the Windows
    // tray's: Windows' tools find the port's holder.
    let probe = "netstat -ano | findstr :11434";
    f.headline = format!(
        "Ollama's app keeps respawning its server and each one dies at once: `server crash {} - exit code {exit} - respawning` up to crash {}, each server{started} gone within {within} of its start. A server that exits with code {exit} that fast fails before serving: most often port 11434 is already held by another Ollama (an `ollama serve` started by hand, an earlier server the app lost track of). Read server.log's last lines, or quit the app and run `ollama serve` to see its error.",
        first.count, last.count
    );
    f.chain
        .push("nothing serves: the server exits as soon as it starts".to_owned());
    f.chain.push(format!(
        "the app respawns it ({} crashes so far), and it exits again with code {exit}",
        last.count
    ));
    f.explanation = "Ollama's desktop app restarts `ollama serve` whenever it exits and counts the crashes. A server that exits within milliseconds of its start never reached serving: its own error (in server.log) is the cause, most often a failed bind of 11434 (another Ollama, or a port Windows reserved), else a setting it cannot use.".to_owned();
    f.actions.push(Action::advice(
        "find who holds Ollama's port: another Ollama (a hand-started `ollama serve`, an earlier server) is the usual holder; stop it, or quit the app when serving by hand",
        Some(probe),
    ));
    f.actions.push(Action::advice(
        "read the server's own error: the last lines of server.log, or quit the app and run `ollama serve` in a terminal",
        Some("type \"%LOCALAPPDATA%\\Ollama\\server.log\""),
    ));
    f.confidence = 0.7;
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        findings_of(super::META.id, text)
    }

    /// ollama/ollama#9960 (batch L's 919), verbatim: crash 8, 9, 10, each
    /// server dead within 70 ms of its start.
    const REAL_919: &str = r#"time=2025-03-24T14:07:22.093+08:00 level=INFO source=server.go:129 msg="ollama server logs C:\\Users\\speta\\AppData\\Local\\Ollama\\server.log"
time=2025-03-24T14:07:22.155+08:00 level=WARN source=server.go:163 msg="server crash 8 - exit code 1 - respawning"
time=2025-03-24T14:07:26.155+08:00 level=INFO source=server.go:141 msg="starting server..."
time=2025-03-24T14:07:26.157+08:00 level=INFO source=server.go:127 msg="started ollama server with pid 8792"
time=2025-03-24T14:07:26.157+08:00 level=INFO source=server.go:129 msg="ollama server logs C:\\Users\\speta\\AppData\\Local\\Ollama\\server.log"
time=2025-03-24T14:07:26.226+08:00 level=WARN source=server.go:163 msg="server crash 9 - exit code 1 - respawning"
time=2025-03-24T14:07:30.727+08:00 level=INFO source=server.go:141 msg="starting server..."
time=2025-03-24T14:07:30.729+08:00 level=INFO source=server.go:127 msg="started ollama server with pid 25164"
time=2025-03-24T14:07:30.729+08:00 level=INFO source=server.go:129 msg="ollama server logs C:\\Users\\speta\\AppData\\Local\\Ollama\\server.log"
time=2025-03-24T14:07:30.796+08:00 level=WARN source=server.go:163 msg="server crash 10 - exit code 1 - respawning"
"#;

    #[test]
    fn a_rising_count_of_quick_deaths_is_a_loop() {
        let f = findings(REAL_919);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::UnitCrashLoop);
        assert!(f[0].entities.pids.contains(&8792) && f[0].entities.pids.contains(&25164));
        assert!(f[0].headline.contains("69 ms"), "{}", f[0].headline);
        crate::testing::advises(&f[0], "findstr :11434");
    }

    /// One crash (fixtures/real/800's `server crash 21`, ollama/ollama#4999)
    /// is no loop; nor the old app's `exec: already started` bookkeeping
    /// (fixtures/real/801, ollama/ollama#2627, verbatim).
    #[test]
    fn one_crash_or_the_old_apps_bookkeeping_is_not() {
        let one = r#"time=2024-06-12T18:35:12.069+08:00 level=INFO source=server.go:121 msg="started ollama server with pid 15024"
time=2024-06-12T18:35:12.116+08:00 level=WARN source=server.go:157 msg="server crash 21 - exit code 1 - respawning"
"#;
        assert!(findings(one).is_empty());
        let old = r#"time=2024-02-21T10:04:42.504+01:00 level=WARN source=server.go:109 msg="server crash 332 - exit code 1 - respawning"
time=2024-02-21T10:04:43.018+01:00 level=ERROR source=server.go:112 msg="failed to restart server exec: already started"
time=2024-02-21T10:10:15.024+01:00 level=WARN source=server.go:109 msg="server crash 333 - exit code 1 - respawning"
time=2024-02-21T10:10:15.526+01:00 level=ERROR source=server.go:112 msg="failed to restart server exec: already started"
"#;
        assert!(findings(old).is_empty());
    }

    /// The next paste: crash lines alone, a few seconds apart (919's
    /// crash lines without their start lines): still a loop.
    #[test]
    fn crash_lines_alone_a_few_seconds_apart() {
        let text: String = REAL_919
            .lines()
            .filter(|l| l.contains("server crash"))
            .map(|l| format!("{l}\n"))
            .collect();
        let f = findings(&text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.is_empty());
    }

    /// Batch M's 954 (ollama/ollama#2727), verbatim: counts 1, 24, 2, 3,
    /// 11 within six seconds, with the old app's `already started`.
    const REAL_954: &str = r#"time=2024-02-24T14:24:23.004+03:00 level=WARN source=server.go:113 msg="server crash 1 - exit code 2 - respawning"
time=2024-02-24T14:24:23.513+03:00 level=ERROR source=server.go:116 msg="failed to restart server exec: already started"
time=2024-02-24T14:24:24.208+03:00 level=WARN source=server.go:113 msg="server crash 24 - exit code 2 - respawning"
time=2024-02-24T14:24:24.528+03:00 level=WARN source=server.go:113 msg="server crash 2 - exit code 2 - respawning"
time=2024-02-24T14:24:24.717+03:00 level=ERROR source=server.go:116 msg="failed to restart server exec: already started"
time=2024-02-24T14:24:25.036+03:00 level=ERROR source=server.go:116 msg="failed to restart server exec: already started"
time=2024-02-24T14:24:27.039+03:00 level=WARN source=server.go:113 msg="server crash 3 - exit code 2 - respawning"
time=2024-02-24T14:24:27.545+03:00 level=ERROR source=server.go:116 msg="failed to restart server exec: already started"
time=2024-02-24T14:24:29.295+03:00 level=WARN source=server.go:113 msg="server crash 11 - exit code 2 - respawning"
"#;

    #[test]
    fn interleaved_counts_are_several_copies_of_the_app() {
        let f = findings(REAL_954);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::StaleServingInstance);
        assert!(
            f[0].headline.contains("1, 24, 2, 3, 11"),
            "{}",
            f[0].headline
        );
        assert!(f[0].headline.contains("exit code 2"), "{}", f[0].headline);
        crate::testing::advises(&f[0], "Get-Process ollama*");
    }

    /// The next paste: an app quit and started again begins at 1, with no
    /// earlier lower count to go on from; and a count that goes back only
    /// minutes later is not two apps at once.
    #[test]
    fn a_restarted_app_or_a_late_drop_is_not_interleaving() {
        let restarted = REAL_919.replace("server crash 10 -", "server crash 1 -");
        assert!(
            findings(&restarted)
                .iter()
                .all(|f| f.category != Category::StaleServingInstance)
        );
        let late: String = REAL_954
            .lines()
            .filter(|l| l.contains("crash 1 ") || l.contains("crash 24 ") || l.contains("crash 2 "))
            .map(|l| format!("{}\n", l.replace("14:24:24.528", "14:31:24.528")))
            .collect();
        assert_eq!(late.lines().count(), 3);
        assert!(
            findings(&late)
                .iter()
                .all(|f| f.category != Category::StaleServingInstance)
        );
    }
}
