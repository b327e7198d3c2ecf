//! The command a bare `Killed` ended: the last command typed at a prompt
//! before it, in the same input, with nothing of a server's after it
//! (`$ ./gemma --tokenizer tokenizer.spm --compressed_weights 2b-it.sbs
//! --model 2b-it` then `Killed`). Where it names a model or weights to load
//! (`MODEL_ARGS`), what was killed is that load, even when the program
//! printed nothing of its own.

use crate::correlate::Incident;
use crate::model::TypedCommand;
use crate::rules::Finding;
use crate::source::Span;

use super::{Killed, MODEL_ARGS};

/// The command typed last before the bare `Killed` at `kill`, where it
/// names a model to load and no server line stands between them (none
/// where a checkpoint converter's command line, `converter`, tells it).
pub(super) fn model_command<'a>(
    incident: &'a Incident,
    kill: Span,
    server_line: Option<Span>,
    killed: Killed<'_>,
    converter: Option<Span>,
) -> Option<&'a TypedCommand> {
    if !matches!(killed, Killed::Shell(None)) || converter.is_some() {
        return None;
    }
    incident
        .facts
        .typed_commands
        .iter()
        .filter(|c| c.span.source == kill.source && c.span < kill)
        .max_by_key(|c| c.span)
        .filter(|c| server_line.is_none_or(|l| l < c.span))
        .filter(|c| MODEL_ARGS.is_match(&c.command))
}

/// Cites the command the kill ended.
pub(super) fn cite(f: &mut Finding, typed: Option<&TypedCommand>) {
    if let Some(c) = typed {
        f.evidence(
            c.span,
            "the command the kill ended, typed just before it: it names a model or weights to load into memory",
        );
    }
}

/// The weights a command names: a file with a weights file's extension
/// (`2b-it.sbs`, `model.gguf`), else the value of its model option
/// (`--model 2b-it`).
fn weights(command: &str) -> Option<&str> {
    const EXTENSIONS: [&str; 10] = [
        ".safetensors",
        ".gguf",
        ".ckpt",
        ".pth",
        ".pt",
        ".bin",
        ".sbs",
        ".onnx",
        ".h5",
        ".ggml",
    ];
    let words: Vec<&str> = command.split_whitespace().collect();
    let file = words
        .iter()
        .map(|w| w.split('=').next_back().unwrap_or(w))
        .find(|w| {
            let lower = w.to_ascii_lowercase();
            EXTENSIONS.iter().any(|e| lower.ends_with(e))
        });
    file.or_else(|| {
        words.iter().enumerate().find_map(|(i, w)| {
            let (flag, value) = w.split_once('=').unwrap_or((w, ""));
            if !flag.starts_with("--") || !MODEL_ARGS.is_match(flag) {
                return None;
            }
            if value.is_empty() {
                words.get(i + 1).copied()
            } else {
                Some(value)
            }
        })
    })
}

/// The finding's words for a load the kill ended: the program and what
/// it was loading, as typed.
pub(super) fn explain(f: &mut Finding, typed: Option<&TypedCommand>) {
    let Some(typed) = typed else { return };
    let program = typed
        .command
        .split_whitespace()
        .next()
        .unwrap_or("the command");
    let loading = weights(&typed.command)
        .map(|w| format!(", loading {w}"))
        .unwrap_or_default();
    f.title = format!(
        "{program} was killed by SIGKILL while it loaded a model, with no error of its own: most likely the OOM killer"
    );
    f.headline = format!(
        "The command typed before the kill ({program}{loading}) was Killed (SIGKILL) with nothing of its own printed: most likely the kernel's OOM killer, the host's RAM (or the container's or WSL VM's memory limit) exhausted while it read the model; the kernel's lines are not in the inputs."
    );
    if let Some(first) = f.chain.first_mut() {
        *first = format!("{program} was Killed while it loaded a model");
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// google/gemma.cpp#30 (WSL): the command and the shell's `Killed`,
    /// each pasted after a `$ `, nothing else.
    #[test]
    fn a_killed_load_typed_at_a_prompt_is_read_with_its_command() {
        let paste = "$  ./gemma  --tokenizer /home/home/F/GPT/Gemma/2b-it-cpp/tokenizer.spm --compressed_weights /home/home/F/GPT/Gemma/2b-it-cpp/2b-it.sbs --model 2b-it \n$  Killed\n";
        let found = findings_of(super::super::META.id, paste);
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0];
        assert!(f.evidence.iter().any(|e| e.span.line == 1), "{f:#?}");
        assert!(f.confidence <= 0.45, "{}", f.confidence);
        assert!(f.headline.contains("2b-it.sbs"), "{}", f.headline);
    }

    #[test]
    fn the_weights_a_command_names() {
        assert_eq!(
            super::weights("./main -m models/7B/ggml-model-q4_0.gguf -n 128"),
            Some("models/7B/ggml-model-q4_0.gguf")
        );
        assert_eq!(
            super::weights("python serve.py --model_name_or_path=/data/llama --port 8000"),
            Some("/data/llama")
        );
        assert_eq!(super::weights("python train.py --epochs 3"), None);
        assert_eq!(super::weights("./gemma --model 2b-it"), Some("2b-it"));
    }

    /// A command that loads nothing (`ls`) before the kill says nothing of it.
    #[test]
    fn a_command_that_names_no_model_is_not_read() {
        let found = findings_of(super::super::META.id, "$ ls -la /data\n$  Killed\n");
        assert!(found.is_empty(), "{found:#?}");
    }
}
