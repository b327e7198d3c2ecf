//! Tool failures: bad flags and unreadable inputs. Bad *content* is never an
//! error (parsers count what they cannot read); these are. Exit code 2.

use std::fmt;
use std::io;

#[derive(Debug)]
pub enum Error {
    /// An input path could not be read.
    Io { path: String, source: io::Error },
    /// A directory held nothing to analyse.
    EmptyDirectory { path: String },
    /// Nothing to read: no paths and stdin is a terminal.
    NoInput,
    /// A user rule file is invalid: what the rule loader said
    /// (`rules::RuleFileError`, written `file:line:column: message`).
    RuleFile(String),
    /// `explain` of a rule id that does not exist.
    UnknownRule { id: String, hint: String },
    /// Writing the report or the script failed.
    Output { path: String, source: io::Error },
    /// An input needs a system tool to be read, and it is not installed.
    MissingTool {
        path: String,
        what: &'static str,
        tool: String,
        package: &'static str,
    },
    /// The system tool that reads an input failed on it.
    Tool {
        path: String,
        tool: String,
        message: String,
    },
    /// `timeline --around` of a finding that does not exist.
    UnknownFinding { id: String, hint: String },
    /// `capture` into a folder that already holds files.
    OutputNotEmpty { path: String },
    /// A folder in which no file is in a format rootcause reads.
    NothingRecognised { path: String, files: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "cannot read {path}: {source}"),
            Error::EmptyDirectory { path } => write!(
                f,
                "{path} holds no input files (expected logs such as sglang.log, nvidia-smi.txt, journal.txt)"
            ),
            Error::NoInput => write!(
                f,
                "no input: give log files or a bundle directory, or pipe a paste on stdin (try `rootcause demo`)"
            ),
            Error::Output { path, source } => write!(f, "cannot write {path}: {source}"),
            Error::RuleFile(e) => write!(f, "invalid rule {e}"),
            Error::UnknownRule { id, hint } => {
                write!(f, "unknown rule `{id}`{hint}; `rootcause rules` lists them")
            }
            Error::MissingTool {
                path,
                what,
                tool,
                package,
            } => write!(
                f,
                "cannot read {path}: it is {what}, which needs `{tool}` (apt-get install {package})"
            ),
            Error::Tool {
                path,
                tool,
                message,
            } => write!(f, "cannot read {path}: {tool} failed: {message}"),
            Error::UnknownFinding { id, hint } => write!(
                f,
                "no finding `{id}` in this incident{hint}; the report lists its findings"
            ),
            Error::NothingRecognised { path, files } => write!(
                f,
                "{path}: none of its {files} file(s) is a log rootcause reads; expected SGLang or vLLM server logs, \
                 nvidia-smi output (table, -q, --query-gpu/--query-compute-apps CSV), journalctl output, \
                 systemctl status, ps or kernel logs (`rootcause inputs {path}` shows how each file was read; \
                 --format-hint FORMAT forces one)"
            ),
            Error::OutputNotEmpty { path } => write!(
                f,
                "{path} already holds files: capture writes into a new or empty folder"
            ),
        }
    }
}

impl std::error::Error for Error {}
