//! A wording as its catalog row writes it, turned into a regex and the
//! literal the prefilter looks for.
//!
//! A template is the message as upstream prints it, with the variable parts
//! named in angle brackets: `<unit>: Failed with result '<result>'.`. Text
//! outside the brackets is literal (any run of spaces matches any run of
//! white space); a placeholder `<name>` captures what its name says
//! (`<pid>`, `<unit>`, `<n>` …, see [`KINDS`]), `<name:kind>` names a
//! capture of another kind, and `<*>` skips anything. Matching is ASCII
//! case-insensitive, like the prefilter, and unanchored: a wrapper's prefix
//! (a journal line, a logger's record) may stand in front.
//!
//! A template that begins with PID 1's unit prefix, `<unit>: `, also
//! matches its message alone at the start of a line: `journalctl -o cat`,
//! Cockpit and a copied message show `Failed with result 'oom-kill'.`
//! without the unit, and the message still says what happened (the unit
//! capture is then absent).

/// Placeholder kinds and the regex each matches. A placeholder's kind is
/// its name unless it says `<name:kind>`.
pub const KINDS: &[(&str, &str)] = &[
    // Numbers.
    ("n", r"[0-9]+"),
    ("num", r"-?[0-9]+(?:\.[0-9]+)?"),
    ("code", r"-?[0-9]+"),
    ("hex", r"(?:0x)?[0-9a-fA-F]+"),
    ("size", r"[0-9]+(?:\.[0-9]+)?\s?(?:[KMGT]i?B|bytes|B)"),
    // Processes and units.
    ("pid", r"[0-9]+"),
    (
        "unit",
        r"[0-9A-Za-z:_.@\\-]+\.(?:service|scope|socket|mount|timer|target|slice|path|device|swap|automount)",
    ),
    ("signal", r"SIG[A-Z0-9+]+|[0-9]+"),
    ("result", r"[a-z][a-z-]*"),
    ("comm", r"[^\s()]+(?:\s[^\s()]+)?"),
    // Devices: `0000:3b:00.0`, `3b:00.0`, `PCI:0000:3b:00`.
    (
        "bus",
        r"(?:PCI:)?(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?",
    ),
    ("uuid", r"GPU-[0-9a-fA-F-]{36}"),
    // Names and text.
    ("name", r"[A-Za-z_][0-9A-Za-z_]*"),
    ("word", r"\S+"),
    ("path", r"\S+"),
    ("msg", r".+?"),
    ("text", r".*?"),
    ("rest", r".*"),
];

/// A template compiled: the regex source and its longest literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub regex: String,
    /// The longest literal run of the template, the prefilter's anchor.
    pub anchor: String,
    /// The names of its captures, in order.
    pub captures: Vec<String>,
}

/// Why a template does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    Unclosed,
    UnknownKind(String),
    DuplicateName(String),
    /// No literal run of at least [`MIN_ANCHOR`] characters: the prefilter
    /// would keep every line.
    NoAnchor,
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::Unclosed => write!(f, "a `<` without its `>`"),
            TemplateError::UnknownKind(k) => write!(f, "unknown placeholder kind `{k}`"),
            TemplateError::DuplicateName(n) => write!(f, "placeholder `{n}` named twice"),
            TemplateError::NoAnchor => write!(
                f,
                "no literal of {MIN_ANCHOR} or more characters to anchor the prefilter"
            ),
        }
    }
}

/// PID 1's prefix of a unit's message, optional at the start of a line.
const UNIT_PREFIX: &str = "<unit>: ";

/// The shortest literal the prefilter may look for.
pub const MIN_ANCHOR: usize = 5;

/// Compiles a template (see the module doc).
pub fn compile(template: &str) -> Result<Compiled, TemplateError> {
    let mut regex = String::from("(?i)");
    let mut literals: Vec<String> = Vec::new();
    let mut literal = String::new();
    let mut captures: Vec<String> = Vec::new();
    let mut rest = template;
    if let Some(message) = rest.strip_prefix(UNIT_PREFIX) {
        let unit = placeholder("unit", &mut captures)?;
        regex.push_str(&format!(r"(?:{unit}: |^\s*)"));
        rest = message;
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('<') {
            let end = after.find('>').ok_or(TemplateError::Unclosed)?;
            let inner = &after[..end];
            if is_placeholder(inner) {
                flush(&mut literal, &mut literals, &mut regex);
                regex.push_str(&placeholder(inner, &mut captures)?);
                rest = &after[end + 1..];
                continue;
            }
        }
        let c = rest.chars().next().expect("not empty");
        literal.push(c);
        rest = &rest[c.len_utf8()..];
    }
    flush(&mut literal, &mut literals, &mut regex);
    let anchor = literals
        .iter()
        .map(|l| l.trim())
        .max_by_key(|l| l.chars().count())
        .unwrap_or("")
        .to_owned();
    if anchor.chars().count() < MIN_ANCHOR {
        return Err(TemplateError::NoAnchor);
    }
    Ok(Compiled {
        regex,
        anchor,
        captures,
    })
}

/// `<pid>`, `<code:n>`, `<*>`; not `<stdin>` or `<module>` in a message.
/// `<name:kind>` is always meant as one, so an unknown kind is an error.
fn is_placeholder(inner: &str) -> bool {
    if inner == "*" {
        return true;
    }
    let ident = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    match inner.split_once(':') {
        Some((name, kind)) => ident(name) && ident(kind),
        None => ident(inner) && KINDS.iter().any(|(k, _)| *k == inner),
    }
}

fn placeholder(inner: &str, captures: &mut Vec<String>) -> Result<String, TemplateError> {
    if inner == "*" {
        return Ok(".*?".to_owned());
    }
    let (name, kind) = inner.split_once(':').unwrap_or((inner, inner));
    let pattern = KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, p)| *p)
        .ok_or_else(|| TemplateError::UnknownKind(kind.to_owned()))?;
    if captures.iter().any(|c| c == name) {
        return Err(TemplateError::DuplicateName(name.to_owned()));
    }
    captures.push(name.to_owned());
    Ok(format!("(?P<{name}>{pattern})"))
}

/// Ends a literal run: escaped into the regex, a run of two or more
/// spaces loosened to any white space. The pieces between such runs are
/// the literals an anchor is chosen from: each appears verbatim in a line
/// the regex matches.
fn flush(literal: &mut String, literals: &mut Vec<String>, regex: &mut String) {
    if literal.is_empty() {
        return;
    }
    let mut rest = literal.as_str();
    while let Some(at) = rest.find("  ") {
        let (piece, after) = rest.split_at(at);
        regex.push_str(&regex::escape(piece));
        regex.push_str(r"\s+");
        literals.push(piece.to_owned());
        rest = after.trim_start_matches(' ');
    }
    regex.push_str(&regex::escape(rest));
    literals.push(rest.to_owned());
    literal.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, line: &str) -> Option<Vec<(String, String)>> {
        let c = compile(template).expect("compiles");
        let re = regex::Regex::new(&c.regex).expect("valid regex");
        let caps = re.captures(line)?;
        Some(
            c.captures
                .iter()
                .filter_map(|n| Some((n.clone(), caps.name(n)?.as_str().to_owned())))
                .collect(),
        )
    }

    #[test]
    fn placeholders_capture_and_literals_anchor() {
        let c = compile("<unit>: Failed with result '<result>'.").unwrap();
        assert_eq!(c.anchor, "Failed with result '");
        assert_eq!(c.captures, ["unit", "result"]);
        assert_eq!(
            matches(
                "<unit>: Failed with result '<result>'.",
                "Feb 24 11:16:32 adl systemd[1]: ollama.service: Failed with result 'oom-kill'."
            ),
            Some(vec![
                ("unit".into(), "ollama.service".into()),
                ("result".into(), "oom-kill".into())
            ])
        );
    }

    /// A paste without the journal's prefix or the unit (llama.cpp#20509):
    /// the message alone, at the start of a line, is read the same; in the
    /// middle of another line it is not.
    #[test]
    fn the_unit_prefix_is_optional_at_the_start_of_a_line() {
        let t = "<unit>: A process of this unit has been killed by the OOM killer.";
        assert_eq!(
            matches(
                t,
                "A process of this unit has been killed by the OOM killer."
            ),
            Some(vec![])
        );
        assert_eq!(
            matches(
                "<unit>: Failed with result '<result>'.",
                "  Failed with result 'oom-kill'."
            ),
            Some(vec![("result".into(), "oom-kill".into())])
        );
        assert_eq!(
            matches(
                "<unit>: Failed with result '<result>'.",
                "job: Failed with result 'oom-kill'."
            ),
            None
        );
    }

    #[test]
    fn named_kinds_skips_and_case() {
        let t = "THCudaCheck FAIL file=<path> line=<line:n> error=<code> : <msg:rest>";
        let caps = matches(
            t,
            "thcudacheck fail file=/x/THCTensorRandom.cu line=25 error=46 : all CUDA-capable devices are busy or unavailable",
        )
        .unwrap();
        assert_eq!(caps[1], ("line".into(), "25".into()));
        assert_eq!(caps[2], ("code".into(), "46".into()));
        assert_eq!(
            caps[3].1,
            "all CUDA-capable devices are busy or unavailable"
        );
        assert!(
            matches(
                "NVRM: Xid <*>: <code>,",
                "NVRM: Xid (PCI:0000:3b:00): 79, pid=1"
            )
            .is_some()
        );
    }

    #[test]
    fn two_spaces_match_any_white_space_and_one_is_exact() {
        assert!(matches("Main PID:  <pid> (", "   Main PID:\t 812 (sshd)").is_some());
        assert!(matches("Main PID: <pid> (", "   Main PID:\t 812 (sshd)").is_none());
        assert_eq!(
            compile("Main PID:  <pid> (sshd)").unwrap().anchor,
            "Main PID:"
        );
    }

    #[test]
    fn angle_brackets_that_are_no_placeholder_are_literal() {
        let c = compile("File \"<stdin>\", line <n>").unwrap();
        assert_eq!(c.captures, ["n"]);
        assert!(c.regex.contains("<stdin>"));
    }

    #[test]
    fn bad_templates_say_why() {
        assert_eq!(compile("<unit"), Err(TemplateError::Unclosed));
        assert_eq!(
            compile("<a:n> <a:n> long literal"),
            Err(TemplateError::DuplicateName("a".into()))
        );
        assert_eq!(compile("<n> ab <n2:n>"), Err(TemplateError::NoAnchor));
        assert_eq!(
            compile("abcdef <x:nope>"),
            Err(TemplateError::UnknownKind("nope".into()))
        );
    }
}
