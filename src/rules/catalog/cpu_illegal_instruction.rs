//! `cpu-illegal-instruction`: a model server died of SIGILL (`Illegal
//! instruction (core dumped)`): the host CPU, often a VM's virtual CPU,
//! lacks an instruction set (AVX, AVX2, AVX-512) the build uses.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: CpuIllegalInstruction = CpuIllegalInstruction;

pub struct CpuIllegalInstruction;

/// The shell's report, alone on its line or after `script: line 18:  1669`
/// (`Illegal instruction (core dumped)`, `… Illegal instruction     (core
/// dumped) python -m …`), zsh's `illegal hardware instruction`, Go's
/// `signal: illegal instruction (core dumped)` (ollama's runner), Python's
/// faulthandler (`Fatal Python error: Illegal instruction`). CUDA's `an
/// illegal instruction was encountered` is a GPU kernel fault, not this; the
/// words inside a sentence are not a report either.
static SIGILL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:(?:^\s*|:\s+)(?:[0-9]+\s+)?Illegal instruction(?:\s+\(core dumped\))?(?:\s+(?P<cmd>\S.*))?$|zsh: illegal hardware instruction(?:\s+\(core dumped\))?(?:\s+(?P<zcmd>\S.*))?$|signal: illegal instruction)",
    )
    .expect("regex")
});

/// The kernel's line, the catalog row `kernel.trap-invalid-opcode`:
/// `traps: python3[213941] trap invalid opcode ip:7f4a… sp:7ffc… error:0
/// in libllama.so[7f4a…+9f000]`.
const TRAP: &str = "kernel.trap-invalid-opcode";
/// A launcher's report that its child died of a signal, by number (TGI's
/// shard and download processes); 4 is SIGILL.
const LAUNCHER_SIGNALED: &str = "stacks-tgi.shard-signaled";

/// systemd: `Main process exited, code=dumped, status=4/ILL`.
static UNIT_ILL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"status=4/ILL\b").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "cpu-illegal-instruction",
    category: Category::UnsupportedHardware,
    severity: Severity::Error,
    summary: "a model server died of SIGILL: the host CPU (often a VM's) lacks an instruction set the build needs (AVX, AVX2, AVX-512)",
    anchors: &[
        "Illegal instruction",
        "illegal hardware instruction",
        "signal: illegal instruction",
        "trap invalid opcode",
        "status=4/ILL",
    ],
    doc: r#"
## What it means
`Illegal instruction (core dumped)` from the shell (or `signal: illegal
instruction` from a Go launcher such as ollama's, `status=4/ILL` from
systemd, the kernel's `traps: python3[213941] trap invalid opcode … in
libllama.so`): the process executed a CPU instruction the processor does
not have, and the kernel killed it with SIGILL. Model servers and their
CPU kernels (llama.cpp/ggml, PyTorch's CPU paths, tokenizers) are built
for AVX, AVX2, FMA or AVX-512; a CPU without them, or a virtual machine
that hides them from the guest, cannot run the build.

CUDA's `an illegal instruction was encountered` is a different failure, a
fault in a GPU kernel, and is not read by this rule.

## Why it happens
An old CPU; a hypervisor that masks instruction sets (VirtualBox with
Hyper-V active, a QEMU/KVM guest with a generic CPU model such as
`qemu64`, a cloud instance type without AVX-512); a binary built with
`-march=native` on another machine.

## How to confirm
`grep -o -w -e avx -e avx2 -e fma -e avx512f /proc/cpuinfo | sort -u` on
the host (or in the VM); `lscpu | grep -i flags`; the kernel's `trap invalid
opcode` line names the library that ran the instruction.

## How to fix
Run on a CPU with the instruction sets, or expose them to the VM (the
hypervisor's CPU type `host`/`host-passthrough`; for VirtualBox, disable
Hyper-V on the Windows host); or use a build made without them (e.g.
llama.cpp built with `-DGGML_AVX2=OFF`, ollama's CPU variant for older
CPUs).

## Safety
Advice only: the fix is the host, the VM's CPU settings or the build.
"#,
};

impl Rule for CpuIllegalInstruction {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let shell: Vec<(&Message, Option<String>)> = matches(incident, &SIGILL)
            .filter(|(m, _)| !m.text.contains("illegal instruction was encountered"))
            .map(|(m, c)| {
                let cmd = c.name("cmd").or_else(|| c.name("zcmd"));
                (m, cmd.map(|x| x.as_str().trim().to_owned()))
            })
            .collect();
        let traps: Vec<_> = incident.known(TRAP).collect();
        let units: Vec<&Message> = matches(incident, &UNIT_ILL).map(|(m, _)| m).collect();
        let launched: Vec<&Message> = incident
            .known(LAUNCHER_SIGNALED)
            .filter(|(_, c)| c.get("signal") == Some("4"))
            .map(|(m, _)| m)
            .collect();
        if shell.is_empty() && traps.is_empty() && units.is_empty() && launched.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(shell.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(
                m.span,
                format!(
                    "the process died of SIGILL: the CPU does not have an instruction it ran ({n}x)"
                ),
            );
        }
        let mut lib = None;
        for (m, c) in traps.iter().take(2) {
            if let Some(pid) = c.get("pid").and_then(|p| p.parse::<u32>().ok()) {
                f.entities.pids.insert(pid);
                if let Some(o) = incident.owner(pid) {
                    f.entities.units.insert(o.unit.clone());
                }
            }
            let in_lib = c.get("lib").map(str::to_owned);
            f.evidence(
                m.span,
                format!(
                    "the kernel: {}[{}] executed an invalid opcode{}",
                    c.get("comm").unwrap_or_default(),
                    c.get("pid").unwrap_or_default(),
                    in_lib
                        .as_deref()
                        .map(|l| format!(" in {l}"))
                        .unwrap_or_default()
                ),
            );
            lib = lib.or(in_lib);
        }
        for (m, n) in distinct(units.iter().copied()).into_iter().take(1) {
            f.evidence(
                m.span,
                format!("systemd: the main process died of SIGILL ({n}x)"),
            );
        }
        for (m, n) in distinct(launched.iter().copied()).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("the launcher: its child process died of signal 4, SIGILL ({n}x)"),
            );
        }
        // What the shell was running, when the prompt line is in the paste.
        let cmd = shell.iter().find_map(|(_, c)| c.clone());
        f.condition("the process died of SIGILL", true);
        f.condition(
            "the kernel names the process and library that ran the instruction",
            !traps.is_empty(),
        );
        f.condition(
            "the CPU's instruction sets (/proc/cpuinfo flags) are in the inputs",
            false,
        );
        f.title = format!(
            "a process died of an illegal CPU instruction{}: the CPU (or the VM's virtual CPU) likely lacks AVX/AVX2",
            lib.as_deref()
                .map(|l| format!(" in {l}"))
                .unwrap_or_default()
        );
        f.headline = format!(
            "Illegal instruction{}: the program uses a CPU instruction set (AVX, AVX2, FMA or AVX-512) that this CPU does not offer, often because a virtual machine hides it. Not a GPU, driver or memory problem; the CPU's flags settle it.",
            cmd.as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        );
        f.chain
            .push("the server dies at start, with no traceback".to_owned());
        f.chain
            .push("the CPU does not implement an instruction the build uses (SIGILL)".to_owned());
        f.explanation = "SIGILL is raised by the CPU itself. Model-serving builds use vector instruction sets; a CPU or a hypervisor's virtual CPU without them stops the process at the first such instruction. The inputs do not show the CPU's flags, hence the modest confidence.".to_owned();
        actions(&mut f);
        f.confidence = confidence(&f, 0.45, 0.8);
        out.push(f);
    }
}

/// What to check and change about a CPU that lacks the build's instructions.
fn actions(f: &mut Finding) {
    f.actions.push(Action::advice(
        "check which vector instruction sets the CPU offers (in the VM, if it is one)",
        Some("grep -o -w -e avx -e avx2 -e fma -e avx512f /proc/cpuinfo | sort -u"),
    ));
    f.actions.push(Action::advice(
        "in a VM, expose the host's instruction sets (CPU type host / host-passthrough; with VirtualBox, disable Hyper-V on the Windows host)",
        None,
    ));
    f.actions.push(Action::advice(
        "or run a build made without AVX/AVX2 (a CPU variant for older processors), or move to a CPU that has them",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shells_report_of_sigill_and_not_the_words_in_a_sentence() {
        let cases = [
            ("Illegal instruction (core dumped)", true),
            ("Illegal instruction", true),
            (
                "start-vllm-service.sh: line 18:  1669 Illegal instruction     (core dumped) python -m x",
                true,
            ),
            (
                "zsh: illegal hardware instruction  ./llama-server -m m.gguf",
                true,
            ),
            (
                "Error: llama runner process has terminated: signal: illegal instruction (core dumped)",
                true,
            ),
            ("Fatal Python error: Illegal instruction", true),
            // A GPU kernel fault, another failure.
            (
                "torch.AcceleratorError: CUDA error: an illegal instruction was encountered",
                false,
            ),
            (
                "no Illegal instruction since the VM CPU type was set to host",
                false,
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(SIGILL.is_match(line), expected, "{line}");
        }
        let c = crate::catalogs::catalogs()
            .hits("traps: python3[213941] trap invalid opcode ip:7f4aa44a4e94 sp:7ffceec92e60 error:0 in libllama.so[7f4aa448a000+9f000]")
            .into_iter()
            .find(|h| h.row.is_some_and(|r| r.id == TRAP))
            .expect("trap line");
        assert_eq!(
            (c.get("comm"), c.get("pid"), c.get("lib")),
            (Some("python3"), Some("213941"), Some("libllama.so"))
        );
    }
}
