//! Every action type, end to end: a synthetic finding that uses all of them
//! is rendered as text, Markdown, JSON and a script (snapshotted and
//! shellchecked), and its script is run in the sandbox (dry run, apply,
//! apply again). The guards of the action types no fixture exercises yet
//! (free-port, reset-gpu, wait-process-exit) are checked one by one.

use insta::{assert_json_snapshot, assert_snapshot};

use rootcause::model::{
    GpuUuid, Hostname, Pid, Port, ProcessName, ServerFlag, StartTime, UnitName,
};
use rootcause::render::{self, OutputFormat, RenderOptions, Report};
use rootcause::rules::{
    Action, ActionKind, Category, Diagnosis, ExpectedCmdline, Finding, GpuHold, GpuRef,
    ProcessIdentity, Safety, Severity,
};
use rootcause::source::{Source, SourceMap, Span};

use crate::sandbox::{Ghost, Sandbox, log};
use crate::scripts::{shellcheck, steps};

const U0: &str = "GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be";
const U1: &str = "GPU-9ad05367-4144-422e-e5a9-b50411e0d8dd";

fn unit(name: &str) -> UnitName {
    UnitName::new(name).unwrap()
}

fn process(pid: u32, cmdline: Option<&str>, start: Option<&str>) -> ProcessIdentity {
    ProcessIdentity {
        pid: Pid::new(pid).unwrap(),
        unit: None,
        cmdline: cmdline.map(|c| ExpectedCmdline::new(c).unwrap()),
        start: start.map(|s| StartTime::new(s).unwrap()),
        gpu: GpuHold::NotChecked,
    }
}

/// A process that must hold memory on GPU 0 when the script runs.
fn on_gpu0(mut p: ProcessIdentity) -> ProcessIdentity {
    p.gpu = GpuHold::On(GpuRef {
        index: 0,
        uuid: Some(GpuUuid::new(U0).unwrap()),
    });
    p
}

fn live(ghost: &Ghost) -> ProcessIdentity {
    process(ghost.pid, Some(&ghost.cmdline()), Some(&ghost.lstart()))
}

/// The three processes the steps act on: one to terminate, one expected
/// to exit by itself, one listening on port 30000.
struct Targets {
    term: ProcessIdentity,
    exits: ProcessIdentity,
    listener: ProcessIdentity,
}

fn every_action(t: Targets, span: Span) -> Vec<Action> {
    let gpu = |index, uuid: &str| GpuRef {
        index,
        uuid: Some(GpuUuid::new(uuid).unwrap()),
    };
    let step = |kind, safety, why: &str| Action::new(kind, safety, why).with_evidence([span]);
    let holder = Some((t.term.pid, t.term.gpu.clone()));
    vec![
        step(
            ActionKind::StopUnit { unit: unit("old.service"), holder },
            Safety::NeedsConfirmation,
            "old.service holds the GPUs",
        ),
        step(
            ActionKind::DisableUnit { unit: unit("old.service") },
            Safety::NeedsConfirmation,
            "old.service is a leftover",
        ),
        step(
            ActionKind::TerminateProcess { process: t.term, grace_secs: 2 },
            Safety::NeedsConfirmation,
            "the holder outlived its unit",
        ),
        step(
            ActionKind::WaitProcessExit { process: t.exits, timeout_secs: 10 },
            Safety::Safe,
            "the old server is shutting down",
        ),
        step(
            ActionKind::KillOrphans {
                unit: unit("old.service"),
                name: ProcessName::new("sglang::").unwrap(),
                grace_secs: 2,
            },
            Safety::NeedsConfirmation,
            "old.service ran with KillMode=process",
        ),
        step(
            ActionKind::FreePort {
                port: Port::new(30000).unwrap(),
                listener: Some(t.listener),
                grace_secs: 2,
            },
            Safety::NeedsConfirmation,
            "the new server needs port 30000",
        ),
        step(
            ActionKind::WaitGpuMemoryFree {
                gpus: vec![gpu(0, U0), gpu(1, U1)],
                max_used_mib: 1024,
                timeout_secs: 10,
            },
            Safety::Safe,
            "memory must be released",
        ),
        step(
            ActionKind::ResetGpu { gpu: 1, uuid: GpuUuid::new(U1).unwrap() },
            Safety::NeedsConfirmation,
            "GPU 1 reported Xid 79",
        ),
        step(
            ActionKind::RestartUnit { unit: unit("new.service") },
            Safety::Safe,
            "start the server again",
        ),
        step(
            ActionKind::VerifyUnitActive { unit: unit("new.service"), timeout_secs: 10 },
            Safety::Safe,
            "it must come up",
        ),
        step(
            ActionKind::SetServerFlag {
                unit: unit("new.service"),
                flag: ServerFlag::new("--mem-fraction-static", "0.80").unwrap(),
                current: ExpectedCmdline::new(
                    "/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 2 --mem-fraction-static 0.88 --port 30000",
                )
                .ok(),
            },
            Safety::Safe,
            "the KV cache left too little for activations",
        ),
        step(
            ActionKind::Drain { host: Hostname::new("ct200").ok() },
            Safety::Safe,
            "the GPU may fail again",
        ),
        step(
            ActionKind::Reboot { host: Hostname::new("ct200").ok() },
            Safety::Safe,
            "only a reboot recovers a GPU that fell off the bus",
        ),
        Action::advice("look at the GPU's Xid history", Some("journalctl -k --grep Xid")),
    ]
}

struct Rendered {
    text: String,
    markdown: String,
    json: String,
    script: String,
}

fn render_actions(actions: Vec<Action>) -> Rendered {
    let mut sources = SourceMap::new();
    let id = sources.add(Source::new("synthetic.log", b"a line the steps cite\n"));
    let mut f = Finding::new("synthetic", Category::Unknown, Severity::Critical);
    f.id = "F1".to_owned();
    f.title = "every action type".to_owned();
    f.headline = "A synthetic finding that uses every action type.".to_owned();
    f.evidence(
        Span {
            source: id,
            line: 1,
        },
        "the cited line",
    );
    f.actions = actions;
    let diagnosis = Diagnosis {
        findings: vec![f],
        root_cause: Some("F1".to_owned()),
        unknown_errors: Vec::new(),
    };
    let report = Report::new(&sources, &[], &diagnosis);
    let render = |format| {
        let mut out = Vec::new();
        render::render(&report, format, RenderOptions::default(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    Rendered {
        text: render(OutputFormat::Text),
        markdown: render(OutputFormat::Markdown),
        json: render(OutputFormat::Json),
        script: render::script(&report),
    }
}

fn span() -> Span {
    Span {
        source: rootcause::source::SourceId(0),
        line: 1,
    }
}

#[test]
fn every_action_type_renders_everywhere() {
    let targets = Targets {
        term: on_gpu0(process(
            4242,
            Some("python3 serve.py --port 8100"),
            Some("Tue Nov 24 14:02:17 2026"),
        )),
        exits: process(4343, None, Some("Tue Nov 24 14:02:18 2026")),
        listener: process(
            4444,
            Some("python3 -m http.server 30000"),
            Some("Tue Nov 24 14:02:19 2026"),
        ),
    };
    let out = render_actions(every_action(targets, span()));
    let json: serde_json::Value = serde_json::from_str(&out.json).unwrap();
    let types: Vec<&str> = json["findings"][0]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "stop-unit",
            "disable-unit",
            "terminate-process",
            "wait-process-exit",
            "kill-orphans",
            "free-port",
            "wait-gpu-memory-free",
            "reset-gpu",
            "restart-unit",
            "verify-unit-active",
            "set-server-flag",
            "drain",
            "reboot",
            "advice"
        ]
    );
    shellcheck(&out.script, "the synthetic finding");
    // Drain and reboot are never scripted, whatever a rule asks for.
    for line in steps(&out.script).lines().filter(|l| !l.starts_with('#')) {
        if line.contains("reboot") || line.contains("drain") {
            assert!(
                line.starts_with("advice ") || line.starts_with("begin_step "),
                "{line}"
            );
        }
    }
    assert_snapshot!("text", out.text);
    assert_snapshot!("markdown", out.markdown);
    assert_snapshot!("script", out.script);
    assert_json_snapshot!("json", json, {".tool.version" => "[version]"});
}

#[test]
fn every_action_type_runs_in_the_sandbox() {
    let sb = Sandbox::new("actions");
    let mut term = Ghost::sleeper();
    let mut exits = Ghost::spawn(None, false, 2);
    let mut listener = Ghost::sleeper();
    sb.unit("old.service", "active");
    sb.unit("new.service", "inactive");
    sb.gpus(&[(0, U0, 0), (1, U1, 0)]);
    // The process to end holds GPU 0 in old.service's cgroup; stopping the
    // unit ends it.
    sb.holds(&term, 0, 100);
    sb.owns("old.service", &term);
    sb.in_cgroup(&term, "old.service");
    sb.in_proc(&exits);
    sb.in_proc(&listener);
    sb.write("listeners", &format!("30000 {} sleep\n", listener.pid));
    let targets = Targets {
        term: on_gpu0(live(&term)),
        exits: live(&exits),
        listener: live(&listener),
    };
    let out = render_actions(every_action(targets, span()));
    let script = sb.save("fix.sh", &sb.with_fake_proc(&out.script));

    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert_eq!(sb.calls(), "", "a dry run calls nothing");
    assert!(term.alive() && listener.alive());

    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let calls = sb.calls();
    for call in [
        "systemctl stop -- old.service",
        "systemctl disable -- old.service",
        "ss -H -l -t -n -p sport = :30000",
        "nvidia-smi --gpu-reset -i 1",
        "systemctl restart -- new.service",
    ] {
        assert!(calls.lines().any(|c| c == call), "{call} not in:\n{calls}");
    }
    assert!(
        !calls.contains("reboot") && !calls.contains("drain"),
        "{calls}"
    );
    assert!(!term.alive() && !listener.alive() && !exits.alive());
    let out = log(&o);
    for line in [
        "advice (not executed): reboot ct200 once its workloads are drained",
        "  +ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 2 --mem-fraction-static 0.80 --port 30000",
        "no sglang::* process is left in the cgroup of old.service",
        "GPU 1 was reset",
        "new.service is active",
    ] {
        assert!(out.contains(line), "{line} missing from:\n{out}");
    }
    assert_eq!(sb.unit_state("old.service.enabled"), "disabled");

    // Again: everything is already done, and nothing fails.
    sb.clear_calls();
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(
        log(&o).contains("nothing listens on port 30000"),
        "{}",
        log(&o)
    );
    assert!(!sb.calls().contains("systemctl stop"), "{}", sb.calls());
}

fn one(kind: ActionKind) -> String {
    render_actions(vec![Action::new(kind, Safety::NeedsConfirmation, "")]).script
}

#[test]
fn free_port_never_touches_a_listener_it_cannot_name() {
    let sb = Sandbox::new("port");
    let mut expected = Ghost::sleeper();
    let mut stranger = Ghost::sleeper();
    sb.write("listeners", &format!("30000 {} python3\n", stranger.pid));
    let script = sb.save(
        "fix.sh",
        &one(ActionKind::FreePort {
            port: Port::new(30000).unwrap(),
            listener: Some(live(&expected)),
            grace_secs: 2,
        }),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(
        log(&o).contains(&format!(
            "port 30000 is held by PID {} (sleep 300), not by the process the report names: not touching it",
            stranger.pid
        )),
        "{}",
        log(&o)
    );
    assert!(stranger.alive() && expected.alive());

    // A listener whose owner ss cannot show is not guessed at either.
    sb.write("listeners", "30000 - ?\n");
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(log(&o).contains("its owner is not visible (run as root)"));

    // Without a named listener the step only reports who holds the port.
    let script = sb.save(
        "check.sh",
        &one(ActionKind::FreePort {
            port: Port::new(30000).unwrap(),
            listener: None,
            grace_secs: 2,
        }),
    );
    sb.write("listeners", &format!("30000 {} python3\n", stranger.pid));
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(stranger.alive());
}

#[test]
fn reset_gpu_refuses_a_gpu_in_use_or_with_another_uuid() {
    let sb = Sandbox::new("reset");
    let ghost = Ghost::sleeper();
    sb.gpus(&[(0, U0, 0), (1, U1, 0)]);
    sb.holds(&ghost, 1, 100);
    let script = sb.save(
        "fix.sh",
        &one(ActionKind::ResetGpu {
            gpu: 1,
            uuid: GpuUuid::new(U1).unwrap(),
        }),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(
        log(&o).contains(&format!("GPU 1 is in use by PID {}", ghost.pid)),
        "{}",
        log(&o)
    );
    assert!(!sb.calls().contains("--gpu-reset"));

    let script = sb.save(
        "other.sh",
        &one(ActionKind::ResetGpu {
            gpu: 0,
            uuid: GpuUuid::new(U1).unwrap(),
        }),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(log(&o).contains("GPU indices changed"), "{}", log(&o));
    assert!(!sb.calls().contains("--gpu-reset"));
}

#[test]
fn wait_process_exit_times_out_and_treats_a_reused_pid_as_exited() {
    let sb = Sandbox::new("exit");
    let mut ghost = Ghost::sleeper();
    let script = sb.save(
        "fix.sh",
        &one(ActionKind::WaitProcessExit {
            process: live(&ghost),
            timeout_secs: 1,
        }),
    );
    let o = sb.run(&script, &["--apply"]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(log(&o).contains(&format!("PID {} is still running after 1s", ghost.pid)));
    assert!(ghost.alive(), "waiting never signals");

    let reused = process(ghost.pid, None, Some("Tue Nov 24 14:02:17 2026"));
    let script = sb.save(
        "reused.sh",
        &one(ActionKind::WaitProcessExit {
            process: reused,
            timeout_secs: 1,
        }),
    );
    let o = sb.run(&script, &["--apply"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(
        log(&o).contains("the recorded one has exited"),
        "{}",
        log(&o)
    );
}
