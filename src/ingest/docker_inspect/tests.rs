//! The `docker inspect` reader on real pastes: a State object alone, a
//! container cut after `HostsPath`, `DeviceRequests`, and JSON that is not
//! Docker's.

use super::*;
use crate::ingest::{Anchors, ingest};
use crate::source::{Source, SourceMap};

/// What `text`, as one input, makes: its containers and its unread lines.
fn read(text: &str) -> (Vec<ContainerState>, u32) {
    let mut sources = SourceMap::new();
    sources.add(Source::new("paste", text.as_bytes()));
    let ingested = ingest(&sources, &Anchors::none());
    let unread = ingested.inputs.iter().map(|i| i.unrecognized).sum();
    (ingested.facts.containers, unread)
}

#[test]
fn lines_of_pretty_printed_json_are_read_by_their_grammar() {
    for line in [
        "\"Status\": \"exited\",",
        "\"OOMKilled\": true,",
        "\"ExitCode\": 137,",
        "\"Pid\": -1",
        "\"Error\": \"\",",
        "\"Args\": [",
        "\"State\": {",
        "\"Options\": null",
        "\"Mounts\": [],",
        "\"Labels\": {},",
        "\"python -u webui.py --listen --port 7860 ${CLI_ARGS}\"",
        "\"a \\\"quoted\\\" word\",",
        "},",
        "]",
        "] }",
        "{",
        "[",
    ] {
        assert!(is_json_line(line), "{line}");
    }
    for line in [
        "",
        "Status: exited",
        "\"Status\":",
        "\"Status\": exited,",
        "score=-0.424665",
        "{ \"a\": 1 } trailing",
        "- 137",
    ] {
        assert!(!is_json_line(line), "{line}");
    }
    let got = json_line("\"ExitCode\": 137,").expect("a member");
    assert_eq!(
        (got.key, got.value, got.closes),
        (Some("ExitCode"), Some(Value::Done("137")), 0)
    );
    let got = json_line("\"Cmd\": [").expect("an array opens");
    assert_eq!(got.value, Some(Value::Open(true)));
    assert_eq!(json_line("},").map(|l| l.closes), Some(1));
}

/// The State object of https://github.com/kudarap/dotagiftx/issues/123
/// (batch P's 1040), verbatim: its `{` line took it for journalctl's
/// json-pretty, whose reader left all 13 lines unread.
#[test]
fn a_pasted_state_object_is_the_containers_state() {
    let text = r#"{
  "Status": "exited",
  "Running": false,
  "Paused": false,
  "Restarting": false,
  "OOMKilled": true,
  "Dead": false,
  "Pid": 0,
  "ExitCode": 137,
  "Error": "",
  "StartedAt": "2026-03-10T19:51:02.31277242Z",
  "FinishedAt": "2026-03-10T20:14:03.658991947Z"
}
"#;
    let (containers, unread) = read(text);
    assert_eq!(unread, 0);
    let [c] = containers.as_slice() else {
        panic!("{containers:?}");
    };
    assert_eq!(c.span.line, 1);
    assert_eq!(c.status.as_deref(), Some("exited"));
    assert_eq!(
        (c.running, c.oom_killed, c.dead, c.pid, c.exit_code),
        (Some(false), Some(true), Some(false), Some(0), Some(137))
    );
    assert_eq!(c.error, None);
    assert_eq!(
        c.finished_at.as_deref(),
        Some("2026-03-10T20:14:03.658991947Z")
    );
    // Each field is cited on its own line; the object ends at its `}`.
    let line = |k: &str| c.line_of(k).map(|s| s.line);
    assert_eq!(
        (line("OOMKilled"), line("ExitCode"), line("FinishedAt")),
        (Some(6), Some(9), Some(12))
    );
    assert_eq!(line("Paused"), None);
    assert_eq!(c.end.line, 13);
}

/// `docker inspect` under its prompt, cut after `HostsPath`
/// (fixtures/formats/lines/docker-inspect-exited-137.txt, from
/// https://github.com/AbdBarho/stable-diffusion-webui-docker/issues/457).
#[test]
fn a_containers_object_gives_its_state_and_command() {
    let text = include_str!("../../../fixtures/formats/lines/docker-inspect-exited-137.txt");
    let (containers, unread) = read(text);
    assert_eq!(unread, 0);
    let [c] = containers.as_slice() else {
        panic!("{containers:?}");
    };
    assert_eq!(c.span.line, 3);
    // Cut after `HostsPath`: its last line read is the record's end.
    assert_eq!(c.end.line, 28);
    assert_eq!(c.line_of("ExitCode").map(|s| s.line), Some(20));
    assert_eq!(
        c.id.as_deref(),
        Some("c35e838c9646ec13d3120dc96b930068b8afd4f20b9481bbdbddf01cffb4c1ca")
    );
    assert_eq!(
        (c.status.as_deref(), c.oom_killed, c.exit_code, c.pid),
        (Some("exited"), Some(false), Some(137), Some(0))
    );
    assert_eq!(
        c.command,
        [
            "/docker/entrypoint.sh",
            "/bin/sh",
            "-c",
            "python -u webui.py --listen --port 7860 ${CLI_ARGS}"
        ]
    );
    assert_eq!(
        c.image.as_deref(),
        Some("sha256:5f11d9aad2138498dc34135e99907ee1eb6499f35d57db82e6f4b64acfa88feb")
    );
}

/// `HostConfig.DeviceRequests` as https://github.com/oceanprotocol/ocean-node/pull/1076
/// shows it (`docker container inspect`, the lines between `Restarting`
/// and `DeviceRequests` left out as the thread does; cut after the second
/// request's `DeviceIDs`): each request's GPU UUIDs are the container's
/// GPUs. The object's head is Docker's (`State`), so its record holds them.
#[test]
fn device_requests_name_the_containers_gpus() {
    let text = r#"[
    {
        "Id": "ef0a01ecaeeb718b2154ce2e6c27667850c106d3a1ae39e2b5a13d9af2debfeb",
        "Created": "2025-10-23T05:41:11.291201581Z",
        "Path": "python3",
        "Args": [
            "main.py"
        ],
        "State": {
            "Status": "running",
            "Running": true,
            "Paused": false,
            "Restarting": false
        },
        "HostConfig": {
            "DeviceRequests": [
                {
                    "Driver": "nvidia",
                    "Count": 0,
                    "DeviceIDs": [
                        "GPU-a5e31522-2217-8c10-bcd3-8915ea371f89"
                    ],
                    "Capabilities": [
                        [
                            "gpu"
                        ]
                    ],
                    "Options": null
                },
                {
                    "Driver": "nvidia",
                    "Count": 0,
                    "DeviceIDs": [
                        "GPU-c46eeff5-903b-8280-2f16-4fc3f6140d47"
                    ],
"#;
    let (containers, unread) = read(text);
    assert_eq!(unread, 0);
    let [c] = containers.as_slice() else {
        panic!("{containers:?}");
    };
    assert_eq!(c.command, ["python3", "main.py"]);
    assert_eq!(
        (c.status.as_deref(), c.running),
        (Some("running"), Some(true))
    );
    assert_eq!(
        c.gpus,
        [
            "GPU-a5e31522-2217-8c10-bcd3-8915ea371f89",
            "GPU-c46eeff5-903b-8280-2f16-4fc3f6140d47"
        ]
    );
}

/// Another tool's JSON with a `Status` makes no container (dcgmi's health
/// document, fixtures/formats/lines/dcgmi-health-json.txt's shape).
#[test]
fn json_without_dockers_keys_is_no_container() {
    let text = "{\n  \"Status\": \"ok\",\n  \"Pid\": 12,\n  \"ExitCode\": 0\n}\n";
    let (containers, _) = read(text);
    assert!(containers.is_empty(), "{containers:?}");
}
