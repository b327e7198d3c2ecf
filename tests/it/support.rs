//! The one place tests call the library API: analyse a fixture bundle and
//! render every output.

use std::path::{Path, PathBuf};

use rootcause::bundle::{self, Input};
use rootcause::context::Context;
use rootcause::render::{self, OutputFormat, RenderOptions};

#[allow(dead_code)] // `analysis` is for tests that inspect the model directly
pub struct Outputs {
    pub analysis: rootcause::Analysis,
    pub text: String,
    pub markdown: String,
    pub html: String,
    pub json: String,
    pub script: String,
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

pub fn incident(name: &str) -> PathBuf {
    fixtures().join("incidents").join(name)
}

/// Analyses one bundle directory (or file), with its manifest, and renders
/// every output. A single file is named by its file name, so snapshots hold
/// no absolute path.
pub fn check(path: &Path) -> Outputs {
    if path.is_file() {
        let bytes = std::fs::read(path).expect("fixture reads");
        let mut sources = rootcause::source::SourceMap::new();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sources.add(rootcause::source::Source::new(name, &bytes));
        return analyze(sources);
    }
    let (sources, manifest) = bundle::load(&[Input::Path(path.to_owned())], &mut std::io::empty())
        .expect("fixture loads");
    let context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    analyze_in(sources, context)
}

/// Inputs without a manifest (a paste, loose files).
pub fn analyze(sources: rootcause::source::SourceMap) -> Outputs {
    analyze_in(sources, Context::default())
}

pub fn analyze_in(sources: rootcause::source::SourceMap, context: Context) -> Outputs {
    let analysis = rootcause::analyze_in(sources, context, rootcause::rules::RULES);
    let (text, markdown, html, json, script) = {
        let report = analysis.report();
        let render = |format| {
            let mut out = Vec::new();
            render::render(&report, format, RenderOptions::default(), &mut out).expect("render");
            String::from_utf8(out).expect("utf-8 report")
        };
        (
            render(OutputFormat::Text),
            render(OutputFormat::Markdown),
            render(OutputFormat::Html),
            render(OutputFormat::Json),
            render::script(&report),
        )
    };
    Outputs {
        analysis,
        text,
        markdown,
        html,
        json,
        script,
    }
}

/// The HTML report without its fixed style sheet and script, which every
/// page carries the same: snapshots show the page's own content.
pub fn html_content(html: &str) -> String {
    let style = regex::Regex::new(r"(?s)<style>.*?</style>").unwrap();
    let script = regex::Regex::new(r"(?s)<script>.*?</script>").unwrap();
    let html = style.replace(html, "<style>[style sheet]</style>");
    script
        .replace(&html, "<script>[script]</script>")
        .into_owned()
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

/// The `rootcause` binary, its colour decided by the flags alone.
pub fn bin() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rootcause"));
    c.env_remove("NO_COLOR");
    c
}

/// A scratch directory, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "rootcause-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch dir");
        Scratch { path }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies a directory tree (a bundle) into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read bundle") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy file");
        }
    }
}
