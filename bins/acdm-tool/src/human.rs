//! `--human`: a ToolResponse as text for a terminal. One line with the code
//! and the message, then the data (a table for folder listings, search
//! hits and the business lists (`business.rs`), the content of a read,
//! `key: value` lines otherwise), then the
//! suggested action. Text from the server is printed with control
//! characters escaped, so a file name or a file cannot drive the terminal.

mod business;
mod project;

pub(crate) use project::catalog;

use std::fmt::Write as _;

use acdm_core::ToolResponse;
use acdm_core::nc::{
    DeleteData, Encoding, ListData, MountsData, MoveData, ReadData, SearchData, WriteData,
};

/// Data that has a readable rendering.
pub(crate) trait Human {
    /// Appends the rendering of `self` to `out`, line by line.
    fn human(&self, out: &mut String);
}

/// The whole response as text, ending with a newline.
pub(crate) fn render<T: Human>(response: &ToolResponse<T>) -> String {
    let mut out = format!("{}: {}\n", response.code(), clean(response.message()));
    if let Some(data) = response.data() {
        data.human(&mut out);
    }
    if let Some(action) = response.suggested_action() {
        line(
            &mut out,
            format_args!("suggested action: {}", clean(action)),
        );
    }
    out
}

impl Human for () {
    fn human(&self, _out: &mut String) {}
}

/// A failure's data whatever its shape (an approval request, field
/// problems): indented JSON, terminal controls escaped.
impl Human for serde_json::Value {
    fn human(&self, out: &mut String) {
        if self.is_null() {
            return;
        }
        for text in serde_json::to_string_pretty(self)
            .unwrap_or_default()
            .lines()
        {
            line(out, format_args!("  {}", clean(text)));
        }
    }
}

impl Human for MountsData {
    fn human(&self, out: &mut String) {
        if self.mounts.is_empty() {
            out.push_str("(no mounts)\n");
        }
        for mount in &self.mounts {
            let access = if mount.writable {
                "writable"
            } else {
                "read-only"
            };
            line(out, format_args!("{}: {access}", clean(&mount.name)));
        }
    }
}

impl Human for ListData {
    fn human(&self, out: &mut String) {
        if self.entries.is_empty() {
            out.push_str("(empty folder)\n");
        } else {
            let rows = self.entries.iter().map(|entry| {
                let slash = if entry.is_dir { "/" } else { "" };
                vec![
                    format!("{}{slash}", clean(&entry.name)),
                    entry.size.map(|s| s.to_string()).unwrap_or_else(dash),
                    entry
                        .modified
                        .map(|m| m.format("%Y-%m-%d %H:%M:%S").to_string())
                        .unwrap_or_else(dash),
                    entry.etag.as_deref().map(clean).unwrap_or_else(dash),
                ]
            });
            table(out, &["NAME", "SIZE", "MODIFIED (UTC)", "ETAG"], rows);
        }
        if self.truncated {
            out.push_str("(truncated: the folder has more entries than one answer holds)\n");
        }
    }
}

impl Human for ReadData {
    fn human(&self, out: &mut String) {
        match self.encoding {
            Encoding::Text => {
                out.push_str(&clean_text(&self.content));
                if !self.content.is_empty() && !self.content.ends_with('\n') {
                    out.push('\n');
                }
            }
            Encoding::Base64 => line(
                out,
                format_args!(
                    "(binary content: {} bytes as base64; the JSON output, without --human, carries it)",
                    self.returned_bytes
                ),
            ),
        }
        if let Some(next) = self.next_offset.filter(|_| self.truncated) {
            line(
                out,
                format_args!("(truncated: continue with --offset {next})"),
            );
        }
    }
}

impl Human for SearchData {
    fn human(&self, out: &mut String) {
        if self.hits.is_empty() {
            out.push_str("(no hits)\n");
            return;
        }
        let rows = self.hits.iter().map(|hit| {
            let slash = if hit.is_dir == Some(true) { "/" } else { "" };
            vec![
                clean(&hit.mount),
                format!("{}{slash}", clean(&hit.rel_path)),
                hit.line.map(|l| l.to_string()).unwrap_or_else(dash),
                hit.snippet.as_deref().map(snippet).unwrap_or_else(dash),
            ]
        });
        table(out, &["MOUNT", "PATH", "LINE", "SNIPPET"], rows);
    }
}

impl Human for WriteData {
    fn human(&self, out: &mut String) {
        pairs(
            out,
            &[
                ("mount", clean(&self.mount)),
                ("rel_path", clean(&self.rel_path)),
                ("created", self.created.to_string()),
                ("size", self.size.to_string()),
                ("etag", self.etag.as_deref().map(clean).unwrap_or_else(dash)),
                ("event_id", self.event_id.to_string()),
            ],
        );
    }
}

impl Human for DeleteData {
    fn human(&self, out: &mut String) {
        let mut fields = vec![
            ("dry_run", self.dry_run.to_string()),
            ("mount", clean(&self.mount)),
            ("rel_path", clean(&self.rel_path)),
        ];
        if let Some(count) = self.count {
            fields.push(("count", count.to_string()));
        }
        if let Some(truncated) = self.truncated {
            fields.push(("truncated", truncated.to_string()));
        }
        if let Some(event_id) = self.event_id {
            fields.push(("event_id", event_id.to_string()));
        }
        pairs(out, &fields);
        if let Some(entries) = &self.would_delete {
            out.push_str("would_delete:\n");
            for entry in entries {
                let slash = if entry.is_dir { "/" } else { "" };
                let size = entry
                    .size
                    .map(|s| format!(" ({s} bytes)"))
                    .unwrap_or_default();
                line(
                    out,
                    format_args!("  {}{slash}{size}", clean(&entry.rel_path)),
                );
            }
        }
    }
}

impl Human for MoveData {
    fn human(&self, out: &mut String) {
        pairs(
            out,
            &[
                ("mount", clean(&self.mount)),
                ("from_rel_path", clean(&self.from_rel_path)),
                ("to_rel_path", clean(&self.to_rel_path)),
                ("overwritten", self.overwritten.to_string()),
                ("event_id", self.event_id.to_string()),
            ],
        );
    }
}

fn dash() -> String {
    "-".to_owned()
}

fn line(out: &mut String, args: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(args);
    out.push('\n');
}

/// `key: value` lines, values aligned.
fn pairs(out: &mut String, fields: &[(&str, String)]) {
    let width = fields
        .iter()
        .map(|(key, _)| key.len() + 1)
        .max()
        .unwrap_or(0);
    for (key, value) in fields {
        line(out, format_args!("{:<width$} {value}", format!("{key}:")));
    }
}

/// An aligned table: a header row, then one row per item; columns are
/// separated by two spaces and the last one is not padded.
fn table(out: &mut String, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let mut rows: Vec<Vec<String>> = rows.collect();
    rows.insert(0, header.iter().map(|h| (*h).to_owned()).collect());
    let mut widths = vec![0; header.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in &rows {
        let last = row.len().saturating_sub(1);
        let mut text = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i == last {
                text.push_str(cell);
            } else {
                let pad = width.saturating_sub(cell.chars().count());
                let _ = write!(text, "{cell}{:pad$}  ", "");
            }
        }
        line(out, format_args!("{}", text.trim_end()));
    }
}

/// One line of server text: every control character escaped.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// File content: line breaks and tabs kept, other control characters
/// (escape sequences, a lone carriage return) escaped.
fn clean_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let kept = matches!(c, '\n' | '\t') || (c == '\r' && chars.peek() == Some(&'\n'));
        if c.is_control() && !kept {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A search snippet on one line, at most 80 characters.
fn snippet(text: &str) -> String {
    const MAX: usize = 80;
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = clean(&one_line).chars().take(MAX).collect();
    if one_line.chars().count() > MAX {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use acdm_core::ErrorCode;
    use acdm_core::nc::EntryInfo;

    use super::*;

    #[test]
    fn a_listing_is_an_aligned_table_and_folders_end_with_a_slash() {
        let entry = |name: &str, is_dir: bool, size: Option<u64>| EntryInfo {
            name: name.into(),
            rel_path: name.into(),
            is_dir,
            size,
            modified: None,
            etag: size.map(|s| format!("\"e{s}\"")),
        };
        let data = ListData {
            mount: "project".into(),
            rel_path: String::new(),
            entries: vec![
                entry("notes", true, None),
                entry("plan.md", false, Some(1234)),
            ],
            truncated: false,
        };
        let text = render(&ToolResponse::ok(data, "2 entries"));
        assert_eq!(
            text,
            "ok: 2 entries\n\
             NAME     SIZE  MODIFIED (UTC)  ETAG\n\
             notes/   -     -               -\n\
             plan.md  1234  -               \"e1234\"\n"
        );
    }

    #[test]
    fn a_failure_is_its_code_its_message_and_the_suggested_action_last() {
        let failure = ToolResponse::<ListData>::failure(ErrorCode::Conflict, "etag changed");
        let text = render(&failure);
        assert!(text.starts_with("conflict: etag changed\n"), "{text}");
        assert!(text.ends_with("\n"), "{text}");
        let last = text.lines().last().unwrap();
        assert!(last.starts_with("suggested action: Re-read"), "{text}");
    }

    #[test]
    fn server_text_cannot_drive_the_terminal() {
        assert_eq!(clean("a\u{1b}[2Jb\nc"), "a\\u{1b}[2Jb\\nc");
        assert_eq!(
            clean_text("l1\r\nl2\tx\r\u{1b}[31m"),
            "l1\r\nl2\tx\\r\\u{1b}[31m"
        );
    }
}
