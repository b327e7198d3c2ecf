//! `nvidia-driver-not-loaded`: nvidia-smi cannot talk to a driver, or sees
//! no GPU at all.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NvidiaDriverNotLoaded = NvidiaDriverNotLoaded;

pub struct NvidiaDriverNotLoaded;

static NOT_LOADED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|^No devices were found\s*$")
        .expect("regex")
});
static FELL_OFF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"fallen off the bus|NVRM: Xid \([^)]*\): 79,").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "nvidia-driver-not-loaded",
    category: Category::DriverNotLoaded,
    severity: Severity::Critical,
    summary: "nvidia-smi cannot reach the NVIDIA driver, or the driver sees no GPU",
    anchors: &[
        "couldn't communicate with the NVIDIA driver",
        "No devices were found",
    ],
    doc: r#"
## What it means
`NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
driver`: the kernel module is not loaded. `No devices were found`: it is
loaded but sees no GPU.

## Why it happens
A kernel update without a matching DKMS build, a blacklisted module, Secure
Boot refusing an unsigned module; or every GPU fell off the bus.

## How to confirm
`lsmod | grep nvidia`, `dkms status`, the kernel log for module load errors
or Xid 79.

## How to fix
Build or install the module for the running kernel (`dkms autoinstall`) and
reboot; if the GPUs fell off the bus, follow that finding instead.

## Safety
Advice only: module and kernel changes need a maintenance window.
"#,
};

impl Rule for NvidiaDriverNotLoaded {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &NOT_LOADED).map(|(m, _)| m).collect();
        if hits.is_empty() {
            return;
        }
        // All GPUs lost after a bus fault look the same from nvidia-smi;
        // that is the fell-off-the-bus finding's story, not a driver problem.
        if matches(incident, &FELL_OFF).next().is_some() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().copied()) {
            f.evidence(m.span, format!("nvidia-smi cannot use the driver ({n}x)"));
        }
        let no_module = hits.iter().any(|m| m.text.contains("couldn't communicate"));
        f.condition(
            "nvidia-smi failed to reach the driver or found no GPU",
            true,
        );
        f.condition(
            "no GPU fell off the bus (that would explain it instead)",
            true,
        );
        f.title = if no_module {
            "the NVIDIA kernel module is not loaded".to_owned()
        } else {
            "the NVIDIA driver sees no GPU".to_owned()
        };
        f.headline = format!(
            "{}: no process can use a GPU on this host.",
            capitalise(&f.title)
        );
        f.chain
            .push("nvidia-smi fails and CUDA finds no device".to_owned());
        f.chain.push(f.title.clone());
        f.explanation = "Usually a kernel update without a module built for it, a blacklisted module or Secure Boot refusing an unsigned module.".to_owned();
        f.actions.push(Action::advice(
            "check whether the module is loaded and built for the running kernel",
            Some("lsmod | grep nvidia; dkms status; uname -r"),
        ));
        f.actions.push(Action::advice(
            "look for module load errors in the kernel log",
            Some("journalctl -k -b | grep -iE 'nvidia|NVRM'"),
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}
