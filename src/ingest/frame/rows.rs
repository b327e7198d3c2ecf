//! The frames, one row each: its name, what its first bytes must be (tested
//! before its grammar runs), its grammar, and the real lines it was written
//! from. The tests peel every sample and check what is left.
//!
//! Order matters only where one frame stands inside another: the loop in
//! [`super::peel_prefixes`] tries every row again after each peel, so an
//! indented, quoted kmsg record comes apart in three steps.

use chrono::DateTime;
use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till1, take_while, take_while_m_n, take_while1};
use nom::character::complete::{char, digit1, one_of, space0, space1};
use nom::combinator::{opt, recognize};

use super::Frame;
use crate::model::Timestamp;

/// One frame.
pub struct Row {
    pub name: &'static str,
    /// What the frame is, in a few words (`rootcause inputs` says it).
    pub what: &'static str,
    /// The bytes the frame can start with (the peeler looks only at the
    /// rows whose first byte the line has).
    pub first: fn(u8) -> bool,
    /// The cheap test: false when the frame cannot start these bytes.
    pub may: fn(&[u8]) -> bool,
    /// The frame's length at the start of the text, recording what it says.
    pub peel: fn(&str, &mut Frame) -> Option<usize>,
    /// Real lines with this frame, what is left under it, and where each
    /// was printed (a public thread, or the upstream source that prints it).
    pub samples: &'static [Sample],
}

pub struct Sample {
    pub line: &'static str,
    pub body: &'static str,
    pub source: &'static str,
}

/// Indices of the rows [`super::Peeler`] handles itself (they span lines or
/// rewrite the whole line), in [`ROWS`].
pub(super) const GUTTER: usize = 0;
/// LM Studio's head, whose message is on the next line.
pub(super) const LM_STUDIO: usize = 10;
pub(super) const ESCAPES: usize = 1;
const INDENTATION: usize = 3;

/// Every frame. The first two are peeled by [`super::Peeler`] before the
/// others (a gutter spans lines; spelled escapes are anywhere in a line).
pub static ROWS: &[Row] = &[
    Row {
        name: "line-numbers",
        what: "an editor's or viewer's line numbers",
        first: |_| false,
        may: never,
        peel: never_peel,
        samples: &[Sample {
            line: "     1\tNov 27 09:38:40 ct200 systemd[1]: Started sglang.service.",
            body: "Nov 27 09:38:40 ct200 systemd[1]: Started sglang.service.",
            source: "GNU coreutils src/cat.c (`cat -n`: the number right-aligned in six columns, then a tab)",
        }],
    },
    Row {
        name: "spelled-escapes",
        what: "terminal colour codes spelled out in a paste (`#033[0m`, `^[[0m`, `[0m`)",
        first: |_| false,
        may: never,
        peel: never_peel,
        samples: &[
            Sample {
                line: "#033[36m(RayWorkerVllm pid=5085)#033[0m [E ProcessGroupNCCL.cpp:475] x",
                body: "(RayWorkerVllm pid=5085) [E ProcessGroupNCCL.cpp:475] x",
                source: "the line of https://github.com/vllm-project/vllm/issues/2734 below with its ESC bytes as rsyslog writes them (`$EscapeControlCharactersOnReceive`: `#033`), not a line copied as such",
            },
            Sample {
                line: " [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] x",
                body: "(RayWorkerVllm pid=5085) [E ProcessGroupNCCL.cpp:475] x",
                source: "https://github.com/vllm-project/vllm/issues/2734",
            },
            Sample {
                line: "?[32mINFO?[0m:     Started server process [?[36m428?[0m]",
                body: "INFO:     Started server process [428]",
                source: "https://github.com/tortoise/tortoise-orm/issues/869 (uvicorn's colours with each ESC pasted as `?`)",
            },
        ],
    },
    Row {
        name: "quote",
        what: "a reply's quote marks (`> `)",
        first: |c| c == b'>',
        may: |b| b.first() == Some(&b'>') && !b.starts_with(b">>>"),
        peel: quote,
        samples: &[Sample {
            line: "> [Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
            body: "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
            source: "https://github.com/leptonai/gpud/pull/46",
        }],
    },
    Row {
        name: "indentation",
        what: "indentation in front of another frame",
        first: |c| c == b' ' || c == b'\t',
        may: |b| matches!(b.first(), Some(b' ' | b'\t')),
        peel: indentation,
        samples: &[Sample {
            line: "    mc-pt1-pkp-srv-1a: kern: warning: [2025-09-13T20:46:45.810482849Z]: Call trace:",
            body: "Call trace:",
            source: "https://github.com/talos-rpi5/talos-builder/issues/11, the line indented (as a paste in a list indents it): not copied as such",
        }],
    },
    Row {
        name: "kmsg",
        what: "a `/dev/kmsg` record head (`level,seq,usec,flags;`)",
        // `prio,` in the first four bytes, a `;` in the first fifty.
        first: |c| c.is_ascii_digit(),
        may: |b| {
            b.first().is_some_and(u8::is_ascii_digit)
                && b.get(1..4).is_some_and(|h| h.contains(&b','))
                && memchr::memchr(b';', &b[..b.len().min(50)]).is_some()
        },
        peel: kmsg,
        samples: &[Sample {
            line: "7,160,424069,-;pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)",
            body: "pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)",
            source: "torvalds/linux Documentation/ABI/testing/dev-kmsg (the record format and this example)",
        }],
    },
    Row {
        name: "forwarder",
        what: "a log forwarder's `host: facility: level: [time]: ` (talosctl dmesg)",
        // `host: f…` at the first colon, then `: [` within the line's head.
        first: |c| c.is_ascii_alphanumeric(),
        may: |b| {
            b.first().is_some_and(u8::is_ascii_alphanumeric)
                && memchr::memchr(b':', &b[..b.len().min(64)]).is_some_and(|i| {
                    let spaces = b[i + 1..].iter().take_while(|&&c| c == b' ').count();
                    spaces > 0 && b.get(i + 1 + spaces).is_some_and(u8::is_ascii_lowercase)
                })
                && has(&b[..b.len().min(120)], b": [")
        },
        peel: forwarder,
        samples: &[
            Sample {
                line: "mc-pt1-pkp-srv-1a: kern: warning: [2025-09-13T20:46:45.810476849Z]: CPU: 2 UID: 0 PID: 2528 Comm: init Not tainted 6.12.25-talos #1",
                body: "CPU: 2 UID: 0 PID: 2528 Comm: init Not tainted 6.12.25-talos #1",
                source: "https://github.com/talos-rpi5/talos-builder/issues/11",
            },
            Sample {
                // The first line of a paste, its host cut off, the facility and
                // level padded.
                line: "kern:     err: [2024-05-20T02:46:53.856596762Z]: NVRM: The NVIDIA GeForce GT 710 GPU installed in this system is",
                body: "NVRM: The NVIDIA GeForce GT 710 GPU installed in this system is",
                source: "https://github.com/siderolabs/talos/issues/8764",
            },
        ],
    },
    Row {
        name: "dmesg-decode",
        what: "`dmesg --decode`'s facility and level (`kern  :warn  : `)",
        first: |c| c.is_ascii_lowercase(),
        may: |b| {
            b.first().is_some_and(u8::is_ascii_lowercase)
                && b.get(..12).is_some_and(|h| h.contains(&b':'))
        },
        peel: decode,
        samples: &[
            Sample {
                line: "kern  :warn  : [   40.196661] ti-udma 485c0100.dma-controller: chan2 teardown timeout!",
                body: "[   40.196661] ti-udma 485c0100.dma-controller: chan2 teardown timeout!",
                source: "https://lore.kernel.org/all/ZNEQXVYDstabJCVc@francesco-nb.int.toradex.com/",
            },
            Sample {
                line: "kern  :err   : 2024-10-07T10:17:15,145363-04:00 NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                body: "2024-10-07T10:17:15,145363-04:00 NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                source: "assembled, not copied: util-linux sys-utils/dmesg.c prints `--decode --time-format iso` as `%-6s:%-6s: ` and the ISO time with a comma; the NVRM message is the driver's Xid 79 wording",
            },
        ],
    },
    Row {
        name: "syslog-priority",
        what: "a syslog priority (`<6>`), as rsyslog and `dmesg -r` keep it",
        first: |c| c == b'<',
        may: |b| b.first() == Some(&b'<') && b.get(1).is_some_and(u8::is_ascii_digit),
        peel: priority,
        samples: &[Sample {
            line: "<4>[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, name=python3, GPU has fallen off the bus.",
            body: "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, name=python3, GPU has fallen off the bus.",
            source: "assembled, not copied: util-linux sys-utils/dmesg.c (`dmesg -r` prints the raw `<prio>` before each record) around the driver's Xid 79 wording",
        }],
    },
    Row {
        name: "fabric-manager",
        what: "NVIDIA's daemon log record (fabric manager, IMEX): `[Mon DD YYYY HH:MM:SS] [LEVEL] [tid N] `",
        first: |c| c == b'[',
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1).is_some_and(u8::is_ascii_uppercase)
                && b.get(4) == Some(&b' ')
        },
        peel: fabric_manager,
        samples: &[Sample {
            line: "[Sep 18 2026 06:40:33] [INFO] [tid 77] Logging level = 4",
            body: "Logging level = 4",
            source: "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/pull/1465 (nvidia-imex, which logs as nv-fabricmanager does)",
        }],
    },
    Row {
        name: "snap-logs",
        what: "`snap logs`: an RFC 3339 UTC time and `app[pid]: ` (no host)",
        first: |c| c.is_ascii_digit(),
        may: |b| b.first().is_some_and(u8::is_ascii_digit) && b.get(19) == Some(&b'Z'),
        peel: snap_logs,
        samples: &[Sample {
            line: "2024-01-16T10:03:52Z ollama.listener[2541]: Error: listen tcp 127.0.0.1:11434: bind: address already in use",
            body: "Error: listen tcp 127.0.0.1:11434: bind: address already in use",
            source: "assembled, not copied: canonical/snapd client/logs.go (Log.String(): RFC 3339 time, `SID[PID]: message`) around a message ollama prints",
        }],
    },
    Row {
        name: "lm-studio-record",
        what: "LM Studio's record head on a line of its own, the message on the next line after one space (`2026-04-18 21:08:36  [INFO]`)",
        first: |c| c.is_ascii_digit(),
        // `YYYY-MM-DD HH:MM:SS`, one or two spaces, `[LEVEL]`, and nothing
        // after it: the whole line is the head.
        may: |b| {
            b.get(10) == Some(&b' ')
                && after_time(b) == Some(19)
                && b.get(19) == Some(&b' ')
                && b.trim_ascii_end().ends_with(b"]")
                && !b.contains(&b'|')
        },
        peel: lm_studio_head,
        samples: &[
            Sample {
                line: "2026-04-18 21:08:36  [INFO]",
                body: "",
                source: "https://github.com/lmstudio-ai/mlx-engine/issues/314",
            },
            Sample {
                line: "2026-04-18 21:08:53 [DEBUG]",
                body: "",
                source: "https://github.com/lmstudio-ai/mlx-engine/issues/314",
            },
        ],
    },
    Row {
        name: "viewer-time",
        what: "a log viewer's local time before each line, to the second (Docker Desktop's logs tab, a compose UI: `2024-08-27 19:10:09 `)",
        first: |c| c.is_ascii_digit(),
        // `YYYY-MM-DD HH:MM:SS ` by position (no fraction, no zone), then a
        // record head of the line's own: a bracket (`[GIN] …`, SGLang's
        // `[2025-… TP0] `) or slog's `time=`/`level=`. A time before a bare
        // message is that message's own logger's (dpkg.log's `2022-05-19
        // 06:04:29 upgrade …`): left alone, as is gunicorn's own time
        // before 19.2 (`[PID] [LEVEL] ` after it: the gunicorn row's).
        may: |b| {
            b.get(10) == Some(&b' ')
                && b.get(19) == Some(&b' ')
                && after_time(b) == Some(19)
                && b.get(20..).is_some_and(|r| {
                    r.first() == Some(&b'[') || r.starts_with(b"time=") || r.starts_with(b"level=")
                })
                && !gunicorn_unbracketed(b)
        },
        peel: viewer_time,
        samples: &[
            Sample {
                line: "2024-08-27 19:10:19 [GIN] 2024/08/27 - 17:10:19 | 200 |      22.702µs |       127.0.0.1 | HEAD     \"/\"",
                body: "[GIN] 2024/08/27 - 17:10:19 | 200 |      22.702µs |       127.0.0.1 | HEAD     \"/\"",
                source: "https://github.com/ollama/ollama/issues/3652",
            },
            Sample {
                line: "2025-01-19 19:58:17 time=2025-01-19T17:58:17.608+08:00 level=ERROR source=sched.go:455 msg=\"error loading llama server\" error=\"llama runner process has terminated: exit status 2\"",
                body: "time=2025-01-19T17:58:17.608+08:00 level=ERROR source=sched.go:455 msg=\"error loading llama server\" error=\"llama runner process has terminated: exit status 2\"",
                source: "https://github.com/mattcurf/ollama-intel-gpu/issues/22",
            },
        ],
    },
    Row {
        name: "rust-tracing",
        what: "Rust's tracing formatter (TGI's launcher and router): `time  LEVEL span: target: `",
        first: |c| c.is_ascii_digit(),
        // `YYYY-MM-DDTHH:MM:SS[.frac]Z `, read by position.
        may: |b| {
            b.get(10) == Some(&b'T')
                && after_time(b).is_some_and(|i| b.get(i..i + 2) == Some(b"Z "))
        },
        peel: rust_tracing,
        samples: &[
            Sample {
                line: "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to shutdown with signal 4 rank=0",
                body: "Shard process was signaled to shutdown with signal 4 rank=0",
                source: "https://github.com/huggingface/text-generation-inference/issues/1627",
            },
            Sample {
                line: "2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
                body: "Shard 0 failed to start",
                source: "https://github.com/huggingface/text-generation-inference/issues/1627",
            },
            Sample {
                line: "2025-08-09T19:36:02.798333Z  INFO openai_embed{total_time=\"1.207716998s\" tokenization_time=\"11.232786ms\" queue_time=\"686.203µs\" inference_time=\"1.195713965s\"}: text_embeddings_router::http::server: router/src/http/server.rs:1290: Success",
                body: "router/src/http/server.rs:1290: Success",
                source: "https://github.com/huggingface/text-embeddings-inference/issues/305",
            },
        ],
    },
    Row {
        name: "rust-tracing-local",
        what: "Rust's tracing formatter with a local `YYYY-MM-DD HH:MM:SS` timer (SGLang's router): `time  LEVEL sglang_router_rs::router: src/router.rs:N: `",
        first: |c| c.is_ascii_digit(),
        // `YYYY-MM-DD HH:MM:SS` then tracing's level padded to five
        // characters (`  INFO `, ` ERROR `), read by position.
        may: |b| {
            b.get(10) == Some(&b' ')
                && after_time(b).is_some_and(|i| {
                    matches!(
                        b.get(i..i + 7),
                        Some(b"  INFO " | b"  WARN " | b" ERROR " | b" DEBUG " | b" TRACE ")
                    )
                })
        },
        peel: rust_tracing_local,
        samples: &[
            Sample {
                line: "2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:354: Worker is not ready yet",
                body: "src/router.rs:354: Worker is not ready yet",
                source: "https://github.com/sgl-project/sglang/issues/7870",
            },
            Sample {
                line: "2025-11-04 10:05:37 DEBUG sglang_router_rs::core::job_queue: src/core/job_queue.rs:142: Initializing worker job queue: capacity=1000, workers=10",
                body: "src/core/job_queue.rs:142: Initializing worker job queue: capacity=1000, workers=10",
                source: "https://github.com/sgl-project/sglang/issues/12621",
            },
        ],
    },
    Row {
        name: "python-logging",
        what: "Python's logging with `%(asctime)s - %(name)s - %(levelname)s - ` (lmdeploy, GPUStack)",
        first: |c| c.is_ascii_digit(),
        // A date and time, maybe a zone, then ` - `, read by position.
        may: |b| {
            after_time(b).is_some_and(|mut i| {
                match b.get(i) {
                    Some(b'Z') => i += 1,
                    Some(b'+' | b'-') if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                        i += 3;
                        i += usize::from(b.get(i) == Some(&b':'));
                        i += 2;
                    }
                    _ => {}
                }
                b.get(i..i + 3) == Some(b" - ")
            })
        },
        peel: python_logging,
        samples: &[
            Sample {
                line: "2025-05-01T02:51:44+00:00 - gpustack.worker.backends.base - INFO - Preparing model files...",
                body: "Preparing model files...",
                source: "https://github.com/gpustack/gpustack/issues/1953",
            },
            Sample {
                line: "2025-12-04 21:57:21.581795+08:00 - gpustack.worker.backends.base - INFO - Preparing model files...",
                body: "Preparing model files...",
                source: "https://github.com/gpustack/gpustack/issues/3707",
            },
            Sample {
                line: "2024-08-05 05:40:52,191 - lmdeploy - WARNING - model_source: hf_model",
                body: "model_source: hf_model",
                source: "https://github.com/InternLM/lmdeploy/issues/2229",
            },
            Sample {
                line: "2025-08-22 12:04:49,226 - lmdeploy - WARNING - turbomind.py:280 - get 687 model params",
                body: "get 687 model params",
                source: "https://github.com/InternLM/lmdeploy/issues/3825",
            },
        ],
    },
    Row {
        name: "python-logging-asctime",
        what: "Python's logging with `%(asctime)s` first, its comma and milliseconds, then the level: `time LEVEL ` (WeNet), `[time LEVEL] ` (OpenNMT-py) or `[time] LEVEL: ` (Wan2.1 and the programs built on it)",
        first: |c| c.is_ascii_digit() || c == b'[',
        // `YYYY-MM-DD HH:MM:SS,mmm` (logging's default asctime), read by
        // position after an optional `[`.
        may: |b| {
            let b = b.strip_prefix(b"[").unwrap_or(b);
            b.get(10) == Some(&b' ') && b.get(19) == Some(&b',') && after_time(b) == Some(23)
        },
        peel: python_asctime,
        samples: &[
            Sample {
                line: "2021-11-24 08:11:49,857 INFO training on multiple gpus, this gpu 7",
                body: "training on multiple gpus, this gpu 7",
                source: "https://github.com/wenet-e2e/wenet/issues/812",
            },
            Sample {
                line: "[2021-01-04 18:01:31,220 INFO] Start training loop and validate every 10000 steps...",
                body: "Start training loop and validate every 10000 steps...",
                source: "https://github.com/OpenNMT/OpenNMT-py/issues/1981",
            },
            Sample {
                line: "[2025-03-02 12:01:03,542] INFO: Creating WanI2V pipeline.",
                body: "Creating WanI2V pipeline.",
                source: "https://github.com/Wan-Video/Wan2.1/issues/132",
            },
        ],
    },
    Row {
        name: "loguru",
        what: "loguru's default format: `2023-08-08 10:37:53.347 | INFO     | module:function:line - ` (the time to the millisecond, the level padded to eight, where it was logged)",
        first: |c| c.is_ascii_digit(),
        may: |b| after_time(b).is_some_and(|i| b.get(i..i + 3) == Some(b" | ")),
        peel: loguru,
        samples: &[Sample {
            line: "2023-08-08 10:38:07.270 | INFO     | api.generate:__init__:463 - Using ChatGLM Model for Chat!",
            body: "Using ChatGLM Model for Chat!",
            source: "https://github.com/xusenlinzy/api-for-open-llm/issues/50",
        }],
    },
    Row {
        name: "tensorflow",
        what: "TensorFlow's C++ logging: `2024-04-23 14:00:25.007441: I tensorflow/…/file.cc:210] `",
        first: |c| c.is_ascii_digit(),
        may: |b| {
            after_time(b)
                .is_some_and(|i| b.get(i..i + 2) == Some(b": ") && b.get(i + 3) == Some(&b' '))
        },
        peel: tensorflow,
        samples: &[
            Sample {
                line: "2024-04-23 14:00:25.007441: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.",
                body: "This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.",
                source: "https://github.com/hiyouga/LlamaFactory/issues/3398",
            },
            Sample {
                line: "2024-04-23 14:00:26.193322: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",
                body: "TF-TRT Warning: Could not find TensorRT",
                source: "https://github.com/hiyouga/LlamaFactory/issues/3398",
            },
        ],
    },
    Row {
        name: "deepspeed",
        what: "DeepSpeed's logger: `[2024-04-23 14:00:28,037] [INFO] [file.py:191:function] `",
        first: |c| c == b'[',
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1..)
                    .and_then(after_time)
                    .is_some_and(|i| b.get(i + 1..i + 4) == Some(b"] ["))
        },
        peel: deepspeed,
        samples: &[Sample {
            line: "[2024-04-23 14:00:28,037] [INFO] [real_accelerator.py:191:get_accelerator] Setting ds_accelerator to cuda (auto detect)",
            body: "Setting ds_accelerator to cuda (auto detect)",
            source: "https://github.com/hiyouga/LlamaFactory/issues/3398",
        }],
    },
    Row {
        name: "gunicorn",
        what: "gunicorn's error log: `[2020-09-12 05:37:48 +0000] [18] [INFO] ` (the time with its zone, the writing PID, the level; before 19.2 `2013-04-26 11:35:16 [30352] [ERROR] `, the time bare)",
        first: |c| c == b'[' || c.is_ascii_digit(),
        // `[` a time with no fraction, a space and a `+HHMM`/`-HHMM` zone,
        // `] [`; or, before 19.2, the time bare and ` [` a PID `] [`.
        may: |b| {
            (b.first() == Some(&b'[')
                && b.get(1..).and_then(after_time) == Some(19)
                && b.get(20) == Some(&b' ')
                && matches!(b.get(21), Some(b'+' | b'-'))
                && b.get(26..29) == Some(b"] ["))
                || gunicorn_unbracketed(b)
        },
        peel: gunicorn,
        samples: &[
            Sample {
                line: "[2020-09-12 05:37:48 +0000] [18] [INFO] Listening at: http://127.0.0.1:8000 (18)",
                body: "Listening at: http://127.0.0.1:8000 (18)",
                source: "https://github.com/benoitc/gunicorn/pull/2419",
            },
            Sample {
                line: "[2022-11-02 22:42:04 -0700] [4819] [WARNING] Worker with pid 4832 was terminated due to signal 11",
                body: "Worker with pid 4832 was terminated due to signal 11",
                source: "https://github.com/benoitc/gunicorn/issues/2850",
            },
            Sample {
                line: "[2019-12-12 21:51:10 +0000] [1] [CRITICAL] WORKER TIMEOUT (pid:999)",
                body: "WORKER TIMEOUT (pid:999)",
                source: "https://github.com/tiangolo/uvicorn-gunicorn-starlette-docker/issues/11",
            },
            Sample {
                line: "2013-04-26 11:35:16 [30352] [ERROR] Connection in use: ('10.0.0.50', 13000)",
                body: "Connection in use: ('10.0.0.50', 13000)",
                source: "https://github.com/benoitc/gunicorn/issues/520",
            },
        ],
    },
    Row {
        name: "llamafactory",
        what: "transformers' logging as LLaMA-Factory formats it: `[INFO|file.py:2044] 2024-04-23 14:00:30,893 >> `",
        first: |c| c == b'[',
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1).is_some_and(u8::is_ascii_uppercase)
                && b.iter().take(12).any(|&c| c == b'|')
        },
        peel: llamafactory,
        samples: &[Sample {
            line: "[INFO|tokenization_utils_base.py:2044] 2024-04-23 14:00:30,893 >> loading file tokenizer.json",
            body: "loading file tokenizer.json",
            source: "https://github.com/hiyouga/LlamaFactory/issues/3398",
        }],
    },
    Row {
        name: "llama-router-port",
        what: "llama-server's router mode: the port of the child server whose line it forwards (`[57325] `)",
        first: |c| c == b'[',
        // `[` and four or five digits (a port the router picked, never a
        // GPU index like gpustat's `[0] `), `] `.
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1).is_some_and(u8::is_ascii_digit)
                && matches!(b.get(5..7), Some(b"] ") | Some([b'0'..=b'9', b']']))
        },
        peel: llama_router_port,
        samples: &[
            Sample {
                line: "[42027] 1.37.495.453 I srv  update_slots: all slots are idle",
                body: "all slots are idle",
                source: "https://github.com/ggml-org/llama.cpp/pull/23269",
            },
            Sample {
                line: "[42027]       total time =   16901.53 ms /   219 tokens",
                body: "      total time =   16901.53 ms /   219 tokens",
                source: "https://github.com/ggml-org/llama.cpp/pull/23269",
            },
        ],
    },
    Row {
        name: "llama-log",
        what: "llama.cpp's common log with `--log-timestamps --log-prefix`: minutes.seconds.ms.µs since start and a level letter (`1.37.495.453 I `)",
        first: |c| c.is_ascii_digit(),
        may: |b| {
            b.first().is_some_and(u8::is_ascii_digit)
                && b.iter().take(5).any(|&c| c == b'.')
                && memchr::memchr(b' ', &b[..b.len().min(16)]).is_some()
        },
        peel: llama_log,
        samples: &[
            Sample {
                line: "16.15.294.685 I slot launch_slot_: id  3 | task 1804 | processing task, is_child = 0",
                body: "processing task, is_child = 0",
                source: "https://github.com/huggingface/pi-llama/pull/19",
            },
            Sample {
                line: "16.15.294.795 W srv   prompt_save:  - saving prompt with length 656, total state size = 215.266 MiB (draft: 0.000 MiB)",
                body: " - saving prompt with length 656, total state size = 215.266 MiB (draft: 0.000 MiB)",
                source: "https://github.com/huggingface/pi-llama/pull/19",
            },
        ],
    },
    Row {
        name: "llama-server",
        what: "llama.cpp server's `srv  name: `, `slot name: id N | task N | `, `que  name: ` (the function right-aligned in 12 columns)",
        first: |c| matches!(c, b's' | b'q'),
        may: |b| b.starts_with(b"srv  ") || b.starts_with(b"slot ") || b.starts_with(b"que  "),
        peel: llama_server,
        samples: &[
            Sample {
                line: "srv  params_from_: Chat format: peg-gemma4",
                body: "Chat format: peg-gemma4",
                source: "https://github.com/ggml-org/llama.cpp/issues/20509",
            },
            Sample {
                line: "srv   prompt_save:  - saving prompt with length 28960, total state size = 3462.850 MiB",
                body: " - saving prompt with length 28960, total state size = 3462.850 MiB",
                source: "https://github.com/ggml-org/llama.cpp/issues/20509",
            },
            Sample {
                line: "slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = 71783813801",
                body: "selected slot by LRU, t_last = 71783813801",
                source: "https://github.com/ggml-org/llama.cpp/issues/20509",
            },
        ],
    },
    Row {
        name: "pytest-node",
        what: "the test id `pytest -v -s` prints before the test's own output: `tests/x.py::test_y[param] `",
        first: |c| c.is_ascii_alphanumeric(),
        may: |b| has(&b[..b.len().min(160)], b".py::"),
        peel: pytest_node,
        samples: &[Sample {
            line: "tests/e2e/online_serving/test_flux_2_dev_expansion.py::test_flux_2_dev[ulysses_2] (APIServer pid=30662) INFO:     Shutting down",
            body: "(APIServer pid=30662) INFO:     Shutting down",
            source: "https://github.com/vllm-project/vllm-omni/issues/4165",
        }],
    },
    Row {
        name: "logger-tag",
        what: "a library's bracketed tag and level: TurboMind's `[TM][INFO] `, Gloo's `[Gloo] `, Gin's `[GIN-debug] [WARNING] `",
        first: |c| c == b'[',
        may: |b| {
            b.first() == Some(&b'[')
                && (b.starts_with(b"[TM][")
                    || b.starts_with(b"[Gloo] ")
                    || b.starts_with(b"[GIN-debug] "))
        },
        peel: logger_tag,
        samples: &[
            Sample {
                line: "[TM][WARNING] [LlamaTritonModel] max_context_token_num = 16384.",
                body: "[LlamaTritonModel] max_context_token_num = 16384.",
                source: "https://github.com/InternLM/lmdeploy/issues/2229",
            },
            Sample {
                line: "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0",
                body: "Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0",
                source: "https://github.com/sgl-project/sglang/pull/15426",
            },
            Sample {
                line: "[GIN-debug] [WARNING] Creating an Engine instance with the Logger and Recovery middleware already attached.",
                body: "Creating an Engine instance with the Logger and Recovery middleware already attached.",
                source: "https://github.com/msys2/MINGW-packages/pull/20882",
            },
            Sample {
                line: "[GIN-debug] POST   /api/pull                 --> github.com/ollama/ollama/server.(*Server).PullModelHandler-fm (5 handlers)",
                body: "POST   /api/pull                 --> github.com/ollama/ollama/server.(*Server).PullModelHandler-fm (5 handlers)",
                source: "https://github.com/msys2/MINGW-packages/pull/20882",
            },
        ],
    },
    Row {
        name: "python-logging-level-name",
        what: "Python's logging with the level, then the logger's name: `%(levelname)s (%(name)s):  ` (OpenUI), `%(levelname)-5.5s [%(name)s] ` (Alembic)",
        first: |c| c.is_ascii_uppercase(),
        may: |b| {
            let word = b
                .iter()
                .take(9)
                .take_while(|c| c.is_ascii_uppercase())
                .count();
            ((4..=8).contains(&word) && b.get(word..word + 2) == Some(b" ("))
                || (word == 4 && b.get(4..7) == Some(b"  ["))
                || (word == 5 && b.get(5..7) == Some(b" ["))
        },
        peel: level_name,
        samples: &[
            Sample {
                line: "INFO (openui):  Starting OpenUI AI Server created by W&B...",
                body: "Starting OpenUI AI Server created by W&B...",
                source: "https://github.com/wandb/openui/issues/226",
            },
            Sample {
                line: "ERROR (uvicorn.error):  [Errno 98] error while attempting to bind on address ('0.0.0.0', 7878): address already in use",
                body: "[Errno 98] error while attempting to bind on address ('0.0.0.0', 7878): address already in use",
                source: "https://github.com/wandb/openui/issues/226",
            },
            Sample {
                line: "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.",
                body: "Context impl PostgresqlImpl.",
                source: "https://github.com/fastapi/full-stack-fastapi-template/issues/312",
            },
        ],
    },
    Row {
        name: "zerolog-console",
        what: "zerolog's console writer (Go: LocalAI): a kitchen-clock time and a three-letter level (`3:00PM INF `)",
        first: |c| c.is_ascii_digit(),
        may: |b| {
            let ampm = |i: usize| matches!(b.get(i..i + 2), Some([b'A' | b'P', b'M']));
            b.first().is_some_and(u8::is_ascii_digit) && (ampm(4) || ampm(5))
        },
        peel: zerolog_console,
        samples: &[
            Sample {
                line: "3:00PM INF LocalAI version: v3.6.0 (8fb95686af9c295d68a3b7b5cb520dd2bf914bd4)",
                body: "LocalAI version: v3.6.0 (8fb95686af9c295d68a3b7b5cb520dd2bf914bd4)",
                source: "https://github.com/mudler/LocalAI/issues/6954",
            },
            Sample {
                line: "3:00PM WRN VRAM is less than 4GB, defaulting to CPU. Set LOCALAI_FORCE_META_BACKEND_CAPABILITY to override",
                body: "VRAM is less than 4GB, defaulting to CPU. Set LOCALAI_FORCE_META_BACKEND_CAPABILITY to override",
                source: "https://github.com/mudler/LocalAI/issues/6954",
            },
        ],
    },
    Row {
        name: "kaldi",
        what: "Kaldi's `LEVEL (program[version]:Function():file.cc:N) `",
        first: |c| matches!(c, b'L' | b'W' | b'E' | b'V' | b'A'),
        may: |b| {
            KALDI_LEVELS
                .iter()
                .any(|(l, _)| b.starts_with(l.as_bytes()))
        },
        peel: kaldi,
        samples: &[
            Sample {
                line: "ERROR (nnet-forward[5.5.1056~1-f6f4c]:SelectGpuId():cu-device.cc:207) Failed to create CUDA context, no more unused GPUs?",
                body: "Failed to create CUDA context, no more unused GPUs?",
                source: "https://github.com/lifeiteng/FasterDNN/issues/1",
            },
            Sample {
                line: "WARNING (cu-vector-test:SelectGpuId():cu-device.cc:130) Will try again to get a GPU after 20 seconds.",
                body: "Will try again to get a GPU after 20 seconds.",
                source: "https://github.com/kaldi-asr/kaldi/pull/386",
            },
            Sample {
                line: "WARNING ([5.5.1013~1546-9b851]:SelectGpuId():cu-device.cc:243) Not in compute-exclusive mode.  Suggestion: use 'nvidia-smi -c 3' to set compute exclusive mode",
                body: "Not in compute-exclusive mode.  Suggestion: use 'nvidia-smi -c 3' to set compute exclusive mode",
                source: "https://github.com/sskorol/vosk-api-gpu/issues/13",
            },
            Sample {
                line: "LOG (cu-vector-test:main():cu-vector-test.cc:765) Tests without GPU use succeeded.",
                body: "Tests without GPU use succeeded.",
                source: "https://github.com/kaldi-asr/kaldi/pull/386",
            },
        ],
    },
    Row {
        name: "thcudacheck",
        what: "old PyTorch's `THCudaCheck FAIL file=… line=N error=N : ` (≤ 1.0)",
        first: |c| c == b'T',
        may: |b| b.starts_with(b"THCudaCheck FAIL "),
        peel: thcudacheck,
        samples: &[Sample {
            line: "THCudaCheck FAIL file=/pytorch/torch/lib/THC/THCGeneral.c line=844 error=2 : out of memory",
            body: "out of memory",
            source: "assembled from the format string, not copied: pytorch/pytorch torch/lib/THC/THCGeneral.c (__THCudaCheck: \"THCudaCheck FAIL file=%s line=%i error=%i : %s\")",
        }],
    },
    Row {
        name: "dmlc",
        what: "dmlc-core's (MXNet's) `[HH:MM:SS] file:line: `",
        first: |c| c == b'[',
        may: |b| b.first() == Some(&b'[') && b.get(3) == Some(&b':') && b.get(9) == Some(&b']'),
        peel: dmlc,
        samples: &[Sample {
            line: "[12:44:34] src/storage/./pooled_storage_manager.h:84: cudaMalloc failed: out of memory",
            body: "cudaMalloc failed: out of memory",
            source: "assembled, not copied: dmlc/dmlc-core include/dmlc/logging.h (LogMessage: `[%H:%M:%S] file:line: `) around apache/mxnet src/storage/pooled_storage_manager.h's \"cudaMalloc failed: \"",
        }],
    },
    Row {
        name: "elision",
        what: "a `[...] ` that a document or a person put where it left the head of a line out (the time, the host)",
        first: |c| c == b'[',
        may: |b| ELISIONS.iter().any(|e| b.starts_with(e.as_bytes())),
        peel: elision,
        samples: &[Sample {
            line: "[...] NVRM: Xid (0000:03:00): 14, Channel 00000001",
            body: "NVRM: Xid (0000:03:00): 14, Channel 00000001",
            source: "https://docs.nvidia.com/deploy/xid-errors/index.html (\"Viewing Xid messages\", also at http://docs.nvda.net.cn/deploy/xid-errors/index.html)",
        }],
    },
    Row {
        name: "markdown-list",
        what: "a markdown list's item marker (`- `, `* `) on every line of a pasted log",
        first: |_| false,
        may: never,
        peel: never_peel,
        samples: &[Sample {
            line: "- INFO 04-06 03:23:49 executor_base.py:108] # CUDA blocks: 19609, # CPU blocks: 21845",
            body: "INFO 04-06 03:23:49 executor_base.py:108] # CUDA blocks: 19609, # CPU blocks: 21845",
            source: "https://github.com/gensyn-ai/rl-swarm/issues/92",
        }],
    },
    Row {
        name: "celery",
        what: "Celery's worker log: `[2026-01-19 19:24:37,467: INFO/MainProcess] ` (the time, the level, the pool process that wrote it)",
        first: |c| c == b'[',
        // `[` a time with its milliseconds, `: `, an upper-case level.
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1..).and_then(after_time).is_some_and(|end| {
                    end > 19
                        && b.get(1 + end..3 + end) == Some(b": ")
                        && b.get(3 + end).is_some_and(u8::is_ascii_uppercase)
                })
        },
        peel: celery,
        samples: &[
            Sample {
                line: "[2026-01-19 19:24:40,428: INFO/MainProcess] celery@GPU ready.",
                body: "celery@GPU ready.",
                source: "https://github.com/DDMAL/Rodan/issues/1332",
            },
            Sample {
                line: "[2026-01-19 19:37:30,073: WARNING/ForkPoolWorker-1] Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]: 0 / 1535",
                body: "Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]: 0 / 1535",
                source: "https://github.com/DDMAL/Rodan/issues/1332",
            },
        ],
    },
    Row {
        name: "jupyter",
        what: "a Jupyter server's log head: `[I 16:42:01.552 NotebookApp] `, `[W 2023-01-10 09:58:23.315 ServerApp] ` (the level's letter, the time, the application)",
        first: |c| c == b'[',
        // `[`, a level letter, a space, a digit.
        may: |b| {
            b.first() == Some(&b'[')
                && matches!(b.get(1), Some(b'D' | b'I' | b'W' | b'E' | b'C'))
                && b.get(2) == Some(&b' ')
                && b.get(3).is_some_and(u8::is_ascii_digit)
        },
        peel: jupyter,
        samples: &[
            Sample {
                line: "[I 16:42:01.552 NotebookApp] The port 8888 is already in use, trying another port.",
                body: "The port 8888 is already in use, trying another port.",
                source: "https://github.com/ipython/ipykernel/issues/488",
            },
            Sample {
                line: "[I 16:06:04.324 LabApp] The port 8889 is already in use, trying another port.",
                body: "The port 8889 is already in use, trying another port.",
                source: "https://github.com/jupyter/notebook/issues/4573",
            },
            Sample {
                line: "[D 2023-01-20 17:51:23.041 ServerApp] Looking for jupyter_config in /etc/jupyter",
                body: "Looking for jupyter_config in /etc/jupyter",
                source: "https://github.com/jupyterlab/jupyterlab/issues/13827",
            },
        ],
    },
    Row {
        name: "invokeai",
        what: "InvokeAI's log head: `[2025-03-09 08:49:00,752]::[InvokeAI]::ERROR --> ` (the time, the logger, the level)",
        first: |c| c == b'[',
        // `[` a time with its milliseconds, `]::[`.
        may: |b| {
            b.first() == Some(&b'[')
                && b.get(1..)
                    .and_then(after_time)
                    .is_some_and(|end| b.get(1 + end..5 + end) == Some(b"]::["))
        },
        peel: invokeai,
        samples: &[
            Sample {
                line: "[2025-03-09 08:49:00,752]::[InvokeAI]::ERROR --> Error while invoking session 04258e9f-4225-401b-9b27-782bdfb4d8c9, invocation 2b0bb7f9-5339-4042-9872-6e867ad1d7f7 (flux_text_encoder): Error while deserializing header: MetadataIncompleteBuffer",
                body: "Error while invoking session 04258e9f-4225-401b-9b27-782bdfb4d8c9, invocation 2b0bb7f9-5339-4042-9872-6e867ad1d7f7 (flux_text_encoder): Error while deserializing header: MetadataIncompleteBuffer",
                source: "https://github.com/invoke-ai/InvokeAI/issues/7760",
            },
            Sample {
                line: "[2023-12-14 21:11:28,957]::[InvokeAI]::INFO --> NSFW checker initialized",
                body: "NSFW checker initialized",
                source: "https://github.com/invoke-ai/InvokeAI/issues/5297",
            },
            Sample {
                line: "[2023-12-14 21:11:28,497]::[uvicorn.error]::INFO --> connection open",
                body: "connection open",
                source: "https://github.com/invoke-ai/InvokeAI/issues/5297",
            },
        ],
    },
    Row {
        name: "runner-output",
        what: "a runner's `| ` before each line of the command it ran (ClusterFuzz's butler, after its `Running: CMD` line)",
        first: |_| false,
        may: never,
        peel: never_peel,
        samples: &[Sample {
            line: "| [2020-11-19 00:53:45 +0000] [2184400] [ERROR] Connection in use: ('', 9000)",
            body: "Connection in use: ('', 9000)",
            source: "https://github.com/google/clusterfuzz/issues/2150 (google/clusterfuzz src/local/butler/common.py process_proc_output(): print('| %s' % line))",
        }],
    },
    Row {
        name: "freebsd-drm-error",
        what: "FreeBSD drm-kmod's `[drm ERROR :function] ` before a DRM driver's error (amdgpu, i915) in `dmesg`",
        first: |c| c == b'[',
        may: |b| b.starts_with(b"[drm ERROR :"),
        peel: freebsd_drm_error,
        samples: &[Sample {
            line: "[drm ERROR :amdgpu_job_timedout] ring gfx_0.0.0 timeout, signaled seq=12174921, emitted seq=12174923",
            body: "ring gfx_0.0.0 timeout, signaled seq=12174921, emitted seq=12174923",
            source: "https://github.com/freebsd/drm-kmod/issues/387 (freebsd/drm-kmod drivers/gpu/drm/drm_print.c __drm_err(): printf(\"[\" DRM_NAME \" ERROR :%s] \", function_name))",
        }],
    },
    Row {
        name: "fabric",
        what: "Fabric 1.x's `[host] out: ` / `err: ` before each line a remote command printed, and `[host] run: ` / `sudo: ` / `local: ` / `put: ` before the command it ran",
        first: |c| c == b'[',
        may: |b| {
            b.first() == Some(&b'[')
                && memchr::memchr(b']', &b[..b.len().min(FABRIC_HOST_MAX + 2)]).is_some_and(|i| {
                    b.get(i + 1) == Some(&b' ') && fabric_stream(&b[i + 2..]).is_some()
                })
        },
        peel: fabric,
        samples: &[
            Sample {
                line: "[my_server] run: touch app.wsgi",
                body: "touch app.wsgi",
                source: "fabric/fabric docs/tutorial.rst (Fabric 1.x: fabric/operations.py _run_command() prints `[%s] %s: %s` % (env.host_string, 'run' or 'sudo', command))",
            },
            Sample {
                line: "[ec2-54-1-2-3.compute-1.amazonaws.com] out: Starting supervisord: Error: Another program is already listening on a port that one of our HTTP servers is configured to use.",
                body: "Starting supervisord: Error: Another program is already listening on a port that one of our HTTP servers is configured to use.",
                source: "assembled, not copied: fabric/fabric 1.x fabric/io.py OutputLooper (each line of a remote command's output after the prefix `[%s] %s: ` % (env.host_string, 'out' or 'err')) around supervisord's own refusal",
            },
        ],
    },
    Row {
        name: "gpud-scan",
        what: "gpud's `scan` report of a kernel record it matched: `[XID found] (54 minutes ago) \"…\"`, `[SXID found] (…) \"…\"` (the record Go-quoted; its closing quote stays on the line)",
        first: |c| c == b'[',
        may: |b| b.starts_with(b"[XID found] (") || b.starts_with(b"[SXID found] ("),
        peel: gpud_scan,
        samples: &[Sample {
            line: "[XID found] (2 hours ago) \"NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\"",
            body: "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\"",
            source: "assembled, not copied: leptonai/gpud's scan (fmt.Printf(\"[XID found] (%s) %q\\n\", ts, msg.Message), ts from humanize.RelTime) around the Xid 79 line of https://github.com/akash-network/support/issues/209",
        }],
    },
];

/// The longest host string a Fabric prefix is looked for in (a user, a
/// host name and a port).
const FABRIC_HOST_MAX: usize = 96;

/// After Fabric's `[host] `: the stream or operation word and its colon
/// (`out:`, `err:`, `run:`, `sudo:`, `local:`, `put:`, `get:`), and the
/// length of both with the space after the colon, if any.
fn fabric_stream(b: &[u8]) -> Option<usize> {
    const WORDS: [&[u8]; 7] = [
        b"out:", b"err:", b"run:", b"sudo:", b"local:", b"put:", b"get:",
    ];
    let word = WORDS.iter().find(|w| b.starts_with(w))?;
    match b.get(word.len()) {
        None => Some(word.len()),
        Some(b' ') => Some(word.len() + 1),
        Some(_) => None,
    }
}

/// The markdown list row, which [`super::Peeler`] handles itself: a run of
/// items spans lines.
pub(super) const LIST: usize = 32;
/// The runner's output gutter row, which [`super::Peeler`] handles itself:
/// a run of piped lines spans lines.
pub(super) const RUNNER: usize = 36;

/// `| text` (or a lone `|`): a line of a command's output under a runner's
/// gutter, and its text. A line that ends in `|` too is a table's row
/// (markdown's, nvidia-smi's box), never the gutter.
pub(super) fn piped(text: &str) -> Option<&str> {
    let rest = match text.as_bytes() {
        [b'|'] => "",
        [b'|', b' ', ..] => &text[2..],
        _ => return None,
    };
    (!rest.trim_end().ends_with('|')).then_some(rest)
}

/// `- text`, `* text`, or an empty item (`-`, `- `): the marker and the
/// item's text. Not a rule (`---`, `***`) nor emphasis (`**bold**`).
pub(super) fn list_item(text: &str) -> Option<(u8, &str)> {
    let b = text.as_bytes();
    let marker = *b.first().filter(|c| matches!(c, b'-' | b'*'))?;
    match b.get(1) {
        None => Some((marker, "")),
        Some(b' ') => Some((marker, &text[2..])),
        _ => None,
    }
}

/// Whether a list item's text opens a log record, so that a run of items
/// is a pasted log and not a list of words: a level word (`INFO `,
/// `WARNING:`), a date or a time (`04-06 `, `2025-`, `12:01:`), or a
/// bracketed or parenthesised head (`[2025-…`, `(EngineCore pid=1)`) that
/// is not a task list's box (`[ ]`, `[x]`).
pub(super) fn opens_record(text: &str) -> bool {
    const LEVELS: [&str; 9] = [
        "INFO", "WARN", "WARNING", "ERROR", "DEBUG", "CRITICAL", "FATAL", "TRACE", "NOTICE",
    ];
    let b = text.as_bytes();
    let word = text.split([' ', ':', ']']).next().unwrap_or("");
    if LEVELS.contains(&word) && b.len() > word.len() {
        return true;
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits >= 2 && matches!(b.get(digits), Some(b'-' | b'/' | b':' | b'.')) {
        return true;
    }
    match b.first() {
        Some(b'[') => !matches!(b.get(1..3), Some(b" ]" | b"x]" | b"X]")),
        Some(b'(') => b.get(1).is_some_and(u8::is_ascii_alphabetic),
        _ => false,
    }
}

/// How an elided head is written: the ASCII dots and the ellipsis character.
const ELISIONS: [&str; 2] = ["[...] ", "[\u{2026}] "];

/// `[...] `: the head of a line left out. Only when a message follows: a
/// `[...]` alone stands for whole lines left out and is no frame.
fn elision(text: &str, _frame: &mut Frame) -> Option<usize> {
    let head = ELISIONS.iter().find(|e| text.starts_with(*e))?;
    let rest = text[head.len()..].trim_start_matches(' ');
    (!rest.is_empty()).then(|| text.len() - rest.len())
}

/// Whether `needle` is in `head`, a line's first few dozen bytes (a
/// searcher would cost more to build than this loop).
fn has(head: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    memchr::memchr_iter(first, head).any(|i| head[i + 1..].starts_with(rest))
}

/// Where the text after `YYYY-MM-DD[T ]HH:MM:SS[.frac]` starts, read by
/// position: the byte test of the frames that start with a time.
fn after_time(b: &[u8]) -> Option<usize> {
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let shape = digit(0)
        && digit(3)
        && b.get(4) == Some(&b'-')
        && b.get(7) == Some(&b'-')
        && matches!(b.get(10), Some(b'T' | b' '))
        && b.get(13) == Some(&b':')
        && b.get(16) == Some(&b':')
        && digit(18);
    if !shape {
        return None;
    }
    let mut i = 19;
    if matches!(b.get(i), Some(b'.' | b',')) {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    Some(i)
}

fn never(_: &[u8]) -> bool {
    false
}

fn never_peel(_: &str, _: &mut Frame) -> Option<usize> {
    None
}

/// The length `parser` consumed of `text`, if it matched.
fn consumed<'a, O>(
    text: &'a str,
    mut parser: impl Parser<&'a str, Output = O, Error = nom::error::Error<&'a str>>,
) -> Option<(usize, O)> {
    let (rest, out) = parser.parse(text).ok()?;
    Some((text.len() - rest.len(), out))
}

/// `> `, `>`, `> > `: a reply's quote marks. `>>>` is Python's prompt.
fn quote(text: &str, _frame: &mut Frame) -> Option<usize> {
    let mut rest = text;
    while let Some(r) = rest.strip_prefix('>') {
        if rest.starts_with(">>>") {
            break;
        }
        rest = r.strip_prefix(' ').unwrap_or(r);
    }
    (rest.len() < text.len()).then(|| text.len() - rest.len())
}

/// Leading spaces and tabs, when another frame follows them: indentation
/// alone is part of many formats (tracebacks, continuation lines).
fn indentation(text: &str, _frame: &mut Frame) -> Option<usize> {
    let rest = text.trim_start_matches([' ', '\t']);
    let bytes = rest.as_bytes();
    let mut scratch = Frame::default();
    let framed = ROWS.iter().enumerate().any(|(i, row)| {
        i > 1 && i != INDENTATION && (row.may)(bytes) && (row.peel)(rest, &mut scratch).is_some()
    });
    framed.then(|| text.len() - rest.len())
}

/// `/dev/kmsg`: `level,sequence,microseconds,flags[,more];message`; the
/// level's low three bits are the priority, the rest the facility.
fn kmsg(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (prio, _, _, _, usec, _, _flags, _, _)) = consumed(
        text,
        (
            digit1,
            char(','),
            digit1,
            char(','),
            digit1,
            char(','),
            one_of("-cx+"),
            take_while(|c| c != ';' && c != ' '),
            char(';'),
        ),
    )?;
    let prio: u32 = prio.parse().ok()?;
    frame.uptime_us = usec.parse().ok();
    frame.level = level_of(prio & 7);
    frame.facility = facility_of(prio >> 3);
    frame.kernel = true;
    Some(len)
}

/// Whether `text` starts with a forwarder's `facility: level: [`: what
/// follows a host.
fn forwarder_tail(text: &str) -> Option<()> {
    let (_, (facility, _, _, level, _)) = (
        take_while1(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()),
        char(':'),
        space1::<&str, nom::error::Error<&str>>,
        take_while1(|c: char| c.is_ascii_lowercase()),
        tag(": ["),
    )
        .parse(text)
        .ok()?;
    (FACILITIES.contains(&facility) && LEVELS.iter().any(|(l, _)| *l == level)).then_some(())
}

/// talosctl dmesg: `host: facility: level: [RFC 3339 time]: message`.
fn forwarder(text: &str, frame: &mut Frame) -> Option<usize> {
    // The host may be cut off the first line of a paste (`kern:     err:
    // [time]: …`): then the first word is the facility.
    let host = |text| -> nom::IResult<&str, &str> {
        let (rest, (host, _, _)) = (
            take_till1(|c: char| c == ':' || c.is_whitespace()),
            char(':'),
            space1,
        )
            .parse(text)?;
        if FACILITIES.contains(&host) && forwarder_tail(rest).is_none() {
            return Err(nom::Err::Error(nom::error::Error::new(
                text,
                nom::error::ErrorKind::Verify,
            )));
        }
        Ok((rest, host))
    };
    let (len, (host, facility, _, _, level, _, time, _)) = consumed(
        text,
        (
            opt(host),
            take_while1(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()),
            char(':'),
            space1,
            take_while1(|c: char| c.is_ascii_lowercase()),
            tag(": ["),
            take_till1(|c| c == ']'),
            alt((tag("]: "), tag("]:"))),
        ),
    )?;
    let facility = FACILITIES.iter().find(|f| **f == facility)?;
    let level = LEVELS.iter().find(|(name, _)| *name == level)?.1;
    let time = DateTime::parse_from_rfc3339(time).ok()?;
    frame.host = host.map(str::to_owned);
    frame.facility = Some(facility);
    frame.level = Some(level);
    frame.time = Some(Timestamp {
        local: time.naive_local(),
        offset_secs: Some(time.offset().local_minus_utc()),
        year_known: true,
    });
    frame.kernel = true;
    Some(len)
}

/// `dmesg --decode` (`-x`): `kern  :warn  : `, each name padded to six.
fn decode(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (facility, _, _, level, _, _)) = consumed(
        text,
        (
            take_while1(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()),
            space0,
            char(':'),
            take_while1(|c: char| c.is_ascii_lowercase()),
            space0,
            alt((tag(": "), tag(":"))),
        ),
    )?;
    frame.facility = Some(FACILITIES.iter().find(|f| **f == facility)?);
    frame.level = Some(LEVELS.iter().find(|(name, _)| *name == level)?.1);
    frame.kernel = true;
    Some(len)
}

/// `<N>`: a syslog priority, facility × 8 + level.
fn priority(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, prio, _)) = consumed(
        text,
        (
            char('<'),
            take_while_m_n(1, 3, |c: char| c.is_ascii_digit()),
            char('>'),
        ),
    )?;
    let prio: u32 = prio.parse().ok()?;
    if prio > 191 {
        return None;
    }
    frame.level = level_of(prio & 7);
    frame.facility = facility_of(prio >> 3);
    Some(len)
}

/// nv-fabricmanager's and nvidia-imex's logger: `[Feb 25 2025 13:59:45]
/// [INFO] [tid 1803] ` (a local time with no zone).
fn fabric_manager(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, month, _, day, _, year, _, hms, _, level, _, _)) = consumed(
        text,
        (
            char('['),
            take_while_m_n(3, 3, |c: char| c.is_ascii_alphabetic()),
            space1,
            take_while_m_n(1, 2, |c: char| c.is_ascii_digit()),
            char(' '),
            take_while_m_n(4, 4, |c: char| c.is_ascii_digit()),
            char(' '),
            take_while_m_n(8, 8, |c: char| c.is_ascii_digit() || c == ':'),
            tag("] ["),
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag("] [tid "),
            recognize((digit1, tag("] "))),
        ),
    )?;
    let month = MONTHS.iter().position(|m| *m == month)? as u32 + 1;
    let date = chrono::NaiveDate::from_ymd_opt(year.parse().ok()?, month, day.parse().ok()?)?;
    let time = chrono::NaiveTime::parse_from_str(hms, "%H:%M:%S").ok()?;
    frame.time = Some(Timestamp {
        local: date.and_time(time),
        offset_secs: None,
        year_known: true,
    });
    frame.level = LEVELS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(level))
        .map(|(_, l)| *l);
    frame.record = true;
    Some(len)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A time as loggers print it: `2024-03-06T17:53:31.052444Z`,
/// `2025-12-04 21:57:21.581795+08:00`, `2024-08-05 05:40:52,191`; a zone
/// when it says one.
fn any_time(text: &str) -> nom::IResult<&str, Timestamp> {
    let (rest, (date, _, hms, frac, zone)) = (
        recognize((
            take_while_m_n(4, 4, |c: char| c.is_ascii_digit()),
            char('-'),
            take_while_m_n(2, 2, |c: char| c.is_ascii_digit()),
            char('-'),
            take_while_m_n(2, 2, |c: char| c.is_ascii_digit()),
        )),
        one_of("T "),
        take_while_m_n(8, 8, |c: char| c.is_ascii_digit() || c == ':'),
        opt((
            one_of(".,"),
            take_while_m_n(1, 9, |c: char| c.is_ascii_digit()),
        )),
        opt(alt((
            recognize(char('Z')),
            recognize((
                one_of("+-"),
                take_while_m_n(2, 2, |c: char| c.is_ascii_digit()),
                opt(char(':')),
                take_while_m_n(2, 2, |c: char| c.is_ascii_digit()),
            )),
        ))),
    )
        .parse(text)?;
    let fail = || nom::Err::Error(nom::error::Error::new(text, nom::error::ErrorKind::Verify));
    let date = ymd(date).ok_or_else(fail)?;
    let mut time = hms_time(hms).ok_or_else(fail)?;
    if let Some((_, digits)) = frac {
        time = chrono::Timelike::with_nanosecond(&time, nanos(digits)).ok_or_else(fail)?;
    }
    let offset_secs = match zone {
        None => None,
        Some("Z") => Some(0),
        Some(z) => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits: String = z.chars().filter(char::is_ascii_digit).collect();
            let hours: i32 = digits[..2].parse().map_err(|_| fail())?;
            let minutes: i32 = digits[2..].parse().map_err(|_| fail())?;
            Some(sign * (hours * 3600 + minutes * 60))
        }
    };
    Ok((
        rest,
        Timestamp {
            local: date.and_time(time),
            offset_secs,
            year_known: true,
        },
    ))
}

/// The digits of `text` as a number; `None` unless all of it is ASCII
/// digits (at most 4 here).
fn number(text: &str) -> Option<u32> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.bytes().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
}

/// `YYYY-MM-DD`, as [`any_time`] recognised it, by position: every line of
/// a timed log pays this, and chrono's format parser cost ten times more
/// (issue 23).
pub(super) fn ymd(date: &str) -> Option<chrono::NaiveDate> {
    let year = i32::try_from(number(date.get(..4)?)?).ok()?;
    chrono::NaiveDate::from_ymd_opt(year, number(date.get(5..7)?)?, number(date.get(8..10)?)?)
}

/// `HH:MM:SS`; a leap second (`:60`) as chrono's own parser reads it.
pub(super) fn hms_time(hms: &str) -> Option<chrono::NaiveTime> {
    let b = hms.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, sec) = (number(&hms[..2])?, number(&hms[3..5])?, number(&hms[6..])?);
    match sec {
        60 => chrono::NaiveTime::parse_from_str(hms, "%H:%M:%S").ok(),
        _ => chrono::NaiveTime::from_hms_opt(h, m, sec),
    }
}

/// A fraction's 1 to 9 digits as nanoseconds (`.5` is half a second).
pub(super) fn nanos(digits: &str) -> u32 {
    let n = digits
        .bytes()
        .take(9)
        .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    n * 10u32.pow(9 - digits.len().min(9) as u32)
}

/// The level word loggers print, any case: its normalised name.
fn level_named(word: &str) -> Option<&'static str> {
    LEVELS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
        .map(|(_, l)| *l)
        .or(match word {
            "WARN" | "Warning" => Some("warning"),
            "CRITICAL" | "FATAL" => Some("crit"),
            "TRACE" | "VERBOSE" => Some("debug"),
            _ => None,
        })
}

/// snapd's `snap logs`: `2024-01-16T10:03:52Z app[pid]: `.
fn snap_logs(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, ident, _, pid, _)) = consumed(
        text,
        (
            any_time,
            char(' '),
            take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@')),
            char('['),
            digit1,
            tag("]: "),
        ),
    )?;
    if time.offset_secs != Some(0) {
        return None;
    }
    frame.time = Some(time);
    frame.ident = Some(ident.to_owned());
    frame.pid = pid.parse().ok();
    frame.record = true;
    Some(len)
}

/// A log viewer's `YYYY-MM-DD HH:MM:SS ` (local, to the second) before the
/// line it shows: it times the line and only decorates it (the line is
/// read by what is under it).
/// LM Studio's record head alone on its line: `2026-04-18 21:08:36
/// [INFO]` (the level padded to five columns: two spaces before `[INFO]`,
/// one before `[DEBUG]`). The message is on the next line after one space
/// ([`super::Peeler`] carries the head over to it).
fn lm_studio_head(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, _, level, _)) = consumed(
        text,
        (
            any_time,
            space1,
            char('['),
            take_while1(|c: char| c.is_ascii_uppercase()),
            char(']'),
        ),
    )?;
    if !text[len..].trim().is_empty() {
        return None;
    }
    record(frame, text.len(), level, Some(time))
}

fn viewer_time(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _)) = consumed(text, (any_time, char(' ')))?;
    if len != 20 || text[len..].trim().is_empty() {
        return None;
    }
    frame.time = Some(time);
    Some(len)
}

/// tracing-subscriber's default format: `2024-…Z  INFO shard-manager:
/// text_generation_launcher: ` (the level right-aligned in five columns,
/// then the spans and the target, each `name: `).
fn rust_tracing(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, level, _, _)) = consumed(
        text,
        (
            any_time,
            space1,
            take_while1(|c: char| c.is_ascii_uppercase()),
            char(' '),
            nom::multi::many1(recognize((
                take_while1(span_char),
                nom::multi::many0((tag("::"), take_while1(span_char))),
                opt(span_fields),
                tag(": "),
            ))),
        ),
    )?;
    record(frame, len, level, Some(time))
}

/// Rust's tracing formatter under a local timer: the grammar of
/// [`rust_tracing`], for a target that is a Rust path (`sglang_router_rs::router`) or
/// a record that names its source file (`src/router.rs:354: `), so that
/// another logger's `time LEVEL name: ` is not taken for it.
fn rust_tracing_local(text: &str, frame: &mut Frame) -> Option<usize> {
    let mut f = frame.clone();
    let len = rust_tracing(text, &mut f)?;
    let body = &text[len..];
    let located = body
        .split_once(": ")
        .and_then(|(file, _)| file.rsplit_once(".rs:"))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    (text[..len].contains("::") || located).then(|| {
        *frame = f;
        len
    })
}

/// A span's fields (`{total_time="1.2s" queue_time="686µs"}`, TGI's
/// `{parameters=GenerateParameters { … stop: ["\\n}"] … } total_time=…}`):
/// braces nested, quoted strings (with their escapes) skipped whole.
fn span_fields(text: &str) -> nom::IResult<&str, &str> {
    let fail = || nom::Err::Error(nom::error::Error::new(text, nom::error::ErrorKind::Char));
    if !text.starts_with('{') {
        return Err(fail());
    }
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for (i, c) in text.char_indices() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Ok((&text[i + 1..], &text[..=i]));
                }
            }
            _ => {}
        }
    }
    Err(fail())
}

/// A span's or target's name (`shard-manager`, `text_generation_router::server`).
fn span_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-')
}

/// Python's logging as `%(asctime)s - %(name)s - %(levelname)s - ` (with
/// lmdeploy ≥ 0.9 a `file.py:N - ` after the level).
fn python_logging(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, _name, _, level, _, _)) = consumed(
        text,
        (
            any_time,
            tag(" - "),
            take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
            tag(" - "),
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag(" - "),
            opt(recognize((
                take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_')),
                char(':'),
                digit1,
                tag(" - "),
            ))),
        ),
    )?;
    record(frame, len, level, Some(time))
}

/// Python's logging with `%(asctime)s %(levelname)s %(message)s` (WeNet's
/// wenet/bin/train.py basicConfig) or `[%(asctime)s %(levelname)s]
/// %(message)s` (OpenNMT-py's onmt/utils/logging.py): the level in
/// capitals, one of logging's own.
fn python_asctime(text: &str, frame: &mut Frame) -> Option<usize> {
    let bracketed = text.starts_with('[');
    let (after, time) = any_time(&text[usize::from(bracketed)..]).ok()?;
    // Wan's `[time] LEVEL: ` (its generate.py's `[%(asctime)s]
    // %(levelname)s: %(message)s`): the bracket closes after the time.
    let (rest, closed) = match after.strip_prefix("] ") {
        Some(rest) if bracketed => (rest, true),
        _ => (after.strip_prefix(' ')?, false),
    };
    let word = rest
        .find(|c: char| !c.is_ascii_uppercase())
        .unwrap_or(rest.len());
    let level = level_named(&rest[..word])?;
    let rest = rest[word..].strip_prefix(match (bracketed, closed) {
        (true, true) => ": ",
        (true, false) => "] ",
        _ => " ",
    })?;
    frame.level = Some(level);
    frame.time = Some(time);
    frame.record = true;
    Some(text.len() - rest.len())
}

/// loguru's default format (Delgan/loguru loguru/_defaults.py
/// LOGURU_FORMAT: `{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} |
/// {name}:{function}:{line} - {message}`, colours stripped).
fn loguru(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, level, _, _, _, _)) = consumed(
        text,
        (
            any_time,
            tag(" | "),
            take_while1(|c: char| c.is_ascii_uppercase()),
            space0,
            tag("| "),
            take_till1(|c: char| c == ' '),
            tag(" - "),
        ),
    )?;
    frame.level = Some(match level {
        "SUCCESS" => "info",
        word => level_named(word)?,
    });
    frame.time = Some(time);
    frame.record = true;
    Some(len)
}

/// TensorFlow's C++ `LOG()` under Python (tensorflow/tsl/platform/default/
/// logging.cc: `%Y-%m-%d %H:%M:%S.%06d: L file:line] `).
fn tensorflow(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (time, _, level, _, _, _, _, _)) = consumed(
        text,
        (
            any_time,
            tag(": "),
            one_of("IWEF"),
            char(' '),
            take_till1(|c: char| c == ':' || c == ' '),
            char(':'),
            digit1,
            tag("] "),
        ),
    )?;
    frame.level = Some(glog_level(level));
    frame.time = Some(time);
    frame.record = true;
    Some(len)
}

/// glog's severity letters.
fn glog_level(c: char) -> &'static str {
    match c {
        'I' => "info",
        'W' => "warning",
        'E' => "err",
        _ => "crit",
    }
}

/// DeepSpeed's `[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] `
/// (deepspeed/utils/logging.py).
fn deepspeed(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, time, _, level, _, _, _, _, _)) = consumed(
        text,
        (
            char('['),
            any_time,
            tag("] ["),
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag("] ["),
            take_till1(|c: char| c == ':' || c == ']' || c == ' '),
            char(':'),
            digit1,
            (
                char(':'),
                take_till1(|c: char| c == ']' || c == ' '),
                tag("] "),
            ),
        ),
    )?;
    record(frame, len, level, Some(time))
}

/// Whether `b` opens with gunicorn's record head as it was before 19.2
/// (benoitc/gunicorn c21c3c20 put the time in brackets with its zone):
/// `2013-04-26 11:35:16 [30352] [`, the time bare, a PID in brackets.
fn gunicorn_unbracketed(b: &[u8]) -> bool {
    after_time(b) == Some(19)
        && b.get(10) == Some(&b' ')
        && b.get(19..21) == Some(b" [")
        && b.get(21).is_some_and(u8::is_ascii_digit)
        && b.get(21..)
            .and_then(|r| memchr::memchr(b']', &r[..r.len().min(12)]).map(|i| (r, i)))
            .is_some_and(|(r, i)| {
                r[..i].iter().all(u8::is_ascii_digit) && r.get(i..i + 3) == Some(b"] [")
            })
}

/// gunicorn's error log (gunicorn/glogging.py: `%(asctime)s [%(process)d]
/// [%(levelname)s] %(message)s`, the time as `[%Y-%m-%d %H:%M:%S %z]`;
/// before 19.2 as `%Y-%m-%d %H:%M:%S`).
fn gunicorn(text: &str, frame: &mut Frame) -> Option<usize> {
    // The time, and where the ` [PID] [LEVEL] ` both layouts share starts.
    let (time, tail) = if gunicorn_unbracketed(text.as_bytes()) {
        let (rest, time) = any_time(text).ok()?;
        (time, text.len() - rest.len())
    } else {
        let stamp = text.get(1..26)?;
        // `%z` follows a space, which `any_time` does not take: read it joined.
        let joined = format!("{}{}", stamp.get(..19)?, stamp.get(20..)?);
        let (_, time) = any_time(&joined).ok()?;
        (text.get(26..27) == Some("]")).then_some(())?;
        (time, 27)
    };
    let (len, (_, pid, _, level, _)) = consumed(
        &text[tail..],
        (
            tag(" ["),
            digit1,
            tag("] ["),
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag("] "),
        ),
    )?;
    let len = record(frame, tail + len, level, Some(time))?;
    frame.pid = pid.parse().ok();
    Some(len)
}

/// A logger's record head of `len` bytes at `level` (a name
/// [`level_named`] knows, or no record), with its time when it has one.
fn record(frame: &mut Frame, len: usize, level: &str, time: Option<Timestamp>) -> Option<usize> {
    frame.level = Some(level_named(level)?);
    if time.is_some() {
        frame.time = time;
    }
    frame.record = true;
    Some(len)
}

/// Celery's worker log (celery/celery celery/app/defaults.py: the
/// `worker_log_format` `[%(asctime)s: %(levelname)s/%(processName)s]
/// %(message)s`, and the `worker_task_log_format` that adds
/// `%(task_name)s[%(task_id)s]: ` to the message).
fn celery(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, time, _, level, _, _, _)) = consumed(
        text,
        (
            char('['),
            any_time,
            tag(": "),
            take_while1(|c: char| c.is_ascii_uppercase()),
            char('/'),
            take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
            tag("] "),
        ),
    )?;
    record(frame, len, level, Some(time))
}

/// InvokeAI's log head (invoke-ai/InvokeAI invokeai/backend/util/logging.py,
/// `InvokeAIPlainLogFormatter` and the colour one: `[%(asctime)s]::[%(name)s]::%(levelname)s
/// --> %(message)s`); the name is the logger (`InvokeAI`, `uvicorn.access`,
/// `ModelInstallService`).
fn invokeai(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, time, _, name, _, level, _)) = consumed(
        text,
        (
            char('['),
            any_time,
            tag("]::["),
            take_till1(|c: char| c == ']' || c == ' '),
            tag("]::"),
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag(" --> "),
        ),
    )?;
    let len = record(frame, len, level, Some(time))?;
    frame.ident = Some(name.to_owned());
    Some(len)
}

/// Jupyter's log head (traitlets' Application log format as the notebook
/// server sets it: `[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s] `,
/// the time `%H:%M:%S` in notebook 4 – 6 (jupyter/notebook
/// notebook/notebookapp.py `_default_log_datefmt`), with the date in
/// jupyter_server (`%Y-%m-%d %H:%M:%S`); the name is the application,
/// `NotebookApp`, `LabApp`, `ServerApp` (JupyterHub adds ` module:line`).
/// A time with no date records no time.
fn jupyter(text: &str, frame: &mut Frame) -> Option<usize> {
    let level = match text.as_bytes().get(1)? {
        b'D' => "debug",
        b'I' => "info",
        b'W' => "warning",
        b'E' => "err",
        _ => "crit",
    };
    let rest = text.get(3..)?;
    let (time, after) = match any_time(rest) {
        Ok((after, time)) => (Some(time), after),
        Err(_) => {
            let (len, _) = consumed(
                rest,
                (
                    take_while_m_n(8, 8, |c: char| c.is_ascii_digit() || c == ':'),
                    opt((char('.'), digit1)),
                ),
            )?;
            chrono::NaiveTime::parse_from_str(rest.get(..8)?, "%H:%M:%S").ok()?;
            (None, &rest[len..])
        }
    };
    let (len, _) = consumed(
        after,
        (
            char(' '),
            take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
            // JupyterHub adds the module and line: `JupyterHub app:3000]`.
            opt((
                char(' '),
                take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
                char(':'),
                digit1,
            )),
            char(']'),
            space0,
        ),
    )?;
    frame.level = Some(level);
    frame.time = time;
    frame.record = true;
    Some(text.len() - after.len() + len)
}

/// Python's logging formatted `%(levelname)s (%(name)s):  %(message)s`
/// (wandb/openui backend/openui/logs.py, its colour codes already removed),
/// or `%(levelname)-5.5s [%(name)s] %(message)s` (the logging section of
/// every `alembic.ini` template, sqlalchemy/alembic
/// alembic/templates/generic/alembic.ini.mako: the level padded and cut to
/// five letters, `INFO  `, `WARNI `).
fn level_name(text: &str, frame: &mut Frame) -> Option<usize> {
    if let Some(len) = level_bracket_name(text) {
        let level = match text.get(..5)? {
            "WARNI" => "warning",
            "CRITI" => "crit",
            word => level_named(word.trim_end())?,
        };
        frame.level = Some(level);
        frame.record = true;
        return Some(len);
    }
    let (len, (level, _, _, _, _)) = consumed(
        text,
        (
            take_while1(|c: char| c.is_ascii_uppercase()),
            tag(" ("),
            take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')),
            tag("):"),
            space1,
        ),
    )?;
    record(frame, len, level, None)
}

/// The length of Alembic's `INFO  [alembic.runtime.migration] `: five
/// characters of level, a space, the logger's dotted name in brackets.
fn level_bracket_name(text: &str) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            take_while_m_n(5, 5, |c: char| c.is_ascii_uppercase() || c == ' '),
            tag(" ["),
            take_while1(|c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.')),
            tag("] "),
        ),
    )?;
    Some(len)
}

/// Kaldi's record heads (kaldi-asr/kaldi src/base/kaldi-error.cc,
/// `MessageLogger::LogMessage`) and the level each is.
const KALDI_LEVELS: [(&str, &str); 5] = [
    ("LOG (", "info"),
    ("WARNING (", "warning"),
    ("ERROR (", "err"),
    ("ASSERTION_FAILED (", "crit"),
    ("VLOG[", "debug"),
];

/// Kaldi's `LEVEL (program[version]:Function():file.cc:N) `: `VLOG[2] (`
/// for the verbose levels; the `[version]` since Kaldi 5.0 (2017).
fn kaldi(text: &str, frame: &mut Frame) -> Option<usize> {
    let (head, level) = KALDI_LEVELS.iter().find(|(h, _)| text.starts_with(h))?;
    let mut rest = &text[head.len()..];
    if *head == "VLOG[" {
        rest = rest
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .strip_prefix("] (")?;
    }
    // Vosk's library prints no program name: `WARNING ([5.5.1013~1546-9b851]:`.
    let (len, (program, version, _, _, _, _, _, _)) = consumed(
        rest,
        (
            take_while(|c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
            opt((
                char('['),
                take_till1(|c: char| c == ']' || c == ' '),
                char(']'),
            )),
            char(':'),
            take_till1(|c: char| c == '(' || c == ' '),
            tag("():"),
            take_till1(|c: char| c == ':' || c == ' '),
            (char(':'), digit1),
            tag(") "),
        ),
    )?;
    if program.is_empty() && version.is_none() {
        return None;
    }
    frame.level = Some(level);
    frame.ident = (!program.is_empty()).then(|| program.to_owned());
    frame.record = true;
    Some(text.len() - rest.len() + len)
}

/// LLaMA-Factory's format for transformers' logging:
/// `[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> `.
fn llamafactory(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, level, _, _, _, _, _, time, _)) = consumed(
        text,
        (
            char('['),
            take_while1(|c: char| c.is_ascii_uppercase()),
            char('|'),
            take_till1(|c: char| c == ':' || c == ']' || c == ' '),
            char(':'),
            digit1,
            tag("] "),
            any_time,
            tag(" >> "),
        ),
    )?;
    record(frame, len, level, Some(time))
}

/// `[PORT] `: llama-server in router mode (tools/server, `--models-dir`)
/// forwards each child server's lines under the port it listens on. It
/// only decorates: the line is read by what is under it.
fn llama_router_port(text: &str, _frame: &mut Frame) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            char('['),
            take_while_m_n(4, 5, |c: char| c.is_ascii_digit()),
            tag("] "),
        ),
    )?;
    (!text[len..].trim().is_empty()).then_some(len)
}

/// llama.cpp's common log (common/log.cpp, `--log-timestamps` and
/// `--log-prefix`): `%d.%02d.%03d.%03d ` (minutes, seconds, milliseconds,
/// microseconds since the logger started: no wall time) and `I `, `W `,
/// `E ` or `D `.
fn llama_log(text: &str, frame: &mut Frame) -> Option<usize> {
    let two = |c: char| c.is_ascii_digit();
    let (len, (_, _, _, _, _, _, _, _, level, _)) = consumed(
        text,
        (
            take_while_m_n(1, 4, two),
            char('.'),
            take_while_m_n(2, 2, two),
            char('.'),
            take_while_m_n(3, 3, two),
            char('.'),
            take_while_m_n(3, 3, two),
            char(' '),
            one_of("IWED"),
            char(' '),
        ),
    )?;
    frame.level = Some(match level {
        'I' => "info",
        'W' => "warning",
        'E' => "err",
        _ => "debug",
    });
    frame.record = true;
    Some(len)
}

/// llama.cpp server's `SRV_*`, `SLT_*` and `QUE_*` macros (tools/server,
/// formerly examples/server/utils.hpp: `"srv  %12.*s: "`, `"slot %12.*s:
/// id %2d | task %d | "`): the function name right-aligned and cut to 12
/// columns (25 in some forks).
fn llama_server(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (kind, pad, name, _)) = consumed(
        text,
        (
            alt((tag("srv  "), tag("slot "), tag("que  "))),
            space0,
            take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
            tag(": "),
        ),
    )?;
    if !matches!(pad.len() + name.len(), 12 | 25) {
        return None;
    }
    let mut len = len;
    if kind == "slot " {
        let (more, _) = consumed(
            &text[len..],
            (
                tag("id "),
                space0,
                digit1,
                tag(" | task "),
                opt(char('-')),
                digit1,
                tag(" | "),
            ),
        )?;
        len += more;
    }
    frame.record = true;
    Some(len)
}

/// A pytest node id (`path.py::name[params]`) and a space, output after it.
fn pytest_node(text: &str, _frame: &mut Frame) -> Option<usize> {
    let (len, (id, _)) = consumed(text, (take_till1(|c: char| c == ' '), char(' ')))?;
    let (path, _) = id.split_once(".py::")?;
    let ok = !path.is_empty()
        && path
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'-' | b'.'))
        && !text[len..].trim().is_empty();
    ok.then_some(len)
}

/// `[TM][INFO] ` (TurboMind's logger), `[Gloo] ` (PyTorch's Gloo group),
/// `[GIN-debug] ` (the Gin web framework's debug output in its debug mode,
/// Ollama's routes at start-up: gin-gonic/gin debug.go, `debugPrefix`,
/// with `[WARNING] ` or `[ERROR] ` in front of its warnings and errors).
/// `[drm ERROR :amdgpu_job_timedout] `: FreeBSD drm-kmod's `__drm_err()`
/// head, which only the kernel's message buffer prints (`dmesg`, with no
/// time): the line under it is a kernel message at level err.
/// gpud's `[XID found] (N minutes ago) "` (or `[SXID found]`): a kernel
/// record it matched, Go-quoted (`%q`), its age relative to the scan.
fn gpud_scan(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            alt((tag("[XID found] ("), tag("[SXID found] ("))),
            take_till1(|c: char| c == ')' || c == '"'),
            tag(") \""),
        ),
    )?;
    frame.kernel = true;
    Some(len)
}

fn freebsd_drm_error(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            tag("[drm ERROR :"),
            take_till1(|c: char| c == ']' || c == ' '),
            tag("] "),
        ),
    )?;
    frame.level = Some("err");
    frame.kernel = true;
    Some(len)
}

fn logger_tag(text: &str, frame: &mut Frame) -> Option<usize> {
    if let Some(rest) = text.strip_prefix("[GIN-debug] ") {
        let (rest, level) = match rest.strip_prefix("[WARNING] ") {
            Some(rest) => (rest, "warning"),
            None => match rest.strip_prefix("[ERROR] ") {
                Some(rest) => (rest, "err"),
                None => (rest, "debug"),
            },
        };
        return record(frame, text.len() - rest.len(), level, None);
    }
    if let Some(rest) = text.strip_prefix("[Gloo] ") {
        frame.record = true;
        return Some(text.len() - rest.len());
    }
    let (len, (_, level, _)) = consumed(
        text,
        (
            tag("[TM]["),
            take_while1(|c: char| c.is_ascii_uppercase()),
            alt((tag("] "), tag("]"))),
        ),
    )?;
    record(frame, len, level, None)
}

/// zerolog's `ConsoleWriter` (rs/zerolog console.go): Go's kitchen clock
/// (`3:04PM`) and the level in three capitals (`TRC DBG INF WRN ERR FTL
/// PNC`). The time has no date: only the level is kept.
fn zerolog_console(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, _, _, _, _, level, _)) = consumed(
        text,
        (
            take_while_m_n(1, 2, |c: char| c.is_ascii_digit()),
            char(':'),
            take_while_m_n(2, 2, |c: char| c.is_ascii_digit()),
            alt((tag("AM"), tag("PM"))),
            char(' '),
            alt((
                tag("TRC"),
                tag("DBG"),
                tag("INF"),
                tag("WRN"),
                tag("ERR"),
                tag("FTL"),
                tag("PNC"),
            )),
            char(' '),
        ),
    )?;
    frame.level = Some(match level {
        "TRC" | "DBG" => "debug",
        "INF" => "info",
        "WRN" => "warning",
        "ERR" => "err",
        _ => "crit",
    });
    frame.record = true;
    Some(len)
}

/// `THCudaCheck FAIL file=… line=N error=N : ` (PyTorch ≤ 1.0's THC).
fn thcudacheck(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            tag("THCudaCheck FAIL file="),
            take_till1(|c| c == ' '),
            tag(" line="),
            digit1,
            tag(" error="),
            digit1,
            tag(" : "),
        ),
    )?;
    frame.level = Some("err");
    frame.record = true;
    Some(len)
}

/// dmlc-core's `[12:44:34] src/x.h:84: ` (MXNet, XGBoost).
fn dmlc(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, _) = consumed(
        text,
        (
            char('['),
            take_while_m_n(8, 8, |c: char| c.is_ascii_digit() || c == ':'),
            tag("] "),
            take_till1(|c: char| c == ':' || c == ' '),
            char(':'),
            digit1,
            tag(": "),
        ),
    )?;
    frame.record = true;
    Some(len)
}

const FACILITIES: [&str; 20] = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
    "ftp", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];

/// Level names as dmesg, syslog and Talos spell them, and the name kept.
const LEVELS: [(&str, &str); 11] = [
    ("emerg", "emerg"),
    ("alert", "alert"),
    ("crit", "crit"),
    ("err", "err"),
    ("error", "err"),
    ("warn", "warning"),
    ("warning", "warning"),
    ("notice", "notice"),
    ("info", "info"),
    ("debug", "debug"),
    ("panic", "emerg"),
];

fn level_of(n: u32) -> Option<&'static str> {
    [
        "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
    ]
    .get(n as usize)
    .copied()
}

fn facility_of(n: u32) -> Option<&'static str> {
    // Codes 12-15 (ntp, security, console, solaris-cron) have no name here.
    match n {
        0..=11 => FACILITIES.get(n as usize).copied(),
        16..=23 => FACILITIES.get(n as usize - 4).copied(),
        _ => None,
    }
}

/// An editor's or viewer's line number at the start of `text`: the number,
/// the text after it, where that text starts, and whether the number was
/// followed by a lone space (vim's `N `, the loosest). `cat -n`
/// (`%6d\t`), a viewer's `N | ` / `N │ `, vim's right-aligned `N `; a
/// numbered blank line is the number alone.
pub(super) fn line_number(text: &str) -> Option<(u32, &str, usize, bool)> {
    let (len, (_, number, sep)) = consumed(
        text,
        (
            take_while(|c| c == ' '),
            take_while_m_n(1, 7, |c: char| c.is_ascii_digit()),
            alt((
                recognize((space0, alt((tag("|"), tag("│"))), opt(char(' ')))),
                tag("\t"),
                tag(" "),
                nom::combinator::eof,
            )),
        ),
    )?;
    let number: u32 = number.parse().ok()?;
    Some((number, &text[len..], len - sep.len(), sep == " "))
}

/// Escape codes a paste spelled out: rsyslog's `#033[…m`, `\033[…m`,
/// `\e[…m`, `\x1b[…m`, `^[[…m`, and SGR codes whose ESC was lost (` [36m`
/// … `[0m`, only on a line with a reset, as a log's own `[1m` is text).
/// `None` when there are none.
pub(super) fn spelled_escapes(text: &str) -> Option<String> {
    // NUL bytes a terminal copy spelled in caret notation (`^@^@[15:58:39
    // TP0] …`, a `kubectl logs` of a container writing to a closed pty).
    if let Some(rest) = text.strip_prefix("^@") {
        let rest = rest.trim_start_matches("^@");
        return Some(spelled_escapes(rest).unwrap_or_else(|| rest.to_owned()));
    }
    let bytes = text.as_bytes();
    // Byte test: a line with colour codes resets them (`[0m`, spelled
    // `#033[0m`, `^[[0m`, …); most lines have none.
    static RESET: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("[0m"));
    RESET.find(bytes)?;
    let reset = true;
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut changed = false;
    for open in memchr::memchr_iter(b'[', bytes) {
        if open < last {
            continue;
        }
        let Some(len) = sgr_params(&bytes[open + 1..]) else {
            continue;
        };
        let before = &bytes[last..open];
        let spelled = SPELLED_ESC.iter().find(|p| before.ends_with(p));
        let start = match spelled {
            Some(p) => open - p.len(),
            // An orphan code goes with the space before it.
            None if reset && open == 0 => open,
            None if reset && bytes[open - 1] == b' ' => open - 1,
            None => continue,
        };
        out.push_str(&text[last..start.max(last)]);
        last = open + 1 + len;
        changed = true;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[last..]);
    // The space after a code the line started with goes too.
    Some(if reset {
        out.trim_start().to_owned()
    } else {
        out
    })
}

/// How pastes spell the ESC byte: rsyslog's `#033`, C's and Python's
/// escapes, a terminal's caret notation, and the `?` a code page without
/// ESC put in its place (Windows consoles, a copy through one).
const SPELLED_ESC: [&[u8]; 7] = [b"#033", b"\\033", b"\\e", b"\\x1b", b"\\u001b", b"^[", b"?"];

/// The length of `1;31m` (SGR parameters and the final `m`) at the start
/// of `bytes`.
fn sgr_params(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() && i < 16 && (bytes[i].is_ascii_digit() || bytes[i] == b';') {
        i += 1;
    }
    (i > 0 && i <= 12 && bytes.get(i) == Some(&b'm')).then_some(i + 1)
}

/// Fabric 1.x's `[host] out: ` (fabric/io.py OutputLooper's prefix before
/// each line of a remote command's output; `err: ` for its stderr) and
/// `[host] run: ` before the command it runs (fabric/operations.py). The
/// host is a host string (`user@host:port`), no space nor bracket in it;
/// an empty output line is `[host] out:` or `[host] out: `.
fn fabric(text: &str, frame: &mut Frame) -> Option<usize> {
    let (len, (_, host, _)) = consumed(
        text,
        (
            char('['),
            take_while_m_n(1, FABRIC_HOST_MAX, |c: char| !matches!(c, ' ' | '[' | ']')),
            tag("] "),
        ),
    )?;
    let stream = fabric_stream(&text.as_bytes()[len..])?;
    frame.host = Some(host.to_owned());
    Some(len + stream)
}
