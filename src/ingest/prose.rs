//! Whether a line reads as a sentence a person wrote ([`is_prose`]), a
//! heading they put over a paste ([`is_heading`]) or a note they added to
//! it ([`is_annotation`]): asked by the
//! recognisers and by the table reader, which stops a table at prose. A
//! leaf, words and punctuation only.

/// Words a sentence of English almost always has one of.
const FUNCTION_WORDS: &[&str] = &[
    "a", "above", "after", "am", "an", "and", "any", "are", "at", "be", "before", "below", "but",
    "can", "did", "do", "does", "for", "get", "got", "had", "has", "have", "here", "how", "i",
    "i'm", "i've", "if", "in", "is", "it", "it's", "my", "of", "on", "or", "our", "please",
    "thanks", "that", "the", "there", "this", "to", "was", "we", "what", "when", "why", "with",
    "you",
];

/// The longest of [`FUNCTION_WORDS`], in bytes.
const LONGEST_FUNCTION_WORD: usize = 6;

/// [`FUNCTION_WORDS`] as numbers ([`packed`]): a word is looked up by
/// comparing one number with each, not its bytes with each word's.
const PACKED_FUNCTION_WORDS: [u64; FUNCTION_WORDS.len()] = {
    let mut packed_words = [0; FUNCTION_WORDS.len()];
    let mut i = 0;
    while i < FUNCTION_WORDS.len() {
        packed_words[i] = packed(FUNCTION_WORDS[i]);
        i += 1;
    }
    packed_words
};

/// The bytes of an ASCII word of at most eight, lowercased, as one number.
const fn packed(word: &str) -> u64 {
    let bytes = word.as_bytes();
    let mut n = 0u64;
    let mut i = 0;
    while i < bytes.len() && i < 8 {
        n |= (bytes[i].to_ascii_lowercase() as u64) << (8 * i);
        i += 1;
    }
    n
}

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
    let machine = |c: char| {
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
    };
    // Byte by byte (every such character but the C1 controls is ASCII),
    // character by character only where a byte is not ASCII.
    if text.bytes().any(|b| b.is_ascii() && machine(char::from(b)))
        || (!text.is_ascii() && text.contains(machine))
    {
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
            function = function || is_function_word(word);
        }
    }
    words >= 2 && function
}

/// Whether `word` is one of [`FUNCTION_WORDS`] in any case: an ASCII word
/// compared as it is (no lowercase copy of every word of every unknown
/// line), another lowercased first (the Kelvin sign is a `k`).
fn is_function_word(word: &str) -> bool {
    if word.is_ascii() {
        word.len() <= LONGEST_FUNCTION_WORD && PACKED_FUNCTION_WORDS.contains(&packed(word))
    } else {
        FUNCTION_WORDS.contains(&word.to_lowercase().as_str())
    }
}

/// Whether `text` is a note a person added to a paste as a shell or C
/// comment (`# meanwhile, output in /var/log/syslog`, `// In the HOST`):
/// what follows `# ` or `// ` reads as prose ([`is_prose`]) once the paths
/// in it are taken for words. A program's own `# GPU blocks: 1478` and a
/// commented command are not.
pub fn is_annotation(text: &str) -> bool {
    let text = text.trim_start();
    let Some(note) = text.strip_prefix("# ").or_else(|| text.strip_prefix("// ")) else {
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

/// Whether `text` is a heading a person put over the output they pasted
/// (`Error Log:`, `orphaned procs:`, `Command：` with CJK typing's
/// full-width colon): two or three words of letters (one before a
/// full-width colon) and nothing after the colon, at the start of its
/// line. A program's `Label: value` has a value; its
/// headings are indented or carry its own tokens (`Traceback (most recent
/// call last):`, `[setup] nvidia-smi -L:`).
pub fn is_heading(text: &str) -> bool {
    let text = text.trim_end();
    let (label, wide) = match text.strip_suffix('\u{ff1a}') {
        Some(label) => (label, true),
        None => match text.strip_suffix(':') {
            Some(label) => (label, false),
            None => return false,
        },
    };
    // One word and a colon is how programs open a block too (kubectl
    // describe's `Events:`, `Containers:`); a person's one-word heading
    // counts only with the full-width colon no program prints.
    if !wide && !label.contains(' ') {
        return false;
    }
    if label.len() > 32 || !label.starts_with(|c: char| c.is_alphabetic()) {
        return false;
    }
    let words: Vec<&str> = label.split(' ').collect();
    // An identifier (`ValueError:`, an exception without its message) is code.
    let camel = |w: &str| {
        w.as_bytes()
            .windows(2)
            .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
    };
    (1..=3).contains(&words.len())
        && words
            .iter()
            .all(|w| w.chars().count() >= 2 && w.chars().all(char::is_alphabetic) && !camel(w))
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
    // `...`, `…`, and dots with spaces between (`... ...`: rows left out).
    let dots = inner.chars().filter(|c| is_dot(*c)).count();
    let ellipsis = !inner.is_empty()
        && inner.chars().all(|c| is_dot(c) || c == ' ')
        && (inner.contains('…') || dots >= 3);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_words_are_told_in_any_case() {
        for word in FUNCTION_WORDS {
            assert!(word.len() <= LONGEST_FUNCTION_WORD, "{word}");
            assert_eq!(*word, word.to_lowercase(), "{word}");
            assert!(is_function_word(word), "{word}");
            assert!(is_function_word(&word.to_uppercase()), "{word}");
        }
        // U+212A KELVIN SIGN lowercases to `k`, as `to_lowercase` read it.
        assert!(is_function_word("THAN\u{212A}S"));
        assert!(!is_function_word("thanksgiving"));
        assert!(!is_function_word("théirs"));
        // A C1 control is a control, as a C0 one is.
        assert!(is_prose("Here is what I get"));
        assert!(!is_prose("Here is what I\u{85}get"));
        assert!(!is_prose("Here is what I\u{7}get"));
    }
}
