//! Tidy checks in the style of rust-analyzer's: every source file says what
//! it owns, modules depend only leftwards along the pipeline, and no merge
//! left conflict markers behind.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::modgraph::{self, Source};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.')
            || name == "target"
            || name == "snapshots"
            || name == "corpus"
            || name == "artifacts"
        {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn rust_files(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(&root().join(dir), &mut out);
    out.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    out.sort();
    out
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    for file in rust_files("src") {
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} does not start with a //! doc comment",
            file.display()
        );
    }
}

/// Every `.rs` file under `src/` (the binary's `main.rs` and the other
/// crates' roots aside), as the module graph reads them: one tree, each
/// module at its path under `src/`, as every crate's root re-exports the
/// lower crates' modules under their own names. The roots (`lib_*.rs`)
/// declare modules and name other crates, which
/// [`crates_depend_only_on_lower_layers`] checks in the manifests.
fn crate_sources() -> Vec<Source> {
    let src = root().join("src");
    rust_files("src")
        .into_iter()
        .map(|p| Source {
            path: p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/"),
            text: fs::read_to_string(&p).unwrap(),
        })
        .filter(|s| s.path != "main.rs" && !is_crate_root(&s.path))
        .collect()
}

/// `lib_model.rs`: the root of a crate other than the app's (`lib.rs`).
fn is_crate_root(path: &str) -> bool {
    path.starts_with("lib_") && path.ends_with(".rs") && !path.contains('/')
}

/// The layer table of ARCHITECTURE.md, between `<!-- layers -->` and
/// `<!-- /layers -->`: each row `| n | `module`, … | … |`, `lib.rs` for the
/// crate root. Module → layer.
fn layer_table(doc: &str) -> BTreeMap<String, u32> {
    let start = doc
        .find("<!-- layers -->")
        .expect("ARCHITECTURE.md has <!-- layers -->");
    let end = doc
        .find("<!-- /layers -->")
        .expect("ARCHITECTURE.md has <!-- /layers -->");
    let mut layers = BTreeMap::new();
    for row in doc[start..end].lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(n) = cells[1].parse::<u32>() else {
            continue;
        };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`');
            let module = if module == "lib.rs" { "" } else { module };
            layers.insert(module.to_owned(), n);
        }
    }
    layers
}

/// The layer of a module: the row of its longest ancestor the table names
/// (`rules::catalog::xid_ecc` → `rules::catalog`, `rules::rank` → `rules`).
fn layer_of(layers: &BTreeMap<String, u32>, module: &str) -> Option<u32> {
    let parts: Vec<&str> = module.split("::").collect();
    (1..=parts.len())
        .rev()
        .find_map(|n| layers.get(&parts[..n].join("::")).copied())
}

/// The table's last column: each crate (`model`, …, `app`) and the layers
/// its modules are on, lowest and highest.
fn crate_table(doc: &str) -> BTreeMap<String, (u32, u32)> {
    let start = doc
        .find("<!-- layers -->")
        .expect("ARCHITECTURE.md has <!-- layers -->");
    let end = doc
        .find("<!-- /layers -->")
        .expect("ARCHITECTURE.md has <!-- /layers -->");
    let mut crates: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for row in doc[start..end].lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Ok(n), Some(name)) = (cells[1].parse::<u32>(), cells.get(3)) else {
            continue;
        };
        let e = crates
            .entry(name.trim_matches('`').to_owned())
            .or_insert((n, n));
        *e = (e.0.min(n), e.1.max(n));
    }
    crates
}

/// The crate a package is in the table: `rootcause-rule-catalog` →
/// `rule-catalog`, the root package `rootcause` → `app`.
fn table_name(package: &str) -> &str {
    match package.strip_prefix("rootcause-") {
        Some(name) => name,
        None if package == "rootcause" => "app",
        None => package,
    }
}

/// Every dependency of a manifest (`path`, its text) on one of the
/// workspace's crates that is not on a lower layer: `[dependencies]` and
/// `[target.….dependencies]`; dev-dependencies may reach any layer (a test
/// that runs the whole pipeline). A package the table lacks is reported too.
fn crate_back_edges(
    manifests: &[(String, String)],
    crates: &BTreeMap<String, (u32, u32)>,
) -> Vec<String> {
    let mut broken = Vec::new();
    for (path, text) in manifests {
        let manifest: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let Some(package) = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
        else {
            continue;
        };
        let Some(&(low, _)) = crates.get(table_name(package)) else {
            broken.push(format!("{path}: {package} is in no row of the layer table"));
            continue;
        };
        let mut deps: Vec<String> = Vec::new();
        let mut add = |table: Option<&toml::Value>| {
            if let Some(t) = table.and_then(|t| t.as_table()) {
                deps.extend(t.keys().cloned());
            }
        };
        add(manifest.get("dependencies"));
        if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
            for target in targets.values() {
                add(target.get("dependencies"));
            }
        }
        for dep in deps.iter().filter(|d| d.starts_with("rootcause")) {
            match crates.get(table_name(dep)) {
                Some(&(_, high)) if high < low => {}
                Some(&(_, high)) => broken.push(format!(
                    "{path}: {package} (from layer {low}) depends on {dep} (up to layer {high})"
                )),
                None => broken.push(format!("{path}: {dep} is in no row of the layer table")),
            }
        }
    }
    broken
}

/// The workspace's manifests: the app's and each of `crates/*`.
fn manifests() -> Vec<(String, String)> {
    let mut paths = vec!["Cargo.toml".to_owned()];
    let mut crates: Vec<String> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .map(|name| format!("crates/{name}/Cargo.toml"))
        .collect();
    crates.sort();
    paths.extend(crates);
    paths
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(root().join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

/// Every use of a higher layer outside test code, and every top-level
/// module the table does not place: `file:line: from → to: text`.
fn back_edges(sources: &[Source], layers: &BTreeMap<String, u32>) -> Vec<String> {
    let graph = modgraph::graph(sources);
    let mut broken = Vec::new();
    for module in &graph.modules {
        if layer_of(layers, module).is_none() {
            broken.push(format!("{module}: not in the layer table"));
        }
    }
    for e in graph.edges.iter().filter(|e| !e.test) {
        if let (Some(from), Some(to)) = (layer_of(layers, &e.from), layer_of(layers, &e.to)) {
            if to > from {
                broken.push(format!(
                    "src/{}:{}: {} (layer {from}) uses {} (layer {to}): {}",
                    e.file, e.line, e.from, e.to, e.text
                ));
            }
        }
    }
    broken.sort();
    broken.dedup();
    broken
}

fn circles_of(sources: &[Source]) -> Vec<String> {
    modgraph::circles(&modgraph::graph(sources))
        .iter()
        .map(|c| {
            c.iter()
                .map(|e| {
                    format!(
                        "  src/{}:{}: {} → {}: {}",
                        e.file, e.line, e.from, e.to, e.text
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// ARCHITECTURE.md's layer table: every `crate::`, `super::`, `self::` or
/// child-module path, anywhere in a line, in every module, reaches only its
/// own layer or lower ones (test code may reach any: its crate has the app
/// as a dev-dependency).
#[test]
fn modules_depend_only_on_their_layer_or_lower() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let broken = back_edges(&crate_sources(), &layer_table(&doc));
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

/// The crates are the layers: each crate of the table's last column is a
/// package of the workspace, and its dependencies are crates of lower
/// layers only, so a back-edge between crates does not compile.
#[test]
fn crates_depend_only_on_lower_layers() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let crates = crate_table(&doc);
    let manifests = manifests();
    let broken = crate_back_edges(&manifests, &crates);
    assert!(broken.is_empty(), "crates broken:\n{}", broken.join("\n"));
    let packages: Vec<String> = manifests
        .iter()
        .filter_map(|(_, text)| {
            let m: toml::Table = toml::from_str(text).ok()?;
            Some(table_name(m.get("package")?.get("name")?.as_str()?).to_owned())
        })
        .collect();
    for name in crates.keys() {
        assert!(
            packages.contains(name),
            "the layer table's crate {name} is no package"
        );
    }
}

/// The crate check fails on a manifest that names a crate of its own or a
/// higher layer, and passes one that names a lower one or has it as a
/// dev-dependency.
#[test]
fn the_crate_check_finds_a_planted_back_edge() {
    let crates = crate_table(
        "<!-- layers -->\n| layer | modules | crate |\n|---|---|---|\n| 0 | `low` | low |\n| 1 | `high` | high |\n| 2 | lib.rs | app |\n<!-- /layers -->",
    );
    let manifest = |name: &str, deps: &str| {
        (
            format!("crates/{name}/Cargo.toml"),
            format!("[package]\nname = \"rootcause-{name}\"\n\n{deps}"),
        )
    };
    let clean = [
        manifest(
            "low",
            "[dev-dependencies]\nrootcause-high = { path = \"../high\" }\n",
        ),
        manifest(
            "high",
            "[dependencies]\nrootcause-low.workspace = true\nregex = \"1\"\n",
        ),
    ];
    assert_eq!(crate_back_edges(&clean, &crates), Vec::<String>::new());
    let back = [manifest(
        "low",
        "[target.'cfg(unix)'.dependencies]\nrootcause-high.workspace = true\n",
    )];
    assert_eq!(
        crate_back_edges(&back, &crates),
        [
            "crates/low/Cargo.toml: rootcause-low (from layer 0) depends on rootcause-high (up to layer 1)"
        ]
    );
    let app = [(
        "Cargo.toml".to_owned(),
        "[package]\nname = \"rootcause\"\n[dependencies]\nrootcause-high.workspace = true\n"
            .to_owned(),
    )];
    assert_eq!(crate_back_edges(&app, &crates), Vec::<String>::new());
    let stranger = [manifest("misc", "")];
    assert_eq!(crate_back_edges(&stranger, &crates).len(), 1);
}

/// No two modules use each other, directly or round a circle (edges seen
/// between the siblings that hold their ends, `modgraph::lifted`).
#[test]
fn no_import_circles() {
    let circles = circles_of(&crate_sources());
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n\n")
    );
}

fn planted(files: &[(&str, &str)]) -> Vec<Source> {
    files
        .iter()
        .map(|(path, text)| Source {
            path: (*path).to_owned(),
            text: (*text).to_owned(),
        })
        .collect()
}

/// The checks fail on what they are for: a back-edge written inline, one in
/// a `use` group over several lines, one through a re-export, and a circle
/// between siblings, in a made-up tree; a test module's use and a comment
/// are no edge.
#[test]
fn the_layer_check_finds_a_planted_back_edge() {
    let layers = layer_table(
        "<!-- layers -->\n| layer | modules |\n|---|---|\n| 0 | `low` |\n| 1 | `high`, lib.rs |\n<!-- /layers -->",
    );
    let clean = planted(&[
        ("lib.rs", "pub mod high;\npub mod low;\n"),
        (
            "low/mod.rs",
            "mod leaf;\npub use leaf::Word;\n// crate::high::Thing in a comment\n",
        ),
        (
            "low/leaf.rs",
            "pub struct Word;\n#[cfg(test)]\nmod tests {\n    use crate::high::Thing;\n}\n",
        ),
        (
            "high.rs",
            "use crate::low::Word;\npub struct Thing(Word);\n",
        ),
    ]);
    assert_eq!(back_edges(&clean, &layers), Vec::<String>::new());
    assert_eq!(circles_of(&clean), Vec::<String>::new());

    let inline = planted(&[
        ("lib.rs", "pub mod high;\npub mod low;\n"),
        ("low/mod.rs", "mod leaf;\npub use leaf::Word;\n"),
        (
            "low/leaf.rs",
            "pub struct Word;\nfn f() -> usize {\n    std::mem::size_of::<crate::high::Thing>()\n}\n",
        ),
        ("high.rs", "pub struct Thing;\n"),
    ]);
    let found = back_edges(&inline, &layers);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/low/leaf.rs:3: low::leaf (layer 0) uses high (layer 1)"),
        "{found:?}"
    );

    let group = planted(&[
        ("lib.rs", "pub mod high;\npub mod low;\n"),
        (
            "low/mod.rs",
            "use crate::{\n    high::{\n        Thing,\n    },\n};\n",
        ),
        ("high/mod.rs", "mod thing;\npub use thing::Thing;\n"),
        ("high/thing.rs", "pub struct Thing;\n"),
    ]);
    let found = back_edges(&group, &layers);
    assert!(
        found
            .iter()
            .any(|f| f.contains("low (layer 0) uses high::thing (layer 1)")),
        "{found:?}"
    );

    let circle = planted(&[
        ("lib.rs", "pub mod low;\npub mod high;\n"),
        ("low/mod.rs", "mod a;\nmod b;\n"),
        ("low/a.rs", "use super::b::B;\npub struct A;\n"),
        ("low/b.rs", "pub struct B;\nfn f(_: super::a::A) {}\n"),
        ("high.rs", ""),
    ]);
    let found = circles_of(&circle);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("low::a → low::b") && found[0].contains("low::b → low::a"),
        "{found:?}"
    );
    assert!(back_edges(&circle, &layers).is_empty());
}

#[test]
fn no_merge_conflict_markers() {
    let mut all = Vec::new();
    for dir in [
        "src", "crates", "tests", "docs", "fixtures", "scripts", "bench", "contrib", ".ci",
    ] {
        if root().join(dir).exists() {
            files(&root().join(dir), &mut all);
        }
    }
    all.extend(["README.md", "ARCHITECTURE.md", "Cargo.toml"].map(|f| root().join(f)));
    let mut found = Vec::new();
    for file in all {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                found.push(format!("{}:{}", file.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "conflict markers: {found:?}");
}

/// Regex patterns spell their classes in ASCII (`[0-9]`, `[0-9A-Za-z_]`),
/// never `\d` or `\w`: a Unicode class costs 50 to 250 µs to compile each
/// time it is written (hundreds of patterns: most of a small run's time),
/// and every figure the parsers read is parsed as ASCII anyway.
#[test]
fn regex_classes_are_ascii() {
    let mut found = Vec::new();
    for file in rust_files("src") {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let b = line.as_bytes();
            for i in 1..b.len() {
                if !matches!(b[i], b'd' | b'w') {
                    continue;
                }
                // `\d` in a raw string, `\\d` in a plain one.
                let run = b[..i].iter().rev().take_while(|&&c| c == b'\\').count();
                if run == 1 || run == 2 {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Unicode classes in patterns:\n{}",
        found.join("\n")
    );
}

/// `unsafe` only where a system call has no safe wrapper: process groups in
/// `capture/`. The terminal's width, colours and progress bar go through
/// crates (terminal_size, anstream, indicatif).
#[test]
fn no_unsafe_outside_capture() {
    let word = regex::Regex::new(r"\bunsafe\b").unwrap();
    for file in rust_files("src") {
        if file.starts_with(root().join("src/capture")) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !word.is_match(code),
                "{}:{}: unsafe outside src/capture/: {line}",
                file.display(),
                n + 1
            );
        }
    }
}

/// Every `docs/…` page a comment or string in `src/` cites is in the
/// repository, and none cites the reference that was never in it
/// (`formats.md §N`, `signatures.md`): the pages under docs/formats/,
/// docs/rules/ and docs/catalogs/ are that reference now. A path after a
/// `/` (a URL) or after an upstream repository's name (`ollama/ollama
/// docs/linux.md`) is someone else's.
#[test]
fn docs_cited_in_src_exist() {
    let cited =
        regex::Regex::new(r"(^|[^A-Za-z0-9_./-])docs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]").unwrap();
    let upstream = regex::Regex::new(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+ $").unwrap();
    let mut missing = Vec::new();
    for file in rust_files("src") {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let at = format!("{}:{}", file.display(), n + 1);
            if line.contains("formats.md §") || line.contains("signatures.md") {
                missing.push(format!("{at}: cites a reference outside the repository"));
            }
            for m in cited.find_iter(line) {
                let path = m
                    .as_str()
                    .trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
                if upstream.is_match(&line[..m.start() + m.as_str().len() - path.len()]) {
                    continue;
                }
                if !root().join(path).exists() {
                    missing.push(format!("{at}: {path} does not exist"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Rule code stays short enough to read (issue 22): no file of a rule or
/// of what rules share over 600 lines; a rule too long keeps its parts in
/// a folder beside its file (`catalog/<rule>/`), split by what they do.
#[test]
fn rule_files_stay_under_600_lines() {
    let mut long = Vec::new();
    for dir in ["src/rules/catalog", "src/rules/support"] {
        for file in rust_files(dir) {
            let lines = fs::read_to_string(&file).unwrap().lines().count();
            if lines > 600 {
                long.push(format!("{}: {lines} lines", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "rule files over 600 lines:\n{}",
        long.join("\n")
    );
}

/// No function over 100 lines in the catalog (from its `fn` line to the
/// `}` at its indentation; the sources are rustfmt'd): a rule reads as a
/// short check over named steps (issue 22; the last of the 51 functions
/// that were longer when the limit was set was split on 2026-12-05).
#[test]
fn no_function_over_100_lines_in_the_catalog() {
    let catalog = root().join("src/rules/catalog");
    let head =
        regex::Regex::new(r"^(\s*)(?:pub(?:\([a-z]+\))? )?(?:const )?fn ([0-9A-Za-z_]+)").unwrap();
    let mut new = Vec::new();
    for file in rust_files("src/rules/catalog") {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = file
            .strip_prefix(&catalog)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        for (i, line) in lines.iter().enumerate() {
            let Some(c) = head.captures(line) else {
                continue;
            };
            let close = format!("{}}}", &c[1]);
            let end = (i..lines.len()).find(|&j| lines[j] == close).unwrap_or(i);
            let key = format!("{name} {}", &c[2]);
            if end - i + 1 > 100 {
                new.push(format!("{key}: {} lines", end - i + 1));
            }
        }
    }
    assert!(
        new.is_empty(),
        "functions over 100 lines in the catalog:\n{}",
        new.join("\n")
    );
}
