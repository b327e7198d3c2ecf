//! The crate's module graph, read from the source text: every `crate::`,
//! `super::`, `self::` and child-module path anywhere in a line (a `use`
//! and its `{…}` groups over several lines, or a path inline in code), in
//! every module, inline `mod tests` included, resolved through the `use`s
//! that re-export a name to the file that defines it. `tidy.rs` checks the
//! edges against ARCHITECTURE.md's layers and looks for circles; plain std,
//! so it also runs over a small source tree made up in a test.

use std::collections::{BTreeMap, BTreeSet};

/// One source file: its path under `src/` (`ingest/mod.rs`) and its text.
pub struct Source {
    pub path: String,
    pub text: String,
}

/// One use of another module: where it is written and what it reaches.
#[derive(Clone, Debug)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub file: String,
    pub line: usize,
    pub text: String,
    /// Written in test code (a `#[cfg(test)]` module, a `tests.rs`).
    pub test: bool,
}

/// The module a file is: `ingest/mod.rs` → `ingest`, `rules/rank.rs` →
/// `rules::rank`, `lib.rs` → `` (the crate root).
pub fn module_of(path: &str) -> String {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" || path == "main" {
        return String::new();
    }
    path.replace('/', "::")
}

fn join(parts: &[String]) -> String {
    parts.join("::")
}

fn split(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    }
}

fn ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A path as written, before it is made absolute, with the line it starts on.
struct Written {
    segments: Vec<String>,
    alias: Option<String>,
    /// Inside a `use` item (a name brought into scope) or inline in code.
    is_use: bool,
    line: usize,
    /// The module the text stands in (the file's, or an inline `mod`'s).
    scope: Vec<String>,
    test: bool,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && ident_char(b[j]) {
        j += 1;
    }
    j
}

/// Reads one use tree at `i` (`a::b`, `a::{b, c::d as e, *}`), pushing
/// every leaf path; returns where it ends.
fn tree(
    b: &[u8],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        i = skip_ws(b, i);
        if i >= b.len() {
            break;
        }
        if b[i] == b'{' {
            i += 1;
            loop {
                i = skip_ws(b, i);
                if i >= b.len() {
                    return i;
                }
                if b[i] == b'}' {
                    return i + 1;
                }
                let before = i;
                i = tree(b, i, prefix.clone(), out);
                i = skip_ws(b, i);
                if i < b.len() && b[i] == b',' {
                    i += 1;
                } else if i == before {
                    // Not a use tree after all: stop rather than loop.
                    return i + 1;
                }
            }
        }
        if b[i] == b'*' {
            prefix.push("*".into());
            out.push((prefix, None));
            return i + 1;
        }
        let start = if b[i] == b'$' { i + 1 } else { i };
        let end = ident(b, start);
        if end == start {
            break;
        }
        prefix.push(String::from_utf8_lossy(&b[start..end]).into_owned());
        i = end;
        let j = skip_ws(b, i);
        if b[j..].starts_with(b"::") {
            let k = skip_ws(b, j + 2);
            if k < b.len() && (ident_char(b[k]) || b[k] == b'{' || b[k] == b'*') {
                i = k;
                continue;
            }
        }
        // `as alias`
        let mut alias = None;
        if b[j..].starts_with(b"as") && j + 2 < b.len() && !ident_char(b[j + 2]) {
            let k = skip_ws(b, j + 2);
            let e = ident(b, k);
            if e > k {
                alias = Some(String::from_utf8_lossy(&b[k..e]).into_owned());
                i = e;
            }
        }
        out.push((prefix, alias));
        return i;
    }
    if !prefix.is_empty() {
        out.push((prefix, None));
    }
    i
}

/// Every path a file writes, with the scope it is written in.
fn written(source: &Source) -> Vec<Written> {
    let file_module = split(&module_of(&source.path));
    // Comment lines blanked (so a doc's `crate::x` is no dependency), line
    // starts kept to number what is found.
    let mut text = String::with_capacity(source.text.len());
    let mut line_starts = Vec::new();
    // Inline modules: `mod name {` opens one, the `}` at its indentation
    // closes it (the sources are rustfmt'd).
    let mut scopes: Vec<(usize, String, bool)> = Vec::new();
    let mut scope_at: Vec<Vec<String>> = Vec::new();
    let mut test_at: Vec<bool> = Vec::new();
    let file_is_test = file_module.last().is_some_and(|m| m.ends_with("tests"));
    let mut cfg_test = false;
    let mut children: BTreeSet<String> = BTreeSet::new();
    for line in source.text.lines() {
        line_starts.push(text.len());
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some((depth, _, _)) = scopes.last() {
            if *depth == indent && trimmed.starts_with('}') {
                scopes.pop();
            }
        }
        let mut scope = file_module.clone();
        scope.extend(scopes.iter().map(|(_, n, _)| n.clone()));
        scope_at.push(scope);
        test_at.push(file_is_test || scopes.iter().any(|s| s.2));
        let decl = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        if let Some(rest) = decl.strip_prefix("mod ") {
            let name: String = rest
                .bytes()
                .take_while(|&c| ident_char(c))
                .map(char::from)
                .collect();
            if rest[name.len()..].trim_start().starts_with('{') {
                scopes.push((indent, name, cfg_test));
            } else if scopes.is_empty() {
                children.insert(name);
            }
        }
        if !trimmed.is_empty() && !trimmed.starts_with("//") {
            cfg_test = trimmed == "#[cfg(test)]";
        }
        if trimmed.starts_with("//") {
            text.push_str(&" ".repeat(line.len()));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    let b = text.as_bytes();
    // `use` items: from a line that starts one to its `;`.
    let mut use_ranges = Vec::new();
    for &start in &line_starts {
        let rest = text[start..].trim_start();
        let rest = rest
            .strip_prefix("pub(crate) ")
            .or_else(|| rest.strip_prefix("pub(super) "))
            .or_else(|| rest.strip_prefix("pub "))
            .unwrap_or(rest);
        if rest.starts_with("use ") {
            let end = text[start..].find(';').map_or(text.len(), |e| start + e);
            use_ranges.push((start, end));
        }
    }
    let line_of = |pos: usize| line_starts.partition_point(|&s| s <= pos);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(ident_char(b[i - 1]) || b[i - 1] == b':' || b[i - 1] == b'.');
        if !boundary {
            i += 1;
            continue;
        }
        let start = if b[i] == b'$' { i + 1 } else { i };
        let end = ident(b, start);
        if end == start {
            i += 1;
            continue;
        }
        let word = &text[start..end];
        let is_root = matches!(word, "crate" | "super" | "self");
        if !(is_root || children.contains(word)) || !b[end..].starts_with(b"::") {
            i = end.max(i + 1);
            continue;
        }
        let line = line_of(i);
        let is_use = use_ranges.iter().any(|&(a, z)| a <= i && i < z);
        let mut leaves = Vec::new();
        let stop = tree(b, i, Vec::new(), &mut leaves);
        for (segments, alias) in leaves {
            out.push(Written {
                segments,
                alias,
                is_use,
                line,
                scope: scope_at[line - 1].clone(),
                test: test_at[line - 1],
            });
        }
        i = stop.max(i + 1);
    }
    out
}

/// Makes a written path absolute (segments from the crate root).
fn absolute(w: &Written) -> Vec<String> {
    let mut segs = w.segments.iter().peekable();
    let mut base: Vec<String> = Vec::new();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
        }
        Some("super") => {
            base = w.scope.clone();
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                segs.next();
                base.pop();
            }
        }
        Some("self") => {
            segs.next();
            base = w.scope.clone();
        }
        _ => base = w.scope.clone(),
    }
    base.extend(segs.filter(|s| s.as_str() != "self").cloned());
    base
}

/// The module graph of a source tree.
pub struct Graph {
    /// Every file's module.
    pub modules: BTreeSet<String>,
    /// Every edge between two files' modules (one per place written).
    pub edges: Vec<Edge>,
}

/// Reads the graph: each path resolved to the file that defines what it
/// names, following the names a module brings in with `use`.
pub fn graph(sources: &[Source]) -> Graph {
    let modules: BTreeSet<String> = sources.iter().map(|s| module_of(&s.path)).collect();
    let mut all = Vec::new();
    // (module, name) → the absolute path a `use` in that module binds it to.
    let mut bound: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut globs: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for source in sources {
        for w in written(source) {
            let abs = absolute(&w);
            if w.is_use {
                let scope = join(&w.scope);
                match (w.alias.as_deref(), abs.last().map(|s| s.as_str())) {
                    (_, Some("*")) => globs
                        .entry(scope)
                        .or_default()
                        .push(abs[..abs.len() - 1].to_vec()),
                    (Some(alias), _) => {
                        bound.insert((scope, alias.to_owned()), abs.clone());
                    }
                    (None, Some(last)) => {
                        bound.insert((scope, last.to_owned()), abs.clone());
                    }
                    _ => {}
                }
            }
            all.push((source.path.clone(), module_of(&source.path), w, abs));
        }
    }
    let resolve = |abs: &[String]| -> String {
        let mut path = abs.to_vec();
        for _ in 0..8 {
            // The longest prefix that is a file's module.
            let mut n = path.len();
            while n > 0 && !modules.contains(&join(&path[..n])) {
                n -= 1;
            }
            let module = join(&path[..n]);
            let Some(next) = path.get(n) else {
                return module;
            };
            if let Some(target) = bound.get(&(module.clone(), next.clone())) {
                if target.as_slice() != &path[..=n] {
                    let mut rest = target.clone();
                    rest.extend(path[n + 1..].iter().cloned());
                    path = rest;
                    continue;
                }
            }
            if let Some(list) = globs.get(&module) {
                // A name a glob brings in: the first globbed module that is
                // a file's module with a deeper prefix.
                if let Some(g) = list
                    .iter()
                    .find(|g| modules.contains(&join(g)) && g.len() > n)
                {
                    let mut rest = g.clone();
                    rest.extend(path[n..].iter().cloned());
                    path = rest;
                    continue;
                }
            }
            return module;
        }
        join(&path)
    };
    let mut edges = Vec::new();
    for (file, from, w, abs) in all {
        let to = resolve(&abs);
        if to != from && modules.contains(&to) {
            let text = sources
                .iter()
                .find(|s| s.path == file)
                .unwrap()
                .text
                .lines()
                .nth(w.line - 1)
                .unwrap_or("")
                .trim()
                .to_owned();
            edges.push(Edge {
                from: from.clone(),
                to,
                file: file.clone(),
                line: w.line,
                text,
                test: w.test,
            });
        }
    }
    Graph { modules, edges }
}

/// An edge seen between the two modules that hold its ends under their
/// nearest common parent: `ingest::server::sglang → ingest::reader` is
/// `ingest::server → ingest::reader`, `rules::catalog::x → correlate` is
/// `rules → correlate`. None for a use of an ancestor or a descendant (a
/// parent declares its children; what a parent defines is its subtree's).
pub fn lifted(edge: &Edge) -> Option<(String, String)> {
    let (a, b) = (split(&edge.from), split(&edge.to));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == a.len() || common == b.len() {
        return None;
    }
    Some((join(&a[..=common]), join(&b[..=common])))
}

/// The circles: every strongly connected set of two or more modules (each
/// edge lifted to siblings, `lifted`), sorted, each with one edge of the
/// circle per module.
pub fn circles(graph: &Graph) -> Vec<Vec<Edge>> {
    let mut lifted_edges: Vec<(String, String, Edge)> = Vec::new();
    let mut nodes = BTreeSet::new();
    for e in graph.edges.iter().filter(|e| !e.test) {
        if let Some((a, b)) = lifted(e) {
            nodes.insert(a.clone());
            nodes.insert(b.clone());
            lifted_edges.push((a, b, e.clone()));
        }
    }
    let names: Vec<&String> = nodes.iter().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut next: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); names.len()];
    for (a, b, _) in &lifted_edges {
        next[index[a]].insert(index[b]);
    }
    // Tarjan's strongly connected components, iteratively.
    let n = names.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut comps, mut counter) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, Vec<usize>)> = vec![(root, Vec::new())];
        idx[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on[root] = true;
        work.last_mut().unwrap().1 = next[root].iter().copied().rev().collect();
        while let Some((v, pending)) = work.last_mut() {
            let v = *v;
            if let Some(w) = pending.pop() {
                if idx[w] == usize::MAX {
                    idx[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, next[w].iter().copied().rev().collect()));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                low[*parent] = low[*parent].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().unwrap();
                    on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comps.push(comp);
                }
            }
        }
    }
    let mut out: Vec<Vec<Edge>> = comps
        .into_iter()
        .map(|comp| {
            let set: BTreeSet<&String> = comp.iter().map(|&i| names[i]).collect();
            let mut edges: Vec<Edge> = Vec::new();
            for m in &set {
                if let Some((_, _, e)) = lifted_edges
                    .iter()
                    .find(|(a, b, _)| &a == m && set.contains(b))
                {
                    edges.push(e.clone());
                }
            }
            edges
        })
        .collect();
    out.sort_by(|a, b| a[0].from.cmp(&b[0].from));
    out
}
