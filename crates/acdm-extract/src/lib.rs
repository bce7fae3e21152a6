//! Documents as Markdown text for LLM agents: Word, Excel and PowerPoint
//! files (OOXML), their OpenDocument counterparts, PDF and HTML, read
//! safely against hostile files.
//!
//! Two layers:
//!
//! - [`extract`] reads one document in the calling process, synchronously,
//!   within [`Limits`]: it counts bytes while inflating archive entries,
//!   refuses XML with a DOCTYPE, caps element nesting, spreadsheet cells
//!   (before anything is allocated for them) and the output. It is what
//!   the child process runs; the service never calls it in its own
//!   process.
//! - [`Extractor`] is the pool the service uses: each document is read by
//!   a fresh child process ([`child_main`], behind the service binary's
//!   hidden `extract` subcommand) that lowers its own resource limits
//!   (address space, CPU time, open files, file size, no core dumps), is
//!   killed after `wall_seconds`, and whose answer is capped. At most
//!   `processes` children run at once; results (failures too) are cached
//!   by the caller's key.
//!
//! Every failure is an [`ExtractError`] with a stable snake_case
//! [`reason`](ExtractError::reason) and a message an LLM can act on.

mod archive;
mod child;
mod docx;
mod error;
mod format;
mod html;
mod limits;
mod markdown;
mod odf;
mod opc;
mod pdf;
mod pool;
mod pptx;
mod sheet;
mod wire;
mod xml;

/// The whole environment of an extraction child and of its pdftotext: a
/// search path for the system's programs and nothing else (never the
/// service's tokens or passwords).
pub(crate) const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub use child::child_main;
pub use error::ExtractError;
pub use format::{Extracted, Format, Via};
pub use limits::Limits;
pub use pool::{Extractor, ExtractorConfig, ExtractorStats};

/// Reads `bytes` as a document of `format` into Markdown, in this process,
/// within `limits`.
///
/// This is what the child process runs ([`child_main`]); a service reads
/// documents through an [`Extractor`] instead, so that a document that
/// crashes, loops or exhausts memory takes only its child down.
///
/// # Errors
///
/// An [`ExtractError`] saying why the document cannot be read: too large,
/// a zip or entity bomb, too many cells, nested too deeply, malformed,
/// encrypted, a PDF without a text layer, or a pdftotext that timed out.
/// The output is never truncated silently: past `max_output_bytes` the
/// extraction fails with [`ExtractError::TooLarge`].
pub fn extract(format: Format, bytes: &[u8], limits: &Limits) -> Result<Extracted, ExtractError> {
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limits.max_input_bytes {
        return Err(ExtractError::TooLarge(format!(
            "the document is {} bytes, more than the {} bytes a document may have to be read",
            bytes.len(),
            limits.max_input_bytes
        )));
    }
    let (text, via, warnings) = match format {
        Format::Docx => (docx::extract(bytes, limits)?, Via::Native, Vec::new()),
        Format::Pptx => (pptx::extract(bytes, limits)?, Via::Native, Vec::new()),
        Format::Xlsx => (sheet::extract_xlsx(bytes, limits)?, Via::Native, Vec::new()),
        Format::Ods => (sheet::extract_ods(bytes, limits)?, Via::Native, Vec::new()),
        Format::Odt => (odf::extract_odt(bytes, limits)?, Via::Native, Vec::new()),
        Format::Odp => (odf::extract_odp(bytes, limits)?, Via::Native, Vec::new()),
        Format::Html => (html::extract(bytes, limits)?, Via::Native, Vec::new()),
        Format::Pdf => {
            let pdf = pdf::extract(bytes, limits)?;
            (pdf.text, pdf.via, pdf.warnings)
        }
    };
    Ok(Extracted {
        format,
        text,
        via,
        warnings,
    })
}
