//! The built-in example incident, compiled into the binary, for `rootcause demo`.

use crate::context::Context;
use crate::context::parse_manifest;
use crate::source::{Source, SourceMap};

macro_rules! file {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                "../fixtures/incidents/2026-11-27-ct200-ghost-ddtree/",
                $name
            )),
        )
    };
}

/// The seed incident (fixtures/incidents/2026-11-27-ct200-ghost-ddtree):
/// sglang-k26.service dies at start-up because a forgotten
/// ddtree-qwen.service holds 55 GB on GPU 0. Same names as in the bundle, so
/// the demo's report is byte-identical to the bundle's.
const FILES: &[(&str, &str)] = &[
    file!("journal.txt"),
    file!("nvidia-smi-query-compute-apps.csv"),
    file!("nvidia-smi-query-gpu.csv"),
    file!("nvidia-smi.txt"),
    file!("ps.txt"),
    file!("sglang.log"),
    file!("systemctl-status-ddtree-qwen.txt"),
    file!("systemctl-status-sglang-k26.txt"),
];

/// The seed bundle's manifest: its host, zone and capture time.
pub fn context() -> Context {
    Context::from_manifest(&parse_manifest(include_bytes!(
        "../fixtures/incidents/2026-11-27-ct200-ghost-ddtree/manifest.json"
    )))
}

pub fn sources() -> SourceMap {
    let mut sources = SourceMap::new();
    for (name, text) in FILES {
        sources.add(Source::new(*name, text.as_bytes()));
    }
    sources
}
