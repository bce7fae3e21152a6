//! Why a document could not be read: one variant per stable reason, each
//! carrying a message an LLM can act on (never a server path or a secret).

/// Why a document could not be read.
///
/// The message (`Display`) is a sentence for the agent; [`reason`](Self::reason)
/// is the stable snake_case name for metrics and for code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The document, or the text it would give, is larger than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// An archive (docx, xlsx, …) inflates past its limit, or has too many entries.
    #[error("{0}")]
    ZipBomb(String),
    /// XML with a DOCTYPE (entity definitions): refused outright.
    #[error("{0}")]
    EntityBomb(String),
    /// A spreadsheet has more cells than allowed.
    #[error("{0}")]
    TooManyCells(String),
    /// Elements are nested deeper than allowed.
    #[error("{0}")]
    TooDeep(String),
    /// The file is not a valid document of its format.
    #[error("{0}")]
    Malformed(String),
    /// The document is password-protected or forbids copying its text.
    #[error("{0}")]
    Encrypted(String),
    /// A PDF without a text layer (a scan).
    #[error("{0}")]
    NoText(String),
    /// Reading took longer than allowed (wall-clock or CPU time).
    #[error("{0}")]
    TimedOut(String),
    /// Reading needed more memory than allowed.
    #[error("{0}")]
    OutOfMemory(String),
    /// The reader failed (a panic or a crash of the child process).
    #[error("{0}")]
    Crashed(String),
    /// The extractor itself cannot run (its program cannot be started).
    #[error("{0}")]
    Unavailable(String),
}

/// Every reason, in declaration order.
const REASONS: [&str; 12] = [
    "too_large",
    "zip_bomb",
    "entity_bomb",
    "too_many_cells",
    "too_deep",
    "malformed",
    "encrypted",
    "no_text",
    "timed_out",
    "out_of_memory",
    "crashed",
    "unavailable",
];

impl ExtractError {
    /// The stable snake_case reason: `too_large`, `zip_bomb`,
    /// `entity_bomb`, `too_many_cells`, `too_deep`, `malformed`,
    /// `encrypted`, `no_text`, `timed_out`, `out_of_memory`, `crashed` or
    /// `unavailable`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "too_large",
            Self::ZipBomb(_) => "zip_bomb",
            Self::EntityBomb(_) => "entity_bomb",
            Self::TooManyCells(_) => "too_many_cells",
            Self::TooDeep(_) => "too_deep",
            Self::Malformed(_) => "malformed",
            Self::Encrypted(_) => "encrypted",
            Self::NoText(_) => "no_text",
            Self::TimedOut(_) => "timed_out",
            Self::OutOfMemory(_) => "out_of_memory",
            Self::Crashed(_) => "crashed",
            Self::Unavailable(_) => "unavailable",
        }
    }

    /// Every reason [`reason`](Self::reason) can give.
    #[must_use]
    pub fn reasons() -> &'static [&'static str] {
        &REASONS
    }

    /// The error a child reported as `reason` with `message`; `None` for a
    /// reason this version does not know.
    pub(crate) fn from_reason(reason: &str, message: String) -> Option<Self> {
        Some(match reason {
            "too_large" => Self::TooLarge(message),
            "zip_bomb" => Self::ZipBomb(message),
            "entity_bomb" => Self::EntityBomb(message),
            "too_many_cells" => Self::TooManyCells(message),
            "too_deep" => Self::TooDeep(message),
            "malformed" => Self::Malformed(message),
            "encrypted" => Self::Encrypted(message),
            "no_text" => Self::NoText(message),
            "timed_out" => Self::TimedOut(message),
            "out_of_memory" => Self::OutOfMemory(message),
            "crashed" => Self::Crashed(message),
            "unavailable" => Self::Unavailable(message),
            _ => return None,
        })
    }

    /// The message alone (what `Display` shows).
    pub(crate) fn message(&self) -> &str {
        match self {
            Self::TooLarge(m)
            | Self::ZipBomb(m)
            | Self::EntityBomb(m)
            | Self::TooManyCells(m)
            | Self::TooDeep(m)
            | Self::Malformed(m)
            | Self::Encrypted(m)
            | Self::NoText(m)
            | Self::TimedOut(m)
            | Self::OutOfMemory(m)
            | Self::Crashed(m)
            | Self::Unavailable(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExtractError;

    #[test]
    fn every_reason_round_trips_through_its_name() {
        for reason in ExtractError::reasons() {
            let error = ExtractError::from_reason(reason, "m".to_owned()).unwrap();
            assert_eq!(error.reason(), *reason);
            assert_eq!(error.message(), "m");
            assert_eq!(error.to_string(), "m");
        }
        assert!(ExtractError::from_reason("nope", String::new()).is_none());
    }
}
