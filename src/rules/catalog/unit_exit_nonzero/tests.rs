//! Tests of `unit-exit-nonzero` over real `systemctl status` blocks: the
//! exit read from the block, systemd's account of the failure, restarts
//! below the start limit and drop-ins.

use crate::rules::Category;

fn findings(text: &str) -> Vec<crate::rules::Finding> {
    crate::testing::findings_of(super::META.id, text)
}

/// NVIDIA/nvidia-container-runtime#16 (batch H's 790): dockerd started by
/// a drop-in exits 1; no `Main process exited` line, only the block's.
const DOCKER: &str = "● docker.service - Docker Application Container Engine
   Loaded: loaded (/lib/systemd/system/docker.service; enabled; vendor preset: enabled)
  Drop-In: /etc/systemd/system/docker.service.d
           └─override.conf
   Active: inactive (dead) (Result: exit-code) since Mon 2018-03-05 17:55:44 CET; 17s ago
     Docs: https://docs.docker.com
  Process: 25885 ExecStart=/usr/bin/dockerd --host=fd:// --add-runtime=nvidia=/usr/bin/nvidia-container-runtime (code=exited, status=1/FAILURE)
 Main PID: 25885 (code=exited, status=1/FAILURE)

Mar 05 17:55:44 svstation systemd[1]: Failed to start Docker Application Container Engine.
Mar 05 17:55:44 svstation systemd[1]: docker.service: Unit entered failed state.
Mar 05 17:55:44 svstation systemd[1]: docker.service: Failed with result 'exit-code'.
";

/// NVIDIA/nvidia-docker#500 (batch H's 791): the plugin exits 1, systemd
/// restarts it after the hold-off, below the start limit.
const PLUGIN: &str = "● nvidia-docker.service - NVIDIA Docker plugin
   Loaded: loaded (/lib/systemd/system/nvidia-docker.service; enabled; vendor preset: enabled)
   Active: inactive (dead) (Result: exit-code) since Tue 2017-10-17 14:46:44 EDT; 1min 30s ago
     Docs: https://github.com/NVIDIA/nvidia-docker/wiki
  Process: 2192 ExecStopPost=/bin/rm -f $SPEC_FILE (code=exited, status=0/SUCCESS)
  Process: 2190 ExecStartPost=/bin/sh -c /bin/echo unix://$SOCK_DIR/nvidia-docker.sock > $SPEC_FILE (code=exited, status=0/SUCCESS)
  Process: 2169 ExecStartPost=/bin/sh -c /bin/mkdir -p $( dirname $SPEC_FILE ) (code=exited, status=0/SUCCESS)
  Process: 2168 ExecStart=/usr/bin/nvidia-docker-plugin -s $SOCK_DIR (code=exited, status=1/FAILURE)
 Main PID: 2168 (code=exited, status=1/FAILURE)

Oct 17 14:46:43 machine systemd[1]: Failed to start NVIDIA Docker plugin.
Oct 17 14:46:43 machine systemd[1]: nvidia-docker.service: Unit entered failed state.
Oct 17 14:46:43 machine systemd[1]: nvidia-docker.service: Failed with result 'exit-code'.
Oct 17 14:46:44 machine systemd[1]: nvidia-docker.service: Service hold-off time over, scheduling restart.
Oct 17 14:46:44 machine systemd[1]: Stopped NVIDIA Docker plugin.
";

#[test]
fn a_failed_start_read_from_the_status_block_is_a_unit_failure() {
    let f = findings(DOCKER);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    assert!(f[0].entities.pids.contains(&25885));
    assert!(f[0].entities.units.contains("docker.service"));
    // The drop-in is cited (its file's line) and named.
    crate::testing::cites_line(&f[0], 4);
    assert!(f[0].headline.contains("override.conf"), "{}", f[0].headline);
}

#[test]
fn a_restart_below_the_start_limit_is_the_same_crash_loop() {
    let f = findings(PLUGIN);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    // The main process is the one that failed (the status-0 helpers are
    // listed as the unit's processes, not blamed).
    assert!(f[0].entities.pids.contains(&2168));
    assert!(
        f[0].headline
            .contains("nvidia-docker.service exited with status 1/FAILURE")
    );
    // The hold-off line is cited.
    crate::testing::cites_line(&f[0], 14);
    assert!(
        f[0].headline.contains("below its start limit"),
        "{}",
        f[0].headline
    );
}

/// systemctl prints no `Main PID:` when it would repeat the `Process:` line
/// of the same run (print_status_info(): "Let's not show this twice"): 791's
/// block cut to its ExecStart line, as such a paste shows it.
#[test]
fn the_exec_start_line_alone_gives_the_exit() {
    let cut: String = PLUGIN
        .lines()
        .filter(|l| !l.starts_with(" Main PID:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = findings(&cut);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.pids.contains(&2168));
    crate::testing::cites_line_saying(&f[0], 8, "PID 2168");
}

/// A unit running again shows no death: the block's exit is of a run the
/// unit has left behind only when it is not active (a status-0 block is no
/// failure either: 791's helpers alone).
#[test]
fn helpers_that_exited_zero_are_no_failure() {
    let helpers: String = PLUGIN.lines().take(7).map(|l| format!("{l}\n")).collect();
    assert!(findings(&helpers).is_empty());
}

/// ollama/ollama#9945 (fixtures/real/624): the service's last words and
/// systemd's two lines, the journal prefix cut up to and (on the exit
/// line) with the unit's name. The exit is the unit's, its last words the
/// bare line above, and the advice points at the unit's sandboxing. The
/// same grammar with another unit and another refusal (a variant, Go's
/// `op path: error` assembled: a read-only path under `ProtectSystem=`)
/// reads the same.
#[test]
fn a_cut_exit_line_and_bare_last_words_are_the_units() {
    let paste = "Error: mkdir /home/user: permission denied\n\
                 : Main process exited, code=exited, status=1/FAILURE\n\
                 : ollama.service: Failed with result 'exit-code'.\n";
    let variant = "Error: open /var/lib/ollama/models/manifests: read-only file system\n\
                   : Main process exited, code=exited, status=1/FAILURE\n\
                   : ollama-gpu1.service: Failed with result 'exit-code'.\n";
    for (text, unit, said) in [
        (
            paste,
            "ollama.service",
            "mkdir /home/user: permission denied",
        ),
        (variant, "ollama-gpu1.service", "read-only file system"),
    ] {
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::UnitCrashLoop);
        assert!(f[0].entities.units.contains(unit), "{:?}", f[0].entities);
        assert!(f[0].headline.contains(said), "{}", f[0].headline);
        crate::testing::cites_line(&f[0], 1);
        crate::testing::advises(&f[0], "ProtectHome=");
    }
}

/// anduril/jetpack-nixos#202 (batch I's 814): nvpmodel fails once at boot,
/// its sysfs node not there yet (`Error opening …/hwmon: 2`).
const NVPMODEL: &str = include_str!(
    "../../../../fixtures/rules/unit-exit-nonzero/pos-jetson-nvpmodel-sysfs-enoent/journal.txt"
);

#[test]
fn a_unit_that_fails_once_is_an_error_with_its_first_error_and_the_missing_path() {
    let a = crate::testing::analyze_paste(NVPMODEL);
    let report = a.report();
    let root = report.root_cause().expect("a root cause");
    assert_eq!(root.rule, super::META.id);
    assert_eq!(root.category, Category::UnitCrashLoop);
    assert!(root.entities.pids.contains(&886), "{root:?}");
    // The first error (line 2) is cited and named, beside the last words.
    crate::testing::cites_line(root, 2);
    assert!(
        root.headline
            .contains("Its first error: NVPM ERROR: Error opening"),
        "{}",
        root.headline
    );
    let advice: Vec<String> = root
        .actions
        .iter()
        .filter_map(|a| match &a.kind {
            crate::rules::ActionKind::Advice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        advice.iter().any(|t| t
            .contains("/sys/devices/platform/c250000.i2c/i2c-7/7-0040/hwmon was not there")
            && t.contains("After=")
            && t.contains("Restart=on-failure")),
        "{advice:?}"
    );
}

/// The same failure through a narrow terminal (assembled, not copied:
/// 814's systemd lines cut at 80 columns, as `systemctl status` shows
/// them): the exit status is read from what is left, the cut result by
/// its start.
#[test]
fn a_failure_cut_at_the_terminal_is_still_read() {
    let cut = "Jul 28 09:27:35 xavier-nx-emmc-quark-jp5 nvpmodel[886]: NVPM ERROR: failed to set\n\
Jul 28 09:27:35 xavier-nx-emmc-quark-jp5 systemd[1]: nvpmodel.service: Main process exited, code=exited, status=1/FAIL\n\
Jul 28 09:27:35 xavier-nx-emmc-quark-jp5 systemd[1]: nvpmodel.service: Failed with result 'exit-co\n";
    let f = findings(cut);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].title.contains("status 1/FAIL"), "{}", f[0].title);
    crate::testing::cites_line(&f[0], 3);
}

/// batch-k/885 (ollama/ollama#3195), `journalctl -u ollama --reverse`:
/// systemd's `Failed at step EXEC spawning /usr/bin/ollama: No such file
/// or directory`, the paste's first line and without the unit's prefix,
/// is joined to ollama.service's 203/EXEC six lines below it: the finding
/// cites it and names the path, the errno and what it means (a wrong
/// ExecStart= path).
#[test]
fn an_exec_failure_is_joined_to_its_units_203_exit_in_a_reversed_journal() {
    let reversed = "Failed at step EXEC spawning /usr/bin/ollama: No such file or directory
Started ollama.service.
Stopped ollama.service.
ollama.service holdoff time over, scheduling restart.
 ollama.service failed.
 Unit ollama.service entered failed state.
 ollama.service: main process exited, code=exited, status=203/EXEC
";
    let f = findings(reversed);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    crate::testing::cites_line(&f[0], 1);
    for said in ["/usr/bin/ollama", "No such file or directory", "ExecStart="] {
        assert!(f[0].headline.contains(said), "{said}: {}", f[0].headline);
    }
    crate::testing::advises(&f[0], "command -v ollama");
}

/// The next paste: the same older wording with `Permission denied` for a
/// vLLM binary (a variant, assembled from 885's lines and the journal of
/// nefelim4ag/systemd-swap#153): the file mode or a noexec mount, not a
/// wrong path. karmab/kcli#663, verbatim: the newer `Failed to locate
/// executable` line and `Failed at step EXEC` both name the unit; the
/// path and errno are named. Two units that exited 203 and a line that
/// names neither: it is joined to none (each unit's finding may still
/// quote it among the paste's bare lines, but names no path as the
/// cause).
#[test]
fn an_exec_failure_names_the_path_and_what_its_errno_means() {
    let denied = "Jun 30 11:11:55 gpu1 systemd[1]: Started vLLM server.
Jun 30 11:11:55 gpu1 systemd[3742]: Failed at step EXEC spawning /opt/vllm/bin/vllm: Permission denied
Jun 30 11:11:55 gpu1 systemd[1]: vllm.service: Main process exited, code=exited, status=203/EXEC
Jun 30 11:11:55 gpu1 systemd[1]: vllm.service: Failed with result 'exit-code'.
";
    let f = findings(denied);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].headline.contains("/opt/vllm/bin/vllm"),
        "{}",
        f[0].headline
    );
    assert!(f[0].headline.contains("noexec"), "{}", f[0].headline);
    crate::testing::advises(&f[0], "findmnt -T /opt/vllm/bin/vllm");
    let ksushy = "Apr 11 08:04:26 swx-forge08 systemd[1]: Started Ksushy emulator service.
Apr 11 08:04:26 swx-forge08 systemd[98303]: ksushy.service: Failed to locate executable /usr/bin/ksushy: No such file or directory
Apr 11 08:04:26 swx-forge08 systemd[98303]: ksushy.service: Failed at step EXEC spawning /usr/bin/ksushy: No such file or directory
Apr 11 08:04:26 swx-forge08 systemd[1]: ksushy.service: Main process exited, code=exited, status=203/EXEC
Apr 11 08:04:26 swx-forge08 systemd[1]: ksushy.service: Failed with result 'exit-code'.
";
    let f = findings(ksushy);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].headline
            .contains("could not execute /usr/bin/ksushy (No such file or directory)"),
        "{}",
        f[0].headline
    );
    let two = "Failed at step EXEC spawning /usr/bin/ollama: No such file or directory
ollama.service: main process exited, code=exited, status=203/EXEC
vllm.service: main process exited, code=exited, status=203/EXEC
";
    let f = findings(two);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter()
            .all(|f| !f.headline.contains("could not execute /usr/bin/ollama")),
        "{f:?}"
    );
}

/// NVIDIA/nvidia-persistenced#11 (batch M's 934): the forking daemon's
/// start fails on a GH200 run as a non-root user; the paste ends two lines
/// after systemd's `Control process exited`, before any `Failed with
/// result`.
const PERSISTENCED: &str = "\
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: Started (1405)
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: NUMA: Enabling NUMA memory Auto-Online due to GPU requirement
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: NUMA: Failed to open /sys/devices/system/memory/auto_online_blocks: Permission denied
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: NUMA: Failed to enable NUMA memory Auto-Online
Aug 27 21:35:25 ubuntu nvidia-persistenced[1400]: nvidia-persistenced failed to initialize. Check syslog for more details.
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: PID file unlocked.
Aug 27 21:35:25 ubuntu systemd[1]: nvidia-persistenced.service: Control process exited, code=exited, status=1/FAILURE
Aug 27 21:35:25 ubuntu nvidia-persistenced[1405]: PID file closed.
";

#[test]
fn a_forking_daemons_failed_control_process_is_a_start_failure() {
    let f = findings(PERSISTENCED);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    assert!(f[0].entities.units.contains("nvidia-persistenced.service"));
    // The daemon (1405) and the parent it forked from (1400).
    assert!(f[0].entities.pids.contains(&1405), "{f:?}");
    assert!(f[0].entities.pids.contains(&1400), "{f:?}");
    assert!(
        f[0].headline
            .contains("control process exited with status 1/FAILURE"),
        "{}",
        f[0].headline
    );
    // Its own lines before the exit are the reason, the refused path cited.
    assert!(f[0].evidence.iter().any(|e| e.span.line == 3), "{f:?}");
    assert!(f[0].evidence.iter().any(|e| e.span.line == 7), "{f:?}");

    // The unit started after the failed control process (an ExecReload=
    // or a retried ExecStartPre=): no start failure.
    let started = format!(
        "{PERSISTENCED}Aug 27 21:35:26 ubuntu systemd[1]: Started NVIDIA Persistence Daemon.\n"
    );
    assert!(findings(&started).is_empty());
    // A control process that succeeded is nothing.
    let ok = PERSISTENCED.replace("status=1/FAILURE", "status=0/SUCCESS");
    assert!(findings(&ok).is_empty());
}

/// https://github.com/akash-network/website/pull/632 (the Akash provider
/// FAQ's `systemctl status nvidia-fabricmanager`): the next such paste, the
/// Fabric Manager's start script cut at its control process's exit.
const FABRIC_MANAGER: &str = "\
Nov 05 13:55:26 node1 systemd[1]: Starting NVIDIA fabric manager service...
Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with driver version 550.120. Please update with matching NVIDIA driver package.
Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE
";

#[test]
fn the_fabric_managers_control_process_exit_is_a_start_failure() {
    let f = findings(FABRIC_MANAGER);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.units.contains("nvidia-fabricmanager.service"));
    assert!(f[0].evidence.iter().any(|e| e.span.line == 3), "{f:?}");
}

/// creativeprojects/resticprofile#552 (batch S 1192): systemd's child
/// could not enter WorkingDirectory= (`Failed at step CHDIR`, written by
/// another instance of the same template) and the unit exits 200/CHDIR: a
/// unit failure at the CHDIR step, both lines cited with the child's PID,
/// advising the directory, not the program's path.
#[test]
fn a_chdir_step_of_a_sibling_template_instance_is_the_units_failure() {
    let text = "Aug 23 00:00:00 MainComp (cprofile)[148247]: resticprofile-backup@profile-laptop.service: Changing to the requested working directory failed: No such file or directory
Aug 23 00:00:00 MainComp (cprofile)[148247]: resticprofile-backup@profile-laptop.service: Failed at step CHDIR spawning /home/username/bin/resticprofile: No such file or directory
Aug 23 00:00:00 MainComp systemd[1]: resticprofile-backup@profile-default.service: Main process exited, code=exited, status=200/CHDIR
";
    let f = findings(text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    assert_eq!(f[0].severity, crate::rules::Severity::Error);
    assert!(f[0].entities.pids.contains(&148247), "{:?}", f[0].entities);
    crate::testing::cites_line(&f[0], 1);
    crate::testing::cites_line(&f[0], 2);
    let actions = format!("{:?}", f[0].actions);
    assert!(actions.contains("WorkingDirectory="), "{actions}");
    assert!(!actions.contains("ExecStart="), "{actions}");
    // The exit alone is still a failure at systemd's own step: any status
    // of its table (209/STDOUT here) is one.
    let alone = findings(
        "Aug 23 00:00:00 MainComp systemd[1]: backup.service: Main process exited, code=exited, status=209/STDOUT\n",
    );
    assert_eq!(alone[0].category, Category::UnitCrashLoop);
    // A status number outside systemd's table is not.
    let other = findings(
        "Aug 23 00:00:00 MainComp systemd[1]: backup.service: Main process exited, code=exited, status=3/NOTIMPLEMENTED\n",
    );
    assert_ne!(other[0].category, Category::UnitCrashLoop);
}

/// A unit's journal whose only writer besides PID 1 is the unit's own
/// process under another name (batch U 1323, YunoHost's jupyterlab.service
/// run through `pipenv[420]:`, JupyterHub's `Failed to start proxy` and
/// `FileNotFoundError … 'configurable-http-proxy'` a line before the
/// exit): those are the unit's last words (the first, the hub's own error line, cited: the exception line is indented, a frame), and the exit is a failure with
/// a stated reason, naming PID 420. A second writer names nobody.
#[test]
fn the_only_writer_before_the_exit_is_the_units_own() {
    let hub = "Sep 08 09:21:53 pipenv[420]: [C 2020-09-08 09:21:53.924 JupyterHub app:2517] Failed to start proxy\n\
               Sep 08 09:21:53 pipenv[420]:     Traceback (most recent call last):\n\
               Sep 08 09:21:53 pipenv[420]:     FileNotFoundError: [Errno 2] No such file or directory: 'configurable-http-proxy': 'configurable-http-proxy'\n";
    let exit = "Sep 08 09:21:55 systemd[1]: jupyterlab.service: Main process exited, code=exited, status=1/FAILURE\n";
    let f = findings(&format!("{hub}{exit}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    assert!(f[0].entities.pids.contains(&420), "{:?}", f[0].entities);
    crate::testing::cites_line(&f[0], 1);
    let other = "Sep 08 09:21:54 cron[77]: (root) CMD (run-parts /etc/cron.hourly)\n";
    let f = findings(&format!("{hub}{other}{exit}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(!f[0].entities.pids.contains(&420), "{:?}", f[0].entities);
}

/// pendulum-project/ntpd-rs#354 (batch V's 1412): the forked child's two
/// lines alone, without PID 1's `status=217/USER` exit: the step is the
/// exit, and the lookup before it the reason.
#[test]
fn a_step_failure_alone_is_the_units_exit_with_the_steps_status() {
    let paste = "systemd[1965636]: ntpd-rs.service: Failed to determine user credentials: No such process\n\
        systemd[1965636]: ntpd-rs.service: Failed at step USER spawning /usr/local/bin/ntp-daemon: No such process\n";
    let f = findings(paste);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop, "{:?}", f[0]);
    assert!(
        f[0].entities.units.contains("ntpd-rs.service"),
        "{:?}",
        f[0]
    );
    assert!(f[0].title.contains("217/USER"), "{}", f[0].title);
    assert!(
        f[0].evidence.iter().any(|e| e.span.line == 1),
        "the credentials line is cited: {:?}",
        f[0].evidence
    );
}

/// traccar/traccar#4121: `systemctl restart traccar`, the journal in order
/// (the issue quotes it newest first): the JVM exits 143 on the restart's
/// SIGTERM. The next run's own exit, with no stop before it, is a failure.
const RESTART: &str = "Oct 24 06:17:09 pinnacle systemd[1]: Stopping traccar...
Oct 24 06:17:10 pinnacle systemd[1]: traccar.service: Main process exited, code=exited, status=143/n/a
Oct 24 06:17:10 pinnacle systemd[1]: traccar.service: Failed with result 'exit-code'.
Oct 24 06:17:10 pinnacle systemd[1]: Stopped traccar.
Oct 24 06:17:10 pinnacle systemd[1]: Started traccar.
Oct 24 06:19:41 pinnacle systemd[1]: traccar.service: Main process exited, code=exited, status=1/FAILURE
Oct 24 06:19:41 pinnacle systemd[1]: traccar.service: Failed with result 'exit-code'.
";

#[test]
fn an_exit_answering_a_requested_stop_is_information_and_a_later_one_is_not() {
    let stop_only: String = RESTART.lines().take(4).map(|l| format!("{l}\n")).collect();
    let f = findings(&stop_only);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, crate::rules::Severity::Info);
    assert_eq!(f[0].category, Category::Unknown);
    assert!(f[0].title.contains("when it was stopped"), "{}", f[0].title);
    assert!(f[0].evidence.iter().any(|e| e.span.line == 1), "{f:?}");
    assert!(
        f[0].actions
            .iter()
            .any(|a| a.describe().contains("SuccessExitStatus=143")),
        "{f:?}"
    );
    // The run after the restart exits by itself: its failure stands.
    let f = findings(RESTART);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, crate::rules::Severity::Error);
    assert_eq!(f[0].category, Category::UnitCrashLoop);
}

/// vllm-project/vllm#12474 (a reduction of batch AA 1906's lines): the
/// unit's main process (`bash[367371]`, the only writer) raises, then exits
/// 1 with no `Failed with result` line. Its own exception is its stated
/// reason: a unit failure. The same exception by another writer beside it
/// is nobody's: the exit stays the generic finding.
#[test]
fn the_units_own_exception_before_the_exit_is_a_unit_failure() {
    let raised = "Jan 28 10:40:07 localhost bash[367371]: RuntimeError: Engine process failed to start. See stack trace for the root cause.\n";
    let exit = "Jan 28 10:40:08 localhost systemd[1]: vllm3.service: Main process exited, code=exited, status=1/FAILURE\n";
    let f = findings(&format!("{raised}{exit}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop, "{:?}", f[0]);
    assert!(f[0].entities.pids.contains(&367371), "{:?}", f[0].entities);
    assert!(f[0].headline.contains("RuntimeError"), "{}", f[0].headline);
    // The exit's line is underlined at the status as systemd printed it.
    let marked: Vec<_> = f[0]
        .evidence
        .iter()
        .filter_map(|e| e.highlight.clone())
        .collect();
    assert!(
        marked.contains(&"status=1/FAILURE".to_owned()),
        "{marked:?}"
    );
    let other = "Jan 28 10:40:07 localhost cron[77]: (root) CMD (run-parts /etc/cron.hourly)\n";
    let f = findings(&format!("{raised}{other}{exit}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::Unknown, "{:?}", f[0]);
}

/// pulp/pulp_installer#868: Ansible's YAML callback, systemctl's answer
/// alone (`Job for pulpcore.service failed because the control process
/// exited with error code.`); and fgci-org/ansible-role-cuda#20's comment
/// (a reduction of batch AA 1903's first line): the host on the same line
/// is named. A unit shown running after the answer, or a job that failed
/// for another result, is not this finding.
#[test]
fn systemctls_answer_alone_is_the_units_failure_at_start() {
    let f = findings(include_str!(
        "../../../../fixtures/rules/unit-exit-nonzero/pos-ansible-job-failed-no-journal/ansible.txt"
    ));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop);
    assert!(
        f[0].entities.units.contains("pulpcore.service"),
        "{:?}",
        f[0]
    );
    crate::testing::cites_line(&f[0], 8);
    let one = r#"fatal: [ubuntu-xenial-01]: FAILED! => {"changed": false, "msg": "Unable to start service nvidia-persistenced: Job for nvidia-persistenced.service failed because the control process exited with error code. See \"systemctl status nvidia-persistenced.service\" and \"journalctl -xe\" for details.\n"}
"#;
    let f = findings(one);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].headline.contains("on ubuntu-xenial-01"),
        "{}",
        f[0].headline
    );
    assert!(
        f[0].headline
            .contains("control process exited with error code"),
        "{}",
        f[0].headline
    );
    let later = "Dec 04 14:07:00 host systemd[1]: Started pulpcore.service - Pulp Content App.\n";
    let text =
        "Job for pulpcore.service failed because the control process exited with error code.\n";
    assert!(findings(&format!("{text}{later}")).is_empty());
    let timeout = "Job for ping-instances.service failed because a timeout was exceeded.\n";
    assert!(findings(timeout).is_empty());
}

/// ibuildthecloud/systemd-docker#1: a Go program's panic and the top of
/// its goroutine dump, verbatim, then PID 1's exit line (assembled: the
/// thread shows the dump, not the exit; the line as systemd prints it,
/// status 2 being Go's exit status on a panic). The first frame is the
/// runtime's own (`runtime.panic`): the crash is placed at the program's
/// first frame, main.lookupNamedContainer at main.go:159.
#[test]
fn a_goroutine_dump_places_the_crash_past_the_runtimes_frames() {
    let text = "Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: goroutine 16 [running]:
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: runtime.panic(0x6c7940, 0x89ef53)
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: /usr/local/go/src/pkg/runtime/panic.c:279 +0xf5
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: main.lookupNamedContainer(0xc208048460, 0x0, 0x0)
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: /home/darren/src/systemd-docker/main.go:159 +0x11e
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: main.runContainer(0xc208048460, 0x0, 0x0)
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd-docker[639]: /home/darren/src/systemd-docker/main.go:231 +0x46
Aug 19 17:03:59 ip-10-236-146-73.ec2.internal systemd[1]: systemd-docker.service: Main process exited, code=exited, status=2/INVALIDARGUMENT
";
    let f = findings(text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::UnitCrashLoop, "{:?}", f[0]);
    // The place past the runtime's frames is cited, with its function.
    // (The runtime's own frame says `panic`, so it is quoted as the last
    // words; the place stands beside them.)
    let notes: Vec<&str> = f[0].evidence.iter().map(|e| e.note.as_str()).collect();
    assert!(
        notes.contains(&"where it crashed: /home/darren/src/systemd-docker/main.go:159"),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"the first frame of its own code: main.lookupNamedContainer"),
        "{notes:?}"
    );
    crate::testing::cites_line(&f[0], 1);
    crate::testing::cites_line(&f[0], 5);
}
