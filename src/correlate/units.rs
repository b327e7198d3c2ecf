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
    Stopped,
    FailedToStart,
    MainProcessExited {
        code: String,
        status: String,
    },
    FailedWithResult(String),
    /// `Deactivated successfully.` / `Succeeded.`
    Deactivated,
    ScheduledRestart(u32),
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
}

impl UnitFacts {
    pub fn failed(&self) -> bool {
        self.events.iter().any(|e| {
            matches!(
                e.kind,
                UnitEventKind::FailedToStart
                    | UnitEventKind::FailedWithResult(_)
                    | UnitEventKind::MainProcessExited { .. }
            )
        })
    }
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
re!(
    JOB,
    r"^(?P<verb>Starting|Started|Stopping|Stopped|Failed to start|Timed out starting|Dependency failed for) (?P<what>.+?)(?:\.\.\.|\.| with error\.)$"
);
re!(
    COMBINED,
    r"^(?P<unit>\S+\.(?:service|scope|socket|mount|timer|target|slice|path|swap))(?: - (?P<desc>.*))?$"
);
re!(
    MAIN_EXITED,
    r"^Main process exited, code=(?P<code>\w+), status=(?P<status>\S+?)$"
);
re!(
    FAILED_RESULT,
    r"^Failed with result '(?P<result>[\w-]+)'\.$"
);
re!(
    RESTART,
    r"^Scheduled restart job.*, restart counter is at (?P<n>\d+)\.$"
);
re!(
    REMAINS,
    r"^Unit process (?P<pid>\d+) \(.{1,15}\) remains running after unit stopped\.$"
);
re!(
    LEFT_OVER,
    r"^Found left-over process (?P<pid>\d+) \(.{1,15}\) in control group while starting unit\."
);
re!(
    KILLING,
    r"^Killing process (?P<pid>\d+) \(.{1,15}\) with signal SIG[A-Z]+\.$"
);
re!(
    STOP_TIMEOUT,
    r"^State '(?P<state>[\w-]+)' timed out\. Killing\.$"
);

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
    for e in facts.journal.iter().filter(|e| e.is_pid1()) {
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

    for e in facts.journal.iter().filter(|e| e.is_pid1()) {
        let msg = e.message.as_str();
        if let Some(c) = UNIT_PREFIXED.captures(msg) {
            if let Some(kind) = unit_prefixed_event(&c["rest"]) {
                units
                    .entry(c["unit"].to_owned())
                    .or_default()
                    .events
                    .push(UnitEvent { kind, span: e.span });
            }
        } else if let Some(c) = JOB.captures(msg) {
            let what = &c["what"];
            let (unit, desc) = match COMBINED.captures(what) {
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
            };
            let Some(unit) = unit else { continue };
            let kind = match &c["verb"] {
                "Starting" => UnitEventKind::Starting,
                "Started" => UnitEventKind::Started,
                "Stopped" => UnitEventKind::Stopped,
                "Failed to start" | "Timed out starting" | "Dependency failed for" => {
                    UnitEventKind::FailedToStart
                }
                _ => continue,
            };
            let u = units.entry(unit).or_default();
            u.description = u.description.take().or(desc);
            u.events.push(UnitEvent { kind, span: e.span });
        }
    }
    units
}

fn unit_prefixed_event(rest: &str) -> Option<UnitEventKind> {
    let pid = |c: &regex::Captures<'_>| c["pid"].parse().ok();
    Some(if let Some(c) = MAIN_EXITED.captures(rest) {
        UnitEventKind::MainProcessExited {
            code: c["code"].to_owned(),
            status: c["status"].to_owned(),
        }
    } else if let Some(c) = FAILED_RESULT.captures(rest) {
        match &c["result"] {
            "start-limit-hit" => UnitEventKind::StartLimitHit,
            r => UnitEventKind::FailedWithResult(r.to_owned()),
        }
    } else if rest == "Deactivated successfully." || rest == "Succeeded." {
        UnitEventKind::Deactivated
    } else if let Some(c) = RESTART.captures(rest) {
        UnitEventKind::ScheduledRestart(c["n"].parse().ok()?)
    } else if let Some(c) = REMAINS.captures(rest) {
        UnitEventKind::RemainsRunning { pid: pid(&c)? }
    } else if let Some(c) = LEFT_OVER.captures(rest) {
        UnitEventKind::LeftOverProcess { pid: pid(&c)? }
    } else if let Some(c) = KILLING.captures(rest) {
        UnitEventKind::KillingProcess { pid: pid(&c)? }
    } else if let Some(c) = STOP_TIMEOUT.captures(rest) {
        UnitEventKind::StopTimedOut {
            state: c["state"].to_owned(),
        }
    } else if rest.starts_with("Processes still around after") {
        UnitEventKind::StillAroundAfterSigkill
    } else if rest == "Start request repeated too quickly." {
        UnitEventKind::StartRepeatedTooQuickly
    } else if rest == "A process of this unit has been killed by the OOM killer." {
        UnitEventKind::OomKilled
    } else {
        return None;
    })
}
