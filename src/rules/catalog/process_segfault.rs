//! `process-segfault`: the kernel reports a process killed by SIGSEGV
//! (`ollama-runner[2984649]: segfault at 0 ip … error 4 in
//! ollama-runner[…]`), a crash of native code with no Python traceback.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{confidence, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ProcessSegfault = ProcessSegfault;

pub struct ProcessSegfault;

/// The kernel's report (arch/x86/mm/fault.c, show_signal_msg): the catalog
/// row `kernel.segfault` (`comm[pid]: segfault at ADDR … in OBJ[…]`), whose
/// captures name the process, its PID, the address and the mapping.
const SEGFAULT: &str = "kernel.segfault";

/// systemd-coredump taking the core: `Process 2984649 (ollama-runner) of
/// user 0 dumped core.`
static DUMPED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Process (?P<pid>[0-9]+) \((?P<comm>[^)]*)\) of user [0-9]+ dumped core")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "process-segfault",
    category: Category::ServerException,
    severity: Severity::Error,
    summary: "a process died of a segmentation fault (SIGSEGV) in native code; the kernel names the binary or library",
    // The kernel's line is the catalog row `kernel.segfault`.
    anchors: &["dumped core"],
    doc: r#"
## What it means
The kernel's `python3[213941]: segfault at 0 ip 00007f… sp 00007ffc… error 4
in libfoo.so[7f…+9f000]` says the process read or wrote memory it does not
own and was killed by SIGSEGV. `at` is the address it touched (`0`: a null
pointer), `in` the binary or library the faulting instruction belongs to.
A model server that dies this way leaves no Python traceback; at most
`Segmentation fault (core dumped)` from its shell and systemd-coredump's
`Process N (name) of user U dumped core.`

## Why it happens
A bug or a broken build of native code: a runner or extension built for
another CPU, CUDA or driver version, mismatched shared libraries, a model
file the loader does not handle, memory corruption. The library named
after `in` is where to look first.

## How to confirm
`coredumpctl info PID` shows the stack of the core systemd kept; rerun
the command by hand to see the last lines it printed before the crash.

## How to fix
Upgrade or reinstall the program (or the library named), use a build for
this CPU/CUDA/driver, and report the stack upstream when it persists.

## Safety
Advice only: the process is already dead.
"#,
};

impl Rule for ProcessSegfault {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let faults: Vec<_> = incident
            .known(SEGFAULT)
            .filter(|(m, _)| !m.text.contains("dumped core"))
            .collect();
        // One finding per faulting program: a runner respawned and crashing
        // again is one story.
        let mut programs: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, (_, c)) in faults.iter().enumerate() {
            let key = c.get("comm").unwrap_or_default().to_owned();
            match programs.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(i),
                None => programs.push((key, vec![i])),
            }
        }
        for (comm, members) in programs {
            let mut f = Finding::new(META.id, META.category, META.severity);
            let mut pids: Vec<u32> = Vec::new();
            let mut obj = None;
            let mut null = false;
            for &i in members.iter() {
                let (m, c) = &faults[i];
                let Some(pid) = c.get("pid").and_then(|p| p.parse::<u32>().ok()) else {
                    continue;
                };
                let addr = c.get("addr").unwrap_or_default();
                if pids.len() < 3 {
                    f.evidence(
                        m.span,
                        format!(
                            "the kernel: {comm}[{pid}] was killed by SIGSEGV at address 0x{addr}{}",
                            c.get("obj").map(|o| format!(" in {o}")).unwrap_or_default()
                        ),
                    );
                }
                null |= addr.trim_start_matches('0').is_empty();
                obj = obj.or_else(|| c.get("obj").map(str::to_owned));
                f.entities.pids.insert(pid);
                if let Some(o) = incident.owner(pid) {
                    f.entities.units.insert(o.unit.clone());
                }
                pids.push(pid);
            }
            if pids.is_empty() {
                continue;
            }
            let cored = matches(incident, &DUMPED)
                .find(|(_, c)| c["pid"].parse::<u32>().is_ok_and(|p| pids.contains(&p)));
            if let Some((m, _)) = &cored {
                f.evidence(m.span, "systemd-coredump kept its core dump");
            }
            f.occurrences = pids.len() as u32;
            f.condition("the kernel reported the segmentation fault", true);
            f.condition(
                "the kernel names the binary or library that faulted",
                obj.is_some(),
            );
            f.condition("a core dump of the process was kept", cored.is_some());
            let pid = pids[0];
            let at = obj
                .as_deref()
                .map(|o| format!(" in {o}"))
                .unwrap_or_default();
            f.title = format!("{comm} (PID {pid}) died of a segmentation fault{at}");
            f.headline = format!(
                "{comm} (PID {pid}) was killed by the kernel for a segmentation fault (SIGSEGV){at}{}: a crash in native code, not a GPU memory shortage.",
                if null { " on a null pointer" } else { "" }
            );
            f.chain.push(format!("{comm} stops with no traceback"));
            f.chain.push(format!(
                "native code{at} touched memory it does not own (SIGSEGV)"
            ));
            f.explanation = "A segmentation fault is a bug or a broken build of native code (the binary, a shared library, a CUDA or driver mismatch), not an out-of-memory condition. The core dump's stack names the function.".to_owned();
            f.actions.push(Action::advice(
                "read the stack of the crash from the core dump",
                Some(&format!("coredumpctl info {pid}")),
            ));
            f.actions.push(Action::advice(
                "upgrade or reinstall the program (or the library named), with a build for this CPU, CUDA and driver; report the stack upstream if it persists",
                None,
            ));
            f.confidence = confidence(&f, 0.6, 0.85);
            out.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row's captures are what the rule reads.
    #[test]
    fn the_kernels_segfault_line_in_its_wordings() {
        let hit = |line: &str| {
            crate::catalogs::catalogs()
                .hits(line)
                .into_iter()
                .find(|h| h.row.is_some_and(|r| r.id == SEGFAULT))
        };
        let c = hit("ollama-runner[2984649]: segfault at 0 ip 0000000000539be6 sp 00007ffcedbba3e0 error 4 in ollama-runner[408000+175000] likely on CPU 8 (core 2, socket 0)")
            .expect("6.x line");
        assert_eq!(
            (c.get("comm"), c.get("pid"), c.get("addr"), c.get("obj")),
            (
                Some("ollama-runner"),
                Some("2984649"),
                Some("0"),
                Some("ollama-runner")
            )
        );
        let c = hit("python[489815]: segfault at ffffffffffffffff in libc.so.6[...+188000] error 5 likely on CPU 10 (core 20)")
            .expect("a line with the ip cut");
        assert_eq!(
            (c.get("pid"), c.get("obj")),
            (Some("489815"), Some("libc.so.6"))
        );
        // Words about a segfault are not the kernel's report.
        assert!(hit("the runner segfault at startup is fixed in 0.5").is_none());
    }
}
