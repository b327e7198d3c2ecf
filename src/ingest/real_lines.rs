//! For tests: every line of the real incidents (fixtures/real), the inputs
//! a fast path is checked against the reading it stands for.

/// The lines of the real incidents, in the order their files hold them.
pub(crate) fn real_lines() -> Vec<String> {
    let real =
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures/real");
    let mut cases: Vec<_> = std::fs::read_dir(real)
        .into_iter()
        .flatten()
        .flatten()
        .map(|c| c.path().join("input.log"))
        .collect();
    cases.sort();
    let mut lines = Vec::new();
    for case in cases {
        if let Ok(text) = std::fs::read_to_string(case) {
            lines.extend(text.lines().map(str::to_owned));
        }
    }
    lines
}
