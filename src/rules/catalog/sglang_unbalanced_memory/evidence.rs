//! The evidence every explanation shares (the check's line and numbers, the
//! launch, the GPU table) and the explanations that need no holder list: a
//! speculative draft worker, a co-located actor, a holder nvidia-smi cannot
//! show, and the case the captures leave open.

use super::*;

impl<'a> Analysis<'a> {
    /// Evidence and chain links every cause shares: the failing ranks, the
    /// launch arguments and how the unit died.
    pub(super) fn common_evidence(&self, f: &mut Finding) {
        let incident = self.incident;
        // The symptom: how the unit died, once per distinct message.
        if let Some(unit) = &cite_target(f, &self.holders.target) {
            for e in incident.units.get(unit).map_or(&[][..], |u| &u.events) {
                match &e.kind {
                    UnitEventKind::MainProcessExited { code, status } => f.evidence_once_marked(
                        e.span,
                        format!("{unit}'s main process exited, code={code}, status={status}"),
                        format!("status={status}"),
                    ),
                    UnitEventKind::FailedWithResult(r) => f.evidence_once_marked(
                        e.span,
                        format!("{unit} failed with result '{r}'"),
                        format!("'{r}'"),
                    ),
                    _ => {}
                }
            }
        }
        self.cite_failing_ranks(f);
        if let Some((args, span)) = self.args {
            let mut note = String::from("launch arguments");
            match args.tp_size {
                Some(tp) => {
                    let _ = write!(note, ": tp_size={tp}");
                    f.evidence_marked(span, note, format!("tp_size={tp}"));
                }
                None => f.evidence(span, note),
            }
        }
        // Symptom first.
        if let Some((unit, _, _)) = &self.holders.target {
            let failed = incident.units.get(unit).is_some_and(|u| u.failed())
                || incident
                    .facts
                    .unit_statuses
                    .iter()
                    .any(|s| &s.unit == unit && s.active_state.as_deref() == Some("failed"));
            if failed {
                let killed = incident.units.get(unit).is_some_and(|u| {
                    u.events.iter().any(|e| matches!(&e.kind, UnitEventKind::MainProcessExited { status, .. } if status.contains("KILL")))
                });
                f.chain.push(if killed {
                    format!("{unit} failed: its main process died by SIGKILL, which SGLang sends its own process tree when a rank fails")
                } else {
                    format!("{unit} failed at start-up")
                });
            }
        }
        let ranks = rank_ranges(&self.failing_ranks, "TP");
        let numbers = match self.numbers {
            Some((m, _)) => format!(
                " ({}={:.2} GiB < 0.9 x local_gpu_memory={:.2} GiB = {:.2} GiB)",
                m.min_label.as_deref().unwrap_or("min"),
                m.min_gib.unwrap_or_default(),
                m.local_gib.unwrap_or_default(),
                m.threshold_gib
                    .unwrap_or_else(|| m.local_gib.unwrap_or_default() * 0.9),
            ),
            None => String::new(),
        };
        let ranks = if ranks.is_empty() {
            "SGLang".to_owned()
        } else {
            ranks
        };
        f.chain.push(format!(
            "{ranks} failed the TP memory balance check{numbers}"
        ));
        f.condition(
            format!(
                "the balance check failed on {} rank(s)",
                self.failing_ranks.len().max(1)
            ),
            true,
        );
        f.condition(
            "the error carries the measured numbers",
            self.numbers.is_some(),
        );
    }

    /// Cites one balance-check line per failing rank, in rank order (a
    /// rank-less copy only when no rank logged its own); returns nothing.
    fn cite_failing_ranks(&self, f: &mut Finding) {
        // One line per failing rank, in rank order. A rank-less copy (a
        // journal tail that starts mid-traceback) adds nothing when the
        // ranks' own lines are there.
        let mut events: Vec<_> = self.events.to_vec();
        events.sort_by_key(|(e, _)| (e.rank.and_then(|r| r.tp), e.span));
        let any_ranked = events.iter().any(|(e, _)| e.rank.is_some());
        for (e, m) in events {
            if e.rank.is_none() && any_ranked {
                continue;
            }
            let who = e
                .rank
                .map_or_else(|| "SGLang".to_owned(), |r| r.to_string());
            let what = match &m.exception {
                Some(x) => format!("{who} raised {x}: the memory capacity is unbalanced"),
                None => format!("{who} warned that the memory capacity is unbalanced"),
            };
            // The key value: the smallest free memory of the group, as logged.
            let needle = match (&m.min_label, m.min_gib) {
                (Some(label), Some(min)) => format!("{label}={min}"),
                _ => "memory capacity is unbalanced".to_owned(),
            };
            f.evidence_once_marked(e.span, what, needle);
        }
    }

    pub(super) fn explain_draft_worker(
        &self,
        f: &mut Finding,
        frame: Span,
        algorithm: Option<&(String, Span)>,
    ) {
        let target = self.target_name();
        f.evidence(
            frame,
            "the check ran inside SGLang's speculative-decoding draft worker",
        );
        if let Some((name, span)) = algorithm {
            f.evidence(
                *span,
                format!("speculative decoding is on: speculative_algorithm='{name}'"),
            );
        }
        f.chain.push("the check ran in the draft worker, after the target model had already taken memory on the GPUs".to_owned());
        f.condition(
            "the failing traceback runs through the speculative-decoding draft worker",
            true,
        );
        f.condition(
            "the launch arguments enable speculative decoding",
            algorithm.is_some(),
        );
        f.title =
            "the balance check misfired in SGLang's speculative-decoding draft worker".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check inside its own speculative-decoding draft worker: a known false positive of SGLang releases before 0.4.10, not another process."
        );
        f.explanation = "The draft worker measures free memory after the target model's weights and KV cache are already on the GPUs, so ranks differ by design. SGLang 0.4.10 and later skip the check in draft workers.".to_owned();
        f.actions.push(Action::advice(
            "upgrade SGLang to 0.4.10 or later, where draft workers skip the balance check",
            Some("python3 -m pip show sglang"),
        ));
        f.actions.push(Action::advice(
            "until then, run without speculative decoding to confirm it is the trigger",
            None,
        ));
    }

    pub(super) fn explain_colocated(&self, f: &mut Finding, actor: Span, name: &str) {
        let target = self.target_name();
        f.evidence(
            actor,
            format!("SGLang runs inside the trainer's Ray actor {name}, which shares its GPUs"),
        );
        f.chain.push(format!(
            "the rollout engine shares each GPU with the trainer's own {name} actor, which placed unequal memory on the ranks"
        ));
        f.condition(
            format!("the failing engine runs inside an RL trainer's Ray actor ({name})"),
            true,
        );
        f.title = format!(
            "the balance check fired inside the trainer's {name} actor: the trainer's own memory, not another process"
        );
        f.headline = format!(
            "{target} failed SGLang's memory balance check inside an RL trainer's Ray actor ({name}): the GPUs are unbalanced by the trainer's own co-located state, not by a foreign process."
        );
        f.explanation = "In a co-located RL setup (veRL) the rollout engine starts on GPUs that already hold the training actors' weights and optimizer state, and those differ per rank; the check, meant to catch foreign processes, fires on them. Disable the check for co-located engines, or offload/balance the actor's memory before building the rollout.".to_owned();
        f.actions.push(Action::advice(
            "disable the imbalance check for the co-located rollout engine: set SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=True in the trainer's environment",
            None,
        ));
        f.actions.push(Action::advice(
            "or offload the actor's parameters and optimizer state before the rollout engine starts, so every rank starts equal",
            None,
        ));
    }

    pub(super) fn explain_invisible(&self, f: &mut Finding, gpus: &[&Gpu]) {
        let list = gpus
            .iter()
            .map(|g| format!("GPU {}", g.index))
            .collect::<Vec<_>>()
            .join(", ");
        for g in gpus {
            self.gpu_evidence(f, g);
            f.entities.gpus.insert(g.index);
        }
        for l in &self.incident.facts.process_listings {
            let note = match l.kind {
                ProcessListingKind::EmptyBlock => {
                    "the process list is empty although memory is in use: NVML could not resolve the PIDs"
                }
                ProcessListingKind::NoneFound => "no process is listed",
                ProcessListingKind::Rows => continue,
            };
            f.evidence(l.span, note);
        }
        let target = self.target_name();
        let used: u64 = gpus.iter().filter_map(|g| g.memory_used_mib).sum();
        f.chain.push(format!(
            "{list} has {} in use that no listed process accounts for",
            mib(Some(used))
        ));
        f.chain.push("the holder is invisible from where nvidia-smi ran (typically another container or the host)".to_owned());
        f.condition(format!("memory is in use on {list}"), true);
        if let Some(d) = self.deficit_gib() {
            f.condition(
                format!(
                    "the unexplained {:.2} GiB matches the deficit {d:.2} GiB",
                    used as f64 / MIB_PER_GIB
                ),
                (used as f64 / MIB_PER_GIB - d).abs() <= RECONCILE_TOLERANCE_GIB,
            );
        }
        f.condition(
            "the process list shows no holder",
            self.incident.process_listing() != Some(ProcessListingKind::Rows)
                || gpus
                    .iter()
                    .all(|g| self.incident.processes_on(g.index).next().is_none()),
        );
        f.title = format!("{list} is held by a process nvidia-smi cannot show");
        f.headline = format!(
            "{list} has {} in use by a process invisible from here (another container or the host), so {target} failed SGLang's memory balance check.",
            mib(Some(used))
        );
        f.explanation = "Inside a container NVML counts the memory of every process on the GPU but lists only processes of its own PID namespace. \
                         The holder has to be found from the host."
            .to_owned();
        f.actions.push(Action::advice(
            format!("on the host (outside any container), list the processes on {list} with their GPU UUID"),
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
        f.actions.push(Action::advice(
            "map the holder's PID to its container or unit",
            Some("cat /proc/PID/cgroup"),
        ));
        f.actions.push(Action::advice(
            format!("once the holder is stopped, restart {target}"),
            None,
        ));
    }

    pub(super) fn explain_undetermined(&self, f: &mut Finding, reason: &str) {
        let target = self.target_name();
        f.chain
            .push(format!("the short GPU could not be identified: {reason}"));
        f.condition(
            "an nvidia-smi snapshot of the group's GPUs",
            !self.incident.gpus.is_empty(),
        );
        f.title =
            "SGLang's memory balance check failed; the holder is not in the inputs".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check: one GPU had less free memory, but the inputs do not show what held it."
        );
        f.explanation = format!(
            "{reason}. Capture the GPU state while the failure happens to name the holder."
        );
        f.actions.push(Action::advice(
            "capture the GPUs and their processes right after the failure",
            Some("nvidia-smi; nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
    }

    pub(super) fn gpu_evidence(&self, f: &mut Finding, g: &Gpu) {
        if let Some(span) = g.spans.first() {
            let note = format!(
                "GPU {}: {} of {} used{}",
                g.index,
                mib(g.memory_used_mib),
                mib(g.memory_total_mib),
                g.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            );
            match g.memory_used_mib {
                Some(used) => f.evidence_marked(*span, note, format!("{used} MiB")),
                None => f.evidence(*span, note),
            }
        }
    }
}
