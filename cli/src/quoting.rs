//! Splitting an `--mcp 'command args'` value into words with shell quoting, as the seed runner does:
//! `'…'` is literal, `"…"` allows backslash escapes, a backslash outside quotes escapes the next
//! character, and an unterminated quote is an error. No variables, globs or operators: anything fancier
//! goes in `[mcp.servers.NAME]`.

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuoteError {
    #[error("unterminated {0} quote")]
    Unterminated(&'static str),
    #[error("a backslash at the end escapes nothing")]
    TrailingBackslash,
    #[error("no command")]
    Empty,
}

/// The words of `line`.
///
/// # Errors
/// An unterminated quote, a trailing backslash, or no word at all.
pub fn split(line: &str) -> Result<Vec<String>, QuoteError> {
    let mut words = Vec::new();
    // `Some` once the current word has begun: `''` is an empty word, not no word.
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(QuoteError::Unterminated("single")),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        // As in a POSIX shell: inside double quotes a backslash escapes only these.
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(QuoteError::Unterminated("double")),
                        },
                        Some(c) => w.push(c),
                        None => return Err(QuoteError::Unterminated("double")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(QuoteError::TrailingBackslash),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        return Err(QuoteError::Empty);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(ok("python3 weather_server.py"), ["python3", "weather_server.py"]);
        assert_eq!(ok("  npx   -y @mcp/server-filesystem . "), ["npx", "-y", "@mcp/server-filesystem", "."]);
        assert_eq!(ok("python3 'my dir/s.py'"), ["python3", "my dir/s.py"]);
        assert_eq!(ok(r#"echo "a \"b\" c" 'd\e'"#), ["echo", r#"a "b" c"#, r"d\e"]);
        assert_eq!(ok(r#"echo "C:\dir" \$HOME a\ b"#), ["echo", r"C:\dir", "$HOME", "a b"]);
        assert_eq!(ok("a'b c'd ''"), ["ab cd", ""]);
    }

    #[test]
    fn refuses_what_a_shell_would_not_run() {
        assert_eq!(split("python3 'my dir/s.py"), Err(QuoteError::Unterminated("single")));
        assert_eq!(split("python3 \"s.py"), Err(QuoteError::Unterminated("double")));
        assert_eq!(split("python3 s.py\\"), Err(QuoteError::TrailingBackslash));
        assert_eq!(split("   "), Err(QuoteError::Empty));
    }
}
