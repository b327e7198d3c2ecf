//! The one place tests call the library API: analyse a fixture bundle and
//! render every output.

use std::path::{Path, PathBuf};

use rootcause::bundle::{self, Input};
use rootcause::render::{self, OutputFormat, RenderOptions};

#[allow(dead_code)] // `analysis` is for tests that inspect the model directly
pub struct Outputs {
    pub analysis: rootcause::Analysis,
    pub text: String,
    pub markdown: String,
    pub json: String,
    pub script: String,
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

pub fn incident(name: &str) -> PathBuf {
    fixtures().join("incidents").join(name)
}

/// Analyses one bundle directory (or file) and renders every output.
/// A single file is named by its file name, so snapshots hold no absolute path.
pub fn check(path: &Path) -> Outputs {
    if path.is_file() {
        let bytes = std::fs::read(path).expect("fixture reads");
        let mut sources = rootcause::source::SourceMap::new();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sources.add(rootcause::source::Source::new(name, &bytes));
        return analyze(sources);
    }
    let (sources, _) = bundle::load(&[Input::Path(path.to_owned())], &mut std::io::empty())
        .expect("fixture loads");
    analyze(sources)
}

pub fn analyze(sources: rootcause::source::SourceMap) -> Outputs {
    let analysis = rootcause::analyze(sources);
    let (text, markdown, json, script) = {
        let report = analysis.report();
        let render = |format| {
            let mut out = Vec::new();
            render::render(&report, format, RenderOptions::default(), &mut out).expect("render");
            String::from_utf8(out).expect("utf-8 report")
        };
        (
            render(OutputFormat::Text),
            render(OutputFormat::Markdown),
            render(OutputFormat::Json),
            render::script(&report),
        )
    };
    Outputs {
        analysis,
        text,
        markdown,
        json,
        script,
    }
}

pub fn json(out: &Outputs) -> serde_json::Value {
    serde_json::from_str(&out.json).expect("the JSON report parses")
}

/// The root-cause finding of a JSON report.
pub fn root(json: &serde_json::Value) -> &serde_json::Value {
    let id = json["root_cause"].as_str().expect("a root cause");
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .expect("root cause finding exists")
}

/// Fails with the install hint when a tool the tests need is missing: a
/// check never skips silently.
pub fn require_tool(tool: &str, package: &str) {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{tool}` is required by this test but is not installed: run `apt-get install -y {package}` (scripts/test.sh does this)"
    );
}
