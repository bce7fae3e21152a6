//! Hostile files read in-process: each fails with its reason, and none
//! is partly read.

use acdm_extract::{ExtractError, Format, Limits, extract};

use crate::support::{docx, fixture, odf, word_body, xlsx, zip};

fn reason(format: Format, bytes: &[u8], limits: &Limits) -> &'static str {
    match extract(format, bytes, limits) {
        Ok(extracted) => panic!(
            "read as {:?}",
            &extracted.text[..200.min(extracted.text.len())]
        ),
        Err(error) => {
            assert!(!error.to_string().is_empty());
            assert!(!error.to_string().contains("/tmp/"), "{error}");
            error.reason()
        }
    }
}

/// A billion-laughs DOCTYPE.
const LAUGHS: &str = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"#;

pub(crate) fn zip_bomb() -> Vec<u8> {
    let text = " ".repeat(24 * 1024 * 1024);
    docx(&word_body(&format!(
        "<w:p><w:r><w:t>x{text}x</w:t></w:r></w:p>"
    )))
}

pub(crate) fn entity_bomb() -> Vec<u8> {
    docx(LAUGHS.as_bytes())
}

pub(crate) fn deep_docx() -> Vec<u8> {
    let depth = 10_000;
    let body = format!(
        "{}<w:p/>{}",
        "<w:sdt>".repeat(depth),
        "</w:sdt>".repeat(depth)
    );
    docx(&word_body(&body))
}

pub(crate) fn far_cell_xlsx() -> Vec<u8> {
    xlsx(
        "A1:XFD1048576",
        r#"<row r="1"><c r="A1"><v>1</v></c></row><row r="1048576"><c r="XFD1048576"><v>2</v></c></row>"#,
    )
}

#[test]
fn an_archive_inflating_past_its_budget_is_a_zip_bomb() {
    let bomb = zip_bomb();
    assert!(bomb.len() < 1024 * 1024, "the bomb is {} bytes", bomb.len());
    let limits = Limits {
        max_inflated_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    };
    assert_eq!(reason(Format::Docx, &bomb, &limits), "zip_bomb");
}

#[test]
fn an_archive_with_too_many_entries_is_a_zip_bomb() {
    let names: Vec<String> = (0..50).map(|i| format!("word/media/{i}.bin")).collect();
    let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    let limits = Limits {
        max_entries: 20,
        ..Limits::default()
    };
    assert_eq!(reason(Format::Docx, &zip(&entries), &limits), "zip_bomb");
}

#[test]
fn xml_with_a_doctype_is_an_entity_bomb_in_every_zip_format() {
    let limits = Limits::default();
    assert_eq!(reason(Format::Docx, &entity_bomb(), &limits), "entity_bomb");
    let sheet = xlsx("A1", "");
    assert!(extract(Format::Xlsx, &sheet, &limits).is_ok());
    let laughs_sheet = zip(&[("xl/workbook.xml", LAUGHS.as_bytes())]);
    assert_eq!(reason(Format::Xlsx, &laughs_sheet, &limits), "entity_bomb");
    let laughs_content = zip(&[
        ("mimetype", &b"application/vnd.oasis.opendocument.text"[..]),
        ("content.xml", LAUGHS.as_bytes()),
    ]);
    assert_eq!(reason(Format::Odt, &laughs_content, &limits), "entity_bomb");
    assert_eq!(reason(Format::Ods, &laughs_content, &limits), "entity_bomb");
}

#[test]
fn elements_nested_past_the_limit_are_too_deep() {
    assert_eq!(
        reason(Format::Docx, &deep_docx(), &Limits::default()),
        "too_deep"
    );
    let html = "<div>".repeat(10_000);
    assert_eq!(
        reason(Format::Html, html.as_bytes(), &Limits::default()),
        "too_deep"
    );
}

#[test]
fn a_sheet_declaring_the_whole_grid_with_a_far_cell_is_refused_before_allocation() {
    assert_eq!(
        reason(Format::Xlsx, &far_cell_xlsx(), &Limits::default()),
        "too_many_cells"
    );
}

#[test]
fn a_sheet_with_more_cells_than_the_budget_is_refused() {
    let rows: String = (1..=30)
        .map(|r| {
            format!(r#"<row r="{r}"><c r="A{r}"><v>{r}</v></c><c r="B{r}"><v>{r}</v></c></row>"#)
        })
        .collect();
    let limits = Limits {
        max_cells: 50,
        ..Limits::default()
    };
    assert_eq!(
        reason(Format::Xlsx, &xlsx("A1:B30", &rows), &limits),
        "too_many_cells"
    );
    let small = Limits {
        max_cells: 60,
        ..Limits::default()
    };
    let text = extract(Format::Xlsx, &xlsx("A1:B30", &rows), &small)
        .unwrap()
        .text;
    assert!(text.contains("| 30 | 30 |"), "{text}");
}

#[test]
fn repeated_rows_and_columns_past_the_cell_budget_are_refused() {
    let table = r#"<table:table table:name="S"><table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="16384" office:value-type="float" office:value="1"><text:p>1</text:p></table:table-cell></table:table-row></table:table>"#;
    let ods = odf(
        "application/vnd.oasis.opendocument.spreadsheet",
        &format!("<office:spreadsheet>{table}</office:spreadsheet>"),
    );
    assert_eq!(
        reason(Format::Ods, &ods, &Limits::default()),
        "too_many_cells"
    );
    let odt = odf(
        "application/vnd.oasis.opendocument.text",
        &format!("<office:text>{table}</office:text>"),
    );
    assert_eq!(
        reason(Format::Odt, &odt, &Limits::default()),
        "too_many_cells"
    );
}

#[test]
fn text_past_the_output_budget_is_a_failure_not_a_truncation() {
    let html = "<p>a few words of text</p>".repeat(2000);
    let limits = Limits {
        max_output_bytes: 10_000,
        ..Limits::default()
    };
    assert_eq!(reason(Format::Html, html.as_bytes(), &limits), "too_large");
    let paragraphs = "<w:p><w:r><w:t>a few words of text</w:t></w:r></w:p>".repeat(2000);
    assert_eq!(
        reason(Format::Docx, &docx(&word_body(&paragraphs)), &limits),
        "too_large"
    );
}

#[test]
fn a_document_larger_than_the_input_budget_is_too_large() {
    let limits = Limits {
        max_input_bytes: 100,
        ..Limits::default()
    };
    assert_eq!(reason(Format::Html, &[b'x'; 101], &limits), "too_large");
}

#[test]
fn an_encrypted_office_document_says_so() {
    // Password-protected OOXML is an OLE compound file, not a zip.
    let mut compound = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    compound.resize(4096, 0);
    for format in [Format::Docx, Format::Xlsx, Format::Pptx] {
        assert_eq!(reason(format, &compound, &Limits::default()), "encrypted");
    }
    let encrypted_odt = zip(&[
        ("mimetype", &b"application/vnd.oasis.opendocument.text"[..]),
        ("content.xml", &b"\x01\x02 not xml"[..]),
        (
            "META-INF/manifest.xml",
            br#"<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data manifest:checksum-type="SHA1"/></manifest:file-entry></manifest:manifest>"#,
        ),
    ]);
    assert_eq!(
        reason(Format::Odt, &encrypted_odt, &Limits::default()),
        "encrypted"
    );
}

#[test]
fn garbage_is_malformed_in_every_format() {
    let garbage: Vec<u8> = (0..4096_u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for format in [
        Format::Docx,
        Format::Xlsx,
        Format::Pptx,
        Format::Odt,
        Format::Ods,
        Format::Odp,
        Format::Pdf,
    ] {
        assert_eq!(
            reason(format, &garbage, &Limits::default()),
            "malformed",
            "{format}"
        );
    }
    let mut pdf = b"%PDF-1.7\n".to_vec();
    pdf.extend_from_slice(&garbage);
    assert_eq!(reason(Format::Pdf, &pdf, &Limits::default()), "malformed");
    let built_in = Limits {
        pdftotext: "/nonexistent/pdftotext".into(),
        ..Limits::default()
    };
    assert_eq!(reason(Format::Pdf, &pdf, &built_in), "malformed");
}

#[test]
fn a_truncated_pdf_fails_rather_than_giving_part_of_its_text() {
    let Some(report) = fixture("report.pdf") else {
        return;
    };
    let bytes = report.bytes();
    let truncated = &bytes[..bytes.len() / 3];
    for limits in [
        Limits::default(),
        Limits {
            pdftotext: "/nonexistent/pdftotext".into(),
            ..Limits::default()
        },
    ] {
        match extract(Format::Pdf, truncated, &limits) {
            Err(ExtractError::Malformed(_) | ExtractError::NoText(_)) => {}
            Err(other) => panic!("{}: {other}", other.reason()),
            Ok(extracted) => {
                // A reader that recovers the pages it can still says nothing false.
                assert!(!extracted.text.contains("Appendix"), "{}", extracted.text);
            }
        }
    }
}

#[test]
fn a_pdf_without_a_text_layer_needs_ocr() {
    let Some(scan) = fixture("scan.pdf") else {
        return;
    };
    assert_eq!(scan.facts["reason"], "no_text");
    let built_in = Limits {
        pdftotext: "/nonexistent/pdftotext".into(),
        ..Limits::default()
    };
    let mut readers = vec![built_in];
    if crate::support::pdftotext_installed() {
        readers.push(Limits::default());
    }
    for limits in readers {
        match extract(Format::Pdf, &scan.bytes(), &limits) {
            Err(ExtractError::NoText(message)) => assert!(message.contains("OCR"), "{message}"),
            Err(other) => panic!("{}: {other}", other.reason()),
            Ok(extracted) => panic!("read: {}", extracted.text),
        }
    }
}
