//! `gpu-reset-refused-in-use`: nvidia-smi refused to reset a GPU, change
//! its MIG mode or destroy one of its MIG instances because another client
//! holds the device (`In use by another client`, NVML_ERROR_IN_USE). The
//! holder is often a daemon rather than a job; where the paste itself stops
//! one (`killall nvidia-persistenced`, `nvidia-smi -pm 0`, `rmmod
//! nvidia_drm`, a DCGM or Fabric Manager stop) and a reset typed after it
//! succeeds, that daemon is named as the holder.

use crate::correlate::Incident;
use crate::model::{Message, TypedCommand};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuResetRefusedInUse = GpuResetRefusedInUse;

pub struct GpuResetRefusedInUse;

/// nvidia-smi's refusal of a reset or a MIG mode change (catalogs/nvml.toml).
const RESET: &str = "nvml.reset-refused-in-use";
/// nvidia-smi mig's refusal to destroy an instance.
const MIG: &str = "nvml.mig-instance-in-use";

/// Refusal lines cited at most (the count says how many there were).
const CITED: usize = 8;

/// What a typed command stops, by the words it names it with: the clients
/// that keep a GPU open without being a compute process nvidia-smi lists.
const HOLDERS: &[(&[&str], &str)] = &[
    (
        &[
            "nvidia-persistenced",
            "-pm 0",
            "-pm disabled",
            "--persistence-mode=0",
            "--persistence-mode=disabled",
        ],
        "persistence mode (nvidia-persistenced)",
    ),
    (
        &["nvidia_drm", "nvidia-drm"],
        "the nvidia_drm kernel module",
    ),
    (
        &["nv-hostengine", "nvidia-dcgm", "dcgm-exporter", "dcgm"],
        "DCGM (nv-hostengine, dcgm-exporter)",
    ),
    (&["fabricmanager", "fabric-manager"], "the Fabric Manager"),
    (
        &["display-manager", "gdm", "lightdm", "sddm", "xorg"],
        "the X server",
    ),
];

/// Words of a command that stops, kills, unloads or disables what it names.
const STOPS: &[&str] = &[
    "kill",
    "stop",
    "rmmod",
    "modprobe -r",
    "-pm 0",
    "-pm disabled",
    "--persistence-mode=0",
    "--persistence-mode=disabled",
    "disable",
];

/// What nvidia-smi prints when a reset or a MIG teardown went through.
const DONE: &[&str] = &["successfully reset", "successfully destroyed"];

static META: RuleMeta = RuleMeta {
    id: "gpu-reset-refused-in-use",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "nvidia-smi could not reset a GPU, change its MIG mode or destroy a MIG instance: another client holds the device (In use by another client)",
    anchors: &[],
    doc: r#"
## What it means
A GPU reset (`nvidia-smi -r`, and the reset a MIG mode change or
`nvidia-mig-parted apply` needs) and the teardown of a MIG instance
(`nvidia-smi mig -dci` / `-dgi`) are refused while any client has the
device open. nvidia-smi says so in NVML's words for NVML_ERROR_IN_USE:

```
The following GPUs could not be reset:
  GPU 00000000:1A:00.0: In use by another client
```

(`GPU … is currently in use by another process.` on R450; `Warning: MIG
mode is in pending disable state for GPU …:In use by another client` for
a MIG mode change; `unable to destroy compute instance id  0 from gpu  0
gpu instance id  3: in use by another client` for an instance).

The holder is often no job of the user's, and nvidia-smi lists none:
persistence mode (nvidia-persistenced, which the GPU Operator's driver pod
starts), DCGM or dcgm-exporter, the Fabric Manager, an X server, the
nvidia_drm kernel module; for a MIG instance, a process left by the job
that ran on it. Where the paste stops one of them (`killall
nvidia-persistenced`, `nvidia-smi -pm 0`, `rmmod nvidia_drm`, `systemctl
stop nvidia-dcgm`) and a reset or teardown typed after it succeeds (`GPU …
was successfully reset.`), the finding names it as the holder.

## Why it happens
Resets and MIG changes need every client of the device gone; daemons that
keep it open (to keep the driver loaded, to sample metrics, to drive a
display) count as clients.

## How to confirm
`sudo lsof /dev/nvidia*` or `fuser -v /dev/nvidia* /dev/dri/*` for the
processes with the device open; `nvidia-smi -q | grep -i persistence`;
`lsmod | grep nvidia_drm`.

## How to fix
Stop the holder for the reset and start it again after: `nvidia-smi -pm 0
-i N` (then `-pm 1`), `systemctl stop nvidia-dcgm` / the dcgm-exporter pod,
`systemctl stop nvidia-fabricmanager`, `modprobe -r nvidia_drm` on a
compute node; end a leftover process of a finished job on a MIG instance.

## Safety
Advice only: stopping daemons or processes on a shared node is the
operator's decision.
"#,
};

impl Rule for GpuResetRefusedInUse {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut lines: Vec<(&Message, bool)> = incident
            .known(RESET)
            .map(|(m, _)| (m, false))
            .chain(incident.known(MIG).map(|(m, _)| (m, true)))
            .collect();
        lines.sort_by_key(|(m, _)| m.span);
        lines.dedup_by_key(|(m, _)| m.span);
        let Some(&(first, _)) = lines.first() else {
            return;
        };
        let instance = lines.iter().all(|(_, mig)| *mig);
        let gpu = gpu_named(incident, instance);
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = u32::try_from(lines.len()).unwrap_or(u32::MAX);
        for (m, _) in lines.iter().take(CITED) {
            f.evidence(
                m.span,
                if instance {
                    "nvidia-smi could not destroy the MIG instance: in use by another client"
                } else {
                    "nvidia-smi could not reset the GPU: in use by another client"
                },
            );
        }
        let freed = holder(incident, first);
        write(&mut f, &gpu, instance, freed);
        out.push(f);
    }
}

/// The holder the paste stops after the refusal (a typed command naming
/// one) and the later reset or teardown that went through, when typed.
struct Freed<'a> {
    stop: &'a TypedCommand,
    holder: &'static str,
    done: Option<&'a TypedCommand>,
}

fn holder<'a>(incident: &'a Incident, first: &Message) -> Option<Freed<'a>> {
    let later = || {
        incident
            .facts
            .typed_commands
            .iter()
            .filter(move |c| c.span.source == first.span.source && c.span > first.span)
    };
    let (stop, holder) = later().find_map(|c| {
        let text = c.command.to_ascii_lowercase();
        if !STOPS.iter().any(|s| text.contains(s)) {
            return None;
        }
        HOLDERS
            .iter()
            .find(|(needles, _)| needles.iter().any(|n| text.contains(n)))
            .map(|(_, name)| (c, *name))
    })?;
    let done = later().filter(|c| c.span > stop.span).find(|c| {
        c.first_output.as_deref().is_some_and(|o| {
            let o = o.to_ascii_lowercase();
            DONE.iter().any(|d| o.contains(d))
        })
    });
    Some(Freed { stop, holder, done })
}

/// The GPU as the refusals name it: the first bus id they capture, else
/// the GPU index of a MIG instance's line.
fn gpu_named(incident: &Incident, instance: bool) -> String {
    let captured = |row: &'static str, name: &'static str| {
        incident
            .known(row)
            .find_map(move |(_, hit)| hit.get(name).map(str::to_owned))
    };
    if let Some(b) = captured(RESET, "bus") {
        return format!("the GPU at {b}");
    }
    match captured(MIG, "gpu") {
        Some(g) => format!("a MIG instance of GPU {g}"),
        None if instance => "a MIG instance".to_owned(),
        None => "the GPU".to_owned(),
    }
}

fn write(f: &mut Finding, gpu: &str, instance: bool, freed: Option<Freed<'_>>) {
    let what = if instance {
        format!("{gpu} could not be destroyed")
    } else {
        format!("{gpu} could not be reset")
    };
    f.condition(
        "nvidia-smi refused with NVML's In use by another client",
        true,
    );
    let named = freed.as_ref().map(|fr| fr.holder);
    match &freed {
        Some(fr) => {
            f.evidence(
                fr.stop.span,
                format!(
                    "the paste then stops {}: `{}`",
                    fr.holder,
                    fr.stop.command.trim()
                ),
            );
            if let Some(d) = fr.done {
                f.evidence(
                    d.span,
                    format!(
                        "and the reset typed after it went through: {}",
                        d.first_output.as_deref().unwrap_or_default().trim()
                    ),
                );
            }
            f.condition(format!("the paste stops {}", fr.holder), true);
            f.condition(
                "a reset typed after the stop went through",
                fr.done.is_some(),
            );
        }
        None => {
            f.condition(
                "the holder is named (missing: sudo lsof /dev/nvidia*)",
                false,
            );
        }
    }
    let by = match (named, freed.as_ref().is_some_and(|fr| fr.done.is_some())) {
        (Some(h), true) => format!("{h} held it: the reset went through once it was stopped"),
        (Some(h), false) => format!("the paste then stops {h}, the likely holder"),
        (None, _) if instance => {
            "a process left by a job on the instance, or a monitoring agent's handle, still holds it".to_owned()
        }
        (None, _) => "another client (a persistence or monitoring daemon, nvidia_drm, a leftover process) still holds the device".to_owned(),
    };
    f.title = format!("{what} (In use by another client): {by}");
    f.headline =
        format!("nvidia-smi says {what}: In use by another client (NVML_ERROR_IN_USE); {by}.");
    f.chain.push(format!(
        "{what}: the operation needs every client of the device gone"
    ));
    f.chain.push(match named {
        Some(h) => format!("{h} kept the device open"),
        None => "another client keeps the device open".to_owned(),
    });
    f.explanation = "A GPU reset, a MIG mode change and a MIG instance's teardown are refused while any client has the device open; daemons that keep it open (nvidia-persistenced, DCGM, the Fabric Manager, an X server, nvidia_drm) count as clients, and nvidia-smi lists none of them as a process.".to_owned();
    f.actions.push(Action::advice(
        "find what has the device open",
        Some("sudo lsof /dev/nvidia* 2>/dev/null; sudo fuser -v /dev/nvidia* /dev/dri/* 2>&1; nvidia-smi -q | grep -i persistence; lsmod | grep nvidia_drm"),
    ));
    f.actions.push(Action::advice(
        if instance {
            "end the leftover process of the finished job, or restart the monitoring agent that keeps a handle (nvidia-dcgm, dcgm-exporter), then destroy the instances again"
        } else {
            "stop the holder for the reset and start it again after: nvidia-smi -pm 0 -i N (then -pm 1) for persistence mode, systemctl stop nvidia-dcgm / the dcgm-exporter pod, systemctl stop nvidia-fabricmanager, modprobe -r nvidia_drm on a compute node"
        },
        None,
    ));
    f.confidence = confidence(f, 0.6, 0.85);
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// NVIDIA/NVSentinel#1692's description: the reset refused, persistence
    /// mode turned off, the same reset through.
    const PM: &str = "\
The following GPUs could not be reset:
  GPU 00000000:1A:00.0: In use by another client
exit=255
$ nvidia-smi -pm 0 -i <uuid>
All done.
$ nvidia-smi -r -i <uuid>
GPU 00000000:1A:00.0 was successfully reset.
exit=0
";

    #[test]
    fn the_daemon_stopped_before_a_reset_that_went_through_is_the_holder() {
        let f = findings_of(super::META.id, PM);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].title.contains("00000000:1A:00.0"), "{}", f[0].title);
        assert!(f[0].title.contains("persistence mode"), "{}", f[0].title);
        crate::testing::cites_line(&f[0], 2);
        crate::testing::cites_line_saying(&f[0], 4, "persistence");
        crate::testing::cites_line_saying(&f[0], 6, "successfully reset");
    }

    /// NVIDIA/mig-parted#181: four GPUs refused under mig-parted's logrus
    /// lines, no holder in the paste: the GPUs held, the daemons to look
    /// for advised.
    #[test]
    fn a_refusal_with_no_holder_in_the_paste_advises_where_to_look() {
        let text = "\
ERRO[0003]
The following GPUs could not be reset:
  GPU 00000000:01:00.0: In use by another client
  GPU 00000000:47:00.0: In use by another client
  GPU 00000000:81:00.0: In use by another client
  GPU 00000000:C2:00.0: In use by another client

4 devices are currently being used by one or more other processes (e.g., Fabric Manager, CUDA application, graphics application such as an X server, or a monitoring application such as another instance of nvidia-smi). Please first kill all processes using these devices and all compute applications running in the system.
FATA[0008] Error applying MIG configuration with hooks: error resetting all GPUs: exit status 255
";
        let f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].occurrences, 5);
        crate::testing::advises(&f[0], "lsof /dev/nvidia");
        crate::testing::advises(&f[0], "nvidia_drm");
    }

    /// NVIDIA/DCGM#95: a MIG compute instance that cannot be destroyed,
    /// in lower case as pasted: named by its GPU's index.
    #[test]
    fn a_mig_instance_in_use_is_read_in_either_case() {
        let text = "\
unable to destroy compute instance id  0 from gpu  0 gpu instance id  3: in use by another client
failed to destroy compute instances: in use by another client
";
        let f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&0), "{f:#?}");
        assert!(f[0].title.contains("MIG instance"), "{}", f[0].title);
    }

    /// A reset that went through is no finding.
    #[test]
    fn a_successful_reset_is_no_finding() {
        let text = "$ nvidia-smi -r -i 0\nGPU 00000000:1A:00.0 was successfully reset.\n";
        assert!(findings_of(super::META.id, text).is_empty());
    }
}
