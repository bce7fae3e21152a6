//! The public traversal corpora (`shared/corpus/traversal/`) and the
//! hand-written Unicode/WebDAV cases of `shared/reference/security-notes.md`
//! §3.1, run through every path parser of acdm-core.
//!
//! Each accepted path is percent-encoded one segment at a time (as the
//! adapters do) and judged by the one oracle of the test suites,
//! `acdm_test_support::traversal` (decoded once as sabre/dav does, NFC; any
//! dot segment, backslash, encoded dot or separator at any decoding depth,
//! empty segment or look-alike separator refused; the trash in any case
//! outside). It must land inside the folder with exactly our segments.

#![expect(
    clippy::panic,
    reason = "tests fail loudly and report what they measured"
)]

use acdm_core::events::trash_root;
use acdm_core::{AbsPath, ProjectName, RelPath};
use acdm_test_support::traversal::{Scope, payloads, url_path};
use unicode_normalization::UnicodeNormalization;

fn assert_lands_inside(base: &AbsPath, rel: &RelPath, payload: &str) {
    let expected: Vec<String> = base
        .segments()
        .iter()
        .chain(rel.segments())
        .cloned()
        .collect();
    // The base as a scope: the path must land in it (a PROPFIND may name
    // the folder itself).
    let Some((folder, parent)) = base.segments().split_last() else {
        panic!("{payload:?}: the base is the root");
    };
    let landed = Scope::new(parent, folder)
        .judge("PROPFIND", &url_path(&expected), Some("1"))
        .unwrap_or_else(|why| panic!("payload {payload:?}: {why}"));
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
            // And as a project folder of its own: never the trash.
            Scope::new(base.segments(), name.as_str())
                .judge("PROPFIND", &url_path(folder.segments()), Some("1"))
                .unwrap_or_else(|why| panic!("project name {payload:?}: {why}"));
        }
    }
    eprintln!("project names: {accepted} accepted (each one folder below the base)");
}
