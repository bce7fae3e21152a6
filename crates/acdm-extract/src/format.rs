//! The document formats read, how a document was read, and what reading
//! gives.

use serde::{Deserialize, Serialize};

/// A document format, named by its file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Word (Office Open XML).
    Docx,
    /// Excel (Office Open XML).
    Xlsx,
    /// PowerPoint (Office Open XML).
    Pptx,
    /// OpenDocument text.
    Odt,
    /// OpenDocument spreadsheet.
    Ods,
    /// OpenDocument presentation.
    Odp,
    /// PDF.
    Pdf,
    /// HTML (`.html` or `.htm`).
    Html,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::Docx,
        Self::Xlsx,
        Self::Pptx,
        Self::Odt,
        Self::Ods,
        Self::Odp,
        Self::Pdf,
        Self::Html,
    ];

    /// The format of a file, by its name's extension (case-insensitive;
    /// `.htm` is HTML); `None` for any other file.
    #[must_use]
    pub fn from_name(file_name: &str) -> Option<Self> {
        let (_, extension) = file_name.rsplit_once('.')?;
        let extension = extension.to_ascii_lowercase();
        if extension == "htm" {
            return Some(Self::Html);
        }
        Self::ALL
            .into_iter()
            .find(|format| format.as_str() == extension)
    }

    /// The lower-case name: `docx`, `xlsx`, `pptx`, `odt`, `ods`, `odp`,
    /// `pdf` or `html`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Docx => "docx",
            Self::Xlsx => "xlsx",
            Self::Pptx => "pptx",
            Self::Odt => "odt",
            Self::Ods => "ods",
            Self::Odp => "odp",
            Self::Pdf => "pdf",
            Self::Html => "html",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a document's text was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// This crate's own reader of the format.
    Native,
    /// Poppler's `pdftotext`.
    Pdftotext,
    /// The built-in PDF reader (lopdf), where pdftotext is not installed.
    BuiltInPdf,
}

impl Via {
    /// The snake_case name: `native`, `pdftotext` or `built_in_pdf`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Pdftotext => "pdftotext",
            Self::BuiltInPdf => "built_in_pdf",
        }
    }
}

/// A document read as Markdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// The document's format.
    pub format: Format,
    /// Its text as Markdown.
    pub text: String,
    /// How the text was had.
    pub via: Via,
    /// What the reader of the text should know (a fallback that may have
    /// lost text, say); empty as a rule.
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn formats_are_named_by_extension_whatever_the_case() {
        assert_eq!(Format::from_name("Minutes.DOCX"), Some(Format::Docx));
        assert_eq!(Format::from_name("a.b.xlsx"), Some(Format::Xlsx));
        assert_eq!(Format::from_name("page.htm"), Some(Format::Html));
        assert_eq!(Format::from_name("page.HTML"), Some(Format::Html));
        assert_eq!(Format::from_name("notes.txt"), None);
        assert_eq!(Format::from_name("docx"), None);
        for format in Format::ALL {
            let name = format!("x.{}", format.as_str());
            assert_eq!(Format::from_name(&name), Some(format));
            assert_eq!(
                serde_json::to_string(&format).unwrap(),
                format!("\"{format}\"")
            );
        }
    }
}
