//! The progress bar run.rs draws on stderr while a long input is read and
//! analysed: terminal glue only, never part of the report. It appears only
//! on a terminal, only for inputs past [`LONG_INPUT_BYTES`], and only once
//! the work has taken longer than [`DELAY`], so short runs and pipes never
//! see it.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use indicatif::{DecimalBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};

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

/// The bar, hidden until [`DELAY`] has passed; indicatif draws it (on its
/// own ticking thread) and clears it.
pub struct Progress {
    state: Option<State>,
}

struct State {
    bar: ProgressBar,
    started: Instant,
    /// Set once the bar is on stderr.
    shown: OnceLock<()>,
    what: String,
}

impl Progress {
    /// A bar for `bytes` of input; inert unless stderr is a terminal and
    /// the input is long.
    pub fn start(bytes: u64) -> Progress {
        if bytes < LONG_INPUT_BYTES || !std::io::stderr().is_terminal() {
            return Progress { state: None };
        }
        let style =
            ProgressStyle::with_template("{spinner} [{bar:20}] {pos}/{len} {msg} · {elapsed}")
                .expect("a valid template")
                .progress_chars("#-");
        let bar =
            ProgressBar::with_draw_target(Some(STEPS.len() as u64), ProgressDrawTarget::hidden())
                .with_style(style);
        let state = State {
            bar,
            started: Instant::now(),
            shown: OnceLock::new(),
            what: DecimalBytes(bytes).to_string(),
        };
        state.step(0);
        Progress { state: Some(state) }
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
        if let Some(state) = &self.state {
            state.show_when_due();
            if total > 0 && state.bar.position() <= 2 {
                let share = read.min(total) as f64 * 100.0 / total as f64;
                state
                    .bar
                    .set_message(format!("{} {share:.0}% of {}", STEPS[1], state.what));
            }
        }
    }

    /// The last step: rendering.
    pub fn writing(&self) {
        self.set(5);
    }

    fn set(&self, step: usize) {
        if let Some(state) = &self.state {
            state.step(step);
        }
    }

    /// Clears the bar; the report is printed after this.
    pub fn finish(self) {
        if let Some(state) = &self.state {
            state.bar.finish_and_clear();
        }
    }
}

impl State {
    fn step(&self, step: usize) {
        let step = step.min(STEPS.len() - 1);
        self.bar.set_position(step as u64 + 1);
        self.bar
            .set_message(format!("{} {}", STEPS[step], self.what));
        self.show_when_due();
    }

    /// Short runs never see a bar: it goes to stderr only once the work
    /// has taken longer than [`DELAY`].
    fn show_when_due(&self) {
        if self.shown.get().is_none() && self.started.elapsed() >= DELAY {
            self.shown.get_or_init(|| {
                self.bar.set_draw_target(ProgressDrawTarget::stderr());
                self.bar.enable_steady_tick(TICK);
            });
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            state.bar.finish_and_clear();
        }
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
    use super::Progress;

    #[test]
    fn a_short_input_has_no_bar() {
        let progress = Progress::start(1024);
        assert!(progress.state.is_none());
        progress.stage(crate::Stage::Parse);
        progress.finish();
    }
}
