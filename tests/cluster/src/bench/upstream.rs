//! The HTTP bench's upstreams: one nginx serving GitLab's and Nextcloud's
//! wire formats from a folder, and a second nginx proxying to it that
//! does nothing else — the one-hop floor.
//!
//! [`seed`] writes the folder: the project `Alpha`'s files at Nextcloud's
//! WebDAV path (a 4 KiB report, the file every read reads, and a folder of
//! [`LISTED_FILES`] notes, the folder every list lists), the wiki file the
//! raw API serves, and the static answers of GitLab's blob search and
//! Nextcloud's unified search (docs/upstreams.md has the formats).
//! [`upstream_config`] and [`proxy_config`] are the two nginx
//! configurations; both keep their process's files in their own folder
//! and keep client and upstream connections alive as long as the load
//! generator does (`keepalive_requests`), as the service does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::harness::PROJECT;
use crate::nginx::temp_paths;

/// The Nextcloud account whose files the service reads.
pub(crate) const DAV_USER: &str = "u";
/// Its app password (the upstream does not check it).
pub(crate) const DAV_PASSWORD: &str = "p";
/// The GitLab project holding the wiki.
pub(crate) const GITLAB_PROJECT: &str = "1";
/// The read file's size.
pub(crate) const REPORT_BYTES: usize = 4096;
/// The read file's path under the project's folder.
pub(crate) const REPORT: &str = "docs/report.md";
/// The listed folder under the project's folder.
pub(crate) const LISTED: &str = "docs";
/// Files in the listed folder besides the report.
pub(crate) const LISTED_FILES: usize = 20;
/// The last line of the report: a read that returns it returned the whole file.
pub(crate) const REPORT_END: &str = "end of the bench report";
/// The wiki file the raw API serves.
pub(crate) const WIKI_FILE: &str = "guides/weekly-reports.md";
/// A phrase of the wiki file.
pub(crate) const WIKI_PHRASE: &str = "writes a weekly report";
/// The Debian package's `dav_ext` module (for `PROPFIND`).
pub(crate) const DAV_EXT_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so";

/// The folders [`seed`] made.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The Nextcloud user's files (`/remote.php/dav/files/u/`).
    pub(crate) dav: PathBuf,
    /// The wiki's files (GitLab's raw API).
    pub(crate) wiki: PathBuf,
    /// The static search answers.
    pub(crate) answers: PathBuf,
}

/// The report: markdown text of exactly [`REPORT_BYTES`] bytes whose last
/// line is [`REPORT_END`].
pub(crate) fn report() -> String {
    let end = format!("{REPORT_END}\n");
    let mut text = String::from("# Quarterly report\n\n");
    let mut line = 0;
    while text.len() + end.len() < REPORT_BYTES {
        line += 1;
        text.push_str(&format!(
            "- item {line}: the supplier confirmed the delivery date and the budget holds.\n"
        ));
    }
    text.truncate(REPORT_BYTES - end.len());
    // Truncation may cut a line: end it before the last line.
    text.pop();
    text.push('\n');
    text.push_str(&end);
    text
}

/// Writes the upstreams' files under `dir`.
pub(crate) fn seed(dir: &Path) -> Result<Layout> {
    let layout = Layout {
        dav: dir.join("dav"),
        wiki: dir.join("wiki"),
        answers: dir.join("answers"),
    };
    let project = layout.dav.join("Projects").join(PROJECT);
    let mut files = vec![
        (
            project.join("README.md"),
            format!("# {PROJECT}\n\nThe {PROJECT} project's shared folder.\n"),
        ),
        (project.join(REPORT), report()),
        (
            layout.wiki.join(WIKI_FILE),
            format!(
                "# Weekly reports\n\nEvery Friday the project manager {WIKI_PHRASE}: \
                 progress, risks, next steps.\n"
            ),
        ),
        (
            layout.answers.join("gitlab-search.json"),
            gitlab_search().to_string(),
        ),
        (
            layout.answers.join("ocs-search.json"),
            ocs_search().to_string(),
        ),
    ];
    for n in 0..LISTED_FILES {
        files.push((
            project.join(LISTED).join(format!("note-{n:02}.md")),
            format!(
                "# Note {n}\n\n{}",
                "Decisions and actions.\n".repeat(20 + n * 5)
            ),
        ));
    }
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(layout)
}

/// GitLab's answer to a blob search: ten hits in the wiki, one page.
fn gitlab_search() -> serde_json::Value {
    let hits: Vec<serde_json::Value> = (0..10)
        .map(|n| {
            let path = if n == 0 {
                WIKI_FILE.to_owned()
            } else {
                format!("guides/report-{n:02}.md")
            };
            let basename = path.trim_end_matches(".md").to_owned();
            let filename = path.rsplit('/').next().unwrap_or_default().to_owned();
            json!({
                "basename": basename,
                "data": format!(
                    "## Weekly report {n}\n\nEvery Friday the project manager {WIKI_PHRASE}:\nprogress, risks, next steps.\n"
                ),
                "path": path,
                "filename": filename,
                "id": null,
                "ref": "main",
                "startline": 3,
                "project_id": 1,
            })
        })
        .collect();
    serde_json::Value::Array(hits)
}

/// Nextcloud's answer to a file-name search: ten files of the project, one
/// page (a short page is the last).
fn ocs_search() -> serde_json::Value {
    let entries: Vec<serde_json::Value> = (0..10)
        .map(|n| {
            let name = format!("note-{n:02}.md");
            json!({
                "thumbnailUrl": "",
                "title": name,
                "subline": format!("in Projects/{PROJECT}/{LISTED}"),
                "resourceUrl": format!("/f/{}", 1000 + n),
                "icon": "icon-filetype-text",
                "rounded": false,
                "attributes": {
                    "fileId": (1000 + n).to_string(),
                    "path": format!("/Projects/{PROJECT}/{LISTED}/{name}"),
                },
            })
        })
        .collect();
    json!({
        "ocs": {
            "meta": { "status": "ok", "statuscode": 200, "message": "OK" },
            "data": { "name": "Files", "isPaginated": true, "entries": entries, "cursor": 10 },
        }
    })
}

/// The connections each nginx worker may hold: a client's and an
/// upstream's for each of `most` connections, were they all on one
/// worker, and room for the rest; never fewer than 4096.
fn worker_connections(most: usize) -> usize {
    most.saturating_mul(2).saturating_add(256).max(4096)
}

/// The lines that open both configurations: the process's own files in
/// `dir`, a worker per core, enough connections per worker for runs of
/// `most` connections, no access log.
fn head(dir: &Path, modules: &[&str], most: usize) -> Vec<String> {
    let mut out: Vec<String> = modules
        .iter()
        .map(|m| format!("load_module {m};"))
        .collect();
    out.extend([
        "worker_processes auto;".to_owned(),
        format!("pid {};", dir.join("nginx.pid").display()),
        format!("error_log {} warn;", dir.join("error.log").display()),
        "events {".to_owned(),
        format!("  worker_connections {};", worker_connections(most)),
        "}".to_owned(),
        "http {".to_owned(),
        "  access_log off;".to_owned(),
        "  keepalive_requests 1000000;".to_owned(),
        "  keepalive_timeout 75s;".to_owned(),
    ]);
    out.extend(temp_paths(dir).into_iter().map(|line| format!("  {line}")));
    out
}

/// The upstream: Nextcloud's WebDAV (`GET` with `Range`, `PROPFIND`
/// depth 0 and 1, through `dav_ext`) and unified search, GitLab's blob
/// search and raw files — all from `layout`'s folders, listening on
/// `listen`, its files in `dir`. Credentials are not checked.
pub(crate) fn upstream_config(
    dir: &Path,
    listen: SocketAddr,
    layout: &Layout,
    most: usize,
) -> String {
    let mut out = vec![
        "# Generated by acdm-cluster bench: the HTTP bench's upstream (GitLab and Nextcloud)."
            .to_owned(),
    ];
    out.extend(head(dir, &[DAV_EXT_MODULE], most));
    let answers = |name: &str| layout.answers.join(name).display().to_string();
    out.extend([
        "  sendfile on;".to_owned(),
        "  types {".to_owned(),
        "    text/markdown md;".to_owned(),
        "    application/json json;".to_owned(),
        "  }".to_owned(),
        "  default_type application/octet-stream;".to_owned(),
        "  server {".to_owned(),
        format!("    listen {listen};"),
        "    # Nextcloud's WebDAV: ranged GET, PROPFIND (Depth 0 and 1).".to_owned(),
        format!("    location /remote.php/dav/files/{DAV_USER}/ {{"),
        format!("      alias {}/;", layout.dav.display()),
        "      dav_ext_methods PROPFIND OPTIONS;".to_owned(),
        "    }".to_owned(),
        "    # Nextcloud's unified search of file names: one static page.".to_owned(),
        "    location = /ocs/v2.php/search/providers/files/search {".to_owned(),
        format!("      alias {};", answers("ocs-search.json")),
        "    }".to_owned(),
        "    # GitLab's blob search: one static page (no X-Next-Page: the last).".to_owned(),
        format!("    location = /api/v4/projects/{GITLAB_PROJECT}/search {{"),
        "      add_header X-Total 10;".to_owned(),
        "      add_header X-Page 1;".to_owned(),
        format!("      alias {};", answers("gitlab-search.json")),
        "    }".to_owned(),
        "    # GitLab's raw file (the path is one encoded segment, decoded here).".to_owned(),
        format!("    location ~ ^/api/v4/projects/{GITLAB_PROJECT}/repository/files/(.+)/raw$ {{"),
        "      default_type text/plain;".to_owned(),
        format!("      alias {}/$1;", layout.wiki.display()),
        "    }".to_owned(),
        "    location / {".to_owned(),
        "      return 404;".to_owned(),
        "    }".to_owned(),
        "  }".to_owned(),
        "}".to_owned(),
        String::new(),
    ]);
    out.join("\n")
}

/// The one-hop floor: a proxy that does nothing but pass every request
/// to `upstream` over kept-alive connections (HTTP/1.1, as the service
/// does), listening on `listen`, its files in `dir`. Each worker keeps up
/// to `most` idle connections to the upstream (at least 64): with fewer
/// than it has requests in flight, every answer past them would close its
/// connection and the next request open one, and at C=1024 the floor
/// would measure connection churn, not a hop.
pub(crate) fn proxy_config(
    dir: &Path,
    listen: SocketAddr,
    upstream: SocketAddr,
    most: usize,
) -> String {
    let mut out = vec![
        "# Generated by acdm-cluster bench: the one-hop floor, a proxy that does nothing else."
            .to_owned(),
    ];
    out.extend(head(dir, &[], most));
    out.extend([
        "  upstream origin {".to_owned(),
        format!("    server {upstream};"),
        format!("    keepalive {};", most.max(64)),
        "    keepalive_requests 1000000;".to_owned(),
        "  }".to_owned(),
        "  server {".to_owned(),
        format!("    listen {listen};"),
        "    location / {".to_owned(),
        "      proxy_pass http://origin;".to_owned(),
        "      proxy_http_version 1.1;".to_owned(),
        "      proxy_set_header Connection \"\";".to_owned(),
        "    }".to_owned(),
        "  }".to_owned(),
        "}".to_owned(),
        String::new(),
    ]);
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn layout() -> Layout {
        Layout {
            dav: PathBuf::from("/run/b/dav"),
            wiki: PathBuf::from("/run/b/wiki"),
            answers: PathBuf::from("/run/b/answers"),
        }
    }

    /// Every `{` has its `}`, in order.
    fn balanced(text: &str) -> bool {
        let mut depth = 0i32;
        for c in text.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    }

    #[test]
    fn the_report_is_four_kibibytes_ending_with_its_last_line() {
        let text = report();
        assert_eq!(text.len(), REPORT_BYTES);
        assert!(text.ends_with(&format!("\n{REPORT_END}\n")), "{text}");
        assert!(text.starts_with("# Quarterly report\n"));
    }

    #[test]
    fn the_upstream_serves_every_path_the_service_asks_for() {
        let text = upstream_config(
            Path::new("/run/b/up"),
            addr("127.0.0.1:7001"),
            &layout(),
            1024,
        );
        assert!(balanced(&text), "{text}");
        for needed in [
            format!("load_module {DAV_EXT_MODULE};"),
            "listen 127.0.0.1:7001;".to_owned(),
            "location /remote.php/dav/files/u/ {".to_owned(),
            "alias /run/b/dav/;".to_owned(),
            "dav_ext_methods PROPFIND OPTIONS;".to_owned(),
            "location = /ocs/v2.php/search/providers/files/search {".to_owned(),
            "alias /run/b/answers/ocs-search.json;".to_owned(),
            "location = /api/v4/projects/1/search {".to_owned(),
            "alias /run/b/answers/gitlab-search.json;".to_owned(),
            "location ~ ^/api/v4/projects/1/repository/files/(.+)/raw$ {".to_owned(),
            "alias /run/b/wiki/$1;".to_owned(),
            "pid /run/b/up/nginx.pid;".to_owned(),
            "proxy_temp_path /run/b/up/proxy;".to_owned(),
            "access_log off;".to_owned(),
            "keepalive_requests 1000000;".to_owned(),
            "worker_connections 4096;".to_owned(),
        ] {
            assert!(text.contains(&needed), "{needed} missing:\n{text}");
        }
        // The module is loaded before anything else (nginx requires it).
        assert!(
            text.lines().nth(1).unwrap().starts_with("load_module "),
            "{text}"
        );
    }

    #[test]
    fn the_floor_only_proxies_over_kept_alive_connections() {
        let text = proxy_config(
            Path::new("/run/b/floor"),
            addr("127.0.0.1:7002"),
            addr("127.0.0.1:7001"),
            1024,
        );
        assert!(balanced(&text), "{text}");
        for needed in [
            "server 127.0.0.1:7001;",
            "keepalive 1024;",
            "worker_connections 4096;",
            "listen 127.0.0.1:7002;",
            "proxy_pass http://origin;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "pid /run/b/floor/nginx.pid;",
            "access_log off;",
        ] {
            assert!(text.contains(needed), "{needed} missing:\n{text}");
        }
        assert!(!text.contains("load_module"), "{text}");
        assert!(!text.contains("alias"), "{text}");
        // Short runs keep 64 idle connections; runs of more connections
        // than one worker holds get room for them all.
        let small = proxy_config(
            Path::new("/f"),
            addr("127.0.0.1:7002"),
            addr("127.0.0.1:7001"),
            16,
        );
        assert!(small.contains("keepalive 64;"), "{small}");
        let large = proxy_config(
            Path::new("/f"),
            addr("127.0.0.1:7002"),
            addr("127.0.0.1:7001"),
            4096,
        );
        assert!(large.contains("keepalive 4096;"), "{large}");
        assert!(large.contains("worker_connections 8448;"), "{large}");
    }

    #[test]
    fn the_search_answers_have_the_documented_shapes() {
        let blobs = gitlab_search();
        let blobs = blobs.as_array().unwrap();
        assert_eq!(blobs.len(), 10);
        assert_eq!(blobs[0]["path"], WIKI_FILE);
        assert!(blobs[0]["data"].as_str().unwrap().contains(WIKI_PHRASE));
        let ocs = ocs_search();
        assert_eq!(ocs["ocs"]["meta"]["status"], "ok");
        let entries = ocs["ocs"]["data"]["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 10);
        assert_eq!(
            entries[3]["attributes"]["path"],
            format!("/Projects/{PROJECT}/{LISTED}/note-03.md")
        );
    }

    #[test]
    fn seeding_writes_the_files_the_scenarios_read() {
        let dir = std::env::temp_dir().join(format!("acdm-bench-seed-{}", std::process::id()));
        let layout = seed(&dir).unwrap();
        let project = layout.dav.join("Projects").join(PROJECT);
        assert_eq!(
            std::fs::read_to_string(project.join(REPORT)).unwrap(),
            report()
        );
        let listed = std::fs::read_dir(project.join(LISTED)).unwrap().count();
        assert_eq!(listed, LISTED_FILES + 1);
        assert!(
            std::fs::read_to_string(layout.wiki.join(WIKI_FILE))
                .unwrap()
                .contains(WIKI_PHRASE)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
