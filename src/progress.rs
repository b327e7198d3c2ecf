//! The progress bar run.rs draws on stderr while a long input is read and
//! analysed: terminal glue only, never part of the report. It appears only
//! on a terminal, only for inputs past [`LONG_INPUT_BYTES`], and only once
//! the work has taken longer than [`DELAY`], so short runs and pipes never
//! see it.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Inputs smaller than this are analysed too fast to need a bar.
pub const LONG_INPUT_BYTES: u64 = 16 * 1024 * 1024;
const DELAY: Duration = Duration::from_millis(300);
const TICK: Duration = Duration::from_millis(100);
const STEPS: [&str; 6] = [
    "reading",
    "parsing",
    "correlating",
    "diagnosing",
    "ordering the timeline",
    "writing the report",
];

pub struct Progress {
    state: Option<(Arc<Shared>, JoinHandle<()>)>,
}

struct Shared {
    step: AtomicUsize,
    done: AtomicBool,
    what: String,
    /// Bytes read so far and to read, as ingest reports them.
    read: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    /// A bar for `bytes` of input; inert unless stderr is a terminal and
    /// the input is long.
    pub fn start(bytes: u64) -> Progress {
        if bytes < LONG_INPUT_BYTES || !std::io::stderr().is_terminal() {
            return Progress { state: None };
        }
        let shared = Arc::new(Shared {
            step: AtomicUsize::new(0),
            done: AtomicBool::new(false),
            what: human_bytes(bytes),
            read: AtomicU64::new(0),
            total: AtomicU64::new(0),
        });
        let drawer = Arc::clone(&shared);
        let handle = std::thread::spawn(move || draw(&drawer));
        Progress {
            state: Some((shared, handle)),
        }
    }

    /// Moves to the step an analysis reports.
    pub fn stage(&self, stage: crate::Stage) {
        self.set(match stage {
            crate::Stage::Parse => 1,
            crate::Stage::Correlate => 2,
            crate::Stage::Diagnose => 3,
            crate::Stage::Timeline => 4,
        });
    }

    /// How far reading is: ingest streams each input once, so reading and
    /// parsing are one pass and this is its share done.
    pub fn bytes(&self, read: u64, total: u64) {
        if let Some((shared, _)) = &self.state {
            shared.read.store(read, Ordering::Relaxed);
            shared.total.store(total, Ordering::Relaxed);
        }
    }

    /// The last step: rendering.
    pub fn writing(&self) {
        self.set(5);
    }

    fn set(&self, step: usize) {
        if let Some((shared, _)) = &self.state {
            shared.step.store(step, Ordering::Relaxed);
        }
    }

    /// Clears the bar; the report is printed after this.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some((shared, handle)) = self.state.take() {
            shared.done.store(true, Ordering::Relaxed);
            let _ = handle.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

fn draw(shared: &Shared) {
    let start = Instant::now();
    let spinner = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let mut drawn = false;
    let mut tick = 0usize;
    while !shared.done.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        if start.elapsed() < DELAY {
            continue;
        }
        let step = shared.step.load(Ordering::Relaxed).min(STEPS.len() - 1);
        let cells = 20;
        let filled = step * cells / STEPS.len();
        let what = match shared.total.load(Ordering::Relaxed) {
            total if total > 0 && step <= 1 => format!(
                "{:.0}% of {}",
                shared.read.load(Ordering::Relaxed).min(total) as f64 * 100.0 / total as f64,
                shared.what
            ),
            _ => shared.what.clone(),
        };
        let line = format!(
            "\r\x1b[2K{} [{}{}] {}/{} {} {what} · {:.1}s",
            spinner[tick % spinner.len()],
            "#".repeat(filled),
            "-".repeat(cells - filled),
            step + 1,
            STEPS.len(),
            STEPS[step],
            start.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
        drawn = true;
        tick += 1;
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(b"\r\x1b[2K");
        let _ = err.flush();
    }
}

/// `79.5 MB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The size of the inputs on disk: files, and the files of folders (one
/// level of bundle folders deep is enough to tell long from short).
pub fn input_bytes(paths: &[std::path::PathBuf]) -> u64 {
    fn size(path: &std::path::Path, depth: u32) -> u64 {
        let Ok(meta) = std::fs::metadata(path) else {
            return 0;
        };
        if meta.is_file() {
            return meta.len();
        }
        if !meta.is_dir() || depth > 2 {
            return 0;
        }
        std::fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| size(&e.path(), depth + 1))
                    .sum()
            })
            .unwrap_or(0)
    }
    paths.iter().map(|p| size(p, 0)).sum()
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(79_467_000), "79.5 MB");
        assert_eq!(human_bytes(2_500_000_000), "2.5 GB");
    }
}
