//! XML read defensively: a DOCTYPE is refused (entity bombs are built with
//! one), element nesting is capped, only the predefined entities and
//! character references are resolved, and names are compared by their
//! local part (generators differ in the prefixes they bind).

use std::borrow::Cow;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

use crate::error::ExtractError;
use crate::limits::Limits;

/// One event of a guarded XML reader.
#[derive(Debug)]
pub(crate) enum Ev<'a> {
    /// An element opens (and has content).
    Start(BytesStart<'a>),
    /// An element with no content (`<x/>`).
    Empty(BytesStart<'a>),
    /// An element closes; its local name.
    End(Vec<u8>),
    /// Character data (entities resolved).
    Text(Cow<'a, str>),
    /// The end of the document.
    Eof,
}

/// An XML part read within the limits.
pub(crate) struct Xml<'a> {
    reader: quick_xml::Reader<&'a [u8]>,
    depth: u32,
    max_depth: u32,
    part: &'a str,
}

impl<'a> Xml<'a> {
    /// Reads `text`, the part named `part` (in messages).
    pub(crate) fn new(text: &'a str, part: &'a str, limits: &Limits) -> Self {
        let reader = quick_xml::Reader::from_str(text);
        Self {
            reader,
            depth: 0,
            max_depth: limits.max_depth,
            part,
        }
    }

    /// The next event that matters (declarations, comments and processing
    /// instructions are skipped).
    pub(crate) fn next(&mut self) -> Result<Ev<'a>, ExtractError> {
        loop {
            let event = self.reader.read_event().map_err(|error| {
                ExtractError::Malformed(format!(
                    "the document's {} is not well-formed XML ({error}); the file is damaged",
                    self.part
                ))
            })?;
            return Ok(match event {
                Event::Start(start) => {
                    self.depth = self.depth.saturating_add(1);
                    if self.depth > self.max_depth {
                        return Err(too_deep(self.max_depth));
                    }
                    Ev::Start(start)
                }
                Event::End(end) => {
                    self.depth = self.depth.saturating_sub(1);
                    Ev::End(local(end.name().as_ref().as_bytes()).to_vec())
                }
                Event::Empty(start) => Ev::Empty(start),
                Event::Text(text) => Ev::Text(text.xml10_content()),
                Event::CData(data) => Ev::Text(data.xml10_content()),
                Event::GeneralRef(reference) => {
                    let resolved = match reference.resolve_char_ref() {
                        Ok(Some(c)) => Cow::Owned(c.to_string()),
                        Ok(None) => {
                            match quick_xml::escape::resolve_predefined_entity(&reference) {
                                Some(text) => Cow::Borrowed(text),
                                None => continue,
                            }
                        }
                        Err(_) => continue,
                    };
                    Ev::Text(resolved)
                }
                Event::DocType(_) => {
                    return Err(ExtractError::EntityBomb(format!(
                        "the document's {} declares a DOCTYPE; documents with one are refused \
                         (entity bombs are built that way), so this file cannot be read",
                        self.part
                    )));
                }
                Event::Decl(_) | Event::PI(_) | Event::Comment(_) => continue,
                Event::Eof => Ev::Eof,
            });
        }
    }

    /// Skips to the end of the element just started (its whole subtree).
    pub(crate) fn skip(&mut self) -> Result<(), ExtractError> {
        let mut depth = 1_usize;
        loop {
            match self.next()? {
                Ev::Start(_) => depth += 1,
                Ev::End(_) => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Ev::Eof => return Ok(()),
                Ev::Empty(_) | Ev::Text(_) => {}
            }
        }
    }

    /// Reads the whole part, only to apply the checks (DOCTYPE, nesting,
    /// well-formedness).
    pub(crate) fn check(mut self) -> Result<(), ExtractError> {
        while !matches!(self.next()?, Ev::Eof) {}
        Ok(())
    }
}

/// The failure for nesting past `max`.
pub(crate) fn too_deep(max: u32) -> ExtractError {
    ExtractError::TooDeep(format!(
        "the document nests elements more than {max} deep; such files are refused \
         (they exhaust readers), so it cannot be read"
    ))
}

/// The local part of a qualified name (`w:p` → `p`).
pub(crate) fn local(name: &[u8]) -> &[u8] {
    match name.iter().position(|b| *b == b':') {
        Some(colon) => name.get(colon + 1..).unwrap_or_default(),
        None => name,
    }
}

/// An element's local name.
pub(crate) fn name<'e>(element: &'e BytesStart<'_>) -> &'e [u8] {
    local(element.name().into_inner().as_bytes())
}

/// The value of the attribute of local name `name` (any prefix, or none).
pub(crate) fn attr(element: &BytesStart<'_>, name: &[u8]) -> Option<String> {
    element
        .attributes()
        .filter_map(Result::ok)
        .find(|a| local(a.key.as_ref().as_bytes()) == name)
        .and_then(|a| a.normalized_value(XmlVersion::Implicit1_0).ok())
        .map(Cow::into_owned)
}

/// The value of the attribute of local name `name` that has a prefix
/// (`r:id`, not `id`).
pub(crate) fn prefixed_attr(element: &BytesStart<'_>, name: &[u8]) -> Option<String> {
    element
        .attributes()
        .filter_map(Result::ok)
        .find(|a| a.key.as_ref().contains(':') && local(a.key.as_ref().as_bytes()) == name)
        .and_then(|a| a.normalized_value(XmlVersion::Implicit1_0).ok())
        .map(Cow::into_owned)
}

/// Bytes of an XML part as text: UTF-8 (a BOM dropped) or UTF-16 with its BOM.
pub(crate) fn decode<'b>(bytes: &'b [u8], part: &str) -> Result<Cow<'b, str>, ExtractError> {
    let utf16 = |big_endian: bool, body: &[u8]| -> Option<String> {
        let units = body.chunks_exact(2).map(|pair| match pair {
            [a, b] if big_endian => u16::from_be_bytes([*a, *b]),
            [a, b] => u16::from_le_bytes([*a, *b]),
            _ => 0,
        });
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .ok()
    };
    let decoded = match bytes {
        [0xEF, 0xBB, 0xBF, rest @ ..] => std::str::from_utf8(rest).ok().map(Cow::Borrowed),
        [0xFF, 0xFE, rest @ ..] => utf16(false, rest).map(Cow::Owned),
        [0xFE, 0xFF, rest @ ..] => utf16(true, rest).map(Cow::Owned),
        _ => std::str::from_utf8(bytes).ok().map(Cow::Borrowed),
    };
    decoded.ok_or_else(|| {
        ExtractError::Malformed(format!(
            "the document's {part} is not UTF-8 or UTF-16 text; the file is damaged"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{Ev, Xml};
    use crate::limits::Limits;

    fn read_all(text: &str, limits: &Limits) -> Result<String, crate::ExtractError> {
        let mut xml = Xml::new(text, "test.xml", limits);
        let mut out = String::new();
        loop {
            match xml.next()? {
                Ev::Text(t) => out.push_str(&t),
                Ev::Eof => return Ok(out),
                _ => {}
            }
        }
    }

    #[test]
    fn a_doctype_is_refused_as_an_entity_bomb() {
        let text = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><a>&lol2;</a>"#;
        let error = read_all(text, &Limits::default()).unwrap_err();
        assert_eq!(error.reason(), "entity_bomb");
    }

    #[test]
    fn predefined_entities_and_character_references_are_resolved() {
        let text = "<a>x &amp; y &#x4E2D;&#25991; &lt;z&gt;</a>";
        assert_eq!(
            read_all(text, &Limits::default()).unwrap(),
            "x & y 中文 <z>"
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let limits = Limits {
            max_depth: 10,
            ..Limits::default()
        };
        let ok = format!("{}{}", "<a>".repeat(10), "</a>".repeat(10));
        read_all(&ok, &limits).unwrap();
        let deep = format!("{}{}", "<a>".repeat(11), "</a>".repeat(11));
        assert_eq!(read_all(&deep, &limits).unwrap_err().reason(), "too_deep");
    }

    #[test]
    fn mismatched_tags_are_malformed() {
        let error = read_all("<a><b></a>", &Limits::default()).unwrap_err();
        assert_eq!(error.reason(), "malformed");
    }
}
