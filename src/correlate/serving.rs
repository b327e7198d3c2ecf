//! Which command lines run a model server or one of its workers: the
//! processes an inventory lists from a `ps` listing, where a host's sshd and
//! cron are not part of the incident. The serving programs' names are one
//! table, `programs.rs`, which the rules ask too.

pub mod programs;

/// Whether `cmd` runs a model server or one of its workers: its command
/// line contains a name the programs' table lists (`listed`). `ppid` is the
/// parent `ps` printed: a multiprocessing child re-parented to PID 1 is a
/// worker its server left behind.
pub fn is_serving(cmd: &str, ppid: Option<u32>) -> bool {
    programs::ENGINES
        .iter()
        .any(|e| e.listed && cmd.contains(e.text))
        || (ppid == Some(1) && cmd.contains("from multiprocessing.spawn import"))
}

/// Whether a journal writer's identifier (`ident` of `ident[pid]:`) is GPU
/// or model-serving software: NVIDIA's daemons and scripts
/// (`nvidia-persistenced`, `nv-fabricmanager`,
/// `nvidia-fabricmanager-start.sh`), NVIDIA's Jetson tools for its
/// integrated GPU (`nvpmodel`, its power modes; `jetson_clocks`;
/// `tegrastats`; the camera daemon `nvargus-daemon`) or a server's own
/// name.
pub fn is_gpu_software(ident: &str) -> bool {
    const IDENTS: &[&str] = &[
        "nvidia",
        "nv-",
        "nvpmodel",
        "jetson",
        "tegra",
        "nvargus",
        "sglang",
        "vllm",
        "ollama",
        "tritonserver",
        "dcgm",
    ];
    let ident = ident.to_ascii_lowercase();
    IDENTS.iter().any(|p| ident.starts_with(p)) || is_serving(&ident, None)
}

/// Whether a unit's or a writer's name is part of a GPU serving stack:
/// GPU software ([`is_gpu_software`]), a serving product that starts model
/// servers (GPUStack, llama.cpp's `llama-*`, Triton, TGI, LMDeploy), or
/// the container runtime or orchestrator a server runs under (a crash loop
/// of `docker.service` stops every GPU container). A host's other daemons
/// (storage, cloud agents, mail) are not.
pub fn is_serving_stack(name: &str) -> bool {
    const STACK: &[&str] = &[
        "gpustack",
        "llama",
        "triton",
        "text-generation",
        "lmdeploy",
        "docker",
        "containerd",
        "kubelet",
        "crio",
        "podman",
        "k3s",
        "rke2",
    ];
    let lower = name.to_ascii_lowercase();
    is_gpu_software(&lower) || STACK.iter().any(|p| lower.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::{is_gpu_software, is_serving, is_serving_stack};

    #[test]
    fn a_serving_stack_by_name() {
        for name in [
            "docker",
            "llama-server",
            "gpustack",
            "ollama",
            "nvidia-persistenced",
        ] {
            assert!(is_serving_stack(name), "{name}");
        }
        for name in [
            "ceph-osd",
            "nova-compute",
            "neutron-l3-agent",
            "sshd",
            "postfix",
        ] {
            assert!(!is_serving_stack(name), "{name}");
        }
    }

    #[test]
    fn gpu_software_by_its_journal_identifier() {
        for ident in [
            "nvidia-fabricmanager-start.sh",
            "nv-fabricmanager",
            "nvidia-persistenced",
            "ollama",
            // Jetson: nvpmodel[886] (fixtures/real/814).
            "nvpmodel",
            "nvargus-daemon",
        ] {
            assert!(is_gpu_software(ident), "{ident}");
        }
        for ident in ["sshd", "CRON", "systemd-logind", "kernel", "python3"] {
            assert!(!is_gpu_software(ident), "{ident}");
        }
    }

    #[test]
    fn servers_and_their_orphans_but_not_the_host() {
        for cmd in [
            "/usr/local/bin/ollama serve",
            "python3 -m sglang.launch_server --model-path /m --port 30000",
            "sglang::scheduler_TP0",
            "sgl_diffusion::scheduler_U0",
            "/usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen2.5-7B",
            "VLLM::EngineCore",
        ] {
            assert!(is_serving(cmd, None), "{cmd}");
        }
        let orphan = "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork";
        assert!(is_serving(orphan, Some(1)));
        assert!(!is_serving(orphan, Some(4242)));
        for cmd in [
            "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
            "/usr/sbin/cron -f -P",
            "/usr/bin/python3 /usr/bin/networkd-dispatcher --run-startup-triggers",
            "grep --color=auto ollama",
        ] {
            assert!(!is_serving(cmd, Some(1)), "{cmd}");
        }
    }
}
