//! The lines of a streamed input that a fact or a message needs, kept
//! during the one pass over it: the side table [`crate::render::Report`]
//! resolves evidence from. One arena of text, not a string per line.

/// Cleaned lines by number, in increasing order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct KeptLines {
    numbers: Vec<u32>,
    /// End of each line's text in `text`; it starts where the previous ends.
    ends: Vec<usize>,
    text: String,
}

impl KeptLines {
    /// Keeps line `n`; lines come in increasing order, and keeping the
    /// last one again changes nothing.
    pub fn push(&mut self, n: u32, text: &str) {
        match self.numbers.last() {
            Some(&last) if last >= n => {
                if last > n {
                    // Out of order: find its place (rare, never in one pass).
                    if let Err(i) = self.numbers.binary_search(&n) {
                        let mut rest = self.split_off(i);
                        self.push(n, text);
                        self.append(&mut rest);
                    }
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
        let i = self.numbers.binary_search(&n).ok()?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..self.ends[i])
    }

    pub fn len(&self) -> usize {
        self.numbers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.numbers.iter().enumerate().map(|(i, &n)| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            (n, &self.text[start..self.ends[i]])
        })
    }

    fn split_off(&mut self, i: usize) -> KeptLines {
        let mut rest = KeptLines::default();
        for (n, t) in self.iter().skip(i) {
            rest.push(n, t);
        }
        let cut = if i == 0 { 0 } else { self.ends[i - 1] };
        self.numbers.truncate(i);
        self.ends.truncate(i);
        self.text.truncate(cut);
        rest
    }

    fn append(&mut self, other: &mut KeptLines) {
        for (n, t) in other.iter() {
            self.push(n, t);
        }
        *other = KeptLines::default();
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
        let (mut a, mut b) = (mine.iter().peekable(), other.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 <= y.0 => {
                    if x.0 == y.0 {
                        b.next();
                    }
                    a.next()
                }
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => break,
            };
            if let Some((n, t)) = next {
                merged.push(n, t);
            }
        }
        *self = merged;
    }
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
