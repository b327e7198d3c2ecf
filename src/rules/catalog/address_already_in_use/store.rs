//! PyTorch 1.x's bare `RuntimeError: Address already in use`: the
//! rendezvous store's failed bind when a traceback frame creating the store
//! stands just above it, the port then the job's master port.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::Finding;

/// PyTorch 1.x's bare `RuntimeError: Address already in use`
/// (catalogs/stacks-torch.toml): the store's when a traceback frame
/// creating the store (`FRAME`) stands a few lines above it.
pub(super) const BARE: &str = "stacks-torch.c10d-bare-eaddrinuse";
const FRAME: &str = "stacks-torch.store-create-frame";

/// Cites the traceback frame that creates the store above a bare
/// `Address already in use` read as the store's: the port that failed is
/// the job's master port, which the line does not name.
pub(super) fn cite_frame<'a>(
    f: &mut Finding,
    incident: &Incident,
    binds: impl Iterator<Item = &'a Message>,
) {
    for m in binds.filter(|m| incident.known(BARE).any(|(b, _)| b.span == m.span)) {
        let frame = incident.known(FRAME).find(|(fr, _)| {
            fr.span.source == m.span.source
                && fr.span.line < m.span.line
                && m.span.line - fr.span.line <= 5
        });
        if let Some((fr, _)) = frame {
            f.evidence(
                fr.span,
                "raised while torch.distributed's rendezvous created its TCPStore: the port is the job's master port (MASTER_PORT, --master_port, the tcp:// init method's)",
            );
        }
    }
}

/// Whether a frame creating torch.distributed's store stands within five
/// lines above `m`, in its input.
pub(super) fn under_frame(incident: &Incident, m: &Message) -> bool {
    incident.known(FRAME).any(|(f, _)| {
        f.span.source == m.span.source
            && f.span.line < m.span.line
            && m.span.line - f.span.line <= 5
    })
}

#[cfg(test)]
mod tests {
    fn one(text: &str) -> crate::rules::Finding {
        let mut f = crate::testing::findings_of("address-already-in-use", text);
        assert_eq!(f.len(), 1, "{f:?}");
        f.remove(0)
    }

    /// batch S 1178 (OpenNMT-kpg, PyTorch 1.x): the bare wording under
    /// rendezvous.py's `store = TCPStore(…)` is the store's port, the frame
    /// cited; NVIDIA/Megatron-LM#343, the next such paste, the same.
    #[test]
    fn a_bare_address_in_use_under_the_stores_creation_is_the_master_port() {
        let text = "  File \"/home/mengr/.conda/envs/kp_py36/lib/python3.6/site-packages/torch/distributed/distributed_c10d.py\", line 354, in init_process_group\n\
            \x20   store, rank, world_size = next(rendezvous(url))\n\
            \x20 File \"/home/mengr/.conda/envs/kp_py36/lib/python3.6/site-packages/torch/distributed/rendezvous.py\", line 95, in _tcp_rendezvous_handler\n\
            \x20   store = TCPStore(result.hostname, result.port, world_size, start_daemon)\n\
            RuntimeError: Address already in use\n";
        let f = one(text);
        assert_eq!(f.category, crate::rules::Category::PortInUse);
        assert!(f.title.contains("store port"), "{}", f.title);
        crate::testing::cites_line(&f, 4);
        let megatron = "File \"/root/miniconda3/lib/python3.8/site-packages/torch/distributed/rendezvous.py\", line 142, in _tcp_rendezvous_handler\n\
            store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n\
            RuntimeError: Address already in use\n";
        assert!(one(megatron).title.contains("store port"));
        // Alone it is a bind that failed, whose port is not the store's.
        let alone = one("RuntimeError: Address already in use\n");
        assert!(!alone.title.contains("store"), "{}", alone.title);
    }
}
