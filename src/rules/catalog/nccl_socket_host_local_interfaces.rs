//! `nccl-socket-host-local-interfaces`: NCCL's socket transport picked up
//! interfaces that exist only on this host (docker bridges, veth pairs,
//! IPv6 link-local addresses) beside the real uplink, so ranks on other
//! nodes cannot be reached through them.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NcclSocketHostLocalInterfaces = NcclSocketHostLocalInterfaces;

pub struct NcclSocketHostLocalInterfaces;

/// NCCL's list of the socket transport's interfaces (catalog row
/// `nccl.net-socket-using`): `NET/Socket : Using [0]bond0:192.168.1.161<0>
/// [1]br-05ab815fa14e:172.19.0.1<0> …` (NVIDIA/nccl
/// src/transport/net_socket.cc, ncclNetSocketInit: `" [%d]%s:%s"` per
/// interface, the address as ncclSocketToString's `host<port>`).
const SOCKET_USING: &str = "NET/Socket : Using";
/// NCCL's communicator built: the interfaces did their job.
const INIT_COMPLETE: &str = "Init COMPLETE";

/// Name prefixes of interfaces that exist only inside one host: Docker's
/// default and user bridges and their veth ends, libvirt's, LXC's and
/// Podman's bridges, Kubernetes CNI bridges (flannel, Calico).
const HOST_LOCAL: [&str; 10] = [
    "docker", "br-", "veth", "virbr", "lxcbr", "lxdbr", "podman", "cni", "flannel", "cali",
];

static META: RuleMeta = RuleMeta {
    id: "nccl-socket-host-local-interfaces",
    category: Category::NcclInitFailure,
    severity: Severity::Error,
    summary: "NCCL's socket transport uses host-local interfaces (docker bridges, veth, link-local) beside the real uplink: ranks on other nodes cannot be reached through them",
    // The list's first line is the catalog row's; an interface list
    // wrapped onto lines of its own is kept by its items' `<0>` (an
    // interface's address has port 0).
    anchors: &[SOCKET_USING, "<0>", INIT_COMPLETE],
    doc: r#"
## What it means
With `NCCL_DEBUG=INFO`, NCCL lists the interfaces its socket transport will
use: `NET/Socket : Using [0]bond0:192.168.1.161<0> [1]br-05ab815fa14e:172.19.0.1<0>
… [12]veth6163fba:fe80::b878:6cff:fe52:abe2%veth6163fba<0>`. Without
`NCCL_SOCKET_IFNAME`, NCCL takes every interface that is up except `lo` and
`docker*`: Docker's user bridges (`br-…`), veth pairs, libvirt's `virbr0`
and IPv6 link-local addresses (`fe80::…`) all make the list, though none of
them reaches another node.

## Why it happens
A host running containers or VMs has many such interfaces. A job across
nodes then tries to connect its ranks through addresses that only exist on
one host: connections fail (`ncclSystemError: System call (socket, malloc,
munmap, etc) failed`, `Connection refused`, `Connection timed out`) or hang.
A single-node job does not depend on them.

## How to confirm
The list shows one routable interface (the node's address on the cluster
network) and the rest bridges, veths or `fe80::` addresses; the job spans
nodes; `ip -br addr` on each node shows which interface carries the
cluster network. NCCL's `Init COMPLETE` line is missing.

## How to fix
Pin NCCL to the routable interface on every node:
`NCCL_SOCKET_IFNAME=bond0` (the name the list shows first), or exclude the
host-local ones: `NCCL_SOCKET_IFNAME=^docker,br-,veth,virbr,lo`. Set it in
the environment of every rank (torchrun, the container, the Ray runtime
environment).

## Safety
Advice only: an environment variable of the job, nothing is stopped.
"#,
};

/// One interface of NCCL's list, and the line that lists it.
struct Interface<'a> {
    name: &'a str,
    address: &'a str,
    line: &'a Message,
}

impl Interface<'_> {
    /// An interface that reaches nothing beyond this host.
    fn host_local(&self) -> bool {
        HOST_LOCAL.iter().any(|p| self.name.starts_with(p)) || self.address.starts_with("fe80:")
    }
}

impl Rule for NcclSocketHostLocalInterfaces {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let messages = &incident.facts.messages;
        let completed = messages.iter().any(|m| m.text.contains(INIT_COMPLETE));
        let failed = nccl_failed(incident);
        if completed && !failed {
            return;
        }
        for (head, list) in lists(messages) {
            let (local, routable): (Vec<&Interface>, Vec<&Interface>) =
                list.iter().partition(|i| i.host_local());
            if local.is_empty() || routable.is_empty() {
                continue;
            }
            out.push(finding(head, &list, &local, &routable, failed));
            // One finding: every rank prints the same list.
            return;
        }
    }
}

/// Whether the inputs show NCCL failing: a line the catalogs read as an
/// NCCL initialisation failure.
fn nccl_failed(incident: &Incident) -> bool {
    incident.known.iter().any(|k| {
        k.hit
            .row
            .is_some_and(|r| r.category == Some(Category::NcclInitFailure))
    })
}

/// NCCL's socket interface lists, in input order, each with its `NET/Socket
/// : Using` line: the items on that line and on the lines right below it
/// that hold items only (a terminal or a thread wrapped the list).
fn lists(messages: &[Message]) -> Vec<(&Message, Vec<Interface<'_>>)> {
    let mut lists: Vec<(&Message, Vec<Interface<'_>>)> = Vec::new();
    let mut last: Option<&Message> = None;
    for m in messages {
        if let Some(at) = m.text.find(SOCKET_USING) {
            lists.push((
                m,
                items(&m.text[at + SOCKET_USING.len()..], m).unwrap_or_default(),
            ));
            last = Some(m);
            continue;
        }
        let follows =
            last.is_some_and(|l| l.span.source == m.span.source && l.span.line + 1 == m.span.line);
        match (follows, items(&m.text, m), lists.last_mut()) {
            (true, Some(more), Some((_, list))) if !more.is_empty() => {
                list.extend(more);
                last = Some(m);
            }
            _ => last = None,
        }
    }
    lists
}

/// The items of `text` when it holds items only (`[0]bond0:192.168.1.161<0>
/// [1]veth…:fe80::…%veth…<0>`); `None` when any word is not one.
fn items<'a>(text: &'a str, line: &'a Message) -> Option<Vec<Interface<'a>>> {
    text.split_whitespace()
        .map(|item| {
            let (n, rest) = item.strip_prefix('[')?.split_once(']')?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (name, address) = rest.split_once(':')?;
            let address = address.strip_suffix('>')?.rsplit_once('<')?.0;
            (!name.is_empty()).then_some(Interface {
                name,
                address,
                line,
            })
        })
        .collect()
}

fn finding(
    head: &Message,
    list: &[Interface<'_>],
    local: &[&Interface<'_>],
    routable: &[&Interface<'_>],
    failed: bool,
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let names = |is: &[&Interface<'_>]| is.iter().map(|i| i.name).collect::<Vec<_>>().join(", ");
    let first = Some(head.span);
    f.evidence(
        head.span,
        format!(
            "NCCL's socket transport lists {} interface(s): {} routable, {} host-local",
            list.len(),
            routable.len(),
            local.len()
        ),
    );
    for i in routable {
        if Some(i.line.span) != first {
            f.evidence(
                i.line.span,
                format!("{} ({}): the node's routable interface", i.name, i.address),
            );
        }
    }
    if let Some(i) = local.iter().find(|i| Some(i.line.span) != first) {
        f.evidence(
            i.line.span,
            format!("{} ({}): exists only on this host", i.name, i.address),
        );
    }
    f.occurrences = 1;
    let uplink = routable
        .iter()
        .map(|i| i.name)
        .collect::<Vec<_>>()
        .join(",");
    f.condition(
        "NCCL's socket transport lists host-local interfaces beside a routable one",
        true,
    );
    f.condition("an NCCL failure is in the inputs", failed);
    f.title = format!(
        "NCCL's socket transport uses {} host-local interface(s) beside {}",
        local.len(),
        names(routable)
    );
    f.headline = format!(
        "NCCL will connect ranks through {} host-local interface(s) (docker bridges, veths, link-local addresses) beside {}: ranks on other nodes cannot be reached through them; pin NCCL_SOCKET_IFNAME={uplink}.",
        local.len(),
        names(routable)
    );
    f.chain
        .push("connections between ranks on different nodes fail or hang".to_owned());
    f.chain.push(format!(
        "NCCL's socket transport uses {} as well as {}",
        names(local),
        names(routable)
    ));
    f.chain.push(
        "NCCL_SOCKET_IFNAME is not set: NCCL takes every interface that is up except lo and docker*"
            .to_owned(),
    );
    f.explanation = "Docker user bridges (br-…), veth pairs, libvirt's virbr0 and IPv6 link-local addresses exist on one host only; NCCL's default interface selection keeps them, and a job across nodes then tries to reach its peers through them.".to_owned();
    f.actions.push(Action::advice(
        format!(
            "set NCCL_SOCKET_IFNAME={uplink} (the routable interface) in the environment of every rank on every node, or exclude the host-local ones with NCCL_SOCKET_IFNAME=^docker,br-,veth,virbr,lo"
        ),
        Some("ip -br addr"),
    ));
    f.confidence = confidence(&f, 0.55, 0.75);
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// NVIDIA/nccl#697, the maintainer's quote of the reporter's log: the
    /// list wrapped one interface a line (two of its sixteen items here).
    const WRAPPED: &str = "INFO NET/Socket : Using\n[0]bond0:192.168.1.161<0>\n[1]br-05ab815fa14e:172.19.0.1<0>\n[2]br-d5d80d7dbbad:172.21.0.1<0>\n[12]veth6163fba:fe80::b878:6cff:fe52:abe2%veth6163fba<0> \n";

    /// pytorch/pytorch#50575 (multi-node DDP, NCCL connection timed out):
    /// the list on one line, a veth with a link-local address.
    const ONE_LINE: &str = "hikBigDataTestGpu2:1449:1449 [0] NCCL INFO NET/Socket : Using [0]eno4:10.3.68.117<0> [1]vethe94aab9:fe80::a86b:69ff:fe67:e3fe%vethe94aab9<0>\nhikBigDataTestGpu2:1449:1449 [0] NCCL INFO Using network Socket\n";

    #[test]
    fn a_wrapped_list_with_docker_bridges_names_the_uplink_to_pin() {
        let f = findings_of(super::META.id, WRAPPED);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].headline.contains("NCCL_SOCKET_IFNAME=bond0"),
            "{}",
            f[0].headline
        );
        assert!(f[0].title.contains("3 host-local"), "{}", f[0].title);
    }

    #[test]
    fn a_one_line_list_with_a_link_local_veth_is_read_too() {
        let f = findings_of(super::META.id, ONE_LINE);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].headline.contains("NCCL_SOCKET_IFNAME=eno4"),
            "{}",
            f[0].headline
        );
    }

    #[test]
    fn a_communicator_built_or_a_list_of_routable_interfaces_only_is_no_finding() {
        // The same list, and a communicator built afterwards (the line of
        // fixtures/real/463's NCCL log).
        let done = format!(
            "{ONE_LINE}HP-Z8-Fury-G5-Workstation-Desktop-PC:23458:23665 [0] NCCL INFO comm 0x23ba7ea0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 47000 commId 0x47dc53f08cbcda96 - Init COMPLETE\n"
        );
        assert!(findings_of(super::META.id, &done).is_empty());
        // fixtures/real/659: ens3 only.
        let routable = "ip-172-31-12-210:45305:45305 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0>\n";
        assert!(findings_of(super::META.id, routable).is_empty());
    }
}
