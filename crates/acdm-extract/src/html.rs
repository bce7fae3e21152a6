//! HTML as Markdown through htmd (html5ever's parser, the browsers'
//! algorithm): headings, lists, tables and links' text; no script, style
//! or other non-content element. The tree's depth is measured (without
//! recursion) before htmd walks it (with recursion).

use std::rc::Rc;

use htmd::element_handler::Handlers;
use htmd::options::{BulletListMarker, Options};
use htmd::{Element, HtmlToMarkdown, Node};

use crate::error::ExtractError;
use crate::limits::Limits;
use crate::markdown::{Markdown, one_line, render_table};
use crate::xml::too_deep;

/// Elements whose content is not text for a reader.
const SKIPPED: [&str; 12] = [
    "head", "script", "style", "noscript", "template", "iframe", "object", "embed", "svg",
    "canvas", "math", "select",
];

/// Marks a table cell's end, a row's start and a row's end inside the
/// text handlers pass up (private-use characters, removed from the page
/// first).
const CELL_END: char = '\u{E000}';
const ROW_START: char = '\u{E001}';
const ROW_END: char = '\u{E002}';
/// Around a table's text: its cells on one line (what a table nested in a
/// cell becomes), then its Markdown (what a table anywhere else is).
const TABLE_START: char = '\u{E003}';
const TABLE_MIDDLE: char = '\u{E004}';
const TABLE_END: char = '\u{E005}';

/// Whether a character is one of the markers above.
fn is_marker(c: char) -> bool {
    ('\u{E000}'..='\u{E005}').contains(&c)
}

/// `text` with each marked table as its Markdown (`flat`: its cells on one line).
fn resolve_tables(text: &str, flat: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(TABLE_START) {
        out.push_str(rest.get(..start).unwrap_or_default());
        let after = rest
            .get(start + TABLE_START.len_utf8()..)
            .unwrap_or_default();
        let (table, tail) = after.split_once(TABLE_END).unwrap_or((after, ""));
        let (cells, markdown) = table.split_once(TABLE_MIDDLE).unwrap_or((table, ""));
        out.push_str(if flat { cells } else { markdown });
        rest = tail;
    }
    out.push_str(rest);
    out.retain(|c| !is_marker(c));
    out
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let html: String = decode(bytes).chars().filter(|c| !is_marker(*c)).collect();
    let options = Options {
        bullet_list_marker: BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..Options::default()
    };
    let converter = HtmlToMarkdown::builder()
        .options(options)
        .skip_tags(SKIPPED.to_vec())
        .add_handler(
            vec!["a"],
            |handlers: &dyn Handlers, element: Element<'_>| {
                Some(handlers.walk_children(element.node))
            },
        )
        .add_handler(vec!["img"], |_: &dyn Handlers, element: Element<'_>| {
            let alt = element
                .attrs
                .iter()
                .find(|a| &*a.name.local == "alt")
                .map(|a| a.value.to_string())
                .unwrap_or_default();
            Some(alt.into())
        })
        .add_handler(
            vec!["thead", "tbody", "tfoot"],
            |handlers: &dyn Handlers, element: Element<'_>| {
                Some(handlers.walk_children(element.node))
            },
        )
        .add_handler(
            vec!["td", "th"],
            |handlers: &dyn Handlers, element: Element<'_>| {
                let content = resolve_tables(&handlers.walk_children(element.node).content, true);
                Some(format!("{}{CELL_END}", one_line(&content)).into())
            },
        )
        .add_handler(
            vec!["tr"],
            |handlers: &dyn Handlers, element: Element<'_>| {
                let content = handlers.walk_children(element.node).content;
                let mut cells: Vec<&str> = content.split(CELL_END).map(str::trim).collect();
                cells.pop();
                Some(format!("{ROW_START}{}{ROW_END}", cells.join(&CELL_END.to_string())).into())
            },
        )
        .add_handler(
            vec!["table"],
            |handlers: &dyn Handlers, element: Element<'_>| {
                let content = handlers.walk_children(element.node).content;
                let mut rows: Vec<Vec<String>> = Vec::new();
                let mut outside = String::new();
                for (index, piece) in content.split(ROW_START).enumerate() {
                    let (row, rest) = if index == 0 {
                        ("", piece)
                    } else {
                        piece.split_once(ROW_END).unwrap_or((piece, ""))
                    };
                    if index > 0 {
                        rows.push(row.split(CELL_END).map(str::to_owned).collect());
                    }
                    outside.push_str(rest);
                }
                let caption = one_line(&outside);
                let flat: Vec<&str> = rows
                    .iter()
                    .flatten()
                    .map(|cell| cell.trim())
                    .filter(|cell| !cell.is_empty())
                    .collect();
                let flat = one_line(&format!("{caption} {}", flat.join(" ")));
                let table = render_table(&rows);
                let markdown = if caption.is_empty() {
                    table
                } else {
                    format!("{caption}\n\n{table}")
                };
                Some(
                    format!("\n\n{TABLE_START}{flat}{TABLE_MIDDLE}{markdown}{TABLE_END}\n\n")
                        .into(),
                )
            },
        )
        .scripting_enabled(true)
        .build();
    let tree = converter.html_to_tree(&html).map_err(|error| {
        ExtractError::Malformed(format!("the HTML cannot be parsed ({})", error.kind()))
    })?;
    if depth(&tree) > usize::try_from(limits.max_depth).unwrap_or(usize::MAX) {
        return Err(too_deep(limits.max_depth));
    }
    let text = resolve_tables(&converter.tree_to_markdown(&tree), false);
    let mut md = Markdown::new(limits);
    md.block(&text)?;
    Ok(md.finish())
}

/// The depth of the deepest element, measured without recursion.
fn depth(root: &Rc<Node>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(Rc::clone(root), 0_usize)];
    while let Some((node, level)) = stack.pop() {
        deepest = deepest.max(level);
        for child in node.children.borrow().iter() {
            stack.push((Rc::clone(child), level + 1));
        }
    }
    deepest
}

/// The page's text: UTF-8 or UTF-16 by its BOM, else the charset its
/// `<meta>` declares (GBK, Big5, Shift_JIS…), else UTF-8 (invalid bytes
/// replaced).
fn decode(bytes: &[u8]) -> String {
    if let Some((encoding, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        let body = bytes.get(bom..).unwrap_or_default();
        return encoding.decode_without_bom_handling(body).0.into_owned();
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.to_owned();
    }
    let head = String::from_utf8_lossy(bytes.get(..4096).unwrap_or(bytes)).to_ascii_lowercase();
    let label = head.find("charset=").and_then(|at| {
        let rest = head.get(at + "charset=".len()..)?;
        let rest = rest.trim_start_matches(['"', '\'', ' ']);
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        rest.get(..end).map(str::to_owned)
    });
    let encoding = label
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    encoding.decode_without_bom_handling(bytes).0.into_owned()
}

#[cfg(test)]
mod tests {
    use super::extract;
    use crate::limits::Limits;

    #[test]
    fn scripts_and_styles_are_left_out_and_links_keep_their_text() {
        let html = br#"<html><head><title>T</title><style>p{color:red}</style></head>
            <body><h1>Top</h1><script>var secret = 1;</script>
            <p>See <a href="https://example.com/x">the plan</a>.</p>
            <ul><li>one</li><li>two</li></ul></body></html>"#;
        let text = extract(html, &Limits::default()).unwrap();
        assert!(text.contains("# Top"), "{text}");
        assert!(text.contains("See the plan."), "{text}");
        assert!(
            !text.contains("secret") && !text.contains("color"),
            "{text}"
        );
        assert!(!text.contains("example.com"), "{text}");
    }

    #[test]
    fn a_gbk_page_is_decoded_by_its_meta_charset() {
        let (bytes, _, _) = encoding_rs::GBK.encode("<meta charset=\"gbk\"><p>会议纪要</p>");
        let text = extract(&bytes, &Limits::default()).unwrap();
        assert!(text.contains("会议纪要"), "{text}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let limits = Limits {
            max_depth: 50,
            ..Limits::default()
        };
        let html = "<div>".repeat(200);
        let error = extract(html.as_bytes(), &limits).unwrap_err();
        assert_eq!(error.reason(), "too_deep");
    }
}
