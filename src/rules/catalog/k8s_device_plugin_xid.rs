//! `k8s-device-plugin-xid`: the Kubernetes NVIDIA device plugin saw a
//! critical Xid on a GPU and took it out of scheduling (`XidCriticalError:
//! Xid=69 on Device=GPU-…`), with or without the kernel's Xid line.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::xid;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: K8sDevicePluginXid = K8sDevicePluginXid;

pub struct K8sDevicePluginXid;

/// `XidCriticalError: Xid=69 on Device=GPU-…, the device will go unhealthy.`
/// (plugin v0.x), `XidCriticalError: Xid=79 on Device=GPU-…; marking device
/// as unhealthy.` (later releases, after a klog prefix), and `'nvidia.com/gpu'
/// device marked unhealthy: GPU-…`: the device plugin's catalog rows
/// (catalogs/stacks-k8s.toml).
const XID: &str = "stacks-k8s.device-plugin-xid-critical";
const UNHEALTHY: &str = "stacks-k8s.device-plugin-device-unhealthy";

/// A GPU UUID inside a device id (time-slicing appends `::N`).
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"GPU-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}").expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "k8s-device-plugin-xid",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "the Kubernetes NVIDIA device plugin saw a critical Xid on a GPU and marked it unhealthy",
    // The device plugin's rows bring their own anchors.
    anchors: &[],
    doc: r#"
## What it means
`XidCriticalError: Xid=69 on Device=GPU-7540a9b3-…, the device will go
unhealthy.` (newer plugins: `…; marking device as unhealthy.`), then
`'nvidia.com/gpu' device marked unhealthy: GPU-…`: the NVIDIA device
plugin received a critical Xid event from NVML for that GPU and reported
it unhealthy to the kubelet. The node's allocatable `nvidia.com/gpu`
drops by one; pods asking for GPUs may stay Pending; the GPU stays out of
scheduling until the plugin restarts, even if the fault has cleared.

The plugin names the GPU by UUID only; its index and bus id are in
`nvidia-smi -L` and the kernel's Xid line.

## Why it happens
Whatever the Xid means (the report names it): an application fault
(13, 31, 43, 69 are often the program's), a fatal GPU error (48, 79, 95,
119 …). The plugin treats every Xid it does not skip as fatal; some
clusters disable health checks for application Xids
(`DP_DISABLE_HEALTHCHECKS`).

## How to confirm
On the node: `journalctl -k | grep -i xid` for the kernel's line (bus id,
process, details); `nvidia-smi -q -i UUID` for the GPU's state;
`kubectl describe node` for the allocatable count.

## How to fix
Understand the Xid first: for an application fault fix or restart the
workload; for a GPU fault drain the node and reset or reboot. Then restart
the device plugin pod on the node so it re-registers the GPU as healthy.

## Safety
Advice only: what to do depends on the Xid and the node's workloads.
"#,
};

impl Rule for K8sDevicePluginXid {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for Device {
            key: dev,
            xids,
            unhealthy,
            resource,
        } in devices(incident)
        {
            let mut f = Finding::new(META.id, META.category, META.severity);
            let gpu = incident
                .gpus
                .iter()
                .find(|g| g.uuid.as_deref() == Some(dev.as_str()));
            if let Some(g) = gpu {
                f.entities.gpus.insert(g.index);
            }
            let label = match gpu {
                Some(g) => format!("GPU {} ({dev})", g.index),
                None => dev.clone(),
            };
            let mut codes: Vec<u32> = Vec::new();
            for (m, code) in &xids {
                f.entities.xid.insert(*code);
                if !codes.contains(code) {
                    codes.push(*code);
                    f.evidence(
                        m.span,
                        format!(
                            "the device plugin: {} on {dev}, the GPU goes unhealthy",
                            xid::describe(*code)
                        ),
                    );
                }
            }
            if let Some(m) = unhealthy.first() {
                f.evidence(
                    m.span,
                    format!(
                        "{dev} is marked unhealthy: Kubernetes no longer schedules {} on it",
                        if resource.is_empty() {
                            "GPUs"
                        } else {
                            resource.as_str()
                        }
                    ),
                );
            }
            // The kernel's line for the same code, when captured, says more.
            let kernel = incident
                .xids()
                .find(|(_, x)| codes.contains(&x.code))
                .map(|(e, _)| e.span);
            if let Some(span) = kernel {
                f.evidence(span, "the kernel's line for the same Xid");
            }
            f.condition("the device plugin names the Xid and the GPU", true);
            f.condition("the GPU was marked unhealthy", !unhealthy.is_empty());
            f.condition("the kernel's Xid line is in the inputs", kernel.is_some());
            // With the kernel's line the Xid rules tell the story; this is
            // the scheduling consequence.
            if kernel.is_some() {
                f.severity = Severity::Warning;
            }
            let list = codes
                .iter()
                .map(|c| xid::describe(*c))
                .collect::<Vec<_>>()
                .join(", ");
            f.title = format!("{label} marked unhealthy by the device plugin after {list}");
            f.headline = format!(
                "The Kubernetes device plugin saw {list} on {label} and marked the GPU unhealthy: it is out of scheduling until the plugin restarts.{}",
                if kernel.is_none() {
                    " The kernel's Xid line, not in the inputs, has the details."
                } else {
                    ""
                }
            );
            f.chain.push(format!(
                "pods needing a GPU cannot use {label} (allocatable GPUs drop)"
            ));
            f.chain
                .push(format!("the device plugin marked {label} unhealthy"));
            f.chain.push(format!("{list} on the GPU"));
            f.explanation = format!(
                "{}: {}. The device plugin takes a GPU out of scheduling for any critical Xid it does not skip, and keeps it out until it restarts.",
                list,
                codes
                    .iter()
                    .filter_map(|c| xid::info(*c).map(|i| i.bucket))
                    .next()
                    .unwrap_or("see NVIDIA's Xid catalog")
            );
            f.actions.extend(actions(&dev));
            f.confidence = confidence(&f, 0.7, 0.9);
            out.push(f);
        }
    }
}

/// What the device plugin said, one entry per GPU (UUID, or device id
/// without one) that it reported an Xid for, with its unhealthy lines.
fn devices(incident: &Incident) -> Vec<Device<'_>> {
    let mut per_device: Vec<Device> = Vec::new();
    for (m, c) in incident.known(XID) {
        let (Some(Ok(code)), Some(dev)) = (c.get("xid").map(str::parse::<u32>), c.get("device"))
        else {
            continue;
        };
        let key = device_key(dev);
        match per_device.iter_mut().find(|d| d.key == key) {
            Some(d) => d.xids.push((m, code)),
            None => per_device.push(Device {
                key,
                xids: vec![(m, code)],
                unhealthy: Vec::new(),
                resource: String::new(),
            }),
        }
    }
    for (m, c) in incident.known(UNHEALTHY) {
        let key = device_key(c.get("device").unwrap_or_default());
        if let Some(d) = per_device.iter_mut().find(|d| d.key == key) {
            d.unhealthy.push(m);
            d.resource = c.get("resource").unwrap_or_default().to_owned();
        }
    }
    per_device
}

/// What to do about the Xid on `dev`: read the kernel's account, look at
/// the GPU's state, then restart the device plugin pod.
fn actions(dev: &str) -> Vec<Action> {
    vec![
        Action::advice(
            "read the kernel's account of the Xid on the node (bus id, process, details)",
            Some("journalctl -k --no-pager | grep -i xid"),
        ),
        Action::advice(
            format!("look at the GPU's state ({dev})"),
            Some("nvidia-smi -L; nvidia-smi -q -d ECC,ROW_REMAPPER,RECOVERY_ACTION"),
        ),
        Action::advice(
            "once the Xid is understood (workload fixed, or GPU reset / node rebooted), restart the device plugin pod on the node so it registers the GPU as healthy again",
            None,
        ),
    ]
}

/// What the device plugin said about one device.
struct Device<'a> {
    /// The GPU's UUID, or the device id when it holds none.
    key: String,
    xids: Vec<(&'a Message, u32)>,
    unhealthy: Vec<&'a Message>,
    /// The extended resource (`nvidia.com/gpu`).
    resource: String,
}

/// The GPU's UUID inside a device id, or the id itself.
fn device_key(dev: &str) -> String {
    UUID.find(dev)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| dev.trim_end_matches(['.', ',', ';']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_plugin_wordings_and_replica_ids() {
        let xid = |line: &str| {
            crate::catalogs::catalogs()
                .hits(line)
                .into_iter()
                .find(|h| h.row.is_some_and(|r| r.id == XID))
        };
        for line in [
            "XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.",
            "I1025 02:19:08.048144 1 health.go:169] XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8; marking device as unhealthy.",
            "XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8::3; marking device as unhealthy.",
        ] {
            let c = xid(line).expect(line);
            assert_eq!(c.get("xid"), Some("69"));
            assert_eq!(
                device_key(c.get("device").unwrap()),
                "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8"
            );
        }
        assert!(
            xid("Skipping non-nvmlEventTypeXidCriticalError event: {Device:{Handle:0x7f0dcf40bdf8} EventType:2}")
                .is_none()
        );
    }
}
