//! Open Packaging Conventions: an OOXML part's relationships, and where
//! the main part is.

use crate::archive::Archive;
use crate::error::ExtractError;
use crate::limits::Limits;
use crate::xml::{Ev, Xml, attr, name};

/// One relationship of a part.
#[derive(Debug, Clone)]
pub(crate) struct Relationship {
    /// Its id (`rId2`).
    pub(crate) id: String,
    /// Its type URI.
    pub(crate) kind: String,
    /// Its target, resolved to a path inside the archive.
    pub(crate) target: String,
}

/// The relationships of the part at `part` (`ppt/presentation.xml` →
/// `ppt/_rels/presentation.xml.rels`); none when the archive has no such
/// file.
pub(crate) fn relationships(
    archive: &mut Archive<'_>,
    part: &str,
    limits: &Limits,
) -> Result<Vec<Relationship>, ExtractError> {
    let (dir, file) = part.rsplit_once('/').unwrap_or(("", part));
    let rels_name = if dir.is_empty() {
        format!("_rels/{file}.rels")
    } else {
        format!("{dir}/_rels/{file}.rels")
    };
    let Some(text) = archive.read_text(&rels_name)? else {
        return Ok(Vec::new());
    };
    let mut xml = Xml::new(&text, &rels_name, limits);
    let mut out = Vec::new();
    loop {
        match xml.next()? {
            Ev::Start(e) | Ev::Empty(e) if name(&e) == b"Relationship" => {
                let external = attr(&e, b"TargetMode").is_some_and(|m| m == "External");
                if let (Some(id), Some(target), false) =
                    (attr(&e, b"Id"), attr(&e, b"Target"), external)
                {
                    out.push(Relationship {
                        id,
                        kind: attr(&e, b"Type").unwrap_or_default(),
                        target: resolve(dir, &target),
                    });
                }
            }
            Ev::Eof => return Ok(out),
            _ => {}
        }
    }
}

/// The package's main part (the `officeDocument` relationship of
/// `_rels/.rels`), or `fallback` when the package does not say.
pub(crate) fn main_part(
    archive: &mut Archive<'_>,
    fallback: &str,
    limits: &Limits,
) -> Result<String, ExtractError> {
    let rels = relationships(archive, "", limits)?;
    Ok(rels
        .into_iter()
        .find(|r| r.kind.ends_with("/officeDocument"))
        .map_or_else(|| fallback.to_owned(), |r| r.target))
}

/// `target` relative to the folder `dir` (or absolute from the package
/// root), with `.` and `..` segments resolved.
pub(crate) fn resolve(dir: &str, target: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let joined;
    let path = if let Some(absolute) = target.strip_prefix('/') {
        absolute
    } else {
        joined = format!("{dir}/{target}");
        joined.as_str()
    };
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    segments.join("/")
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn targets_resolve_against_their_part_folder() {
        assert_eq!(resolve("ppt", "slides/slide1.xml"), "ppt/slides/slide1.xml");
        assert_eq!(resolve("ppt/slides", "../media/a.png"), "ppt/media/a.png");
        assert_eq!(
            resolve("ppt", "/ppt/slides/slide2.xml"),
            "ppt/slides/slide2.xml"
        );
        assert_eq!(resolve("", "word/document.xml"), "word/document.xml");
    }
}
