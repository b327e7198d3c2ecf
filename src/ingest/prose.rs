//! Whether a line reads as a sentence a person wrote ([`is_prose`]) or as a
//! note they added to a paste ([`is_annotation`]): asked by the
//! recognisers and by the table reader, which stops a table at prose. A
//! leaf, words and punctuation only.

/// Words a sentence of English almost always has one of.
const FUNCTION_WORDS: &[&str] = &[
    "a", "an", "the", "i", "i'm", "i've", "we", "you", "my", "our", "it", "it's", "this", "that",
    "is", "are", "was", "am", "be", "to", "of", "in", "on", "at", "for", "with", "and", "but",
    "or", "if", "when", "after", "before", "any", "what", "why", "how", "here", "there", "get",
    "got", "have", "has", "had", "can", "do", "does", "did", "please", "thanks", "below", "above",
];

/// Whether `text` reads as a sentence a person wrote between outputs
/// ("After running the command below I get:", "Any ideas?"): conservative,
/// words and sentence punctuation only, at least one function word, and no
/// machine token (times, `key=value`, paths, hex, `[pid]`, table rules,
/// brackets, sizes). Only asked of lines no recogniser knew.
pub fn is_prose(text: &str) -> bool {
    let text = text.trim();
    if text.len() < 4 || text.len() > 400 {
        return false;
    }
    // Machine output starts indented or with a symbol; people with a letter.
    if !text.starts_with(|c: char| c.is_alphabetic()) {
        return false;
    }
    if text.contains(|c: char| {
        matches!(
            c,
            '=' | '|'
                | '/'
                | '\\'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '('
                | ')'
                | '_'
                | '@'
                | '#'
                | '$'
                | '%'
                | '*'
                | '`'
                | '\t'
        ) || c.is_control()
    }) {
        return false;
    }
    // `Label: value` is how programs print; `ValueError: …` above all.
    if text
        .split_whitespace()
        .next()
        .is_some_and(|first| first.ends_with(':'))
    {
        return false;
    }
    let mut words = 0;
    let mut function = false;
    for token in text.split_whitespace() {
        let word = token
            .trim_start_matches(['"', '\''])
            .trim_end_matches(['.', ',', ':', ';', '!', '?', '"', '\'']);
        if word.is_empty() {
            continue;
        }
        let alphabetic = word
            .chars()
            .all(|c| c.is_alphabetic() || c == '\'' || c == '-');
        // A plain small number ("2 GPUs") is fine; 09:38, 0x1f, 12.5GiB are not.
        let number = word.len() <= 4 && word.chars().all(|c| c.is_ascii_digit());
        // An identifier (`camelCase`, `NcclError`) is code, not prose.
        let camel = word
            .as_bytes()
            .windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
        if (!alphabetic && !number) || camel {
            return false;
        }
        if alphabetic {
            words += 1;
            let lower = word.to_lowercase();
            function |= FUNCTION_WORDS.contains(&lower.as_str());
        }
    }
    words >= 2 && function
}

/// Whether `text` is a note a person added to a paste as a shell comment
/// (`# meanwhile, output in /var/log/syslog`): what follows `# ` reads as
/// prose ([`is_prose`]) once the paths in it are taken for words. A
/// program's own `# GPU blocks: 1478` and a commented command are not.
pub fn is_annotation(text: &str) -> bool {
    let Some(note) = text.trim_start().strip_prefix("# ") else {
        return false;
    };
    let words: Vec<&str> = note
        .split_whitespace()
        .map(|token| {
            let bare = token.trim_end_matches(['.', ',', ':', ';', '!', '?']);
            let path = (bare.starts_with('/') || bare.starts_with("~/"))
                && bare.len() > 1
                && bare
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '-' | '_' | '~'));
            if path { "path" } else { token }
        })
        .collect();
    is_prose(&words.join(" "))
}

/// Whether `text` is a mark a person left where they cut or hid part of a
/// paste: an ellipsis alone (`...`, `…`, `[...]`, `(...)`, `<...>`), a
/// `snip` or `truncated` note in brackets, or a redaction made of one
/// letter or symbol repeated (`xxxxxxxxx`, `XXXX`, `****`). Machine output
/// does not print these alone on a line.
pub fn is_elision(text: &str) -> bool {
    let t = text.trim();
    let bracketed = [("[", "]"), ("(", ")"), ("<", ">")]
        .iter()
        .find_map(|(open, close)| t.strip_prefix(open)?.strip_suffix(close));
    let inner = bracketed.unwrap_or(t).trim();
    let is_dot = |c: char| c == '.' || c == '…';
    let ellipsis =
        !inner.is_empty() && inner.chars().all(is_dot) && (inner.contains('…') || inner.len() >= 3);
    // `[snip]`, `<truncated>`, `...snip...`: a note in brackets or dots.
    let word = inner.trim_matches(|c: char| is_dot(c) || c == ' ');
    let note = (bracketed.is_some() || word.len() < inner.len())
        && ["snip", "snipped", "truncated", "cut", "omitted", "redacted"]
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w));
    let redaction =
        t.len() >= 3 && (t.bytes().all(|b| b == b'x' || b == b'X') || t.bytes().all(|b| b == b'*'));
    ellipsis || note || redaction
}
