//! The rule's tests: a cgroup's unit, and when a SIGKILL exit is the
//! OOM killer's.

use super::*;

#[test]
fn the_unit_of_a_cgroup() {
    let cases = [
        ("/system.slice/sglang.service", Some("sglang.service")),
        (
            "/system.slice/sglang.service/init.scope",
            Some("sglang.service"),
        ),
        ("/system.slice/docker-7c1e9a0b.scope", None),
        ("/user.slice/user-1001.slice/session-12.scope", None),
        (
            "/user.slice/user-21417.slice/user@21417.service",
            Some("user@21417.service"),
        ),
        (
            "/user.slice/user-1001.slice/user@1001.service/app.slice/job.service",
            Some("user@1001.service"),
        ),
        ("/user.slice/user-1001.slice/user@1002.service", None),
        (
            "/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope",
            None,
        ),
        ("/system.slice/.service", None),
        ("/", None),
    ];
    for (path, unit) in cases {
        assert_eq!(unit_of_cgroup(path).as_deref(), unit, "{path}");
    }
}

#[test]
fn a_sigkill_exit_is_attributed_only_with_kernel_evidence_in_time() {
    let kill = OomKill {
        pid: Some(91234),
        ..OomKill::default()
    };
    let main = Some(OwnerBasis::MainPid);
    let child = Some(OwnerBasis::CgroupTree);
    // (owner basis of the victim, seconds from the kill to the exit, attributed)
    let cases = [
        (main, Some(0), true),
        (main, Some(-4), true),
        // Still a process of the unit's cgroup.
        (main, Some(9), true),
        (main, Some(12), false),
        (main, None, true),
        (child, Some(4), true),
        (child, Some(-3), true),
        (child, Some(11), false),
        (child, Some(-20), false),
        (child, None, false),
        (None, Some(2), true),
        (None, None, false),
    ];
    for (basis, dt, expected) in cases {
        assert_eq!(
            attribute(&kill, basis, "sglang.service", dt).is_some(),
            expected,
            "{basis:?} {dt:?}"
        );
    }
}

/// awslabs/mountpoint-s3#1089 (batch Z 1819), reduced to one failed access
/// and the kernel's kill: a small FUSE daemon whose mount's accesses then
/// fail is the workload, an error citing both lines; with a failure of
/// another kind in the same paste it stays a bystander's warning.
#[test]
fn a_fuse_daemon_whose_mount_then_fails_is_the_workload() {
    let kill = "[Mon Oct 28 20:46:38 2024] Out of memory: Killed process 3470 (mount-s3) total-vm:925588kB, anon-rss:282932kB, file-rss:0kB, shmem-rss:0kB, UID:33 pgtables:752kB oom_score_adj:0\n";
    let gone = "cp: error reading '<filename>': Transport endpoint is not connected\n";
    let f = crate::testing::findings_of(META.id, &format!("{gone}{kill}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    crate::testing::cites_line_saying(&f[0], 1, "Transport endpoint is not connected");
    let other = format!("{gone}{kill}ERROR: Failed to connect to the database\n");
    let f = crate::testing::findings_of(META.id, &other);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Warning);
}
