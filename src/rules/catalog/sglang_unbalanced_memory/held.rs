//! What holds the memory the check found missing: the processes on the
//! short GPUs (by unit, with the lines that tie them to it), how much each
//! holds against the deficit, and the guarded steps that free it.

use super::*;

impl<'a> Analysis<'a> {
    pub(super) fn explain_held(
        &self,
        f: &mut Finding,
        gpus: &[u32],
        holders: &[Holder<'_>],
        reconciled: Option<bool>,
    ) {
        let incident = self.incident;
        let gpu = gpus[0];
        let target = self.target_name();
        let held_mib: u64 = holders.iter().filter_map(|h| h.process.used_mib).sum();
        if let Some(g) = incident.gpu(gpu) {
            self.gpu_evidence(f, g);
        }
        // One idle GPU of the group for contrast.
        if let Some(other) = self
            .group()
            .into_iter()
            .find(|g| g.index != gpu && incident.processes_on(g.index).next().is_none())
        {
            self.gpu_evidence(f, other);
        }
        f.entities.gpus.insert(gpu);
        cite_holders(f, gpu, holders);
        let deficit = self.deficit_gib();
        let main = &holders[0];
        let who = phrase(main);
        let more = if holders.len() > 1 {
            format!(" and {} other process(es)", holders.len() - 1)
        } else {
            String::new()
        };
        let stale = holders.iter().find_map(|h| h.stale_reason.as_deref());

        f.chain.push(match deficit {
            Some(d) => format!(
                "GPU {gpu} had {d:.2} GiB less free memory than the other GPUs of the group"
            ),
            None => format!("GPU {gpu} had less free memory than the other GPUs of the group"),
        });
        f.chain.push(format!(
            "{who}{more} holds {} = {:.2} GiB on GPU {gpu}{}",
            mib(Some(held_mib)),
            held_mib as f64 / MIB_PER_GIB,
            stale.map(|s| format!("; {s}")).unwrap_or_default()
        ));

        let reconcile_text = match deficit {
            Some(d) => format!(
                "the deficit local - min = {d:.2} GiB matches the holder's {} = {:.2} GiB (within {RECONCILE_TOLERANCE_GIB} GiB)",
                mib(Some(held_mib)),
                held_mib as f64 / MIB_PER_GIB
            ),
            None => "the deficit can be compared with the holder's memory".to_owned(),
        };
        f.condition(
            format!("a process other than the failing server holds memory on GPU {gpu}"),
            true,
        );
        f.condition(reconcile_text, reconciled == Some(true));
        let only_silent = self.rank_conditions(f, gpu, reconciled);
        f.condition(
            "the holder's unit is proven (CGroup tree, Main PID, journal field or systemd message), not inferred",
            holders
                .iter()
                .all(|h| h.unit.is_some_and(|u| u.basis != OwnerBasis::InferredFromJournalOrder)),
        );

        let held_by = match stale {
            Some(_) => format!(
                "a leftover serving process, {who}{more} with {}",
                mib(Some(held_mib))
            ),
            None => format!("{who}{more} with {}", mib(Some(held_mib))),
        };
        f.title = format!("GPU {gpu} is held by {held_by}");
        f.headline = format!(
            "GPU {gpu} is held by {held_by}, so {target} failed SGLang's tensor-parallel memory balance check at start-up."
        );
        f.explanation = self.held_explanation(gpu, &who, held_mib, only_silent, reconciled);
        if stale.is_some() {
            f.explanation
                .push_str(" It is a leftover serving process, not a workload of its own.");
        }

        let baseline = self
            .group()
            .iter()
            .filter(|g| g.index != gpu)
            .filter_map(|g| g.memory_used_mib)
            .max()
            .unwrap_or(0);
        self.holders.actions(f, gpu, holders, baseline);
    }

    /// Writes the conditions on which ranks raised and which stayed silent
    /// (and, when the numbers contradict the rank label, the chain link that
    /// says the numbers win); returns whether the only silent rank runs on
    /// `gpu`.
    fn rank_conditions(&self, f: &mut Finding, gpu: u32, reconciled: Option<bool>) -> bool {
        let silent = self.silent_gpus();
        // Only the rank on the short GPU stays silent; with a partial log
        // more ranks look silent, which is consistent but proves nothing.
        let only_silent = silent.len() == 1 && silent.contains(&gpu);
        // A rank that raised had more free memory than the minimum, so its
        // GPU is not the short one. When the rank-N-on-GPU-N convention puts
        // a raising rank on the GPU the numbers name, the numbers win.
        let raised_here: Vec<String> = self
            .failing_ranks
            .iter()
            .filter(|r| self.rank_gpus.get(r) == Some(&gpu))
            .map(|r| format!("TP{r}"))
            .collect();
        if reconciled == Some(true) && !raised_here.is_empty() {
            f.condition(
                format!("the numbers identify GPU {gpu} as the short GPU: the holder's memory matches the deficit"),
                true,
            );
            f.chain.push(format!(
                "the numbers win over the rank label: {} raised, so its own GPU had more free memory than the minimum; by the convention rank N on GPU N it would run on GPU {gpu}, but the deficit matches the holder on GPU {gpu}, so the ranks are not on GPUs in index order (CUDA_VISIBLE_DEVICES or base_gpu_id) or the label is another rank's",
                raised_here.join(", ")
            ));
        } else if only_silent {
            f.condition(
                format!("the only rank that did not raise runs on GPU {gpu}"),
                true,
            );
        } else if !silent.is_empty() {
            f.condition(
                format!(
                    "the only rank that did not raise runs on GPU {gpu} (ranks on {} GPUs did not raise: the log may be partial)",
                    silent.len()
                ),
                false,
            );
        }
        only_silent
    }

    /// Returns the explanation: the free memory SGLang measured and the
    /// deficit, the short GPU and what `who` holds there against it; or,
    /// without the numbers, only what is held.
    fn held_explanation(
        &self,
        gpu: u32,
        who: &str,
        held_mib: u64,
        only_silent: bool,
        reconciled: Option<bool>,
    ) -> String {
        match self.deficit_gib() {
            Some(d) => format!(
                "SGLang measured {:.2} GiB free on the fullest GPU against {:.2} GiB on the others: a deficit of {d:.2} GiB. \
                 GPU {gpu} is the short one{}, and {who} holds {} = {:.2} GiB there{}.",
                d_min(self.numbers),
                d_local(self.numbers),
                if only_silent {
                    " (its rank is the one that did not raise)"
                } else {
                    ""
                },
                mib(Some(held_mib)),
                held_mib as f64 / MIB_PER_GIB,
                match reconciled {
                    Some(true) => ", which accounts for the deficit",
                    Some(false) =>
                        ", which does not fully account for the deficit: look for more holders",
                    None => "",
                }
            ),
            None => format!(
                "{who} holds {} on GPU {gpu}; this SGLang release printed no numbers to reconcile.",
                mib(Some(held_mib))
            ),
        }
    }
}

/// Cites each holder on `gpu`: its memory lines, the lines that tie it to its
/// unit, and its command line.
fn cite_holders(f: &mut Finding, gpu: u32, holders: &[Holder<'_>]) {
    for h in holders {
        let p = &h.process;
        f.entities.pids.insert(p.pid);
        for span in &p.spans {
            let note = format!("PID {} holds {} on GPU {gpu}", p.pid, mib(p.used_mib));
            match p.used_mib {
                Some(used) => f.evidence_marked(*span, note, format!("{used} MiB")),
                None => f.evidence_marked(*span, note, p.pid.to_string()),
            }
        }
        if let Some(link) = &h.unit {
            link.cite(f, p.pid, true);
        }
        if let Some((cmd, span)) = h.cmdline {
            let _ = cmd;
            f.evidence_marked(
                span,
                format!("command line of PID {}", p.pid),
                p.pid.to_string(),
            );
        }
    }
}
