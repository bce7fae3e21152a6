//! What the loopback doubles that play an upstream server share: reading
//! one HTTP/1.1 request off a connection.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads one request — its head, then as many body bytes as its
/// `Content-Length` says — from `stream`, starting with what `buf` already
/// holds, and removes it from `buf`; bytes after it stay there for the
/// next request on a kept connection. Returns the request's head, lower
/// cased; `None` when the connection ends (or fails) first. Any stream: a
/// plain connection or one under TLS.
pub async fn read_request(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> Option<String> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        read_more(stream, buf).await?;
    };
    let head = String::from_utf8_lossy(buf.get(..end)?).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + length {
        read_more(stream, buf).await?;
    }
    buf.drain(..end + length);
    Some(head)
}

/// Appends what the next read brings; `None` at the end or on an error.
async fn read_more(stream: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(chunk.get(..n)?);
            Some(())
        }
    }
}
