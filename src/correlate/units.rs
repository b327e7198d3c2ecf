//! systemd units: what PID 1 logged about each one and what `systemctl
//! status` showed.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::model::Facts;
use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub enum UnitEventKind {
    Starting,
    Started,
    /// `Stopping X...`: a stop job began (an operator's `systemctl stop`
    /// or `restart`, a shutdown, a dependency going away).
    Stopping,
    Stopped,
    FailedToStart,
    MainProcessExited {
        code: String,
        status: String,
    },
    FailedWithResult(String),
    /// `Control process exited, code=exited, status=1/FAILURE`: an
    /// ExecStartPre=/ExecStartPost=/ExecStop=/ExecReload= command, or the
    /// start command of a Type=forking daemon, ended (src/core/unit.c
    /// unit_log_process_exit(), kind "Control process"; lower case and no
    /// comma before `status=` ≤ v22x).
    ControlProcessExited {
        code: String,
        status: String,
    },
    /// `Deactivated successfully.` / `Succeeded.`
    Deactivated,
    ScheduledRestart(u32),
    /// The restart delay ran out and systemd restarts the unit: `X holdoff
    /// time over, scheduling restart.` (≤ v219), `Service hold-off time
    /// over, scheduling restart.` (v220–v238), `Service RestartSec=100ms
    /// expired, scheduling restart.` (v239+). From v235 on, a `Scheduled
    /// restart job, restart counter is at N.` follows it; before, this is the
    /// only trace of a restart.
    RestartDue,
    /// `Unit X entered failed state.` / `X failed.` (≤ v219), `Unit entered
    /// failed state.` (v220–v239, beside `Failed with result`).
    EnteredFailedState,
    StartLimitHit,
    /// `Unit process N (comm) remains running after unit stopped.`
    RemainsRunning {
        pid: u32,
    },
    /// `Found left-over process N (comm) in control group while starting unit.`
    LeftOverProcess {
        pid: u32,
    },
    KillingProcess {
        pid: u32,
    },
    /// `State 'stop-sigterm' timed out. Killing.`
    StopTimedOut {
        state: String,
    },
    /// `Processes still around after (final) SIGKILL.`: stuck in D state.
    StillAroundAfterSigkill,
    /// `Start request repeated too quickly.`
    StartRepeatedTooQuickly,
    /// `A process of this unit has been killed by the OOM killer.`
    OomKilled,
    /// systemctl's own answer to a job that failed, printed where it was
    /// run (a shell, Ansible's `msg`), not in the journal: `Job for X
    /// failed because the control process exited with error code.` names
    /// the unit's result (`exit-code`; `None` for a bare `Job for X
    /// failed.` or an explanation no row knows).
    JobFailed {
        result: Option<String>,
    },
}

impl UnitEventKind {
    /// systemd restarting the unit: the delay ran out (`… scheduling
    /// restart.`) or the restart job was queued (`Scheduled restart job,
    /// restart counter is at N.`; v235+, after the former).
    pub fn is_restart(&self) -> bool {
        matches!(
            self,
            UnitEventKind::RestartDue | UnitEventKind::ScheduledRestart(_)
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct UnitEvent {
    pub kind: UnitEventKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UnitFacts {
    pub description: Option<String>,
    pub events: Vec<UnitEvent>,
    /// Index into `Facts::unit_statuses` of the unit's last status block.
    pub status: Option<usize>,
    /// Index into `Facts::unit_properties` of the unit's last `systemctl show`.
    pub properties: Option<usize>,
    /// The lines of its events that were cut before their end (at a
    /// terminal's width, or by a pager's `>`), read by the start of
    /// systemd's message ([`cut_event`]).
    pub cut: Vec<Span>,
}

impl UnitFacts {
    pub fn failed(&self) -> bool {
        self.events.iter().any(|e| {
            matches!(
                e.kind,
                UnitEventKind::FailedToStart
                    | UnitEventKind::FailedWithResult(_)
                    | UnitEventKind::EnteredFailedState
                    | UnitEventKind::MainProcessExited { .. }
            )
        })
    }

    /// How many times systemd restarted the unit: the highest restart
    /// counter (v235+), or, for systemd that prints none, the restarts it
    /// announced (`holdoff time over, scheduling restart`).
    pub fn restarts(&self) -> u32 {
        let counter = self
            .events
            .iter()
            .filter_map(|e| match e.kind {
                UnitEventKind::ScheduledRestart(n) => Some(n),
                _ => None,
            })
            .max();
        counter.unwrap_or_else(|| {
            self.events
                .iter()
                .filter(|e| matches!(e.kind, UnitEventKind::RestartDue))
                .count() as u32
        })
    }
}

/// What a main process's exit status says, for people: `status=127/n/a`
/// (a shell's "command not found"), `203/EXEC` (systemd could not execute
/// the command), `11/SEGV` (killed by a signal).
pub fn exit_meaning(code: &str, status: &str) -> Option<&'static str> {
    let (number, name) = status.split_once('/').unwrap_or((status, ""));
    let number: u32 = number.parse().ok()?;
    let signal = matches!(code, "killed" | "dumped");
    // systemd's own statuses, by number or by the name it printed.
    if let Some(step) = SYSTEMD_STEPS
        .iter()
        .find(|s| s.code == number || s.name == name)
        .filter(|_| !signal)
    {
        return Some(step.meaning);
    }
    Some(match (signal, number, name) {
        (true, 11, _) => "a segmentation fault (SIGSEGV): the program crashed in native code",
        (true, 6, _) => "an abort (SIGABRT): a failed assertion or an uncaught C++ exception",
        (true, 9, _) => {
            "SIGKILL: killed from outside (the OOM killer, a stop timeout, an operator)"
        }
        (true, 7, _) => "a bus error (SIGBUS)",
        (true, 4, _) => "an illegal instruction (SIGILL): a binary built for another CPU",
        (true, 31, "") | (true, _, "SYS") => {
            "SIGSYS: a system call the process's seccomp filter forbids (a unit's SystemCallFilter=)"
        }
        (true, 15, _) => "SIGTERM: asked to stop",
        (true, _, _) => return None,
        (false, 127, _) => {
            "command not found: the executable, its interpreter or a shared library it needs could not be found (the shell's and the loader's 127)"
        }
        (false, 126, _) => {
            "found but not executable (permissions, noexec mount, wrong architecture)"
        }
        (false, 134, _) => "a shell reporting a child killed by SIGABRT (128 + 6)",
        (false, 137, _) => "a shell reporting a child killed by SIGKILL (128 + 9)",
        (false, 139, _) => "a shell reporting a child killed by SIGSEGV (128 + 11)",
        (false, 143, _) => "a shell reporting a child killed by SIGTERM (128 + 15)",
        _ => return None,
    })
}

/// One of systemd's own exit statuses: the step of setting up a unit's
/// process that failed, before the unit's command ran.
pub struct SystemdStep {
    pub code: u32,
    /// Its name as systemd prints it after the number (`200/CHDIR`).
    pub name: &'static str,
    /// What failed, for people (with the setting that asks for the step).
    pub meaning: &'static str,
}

/// systemd's private exit statuses 200–243 (systemd src/basic/exit-status.h
/// `EXIT_CHDIR = 200` … and exit-status.c's `exit_status_mappings[]`, the
/// names; what each step sets up after systemd.exec(5), "Process Exit
/// Codes", in our words). 223 (tcpwrap) and 234 (kdbus) are retired and
/// never reused.
pub const SYSTEMD_STEPS: &[SystemdStep] = &[
    SystemdStep {
        code: 200,
        name: "CHDIR",
        meaning: "systemd could not change to WorkingDirectory= (200/CHDIR): changing to the requested working directory failed",
    },
    SystemdStep {
        code: 201,
        name: "NICE",
        meaning: "systemd could not set the process's scheduling priority, Nice= (201/NICE)",
    },
    SystemdStep {
        code: 202,
        name: "FDS",
        meaning: "systemd could not close or pass the process's file descriptors (202/FDS)",
    },
    SystemdStep {
        code: 203,
        name: "EXEC",
        meaning: "systemd could not execute ExecStart= (203/EXEC): a wrong path, no execute permission or a missing interpreter",
    },
    SystemdStep {
        code: 204,
        name: "MEMORY",
        meaning: "systemd ran out of memory setting up the process (204/MEMORY)",
    },
    SystemdStep {
        code: 205,
        name: "LIMITS",
        meaning: "systemd could not apply the unit's resource limits, LimitNOFILE= and the like (205/LIMITS)",
    },
    SystemdStep {
        code: 206,
        name: "OOM_ADJUST",
        meaning: "systemd could not apply OOMScoreAdjust= (206/OOM_ADJUST)",
    },
    SystemdStep {
        code: 207,
        name: "SIGNAL_MASK",
        meaning: "systemd could not set the process's signal mask (207/SIGNAL_MASK)",
    },
    SystemdStep {
        code: 208,
        name: "STDIN",
        meaning: "systemd could not set up standard input, StandardInput= (208/STDIN)",
    },
    SystemdStep {
        code: 209,
        name: "STDOUT",
        meaning: "systemd could not set up standard output, StandardOutput= (209/STDOUT): a log file or directory it names may be missing",
    },
    SystemdStep {
        code: 210,
        name: "CHROOT",
        meaning: "systemd could not change the root directory, RootDirectory=/RootImage= (210/CHROOT)",
    },
    SystemdStep {
        code: 211,
        name: "IOPRIO",
        meaning: "systemd could not set the I/O scheduling class or priority (211/IOPRIO)",
    },
    SystemdStep {
        code: 212,
        name: "TIMERSLACK",
        meaning: "systemd could not set TimerSlackNSec= (212/TIMERSLACK)",
    },
    SystemdStep {
        code: 213,
        name: "SECUREBITS",
        meaning: "systemd could not set SecureBits= (213/SECUREBITS)",
    },
    SystemdStep {
        code: 214,
        name: "SETSCHEDULER",
        meaning: "systemd could not set the CPU scheduling policy or priority (214/SETSCHEDULER)",
    },
    SystemdStep {
        code: 215,
        name: "CPUAFFINITY",
        meaning: "systemd could not set CPUAffinity= (215/CPUAFFINITY)",
    },
    SystemdStep {
        code: 216,
        name: "GROUP",
        meaning: "systemd could not look up or switch to Group=/SupplementaryGroups= (216/GROUP)",
    },
    SystemdStep {
        code: 217,
        name: "USER",
        meaning: "systemd could not switch to User= (217/USER): the user does not exist",
    },
    SystemdStep {
        code: 218,
        name: "CAPABILITIES",
        meaning: "systemd could not drop or grant the process's capabilities, CapabilityBoundingSet=/AmbientCapabilities= (218/CAPABILITIES)",
    },
    SystemdStep {
        code: 219,
        name: "CGROUP",
        meaning: "systemd could not set up the unit's control group (219/CGROUP)",
    },
    SystemdStep {
        code: 220,
        name: "SETSID",
        meaning: "systemd could not start a new session for the process (220/SETSID)",
    },
    SystemdStep {
        code: 221,
        name: "CONFIRM",
        meaning: "the start was refused at the console's confirmation, systemd.confirm_spawn= (221/CONFIRM)",
    },
    SystemdStep {
        code: 222,
        name: "STDERR",
        meaning: "systemd could not set up standard error, StandardError= (222/STDERR)",
    },
    SystemdStep {
        code: 224,
        name: "PAM",
        meaning: "systemd could not open or close the PAM session, PAMName= (224/PAM)",
    },
    SystemdStep {
        code: 225,
        name: "NETWORK",
        meaning: "systemd could not set up the network namespace, PrivateNetwork= (225/NETWORK)",
    },
    SystemdStep {
        code: 226,
        name: "NAMESPACE",
        meaning: "systemd could not set up the unit's mount namespace (226/NAMESPACE): a ReadWritePaths= or similar path is missing",
    },
    SystemdStep {
        code: 227,
        name: "NO_NEW_PRIVILEGES",
        meaning: "systemd could not apply NoNewPrivileges= (227/NO_NEW_PRIVILEGES)",
    },
    SystemdStep {
        code: 228,
        name: "SECCOMP",
        meaning: "systemd could not apply the system call filter, SystemCallFilter= (228/SECCOMP)",
    },
    SystemdStep {
        code: 229,
        name: "SELINUX_CONTEXT",
        meaning: "systemd could not determine or change the SELinux context, SELinuxContext= (229/SELINUX_CONTEXT)",
    },
    SystemdStep {
        code: 230,
        name: "PERSONALITY",
        meaning: "systemd could not set the execution domain, Personality= (230/PERSONALITY)",
    },
    SystemdStep {
        code: 231,
        name: "APPARMOR",
        meaning: "systemd could not change to AppArmorProfile= (231/APPARMOR)",
    },
    SystemdStep {
        code: 232,
        name: "ADDRESS_FAMILIES",
        meaning: "systemd could not apply RestrictAddressFamilies= (232/ADDRESS_FAMILIES)",
    },
    SystemdStep {
        code: 233,
        name: "RUNTIME_DIRECTORY",
        meaning: "systemd could not set up RuntimeDirectory= (233/RUNTIME_DIRECTORY)",
    },
    SystemdStep {
        code: 235,
        name: "CHOWN",
        meaning: "systemd could not change the owner of the socket (235/CHOWN)",
    },
    SystemdStep {
        code: 236,
        name: "SMACK_PROCESS_LABEL",
        meaning: "systemd could not set SmackProcessLabel= (236/SMACK_PROCESS_LABEL)",
    },
    SystemdStep {
        code: 237,
        name: "KEYRING",
        meaning: "systemd could not set up the kernel keyring (237/KEYRING)",
    },
    SystemdStep {
        code: 238,
        name: "STATE_DIRECTORY",
        meaning: "systemd could not set up StateDirectory= (238/STATE_DIRECTORY)",
    },
    SystemdStep {
        code: 239,
        name: "CACHE_DIRECTORY",
        meaning: "systemd could not set up CacheDirectory= (239/CACHE_DIRECTORY)",
    },
    SystemdStep {
        code: 240,
        name: "LOGS_DIRECTORY",
        meaning: "systemd could not set up LogsDirectory= (240/LOGS_DIRECTORY)",
    },
    SystemdStep {
        code: 241,
        name: "CONFIGURATION_DIRECTORY",
        meaning: "systemd could not set up ConfigurationDirectory= (241/CONFIGURATION_DIRECTORY)",
    },
    SystemdStep {
        code: 242,
        name: "NUMA_POLICY",
        meaning: "systemd could not apply NUMAPolicy=/NUMAMask= (242/NUMA_POLICY)",
    },
    SystemdStep {
        code: 243,
        name: "CREDENTIALS",
        meaning: "systemd could not set up the unit's credentials, LoadCredential=/SetCredential= (243/CREDENTIALS)",
    },
];

/// systemd's own exit status `code`, when it is one.
pub fn systemd_step(code: u32) -> Option<&'static SystemdStep> {
    SYSTEMD_STEPS.iter().find(|s| s.code == code)
}

macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| Regex::new($pattern).expect($pattern));
    };
}

re!(
    UNIT_PREFIXED,
    r"^(?P<unit>\S+\.(?:service|scope|socket|mount|timer|target|slice|path|swap)): (?P<rest>.*)$"
);
// The job messages that report no failure: they are not catalog rows (a
// `Started X.` is no finding), so their grammar lives here; the failed
// ones (`Failed to start X.`) are the catalog's `systemd.job-failed`.
re!(
    JOB,
    r"^(?P<verb>Starting|Started|Stopping|Stopped) (?P<what>.+?)(?:\.\.\.|\.)$"
);
re!(
    COMBINED,
    r"^(?P<unit>\S+\.(?:service|scope|socket|mount|timer|target|slice|path|swap))(?: - (?P<desc>.*))?$"
);

/// The unit a systemd message begins with (`X.service: …`), and the rest.
pub(super) fn unit_prefix(message: &str) -> Option<(&str, &str)> {
    let c = UNIT_PREFIXED.captures(message)?;
    Some((c.name("unit")?.as_str(), c.name("rest")?.as_str()))
}

/// Every line of PID 1 that begins with a unit's name (`X.service: …`),
/// whether or not its message is one [`collect`] reads as an event: the
/// line names the unit all the same.
pub fn unit_lines(facts: &Facts) -> BTreeMap<crate::source::Span, String> {
    facts
        .journal
        .iter()
        .filter(|e| is_manager(e))
        .filter_map(|e| {
            Some((
                e.span,
                UNIT_PREFIXED.captures(&e.message)?["unit"].to_owned(),
            ))
        })
        .collect()
}

/// Adds the units only systemd's forked child names in its step failure
/// (`systemd[1965636]: ntpd-rs.service: Failed at step USER spawning …`,
/// catalog row `systemd.failed-at-step`), a paste without PID 1's lines:
/// the inputs are about them all the same, with no event of PID 1's.
pub fn add_step_failures(units: &mut BTreeMap<String, UnitFacts>, known: &[super::known::Known]) {
    for k in known {
        if k.hit.row.is_some_and(|r| r.id == "systemd.failed-at-step")
            && let Some(unit) = k.hit.get("unit")
        {
            units.entry(unit.to_owned()).or_default();
        }
    }
}

/// Adds systemctl's answers to failed jobs (`Job for X failed because the
/// control process exited with error code.`, catalog rows
/// `systemd.result-*` and `systemd.systemctl-job-failed`) as events of
/// their units: a shell's or Ansible's paste may hold nothing else of the
/// unit. The result a row's name gives is kept; one line, one event.
pub fn add_job_failures(
    units: &mut BTreeMap<String, UnitFacts>,
    known: &[super::known::Known],
    messages: &[crate::model::Message],
) {
    for k in known {
        let h = &k.hit;
        let (Some(row), crate::catalogs::Via::Wording(i)) = (h.row, h.via) else {
            continue;
        };
        let job = row.wordings.get(i).is_some_and(|w| {
            w.template
                .as_deref()
                .is_some_and(|t| t.starts_with("Job for <unit> failed"))
        });
        let (Some(unit), Some(m)) = (h.get("unit"), messages.get(k.message)) else {
            continue;
        };
        if h.catalog.id != "systemd" || !job {
            continue;
        }
        let result = row.name.clone();
        let u = units
            .entry(unit.trim_end_matches('.').to_owned())
            .or_default();
        match u.events.iter_mut().find(|e| e.span == m.span) {
            // The generic wording and a result's wording read one line.
            Some(e) => {
                if let UnitEventKind::JobFailed { result: r } = &mut e.kind
                    && r.is_none()
                {
                    *r = result;
                }
            }
            None => {
                u.events.push(UnitEvent {
                    kind: UnitEventKind::JobFailed { result },
                    span: m.span,
                });
                u.events.sort_by_key(|e| e.span);
            }
        }
    }
}

pub fn collect(facts: &Facts) -> BTreeMap<String, UnitFacts> {
    let mut units: BTreeMap<String, UnitFacts> = BTreeMap::new();
    for (i, s) in facts.unit_statuses.iter().enumerate() {
        let u = units.entry(s.unit.clone()).or_default();
        u.status = Some(i);
        u.description = u.description.take().or_else(|| s.description.clone());
    }
    for (i, p) in facts.unit_properties.iter().enumerate() {
        if let Some(unit) = &p.unit {
            let u = units.entry(unit.clone()).or_default();
            u.properties = Some(i);
            u.description = u.description.take().or_else(|| p.description.clone());
        }
    }
    // Description → unit, for systemd ≤ 247 job messages that name only the
    // description.
    let by_description: BTreeMap<String, String> = units
        .iter()
        .filter_map(|(name, u)| Some((u.description.clone()?, name.clone())))
        .collect();
    // The units PID 1 names in each input: in a `journalctl -u UNIT` listing
    // there is one, and a description-only job message can only be about it.
    let mut named: BTreeMap<crate::source::SourceId, std::collections::BTreeSet<&str>> =
        BTreeMap::new();
    for e in facts.journal.iter().filter(|e| is_manager(e)) {
        if let Some(c) = UNIT_PREFIXED.captures(&e.message) {
            named
                .entry(e.span.source)
                .or_default()
                .insert(c.name("unit").map_or("", |m| m.as_str()));
        }
    }
    let only_unit = |source| {
        named
            .get(&source)
            .filter(|set| set.len() == 1)
            .and_then(|set| set.iter().next().map(|u| (*u).to_owned()))
    };

    for e in facts.journal.iter().filter(|e| is_manager(e)) {
        let msg = e.message.as_str();
        let mut cut = false;
        let event = catalog_event(msg).or_else(|| {
            // A job message (`Stopped X.`) is read below; anything else
            // may be one of systemd's messages cut before its end.
            let event = (!JOB.is_match(msg)).then(|| cut_event(msg)).flatten();
            cut = event.is_some();
            event
        });
        let (unit, kind, desc) = match event {
            Some(Event::Unit(Some(unit), kind)) => (Some(unit), kind, None),
            // A message cut before its unit: the unit the next lines of PID
            // 1 name (systemd writes a unit's exit and result together), or
            // the only unit the input's PID 1 names.
            Some(Event::Unit(None, kind)) => (
                e.unit
                    .clone()
                    .or_else(|| unit_near(facts, e.span))
                    .or_else(|| only_unit(e.span.source)),
                kind,
                None,
            ),
            Some(Event::Job(kind, what)) => {
                let (unit, desc) = job_unit(&what, e, &by_description, &only_unit);
                (unit, kind, desc)
            }
            None => {
                let Some(c) = JOB.captures(msg) else { continue };
                let kind = match &c["verb"] {
                    "Starting" => UnitEventKind::Starting,
                    "Started" => UnitEventKind::Started,
                    "Stopping" => UnitEventKind::Stopping,
                    "Stopped" => UnitEventKind::Stopped,
                    _ => continue,
                };
                let (unit, desc) = job_unit(&c["what"], e, &by_description, &only_unit);
                (unit, kind, desc)
            }
        };
        let Some(unit) = unit else { continue };
        let u = units.entry(unit).or_default();
        u.description = u.description.take().or(desc);
        u.events.push(UnitEvent { kind, span: e.span });
        if cut {
            u.cut.push(e.span);
        }
    }
    units
}

/// Whether a journal line is a service manager's whose lines are read as
/// unit events: PID 1's, or a user manager's (`systemd[1315]:`), which
/// writes the same messages about its units and whose lines the reader
/// reads in full as it does PID 1's (`ingest/journal_short.rs`).
pub fn is_manager(e: &crate::model::JournalEntry) -> bool {
    e.is_manager()
}

/// The unit a job message is about, and the description it gives: the
/// 252+ combined form names both (`foo.service - Foo.`); the ≤ 247 form
/// names only the description, which maps back to a unit through
/// `systemctl status`/`show` or the only unit the input's PID 1 names.
fn job_unit(
    what: &str,
    e: &crate::model::JournalEntry,
    by_description: &BTreeMap<String, String>,
    only_unit: &dyn Fn(crate::source::SourceId) -> Option<String>,
) -> (Option<String>, Option<String>) {
    match COMBINED.captures(what) {
        Some(j) => (
            Some(j["unit"].to_owned()),
            j.name("desc").map(|d| d.as_str().to_owned()),
        ),
        None => (
            e.unit
                .clone()
                .or_else(|| by_description.get(what).cloned())
                .or_else(|| only_unit(e.span.source)),
            None,
        ),
    }
}

/// What a message of PID 1 is, by the systemd catalog row it is an
/// instance of (`catalogs/systemd.toml`): an event of the unit it names,
/// or a job's end, whose unit the caller resolves from its description.
enum Event {
    /// `None`: the message was cut before its unit.
    Unit(Option<String>, UnitEventKind),
    Job(UnitEventKind, String),
}

/// The wrapper through which PID 1 reports a unit's result.
const FAILED_WITH_RESULT: &str = "systemd.wrapper.failed-with-result";

fn catalog_event(msg: &str) -> Option<Event> {
    let hits = crate::catalogs::catalogs().hits(msg);
    let systemd = || hits.iter().filter(|h| h.catalog.id == "systemd");
    // A row that names the unit first; a message cut before its unit only
    // when no row does.
    systemd()
        .filter_map(hit_event)
        .find(|e| !matches!(e, Event::Unit(None, _)))
        .or_else(|| {
            systemd()
                .filter(|h| msg.trim_start().starts_with(h.matched.trim()))
                .find_map(hit_event)
        })
}

/// The event one systemd catalog hit is.
fn hit_event(h: &crate::catalogs::Hit<'_>) -> Option<Event> {
    use crate::catalogs::Via;
    let unit = || h.get("unit").map(str::to_owned);
    let pid = || h.get("pid").and_then(|p| p.parse::<u32>().ok());
    if let Via::Wrapper(w) = h.via {
        if w.id != FAILED_WITH_RESULT {
            return None;
        }
        // A result no row knows yet is still the unit's result.
        let result = h
            .row
            .and_then(|r| r.name.clone())
            .or_else(|| h.get("name").map(str::to_owned))?;
        let kind = match result.as_str() {
            "start-limit-hit" => UnitEventKind::StartLimitHit,
            _ => UnitEventKind::FailedWithResult(result),
        };
        return Some(Event::Unit(unit(), kind));
    }
    let kind = match h.row?.id.as_str() {
        "systemd.job-failed" => {
            let what = h.get("what")?.trim_end();
            let what = what
                .strip_suffix(" with error.")
                .or_else(|| what.strip_suffix('.'))
                .unwrap_or(what);
            return Some(Event::Job(UnitEventKind::FailedToStart, what.to_owned()));
        }
        "systemd.main-process-exited" => UnitEventKind::MainProcessExited {
            code: h.get("how")?.to_owned(),
            status: h.get("status")?.trim_end_matches('.').to_owned(),
        },
        "systemd.control-process-exited" => UnitEventKind::ControlProcessExited {
            code: h.get("how")?.to_owned(),
            status: h.get("status")?.trim_end_matches('.').to_owned(),
        },
        "systemd.deactivated" => UnitEventKind::Deactivated,
        "systemd.scheduled-restart" => UnitEventKind::ScheduledRestart(h.get("n")?.parse().ok()?),
        "systemd.restart-due" => UnitEventKind::RestartDue,
        "systemd.entered-failed-state" => UnitEventKind::EnteredFailedState,
        "systemd.start-limit" => UnitEventKind::StartRepeatedTooQuickly,
        "systemd.process-remains" => UnitEventKind::RemainsRunning { pid: pid()? },
        "systemd.left-over-process" => UnitEventKind::LeftOverProcess { pid: pid()? },
        "systemd.killing-process" => UnitEventKind::KillingProcess { pid: pid()? },
        "systemd.stop-timed-out" => UnitEventKind::StopTimedOut {
            state: match h.get("state") {
                None | Some("stopping") => "stop".to_owned(),
                Some(state) => state.to_owned(),
            },
        },
        "systemd.still-around-after-sigkill" => UnitEventKind::StillAroundAfterSigkill,
        "systemd.oom-killed-process" => UnitEventKind::OomKilled,
        _ => return None,
    };
    Some(Event::Unit(unit(), kind))
}

/// The shortest start of a message read as a cut systemd message.
const CUT_MIN: usize = 12;

/// A message of the service manager cut before its end (at a terminal's
/// width, or by a pager's `>`, systemctl's `…`): the event of the one
/// systemd row (`catalogs/systemd.toml`) whose wording it begins, when
/// exactly one row's wording begins with it and it is long enough to
/// tell (`Unit entered failed sta`, `Service hold-off time o`, `Start
/// request repeated `, `Failed with result 'exi` with the one result
/// whose name begins `exi`). A restart announced by a line cut before its
/// counter's figure is still a restart ([`UnitEventKind::RestartDue`]); a
/// row whose event needs what was cut (a PID, an exit status) gives none.
fn cut_event(msg: &str) -> Option<Event> {
    let msg = msg.trim_end_matches(['>', '…']);
    let (unit, rest) = match unit_prefix(msg) {
        Some((u, r)) => (Some(u), r),
        None => (None, msg),
    };
    if rest.chars().count() < CUT_MIN {
        return None;
    }
    let systemd = crate::catalogs::catalogs()
        .list
        .iter()
        .find(|c| c.id == "systemd")?;
    if let Some(kind) = cut_result(systemd, rest) {
        return Some(Event::Unit(unit.map(str::to_owned), kind));
    }
    let mut found: Option<&str> = None;
    for row in &systemd.rows {
        let begins = row.wordings.iter().any(|w| {
            let Some(t) = w.template.as_deref() else {
                return false;
            };
            let t = match (unit, t.strip_prefix("<unit>: ")) {
                (Some(_), Some(t)) => t,
                (None, None) if !t.starts_with('<') => t,
                _ => return false,
            };
            let skeleton = skeleton(t);
            skeleton.len() > rest.len() && skeleton.starts_with(rest)
        });
        if begins {
            if found.is_some_and(|f| f != row.id) {
                return None;
            }
            found = Some(&row.id);
        }
    }
    let kind = match found? {
        "systemd.entered-failed-state" => UnitEventKind::EnteredFailedState,
        "systemd.restart-due" | "systemd.scheduled-restart" => UnitEventKind::RestartDue,
        "systemd.start-limit" => UnitEventKind::StartRepeatedTooQuickly,
        "systemd.deactivated" => UnitEventKind::Deactivated,
        "systemd.still-around-after-sigkill" => UnitEventKind::StillAroundAfterSigkill,
        "systemd.oom-killed-process" => UnitEventKind::OomKilled,
        "systemd.stop-timed-out" => UnitEventKind::StopTimedOut {
            state: "stop".to_owned(),
        },
        _ => return None,
    };
    Some(Event::Unit(unit.map(str::to_owned), kind))
}

/// A unit's result cut inside its name (`Failed with result 'exi`): the
/// one result of the wrapper's rows whose name begins with what is left.
fn cut_result(systemd: &crate::catalogs::Catalog, rest: &str) -> Option<UnitEventKind> {
    let w = systemd
        .wrappers
        .iter()
        .find(|w| w.id == FAILED_WITH_RESULT)?;
    let t = w.wording.template.as_deref()?;
    let t = t.strip_prefix("<unit>: ").unwrap_or(t);
    let head = &t[..t.find('<')?];
    let start = rest.strip_prefix(head)?;
    if start.is_empty() || start.contains('\'') {
        return None;
    }
    let prefix = w.rows.as_deref()?;
    let mut names = systemd
        .rows
        .iter()
        .filter(|r| r.id.starts_with(prefix))
        .filter_map(|r| r.name.as_deref())
        .filter(|n| n.starts_with(start));
    let name = names.next()?;
    if names.next().is_some() {
        return None;
    }
    Some(match name {
        "start-limit-hit" => UnitEventKind::StartLimitHit,
        _ => UnitEventKind::FailedWithResult(name.to_owned()),
    })
}

/// A wording's template without its placeholders: the literal text a
/// message of it begins with, up to where a value would stand.
fn skeleton(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// How far from a cut message the line naming its unit may be.
const NEAR: u32 = 3;

/// The unit PID 1 names in the lines right after `span` (else right
/// before it), in the same input: the unit a message cut before its name
/// is about.
fn unit_near(facts: &Facts, span: Span) -> Option<String> {
    let named = |e: &&crate::model::JournalEntry| {
        is_manager(e) && e.span.source == span.source && e.span != span
    };
    let distance = |e: &crate::model::JournalEntry| {
        if e.span.line > span.line {
            (0, e.span.line - span.line)
        } else {
            (1, span.line - e.span.line)
        }
    };
    facts
        .journal
        .iter()
        .filter(named)
        .filter(|e| e.span.line.abs_diff(span.line) <= NEAR)
        .filter_map(|e| {
            Some((
                distance(e),
                e.unit
                    .clone()
                    .or_else(|| unit_prefix(&e.message).map(|(u, _)| u.to_owned()))?,
            ))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, u)| u)
}

/// What a unit's own processes wrote during the run that ended at `exit`:
/// their last error-looking lines (the stated reason for the exit) and the
/// PIDs that wrote for the unit.
#[derive(Debug, Default)]
pub struct LastWords<'a> {
    /// The last error-looking lines before the exit, oldest first (at most
    /// [`LAST_WORDS`]).
    pub lines: Vec<&'a crate::model::JournalEntry>,
    /// Every PID that wrote as the unit during the run.
    pub pids: std::collections::BTreeSet<u32>,
    /// The run's first line that states a reason (error, fatal, …), even
    /// when more error lines follow it than [`LAST_WORDS`] keeps: the
    /// error the others often follow from.
    pub first: Option<&'a crate::model::JournalEntry>,
}

/// How many of a run's last error lines a report cites.
pub const LAST_WORDS: usize = 3;

impl LastWords<'_> {
    /// The line that states the reason: the last one that says error,
    /// fatal, panic, denied or exception, else the last error-looking one.
    pub fn reason(&self) -> Option<&crate::model::JournalEntry> {
        self.lines
            .iter()
            .rev()
            .find(|e| STRONG.is_match(&e.message))
            .or(self.lines.last())
            .copied()
    }
}

/// The words that make a unit's line one of its last words ([`last_words`]);
/// the prefilter keeps every line with one (`rules::anchors`), so the last
/// words read the same with and without it.
pub const LAST_WORDS_ANCHORS: &[&str] = &[
    "error",
    "errno",
    "fatal",
    "panic",
    "exception",
    "traceback",
    "denied",
    "not found",
    "no such file",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "unable to",
    "failed",
    "failure",
    "segmentation fault",
    "core dumped",
    "aborted",
    "invalid",
    "not permitted",
    "refused",
];

static ERRORISH: LazyLock<Regex> = LazyLock::new(|| {
    let words: Vec<String> = LAST_WORDS_ANCHORS
        .iter()
        .map(|w| regex::escape(w))
        .collect();
    Regex::new(&format!(r"(?i)\b(?:{})\b", words.join("|"))).expect("last words regex")
});
re!(
    STRONG,
    r"(?i)\b(?:error|fatal|panic|exception|denied|not permitted|no such file)\b"
);

/// The unit a unit's stem names: `ollama` for `ollama.service`,
/// `vllm` for `vllm@0.service`: the default `SyslogIdentifier=` of a unit
/// whose executable has the unit's name.
fn stem(unit: &str) -> &str {
    unit.split(['.', '@']).next().unwrap_or(unit)
}

/// The last words of `unit`'s processes before the exit PID 1 logged at
/// `exit`: lines of the same input, after the run's start (the unit's last
/// `Started`/restart before the exit), written by the unit (its journal
/// field, an owner link, or, when nothing else ties the PID anywhere, an
/// identifier equal to the unit's name).
pub fn last_words<'a>(incident: &'a super::Incident, unit: &str, exit: Span) -> LastWords<'a> {
    let start = run_start(incident, unit, exit);
    let sole = sole_writer(incident, exit);
    let mut out = LastWords::default();
    for e in &incident.facts.journal {
        if e.span.source != exit.source
            || e.span.line >= exit.line
            || e.span.line < start
            || is_manager(e)
            || e.is_kernel()
        {
            continue;
        }
        let mine = match (&e.unit, e.pid.and_then(|p| incident.owner(p))) {
            (Some(u), _) => u == unit,
            (None, Some(o)) => o.unit == unit,
            (None, None) => e.identifier == stem(unit) || (sole.is_some() && e.pid == sole),
        };
        if !mine {
            continue;
        }
        if let Some(pid) = e.pid {
            out.pids.insert(pid);
        }
        // A traceback's frames and source lines are not what it said: its
        // last line (`Exception: …`) is.
        let frame = e.message.starts_with([' ', '\t'])
            || e.message.contains("Traceback (most recent call last)");
        if !frame && ERRORISH.is_match(&e.message) {
            if out.first.is_none() && STRONG.is_match(&e.message) {
                out.first = Some(e);
            }
            out.lines.push(e);
        }
    }
    let cut = out.lines.len().saturating_sub(LAST_WORDS);
    out.lines.drain(..cut);
    out
}

/// The one program, by PID, whose lines the journal of the exit's input
/// shows before the exit besides the service managers, the kernel and the
/// OOM daemons: a paste of one unit's journal (`journalctl -u jupyterlab`
/// prints the unit's processes under their own names, `pipenv[420]:`
/// above `jupyterlab.service: Main process exited`) shows only that unit's
/// processes. Two writers, or none, name nobody. Every PID's first entry
/// is read in full by the prefilter, so the writers are the same with and
/// without it.
fn sole_writer(incident: &super::Incident, exit: Span) -> Option<u32> {
    let mut pids = incident
        .facts
        .journal
        .iter()
        .filter(|e| {
            e.span.source == exit.source
                && e.span.line < exit.line
                && !is_manager(e)
                && !e.is_kernel()
                && !e.speaks_for_others()
        })
        .filter_map(|e| e.pid);
    let first = pids.next()?;
    pids.all(|p| p == first).then_some(first)
}

/// The last words of a unit whose own output the paste shows without its
/// journal prefix (`Error: mkdir /home/user: permission denied` above
/// systemd's `Main process exited`): error-looking lines of the same input
/// before the exit at `exit` and after the unit's previous run, that are
/// no journal line, in an input whose journal shows no program's output
/// but PID 1's (so that no other writer's line is taken for the unit's);
/// the last [`LAST_WORDS`]. Asked when [`last_words`] finds none.
///
/// A program's output is an entry with a PID: the prefilter reads each
/// PID's first entries in full, so both readings see one if the input has
/// one. The kernel's lines (no PID) are no program's output, and are
/// skimmed like any chatter, so they must not decide it: a report would
/// differ with and without the prefilter (`prefilter::random` found it).
pub fn bare_last_words<'a>(
    incident: &'a super::Incident,
    unit: &str,
    exit: Span,
) -> Vec<&'a crate::model::Message> {
    let journal = &incident.facts.journal;
    if journal
        .iter()
        .any(|e| e.span.source == exit.source && e.pid.is_some() && !is_manager(e))
    {
        return Vec::new();
    }
    let start = run_start(incident, unit, exit);
    let mut out: Vec<&crate::model::Message> = incident
        .facts
        .messages
        .iter()
        .filter(|m| m.span.source == exit.source && m.span.line < exit.line && m.span.line >= start)
        .filter(|m| !journal.iter().any(|e| e.span == m.span))
        .filter(|m| {
            !m.text.starts_with([' ', '\t'])
                && !m.text.contains("Traceback (most recent call last)")
                && ERRORISH.is_match(&m.text)
        })
        .collect();
    let cut = out.len().saturating_sub(LAST_WORDS);
    out.drain(..cut);
    out
}

/// Whether a line of last words states the reason (`LastWords::reason`'s
/// test): it says error, fatal, panic, denied or exception.
pub fn states_reason(text: &str) -> bool {
    STRONG.is_match(text)
}

/// The first line of the run that ended at `exit`: after the unit's last
/// start or previous end before it.
fn run_start(incident: &super::Incident, unit: &str, exit: Span) -> u32 {
    incident
        .units
        .get(unit)
        .into_iter()
        .flat_map(|u| &u.events)
        .filter(|e| {
            e.span.source == exit.source
                && e.span.line < exit.line
                && matches!(
                    e.kind,
                    UnitEventKind::Started
                        | UnitEventKind::Starting
                        | UnitEventKind::MainProcessExited { .. }
                        | UnitEventKind::FailedWithResult(_)
                        | UnitEventKind::EnteredFailedState
                )
        })
        .map(|e| match e.kind {
            // A previous run's end: this run starts after it.
            UnitEventKind::Started | UnitEventKind::Starting => e.span.line,
            _ => e.span.line + 1,
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JournalEntry;
    use crate::source::SourceId;

    /// PID 1's entries for `systemd[1]: MESSAGE` lines (the journal parsers
    /// have their own tests; these are about the messages).
    fn pid1(lines: &[&str]) -> Facts {
        let mut facts = Facts::default();
        for (i, line) in lines.iter().enumerate() {
            let message = line
                .split_once("systemd[1]: ")
                .map_or(*line, |(_, m)| m.trim());
            let message = message
                .split_once("systemd: ")
                .map_or(message, |(_, m)| m.trim());
            facts.journal.push(JournalEntry {
                time: None,
                host: None,
                identifier: "systemd".to_owned(),
                pid: Some(1),
                unit: None,
                cmdline: None,
                message: message.to_owned(),
                span: Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                },
            });
        }
        facts
    }

    /// systemd's unit messages in every wording from v219 to v257 (the table
    /// of docs/formats/systemd.md), each a real line, become the same events.
    #[test]
    fn unit_messages_in_every_systemd_wording() {
        use UnitEventKind as K;
        let cases: &[(&str, &str, K)] = &[
            // v219 (ollama/ollama#6248, xrootd/xrootd#1410, kubernetes paste).
            (
                "Aug 08 09:02:33 master systemd[1]: ollama.service holdoff time over, scheduling restart.",
                "ollama.service",
                K::RestartDue,
            ),
            (
                "Feb 24 04:49:24 h systemd[1]: xrootd@grid.service has no holdoff time, scheduling restart.",
                "xrootd@grid.service",
                K::RestartDue,
            ),
            (
                "Aug 08 09:02:33 master systemd[1]: ollama.service: main process exited, code=exited, status=127/n/a",
                "ollama.service",
                K::MainProcessExited {
                    code: "exited".into(),
                    status: "127/n/a".into(),
                },
            ),
            (
                "Aug 08 09:02:33 master systemd[1]: Unit ollama.service entered failed state.",
                "ollama.service",
                K::EnteredFailedState,
            ),
            (
                "Aug 08 09:02:33 master systemd[1]: ollama.service failed.",
                "ollama.service",
                K::EnteredFailedState,
            ),
            (
                "Jan 07 01:03:24 cc019bed9d66 systemd[1]: start request repeated too quickly for docker.service",
                "docker.service",
                K::StartRepeatedTooQuickly,
            ),
            (
                "Mar 25 16:26:21 h systemd[1]: vllm.service stop-sigterm timed out. Killing.",
                "vllm.service",
                K::StopTimedOut {
                    state: "stop-sigterm".into(),
                },
            ),
            // syslog files drop PID 1's pid (/var/log/messages).
            (
                "Dec 24 18:08:35 node01 systemd: kube-apiserver.service holdoff time over, scheduling restart.",
                "kube-apiserver.service",
                K::RestartDue,
            ),
            // v220–v238 (NixOS/nixops#844, systemd/systemd#1970).
            (
                "Jan 21 20:14:29 node-1 systemd[1]: gluster.service: Service hold-off time over, scheduling restart.",
                "gluster.service",
                K::RestartDue,
            ),
            (
                "Nov 20 12:15:50 cfdev02 systemd[1]: conntrackd.service: Unit entered failed state.",
                "conntrackd.service",
                K::EnteredFailedState,
            ),
            // v239+ (XTLS/Xray-core#2055).
            (
                "May 10 18:12:20 debian10 systemd[1]: xray.service: Service RestartSec=100ms expired, scheduling restart.",
                "xray.service",
                K::RestartDue,
            ),
            (
                "May 10 18:12:20 debian10 systemd[1]: xray.service: Scheduled restart job, restart counter is at 5.",
                "xray.service",
                K::ScheduledRestart(5),
            ),
            (
                "May 10 18:12:20 debian10 systemd[1]: xray.service: Start request repeated too quickly.",
                "xray.service",
                K::StartRepeatedTooQuickly,
            ),
            // v235+ / v257 (ollama/ollama#1148).
            (
                "Nov 15 21:48:43 ai-desktop systemd[1]: ollama.service: Main process exited, code=dumped, status=11/SEGV",
                "ollama.service",
                K::MainProcessExited {
                    code: "dumped".into(),
                    status: "11/SEGV".into(),
                },
            ),
            (
                "Nov 15 21:48:43 ai-desktop systemd[1]: ollama.service: Failed with result 'core-dump'.",
                "ollama.service",
                K::FailedWithResult("core-dump".into()),
            ),
            (
                "Jun 01 12:00:00 h systemd[1]: vllm.service: Scheduled restart job immediately on client request, restart counter is at 2.",
                "vllm.service",
                K::ScheduledRestart(2),
            ),
            // v236+ / v246+ (Supervisor/supervisor#1563).
            (
                "Dec 28 13:40:57 robot systemd[1]: supervisor.service: Found left-over process 16849 (sleep) in control group while starting unit. Ignoring.",
                "supervisor.service",
                K::LeftOverProcess { pid: 16849 },
            ),
            (
                "Dec 28 13:40:57 robot systemd[1]: vllm.service: Unit process 4242 (python3) remains running after unit stopped.",
                "vllm.service",
                K::RemainsRunning { pid: 4242 },
            ),
            (
                "Mar 25 16:26:21 omen systemd[1]: user@1000.service: State 'stop-sigterm' timed out. Killing.",
                "user@1000.service",
                K::StopTimedOut {
                    state: "stop-sigterm".into(),
                },
            ),
            (
                "Mar 25 16:25:51 omen systemd[1]: app.scope: Stopping timed out. Killing.",
                "app.scope",
                K::StopTimedOut {
                    state: "stop".into(),
                },
            ),
            // v257: the restart's reason before the counter.
            (
                "2025-02-11T03:20:15+0100 h100a systemd[1]: sglang.service: Scheduled restart job (restarted by policy), restart counter is at 2.",
                "sglang.service",
                K::ScheduledRestart(2),
            ),
            // A line cut before the unit, its journal prefix gone (batch-a 624).
            (
                ": ollama.service: Failed with result 'exit-code'.",
                "ollama.service",
                K::FailedWithResult("exit-code".into()),
            ),
            // A result no row knows yet is still the unit's result.
            (
                "Jun 01 12:00:00 h systemd[1]: vllm.service: Failed with result 'frobnicated'.",
                "vllm.service",
                K::FailedWithResult("frobnicated".into()),
            ),
            (
                "Mar 06 15:34:48 buildroot systemd[1]: Failed to start vllm.service - vLLM server.",
                "vllm.service",
                K::FailedToStart,
            ),
        ];
        for (line, unit, kind) in cases {
            let incident = crate::correlate::correlate(pid1(&[line]));
            let events = incident
                .units
                .get(*unit)
                .map(|u| u.events.clone())
                .unwrap_or_default();
            assert_eq!(events.len(), 1, "{line}: {events:?}");
            assert_eq!(&events[0].kind, kind, "{line}");
        }
    }

    /// Old loops count their restarts from `holdoff time over`, new ones from
    /// the counter, never both.
    #[test]
    fn restarts_are_counted_once_in_every_version() {
        let old = "Aug 08 09:02:29 m systemd[1]: ollama.service failed.\n\
                   Aug 08 09:02:33 m systemd[1]: ollama.service holdoff time over, scheduling restart.\n\
                   Aug 08 09:02:36 m systemd[1]: ollama.service holdoff time over, scheduling restart.\n";
        let new = "May 10 18:12:20 d systemd[1]: x.service: Service RestartSec=100ms expired, scheduling restart.\n\
                   May 10 18:12:20 d systemd[1]: x.service: Scheduled restart job, restart counter is at 4.\n\
                   May 10 18:12:21 d systemd[1]: x.service: Service RestartSec=100ms expired, scheduling restart.\n\
                   May 10 18:12:21 d systemd[1]: x.service: Scheduled restart job, restart counter is at 5.\n";
        for (text, unit, n) in [(old, "ollama.service", 2), (new, "x.service", 5)] {
            let lines: Vec<&str> = text.lines().collect();
            let incident = crate::correlate::correlate(pid1(&lines));
            assert_eq!(incident.units[unit].restarts(), n, "{text}");
        }
    }
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    /// The event a message of the service manager gives, cut or whole.
    fn event(msg: &str) -> Option<(Option<String>, UnitEventKind)> {
        match catalog_event(msg).or_else(|| cut_event(msg))? {
            Event::Unit(unit, kind) => Some((unit, kind)),
            Event::Job(..) => None,
        }
    }

    /// The cut lines of NVIDIA/nvidia-docker#394 (fixtures/real/811) and of nix-community/nixos-vscode-server#9 (813):
    /// each is read by the one systemd row whose wording begins so.
    #[test]
    fn a_message_cut_at_the_terminal_is_read_by_its_start() {
        use UnitEventKind as K;
        let unit = Some("nvidia-docker.service".to_owned());
        for (msg, want) in [
            (
                "nvidia-docker.service: Unit entered failed sta",
                K::EnteredFailedState,
            ),
            (
                "nvidia-docker.service: Failed with result 'exi",
                K::FailedWithResult("exit-code".to_owned()),
            ),
            (
                "nvidia-docker.service: Service hold-off time o",
                K::RestartDue,
            ),
            (
                "nvidia-docker.service: Start request repeated ",
                K::StartRepeatedTooQuickly,
            ),
        ] {
            assert_eq!(event(msg), Some((unit.clone(), want)), "{msg}");
            assert!(catalog_event(msg).is_none(), "{msg} is whole");
        }
        assert_eq!(
            event("auto-fix-vscode-server.service: Scheduled restart job, restart counte>"),
            Some((
                Some("auto-fix-vscode-server.service".to_owned()),
                K::RestartDue
            ))
        );
        // The same cut after the result's first letters that name one.
        assert_eq!(
            event("x.service: Failed with result 'start-li"),
            Some((Some("x.service".to_owned()), K::StartLimitHit))
        );
    }

    /// A start several rows' wordings share, or too short to tell, or a
    /// result whose first letters begin several names, is no event; nor is
    /// a message that begins no wording.
    #[test]
    fn a_cut_that_does_not_tell_its_row_is_no_event() {
        for msg in [
            "x.service: Failed with result 's",
            "x.service: Failed with result '",
            "x.service: Unit ent",
            "x.service: Main process exited, co",
            "x.service: Something else entirely that is long",
            "Reloading the configuration of everyth",
        ] {
            assert!(cut_event(msg).is_none(), "{msg}");
        }
    }
}
