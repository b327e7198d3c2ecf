//! The fast path for the lines servers print by the million: vLLM's
//! records (`INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt
//! throughput: …`, `Received request …`) and uvicorn's access log (`INFO:
//! 10.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK`, health checks
//! included). Told by their bytes, before any regex: the skimming server
//! reader (`server::ServerLogParser::skim`) asks these first for a line
//! under a journal entry (the journal's time and PID time it and name its
//! writer, so nothing else of it is needed). Each test accepts exactly what
//! the regex it stands for would, or less.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use regex::Regex;

/// Whether `text` is a vLLM record (`LEVEL MM-DD HH:MM:SS[.frac]
/// [file.py:line] message`), its seconds printed: `server::vllm`'s grammar.
pub(crate) fn vllm_record(text: &str) -> bool {
    crate::ingest::vllm_head::head(text).is_some_and(|h| h.hms.len() == 8)
}

/// Whether `text` is a uvicorn access line: `INFO:` and spaces, a client
/// `host:port`, ` - "`, a method, a path, `HTTP/…"`, a status code.
pub(crate) fn access_line(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("INFO:") else {
        return false;
    };
    let rest = rest.trim_start_matches(' ');
    let Some((client, request)) = rest.split_once(" - \"") else {
        return false;
    };
    let client_ok = client.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !host.contains(' ')
            && !port.is_empty()
            && port.bytes().all(|c| c.is_ascii_digit())
    });
    if !client_ok {
        return false;
    }
    let Some((method, rest)) = request.split_once(' ') else {
        return false;
    };
    const METHODS: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"];
    if !METHODS.contains(&method) {
        return false;
    }
    let Some((_, status)) = rest
        .split_once(" HTTP/")
        .and_then(|(_, v)| v.split_once("\" "))
    else {
        return false;
    };
    let code = status.as_bytes();
    code.len() >= 3 && code[..3].iter().all(u8::is_ascii_digit)
}

/// Whether `text` is a serving stack's steady progress line, printed per
/// request or per scheduler step by a healthy server: read, it proves
/// nothing (fixtures/chatter/). Told by fixed lead-ins, no regex:
/// - SGLang's scheduler (`Decode batch. #running-req: …`, `Prefill batch,
///   #new-seq: …`; `.` before 2025-10, `,` after), bare or under the
///   0.2-era `[gpu=0] ` or `[gpu_id=0] ` (python/sglang/srt/managers/
///   tp_worker.py, both wordings: `f"[gpu={self.gpu_id}] Decode batch. "`,
///   then `f"[gpu_id={self.gpu_id}] Decode batch. "`);
/// - Gin's access line, which ollama prints per request (gin-gonic/gin
///   logger.go defaultLogFormatter: `[GIN] 2006/01/02 - 15:04:05 | 200 |
///   1.2ms | 127.0.0.1 | POST "/api/chat"`);
/// - llama.cpp's per-request timings (tools/server print_timing(): `prompt
///   eval time = … ms / … tokens (…)`, `eval time =`, `total time =`) and
///   its speculative decoder's `statistics <name>: #calls(b,g,a) = …`.
pub(crate) fn progress(text: &str) -> bool {
    sglang_batch(text) || gin_access(text) || llama_timing(text)
}

fn sglang_batch(text: &str) -> bool {
    let mut rest = text;
    for tag in ["[gpu=", "[gpu_id="] {
        if let Some(after) = rest.strip_prefix(tag) {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            match after[digits..].strip_prefix("] ") {
                Some(r) if digits > 0 => rest = r,
                _ => return false,
            }
            break;
        }
    }
    let fields = ["Decode batch", "Prefill batch"]
        .iter()
        .find_map(|lead| rest.strip_prefix(lead))
        .and_then(|r| r.strip_prefix(". ").or_else(|| r.strip_prefix(", ")));
    fields.is_some_and(|f| f.starts_with("#running-req: ") || f.starts_with("#new-seq: "))
}

fn gin_access(text: &str) -> bool {
    // `[GIN] 2006/01/02 - 15:04:05 | ` then the status, read by position.
    const SHAPE: &[u8; 30] = b"[GIN] 0000/00/00 - 00:00:00 | ";
    let b = text.as_bytes();
    let shaped = b.len() > SHAPE.len()
        && SHAPE.iter().zip(b).all(|(&s, &c)| match s {
            b'0' => c.is_ascii_digit(),
            s => s == c,
        });
    if !shaped {
        return false;
    }
    let rest = &text[SHAPE.len()..];
    let status = rest.trim_start().as_bytes();
    status.len() > 3
        && status[..3].iter().all(u8::is_ascii_digit)
        && rest.matches(" | ").count() >= 3
        && rest.ends_with('"')
}

fn llama_timing(text: &str) -> bool {
    let t = text.trim_start_matches(' ');
    if let Some(rest) = ["prompt eval time = ", "eval time = ", "total time = "]
        .iter()
        .find_map(|lead| t.strip_prefix(lead))
    {
        let rest = rest.trim_start_matches(' ');
        return rest.as_bytes().first().is_some_and(u8::is_ascii_digit)
            && rest.contains(" ms / ")
            && rest.contains(" tokens");
    }
    t.strip_prefix("statistics ")
        .and_then(|r| r.split_once(": #calls(b,g,a) = "))
        .is_some_and(|(name, _)| !name.trim().is_empty() && !name.contains(": "))
}

/// What every line of vLLM's engine waiting for its workers holds
/// ([`engine_waits`]).
pub(crate) const WAIT: &str = "block found in ";

/// Whether a line is vLLM's engine waiting for its workers (the
/// shared-memory broadcast queue): `No available shared memory broadcast
/// block found in 60 seconds` (0.6+), `No available block found in 60
/// second.` (0.5). A substring search (SIMD) first: a batch of lines is
/// searched for [`WAIT`] at once (`stream.rs`' `Needles`), and only a line
/// that holds it is asked [`engine_waited`].
pub(crate) fn engine_waits(text: &str) -> bool {
    static FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(WAIT));
    FINDER.find(text.as_bytes()).is_some() && engine_waited(text)
}

/// [`engine_waits`] of a line known to hold [`WAIT`].
pub(crate) fn engine_waited(text: &str) -> bool {
    static WAITED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"No available (?:shared memory broadcast )?block found in [0-9]+ seconds?")
            .expect("regex")
    });
    WAITED.is_match(text)
}

/// Whether a line shows vLLM's engine moving: a throughput record (`Avg
/// prompt throughput: …`), `Application startup complete`, an OpenAI route
/// answered 200. Asked only between a wait and the first progress after it.
pub(crate) fn engine_moves(text: &str) -> bool {
    static THROUGHPUT: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"Avg prompt throughput"));
    static STARTED: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"Application startup complete"));
    static POST: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"POST /v1/"));
    static ANSWERED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"POST /v1/\S+ HTTP/1\.[0-9]" 200"#).expect("regex"));
    let b = text.as_bytes();
    THROUGHPUT.find(b).is_some()
        || STARTED.find(b).is_some()
        || POST.find(b).is_some() && ANSWERED.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_records_are_told_by_their_bytes() {
        for yes in [
            "INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
            "INFO 05-12 09:41:09.123456 [logger.py:43] Received request chatcmpl-1: prompt: ''",
            "WARNING 01-02 03:04:05 engine.py:75] x",
            "DEBUG 01-02 03:04:05 [core.py:9]",
        ] {
            assert!(vllm_record(yes), "{yes}");
        }
        for no in [
            "INFO:     10.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
            "INFO 11-14 03:12 [loggers.py:123] x",
            "INFO 11-14 03:12:09 [loggers.py] x",
            "INFO 11-14 03:12:09.1234567 [a.py:1] x",
            "INFO 11-14 03:12:09 [a b.py:1] x",
            "INFO 11-14 03:12:09 [a.py:1]x",
            "[2026-05-12 09:41:33 TP0] Decode batch. #running-req: 1",
        ] {
            assert!(!vllm_record(no), "{no}");
        }
    }

    #[test]
    fn access_lines_and_health_checks_are_told_by_their_bytes() {
        for yes in [
            "INFO:     10.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
            "INFO:     127.0.0.1:41322 - \"GET /health HTTP/1.1\" 200 OK",
            "INFO:     [::1]:41322 - \"GET /v1/models HTTP/1.0\" 404 Not Found",
        ] {
            assert!(access_line(yes), "{yes}");
        }
        for no in [
            "INFO:     Started server process [123]",
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
            "INFO:     10.0.0.1 - \"POST /generate HTTP/1.1\" 200 OK",
            "INFO:     10.0.0.1:5000 - \"BREW /pot HTTP/1.1\" 418",
            "ERROR:    Exception in ASGI application",
        ] {
            assert!(!access_line(no), "{no}");
        }
    }

    #[test]
    fn progress_lines_are_told_by_their_lead_ins() {
        // fixtures/chatter/: sglang/gpu0-prefill-2024-08.log,
        // bare-decode-2024.log, ollama/*, llama-cpp/*.
        for yes in [
            "[gpu=0] Prefill batch. #new-seq: 2, #new-token: 1074, #cached-token: 0, cache hit rate: 0.00%, #running-req: 389, #queue-req: 40",
            "Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, gen throughput (token/s): 1397.13, #queue-req: 12279",
            "Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0",
            "[GIN] 2025/02/10 - 11:20:29 | 200 | 35.684791792s |       127.0.0.1 | POST     \"/api/chat\"",
            "[GIN] 2026/01/20 - 23:15:46 | 200 |     971.777µs |       127.0.0.1 | HEAD     \"/\"",
            "prompt eval time =     789.03 ms /    27 tokens (   29.22 ms per token,    34.22 tokens per second)",
            "       eval time =   16112.50 ms /   192 tokens (   83.92 ms per token,    11.92 tokens per second)",
            "      total time =   16901.53 ms /   219 tokens",
            "statistics ngram-map-k: #calls(b,g,a) = 3 570 0, #gen drafts = 0, #acc drafts = 0, #gen tokens = 0, #acc tokens = 0, dur(b,g,a) = 1.267, 0.651, 0.000 ms",
        ] {
            assert!(progress(yes), "{yes}");
        }
        for no in [
            "[gpu=] Decode batch. #running-req: 1",
            "[gpu_id=x] Decode batch. #running-req: 1",
            "Decode batch. out of memory",
            "Prefill batch failed: CUDA error: out of memory",
            "[GIN-debug] POST   /api/chat                 --> github.com/ollama/ollama/server.(*Server).ChatHandler-fm (5 handlers)",
            "[GIN] 2025/02/10 - 11:20:29 | panic",
            "total time = unknown",
            "eval time = 3 ms",
            "statistics: nothing",
        ] {
            assert!(!progress(no), "{no}");
        }
    }

    #[test]
    fn engine_marks_are_waits_and_progress() {
        // The waits are fixtures/wordings/vllm-shm-broadcast-no-block.toml's.
        let cases = [
            (
                "(EngineCore_DP1 pid=1455) INFO 05-28 14:44:28 [shm_broadcast.py:681] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
                Some(true),
            ),
            (
                "(VllmWorkerProcess pid=3253) WARNING 08-13 11:31:37 shm_broadcast.py:386] No available block found in 60 second",
                Some(true),
            ),
            (
                "(VllmWorkerProcess pid=1634044) WARNING 11-26 13:07:36 shm_broadcast.py:391] No available block found in 60 second. ",
                Some(true),
            ),
            (
                "INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs",
                Some(false),
            ),
            ("INFO:     Application startup complete.", Some(false)),
            (
                "INFO:     10.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
                Some(false),
            ),
            (
                "INFO:     10.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request",
                None,
            ),
            ("no free block found in the pool", None),
        ];
        // Some(true): a wait; Some(false): progress; None: neither.
        for (line, mark) in cases {
            let got = if engine_waits(line) {
                Some(true)
            } else {
                engine_moves(line).then_some(false)
            };
            assert_eq!(got, mark, "{line}");
        }
    }
}
