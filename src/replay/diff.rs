//! Comparing a report with its approved version: what may differ without
//! failing (the rootcause version, line endings), and the readable unified
//! diff of what does.

use std::sync::LazyLock;

use regex::Regex;
use similar::TextDiff;

/// The version in a script's first comment: `(rootcause 0.1.0)`.
static SCRIPT_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(rootcause [^)\s]+\)").expect("script version regex"));

/// Reports as compared: a new rootcause version alone is no regression.
fn normalise(file: &str, text: &str) -> String {
    let text = text.replace("\r\n", "\n");
    if file.ends_with(".json") {
        if let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Some(v) = value.pointer_mut("/tool/version") {
                *v = serde_json::Value::String("[version]".to_owned());
            }
            if let Ok(mut pretty) = serde_json::to_string_pretty(&value) {
                pretty.push('\n');
                return pretty;
            }
        }
        return text;
    }
    if file.ends_with(".sh") {
        return SCRIPT_VERSION
            .replace(&text, "(rootcause [version])")
            .into_owned();
    }
    text
}

/// `None` when `actual` matches `approved`; otherwise the unified diff from
/// the approved report to the new one.
pub fn compare(file: &str, approved: &str, actual: &str) -> Option<String> {
    let (old, new) = (normalise(file, approved), normalise(file, actual));
    if old == new {
        return None;
    }
    let diff = TextDiff::from_lines(&old, &new);
    let mut text = diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(
            &format!("expected/{file}"),
            &format!("{file} (this rootcause)"),
        )
        .to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Some(text)
}

/// Red removals, green additions, cyan hunk headers.
pub fn paint(diff: &str, color: bool) -> String {
    if !color {
        return diff.to_owned();
    }
    diff.lines()
        .map(|l| {
            let code = if l.starts_with("+++") || l.starts_with("---") {
                "1"
            } else if l.starts_with('+') {
                "32"
            } else if l.starts_with('-') {
                "31"
            } else if l.starts_with("@@") {
                "36"
            } else {
                return format!("{l}\n");
            };
            format!("\x1b[{code}m{l}\x1b[0m\n")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_line_endings_are_not_differences() {
        let a = "{\n  \"tool\": {\n    \"name\": \"rootcause\",\n    \"version\": \"0.1.0\"\n  },\n  \"x\": 1\n}\n";
        let b = a.replace("0.1.0", "0.2.0");
        assert_eq!(compare("report.json", a, &b), None);
        assert_eq!(compare("report.md", "a\r\nb\r\n", "a\nb\n"), None);
        assert_eq!(
            compare(
                "fix.sh",
                "# script (rootcause 0.1.0)\n",
                "# script (rootcause 1.0.0-rc1)\n"
            ),
            None
        );
    }

    #[test]
    fn a_change_is_a_unified_diff_naming_both_sides() {
        let d = compare("report.md", "a\nb\nc\n", "a\nB\nc\n").expect("differs");
        assert_eq!(
            d,
            "--- expected/report.md\n+++ report.md (this rootcause)\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        let json = compare("report.json", "{\"x\": 1}", "{\"x\": 2}").expect("differs");
        assert!(json.contains("-  \"x\": 1\n+  \"x\": 2\n"), "{json}");
    }
}
