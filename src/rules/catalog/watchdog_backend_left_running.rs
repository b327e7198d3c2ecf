//! `watchdog-backend-left-running`: a serving stack's watchdog decided to
//! stop the backend at an address (LocalAI's `Address 127.0.0.1:35047 is
//! idle for too long, killing it`), and a process whose command line names
//! that address (`backend.py --addr 127.0.0.1:35047`) still runs in a
//! process listing of the inputs: the backend left running, untracked, with
//! its PID, GPU and memory; the shutdown's logged failure makes it surer.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: WatchdogBackendLeftRunning = WatchdogBackendLeftRunning;

pub struct WatchdogBackendLeftRunning;

/// The watchdog's failed shutdown (`catalogs/stacks-localai.toml`).
const FAILED: &str = "stacks-localai.watchdog-shutdown-failed";
/// The watchdog naming the backend it stops, by its address.
const STOPS: &str = "stacks-localai.watchdog-stops-backend";

static META: RuleMeta = RuleMeta {
    id: "watchdog-backend-left-running",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "a watchdog's shutdown of a backend failed and the backend's process, named by the address on its command line, still runs and holds its GPU memory",
    // The catalog rows' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
LocalAI runs each model in a backend process reached at `127.0.0.1:PORT`
(the backend's command line says `--addr 127.0.0.1:PORT`). Its watchdog
names the address it stops (`[WatchDog] Address 127.0.0.1:35047 is idle for
too long, killing it`), forgets it, and asks for the model's shutdown; when
that fails (`[watchdog] error shutting down model error="model … not
found"`), nothing tracks the backend any more. A process listing in the
inputs (nvtop, `ps`, nvidia-smi's process names) whose command line names
the same address is that backend, still running: the finding names its
PID, its GPU and the memory it holds.

## Why it happens
The shutdown looked the backend up under another name than the one it
was loaded under (the model's file name against its configured name), so
the process manager did not find it; the watchdog had already untracked
its address.

## How to confirm
`ps -o pid,ppid,lstart,args -p PID` (the backend's command line with the
address); `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`.

## How to fix
End that PID after checking its command line, then restart LocalAI;
report the failed shutdown upstream with the model's name.

## Safety
Advice only: the kill is for a person to run after checking the PID.
"#,
};

impl Rule for WatchdogBackendLeftRunning {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // Each address the watchdog stopped, at its first stop line (the
        // decision; `model shut down` comes after the shutdown's error).
        let mut stops: Vec<(&Message, String)> = Vec::new();
        for (m, h) in incident.known(STOPS) {
            let Some(addr) = h.get("addr").map(str::trim).filter(|a| is_address(a)) else {
                continue;
            };
            if !stops.iter().any(|(_, a)| a == addr) {
                stops.push((m, addr.to_owned()));
            }
        }
        for (stop, addr) in &stops {
            let Some(holder) = holder_of(incident, addr) else {
                continue;
            };
            // The shutdown's error after the stop, in the same input.
            let failed = incident
                .known(FAILED)
                .find(|(m, _)| m.span.source == stop.span.source && m.span > stop.span);
            out.push(finding(stop, addr, failed, &holder));
        }
    }
}

/// The finding for the backend at `addr` that the watchdog stopped at
/// `stop` and `holder` shows still running, with the shutdown's error.
fn finding(
    stop: &Message,
    addr: &str,
    failed: Option<(&Message, &crate::catalogs::Hit<'static>)>,
    holder: &Holder,
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence(
        stop.span,
        format!("the watchdog stops the backend at {addr}"),
    );
    let why = failed.map(|(_, h)| said(h.get("msg").unwrap_or_default()));
    if let (Some((m, _)), Some(why)) = (failed, why) {
        f.evidence(
            m.span,
            format!(
                "the shutdown failed ({why}): the watchdog no longer tracks the backend at {addr}"
            ),
        );
    }
    let on = match (holder.gpu, holder.used_mib) {
        (Some(g), Some(mib)) => format!(" on GPU {g} with {mib} MiB"),
        (Some(g), None) => format!(" on GPU {g}"),
        (None, Some(mib)) => format!(" with {mib} MiB"),
        (None, None) => String::new(),
    };
    let pid = holder.pid;
    f.evidence(
        holder.span,
        format!("PID {pid}, whose command line names {addr}, still runs{on}: the backend the watchdog meant to stop"),
    );
    f.entities.pids.insert(pid);
    if let Some(g) = holder.gpu {
        f.entities.gpus.insert(g);
    }
    f.condition(
        "the watchdog named the address of the backend it stops",
        true,
    );
    f.condition(
        "a process whose command line names that address is listed",
        true,
    );
    let failed_said = f.condition(
        "the watchdog logged the shutdown's failure",
        failed.is_some(),
    );
    let on_gpu = f.condition(
        "that process holds GPU memory",
        holder.used_mib.is_some_and(|m| m > 0),
    );
    f.confidence = match (failed_said, on_gpu) {
        (true, true) => 0.8,
        (true, false) | (false, true) => 0.7,
        (false, false) => 0.6,
    };
    let how = match why {
        Some(why) => format!("could not shut it down ({why})"),
        None => "logged it shut down".to_owned(),
    };
    f.title = format!("LocalAI's backend at {addr} (PID {pid}) was not stopped: it still runs{on}");
    f.headline = format!(
        "LocalAI's watchdog stopped tracking the backend at {addr} and {how}, but the backend's process, PID {pid}, still runs{on}: a stale instance LocalAI no longer knows."
    );
    f.chain.push(format!("PID {pid} still runs{on}, untracked"));
    f.chain.push(format!(
        "the watchdog forgot the backend at {addr} and {how}"
    ));
    f.explanation = "The watchdog removes a backend's address from what it tracks before it asks for the model's shutdown; when the shutdown does not find the model (another name than it was loaded under) or does not end the process, the backend keeps running and LocalAI may start another one for the same model.".to_owned();
    f.actions.push(Action::advice(
        format!("check that PID {pid} is the backend at {addr} (its command line), end it, then restart LocalAI"),
        Some(format!("ps -o pid,ppid,lstart,args -p {pid}; kill {pid}").as_str()),
    ));
    f.actions.push(Action::advice(
        "report the failed shutdown upstream with the model's name and LocalAI's version",
        None,
    ));
    f
}

/// The error a zerolog field holds: the quoted value (`"model X not
/// found" model=X` → `model X not found`), else the text.
fn said(msg: &str) -> &str {
    let msg = msg.trim();
    match msg.strip_prefix('"').and_then(|m| m.split_once('"')) {
        Some((quoted, _)) => quoted,
        None => msg,
    }
}

/// `host:port`, the form a backend's address takes.
fn is_address(a: &str) -> bool {
    a.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
    })
}

/// A listed process whose command line names `addr` as a whole word.
struct Holder {
    pid: u32,
    gpu: Option<u32>,
    used_mib: Option<u64>,
    span: Span,
}

fn names(cmdline: &str, addr: &str) -> bool {
    cmdline
        .split(|c: char| c.is_whitespace() || c == '=')
        .any(|w| w == addr)
}

fn holder_of(incident: &Incident, addr: &str) -> Option<Holder> {
    if let Some(p) = incident
        .gpu_processes
        .iter()
        .find(|p| !p.name_truncated && names(&p.name, addr))
    {
        return Some(Holder {
            pid: p.pid,
            gpu: p.gpu,
            used_mib: p.used_mib,
            span: *p.spans.first()?,
        });
    }
    incident
        .cmdlines
        .iter()
        .find(|(_, c)| names(&c.text, addr))
        .map(|(pid, c)| Holder {
            pid: *pid,
            gpu: None,
            used_mib: None,
            span: c.span,
        })
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// mudler/LocalAI#2866 (fixtures/real/947), verbatim: the watchdog's
    /// lines, then nvtop's row of the backend it meant to stop.
    const LOCALAI: &str = "api-1                 | 10:07PM WRN [WatchDog] Address 127.0.0.1:35047 is idle for too long, killing it\n\
api-1                 | 10:07PM ERR [watchdog] error shutting down model error=\"model DreamShaper_8_pruned.safetensors not found\" model=DreamShaper_8_pruned.safetensors\n\
api-1                 | 10:07PM DBG [WatchDog] model shut down: 127.0.0.1:35047\n\
api-1                 | 10:07PM DBG [WatchDog] 127.0.0.1:40201: idle connection\n\
47315    root   0  Compute   0%   3096MiB  19%     0%   1308MiB python /build/backend/python/diffusers/backend.py --addr 127.0.0.1:35047 \n";

    #[test]
    fn the_process_named_by_the_stopped_address_is_the_backend_left_running() {
        let f = findings(LOCALAI);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::StaleServingInstance);
        assert!(f[0].entities.pids.contains(&47315), "{:?}", f[0].entities);
        assert!(f[0].entities.gpus.contains(&0), "{:?}", f[0].entities);
        assert!(f[0].headline.contains("not found"), "{}", f[0].headline);
        assert!(f[0].title.contains("3096 MiB"), "{}", f[0].title);
        assert!(f[0].confidence >= 0.8, "{}", f[0].confidence);
    }

    /// The same thread's later comment, verbatim: the watchdog logs the
    /// backend shut down, with no error, and nvtop still lists it.
    #[test]
    fn a_backend_logged_shut_down_that_still_runs_is_left_running() {
        let text = "api-1                 | 10:16PM DBG [WatchDog] Watchdog checks for busy connections\n\
api-1                 | 10:16PM DBG [WatchDog] Watchdog checks for idle connections\n\
api-1                 | 10:16PM DBG [WatchDog] 127.0.0.1:38795: idle connection\n\
api-1                 | 10:16PM WRN [WatchDog] Address 127.0.0.1:38795 is idle for too long, killing it\n\
api-1                 | 10:16PM DBG [WatchDog] model shut down: 127.0.0.1:38795\n\
  47779    root   0  Compute   0%   3088MiB  19%     0%   1303MiB python /build/backend/python/diffusers/backend.py --addr 127.0.0.1:38795\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&47779), "{:?}", f[0].entities);
        assert!(f[0].confidence < 0.8, "{}", f[0].confidence);
    }

    #[test]
    fn a_process_of_another_address_or_none_is_not_joined() {
        // Another backend's address: not the one the watchdog stopped.
        let other = LOCALAI.replace("--addr 127.0.0.1:35047", "--addr 127.0.0.1:40201");
        assert!(findings(&other).is_empty());
        // A longer port that starts with the same digits is another address.
        let longer = LOCALAI.replace("--addr 127.0.0.1:35047", "--addr 127.0.0.1:350470");
        assert!(findings(&longer).is_empty());
        // No process listing: the catalog row's own finding says it.
        let logs: String = LOCALAI.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert!(findings(&logs).is_empty());
    }
}
