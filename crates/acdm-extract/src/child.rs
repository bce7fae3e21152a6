//! The child process: lowers its own resource limits, reads one request
//! from stdin, extracts, and writes one JSON answer on stdout (and nothing
//! else). A panic is caught and answered as `crashed`; what cannot be
//! caught (memory exhausted, CPU time used up, a stack overflow) kills the
//! process, and the pool tells which from how it died.

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

use rlimit::Resource;

use crate::error::ExtractError;
use crate::format::Extracted;
use crate::limits::Limits;
use crate::wire::{Answer, MAX_HEADER_BYTES, Request};

/// Open files the child may have: stdio, the temporary PDF, pdftotext's
/// pipes and the exec error pipe, with room to spare.
const MAX_OPEN_FILES: u64 = 64;

/// Room for what the child writes besides the document (none as a rule).
const FILE_SIZE_SLACK: u64 = 1024 * 1024;

/// Runs the child: the service binary's hidden `extract` subcommand calls
/// this before anything else (no runtime, no logging, no threads), and so
/// does the `acdm-extract-child` binary of this crate.
///
/// Reads a JSON header line (`{"format":"docx","limits":{…}}`, at most
/// 64 KiB), lowers its resource limits to those (`RLIMIT_AS` =
/// `memory_bytes`, `RLIMIT_CPU` = `cpu_seconds`, `RLIMIT_CORE` = 0,
/// `RLIMIT_NOFILE` = 64, `RLIMIT_FSIZE` = the input's bound and 1 MiB),
/// reads the document's bytes to EOF (at most `max_input_bytes`), calls
/// [`extract`](crate::extract) and writes one JSON answer on stdout:
/// `{"ok":{"format":…,"text":…,"via":…,"warnings":[…]}}` or
/// `{"error":{"reason":…,"message":…}}`.
#[must_use]
pub fn child_main() -> ExitCode {
    let stdin = std::io::stdin();
    let answer = Answer::new(serve(&mut stdin.lock()));
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &answer)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if written.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn serve(input: &mut impl BufRead) -> Result<Extracted, ExtractError> {
    let mut header = Vec::new();
    input
        .by_ref()
        .take(MAX_HEADER_BYTES)
        .read_until(b'\n', &mut header)
        .map_err(|_| bad_request())?;
    if header.last() != Some(&b'\n') {
        return Err(bad_request());
    }
    let request: Request = serde_json::from_slice(&header).map_err(|_| bad_request())?;
    let limits = request.limits;
    lower_limits(&limits).map_err(|error| {
        ExtractError::Unavailable(format!(
            "the extractor cannot limit its own resources ({})",
            error.kind()
        ))
    })?;
    let mut bytes = Vec::new();
    input
        .take(limits.max_input_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| bad_request())?;
    let format = request.format;
    let result = std::panic::catch_unwind(|| crate::extract(format, &bytes, &limits));
    result.unwrap_or_else(|_| {
        Err(ExtractError::Crashed(
            "the extractor failed on this document (an internal error); it cannot be read"
                .to_owned(),
        ))
    })
}

fn bad_request() -> ExtractError {
    ExtractError::Unavailable(
        "the extractor was not given a valid request (its caller is misconfigured)".to_owned(),
    )
}

/// Lowers this process's limits (never above what it already has).
fn lower_limits(limits: &Limits) -> std::io::Result<()> {
    lower(Resource::CORE, 0, 0)?;
    // On top of what is already mapped: an allocator that reserved its
    // arenas up front (the service's mimalloc reserves a gigabyte of
    // address space it has not used) must still leave the document its
    // whole budget, and threads their stacks.
    let address_space = mapped_bytes().saturating_add(limits.memory_bytes);
    lower(Resource::AS, address_space, address_space)?;
    lower(
        Resource::CPU,
        limits.cpu_seconds.max(1),
        limits.cpu_seconds.max(1).saturating_add(1),
    )?;
    lower(Resource::NOFILE, MAX_OPEN_FILES, MAX_OPEN_FILES)?;
    let file_size = limits.max_input_bytes.saturating_add(FILE_SIZE_SLACK);
    lower(Resource::FSIZE, file_size, file_size)
}

/// The address space this process maps now (`VmSize` in
/// `/proc/self/status`), or 0 when it cannot be read.
fn mapped_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmSize:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib.saturating_mul(1024))
}

fn lower(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let (_, current_hard) = resource.get()?;
    let hard = hard.min(current_hard);
    resource.set(soft.min(hard), hard)
}
