//! A configuration a program echoes at start-up as YAML, under a head that
//! says so: llama-toolchain's inference server prints `Yaml config:`, a rule
//! of dashes, then `inference_config:` and its indented `key: value` lines
//! (meta-llama/llama-stack-apps#15); servers and trainers print their
//! resolved settings the same way (Hydra's `OmegaConf.to_yaml`, a
//! `model_config:` block). The head is a line ending in `config:` (the
//! last word before the colon ends in `config`, any case); the block goes
//! on while each line is YAML's: `key:`, `key: value` or `- item`, keys an
//! identifier. A key that reads as an exception's name (`RuntimeError:`,
//! `SomeException:`, `…Warning:`) or an unindented key in capitals ends it:
//! such a line is an error's or a logger's, never the config's. Blank lines
//! and rules of dashes inside the block keep it open. Nothing here is a
//! fact: the lines are read so that a config echo counts as read.

/// Lines from one line of the block to the next at most (a blank line and
/// a rule between them): a line another reader took ends the block.
const GAP: u32 = 3;

/// The state of a config echo being read.
#[derive(Debug, Default)]
pub(super) struct ConfigEcho {
    /// The block's last line read so far, while it is open.
    last: Option<u32>,
}

impl ConfigEcho {
    /// Whether `text`, on line `line` of its input, is a config echo's head
    /// or one of its lines; any other line ends the block.
    pub(super) fn read(&mut self, text: &str, line: u32) -> bool {
        if is_head(text) {
            self.last = Some(line);
            return true;
        }
        let open = self
            .last
            .is_some_and(|last| line > last && line - last <= GAP);
        if open && (is_dash_rule(text) || is_yaml_line(text)) {
            self.last = Some(line);
            return true;
        }
        self.last = None;
        false
    }
}

/// `Yaml config:`, `inference_config:`, `Model config:`: a short line that
/// ends in `config:` and holds no other colon.
fn is_head(text: &str) -> bool {
    let t = text.trim();
    let Some(words) = t.strip_suffix(':') else {
        return false;
    };
    t.len() <= 60
        && !words.contains(':')
        && words.len() >= "config".len()
        && words
            .get(words.len() - "config".len()..)
            .is_some_and(|end| end.eq_ignore_ascii_case("config"))
        && words
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b'_' | b'-' | b'.'))
}

/// A rule of dashes drawn around the block (`------------------------`).
fn is_dash_rule(text: &str) -> bool {
    let t = text.trim();
    t.len() >= 3 && t.bytes().all(|b| b == b'-')
}

/// `key:`, `key: value`, `- item`, `- key: value`, indented or not.
fn is_yaml_line(text: &str) -> bool {
    let indented = text.starts_with(' ');
    let mut t = text.trim();
    if let Some(item) = t.strip_prefix("- ") {
        t = item.trim_start();
        if !t.contains(": ") && !t.ends_with(':') {
            return !t.is_empty();
        }
    } else if t == "-" {
        return true;
    }
    let (key, value) = match t.split_once(": ") {
        Some((key, value)) => (key, Some(value)),
        None => match t.strip_suffix(':') {
            Some(key) => (key, None),
            None => return false,
        },
    };
    let identifier = key
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let exception = ["Error", "Exception", "Warning", "Traceback"]
        .iter()
        .any(|end| key.ends_with(end));
    let logger = !indented && key.bytes().all(|b| !b.is_ascii_lowercase());
    identifier && !exception && !logger && value.is_none_or(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// meta-llama/llama-stack-apps#15: llama-toolchain's inference server's
    /// echo, verbatim, then the server's first line after it.
    const ECHO: &str = "Yaml config:
------------------------
inference_config:
  impl_config:
    impl_type: inline
    checkpoint_config:
      checkpoint:
        checkpoint_type: pytorch
        checkpoint_dir: /root/.llama/checkpoints/Meta-Llama-3.1-8B-Instruct/original/
        tokenizer_path: /root/.llama/checkpoints/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model
        model_parallel_size: 1
        quantization_format: bf16
    quantization: null
    torch_seed: null
    max_seq_len: 16384
    max_batch_size: 1

------------------------
Listening on :::5000";

    #[test]
    fn the_echo_is_read_to_its_end_and_no_further() {
        let mut echo = ConfigEcho::default();
        let read: Vec<bool> = (1..)
            .zip(ECHO.lines())
            .filter(|(_, l)| !l.is_empty())
            .map(|(n, l)| echo.read(l, n))
            .collect();
        let (last, block) = read.split_last().unwrap();
        assert!(block.iter().all(|r| *r), "{read:?}");
        assert!(!last, "the server's own line is not the config's");
    }

    #[test]
    fn yaml_lines_need_a_head() {
        let mut echo = ConfigEcho::default();
        assert!(!echo.read("  max_seq_len: 16384", 1));
        assert!(!echo.read("inference_config", 2));
    }

    #[test]
    fn an_error_ends_the_block_and_is_not_read() {
        let mut echo = ConfigEcho::default();
        assert!(echo.read("model_config:", 1));
        assert!(echo.read("  dtype: bfloat16", 2));
        assert!(!echo.read("RuntimeError: CUDA error: out of memory", 3));
        // The block is over: a YAML line after it is not the config's.
        assert!(!echo.read("  dtype: bfloat16", 4));
        assert!(echo.read("Config:", 5));
        assert!(!echo.read("  torch.OutOfMemoryError: CUDA out of memory.", 6));
        assert!(echo.read("Config:", 7));
        assert!(!echo.read("INFO: Started server process [6765]", 8));
        assert!(echo.read("Config:", 9));
        assert!(!echo.read("Loading checkpoint shards: 100%", 10));
    }

    #[test]
    fn a_line_another_reader_took_ends_the_block() {
        let mut echo = ConfigEcho::default();
        assert!(echo.read("model_config:", 1));
        assert!(echo.read("  dtype: bfloat16", 2));
        // Lines 3 to 9 went to other readers.
        assert!(!echo.read("  dtype: bfloat16", 10));
    }

    #[test]
    fn heads_end_in_config() {
        assert!(is_head("Yaml config:"));
        assert!(is_head("inference_config:"));
        assert!(!is_head(
            "Loading config from : /root/.llama/configs/inference.yaml"
        ));
        assert!(!is_head("Error: failed to load config:"));
        assert!(!is_head("configuration:"));
    }
}
