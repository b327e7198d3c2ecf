//! The serving stacks' process names, as one table with where upstream
//! sets each: the titles engines give themselves (`setproctitle`:
//! `VLLM::EngineCore`, `sglang::scheduler_TP0`, `sgl_diffusion::scheduler_U0`),
//! the programs they run as (`ollama runner`, `text-generation-server`, LM
//! Studio's `.internal/utils/node`), their front ends, and the ports the
//! servers listen on by default. The rule's orphan check, its teardown check
//! (engines.rs) and the failed bind's same-server check
//! (address_already_in_use/same_server.rs) read them here.

/// What a process is to its stack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    /// Runs the model and holds the GPU; its server started it.
    Engine,
    /// The server's front end (API server, launcher, app) that starts and
    /// ends the engines.
    FrontEnd,
    /// One process that is both (llama.cpp's server, Triton).
    Whole,
}

/// How a command line shows the name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Spelling {
    /// A process title set by `setproctitle` (a word of the command line
    /// starts with it), or the kernel's 15-byte `comm` of it
    /// (`VLLM::EngineCor`, `sgl_diffusion::`).
    Title,
    /// The program's own binary: the command's first word ends with it.
    Program,
    /// Anywhere in the command line (an argument, a path cut on the left
    /// by nvidia-smi: `...ache/lm-studio/.internal/utils/node`).
    Contains,
}

/// One process name of a serving stack, and where upstream sets it.
pub(crate) struct Engine {
    pub stack: &'static str,
    pub role: Role,
    pub spelling: Spelling,
    pub text: &'static str,
    /// Where upstream names the process (repository, path, function).
    #[allow(dead_code)]
    upstream: &'static str,
}

const fn row(
    stack: &'static str,
    role: Role,
    spelling: Spelling,
    text: &'static str,
    upstream: &'static str,
) -> Engine {
    Engine {
        stack,
        role,
        spelling,
        text,
        upstream,
    }
}

/// The process names of the serving stacks, engines before front ends of
/// the same stack (the first row that matches a command names it).
pub(crate) const ENGINES: &[Engine] = &[
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::scheduler",
        "sgl-project/sglang python/sglang/srt/managers/scheduler.py run_scheduler_process(): setproctitle(f\"sglang::scheduler{prefix}\") (`_TP0`, `_DP0_TP0`)",
    ),
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::detokenizer",
        "sgl-project/sglang python/sglang/srt/managers/detokenizer_manager.py run_detokenizer_process(): setproctitle(\"sglang::detokenizer\")",
    ),
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::data_parallel_controller",
        "sgl-project/sglang python/sglang/srt/managers/data_parallel_controller.py run_data_parallel_controller_process(): setproctitle(\"sglang::data_parallel_controller\")",
    ),
    row(
        "SGLang diffusion",
        Role::Engine,
        Spelling::Title,
        "sgl_diffusion::scheduler",
        "sgl-project/sglang python/sglang/multimodal_gen (GPUWorker.init_device_and_model(): setproctitle(f\"sgl_diffusion::scheduler_TP{local_rank}\")); `_U0` in radixark/miles_diffusion#165",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::EngineCore",
        "vllm-project/vllm vllm/utils/system_utils.py set_process_title(): setproctitle(f\"{VLLM_PROCESS_NAME_PREFIX}::{name}\") (prefix `VLLM`); vllm/v1/engine/core.py names it EngineCore (EngineCore_DP<rank>)",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::Worker",
        "vllm-project/vllm vllm/v1/executor/multiproc_executor.py: set_process_title(\"Worker\") with `_TP<r>`, `_PP<r>`, `_DP<r>` suffixes",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::DPCoordinator",
        "vllm-project/vllm vllm/v1/engine/coordinator.py: set_process_title(\"DPCoordinator\")",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "ray::RayWorkerWrapper",
        "ray-project/ray: an actor's process is titled `ray::<class>`; vLLM's Ray executor's actor class is RayWorkerWrapper (vllm/executor/ray_utils.py)",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Title,
        "VLLM::APIServer",
        "vllm-project/vllm vllm/v1/utils.py: set_process_title(\"APIServer\", str(index)) when it runs several API servers",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Contains,
        "vllm serve",
        "vllm-project/vllm vllm/entrypoints/cli/main.py: the `vllm` command's `serve` (the single API server keeps its command line)",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Contains,
        "vllm.entrypoints",
        "vllm-project/vllm vllm/entrypoints/openai/api_server.py run as `python -m vllm.entrypoints.openai.api_server`",
    ),
    row(
        "SGLang",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang.launch_server",
        "sgl-project/sglang python/sglang/launch_server.py, run as `python -m sglang.launch_server`",
    ),
    row(
        "SGLang",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang serve",
        "sgl-project/sglang python/sglang/cli: the `sglang serve` command",
    ),
    row(
        "SGLang diffusion",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang.multimodal_gen",
        "sgl-project/sglang python/sglang/multimodal_gen/runtime/entrypoints/cli/main.py `serve`",
    ),
    row(
        "Ollama",
        Role::Engine,
        Spelling::Contains,
        "ollama runner",
        "ollama/ollama llm/server.go: the server execs its own binary with `runner --model <blob> … --port N` (0.4 and later)",
    ),
    row(
        "Ollama",
        Role::Engine,
        Spelling::Program,
        "ollama_llama_server",
        "ollama/ollama llm/server.go before 0.4: the runner binary `ollama_llama_server` unpacked under runners/",
    ),
    row(
        "Ollama",
        Role::FrontEnd,
        Spelling::Contains,
        "ollama serve",
        "ollama/ollama cmd/cmd.go: `ollama serve`",
    ),
    row(
        "Ollama",
        Role::FrontEnd,
        Spelling::Program,
        "ollama",
        "ollama/ollama: the `ollama` binary, as `lsof`, `ss` and nvidia-smi name its server",
    ),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio/.internal/utils/node",
        "LM Studio runs its model engine in its bundled node (`~/.cache/lm-studio/.internal/utils/node`): lmstudio-ai/lmstudio-bug-tracker#588's nvidia-smi rows",
    ),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio --type=",
        "LM Studio's Electron helper processes (`lm-studio --type=broker`): lmstudio-ai/lmstudio-bug-tracker#588",
    ),
    row(
        "LM Studio",
        Role::FrontEnd,
        Spelling::Program,
        "lm-studio",
        "the LM Studio app's main process (its AppImage's `lm-studio`, no `--type=`)",
    ),
    row(
        "TGI",
        Role::Engine,
        Spelling::Program,
        "text-generation-server",
        "huggingface/text-generation-inference launcher/src/main.rs shard_manager(): Command::new(\"text-generation-server\") with `serve <model>`",
    ),
    row(
        "TGI",
        Role::FrontEnd,
        Spelling::Program,
        "text-generation-launcher",
        "huggingface/text-generation-inference launcher/src/main.rs (the binary that starts the shards and the router)",
    ),
    row(
        "TGI",
        Role::FrontEnd,
        Spelling::Program,
        "text-generation-router",
        "huggingface/text-generation-inference router/src/main.rs",
    ),
    row(
        "llama.cpp",
        Role::Whole,
        Spelling::Program,
        "llama-server",
        "ggml-org/llama.cpp tools/server (the `llama-server` binary)",
    ),
    row(
        "LocalAI",
        Role::Whole,
        Spelling::Program,
        "local-ai",
        "mudler/LocalAI: the `local-ai` binary (`local-ai run`), as `ss -ltnp` names it (fixtures/real/678)",
    ),
    row(
        "Triton",
        Role::Whole,
        Spelling::Program,
        "tritonserver",
        "triton-inference-server/server src/main.cc (the `tritonserver` binary)",
    ),
];

/// The port each server listens on when not told otherwise: a failed bind
/// on it is most likely another start of that server.
const DEFAULT_PORTS: &[(&str, u16, &str)] = &[
    (
        "Ollama",
        11434,
        "ollama/ollama envconfig/config.go Host(): OLLAMA_HOST defaults to 127.0.0.1:11434",
    ),
    (
        "SGLang",
        30000,
        "sgl-project/sglang python/sglang/srt/server_args.py: port: int = 30000",
    ),
    (
        "vLLM",
        8000,
        "vllm-project/vllm vllm/entrypoints/openai/cli_args.py: --port, default 8000",
    ),
    (
        "Triton",
        8000,
        "triton-inference-server/server: --http-port, default 8000",
    ),
    (
        "llama.cpp",
        8080,
        "ggml-org/llama.cpp common/arg.cpp: --port, default 8080",
    ),
    ("LocalAI", 8080, "mudler/LocalAI: --address, default :8080"),
    (
        "LM Studio",
        1234,
        "LM Studio's local server: port 1234 by default",
    ),
    (
        "TGI",
        3000,
        "huggingface/text-generation-inference launcher/src/main.rs: --port, default 3000",
    ),
];

/// Whether `port` is `stack`'s default port.
pub(crate) fn default_port_of(stack: &str, port: u16) -> bool {
    DEFAULT_PORTS
        .iter()
        .any(|(s, p, _)| *s == stack && *p == port)
}

/// The kernel keeps 15 bytes of a process's name (`TASK_COMM_LEN` 16).
pub(crate) const COMM_LEN: usize = 15;

/// The word of `cmd` that bears `e`'s name, and the row, for the first row
/// that matches.
pub(crate) fn classify(cmd: &str) -> Option<(&'static Engine, &str)> {
    ENGINES.iter().find_map(|e| spelled(e, cmd).map(|w| (e, w)))
}

fn spelled<'c>(e: &Engine, cmd: &'c str) -> Option<&'c str> {
    match e.spelling {
        // The whole title where the line has it (`ps -o comm,args` prints
        // both), else its 15-byte name.
        Spelling::Title => cmd
            .split_whitespace()
            .find(|w| w.starts_with(e.text))
            .or_else(|| {
                cmd.split_whitespace()
                    .find(|w| w.len() == COMM_LEN && e.text.starts_with(*w))
            }),
        Spelling::Program => {
            let first = cmd.split_whitespace().next()?;
            (first == e.text || first.ends_with(&format!("/{}", e.text))).then_some(first)
        }
        Spelling::Contains => cmd.contains(e.text).then_some(cmd),
    }
}

/// The worker titles (`setproctitle`) of engines: a command that starts
/// with one is a worker whose parent is its server.
pub(crate) fn worker_title(cmd: &str) -> Option<&'static str> {
    ENGINES
        .iter()
        .filter(|e| e.role == Role::Engine && e.spelling == Spelling::Title)
        .find(|e| cmd.starts_with(e.text))
        .map(|e| e.text)
}

/// Whether `family` is one of the engines' titles.
pub(crate) fn is_worker_title(family: &str) -> bool {
    ENGINES
        .iter()
        .any(|e| e.role == Role::Engine && e.spelling == Spelling::Title && e.text == family)
}

/// Whether `cmd` runs a server's front end or a whole server (a
/// container's PID 1 that its engines have as parent).
pub(crate) fn is_server(cmd: &str) -> bool {
    classify(cmd).is_some_and(|(e, _)| e.role != Role::Engine)
}

#[cfg(test)]
mod tests {
    use super::{ENGINES, Role, classify, default_port_of};

    #[test]
    fn names_read_as_their_stack() {
        assert_eq!(
            classify("VLLM::EngineCor").map(|(e, _)| e.text),
            Some("VLLM::EngineCore")
        );
        assert_eq!(
            classify("sgl_diffusion:: sgl_diffusion::scheduler_U0").map(|(_, w)| w),
            Some("sgl_diffusion::scheduler_U0")
        );
        assert_eq!(
            classify("sglang::scheduler_TP0").map(|(e, _)| e.role),
            Some(Role::Engine)
        );
        assert_eq!(
            classify("/usr/bin/python3 -m vllm.entrypoints.openai.api_server").map(|(e, _)| e.role),
            Some(Role::FrontEnd)
        );
        assert_eq!(
            classify("/usr/local/bin/text-generation-server serve m").map(|(e, _)| e.stack),
            Some("TGI")
        );
        assert_eq!(
            classify("/usr/local/bin/ollama runner --model x").map(|(e, _)| e.role),
            Some(Role::Engine)
        );
        assert_eq!(
            classify("ollama").map(|(e, _)| e.role),
            Some(Role::FrontEnd)
        );
        assert!(classify("/usr/bin/python3 train.py").is_none());
        assert!(default_port_of("Ollama", 11434) && !default_port_of("Ollama", 8000));
        assert!(ENGINES.iter().all(|e| !e.upstream.is_empty()));
    }
}
