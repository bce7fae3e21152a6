//! The public traversal corpora (`shared/corpus/traversal/`) and the
//! hand-written Unicode/WebDAV cases of `shared/reference/security-notes.md`
//! §3.1, run through every path parser of acdm-core.
//!
//! Each accepted path is percent-encoded one segment at a time (as the
//! adapters do) and judged by an oracle that emulates sabre/dav and
//! Nextcloud: decode once, NFC, `\` → `/`, collapse `//`, resolve `.`/`..`.
//! The oracle must land inside the project folder with exactly our segments.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "tests fail loudly and report what they measured"
)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use acdm_core::events::trash_root;
use acdm_core::{AbsPath, ProjectName, RelPath};
use unicode_normalization::UnicodeNormalization;

/// Where the shared corpus lives: `ACDM_SHARED_DIR`, else `../shared` next
/// to the repository.
fn corpus_dir() -> Option<PathBuf> {
    let shared = std::env::var_os("ACDM_SHARED_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        PathBuf::from,
    );
    let dir = shared.join("corpus/traversal");
    if dir.is_dir() {
        return Some(dir);
    }
    // CI sets ACDM_REQUIRE_CORPUS: there a missing corpus is a failure.
    assert!(
        std::env::var_os("ACDM_REQUIRE_CORPUS").is_none(),
        "traversal corpus not found at {}; set ACDM_SHARED_DIR",
        dir.display()
    );
    eprintln!(
        "traversal corpus not found at {}; only the hand-written cases run",
        dir.display()
    );
    None
}

const HAND_WRITTEN: &[&str] = &[
    "..",
    " ..",
    ".. ",
    "..\u{a0}",
    "a/../../P2/x",
    "a//b",
    "\\\\evil\\share",
    "C:\\x",
    "\u{FF0E}\u{FF0E}/x",
    "\u{2025}/x",
    "\u{FE52}\u{FE52}/x",
    "a\u{FF0F}..\u{FF0F}x",
    "a\u{2215}b",
    "a\0b",
    "x%00y",
    "\n",
    "%2e%2e/x",
    "%252e%252e/x",
    "..%2f..%2fx",
    "a#b",
    "a?b=c",
    "a;b",
    "cafe\u{301}",
    "caf\u{e9}",
    "\u{202E}txt.exe",
    "a\u{200B}b",
    ".htaccess",
    ".HTACCESS",
    "x.part",
    "x.filepart",
    "trail.",
    "trail ",
    "CON",
    "aux.txt",
    "😀",
    "dir/",
    "//double",
    "x:y",
    "~user",
    "%c0%ae%c0%ae/x",
    "a+b c#d?e;f.md",
    "../Beta/secret.md",
    "./../Beta",
    "Alpha/../Beta",
    "/Projects/Beta/x",
    // The trash beside the projects, in several spellings.
    ".acdm-trash",
    ".ACDM-TRASH",
    ".Acdm-Trash",
    ".acdm-trash/alpha/x.md",
    "../.acdm-trash/alpha/x.md",
    "/Projects/.acdm-trash/alpha/x.md",
    "\u{FF0E}acdm-trash",
    ".acdm-trash\u{200B}",
];

fn payloads() -> BTreeSet<String> {
    let mut all: BTreeSet<String> = HAND_WRITTEN.iter().map(|s| (*s).to_owned()).collect();
    if let Some(dir) = corpus_dir() {
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "txt") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                all.extend(text.lines().map(str::to_owned));
            }
        }
        assert!(
            files >= 4,
            "expected the four corpus files in {}",
            dir.display()
        );
    }
    all
}

/// Percent-encodes one segment for a URL path: everything but RFC 3986
/// unreserved characters, like `url`'s path-segment set plus a little more.
fn encode_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// sabre/dav + Nextcloud, as far as they change what a path means: decode
/// once, NFC, backslash to slash, collapse empty segments, resolve dot
/// segments (popping past the root is refused, as Nextcloud does).
fn oracle(encoded_path: &str) -> Option<Vec<String>> {
    let bytes = encoded_path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(b);
            i += 1;
        }
    }
    let text: String = String::from_utf8(decoded)
        .ok()?
        .nfc()
        .collect::<String>()
        .replace('\\', "/");
    let mut out: Vec<String> = Vec::new();
    for segment in text.split('/') {
        match segment.trim() {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            _ => out.push(segment.to_owned()),
        }
    }
    Some(out)
}

fn assert_lands_inside(base: &AbsPath, rel: &RelPath, payload: &str) {
    let mut url_path = String::new();
    for segment in base.segments().iter().chain(rel.segments()) {
        url_path.push('/');
        url_path.push_str(&encode_segment(segment));
    }
    let landed = oracle(&url_path).unwrap_or_else(|| panic!("oracle refused {payload:?}"));
    let expected: Vec<String> = base
        .segments()
        .iter()
        .chain(rel.segments())
        .cloned()
        .collect();
    assert_eq!(landed, expected, "payload {payload:?} does not round-trip");
    assert!(
        landed.starts_with(base.segments()),
        "payload {payload:?} escaped"
    );
    for segment in rel.segments() {
        let folded: String = segment.nfkc().collect();
        assert!(!matches!(folded.trim(), "." | ".."), "{payload:?}");
        assert!(!folded.contains(['/', '\\']), "{payload:?}");
        assert!(!segment.chars().any(char::is_control), "{payload:?}");
    }
}

#[test]
fn no_corpus_payload_leaves_the_project_as_a_relative_path() {
    let base = AbsPath::parse("/Projects/Alpha").unwrap();
    let (mut accepted, mut refused) = (0usize, 0usize);
    for payload in payloads() {
        for parse in [RelPath::parse, RelPath::parse_dir] {
            match parse(&payload) {
                Ok(rel) => {
                    accepted += 1;
                    assert_lands_inside(&base, &rel, &payload);
                }
                Err(_) => refused += 1,
            }
        }
    }
    eprintln!("relative paths: {accepted} accepted (all inside), {refused} refused");
    assert!(refused > accepted, "the corpus is mostly hostile");
}

#[test]
fn no_corpus_payload_passes_the_prefix_check_from_outside() {
    let base = AbsPath::parse("/Projects/Alpha").unwrap();
    for payload in payloads() {
        for candidate in [
            payload.clone(),
            format!("/Projects/Alpha/{payload}"),
            format!("/Projects/Alpha{payload}"),
            format!("/Projects/{payload}"),
        ] {
            if let Ok(rel) = base.strip_prefix_of(&candidate) {
                assert_lands_inside(&base, &rel, &candidate);
            }
        }
    }
}

#[test]
fn no_corpus_payload_becomes_a_project_name_that_escapes() {
    let base = AbsPath::parse("/Projects").unwrap();
    let mut accepted = 0;
    for payload in payloads() {
        if let Ok(name) = ProjectName::parse(&payload) {
            accepted += 1;
            let folder = base.child(&name);
            assert_eq!(folder.segments().len(), 2, "{payload:?}");
            assert!(
                !name.as_str().starts_with('.'),
                "{payload:?}: a hidden folder is never a project"
            );
            let trash = trash_root(&base);
            assert!(
                !trash.contains(&folder) && !folder.contains(&trash),
                "{payload:?}: the project folder {folder} meets the trash"
            );
            assert_ne!(
                name.folded(),
                ".acdm-trash",
                "{payload:?}: the trash in another case"
            );
            let rel = RelPath::parse(name.as_str()).unwrap();
            assert_lands_inside(&base, &rel, &payload);
        }
    }
    eprintln!("project names: {accepted} accepted (each one folder below the base)");
}
