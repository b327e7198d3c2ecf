//! The prefilter: the literal anchors of every rule, matched at grep speed
//! over each line so that only lines that can matter are kept as messages.

use aho_corasick::AhoCorasick;

/// A set of literals, matched ASCII case-insensitively anywhere in a line.
#[derive(Debug, Clone)]
pub struct Anchors {
    matcher: Option<AhoCorasick>,
}

impl Anchors {
    pub fn new<I, S>(literals: I) -> Anchors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let literals: Vec<String> = literals
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let matcher = (!literals.is_empty()).then(|| {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&literals)
                .expect("anchors are plain literals")
        });
        Anchors { matcher }
    }

    /// Keeps no line: for callers that only want typed facts.
    pub fn none() -> Anchors {
        Anchors { matcher: None }
    }

    pub fn matches(&self, line: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_match_case_insensitively_anywhere() {
        let a = Anchors::new(["Xid", "address already in use"]);
        assert!(a.matches("kernel: NVRM: XID (PCI:0000:3b:00): 79"));
        assert!(a.matches("OSError: [Errno 98] Address already in use"));
        assert!(!a.matches("all good"));
        assert!(!Anchors::none().matches("Xid"));
    }
}
