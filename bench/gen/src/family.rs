//! Inputs made of one line family's real lines (`bench/families/<name>.tsv`,
//! written by `bench/families/extract.py` from `fixtures/`), in one of the
//! framings people keep logs in.
//!
//! The generator's own inputs (the rest of this program) are one mix of
//! hand-written wordings; a reader tuned to them can be slow on another mix.
//! Here every line is a line some program really printed: the family's
//! chatter, drawn at random, with its free-standing integers jittered (PIDs,
//! counters, token counts: never a time, a date, a version or a decimal, so
//! the line keeps its shape), framed as a journal (short-iso or JSON), a
//! Docker json-file log, a Kubernetes (CRI) log or the program's own raw
//! output. The family's incident blocks are buried once each, evenly spread
//! through the file; their rules and first lines go to `<out>.incidents`.

use std::fs::File;
use std::io::{BufWriter, Write};

use crate::{Clock, EPOCH, Entry, JournalWriter, Mode, Rng, json_escape};

/// How the lines are kept.
#[derive(Clone, Copy, PartialEq)]
pub enum Framing {
    /// The program's own output (`dmesg` for the kernel).
    Raw,
    /// `journalctl -o short-iso`.
    JournalIso,
    /// `journalctl -o json`.
    JournalJson,
    /// Docker's json-file driver: `{"log":…,"stream":…,"time":…}`.
    Docker,
    /// A Kubernetes node's container log (CRI): `<time> stderr F <line>`.
    Cri,
}

impl Framing {
    pub fn parse(s: &str) -> Option<Framing> {
        Some(match s {
            "raw" => Framing::Raw,
            "journal-iso" => Framing::JournalIso,
            "journal-json" => Framing::JournalJson,
            "docker" => Framing::Docker,
            "cri" => Framing::Cri,
            _ => return None,
        })
    }
}

/// A family's chatter and incidents: each a block of one or more lines.
struct Family {
    chatter: Vec<Vec<String>>,
    /// `weights[i]`: the sum of the weights of `chatter[..=i]`, to draw a
    /// block in proportion to how often its shape is printed.
    weights: Vec<u64>,
    incidents: Vec<(String, Vec<String>)>,
}

impl Family {
    fn draw(&self, rng: &mut Rng) -> &[String] {
        let total = *self.weights.last().expect("chatter");
        let at = rng.below(total);
        let i = self.weights.partition_point(|&w| w <= at);
        &self.chatter[i]
    }
}

fn read_family(path: &str) -> Family {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_family(path, &text)
}

fn parse_family(path: &str, text: &str) -> Family {
    let mut family = Family {
        chatter: Vec::new(),
        weights: Vec::new(),
        incidents: Vec::new(),
    };
    // Which list the last block went to, so that `+` lines follow it.
    let mut last_is_incident = false;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let mut cols = line.splitn(4, '\t');
        let (Some(kind), Some(weight), Some(_source), Some(text)) =
            (cols.next(), cols.next(), cols.next(), cols.next())
        else {
            panic!("{path}:{}: want kind<TAB>weight<TAB>source<TAB>line", n + 1);
        };
        let text = text.to_owned();
        match kind {
            "line" | "block" => {
                let weight: u64 = weight.parse().unwrap_or(1).max(1);
                let sum = family.weights.last().copied().unwrap_or(0) + weight;
                family.chatter.push(vec![text]);
                family.weights.push(sum);
                last_is_incident = false;
            }
            "+" if last_is_incident => family.incidents.last_mut().unwrap().1.push(text),
            "+" => family.chatter.last_mut().expect("a block first").push(text),
            k if k.starts_with("incident:") => {
                family
                    .incidents
                    .push((k["incident:".len()..].to_owned(), vec![text]));
                last_is_incident = true;
            }
            k => panic!("{path}:{}: unknown kind `{k}`", n + 1),
        }
    }
    assert!(!family.chatter.is_empty(), "{path}: no chatter");
    family
}

/// Who prints the family's lines in a journal: identifier, unit, command.
fn speaker(name: &str) -> (&'static str, &'static str, &'static str) {
    match name {
        "kernel" => ("kernel", "", ""),
        "systemd" => ("systemd", "init.scope", "/sbin/init"),
        "ollama" => ("ollama", "ollama.service", "/usr/local/bin/ollama serve"),
        "llamacpp" => (
            "llama-server",
            "llama-server.service",
            "/usr/local/bin/llama-server -m /models/model.gguf --port 8080",
        ),
        "tgi" => (
            "text-generation-launcher",
            "tgi.service",
            "text-generation-launcher --model-id /data/model --port 8080",
        ),
        "vllm" => (
            "vllm",
            "vllm.service",
            "/opt/vllm/bin/python3 -m vllm.entrypoints.openai.api_server --port 8000",
        ),
        _ => (
            "python3",
            "sglang.service",
            "/opt/sglang/bin/python3 -m sglang.launch_server --port 30000",
        ),
    }
}

/// Replaces each free-standing integer of two or more digits with another
/// of as many digits. "Free-standing": between spaces, `=`, brackets, commas, quotes or `#`,
/// so that `TP3`, `12:04:05`, `2026-11-01`, `0.53` and `v1.2.3` keep theirs;
/// nor a PID (`pid=5310`, `PID 20629`): a server prints under a few all day.
fn jitter(line: &str, rng: &mut Rng) -> String {
    let b = line.as_bytes();
    let opens = |c: u8| matches!(c, b' ' | b'=' | b'(' | b'[' | b',' | b'#' | b'"');
    let closes = |c: u8| matches!(c, b' ' | b',' | b')' | b']' | b'"' | b';');
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        // One digit is a GPU index, a rank, a count of errors: kept, so
        // that a table's zero error counts stay zero.
        let long = i - start > 1;
        // A PID stays: a server prints under a few PIDs all day.
        let pid = start >= 4
            && (b[start - 4..start].eq_ignore_ascii_case(b"pid=")
                || b[start - 4..start].eq_ignore_ascii_case(b"pid "));
        let before = long && !pid && (start == 0 || opens(b[start - 1]));
        let after = i == b.len() || closes(b[i]);
        if before && after {
            out.push_str(&line[copied..start]);
            for k in start..i {
                let d = if k == start && b[start] != b'0' {
                    1 + rng.below(9)
                } else {
                    rng.below(10)
                };
                out.push(char::from(b'0' + d as u8));
            }
            copied = i;
        }
    }
    out.push_str(&line[copied..]);
    out
}

/// `2026-11-01T00:00:00.123456789Z`, as Docker and the CRI write times.
fn rfc3339_nanos(clock: Clock) -> String {
    let (y, mo, d, h, mi, s, us) = clock.parts();
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}123Z")
}

struct Writer {
    journal: JournalWriter,
    framing: Framing,
    name: String,
    pid: u32,
}

impl Writer {
    fn write(&mut self, clock: Clock, message: &str) {
        let (ident, unit, cmdline) = speaker(&self.name);
        let line = match self.framing {
            Framing::JournalIso | Framing::JournalJson => {
                let pid = match self.name.as_str() {
                    "kernel" => None,
                    "systemd" => Some(1),
                    _ => Some(self.pid),
                };
                let entry = Entry {
                    ident,
                    pid,
                    unit,
                    comm: ident,
                    exe: cmdline.split(' ').next().unwrap_or(ident),
                    cmdline: cmdline.to_owned(),
                    transport: if self.name == "kernel" {
                        "kernel"
                    } else {
                        "stdout"
                    },
                    message: message.to_owned(),
                };
                self.journal.write(clock, &entry);
                return;
            }
            Framing::Raw if self.name == "kernel" => format!("{} {message}\n", clock.uptime()),
            Framing::Raw => format!("{message}\n"),
            Framing::Docker => format!(
                "{{\"log\":\"{}\\n\",\"stream\":\"stderr\",\"time\":\"{}\"}}\n",
                json_escape(message),
                rfc3339_nanos(clock)
            ),
            Framing::Cri => format!("{} stderr F {message}\n", rfc3339_nanos(clock)),
        };
        self.journal.bytes += line.len() as u64;
        self.journal.lines += 1;
        self.journal.out.write_all(line.as_bytes()).expect("write");
    }
}

/// Writes `mib` MiB of family `name` (read from `dir/<name>.tsv`) framed as
/// `framing` to `out`; returns the buried incidents' rules and first lines.
pub fn generate(
    dir: &str,
    name: &str,
    framing: Framing,
    mib: u64,
    out: &str,
    seed: u64,
) -> Vec<(String, u64)> {
    let family = read_family(&format!("{dir}/{name}.tsv"));
    let mut rng = Rng(seed | 1);
    let journal = JournalWriter {
        out: BufWriter::with_capacity(1 << 20, File::create(out).expect("create output")),
        mode: if framing == Framing::JournalJson {
            Mode::Json
        } else {
            Mode::ShortIso
        },
        bytes: 0,
        lines: 0,
        seqnum: 0,
        rng: Rng(seed ^ 0x5eed),
    };
    let mut w = Writer {
        journal,
        framing,
        name: name.to_owned(),
        pid: 20_000 + rng.below(40_000) as u32,
    };
    let target = mib << 20;
    // Each incident once, spread evenly: the same incident twice would be
    // one finding citing its first place only.
    let n = family.incidents.len() as u64;
    let marks: Vec<u64> = (1..=n).map(|i| target * i / (n + 1)).collect();
    let mut next_mark = 0;
    let mut buried = Vec::new();
    let mut clock = Clock {
        micros: EPOCH * 1_000_000,
    };
    while w.journal.bytes < target {
        if next_mark < marks.len() && w.journal.bytes >= marks[next_mark] {
            let (rule, block) = &family.incidents[next_mark];
            buried.push((rule.clone(), w.journal.lines + 1));
            for line in block {
                clock.tick(&mut rng, 5);
                w.write(clock, line);
            }
            next_mark += 1;
            continue;
        }
        let block = family.draw(&mut rng);
        // A server restarted now and then: a new PID, as in a real journal.
        if rng.below(50_000) == 0 {
            w.pid = 20_000 + rng.below(40_000) as u32;
        }
        clock.tick(&mut rng, 40);
        for line in block {
            let line = jitter(line, &mut rng);
            w.write(clock, &line);
        }
    }
    w.journal.out.flush().expect("flush");
    buried
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_changes_free_integers_only() {
        let mut rng = Rng(7);
        let line = "[2026-05-12 09:41:31 TP0] Decode batch. #running-req: 12, #token: 4303, gen throughput (token/s): 0.53, pid=5310 v1.2.3";
        let out = jitter(line, &mut rng);
        assert_eq!(out.len(), line.len());
        for keep in [
            "[2026-05-12 09:41:31 TP0]",
            "(token/s): 0.53",
            "v1.2.3",
            "pid=5310",
        ] {
            assert!(out.contains(keep), "{out}");
        }
        assert_ne!(out, line);
    }

    #[test]
    fn a_family_file_gives_weighted_chatter_blocks_and_incidents() {
        let text = "# comment\n\
line\t3\tsrc\tA\n\
block\t1\tsrc\tB1\n\
+\t\t\tB2\n\
incident:xid-ecc\t1\tsrc\tX1\n\
+\t\t\tX2\n";
        let family = parse_family("test", text);
        assert_eq!(
            family.chatter,
            vec![vec!["A".to_owned()], vec!["B1".into(), "B2".into()]]
        );
        assert_eq!(family.weights, vec![3, 4]);
        assert_eq!(
            family.incidents,
            vec![("xid-ecc".to_owned(), vec!["X1".into(), "X2".into()])]
        );
        // Drawn in proportion to the weights: A three times as often as B.
        let mut rng = Rng(11);
        let a = (0..4000)
            .filter(|_| family.draw(&mut rng)[0] == "A")
            .count();
        assert!((2700..3300).contains(&a), "{a}");
    }
}
