//! What every fuzz target does: read the bytes as one input, with a format
//! forced (one target per parser) or detected, and run the whole pipeline,
//! with and without the prefilter.
//! Any panic is a bug: parsers must count what they cannot read.

use rootcause::ingest::{Anchors, Format, ingest_as};
use rootcause::source::{Source, SourceMap};

pub fn parse_as(data: &[u8], format: Option<&str>) {
    let format: Option<Format> = format.map(|f| f.parse().expect("a known format name"));
    let mut sources = SourceMap::new();
    sources.add(Source::new("fuzz", data));
    let _ = ingest_as(&sources, format, &Anchors::none());
    if format.is_none() {
        let analysis = rootcause::analyze(sources);
        let _ = rootcause::render::script(&analysis.report());
        // The prefilter's skimming readers must not panic either.
        let mut sources = SourceMap::new();
        sources.add(Source::new("fuzz", data));
        let options = rootcause::Options {
            prefilter: true,
            ..rootcause::Options::default()
        };
        let analysis = rootcause::analyze_with(sources, &options);
        let _ = rootcause::render::script(&analysis.report());
    }
}
