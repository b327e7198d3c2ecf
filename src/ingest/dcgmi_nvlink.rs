//! `dcgmi nvlink --link-status` (`-s`), as NVIDIA/DCGM's
//! `dcgmi/Nvlink.cpp` (`DisplayNvLinkLinkStatus`) prints it: a one-cell
//! box titled `NvLink Link Status`, then `GPUs:` with a `gpuId N:` line per
//! GPU and its links' letters on the next line (`D D D … D`, one per link
//! of `DCGM_NVLINK_MAX_LINKS_PER_GPU`), then `NvSwitches:` with
//! `physicalId N:` and its letters, or `No NvSwitches found.`, and the key
//! `Key: Up=U, Down=D, Disabled=X, Not Supported=_`. With `-e`
//! (`showEntityIds`) each row is followed by `Link Entities: …`. Each row
//! of letters becomes an [`NvlinkStates`].
//!
//! Real output: NVIDIA/DCGM#198 (two H100 NVL, every link `D`),
//! NVIDIA/dcgm-exporter#576 (eight H100 80GB HBM3, every link `U`).

use crate::model::{Facts, NvlinkStates};
use crate::source::Span;

/// The box being read: its title row, the section and the entity whose
/// letters come next.
#[derive(Debug, Clone, Copy)]
pub(super) struct NvlinkBox {
    title: Span,
    switches: bool,
    entity: Option<u32>,
}

/// Whether `t` (trimmed) is the box's title row.
pub(super) fn is_title(t: &str) -> bool {
    t.strip_prefix('|')
        .and_then(|r| r.strip_suffix('|'))
        .is_some_and(|r| r.trim() == "NvLink Link Status")
}

/// `gpuId 3:` or `physicalId 9:` (trimmed): the entity's id.
fn entity(t: &str, switches: bool) -> Option<u32> {
    let key = if switches { "physicalId " } else { "gpuId " };
    t.strip_prefix(key)?.strip_suffix(':')?.parse().ok()
}

/// `U U D _`: one letter per link, a space between.
fn letters(t: &str) -> Option<String> {
    let mut out = String::new();
    for (i, c) in t.chars().enumerate() {
        match (i % 2, c) {
            (0, 'U' | 'D' | 'X' | '_') => out.push(c),
            (1, ' ') => {}
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

impl NvlinkBox {
    /// Opens a box at its title row.
    pub(super) fn open(title: Span) -> Self {
        NvlinkBox {
            title,
            switches: false,
            entity: None,
        }
    }

    /// Reads one line (`t` trimmed) of the box: `Some(true)` a line of it,
    /// `Some(false)` its last line (the key), `None` a line that is not
    /// the box's (the box is over).
    pub(super) fn feed(&mut self, t: &str, span: Span, facts: &mut Facts) -> Option<bool> {
        if t.starts_with("Key: Up=U, Down=D") {
            return Some(false);
        }
        match t {
            "" | "GPUs:" | "No GPUs found." | "No NvSwitches found." => return Some(true),
            "NvSwitches:" => {
                self.switches = true;
                self.entity = None;
                return Some(true);
            }
            _ => {}
        }
        if t.starts_with('+') && t.ends_with('+') && t.trim_matches(['+', '-']).is_empty() {
            return Some(true);
        }
        if t.starts_with("Link Entities: ") {
            return Some(true);
        }
        if let Some(id) = entity(t, self.switches) {
            self.entity = Some(id);
            return Some(true);
        }
        let id = self.entity?;
        let states = letters(t)?;
        facts.nvlink_states.push(NvlinkStates {
            title: self.title,
            span,
            switch: self.switches,
            id,
            states,
        });
        self.entity = None;
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    /// NVIDIA/DCGM#198, verbatim.
    const DCGM_198: &str = "+----------------------+
|  NvLink Link Status  |
+----------------------+
GPUs:
    gpuId 0:
        D D D D D D D D D D D D D D D D D D
    gpuId 1:
        D D D D D D D D D D D D D D D D D D
NvSwitches:
    No NvSwitches found.

Key: Up=U, Down=D, Disabled=X, Not Supported=_
";

    fn read(text: &str) -> (Facts, usize) {
        let mut facts = Facts::default();
        let mut open: Option<NvlinkBox> = None;
        let mut read = 0;
        for (i, line) in text.lines().enumerate() {
            let span = Span {
                source: SourceId(0),
                line: i as u32 + 1,
            };
            let t = line.trim();
            if is_title(t) {
                open = Some(NvlinkBox::open(span));
                read += 1;
                continue;
            }
            if let Some(b) = open.as_mut() {
                match b.feed(t, span, &mut facts) {
                    Some(true) => read += 1,
                    Some(false) => {
                        read += 1;
                        open = None;
                    }
                    None => open = None,
                }
            }
        }
        (facts, read)
    }

    #[test]
    fn every_row_of_the_box_is_read() {
        let (facts, read) = read(DCGM_198);
        // Every line but the border above the title.
        assert_eq!(read, DCGM_198.lines().count() - 1);
        let rows = &facts.nvlink_states;
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].id, rows[0].switch), (0, false));
        assert_eq!(rows[1].id, 1);
        assert_eq!(rows[1].count('D'), 18);
        assert_eq!(rows[1].span.line, 8);
        assert_eq!(rows[0].title.line, 2);
    }

    #[test]
    fn letters_and_not_words() {
        assert_eq!(letters("U U D _ X").as_deref(), Some("UUD_X"));
        assert_eq!(letters("D D"), Some("DD".to_owned()));
        assert_eq!(letters("Down"), None);
        assert_eq!(letters("UU"), None);
        assert_eq!(entity("gpuId 12:", false), Some(12));
        assert_eq!(entity("physicalId 9:", true), Some(9));
        assert_eq!(entity("physicalId 9:", false), None);
    }
}
