//! `tp-size-mismatch`: the tensor-parallel size does not fit the model or
//! the GPUs.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{Message, TypedCommand};
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

mod split;

pub static RULE: TpSizeMismatch = TpSizeMismatch;

pub struct TpSizeMismatch;

/// The catalog rows that are this failure (catalogs/stacks-*.toml).
const ROWS: &[&str] = &[
    "stacks-vllm.heads-not-divisible-by-tp",
    "stacks-vllm.ray-gpus-exceed-available",
    "stacks-tgi.not-enough-cuda-devices",
    "stacks-trtllm.mpi-size-mismatch",
    "stacks-trtllm.engine-world-size-mismatch",
    "stacks-torch.model-parallel-not-divisible",
    "stacks-torch.deepspeed-not-divisible-by-mp-size",
    "stacks-torch.fms-not-divisible-by-world-size",
    "stacks-torch.checkpoint-mp-world-size-mismatch",
];

/// The rows whose mismatch is the number of ranks started, not a count
/// split over them: the fix is the launch (one rank per shard or engine
/// partition), not the TP size chosen.
const RANK_COUNT_ROWS: &[&str] = &[
    "stacks-trtllm.mpi-size-mismatch",
    "stacks-trtllm.engine-world-size-mismatch",
    "stacks-torch.checkpoint-mp-world-size-mismatch",
];

/// TensorRT-LLM's start-up line with the MPI world its runtime found
/// (catalogs/startup.toml): the rank count the assertion is about.
const TRTLLM_MPI_SIZE: &str = "startup.trtllm-mpi-size";

/// A command that starts ranks or sets their number: a launcher
/// (`torchrun`, `python -m torch.distributed.run`, `mpirun`, `deepspeed`,
/// `srun`) or a parallelism flag (`--nproc_per_node`, `--tensor-parallel-size`).
static LAUNCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        (?:^|[\s/])(?:torchrun|mpirun|mpiexec|deepspeed|srun)(?:\s|$)
        | torch\.distributed\.(?:run|launch)\b
        | --(?:nproc[_-]per[_-]node|tensor[_-]parallel[_-]size|tp[_-]size|tp|num[_-]gpus|world[_-]size|num[_-]shard)\b",
    )
    .expect("launch regex")
});

/// The caller of Megatron's `divide()` / `ensure_divisibility()` in the
/// traceback above a bare `N is not divisible by M`: the source line names
/// the count that was split (`self.num_key_value_heads = divide(
/// self.num_key_value_heads, self.world_size)`).
static DIVIDED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:divide|ensure_divisibility)\(\s*(?:[A-Za-z_][0-9A-Za-z_.]*\.)?(?P<what>[A-Za-z_][0-9A-Za-z_]*)\s*,",
    )
    .expect("divided regex")
});

/// How far above the assertion its traceback's caller line may be.
const CALLER_WITHIN: u32 = 12;

/// The wordings no catalog row has yet: KV heads, other servers' TP checks.
static MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        Total\x20number\x20of\x20(?P<what>KV\x20heads|num_key_value_heads)\x20\((?P<heads>[0-9]+)\)\x20must\x20be\x20divisible\x20by\x20tensor\x20parallel\x20size\x20\((?P<tp>[0-9]+)\)
        | (?:is\x20not\x20divisible\x20by|must\x20be\x20divisible\x20by)\x20(?:the\x20)?(?:tensor\x20parallel\x20size|tp_size|tp\x20size)
        | (?:tensor_parallel_size|tp_size)\x20\(?(?P<want>[0-9]+)\)?\x20(?:is\x20)?(?:larger|greater)\x20than\x20the\x20number\x20of\x20(?:available\x20)?GPUs\x20\(?(?P<have>[0-9]+)",
    )
    .expect("tp regex")
});

/// What a line's numbers say, as the finding's title words it.
fn detail(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    if let (Some(h), Some(t)) = (get("heads"), get("tp").filter(|_| get("mpi").is_none())) {
        let what = get("what").unwrap_or_else(|| "attention heads".to_owned());
        return Some(format!("{h} {what} cannot be split over {t} GPUs"));
    }
    if let (Some(n), Some(by)) = (get("dividend"), get("divisor")) {
        let what = get("what").unwrap_or_else(|| "(a head count or size)".to_owned());
        return Some(format!(
            "{n} {what} cannot be split over {by} model-parallel ranks"
        ));
    }
    if let (Some(w), Some(h)) = (get("want"), get("have")) {
        return Some(format!("{w} GPUs asked for, {h} available"));
    }
    if let (Some(mpi), Some(tp), Some(pp)) = (get("mpi"), get("tp"), get("pp")) {
        return Some(format!(
            "the engine needs TP {tp} × PP {pp} ranks, {mpi} were started"
        ));
    }
    if let (Some(c), Some(w)) = (get("ckpt"), get("world")) {
        return Some(format!(
            "the checkpoint is sharded for model-parallel size {c}, {w} ranks were launched"
        ));
    }
    if let (Some(e), Some(r)) = (get("engine"), get("runtime")) {
        return Some(format!(
            "the engine was built for world size {e}, {r} ranks were started"
        ));
    }
    get("n").map(|n| format!("sharded over more GPUs than the {n} visible"))
}

/// The nearest `divide(X, …)` / `ensure_divisibility(X, …)` line above
/// `at` in the same input, within [`CALLER_WITHIN`] lines, and the name it
/// divides (Megatron's helpers' own frames pass `numerator`: skipped).
fn caller_above<'a>(incident: &'a Incident, at: &Message) -> Option<(&'a Message, String)> {
    matches(incident, &DIVIDED)
        .filter(|(m, _)| {
            m.span.source == at.span.source
                && m.span.line < at.span.line
                && at.span.line - m.span.line <= CALLER_WITHIN
        })
        .filter_map(|(m, c)| {
            let what = c.name("what")?.as_str();
            (what != "numerator").then(|| (m, what.to_owned()))
        })
        .max_by_key(|(m, _)| m.span)
}

/// The command typed at the prompt that printed `at` (the last prompt
/// before it in the same input), when it starts ranks or sets their
/// number: the launch the mismatch is about.
fn launch_above<'a>(incident: &'a Incident, at: &Message) -> Option<&'a TypedCommand> {
    incident
        .facts
        .typed_commands
        .iter()
        .filter(|c| c.span.source == at.span.source && c.span < at.span)
        .max_by_key(|c| c.span)
        .filter(|c| LAUNCH.is_match(&c.command))
}

/// TensorRT-LLM's `MPI size: N, rank: R` before `at` in the same input: the
/// ranks its runtime was started with, and the line.
fn mpi_size_above<'a>(incident: &'a Incident, at: &Message) -> Option<(&'a Message, String)> {
    incident
        .known(TRTLLM_MPI_SIZE)
        .filter(|(m, _)| m.span.source == at.span.source && m.span < at.span)
        .filter_map(|(m, hit)| Some((m, hit.get("nranks")?.trim().to_owned())))
        .max_by_key(|(m, _)| m.span)
}

/// Cites what says how many ranks were started: the launch command and
/// TensorRT-LLM's MPI world line. Returns the MPI size when read.
fn cite_launch(incident: &Incident, f: &mut Finding, first: &Message) -> Option<String> {
    if let Some(c) = launch_above(incident, first) {
        match split::tp_flag(&c.command) {
            Some(flag) => f.evidence_marked(c.span, "the command that launched the ranks", flag),
            None => f.evidence(c.span, "the command that launched the ranks"),
        }
    }
    let (m, n) = mpi_size_above(incident, first)?;
    f.evidence(
        m.span,
        format!("the runtime was started with {n} MPI rank(s)"),
    );
    Some(n)
}

static META: RuleMeta = RuleMeta {
    id: "tp-size-mismatch",
    category: Category::TpSizeMismatch,
    severity: Severity::Critical,
    summary: "the tensor-parallel size does not divide the model's heads or exceeds the GPUs available",
    // The catalogs' rows bring their own anchors.
    anchors: &[
        "must be divisible by",
        "is not divisible by",
        "than the number of",
        "divide(",
        "ensure_divisibility(",
    ],
    doc: r#"
## What it means
The server refused its `--tp` / `--tensor-parallel-size`: the model's
attention (or KV) heads cannot be split evenly across that many GPUs, or the
host has fewer GPUs than asked for.
Or the number of ranks launched is not the number a checkpoint or an engine
was sharded for (Llama's reference code: `Loading a checkpoint for MP=2 but
world size is 1`; TensorRT-LLM: `mpiSize == tp * pp`): the finding cites the
launch command and the runtime's rank count where the inputs show them.

## Why it happens
A TP size copied from another model (40 heads do not split over 3 or 16
GPUs), or `CUDA_VISIBLE_DEVICES` hiding some GPUs.

## How to confirm
The model's `config.json` (`num_attention_heads`, `num_key_value_heads`) and
`nvidia-smi -L` in the server's environment.

## How to fix
Choose a TP size that divides the head counts and fits the visible GPUs (1,
2, 4, 8 for most models); combine with pipeline or data parallelism for the
rest.

## Safety
Advice only.
"#,
};

impl Rule for TpSizeMismatch {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut callers: Vec<&Message> = Vec::new();
        let ranks = RANK_COUNT_ROWS
            .iter()
            .any(|id| incident.known(id).next().is_some());
        let mut hits: Vec<(&Message, Option<String>)> = ROWS
            .iter()
            .flat_map(|id| incident.known(id))
            .map(|(m, hit)| {
                let caller = hit.get("dividend").and_then(|_| caller_above(incident, m));
                let what = caller.as_ref().map(|(_, w)| w.clone());
                callers.extend(caller.map(|(c, _)| c));
                let d = detail(|name| match name {
                    "what" => what.clone().or_else(|| hit.get(name).map(str::to_owned)),
                    _ => hit.get(name).map(str::to_owned),
                });
                (m, d)
            })
            .chain(matches(incident, &MISMATCH).map(|(m, c)| {
                (
                    m,
                    detail(|name| c.name(name).map(|x| x.as_str().to_owned())),
                )
            }))
            .collect();
        // A converter's split whose dimension the TP size does not divide.
        let uneven = split::uneven(incident);
        if let Some(u) = &uneven {
            hits.push((u.line, Some(u.detail())));
        }
        if hits.is_empty() {
            return;
        }
        // A row's line may match the remaining regex too: one hit per line,
        // the one with numbers first.
        hits.sort_by_key(|(m, d)| (m.span, d.is_none()));
        hits.dedup_by_key(|(m, _)| m.span);
        let mut f = Finding::new(META.id, META.category, META.severity);
        let split_line = uneven.as_ref().map(|u| u.line.span);
        let rejected = hits
            .iter()
            .map(|(m, _)| *m)
            .filter(|m| Some(m.span) != split_line);
        for (m, n) in distinct(rejected).into_iter().take(3) {
            f.evidence(m.span, format!("the server rejected its TP size ({n}x)"));
        }
        if let Some(u) = &uneven {
            u.cite(&mut f);
        }
        if let Some(c) = callers.first() {
            f.evidence(c.span, "the traceback's caller names the count it split");
        }
        let mpi = cite_launch(incident, &mut f, hits[0].0);
        let detail = hits.iter().find_map(|(_, d)| d.clone()).or_else(|| {
            mpi.map(|n| format!("the engine's TP × PP is not the {n} MPI rank(s) started"))
        });
        f.condition(
            "the server rejected the tensor-parallel size",
            hits.iter().any(|(m, _)| Some(m.span) != split_line),
        );
        if let Some(u) = &uneven {
            u.reconcile(&mut f);
        }
        f.condition("the numbers are in the message", detail.is_some());
        f.title = match &detail {
            Some(d) => format!("the tensor-parallel size does not fit: {d}"),
            None => "the tensor-parallel size does not fit the model or the GPUs".to_owned(),
        };
        f.headline = format!("{}.", capitalise(&f.title));
        f.chain
            .push("the server stopped while configuring tensor parallelism".to_owned());
        f.chain.push(f.title.clone());
        if let Some(u) = &uneven {
            f.actions.push(u.advice());
        } else if ranks {
            f.actions.push(Action::advice(
                "start one rank per GPU the checkpoint or engine was sharded for (torchrun --nproc_per_node N, mpirun -n N), or re-shard the checkpoint / rebuild the engine for the GPUs you have",
                Some("nvidia-smi -L"),
            ));
        } else {
            f.actions.push(Action::advice(
                "choose a TP size that divides the model's attention and KV heads and fits the visible GPUs",
                Some("grep -E 'num_attention_heads|num_key_value_heads' MODEL_DIR/config.json; nvidia-smi -L"),
            ));
        }
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    fn titles(text: &str) -> Vec<String> {
        crate::testing::findings_of(super::META.id, text)
            .into_iter()
            .map(|f| f.title)
            .collect()
    }

    /// Megatron's bare `N is not divisible by M` names the count it split
    /// through the traceback's caller (microsoft/LMOps#292: MiniLLM's mpu,
    /// `divide(self.num_key_value_heads, self.world_size)`); the helpers'
    /// own frame (`ensure_divisibility(numerator, denominator)`) names
    /// nothing and is skipped.
    #[test]
    fn the_callers_line_names_the_count_split() {
        let text = "[rank4]:     self.num_key_value_heads = divide(self.num_key_value_heads, self.world_size) # n_kv_p\n\
                    [rank4]:   File \"/mnt/bn/lq1-nas-menglingjun/query_analysis_v1_train/research-HEAD/q2/miniLLM/LMOps-main/minillm/transformers/src/transformers/mpu/utils.py\", line 18, in divide\n\
                    [rank4]:     ensure_divisibility(numerator, denominator)\n\
                    [rank4]:   File \"/mnt/bn/lq1-nas-menglingjun/query_analysis_v1_train/research-HEAD/q2/miniLLM/LMOps-main/minillm/transformers/src/transformers/mpu/utils.py\", line 11, in ensure_divisibility\n\
                    [rank4]:     assert numerator % denominator == 0, '{} is not divisible by {}'.format(\n\
                    [rank4]: AssertionError: 2 is not divisible by 4\n";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title
                .contains("2 num_key_value_heads cannot be split over 4"),
            "{}",
            f[0].title
        );
        assert_eq!(f[0].evidence.len(), 2, "{:?}", f[0].evidence);
        // The assertion alone (vllm-project/vllm#24004's title): the numbers,
        // no count named.
        let alone = titles("AssertionError: 12 is not divisible by 8\n");
        assert_eq!(alone.len(), 1);
        assert!(alone[0].contains("12 (a head count or size) cannot be split over 8"));
    }

    /// The words alone are not enough: the message must be the assertion's
    /// whole text (Megatron's format prints nothing else); a sentence that
    /// goes on, or another exception, is someone else's check.
    #[test]
    fn other_divisibility_sentences_are_not_this() {
        assert!(titles("ValueError: 16 is not divisible by 6\n").is_empty());
        assert!(
            titles("AssertionError: 1000 is not divisible by 8, pad the sequence first\n")
                .is_empty()
        );
    }

    /// DeepSpeed's AutoTP and kernel-injection checks (deepspeedai/DeepSpeed#3634).
    #[test]
    fn deepspeeds_mp_size_check_gives_its_numbers() {
        let t = titles("AssertionError: num_heads (52) must be divisible by mp_size (8)\n");
        assert_eq!(t.len(), 1);
        assert!(
            t[0].contains("52 num_heads cannot be split over 8 GPUs"),
            "{}",
            t[0]
        );
    }

    /// fms's numberless assertions (foundation-model-stack#274): the head
    /// count against the world size is this failure; a batch that does not
    /// divide over the data-parallel ranks is someone else's check.
    #[test]
    fn fms_world_size_assertions_without_numbers() {
        let t = titles(
            "[rank9]:     nheads % world_size == 0\n\
             [rank9]: AssertionError: The number of heads must be divisible by world size\n",
        );
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(
            t[0],
            "the tensor-parallel size does not fit the model or the GPUs"
        );
        assert_eq!(
            titles("AssertionError: Hidden dim must be divisible by world size\n").len(),
            1
        );
        assert!(titles("AssertionError: Batch size must be divisible by world size.\n").is_empty());
    }

    /// Llama's reference code (meta-llama/llama#415): the checkpoint's
    /// shard count against the ranks torchrun started; the launch typed at
    /// the prompt above the traceback is cited with it. `MP=0` (no shard
    /// found in --ckpt_dir) is a load failure, not this.
    #[test]
    fn a_checkpoint_sharded_for_more_ranks_than_launched() {
        let text = "$ torchrun --nproc_per_node 1 example_chat_completion.py  --ckpt_dir llama-2-13b-chat/  --tokenizer_path tokenizer.model  --max_seq_len 512 --max_batch_size 4\n\
                    Traceback (most recent call last):\n\
                    \x20 File \"/home/yyf/llama/llama/generation.py\", line 80, in build\n\
                    \x20   assert model_parallel_size == len(\n\
                    AssertionError: Loading a checkpoint for MP=2 but world size is 1\n";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title
                .contains("sharded for model-parallel size 2, 1 ranks were launched"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].evidence.iter().any(|e| e.span.line == 1),
            "the launch command is cited: {:?}",
            f[0].evidence
        );
        assert!(
            matches!(&f[0].actions[0].kind, crate::rules::ActionKind::Advice { text, .. } if text.contains("--nproc_per_node")),
            "{:?}",
            f[0].actions
        );
        assert!(
            titles("AssertionError: Loading a checkpoint for MP=0 but world size is 1\n")
                .is_empty()
        );
    }

    /// TensorRT-LLM's `run.py` started without mpirun (NVIDIA/TensorRT-LLM#1950):
    /// the assertion has no numbers; the runtime's `MPI size` line above it
    /// says how many ranks it had, and is cited.
    #[test]
    fn trtllm_runtime_rank_count_is_read_from_its_mpi_line() {
        let text = "[TensorRT-LLM][INFO] MPI size: 1, rank: 0\n\
                    Traceback (most recent call last):\n\
                    RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/tmp/tritonbuild/tensorrtllm/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)\n";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title.contains("not the 1 MPI rank(s) started"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].evidence.iter().any(|e| e.span.line == 1),
            "{:?}",
            f[0].evidence
        );
    }
}
