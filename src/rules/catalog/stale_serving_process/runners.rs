//! Two processes of one model in a serving product that runs one process
//! per loaded model (Ollama's runners): its scheduler tracks one runner per
//! model, so a second runner of the same model is an earlier load it lost
//! track of, still holding its memory. A process listing with command
//! lines shows it (fixtures/real/640: two `ollama runner --model <blob>`
//! started ten minutes apart, with different context sizes and ports).

use std::collections::{BTreeMap, BTreeSet};

use super::META;
use crate::correlate::Incident;
use crate::model::PsRecord;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding, Severity};

/// Serving commands that run one process per loaded model, and the flag
/// that names the model: Ollama's runner (`ollama runner --model <blob>`
/// since 0.4; `ollama_llama_server --model <blob>` before, its own binary;
/// ollama/ollama llm/server.go builds both command lines).
const ONE_PER_MODEL: &[(&str, &str)] = &[
    ("ollama runner", "--model"),
    ("ollama_llama_server", "--model"),
];

/// The runner kind and model of a command line, when it is such a runner.
fn runner_model(cmd: &str) -> Option<(&'static str, &str)> {
    let (kind, flag) = ONE_PER_MODEL.iter().find(|(k, _)| cmd.contains(k))?;
    let mut words = cmd.split_whitespace();
    while let Some(w) = words.next() {
        if w == *flag {
            return Some((kind, words.next()?));
        }
        if let Some(v) = w.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            return Some((kind, v));
        }
    }
    None
}

/// `lstart` as printed (`Mon May 19 14:17:44 2025`) as a key that sorts
/// in time; `None` for the other start columns (`14:17`, `May19`), which
/// do not order processes across days.
fn lstart_key(started: &str) -> Option<(u32, u32, u32, String)> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let w: Vec<&str> = started.split_whitespace().collect();
    let [_, month, day, time, year] = w[..] else {
        return None;
    };
    let month = MONTHS.iter().position(|m| *m == month)? as u32;
    let time = (time.len() == 8 && time.as_bytes()[2] == b':').then(|| time.to_owned())?;
    Some((year.parse().ok()?, month, day.parse().ok()?, time))
}

/// Findings for the models with more than one runner in the listings;
/// `named` are PIDs another part of the rule already reported.
pub(super) fn runners(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut groups: BTreeMap<(&str, &str), Vec<&PsRecord>> = BTreeMap::new();
    for p in &incident.facts.ps {
        if named.contains(&p.pid) {
            continue;
        }
        if let Some(key) = runner_model(&p.cmd) {
            let rows = groups.entry(key).or_default();
            // A paste that lists the processes twice: each PID once.
            if !rows.iter().any(|r| r.pid == p.pid) {
                rows.push(p);
            }
        }
    }
    groups
        .into_iter()
        .filter_map(|((kind, model), rows)| {
            // A child that kept its parent's command line is no copy.
            let copies: Vec<&PsRecord> = rows
                .iter()
                .copied()
                .filter(|r| !rows.iter().any(|o| Some(o.pid) == r.ppid))
                .collect();
            (copies.len() >= 2).then(|| finding(kind, model, copies))
        })
        .collect()
}

fn finding(kind: &str, model: &str, mut copies: Vec<&PsRecord>) -> Finding {
    // Oldest first when every row prints its full start time.
    let keys: Option<Vec<_>> = copies
        .iter()
        .map(|r| r.started.as_deref().and_then(lstart_key))
        .collect();
    let ordered = keys.is_some();
    if let Some(keys) = keys {
        let mut paired: Vec<_> = keys.into_iter().zip(copies).collect();
        paired.sort_by(|a, b| a.0.cmp(&b.0));
        copies = paired.into_iter().map(|(_, r)| r).collect();
    }
    let severity = if ordered {
        META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    let pids: Vec<String> = copies.iter().map(|r| r.pid.to_string()).collect();
    let newest = copies.last().map(|r| r.pid);
    super::cite_rows(&mut f, &copies, |r, when| {
        let role = if ordered && Some(r.pid) != newest {
            "an earlier load, left running"
        } else if ordered {
            "the latest load"
        } else {
            "one of them"
        };
        format!(
            "PID {} runs `{kind}` for the same model{when}: {role}",
            r.pid
        )
    });
    let model_name = model.rsplit('/').next().unwrap_or(model);
    f.condition(
        format!("{} `{kind}` processes load the same model", copies.len()),
        true,
    );
    f.condition(
        "the listing's start times tell the latest load from the earlier ones",
        ordered,
    );
    f.condition(
        "the server's own list of loaded models is compared (missing: `ollama ps`, and the runner's --port)",
        false,
    );
    f.title = format!(
        "{} `{kind}` processes for one model (PIDs {}): earlier loads left running",
        copies.len(),
        pids.join(", ")
    );
    f.headline = format!(
        "{} `{kind}` processes load the same model `{model_name}` (PIDs {}): the server runs one runner per model, so all but one are earlier loads it lost track of, still holding their memory{}.",
        copies.len(),
        pids.join(", "),
        match (ordered, newest) {
            (true, Some(n)) => format!(" (the start times make PID {n} the latest)"),
            _ => String::new(),
        }
    );
    f.chain
        .push("the current load gets only the GPU memory the earlier runners leave".to_owned());
    f.chain.push(format!(
        "{} runners of one model are alive at once",
        copies.len()
    ));
    f.chain
        .push("the server did not stop a runner when it reloaded the model".to_owned());
    f.explanation = "Ollama starts one runner process per loaded model and keeps track of it; when it reloads a model (another context size, a changed setting) it stops the old runner first. A second runner of the same model is a load the server lost track of: it keeps its VRAM, so the next load fits less on the GPU and falls back to the CPU.".to_owned();
    f.actions.push(Action::advice(
        "compare with the models the server says are loaded, and find which runner serves them (its --port)",
        Some(&format!(
            "ollama ps; ps -o pid,ppid,lstart,args -p {}",
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "stop the runners the server does not list (or restart the service), then check that their memory is freed",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "upgrade the server: a runner left behind on reload is a bug of the release",
        None,
    ));
    f.confidence = confidence(&f, 0.45, 0.8);
    f
}

#[cfg(test)]
mod tests {
    use super::{lstart_key, runner_model};
    use crate::testing::findings_of;

    /// fixtures/real/640 (ollama/ollama#10433): a detection script's
    /// headerless `…,lstart,args` rows, two runners of one blob.
    const REAL: &str = "\
[running processes]
   1051  181171    1051 Mon May 19 14:17:44 2025 /usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-5ff0abeeac1d2dbdd5455c0b49ba3b29a9ce3c1fb181b2eef2e948689d55d046 --ctx-size 49152 --batch-size 512 --n-gpu-layers 28 --threads 32 --parallel 2 --port 35375
   1051  182420    1051 Mon May 19 14:27:14 2025 /usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-5ff0abeeac1d2dbdd5455c0b49ba3b29a9ce3c1fb181b2eef2e948689d55d046 --ctx-size 24576 --batch-size 512 --n-gpu-layers 28 --threads 32 --parallel 1 --port 33451
";

    #[test]
    fn two_runners_of_one_model_are_an_earlier_load_left_running() {
        let f = findings_of(super::META.id, REAL);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [181171, 182420]
        );
        assert!(
            f[0].headline.contains("PID 182420 the latest"),
            "{}",
            f[0].headline
        );
        assert_eq!(f[0].severity, super::META.severity);
    }

    /// The variant: older Ollama's own runner binary in `ps -ef` (the
    /// grammar of ollama's llm/server.go command line; assembled, not
    /// copied), two rows of one blob without full start times: a warning;
    /// runners of two different models are none.
    #[test]
    fn the_older_runner_binary_and_different_models() {
        let row = |pid: u32, blob: &str, port: u32| {
            format!(
                "ollama    {pid}    1030  9 10:02 ?        00:01:10 /tmp/ollama123/runners/cuda_v11/ollama_llama_server --model /usr/share/ollama/.ollama/models/blobs/sha256-{blob} --ctx-size 2048 --batch-size 512 --embedding --n-gpu-layers 33 --parallel 1 --port {port}\n"
            )
        };
        let same = format!("{}{}", row(2211, "aaaa", 40001), row(2390, "aaaa", 40002));
        let f = findings_of(super::META.id, &same);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, crate::rules::Severity::Warning);
        let two = format!("{}{}", row(2211, "aaaa", 40001), row(2390, "bbbb", 40002));
        assert!(findings_of(super::META.id, &two).is_empty());
    }

    #[test]
    fn reads_the_model_and_the_start() {
        assert_eq!(
            runner_model("/usr/local/bin/ollama runner --ollama-engine --model=/m/x --port 1"),
            Some(("ollama runner", "/m/x"))
        );
        assert_eq!(runner_model("/usr/local/bin/ollama serve"), None);
        assert!(lstart_key("Mon May 19 14:17:44 2025") < lstart_key("Mon May 19 14:27:14 2025"));
        assert!(lstart_key("Sun Dec 31 23:59:59 2024") < lstart_key("Mon Jan  1 00:00:00 2025"));
        assert_eq!(lstart_key("14:17"), None);
    }
}
