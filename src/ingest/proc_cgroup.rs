//! `/proc/PID/cgroup` (docs/formats/procfs.md): `hierarchy:controllers:path`
//! lines, one (cgroup v2) or several (v1, hybrid) per process, read into one
//! [`ProcCgroup`] per process with the owner its path names: a systemd unit,
//! a user unit, a login session, a container, a Kubernetes pod.
//!
//! Whose file it was comes from the paste: the `$ cat /proc/4318/cgroup`
//! prompt above it, `head`'s `==> /proc/4318/cgroup <==`, or a prefix on
//! each line (`grep . /proc/*/cgroup` prints `/proc/4318/cgroup:0::/…`, a
//! shell loop `4318:0::/…`).

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{CgroupOwner, Facts, ProcCgroup};
use crate::source::Span;

static CGROUP_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:/proc/(?P<file_pid>[0-9]+|self)/cgroup:|(?P<loop_pid>[0-9]+):)?
        (?P<hierarchy>[0-9]+):(?P<controllers>[^:/]*):(?P<path>/.*)$",
    )
    .expect("cgroup line regex")
});

static PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?cat\s+/proc/(?P<pid>[0-9]+|self)/cgroup\s*$",
    )
    .expect("cgroup prompt regex")
});

static HEAD_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^==> /proc/(?P<pid>[0-9]+|self)/cgroup <==$").expect("head header regex")
});

static KUBE_POD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})",
    )
    .expect("pod regex")
});
static KUBE_QOS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"kubepods[-/](?P<qos>besteffort|burstable)").expect("qos regex"));
/// The container's scope or directory: `cri-containerd-<id>.scope`,
/// `docker-<id>.scope`, `/docker/<id>`, `libpod-<id>.scope`, or a bare id.
static CONTAINER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|/)(?:(?P<runtime>docker|cri-containerd|crio|libpod|containerd)-)?(?P<id>[0-9a-f]{64})(?:\.scope)?(?:/|$)",
    )
    .expect("container regex")
});
static USER_SLICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^/user\.slice/user-(?P<uid>[0-9]+)\.slice/(?P<rest>.*)$")
        .expect("user slice regex")
});

/// One process's lines, while they are being read.
struct Group {
    pid: Option<u32>,
    /// (preference, path, span): lower preference wins.
    best: Option<(u8, String, Span)>,
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut group = Group {
        pid: None,
        best: None,
    };
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(c) = PROMPT.captures(text).or_else(|| HEAD_HEADER.captures(text)) {
            flush(&mut group, facts);
            group.pid = c["pid"].parse().ok();
            continue;
        }
        let Some(c) = CGROUP_LINE.captures(text) else {
            missed.push(i);
            continue;
        };
        let prefixed = c.name("file_pid").or(c.name("loop_pid"));
        if let Some(p) = prefixed {
            let pid = p.as_str().parse().ok();
            if pid != group.pid || group.best.is_none() {
                flush(&mut group, facts);
                group.pid = pid;
            }
        }
        let preference = preference(&c["hierarchy"], &c["controllers"], &c["path"]);
        if group.best.as_ref().is_none_or(|(p, _, _)| preference < *p) {
            group.best = Some((preference, c["path"].to_owned(), line.span));
        }
    }
    flush(&mut group, facts);
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// v1's `name=systemd` hierarchy and v2's `0::` line are where systemd puts
/// a process; the other v1 controllers may leave it at the root.
fn preference(hierarchy: &str, controllers: &str, path: &str) -> u8 {
    let base = match (hierarchy, controllers) {
        (_, "name=systemd") => 0,
        ("0", "") => 1,
        (_, c) if c.split(',').any(|c| c == "memory" || c == "pids") => 2,
        _ => 3,
    };
    if path == "/" { base + 4 } else { base }
}

fn flush(group: &mut Group, facts: &mut Facts) {
    if let Some((_, path, span)) = group.best.take() {
        facts.proc_cgroups.push(ProcCgroup {
            pid: group.pid,
            owner: owner(&path),
            path,
            span,
        });
    }
}

/// Who a cgroup path belongs to (the table of docs/formats/procfs.md).
pub(crate) fn owner(path: &str) -> CgroupOwner {
    match path {
        "/" => return CgroupOwner::NamespaceRoot,
        "/init.scope" => return CgroupOwner::Init,
        _ => {}
    }
    let container = CONTAINER.captures(path);
    if path.contains("kubepods") {
        if let Some(pod) = KUBE_POD.captures(path) {
            return CgroupOwner::KubernetesPod {
                pod_uid: pod["uid"].replace('_', "-"),
                qos: KUBE_QOS.captures(path).map(|q| q["qos"].to_owned()),
                container_id: container.map(|c| c["id"].to_owned()),
            };
        }
    }
    if let Some(c) = container {
        let runtime = match c.name("runtime").map(|r| r.as_str()) {
            Some("libpod") => "podman",
            Some("cri-containerd") => "containerd",
            Some(other) => other,
            None if path.starts_with("/docker/") => "docker",
            None => "unknown",
        };
        return CgroupOwner::Container {
            runtime: runtime.to_owned(),
            id: c["id"].to_owned(),
        };
    }
    let mut units = path
        .split('/')
        .filter(|p| p.ends_with(".service") || p.ends_with(".scope"));
    if let Some(u) = USER_SLICE.captures(path) {
        let uid = u["uid"].parse().ok();
        let rest = u.name("rest").map_or("", |r| r.as_str());
        let first = rest.split('/').next().unwrap_or_default();
        if first.starts_with("session-") && first.ends_with(".scope") {
            return CgroupOwner::Session {
                uid,
                scope: first.to_owned(),
            };
        }
        // Below `user@UID.service` the deepest unit is the user's own.
        if let Some(unit) = units.next_back() {
            return CgroupOwner::UserUnit {
                uid,
                unit: unit.to_owned(),
            };
        }
        return CgroupOwner::Unknown;
    }
    // The first unit below the slices: a delegated service's own
    // sub-cgroups (`/system.slice/x.service/payload`) still belong to it.
    match path
        .split('/')
        .find(|p| p.ends_with(".service") || p.ends_with(".scope"))
    {
        Some(unit) => CgroupOwner::SystemUnit(unit.to_owned()),
        None => CgroupOwner::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    fn records(facts: &Facts) -> Vec<(Option<u32>, &str, u32)> {
        facts
            .proc_cgroups
            .iter()
            .map(|c| (c.pid, c.path.as_str(), c.span.line))
            .collect()
    }

    #[test]
    fn every_way_a_paste_names_the_pid() {
        let (facts, unrecognized) = run("\
$ cat /proc/4318/cgroup
0::/system.slice/sglang.service
root@gpu-node-7:~# cat /proc/20629/cgroup
0::/system.slice/ddtree-qwen.service
/proc/4319/cgroup:0::/system.slice/sglang.service
/proc/77101/cgroup:0::/user.slice/user-1000.slice/session-3.scope
4320:0::/system.slice/sglang.service
==> /proc/5000/cgroup <==
0::/init.scope
$ cat /proc/self/cgroup
0::/");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            records(&facts),
            vec![
                (Some(4318), "/system.slice/sglang.service", 2),
                (Some(20629), "/system.slice/ddtree-qwen.service", 4),
                (Some(4319), "/system.slice/sglang.service", 5),
                (
                    Some(77101),
                    "/user.slice/user-1000.slice/session-3.scope",
                    6
                ),
                (Some(4320), "/system.slice/sglang.service", 7),
                (Some(5000), "/init.scope", 9),
                (None, "/", 11),
            ]
        );
    }

    #[test]
    fn v1_and_hybrid_files_pick_the_systemd_hierarchy() {
        let (facts, unrecognized) = run("\
$ cat /proc/4318/cgroup
12:cpuset:/
11:memory:/system.slice/sglang.service
5:pids:/system.slice/sglang.service
1:name=systemd:/system.slice/sglang.service
0::/system.slice/sglang.service
$ cat /proc/4400/cgroup
3:cpu,cpuacct:/
2:memory:/system.slice/vllm.service
1:freezer:/");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            records(&facts),
            vec![
                (Some(4318), "/system.slice/sglang.service", 5),
                (Some(4400), "/system.slice/vllm.service", 9),
            ]
        );
    }

    #[test]
    fn owners_of_every_path_shape() {
        let id = "4f6c1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f";
        let cases: Vec<(String, CgroupOwner)> = vec![
            (
                "/system.slice/sglang.service".into(),
                CgroupOwner::SystemUnit("sglang.service".into()),
            ),
            (
                "/system.slice/sglang.service/payload".into(),
                CgroupOwner::SystemUnit("sglang.service".into()),
            ),
            (
                "/system.slice/system-serve.slice/serve@1.service".into(),
                CgroupOwner::SystemUnit("serve@1.service".into()),
            ),
            (
                "/system.slice/run-u42.service".into(),
                CgroupOwner::SystemUnit("run-u42.service".into()),
            ),
            (
                "/user.slice/user-1000.slice/session-3.scope".into(),
                CgroupOwner::Session {
                    uid: Some(1000),
                    scope: "session-3.scope".into(),
                },
            ),
            (
                "/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service".into(),
                CgroupOwner::UserUnit {
                    uid: Some(1000),
                    unit: "jupyter.service".into(),
                },
            ),
            (
                format!("/system.slice/docker-{id}.scope"),
                CgroupOwner::Container {
                    runtime: "docker".into(),
                    id: id.into(),
                },
            ),
            (
                format!("/docker/{id}"),
                CgroupOwner::Container {
                    runtime: "docker".into(),
                    id: id.into(),
                },
            ),
            (
                format!("/machine.slice/libpod-{id}.scope/container"),
                CgroupOwner::Container {
                    runtime: "podman".into(),
                    id: id.into(),
                },
            ),
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b1c2d3e_4f5a_6b7c_8d9e_0f1a2b3c4d5e.slice/cri-containerd-{id}.scope"
                ),
                CgroupOwner::KubernetesPod {
                    pod_uid: "0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e".into(),
                    qos: Some("burstable".into()),
                    container_id: Some(id.into()),
                },
            ),
            (
                format!("/kubepods/pod0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e/{id}"),
                CgroupOwner::KubernetesPod {
                    pod_uid: "0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e".into(),
                    qos: None,
                    container_id: Some(id.into()),
                },
            ),
            ("/init.scope".into(), CgroupOwner::Init),
            ("/".into(), CgroupOwner::NamespaceRoot),
            ("/system.slice".into(), CgroupOwner::Unknown),
        ];
        for (path, expected) in cases {
            assert_eq!(owner(&path), expected, "{path}");
        }
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (facts, unrecognized) = run("\
0::relative/path
x:memory:/a
99999999999:0::/system.slice/a.service
\u{1b}\u{0}\u{ff}
$ cat /proc/99999999999/cgroup
0::/system.slice/b.service");
        assert_eq!(unrecognized, 3);
        assert_eq!(
            records(&facts),
            vec![
                (None, "/system.slice/a.service", 3),
                (None, "/system.slice/b.service", 6),
            ]
        );
    }
}
