//! The serving programs' process names, as one table with where upstream
//! sets each: the titles engines give themselves (`setproctitle`:
//! `VLLM::EngineCore`, `sglang::scheduler_TP0`, `sgl_diffusion::scheduler_U0`),
//! the programs they run as (`ollama runner`, `text-generation-server`, LM
//! Studio's `.internal/utils/node`), their front ends, and the ports the
//! servers listen on by default with how each is stopped. Every question
//! about a serving program's name asks this table: the inventory's
//! listing of a `ps` (`is_serving`, by the rows marked `listed`), the stale
//! rule's orphan and teardown checks (rules/catalog/stale_serving_process)
//! and the failed bind's same-server and own-instance checks
//! (rules/catalog/address_already_in_use).

/// What a process is to its stack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
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
pub enum Spelling {
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
pub struct Engine {
    pub stack: &'static str,
    pub role: Role,
    pub spelling: Spelling,
    pub text: &'static str,
    /// A name of one process: [`classify`] reads it. A row that is not is a
    /// family's prefix the inventory lists by (`VLLM::`, `sglang::`).
    pub process: bool,
    /// The inventory lists a `ps` row whose command line contains it
    /// ([`super::is_serving`]).
    pub listed: bool,
    /// Where upstream names the process (repository, path, function).
    pub upstream: &'static str,
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
        process: true,
        listed: true,
        upstream,
    }
}

impl Engine {
    /// A process name the inventory does not list (it has never listed
    /// these: `ps` rows of them stay out of its serving processes).
    const fn unlisted(self) -> Engine {
        Engine {
            listed: false,
            ..self
        }
    }
}

/// A family's prefix the inventory lists by, not one process's name.
const fn family(stack: &'static str, text: &'static str, upstream: &'static str) -> Engine {
    Engine {
        stack,
        role: Role::Engine,
        spelling: Spelling::Title,
        text,
        process: false,
        listed: true,
        upstream,
    }
}

/// The process names of the serving stacks, engines before front ends of
/// the same stack (the first row that matches a command names it).
pub const ENGINES: &[Engine] = &[
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
        "SGLang",
        Role::FrontEnd,
        Spelling::Program,
        "sglang",
        "sgl-project/sglang pyproject.toml [project.scripts] sglang = \"sglang.cli.main:main\": the process name (comm) of `sglang serve`, as psutil's process.name() prints it (SGLang's own wait_port_available() names a port's holder so)",
    )
    .unlisted(),
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
    )
    .unlisted(),
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
        Spelling::Program,
        "vllm",
        "vllm-project/vllm pyproject.toml [project.scripts] vllm = \"vllm.entrypoints.cli.main:main\": the process name (comm) of `vllm serve`",
    )
    .unlisted(),
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
    )
    .unlisted(),
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
    )
    .unlisted(),
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
    )
    .unlisted(),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio/.internal/utils/node",
        "LM Studio runs its model engine in its bundled node (`~/.cache/lm-studio/.internal/utils/node`): lmstudio-ai/lmstudio-bug-tracker#588's nvidia-smi rows",
    )
    .unlisted(),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio --type=",
        "LM Studio's Electron helper processes (`lm-studio --type=broker`): lmstudio-ai/lmstudio-bug-tracker#588",
    )
    .unlisted(),
    row(
        "LM Studio",
        Role::FrontEnd,
        Spelling::Program,
        "lm-studio",
        "the LM Studio app's main process (its AppImage's `lm-studio`, no `--type=`)",
    )
    .unlisted(),
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
    )
    .unlisted(),
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
    )
    .unlisted(),
    row(
        "Triton",
        Role::Whole,
        Spelling::Program,
        "tritonserver",
        "triton-inference-server/server src/main.cc (the `tritonserver` binary)",
    ),
    row(
        "TensorRT-LLM",
        Role::Whole,
        Spelling::Contains,
        "trtllm-serve",
        "NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py: the `trtllm-serve` command (an OpenAI-compatible server)",
    ),
    row(
        "LMDeploy",
        Role::FrontEnd,
        Spelling::Contains,
        "lmdeploy serve",
        "InternLM/lmdeploy lmdeploy/cli/serve.py: `lmdeploy serve api_server`",
    ),
    // The families the inventory lists by prefix: every title an engine
    // sets, the ones above and any later one.
    family(
        "SGLang",
        "sglang::",
        "sgl-project/sglang: every process title it sets starts `sglang::` (the rows above)",
    ),
    family(
        "SGLang diffusion",
        "sgl_diffusion::",
        "SGLang diffusion's renamed engine workers (`sgl_diffusion::scheduler_U0`, radixark/miles_diffusion#165)",
    ),
    family(
        "vLLM",
        "VLLM::",
        "vllm-project/vllm vllm/utils/system_utils.py set_process_title(): every title is `VLLM::<name>`",
    ),
];

/// A server's default port and how it is stopped: a failed bind on it is
/// most likely another start of that server, and the instance that holds
/// it is stopped through whatever runs it, not by moving the port.
pub struct DefaultPort {
    pub stack: &'static str,
    pub port: u16,
    /// How a person stops a running instance of it.
    pub stop: &'static str,
    /// Where upstream sets the default.
    pub upstream: &'static str,
}

/// How a server run from a terminal, a unit or a container is stopped.
const IN_A_TERMINAL: &str = "Ctrl-C in the terminal that runs it, or stop the unit or container that started it (`systemctl stop UNIT`, `docker stop NAME`)";

const fn on_port(
    stack: &'static str,
    port: u16,
    stop: &'static str,
    upstream: &'static str,
) -> DefaultPort {
    DefaultPort {
        stack,
        port,
        stop,
        upstream,
    }
}

/// The port each server listens on when not told otherwise.
pub const DEFAULT_PORTS: &[DefaultPort] = &[
    on_port(
        "Ollama",
        11434,
        "quit the Ollama app (its menu-bar or tray icon: Quit Ollama; on Windows also end `ollama app.exe` and `ollama.exe` in the Task Manager), or `sudo systemctl stop ollama` where the installer made it a service",
        "ollama/ollama envconfig/config.go Host(): OLLAMA_HOST defaults to 127.0.0.1:11434",
    ),
    on_port(
        "SGLang",
        30000,
        IN_A_TERMINAL,
        "sgl-project/sglang python/sglang/srt/server_args.py: port: int = 30000",
    ),
    on_port(
        "vLLM",
        8000,
        IN_A_TERMINAL,
        "vllm-project/vllm vllm/entrypoints/openai/cli_args.py: --port, default 8000",
    ),
    on_port(
        "Triton",
        8000,
        IN_A_TERMINAL,
        "triton-inference-server/server: --http-port, default 8000",
    ),
    on_port(
        "llama.cpp",
        8080,
        IN_A_TERMINAL,
        "ggml-org/llama.cpp common/arg.cpp: --port, default 8080",
    ),
    on_port(
        "LocalAI",
        8080,
        IN_A_TERMINAL,
        "mudler/LocalAI: --address, default :8080",
    ),
    on_port(
        "LM Studio",
        1234,
        "stop the server in LM Studio (its Developer tab) or with `lms server stop`, or quit the app",
        "LM Studio's local server: port 1234 by default",
    ),
    on_port(
        "TGI",
        3000,
        IN_A_TERMINAL,
        "huggingface/text-generation-inference launcher/src/main.rs: --port, default 3000",
    ),
    on_port(
        "ComfyUI",
        8188,
        "close the ComfyUI that runs: Ctrl-C in its console window, or quit the app that started it (ComfyUI Desktop, a Krita or Blender plugin's managed server)",
        "comfyanonymous/ComfyUI comfy/cli_args.py: --port, default 8188",
    ),
    on_port(
        "Gradio",
        7860,
        "Ctrl-C in the console that runs the web UI (its Restart or Reload UI button keeps the same process, and its old server, alive)",
        "gradio-app/gradio gradio/networking.py: GRADIO_SERVER_PORT, default 7860 (the web UIs built on it: AUTOMATIC1111, Forge, RVC)",
    ),
];

/// A unit a serving program's own installer creates, and the name its lines
/// carry in the journal (the program's, as systemd's `SYSLOG_IDENTIFIER`
/// defaults to the executable's name): where the inputs name no unit, a
/// journal line written as `ollama[27605]:` is taken to be the installed
/// unit's.
pub struct InstalledUnit {
    pub stack: &'static str,
    /// The identifier its journal lines carry (`ollama`).
    pub identifier: &'static str,
    pub unit: &'static str,
    /// Where upstream creates the unit.
    pub upstream: &'static str,
}

/// The units the serving programs' installers create.
pub const INSTALLED_UNITS: &[InstalledUnit] = &[InstalledUnit {
    stack: "Ollama",
    identifier: "ollama",
    unit: "ollama.service",
    upstream: "ollama/ollama scripts/install.sh configure_systemd(): writes /etc/systemd/system/ollama.service (`Description=Ollama Service`, `ExecStart=$BINDIR/ollama serve`); the Linux page of its documentation makes the same unit by hand",
}];

/// The unit the installer of the program whose journal lines carry
/// `identifier` creates.
pub fn installed_unit(identifier: &str) -> Option<&'static InstalledUnit> {
    INSTALLED_UNITS.iter().find(|u| u.identifier == identifier)
}

/// A serving product that runs one process per model instance and titles
/// it with the instance's id: the process starts the instance's backend
/// server (vLLM, SGLang, llama-box) as its child and lives as long as the
/// instance. More of them than the product lists as running are instances
/// it stopped without ending their process.
pub struct InstanceTitle {
    pub stack: &'static str,
    /// The title before the instance's id (`gpustack_model_instance_1574`).
    pub prefix: &'static str,
    /// Where the product lists the instances it runs.
    pub list: &'static str,
    /// Where upstream sets the title.
    pub upstream: &'static str,
}

/// The per-instance process titles.
pub const INSTANCE_TITLES: &[InstanceTitle] = &[InstanceTitle {
    stack: "GPUStack",
    prefix: "gpustack_model_instance_",
    list: "GPUStack's Deployments page, or its API's list of model instances: `curl -H 'Authorization: Bearer <key>' http://<server>/v2/model-instances` (`/v1/…` before 2.0)",
    upstream: "gpustack/gpustack gpustack/worker/serve_manager.py ServeManager._serve_model_instance(): setproctitle(f\"gpustack_model_instance_{mi.id}\"); its API mounts the instances' list under /model-instances (`include_router(model_instances.router, prefix=\"/model-instances\")`), which its maintainers ask for as `<server-url>/v2/model-instances` (gpustack/gpustack#3936)",
}];

/// The per-instance title a command line starts with, and the instance's
/// id (the kernel's 15-byte `comm` keeps no id, and reads as none).
pub fn instance_title(cmd: &str) -> Option<(&'static InstanceTitle, u64)> {
    let first = cmd.split_whitespace().next()?;
    INSTANCE_TITLES.iter().find_map(|t| {
        let id = first.strip_prefix(t.prefix)?;
        Some((t, id.parse().ok()?))
    })
}

/// Whether `port` is `stack`'s default port.
pub fn default_port_of(stack: &str, port: u16) -> bool {
    DEFAULT_PORTS
        .iter()
        .any(|d| d.stack == stack && d.port == port)
}

/// The servers whose default port `port` is.
pub fn defaults_on(port: u16) -> impl Iterator<Item = &'static DefaultPort> {
    DEFAULT_PORTS.iter().filter(move |d| d.port == port)
}

/// The kernel keeps 15 bytes of a process's name (`TASK_COMM_LEN` 16).
pub const COMM_LEN: usize = 15;

/// The word of `cmd` that bears `e`'s name, and the row, for the first row
/// that matches.
pub fn classify(cmd: &str) -> Option<(&'static Engine, &str)> {
    ENGINES
        .iter()
        .filter(|e| e.process)
        .find_map(|e| spelled(e, cmd).map(|w| (e, w)))
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
pub fn worker_title(cmd: &str) -> Option<&'static str> {
    ENGINES
        .iter()
        .filter(|e| e.process && e.role == Role::Engine && e.spelling == Spelling::Title)
        .find(|e| cmd.starts_with(e.text))
        .map(|e| e.text)
}

/// Whether `family` is one of the engines' titles.
pub fn is_worker_title(family: &str) -> bool {
    ENGINES.iter().any(|e| {
        e.process && e.role == Role::Engine && e.spelling == Spelling::Title && e.text == family
    })
}

/// Whether `cmd` runs a server's front end or a whole server (a
/// container's PID 1 that its engines have as parent).
pub fn is_server(cmd: &str) -> bool {
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
        assert_eq!(
            super::instance_title("gpustack_model_instance_1574").map(|(t, id)| (t.stack, id)),
            Some(("GPUStack", 1574))
        );
        assert!(super::instance_title("gpustack_model_").is_none());
        assert!(super::instance_title("gpustack_worker").is_none());
        assert!(default_port_of("Ollama", 11434) && !default_port_of("Ollama", 8000));
        assert!(ENGINES.iter().all(|e| !e.upstream.is_empty()));
        assert!(
            super::DEFAULT_PORTS
                .iter()
                .all(|d| !d.upstream.is_empty() && !d.stop.is_empty())
        );
    }
}
