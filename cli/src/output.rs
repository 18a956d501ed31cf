//! What goes to stdout: the answer, flushed as it streams, always ending with a newline; and the
//! plain-text tables of the listing commands.

use std::io::Write as _;

/// Stdout for answers. Write errors (a closed pipe) are ignored: the exit status still says what happened.
#[derive(Debug)]
pub struct Stdout {
    at_line_start: bool,
}

impl Default for Stdout {
    fn default() -> Self {
        Self { at_line_start: true }
    }
}

impl Stdout {
    pub fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    /// `text` and a newline, unless it already ends with one.
    pub fn line(&mut self, text: &str) {
        self.write(text);
        self.end_line();
    }

    /// Ends the current line if something is on it.
    pub fn end_line(&mut self) {
        if !self.at_line_start {
            self.write("\n");
        }
    }
}

/// Columns padded to their widest cell; the last column is not padded.
#[must_use]
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count()) + 2;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    }
    out
}

/// A JSON value for scripts (`--output json`), pretty-printed.
pub fn json(value: &serde_json::Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    Stdout::default().line(&text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_line_up() {
        let rows = vec![vec!["smollm2".to_owned(), "yes".to_owned()], vec!["a-much-longer-model".to_owned(), "no".to_owned()]];
        assert_eq!(table(&["MODEL", "READY"], &rows), "MODEL                READY\nsmollm2              yes\na-much-longer-model  no\n");
    }
}
