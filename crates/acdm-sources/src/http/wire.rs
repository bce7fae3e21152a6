//! HTTP/1.1 on the wire, as the upstream client speaks it (RFC 9112): the
//! request's head, the response's head and the framing of its body. No IO
//! here: the connection code feeds bytes in and takes pieces out, so every
//! rule is tested on plain buffers.

use std::io::Write as _;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, header};
use url::{Position, Url};

/// Longest response head we read (status line and headers).
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most headers in one response head.
const MAX_HEADERS: usize = 128;
/// Longest chunk-size line (with its extensions) or trailer section.
const MAX_CHUNK_LINE_BYTES: usize = 4 * 1024;
const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// A response the client cannot read as HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed;

/// Writes `method url` with `headers` and a body of `body_len` bytes as an
/// HTTP/1.1 request head into `out`. The client owns the framing headers
/// (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`): the
/// caller's are not written. `None` when the URL cannot be sent (no host,
/// or a target with bytes a request line cannot carry).
pub(super) fn encode_request(
    out: &mut Vec<u8>,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    defaults: &[(HeaderName, HeaderValue)],
    body_len: usize,
) -> Option<()> {
    url.host_str().filter(|h| !h.is_empty())?;
    let target = match &url[Position::BeforePath..Position::AfterQuery] {
        "" => "/",
        target => target,
    };
    // The url crate percent-encodes what a target cannot hold; this is the
    // guard that a space or a control byte never splits the request line.
    if !target.bytes().all(|b| b.is_ascii_graphic()) || !method_is_token(method) {
        return None;
    }
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    // The URL's own `host[:port]` (a default port is not in it).
    out.extend_from_slice(url[Position::BeforeHost..Position::AfterPort].as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if is_framing(name) {
            continue;
        }
        push_header(out, name, value);
    }
    for (name, value) in defaults {
        if !headers.contains_key(name) {
            push_header(out, name, value);
        }
    }
    // A body, or a method that carries one, states its length (an empty
    // PUT is a file of no bytes, not a request still being sent).
    if body_len > 0 || !matches!(*method, Method::GET | Method::HEAD) {
        // Writing to a Vec cannot fail.
        let _ = write!(out, "content-length: {body_len}\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some(())
}

fn method_is_token(method: &Method) -> bool {
    !method.as_str().is_empty()
        && method
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_framing(name: &HeaderName) -> bool {
    name == header::HOST
        || name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
        || name == header::CONNECTION
}

fn push_header(out: &mut Vec<u8>, name: &HeaderName, value: &HeaderValue) {
    // A HeaderValue holds no CR, LF or NUL: it cannot start a header of
    // its own.
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// How a response's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body (HEAD, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) parts: http::response::Parts,
    pub(super) framing: Framing,
    /// Whether the connection may carry another request once the body is
    /// read.
    pub(super) keep_alive: bool,
}

/// Parses a response head at the start of `buf` and removes it (and any
/// interim 1xx heads before it). `Ok(None)`: more bytes are needed.
pub(super) fn parse_head(buf: &mut BytesMut, method: &Method) -> Result<Option<Head>, Malformed> {
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut slots);
        let length = match response.parse(buf) {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD_BYTES => return Ok(None),
            Ok(httparse::Status::Partial) | Err(_) => return Err(Malformed),
        };
        let code = response.code.ok_or(Malformed)?;
        let status = StatusCode::from_u16(code).map_err(|_| Malformed)?;
        let version = match response.version {
            Some(1) => Version::HTTP_11,
            Some(0) => Version::HTTP_10,
            _ => return Err(Malformed),
        };
        if status.is_informational() {
            // 100 Continue, 103 Early Hints: interim, the answer follows.
            // 101 would switch protocols, which this client never asks for.
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(Malformed);
            }
            buf.advance(length);
            continue;
        }
        // The head's bytes copied once; each value is a slice of them, not
        // a copy of its own.
        let head_bytes = Bytes::copy_from_slice(buf.get(..length).ok_or(Malformed)?);
        let start = buf.as_ptr().addr();
        let mut headers = HeaderMap::with_capacity(response.headers.len());
        for h in response.headers.iter() {
            let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| Malformed)?;
            let from = h
                .value
                .as_ptr()
                .addr()
                .checked_sub(start)
                .ok_or(Malformed)?;
            let to = from + h.value.len();
            if to > head_bytes.len() {
                return Err(Malformed);
            }
            let value = HeaderValue::from_maybe_shared(head_bytes.slice(from..to))
                .map_err(|_| Malformed)?;
            headers.append(name, value);
        }
        let framing = framing(&headers, status, method)?;
        // A Transfer-Encoding beside a Content-Length, or in an HTTP/1.0
        // answer, is framing a peer may read otherwise: the body is read
        // as chunked, and the connection is not used again (RFC 9112
        // §6.1, §6.3).
        let doubtful = headers.contains_key(header::TRANSFER_ENCODING)
            && (headers.contains_key(header::CONTENT_LENGTH) || version == Version::HTTP_10);
        let keep_alive =
            framing != Framing::UntilClose && !doubtful && persistent(&headers, version);
        let mut head = http::Response::new(());
        *head.status_mut() = status;
        *head.version_mut() = version;
        *head.headers_mut() = headers;
        buf.advance(length);
        let (parts, ()) = head.into_parts();
        return Ok(Some(Head {
            parts,
            framing,
            keep_alive,
        }));
    }
}

/// The body's framing (RFC 9112 §6.3).
fn framing(headers: &HeaderMap, status: StatusCode, method: &Method) -> Result<Framing, Malformed> {
    if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        // Chunked must be the last coding, and only once; a last coding
        // other than chunked runs to the close.
        let mut codings = Vec::new();
        for value in headers.get_all(header::TRANSFER_ENCODING) {
            let value = value.to_str().map_err(|_| Malformed)?;
            codings.extend(value.split(',').map(str::trim).filter(|c| !c.is_empty()));
        }
        let chunked = |c: &&str| c.eq_ignore_ascii_case("chunked");
        return match codings.iter().filter(|c| chunked(c)).count() {
            0 => Ok(Framing::UntilClose),
            1 if codings.last().is_some_and(chunked) => Ok(Framing::Chunked),
            1 => Ok(Framing::UntilClose),
            _ => Err(Malformed),
        };
    }
    let mut length = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.to_str().map_err(|_| Malformed)?.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Malformed);
            }
            let n: u64 = part.parse().map_err(|_| Malformed)?;
            // Several values are allowed only when they agree.
            if length.is_some_and(|l| l != n) {
                return Err(Malformed);
            }
            length = Some(n);
        }
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// Whether the server keeps the connection open after this answer.
fn persistent(headers: &HeaderMap, version: Version) -> bool {
    let mut close = false;
    let mut keep_alive = false;
    for value in headers.get_all(header::CONNECTION) {
        for token in value.to_str().unwrap_or("close").split(',') {
            let token = token.trim();
            close |= token.eq_ignore_ascii_case("close");
            keep_alive |= token.eq_ignore_ascii_case("keep-alive");
        }
    }
    !close && (version == Version::HTTP_11 || keep_alive)
}

/// One step of reading a body.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// A piece of the body.
    Data(Bytes),
    /// More bytes are needed.
    More,
    /// The body is complete.
    End,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one, this many
    /// bytes of them read so far.
    Trailers(usize),
}

/// Takes a body's pieces out of the bytes read so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decoder {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

impl Decoder {
    /// The decoder for a body framed so.
    pub(super) fn new(framing: Framing) -> Self {
        match framing {
            Framing::Empty | Framing::Length(0) => Self::Done,
            Framing::Length(n) => Self::Length(n),
            Framing::Chunked => Self::Chunked(Chunk::Size),
            Framing::UntilClose => Self::UntilClose,
        }
    }

    /// Whether the whole body has been taken.
    pub(super) fn is_done(&self) -> bool {
        *self == Self::Done
    }

    /// The next step from `buf`, removing what it consumed.
    pub(super) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, Malformed> {
        loop {
            match *self {
                Self::Done => return Ok(Step::End),
                Self::Length(left) | Self::Chunked(Chunk::Data(left)) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
                    let left = left - take as u64;
                    *self = match *self {
                        Self::Length(_) if left == 0 => Self::Done,
                        Self::Length(_) => Self::Length(left),
                        _ if left == 0 => Self::Chunked(Chunk::DataEnd),
                        _ => Self::Chunked(Chunk::Data(left)),
                    };
                    return Ok(Step::Data(buf.split_to(take).freeze()));
                }
                Self::UntilClose => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    return Ok(Step::Data(buf.split().freeze()));
                }
                Self::Chunked(Chunk::Size) => {
                    let Some(line) = take_line(buf, MAX_CHUNK_LINE_BYTES)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&line)?;
                    *self = Self::Chunked(if size == 0 {
                        Chunk::Trailers(0)
                    } else {
                        Chunk::Data(size)
                    });
                }
                Self::Chunked(Chunk::DataEnd) => {
                    match buf.get(..2) {
                        None if buf.first().is_none_or(|&b| b == b'\r') => {
                            return Ok(Step::More);
                        }
                        Some(b"\r\n") => {}
                        _ => return Err(Malformed),
                    }
                    buf.advance(2);
                    *self = Self::Chunked(Chunk::Size);
                }
                Self::Chunked(Chunk::Trailers(read)) => {
                    // Trailers carry nothing we read: skipped, the whole
                    // section bounded.
                    let room = MAX_TRAILER_BYTES.saturating_sub(read);
                    let Some(line) = take_line(buf, room)? else {
                        return Ok(Step::More);
                    };
                    *self = if line.is_empty() {
                        Self::Done
                    } else {
                        Self::Chunked(Chunk::Trailers(read + line.len() + 2))
                    };
                }
            }
        }
    }

    /// What the connection's end means: the end of a body read until the
    /// close, else a body broken off.
    pub(super) fn at_close(&mut self) -> Result<Step, Malformed> {
        if matches!(*self, Self::UntilClose | Self::Done) {
            *self = Self::Done;
            Ok(Step::End)
        } else {
            Err(Malformed)
        }
    }
}

/// Removes one CRLF-ended line from `buf` (without the CRLF); `None` when
/// no whole line is there yet, an error when it would be longer than `max`.
fn take_line(buf: &mut BytesMut, max: usize) -> Result<Option<BytesMut>, Malformed> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(end) if end > max => Err(Malformed),
        Some(end) => {
            if end == 0 || buf.get(end - 1) != Some(&b'\r') {
                return Err(Malformed);
            }
            let mut line = buf.split_to(end + 1);
            line.truncate(end - 1);
            Ok(Some(line))
        }
        None if buf.len() > max => Err(Malformed),
        None => Ok(None),
    }
}

/// A chunk-size line's size: hex digits, then optional whitespace and
/// extensions after `;`, which are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, Malformed> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = line.get(digits..).unwrap_or_default();
    let rest_ok = rest.is_empty() || {
        let ext = rest.trim_ascii_start();
        ext.first() == Some(&b';')
    };
    if digits == 0 || digits > 15 || !rest_ok {
        return Err(Malformed);
    }
    let text =
        std::str::from_utf8(line.get(..digits).unwrap_or_default()).map_err(|_| Malformed)?;
    u64::from_str_radix(text, 16).map_err(|_| Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, url: &str, headers: &HeaderMap, body_len: usize) -> Option<String> {
        let mut out = Vec::new();
        let defaults = [(header::ACCEPT, HeaderValue::from_static("*/*"))];
        encode_request(
            &mut out,
            &method,
            &Url::parse(url).unwrap(),
            headers,
            &defaults,
            body_len,
        )?;
        Some(String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_request_head_carries_the_target_host_and_length_and_never_the_callers_framing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("evil.example"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("999"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert("depth", HeaderValue::from_static("1"));
        let text = request(
            Method::from_bytes(b"PROPFIND").unwrap(),
            "http://dav.example:8080/remote.php/dav/a%20b?x=1#frag",
            &headers,
            12,
        )
        .unwrap();
        assert_eq!(
            text,
            "PROPFIND /remote.php/dav/a%20b?x=1 HTTP/1.1\r\nhost: dav.example:8080\r\n\
             depth: 1\r\naccept: */*\r\ncontent-length: 12\r\n\r\n"
        );
        // A default port is not written; an empty path is "/"; a GET
        // without a body states no length; a caller's Accept wins.
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(
            request(Method::GET, "https://gitlab.example:443", &headers, 0).unwrap(),
            "GET / HTTP/1.1\r\nhost: gitlab.example\r\naccept: application/json\r\n\r\n"
        );
        // An empty PUT is a file of no bytes.
        assert!(
            request(Method::PUT, "http://h/f", &HeaderMap::new(), 0)
                .unwrap()
                .contains("content-length: 0\r\n")
        );
        // IPv6 literals keep their brackets.
        assert!(
            request(Method::GET, "http://[::1]:9/x", &HeaderMap::new(), 0)
                .unwrap()
                .contains("host: [::1]:9\r\n")
        );
    }

    #[test]
    fn a_url_that_cannot_be_a_request_line_is_refused() {
        assert_eq!(
            request(Method::GET, "unix:/run/x", &HeaderMap::new(), 0),
            None
        );
        assert_eq!(
            request(Method::GET, "data:text/plain,hi", &HeaderMap::new(), 0),
            None
        );
    }

    fn parse(text: &[u8], method: &Method) -> (Result<Option<Head>, Malformed>, BytesMut) {
        let mut buf = BytesMut::from(text);
        let head = parse_head(&mut buf, method);
        (head, buf)
    }

    #[test]
    fn a_head_is_parsed_with_its_framing_and_persistence() {
        let (head, rest) = parse(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello",
            &Method::GET,
        );
        let head = head.unwrap().unwrap();
        assert_eq!(head.parts.status, StatusCode::OK);
        assert_eq!(head.framing, Framing::Length(5));
        assert!(head.keep_alive);
        assert_eq!(head.parts.headers.get_all("x-a").iter().count(), 2);
        assert_eq!(&rest[..], b"hello");

        let cases: &[(&[u8], Method, Framing, bool)] = &[
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                Method::GET,
                Framing::Chunked,
                true,
            ),
            // Chunked wins over a Content-Length sent beside it; such an
            // answer's connection, or an HTTP/1.0 one's with a
            // Transfer-Encoding, is not used again.
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                Method::GET,
                Framing::Chunked,
                false,
            ),
            (
                b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
                Method::GET,
                Framing::Chunked,
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                Method::GET,
                Framing::UntilClose,
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                Method::GET,
                Framing::UntilClose,
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\n\r\n",
                Method::GET,
                Framing::UntilClose,
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n",
                Method::HEAD,
                Framing::Empty,
                true,
            ),
            (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                Method::DELETE,
                Framing::Empty,
                true,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                Method::GET,
                Framing::Empty,
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: Close\r\n\r\n",
                Method::GET,
                Framing::Length(4),
                false,
            ),
            (
                b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\n",
                Method::GET,
                Framing::Length(4),
                false,
            ),
            (
                b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\nConnection: keep-alive\r\n\r\n",
                Method::GET,
                Framing::Length(4),
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 4, 4\r\n\r\n",
                Method::GET,
                Framing::Length(4),
                true,
            ),
        ];
        for (text, method, framing, keep_alive) in cases {
            let head = parse(text, method).0.unwrap().unwrap();
            let shown = String::from_utf8_lossy(text);
            assert_eq!(head.framing, *framing, "{shown}");
            assert_eq!(head.keep_alive, *keep_alive, "{shown}");
        }
    }

    /// Each value is a slice of the head's one copy: every value, empty,
    /// with inner tabs, repeated, past an interim head and beyond ASCII,
    /// is exactly its bytes, without the whitespace around it.
    #[test]
    fn header_values_are_their_bytes_exactly() {
        let (head, rest) = parse(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nX-E:\r\nX-T: \ta\tb \t\r\nX-A: 1\r\nETag: \"abc\"\r\nX-A:2\r\nX-U: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\nnext",
            &Method::GET,
        );
        let headers = head.unwrap().unwrap().parts.headers;
        assert_eq!(headers["x-e"], "");
        assert_eq!(headers["x-t"], "a\tb");
        let repeated: Vec<_> = headers.get_all("x-a").iter().collect();
        assert_eq!(repeated, ["1", "2"]);
        assert_eq!(headers["etag"], "\"abc\"");
        assert_eq!(headers["x-u"].as_bytes(), "café".as_bytes());
        assert_eq!(headers["content-length"], "0");
        assert!(headers.get("link").is_none(), "the interim head's");
        assert_eq!(rest.as_ref(), b"next");
    }

    #[test]
    fn interim_heads_are_skipped_and_a_partial_head_waits() {
        let (head, rest) = parse(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            &Method::PUT,
        );
        assert_eq!(head.unwrap().unwrap().parts.status, StatusCode::CREATED);
        assert!(rest.is_empty());
        let (head, rest) = parse(b"HTTP/1.1 200 OK\r\nContent-Le", &Method::GET);
        assert!(head.unwrap().is_none());
        assert_eq!(
            rest.len(),
            27,
            "nothing is consumed before the head is whole"
        );
    }

    #[test]
    fn broken_heads_are_malformed() {
        let bad: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: +4\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            b"HTTP/2 200 OK\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 999999 X\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\xff\r\n\r\n",
        ];
        for text in bad {
            assert_eq!(
                parse(text, &Method::GET).0.unwrap_err(),
                Malformed,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        let mut huge = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        huge.resize(MAX_HEAD_BYTES + 1, b'a');
        assert_eq!(parse(&huge, &Method::GET).0.unwrap_err(), Malformed);
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many, &Method::GET).0.unwrap_err(), Malformed);
    }

    /// Feeds `wire` to a decoder in pieces of `step` bytes and returns the
    /// body, or the error.
    fn decode_in_pieces(
        framing: Framing,
        wire: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, usize), Malformed> {
        let mut decoder = Decoder::new(framing);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            match decoder.decode(&mut buf)? {
                Step::Data(piece) => body.extend_from_slice(&piece),
                Step::End => return Ok((body, buf.len() + wire.len() - fed)),
                Step::More if fed < wire.len() => {
                    let end = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
                Step::More => {
                    return match decoder.at_close()? {
                        Step::End => Ok((body, 0)),
                        _ => unreachable!(),
                    };
                }
            }
        }
    }

    #[test]
    fn bodies_decode_the_same_whatever_pieces_they_arrive_in() {
        let chunked: &[u8] =
            b"5\r\nhello\r\n6;name=value\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        for step in [1, 2, 3, 7, 64] {
            let (body, left) = decode_in_pieces(Framing::Chunked, chunked, step).unwrap();
            assert_eq!(body, b"hello world", "step {step}");
            assert_eq!(
                left, 4,
                "the bytes after the body are left alone (step {step})"
            );
            let (body, left) = decode_in_pieces(Framing::Length(5), b"helloNEXT", step).unwrap();
            assert_eq!((body.as_slice(), left), (&b"hello"[..], 4), "step {step}");
            let (body, _) = decode_in_pieces(Framing::UntilClose, b"to the end", step).unwrap();
            assert_eq!(body, b"to the end", "step {step}");
        }
        assert_eq!(decode_in_pieces(Framing::Empty, b"", 1).unwrap().0, b"");
        assert_eq!(decode_in_pieces(Framing::Length(0), b"", 1).unwrap().0, b"");
    }

    #[test]
    fn a_body_broken_off_or_badly_chunked_is_malformed() {
        let bad: &[(Framing, &[u8])] = &[
            (Framing::Length(10), b"short"),
            (Framing::Chunked, b"5\r\nhel"),
            (Framing::Chunked, b"5\r\nhelloXX0\r\n\r\n"),
            (Framing::Chunked, b"zz\r\n"),
            (Framing::Chunked, b"5 junk\r\nhello\r\n0\r\n\r\n"),
            (Framing::Chunked, b"5\nhello\r\n0\r\n\r\n"),
            (Framing::Chunked, b"fffffffffffffffff\r\n"),
            (Framing::Chunked, b"0\r\n"),
        ];
        for (framing, wire) in bad {
            assert_eq!(
                decode_in_pieces(*framing, wire, 3).unwrap_err(),
                Malformed,
                "{framing:?} {}",
                String::from_utf8_lossy(wire)
            );
        }
        // The trailer section is bounded as a whole, not only per line.
        let mut trailers = b"0\r\n".to_vec();
        while trailers.len() <= MAX_TRAILER_BYTES + 64 {
            trailers.extend_from_slice(b"X-T: 1\r\n");
        }
        trailers.extend_from_slice(b"\r\n");
        assert_eq!(
            decode_in_pieces(Framing::Chunked, &trailers, 512).unwrap_err(),
            Malformed
        );
        let mut endless = b"1".to_vec();
        endless.resize(MAX_CHUNK_LINE_BYTES + 2, b'0');
        assert_eq!(
            decode_in_pieces(Framing::Chunked, &endless, 512).unwrap_err(),
            Malformed
        );
    }
}
