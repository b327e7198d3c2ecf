//! `hung-task-in-nvidia-driver`: the kernel's hung-task report (`INFO: task
//! gdscheck:509579 blocked for more than 120 seconds.`) whose call trace
//! runs through the NVIDIA driver's modules (`os_acquire_rwlock_read+0x35/0x50
//! [nvidia]`): the task waits on the driver, which no longer answers. A GPU
//! or driver wedged with no Xid in view, and why a stop or a reboot stalls.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: HungTaskInNvidiaDriver = HungTaskInNvidiaDriver;

pub struct HungTaskInNvidiaDriver;

/// A call-trace frame in `[nvidia]`, `[nvidia_uvm]`, `[nvidia_modeset]`,
/// `[nvidia_drm]` or `[nvidia_peermem]` (kernel/kallsyms.c's `%pS`).
const FRAME: &str = "kernel.stack-frame-nvidia";

/// Lines after the report within which its call trace lies: the report,
/// its task line and a trace of a few dozen frames (x86's register dump
/// included).
const TRACE_LINES: u32 = 80;

static META: RuleMeta = RuleMeta {
    id: "hung-task-in-nvidia-driver",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "a task hung in D state inside the NVIDIA driver (its call trace in [nvidia], [nvidia_uvm] or [nvidia_modeset]): the driver or GPU is wedged",
    anchors: &[],
    doc: r#"
## What it means
The kernel's hung-task watchdog found a task in uninterruptible sleep (D
state) for longer than `hung_task_timeout_secs` (`INFO: task NAME:PID
blocked for more than 120 seconds.`), and the call trace printed under it
runs through the NVIDIA driver's kernel modules (`os_acquire_rwlock_read
[nvidia]`, `uvm_gpu_retain_by_uuid [nvidia_uvm]`): the task waits for the
driver's resource-manager lock or for a GPU that no longer answers. Every
other process that calls into the driver (nvidia-smi, the persistence
daemon, a model server stopping) blocks behind it, which is why stops and
reboots stall.

## Why it happens
A GPU fault that left the driver holding its lock (often with an Xid
before it, sometimes with none in view), a GPU that fell into a bad state
(GSP, PCIe), or a driver bug. A hung task whose trace is in a filesystem,
a disk or the network is not this rule's: that is I/O, reported by the
kernel row alone as a warning.

## How to confirm
`dmesg -T | grep -iE 'xid|NVRM'` for the GPU fault before it; `ps -eo
pid,stat,wchan:32,cmd | awk '$2 ~ /^D/'` for the tasks stuck; `cat
/proc/PID/stack` shows the same frames.

## How to fix
A task in D state cannot be killed (not even with SIGKILL): reset the GPU
(`nvidia-smi -r`, once nothing else uses it) or reboot the host (a hard
reset if the reboot stalls on the driver). Collect `nvidia-bug-report.sh`
first, for NVIDIA.

## Safety
Advice only: a reset or a reboot stops everything on the GPU or the host.
"#,
};

impl Rule for HungTaskInNvidiaDriver {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The watchdog's reports, and the D-state lines shown without one
        // (a paste cut below the report, SysRq-w's dump).
        let mut reports = crate::rules::support::hung_tasks(incident);
        reports.extend(crate::rules::support::blocked_tasks_unreported(incident));
        reports.sort_by_key(|r| r.message.span);
        let frames: Vec<_> = incident.known(FRAME).collect();
        if frames.is_empty() {
            return;
        }
        for (i, task) in reports.iter().enumerate() {
            let m = task.message;
            // Its trace: the frames after it, before the next report.
            let next = reports[i + 1..]
                .iter()
                .find(|n| n.message.span.source == m.span.source)
                .map_or(u32::MAX, |n| n.message.span.line);
            let mine: Vec<(&Message, &str, &str)> = frames
                .iter()
                .filter(|(f, h)| {
                    f.span.source == m.span.source
                        && f.span.line > m.span.line
                        && f.span.line < next
                        && f.span.line - m.span.line <= TRACE_LINES
                        && h.get("unsure").is_none()
                })
                .filter_map(|(f, h)| Some((*f, h.get("func")?, h.get("module")?)))
                .collect();
            let Some(&(first, func, module)) = mine.first() else {
                continue;
            };
            out.push(finding(
                incident,
                (m, task.pid, task.comm, task.secs),
                (first, func, module),
                &mine,
            ));
        }
    }
}

/// The finding for one hung task (`task`: its report, PID, name and the
/// seconds) whose first reliable frame in the driver is `frame`.
fn finding(
    incident: &Incident,
    task: (&Message, u32, &str, &str),
    frame: (&Message, &str, &str),
    frames: &[(&Message, &str, &str)],
) -> Finding {
    let (report, pid, comm, secs) = task;
    let (at, func, module) = frame;
    // How long, where the watchdog said it; a D-state line alone says
    // only that the task is blocked.
    let blocked = if secs.is_empty() {
        "is blocked in D state (uninterruptible sleep)".to_owned()
    } else {
        format!("has been blocked in D state for more than {secs} s")
    };
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence_marked(
        report.span,
        format!("the kernel: {comm} (PID {pid}) {blocked}"),
        comm,
    );
    f.evidence(
        at.span,
        format!("its call trace is inside the NVIDIA driver: {func} [{module}]"),
    );
    cite_what_it_waits_for(&mut f, at, frames);
    // The outermost driver frame: where the call entered the driver.
    if let Some(&(last, lfunc, lmodule)) = frames.last().filter(|l| l.0.span != at.span) {
        f.evidence(last.span, format!("called from {lfunc} [{lmodule}]"));
    }
    f.entities.pids.insert(pid);
    if let Some(o) = incident.owner(pid) {
        f.entities.units.insert(o.unit.clone());
    }
    f.condition(
        "the kernel reported a hung task (D state)",
        !secs.is_empty(),
    );
    f.condition("its call trace has frames in an NVIDIA kernel module", true);
    f.condition(
        "the task waits on a lock of the driver",
        frames.iter().any(|(_, fu, _)| fu.contains("lock")),
    );
    f.title = format!("{comm} (PID {pid}) is hung inside the NVIDIA driver ({module})");
    f.headline = format!(
        "{comm} (PID {pid}) {blocked} inside the NVIDIA driver ({func} in {module}): the driver or the GPU is wedged, and every process that calls into it (nvidia-smi, the persistence daemon, a server stopping) blocks the same way."
    );
    f.chain.push(if secs.is_empty() {
        format!("{comm} (PID {pid}) does not return from the kernel (D state)")
    } else {
        format!("{comm} (PID {pid}) does not return from the kernel (D state, {secs} s)")
    });
    f.chain.push(format!(
        "it waits inside the NVIDIA driver ({func} [{module}]), which no longer answers"
    ));
    f.explanation = "A task in uninterruptible sleep inside the GPU driver cannot be killed, not even with SIGKILL; the driver's lock or the GPU it waits for is stuck. Only a GPU reset or a reboot frees it; a reboot may itself stall on the driver.".to_owned();
    f.actions.push(Action::advice(
        "look for the GPU fault before the hang and list the tasks stuck in D state",
        Some(&format!(
            "dmesg -T | grep -iE 'xid|NVRM'; ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /^D/'; cat /proc/{pid}/stack"
        )),
    ));
    f.actions.push(Action::advice(
        "collect the driver's state for NVIDIA before any reset",
        Some("sudo nvidia-bug-report.sh"),
    ));
    f.actions.push(Action::advice(
        "reset the GPU once nothing else uses it, or reboot the host (a hard reset if the reboot stalls on the driver): kill -9 cannot end a task in D state",
        Some("sudo nvidia-smi -r"),
    ));
    f.confidence = confidence(&f, 0.6, 0.8);
    f
}

/// Cites, beyond the innermost driver frame `at`, the driver's lock the
/// task waits to take (`rmapiLockAcquire`) and what the driver was doing
/// when it took it (an init: `kgspInitRm_IMPL`, `RmInitAdapter`).
fn cite_what_it_waits_for(f: &mut Finding, at: &Message, frames: &[(&Message, &str, &str)]) {
    // The outermost lock frame: where the driver decided to take it.
    let lock = frames
        .iter()
        .rev()
        .find(|(m, fu, _)| m.span != at.span && fu.contains("LockAcquire"));
    if let Some(&(m, fu, md)) = lock {
        f.evidence_marked(
            m.span,
            format!("the driver's lock it waits to take: {fu} [{md}]"),
            fu,
        );
    }
    let init = frames
        .iter()
        .find(|(m, fu, _)| m.span != at.span && (fu.contains("Init") || fu.contains("_init_")));
    if let Some(&(m, fu, md)) = init {
        f.evidence_marked(
            m.span,
            format!("what the driver was doing: initialising a GPU ({fu} [{md}])"),
            fu,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// nvidia-persistenced #15: a hung task waiting on the resource
    /// manager's lock (a 5.15 kernel's trace).
    const PERSISTENCED: &str =
        "[ 7510.129324] INFO: task gdscheck:509579 blocked for more than 120 seconds.
[ 7510.129968]       Tainted: P           OE     5.15.0-141-generic #151-Ubuntu
[ 7510.130601] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
[ 7510.131217] task:gdscheck        state:D stack:    0 pid:509579 ppid: 11174 flags:0x00000006
[ 7510.131227] Call Trace:
[ 7510.131230]  <TASK>
[ 7510.131238]  __schedule+0x24e/0x590
[ 7510.131256]  schedule+0x69/0x110
[ 7510.131259]  schedule_preempt_disabled+0xe/0x20
[ 7510.131262]  rwsem_down_read_slowpath+0x33b/0x390
[ 7510.131268]  ? update_curr+0xf0/0x1e0
[ 7510.131280]  down_read+0x43/0xa0
[ 7510.131288]  os_acquire_rwlock_read+0x35/0x50 [nvidia]
[ 7510.132138]  _nv051482rm+0x10/0x40 [nvidia]
[ 7510.133677]  ? _nv052958rm+0x2cc/0x360 [nvidia]
";

    /// NVIDIA/k8s-device-plugin #77: a 4.4 kernel's report (addresses in
    /// front of each frame), the task waiting in nvidia_uvm.
    const K8S_PLUGIN: &str =
        "[  721.028170] INFO: task nvc:[driver]:5403 blocked for more than 120 seconds.
[  721.028229]       Tainted: P           O    4.4.146-1.el7.elrepo.x86_64 #1
[  721.028273] \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
[  721.028323] nvc:[driver]    D ffff883f2cc43bd8     0  5403   5396 0x00000084
[  721.028331]  ffff883f2cc43bd8 ffffffff8170e16e ffff883f33d62c80 ffff883f2cc44000
[  721.028336]  ffffffffa0a53a9c ffff883f33d62c80 00000000ffffffff ffffffffa0a53aa0
[  721.028341]  ffff883f2cc43bf0 ffffffff8170de85 ffffffffa0a53a98 ffff883f2cc43c00
[  721.028346] Call Trace:
[  721.028360]  [<ffffffff8170e16e>] ? schedule_preempt_disabled+0xe/0x10
[  721.028368]  [<ffffffff8170de85>] schedule+0x35/0x80
[  721.028374]  [<ffffffff8170e16e>] schedule_preempt_disabled+0xe/0x10
[  721.028379]  [<ffffffff8170fca4>] __mutex_lock_slowpath+0xb4/0x130
[  721.028383]  [<ffffffff8170fd3f>] mutex_lock+0x1f/0x2f
[  721.028422]  [<ffffffffa09c376e>] uvm_gpu_retain_by_uuid+0x1e/0x40 [nvidia_uvm]
";

    /// gluster/gluster-health-report #19: a hung task in the VFS (a
    /// filesystem's lock), no driver frame: not this rule's.
    const GLUSTER: &str = "Oct 11 06:07:26 glustern1 kernel: INFO: task glusterfsd:26120 blocked for more than 120 seconds.
Oct 11 06:07:26 glustern1 kernel: \"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.
Oct 11 06:07:26 glustern1 kernel: bptm            D ffff8817dddf80b0     0 26120  26119 0x00000080
Oct 11 06:07:26 glustern1 kernel: ffff882fd0627c70 0000000000000086 ffff880844fe8fb0 ffff882fd0627fd8
Oct 11 06:07:26 glustern1 kernel: ffff882fd0627fd8 ffff882fd0627fd8 ffff880844fe8fb0 ffff8817dddf80a8
Oct 11 06:07:26 glustern1 kernel: ffff8817dddf80ac ffff880844fe8fb0 00000000ffffffff ffff8817dddf80b0
Oct 11 06:07:26 glustern1 kernel: Call Trace:
Oct 11 06:07:26 glustern1 kernel: [<ffffffff8168c889>] schedule_preempt_disabled+0x29/0x70
Oct 11 06:07:26 glustern1 kernel: [<ffffffff8168a4e5>] __mutex_lock_slowpath+0xc5/0x1c0
Oct 11 06:07:26 glustern1 kernel: [<ffffffff8168994f>] mutex_lock+0x1f/0x2f
Oct 11 06:07:26 glustern1 kernel: [<ffffffff8120ccff>] do_last+0x28f/0x12a0
Oct 11 06:07:26 glustern1 kernel: [<ffffffff8120ddd2>] path_openat+0xc2/0x490
";

    #[test]
    fn a_task_hung_on_the_resource_managers_lock() {
        let f = findings_of(super::META.id, PERSISTENCED);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&509579));
        assert!(f[0].headline.contains("os_acquire_rwlock_read in nvidia"));
        assert_eq!(f[0].evidence[0].span.line, 1);
        // The `? ` frames are stale words, not the call.
        assert!(f[0].evidence.iter().all(|e| e.span.line != 15));
        crate::testing::advises(&f[0], "nvidia-bug-report.sh");
    }

    /// The next paste: an older kernel's frames, another module, a task
    /// name with colons in it.
    #[test]
    fn a_task_hung_in_nvidia_uvm_on_an_old_kernel() {
        let f = findings_of(super::META.id, K8S_PLUGIN);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&5403));
        assert!(
            f[0].title.contains("nvc:[driver] (PID 5403)"),
            "{}",
            f[0].title
        );
        assert!(f[0].title.contains("nvidia_uvm"));
    }

    /// A hung task in a filesystem keeps the kernel row's warning alone;
    /// driver frames far from a report, or before it, are not its trace.
    #[test]
    fn other_hung_tasks_and_stray_frames_are_not_the_drivers() {
        assert!(findings_of(super::META.id, GLUSTER).is_empty());
        let a = crate::testing::analyze_paste(GLUSTER);
        assert!(
            a.diagnosis
                .findings
                .iter()
                .any(|f| f.category.name() == "server-hang")
        );
        let frame = "[ 7510.131288]  os_acquire_rwlock_read+0x35/0x50 [nvidia]\n";
        let before = format!("{frame}{GLUSTER}");
        assert!(findings_of(super::META.id, &before).is_empty());
        let far = format!("{GLUSTER}{}{frame}", "some other line\n".repeat(90));
        assert!(findings_of(super::META.id, &far).is_empty());
    }
}
