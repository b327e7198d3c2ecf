//! What the finding says when what was killed is a checkpoint converter.

use crate::rules::{Action, Finding};

/// A checkpoint converter's words: it holds whole checkpoints in host
/// memory while it writes them out, so the advice is memory for it, not a
/// server's settings.
pub(super) fn explain(f: &mut Finding) {
    f.title =
        "the checkpoint converter was killed by SIGKILL, most likely by the host's OOM killer"
            .to_owned();
    f.headline = "The checkpoint converter was Killed (SIGKILL) while it read the model's weights, with no error before it: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned();
    if let Some(first) = f.chain.first_mut() {
        *first = "the checkpoint converter was Killed".to_owned();
    }
    f.actions
        .retain(|a| !a.describe().starts_with("If it was the OOM killer"));
    f.actions.push(Action::advice(
        "If it was the OOM killer: converters hold whole checkpoints (or parts of them) in host memory; add swap, run it on a host with more RAM, or use a converter or mode that streams tensors",
        Some("free -h; swapon --show"),
    ));
}
