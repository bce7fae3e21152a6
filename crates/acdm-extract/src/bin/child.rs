//! `acdm-extract-child`: the extraction child on its own. The pool's tests
//! run it, and it reads a document by hand (a JSON header line, then the
//! bytes, on stdin); the service runs `acdm_extract::child_main` behind
//! its own hidden `extract` subcommand instead.

fn main() -> std::process::ExitCode {
    acdm_extract::child_main()
}
