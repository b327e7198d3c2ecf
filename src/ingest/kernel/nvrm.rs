//! NVIDIA driver lines (docs/formats/kernel.md, docs/catalogs/kernel.md): Xid reports in
//! every variant, the bus id → UUID line, a GPU falling off the bus, the
//! user-space/kernel-module version mismatch, driver loads, GSP timeouts and
//! ECC/row-remapping notices. Every `NVRM:` line is recognised; only these
//! become events.

use std::sync::LazyLock;

use regex::Regex;

use super::{bus_id, printed_bus_id, push};
use crate::model::{Facts, KernelEventKind, KernelTime, Xid};
use crate::source::Span;

/// The Xid line after `NVRM: `. The code is the first integer after `): `,
/// never the first digits after `Xid`, which are the PCI domain.
static XID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^Xid\x20\(
        (?:PCI:)?(?:(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)
           # A bus id the poster masked (`PCI:...`, `PCI:xxxx:xx:xx`): the
           # Xid still counts, on a GPU the inputs do not name.
           |\.\.\.|\x{2026}|[xX]{4}:[xX]{2}:[xX]{2})
        (?:\x20GPU-I:(?P<gi>[0-9]+))?
        (?:\x20GPU-CI:(?P<ci>[0-9]+))?
        \):\x20(?P<code>[0-9]+)
        (?:,\x20pid=(?P<pid>'?<unknown>'?|[0-9]+))?
        (?:,\x20name=(?P<name>[^,]*))?
        (?:,?\x20?(?P<msg>.*))?$",
    )
    .expect("xid regex")
});

/// Xid 154's summary of what recovery the GPU now needs.
static RECOVERY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"GPU recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x[0-9a-fA-F]+ \((?P<to>[^)]*)\)")
        .expect("recovery regex")
});

/// `GPU at PCI:0000:3b:00: GPU-…`; older drivers (and NVIDIA's Xid
/// documentation) print the bus id without `PCI:`.
static GPU_AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^GPU at (?:PCI:)?(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?): (?P<uuid>GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})",
    )
    .expect("gpu-at regex")
});

/// A bus id anywhere in a line, with or without the function; without the
/// domain only with the function (`18:00.0`, as lspci writes it), so that a
/// clock time is never read as one.
static ANY_BUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?|[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b",
    )
    .expect("bus regex")
});

static MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^API\x20mismatch:\x20the\x20client\x20has\x20the\x20version\x20(?P<client>[0-9]+(?:\.[0-9]+)*),\x20but
        (?:(?:\s+|\#012)(?:NVRM:\x20)?this\x20kernel\x20module\x20has\x20the\x20version\x20(?P<kernel>[0-9]+(?:\.[0-9]+)*)\.)?",
    )
    .expect("mismatch regex")
});

/// 575+ name the client first: `API mismatch: the client 'nvidia-smi' (pid
/// 1234)` / `has the version 575.51.02, but this kernel module has` / `the
/// version 570.124.04.  Please make sure that this` / `kernel module and all
/// NVIDIA driver components` / `have the same version.` (osapi.c,
/// RmCheckVersion). A journal message may hold all of it.
static MISMATCH_575: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^API\x20mismatch:\x20the\x20client\x20'[^']*'\x20\(pid\x20[0-9]+\)
        (?:(?:\s+|\#012)(?:NVRM:\x20)?has\x20the\x20version\x20(?P<client>[0-9]+(?:\.[0-9]+)*),\x20but\x20this\x20kernel\x20module\x20has
        (?:(?:\s+|\#012)(?:NVRM:\x20)?the\x20version\x20(?P<kernel>[0-9]+(?:\.[0-9]+)*)\.)?)?",
    )
    .expect("575 mismatch regex")
});

/// The second line of the 575+ report.
static MISMATCH_575_CLIENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^has the version (?P<client>[0-9]+(?:\.[0-9]+)*), but this kernel module has")
        .expect("575 mismatch client regex")
});

/// The third line of the 575+ report.
static MISMATCH_575_KERNEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^the version (?P<kernel>[0-9]+(?:\.[0-9]+)*)\.")
        .expect("575 mismatch kernel regex")
});

/// The last lines of the 575+ report.
const MISMATCH_575_TAIL: [&str; 2] = [
    "kernel module and all NVIDIA driver components",
    "have the same version.",
];

/// `RmInitAdapter failed! (0x26:0xffff:1227)`, after `GPU 0000:3b:00.0: `
/// on drivers that name the device (NV_DEV_PRINTF, osinit.c).
static INIT_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:GPU\x20(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):\x20)?RmInitAdapter\x20failed!\x20?(?:\((?P<status>[^)]*)\))?",
    )
    .expect("init failed regex")
});

/// The first line of the three-line report of a GPU that reads all ones
/// (osapi.c): `The NVIDIA GPU 0000:3b:00.0` / `(PCI ID: 10de:2330)
/// installed in this system has` / `fallen off the bus and is not
/// responding to commands.`
static NVIDIA_GPU_AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^The NVIDIA GPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\s*$",
    )
    .expect("nvidia gpu at regex")
});

static MISMATCH_KERNEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^this kernel module has the version (?P<kernel>[0-9]+(?:\.[0-9]+)*)\.")
        .expect("mismatch continuation regex")
});

/// rsyslog writes a message's newlines as `#012`, so a journal or syslog
/// line may hold the whole report (MISMATCH and MISMATCH_575 allow both).
/// The last two lines of the mismatch report.
const MISMATCH_TAIL: [&str; 2] = [
    "make sure that this kernel module and all NVIDIA driver",
    "components have the same version.",
];

static LOADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^loading {MODULE}")).expect("loading regex"));

/// The module's banner after `NVRM: loading ` (at load, in dmesg) and
/// after `NVRM version: ` (/proc/driver/nvidia/version, nv-procfs.c).
const MODULE: &str = r"NVIDIA UNIX (?P<open>Open Kernel Module for )?\S+(?: Kernel Module)?\s+(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)\b";

static PROC_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{MODULE}")).expect("proc version regex"));

/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  …`, the
/// first line of /proc/driver/nvidia/version, after `NVRM version: `: the
/// module loaded now. Returns whether it was one.
pub(super) fn proc_version(text: &str, span: Span, time: KernelTime, facts: &mut Facts) -> bool {
    let Some(c) = PROC_VERSION.captures(text) else {
        return false;
    };
    let kind = KernelEventKind::DriverLoaded {
        version: c["version"].to_owned(),
        open: c.name("open").is_some(),
    };
    push(facts, kind, time, span);
    true
}

static GSP_TIMEOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)gsp.*time(?:d\x20)?\x20?out|time(?:d\x20)?\x20?out.*gsp").expect("gsp regex")
});

static ECC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:ECC|DBE|SBE|double[\x20-]bit|single[\x20-]bit|row\x20remap[0-9A-Za-z_]*|row\x20remapper|page\x20retirement|retired\x20pages?)\b",
    )
    .expect("ecc regex")
});

/// What a report spread over several lines needs from its first line.
#[derive(Default)]
pub(super) struct NvrmState {
    /// The last API mismatch event, which its next lines complete.
    mismatch: Option<usize>,
    /// The first line of a 575+ API mismatch report whose versions follow.
    mismatch_575: Option<Span>,
    /// `The NVIDIA GPU <bus>`: the bus of the fall off the bus reported next,
    /// and the lines of that report read so far.
    gpu_at: Option<(String, Vec<Span>)>,
}

impl NvrmState {
    /// Reads the text after `NVRM: `.
    pub fn feed(&mut self, text: &str, span: Span, time: KernelTime, facts: &mut Facts) {
        if let Some(c) = XID.captures(text) {
            if let Some(xid) = xid(&c) {
                push(facts, KernelEventKind::Xid(xid), time, span);
            }
            return;
        }
        if let Some(c) = GPU_AT.captures(text) {
            if let Some(bus_id) = bus_id(&c["bus"]) {
                let uuid = c["uuid"].to_ascii_lowercase().replacen("gpu-", "GPU-", 1);
                push(
                    facts,
                    KernelEventKind::GpuAtBus { bus_id, uuid },
                    time,
                    span,
                );
            }
            return;
        }
        if let Some(c) = NVIDIA_GPU_AT.captures(text) {
            self.gpu_at = bus_id(&c["bus"]).map(|b| (b, vec![span]));
            return;
        }
        if text.contains("fallen off the bus") {
            let named = ANY_BUS.find(text).and_then(|m| bus_id(m.as_str()));
            let report = self.gpu_at.take();
            let (bus_id, first, mut related) = match (named, report) {
                (Some(b), _) => (Some(b), span, Vec::new()),
                (None, Some((b, mut lines))) => {
                    let first = lines.remove(0);
                    lines.push(span);
                    (Some(b), first, lines)
                }
                (None, None) => (None, span, Vec::new()),
            };
            let i = push(facts, KernelEventKind::FellOffBus { bus_id }, time, first);
            if let Some(event) = facts.kernel_events.get_mut(i) {
                event.related.append(&mut related);
            }
            return;
        }
        if let Some((_, lines)) = &mut self.gpu_at {
            if text.starts_with("(PCI ID: ") {
                lines.push(span);
                return;
            }
        }
        if text.contains("NV_ERR_GPU_IS_LOST") || text.contains("GPU lost from the bus") {
            let message = text.to_owned();
            push(facts, KernelEventKind::GpuLost { message }, time, span);
            return;
        }
        if let Some(c) = MISMATCH.captures(text) {
            let kind = KernelEventKind::ApiMismatch {
                client_version: c["client"].to_owned(),
                kernel_version: c.name("kernel").map(|k| k.as_str().to_owned()),
            };
            self.mismatch = Some(push(facts, kind, time, span));
            return;
        }
        if let Some(c) = MISMATCH_575.captures(text) {
            match c.name("client") {
                Some(client) => {
                    let kind = KernelEventKind::ApiMismatch {
                        client_version: client.as_str().to_owned(),
                        kernel_version: c.name("kernel").map(|k| k.as_str().to_owned()),
                    };
                    self.mismatch = Some(push(facts, kind, time, span));
                }
                None => self.mismatch_575 = Some(span),
            }
            return;
        }
        if let Some(first) = self.mismatch_575 {
            if let Some(c) = MISMATCH_575_CLIENT.captures(text) {
                self.mismatch_575 = None;
                let kind = KernelEventKind::ApiMismatch {
                    client_version: c["client"].to_owned(),
                    kernel_version: None,
                };
                let i = push(facts, kind, time, first);
                if let Some(event) = facts.kernel_events.get_mut(i) {
                    event.related.push(span);
                }
                self.mismatch = Some(i);
                return;
            }
        }
        if let Some(event) = self.mismatch.and_then(|i| facts.kernel_events.get_mut(i)) {
            if let Some(c) = MISMATCH_575_KERNEL.captures(text) {
                if let KernelEventKind::ApiMismatch { kernel_version, .. } = &mut event.kind {
                    kernel_version.get_or_insert_with(|| c["kernel"].to_owned());
                }
                event.related.push(span);
                return;
            }
            if MISMATCH_575_TAIL.iter().any(|t| text.starts_with(t)) {
                event.related.push(span);
                return;
            }
        }
        if let Some(c) = INIT_FAILED.captures(text) {
            let kind = KernelEventKind::InitFailed {
                bus_id: c.name("bus").and_then(|b| bus_id(b.as_str())),
                status: c.name("status").map(|s| s.as_str().to_owned()),
            };
            push(facts, kind, time, span);
            return;
        }
        if let Some(event) = self.mismatch.and_then(|i| facts.kernel_events.get_mut(i)) {
            if let Some(c) = MISMATCH_KERNEL.captures(text) {
                if let KernelEventKind::ApiMismatch { kernel_version, .. } = &mut event.kind {
                    kernel_version.get_or_insert_with(|| c["kernel"].to_owned());
                }
                event.related.push(span);
                return;
            }
            if MISMATCH_TAIL.iter().any(|t| text.starts_with(t)) {
                event.related.push(span);
                return;
            }
        }
        if let Some(c) = LOADING.captures(text) {
            let kind = KernelEventKind::DriverLoaded {
                version: c["version"].to_owned(),
                open: c.name("open").is_some(),
            };
            push(facts, kind, time, span);
            return;
        }
        if GSP_TIMEOUT.is_match(text) {
            let message = text.to_owned();
            push(facts, KernelEventKind::GspTimeout { message }, time, span);
            return;
        }
        if ECC.is_match(text) {
            let message = text.to_owned();
            push(facts, KernelEventKind::Ecc { message }, time, span);
        }
    }
}

fn xid(c: &regex::Captures<'_>) -> Option<Xid> {
    let number = |name: &str| c.name(name).and_then(|m| m.as_str().parse::<u32>().ok());
    let message = c.name("msg").map_or("", |m| m.as_str()).trim().to_owned();
    let name = c
        .name("name")
        .map(|m| m.as_str().trim())
        .filter(|n| !n.is_empty() && !matches!(*n, "<unknown>" | "'<unknown>'"))
        .map(str::to_owned);
    Some(Xid {
        bus_id: c.name("bus").and_then(|b| printed_bus_id(b.as_str())),
        gpu_instance: number("gi"),
        compute_instance: number("ci"),
        code: number("code")?,
        pid: number("pid"),
        name,
        recovery_action: RECOVERY.captures(&message).map(|r| r["to"].to_owned()),
        message,
    })
}
