//! The deaths `process-died` reads beside systemd's, the shell's and a
//! server's accounts: a core dump `coredumpctl info` shows (PID, signal,
//! unit), a worker torchrun reports failed (`failed (exitcode: 1)
//! local_rank: 0 (pid: 9292)`, with the workers it stopped after it and
//! the last error line before it); and two accounts of one death joined.

use super::{Death, exit_meaning, is_crash, is_stop, status_of};
use crate::correlate::Incident;
use crate::model::Severity;
use crate::source::Span;

/// torchrun's agent naming the first worker that failed, and its stopping
/// the others (catalogs/stacks-torch.toml).
const TORCH_FAILED: &str = "stacks-torch.elastic-worker-failed";
const TORCH_CLOSING: &str = "stacks-torch.elastic-closing-workers";

/// One death per core dump: a process killed by a signal that left a core.
pub(super) fn core_dumps(incident: &Incident) -> Vec<Death> {
    incident
        .facts
        .core_dumps
        .iter()
        .map(|c| {
            let status = c.signal.map(status_of);
            let how = status
                .as_deref()
                .and_then(|s| exit_meaning("dumped", s))
                .map(str::to_owned)
                .or_else(|| status.as_ref().map(|s| format!("signal {s}")))
                .unwrap_or_else(|| "a signal".to_owned());
            let name = c
                .executable
                .as_deref()
                .and_then(|e| e.rsplit('/').next())
                .filter(|n| !n.is_empty())
                .or(c.comm.as_deref())
                .unwrap_or("a process");
            let mut records = Vec::new();
            if let (Some(span), Some(s)) = (c.signal_span, &status) {
                records.push((span, format!("coredumpctl: signal {s}"), None));
            }
            if let (Some(span), Some(u)) = (c.unit_span, &c.unit) {
                records.push((span, format!("coredumpctl: its unit, {u}"), None));
            }
            Death {
                span: c.span,
                how: match &status {
                    Some(s) => format!("{how}, and dumped core (signal {s})"),
                    None => format!("{how}, and dumped core"),
                },
                unit: c
                    .unit
                    .clone()
                    .or_else(|| incident.owner(c.pid).map(|o| o.unit.clone())),
                pid: Some(c.pid),
                signalled: true,
                crashed: true,
                verdicts: Vec::new(),
                said: None,
                who: Some(format!("{name} (PID {})", c.pid)),
                signal: c.signal,
                records,
                last_words: Vec::new(),
                cause: None,
                unit_failed: false,
            }
        })
        .collect()
}

/// The workers torchrun reports failed: a negative exit code is the signal
/// that killed it (a stop signal is no death), a positive one its own
/// failure. The workers it stopped after it (`Sending process 9293
/// closing signal SIGTERM`) are cited with it.
pub(super) fn torch_workers(incident: &Incident) -> Vec<Death> {
    let mut out = Vec::new();
    let mut previous: Option<Span> = None;
    for (m, hit) in incident.known(TORCH_FAILED) {
        let since = previous.filter(|p| p.source == m.span.source);
        previous = Some(m.span);
        let (Some(code), Some(pid)) = (
            hit.get("code").and_then(|c| c.parse::<i64>().ok()),
            hit.get("pid").and_then(|p| p.parse::<u32>().ok()),
        ) else {
            continue;
        };
        let (how, signal, crashed) = match u32::try_from(-code) {
            Ok(0) => continue,
            Ok(n) => {
                let status = status_of(n);
                if is_stop(&status) {
                    continue;
                }
                let how = exit_meaning("killed", &status)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("signal {status}"));
                (
                    format!("{how} (exitcode {code})"),
                    Some(n),
                    is_crash(&status),
                )
            }
            Err(_) => (format!("it exited with code {code}"), None, true),
        };
        let rank = hit.get("rank").unwrap_or("?");
        let records = incident
            .known(TORCH_CLOSING)
            .filter(|(c, _)| {
                c.span.source == m.span.source
                    && c.span.line < m.span.line
                    && since.is_none_or(|p| c.span.line > p.line)
            })
            .filter_map(|(c, h)| {
                let other = h.get("pid")?.parse::<u32>().ok()?;
                Some((
                    c.span,
                    format!("torchrun then stopped another worker, PID {other}"),
                    Some(other),
                ))
            })
            .collect();
        out.push(Death {
            span: m.span,
            how,
            unit: None,
            pid: Some(pid),
            signalled: true,
            crashed,
            verdicts: Vec::new(),
            said: None,
            who: Some(format!(
                "torchrun's worker of local rank {rank} (PID {pid})"
            )),
            signal,
            records,
            last_words: preceding_error(incident, m.span).into_iter().collect(),
            cause: None,
            unit_failed: false,
        });
    }
    out
}

/// The last line before `at`, in its input, that a catalog row of severity
/// error or worse classifies as a failure: what a process with no unit to
/// gather its lines said last.
pub(super) fn preceding_error(incident: &Incident, at: Span) -> Option<(Span, String)> {
    incident
        .known
        .iter()
        .filter(|k| {
            k.hit
                .row
                .is_some_and(|r| r.category.is_some() && r.severity <= Severity::Error)
        })
        .map(|k| &incident.facts.messages[k.message])
        .filter(|m| m.span.source == at.source && m.span.line < at.line)
        .max_by_key(|m| m.span.line)
        .map(|m| (m.span, m.text.trim().to_owned()))
}

/// Two accounts of one death are one: the same PID (within a minute, where
/// both are timed: `coredumpctl list` may show one PID's dumps of several
/// days), or one account without a PID and one with, of the same signal in
/// the same input (Ollama's `signal: aborted (core dumped)` and
/// coredumpctl's `PID: 3776`, `Signal: 6 (ABRT)`). The first account stays;
/// it takes what it lacks from the other, whose line it cites.
pub(super) fn join(incident: &Incident, deaths: impl Iterator<Item = Death>) -> Vec<Death> {
    let mut out: Vec<Death> = Vec::new();
    for d in deaths {
        match out.iter_mut().find(|o| same(incident, o, &d)) {
            Some(o) => absorb(o, d),
            None => out.push(d),
        }
    }
    out
}

fn same(incident: &Incident, a: &Death, b: &Death) -> bool {
    let apart = match (incident.time_of(a.span), incident.time_of(b.span)) {
        (Some(x), Some(y)) => (x.utc_seconds() - y.utc_seconds()).abs() > 60,
        _ => false,
    };
    match (a.pid, b.pid) {
        (Some(x), Some(y)) => x == y && !apart,
        (None, Some(_)) | (Some(_), None) => {
            a.signal.is_some() && a.signal == b.signal && a.span.source == b.span.source
        }
        (None, None) => false,
    }
}

fn absorb(o: &mut Death, d: Death) {
    if o.pid.is_none() {
        o.pid = d.pid;
        if let (Some(who), Some(p)) = (&mut o.who, d.pid) {
            if !who.contains("(PID ") {
                *who = format!("{who} (PID {p})");
            }
        }
    }
    o.unit = o.unit.take().or(d.unit);
    o.said = o.said.take().or(d.said);
    o.cause = o.cause.or(d.cause);
    o.crashed |= d.crashed;
    o.unit_failed |= d.unit_failed;
    o.signalled |= d.signalled;
    o.records.push((
        d.span,
        format!("the same death, as another record has it: {}", d.how),
        None,
    ));
    o.records.extend(d.records);
    o.verdicts.extend(d.verdicts);
    o.last_words.extend(d.last_words);
}

#[cfg(test)]
mod tests {
    use crate::rules::Severity;

    use super::super::tests::deaths;

    /// https://github.com/ollama/ollama/issues/5352: Ollama's account and
    /// coredumpctl's of one abort are one death, with coredumpctl's PID
    /// and unit.
    #[test]
    fn a_servers_account_and_coredumpctls_are_one_death() {
        let f = deaths(concat!(
            "Error: llama runner process has terminated: signal: aborted (core dumped)\n",
            "           PID: 3776 (ollama_llama_se)\n",
            "           UID: 61547 (ollama)\n",
            "        Signal: 6 (ABRT)\n",
            "     Timestamp: Fri 2024-06-28 12:19:15 AEST (1min 3s ago)\n",
            "    Executable: /tmp/ollama3483777596/runners/cuda_v12/ollama_llama_server\n",
            "          Unit: ollama.service\n",
            "       Message: Process 3776 (ollama_llama_se) of user 61547 dumped core.\n",
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&3776), "{:?}", f[0].entities);
        assert!(f[0].entities.units.contains("ollama.service"));
        assert!(f[0].title.contains("SIGABRT"), "{}", f[0].title);
        assert!(f[0].headline.contains("PID 3776"), "{}", f[0].headline);
        // When: coredumpctl's time, which Ollama's line does not give.
        assert!(f[0].headline.contains("2024-06-28"), "{}", f[0].headline);
        assert_eq!(f[0].severity, Severity::Error);
    }

    /// https://github.com/VILLASframework/node/issues/207: a core dump alone
    /// is a death by its signal, in its unit, at its time.
    #[test]
    fn a_core_dump_alone_is_a_death() {
        let f = deaths(concat!(
            "           PID: 32567 (Xorg)\n",
            "        Signal: 6 (ABRT)\n",
            "     Timestamp: Tue 2019-04-30 18:57:16 CEST (1 day 21h ago)\n",
            "    Executable: /usr/lib/xorg/Xorg\n",
            "          Unit: session-c12.scope\n",
            "       Message: Process 32567 (Xorg) of user 1001 dumped core.\n",
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title.starts_with("Xorg (PID 32567) died"),
            "{}",
            f[0].title
        );
        assert!(f[0].headline.contains("2019-04-30"), "{}", f[0].headline);
        assert!(f[0].entities.units.contains("session-c12.scope"));
    }

    /// https://github.com/hpcaitech/ColossalAI/issues/3677: a worker killed
    /// by SIGKILL (exitcode -9), and the three torchrun stopped after it.
    /// With no error of the worker's own, the death is explained by
    /// `server-killed-no-kernel-line` (most likely the host's OOM killer),
    /// which names the same processes.
    #[test]
    fn a_torchrun_worker_killed_is_a_death_with_the_workers_stopped_after_it() {
        let f = crate::testing::findings_of(
            "server-killed-no-kernel-line",
            concat!(
                "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1167 closing signal SIGTERM\n",
                "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1169 closing signal SIGTERM\n",
                "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1170 closing signal SIGTERM\n",
                "\n",
                "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 1168) of binary: /opt/conda/bin/python\n",
            ),
        );
        assert_eq!(f.len(), 1, "{f:?}");
        let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
        assert_eq!(pids, [1167, 1168, 1169, 1170]);
        assert!(f[0].title.contains("SIGKILL"), "{}", f[0].title);
        // The stopping alone is no death.
        assert!(deaths("W0409 07:28:49.531000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 1365 closing signal SIGTERM\n").is_empty());
    }

    /// https://github.com/vllm-project/vllm/issues/8286: rank 1's NCCL error,
    /// then torchrun's report that local rank 0 failed: the NCCL finding
    /// explains the death and names its PIDs; the death has no finding of
    /// its own.
    #[test]
    fn a_worker_whose_last_words_a_rule_explains_goes_into_that_finding() {
        let a = crate::testing::analyze_paste(concat!(
            "[rank1]:     raise RuntimeError(f\"NCCL error: {error_str}\")\n",
            "[rank1]: RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
            "W0909 07:11:16.355000 140533383049856 torch/distributed/elastic/multiprocessing/api.py:858] Sending process 9293 closing signal SIGTERM\n",
            "E0909 07:11:16.569000 140533383049856 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 9292) of binary: /opt/conda/envs/sglang/bin/python\n",
        ));
        let findings = &a.diagnosis.findings;
        assert!(
            findings.iter().all(|f| f.rule != super::super::META.id),
            "{findings:?}"
        );
        let root = findings.first().expect("a finding");
        assert!(
            root.entities.pids.contains(&9292) && root.entities.pids.contains(&9293),
            "{:?}",
            root.entities
        );
        crate::testing::cites_line(root, 4);
    }
}
