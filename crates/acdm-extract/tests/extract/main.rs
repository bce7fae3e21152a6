//! acdm-extract's tests: the documents `cargo xtask setup` makes with the
//! libraries that make them in the wild (`documents`), hostile files read
//! in-process (`hostile`), and the pool of child processes (`pool`).

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "tests fail loudly and report what they read"
)]

mod documents;
mod hostile;
mod pool;
mod support;
