//! The terminal's styles, named by what they mark, as anstyle values
//! (clap draws its help with the same crate). Whether to use them at all is
//! decided once, in `run.rs`, and reaches the renderers as
//! [`super::RenderOptions::color`].

use anstyle::{AnsiColor, Style};

const fn fg(color: AnsiColor) -> Style {
    Style::new().fg_color(Some(anstyle::Color::Ansi(color)))
}

pub const BOLD: Style = Style::new().bold();
pub const DIM: Style = Style::new().dimmed();
pub const RED: Style = fg(AnsiColor::Red);
pub const GREEN: Style = fg(AnsiColor::Green);
pub const YELLOW: Style = fg(AnsiColor::Yellow);
pub const CYAN: Style = fg(AnsiColor::Cyan);
pub const BOLD_RED: Style = RED.bold();
pub const BOLD_YELLOW: Style = YELLOW.bold();
pub const BOLD_CYAN: Style = CYAN.bold();
/// Line numbers and the excerpt frame, as rustc draws them.
pub const GUTTER: Style = fg(AnsiColor::Blue).bold();

/// `text` in `style` (reset after it), or as it is without colour; empty
/// text gets no escape sequences.
pub fn paint(color: bool, style: Style, text: &str) -> String {
    if color && !text.is_empty() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_sgr_sequences_reset_after_the_text() {
        assert_eq!(paint(true, BOLD, "x"), "\x1b[1mx\x1b[0m");
        assert_eq!(paint(true, BOLD_RED, "x"), "\x1b[1m\x1b[31mx\x1b[0m");
        assert_eq!(paint(true, GUTTER, ""), "");
        assert_eq!(paint(false, BOLD_RED, "x"), "x");
    }
}
