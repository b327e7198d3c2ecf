//! A Python traceback cut inside the frame that binds the server's socket
//! (`self.socket.bind(self.server_address)`, then nothing but deeper frames:
//! the paste ends before the exception's own line). The line says a bind
//! failed, not why; it counts only where the same console showed, before
//! it, the port a server of its own served or was about to bind (Python's
//! `Serving HTTP on 0.0.0.0 port 8000 ...`): a second start on a port that
//! an instance already holds.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::listen::ListenFailure;
use crate::source::Span;

/// A traceback's source line that binds a socket.
const BIND: &str = ".bind(";
/// A traceback's frame header.
const FRAME: &str = "File \"";

/// The cut bind's line, with the port the console gave before it
/// (`served(first)`: the port a line before `first`, in its input, says
/// was served or about to be bound).
pub(super) fn failure<'a>(
    incident: &'a Incident,
    served: impl Fn(Span) -> Option<String>,
) -> Option<ListenFailure<'a>> {
    let messages = &incident.facts.messages;
    let m = messages.iter().find(|m| {
        let code = m.text.trim_start();
        code.contains(BIND) && !code.starts_with(FRAME) && cut_after(messages, m.span)
    })?;
    let port = served(m.span)?;
    Some(ListenFailure {
        message: m,
        port: Some(port),
        cut: true,
        unsaid: false,
    })
}

/// Whether nothing but deeper frames follows `span` in its input: the
/// traceback was cut before its exception.
fn cut_after(messages: &[Message], span: Span) -> bool {
    messages
        .iter()
        .filter(|m| m.span.source == span.source && m.span > span)
        .all(|m| m.text.trim_start().starts_with(FRAME))
}
