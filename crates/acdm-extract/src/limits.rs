//! How much one document may cost to read.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

/// How much one document may cost to read. The defaults suit a service
/// reading office documents for an LLM; tests use small ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// The largest document accepted (64 MiB).
    pub max_input_bytes: u64,
    /// The largest Markdown text given (8 MiB); more is a failure
    /// (`too_large`), never a silent truncation.
    pub max_output_bytes: u64,
    /// What an archive's entries may inflate to, all together (256 MiB),
    /// counted while inflating (the sizes an archive declares are not
    /// trusted).
    pub max_inflated_bytes: u64,
    /// The most entries an archive may have (10,000).
    pub max_entries: u64,
    /// The most cells a spreadsheet may have, all sheets together, and
    /// the largest area a sheet's used cells may span (2,000,000).
    pub max_cells: u64,
    /// The deepest nesting of XML or HTML elements (128).
    pub max_depth: u32,
    /// The child process's CPU time (10 s; `RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// The child process's address space (1 GiB; `RLIMIT_AS`). pdftotext,
    /// its own child, has as much again.
    pub memory_bytes: u64,
    /// The wall-clock time a child, or pdftotext, may take (20 s).
    pub wall_seconds: u64,
    /// The pdftotext program (poppler): a name looked up in `PATH` or a
    /// path. Where it cannot be run, PDFs are read by the built-in reader,
    /// with a warning.
    pub pdftotext: PathBuf,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_bytes: 64 * MIB,
            max_output_bytes: 8 * MIB,
            max_inflated_bytes: 256 * MIB,
            max_entries: 10_000,
            max_cells: 2_000_000,
            max_depth: 128,
            cpu_seconds: 10,
            memory_bytes: 1024 * MIB,
            wall_seconds: 20,
            pdftotext: PathBuf::from("pdftotext"),
        }
    }
}
