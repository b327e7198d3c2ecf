//! `nvlink-links-inactive`: `nvidia-smi nvlink -s` says a GPU's NVLinks are
//! down, all of them (`NVML: Unable to retrieve NVLink information as all
//! links are inActive`) or some (`Link 3: <inactive>`), on a GPU whose model
//! has NVLink built in (SXM boards, B200, H100 HBM3): a GPU fault with no
//! Xid line. On a PCIe card without a
//! bridge the same words are normal, so the rule asks the GPU line above.
//! DCGM's `dcgmi nvlink --link-status` rows are read too (`dcgmi.rs`).

mod dcgmi;

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, matches};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};

pub static RULE: NvlinkLinksInactive = NvlinkLinksInactive;

pub struct NvlinkLinksInactive;

/// nvidia-smi's per-GPU answer when NVML finds no active link, and a link
/// it lists as down (`Link 3: <inactive>`).
static INACTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?P<all>Unable to retrieve NVLink information as all links are inactive)|^\s*Link (?P<link>[0-9]{1,2}): <inactive>\s*$")
        .expect("regex")
});

/// How far above its links `nvlink -s` prints a GPU's line (18 links at
/// most, NVLink 5).
const LINKS_MAX: u32 = 18;

/// The GPU line `nvlink -s` prints above each GPU's links (the UUID as
/// printed, however a paste masked it: `GPU-xxx`, `...`).
static GPU_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*GPU (?P<index>[0-9]{1,3}): (?P<name>\S.*?) \(UUID: [^)]*\)\s*$")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "nvlink-links-inactive",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "nvidia-smi nvlink -s or dcgmi nvlink --link-status says the NVLinks of a GPU (all, or some) are inactive or Down: a GPU, bridge or fabric fault with no Xid line",
    anchors: &["all links are inActive", "<inactive>", "(UUID: "],
    doc: r#"
## What it means
`nvidia-smi nvlink -s` lists each GPU's links (`Link 0: 26.562 GB/s`);
for a GPU where NVML finds no active link it prints `NVML: Unable to
retrieve NVLink information as all links are inActive` under the GPU's
line; a GPU with some links down lists them as `Link 3: <inactive>`. On a
board whose NVLinks are part of the board (SXM modules: A100
and H100 SXM, H100 `80GB HBM3`, H200, H800, B200, GB200 …) every link
down means the GPU cannot talk to its peers or its NVSwitches: collectives
fall back or hang, the fabric manager may refuse the GPU. No Xid has to
accompany it. On a PCIe card without an NVLink bridge the same words are
normal, so the rule speaks only when the GPU line above names an NVLink
model.

DCGM says the same in `dcgmi nvlink --link-status`: under its `NvLink
Link Status` box, a `gpuId N:` line and one letter per link (`U` up, `D`
down, `X` disabled under MIG, `_` a link the GPU does not have). A `D` is
a link the GPU has and NVML reports inactive; DCGM's own health watch
fails the GPU for it (`GPU 0's NvLink link 0 is currently down`). Links
`D` beside links `U`, NVSwitches listed, or a GPU model with NVLink built
in make it a fault (an error). Every link of every GPU `D` with nothing
else is said as a warning with both readings: a missing, unseated or
failed NVLink bridge between GPUs sold as bridged pairs (H100 NVL,
NVIDIA/DCGM#198), or a PCIe card installed without a bridge, where the
same listing is normal (NVIDIA/DCGM#49). A passing `dcgmi diag` does not
clear either.

## Why it happens
A GPU or NVSwitch fault, a link that failed training at boot, the fabric
manager not running or not matching the driver, a GPU left in a bad state
after an Xid (74, 144 – 150 are NVLink's).

## How to confirm
`nvidia-smi nvlink -s` and `nvidia-smi -q -d NVLINK` on every GPU (the
others list their links), `systemctl status nvidia-fabricmanager`,
`dmesg -T | grep -i -e Xid -e SXid -e nvlink`, `nvidia-smi topo -m` (the
path between two bridged GPUs reads `NV<n>`, not `PHB`/`SYS`), and
`dcgmi diag -r 2`.

## How to fix
Drain the node; restart the fabric manager if it is down; reseat or
replace a missing or failed NVLink bridge; reset the GPU or reboot the
node; if the links stay down, the board or its baseboard goes to the
vendor.

## Safety
Advice only: draining and rebooting take down every workload of the node.
"#,
};

/// Whether a GPU model's NVLinks are built in (SXM and the boards that
/// exist only as SXM or superchips), as nvidia-smi names it.
fn nvlink_built_in(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let pcie = words.iter().any(|w| *w == "PCIE" || *w == "NVL");
    upper.contains("SXM")
        || upper.contains("HBM3")
        || words
            .iter()
            .any(|w| matches!(*w, "B100" | "B200" | "B300" | "GB200" | "GB300"))
        || (!pcie && words.iter().any(|w| matches!(*w, "H200" | "H800" | "H20")))
}

impl Rule for NvlinkLinksInactive {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // Each GPU line with the lines that say its links are down.
        let mut down: Vec<(&Message, u32, String, Vec<&Message>, bool)> = Vec::new();
        for (m, c) in matches(incident, &INACTIVE) {
            let Some((gpu_line, index, name)) = gpu_above(incident, m) else {
                continue;
            };
            if !nvlink_built_in(&name) {
                continue;
            }
            let all = c.name("all").is_some();
            match down.iter_mut().find(|d| d.0.span == gpu_line.span) {
                Some(d) => {
                    d.3.push(m);
                    d.4 |= all;
                }
                None => down.push((gpu_line, index, name, vec![m], all)),
            }
        }
        for (gpu_line, index, name, lines, all) in down {
            out.push(finding(&lines, gpu_line, index, &name, all));
        }
        dcgmi::check(incident, out);
    }
}

/// The GPU line `nvlink -s` printed above `m` (the nearest, with at most
/// a GPU's links between), its index and name.
fn gpu_above<'a>(incident: &'a Incident, m: &Message) -> Option<(&'a Message, u32, String)> {
    let above = incident
        .facts
        .messages
        .iter()
        .filter(|g| {
            g.span.source == m.span.source
                && g.span.line < m.span.line
                && g.span.line + LINKS_MAX >= m.span.line
        })
        .filter(|g| GPU_LINE.is_match(&g.text))
        .max_by_key(|g| g.span)?;
    let c = GPU_LINE.captures(&above.text)?;
    let index = c["index"].parse().ok()?;
    Some((above, index, c["name"].to_owned()))
}

fn finding(lines: &[&Message], gpu_line: &Message, index: u32, name: &str, all: bool) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.gpus.insert(index);
    f.evidence(
        gpu_line.span,
        format!("GPU {index} ({name}): its NVLinks are built into the board"),
    );
    for m in lines {
        f.evidence(
            m.span,
            if all {
                format!("nvidia-smi: every NVLink of GPU {index} is inactive")
            } else {
                format!("nvidia-smi: an NVLink of GPU {index} is inactive")
            },
        );
    }
    let which = if all { "every NVLink" } else { "NVLinks" };
    f.condition("nvidia-smi says all links of the GPU are inactive", all);
    f.condition("the GPU's model has its NVLinks built in (SXM)", true);
    f.condition(
        "the kernel's log of the failure (an NVLink Xid) is in the inputs",
        false,
    );
    f.title = format!("GPU {index} ({name}) has {which} inactive: a GPU or fabric fault");
    f.headline = format!(
        "{} NVLink of GPU {index} ({name}) is inactive: the GPU cannot reach its peers at full speed over NVLink, or at all. No Xid line is in the inputs; the kernel log and the fabric manager would say why.",
        if all { "Every" } else { "Some" }
    );
    f.chain.push(format!(
        "multi-GPU work on GPU {index} fails, hangs or slows"
    ));
    f.chain.push(format!(
        "{} of GPU {index} {} down",
        if all { "every NVLink" } else { "some NVLinks" },
        if all { "is" } else { "are" }
    ));
    f.explanation = "An SXM board's NVLinks connect it to its peers and NVSwitches; with all of them inactive, NCCL has no NVLink path to the GPU and the fabric manager may refuse it. On a PCIe card the same words are normal; this GPU's model has NVLink built in.".to_owned();
    f.actions.push(Action::advice(
        "compare with the other GPUs' links and look for the kernel's and the fabric manager's account",
        Some("nvidia-smi nvlink -s; systemctl status nvidia-fabricmanager; dmesg -T | grep -i -e Xid -e SXid -e nvlink"),
    ));
    f.actions.push(Action::new(
        ActionKind::Drain { host: None },
        Safety::AdvisoryOnly,
        "drain the node before resetting the GPU or rebooting it",
    ));
    f.actions.push(Action::advice(
        "reset the GPU or reboot the node; if the links stay down, the board goes to the vendor",
        None,
    ));
    f.confidence = confidence(&f, if all { 0.5 } else { 0.4 }, 0.7);
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// leptonai/gpud#1085, as the issue quotes nvidia-smi.
    const B200: &str = "GPU 2: NVIDIA B200 (UUID: GPU-xxx)\nNVML: Unable to retrieve NVLink information as all links are inActive\n";

    #[test]
    fn an_sxm_gpu_with_every_link_down_is_a_gpu_fault() {
        let f = findings(B200);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::XidOther);
        assert!(f[0].entities.gpus.contains(&2));
        // Another NVLink model, its UUID unmasked (assembled, not copied).
        let h100 = "GPU 5: NVIDIA H100 80GB HBM3 (UUID: GPU-8a3ccbd3-2c3c-5f4d-4b4e-3a6f8c2d1e0f)\nNVML: Unable to retrieve NVLink information as all links are inActive\n";
        let f = findings(h100);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.gpus.contains(&5));
    }

    #[test]
    fn some_links_down_on_an_sxm_gpu_are_named_too() {
        // Azure/azhpc-diagnostics#73, as the issue quotes nvidia-smi.
        let v100 = "nvidia-smi nvlink -s\n....\nGPU 3: Tesla V100-SXM2-32GB (UUID: ...)\n         Link 0: 25.781 GB/s\n         Link 1: 25.781 GB/s\n         Link 2: 25.781 GB/s\n         Link 3: <inactive>\n         Link 4: 25.781 GB/s\n         Link 5: <inactive>\n";
        let f = findings(v100);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.gpus.contains(&3));
        assert!(f[0].confidence < findings(B200)[0].confidence);
    }

    #[test]
    fn a_pcie_card_or_a_gpu_not_named_is_not_a_fault() {
        let pcie = B200.replace("NVIDIA B200", "NVIDIA GeForce RTX 4090");
        assert!(findings(&pcie).is_empty());
        let h100_pcie = B200.replace("NVIDIA B200", "NVIDIA H100 PCIe");
        assert!(findings(&h100_pcie).is_empty());
        let alone = "NVML: Unable to retrieve NVLink information as all links are inActive\n";
        assert!(findings(alone).is_empty());
    }

    /// NVIDIA/DCGM#198: `dcgmi nvlink --link-status` on two H100 NVL,
    /// verbatim, with the command above it (the format's sample).
    const DCGM_198: &str =
        include_str!("../../../fixtures/formats/lines/dcgmi-nvlink-link-status.txt");

    #[test]
    fn dcgmi_every_link_down_and_nothing_else_is_a_warning_naming_the_gpus() {
        let f = findings(DCGM_198);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, crate::rules::Severity::Warning);
        assert!(f[0].entities.gpus.contains(&0) && f[0].entities.gpus.contains(&1));
        // The title row and both GPUs' rows are cited.
        let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(lines, [3, 7, 9]);
    }

    #[test]
    fn dcgmi_links_down_beside_links_up_are_a_fault() {
        // DCGM#198's box with GPU 1's links up and GPU 0's last one down
        // (assembled from the real box, not copied).
        let mixed = DCGM_198
            .replacen(
                "D D D D D D D D D D D D D D D D D D",
                "U U U U U U U U U U U U U U U U U D",
                1,
            )
            .replacen(
                "    gpuId 1:\n        D D D D D D D D D D D D D D D D D D",
                "    gpuId 1:\n        U U U U U U U U U U U U U U U U U U",
                1,
            );
        let f = findings(&mixed);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, crate::rules::Severity::Error);
        assert_eq!(f[0].category, Category::XidOther);
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn dcgmi_every_link_up_is_no_finding() {
        // NVIDIA/dcgm-exporter#576's eight H100s, every link Up (two rows).
        let up = "dcgmi nvlink -s
+----------------------+
|  NvLink Link Status  |
+----------------------+
GPUs:
    gpuId 0:
        U U U U U U U U U U U U U U U U U U
    gpuId 1:
        U U U U U U U U U U U U U U U U U U
NvSwitches:
    No NvSwitches found.

Key: Up=U, Down=D, Disabled=X, Not Supported=_
";
        assert!(findings(up).is_empty());
    }

    #[test]
    fn nvlink_models_by_name() {
        for name in [
            "NVIDIA A100-SXM4-80GB",
            "Tesla V100-SXM2-32GB",
            "NVIDIA H100 80GB HBM3",
            "NVIDIA H200",
            "NVIDIA GB200",
        ] {
            assert!(super::nvlink_built_in(name), "{name}");
        }
        for name in [
            "NVIDIA A100-PCIE-40GB",
            "NVIDIA H100 PCIe",
            "NVIDIA H200 NVL",
            "NVIDIA GeForce RTX 3090",
        ] {
            assert!(!super::nvlink_built_in(name), "{name}");
        }
    }
}
