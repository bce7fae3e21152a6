//! The fixture documents (made by python-docx, openpyxl, python-pptx,
//! odfpy and reportlab; see `xtask/fixtures/make_documents.py`), read
//! in-process, against the facts their manifest states.

use acdm_extract::{Extracted, Format, Limits, Via, extract};

use crate::support::{Fixture, fixture, pdftotext_installed};

/// Reads a fixture with the default limits.
fn read(fixture: &Fixture) -> Extracted {
    let name = fixture.path.file_name().unwrap().to_str().unwrap();
    let format = Format::from_name(name).unwrap();
    assert_eq!(fixture.facts["format"], format.as_str());
    extract(format, &fixture.bytes(), &Limits::default())
        .unwrap_or_else(|error| panic!("{name}: {} ({error})", error.reason()))
}

/// Asserts what the manifest says of a document: its headings are lines,
/// in order; its `lines` are lines; it contains `contains` and none of
/// `absent`.
fn assert_facts(fixture: &Fixture, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let mut after = 0;
    for heading in fixture.strings("headings") {
        let at = lines
            .iter()
            .skip(after)
            .position(|line| *line == heading)
            .unwrap_or_else(|| panic!("no heading line {heading:?} (in order) in:\n{text}"));
        after += at + 1;
    }
    for line in fixture.strings("lines") {
        assert!(
            lines.contains(&line.as_str()),
            "no line {line:?} in:\n{text}"
        );
    }
    for part in fixture.strings("contains") {
        assert!(text.contains(&part), "{part:?} missing from:\n{text}");
    }
    for part in fixture.strings("absent") {
        assert!(!text.contains(&part), "{part:?} should not be in:\n{text}");
    }
}

/// The text under each `## Page N` heading.
fn pages(text: &str) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(number) = line.strip_prefix("## Page ") {
            assert_eq!(
                number,
                (pages.len() + 1).to_string(),
                "pages out of order:\n{text}"
            );
            pages.push(String::new());
        } else if let Some(page) = pages.last_mut() {
            page.push_str(line);
            page.push('\n');
        }
    }
    pages
}

fn assert_pages(fixture: &Fixture, text: &str) {
    let pages = pages(text);
    let expected = fixture.facts["page_text"].as_array().unwrap();
    assert_eq!(pages.len(), expected.len(), "{text}");
    for (page, strings) in pages.iter().zip(expected) {
        for string in strings.as_array().unwrap() {
            let string = string.as_str().unwrap();
            assert!(
                page.contains(string),
                "{string:?} not on its page in:\n{text}"
            );
        }
    }
}

#[test]
fn word_minutes_keep_heading_levels_lists_and_one_line_table_rows() {
    let Some(minutes) = fixture("minutes.docx") else {
        return;
    };
    let extracted = read(&minutes);
    assert_eq!(extracted.via, Via::Native);
    assert!(extracted.warnings.is_empty());
    assert_facts(&minutes, &extracted.text);
}

#[test]
fn chinese_word_headings_come_from_style_names_and_outline_levels_never_from_style_ids() {
    let Some(minutes) = fixture("minutes-zh.docx") else {
        return;
    };
    let extracted = read(&minutes);
    assert_facts(&minutes, &extracted.text);
    let headings: Vec<&str> = extracted
        .text
        .lines()
        .filter(|line| line.starts_with('#'))
        .collect();
    assert_eq!(headings, minutes.strings("headings"), "{}", extracted.text);
}

#[test]
fn excel_sheets_are_headed_by_their_names_with_numbers_in_plain_digits_and_iso_dates() {
    let Some(budget) = fixture("budget.xlsx") else {
        return;
    };
    let extracted = read(&budget);
    assert_facts(&budget, &extracted.text);
    let sheets: Vec<String> = budget
        .strings("sheets")
        .iter()
        .map(|name| format!("## {name}"))
        .collect();
    let headings: Vec<&str> = extracted
        .text
        .lines()
        .filter(|line| line.starts_with("## "))
        .collect();
    assert_eq!(headings, sheets);
    // A styled empty cell far away widens nothing: every row has 4 cells or 2.
    for line in extracted.text.lines().filter(|l| l.starts_with("| ")) {
        let cells = line.matches(" |").count();
        assert!(cells == 4 || cells == 2, "a row of {cells} cells: {line}");
    }
}

#[test]
fn powerpoint_slides_come_in_the_presentation_order_with_their_titles() {
    let Some(review) = fixture("review.pptx") else {
        return;
    };
    let extracted = read(&review);
    assert_facts(&review, &extracted.text);
    let titles: Vec<String> = extracted
        .text
        .lines()
        .filter_map(|line| line.strip_prefix("## Slide "))
        .map(|rest| rest.split_once(": ").unwrap().1.to_owned())
        .collect();
    assert_eq!(titles, review.strings("slide_titles"));
}

#[test]
fn opendocument_text_keeps_outline_levels_lists_and_tables() {
    let Some(plan) = fixture("plan.odt") else {
        return;
    };
    assert_facts(&plan, &read(&plan).text);
}

#[test]
fn opendocument_sheets_are_headed_by_their_names_and_repeated_empties_are_dropped() {
    let Some(budget) = fixture("budget.ods") else {
        return;
    };
    let extracted = read(&budget);
    assert_facts(&budget, &extracted.text);
    assert!(
        extracted.text.len() < 1000,
        "rows and cells repeated to the sheet's edge were written:\n{}",
        &extracted.text[..1000.min(extracted.text.len())]
    );
}

#[test]
fn opendocument_presentation_pages_are_slides_titled_by_their_title_frame_or_name() {
    let Some(overview) = fixture("overview.odp") else {
        return;
    };
    let extracted = read(&overview);
    assert_facts(&overview, &extracted.text);
    let titles: Vec<String> = extracted
        .text
        .lines()
        .filter_map(|line| line.strip_prefix("## Slide "))
        .map(|rest| rest.split_once(": ").unwrap().1.to_owned())
        .collect();
    assert_eq!(titles, overview.strings("slide_titles"));
}

#[test]
fn pdf_pages_come_in_order_through_pdftotext() {
    let Some(report) = fixture("report.pdf") else {
        return;
    };
    if !pdftotext_installed() {
        return;
    }
    let extracted = read(&report);
    assert_eq!(extracted.via, Via::Pdftotext);
    assert!(extracted.warnings.is_empty());
    assert_facts(&report, &extracted.text);
    assert_pages(&report, &extracted.text);
}

#[test]
fn chinese_pdf_text_in_a_cid_font_survives_pdftotext() {
    let Some(report) = fixture("report-zh.pdf") else {
        return;
    };
    if !pdftotext_installed() {
        return;
    }
    let extracted = read(&report);
    assert_eq!(extracted.via, Via::Pdftotext);
    assert_pages(&report, &extracted.text);
}

#[test]
fn without_pdftotext_the_built_in_reader_is_used_and_says_so() {
    let Some(report) = fixture("report.pdf") else {
        return;
    };
    let limits = Limits {
        pdftotext: "/nonexistent/pdftotext".into(),
        ..Limits::default()
    };
    let extracted = extract(Format::Pdf, &report.bytes(), &limits).unwrap();
    assert_eq!(extracted.via, Via::BuiltInPdf);
    assert_eq!(
        extracted.warnings,
        ["pdftotext is not installed; the built-in extractor was used (Chinese text may be lost)"]
    );
    assert_pages(&report, &extracted.text);
}

#[test]
fn html_keeps_headings_lists_tables_and_link_text_without_scripts_or_styles() {
    let Some(page) = fixture("notes.html") else {
        return;
    };
    assert_facts(&page, &read(&page).text);
}

#[test]
fn every_fixture_of_the_manifest_is_read() {
    let Some(dir) = crate::support::documents() else {
        return;
    };
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let names: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["name"].as_str().unwrap())
        .collect();
    let formats: std::collections::BTreeSet<Format> = names
        .iter()
        .map(|n| Format::from_name(n).unwrap())
        .collect();
    assert_eq!(
        formats.len(),
        Format::ALL.len(),
        "a format has no fixture: {names:?}"
    );
    for name in names {
        let fixture = fixture(name).unwrap();
        if fixture.facts["format"] == "pdf" && !pdftotext_installed() {
            continue;
        }
        if let Some(reason) = fixture.facts["reason"].as_str() {
            let format = Format::from_name(name).unwrap();
            let error = extract(format, &fixture.bytes(), &Limits::default()).unwrap_err();
            assert_eq!(error.reason(), reason, "{name}");
            continue;
        }
        let extracted = read(&fixture);
        assert!(!extracted.text.trim().is_empty(), "{name} gave no text");
        assert!(extracted.text.ends_with('\n') && !extracted.text.ends_with("\n\n"));
    }
}
