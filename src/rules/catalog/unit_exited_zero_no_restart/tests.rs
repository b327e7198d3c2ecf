//! `unit-exited-zero-no-restart` over the status blocks of real pastes.
use crate::source::{Source, SourceMap};

/// fixtures/real/451 (bottlerocket-core-kit PR #122): the status block
/// of nvidia-persistenced run under Type=simple.
const STATUS: &str = "\
○ nvidia-persistenced.service - NVIDIA Persistence Daemon
 Loaded: loaded (/x86_64-bottlerocket-linux-gnu/sys-root/usr/lib/systemd/system/nvidia-persistenced.service; enabled; preset: enabled)
 Active: inactive (dead) since Fri 2024-09-06 17:24:31 UTC; 1min 50s ago
   Duration: 2.102s
   Main PID: 1424 (code=exited, status=0/SUCCESS)
    CPU: 2.814s
";

/// The unit file as `systemctl cat` shows it: the header line is
/// assembled (systemctl's `# PATH` header); the settings are the PR's
/// `nvidia-persistenced.service.in` (bottlerocket-core-kit@62450eb),
/// with `Type=` as given.
fn unit_file(kind: &str) -> String {
    format!(
        "# /etc/systemd/system/nvidia-persistenced.service\n\
         [Unit]\n\
         Description=NVIDIA Persistence Daemon\n\
         After=load-tesla-kernel-modules.service load-open-gpu-kernel-modules.service\n\
         \n\
         [Service]\n\
         Type={kind}\n\
         ExecStart=__NVIDIA_BINDIR__/nvidia-persistenced --user nvidia --verbose\n\
         \n\
         [Install]\n\
         RequiredBy=preconfigured.target\n"
    )
}

fn finding(unit: Option<&str>) -> Option<crate::rules::Finding> {
    finding_of(STATUS, unit)
}

/// The rule's finding for status block `status`, with unit file `unit`
/// pasted beside it.
fn finding_of(status: &str, unit: Option<&str>) -> Option<crate::rules::Finding> {
    let mut sources = SourceMap::default();
    sources.add(Source::new("status", status.as_bytes()));
    if let Some(u) = unit {
        sources.add(Source::new("cat", u.as_bytes()));
    }
    crate::analyze(sources)
        .diagnosis
        .findings
        .into_iter()
        .find(|f| f.rule == super::META.id)
}

#[test]
fn a_pasted_type_settles_what_the_status_block_leaves_open() {
    let guessed = finding(None).expect("the status block alone");
    // Type=simple, as the reviewer asked and the author ran it: known,
    // cited, surer.
    let simple = finding(Some(&unit_file("simple"))).expect("Type=simple");
    assert!(simple.confidence > guessed.confidence, "{simple:?}");
    assert!(
        simple
            .conditions
            .iter()
            .any(|c| c.met && c.text.contains("Type=simple")),
        "{:?}",
        simple.conditions
    );
    // Type=forking (the merged unit): the parent's exit 0 is by design;
    // Type=oneshot: a job that finished.
    assert!(finding(Some(&unit_file("forking"))).is_none());
    assert!(finding(Some(&unit_file("oneshot"))).is_none());
}

/// The same status block a moment earlier, as `systemctl status` shows
/// it while systemd stops what the exited main process left (the
/// `deactivating (stop-sigterm)` of apache/iotdb's start script run
/// under `Type = simple`, batch X's 1594; no `Duration:` yet): the same
/// failure where the pasted unit file says Type=simple, nothing where
/// the file is missing (a stop in progress alone is no failure).
#[test]
fn a_stop_under_way_after_the_main_process_exited_zero_is_the_same_failure() {
    let stopping = STATUS
        .replace(
            "inactive (dead) since Fri 2024-09-06 17:24:31 UTC; 1min 50s ago",
            "deactivating (stop-sigterm) since Fri 2024-09-06 17:24:31 UTC; 1s ago",
        )
        .replace("   Duration: 2.102s\n", "");
    let find = |unit: Option<&str>| finding_of(&stopping, unit);
    let f = find(Some(&unit_file("simple"))).expect("Type=simple, stopping");
    assert!(
        f.headline.contains("deactivating (stop-sigterm)"),
        "{}",
        f.headline
    );
    assert!(find(None).is_none());
    assert!(find(Some(&unit_file("forking"))).is_none());
    // The file pasted without systemctl cat's header (`cat` of the file):
    // its Description= ties it to the status block's unit.
    let bare: String = unit_file("simple")
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(find(Some(&bare)).is_some());
}
