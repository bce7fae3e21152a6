//! Zip containers (OOXML, ODF) read defensively: the entry count is capped,
//! and bytes are counted while inflating, against one budget for the whole
//! archive (the sizes an archive declares are the attacker's choice).

use std::io::{Cursor, Read};

use zip::ZipArchive;
use zip::result::ZipError;

use crate::error::ExtractError;
use crate::limits::Limits;
use crate::xml::{Xml, decode};

/// The first bytes of an OLE compound file: what an encrypted OOXML
/// document (or an old binary Office file) is.
const CFB_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// How much is inflated at a time.
const CHUNK: usize = 64 * 1024;

/// An open zip container and what has been inflated from it so far.
pub(crate) struct Archive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    inflated: u64,
    max_inflated: u64,
    limits: &'a Limits,
}

impl<'a> Archive<'a> {
    /// Opens `bytes` as a zip container; `what` names the format in messages.
    pub(crate) fn open(
        bytes: &'a [u8],
        limits: &'a Limits,
        what: &str,
    ) -> Result<Self, ExtractError> {
        if bytes.starts_with(&CFB_MAGIC) {
            return Err(ExtractError::Encrypted(format!(
                "the file is a password-protected (encrypted) Office document, or an old binary \
                 Office file named as {what}; it cannot be read: ask for an unprotected copy in \
                 the current format"
            )));
        }
        let zip = ZipArchive::new(Cursor::new(bytes)).map_err(|error| zip_error(&error, what))?;
        if u64::try_from(zip.len()).unwrap_or(u64::MAX) > limits.max_entries {
            return Err(ExtractError::ZipBomb(format!(
                "the {what} archive has {} entries, more than the {} allowed; it looks like a zip \
                 bomb and is not read",
                zip.len(),
                limits.max_entries
            )));
        }
        Ok(Self {
            zip,
            inflated: 0,
            max_inflated: limits.max_inflated_bytes,
            limits,
        })
    }

    /// The entry `name` inflated (its name compared case-insensitively, as
    /// OPC part names are), or `None` when the archive has no such entry.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let index = match self.zip.index_for_name(name) {
            Some(index) => index,
            None => {
                let found = (0..self.zip.len()).find(|&i| {
                    self.entry_name(i)
                        .is_some_and(|entry| entry.eq_ignore_ascii_case(name))
                });
                match found {
                    Some(index) => index,
                    None => return Ok(None),
                }
            }
        };
        self.read_index(index).map(Some)
    }

    /// The XML entry `name` as text, or `None` when the archive has no such entry.
    pub(crate) fn read_text(&mut self, name: &str) -> Result<Option<String>, ExtractError> {
        match self.read(name)? {
            None => Ok(None),
            Some(bytes) => Ok(Some(decode(&bytes, name)?.into_owned())),
        }
    }

    /// Inflates every entry (counting, against the budget) and checks
    /// every XML part (no DOCTYPE, nesting within the limit): what is done
    /// before a third-party reader (calamine) is handed the archive.
    /// Returns the entry named `keep` (compared case-insensitively) as
    /// text, if there is one, so that it need not be inflated again.
    pub(crate) fn audit(&mut self, keep: Option<&str>) -> Result<Option<String>, ExtractError> {
        let mut kept = None;
        for index in 0..self.zip.len() {
            let name = self.entry_name(index).unwrap_or_default();
            if name.ends_with('/') {
                continue;
            }
            let bytes = self.read_index(index)?;
            let lower = name.to_ascii_lowercase();
            if lower.ends_with(".xml") || lower.ends_with(".rels") {
                let text = decode(&bytes, &name)?;
                Xml::new(&text, &name, self.limits).check()?;
                if keep.is_some_and(|keep| keep.eq_ignore_ascii_case(&name)) {
                    kept = Some(text.into_owned());
                }
            }
        }
        Ok(kept)
    }

    fn entry_name(&self, index: usize) -> Option<String> {
        self.zip
            .name_for_index(index)
            .and_then(Result::ok)
            .map(std::borrow::Cow::into_owned)
    }

    fn read_index(&mut self, index: usize) -> Result<Vec<u8>, ExtractError> {
        let mut entry = self
            .zip
            .by_index(index)
            .map_err(|error| zip_error(&error, "zip"))?;
        if entry.encrypted() {
            return Err(encrypted());
        }
        let declared = usize::try_from(entry.size()).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(declared.min(CHUNK * 16));
        let mut chunk = vec![0_u8; CHUNK];
        loop {
            let read = entry.read(&mut chunk).map_err(|error| {
                ExtractError::Malformed(format!(
                    "an entry of the archive cannot be inflated ({error}); the file is damaged"
                ))
            })?;
            if read == 0 {
                return Ok(out);
            }
            self.inflated = self
                .inflated
                .saturating_add(u64::try_from(read).unwrap_or(u64::MAX));
            if self.inflated > self.max_inflated {
                return Err(ExtractError::ZipBomb(format!(
                    "the archive inflates to more than {} bytes, the most allowed; it looks like a \
                     zip bomb and is not read",
                    self.max_inflated
                )));
            }
            out.extend_from_slice(chunk.get(..read).unwrap_or_default());
        }
    }
}

fn encrypted() -> ExtractError {
    ExtractError::Encrypted(
        "the document is password-protected (its entries are encrypted); it cannot be read: \
         ask for an unprotected copy"
            .to_owned(),
    )
}

fn zip_error(error: &ZipError, what: &str) -> ExtractError {
    match error {
        ZipError::UnsupportedArchive(message) if *message == ZipError::PASSWORD_REQUIRED => {
            encrypted()
        }
        ZipError::InvalidPassword => encrypted(),
        _ => ExtractError::Malformed(format!(
            "the file is not a valid {what} document: its zip container cannot be read ({error})"
        )),
    }
}
