//! What upstream can print: the failure catalogs as data.
//!
//! A GPU host's failures are worded by a few closed catalogs, each listed
//! upstream: CUDA's runtime and driver errors, NCCL's results and warnings,
//! systemd's unit results and PID 1's messages, the kernel's (NVRM Xid and
//! SXid, the OOM killer, hung tasks, AER), and each serving stack's own
//! fatal errors. Each is one file under `catalogs/` at the top of the
//! repository, compiled in: one row per message (or per code of a code
//! table) with its wordings across versions, where upstream prints it, what
//! it means, its category, severity and fix, and real sample lines.
//!
//! This module sits beside the model, below ingest and the rules: it knows
//! messages, not incidents. [`Catalogs::hits`] says which rows a line is; a
//! parser asks it whether a line is a known message, a rule asks for the
//! lines of a row by id (`correlate` matches every kept line once), and the
//! `known-message` rule turns a row that needs no reasoning into a finding.
//! One place per message: a wording's pattern lives only in its row.

mod index;
mod schema;
pub mod template;

use std::collections::BTreeSet;
use std::sync::{LazyLock, OnceLock};

use regex::Regex;

pub use index::{Hit, Via};

use crate::model::{Category, Severity};

/// The catalog files, compiled in, in the order the docs list them: each
/// as `build.rs` read it from `catalogs/<name>.toml` (see `schema::Built`).
macro_rules! built {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!(env!("OUT_DIR"), "/catalogs/", $name, ".json")))),*]
    };
}
const FILES: &[(&str, &str)] = built![
    "cuda",
    "nvml",
    "nccl",
    "systemd",
    "kernel",
    "dkms",
    "oom-daemons",
    "windows",
    "supervisors",
    "stacks-celery",
    "rust",
    "dcgm",
    "rocm-smi",
    "hip",
    "amdgpu",
    "i915",
    "fabricmanager",
    "persistenced",
    "stacks-torch",
    "stacks-vllm",
    "stacks-sglang",
    "stacks-bind",
    "stacks-llamacpp",
    "stacks-metal",
    "stacks-ollama",
    "stacks-localai",
    "stacks-tgi",
    "stacks-lmdeploy",
    "stacks-trtllm",
    "stacks-ray",
    "stacks-slurm",
    "stacks-k8s",
    "stacks-gpustack",
    "stacks-canhazgpu",
    "stacks-containers",
    "stacks-hf",
    "stacks-gaudi",
    "stacks-ascend",
    "stacks-tf",
    "stacks-onnxruntime",
    "stacks-paddle",
    "stacks-theano",
    "stacks-comfyui",
    "stacks-exllama",
    "stacks-xinference",
    "stacks-kaldi",
    "web-servers",
    "startup",
    "symptoms",
];

/// Every catalog, loaded once.
pub fn catalogs() -> &'static Catalogs {
    static ALL: LazyLock<Catalogs> = LazyLock::new(|| Catalogs::load(FILES));
    &ALL
}

/// The loaded catalogs, their matcher, and what was wrong with the files
/// (a test keeps that empty; a bad row is left out, never a panic).
pub struct Catalogs {
    pub list: Vec<Catalog>,
    pub problems: Vec<String>,
    /// The exact catalogs' rows and wrappers: one program's messages.
    index: index::Index,
    /// The fallback catalogs' rows (`Catalog::fallback`): failure classes
    /// by their words across stacks, asked only where `index` reads nothing.
    symptoms: index::Index,
}

/// One upstream catalog.
#[derive(Debug)]
pub struct Catalog {
    pub id: String,
    pub title: String,
    pub upstream: String,
    pub versions: String,
    pub about: String,
    /// A fallback catalog: failure classes by the words every stack uses
    /// (`catalogs/symptoms.toml`), read only where no exact row reads the
    /// line ([`Catalogs::symptoms`]).
    pub fallback: bool,
    pub rows: Vec<Row>,
    pub wrappers: Vec<Wrapper>,
}

/// One message, or one code of a code table.
#[derive(Debug)]
pub struct Row {
    pub id: String,
    pub title: String,
    pub headline: Option<String>,
    pub meaning: String,
    /// `None`: read, but the line proves no failure by itself.
    pub category: Option<Category>,
    /// Printed by GPU serving software (its own `gpu`, or its catalog's).
    pub gpu: bool,
    pub severity: Severity,
    pub confidence: f64,
    pub fix: Option<String>,
    pub confirm: Option<String>,
    /// The start-up stage a server has reached when it prints this line.
    pub stage: Option<Stage>,
    /// The built-in rule that reasons further about this message.
    pub rule: Option<String>,
    pub code: Option<i64>,
    pub name: Option<String>,
    pub driver_code: Option<i64>,
    pub driver_name: Option<String>,
    /// Numbers the code had in older versions, with those versions.
    pub former: Vec<(i64, String)>,
    /// What upstream's catalog says to do about the code.
    pub resolution: Option<String>,
    pub strings: Vec<CodeString>,
    pub bare: bool,
    pub wordings: Vec<Wording>,
    pub samples: Vec<Sample>,
    pub gap: Option<String>,
    /// The lines around this one (first and last, relative to it) that
    /// upstream prints with it as one message: they share its captures.
    pub block: Option<[i32; 2]>,
    /// The row whose last line before this one names the process it
    /// reports on: a finding that cites this line has that line's facts.
    pub subject: Option<String>,
    /// Rows of the same event that say more: where one of them is read in
    /// the same input, this row's lines are cited by its finding instead
    /// of making one of their own (`known-message`).
    pub superseded_by: Vec<String>,
}

impl Row {
    /// The headline for a line read as this row: the row's `headline` with
    /// the line's captures filled in, or its title when a capture it names
    /// is missing.
    pub fn headline_for(&self, hit: &Hit<'_>) -> String {
        let Some(template) = &self.headline else {
            return self.title.clone();
        };
        let mut out = String::new();
        let mut rest = template.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                return self.title.clone();
            };
            match hit.get(&rest[open + 1..open + close]) {
                Some(value) => out.push_str(value),
                None => return self.title.clone(),
            }
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// How far a model server's start-up got, in the order every stack goes
/// through it (a stack may skip stages: a single-GPU server never starts a
/// distributed group, an eager one captures no graphs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The process started and printed its arguments or version.
    Launched,
    /// The distributed group (torch.distributed, NCCL) began to form.
    DistributedInit,
    /// The group formed (NCCL `Init COMPLETE`).
    DistributedReady,
    /// The group's first collective was posted (NCCL's `AllReduce: opCount
    /// 0`, with its `COLL` debug lines): every rank must join it before
    /// any goes on.
    FirstCollective,
    /// Loading the weights began.
    WeightsLoading,
    /// The weights are on the GPUs.
    WeightsLoaded,
    /// Memory was profiled and the KV cache sized or allocated.
    KvCache,
    /// CUDA graph capture began.
    GraphCapture,
    /// CUDA graph capture ended.
    GraphCaptured,
    /// The inference engine is built: memory profiled, KV cache allocated,
    /// warmed up (vLLM's `init engine (profile, create kv cache, warmup
    /// model) took N seconds`). What uses it comes next: the API server's
    /// listener, or the job that embeds the engine (an RL trainer's actors).
    EngineReady,
    /// A training job set up its loop (engine, datasets, the loop's start,
    /// OpenNMT's `Start training loop`, Trainer's `***** Running training
    /// *****`): its first step comes next, with the first collective of
    /// every rank.
    Training,
    /// The server answers requests (a training job logs its steps).
    Ready,
    /// The engine is inside a model step: its trace of a forward pass
    /// (TurboMind's DEBUG `LlamaV2::Forward`, `UnifiedAttentionLayer::Forward`,
    /// `dynamicDecode` lines), which with several GPUs ends in an all-reduce
    /// of every tensor-parallel rank. A ready line after it ends it.
    Forward,
    /// A request's generation began (lollms' `warmup for generating up to
    /// N tokens`): the model, or the backend server an app calls, was asked
    /// for its first tokens. A ready line after it (the generation done)
    /// ends it.
    Generating,
}

impl Stage {
    pub const ALL: [Stage; 14] = [
        Stage::Launched,
        Stage::DistributedInit,
        Stage::DistributedReady,
        Stage::FirstCollective,
        Stage::WeightsLoading,
        Stage::WeightsLoaded,
        Stage::KvCache,
        Stage::GraphCapture,
        Stage::GraphCaptured,
        Stage::EngineReady,
        Stage::Training,
        Stage::Ready,
        Stage::Forward,
        Stage::Generating,
    ];

    /// The name a catalog row writes (`weights-loaded`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Launched => "launched",
            Stage::DistributedInit => "distributed-init",
            Stage::DistributedReady => "distributed-ready",
            Stage::FirstCollective => "first-collective",
            Stage::WeightsLoading => "weights-loading",
            Stage::WeightsLoaded => "weights-loaded",
            Stage::KvCache => "kv-cache",
            Stage::GraphCapture => "graph-capture",
            Stage::GraphCaptured => "graph-captured",
            Stage::EngineReady => "engine-ready",
            Stage::Training => "training",
            Stage::Ready => "ready",
            Stage::Forward => "forward",
            Stage::Generating => "generating",
        }
    }

    /// What the stage is, for a person: "loading the weights".
    pub fn doing(self) -> &'static str {
        match self {
            Stage::Launched => "starting up",
            Stage::DistributedInit => "forming its distributed group (NCCL)",
            Stage::DistributedReady => "its distributed group formed (NCCL initialised)",
            Stage::FirstCollective => {
                "its first collective (NCCL initialised, the first all-reduce or broadcast posted)"
            }
            Stage::WeightsLoading => "loading the weights",
            Stage::WeightsLoaded => "the weights loaded",
            Stage::KvCache => "memory profiled and the KV cache sized",
            Stage::GraphCapture => "capturing CUDA graphs",
            Stage::GraphCaptured => "CUDA graphs captured",
            Stage::EngineReady => {
                "its inference engine built (memory profiled, KV cache allocated, warmed up), what uses it not started yet"
            }
            Stage::Training => "its training set up, its first step not logged yet",
            Stage::Ready => "ready to serve",
            Stage::Forward => "inside a model step (its forward pass), which never finished",
            Stage::Generating => {
                "generating an answer: the model (or the backend server it calls) asked for its first tokens"
            }
        }
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The stage a progress line reports once its counter is full
    /// (`Capturing batches …: 100%`, `23/23`): the work of this stage done.
    pub fn completed(self) -> Stage {
        match self {
            Stage::DistributedInit => Stage::DistributedReady,
            Stage::WeightsLoading => Stage::WeightsLoaded,
            Stage::GraphCapture => Stage::GraphCaptured,
            // A collective after the first (`opCount 1`), a training
            // step counted: the job runs.
            Stage::FirstCollective | Stage::Training => Stage::Ready,
            other => other,
        }
    }
}

/// A code's message string in some versions.
#[derive(Debug)]
pub struct CodeString {
    pub text: String,
    pub versions: String,
    pub upstream: Option<String>,
}

/// One printed form of a message, compiled on first use.
#[derive(Debug)]
pub struct Wording {
    /// The template as the row writes it; `None` for a raw pattern.
    pub template: Option<String>,
    pub pattern: String,
    /// The literal the prefilter looks for.
    pub anchor: String,
    pub versions: String,
    pub upstream: String,
    /// A fallback row's wording that states a failure wherever it stands;
    /// without it the row reads only error-looking lines (`schema::WordingDef::alone`).
    pub alone: bool,
    regex: OnceLock<Option<Regex>>,
}

impl Wording {
    /// The compiled pattern; `None` only if it does not compile, which the
    /// catalog tests rule out.
    pub fn regex(&self) -> Option<&Regex> {
        self.regex
            .get_or_init(|| Regex::new(&self.pattern).ok())
            .as_ref()
    }
}

/// How a program prints a code of its catalog's table.
#[derive(Debug)]
pub struct Wrapper {
    pub id: String,
    pub title: String,
    pub numbering: Numbering,
    /// The id prefix of the rows it names; all the catalog's when `None`.
    pub rows: Option<String>,
    pub wording: Wording,
    pub samples: Vec<Sample>,
}

/// Which of a row's numbers a wrapper's `code` capture is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering {
    /// The row's `code` (`cudaError_t`, `ncclResult_t`).
    Code,
    /// The row's `driver_code` (`CUresult`).
    Driver,
}

/// A real line that shows the message printed.
#[derive(Debug)]
pub struct Sample {
    pub line: String,
    pub origin: Origin,
    pub before: Vec<String>,
    pub after: Vec<String>,
    pub note: Option<String>,
    /// The rule the line gives a finding of, for a row that proves nothing
    /// by itself (see `schema::SampleDef::rule`).
    pub rule: Option<String>,
}

/// Where a sample comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A public page that shows it printed.
    Page(String),
    /// No public page shows it: the upstream line that prints it.
    Upstream(String),
}

impl Catalogs {
    fn load(files: &[(&str, &str)]) -> Catalogs {
        let mut problems = Vec::new();
        let mut ids = BTreeSet::new();
        let mut list = Vec::new();
        for (name, json) in files {
            match serde_json::from_str::<schema::Built>(json) {
                Ok(schema::Built::File(file)) => {
                    list.push(convert(name, file, &mut ids, &mut problems))
                }
                Ok(schema::Built::Error(e)) => problems.push(e),
                Err(e) => problems.push(format!("catalogs/{name}.toml, as built: {e}")),
            }
        }
        check_superseded_by(&list, &mut problems);
        let index = index::Index::new(&list, |c| !c.fallback);
        let symptoms = index::Index::new(&list, |c| c.fallback);
        Catalogs {
            list,
            problems,
            index,
            symptoms,
        }
    }

    /// The fallback catalogs' rows `text` is an instance of (the words of
    /// a failure class), none where a row or wrapper of an exact catalog
    /// reads it: the most specific row always wins a line. Asked of the
    /// kept lines [`hits`] found nothing in (`correlate::known`).
    ///
    /// [`hits`]: Catalogs::hits
    pub fn symptoms(&self, text: &str) -> Vec<Hit<'_>> {
        if self.index.knows(&self.list, text) {
            return Vec::new();
        }
        self.symptoms_alone(text)
    }

    /// The fallback catalogs' rows `text` is an instance of, whatever else
    /// reads it: their samples' test, and the measure of what the symptom
    /// rows alone would name (docs/accuracy.md, "Symptom catalog").
    pub fn symptoms_alone(&self, text: &str) -> Vec<Hit<'_>> {
        self.symptoms.hits(&self.list, text)
    }

    /// The rows (and wrappers) `text` is an instance of, most specific
    /// first: a wording or wrapper match before a bare code string.
    pub fn hits(&self, text: &str) -> Vec<Hit<'_>> {
        self.index.hits(&self.list, text)
    }

    /// The ids of the rows [`hits`] finds in `text`, cheaper when only
    /// which rows is asked (a wording need not give its captures).
    ///
    /// [`hits`]: Catalogs::hits
    pub fn row_ids(&self, text: &str) -> Vec<&str> {
        self.index.row_ids(&self.list, text)
    }

    /// Whether any row or wrapper reads `text`: cheaper than [`hits`] when
    /// only that is asked (a line no parser knew).
    ///
    /// [`hits`]: Catalogs::hits
    pub fn knows(&self, text: &str) -> bool {
        self.index.knows(&self.list, text)
    }

    /// Whether a row knows `text`, and how many lines after it belong to
    /// the same message (the row's `block`; see [`Index::known_block`]).
    pub fn known_block(&self, text: &str) -> Option<u8> {
        self.index.known_block(&self.list, text)
    }

    /// The row with this id.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.rows().find(|r| r.id == id)
    }

    /// Every row of every catalog.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.list.iter().flat_map(|c| c.rows.iter())
    }

    /// The literals the prefilter must keep lines for: every wording's and
    /// wrapper's anchor and every bare code string.
    pub fn anchors(&self) -> impl Iterator<Item = &str> {
        self.index.anchors().chain(self.symptoms.anchors())
    }
}

/// Every row's `superseded_by` names another row that has a category
/// (one that makes a finding to cite the superseded lines in).
fn check_superseded_by(list: &[Catalog], problems: &mut Vec<String>) {
    let rows: Vec<&Row> = list.iter().flat_map(|c| c.rows.iter()).collect();
    for row in &rows {
        for id in &row.superseded_by {
            let target = rows.iter().find(|r| r.id == *id);
            let bad = match target {
                None => "is no row",
                Some(r) if r.id == row.id => "is the row itself",
                Some(r) if r.category.is_none() => "has no category (it makes no finding)",
                Some(_) => continue,
            };
            problems.push(format!("row `{}`: superseded_by `{id}` {bad}", row.id));
        }
    }
}

/// A file's rows, checked; what fails a check is reported and left out.
fn convert(
    name: &str,
    file: schema::File,
    ids: &mut BTreeSet<String>,
    problems: &mut Vec<String>,
) -> Catalog {
    let at = |what: &str| format!("catalogs/{name}.toml: {what}");
    if file.catalog.id != name {
        problems.push(at(&format!(
            "the catalog's id `{}` is not its file name",
            file.catalog.id
        )));
    }
    let prefix = format!("{name}.");
    let mut rows = Vec::new();
    for def in file.row {
        let here = at(&format!("row `{}`", def.id));
        let mut bad = Vec::new();
        if !def.id.starts_with(&prefix) || !is_id(&def.id[prefix.len().min(def.id.len())..]) {
            bad.push(format!("its id does not read `{prefix}<kebab-case>`"));
        }
        if !ids.insert(def.id.clone()) {
            bad.push("its id is used twice".to_owned());
        }
        let category = match def.category.as_str() {
            "none" => None,
            c => Category::from_name(c).or_else(|| {
                bad.push(format!("unknown category `{c}`"));
                None
            }),
        };
        let severity = Severity::from_name(&def.severity).unwrap_or_else(|| {
            bad.push(format!("unknown severity `{}`", def.severity));
            Severity::Info
        });
        let stage = def.stage.as_deref().and_then(|name| {
            Stage::from_name(name).or_else(|| {
                bad.push(format!("unknown stage `{name}`"));
                None
            })
        });
        if def
            .block
            .is_some_and(|[a, b]| !(-8..=0).contains(&a) || !(0..=8).contains(&b))
        {
            bad.push("its block is not within [-8..0, 0..8]".to_owned());
        }
        if !(0.0..=1.0).contains(&def.confidence) {
            bad.push("its confidence is not within 0–1".to_owned());
        }
        // A fallback row names a class by its words, never a program's
        // message: it proves less than any exact row, and is a finding.
        if file.catalog.fallback && (def.confidence > FALLBACK_CONFIDENCE || def.category == "none")
        {
            bad.push(format!(
                "a fallback row has a category and a confidence of {FALLBACK_CONFIDENCE} at most"
            ));
        }
        if !file.catalog.fallback && def.wording.iter().any(|w| w.alone) {
            bad.push("`alone` is for a fallback catalog's wordings".to_owned());
        }
        let wordings: Vec<Wording> = def
            .wording
            .into_iter()
            .filter_map(|w| {
                wording(w.text, w.pattern, w.anchor, w.versions, w.upstream)
                    .map(|mut made| {
                        made.alone = w.alone;
                        made
                    })
                    .map_err(|e| bad.push(e))
                    .ok()
            })
            .collect();
        if wordings.is_empty() && def.string.is_empty() {
            bad.push("it has neither a wording nor a code string".to_owned());
        }
        let samples = samples(def.sample, &mut bad);
        if samples.is_empty() && def.gap.is_none() {
            bad.push("it has no sample and says no `gap`".to_owned());
        }
        if !bad.is_empty() {
            problems.extend(bad.into_iter().map(|b| format!("{here}: {b}")));
            continue;
        }
        rows.push(Row {
            id: def.id,
            title: def.title,
            headline: def.headline,
            meaning: def.meaning,
            category,
            gpu: def.gpu || file.catalog.gpu,
            severity,
            confidence: def.confidence,
            fix: def.fix,
            confirm: def.confirm,
            stage,
            rule: def.rule,
            code: def.code,
            name: def.name,
            driver_code: def.driver_code,
            driver_name: def.driver_name,
            former: def
                .former
                .into_iter()
                .map(|f| (f.code, f.versions))
                .collect(),
            resolution: def.resolution,
            strings: def
                .string
                .into_iter()
                .map(|s| CodeString {
                    text: s.text,
                    versions: s.versions,
                    upstream: s.upstream,
                })
                .collect(),
            bare: def.bare,
            wordings,
            samples,
            gap: def.gap,
            block: def.block,
            subject: def.subject,
            superseded_by: def.superseded_by,
        });
    }
    let mut wrappers = Vec::new();
    for def in file.wrapper {
        let here = at(&format!("wrapper `{}`", def.id));
        let mut bad = Vec::new();
        if !def.id.starts_with(&prefix) || !ids.insert(def.id.clone()) {
            bad.push(format!("its id does not read `{prefix}…` or is used twice"));
        }
        let numbering = match def.numbering.as_str() {
            "code" => Numbering::Code,
            "driver" => Numbering::Driver,
            n => {
                bad.push(format!("unknown numbering `{n}` (code or driver)"));
                Numbering::Code
            }
        };
        let wording = wording(
            def.text,
            def.pattern,
            def.anchor,
            def.versions,
            def.upstream,
        )
        .map_err(|e| bad.push(e))
        .ok();
        let samples = samples(def.sample, &mut bad);
        if samples.is_empty() {
            bad.push("a wrapper needs a sample".to_owned());
        }
        match wording {
            Some(wording) if bad.is_empty() => wrappers.push(Wrapper {
                id: def.id,
                title: def.title,
                numbering,
                rows: def.rows,
                wording,
                samples,
            }),
            _ => problems.extend(bad.into_iter().map(|b| format!("{here}: {b}"))),
        }
    }
    Catalog {
        id: file.catalog.id,
        title: file.catalog.title,
        upstream: file.catalog.upstream,
        versions: file.catalog.versions,
        about: file.catalog.about,
        fallback: file.catalog.fallback,
        rows,
        wrappers,
    }
}

/// The most a fallback row's line proves: the wording says a class of
/// failure; which program failed and why, it does not.
pub const FALLBACK_CONFIDENCE: f64 = 0.45;

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// A wording from its template or pattern: exactly one of the two, and a
/// raw pattern names its anchor.
fn wording(
    text: Option<String>,
    pattern: Option<String>,
    anchor: Option<String>,
    versions: String,
    upstream: String,
) -> Result<Wording, String> {
    let (pattern, anchor) = match (&text, pattern, anchor) {
        (Some(t), None, anchor) => {
            let c = template::compile(t).map_err(|e| format!("template `{t}`: {e}"))?;
            (c.regex, anchor.unwrap_or(c.anchor))
        }
        (None, Some(p), Some(a)) => (p, a),
        (None, Some(p), None) => return Err(format!("pattern `{p}` needs an `anchor`")),
        (Some(_), Some(_), _) => {
            return Err("a wording has a `text` or a `pattern`, not both".into());
        }
        (None, None, _) => return Err("a wording needs a `text` or a `pattern`".into()),
    };
    if anchor.chars().count() < template::MIN_ANCHOR {
        return Err(format!("anchor `{anchor}` is too short for the prefilter"));
    }
    Ok(Wording {
        template: text,
        pattern,
        anchor,
        versions,
        upstream,
        alone: false,
        regex: OnceLock::new(),
    })
}

fn samples(defs: Vec<schema::SampleDef>, bad: &mut Vec<String>) -> Vec<Sample> {
    defs.into_iter()
        .filter_map(|s| {
            let origin = match (s.source, s.upstream) {
                (Some(url), None) if url.starts_with("https://") => Origin::Page(url),
                (None, Some(up)) => Origin::Upstream(up),
                _ => {
                    bad.push(format!(
                        "sample `{}` needs one origin: `source` (an https page) or `upstream`",
                        s.line
                    ));
                    return None;
                }
            };
            Some(Sample {
                line: s.line,
                origin,
                before: s.before,
                after: s.after,
                note: s.note,
                rule: s.rule,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `knows` stops at the first match and captures nothing; it must say
    /// what `hits` says: on every sample line, its neighbours, and lines
    /// that hold an anchor but no message.
    #[test]
    fn knows_is_whether_hits_finds_anything() {
        let all = catalogs();
        let mut lines: Vec<&str> = Vec::new();
        for c in &all.list {
            let samples = c
                .rows
                .iter()
                .flat_map(|r| r.samples.iter())
                .chain(c.wrappers.iter().flat_map(|w| w.samples.iter()));
            for s in samples {
                lines.push(&s.line);
                lines.extend(s.before.iter().chain(s.after.iter()).map(String::as_str));
            }
        }
        let anchors: Vec<String> = all
            .anchors()
            .map(|a| format!("nothing but {a} here"))
            .collect();
        lines.extend(anchors.iter().map(String::as_str));
        lines.extend(["", "plain text", "sglang.service: Started.", "error"]);
        let (mut known, mut unknown) = (0, 0);
        for line in lines {
            let hits = !all.hits(line).is_empty();
            assert_eq!(all.knows(line), hits, "{line:?}");
            assert_eq!(all.known_block(line).is_some(), hits, "{line:?}");
            if hits { known += 1 } else { unknown += 1 }
        }
        // Both answers were asked for, many times.
        assert!(known > 500 && unknown > 50, "{known} known, {unknown} not");
    }

    /// A row's `superseded_by` must name another row that makes a
    /// finding: an id that is no row, the row itself or a row without a
    /// category is reported, and a good one is not.
    #[test]
    fn superseded_by_names_rows_that_exist_and_make_findings() {
        let row = |id: &str, category: &str, superseded_by: &[&str]| {
            serde_json::json!({
                "id": id, "title": "t", "meaning": "m", "category": category,
                "severity": "error", "confidence": 0.5,
                "wording": [{"text": format!("the message of {id}"), "versions": "v1", "upstream": "u"}],
                "sample": [{"line": format!("the message of {id}"), "upstream": "u"}],
                "superseded_by": superseded_by,
            })
        };
        let file = serde_json::json!({"File": {
            "catalog": {"id": "toy", "title": "t", "upstream": "u", "versions": "v"},
            "row": [
                row("toy.kill", "host-oom-killer", &[]),
                row("toy.note", "none", &[]),
                row("toy.advice", "host-oom-killer", &["toy.kill"]),
                row("toy.missing", "host-oom-killer", &["toy.nothing"]),
                row("toy.self", "host-oom-killer", &["toy.self"]),
                row("toy.silent", "host-oom-killer", &["toy.note"]),
            ],
        }})
        .to_string();
        let loaded = Catalogs::load(&[("toy", file.as_str())]);
        let said = loaded.problems.join("\n");
        assert_eq!(loaded.problems.len(), 3, "{said}");
        assert!(
            said.contains("`toy.missing`: superseded_by `toy.nothing` is no row"),
            "{said}"
        );
        assert!(
            said.contains("`toy.self`: superseded_by `toy.self` is the row itself"),
            "{said}"
        );
        assert!(
            said.contains("`toy.silent`: superseded_by `toy.note` has no category"),
            "{said}"
        );
        assert!(!said.contains("toy.advice"), "{said}");
    }

    #[test]
    fn the_compiled_in_catalogs_load_without_a_problem() {
        let all = catalogs();
        assert!(all.problems.is_empty(), "{}", all.problems.join("\n"));
        assert_eq!(all.list.len(), FILES.len());
    }

    /// What `build.rs` compiled in is what the TOML says, field by field,
    /// and every file of `catalogs/` is compiled in.
    #[test]
    fn a_code_string_cut_short_by_the_paste_still_names_its_row() {
        // https://github.com/apache/mxnet/issues/6798 (the paste ends mid-word)
        let cut =
            "[12:44:34] src/storage/./pooled_storage_manager.h:84: cudaMalloc failed: out of mem";
        let rows: Vec<&str> = catalogs()
            .hits(cut)
            .iter()
            .filter_map(|h| h.row.map(|r| r.id.as_str()))
            .collect();
        assert_eq!(rows, ["cuda.memory-allocation"], "{cut}");
        // A cut that could begin several strings names none of them.
        let short = "cudaMalloc failed: invalid";
        assert!(
            catalogs().hits(short).iter().all(|h| h.row.is_none()),
            "{short}"
        );
    }

    #[test]
    fn the_compiled_in_catalogs_are_the_toml_files() {
        let dir =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("catalogs");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("catalogs/")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".toml").map(str::to_owned))
            .collect();
        on_disk.sort();
        let mut compiled: Vec<String> = FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
        compiled.sort();
        assert_eq!(on_disk, compiled);
        for (name, json) in FILES {
            let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).expect("file");
            let toml: schema::File = toml::from_str(&text).expect("parses");
            match serde_json::from_str::<schema::Built>(json).expect("built") {
                schema::Built::File(built) => assert!(built == toml, "{name}: rebuild"),
                schema::Built::Error(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn every_wording_compiles() {
        for row in catalogs().rows() {
            for w in &row.wordings {
                assert!(
                    w.regex().is_some(),
                    "{}: `{}` does not compile",
                    row.id,
                    w.pattern
                );
            }
        }
        for c in &catalogs().list {
            for w in &c.wrappers {
                assert!(w.wording.regex().is_some(), "{}: does not compile", w.id);
            }
        }
    }

    /// A sample is the row's own evidence: alone, the line is that row.
    #[test]
    fn every_sample_is_its_rows_message() {
        let all = catalogs();
        for c in &all.list {
            for row in &c.rows {
                // A fallback row's sample may be a line an exact row reads
                // too (the same class in another stack's words): the symptom
                // rows alone must read it as this row.
                let read = |line: &str| match c.fallback {
                    true => all.symptoms_alone(line),
                    false => all.hits(line),
                };
                for s in &row.samples {
                    let hits = read(&s.line);
                    assert!(
                        hits.iter().any(|h| h.row.is_some_and(|r| r.id == row.id)),
                        "{}: its sample reads as {:?}: {}",
                        row.id,
                        hits.iter()
                            .map(|h| h.row.map(|r| &r.id))
                            .collect::<Vec<_>>(),
                        s.line
                    );
                }
            }
        }
        for c in &all.list {
            for w in &c.wrappers {
                for s in &w.samples {
                    let hits = all.hits(&s.line);
                    assert!(
                        hits.iter()
                            .any(|h| matches!(h.via, Via::Wrapper(x) if x.id == w.id)),
                        "{}: its sample is not read through it: {}",
                        w.id,
                        s.line
                    );
                }
            }
        }
    }

    /// The most specific row wins a line: where an exact row reads it, the
    /// symptom rows do not (PyTorch's OOM is `stacks-torch.cuda-oom`, not
    /// the class of GPU memory exhausted), and where none does they name
    /// its class (a wording no exact row knows, assembled from the class's
    /// words: a new stack's allocator).
    #[test]
    fn an_exact_row_wins_a_line_the_symptom_rows_read_too() {
        let all = catalogs();
        let torch = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.79 GiB of which 3.44 MiB is free.";
        assert!(!all.hits(torch).is_empty());
        assert!(
            !all.symptoms_alone(torch).is_empty(),
            "the class reads it too"
        );
        assert!(all.symptoms(torch).is_empty(), "but the exact row wins");
        let new = "NewStackError: failed to allocate 2.00 GiB on the device: out of device memory";
        assert!(all.hits(new).is_empty());
        let rows: Vec<&str> = all
            .symptoms(new)
            .iter()
            .filter_map(|h| h.row.map(|r| r.id.as_str()))
            .collect();
        assert_eq!(rows, ["symptoms.gpu-memory-exhausted"], "{new}");
    }

    #[test]
    fn a_wrapper_names_its_row_by_code_name_or_string() {
        let all = catalogs();
        let row = |line: &str| {
            all.hits(line)
                .into_iter()
                .filter_map(|h| h.row.map(|r| r.id.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            row("THCudaCheck FAIL file=x.cu line=25 error=46 : whatever it says"),
            ["cuda.devices-unavailable"]
        );
        assert_eq!(
            row(
                "Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/x.html"
            ),
            ["cuda.stream-capture-unsupported"]
        );
        // Numbers before CUDA 10.1 meant other codes: the string decides.
        assert_eq!(
            row("RuntimeError: cuda runtime error (4) : unspecified launch failure at x.cu:85"),
            ["cuda.launch-failure"]
        );
        assert_eq!(
            row(
                "THCudaCheck FAIL file=m.cpp line=109 error=38 : no CUDA-capable device is detected"
            ),
            ["cuda.no-device"]
        );
        // A number alone is today's numbering; a string two codes share
        // goes to the one the number names.
        assert_eq!(
            row("cuda runtime error (300) : device kernel image is invalid"),
            ["cuda.invalid-source"]
        );
        // The driver API's numbers and names (NCCL ≥ 2.19, numba).
        assert_eq!(
            row("x.cc:1 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'"),
            ["cuda.illegal-address"]
        );
        assert_eq!(
            row("CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY"),
            ["cuda.memory-allocation"]
        );
        // An unknown code is a known wrapper, and no row.
        let hits = all.hits("THCudaCheck FAIL file=x.cu line=25 error=12345 : new");
        assert_eq!(hits.len(), 1);
        assert!(hits[0].row.is_none());
        assert!(all.hits("an ordinary line").is_empty());
    }
}
