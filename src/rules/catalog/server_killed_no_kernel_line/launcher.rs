//! DeepSpeed's launcher's account of a worker's death: it polls its
//! workers, and when one exits with a non-zero code its sigkill_handler
//! logs `Killing subprocess <pid>` for every worker it started, then the
//! failed worker's command and code (`[…] exits with return code = -9`).
//! Both are catalog rows (`catalogs/stacks-torch.toml`). A code of -9 is
//! SIGKILL; no code at all (a paste that ends at `Killing subprocess`),
//! with no interrupt before it and no error of the worker's own, is a
//! worker that died silently: what a kill from outside looks like. Any
//! other code (a traceback's exit 1, -11 SIGSEGV, -2 the launcher's own
//! Ctrl-C) is not this rule's.

use std::collections::BTreeSet;

use crate::catalogs::Stage;
use crate::correlate::Incident;
use crate::rules::Finding;
use crate::source::Span;

use super::{Killed, finding};

/// The launcher stopping its workers, one line per worker.
const KILLING: &str = "stacks-torch.deepspeed-launcher-killing-subprocess";
/// The launcher's report of the failed worker's code.
const EXITED: &str = "stacks-torch.deepspeed-launcher-child-exited";

/// Someone pressed Ctrl-C: the launcher stops its workers then too.
fn interrupted(incident: &Incident, at: Span) -> bool {
    incident.facts.messages.iter().any(|m| {
        m.span.source == at.source
            && m.span < at
            && (m.text.contains("KeyboardInterrupt") || m.text.contains("^C"))
    })
}

/// One finding per input where the launcher reports a worker killed.
pub(super) fn findings(incident: &Incident, out: &mut Vec<Finding>) {
    let sources: BTreeSet<_> = incident
        .known(KILLING)
        .chain(incident.known(EXITED))
        .map(|(m, _)| m.span.source)
        .collect();
    for source in sources {
        let here = |s: Span| s.source == source;
        let first_killing = incident
            .known(KILLING)
            .map(|(m, _)| m.span)
            .filter(|s| here(*s))
            .min();
        // The first code reported in the input: the death that stopped
        // the job.
        let exited = incident
            .known(EXITED)
            .filter(|(m, _)| here(m.span))
            .find_map(|(m, hit)| Some((m.span, hit.get("code")?.trim().parse::<i64>().ok()?)));
        let (kill, sigkill) = match (exited, first_killing) {
            (Some((span, -9)), _) => (span, true),
            (Some(_), _) => continue,
            (None, Some(span)) => (span, false),
            (None, None) => continue,
        };
        if !sigkill && interrupted(incident, kill) {
            continue;
        }
        // The workers it stopped: one alone is the one that died.
        let pids: BTreeSet<u32> = incident
            .known(KILLING)
            .filter(|(m, _)| here(m.span) && first_killing.is_some_and(|f| m.span >= f))
            .filter(|(m, _)| m.span <= kill)
            .filter_map(|(_, hit)| hit.get("pid")?.parse().ok())
            .collect();
        let pid = if pids.len() == 1 {
            pids.first().copied()
        } else {
            None
        };
        if let Some(f) = finding(incident, kill, Killed::Launcher { pid, sigkill }) {
            out.push(f);
        }
    }
}

/// The launcher's lines stopping its workers, cited with the kill, with
/// each worker's PID.
pub(super) fn cite(incident: &Incident, kill: Span, f: &mut Finding) {
    for (m, hit) in incident.known(KILLING) {
        if m.span.source != kill.source || m.span > kill {
            continue;
        }
        let Some(pid) = hit.get("pid").and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        f.entities.pids.insert(pid);
        if m.span != kill {
            f.evidence(
                m.span,
                format!("DeepSpeed's launcher stops its worker PID {pid}: it does so when a worker has exited with an error or a signal"),
            );
        }
    }
}

/// Whether the last start-up stage before the launcher's report was the
/// model's weights loading (`Loading pygmalion-2.7b...`): what a worker
/// killed then was doing.
pub(super) fn loading(incident: &Incident, server_line: Option<Span>, killed: Killed<'_>) -> bool {
    matches!(killed, Killed::Launcher { .. })
        && server_line.is_some_and(|line| {
            incident.known.iter().any(|k| {
                incident.facts.messages[k.message].span == line
                    && k.hit.row.and_then(|r| r.stage) == Some(Stage::WeightsLoading)
            })
        })
}

/// The evidence note on the launcher's line.
pub(super) fn kill_note(killed: Killed<'_>) -> String {
    match killed {
        Killed::Launcher { sigkill: true, .. } => "DeepSpeed's launcher reports its worker `exits with return code = -9`: SIGKILL from outside, with no traceback of its own".to_owned(),
        Killed::Launcher { pid, .. } => format!(
            "DeepSpeed's launcher stops its workers{}: one of them exited, with no traceback and no interrupt before it (the code it reports next is not in the inputs)",
            pid.map(|p| format!(" (PID {p})")).unwrap_or_default()
        ),
        _ => String::new(),
    }
}

/// The finding's title, and its headline.
pub(super) fn explain(f: &mut Finding, pid: Option<u32>, sigkill: bool) -> String {
    let who = pid.map_or_else(
        || "A DeepSpeed worker".to_owned(),
        |p| format!("DeepSpeed's worker {p}"),
    );
    f.title = format!(
        "{} died {}, most likely killed by the host's OOM killer",
        who.to_lowercase().replacen("deepspeed", "DeepSpeed", 1),
        if sigkill {
            "by SIGKILL"
        } else {
            "with no error of its own"
        }
    );
    if sigkill {
        format!(
            "{who} was killed by SIGKILL (DeepSpeed's launcher reports exit code -9) with no error of its own: most likely the kernel's OOM killer; the kernel's lines are not in the inputs."
        )
    } else {
        format!(
            "{who} died with no traceback and no interrupt, and DeepSpeed's launcher stopped the job: what a kill from outside looks like, most often the kernel's OOM killer while the model loads into host memory; the launcher's exit code (-9 for SIGKILL) and the kernel's lines would confirm it."
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    const RULE: &str = "server-killed-no-kernel-line";

    /// textgen#51 (oobabooga/text-generation-webui): the launcher reaps
    /// the web UI six seconds into loading its model, under WSL.
    const REAPED: &str = "\
[2023-02-03 15:20:47,986] [INFO] [launch.py:164:main] Setting CUDA_VISIBLE_DEVICES=0
[2023-02-03 15:20:51,399] [INFO] [comm.py:657:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl
Loading pygmalion-2.7b...
[2023-02-03 15:20:57,020] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 4459
";

    #[test]
    fn a_worker_reaped_while_loading_is_a_kill_naming_its_pid() {
        let f = findings_of(RULE, REAPED);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&4459));
        assert!(f[0].confidence >= 0.5, "{}", f[0].confidence);
    }

    #[test]
    fn an_interrupt_before_the_launcher_stops_its_workers_is_no_kill() {
        let text = REAPED.replace("[2023-02-03 15:20:57,020]", "^C\n[2023-02-03 15:20:57,020]");
        assert!(findings_of(RULE, &text).is_empty());
    }

    /// DeepSpeed#3232: the launcher's code -9 after it stopped the worker.
    const CODE: &str = "\
[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266
[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=0', '--data_path', 'Dahoas/rm-static', 'Dahoas/full-hh-rlhf', 'Dahoas/synthetic-instruct-gptj-pairwise', 'yitingxie/rlhf-reward-datasets', 'openai/webgpt_comparisons', 'stanfordnlp/SHP', '--data_split', '2,4,4', '--model_name_or_path', 'facebook/opt-125m', '--per_device_train_batch_size', '2', '--per_device_eval_batch_size', '8', '--max_seq_len', '512', '--learning_rate', '9.65e-6', '--weight_decay', '0.1', '--num_train_epochs', '2', '--gradient_accumulation_steps', '1', '--lr_scheduler_type', 'cosine', '--num_warmup_steps', '0', '--seed', '1234', '--zero_stage', '2', '--deepspeed', '--output_dir', '/content/DeepSpeedExamples/applications/DeepSpeed-Chat/output/actor-models/125m'] exits with return code = -9
";

    #[test]
    fn the_launchers_code_minus_nine_is_a_sigkill() {
        let f = findings_of(RULE, CODE);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&13266));
    }

    #[test]
    fn another_code_is_not_a_kill() {
        let text = CODE.replace("= -9", "= 1");
        assert!(findings_of(RULE, &text).is_empty());
    }
}
