//! Parsing a WebDAV `207 Multi-Status` answer (RFC 4918 §14.16).
//!
//! Namespace-aware: elements are matched by namespace URI and local name,
//! whatever prefix the server picked (`d:`, `D:`, `ns0:`, `lp1:`, a default
//! namespace, or a mix). Only properties in a propstat whose status is 2xx
//! count (servers report missing properties in a separate 404 propstat).
//! No DTD or custom entity is expanded; only the five predefined entities
//! and character references are.

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

use crate::error::SourceError;
use crate::nextcloud::SOURCE;

const DAV: &str = "DAV:";

/// One `<d:response>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DavResponse {
    /// The raw (encoded) href.
    pub(crate) href: String,
    /// A 2xx response (or one whose properties came back 2xx).
    pub(crate) ok: bool,
    /// `<d:resourcetype><d:collection/></d:resourcetype>`.
    pub(crate) collection: bool,
    /// `getcontentlength`.
    pub(crate) content_length: Option<u64>,
    /// `getlastmodified` (RFC 1123).
    pub(crate) last_modified: Option<String>,
    /// `getetag`, as sent.
    pub(crate) etag: Option<String>,
    /// `getcontenttype`.
    pub(crate) content_type: Option<String>,
}

#[derive(Default)]
struct PropStat {
    collection: bool,
    content_length: Option<String>,
    last_modified: Option<String>,
    etag: Option<String>,
    content_type: Option<String>,
    status: Option<String>,
}

fn status_is_success(status: &str) -> bool {
    // "HTTP/1.1 200 OK"
    status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .is_some_and(|code| (200..300).contains(&code))
}

fn bad(detail: &str) -> SourceError {
    SourceError::invalid(SOURCE, format!("malformed multistatus XML ({detail})"))
}

/// Parses a multistatus body.
pub(crate) fn parse(body: &[u8]) -> Result<Vec<DavResponse>, SourceError> {
    let text = std::str::from_utf8(body).map_err(|_| bad("not UTF-8"))?;
    let mut reader = NsReader::from_str(text);
    reader.config_mut().trim_text(false);
    let mut responses = Vec::new();
    let mut seen_root = false;
    // The stack of open DAV: elements by local name (others as "").
    let mut stack: Vec<String> = Vec::new();
    let mut current: Option<DavResponse> = None;
    let mut response_status: Option<String> = None;
    let mut propstat: Option<PropStat> = None;
    let mut text_buf = String::new();
    loop {
        let (ns, event) = reader
            .read_resolved_event()
            .map_err(|e| bad(&e.to_string()))?;
        let is_dav = matches!(ns, ResolveResult::Bound(n) if n.as_ref() == DAV);
        match event {
            Event::Start(e) => {
                let local = if is_dav {
                    e.local_name().as_ref().to_owned()
                } else {
                    String::new()
                };
                match local.as_str() {
                    "multistatus" if stack.is_empty() => seen_root = true,
                    "response" => {
                        current = Some(DavResponse::default());
                        response_status = None;
                    }
                    "propstat" => propstat = Some(PropStat::default()),
                    "collection" if stack.last().is_some_and(|p| p == "resourcetype") => {
                        if let Some(ps) = propstat.as_mut() {
                            ps.collection = true;
                        }
                    }
                    _ => {}
                }
                if stack.is_empty() && local != "multistatus" {
                    return Err(bad("the root element is not DAV:multistatus"));
                }
                stack.push(local);
                text_buf.clear();
            }
            Event::Empty(e) => {
                let local = if is_dav {
                    e.local_name().as_ref().to_owned()
                } else {
                    String::new()
                };
                if local == "collection"
                    && stack.last().is_some_and(|p| p == "resourcetype")
                    && let Some(ps) = propstat.as_mut()
                {
                    ps.collection = true;
                }
                if stack.is_empty() {
                    if local != "multistatus" {
                        return Err(bad("the root element is not DAV:multistatus"));
                    }
                    seen_root = true;
                }
            }
            Event::Text(t) => text_buf.push_str(&t.xml10_content()),
            Event::CData(c) => text_buf.push_str(c.as_ref()),
            Event::GeneralRef(r) => {
                let resolved = if r.is_char_ref() {
                    r.resolve_char_ref().ok().flatten()
                } else {
                    match r.as_ref() {
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "amp" => Some('&'),
                        "apos" => Some('\''),
                        "quot" => Some('"'),
                        _ => None,
                    }
                };
                text_buf.push(resolved.ok_or_else(|| bad("unknown entity"))?);
            }
            Event::End(_) => {
                let local = stack.pop().ok_or_else(|| bad("unbalanced elements"))?;
                let value = std::mem::take(&mut text_buf).trim().to_owned();
                let parent = stack.last().map(String::as_str);
                match (local.as_str(), parent) {
                    ("href", Some("response")) => {
                        if let Some(r) = current.as_mut() {
                            r.href = value;
                        }
                    }
                    ("status", Some("response")) => response_status = Some(value),
                    ("status", Some("propstat")) => {
                        if let Some(ps) = propstat.as_mut() {
                            ps.status = Some(value);
                        }
                    }
                    ("getcontentlength", Some("prop")) => {
                        set(&mut propstat, |ps| ps.content_length = Some(value));
                    }
                    ("getlastmodified", Some("prop")) => {
                        set(&mut propstat, |ps| ps.last_modified = Some(value));
                    }
                    ("getetag", Some("prop")) => set(&mut propstat, |ps| ps.etag = Some(value)),
                    ("getcontenttype", Some("prop")) => {
                        set(&mut propstat, |ps| ps.content_type = Some(value));
                    }
                    ("propstat", _) => {
                        let ps = propstat.take().ok_or_else(|| bad("unbalanced propstat"))?;
                        let r = current
                            .as_mut()
                            .ok_or_else(|| bad("propstat outside response"))?;
                        if ps.status.as_deref().is_some_and(status_is_success) {
                            r.ok = true;
                            r.collection |= ps.collection;
                            if let Some(len) = ps.content_length.filter(|v| !v.is_empty()) {
                                r.content_length = Some(
                                    len.parse()
                                        .map_err(|_| bad("getcontentlength is not a number"))?,
                                );
                            }
                            r.last_modified = ps.last_modified.or(r.last_modified.take());
                            r.etag = ps.etag.filter(|v| !v.is_empty()).or(r.etag.take());
                            r.content_type = ps
                                .content_type
                                .filter(|v| !v.is_empty())
                                .or(r.content_type.take());
                        }
                    }
                    ("response", _) => {
                        let mut r = current.take().ok_or_else(|| bad("unbalanced response"))?;
                        if let Some(status) = response_status.take() {
                            r.ok = status_is_success(&status);
                        }
                        if r.href.is_empty() {
                            return Err(bad("a response has no href"));
                        }
                        responses.push(r);
                    }
                    _ => {}
                }
            }
            Event::DocType(_) => return Err(bad("document type declarations are not accepted")),
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_root || !stack.is_empty() {
        return Err(bad("truncated or empty document"));
    }
    Ok(responses)
}

fn set(propstat: &mut Option<PropStat>, f: impl FnOnce(&mut PropStat)) {
    if let Some(ps) = propstat.as_mut() {
        f(ps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEXTCLOUD: &str = r#"<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">
 <d:response>
  <d:href>/remote.php/dav/files/alice/Projects/alpha/</d:href>
  <d:propstat>
   <d:prop>
    <d:getlastmodified>Wed, 20 Jul 2022 05:12:23 GMT</d:getlastmodified>
    <d:getetag>&quot;62d78f47c0b2e&quot;</d:getetag>
    <d:resourcetype><d:collection/></d:resourcetype>
    <oc:fileid>123</oc:fileid>
    <oc:size>3030237</oc:size>
   </d:prop>
   <d:status>HTTP/1.1 200 OK</d:status>
  </d:propstat>
  <d:propstat>
   <d:prop><d:getcontentlength/><d:getcontenttype/></d:prop>
   <d:status>HTTP/1.1 404 Not Found</d:status>
  </d:propstat>
 </d:response>
 <d:response>
  <d:href>/remote.php/dav/files/alice/Projects/alpha/notes%20v2.md</d:href>
  <d:propstat>
   <d:prop>
    <d:getlastmodified>Wed, 20 Jul 2022 05:12:23 GMT</d:getlastmodified>
    <d:getcontentlength>1042</d:getcontentlength>
    <d:getcontenttype>text/markdown</d:getcontenttype>
    <d:getetag>&quot;6436d084d4805&quot;</d:getetag>
    <d:resourcetype/>
   </d:prop>
   <d:status>HTTP/1.1 200 OK</d:status>
  </d:propstat>
 </d:response>
</d:multistatus>"#;

    #[test]
    fn parses_the_documented_nextcloud_answer() {
        let r = parse(NEXTCLOUD.as_bytes()).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r[0].collection && r[0].ok);
        assert_eq!(r[0].etag.as_deref(), Some("\"62d78f47c0b2e\""));
        assert_eq!(r[0].content_length, None, "404 propstat ignored");
        assert!(!r[1].collection);
        assert_eq!(r[1].content_length, Some(1042));
        assert_eq!(r[1].content_type.as_deref(), Some("text/markdown"));
        assert_eq!(
            r[1].href,
            "/remote.php/dav/files/alice/Projects/alpha/notes%20v2.md"
        );
        assert_eq!(
            r[1].last_modified.as_deref(),
            Some("Wed, 20 Jul 2022 05:12:23 GMT")
        );
    }

    #[test]
    fn any_prefix_or_default_namespace_works() {
        let variants = [
            // wsgidav: ns0, unquoted etag, empty resourcetype element
            r#"<?xml version="1.0" encoding="utf-8" ?><ns0:multistatus xmlns:ns0="DAV:"><ns0:response><ns0:href>/d/x.md</ns0:href><ns0:propstat><ns0:prop><ns0:getetag>abc</ns0:getetag><ns0:resourcetype /><ns0:getcontentlength>5</ns0:getcontentlength></ns0:prop><ns0:status>HTTP/1.1 200 OK</ns0:status></ns0:propstat></ns0:response></ns0:multistatus>"#,
            // Apache: D: plus lp1: for the same namespace, weak etag
            r#"<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:"><D:response xmlns:lp1="DAV:"><D:href>/d/x.md</D:href><D:propstat><D:prop><lp1:resourcetype/><lp1:getcontentlength>5</lp1:getcontentlength><lp1:getetag>W/"abc"</lp1:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>"#,
            // default namespace, lighttpd's dt attribute
            r#"<multistatus xmlns="DAV:" xmlns:ns0="urn:uuid:c2f41010-65b3-11d1-a29f-00aa00c14882/"><response><href>/d/x.md</href><propstat><prop><getcontentlength>5</getcontentlength><getlastmodified ns0:dt="dateTime.rfc1123">Wed, 20 Jul 2022 05:12:23 GMT</getlastmodified><getetag>"abc"</getetag><resourcetype></resourcetype></prop><status>HTTP/1.1 200 OK</status></propstat></response></multistatus>"#,
            // mixed d:/D: declared for the same URI
            r#"<d:multistatus xmlns:d="DAV:" xmlns:D="DAV:"><D:response><d:href>/d/x.md</d:href><D:propstat><d:prop><D:getcontentlength>5</D:getcontentlength><d:getetag>"abc"</d:getetag></d:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></d:multistatus>"#,
        ];
        for xml in variants {
            let r = parse(xml.as_bytes()).unwrap_or_else(|e| panic!("{e}: {xml}"));
            assert_eq!(r.len(), 1, "{xml}");
            assert_eq!(r[0].href, "/d/x.md");
            assert_eq!(r[0].content_length, Some(5), "{xml}");
            assert!(!r[0].collection);
            let etag = crate::model::ETag::parse(r[0].etag.as_deref().unwrap()).unwrap();
            assert_eq!(etag.value(), "abc", "{xml}");
        }
    }

    #[test]
    fn a_foreign_namespace_with_dav_names_does_not_count() {
        let xml = r#"<d:multistatus xmlns:d="DAV:" xmlns:x="urn:evil"><d:response><d:href>/d/</d:href><d:propstat><d:prop><d:resourcetype><x:collection/></d:resourcetype><x:getcontentlength>9</x:getcontentlength></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"#;
        let r = parse(xml.as_bytes()).unwrap();
        assert!(!r[0].collection);
        assert_eq!(r[0].content_length, None);
    }

    #[test]
    fn a_response_level_404_is_not_ok() {
        let xml = r#"<d:multistatus xmlns:d="DAV:"><d:response><d:href>/d/gone</d:href><d:status>HTTP/1.1 404 Not Found</d:status></d:response></d:multistatus>"#;
        let r = parse(xml.as_bytes()).unwrap();
        assert!(!r[0].ok);
    }

    #[test]
    fn malformed_documents_are_errors_not_panics() {
        let cases = [
            "",
            "not xml",
            "<d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>/x</d:href>",
            "<html><body>502 Bad Gateway</body></html>",
            "<d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>&xxe;</d:href></d:response></d:multistatus>",
            "<!DOCTYPE x [<!ENTITY a \"b\">]><d:multistatus xmlns:d=\"DAV:\"/>",
            "<d:multistatus xmlns:d=\"DAV:\"><d:response><d:propstat><d:prop><d:getcontentlength>lots</d:getcontentlength></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat><d:href>/x</d:href></d:response></d:multistatus>",
            "<d:multistatus xmlns:d=\"DAV:\"><d:response></d:response></d:multistatus>",
            "\u{feff}\u{0}\u{1}",
        ];
        for case in cases {
            let result = parse(case.as_bytes());
            assert!(
                matches!(result, Err(SourceError::InvalidResponse { .. })),
                "{case:?} gave {result:?}"
            );
        }
        assert!(parse(&[0xff, 0xfe, 0x00]).is_err());
    }
}
