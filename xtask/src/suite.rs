//! `cargo xtask test`: the project's whole test suite in one command.
//!
//! First installs the test tools when it can (`cargo xtask setup`; without
//! them the WebDAV contract tests report that they did not run). Then runs
//! `cargo nextest run --workspace --no-fail-fast` when cargo-nextest is
//! installed, else `cargo test --workspace --no-fail-fast`, then
//! `cargo test --workspace --doc` (nextest does not run doctests). Arguments
//! after `--` are appended to the nextest/test command. Every step runs even
//! if an earlier one failed; the exit status is non-zero if any failed.
//! Environment variables pass through unchanged.

use std::path::Path;
use std::process::{ExitCode, Stdio};

use crate::metadata::cargo_command;
use crate::tidy::workspace_root;

/// Entry point for `cargo xtask test [-- ARGS...]`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let extra = match args.split_first() {
        None => &[][..],
        Some((first, rest)) if first == "--" => rest,
        Some((first, _)) => {
            return crate::usage_error(&format!(
                "unexpected argument `{first}` for `test`; put arguments for the test runner after `--`"
            ));
        }
    };
    let root = workspace_root();
    println!("xtask test: step 1/3: the test tools (cargo xtask setup)");
    if let Err(error) = crate::setup::install(&root) {
        eprintln!(
            "xtask test: test tools not installed ({error}); WebDAV contract tests will not run"
        );
    }

    let runner: &[&str] = if has_nextest(&root) {
        &["nextest", "run", "--workspace", "--no-fail-fast"]
    } else {
        &["test", "--workspace", "--no-fail-fast"]
    };
    let main_step: Vec<String> = runner
        .iter()
        .map(|arg| (*arg).to_owned())
        .chain(extra.iter().cloned())
        .collect();
    let doc_step: Vec<String> = ["test", "--workspace", "--doc"]
        .into_iter()
        .map(str::to_owned)
        .collect();

    let mut failed = 0_usize;
    let steps = [
        ("step 2/3: build and run every test", main_step),
        ("step 3/3: the doctests", doc_step),
    ];
    for (title, step) in steps {
        println!("xtask test: {title}");
        if !run(&root, &step) {
            failed += 1;
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask test: {failed} step(s) failed");
        ExitCode::FAILURE
    }
}

/// True if `cargo nextest --version` succeeds.
fn has_nextest(root: &Path) -> bool {
    cargo_command()
        .args(["nextest", "--version"])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Prints `$ cargo <args>`, runs it in `root` (its progress on the
/// terminal), and says whether it succeeded.
fn run(root: &Path, args: &[String]) -> bool {
    println!("$ cargo {}", display_args(args));
    match cargo_command().args(args).current_dir(root).status() {
        Ok(status) if status.success() => true,
        Ok(status) => {
            eprintln!(
                "xtask test: `cargo {}` failed ({status})",
                display_args(args)
            );
            false
        }
        Err(error) => {
            eprintln!("xtask test: could not run cargo: {error}");
            false
        }
    }
}

/// Joins arguments for display, single-quoting any that need it.
fn display_args(args: &[String]) -> String {
    args.iter()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@+".contains(c));
            if plain {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::display_args;
    use crate::tidy::workspace_root;

    #[test]
    fn the_xtask_alias_lets_cargo_show_its_progress() {
        let config = std::fs::read_to_string(workspace_root().join(".cargo/config.toml"))
            .expect(".cargo/config.toml is readable");
        let alias = config
            .lines()
            .find(|line| line.trim_start().starts_with("xtask ="))
            .expect("the xtask alias is defined");
        assert!(
            !alias.contains("--quiet") && !alias.contains(" -q"),
            "a quiet alias hides minutes of building: {alias}"
        );
    }

    #[test]
    fn displayed_commands_quote_arguments_with_spaces() {
        let args = ["-E".to_owned(), "test(foo bar)".to_owned()];
        assert_eq!(display_args(&args), "-E 'test(foo bar)'");
    }
}
