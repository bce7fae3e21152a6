//! What the tests share: where the fixture documents are (and what their
//! manifest says), whether pdftotext is installed, and hostile archives
//! built with the zip crate.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Whether the environment asks for every external tool (CI sets it).
#[expect(
    clippy::disallowed_methods,
    reason = "a test: CI's switch that makes missing test tools a failure"
)]
pub(crate) fn tools_required() -> bool {
    std::env::var_os("ACDM_REQUIRE_WEBDAV").is_some()
}

/// The folder of documents `cargo xtask setup` writes, or `None` (after
/// saying so) when it has not run; a failure when tools are required.
pub(crate) fn documents() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/fixtures/documents");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(
        !tools_required(),
        "ACDM_REQUIRE_WEBDAV is set but the test documents are missing from {}; run `cargo xtask setup`",
        dir.display()
    );
    eprintln!(
        "the test documents are not there (cargo xtask setup writes them): this test is left out"
    );
    None
}

/// A document's entry in the manifest.
pub(crate) struct Fixture {
    pub(crate) path: PathBuf,
    pub(crate) facts: Value,
}

impl Fixture {
    pub(crate) fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap()
    }

    /// The strings of the manifest's list `key` (none when it has no such list).
    pub(crate) fn strings(&self, key: &str) -> Vec<String> {
        self.facts[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| item.as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The fixture `name`, or `None` when the documents are not there.
pub(crate) fn fixture(name: &str) -> Option<Fixture> {
    let dir = documents()?;
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let facts = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|file| file["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the manifest"))
        .clone();
    Some(Fixture {
        path: dir.join(name),
        facts,
    })
}

/// Whether pdftotext runs here; when it does not, says so (a failure
/// when tools are required).
pub(crate) fn pdftotext_installed() -> bool {
    let runs = Command::new("pdftotext")
        .arg("-v")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !runs {
        assert!(
            !tools_required(),
            "ACDM_REQUIRE_WEBDAV is set but pdftotext is not installed; run `cargo xtask setup`"
        );
        eprintln!(
            "pdftotext is not installed (cargo xtask setup installs it): this test is left out"
        );
    }
    runs
}

/// A zip archive of `entries` (name, content), deflated.
pub(crate) fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(false);
    for (name, content) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// The parts a .docx needs, with `document` as `word/document.xml`.
pub(crate) fn docx(document: &[u8]) -> Vec<u8> {
    zip(&[
        (
            "[Content_Types].xml",
            br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#,
        ),
        (
            "_rels/.rels",
            br#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#,
        ),
        ("word/document.xml", document),
    ])
}

/// `body` inside a Word document element.
pub(crate) fn word_body(body: &str) -> Vec<u8> {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    )
    .into_bytes()
}

/// The parts an .xlsx needs, with one sheet of `sheet_data` (the
/// `<sheetData>` content) declaring `dimension`.
pub(crate) fn xlsx(dimension: &str, sheet_data: &str) -> Vec<u8> {
    let sheet = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="{dimension}"/><sheetData>{sheet_data}</sheetData></worksheet>"#
    );
    zip(&[
        (
            "[Content_Types].xml",
            br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#,
        ),
        (
            "_rels/.rels",
            br#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
        ),
        (
            "xl/workbook.xml",
            br#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
        ),
        (
            "xl/_rels/workbook.xml.rels",
            br#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#,
        ),
        ("xl/worksheets/sheet1.xml", sheet.as_bytes()),
    ])
}

/// The parts an OpenDocument file of `mimetype` needs, with `body` inside
/// `office:body`.
pub(crate) fn odf(mimetype: &str, body: &str) -> Vec<u8> {
    let content = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.2"><office:body>{body}</office:body></office:document-content>"#
    );
    let manifest = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>"#
    );
    zip(&[
        ("mimetype", mimetype.as_bytes()),
        ("content.xml", content.as_bytes()),
        ("META-INF/manifest.xml", manifest.as_bytes()),
    ])
}
