//! Every line reaches the recognisers: a headline error pasted alone on
//! stdin, with no prefix and no other line around it, still yields its
//! finding; `inputs[]` accounts for every non-blank line; `rootcause
//! inputs` lists what it did not understand.

use std::io::Write;
use std::process::{Output, Stdio};

use crate::support::bin;

fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.as_bytes()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn analyze(stdin: &str) -> serde_json::Value {
    let o = run(&["analyze", "-o", "json"], stdin);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The rules of the report's findings.
fn rules(report: &serde_json::Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Each line is the only input; each must give a finding of its rule, and
/// its line must be cited.
#[test]
fn a_headline_error_pasted_alone_is_found() {
    let cases: &[(&str, &str)] = &[
        // The brief's line; fixtures/real/001 (sglang#5338) has the
        // `ValueError … min_per_gpu_memory=` wording of older SGLang.
        (
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74, local_gpu_memory=93.72, local_gpu_memory * 0.9=84.35",
            "sglang-unbalanced-memory",
        ),
        (
            "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=23.16046142578125, local_gpu_memory=30.41015625, local_gpu_memory * 0.9=27.369140625",
            "sglang-unbalanced-memory",
        ),
        // PyTorch ≥ 2.1 (fixtures/real/021, rwth-i6/returnn#1466).
        (
            "OutOfMemoryError: CUDA out of memory. Tried to allocate 52.00 MiB. GPU 0 has a total capacty of 31.74 GiB of which 39.62 MiB is free. Process 101553 has 1.19 GiB memory in use. Including non-PyTorch memory, this process has 13.82 GiB memory in use.",
            "torch-cuda-oom",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use.",
            "torch-cuda-oom",
        ),
        // PyTorch ≤ 2.0 (fixtures/real/039, vllm#783; 2KangHo/vdsr_pytorch#2).
        (
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
            "torch-cuda-oom",
        ),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.90 GiB total capacity; 13.13 GiB already allocated; 415.88 MiB free; 14.80 GiB reserved in total by PyTorch)",
            "torch-cuda-oom",
        ),
        // vLLM before and after it named the device (fixtures/real/013,
        // vllm-omni#276; vllm#33297).
        (
            "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory utilization (0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "vllm-insufficient-free-memory",
        ),
        (
            "ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "vllm-insufficient-free-memory",
        ),
        // SGLang (fixtures/real/026, sglang#6033).
        (
            "Exception: Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. ",
            "sglang-cuda-graph-capture-failed",
        ),
        // systemd's unit message without the journal's prefix.
        (
            "ollama.service: Main process exited, code=exited, status=1/FAILURE",
            "unit-exit-nonzero",
        ),
    ];
    for (line, rule) in cases {
        for stdin in [format!("{line}\n"), format!("Any ideas?\n\n{line}\n")] {
            let report = analyze(&stdin);
            let found = rules(&report);
            assert!(
                found.iter().any(|r| r == rule),
                "{rule} not found for {stdin:?}: {found:?}"
            );
            let inputs = report["inputs"].as_array().unwrap();
            let unrecognized: u64 = inputs
                .iter()
                .map(|i| i["unrecognized_lines"].as_u64().unwrap())
                .sum();
            let prose: u64 = inputs
                .iter()
                .map(|i| i["prose_lines"].as_u64().unwrap())
                .sum();
            assert_eq!(prose, u64::from(stdin.starts_with("Any")), "{stdin:?}");
            // The headline itself is read, not merely matched.
            if !line.starts_with("ValueError: Free memory") && !line.starts_with("Exception:") {
                assert_eq!(unrecognized, 0, "{stdin:?}: {inputs:?}");
            }
        }
    }
}

/// A paste with a prompt, prose, output of a known format, a bare line and
/// lines nothing knows: recognised + unrecognised + prose + prompts is the
/// number of non-blank lines.
#[test]
fn input_counts_add_up_to_the_non_blank_lines() {
    let paste = "\
After running the command below I get:
root@node4:~# dmesg -T | grep NVRM
[Sat Jun  1 12:00:03 2024] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.

(venv) user@host:~/x$ python -m sglang.launch_server --model-path /models/m --tp 2
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74, local_gpu_memory=93.72, local_gpu_memory * 0.9=84.35
zz 0x7f3a frobnicated
Any ideas?
";
    let report = analyze(paste);
    let nonblank = paste.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    let inputs = report["inputs"].as_array().unwrap();
    let sum = |key: &str| -> u64 { inputs.iter().map(|i| i[key].as_u64().unwrap()).sum() };
    assert_eq!(sum("prompt_lines"), 2, "{inputs:?}");
    assert_eq!(sum("prose_lines"), 2, "{inputs:?}");
    assert_eq!(sum("unrecognized_lines"), 1, "{inputs:?}");
    // The rest is recognised: the dmesg line and the exception line.
    let recognized = 2;
    assert_eq!(
        recognized + sum("unrecognized_lines") + sum("prose_lines") + sum("prompt_lines"),
        nonblank
    );
    let lines: u64 = sum("lines");
    assert_eq!(lines, paste.lines().count() as u64);
    let found = rules(&report);
    assert!(
        found.iter().any(|r| r == "sglang-unbalanced-memory"),
        "{found:?}"
    );
    assert!(
        found.iter().any(|r| r == "xid-gpu-fell-off-bus"),
        "{found:?}"
    );

    let text = run(&["analyze", "--color", "never"], paste);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("1 unrecognised, 2 prose, 2 shell prompts"),
        "{text}"
    );
}

#[test]
fn inputs_lists_what_was_not_understood() {
    let paste = "\
Here is what I get:
$ journalctl -u ollama -o cat
ollama.service: Main process exited, code=exited, status=1/FAILURE
$ squeue
zz 0x7f3a frobnicated and then some more text that is long enough to be cut at the width of the terminal
";
    let mut child = bin()
        .args(["inputs"])
        .env("COLUMNS", "60")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(paste.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(lines[0].starts_with("stdin:1-2: shell-prompt"), "{text}");
    assert!(
        lines[0].contains("0 of 2 lines unrecognised, 1 prose, 1 shell prompt;"),
        "{text}"
    );
    assert_eq!(lines[1], "       1  prose         Here is what I get:");
    assert_eq!(
        lines[2],
        "       2  prompt        $ journalctl -u ollama -o cat"
    );
    // The command said what follows: `journalctl -o cat` output.
    assert!(
        lines[3].starts_with("stdin:3-3: journal-cat") && lines[3].contains("prompt above"),
        "{text}"
    );
    assert!(lines[4].starts_with("stdin:4-5: shell-prompt"), "{text}");
    assert!(
        lines[4].contains("1 of 2 lines unrecognised, 1 shell prompt;"),
        "{text}"
    );
    assert_eq!(lines[5], "       4  prompt        $ squeue");
    assert!(
        lines[6].starts_with("       5  unrecognised  zz 0x7f3a"),
        "{text}"
    );
    assert!(
        lines[6].ends_with('…') && lines[6].chars().count() == 60,
        "{text}"
    );
}

/// A line the parser of a buffered format (a table, `systemctl show`
/// properties, a ps listing) does not read still meets every line-level
/// recogniser, as a line of an unknown segment does; what none knows is
/// counted and listed. `--format-hint` keeps each paste one segment.
#[test]
fn lines_a_buffered_parser_misses_meet_the_recognisers() {
    let cases: &[(&str, &str, &str, u64)] = &[
        (
            "systemctl-show",
            "Id=ollama.service\nActiveState=active\n\
             NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n\
             zz 0x7f3a frobnicated\n",
            "xid-gpu-fell-off-bus",
            1,
        ),
        (
            "ps",
            "  PID TTY          TIME CMD\n 4242 ?        00:01:02 python3\n\
             ollama.service: Main process exited, code=exited, status=1/FAILURE\n",
            "unit-exit-nonzero",
            0,
        ),
    ];
    for (format, paste, rule, unrecognized) in cases {
        let o = run(&["analyze", "-o", "json", "--format-hint", format], paste);
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            rules(&report).iter().any(|r| r == rule),
            "{format}: {report}"
        );
        assert_eq!(report["inputs"][0]["format"], *format);
        assert_eq!(
            report["inputs"][0]["unrecognized_lines"], *unrecognized,
            "{format}: {report}"
        );
    }
    let o = run(
        &["inputs", "--format-hint", "systemctl-show"],
        "Id=ollama.service\nzz 0x7f3a frobnicated\n",
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("2  unrecognised") && l.ends_with("zz 0x7f3a frobnicated")),
        "{text}"
    );
}
