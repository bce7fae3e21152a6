//! PowerPoint (.pptx): the slides in the order of `p:sldIdLst`, each as
//! `## Slide N: <title>` (the text of the shape whose placeholder is a
//! `title` or `ctrTitle`), then the other shapes' paragraphs and the tables
//! as rows.

use crate::archive::Archive;
use crate::error::ExtractError;
use crate::limits::Limits;
use crate::markdown::{Markdown, one_line, too_large};
use crate::opc;
use crate::xml::{Ev, Xml, attr, name, prefixed_attr};

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let mut archive = Archive::open(bytes, limits, "PowerPoint (.pptx)")?;
    let main = opc::main_part(&mut archive, "ppt/presentation.xml", limits)?;
    let Some(presentation) = archive.read_text(&main)? else {
        return Err(ExtractError::Malformed(
            "the file is not a PowerPoint presentation: it has no ppt/presentation.xml".to_owned(),
        ));
    };
    let relationships = opc::relationships(&mut archive, &main, limits)?;
    let mut md = Markdown::new(limits);
    for (index, id) in slide_ids(&presentation, &main, limits)?.iter().enumerate() {
        let Some(target) = relationships
            .iter()
            .find(|r| r.id == *id)
            .map(|r| r.target.clone())
        else {
            continue;
        };
        let Some(slide) = archive.read_text(&target)? else {
            continue;
        };
        read_slide(&slide, &target, index + 1, &mut md, limits)?;
    }
    Ok(md.finish())
}

/// The relationship ids of the slides, in the presentation's order.
fn slide_ids(presentation: &str, part: &str, limits: &Limits) -> Result<Vec<String>, ExtractError> {
    let mut xml = Xml::new(presentation, part, limits);
    let mut ids = Vec::new();
    loop {
        match xml.next()? {
            Ev::Start(e) | Ev::Empty(e) if name(&e) == b"sldId" => {
                if let Some(id) = prefixed_attr(&e, b"id") {
                    ids.push(id);
                }
            }
            Ev::Eof => return Ok(ids),
            _ => {}
        }
    }
}

/// What a slide shows, in order.
enum Item {
    Text(String),
    Table(Vec<Vec<String>>),
}

/// A shape being read.
#[derive(Default)]
struct Shape {
    title: bool,
    paragraphs: Vec<String>,
}

fn read_slide(
    slide: &str,
    part: &str,
    number: usize,
    md: &mut Markdown,
    limits: &Limits,
) -> Result<(), ExtractError> {
    let mut xml = Xml::new(slide, part, limits);
    let mut title: Option<String> = None;
    let mut items: Vec<Item> = Vec::new();
    let mut shape: Option<Shape> = None;
    let mut paragraph: Option<String> = None;
    let mut table: Option<Vec<Vec<String>>> = None;
    let mut in_text = false;
    let mut held = 0_usize;
    loop {
        match xml.next()? {
            Ev::Start(e) => match name(&e) {
                b"sp" => shape = Some(Shape::default()),
                b"ph" => mark_title(&e, shape.as_mut()),
                b"p" => paragraph = Some(String::new()),
                b"t" => in_text = true,
                b"br" => push(paragraph.as_mut(), "\n"),
                b"tbl" => table = Some(Vec::new()),
                b"tr" => push_row(table.as_mut()),
                b"tc" => push_cell(table.as_mut()),
                b"Fallback" => xml.skip()?,
                _ => {}
            },
            Ev::Empty(e) => match name(&e) {
                b"ph" => mark_title(&e, shape.as_mut()),
                b"br" => push(paragraph.as_mut(), "\n"),
                b"tr" => push_row(table.as_mut()),
                b"tc" => push_cell(table.as_mut()),
                _ => {}
            },
            Ev::Text(text) if in_text => {
                held = held.saturating_add(text.len());
                if held > md.room() {
                    return Err(too_large(md.len().saturating_add(md.room())));
                }
                push(paragraph.as_mut(), &text);
            }
            Ev::Text(_) => {}
            Ev::End(end) => match end.as_slice() {
                b"t" => in_text = false,
                b"p" => {
                    let Some(text) = paragraph.take() else {
                        continue;
                    };
                    let cell = table
                        .as_mut()
                        .and_then(|rows| rows.last_mut())
                        .and_then(|row| row.last_mut());
                    if let Some(cell) = cell {
                        let text = one_line(&text);
                        if !cell.is_empty() && !text.is_empty() {
                            cell.push(' ');
                        }
                        cell.push_str(&text);
                    } else if let Some(shape) = shape.as_mut() {
                        shape.paragraphs.push(text);
                    } else {
                        items.push(Item::Text(text));
                    }
                }
                b"sp" => {
                    let Some(done) = shape.take() else {
                        continue;
                    };
                    let text = done
                        .paragraphs
                        .iter()
                        .map(|p| p.trim())
                        .filter(|p| !p.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n");
                    if done.title && title.is_none() {
                        title = Some(one_line(&text));
                    } else if !text.is_empty() {
                        items.push(Item::Text(text));
                    }
                }
                b"tbl" => {
                    if let Some(rows) = table.take() {
                        items.push(Item::Table(rows));
                    }
                }
                _ => {}
            },
            Ev::Eof => break,
        }
    }
    match title.filter(|t| !t.is_empty()) {
        Some(title) => md.heading(2, &format!("Slide {number}: {title}"))?,
        None => md.heading(2, &format!("Slide {number}"))?,
    }
    for item in items {
        match item {
            Item::Text(text) => md.block(&text)?,
            Item::Table(rows) => md.table(&rows)?,
        }
    }
    Ok(())
}

fn mark_title(placeholder: &quick_xml::events::BytesStart<'_>, shape: Option<&mut Shape>) {
    if let Some(shape) = shape
        && attr(placeholder, b"type").is_some_and(|t| t == "title" || t == "ctrTitle")
    {
        shape.title = true;
    }
}

fn push(paragraph: Option<&mut String>, text: &str) {
    if let Some(paragraph) = paragraph {
        paragraph.push_str(text);
    }
}

fn push_row(table: Option<&mut Vec<Vec<String>>>) {
    if let Some(rows) = table {
        rows.push(Vec::new());
    }
}

fn push_cell(table: Option<&mut Vec<Vec<String>>>) {
    if let Some(row) = table.and_then(|rows| rows.last_mut()) {
        row.push(String::new());
    }
}
