//! What the finding says for each answer to "who used the memory": another
//! process (a foreign holder), the process itself (its own allocations),
//! sibling ranks of the same job, or an amount only the arithmetic of the
//! message implies; and the advice that fits the server.

use super::*;

impl<'a> Analysis<'a> {
    pub(super) fn explain_foreign(&self, f: &mut Finding, sum: u64, who: &str) {
        let incident = self.incident;
        // The holders as nvidia-smi lists them; a PID only PyTorch listed
        // becomes a row of its own, cited at the OOM line.
        let mut gpu = None;
        let mut list: Vec<Holder<'_>> = Vec::new();
        for &(pid, bytes) in &self.foreign {
            let row = incident.gpu_processes.iter().find(|p| p.pid == pid);
            gpu = gpu.or(row.and_then(|r| r.gpu));
            let process = row.cloned().unwrap_or_else(|| {
                let name: String = incident
                    .cmdlines
                    .get(&pid)
                    .map(|c| c.text.split_whitespace().next().unwrap_or("").to_owned())
                    .unwrap_or_default();
                GpuProcess {
                    gpu: None,
                    pid,
                    // An unknown name cannot guard a signal.
                    name_truncated: name.is_empty(),
                    name,
                    used_mib: Some(bytes / (1024 * 1024)),
                    spans: vec![self.event.span],
                }
            });
            list.push(self.holders.holder(process));
        }
        list.sort_by_key(|h| std::cmp::Reverse(h.process.used_mib));
        let gpu = gpu.or(self.oom.gpu).unwrap_or(0);
        // As PyTorch printed it (`796.00 MiB`, `40.12 GiB`).
        let held = super::size(sum);
        f.condition(
            format!(
                "processes that are not the server's own hold {held}, enough that the allocation would have fit without them"
            ),
            true,
        );
        let short = self
            .oom
            .tried_bytes
            .zip(self.oom.free_bytes)
            .and_then(|(t, fr)| t.checked_sub(fr))
            .filter(|s| *s > 0 && sum < 1 << 30);
        if let Some(short) = short {
            // A small holder blamed: the numbers that make it the cause.
            f.condition(
                format!(
                    "the allocation was {} short of the free memory, less than the {held} they hold{}",
                    super::size(short),
                    if self.budgeted() {
                        ", and vLLM's start-up sizes its memory as a share of the whole card (it counts on the rest being free)"
                    } else {
                        ""
                    }
                ),
                true,
            );
        }
        let group: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
        let name = self.holders.report(f, gpu, &list, &group);
        f.title = format!("another process holds {held} on GPU {gpu}: {name}");
        f.headline = format!(
            "{who} ran out of GPU memory because {name} holds {held} on GPU {gpu}; the OOM is the symptom, not the cause."
        );
        f.explanation = format!(
            "PyTorch's list of the processes on the GPU shows {} that is not part of the server (not one of its PIDs, ranks or its unit). Without it, the allocation would have fit.",
            if self.foreign.len() == 1 {
                "a process"
            } else {
                "processes"
            }
        );
    }

    /// The model's 16-bit weights alone exceed the card: the other
    /// processes' `sum` bytes are named, but freeing them would not help.
    pub(super) fn explain_weights(
        &self,
        f: &mut Finding,
        w: &weights::Weights,
        sum: u64,
        who: &str,
    ) {
        let total = gib(self.oom.total_bytes.unwrap_or(0));
        let per_gpu = gib(w.per_gpu);
        let sum_gib = gib(sum);
        let (name, tp) = (&w.name, w.tp);
        let params = w.params_b;
        f.evidence(
            w.span,
            format!("the launch: {name}, tensor parallel size {tp}"),
        );
        f.condition(
            format!(
                "{name}'s {params}B parameters at 16 bits are {per_gpu:.2} GiB per GPU at tensor parallel size {tp}, more than the card's {total:.2} GiB"
            ),
            true,
        );
        f.condition(
            format!(
                "other processes hold {sum_gib:.2} GiB on the GPU, but freeing them would not make room for the weights"
            ),
            false,
        );
        f.title = format!(
            "{name} ({per_gpu:.2} GiB of 16-bit weights per GPU) does not fit a {total:.2} GiB GPU at tensor parallel size {tp}"
        );
        f.headline = format!(
            "{who} ran out of GPU memory loading {name}: its {params}B parameters need about {per_gpu:.2} GiB per GPU at tensor parallel size {tp}, more than the whole {total:.2} GiB card. Other processes also hold {sum_gib:.2} GiB there, but even an empty card would not fit the model."
        );
        f.explanation = format!(
            "A model's 16-bit weights take two bytes per parameter; without tensor parallelism one GPU must hold all of them, and {per_gpu:.2} GiB is more than {total:.2} GiB. The {sum_gib:.2} GiB of the other processes on the GPU is a second problem to settle once the model is sharded (each shard still needs its room)."
        );
        // PyTorch's own figures, as it printed them.
        let o = self.oom;
        let mut figures: Vec<String> = Vec::new();
        if let Some(t) = o.tried_bytes {
            figures.push(format!("Tried to allocate {}", size(t)));
        }
        if let Some(b) = o.this_process_bytes {
            figures.push(format!("this process has {} memory in use", size(b)));
        }
        let mut others = self.foreign.clone();
        others.sort_by_key(|(pid, b)| (std::cmp::Reverse(*b), *pid));
        figures.extend(
            others
                .iter()
                .take(2)
                .map(|(pid, b)| format!("Process {pid} has {} memory in use", size(*b))),
        );
        if !figures.is_empty() {
            f.chain.push(format!(
                "the weights do not fit; PyTorch's figures: {}",
                figures.join("; ")
            ));
        }
        f.actions.push(Action::advice(
            "shard the model over several GPUs (vLLM: --tensor-parallel-size N, with N GPUs free in CUDA_VISIBLE_DEVICES, so that the weights per GPU leave room for the KV cache), or serve a quantized or smaller model",
            None,
        ));
        f.actions.push(Action::advice(
            "see who else holds the GPUs the shards will use",
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
    }

    pub(super) fn explain_own(&self, f: &mut Finding, who: &str) {
        let o = self.oom;
        let tried = o.tried_bytes.map(gib);
        let total = o.total_bytes.map(gib);
        let unallocated = o.reserved_unallocated_bytes.map(gib);
        f.condition("no other process holds a large share of the GPU", true);
        let fragmented = matches!((unallocated, tried), (Some(u), Some(t)) if u >= t && u >= 1.0);
        let huge = matches!((tried, total), (Some(t), Some(tot)) if t >= tot * 0.25);
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        self.explain_own_figures(f);
        let logprobs = crate::rules::support::server::exception_at(self.incident, self.event.span)
            .is_some_and(|(_, x)| {
                x.frames.iter().any(|fr| {
                    fr.function
                        .as_deref()
                        .is_some_and(|n| n.contains("logprobs"))
                })
            });
        if logprobs {
            f.chain.push(
                "the allocation was made computing prompt logprobs: one row of vocabulary-sized logits per prompt token"
                    .to_owned(),
            );
            f.actions.push(Action::advice(
                "limit prompt_logprobs in requests (or reject them): over a large vocabulary they need prompt length x vocabulary floats at once",
                None,
            ));
        }
        if fragmented {
            f.chain.push(format!(
                "{:.2} GiB was reserved by PyTorch but unallocated: the memory is fragmented",
                unallocated.unwrap_or_default()
            ));
            f.title = format!("CUDA out of memory on {gpu_text}: fragmented allocator cache");
            f.headline = format!(
                "{who} ran out of GPU memory although PyTorch held {:.2} GiB reserved but unallocated: fragmentation.",
                unallocated.unwrap_or_default()
            );
            f.actions.push(Action::advice(
                "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the server's environment",
                Some("systemctl edit UNIT   # [Service] Environment=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
            ));
        } else if huge {
            f.chain.push(format!(
                "a single allocation of {:.2} GiB, a quarter of the GPU or more: a pathological request",
                tried.unwrap_or_default()
            ));
            f.title = format!("CUDA out of memory on {gpu_text}: one huge allocation");
            f.headline = format!(
                "{who} ran out of GPU memory on a single {:.2} GiB allocation: one oversized request (a very long prompt or batch).",
                tried.unwrap_or_default()
            );
            f.actions.push(Action::advice(
                "limit request sizes (max prompt length, --max-model-len, max batch tokens)",
                None,
            ));
        } else if let Some(knob) = self.fraction_knob() {
            self.explain_knob(f, who, &knob);
            return;
        } else {
            f.chain.push(
                "the server's own allocations filled the GPU: its static reservation left too little for activations"
                    .to_owned(),
            );
            f.title = format!("CUDA out of memory on {gpu_text}: the server's own allocations");
            f.headline = format!(
                "{who} ran out of GPU memory with no other process to blame: its static memory reservation or batch size is too large for this GPU."
            );
        }
        f.explanation = "A server reserves its KV cache up front (SGLang --mem-fraction-static, vLLM --gpu-memory-utilization); an OOM while serving means what is left for activations and graphs is too small for the batches it runs.".to_owned();
        self.server_advice(f);
    }

    /// Writes the chain links (and conditions) that show the memory in use
    /// is the server's own: the largest listed process matched to PyTorch's
    /// reservation, and the error's figures as printed (a per-process figure
    /// too small to believe, this process's share, or what lies outside
    /// PyTorch's allocator).
    fn explain_own_figures(&self, f: &mut Finding) {
        let o = self.oom;
        if let (Some((pid, bytes)), Some(reserved)) = (self.writer, pytorch_reserved(o)) {
            f.chain.push(format!(
                "the list's `Process {pid} has {} memory in use` is the server's own process, listed under another PID (a container's host PID): PyTorch reserved {:.2} GiB of it, the rest is its CUDA context",
                size(bytes),
                gib(reserved)
            ));
            f.condition(
                format!(
                    "the largest listed process, PID {pid} with {:.2} GiB, matches PyTorch's own reservation of {:.2} GiB plus a CUDA context",
                    gib(bytes),
                    gib(reserved)
                ),
                true,
            );
        }
        // The figures that rule out another process, quoted as printed.
        if let (Some(total), Some(free)) = (o.total_bytes, o.free_bytes) {
            if let Some((pytorch, Own::FigureTooSmall(this))) = own_bytes(o) {
                // As PyTorch prints it.
                let this_text = if this == 0 {
                    "0 bytes".to_owned()
                } else {
                    size(this)
                };
                f.chain.push(format!(
                    "the error says this process has {} in use, less than the {} PyTorch itself allocated and reserved in it: that figure is wrong (the driver cannot see a process in a container's PID namespace), so the {} in use of the GPU's {} ({} free) is this process's own",
                    this_text,
                    size(pytorch),
                    size(total.saturating_sub(free)),
                    size(total),
                    size(free)
                ));
                f.condition(
                    format!(
                        "PyTorch's own {} reconciles with the {} in use; the per-process figure of {} does not and was not believed",
                        size(pytorch),
                        size(total.saturating_sub(free)),
                        this_text
                    ),
                    true,
                );
            } else if let Some(this) = o.this_process_bytes {
                f.chain.push(format!(
                    "this process holds {} of the GPU's {} ({} free): the memory in use is its own",
                    size(this),
                    size(total),
                    size(free)
                ));
            } else if let (Some(reserved), true) = (
                o.reserved_bytes,
                o.processes.is_empty() && self.writer.is_none(),
            ) {
                let gap = total.saturating_sub(reserved).saturating_sub(free);
                f.chain.push(format!(
                    "{} total - {} reserved by PyTorch - {} free leaves {} outside PyTorch's allocator: this process's CUDA context (and a display), not another process",
                    size(total),
                    size(reserved),
                    size(free),
                    size(gap)
                ));
            }
        }
    }

    pub(super) fn explain_siblings(&self, f: &mut Finding, s: &Siblings, sum: u64, who: &str) {
        let o = self.oom;
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        let n = s.pids.len();
        let first = s.pids[0];
        let last = s.pids[n - 1];
        f.condition(
            format!(
                "{n} listed processes have consecutive PIDs {first}-{last} and the same {} each: ranks of one job",
                size(s.each)
            ),
            true,
        );
        f.condition(
            "the other processes together hold enough that the allocation would have fit without them",
            true,
        );
        f.chain.push(format!(
            "{n} other processes, PIDs {first}-{last}, each hold {} on {gpu_text} ({:.2} GiB together)",
            size(s.each),
            gib(s.sum)
        ));
        f.chain.push(format!(
            "they are sibling ranks of the same job: each opened a CUDA context on {gpu_text} before selecting its own device"
        ));
        if let Some(this) = o.this_process_bytes {
            f.chain.push(format!(
                "with this process's own {} the GPU is full",
                size(this)
            ));
        }
        f.title = format!(
            "CUDA out of memory on {gpu_text}: {n} sibling ranks each hold {} there",
            size(s.each)
        );
        f.headline = format!(
            "{who} ran out of memory on {gpu_text} because {n} sibling processes of the same job (PIDs {first}-{last}, {} each, {:.2} GiB in all) also put a CUDA context on {gpu_text}; they are the job's own ranks, not another tenant.",
            size(s.each),
            gib(sum)
        );
        f.explanation = "Every process that touches CUDA before choosing a device (a tensor created without one, torch.cuda calls at import time, a library initialising on the default device) creates a context on GPU 0. With N ranks, GPU 0 carries N contexts besides rank 0's own work. Killing them would kill the job itself.".to_owned();
        f.actions.push(Action::advice(
            "select each rank's GPU before any CUDA call: torch.cuda.set_device(local_rank) first thing in every rank, or CUDA_VISIBLE_DEVICES per rank so each sees only its own GPU",
            None,
        ));
        f.actions.push(Action::advice(
            "find what touches GPU 0 early: map_location for torch.load, device= on every tensor, no torch.cuda call at import time",
            Some("nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv"),
        ));
    }

    pub(super) fn explain_implied(&self, f: &mut Finding, others: u64, who: &str) {
        let o = self.oom;
        let incident = self.incident;
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        let total = o.total_bytes.unwrap_or(0);
        let free = o.free_bytes.unwrap_or(0);
        let (mine, mine_label) = match own_bytes(o) {
            Some((b, Own::Figure)) => (b, "held by this process"),
            Some((b, _)) => (b, "reserved by PyTorch"),
            None => (0, "held by this process"),
        };
        f.category = Category::GpuMemoryHeldByOtherProcess;
        let arithmetic = format!(
            "{} total - {} {mine_label} - {} free = {} held outside this process",
            size(total),
            size(mine),
            size(free),
            size(others)
        );
        f.chain.push(match own_bytes(o) {
            // The per-process figure includes the CUDA context.
            Some((_, Own::Figure)) => {
                format!("{arithmetic} (this process's figure includes its own CUDA context)")
            }
            _ => format!("{arithmetic} (less about 1 GiB of its own CUDA context)"),
        });
        f.condition(
            format!("the numbers show memory held by another process: {arithmetic}"),
            true,
        );
        // nvidia-smi may show the holder: match it by the numbers.
        let gpu = o.gpu.unwrap_or(0);
        let listed: Vec<Holder<'_>> = self.holders.on(gpu);
        let listed_mib: u64 = listed.iter().filter_map(|h| h.process.used_mib).sum();
        let reconciles = !listed.is_empty()
            && (listed_mib as f64 / 1024.0 - gib(others)).abs() <= gib(CONTEXT_SLACK);
        f.condition(
            "a capture of the GPU's processes names the holder",
            reconciles,
        );
        let name = if reconciles {
            let group: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
            self.holders.report(f, gpu, &listed, &group)
        } else {
            f.actions.push(Action::advice(
                format!(
                    "find the other process on {gpu_text} from the host (PyTorch's old message names none; inside a container nvidia-smi may not show it either)"
                ),
                Some("nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv; sudo fuser -v /dev/nvidia*"),
            ));
            "another process".to_owned()
        };
        f.title = format!("another process holds about {} on {gpu_text}", size(others));
        f.headline = format!(
            "{who} ran out of GPU memory because {name} holds about {} of {gpu_text} ({arithmetic}); the OOM is the symptom, not the cause.",
            size(others)
        );
        f.explanation = format!(
            "PyTorch's message counts only what this process holds; the rest of the {} GPU is used by another process (an orphaned or zombie process of an earlier job, another tenant, or another container).              Reducing the batch or model size will not help. Static memory fractions (vLLM gpu_memory_utilization, SGLang mem_fraction_static) are shares of the total memory: with another process on the GPU they must be lowered, or the other process stopped.{}",
            size(total),
            if reconciles {
                ""
            } else {
                " The inputs do not name the holder: capture the GPU's processes to settle it."
            }
        );
    }

    /// Lower the server's static reservation, by flag when it is known.
    pub(super) fn server_advice(&self, f: &mut Finding) {
        let unit = self.holders.target.as_ref().map(|t| t.0.clone());
        match self.event.framework {
            Framework::Sglang => {
                if let Some((v, span)) = launch_args(self.incident, Framework::Sglang)
                    .and_then(|(a, s)| Some((a.mem_fraction_static?, s)))
                {
                    let action = crate::rules::support::server::flag_action(
                        self.incident,
                        f,
                        unit.as_deref(),
                        "--mem-fraction-static",
                        &fraction(v - 0.05),
                        format!(
                            "mem_fraction_static={} leaves too little for activations",
                            fraction(v)
                        ),
                        [span, self.event.span],
                    );
                    f.actions.push(action);
                }
                f.actions.push(Action::advice(
                    "or lower --max-running-requests / --chunked-prefill-size",
                    None,
                ));
            }
            Framework::Vllm => {
                if let Some((v, span)) = launch_args(self.incident, Framework::Vllm)
                    .and_then(|(a, s)| Some((a.gpu_memory_utilization?, s)))
                {
                    let action = crate::rules::support::server::flag_action(
                        self.incident,
                        f,
                        unit.as_deref(),
                        "--gpu-memory-utilization",
                        &fraction(v - 0.05),
                        format!(
                            "gpu_memory_utilization={} leaves too little for activations",
                            fraction(v)
                        ),
                        [span, self.event.span],
                    );
                    f.actions.push(action);
                }
                f.actions.push(Action::advice(
                    "or lower --max-num-seqs / --max-num-batched-tokens / --max-model-len",
                    None,
                ));
            }
            Framework::Unknown => f.actions.push(Action::advice(
                "reduce the batch size or sequence length, or use GPUs with more memory",
                None,
            )),
        }
    }
}
