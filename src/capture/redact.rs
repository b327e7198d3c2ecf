//! `capture --redact`: hostnames, IP addresses, user names (and so home
//! paths), tokens and API keys are replaced by masks, the same value always
//! by the same mask across every file of the bundle, so the analysis still
//! joins what it joined before. The mapping back is written outside the
//! bundle.
//!
//! Values are first learned from the whole capture (its facts, parsed with
//! the analyser's own parsers, and a few patterns), then replaced wherever
//! they occur as whole words. Masks keep each value's shape where a parser
//! needs it: an IPv4 address becomes one from the documentation ranges.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use serde::Serialize;

use crate::model::Facts;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Host,
    Ip,
    User,
    Token,
}

/// Accounts and names every host has or that name the software the analysis
/// reads (a service user called `sglang`): masking them hides nothing and
/// would blind the rules.
const KEEP_USERS: &[&str] = &[
    "root",
    "nobody",
    "daemon",
    "bin",
    "sys",
    "sync",
    "man",
    "mail",
    "proxy",
    "www-data",
    "backup",
    "messagebus",
    "syslog",
    "_apt",
    "sshd",
    "polkitd",
    "avahi",
    "colord",
    "dnsmasq",
    "nvidia-persistenced",
    "sglang",
    "vllm",
    "python",
    "python3",
    "ray",
    "triton",
    "ollama",
    "docker",
    "containerd",
    "kubelet",
    "nvidia",
    "cuda",
];
const KEEP_HOSTS: &[&str] = &["localhost", "localhost.localdomain"];
const KEEP_IPS: &[&str] = &["0.0.0.0", "255.255.255.255"];

static IPV4: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\b",
    )
    .expect("ipv4 regex")
});
static IPV6: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}").expect("ipv6 regex")
});
static HOME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"/(?:home|Users)/(?P<user>[A-Za-z_][A-Za-z0-9_.-]{0,31})").expect("home regex")
});
/// `alice@ct200:~$`, a shell prompt kept in a paste.
static PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?P<user>[a-z_][a-z0-9_-]{0,31})@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252}):\S*\s?[#$]")
        .expect("prompt regex")
});
/// `User=alice` in `systemctl show`.
static UNIT_USER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^User=(?P<user>\S+)$").expect("unit user regex"));

/// Secrets: the value group `v` is masked.
static TOKENS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // api_key='…', token: …, password=…
        r#"(?i)\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)\b(?:\\?['"])?\s*[=:]\s*(?:\\?['"])?(?P<v>[^\s'"\\,;)}\]]{6,})"#,
        // --api-key X, --hf-token=X, --wandb-key X, --db_password=X: any
        // flag whose last word is a key, token, secret or password
        r#"(?i)--(?:[a-z0-9]+[-_])*(?:key|token|secret|password|passwd)[=\s]+(?:\\?['"])?(?P<v>[^\s'"\\]{6,})"#,
        // curl -u bob:pw, --user bob:pw: the password after the user
        r#"(?:^|\s)(?:-u|--user)[=\s]+(?:\\?['"])?[^\s:'"\\]+:(?P<v>[^\s'"\\]+)"#,
        // https://user:pw@host/: credentials in a URL
        r#"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'"]+:(?P<v>[^\s@/'"]+)@"#,
        // Authorization: Bearer X
        r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9._~+/=-]{10,})",
        // HF_TOKEN=…, OPENAI_API_KEY=…
        r#"\b[A-Z][A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD)=(?:\\?['"])?(?P<v>[^\s'"\\]{6,})"#,
        // Shapes that are secrets wherever they stand.
        r"\b(?P<v>sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("token regex"))
    .collect()
});

/// Learned values and their masks.
#[derive(Debug, Default)]
pub struct Redactor {
    masks: BTreeMap<String, (Kind, String)>,
    /// Learning order, for the mapping file.
    order: Vec<String>,
    counts: BTreeMap<Kind, usize>,
    matcher: Option<AhoCorasick>,
    patterns: Vec<String>,
}

#[derive(Serialize)]
struct MappingEntry<'a> {
    kind: Kind,
    mask: &'a str,
    original: &'a str,
}

#[derive(Serialize)]
struct Mapping<'a> {
    warning: &'static str,
    masks: Vec<MappingEntry<'a>>,
}

impl Redactor {
    pub fn new() -> Redactor {
        Redactor::default()
    }

    fn mask_for(&mut self, kind: Kind, value: &str) -> String {
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let n = *n;
        match kind {
            Kind::Host => format!("host-{n}"),
            Kind::User => format!("user-{n}"),
            Kind::Token => format!("REDACTED-TOKEN-{n}"),
            // Addresses stay addresses, from the ranges kept for documentation.
            Kind::Ip if value.contains(':') => format!("2001:db8::{n:x}"),
            Kind::Ip => match n {
                1..=254 => format!("192.0.2.{n}"),
                255..=508 => format!("198.51.100.{}", n - 254),
                509..=762 => format!("203.0.113.{}", n - 508),
                _ => format!("ip-{n}"),
            },
        }
    }

    /// Remembers `value` as something to mask.
    pub fn learn(&mut self, kind: Kind, value: &str) {
        let value = value.trim();
        let keep = match kind {
            Kind::User => {
                value.len() < 3
                    || value.ends_with('+')
                    || value.starts_with("systemd-")
                    || KEEP_USERS.contains(&value)
            }
            Kind::Host => value.len() < 2 || KEEP_HOSTS.contains(&value),
            Kind::Ip => KEEP_IPS.contains(&value) || value.starts_with("127.") || value == "::1",
            Kind::Token => value.len() < 6,
        };
        if keep || self.masks.contains_key(value) {
            return;
        }
        let mask = self.mask_for(kind, value);
        if kind == Kind::Host {
            // `gpu7.lab.example` and `gpu7` are one host.
            if let Some((short, _)) = value.split_once('.') {
                if short.len() >= 2 && !self.masks.contains_key(short) {
                    self.masks.insert(short.to_owned(), (kind, mask.clone()));
                    self.order.push(short.to_owned());
                }
            }
        }
        self.masks.insert(value.to_owned(), (kind, mask));
        self.order.push(value.to_owned());
        self.matcher = None;
    }

    /// Learns the hosts and users the analyser's parsers found.
    pub fn learn_facts(&mut self, facts: &Facts) {
        for p in &facts.ps {
            if let Some(user) = &p.user {
                self.learn(Kind::User, user);
            }
        }
        for e in &facts.journal {
            if let Some(host) = &e.host {
                self.learn(Kind::Host, host);
            }
        }
    }

    /// Learns what the patterns find in `text`.
    pub fn learn_text(&mut self, text: &str) {
        for re in TOKENS.iter() {
            for c in re.captures_iter(text) {
                self.learn(Kind::Token, &c["v"]);
            }
        }
        for m in IPV4.find_iter(text) {
            if dotted_boundary(text, m.start(), m.end()) {
                self.learn(Kind::Ip, m.as_str());
            }
        }
        for m in IPV6.find_iter(text) {
            let v = m.as_str();
            // `0::/system.slice/…` (a cgroup line) parses as an address too:
            // a real one has at least two groups and four hex digits.
            let groups = v.split(':').filter(|g| !g.is_empty()).count();
            let digits = v.chars().filter(char::is_ascii_hexdigit).count();
            let is_v6 = v.parse::<std::net::Ipv6Addr>().is_ok()
                && (v.contains("::") || v.matches(':').count() == 7)
                && groups >= 2
                && digits >= 4;
            if is_v6 && word_boundary(text, m.start(), m.end()) {
                self.learn(Kind::Ip, v);
            }
        }
        for c in HOME.captures_iter(text) {
            self.learn(Kind::User, &c["user"]);
        }
        for c in UNIT_USER.captures_iter(text) {
            self.learn(Kind::User, &c["user"]);
        }
        for c in PROMPT.captures_iter(text) {
            self.learn(Kind::User, &c["user"]);
            self.learn(Kind::Host, &c["host"]);
        }
    }

    /// Call after learning, before [`Redactor::apply`].
    pub fn seal(&mut self) {
        // Longest first, so `ct200.lab` wins over `ct200`.
        let mut patterns: Vec<String> = self.masks.keys().cloned().collect();
        patterns.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        self.matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .ok();
        self.patterns = patterns;
    }

    /// `text` with every learned value masked where it stands as a word.
    pub fn apply(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for re in TOKENS.iter() {
            text = re
                .replace_all(&text, |c: &regex::Captures<'_>| {
                    let (all, v) = (c.get(0).expect("match"), c.name("v").expect("value"));
                    // An earlier pattern masked it already: keep its number.
                    if v.as_str().starts_with("REDACTED-TOKEN") {
                        return all.as_str().to_owned();
                    }
                    let mask = self
                        .masks
                        .get(v.as_str())
                        .map_or("REDACTED-TOKEN", |(_, m)| m.as_str());
                    format!(
                        "{}{mask}{}",
                        &all.as_str()[..v.start() - all.start()],
                        &all.as_str()[v.end() - all.start()..]
                    )
                })
                .into_owned();
        }
        let Some(matcher) = &self.matcher else {
            return text;
        };
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in matcher.find_iter(&text) {
            if !word_boundary(&text, m.start(), m.end()) {
                continue;
            }
            let original = &self.patterns[m.pattern().as_usize()];
            let Some((_, mask)) = self.masks.get(original) else {
                continue;
            };
            out.push_str(&text[last..m.start()]);
            out.push_str(mask);
            last = m.end();
        }
        out.push_str(&text[last..]);
        out
    }

    /// The private mapping from masks back to values, as JSON.
    pub fn mapping(&self) -> String {
        let masks = self
            .order
            .iter()
            .filter_map(|o| {
                let (kind, mask) = self.masks.get(o)?;
                Some(MappingEntry {
                    kind: *kind,
                    mask,
                    original: o,
                })
            })
            .collect();
        let mut text = serde_json::to_string_pretty(&Mapping {
            warning: "private: maps the masks of a redacted bundle back to the original values; never ship it with the bundle",
            masks,
        })
        .expect("mapping serialises");
        text.push('\n');
        text
    }

    /// The original values, for checks that none is left.
    pub fn originals(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Not in the middle of a longer word.
fn word_boundary(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(is_word) && !after.is_some_and(is_word)
}

/// An IPv4 address, not four numbers of a longer dotted version string.
fn dotted_boundary(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let mut after = text[end..].chars();
    let dotted_on = after.next() == Some('.') && after.next().is_some_and(|c| c.is_ascii_digit());
    word_boundary(text, start, end) && before != Some('.') && !dotted_on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(texts: &[&str]) -> (Vec<String>, Redactor) {
        let mut r = Redactor::new();
        r.learn(Kind::Host, "ct200.lab.example");
        for t in texts {
            r.learn_text(t);
        }
        r.seal();
        (texts.iter().map(|t| r.apply(t)).collect(), r)
    }

    #[test]
    fn the_same_value_gets_the_same_mask_everywhere() {
        let (out, r) = redact(&[
            "Nov 27 09:17:42 ct200 python3[20629]: INFO:     10.40.3.21:50944 - \"POST /v1\" 200",
            "alice@ct200:~$ ls /home/alice/models && ssh ct200.lab.example 10.40.3.21",
            "api_key='sk-abcdefghijklmnopqrstu' HF_TOKEN=hf_abcdefghijklmnopqrstuvwx --api-key s3cretvalue",
            "Authorization: Bearer abc.def.ghijklmnop fe80::1ff:fe23:4567:890a",
        ]);
        assert_eq!(
            out[0],
            "Nov 27 09:17:42 host-1 python3[20629]: INFO:     192.0.2.1:50944 - \"POST /v1\" 200"
        );
        assert_eq!(
            out[1],
            "user-1@host-1:~$ ls /home/user-1/models && ssh host-1 192.0.2.1"
        );
        assert_eq!(
            out[2],
            "api_key='REDACTED-TOKEN-1' HF_TOKEN=REDACTED-TOKEN-3 --api-key REDACTED-TOKEN-2"
        );
        assert_eq!(out[3], "Authorization: Bearer REDACTED-TOKEN-4 2001:db8::2");
        let mapping = r.mapping();
        for original in ["ct200.lab.example", "10.40.3.21", "alice", "s3cretvalue"] {
            assert!(mapping.contains(original), "{original} not in {mapping}");
        }
    }

    /// Secrets outside the first list of patterns (probe D15): any
    /// `--…-key` flag, curl's `-u user:pw`, a URL's password; a value two
    /// patterns match keeps its numbered mask.
    #[test]
    fn flags_curl_users_and_url_credentials_are_masked() {
        let (out, r) = redact(&[
            "python3 train.py --wandb-key 0123456789abcdef0123456789abcdef01234567 --hf_token=hfsecretvalue",
            "curl -u bob:supersecretpw https://x --user=carol:pw2 postgres://dbuser:pa55@db.internal:5432/x",
            "python3 serve.py --password=pa55w0rd --max-tokens 4096 --key-file /etc/k.pem",
        ]);
        for secret in [
            "0123456789abcdef0123456789abcdef01234567",
            "hfsecretvalue",
            "supersecretpw",
            "pw2",
            "pa55@",
            "pa55w0rd",
        ] {
            assert!(
                !out.iter().any(|o| o.contains(secret)),
                "{secret} left in {out:?}"
            );
        }
        assert!(out[2].contains("--password=REDACTED-TOKEN-"), "{}", out[2]);
        assert!(
            out[2].contains("--max-tokens 4096 --key-file /etc/k.pem"),
            "{}",
            out[2]
        );
        assert!(r.mapping().contains("supersecretpw"));
    }

    #[test]
    fn what_the_analysis_reads_is_kept() {
        let text = "0::/system.slice/x.service [2026-11-27 09:38:44] server_args=ServerArgs(host='0.0.0.0', api_key=None, port=30000) \
                    torch 2.8.0+cu128 c10::Error at 09:38:52 user@1000.service NVIDIA-SMI 570.172.08 127.0.0.1";
        let (out, _) = redact(&[text]);
        assert_eq!(out[0], text);
        let mut r = Redactor::new();
        for u in ["root", "systemd+", "sglang", "ab", "ddtree"] {
            r.learn(Kind::User, u);
        }
        assert_eq!(r.originals().collect::<Vec<_>>(), ["ddtree"]);
        r.seal();
        assert_eq!(
            r.apply("/opt/ddtree/serve.py ddtree-qwen.service ddtreex"),
            "/opt/user-1/serve.py user-1-qwen.service ddtreex"
        );
    }
}
