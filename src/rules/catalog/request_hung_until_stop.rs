//! `request-hung-until-stop`: an access log's request that lasted far
//! beyond its neighbours and ended only when the service was stopped, or
//! failed (5xx) after that wait: the server hung on it.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: RequestHungUntilStop = RequestHungUntilStop;

pub struct RequestHungUntilStop;

/// Gin's access line (Ollama): status and latency of each request.
const ROW: &str = "stacks-ollama.gin-request";

/// A request this long is a hang candidate whatever its neighbours took.
const HUNG_MIN_SECS: f64 = 300.0;
/// ... and it must last this many times its neighbours' median.
const FAR: f64 = 10.0;
/// The stop that ended it was logged at most this long before it.
const STOP_WINDOW_SECS: i64 = 60;
/// Without times, the stop is at most this many lines above it.
const STOP_LINES: u32 = 3;

static META: RuleMeta = RuleMeta {
    id: "request-hung-until-stop",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "a request lasted far beyond its neighbours and ended only with the service's stop or a 5xx: the server hung on it",
    // The catalog row's anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
An access log line (Ollama's Gin: `[GIN] … | 500 | 32m31s | … POST
"/api/generate"`) is written when a request ends, with how long it took.
One request took minutes where its neighbours took seconds, and its line
was written right after the service manager began stopping the service
(`Stopping Ollama Service...`): the request never finished on its own. The
server hung on it until an operator (or a watchdog) stopped it. A 5xx
after minutes where the neighbours took seconds, with no stop, says the
same at lower confidence: the request was failed (the client gave up, a
timeout) rather than answered.

## Why it happens
The model runner stopped producing tokens (a stuck GPU kernel or
collective, a runner deadlocked on a lock, a generation that never reaches
a stop condition), or the server lost the runner and never failed the
request.

## How to confirm
When it recurs, before restarting: `ollama ps` (is the model still
loaded?), `nvidia-smi` (is the GPU busy or idle?), the runner's threads
(`py-spy dump`, `gdb -p PID -batch -ex 'thread apply all bt'`, `kill -QUIT`
for a Go stack), and the server's log around the last completed request.

## How to fix
Capture the state above, then restart the service; set a client timeout
and a generation limit (`num_predict`) so a stuck request is noticed and
bounded; update the server if the thread names a known hang.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

impl Rule for RequestHungUntilStop {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let requests: Vec<(&Message, &str, f64)> = incident
            .known(ROW)
            .filter_map(|(m, h)| Some((m, h.get("latency")?, go_duration(h.get("latency")?)?)))
            .collect();
        for (i, &(m, latency, secs)) in requests.iter().enumerate() {
            if secs < HUNG_MIN_SECS {
                continue;
            }
            let mut others: Vec<f64> = requests
                .iter()
                .enumerate()
                .filter(|(j, (o, _, _))| *j != i && o.span.source == m.span.source)
                .map(|(_, r)| r.2)
                .collect();
            others.sort_by(f64::total_cmp);
            let median = others.get(others.len() / 2).copied();
            if median.is_some_and(|med| secs < med * FAR) {
                continue;
            }
            // Ended by the service's stop, or failed (5xx) after waiting
            // that long: either way nothing answered it.
            let stop = stop_before(incident, m);
            let failed = status(incident, m).is_some_and(|s| s >= 500);
            if stop.is_none() && !failed {
                continue;
            }
            out.push(finding(incident, m, latency, median, stop));
        }
    }
}

/// The service manager's `Stopping X...` just before the access line.
fn stop_before<'a>(incident: &'a Incident, m: &Message) -> Option<&'a crate::model::JournalEntry> {
    let at = incident.time_of(m.span);
    incident
        .facts
        .journal
        .iter()
        .filter(|e| e.is_pid1() && e.span.source == m.span.source && e.span <= m.span)
        .filter(|e| e.message.starts_with("Stopping ") && e.message.ends_with("..."))
        .rfind(|e| match (e.time, at) {
            (Some(t), Some(a)) => {
                (0..=STOP_WINDOW_SECS).contains(&(a.local - t.local).num_seconds())
            }
            _ => m.span.line.saturating_sub(e.span.line) <= STOP_LINES,
        })
}

/// The HTTP status of the access line at `m`.
fn status(incident: &Incident, m: &Message) -> Option<u16> {
    incident
        .known(ROW)
        .find(|(k, _)| k.span == m.span)
        .and_then(|(_, h)| h.get("status")?.parse().ok())
}

fn finding(
    incident: &Incident,
    m: &Message,
    latency: &str,
    median: Option<f64>,
    stop: Option<&crate::model::JournalEntry>,
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence(
        m.span,
        match stop {
            Some(_) => format!("the request ended after {latency}, logged as the service stopped"),
            None => format!("the request failed after {latency}"),
        },
    );
    if let Some(stop) = stop {
        f.evidence(stop.span, "the service manager began stopping the service");
    }
    let writer = incident.facts.journal.iter().find(|e| e.span == m.span);
    if let Some(pid) = writer.and_then(|e| e.pid) {
        f.entities.pids.insert(pid);
    }
    let described = stop
        .and_then(|s| s.message.strip_prefix("Stopping "))
        .and_then(|d| d.strip_suffix("..."));
    let unit = stop.and_then(|s| s.unit.clone()).or_else(|| {
        let described = described?;
        incident
            .units
            .iter()
            .find(|(_, u)| u.description.as_deref() == Some(described))
            .map(|(name, _)| name.clone())
    });
    if let Some(u) = &unit {
        f.entities.units.insert(u.clone());
    }
    let who = unit.as_deref().unwrap_or("the server");
    let usual = median.map(|s| format!("{s:.0} s"));
    f.condition(
        "a request lasted far longer than its neighbours (ten times their median, and minutes)",
        true,
    );
    f.condition(
        "its line was written as the service was being stopped: the stop ended it",
        stop.is_some(),
    );
    f.condition(
        "other requests in the same log to compare with",
        usual.is_some(),
    );
    f.confidence = match (stop.is_some(), usual.is_some()) {
        (true, true) => 0.6,
        (true, false) | (false, true) => 0.45,
        (false, false) => 0.35,
    };
    f.chain.push(match &usual {
        Some(u) => format!("requests took about {u}; one took {latency}"),
        None => format!("one request took {latency}"),
    });
    f.chain.push(match described {
        Some(d) => format!("it ended only when {who} was stopped ({d})"),
        None => "it ended in failure (a 5xx status), not with an answer".to_owned(),
    });
    f.chain
        .push("the server hung on the request: nothing answered it".to_owned());
    let ended = match stop {
        Some(_) => "until the service was stopped",
        None => "until it failed",
    };
    f.title = format!("{who} hung on a request for {latency} {ended}");
    f.headline = format!(
        "A request to {who} lasted {latency}{} {ended}: the server hung on it.",
        usual.map_or(String::new(), |u| format!(
            " where its neighbours took about {u}"
        ))
    );
    f.explanation = "An access line is written when the request ends; this one ended minutes after the requests before it had each finished in seconds, with the service's stop or a failure. Nothing answered it in between: the server was hung, not slow.".to_owned();
    f.actions.push(Action::advice(
        "when it recurs, capture the server's state before restarting: is the model loaded, is the GPU busy, where are its threads",
        Some("ollama ps; nvidia-smi; journalctl -u ollama --since -1h"),
    ));
    f.actions.push(Action::advice(
        "bound requests so a stuck one is noticed: a client timeout and a generation limit (num_predict)",
        None,
    ));
    f
}

/// A Go `time.Duration` as `String()` prints it (`13.83000742s`, `32m31s`,
/// `1h2m3.5s`, `22.702µs`), in seconds.
fn go_duration(text: &str) -> Option<f64> {
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&n| n > 0)?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "µs" | "us" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// https://github.com/ollama/ollama/issues/7024 (batch G 756).
    const OLLAMA: &str = r#"9月 28 23:36:39 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:36:39 | 200 |  13.83000742s |   192.168.2.210 | POST     "/api/generate"
9月 28 23:36:51 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:36:51 | 200 | 12.323051093s |   192.168.2.210 | POST     "/api/generate"
9月 28 23:37:03 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:37:03 | 200 | 11.960134825s |   192.168.2.210 | POST     "/api/generate"
9月 28 23:37:20 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:37:20 | 200 | 17.062595475s |   192.168.2.210 | POST     "/api/generate"
9月 28 23:37:31 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:37:31 | 200 | 10.729482469s |   192.168.2.210 | POST     "/api/generate"
9月 29 00:10:02 ubuntu-homaer systemd[1]: Stopping Ollama Service...
9月 29 00:10:02 ubuntu-homaer ollama[27605]: [GIN] 2024/09/29 - 00:10:02 | 500 |        32m31s |   192.168.2.210 | POST     "/api/generate"
9月 29 00:10:03 ubuntu-homaer systemd[1]: Stopped Ollama Service.
9月 29 00:10:03 ubuntu-homaer systemd[1]: Started Ollama Service.
"#;

    #[test]
    fn go_durations() {
        assert_eq!(super::go_duration("32m31s"), Some(1951.0));
        assert_eq!(super::go_duration("1h2m3.5s"), Some(3723.5));
        assert!((super::go_duration("22.702µs").unwrap() - 22.702e-6).abs() < 1e-12);
        assert_eq!(super::go_duration("12.5"), None);
        assert_eq!(super::go_duration("abc"), None);
        assert_eq!(super::go_duration(""), Some(0.0));
    }

    #[test]
    fn a_request_ended_by_the_stop_after_half_an_hour_is_a_hang() {
        let f = crate::testing::findings_of(super::META.id, OLLAMA);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(f[0].entities.pids.contains(&27605));
        assert!(f[0].headline.contains("32m31s"), "{}", f[0].headline);
        // The next paste: the same grammar with English months and an hour
        // long `/api/chat` (a variant of the real lines above).
        let variant = OLLAMA
            .replace("9月 28", "Sep 28")
            .replace("9月 29", "Sep 29")
            .replace("32m31s", "1h2m5s")
            .replace("/api/generate\"\n9月", "/api/chat\"\nSep");
        assert_eq!(
            crate::testing::findings_of(super::META.id, &variant).len(),
            1
        );
    }

    #[test]
    fn a_long_request_that_succeeded_without_a_stop_is_no_hang() {
        // Without the stop the 500 after 32m31s still says nothing answered
        // it, at lower confidence.
        let no_stop = OLLAMA.replace(
            "9月 29 00:10:02 ubuntu-homaer systemd[1]: Stopping Ollama Service...\n",
            "",
        );
        let f = crate::testing::findings_of(super::META.id, &no_stop);
        assert_eq!(f.len(), 1);
        assert!(f[0].confidence < 0.6);
        // The near miss: the same long request answered (200), no stop: a
        // long generation, not a hang.
        let answered = no_stop.replace("| 500 |        32m31s", "| 200 |        32m31s");
        assert!(crate::testing::findings_of(super::META.id, &answered).is_empty());
        // A stop that ends a request no longer than the others.
        let short = OLLAMA.replace("       32m31s", "12.1s");
        assert!(crate::testing::findings_of(super::META.id, &short).is_empty());
    }
}
