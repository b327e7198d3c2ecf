//! Diagnose: the catalog of failure rules and the findings they produce.
//!
//! One rule is one file in `catalog/`, which lists them: the crate above this
//! one, `rootcause-rule-catalog` (ARCHITECTURE.md, the layers).
//! Rules read an [`Incident`] and return [`Finding`]s with cited evidence,
//! an explained confidence and typed remediation [`Action`]s. They never
//! print and never write shell. [`rank`] then picks the root cause and says
//! which findings it explains; [`unknown`] groups error lines no rule cited.

mod action;
pub mod evidence;
mod finding;
mod rank;
pub mod support;
pub mod unknown;
mod user;
pub mod xid;

pub use action::{
    Action, ActionKind, CONTAINER_SCOPES, ExpectedCmdline, GpuHold, GpuRef, PROTECTED_UNITS,
    ProcessIdentity, Safety, glob_match, unit_refusal, with_flag,
};
pub use finding::{Category, Condition, Entities, Evidence, Finding, Severity};
pub use rank::CausalLayer;
pub use unknown::UnknownError;
pub use user::{RuleFileError, UserRule, did_you_mean, parse as parse_user_rule};

use crate::correlate::Incident;
use crate::ingest::Anchors;

/// The id of the rule that turns a catalog row into a finding by itself.
pub const KNOWN_MESSAGE: &str = "known-message";

/// The id of the rule that explains a death no other rule explains.
pub const PROCESS_DIED: &str = "process-died";

/// The id of the rule that turns a line in a failure class's words, which
/// no exact row reads, into a finding of that class (`catalogs/symptoms.toml`).
pub const SYMPTOM_WORDING: &str = "symptom-wording";

/// Rules whose findings are fallbacks, weakest first: each goes where a
/// stronger rule's finding cites its lines (that rule said more). A death's
/// finding outranks a message's: it read the unit's events around the line;
/// a message's outranks a wording class's: its program's row read it.
pub const FALLBACKS: &[&str] = &[SYMPTOM_WORDING, KNOWN_MESSAGE, PROCESS_DIED];

/// The built-in rules (`rootcause-rule-catalog`, a crate above this one),
/// for the tests that look a rule up (a dev-dependency on the app).
#[cfg(test)]
pub(crate) use rootcause::rules::RULES;

/// What a rule is, for `rootcause rules`/`explain` and the generated docs.
#[derive(Debug)]
pub struct RuleMeta {
    /// Stable kebab-case id; never reused.
    pub id: &'static str,
    /// The category of its typical finding (a finding may refine it).
    pub category: Category,
    pub severity: Severity,
    /// One line: what failure the rule recognises.
    pub summary: &'static str,
    /// Literals one of which every line the rule reads contains; the
    /// prefilter keeps only lines with an anchor of some rule.
    pub anchors: &'static [&'static str],
    /// Markdown with the sections *What it means*, *Why it happens*, *How to
    /// confirm*, *How to fix* and *Safety*.
    pub doc: &'static str,
}

pub trait Rule: Sync {
    fn meta(&self) -> &RuleMeta;
    fn check(&self, incident: &Incident, out: &mut Vec<Finding>);
}

/// Each rule's findings, in the catalog's order, and the unknown errors'
/// candidates ([`unknown::candidates`]). The rules are independent (a rule
/// sees the incident, never another's findings), and so are the
/// candidates, so on two cores two threads take them in turn, each the
/// next job when it is free: the candidates first, then the rules in
/// order (at the end of a big input a few rules over every kept line,
/// `known-message` the longest, are most of the work, and a fixed split
/// left one thread waiting for the other).
fn check_all(
    incident: &Incident,
    rules: &[&dyn Rule],
) -> (Vec<Vec<Finding>>, Vec<unknown::Candidate>) {
    let check = |rule: &&dyn Rule| {
        let mut out = Vec::new();
        rule.check(incident, &mut out);
        out
    };
    let two = rules.len() > 1 && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if !two {
        return (
            rules.iter().map(check).collect(),
            unknown::candidates(incident),
        );
    }
    // Job 0 is the candidates, job `i` the rule `i - 1`.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        let mut candidates = None;
        loop {
            match next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
                0 => candidates = Some(unknown::candidates(incident)),
                job if job <= rules.len() => done.push((job - 1, check(&rules[job - 1]))),
                _ => break,
            }
        }
        (done, candidates)
    };
    let ((mut done, mine), (theirs, other)) = std::thread::scope(|scope| {
        let other = scope.spawn(work);
        let mine = work();
        let other = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, other)
    });
    done.extend(theirs);
    done.sort_by_key(|(i, _)| *i);
    (
        done.into_iter().map(|(_, findings)| findings).collect(),
        mine.or(other).unwrap_or_default(),
    )
}

/// The diagnosis of one incident.
#[derive(Debug, Default)]
pub struct Diagnosis {
    /// Sorted: the root cause first, then what it explains, then the rest;
    /// ids are `F1`, `F2`, … in that order.
    pub findings: Vec<Finding>,
    /// Id of the finding that explains the others, if any.
    pub root_cause: Option<String>,
    /// Error-looking lines no finding cites, grouped by template.
    pub unknown_errors: Vec<UnknownError>,
}

/// A fallback's finding (a catalog message's own, a death's) is for the
/// lines no rule reasoned about: where the other findings cite its first
/// line (the message, the death), they said more, and it goes. So it does
/// where a finding of the same category cites one of its lines: a rule that
/// read the message (an Xid rule citing the first of three Xid 119 lines)
/// concluded what the row says, and more. A symptom wording's finding also
/// goes where a stronger finding names its category at all.
fn drop_restated(findings: &mut Vec<Finding>) {
    use std::collections::BTreeSet;
    type Span = crate::source::Span;
    // Strength: a fallback's index in FALLBACKS, every other rule above all.
    let levels = FALLBACKS.len();
    let strength = |f: &Finding| {
        FALLBACKS
            .iter()
            .position(|r| *r == f.rule)
            .unwrap_or(levels)
    };
    // For each fallback level, the lines cited by stronger findings, alone
    // and with their finding's category.
    let mut cited: Vec<BTreeSet<Span>> = vec![BTreeSet::new(); levels];
    let mut cited_as: Vec<BTreeSet<(Category, Span)>> = vec![BTreeSet::new(); levels];
    let mut named: Vec<BTreeSet<Category>> = vec![BTreeSet::new(); levels];
    for f in findings.iter() {
        for level in 0..strength(f).min(levels) {
            cited[level].extend(f.evidence.iter().map(|e| e.span));
            cited_as[level].extend(f.evidence.iter().map(|e| (f.category, e.span)));
            named[level].insert(f.category);
        }
    }
    findings.retain(|f| {
        let level = strength(f);
        if level == levels {
            return true;
        }
        let said_first = f
            .evidence
            .first()
            .is_some_and(|e| cited[level].contains(&e.span));
        let said_as = f
            .evidence
            .iter()
            .any(|e| cited_as[level].contains(&(f.category, e.span)));
        // A wording's class says less than any finding that named the same
        // category from what the lines mean: it adds nothing beside it.
        let named = f.rule == SYMPTOM_WORDING && named[level].contains(&f.category);
        !(said_first || said_as || named)
    });
}

/// A death whose last words a stronger finding cites (a rank's NCCL error
/// before torchrun reports the rank failed, a server's CUDA error before
/// its unit died) is explained by it: the death's lines become that
/// finding's evidence, its PIDs and units that finding's, and it has no
/// finding of its own. The first such finding, in rule order, takes it.
fn fold_deaths(findings: &mut Vec<Finding>) {
    let mut i = 0;
    while i < findings.len() {
        let death = &findings[i];
        let into = (death.rule == PROCESS_DIED && !death.last_words.is_empty())
            .then(|| {
                findings.iter().position(|f| {
                    !FALLBACKS.contains(&f.rule)
                        && f.evidence
                            .iter()
                            .any(|e| death.last_words.contains(&e.span))
                })
            })
            .flatten();
        let Some(j) = into else {
            i += 1;
            continue;
        };
        let death = findings.remove(i);
        let j = if j > i { j - 1 } else { j };
        let f = &mut findings[j];
        for (k, e) in death.evidence.into_iter().enumerate() {
            if k == 0 {
                f.evidence(e.span, format!("what it led to: {}", death.title));
            } else if !death.last_words.contains(&e.span) {
                f.push_evidence(e);
            }
        }
        f.entities.pids.extend(death.entities.pids);
        f.entities.units.extend(death.entities.units);
    }
}

/// A catalog line of severity `info` that still has a category (the header
/// of a kernel stack dump) says only that a report is there: it is a
/// finding where nothing else in its input is, and goes where another
/// finding cites a line of the same input (the OOM or hung-task report the
/// header belongs to said what it was).
fn drop_context(findings: &mut Vec<Finding>) {
    use std::collections::BTreeSet;
    let context = |f: &Finding| f.rule == KNOWN_MESSAGE && f.severity == Severity::Info;
    let explained: BTreeSet<crate::source::SourceId> = findings
        .iter()
        .filter(|f| !context(f))
        .flat_map(|f| f.evidence.iter().map(|e| e.span.source))
        .collect();
    findings.retain(|f| {
        !context(f)
            || !f
                .evidence
                .iter()
                .all(|e| explained.contains(&e.span.source))
    });
}

/// An OOM daemon's report of a kill it made (earlyoom's `sending SIGTERM to
/// process …`: a host-oom-killer finding whose first line the daemon
/// wrote, `earlyoom[812]: …`) followed by the crash of the daemon's own unit
/// (`earlyoom.service: Main process exited, code=dumped, status=31/SYS`):
/// the kill is what the daemon is for, and explains its victim's death, not
/// the daemon's. The daemon's crash is the failure the input records; the
/// report stays, as a warning, the context of that crash.
fn daemon_died_after_its_kill(incident: &Incident, findings: &mut [Finding]) {
    let crashed: Vec<(String, crate::source::Span)> = findings
        .iter()
        .filter(|f| f.category == Category::UnitCrashLoop && f.severity <= Severity::Error)
        .filter_map(|f| Some((f, f.evidence.first()?.span)))
        .flat_map(|(f, at)| f.entities.units.iter().map(move |u| (u.clone(), at)))
        .collect();
    if crashed.is_empty() {
        return;
    }
    for f in findings
        .iter_mut()
        .filter(|f| f.category == Category::HostOomKiller && f.severity <= Severity::Error)
    {
        let Some(first) = f.evidence.first().map(|e| e.span) else {
            continue;
        };
        let Some(line) = incident.facts.messages.iter().find(|m| m.span == first) else {
            continue;
        };
        // The crashed unit's program wrote the report (`earlyoom[812]:`).
        let writer = crashed.iter().find(|(unit, at)| {
            let program = unit.strip_suffix(".service").unwrap_or(unit);
            at.source == first.source
                && *at > first
                && (line.text.contains(&format!("{program}["))
                    || line.text.contains(&format!("{program}: ")))
        });
        if let Some((unit, _)) = writer {
            f.severity = Severity::Warning;
            f.condition(
                format!("{unit}, the daemon that made the kill, did not crash after it"),
                false,
            );
        }
    }
}

/// The anchors of every rule in `rules`, of the upstream catalogs' rows
/// (`known-message` and the rules that ask for rows read them), of a
/// unit's last words (`correlate::last_words`), and of error-looking lines.
pub fn anchors(rules: &[&dyn Rule]) -> Anchors {
    Anchors::new(
        rules
            .iter()
            .flat_map(|r| r.meta().anchors.iter().copied())
            .chain(crate::catalogs::catalogs().anchors())
            .chain(crate::correlate::LAST_WORDS_ANCHORS.iter().copied())
            .chain(unknown::ANCHORS.iter().copied()),
    )
}

/// Runs every rule and ranks the findings. Deterministic: the same incident
/// gives the same findings, in the same order, with the same ids.
pub fn diagnose(incident: &Incident, rules: &[&dyn Rule]) -> Diagnosis {
    let (by_rule, candidates) = check_all(incident, rules);
    let mut findings: Vec<Finding> = by_rule.into_iter().flatten().collect();
    drop_restated(&mut findings);
    fold_deaths(&mut findings);
    drop_context(&mut findings);
    daemon_died_after_its_kill(incident, &mut findings);
    for f in &mut findings {
        support::entities::from_evidence(incident, f);
        support::scope::mark_unrelated_units(incident, f);
        // One refusal per value, however many steps it would have fed.
        let mut seen = std::collections::BTreeSet::new();
        f.refused.retain(|r| seen.insert(r.clone()));
    }
    let (findings, root_cause) = rank::rank(rank::merge_duplicates(findings));
    let unknown_errors = unknown::group_candidates(incident, &findings, candidates);
    Diagnosis {
        findings,
        root_cause,
        unknown_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{SourceId, Span};

    fn finding(rule: &'static str, category: Category, lines: &[u32]) -> Finding {
        let mut f = Finding::new(rule, category, Severity::Error);
        for &line in lines {
            let span = Span {
                source: SourceId(0),
                line,
            };
            f.evidence(span, "cited");
        }
        f
    }

    fn rules_left(mut findings: Vec<Finding>) -> Vec<&'static str> {
        drop_restated(&mut findings);
        findings.iter().map(|f| f.rule).collect()
    }

    /// A rule of the test below: `n` findings when `n` is odd, each
    /// citing the lines whose text holds `n`'s digits; the slow ones wait
    /// first, so that the threads take the jobs out of step.
    struct Toy(u32);

    static TOY: RuleMeta = RuleMeta {
        id: "toy",
        category: Category::Unknown,
        severity: Severity::Info,
        summary: "a rule of a test",
        anchors: &[],
        doc: "",
    };

    impl Rule for Toy {
        fn meta(&self) -> &RuleMeta {
            &TOY
        }
        fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
            if self.0 % 4 == 1 {
                std::thread::sleep(std::time::Duration::from_millis(u64::from(self.0 % 7)));
            }
            for i in 0..self.0 % 2 * self.0 {
                let mut f = Finding::new("toy", Category::Unknown, Severity::Info);
                f.title = format!("{} {i}", self.0);
                for m in &incident.facts.messages {
                    if m.text.contains(&self.0.to_string()) {
                        f.evidence(m.span, "cited");
                    }
                }
                out.push(f);
            }
        }
    }

    #[test]
    fn the_threads_check_as_one_thread_does() {
        let mut facts = crate::model::Facts::default();
        for line in 1..400u32 {
            facts.messages.push(crate::model::Message {
                span: Span {
                    source: SourceId(0),
                    line,
                },
                text: format!("RuntimeError: failed {} at {line}", line * 7),
                pid: None,
            });
        }
        let incident = crate::correlate::correlate(facts);
        let toys: Vec<Toy> = (0..41).map(Toy).collect();
        let rules: Vec<&dyn Rule> = toys.iter().map(|t| t as &dyn Rule).collect();
        let one: Vec<Vec<Finding>> = rules
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                r.check(&incident, &mut out);
                out
            })
            .collect();
        let alone = unknown::group(&incident, &[]);
        assert_eq!(alone.len(), 1);
        for _ in 0..3 {
            let (by_rule, candidates) = check_all(&incident, &rules);
            assert_eq!(by_rule, one);
            assert_eq!(unknown::group_candidates(&incident, &[], candidates), alone);
        }
    }

    #[test]
    fn a_message_cited_by_a_death_goes_and_a_death_cited_by_a_rule_goes() {
        let known = || finding(KNOWN_MESSAGE, Category::ServerException, &[13]);
        let died = || finding(PROCESS_DIED, Category::ServerException, &[12, 13]);
        let xid = || finding("xid-gpu-fell-off-bus", Category::XidGpuFellOffBus, &[12]);
        assert_eq!(rules_left(vec![known(), died()]), [PROCESS_DIED]);
        assert_eq!(rules_left(vec![died(), xid()]), ["xid-gpu-fell-off-bus"]);
        // A message the death does not cite stays; a weaker finding never
        // removes a stronger one.
        let other = finding(KNOWN_MESSAGE, Category::ServerException, &[40]);
        assert_eq!(
            rules_left(vec![other, died()]),
            [KNOWN_MESSAGE, PROCESS_DIED]
        );
    }

    /// A wording class's finding is the weakest: any other finding that
    /// cites its line (a catalog message's, a rule's) removes it, and so
    /// does one of its category elsewhere; one of another category that
    /// cites other lines does not.
    #[test]
    fn a_symptom_goes_where_any_other_finding_cites_its_line() {
        let symptom = || finding(SYMPTOM_WORDING, Category::CudaOom, &[7]);
        let known = finding(KNOWN_MESSAGE, Category::ServerException, &[7]);
        assert_eq!(rules_left(vec![symptom(), known]), [KNOWN_MESSAGE]);
        let rule = finding("torch-cuda-oom", Category::CudaOom, &[3, 7]);
        assert_eq!(rules_left(vec![rule, symptom()]), ["torch-cuda-oom"]);
        let died = finding(PROCESS_DIED, Category::ServerException, &[7]);
        assert_eq!(rules_left(vec![symptom(), died]), [PROCESS_DIED]);
        let elsewhere = finding("torch-cuda-oom", Category::CudaOom, &[3]);
        assert_eq!(rules_left(vec![symptom(), elsewhere]), ["torch-cuda-oom"]);
        let other = finding("nccl-watchdog-timeout", Category::NcclTimeout, &[3]);
        assert_eq!(
            rules_left(vec![symptom(), other]),
            [SYMPTOM_WORDING, "nccl-watchdog-timeout"]
        );
    }

    #[test]
    fn a_death_whose_last_words_a_rule_cites_goes_into_that_finding() {
        let span = |line| Span {
            source: SourceId(0),
            line,
        };
        let died = || {
            let mut f = finding(PROCESS_DIED, Category::ServerException, &[5, 3]);
            f.last_words.push(span(3));
            f.entities.pids.insert(9292);
            f
        };
        let nccl = finding("nccl-init-failure", Category::NcclInitFailure, &[3]);
        let mut findings = vec![died(), nccl];
        fold_deaths(&mut findings);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, "nccl-init-failure");
        assert!(findings[0].evidence.iter().any(|e| e.span == span(5)));
        assert!(findings[0].entities.pids.contains(&9292));
        // Cited by a fallback, or by no one: the death stays.
        let known = finding(KNOWN_MESSAGE, Category::ServerException, &[3]);
        let mut findings = vec![known, died()];
        fold_deaths(&mut findings);
        assert_eq!(findings.len(), 2);
        let other = finding("nccl-init-failure", Category::NcclInitFailure, &[4]);
        let mut findings = vec![died(), other];
        fold_deaths(&mut findings);
        assert_eq!(findings.len(), 2);
    }

    #[test]
    fn a_context_line_is_a_finding_only_where_nothing_else_in_its_input_is() {
        let header = |source: usize| {
            let mut f = Finding::new(KNOWN_MESSAGE, Category::Unknown, Severity::Info);
            let span = Span {
                source: SourceId(source),
                line: 3,
            };
            f.evidence(span, "cited");
            f
        };
        let oom = || finding("kernel-oom-killer", Category::HostOomKiller, &[1, 9]);
        let left = |mut findings: Vec<Finding>| {
            drop_context(&mut findings);
            findings.iter().map(|f| f.rule).collect::<Vec<_>>()
        };
        assert_eq!(left(vec![header(0)]), [KNOWN_MESSAGE]);
        assert_eq!(left(vec![header(0), oom()]), ["kernel-oom-killer"]);
        // A report in another input explains nothing about this one.
        assert_eq!(
            left(vec![header(1), oom()]),
            [KNOWN_MESSAGE, "kernel-oom-killer"]
        );
    }
}
