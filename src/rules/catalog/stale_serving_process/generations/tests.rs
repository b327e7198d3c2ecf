//! Copies of one server started at different times, from real listings.

use super::{elapsed, identity, is_server, lstart, port, stime};

#[test]
fn reads_the_start_and_elapsed_times() {
    assert!(lstart("Sun Aug 30 20:39:29 2026") > lstart("Sat Aug 29 19:43:09 2026"));
    assert_eq!(
        elapsed("06-22:50:50"),
        Some(6 * 86_400 + 22 * 3600 + 50 * 60 + 50)
    );
    assert_eq!(elapsed("27:50"), Some(27 * 60 + 50));
    assert_eq!(elapsed("4074589"), Some(4_074_589));
    assert!(stime("Oct26") < stime("Oct27"));
    assert!(stime("Oct27") < stime("02:30"));
    assert!(stime("2025") < stime("Jan02"));
}

#[test]
fn one_identity_across_runs() {
    let a = "colophon-write.py --no-open --port 7373";
    let b = ".../pytest-3/test_editing_the_text_after_me0/edit4/app/colophon-write.py --port 54843";
    assert_eq!(identity(a), identity(b));
    assert_eq!(port(a), Some(7373));
    assert!(is_server(a));
    let u = "/var/oc-venv/.venv/bin/uwsgi --http-socket :8081 --ini /opt/ocweb/uwsgi_oc.ini";
    assert_eq!(port(u), Some(8081));
    assert_eq!(port("python moto_server s3 -p15000"), Some(15000));
    // Two models are two servers.
    assert_ne!(
        identity("vllm serve meta-llama/Llama-3-8B --port 8000"),
        identity("vllm serve meta-llama/Llama-3-70B --port 8001")
    );
    assert!(!is_server("/lib/systemd/systemd --user"));
    assert!(!is_server("ssh -f -N -L 8000:localhost:8000 gpu1"));
}

fn pids(text: &str) -> Vec<Vec<u32>> {
    crate::testing::findings_of(super::META.id, text)
        .iter()
        .map(|f| f.entities.pids.iter().copied().collect())
        .collect()
}

/// termio-sh/termio#526, reduced to four of its seven rows (the author's
/// `<- live` mark kept): one daemon command, every copy PPID 1 under
/// launchd, started days apart; the newest is the live one.
const TERMIOD: &str = "$ ps -eo pid,ppid,lstart,etime,command | grep 'termiod serve'
 8026  1  Sun Aug 30 20:39:29 2026        27:50  .../termiod serve   <- live
39800  1  Sat Aug 29 19:43:09 2026  01-01:24:10  .../termiod serve
90183  1  Fri Aug 28 22:49:05 2026  01-22:18:14  .../termiod serve
98607  1  Sun Aug 23 22:16:29 2026  06-22:50:50  .../termiod serve
";

#[test]
fn copies_of_one_daemon_started_days_apart() {
    let f = crate::testing::findings_of(super::META.id, TERMIOD);
    assert_eq!(f.len(), 1, "{f:?}");
    for pid in [39800, 90183, 98607] {
        assert!(f[0].entities.pids.contains(&pid), "{pid}");
    }
    assert!(f[0].headline.contains("PID 8026 is the newest"));
    crate::testing::cites_line(&f[0], 5);
}

/// The same rows started within one minute: a pool started together, or
/// a listing that cannot order them; and without PPIDs nothing says the
/// copies are not one master's workers.
#[test]
fn copies_started_together_or_without_parents_are_no_finding() {
    let together = "$ ps -eo pid,ppid,lstart,command | grep 'termiod serve'
 8026  1  Sun Aug 30 20:39:29 2026  .../termiod serve
39800  1  Sun Aug 30 20:39:29 2026  .../termiod serve
";
    assert!(pids(together).is_empty());
    let no_parents = "$ ps -eo pid,lstart,command | grep 'termiod serve'
 8026  Sun Aug 30 20:39:29 2026  .../termiod serve
98607  Sun Aug 23 22:16:29 2026  .../termiod serve
";
    assert!(pids(no_parents).is_empty());
    // Under a live manager (not PPID 1) they are the manager's.
    let managed = "$ ps -eo pid,ppid,lstart,command | grep 'termiod serve'
 8026  700  Sun Aug 30 20:39:29 2026  .../termiod serve
98607  700  Sun Aug 23 22:16:29 2026  .../termiod serve
";
    assert!(pids(managed).is_empty());
}

/// ekansa/open-context-py#759, reduced to three of its masters with their
/// workers: each rerun of the start script left the previous uWSGI master
/// (PPID 1) on its port and started the next one a port higher.
const UWSGI: &str = "$ ps -aef | grep uwsgi
www-data  5371     1  0 Oct26 ?        00:00:13 /var/oc-venv/.venv/bin/uwsgi --http-socket :8081 --ini /opt/ocweb/uwsgi_oc.ini
www-data  5401  5371  0 Oct26 ?        00:00:01 /var/oc-venv/.venv/bin/uwsgi --http-socket :8081 --ini /opt/ocweb/uwsgi_oc.ini
www-data  9954     1  0 02:30 ?        00:00:04 /var/oc-venv/.venv/bin/uwsgi --http-socket :8087 --ini /opt/ocweb/uwsgi_oc.ini
www-data  9985  9954  0 02:30 ?        00:00:02 /var/oc-venv/.venv/bin/uwsgi --http-socket :8087 --ini /opt/ocweb/uwsgi_oc.ini
www-data 15380     1  0 06:13 ?        00:00:03 /var/oc-venv/.venv/bin/uwsgi --http-socket :8089 --ini /opt/ocweb/uwsgi_oc.ini
";

#[test]
fn masters_left_by_each_rerun_on_climbing_ports() {
    assert_eq!(pids(UWSGI), vec![vec![5371, 9954, 15380]]);
    // Ports that do not climb with the start times may be planned
    // instances: nothing.
    let planned = UWSGI.replace(":8081", ":8099").replace(":8087", ":8088");
    assert!(pids(&planned).is_empty());
    // One master and its worker respawned later: a pool, no instance.
    let pool = "$ ps -aef | grep uwsgi
www-data  5371     1  0 Oct26 ?        00:00:13 /var/oc-venv/.venv/bin/uwsgi --http-socket :8081 --ini /opt/ocweb/uwsgi_oc.ini
www-data  9985  5371  0 02:30 ?        00:00:02 /var/oc-venv/.venv/bin/uwsgi --http-socket :8081 --ini /opt/ocweb/uwsgi_oc.ini
";
    assert!(pids(pool).is_empty());
}

/// fchinaglia/colophon#49, reduced to three of its four rows: servers of
/// interrupted test runs, each on a port of its own, two from pytest's
/// per-run directories; the newest belongs to the running suite.
#[test]
fn servers_left_by_interrupted_test_runs() {
    let rows = "  PID   ELAPSED   COMMAND
 1835   3:03:47   colophon-write.py --no-open --port 7373
13146   1:13:29   .../pytest-3/test_editing_the_text_after_me0/edit4/app/colophon-write.py --port 54843
41829     27:46   /.../colophon-app/app/colophon-write.py --no-open --port 53323
";
    let f = crate::testing::findings_of(super::META.id, rows);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.pids.contains(&1835));
    assert!(f[0].entities.pids.contains(&13146));
    assert!(f[0].headline.contains("PID 41829 is the newest"));
    // Without a harness's directories, ports that do not climb: nothing.
    let plain = rows.replace(".../pytest-3/test_editing_the_text_after_me0/edit4", "/srv");
    assert!(pids(&plain).is_empty());
}

/// A container's listing: PID 1 is its start script, whose servers have
/// PPID 1 by birth.
#[test]
fn a_containers_entrypoint_children_are_no_finding() {
    let rows = TERMIOD.replace(
        "$ ps -eo pid,ppid,lstart,etime,command | grep 'termiod serve'\n",
        "$ ps -eo pid,ppid,lstart,etime,command\n    1  0  Sun Aug 23 22:16:00 2026  06-22:51:19  /bin/bash /start.sh\n",
    );
    assert!(pids(&rows).is_empty());
    let init = rows.replace("/bin/bash /start.sh", "/sbin/init splash");
    assert_eq!(pids(&init).len(), 1);
}
