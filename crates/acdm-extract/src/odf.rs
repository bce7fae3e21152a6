//! OpenDocument text (.odt) and presentations (.odp): `content.xml` as
//! Markdown. `text:h` (with its `text:outline-level`) are headings,
//! `text:p` paragraphs, `text:list` items `- ` items, `table:table` rows
//! one line each (repeated rows and columns materialised only between
//! content, within the cell budget); each `draw:page` of a presentation is
//! `## Slide N: <title or name>`.

use crate::archive::Archive;
use crate::error::ExtractError;
use crate::limits::Limits;
use crate::markdown::{Markdown, one_line, too_large};
use crate::xml::{Ev, Xml, attr, name};

/// The most spaces one `text:s` gives.
const MAX_SPACES: usize = 64;

pub(crate) fn extract_odt(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let content = content(bytes, limits, "OpenDocument text (.odt)")?;
    Flow::new(limits).read(&content)
}

pub(crate) fn extract_odp(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let content = content(bytes, limits, "OpenDocument presentation (.odp)")?;
    Flow::new(limits).read(&content)
}

/// `content.xml` of an OpenDocument package that is not encrypted.
fn content(bytes: &[u8], limits: &Limits, what: &str) -> Result<String, ExtractError> {
    let mut archive = Archive::open(bytes, limits, what)?;
    if let Some(manifest) = archive.read_text("META-INF/manifest.xml")? {
        let mut xml = Xml::new(&manifest, "META-INF/manifest.xml", limits);
        loop {
            match xml.next()? {
                Ev::Start(e) | Ev::Empty(e) if name(&e) == b"encryption-data" => {
                    return Err(ExtractError::Encrypted(
                        "the document is password-protected (encrypted); it cannot be read: ask \
                         for an unprotected copy"
                            .to_owned(),
                    ));
                }
                Ev::Eof => break,
                _ => {}
            }
        }
    }
    archive.read_text("content.xml")?.ok_or_else(|| {
        ExtractError::Malformed(format!(
            "the file is not an {what} document: it has no content.xml"
        ))
    })
}

/// A finished piece of text.
enum Item {
    Heading(usize, String),
    Block(String),
    Listed(usize, String),
    Table(Vec<Vec<String>>),
}

/// What a paragraph will be.
#[derive(Clone, Copy)]
enum Kind {
    Heading(usize),
    Paragraph,
}

struct Paragraph {
    kind: Kind,
    text: String,
}

/// A presentation page being read.
struct Page {
    number: usize,
    name: Option<String>,
    title: String,
    items: Vec<Item>,
}

/// A table being read, with its repeated rows and cells.
#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    /// Empty rows not yet written (written only if a row with content follows).
    empty_rows: u64,
    /// The row being read and how often it repeats.
    row: Option<(Vec<String>, u64)>,
    /// Empty cells of the row not yet written.
    empty_cells: u64,
    /// The cell being read and how often it repeats.
    cell: Option<(String, u64)>,
}

impl Table {
    fn cell_text(&mut self) -> Option<&mut String> {
        self.cell.as_mut().map(|(text, _)| text)
    }
}

struct Flow<'l> {
    limits: &'l Limits,
    md: Markdown,
    paragraphs: Vec<Paragraph>,
    lists: usize,
    tables: Vec<Table>,
    cells: u64,
    pages: usize,
    page: Option<Page>,
    /// For each open `draw:frame`: whether it is a title.
    frames: Vec<bool>,
    /// Bytes held (tables, a page) not yet written.
    held: usize,
}

impl<'l> Flow<'l> {
    fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            md: Markdown::new(limits),
            paragraphs: Vec::new(),
            lists: 0,
            tables: Vec::new(),
            cells: 0,
            pages: 0,
            page: None,
            frames: Vec::new(),
            held: 0,
        }
    }

    fn read(mut self, content: &str) -> Result<String, ExtractError> {
        let mut xml = Xml::new(content, "content.xml", self.limits);
        loop {
            match xml.next()? {
                Ev::Start(e) => match name(&e) {
                    b"h" => {
                        let level = attr(&e, b"outline-level")
                            .and_then(|l| l.trim().parse().ok())
                            .unwrap_or(1);
                        self.paragraphs.push(Paragraph {
                            kind: Kind::Heading(level),
                            text: String::new(),
                        });
                    }
                    b"p" => self.paragraphs.push(Paragraph {
                        kind: Kind::Paragraph,
                        text: String::new(),
                    }),
                    b"list" => self.lists += 1,
                    b"table" => self.tables.push(Table::default()),
                    b"table-row" => self.start_row(&e),
                    b"table-cell" | b"covered-table-cell" => self.start_cell(&e),
                    b"page" => self.start_page(&e),
                    b"frame" => self
                        .frames
                        .push(attr(&e, b"class").is_some_and(|c| c == "title")),
                    b"note" | b"annotation" | b"tracked-changes" | b"notes" => xml.skip()?,
                    other => self.inline(other, &e)?,
                },
                Ev::Empty(e) => match name(&e) {
                    b"table-row" => {
                        self.start_row(&e);
                        self.end_row()?;
                    }
                    b"table-cell" | b"covered-table-cell" => {
                        self.start_cell(&e);
                        self.end_cell()?;
                    }
                    other => self.inline(other, &e)?,
                },
                Ev::End(end) => match end.as_slice() {
                    b"h" | b"p" => self.end_paragraph()?,
                    b"list" => self.lists = self.lists.saturating_sub(1),
                    b"table" => self.end_table()?,
                    b"table-row" => self.end_row()?,
                    b"table-cell" | b"covered-table-cell" => self.end_cell()?,
                    b"page" => self.end_page()?,
                    b"frame" => {
                        self.frames.pop();
                    }
                    _ => {}
                },
                Ev::Text(text) => self.text(&text)?,
                Ev::Eof => break,
            }
        }
        Ok(self.md.finish())
    }

    /// Spaces, tabs and line breaks inside a paragraph.
    fn inline(
        &mut self,
        element: &[u8],
        e: &quick_xml::events::BytesStart<'_>,
    ) -> Result<(), ExtractError> {
        match element {
            b"s" => {
                let count: usize = attr(e, b"c").and_then(|c| c.parse().ok()).unwrap_or(1);
                self.text(&" ".repeat(count.clamp(1, MAX_SPACES)))
            }
            b"tab" => self.text("\t"),
            b"line-break" => self.text("\n"),
            _ => Ok(()),
        }
    }

    fn text(&mut self, text: &str) -> Result<(), ExtractError> {
        let Some(paragraph) = self.paragraphs.last_mut() else {
            return Ok(());
        };
        if paragraph.text.len().saturating_add(text.len()) > self.md.room() {
            return Err(too_large(self.md.len().saturating_add(self.md.room())));
        }
        paragraph.text.push_str(text);
        Ok(())
    }

    fn end_paragraph(&mut self) -> Result<(), ExtractError> {
        let Some(paragraph) = self.paragraphs.pop() else {
            return Ok(());
        };
        if let Some(cell) = self.tables.last_mut().and_then(Table::cell_text) {
            let text = one_line(&paragraph.text);
            if !cell.is_empty() && !text.is_empty() {
                cell.push(' ');
            }
            cell.push_str(&text);
            return self.hold(text.len());
        }
        if self.frames.iter().any(|title| *title)
            && let Some(page) = self.page.as_mut()
        {
            let text = one_line(&paragraph.text);
            if !page.title.is_empty() && !text.is_empty() {
                page.title.push(' ');
            }
            page.title.push_str(&text);
            return Ok(());
        }
        let item = match paragraph.kind {
            Kind::Heading(level) => Item::Heading(level, paragraph.text),
            Kind::Paragraph if self.lists > 0 => Item::Listed(self.lists - 1, paragraph.text),
            Kind::Paragraph => Item::Block(paragraph.text),
        };
        self.emit(item)
    }

    /// Writes `item`, or keeps it for the page being read.
    fn emit(&mut self, item: Item) -> Result<(), ExtractError> {
        if let Some(page) = self.page.as_mut() {
            let size = match &item {
                Item::Heading(_, t) | Item::Block(t) | Item::Listed(_, t) => t.len(),
                Item::Table(_) => 0,
            };
            page.items.push(item);
            return self.hold(size);
        }
        write(&mut self.md, item)
    }

    /// Counts bytes held back, against what may still be written.
    fn hold(&mut self, bytes: usize) -> Result<(), ExtractError> {
        self.held = self.held.saturating_add(bytes.saturating_add(4));
        if self.held > self.md.room() {
            return Err(too_large(self.md.len().saturating_add(self.md.room())));
        }
        Ok(())
    }

    fn start_page(&mut self, e: &quick_xml::events::BytesStart<'_>) {
        self.pages += 1;
        self.page = Some(Page {
            number: self.pages,
            name: attr(e, b"name"),
            title: String::new(),
            items: Vec::new(),
        });
    }

    fn end_page(&mut self) -> Result<(), ExtractError> {
        let Some(page) = self.page.take() else {
            return Ok(());
        };
        self.held = 0;
        let title = Some(page.title)
            .filter(|t| !t.trim().is_empty())
            .or(page.name.filter(|n| !n.trim().is_empty()));
        match title {
            Some(title) => self
                .md
                .heading(2, &format!("Slide {}: {title}", page.number))?,
            None => self.md.heading(2, &format!("Slide {}", page.number))?,
        }
        for item in page.items {
            write(&mut self.md, item)?;
        }
        Ok(())
    }

    fn repeats(e: &quick_xml::events::BytesStart<'_>, attribute: &[u8]) -> u64 {
        attr(e, attribute)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(1_u64)
            .max(1)
    }

    fn start_row(&mut self, e: &quick_xml::events::BytesStart<'_>) {
        let repeat = Self::repeats(e, b"number-rows-repeated");
        if let Some(table) = self.tables.last_mut() {
            table.row = Some((Vec::new(), repeat));
            table.empty_cells = 0;
        }
    }

    fn start_cell(&mut self, e: &quick_xml::events::BytesStart<'_>) {
        let repeat = Self::repeats(e, b"number-columns-repeated");
        if let Some(table) = self.tables.last_mut() {
            table.cell = Some((String::new(), repeat));
        }
    }

    /// Counts `n` more cells against the budget.
    fn count_cells(&mut self, n: u64) -> Result<(), ExtractError> {
        self.cells = self.cells.saturating_add(n);
        if self.cells > self.limits.max_cells {
            return Err(too_many_cells(self.limits.max_cells));
        }
        Ok(())
    }

    fn end_cell(&mut self) -> Result<(), ExtractError> {
        let Some(table) = self.tables.last_mut() else {
            return Ok(());
        };
        let Some((text, repeat)) = table.cell.take() else {
            return Ok(());
        };
        if text.is_empty() {
            table.empty_cells = table.empty_cells.saturating_add(repeat);
            return Ok(());
        }
        let empties = std::mem::take(&mut table.empty_cells);
        self.count_cells(empties.saturating_add(repeat))?;
        let copies = usize::try_from(repeat).unwrap_or(usize::MAX);
        self.hold(text.len().saturating_add(3).saturating_mul(copies))?;
        if let Some((row, _)) = self.tables.last_mut().and_then(|t| t.row.as_mut()) {
            for _ in 0..empties {
                row.push(String::new());
            }
            for _ in 1..repeat {
                row.push(text.clone());
            }
            row.push(text);
        }
        Ok(())
    }

    fn end_row(&mut self) -> Result<(), ExtractError> {
        let Some(table) = self.tables.last_mut() else {
            return Ok(());
        };
        let Some((row, repeat)) = table.row.take() else {
            return Ok(());
        };
        if row.is_empty() {
            table.empty_rows = table.empty_rows.saturating_add(repeat);
            return Ok(());
        }
        let empties = std::mem::take(&mut table.empty_rows);
        let width = u64::try_from(row.len()).unwrap_or(u64::MAX);
        self.count_cells(empties.saturating_add(repeat.saturating_mul(width)))?;
        let bytes: usize = row.iter().map(|cell| cell.len() + 3).sum();
        let copies = usize::try_from(repeat.saturating_sub(1)).unwrap_or(usize::MAX);
        self.hold(bytes.saturating_mul(copies))?;
        if let Some(table) = self.tables.last_mut() {
            for _ in 0..empties {
                table.rows.push(Vec::new());
            }
            for _ in 1..repeat {
                table.rows.push(row.clone());
            }
            table.rows.push(row);
        }
        Ok(())
    }

    fn end_table(&mut self) -> Result<(), ExtractError> {
        let Some(table) = self.tables.pop() else {
            return Ok(());
        };
        if let Some(cell) = self.tables.last_mut().and_then(Table::cell_text) {
            let flat: Vec<&str> = table
                .rows
                .iter()
                .flatten()
                .map(String::as_str)
                .filter(|c| !c.is_empty())
                .collect();
            if !cell.is_empty() && !flat.is_empty() {
                cell.push(' ');
            }
            cell.push_str(&flat.join(" "));
            return Ok(());
        }
        if self.page.is_none() {
            self.held = 0;
        }
        self.emit(Item::Table(table.rows))
    }
}

fn write(md: &mut Markdown, item: Item) -> Result<(), ExtractError> {
    match item {
        Item::Heading(level, text) => md.heading(level, &text),
        Item::Block(text) => md.block(&text),
        Item::Listed(level, text) => md.list_item(level, &text),
        Item::Table(rows) => md.table(&rows),
    }
}

/// The failure for more than `max` cells.
pub(crate) fn too_many_cells(max: u64) -> ExtractError {
    ExtractError::TooManyCells(format!(
        "the document has more than {max} table cells, the most that may be read; it is too \
         large to be read whole"
    ))
}
