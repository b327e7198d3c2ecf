//! The JUnit XML report of a replay, for CI systems: one test case per
//! bundle, a failure carrying its diff.

use std::fmt::Write as _;

use super::{Outcome, Verdict};

/// Text and attribute values: XML escapes, and the control characters XML
/// 1.0 cannot hold at all replaced (log lines may contain them).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

pub fn junit(outcome: &Outcome) -> String {
    let tests = outcome.results.len();
    let failures = outcome
        .results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed(_)))
        .count();
    let errors = outcome
        .results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Error(_)))
        .count();
    let skipped = outcome.skipped();
    let time = outcome.duration.as_secs_f64();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\""
    );
    let _ = writeln!(out, "<testsuites name=\"rootcause replay\" {counts}>");
    let _ = writeln!(out, "  <testsuite name=\"rootcause replay\" {counts}>");
    for r in &outcome.results {
        let open = format!(
            "    <testcase classname=\"rootcause.replay\" name=\"{}\" time=\"{:.3}\"",
            escape(&r.case.name),
            r.duration.as_secs_f64()
        );
        match &r.verdict {
            Verdict::Passed | Verdict::Blessed(_) => {
                let _ = writeln!(out, "{open}/>");
            }
            Verdict::Skipped(why) => {
                let _ = writeln!(
                    out,
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                    escape(why)
                );
            }
            Verdict::Error(e) => {
                let _ = writeln!(
                    out,
                    "{open}>\n      <error message=\"{}\"/>\n    </testcase>",
                    escape(e)
                );
            }
            Verdict::Failed(diffs) => {
                let files: Vec<&str> = diffs.iter().map(|d| d.file.as_str()).collect();
                let body: String = diffs.iter().map(|d| d.diff.as_str()).collect();
                let _ = writeln!(
                    out,
                    "{open}>\n      <failure type=\"report-diff\" message=\"{} differ from the approved report\">{}</failure>\n    </testcase>",
                    escape(&files.join(", ")),
                    escape(&body)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_cannot_break_the_xml() {
        assert_eq!(
            escape("a<b & \"c\" \x1b[1m"),
            "a&lt;b &amp; &quot;c&quot; ?[1m"
        );
    }
}
