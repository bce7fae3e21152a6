//! The Markdown being written: blocks separated by blank lines, list items
//! by single newlines, tables as one line per row; capped at
//! `max_output_bytes` (a failure past it, never a silent truncation).

use crate::error::ExtractError;
use crate::limits::Limits;

/// What was written last, for the separator the next block needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    Block,
    ListItem,
}

/// Markdown being written, within its byte budget.
#[derive(Debug)]
pub(crate) struct Markdown {
    text: String,
    max: usize,
    last: Last,
}

impl Markdown {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            text: String::new(),
            max: usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX),
            last: Last::Nothing,
        }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.text.len()
    }

    /// Bytes that may still be written.
    pub(crate) fn room(&self) -> usize {
        self.max.saturating_sub(self.text.len())
    }

    /// A paragraph (or any block), after a blank line. Empty text adds nothing.
    pub(crate) fn block(&mut self, text: &str) -> Result<(), ExtractError> {
        let text = text.trim_matches(['\n', ' ', '\r']);
        if text.is_empty() {
            return Ok(());
        }
        self.separate(Last::Block)?;
        self.push(text)
    }

    /// A heading of `level` (1 to 6, clamped), on one line.
    pub(crate) fn heading(&mut self, level: usize, text: &str) -> Result<(), ExtractError> {
        let text = one_line(text);
        if text.is_empty() {
            return Ok(());
        }
        self.separate(Last::Block)?;
        let hashes = "######";
        let level = level.clamp(1, 6);
        self.push(hashes.get(..level).unwrap_or(hashes))?;
        self.push(" ")?;
        self.push(&text)
    }

    /// A list item at nesting `level` (0 for the outermost), on one line.
    pub(crate) fn list_item(&mut self, level: usize, text: &str) -> Result<(), ExtractError> {
        let text = one_line(text);
        if text.is_empty() {
            return Ok(());
        }
        self.separate(Last::ListItem)?;
        for _ in 0..level.min(8) {
            self.push("  ")?;
        }
        self.push("- ")?;
        self.push(&text)
    }

    /// A table: one line per row, `|---|` after the first; cells flattened
    /// to one line with their pipes escaped. Columns empty in every row
    /// at the right, and empty rows at the end, are dropped.
    pub(crate) fn table(&mut self, rows: &[Vec<String>]) -> Result<(), ExtractError> {
        let table = render_table(rows);
        if table.is_empty() {
            return Ok(());
        }
        self.separate(Last::Block)?;
        self.push(&table)
    }

    /// One table row of `width` cells, already flattened and escaped.
    pub(crate) fn table_row(&mut self, cells: &[String], width: usize) -> Result<(), ExtractError> {
        self.push("|")?;
        for index in 0..width {
            match cells.get(index).map(String::as_str) {
                Some(cell) if !cell.is_empty() => {
                    self.push(" ")?;
                    self.push(cell)?;
                    self.push(" |")?;
                }
                _ => self.push(" |")?,
            }
        }
        Ok(())
    }

    /// Starts a table written row by row ([`table_row`](Self::table_row),
    /// [`table_separator`](Self::table_separator), [`newline`](Self::newline)).
    pub(crate) fn start_table(&mut self) -> Result<(), ExtractError> {
        self.separate(Last::Block)
    }

    /// The `|---|` line under a table's first row.
    pub(crate) fn table_separator(&mut self, width: usize) -> Result<(), ExtractError> {
        self.push("\n|")?;
        for _ in 0..width {
            self.push("---|")?;
        }
        Ok(())
    }

    /// A line break (between table rows).
    pub(crate) fn newline(&mut self) -> Result<(), ExtractError> {
        self.push("\n")
    }

    /// The text, ending with one newline (empty if nothing was written).
    pub(crate) fn finish(mut self) -> String {
        let end = self.text.trim_end().len();
        self.text.truncate(end);
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text
    }

    fn separate(&mut self, next: Last) -> Result<(), ExtractError> {
        let separator = match (self.last, next) {
            (Last::Nothing, _) => "",
            (Last::ListItem, Last::ListItem) => "\n",
            _ => "\n\n",
        };
        self.last = next;
        self.push(separator)
    }

    /// Appends `text` without its control characters (but newlines and
    /// tabs), or fails once the budget would be passed.
    fn push(&mut self, text: &str) -> Result<(), ExtractError> {
        if self.text.len().saturating_add(text.len()) > self.max {
            return Err(too_large(self.max));
        }
        if text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            self.text.extend(
                text.chars()
                    .filter(|c| !c.is_control() || *c == '\n' || *c == '\t'),
            );
        } else {
            self.text.push_str(text);
        }
        Ok(())
    }
}

/// A table as Markdown (see [`Markdown::table`]); empty if it has no text.
pub(crate) fn render_table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| table_cell(cell)).collect())
        .collect();
    let width = rows
        .iter()
        .map(|row| {
            row.iter()
                .rposition(|cell| !cell.is_empty())
                .map_or(0, |i| i + 1)
        })
        .max()
        .unwrap_or(0);
    let height = rows
        .iter()
        .rposition(|row| row.iter().any(|cell| !cell.is_empty()))
        .map_or(0, |i| i + 1);
    let mut out = String::new();
    if width == 0 {
        return out;
    }
    for (index, row) in rows.iter().take(height).enumerate() {
        if index > 0 {
            out.push('\n');
        }
        out.push('|');
        for column in 0..width {
            match row.get(column).map(String::as_str) {
                Some(cell) if !cell.is_empty() => {
                    out.push(' ');
                    out.push_str(cell);
                    out.push_str(" |");
                }
                _ => out.push_str(" |"),
            }
        }
        if index == 0 {
            out.push_str("\n|");
            for _ in 0..width {
                out.push_str("---|");
            }
        }
    }
    out
}

/// The failure for text past `max` bytes.
pub(crate) fn too_large(max: usize) -> ExtractError {
    ExtractError::TooLarge(format!(
        "the document's text is longer than {max} bytes, the most that may be given at once; \
         it is too large to be read whole"
    ))
}

/// `text` on one line: line breaks and tabs as spaces, runs of spaces as one.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// A table cell's text: on one line, its pipes escaped.
pub(crate) fn table_cell(text: &str) -> String {
    let line = one_line(text);
    if line.contains('|') {
        line.replace('|', "\\|")
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::Markdown;
    use crate::limits::Limits;

    #[test]
    fn blocks_lists_and_tables_are_separated_as_markdown_reads_them() {
        let mut md = Markdown::new(&Limits::default());
        md.heading(2, "Title\nsplit").unwrap();
        md.block("para").unwrap();
        md.list_item(0, "one").unwrap();
        md.list_item(1, "two").unwrap();
        md.table(&[
            vec!["a|b".into(), "c\nd".into(), String::new()],
            vec![String::new(), "e".into()],
            vec![],
        ])
        .unwrap();
        assert_eq!(
            md.finish(),
            "## Title split\n\npara\n\n- one\n  - two\n\n| a\\|b | c d |\n|---|---|\n| | e |\n"
        );
    }

    #[test]
    fn text_past_the_budget_is_a_failure() {
        let limits = Limits {
            max_output_bytes: 10,
            ..Limits::default()
        };
        let mut md = Markdown::new(&limits);
        md.block("12345").unwrap();
        let error = md.block("67890").unwrap_err();
        assert_eq!(error.reason(), "too_large");
    }
}
