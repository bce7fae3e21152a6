//! What an operator does outside HTTP: the operator commands of the
//! binary's command line ([`commands`]: provisioning, events, the kill
//! switch, and the business writes through `acdm_bff::operator`, as the
//! operator API makes them) and [`import`] (a project's business data from
//! a JSON or TOML document, which the demo also fills its project with).
//!
//! The binary parses the command line (the commands are declared here, as
//! clap subcommands it flattens into its own), opens the database and
//! prints what a command returns; this crate reads no environment and
//! prints nothing.

pub mod commands;
pub mod demo;
pub mod import;

use acdm_core::events::EventId;
use acdm_journal::JournalError;
use acdm_store::StoreError;

/// Why an operator command failed, as the operator reads it.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// An argument that does not parse.
    #[error("invalid {what} `{raw}`: {reason}")]
    Invalid {
        /// What it should be.
        what: &'static str,
        /// What was given.
        raw: String,
        /// Why it is not.
        reason: String,
    },
    /// The command cannot run as given.
    #[error("{0}")]
    Usage(String),
    /// A business write the operator's rules refused (the message names
    /// the fields).
    #[error("{code}: {message}")]
    Refused {
        /// The error code.
        code: &'static str,
        /// The envelope's message.
        message: String,
    },
    /// A revert the journal refused or could not make.
    #[error("cannot revert event {id}: {error}")]
    Revert {
        /// The event.
        id: EventId,
        /// Why.
        error: JournalError,
    },
    /// A local file that cannot be read as text.
    #[error("cannot read {file} as UTF-8 text: {error}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// The configured file store cannot be built.
    #[error("{0}")]
    Sources(String),
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An import.
    #[error(transparent)]
    Import(#[from] import::ImportError),
    /// A result that cannot be written as JSON.
    #[error("cannot write the result: {0}")]
    Output(#[from] serde_json::Error),
}
