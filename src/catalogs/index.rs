//! Which rows a line is: one Aho-Corasick pass over every anchor, then the
//! regex of each wording or wrapper whose anchor is in the line (compiled
//! the first time one is), and for a wrapper, the row its captured code,
//! enum name or message string names.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

use super::{Catalog, Numbering, Row, Wording, Wrapper};

/// How a line was matched to its row.
#[derive(Debug, Clone, Copy)]
pub enum Via<'c> {
    /// One of the row's own wordings (its index in `Row::wordings`).
    Wording(usize),
    /// A code table's wrapper, whose capture named the row.
    Wrapper(&'c Wrapper),
    /// The row's code string, standing alone in the line.
    Bare,
}

/// A line's match with one row, or with a wrapper whose code is in no row.
#[derive(Debug, Clone)]
pub struct Hit<'c> {
    pub catalog: &'c Catalog,
    /// `None`: a wrapper matched but its code is in no row (an unknown or
    /// newer code); the line is still a known message.
    pub row: Option<&'c Row>,
    pub via: Via<'c>,
    /// The wording's named captures and what they matched.
    pub captures: Vec<(&'c str, String)>,
    /// The part of the line the wording (or the bare string) matched.
    pub matched: String,
}

impl Hit<'_> {
    /// The value a named capture matched.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.captures
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What an anchor leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// Most specific first: the order hits are reported in.
    Wording {
        catalog: usize,
        row: usize,
        wording: usize,
    },
    Wrapper {
        catalog: usize,
        wrapper: usize,
    },
    Bare {
        catalog: usize,
        row: usize,
    },
}

pub(super) struct Index {
    /// Built on the first line asked about: a run whose prefilter keeps no
    /// line never needs it (hundreds of anchors take milliseconds).
    matcher: OnceLock<Option<AhoCorasick>>,
    /// Per distinct anchor (lower case), what it leads to.
    anchors: Vec<(String, Vec<Target>)>,
    /// Per catalog, per row, its message strings as [`normal`] makes them:
    /// made once here, not for every line a wrapper matches.
    normal: Vec<Vec<Vec<String>>>,
    /// Per catalog, per byte, the rows (in order) with a normal string
    /// that starts with it: a message only begins, or is begun by, a
    /// string with its own first byte ([`Strings::starting`]).
    by_first: Vec<Vec<Vec<usize>>>,
}

/// One catalog's normal strings, and their rows by first byte.
#[derive(Clone, Copy)]
struct Strings<'a> {
    normal: &'a [Vec<String>],
    by_first: &'a [Vec<usize>],
}

impl<'a> Strings<'a> {
    /// The rows that may have a string `msg` starts with, or one that
    /// starts with `msg`: those with a string of `msg`'s first byte (the
    /// strings are never empty), in row order, each with its strings.
    fn starting(self, msg: &str) -> impl Iterator<Item = (usize, &'a [String])> {
        let rows = msg
            .as_bytes()
            .first()
            .map_or(&[][..], |&b| self.by_first[usize::from(b)].as_slice());
        rows.iter().map(move |&r| (r, self.normal[r].as_slice()))
    }
}

/// Per byte, the rows with a string that starts with it.
fn by_first(normal: &[Vec<String>]) -> Vec<Vec<usize>> {
    let mut table = vec![Vec::new(); 256];
    for (r, strings) in normal.iter().enumerate() {
        let mut firsts: Vec<u8> = strings.iter().filter_map(|s| s.bytes().next()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        for b in firsts {
            table[usize::from(b)].push(r);
        }
    }
    table
}

impl Index {
    /// The index of the catalogs of `list` that `keep` chooses (the exact
    /// ones, or the fallback ones); a catalog left out has no anchor and no
    /// strings here, and keeps its position in `list`.
    pub(super) fn new(list: &[Catalog], keep: impl Fn(&Catalog) -> bool) -> Index {
        let mut by_anchor: BTreeMap<String, Vec<Target>> = BTreeMap::new();
        let mut add = |anchor: &str, target: Target| {
            by_anchor
                .entry(anchor.to_ascii_lowercase())
                .or_default()
                .push(target);
        };
        for (c, catalog) in list.iter().enumerate().filter(|(_, c)| keep(c)) {
            for (r, row) in catalog.rows.iter().enumerate() {
                for (w, wording) in row.wordings.iter().enumerate() {
                    add(
                        &wording.anchor,
                        Target::Wording {
                            catalog: c,
                            row: r,
                            wording: w,
                        },
                    );
                }
                if row.bare {
                    for s in &row.strings {
                        add(&s.text, Target::Bare { catalog: c, row: r });
                    }
                }
            }
            for (w, wrapper) in catalog.wrappers.iter().enumerate() {
                add(
                    &wrapper.wording.anchor,
                    Target::Wrapper {
                        catalog: c,
                        wrapper: w,
                    },
                );
            }
        }
        let normal = list
            .iter()
            .map(|c| {
                c.rows
                    .iter()
                    .map(|r| match keep(c) {
                        true => r
                            .strings
                            .iter()
                            .map(|s| normal(&s.text))
                            .filter(|s| !s.is_empty())
                            .collect(),
                        false => Vec::new(),
                    })
                    .collect()
            })
            .collect::<Vec<Vec<Vec<String>>>>();
        let by_first = normal.iter().map(|c| by_first(c)).collect();
        Index {
            matcher: OnceLock::new(),
            anchors: by_anchor.into_iter().collect(),
            normal,
            by_first,
        }
    }

    pub(super) fn anchors(&self) -> impl Iterator<Item = &str> {
        self.anchors.iter().map(|(a, _)| a.as_str())
    }

    /// Whether any row or wrapper reads `text`: [`Self::hits`] is not
    /// empty. Stops at the first that matches and captures nothing: asked of
    /// every anchored line no parser knew.
    pub(super) fn knows(&self, list: &[Catalog], text: &str) -> bool {
        self.targets(text)
            .into_iter()
            .any(|target| block_of(list, target, text).is_some())
    }

    /// Whether `text` is a message of a row, and then how many lines after
    /// it upstream prints with it as one message (the row's `block`; 0
    /// without one). `None` when no row or wrapper knows the line.
    pub(super) fn known_block(&self, list: &[Catalog], text: &str) -> Option<u8> {
        self.targets(text)
            .into_iter()
            .filter_map(|target| block_of(list, target, text))
            .max()
    }

    /// Catalog `c`'s normal strings.
    fn strings(&self, c: usize) -> Strings<'_> {
        Strings {
            normal: &self.normal[c],
            by_first: &self.by_first[c],
        }
    }

    /// The rows and wrappers whose anchors `text` holds, each once, in order.
    fn targets(&self, text: &str) -> Vec<Target> {
        let matcher = self.matcher.get_or_init(|| {
            (!self.anchors.is_empty()).then(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(self.anchors.iter().map(|(a, _)| a))
                    .expect("anchors are plain literals")
            })
        });
        let Some(matcher) = matcher else {
            return Vec::new();
        };
        let mut targets: Vec<Target> = matcher
            .find_overlapping_iter(text)
            .flat_map(|m| self.anchors[m.pattern().as_usize()].1.iter().copied())
            .collect();
        targets.sort();
        targets.dedup();
        targets
    }

    pub(super) fn hits<'c>(&self, list: &'c [Catalog], text: &str) -> Vec<Hit<'c>> {
        let targets = self.targets(text);
        if targets.is_empty() {
            return Vec::new();
        }
        let mut hits: Vec<Hit<'c>> = Vec::new();
        for target in targets {
            let hit = match target {
                Target::Wording {
                    catalog,
                    row,
                    wording,
                } => {
                    let catalog = &list[catalog];
                    let row = &catalog.rows[row];
                    captures(&row.wordings[wording], text).map(|(captures, matched)| Hit {
                        catalog,
                        row: Some(row),
                        via: Via::Wording(wording),
                        captures,
                        matched,
                    })
                }
                Target::Wrapper { catalog, wrapper } => {
                    let strings = self.strings(catalog);
                    let catalog = &list[catalog];
                    let wrapper = &catalog.wrappers[wrapper];
                    captures(&wrapper.wording, text).map(|(captures, matched)| {
                        let mut hit = Hit {
                            catalog,
                            row: None,
                            via: Via::Wrapper(wrapper),
                            captures,
                            matched,
                        };
                        hit.row = resolve(catalog, strings, wrapper, &hit);
                        hit
                    })
                }
                Target::Bare { catalog, row } => {
                    let catalog = &list[catalog];
                    let row = &catalog.rows[row];
                    bare(row, text).map(|matched| Hit {
                        catalog,
                        row: Some(row),
                        via: Via::Bare,
                        captures: Vec::new(),
                        matched,
                    })
                }
            };
            let Some(hit) = hit else { continue };
            // One hit per row: the most specific way it was read.
            let same = |h: &Hit<'_>| match (h.row, hit.row) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                (None, None) => matches!(
                    (h.via, hit.via),
                    (Via::Wrapper(a), Via::Wrapper(b)) if std::ptr::eq(a, b)
                ),
                _ => false,
            };
            if !hits.iter().any(same) {
                hits.push(hit);
            }
        }
        // A wrapper whose code no row knows says less than any row's hit.
        if hits.iter().any(|h| h.row.is_some()) {
            hits.retain(|h| h.row.is_some());
        }
        hits
    }
}

impl Index {
    /// The ids of the rows `text` is an instance of, as [`Index::hits`]
    /// finds them, without the captures a row's wording would give: a
    /// wording or a bare code string only has to match. A wrapper is
    /// still read whole (its captured code names the row).
    pub(super) fn row_ids<'c>(&self, list: &'c [Catalog], text: &str) -> Vec<&'c str> {
        let mut ids: Vec<&'c str> = Vec::new();
        let targets = self.targets(text);
        let wrapped = targets.iter().any(|t| matches!(t, Target::Wrapper { .. }));
        for target in targets {
            let id = matched_row(list, target, text).map(|row| row.id.as_str());
            if let Some(id) = id.filter(|id| !ids.contains(id)) {
                ids.push(id);
            }
        }
        // A wrapper's row, when its code names one.
        if wrapped {
            for hit in self.hits(list, text) {
                if let Some(id) = hit
                    .row
                    .map(|r| r.id.as_str())
                    .filter(|id| !ids.contains(id))
                {
                    ids.push(id);
                }
            }
        }
        ids
    }
}

type Captures<'c> = Vec<(&'c str, String)>;

/// The named captures of a wording's match, and the text it matched.
fn captures<'c>(wording: &'c Wording, text: &str) -> Option<(Captures<'c>, String)> {
    let re = wording.regex()?;
    let caps = re.captures(text)?;
    let named = re
        .capture_names()
        .flatten()
        .filter_map(|name| caps.name(name).map(|m| (name, m.as_str().to_owned())))
        .collect();
    Some((named, caps[0].to_owned()))
}

/// When `target` matches `text`: how many lines after it belong to the
/// same message (its row's `block`; 0 for a wrapper, a bare string or a
/// row without one).
fn block_of(list: &[Catalog], target: Target, text: &str) -> Option<u8> {
    match target {
        Target::Wording { .. } => matched_row(list, target, text)
            .map(|row| row.block.map_or(0, |[_, after]| after.clamp(0, 8) as u8)),
        Target::Wrapper { catalog, wrapper } => list[catalog].wrappers[wrapper]
            .wording
            .regex()
            .is_some_and(|re| re.is_match(text))
            .then_some(0),
        Target::Bare { .. } => matched_row(list, target, text).map(|_| 0),
    }
}

/// The row a wording or a bare code string leads to, when it matches
/// `text` (no captures taken); `None` for a wrapper, whose row its
/// captured code names.
fn matched_row<'c>(list: &'c [Catalog], target: Target, text: &str) -> Option<&'c Row> {
    match target {
        Target::Wording {
            catalog,
            row,
            wording,
        } => {
            let row = &list[catalog].rows[row];
            row.wordings[wording]
                .regex()
                .is_some_and(|re| re.is_match(text))
                .then_some(row)
        }
        Target::Bare { catalog, row } => {
            let row = &list[catalog].rows[row];
            bare(row, text).map(|_| row)
        }
        Target::Wrapper { .. } => None,
    }
}

/// The row's code string as the line prints it (the anchor search found it
/// in some letter case).
fn bare(row: &Row, text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    row.strings.iter().find_map(|s| {
        let at = lower.find(&s.text.to_ascii_lowercase())?;
        text.get(at..at + s.text.len()).map(str::to_owned)
    })
}

/// The row a wrapper's captures name, among the rows its table holds (all
/// of the catalog's, or those whose id starts with the wrapper's `rows`):
/// its code in the wrapper's numbering, else its enum name, else its
/// message string (the longest string the message starts with, so a trailer
/// after it does not matter). Where the printed string names a different
/// row than the printed number, the string decides: numbers changed across
/// versions (CUDA renumbered its runtime codes in 10.1: `cuda runtime error
/// (4) : unspecified launch failure` is today's 719), strings did not;
/// among rows sharing the string, one that had the number before wins.
/// `strings` holds each row's message strings, [`normal`]ised.
fn resolve<'c>(
    catalog: &'c Catalog,
    strings: Strings<'_>,
    wrapper: &Wrapper,
    hit: &Hit<'_>,
) -> Option<&'c Row> {
    let in_table = |r: &Row| {
        wrapper
            .rows
            .as_deref()
            .is_none_or(|prefix| r.id.starts_with(prefix))
    };
    let table = || catalog.rows.iter().filter(|r| in_table(r));
    // A code as printed: decimal, or hex after `0x` (NVRM's `status 0x0000000f`).
    let code = hit.get("code").and_then(|c| {
        let c = c.trim();
        match c.strip_prefix("0x").or_else(|| c.strip_prefix("0X")) {
            Some(hex) => i64::from_str_radix(hex, 16).ok(),
            None => c.parse::<i64>().ok(),
        }
    });
    let by_code = code.and_then(|n| {
        table().find(|r| match wrapper.numbering {
            Numbering::Code => r.code == Some(n),
            Numbering::Driver => r.driver_code == Some(n),
        })
    });
    let by_name = || {
        let name = hit.get("name")?;
        table().find(|r| {
            [&r.name, &r.driver_name]
                .into_iter()
                .flatten()
                .any(|n| n.eq_ignore_ascii_case(name))
        })
    };
    let by_message: Vec<&Row> = hit.get("msg").map_or_else(Vec::new, |msg| {
        let msg = normal(msg);
        let matching: Vec<(&Row, usize)> = strings
            .starting(&msg)
            .map(|(r, strings)| (&catalog.rows[r], strings))
            .filter(|(r, _)| in_table(r))
            .filter_map(|(r, strings)| {
                strings
                    .iter()
                    .filter(|s| msg.starts_with(s.as_str()))
                    .map(String::len)
                    .max()
                    .map(|len| (r, len))
            })
            .collect();
        let longest = matching.iter().map(|(_, len)| *len).max().unwrap_or(0);
        matching
            .into_iter()
            .filter(|(_, len)| *len == longest)
            .map(|(r, _)| r)
            .collect()
    });
    if by_message.is_empty() {
        return by_code
            .or_else(by_name)
            .or_else(|| cut_short(catalog, strings, &in_table, hit));
    }
    if let Some(r) = by_code.filter(|r| by_message.iter().any(|m| std::ptr::eq(*m, *r))) {
        return Some(r);
    }
    let former = code.and_then(|n| {
        by_message
            .iter()
            .copied()
            .find(|r| r.former.iter().any(|(c, _)| *c == n))
    });
    former
        .or_else(|| by_name().filter(|r| by_message.iter().any(|m| std::ptr::eq(*m, *r))))
        .or_else(|| by_message.first().copied())
}

/// A message cut short by the paste (`cudaMalloc failed: out of mem`, the
/// end of a copied line): the row whose string it begins, when it names one
/// row only and is long enough to mean something (a word is not a message).
fn cut_short<'c>(
    catalog: &'c Catalog,
    strings: Strings<'_>,
    in_table: &dyn Fn(&Row) -> bool,
    hit: &Hit<'_>,
) -> Option<&'c Row> {
    const MIN_CUT: usize = 8;
    let msg = normal(hit.get("msg")?);
    if msg.len() < MIN_CUT || !msg.contains(' ') {
        return None;
    }
    let mut rows = strings
        .starting(&msg)
        .map(|(r, strings)| (&catalog.rows[r], strings))
        .filter(|(r, _)| in_table(r))
        .filter(|(_, strings)| {
            strings
                .iter()
                .any(|s| s.len() > msg.len() && s.starts_with(msg.as_str()))
        })
        .map(|(r, _)| r);
    let first = rows.next()?;
    rows.next().is_none().then_some(first)
}

/// A message string compared loosely: lower case, white space collapsed,
/// quotes and a final full stop dropped.
fn normal(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    words
        .join(" ")
        .trim_matches(|c| c == '\'' || c == '"' || c == '`')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-byte buckets only skip rows that cannot match: for every
    /// wrapper of every catalog and every message made from each row's
    /// strings (whole, with more after it, in capitals, cut short, and a
    /// few that name nothing), with and without a code, `resolve` over the
    /// buckets names the row that a scan of every row names.
    #[test]
    fn the_first_byte_buckets_resolve_as_a_scan_of_every_row() {
        let all = crate::catalogs::catalogs();
        let mut named = 0;
        for (c, catalog) in all.list.iter().enumerate() {
            let every: Vec<usize> = (0..catalog.rows.len()).collect();
            let scan_table = vec![every; 256];
            let scan = Strings {
                normal: &all.index.normal[c],
                by_first: &scan_table,
            };
            let buckets = all.index.strings(c);
            let mut msgs: Vec<String> =
                ["", "x", " ", "\"quoted message here\"", "an unknown error"]
                    .map(str::to_owned)
                    .to_vec();
            for row in &catalog.rows {
                for s in &row.strings {
                    msgs.push(s.text.clone());
                    msgs.push(format!("{} in kernel abcdefghijkl", s.text));
                    msgs.push(format!("  '{}.'", s.text.to_uppercase()));
                    for cut in [8, 12, 20] {
                        msgs.extend(s.text.get(..cut).map(str::to_owned));
                    }
                }
            }
            for wrapper in &catalog.wrappers {
                for msg in &msgs {
                    for code in [None, Some("700"), Some("2"), Some("-1")] {
                        let mut captures = vec![("msg", msg.clone())];
                        captures.extend(code.map(|code| ("code", code.to_owned())));
                        let hit = Hit {
                            catalog,
                            row: None,
                            via: Via::Wrapper(wrapper),
                            captures,
                            matched: String::new(),
                        };
                        let fast = resolve(catalog, buckets, wrapper, &hit).map(|r| &r.id);
                        let slow = resolve(catalog, scan, wrapper, &hit).map(|r| &r.id);
                        assert_eq!(fast, slow, "{}: {msg:?} {code:?}", wrapper.id);
                        named += usize::from(fast.is_some());
                    }
                }
            }
        }
        assert!(named > 1000, "only {named} messages named a row");
    }
}
