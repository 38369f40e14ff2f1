//! HAProxy's lexical rules (configuration.txt section 2.2, `parse_line` in
//! HAProxy 2.6): words separated by blanks, `#` starts a comment, a
//! backslash escapes one character (`\ `, `\#`, `\\`, `\'`, `\"`, and `\t`,
//! `\n`, `\r`, `\xNN`), double quotes keep blanks and `#` but still process
//! escapes (and environment variables, which the importer leaves as
//! written), single quotes keep everything. Quoted and unquoted parts of
//! one word join up (`"a b"'c'd` is one word). There is no line
//! continuation: a backslash at the end of a line is a word of its own and
//! the next line is a directive of its own (HAProxy then rejects both).

use super::{Kind, Note};

/// One directive: its 1-based line number and its words, unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub number: usize,
    pub words: Vec<String>,
}

impl Line {
    /// The directive's keyword (first word).
    pub fn keyword(&self) -> &str {
        &self.words[0]
    }

    /// The word at `i`, or "" past the end.
    pub fn word(&self, i: usize) -> &str {
        self.words.get(i).map_or("", String::as_str)
    }
}

#[derive(PartialEq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Splits a configuration into directives (blank and comment-only lines
/// dropped). Lines HAProxy itself would refuse to read (an unterminated
/// quote) are dropped with a note; a trailing backslash is noted.
pub fn lex(text: &str) -> (Vec<Line>, Vec<Note>) {
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        match split(raw) {
            Ok((mut words, env)) => {
                if words.is_empty() {
                    continue;
                }
                if let Some(var) = env {
                    notes.push(Note::new(
                        number,
                        &words[0],
                        Kind::Approximated,
                        format!("environment variable `${var}` is kept as written (rdmalb import does not expand it)"),
                    ));
                }
                if raw.trim_end().ends_with('\\') && words.last().is_some_and(|w| w == "\\") {
                    words.pop();
                    notes.push(Note::new(
                        number,
                        words.first().map_or("\\", String::as_str),
                        Kind::Unsupported,
                        "the line ends in a backslash, which HAProxy does not read as a line continuation (it has none): the next line is a directive of its own; imported without the backslash".into(),
                    ));
                }
                if !words.is_empty() {
                    lines.push(Line { number, words });
                }
            }
            Err(why) => notes.push(Note::new(
                number,
                raw.split_whitespace().next().unwrap_or(""),
                Kind::Routing,
                format!("line ignored: {why}"),
            )),
        }
    }
    (lines, notes)
}

/// The words of one line, and the first environment variable named in
/// double quotes (if any).
fn split(line: &str) -> Result<(Vec<String>, Option<String>), String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote = Quote::None;
    let mut env = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                } else {
                    word.push(c);
                }
            }
            Quote::Double | Quote::None => {
                match c {
                    '"' if quote == Quote::Double => quote = Quote::None,
                    '"' => {
                        quote = Quote::Double;
                        in_word = true;
                    }
                    '\'' if quote == Quote::None => {
                        quote = Quote::Single;
                        in_word = true;
                    }
                    ' ' | '\t' if quote == Quote::None => {
                        if in_word {
                            words.push(std::mem::take(&mut word));
                            in_word = false;
                        }
                    }
                    '#' if quote == Quote::None => break,
                    '\\' => {
                        in_word = true;
                        match chars.next() {
                            Some(e @ (' ' | '#' | '\\' | '\'' | '"' | '$')) => word.push(e),
                            Some('t') => word.push('\t'),
                            Some('n') => word.push('\n'),
                            Some('r') => word.push('\r'),
                            Some('x') => {
                                let hex: String = (0..2).filter_map(|_| chars.next()).collect();
                                match u8::from_str_radix(&hex, 16) {
                                Ok(b) if hex.len() == 2 => word.push(char::from(b)),
                                _ => return Err(format!("`\\x{hex}` is not an escape (expected \\x and two hex digits)")),
                            }
                            }
                            Some(other) => {
                                word.push('\\');
                                word.push(other);
                            }
                            None => word.push('\\'),
                        }
                    }
                    '$' if quote == Quote::Double => {
                        word.push('$');
                        if env.is_none() {
                            let name: String = chars
                                .clone()
                                .skip_while(|&c| c == '{')
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect();
                            if !name.is_empty() {
                                env = Some(name);
                            }
                        }
                    }
                    _ => {
                        in_word = true;
                        word.push(c);
                    }
                }
            }
        }
    }
    if quote != Quote::None {
        return Err("unterminated quote (HAProxy refuses the line)".into());
    }
    if in_word {
        words.push(word);
    }
    Ok((words, env))
}
