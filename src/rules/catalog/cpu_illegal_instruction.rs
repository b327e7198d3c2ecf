//! `cpu-illegal-instruction`: a model server died of SIGILL (`Illegal
//! instruction (core dumped)`): the host CPU, often a VM's virtual CPU,
//! lacks an instruction set (AVX, AVX2, AVX-512) the build uses.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

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

/// A runtime's report of exit code 132 (128 + 4): compose's `exited with
/// code 132`, `docker events`' `die … (exitCode=132, …)`, `docker ps`'
/// `Exited (132)`, a State block's `ExitCode 132`, kubectl's `Exit Code:
/// 132`. docker inspect's JSON is read as a record (`facts.containers`).
const EXIT_132: &str = "stacks-containers.exit-code-132";
/// qemu-user's `qemu: uncaught target signal 4 (Illegal instruction)`: the
/// program runs emulated, built for another architecture than the host's.
const QEMU: &str = "stacks-containers.qemu-uncaught-signal";

/// A State block's record that no OOM kill ended the container: docker
/// inspect's `"OOMKilled": false` or, as a UI prints the block, `OOMKilled
/// false`.
static NOT_OOM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\s*"?OOMKilled"?\s*:?\s*false\b"#).expect("regex"));

/// The CPU's model as lscpu (`Model name:   Intel(R) Pentium(R) Gold
/// 6400`) or /proc/cpuinfo (`model name\t: …`) prints it.
static CPU_MODEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:Model name:|model name\s*:)\s+(?P<cpu>\S.*?)\s*$").expect("regex")
});

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
        "odel name",
        "OOMKilled",
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

A runtime that only reports how the process ended says it as exit code
132, 128 + 4 (SIGILL): compose's `exited with code 132`, `docker events`'
`die … (exitCode=132, …)`, `docker ps`' `Exited (132)`, docker inspect's
`"ExitCode": 132` (with `OOMKilled` false: no memory kill, which is 137),
kubectl's `Exit Code: 132`. qemu's `qemu: uncaught target signal 4
(Illegal instruction)` says the program ran emulated: an image built for
another architecture than the host's (an amd64 image on an Apple silicon
Mac), whose AVX code the emulator does not implement.

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
opcode` line names the library that ran the instruction. Under emulation,
`docker image inspect -f '{{.Architecture}}' IMAGE` against `uname -m`.

## How to fix
Run on a CPU with the instruction sets, or expose them to the VM (the
hypervisor's CPU type `host`/`host-passthrough`; for VirtualBox, disable
Hyper-V on the Windows host); or use a build made without them (e.g.
llama.cpp built with `-DGGML_AVX2=OFF`, ollama's CPU variant for older
CPUs). Under emulation, an image for the host's architecture (an arm64
tag, `--platform linux/arm64`) or a native build.

## Safety
Advice only: the fix is the host, the VM's CPU settings or the build.
"#,
};

impl Rule for CpuIllegalInstruction {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut seen = gather(incident);
        if seen.is_empty() {
            return;
        }
        gather_context(incident, &mut seen);
        let mut f = Finding::new(META.id, META.category, META.severity);
        let lib = evidence(incident, &seen, &mut f);
        // What the shell was running, when the prompt line is in the paste.
        let cmd = seen.shell.iter().find_map(|(_, c)| c.clone());
        let said = !(seen.shell.is_empty()
            && seen.traps.is_empty()
            && seen.units.is_empty()
            && seen.launched.is_empty()
            && seen.qemu.is_empty());
        f.condition("the process died of SIGILL", true);
        f.condition(
            "a program's own words say illegal instruction (not only exit code 132)",
            said,
        );
        f.condition(
            "the kernel names the process and library that ran the instruction",
            !seen.traps.is_empty(),
        );
        f.condition(
            "the CPU's model or instruction sets are in the inputs",
            seen.cpu.is_some(),
        );
        words(&mut f, &seen, lib.as_deref(), cmd.as_deref());
        actions(&mut f, !seen.qemu.is_empty());
        f.confidence = confidence(&f, 0.45, 0.8);
        out.push(f);
    }
}

/// Every account of a SIGILL death the inputs hold, and the CPU's model.
struct Seen<'a> {
    shell: Vec<(&'a Message, Option<String>)>,
    traps: Vec<(&'a Message, &'a crate::catalogs::Hit<'static>)>,
    units: Vec<&'a Message>,
    launched: Vec<&'a Message>,
    /// Exit code 132 as a runtime reports it: its lines.
    exits: Vec<&'a Message>,
    /// docker inspect records with exit code 132: their `ExitCode` line.
    inspected: Vec<Span>,
    qemu: Vec<&'a Message>,
    cpu: Option<(&'a Message, String)>,
    /// The same State block's `OOMKilled false`: no memory kill.
    not_oom: Option<Span>,
}

impl Seen<'_> {
    fn is_empty(&self) -> bool {
        self.shell.is_empty()
            && self.traps.is_empty()
            && self.units.is_empty()
            && self.launched.is_empty()
            && self.exits.is_empty()
            && self.inspected.is_empty()
            && self.qemu.is_empty()
    }
}

fn gather(incident: &Incident) -> Seen<'_> {
    let shell = matches(incident, &SIGILL)
        .filter(|(m, _)| !m.text.contains("illegal instruction was encountered"))
        .filter(|(m, _)| !m.text.contains("uncaught target signal"))
        .map(|(m, c)| {
            let cmd = c.name("cmd").or_else(|| c.name("zcmd"));
            (m, cmd.map(|x| x.as_str().trim().to_owned()))
        })
        .collect();
    let signal_4 = |id: &'static str| {
        incident
            .known(id)
            .filter(|(_, c)| c.get("signal") == Some("4"))
            .map(|(m, _)| m)
            .collect::<Vec<_>>()
    };
    let records: Vec<_> = incident
        .facts
        .containers
        .iter()
        .filter(|r| r.exit_code == Some(132) && r.running != Some(true))
        .collect();
    let inspected = records
        .iter()
        .filter_map(|r| r.line_of("ExitCode"))
        .collect();
    let exits: Vec<&Message> = incident.known(EXIT_132).map(|(m, _)| m).collect();
    // The record's own `OOMKilled` line; a State block's is looked for
    // once there is evidence ([`gather_context`]).
    let not_oom = records
        .iter()
        .filter(|r| r.oom_killed == Some(false))
        .find_map(|r| r.line_of("OOMKilled"));
    Seen {
        shell,
        traps: incident.known(TRAP).collect(),
        units: matches(incident, &UNIT_ILL).map(|(m, _)| m).collect(),
        launched: signal_4(LAUNCHER_SIGNALED),
        exits,
        inspected,
        not_oom,
        qemu: signal_4(QEMU),
        cpu: None,
    }
}

/// What only supports evidence already seen, each a search over every
/// message, so done only when there is some: a State block's `OOMKilled`
/// line a few lines from its `ExitCode 132`, and the CPU's model.
fn gather_context<'a>(incident: &'a Incident, seen: &mut Seen<'a>) {
    if seen.not_oom.is_none() {
        let exits = &seen.exits;
        let near = |m: &Message| {
            exits.iter().any(|e| {
                e.span.source == m.span.source
                    && e.text.contains("ExitCode")
                    && e.span.line.abs_diff(m.span.line) <= 12
            })
        };
        seen.not_oom = matches(incident, &NOT_OOM)
            .map(|(m, _)| m)
            .find(|m| near(m))
            .map(|m| m.span);
    }
    seen.cpu = matches(incident, &CPU_MODEL)
        .next()
        .map(|(m, c)| (m, c["cpu"].to_owned()));
}

/// The finding's evidence; the library the kernel names, if it does.
fn evidence(incident: &Incident, seen: &Seen<'_>, f: &mut Finding) -> Option<String> {
    for (m, n) in distinct(seen.shell.iter().map(|(m, _)| *m))
        .into_iter()
        .take(2)
    {
        f.evidence(
            m.span,
            format!(
                "the process died of SIGILL: the CPU does not have an instruction it ran ({n}x)"
            ),
        );
    }
    for (m, n) in distinct(seen.qemu.iter().copied()).into_iter().take(1) {
        f.evidence(
            m.span,
            format!("qemu: the program it emulates (built for another CPU architecture than the host's) died of signal 4, SIGILL ({n}x)"),
        );
    }
    let mut lib = None;
    for (m, c) in seen.traps.iter().take(2) {
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
    for (m, n) in distinct(seen.units.iter().copied()).into_iter().take(1) {
        f.evidence(
            m.span,
            format!("systemd: the main process died of SIGILL ({n}x)"),
        );
    }
    for (m, n) in distinct(seen.launched.iter().copied()).into_iter().take(2) {
        f.evidence(
            m.span,
            format!("the launcher: its child process died of signal 4, SIGILL ({n}x)"),
        );
    }
    for span in seen.inspected.iter().take(1) {
        f.evidence(*span, "docker inspect: the container ended with exit code 132 = 128 + 4, SIGILL (a memory kill would be 137)".to_owned());
    }
    for (m, n) in distinct(seen.exits.iter().copied()).into_iter().take(2) {
        f.evidence(
            m.span,
            format!("the runtime: the container's process ended with exit code 132 = 128 + 4, SIGILL, not a memory kill (137) ({n}x)"),
        );
    }
    if let Some(span) = seen.not_oom {
        f.evidence(
            span,
            "the runtime records no OOM kill (OOMKilled false): memory is not the cause".to_owned(),
        );
    }
    if let Some((m, cpu)) = &seen.cpu {
        f.evidence(m.span, format!("the CPU: {cpu}"));
    }
    lib
}

/// The title, headline, chain and explanation.
fn words(f: &mut Finding, seen: &Seen<'_>, lib: Option<&str>, cmd: Option<&str>) {
    let cpu = seen
        .cpu
        .as_ref()
        .map(|(_, c)| format!(" ({c})"))
        .unwrap_or_default();
    if !seen.qemu.is_empty() {
        f.title = "a program running under qemu emulation died of an illegal instruction: the image is built for another CPU architecture than the host's".to_owned();
        f.headline = "qemu: uncaught target signal 4 (Illegal instruction): the program runs emulated, from an image built for another architecture than the host's (an amd64 image on an arm64 machine such as an Apple silicon Mac), and the emulator does not implement an instruction it uses (AVX/AVX2 in an x86 build). Not a memory, model or GPU problem: run an image built for the host's architecture, or a native build.".to_owned();
    } else {
        f.title = format!(
            "a process died of an illegal CPU instruction{}: the CPU{cpu} (or the VM's virtual CPU) likely lacks AVX/AVX2",
            lib.map(|l| format!(" in {l}")).unwrap_or_default()
        );
        f.headline = if seen.shell.is_empty()
            && seen.traps.is_empty()
            && seen.units.is_empty()
            && seen.launched.is_empty()
        {
            format!(
                "Exit code 132 is 128 + 4: the process was killed by SIGILL, an instruction its CPU{cpu} does not implement (AVX, AVX2, FMA or AVX-512 in the build), often because a virtual machine hides it. Not a memory kill (that is 137); the CPU's flags settle it."
            )
        } else {
            format!(
                "Illegal instruction{}: the program uses a CPU instruction set (AVX, AVX2, FMA or AVX-512) that this CPU{cpu} does not offer, often because a virtual machine hides it. Not a GPU, driver or memory problem; the CPU's flags settle it.",
                cmd.map(|c| format!(" ({c})")).unwrap_or_default()
            )
        };
    }
    f.chain
        .push("the server dies at start, with no traceback".to_owned());
    f.chain
        .push("the CPU does not implement an instruction the build uses (SIGILL)".to_owned());
    f.explanation = "SIGILL is raised by the CPU itself. Model-serving builds use vector instruction sets; a CPU, a hypervisor's virtual CPU or an emulator without them stops the process at the first such instruction. Without the CPU's flags in the inputs the confidence stays modest.".to_owned();
}

/// What to check and change about a CPU that lacks the build's instructions.
fn actions(f: &mut Finding, emulated: bool) {
    if emulated {
        f.actions.push(Action::advice(
            "compare the image's architecture with the host's",
            Some("docker image inspect -f '{{.Os}}/{{.Architecture}}' IMAGE; uname -m"),
        ));
        f.actions.push(Action::advice(
            "run an image built for the host's architecture (an arm64 tag or multi-arch image, --platform linux/arm64 on Apple silicon) or a native build, rather than an emulated amd64 one",
            None,
        ));
        return;
    }
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

    /// Exit code 132 in each runtime's framing is the row; other codes, and
    /// 132 inside a longer number, are not.
    #[test]
    fn exit_code_132_in_each_runtimes_framing() {
        let is_exit_132 = |line: &str| {
            crate::catalogs::catalogs()
                .hits(line)
                .into_iter()
                .any(|h| h.row.is_some_and(|r| r.id == EXIT_132))
        };
        for line in [
            // compose (odysseus-dev/odysseus#78)
            "odysseus-odysseus-1 exited with code 132",
            // docker events (alphacep/vosk-server#48, reduced)
            "2020-05-04T00:24:31.281427371+03:00 container die 101b7d14552d (exitCode=132, image=alphacep/kaldi-ru:latest, name=relaxed_wozniak)",
            // docker ps' status (nginx/docker-nginx#372's words)
            "a25d8f0c1e2b   nginx:latest   \"nginx -g 'daemon of…\"   5 seconds ago   Exited (132) 3 seconds ago             eager_hopper",
            // a State block as a UI prints it
            "ExitCode 132",
            // kubectl describe
            "      Exit Code:    132",
        ] {
            assert!(is_exit_132(line), "{line}");
        }
        for line in [
            "server-1 exited with code 137",
            "2017-01-05T00:36:09.840186338+08:00 container die 0fdb...ff37 (exitCode=143, image=alpine:latest, name=test)",
            "ExitCode 1320",
            "The installed MuseScore 4 command-line process exited with code 1320 without producing the export.",
        ] {
            assert!(!is_exit_132(line), "{line}");
        }
    }

    #[test]
    fn oomkilled_false_and_the_cpu_model() {
        assert!(NOT_OOM.is_match("OOMKilled false"));
        assert!(NOT_OOM.is_match("            \"OOMKilled\": false,"));
        assert!(!NOT_OOM.is_match("OOMKilled true"));
        let c = CPU_MODEL
            .captures("  Model name:             Intel(R) Core(TM) i5-3470T CPU @ 2.90GHz")
            .expect("lscpu");
        assert_eq!(&c["cpu"], "Intel(R) Core(TM) i5-3470T CPU @ 2.90GHz");
        assert!(CPU_MODEL.is_match("model name\t: AMD FX(tm)-8350 Eight-Core Processor"));
        assert!(!CPU_MODEL.is_match("served model name: qwen"));
    }

    /// docker inspect's whole record (fixtures/formats/lines: a real record,
    /// stable-diffusion-webui's container, `OOMKilled` false) with its exit
    /// code set to 132, a constructed near miss of the real 137: the record
    /// is read (`facts.containers`) and its `ExitCode` line cited; the real
    /// 137 makes no SIGILL finding.
    #[test]
    fn a_docker_inspect_record_with_exit_code_132() {
        let real = include_str!("../../../fixtures/formats/lines/docker-inspect-exited-137.txt");
        let sigill = real.replace("\"ExitCode\": 137", "\"ExitCode\": 132");
        assert_ne!(real, sigill);
        let f = crate::testing::findings_of(META.id, &sigill);
        assert_eq!(f.len(), 1, "{f:?}");
        let line = sigill
            .lines()
            .position(|l| l.contains("\"ExitCode\": 132"))
            .expect("the exit code's line") as u32
            + 1;
        crate::testing::cites_line(&f[0], line);
        assert!(crate::testing::findings_of(META.id, real).is_empty());
    }
}
