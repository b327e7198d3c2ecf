//! The programs around a server that report why it did not start: docker
//! compose v1's errors (`ERROR: for svc  Cannot start service svc: …`,
//! `ERROR: Encountered errors while bringing up the project.`), the error
//! chain of an OCI runtime failure as docker prints it (`failed to create
//! shim: OCI runtime create failed: runc create failed: unable to start
//! container process: error during container init: error running hook #0:
//! … nvidia-container-cli: initialization error: nvml error: …`), often
//! wrapped over several lines by whoever pasted it (docker 20.10+ puts
//! `docker: Error response from daemon: ` in front), and Triton's
//! `Model 'name' loading failed with error: …` with its glog prefix cut.
//!
//! Each is recognised by a fixed phrase its program prints; the text of
//! the line still goes to the text-only detectors (a CUDA OOM inside
//! Triton's message), and the rules read the phrases they know (the NVML
//! mismatch) from the line itself.

use std::sync::LazyLock;

use regex::Regex;

/// docker compose v1 (`docker-compose`, Python): `ERROR: for <service>
/// <message>` — two spaces after the name — and the summary line.
static COMPOSE_V1: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^ERROR: (?:for [0-9A-Za-z_.-]+\x20\x20(?P<msg>\S.*)|Encountered errors while bringing up the project\.\s*$)",
    )
    .expect("compose v1 error regex")
});

/// Triton's model-lifecycle report, its glog prefix cut off.
static TRITON_LOAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Model '[^']+' loading failed with error: (?P<msg>.*)$")
        .expect("triton load failure regex")
});

/// The links of docker's OCI runtime error chain, each printed by a fixed
/// program (dockerd/containerd, runc, libnvidia-container); a wrapped
/// paste puts any of them at the start of a line.
const CHAIN: &[&str] = &[
    "failed to create shim",
    "OCI runtime create failed",
    "runc create failed: ",
    "unable to start container process: ",
    "error during container init: ",
    "error running hook",
    "nvidia-container-cli: ",
    "nvml error: ",
];

/// A line of these programs: the message the detectors should read.
pub(super) fn parse(text: &str) -> Option<&str> {
    if let Some(c) = text
        .starts_with("ERROR: ")
        .then(|| COMPOSE_V1.captures(text))
        .flatten()
    {
        return Some(c.name("msg").map_or("", |m| m.as_str()));
    }
    if let Some(c) = text
        .starts_with("Model '")
        .then(|| TRITON_LOAD.captures(text))
        .flatten()
    {
        return Some(c.name("msg").map_or("", |m| m.as_str()));
    }
    chain_link(text).then_some(text)
}

/// Whether `text` starts with a link of the OCI error chain, or holds one
/// after `failed: ` / `hook #N: ` (the chain's own separators).
fn chain_link(text: &str) -> bool {
    let text = text.strip_prefix("docker: ").unwrap_or(text);
    let text = text
        .strip_prefix("Error response from daemon: ")
        .unwrap_or(text);
    let t = text
        .strip_prefix("failed: ")
        .or_else(|| text.strip_prefix("create failed: "))
        .unwrap_or(text);
    let t = match t.strip_prefix("hook #") {
        Some(rest) => rest.split_once(": ").map_or(rest, |(n, r)| {
            if n.bytes().all(|b| b.is_ascii_digit()) {
                r
            } else {
                rest
            }
        }),
        None => t,
    };
    CHAIN.iter().any(|link| t.starts_with(link))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docker compose v1 over an NVML mismatch, wrapped by the reporter
    /// (https://github.com/saharmor/dalle-playground/issues/104).
    #[test]
    fn compose_v1_and_the_oci_chain() {
        let lines = [
            "ERROR: for dalle-backend  Cannot start service dalle-backend: failed to create shim: OCI runtime create ",
            "failed: runc create failed: unable to start container process: error during container init: error running ",
            "hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: ",
            "nvml error: driver/library version mismatch: unknown",
            "ERROR: Encountered errors while bringing up the project.",
        ];
        assert_eq!(
            parse(lines[0]),
            Some("Cannot start service dalle-backend: failed to create shim: OCI runtime create ")
        );
        for line in &lines[1..] {
            assert!(parse(line).is_some(), "{line}");
        }
        // docker 20.10+ itself (https://github.com/labdao/plex/issues/18).
        assert!(parse("docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'").is_some());
        assert!(parse("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown.").is_some());
        for not in [
            "Error response from daemon: no such container",
            "ERROR: something else",
            "ERROR: for x Cannot start",
            "failed: something",
            "hook #0: nothing known",
            "the nvml error: was",
        ] {
            assert!(parse(not).is_none(), "{not}");
        }
    }

    /// Triton's load failure without its glog prefix
    /// (https://github.com/triton-inference-server/tensorrtllm_backend/issues/281).
    #[test]
    fn triton_load_failure() {
        let msg = parse(
            "Model 'tensorrt_llm' loading failed with error: version 1 is at UNAVAILABLE state: Internal: unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory",
        );
        assert!(msg.is_some_and(|m| m.starts_with("version 1 is at UNAVAILABLE")));
        assert!(parse("Model 'x' loaded").is_none());
    }
}
