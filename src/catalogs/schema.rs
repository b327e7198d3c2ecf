//! The catalogs' files as they are written (`catalogs/*.toml`), and their
//! checks: what a row must say before it is compiled in. CONTRIBUTING.md
//! shows a row; docs/catalogs/ lists every row, generated from these files.
//!
//! `build.rs` reads this file too: it parses each catalog's TOML into these
//! types at build time and writes them as JSON ([`Built`]), which the
//! binary reads back in a fraction of the time TOML takes.

use serde::{Deserialize, Serialize};

/// One catalog file as `build.rs` read it: its contents, or why its TOML
/// did not parse (reported by the catalogs' test, like a bad row).
#[derive(Debug, Serialize, Deserialize)]
pub enum Built {
    File(File),
    Error(String),
}

/// One catalog file.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub catalog: Header,
    #[serde(default)]
    pub row: Vec<RowDef>,
    #[serde(default)]
    pub wrapper: Vec<WrapperDef>,
}

/// What the catalog is and where upstream keeps it.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// The prefix of its rows' ids (`cuda`, `systemd`).
    pub id: String,
    pub title: String,
    /// Where upstream lists the messages (repository and files).
    pub upstream: String,
    /// The versions the rows cover.
    pub versions: String,
    /// A paragraph for the generated page: what the catalog is, how its
    /// messages reach a log.
    #[serde(default)]
    pub about: String,
    /// Every row is GPU serving software's (`gpu` of [`RowDef`]): CUDA,
    /// NCCL, DCGM, a model server's start-up.
    #[serde(default)]
    pub gpu: bool,
    /// A fallback catalog (`catalogs/symptoms.toml`): its rows are failure
    /// classes by the words every stack uses for them, not one program's
    /// messages. A line is read by them only where no row of another
    /// catalog reads it (`Catalogs::symptoms`), and their finding says it
    /// is the wording's class, below every exact finding (the
    /// `symptom-wording` rule).
    #[serde(default)]
    pub fallback: bool,
}

/// One message (or one code of a code table) of the catalog.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowDef {
    /// `<catalog>.<name>`, kebab-case, stable, never reused.
    pub id: String,
    /// One line: the message's gist as a finding's title.
    pub title: String,
    /// The finding's one-sentence headline, `{capture}` filled from the
    /// line (`{unit} was killed by the OOM killer`); the title when absent
    /// or when the line lacks a capture it names.
    #[serde(default)]
    pub headline: Option<String>,
    /// What it means, for a person.
    pub meaning: String,
    /// A report category, or `none` for a line that is read but proves no
    /// failure by itself.
    pub category: String,
    /// The line is printed by GPU serving software (the NVIDIA driver's
    /// `NVRM`, an Xid, NVLink, GSP): one in the inputs ties a unit's failure
    /// to GPU serving (`rules::support::scope`). The catalog's header may
    /// say it for all its rows.
    #[serde(default)]
    pub gpu: bool,
    /// `critical`, `error`, `warning` or `info`.
    pub severity: String,
    /// How much this line alone proves its category, 0–1.
    pub confidence: f64,
    /// What to do about it.
    #[serde(default)]
    pub fix: Option<String>,
    /// The command that would settle what the line alone leaves open.
    #[serde(default)]
    pub confirm: Option<String>,
    /// A start-up milestone: the stage a server has reached when it prints
    /// this line (`Stage` in `catalogs/mod.rs`; rules read how far a start-up
    /// got and whether it went silent after).
    #[serde(default)]
    pub stage: Option<String>,
    /// The built-in rule that reasons further about this message (numbers,
    /// holders, order); its finding stands in for the row's own.
    #[serde(default)]
    pub rule: Option<String>,
    /// Code tables: the code's number and enum name in the primary API
    /// (`cudaError_t`, `ncclResult_t`) …
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub name: Option<String>,
    /// … and in the second one, where there is one (`CUresult`).
    #[serde(default)]
    pub driver_code: Option<i64>,
    #[serde(default)]
    pub driver_name: Option<String>,
    /// Code tables: the numbers the code had in older versions (CUDA's
    /// runtime renumbered its codes in 10.1), for the docs and for a
    /// wrapper that printed an old number with the code's string.
    #[serde(default)]
    pub former: Vec<FormerDef>,
    /// Code tables: what upstream's own catalog says to do about the code
    /// (NVIDIA's Xid catalog: `RESTART_APP`, `RESET_GPU`, `RESTART_BM` …).
    #[serde(default)]
    pub resolution: Option<String>,
    /// Code tables: the code's message string, per version.
    #[serde(default)]
    pub string: Vec<StringDef>,
    /// The strings are distinctive enough to be read with no wrapper around
    /// them (`CUDA-capable device(s) is/are busy or unavailable`, not
    /// `invalid argument`).
    #[serde(default)]
    pub bare: bool,
    #[serde(default)]
    pub wording: Vec<WordingDef>,
    #[serde(default)]
    pub sample: Vec<SampleDef>,
    /// Why no sample is given (a listed gap in the generated docs).
    #[serde(default)]
    pub gap: Option<String>,
    /// The lines around this one, relative to it (`[-1, 2]`: one before,
    /// two after), that upstream prints with it as one message (ggml's CUDA
    /// error: the `CUDA error:` line, this `current device:` line, the
    /// failed call, the abort): a finding that cites any of them has the
    /// facts this line's captures state.
    #[serde(default)]
    pub block: Option<[i32; 2]>,
    /// The row of the line that names the process this line reports on
    /// (a supervisor's `started ollama server with pid 15024` before its
    /// `server crash 21 - exit code 1 - respawning`): a finding that cites
    /// this line has the facts of the last such line before it, in the
    /// same input.
    #[serde(default)]
    pub subject: Option<String>,
    /// Rows that report the same event more fully (Ray's kill line over
    /// its advice printed under it): where a line of one of them is in the
    /// same input, this row's lines are cited by that row's finding and
    /// make none of their own. Checked at load: each id is a row with a
    /// category.
    #[serde(default)]
    pub superseded_by: Vec<String>,
}

/// A code's message string in some versions.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StringDef {
    pub text: String,
    pub versions: String,
    /// Where the string comes from, when not the catalog's header source.
    #[serde(default)]
    pub upstream: Option<String>,
}

/// A number the code had in some older versions.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormerDef {
    pub code: i64,
    pub versions: String,
}

/// One way the message is printed: a template (`template.rs`), or a raw
/// regex with its anchor when a template cannot say it.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordingDef {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub anchor: Option<String>,
    pub versions: String,
    /// Repository, file and function (or format string) that prints it.
    pub upstream: String,
    /// A fallback catalog's wording that states a failure wherever it
    /// stands (`no CUDA-capable device is detected`): read on any line.
    /// Without it, a fallback row reads only a line that looks like an
    /// error (a level, an exception, a failure statement), never advice.
    #[serde(default)]
    pub alone: bool,
}

/// A line printed for real: from a public page, or (marked) the upstream
/// source line that prints it when no public page shows it.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleDef {
    pub line: String,
    /// The public page (issue, forum thread) where it was printed.
    #[serde(default)]
    pub source: Option<String>,
    /// No public page shows it: the upstream line that prints it
    /// (`repo@commit path:line`), and the sample is that format rendered.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Real lines printed around it in the same paste, for the tests that
    /// read the sample among its neighbours.
    #[serde(default)]
    pub before: Vec<String>,
    #[serde(default)]
    pub after: Vec<String>,
    #[serde(default)]
    pub note: Option<String>,
    /// The rule this line gives a finding of (alone, or with its
    /// neighbours) where the row proves nothing by itself (`category =
    /// "none"`) and a rule reads its numbers or order: the tests hold the
    /// rule to it.
    #[serde(default)]
    pub rule: Option<String>,
}

/// A wrapper of a code table: how a program prints a code of the table
/// (`RuntimeError: CUDA error: <msg>`, `CUDA error <code> at <path>: <msg>`).
/// Its template captures `code`, `name` or `msg`, which say the row.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrapperDef {
    pub id: String,
    pub title: String,
    /// Which numbering a captured `code` is in: `code` (the row's `code`)
    /// or `driver` (its `driver_code`).
    #[serde(default = "default_numbering")]
    pub numbering: String,
    /// The id prefix of the rows its captures name, where the catalog
    /// holds more than one code table (`kernel.xid-`: an Xid's number is
    /// not an `NV_STATUS` code's).
    #[serde(default)]
    pub rows: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub anchor: Option<String>,
    pub versions: String,
    pub upstream: String,
    #[serde(default)]
    pub sample: Vec<SampleDef>,
}

fn default_numbering() -> String {
    "code".to_owned()
}
