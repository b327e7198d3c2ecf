//! The killed job as its report names it: the script its command runs
//! (`start_uvicorn.py` of `/opt/conda/envs/env/bin/python
//! /src/cortex/serve/start_uvicorn.py`), the module of `python -m …`, or
//! the program, as printed: the note on the kill's line then says what was
//! killed where a long line is cut on the screen.

use super::Killed;

/// Files a command runs through an interpreter.
const SCRIPT: &[&str] = &[".py", ".sh", ".js", ".rb", ".pl", ".jl", ".lua"];

/// `note` with its `job PID` naming the job's script or program.
pub(super) fn named(note: String, killed: Killed<'_>) -> String {
    let Killed::Shell(Some((pid, command))) = killed else {
        return note;
    };
    let Some(name) = script(command) else {
        return note;
    };
    let job = format!("job {pid}");
    if !note.contains(&job) || note.contains(name) {
        return note;
    }
    note.replacen(&job, &format!("job {pid} (`{name}`)"), 1)
}

/// The script the command runs, else the module after `-m`, else the
/// program's name; none for a launcher's unexpanded variables.
fn script(command: &str) -> Option<&str> {
    let words: Vec<&str> = command
        .split_whitespace()
        .map(|w| w.trim_matches('"'))
        .collect();
    fn base<'a>(w: &&'a str) -> &'a str {
        w.rsplit('/').next().unwrap_or(w)
    }
    let file = words
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('-') && SCRIPT.iter().any(|e| w.ends_with(e)));
    let module = words
        .iter()
        .position(|w| *w == "-m")
        .and_then(|i| words.get(i + 1));
    file.or(module)
        .or(words.first())
        .map(base)
        .filter(|b| !b.is_empty() && !b.starts_with('$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cortexlabs/cortex#1518's job report (`run.sh: line 89:    33 Killed
    /// /opt/conda/envs/env/bin/python /src/cortex/serve/start.py`), a
    /// module run by `python -m`, and a launcher's unexpanded variables.
    #[test]
    fn the_job_is_named_by_its_script_module_or_program() {
        assert_eq!(
            script("/opt/conda/envs/env/bin/python /src/cortex/serve/start.py"),
            Some("start.py")
        );
        assert_eq!(
            script("python3 -m llama.convert_llama --ckpt_dir x"),
            Some("llama.convert_llama")
        );
        assert_eq!(
            script("\"${python_cmd}\" \"${LAUNCH_SCRIPT}\" \"$@\""),
            None
        );
        let note = named(
            "the shell reports job 33 Killed".to_owned(),
            Killed::Shell(Some((
                33,
                "/opt/conda/envs/env/bin/python /src/cortex/serve/start.py",
            ))),
        );
        assert_eq!(note, "the shell reports job 33 (`start.py`) Killed");
    }
}
