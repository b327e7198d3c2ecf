//! The lines of a streamed input that a fact or a message needs, kept
//! during the one pass over it: the side table [`crate::render::Report`]
//! resolves evidence from. One arena of text, not a string per line.

use std::collections::BTreeMap;

/// Cleaned lines by number, in increasing order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct KeptLines {
    numbers: Vec<u32>,
    /// End of each line's text in `text`; it starts where the previous ends.
    ends: Vec<usize>,
    text: String,
    /// Lines kept after a later one: a reader may keep a line above the
    /// one it is on. Inserting them into the arena would move its tail each
    /// time (quadratic on an input full of them), so they wait here.
    late: BTreeMap<u32, String>,
}

impl KeptLines {
    /// Keeps line `n`; keeping a line again changes nothing.
    pub fn push(&mut self, n: u32, text: &str) {
        match self.numbers.last() {
            Some(&last) if last >= n => {
                if last > n && self.numbers.binary_search(&n).is_err() {
                    self.late.entry(n).or_insert_with(|| text.to_owned());
                }
            }
            _ => {
                self.text.push_str(text);
                self.numbers.push(n);
                self.ends.push(self.text.len());
            }
        }
    }

    pub fn get(&self, n: u32) -> Option<&str> {
        match self.numbers.binary_search(&n) {
            Ok(i) => {
                let start = if i == 0 { 0 } else { self.ends[i - 1] };
                self.text.get(start..self.ends[i])
            }
            Err(_) => self.late.get(&n).map(String::as_str),
        }
    }

    pub fn len(&self) -> usize {
        self.numbers.len() + self.late.len()
    }

    /// Forgets lines `first..=last` (a reader found them repeats it only
    /// counts) and appends them to `text`, each line's number and end in
    /// `text` to `lines`, so that the reader may keep them again.
    pub fn forget_into(
        &mut self,
        first: u32,
        last: u32,
        text: &mut String,
        lines: &mut Vec<(u32, usize)>,
    ) {
        let lo = self.numbers.partition_point(|&n| n < first);
        let hi = self.numbers.partition_point(|&n| n <= last);
        if lo < hi {
            let start = if lo == 0 { 0 } else { self.ends[lo - 1] };
            let end = self.ends[hi - 1];
            for i in lo..hi {
                lines.push((self.numbers[i], text.len() + self.ends[i] - start));
            }
            text.push_str(&self.text[start..end]);
            self.text.replace_range(start..end, "");
            self.numbers.drain(lo..hi);
            self.ends.drain(lo..hi);
            for e in &mut self.ends[lo..] {
                *e -= end - start;
            }
        }
        if self.late.range(first..=last).next().is_some() {
            let late: Vec<u32> = self.late.range(first..=last).map(|(&n, _)| n).collect();
            for n in late {
                if let Some(t) = self.late.remove(&n) {
                    text.push_str(&t);
                    lines.push((n, text.len()));
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty() && self.late.is_empty()
    }

    /// Every line, in order: the arena and the late lines merged.
    fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        let arena = self.numbers.iter().enumerate().map(|(i, &n)| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            (n, &self.text[start..self.ends[i]])
        });
        let late = self.late.iter().map(|(&n, t)| (n, t.as_str()));
        merge_by_number(arena, late)
    }

    /// The union of both, in order.
    pub fn merge(&mut self, other: KeptLines) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = other;
            return;
        }
        let mut merged = KeptLines::default();
        let mine = std::mem::take(self);
        for (n, t) in merge_by_number(mine.iter(), other.iter()) {
            merged.push(n, t);
        }
        *self = merged;
    }
}

/// Two increasing sequences of lines as one; a number in both comes once,
/// from `a`.
fn merge_by_number<'t>(
    a: impl Iterator<Item = (u32, &'t str)>,
    b: impl Iterator<Item = (u32, &'t str)>,
) -> impl Iterator<Item = (u32, &'t str)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 <= y.0 => {
            if x.0 == y.0 {
                b.next();
            }
            a.next()
        }
        (_, Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_merged_and_kept_once() {
        let mut a = KeptLines::default();
        a.push(2, "two");
        a.push(5, "five");
        a.push(5, "five");
        a.push(3, "three");
        assert_eq!(a.get(3), Some("three"));
        assert_eq!(a.get(4), None);
        let mut b = KeptLines::default();
        b.push(1, "one");
        b.push(5, "five");
        b.push(9, "");
        a.merge(b);
        let all: Vec<(u32, &str)> = a.iter().collect();
        assert_eq!(
            all,
            vec![(1, "one"), (2, "two"), (3, "three"), (5, "five"), (9, "")]
        );
    }
}
