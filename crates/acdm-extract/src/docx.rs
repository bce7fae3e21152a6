//! Word (.docx): `word/document.xml` (or wherever the package's main part
//! is) as Markdown. A paragraph's heading level comes from `w:outlineLvl`,
//! in the paragraph or in its style (through `w:basedOn`), or from the
//! style's *name* ("heading N", "Title") — never from the style id, which
//! Chinese Word and WPS make "1", "2"… Lists (`w:numPr`) are `- ` items,
//! tables one line per row.

use std::collections::HashMap;

use crate::archive::Archive;
use crate::error::ExtractError;
use crate::limits::Limits;
use crate::markdown::{Markdown, one_line, too_large};
use crate::opc;
use crate::xml::{Ev, Xml, attr, name};

/// How far a chain of `w:basedOn` is followed.
const MAX_STYLE_CHAIN: usize = 16;

/// What a paragraph style says about headings and lists.
#[derive(Debug, Default)]
struct Style {
    name: Option<String>,
    based_on: Option<String>,
    outline: Option<String>,
    num_id: Option<String>,
    ilvl: Option<String>,
}

/// The paragraph styles of `word/styles.xml`, by id.
type Styles = HashMap<String, Style>;

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let mut archive = Archive::open(bytes, limits, "Word (.docx)")?;
    let main = opc::main_part(&mut archive, "word/document.xml", limits)?;
    let dir = main.rsplit_once('/').map_or("", |(dir, _)| dir);
    let styles_name = if dir.is_empty() {
        "styles.xml".to_owned()
    } else {
        format!("{dir}/styles.xml")
    };
    let styles = match archive.read_text(&styles_name)? {
        Some(text) => parse_styles(&text, limits)?,
        None => Styles::new(),
    };
    let Some(document) = archive.read_text(&main)? else {
        return Err(ExtractError::Malformed(
            "the file is not a Word document: it has no word/document.xml".to_owned(),
        ));
    };
    Body::new(&styles, limits).read(&document)
}

fn parse_styles(text: &str, limits: &Limits) -> Result<Styles, ExtractError> {
    let mut xml = Xml::new(text, "word/styles.xml", limits);
    let mut styles = Styles::new();
    let mut current: Option<(String, Style)> = None;
    loop {
        match xml.next()? {
            Ev::Start(e) | Ev::Empty(e) => match name(&e) {
                b"style" => {
                    current = attr(&e, b"styleId").map(|id| (id, Style::default()));
                }
                b"pPrChange" | b"rPrChange" => xml.skip()?,
                element => {
                    if let Some((_, style)) = current.as_mut() {
                        let value = || attr(&e, b"val");
                        match element {
                            b"name" => style.name = value(),
                            b"basedOn" => style.based_on = value(),
                            b"outlineLvl" => style.outline = value(),
                            b"numId" => style.num_id = value(),
                            b"ilvl" => style.ilvl = value(),
                            _ => {}
                        }
                    }
                }
            },
            Ev::End(end) if end == b"style" => {
                if let Some((id, style)) = current.take() {
                    styles.insert(id, style);
                }
            }
            Ev::Eof => return Ok(styles),
            _ => {}
        }
    }
}

/// The heading level (1–6) of an outline level (`0` is level 1; `9` is
/// body text).
fn outline_level(value: &str) -> Option<Option<usize>> {
    let level: usize = value.trim().parse().ok()?;
    Some((level <= 8).then(|| (level + 1).min(6)))
}

/// The heading level a style's name gives: "heading N" (any case, with or
/// without the space; "标题 N" as WPS may write it) or "Title".
fn name_level(name: &str) -> Option<usize> {
    let lower = name.trim().to_lowercase();
    if lower == "title" || lower == "标题" {
        return Some(1);
    }
    let rest = lower
        .strip_prefix("heading")
        .or_else(|| lower.strip_prefix("标题"))?;
    let level: usize = rest.trim().parse().ok()?;
    (1..=9).contains(&level).then(|| level.min(6))
}

/// The heading level of the style `id`, following `w:basedOn`.
fn style_level(styles: &Styles, id: &str) -> Option<usize> {
    let mut id = id;
    for _ in 0..MAX_STYLE_CHAIN {
        let style = styles.get(id)?;
        if let Some(level) = style.outline.as_deref().and_then(outline_level) {
            return level;
        }
        if let Some(level) = style.name.as_deref().and_then(name_level) {
            return Some(level);
        }
        id = style.based_on.as_deref()?;
    }
    None
}

/// The list level of the style `id` when its numbering makes it a list.
fn style_list(styles: &Styles, id: &str) -> Option<usize> {
    let mut id = id;
    for _ in 0..MAX_STYLE_CHAIN {
        let style = styles.get(id)?;
        if let Some(num_id) = style.num_id.as_deref() {
            return (num_id.trim() != "0").then(|| list_level(style.ilvl.as_deref()));
        }
        id = style.based_on.as_deref()?;
    }
    None
}

fn list_level(ilvl: Option<&str>) -> usize {
    ilvl.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// A paragraph being read.
#[derive(Debug, Default)]
struct Paragraph {
    text: String,
    style: Option<String>,
    outline: Option<String>,
    num_id: Option<String>,
    ilvl: Option<String>,
}

/// A table being read: its rows of cells.
#[derive(Debug, Default)]
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn cell(&mut self) -> Option<&mut String> {
        self.rows.last_mut().and_then(|row| row.last_mut())
    }

    /// Its cells' text on one line (a table nested in a cell).
    fn flattened(&self) -> String {
        let cells: Vec<&str> = self
            .rows
            .iter()
            .flatten()
            .map(String::as_str)
            .filter(|c| !c.is_empty())
            .collect();
        cells.join(" ")
    }
}

/// The document body being read.
struct Body<'s> {
    styles: &'s Styles,
    limits: &'s Limits,
    md: Markdown,
    paragraphs: Vec<Paragraph>,
    tables: Vec<Table>,
    /// Bytes held in tables not yet written.
    table_bytes: usize,
    in_ppr: usize,
    in_text: bool,
}

impl<'s> Body<'s> {
    fn new(styles: &'s Styles, limits: &'s Limits) -> Self {
        Self {
            styles,
            limits,
            md: Markdown::new(limits),
            paragraphs: Vec::new(),
            tables: Vec::new(),
            table_bytes: 0,
            in_ppr: 0,
            in_text: false,
        }
    }

    fn read(mut self, document: &str) -> Result<String, ExtractError> {
        let mut xml = Xml::new(document, "word/document.xml", self.limits);
        loop {
            match xml.next()? {
                Ev::Start(e) => match name(&e) {
                    b"p" => self.paragraphs.push(Paragraph::default()),
                    b"pPr" => self.in_ppr += 1,
                    b"t" => self.in_text = true,
                    b"tbl" => self.tables.push(Table::default()),
                    b"tr" => self.start_row(),
                    b"tc" => self.start_cell(),
                    b"Fallback" | b"pPrChange" | b"rPrChange" | b"del" | b"moveFrom" => {
                        xml.skip()?;
                    }
                    other => self.property(other, &e)?,
                },
                Ev::Empty(e) => match name(&e) {
                    b"tr" => self.start_row(),
                    b"tc" => self.start_cell(),
                    other => self.property(other, &e)?,
                },
                Ev::End(end) => match end.as_slice() {
                    b"p" => self.end_paragraph()?,
                    b"pPr" => self.in_ppr = self.in_ppr.saturating_sub(1),
                    b"t" => self.in_text = false,
                    b"tbl" => self.end_table()?,
                    _ => {}
                },
                Ev::Text(text) if self.in_text => self.text(&text)?,
                Ev::Text(_) => {}
                Ev::Eof => break,
            }
        }
        Ok(self.md.finish())
    }

    /// An element that is not a container: paragraph properties, or a
    /// tab or break in a run.
    fn property(
        &mut self,
        element: &[u8],
        e: &quick_xml::events::BytesStart<'_>,
    ) -> Result<(), ExtractError> {
        if self.in_ppr > 0 {
            if let Some(paragraph) = self.paragraphs.last_mut() {
                let value = || attr(e, b"val");
                match element {
                    b"pStyle" => paragraph.style = value(),
                    b"outlineLvl" => paragraph.outline = value(),
                    b"numId" => paragraph.num_id = value(),
                    b"ilvl" => paragraph.ilvl = value(),
                    _ => {}
                }
            }
            return Ok(());
        }
        match element {
            b"tab" | b"ptab" => self.text("\t"),
            b"br" | b"cr" => self.text("\n"),
            b"noBreakHyphen" => self.text("-"),
            b"gridSpan" => {
                let span: usize = attr(e, b"val").and_then(|v| v.parse().ok()).unwrap_or(1);
                if let Some(row) = self.tables.last_mut().and_then(|t| t.rows.last_mut()) {
                    for _ in 1..span.min(64) {
                        row.push(String::new());
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn text(&mut self, text: &str) -> Result<(), ExtractError> {
        if let Some(paragraph) = self.paragraphs.last_mut() {
            if paragraph.text.len().saturating_add(text.len()) > self.md.room() {
                return Err(too_large(self.md.len().saturating_add(self.md.room())));
            }
            paragraph.text.push_str(text);
        }
        Ok(())
    }

    fn start_row(&mut self) {
        if let Some(table) = self.tables.last_mut() {
            table.rows.push(Vec::new());
        }
    }

    fn start_cell(&mut self) {
        if let Some(row) = self.tables.last_mut().and_then(|t| t.rows.last_mut()) {
            row.push(String::new());
        }
    }

    fn end_paragraph(&mut self) -> Result<(), ExtractError> {
        let Some(paragraph) = self.paragraphs.pop() else {
            return Ok(());
        };
        if self.tables.last_mut().and_then(Table::cell).is_some() {
            return self.add_to_cell(&paragraph.text);
        }
        let heading = match paragraph.outline.as_deref().and_then(outline_level) {
            Some(level) => level,
            None => paragraph
                .style
                .as_deref()
                .and_then(|id| style_level(self.styles, id)),
        };
        let list = match paragraph.num_id.as_deref() {
            Some(num_id) => (num_id.trim() != "0").then(|| list_level(paragraph.ilvl.as_deref())),
            None => paragraph
                .style
                .as_deref()
                .and_then(|id| style_list(self.styles, id))
                .map(|level| match paragraph.ilvl.as_deref() {
                    Some(ilvl) => list_level(Some(ilvl)),
                    None => level,
                }),
        };
        if let Some(level) = heading {
            self.md.heading(level, &paragraph.text)
        } else if let Some(level) = list {
            self.md.list_item(level, &paragraph.text)
        } else {
            self.md.block(&paragraph.text)
        }
    }

    /// Adds text to the current table cell, on one line.
    fn add_to_cell(&mut self, text: &str) -> Result<(), ExtractError> {
        let text = one_line(text);
        if text.is_empty() {
            return Ok(());
        }
        self.table_bytes = self.table_bytes.saturating_add(text.len() + 4);
        if self.table_bytes > self.md.room() {
            return Err(too_large(self.md.len().saturating_add(self.md.room())));
        }
        if let Some(cell) = self.tables.last_mut().and_then(Table::cell) {
            if !cell.is_empty() {
                cell.push(' ');
            }
            cell.push_str(&text);
        }
        Ok(())
    }

    fn end_table(&mut self) -> Result<(), ExtractError> {
        let Some(table) = self.tables.pop() else {
            return Ok(());
        };
        if self.tables.last_mut().and_then(Table::cell).is_some() {
            return self.add_to_cell(&table.flattened());
        }
        if self.tables.is_empty() {
            self.table_bytes = 0;
        }
        self.md.table(&table.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::{name_level, outline_level};

    #[test]
    fn heading_levels_come_from_outline_levels_and_style_names() {
        assert_eq!(outline_level("0"), Some(Some(1)));
        assert_eq!(outline_level("2"), Some(Some(3)));
        assert_eq!(outline_level("9"), Some(None));
        assert_eq!(name_level("heading 1"), Some(1));
        assert_eq!(name_level("Heading 3"), Some(3));
        assert_eq!(name_level("Title"), Some(1));
        assert_eq!(name_level("标题 2"), Some(2));
        assert_eq!(name_level("1"), None);
        assert_eq!(name_level("Normal"), None);
    }
}
