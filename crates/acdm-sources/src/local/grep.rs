//! Searching a local folder tree by file name and by content, the way
//! GitLab's basic blob search does: a case-insensitive literal term,
//! file-name matches first, then content matches with a few lines around
//! each. Hidden entries (names starting with `.`, which includes our
//! temporary files and trash) and symbolic links are skipped.

use std::fs;
use std::path::Path;

use crate::model::EntryKind;

/// Files larger than this are matched by name only.
const MAX_CONTENT_BYTES: u64 = 4 << 20;
/// A walk stops after this many entries (the total is then a lower bound).
const MAX_VISITED: usize = 50_000;
/// Longest line kept in a snippet.
const MAX_LINE_CHARS: usize = 240;

/// One match, relative to the folder searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Match {
    /// Segments below the searched folder.
    pub(crate) segments: Vec<String>,
    /// File or folder.
    pub(crate) kind: EntryKind,
    /// For content matches: the 1-based first line of the snippet, the
    /// matching line, and the snippet.
    pub(crate) content: Option<ContentMatch>,
}

/// Where in a file the term was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentMatch {
    /// The matching line (1-based).
    pub(crate) line: u64,
    /// First line of the snippet (1-based).
    pub(crate) start_line: u64,
    /// Up to three lines around the match.
    pub(crate) snippet: String,
    /// The matching line alone.
    pub(crate) matched: String,
}

/// The matches kept (at most `limit`) and how many there were in all.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) matches: Vec<Match>,
    pub(crate) total: u64,
}

fn clip(line: &str) -> String {
    let line = line.trim_end_matches('\r');
    if line.chars().count() <= MAX_LINE_CHARS {
        line.to_owned()
    } else {
        let mut s: String = line.chars().take(MAX_LINE_CHARS).collect();
        s.push('…');
        s
    }
}

/// What a name match looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Names {
    /// Each entry's own name, files and folders (Nextcloud's `files`
    /// provider).
    Entry,
    /// A file's whole path below the searched folder, files only (GitLab's
    /// blob search by path).
    FilePath,
}

/// Search state while walking.
struct Walk<'a> {
    needle: &'a str,
    limit: usize,
    names: Names,
    contents: bool,
    by_name: Vec<Match>,
    by_content: Vec<Match>,
    total: u64,
    visited: usize,
}

/// Deepest folder nesting followed.
const MAX_DEPTH: usize = 64;

/// Searches the folder `start` below `root` (blocking; run it off the
/// async runtime), in path order. Matches carry their segments relative to
/// `root` (so `start` is their prefix), and [`Names::FilePath`] matches
/// against that whole relative path.
pub(crate) fn search(
    root: &Path,
    start: &[String],
    term: &str,
    limit: usize,
    names: Names,
    contents: bool,
) -> std::io::Result<Outcome> {
    let needle = term.to_lowercase();
    let mut walk = Walk {
        needle: &needle,
        limit,
        names,
        contents,
        by_name: Vec::new(),
        by_content: Vec::new(),
        total: 0,
        visited: 0,
    };
    let folder = start.iter().fold(root.to_path_buf(), |p, s| p.join(s));
    // The folder itself must be readable; below it, unreadable parts are skipped.
    fs::read_dir(&folder)?;
    visit(&folder, &mut start.to_vec(), &mut walk);
    let mut matches = walk.by_name;
    matches.extend(walk.by_content);
    matches.truncate(limit);
    Ok(Outcome {
        matches,
        total: walk.total,
    })
}

fn visit(dir: &Path, segments: &mut Vec<String>, walk: &mut Walk<'_>) {
    if segments.len() > MAX_DEPTH {
        return;
    }
    let Ok(read) = fs::read_dir(dir) else { return };
    // Git's tree order: a folder sorts as `name/`, so results come in the
    // order of their full paths (`deploy-old/x` before `deploy/y`).
    let mut entries: Vec<_> = read
        .filter_map(Result::ok)
        .map(|e| {
            let mut key = e.file_name().into_encoded_bytes();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                key.push(b'/');
            }
            (key, e)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let entries = entries.into_iter().map(|(_, e)| e);
    for entry in entries {
        walk.visited += 1;
        if walk.visited > MAX_VISITED {
            return;
        }
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_symlink() {
            continue;
        }
        let kind = if file_type.is_dir() {
            EntryKind::Folder
        } else {
            EntryKind::File
        };
        segments.push(name.clone());
        let name_matches = match walk.names {
            Names::Entry => name.to_lowercase().contains(walk.needle),
            Names::FilePath => {
                kind == EntryKind::File && segments.join("/").to_lowercase().contains(walk.needle)
            }
        };
        if name_matches {
            walk.total += 1;
            if walk.by_name.len() < walk.limit {
                walk.by_name.push(Match {
                    segments: segments.clone(),
                    kind,
                    content: None,
                });
            }
        }
        match kind {
            EntryKind::Folder => visit(&entry.path(), segments, walk),
            EntryKind::File if walk.contents => search_content(
                &entry.path(),
                walk.needle,
                segments,
                walk.limit,
                &mut walk.by_content,
                &mut walk.total,
            ),
            EntryKind::File => {}
        }
        segments.pop();
    }
}

fn search_content(
    path: &Path,
    needle: &str,
    segments: &[String],
    limit: usize,
    out: &mut Vec<Match>,
    total: &mut u64,
) {
    let Ok(meta) = fs::metadata(path) else { return };
    if meta.len() > MAX_CONTENT_BYTES {
        return;
    }
    let Ok(bytes) = fs::read(path) else { return };
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return; // binary
    }
    let text = String::from_utf8_lossy(&bytes);
    // One pass over the whole file first: most files do not match, and
    // lowercasing line by line costs an allocation per line.
    if !text.to_lowercase().contains(needle) {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        if !line.to_lowercase().contains(needle) {
            continue;
        }
        *total += 1;
        if out.len() >= limit {
            continue;
        }
        let first = index.saturating_sub(1);
        let last = (index + 1).min(lines.len().saturating_sub(1));
        let snippet = lines
            .get(first..=last)
            .unwrap_or_default()
            .iter()
            .map(|l| clip(l))
            .collect::<Vec<_>>()
            .join("\n");
        out.push(Match {
            segments: segments.to_vec(),
            kind: EntryKind::File,
            content: Some(ContentMatch {
                line: index as u64 + 1,
                start_line: first as u64 + 1,
                snippet,
                matched: clip(line),
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::create_dir_all(p.join("guides/deploy")).unwrap();
        fs::create_dir_all(p.join(".trash")).unwrap();
        fs::write(
            p.join("guides/deploy/rollout.md"),
            "# Rollout\nfirst line\nDeploy the service\nlast line\n",
        )
        .unwrap();
        fs::write(
            p.join("guides/intro.md"),
            "Welcome.\nHow we deploy: see rollout.\n",
        )
        .unwrap();
        fs::write(p.join(".trash/deploy-old.md"), "deploy deploy deploy\n").unwrap();
        fs::write(
            p.join("binary.bin"),
            [0u8, 1, 2, b'd', b'e', b'p', b'l', b'o', b'y'],
        )
        .unwrap();
        dir
    }

    #[test]
    fn names_come_first_then_content_with_line_numbers_and_context() {
        let dir = tree();
        let out = search(dir.path(), &[], "DEPLOY", 10, Names::Entry, true).unwrap();
        let summary: Vec<_> = out
            .matches
            .iter()
            .map(|m| {
                (
                    m.segments.join("/"),
                    m.content.as_ref().map(|c| (c.line, c.start_line)),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("guides/deploy".to_owned(), None),
                ("guides/deploy/rollout.md".to_owned(), Some((3, 2))),
                ("guides/intro.md".to_owned(), Some((2, 1))),
            ]
        );
        assert_eq!(out.total, 3, "hidden entries and binary files are skipped");
        let snippet = &out.matches[1].content.as_ref().unwrap().snippet;
        assert_eq!(snippet, "first line\nDeploy the service\nlast line");
    }

    #[test]
    fn the_limit_caps_hits_but_not_the_total() {
        let dir = tree();
        let out = search(dir.path(), &[], "line", 1, Names::Entry, true).unwrap();
        assert_eq!(out.matches.len(), 1);
        assert_eq!(out.total, 2);
    }

    #[test]
    fn names_only_when_contents_are_off() {
        let dir = tree();
        let out = search(dir.path(), &[], "rollout", 10, Names::Entry, false).unwrap();
        assert_eq!(out.matches.len(), 1);
        assert!(out.matches[0].content.is_none());
    }

    #[test]
    fn path_matching_finds_files_under_a_matching_folder() {
        let dir = tree();
        let out = search(dir.path(), &[], "deploy/", 10, Names::FilePath, false).unwrap();
        let paths: Vec<_> = out.matches.iter().map(|m| m.segments.join("/")).collect();
        assert_eq!(paths, vec!["guides/deploy/rollout.md"]);
        let below = search(
            dir.path(),
            &["guides".to_owned()],
            "guides/intro",
            10,
            Names::FilePath,
            false,
        )
        .unwrap();
        let paths: Vec<_> = below.matches.iter().map(|m| m.segments.join("/")).collect();
        assert_eq!(
            paths,
            vec!["guides/intro.md"],
            "matched on the whole path, reported from the root"
        );
    }
}
