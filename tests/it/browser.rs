//! The HTML report in a real browser: Debian's Chromium, headless, loads the
//! seed incident's page from disk with no console error and its script run
//! to the end, and takes a screenshot (its path is printed) for people to
//! look at. A page with a deliberate error proves the check can fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{check, incident, require_tool};

/// Where the pages and the screenshot go: cargo's scratch folder for
/// integration tests, under target/.
fn workdir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

struct Run {
    stdout: String,
    stderr: String,
}

/// Chromium as the machine notes say it runs here: headless, no sandbox (we
/// are root), no network chatter, a fresh profile each time.
fn chromium(page: &Path, extra: &[&str], tag: &str) -> Run {
    require_tool("chromium", "chromium");
    let profile = workdir().join(format!("profile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    Run {
        stdout: reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// What the page said on its console (`CONSOLE(…)` lines of Chromium's
/// log): an error thrown by a script, a blocked resource, anything logged.
fn console_messages(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn the_seed_report_loads_in_chromium_without_console_errors() {
    let dir = workdir();
    let page = dir.join("seed-report.html");
    std::fs::write(
        &page,
        check(&incident("2026-11-27-ct200-ghost-ddtree")).html,
    )
    .expect("write page");

    // A page with a script error: the check must see it, or it sees nothing.
    let broken = dir.join("broken.html");
    std::fs::write(
        &broken,
        "<!doctype html><html><body><p>x</p><script>no_such_function();</script></body></html>",
    )
    .unwrap();
    let control = chromium(&broken, &["--dump-dom"], "control");
    assert!(
        !console_messages(&control.stderr).is_empty(),
        "the console check saw no error on a broken page; chromium said:\n{}",
        control.stderr
    );

    let run = chromium(&page, &["--dump-dom"], "dom");
    let errors = console_messages(&run.stderr);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    // The script ran to its last line, and the page is all there.
    assert!(
        run.stdout.contains("data-ready=\"yes\""),
        "the page's script did not finish:\n{}",
        run.stderr
    );
    for part in [
        "GPU 0 is held by PID 20629",
        "id=\"gpus\"",
        "<svg class=\"lanes\"",
        "<mark>55286MiB</mark>",
        "id=\"remediation\"",
    ] {
        assert!(run.stdout.contains(part), "rendered page lacks {part}");
    }

    let shot = dir.join("seed-report.png");
    let _ = std::fs::remove_file(&shot);
    let run = chromium(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2200",
            "--hide-scrollbars",
        ],
        "shot",
    );
    let png = std::fs::read(&shot).unwrap_or_else(|_| panic!("no screenshot:\n{}", run.stderr));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 20_000, "suspiciously small screenshot");
    println!("screenshot of the seed report: {}", shot.display());
    eprintln!("screenshot of the seed report: {}", shot.display());
}
