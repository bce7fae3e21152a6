//! PDF: poppler's `pdftotext -enc UTF-8` (reading order, CID fonts with
//! predefined CMaps, which Chinese PDFs use) run as a subprocess on a
//! temporary copy, with its own deadline and its output capped; each page
//! (pdftotext ends each with a form feed) is `## Page N`. Where pdftotext
//! cannot be run, lopdf's text extraction, with a warning. A PDF whose
//! text is empty or mostly U+FFFD has no text layer (`no_text`).

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::ExtractError;
use crate::format::Via;
use crate::limits::Limits;
use crate::markdown::{Markdown, too_large};

/// The warning given when the built-in reader was used.
pub(crate) const FALLBACK_WARNING: &str =
    "pdftotext is not installed; the built-in extractor was used (Chinese text may be lost)";

/// How much of pdftotext's error output is kept (to tell a password from damage).
const STDERR_CAP: u64 = 8 * 1024;

/// SIGXCPU: the CPU-time limit was reached.
const SIGXCPU: i32 = 24;

/// A PDF's text and how it was had.
pub(crate) struct PdfText {
    pub(crate) text: String,
    pub(crate) via: Via,
    pub(crate) warnings: Vec<String>,
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<PdfText, ExtractError> {
    if !bytes.starts_with(b"%PDF")
        && !bytes
            .get(..1024)
            .unwrap_or(bytes)
            .windows(4)
            .any(|w| w == b"%PDF")
    {
        return Err(ExtractError::Malformed(
            "the file is not a PDF (it has no %PDF header)".to_owned(),
        ));
    }
    match pdftotext(bytes, limits)? {
        Some(pages) => Ok(PdfText {
            text: pages_markdown(&pages, limits)?,
            via: Via::Pdftotext,
            warnings: Vec::new(),
        }),
        None => Ok(PdfText {
            text: pages_markdown(&built_in(bytes, limits)?, limits)?,
            via: Via::BuiltInPdf,
            warnings: vec![FALLBACK_WARNING.to_owned()],
        }),
    }
}

/// The pages' text as Markdown, or `no_text` for a PDF without a text layer.
fn pages_markdown(pages: &[String], limits: &Limits) -> Result<String, ExtractError> {
    let mut letters = 0_usize;
    let mut replacements = 0_usize;
    for c in pages.iter().flat_map(|page| page.chars()) {
        if !c.is_whitespace() {
            letters += 1;
            if c == '\u{FFFD}' {
                replacements += 1;
            }
        }
    }
    if letters == 0 || replacements.saturating_mul(2) > letters {
        return Err(ExtractError::NoText(
            "the PDF has no text layer: a scanned document needs OCR, which is not done here"
                .to_owned(),
        ));
    }
    let mut md = Markdown::new(limits);
    for (index, page) in pages.iter().enumerate() {
        md.heading(2, &format!("Page {}", index + 1))?;
        md.block(page.trim_end())?;
    }
    Ok(md.finish())
}

/// The pages as pdftotext reads them; `None` when pdftotext cannot be run.
fn pdftotext(bytes: &[u8], limits: &Limits) -> Result<Option<Vec<String>>, ExtractError> {
    let unavailable = |error: std::io::Error| {
        ExtractError::Unavailable(format!(
            "the PDF cannot be handed to pdftotext (a temporary file: {})",
            error.kind()
        ))
    };
    let mut file = tempfile::Builder::new()
        .prefix("acdm-extract-")
        .suffix(".pdf")
        .tempfile()
        .map_err(unavailable)?;
    file.write_all(bytes).map_err(unavailable)?;
    file.flush().map_err(unavailable)?;
    let mut child = match Command::new(&limits.pdftotext)
        .env_clear()
        .env("PATH", crate::CHILD_PATH)
        .args(["-enc", "UTF-8"])
        .arg(file.path())
        .arg("-")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(_) => return Ok(None),
    };
    let cap = limits.max_output_bytes;
    let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ExtractError::Unavailable(
            "pdftotext's output cannot be read".to_owned(),
        ));
    };
    let (sender, receiver) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = stdout
            .by_ref()
            .take(cap.saturating_add(1))
            .read_to_end(&mut out);
        let _ = sender.send(read.map(|_| out));
    });
    let errors = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stderr.take(STDERR_CAP).read_to_end(&mut out);
        out
    });
    let deadline = Duration::from_secs(limits.wall_seconds.saturating_sub(1).max(1));
    let output = match receiver.recv_timeout(deadline) {
        Ok(output) => output,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            let _ = errors.join();
            return Err(ExtractError::TimedOut(format!(
                "pdftotext took longer than {} s on this PDF; it cannot be read in time",
                deadline.as_secs()
            )));
        }
    };
    let too_long = output
        .as_ref()
        .is_ok_and(|out| u64::try_from(out.len()).unwrap_or(u64::MAX) > cap);
    if too_long {
        let _ = child.kill();
    }
    let status = child.wait();
    let _ = reader.join();
    let stderr = errors.join().unwrap_or_default();
    if too_long {
        return Err(too_large(usize::try_from(cap).unwrap_or(usize::MAX)));
    }
    let output = output.map_err(|error| {
        ExtractError::Crashed(format!(
            "pdftotext's output could not be read ({})",
            error.kind()
        ))
    })?;
    let status = status.map_err(|error| {
        ExtractError::Crashed(format!(
            "pdftotext could not be waited for ({})",
            error.kind()
        ))
    })?;
    check_status(status, &stderr)?;
    let text = String::from_utf8_lossy(&output);
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_owned).collect();
    if pages.len() > 1 && pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    Ok(Some(pages))
}

/// pdftotext's exit: 0 is success; 1 a file it cannot open (a password,
/// or damage); 3 a PDF that forbids copying its text; a signal a crash
/// (SIGXCPU: its CPU time ran out).
fn check_status(status: ExitStatus, stderr: &[u8]) -> Result<(), ExtractError> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return Ok(());
    }
    if let Some(signal) = status.signal() {
        return Err(if signal == SIGXCPU {
            ExtractError::TimedOut(
                "pdftotext used up its CPU time on this PDF; it cannot be read in time".to_owned(),
            )
        } else {
            ExtractError::Crashed(format!(
                "pdftotext crashed on this PDF (signal {signal}); it cannot be read"
            ))
        });
    }
    let said = String::from_utf8_lossy(stderr).to_lowercase();
    if status.code() == Some(3) || said.contains("password") || said.contains("encrypt") {
        return Err(ExtractError::Encrypted(
            "the PDF is password-protected or forbids copying its text; it cannot be read: ask \
             for an unprotected copy"
                .to_owned(),
        ));
    }
    Err(ExtractError::Malformed(
        "the file is not a readable PDF (pdftotext cannot open it); it is damaged or not a PDF"
            .to_owned(),
    ))
}

/// The pages as lopdf reads them (no CID fonts with predefined CMaps:
/// Chinese text is often lost).
fn built_in(bytes: &[u8], limits: &Limits) -> Result<Vec<String>, ExtractError> {
    let max_inflated = usize::try_from(limits.max_inflated_bytes).unwrap_or(usize::MAX);
    let read = std::panic::catch_unwind(|| -> Result<Vec<String>, ExtractError> {
        let document = lopdf::Document::load_mem(bytes).map_err(|error| match error {
            lopdf::Error::Decryption(_)
            | lopdf::Error::InvalidPassword
            | lopdf::Error::UnsupportedSecurityHandler(_) => ExtractError::Encrypted(
                "the PDF is password-protected; it cannot be read: ask for an unprotected copy"
                    .to_owned(),
            ),
            lopdf::Error::RecursionLimit | lopdf::Error::ReferenceLimit => {
                crate::xml::too_deep(limits.max_depth)
            }
            _ => ExtractError::Malformed(
                "the file is not a readable PDF; it is damaged or not a PDF".to_owned(),
            ),
        })?;
        let mut pages = Vec::new();
        let mut held = 0_usize;
        for number in document.get_pages().into_keys() {
            let text = document
                .extract_text_with_limit(&[number], max_inflated)
                .unwrap_or_default();
            held = held.saturating_add(text.len());
            if u64::try_from(held).unwrap_or(u64::MAX) > limits.max_output_bytes {
                return Err(too_large(
                    usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX),
                ));
            }
            pages.push(text);
        }
        Ok(pages)
    });
    read.unwrap_or_else(|_| {
        Err(ExtractError::Malformed(
            "the built-in PDF reader failed on this file; it is damaged or uses features it does \
             not support"
                .to_owned(),
        ))
    })
}
