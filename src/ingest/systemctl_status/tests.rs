//! Tests of the `systemctl status` reader: every variant, with the read
//! fields pinned.
use super::*;
use crate::source::SourceId;

fn run(text: &str) -> (Vec<UnitStatus>, u32) {
    let lines = Line::numbered(text);
    let mut facts = Facts::default();
    let unrecognized = parse(&lines, &mut facts);
    (facts.unit_statuses, unrecognized)
}

fn span(line: u32) -> Span {
    Span {
        source: SourceId(0),
        line,
    }
}

fn members(status: &UnitStatus) -> Vec<(u32, &str, u32)> {
    status
        .cgroup
        .iter()
        .map(|m| (m.pid, m.cmdline.as_str(), m.span.line))
        .collect()
}

#[test]
fn multi_unit_paste_with_failed_and_running_units() {
    let (units, unrecognized) = run("\
× sglang-k26.service - SGLang K2 server
     Loaded: loaded (/etc/systemd/system/sglang-k26.service; enabled; preset: enabled)
    Drop-In: /etc/systemd/system/sglang-k26.service.d
             └─override.conf
     Active: failed (Result: signal) since Fri 2026-11-27 09:38:53 UTC; 2min 19s ago
   Duration: 13.420s
    Process: 31544 ExecStart=/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 8 (code=killed, signal=KILL)
   Main PID: 31544 (code=killed, signal=KILL)
        CPU: 1min 12.402s

● ddtree-qwen.service - DDTree Qwen server
     Loaded: loaded (/etc/systemd/system/ddtree-qwen.service; enabled; preset: enabled)
     Active: active (running) since Thu 2026-11-26 22:51:33 UTC; 10h ago
       Docs: https://example.invalid/ddtree
             man:ddtree(8)
   Main PID: 20629 (python3)
      Tasks: 211 (limit: 1647636)
     Memory: 38.2G (peak: 40.1G)
        CPU: 1h 12min 3.114s
 Invocation: 0f1e2d3c4b5a69788796a5b4c3d2e1f0
     CGroup: /system.slice/ddtree-qwen.service
             ├─20629 /opt/ddtree/venv/bin/python3 serve.py --port 30000
             ├─20700 sglang::scheduler_TP0
             └─20701

Hint: Some lines were ellipsized, use -l to show in full.
Unit nope.service could not be found.");
    assert_eq!(unrecognized, 0);
    assert_eq!(units.len(), 2);

    let failed = &units[0];
    assert_eq!(failed.unit, "sglang-k26.service");
    assert_eq!(failed.description.as_deref(), Some("SGLang K2 server"));
    assert_eq!(failed.active_state.as_deref(), Some("failed"));
    assert_eq!(failed.sub_state.as_deref(), Some("failed"));
    assert_eq!(failed.result.as_deref(), Some("signal"));
    assert_eq!(failed.main_pid, Some(31544));
    assert_eq!(failed.main_comm, None);
    assert_eq!(
        failed.main_exit.as_deref(),
        Some("code=killed, signal=KILL")
    );
    assert!(failed.cgroup.is_empty());
    assert_eq!(
        (failed.span, failed.active_span, failed.main_pid_span),
        (span(1), Some(span(5)), Some(span(8)))
    );

    let running = &units[1];
    assert_eq!(running.unit, "ddtree-qwen.service");
    assert_eq!(
        (
            running.active_state.as_deref(),
            running.sub_state.as_deref()
        ),
        (Some("active"), Some("running"))
    );
    assert_eq!(running.result, None);
    assert_eq!(
        (running.main_pid, running.main_comm.as_deref()),
        (Some(20629), Some("python3"))
    );
    assert_eq!(
        (running.span, running.active_span, running.main_pid_span),
        (span(11), Some(span(13)), Some(span(16)))
    );
    assert_eq!(
        members(running),
        vec![
            (
                20629,
                "/opt/ddtree/venv/bin/python3 serve.py --port 30000",
                22
            ),
            (20700, "sglang::scheduler_TP0", 23),
            (20701, "", 24),
        ]
    );
}

#[test]
fn activating_between_restarts_247() {
    let (units, unrecognized) = run("\
● sglang.service - SGLang inference server
     Loaded: loaded (/etc/systemd/system/sglang.service; enabled; vendor preset: enabled)
     Active: activating (auto-restart) (Result: exit-code) since Sat 2024-06-01 12:01:37 UTC; 4s ago
    Process: 4242 ExecStart=/opt/sglang/start.sh (code=exited, status=137)
   Main PID: 4242 (code=exited, status=137)");
    assert_eq!(unrecognized, 0);
    let u = &units[0];
    assert_eq!(
        (
            u.active_state.as_deref(),
            u.sub_state.as_deref(),
            u.result.as_deref()
        ),
        (Some("activating"), Some("auto-restart"), Some("exit-code"))
    );
    assert_eq!(u.main_exit.as_deref(), Some("code=exited, status=137"));
}

#[test]
fn nested_ascii_tree_with_named_branches() {
    let (units, unrecognized) = run("\
* docker.service - Docker Application Container Engine
     Active: active (running) since Sat 2024-06-01 12:00:00 UTC; 1h ago
     CGroup: /system.slice/docker.service
             |-init.scope
             | `-900 /usr/bin/dockerd
             `-docker-0123abcd.scope
               |-4242 python3 -m sglang.launch_server
               | `-4318 sglang::scheduler_TP0
               `-4320 sglang::detokenizer
x stopped.service
     Active: inactive (dead)");
    assert_eq!(unrecognized, 0);
    assert_eq!(
        members(&units[0]),
        vec![
            (900, "/usr/bin/dockerd", 5),
            (4242, "python3 -m sglang.launch_server", 7),
            (4318, "sglang::scheduler_TP0", 8),
            (4320, "sglang::detokenizer", 9),
        ]
    );
    assert_eq!(units[1].unit, "stopped.service");
    assert_eq!(units[1].description, None);
    assert_eq!(units[1].sub_state.as_deref(), Some("dead"));
}

#[test]
fn a_block_pasted_without_its_bullet_takes_the_unit_from_its_paths() {
    // The paste starts mid-block, so its first line keeps its indentation.
    let (units, unrecognized) = run(concat!(
        "     Active: deactivating (stop-sigterm) since Sat 2024-06-01 12:05:00 UTC; 30s ago\n",
        "     CGroup: /system.slice/sglang.service\n",
        "             └─4318 sglang::scheduler_TP0\n",
    ));
    assert_eq!(unrecognized, 0);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].unit, "sglang.service");
    assert_eq!(units[0].span, span(1));
    assert_eq!(members(&units[0]), vec![(4318, "sglang::scheduler_TP0", 3)]);
}

#[test]
fn a_head_whose_bullet_was_lost_opens_its_block_only_above_loaded() {
    // https://github.com/christgau/wsdd/issues/101
    let (units, unrecognized) = run("\
wsdd.service - Web Services Dynamic Discovery host daemon
   Loaded: loaded (/etc/systemd/system/wsdd.service; enabled; vendor preset: enabled)
   Active: failed (Result: exit-code) since Wed 2021-04-21 02:40:06 UTC; 4s ago
  Process: 1182 ExecStart=/usr/bin/wsdd --shortlog -d flowdomain.com (code=exited, status=217/USER)
 Main PID: 1182 (code=exited, status=217/USER)
");
    assert_eq!(unrecognized, 0);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].unit, "wsdd.service");
    assert_eq!(
        units[0].description.as_deref(),
        Some("Web Services Dynamic Discovery host daemon")
    );
    assert_eq!(units[0].span, span(1));
    // Not above a Loaded: field, the same words are no head.
    let (_, unrecognized) = run("\
wsdd.service - Web Services Dynamic Discovery host daemon
   Active: failed (Result: exit-code) since Wed 2021-04-21 02:40:06 UTC; 4s ago
");
    assert_eq!(unrecognized, 1);
}

#[test]
fn how_long_a_unit_ran_and_has_been_in_its_state() {
    // https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/122
    let (units, unrecognized) = run("\
○ nvidia-persistenced.service - NVIDIA Persistence Daemon
     Loaded: loaded (/x86_64-bottlerocket-linux-gnu/sys-root/usr/lib/systemd/system/nvidia-persistenced.service; enabled; preset: enabled)
     Active: inactive (dead) since Fri 2024-09-06 17:24:31 UTC; 1min 50s ago
   Duration: 2.102s
   Main PID: 1424 (code=exited, status=0/SUCCESS)
        CPU: 2.814s
");
    assert_eq!(unrecognized, 0);
    let u = &units[0];
    assert_eq!(u.description.as_deref(), Some("NVIDIA Persistence Daemon"));
    assert_eq!(u.duration_secs, Some(2.102));
    assert_eq!(u.duration_span, Some(span(4)));
    assert_eq!(u.in_state_secs, Some(110.0));
    // The wall clock of `since`, weekday and zone dropped.
    assert_eq!(
        u.since.map(|t| t.to_string()).as_deref(),
        Some("2024-09-06 17:24:31")
    );
    assert_eq!(
        u.main_exit.as_deref(),
        Some("code=exited, status=0/SUCCESS")
    );
    assert!(!u.triggered);
    // https://github.com/gpustack/gpustack/issues/154
    let (units, _) = run("\
● gpustack.service - GPUStack Service
     Loaded: loaded (/etc/systemd/system/gpustack.service; enabled; vendor preset: enabled)
     Active: deactivating (stop-sigterm) since Wed 2024-08-07 12:11:53 GMT; 12s ago
   Main PID: 2982989 (gpustack)
");
    let u = &units[0];
    assert_eq!(
        (u.active_state.as_deref(), u.sub_state.as_deref()),
        (Some("deactivating"), Some("stop-sigterm"))
    );
    assert_eq!(u.in_state_secs, Some(12.0));
    assert_eq!(
        u.since.map(|t| t.to_string()).as_deref(),
        Some("2024-08-07 12:11:53")
    );
    assert_eq!(u.duration_secs, None);
}

#[test]
fn systemd_time_spans() {
    // As format_timespan() prints them (src/basic/time-util.c).
    for (text, secs) in [
        ("2.102s", 2.102),
        ("1min 50s", 110.0),
        ("2h 3min", 7380.0),
        ("3 days 4h", 273_600.0),
        ("1 weeks 2 days", 777_600.0),
        ("450ms", 0.45),
    ] {
        assert_eq!(span_secs(text), Some(secs), "{text}");
    }
    for text in ["", "soon", "12 parsecs", "1min x"] {
        assert_eq!(span_secs(text), None, "{text}");
    }
}

#[test]
fn garbage_is_counted_and_never_panics() {
    let (units, unrecognized) = run("\
● sglang.service - SGLang
   Main PID: 99999999999 (python3
     CGroup: /system.slice/sglang.service
             no tree glyph here
             └─ü
something else entirely
             └─4318 after the tree was closed
\u{1b}\u{0}\u{ff}");
    assert_eq!(unrecognized, 4);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].main_pid, None);
    assert_eq!(units[0].main_comm.as_deref(), Some("python3"));
    assert!(units[0].cgroup.is_empty());
}

/// systemd 229's block (https://github.com/NVIDIA/nvidia-docker/issues/500,
/// batch H's 791): each `Process:` line keeps the setting that ran it and
/// how it ended.
#[test]
fn process_lines_keep_their_setting_and_exit() {
    let (units, unrecognized) = run("\
● nvidia-docker.service - NVIDIA Docker plugin
   Loaded: loaded (/lib/systemd/system/nvidia-docker.service; enabled; vendor preset: enabled)
   Active: inactive (dead) (Result: exit-code) since Tue 2017-10-17 14:46:44 EDT; 1min 30s ago
  Process: 2190 ExecStartPost=/bin/sh -c /bin/echo unix://$SOCK_DIR/nvidia-docker.sock > $SPEC_FILE (code=exited, status=0/SUCCESS)
  Process: 2168 ExecStart=/usr/bin/nvidia-docker-plugin -s $SOCK_DIR (code=exited, status=1/FAILURE)
 Main PID: 2168 (code=exited, status=1/FAILURE)");
    assert_eq!(unrecognized, 0);
    let p: Vec<_> = units[0]
        .processes
        .iter()
        .map(|p| (p.pid, p.setting.as_deref(), p.exit.as_deref(), p.span.line))
        .collect();
    assert_eq!(
        p,
        [
            (
                2190,
                Some("ExecStartPost"),
                Some("code=exited, status=0/SUCCESS"),
                4
            ),
            (
                2168,
                Some("ExecStart"),
                Some("code=exited, status=1/FAILURE"),
                5
            ),
        ]
    );
    assert_eq!(
        units[0].main_exit.as_deref(),
        Some("code=exited, status=1/FAILURE")
    );
}

/// The drop-ins under `Drop-In:`: one per line (batch H's 790,
/// https://github.com/NVIDIA/nvidia-container-runtime/issues/16) or several on one
/// line, comma-separated (the second block is assembled, not copied, from
/// systemd@0086ef19 src/systemctl/systemctl-show.c print_status_info():
/// `printf("%s%s", df, last ? "\n" : ", ")` after the tree glyph).
#[test]
fn drop_in_files_are_read_with_their_lines() {
    let (units, unrecognized) = run("\
● docker.service - Docker Application Container Engine
   Loaded: loaded (/lib/systemd/system/docker.service; enabled; vendor preset: enabled)
  Drop-In: /etc/systemd/system/docker.service.d
           └─override.conf
   Active: inactive (dead) (Result: exit-code) since Mon 2018-03-05 17:55:44 CET; 17s ago
● ollama.service - Ollama Service
    Drop-In: /etc/systemd/system/ollama.service.d
             └─10-gpu.conf, override.conf");
    assert_eq!(unrecognized, 0);
    let d: Vec<_> = units
        .iter()
        .flat_map(|u| u.drop_ins.iter().map(|(f, s)| (f.as_str(), s.line)))
        .collect();
    assert_eq!(
        d,
        [
            ("override.conf", 4),
            ("10-gpu.conf", 8),
            ("override.conf", 8)
        ]
    );
}

/// A block whose lines the terminal re-wrapped (batch O's 1012,
/// https://github.com/canonical/snapd/pull/12776, its description): the unit's
/// name echoed before the bullet and `Loaded:` glued to the bullet line,
/// the `(…; enabled; vendor preset: enabled)` tail on the next line, fields
/// without their indentation, and a `Process:` line whose `(code=…)` tail
/// went on to the next line. Every line is read, and each field is its own.
#[test]
fn a_re_wrapped_block_is_read_field_by_field() {
    let (units, unrecognized) = run("\
snap.test-snapd-service-watchdog.direct-watchdog-ok.service × snap.test-snapd-service-watchdog.direct-watchdog-ok.service - Service for snap application test-snapd-service-watchdog.direct-watchdog-ok Loaded: loaded
(/etc/systemd/system/snap.test-snapd-service-watchdog.direct-watchdog-ok.service; enabled; vendor preset: enabled)
Active: failed (Result: watchdog) since Tue 2023-04-25 17:23:14 UTC; 2min 14s ago
Process: 6221 ExecStart=/usr/bin/snap run
test-snapd-service-watchdog.direct-watchdog-ok (code=killed, signal=ABRT)
   Main PID: 6221 (code=killed, signal=ABRT)
        CPU: 1.549s");
    assert_eq!(unrecognized, 0);
    assert_eq!(units.len(), 1);
    let u = &units[0];
    assert_eq!(
        u.unit,
        "snap.test-snapd-service-watchdog.direct-watchdog-ok.service"
    );
    assert_eq!(
        u.description.as_deref(),
        Some("Service for snap application test-snapd-service-watchdog.direct-watchdog-ok")
    );
    assert_eq!(u.result.as_deref(), Some("watchdog"));
    assert_eq!(u.main_pid, Some(6221));
    let p: Vec<_> = u
        .processes
        .iter()
        .map(|p| (p.pid, p.setting.as_deref(), p.exit.as_deref(), p.span.line))
        .collect();
    assert_eq!(
        p,
        [(6221, Some("ExecStart"), Some("code=killed, signal=ABRT"), 4)]
    );
    assert_eq!(u.end, Some(span(7)));
}

/// What the re-wrapped reading must not take: a bullet line echoing another
/// unit's name is no head, and a line after a complete field is no rest of
/// it.
#[test]
fn a_re_wrapped_reading_needs_its_own_shape() {
    let (units, unrecognized) = run("\
a.service × b.service - B
● c.service - C
     Loaded: loaded (/etc/systemd/system/c.service; enabled; preset: enabled)
(something else entirely)
Process: 12 ExecStart=/bin/c (code=exited, status=1/FAILURE)
x (code=killed, signal=KILL)");
    assert_eq!(unrecognized, 3);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].unit, "c.service");
    assert_eq!(units[0].processes.len(), 1);
    assert_eq!(
        units[0].processes[0].exit.as_deref(),
        Some("code=exited, status=1/FAILURE")
    );
}
