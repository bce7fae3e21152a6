//! A forward proxy on a loopback port, for the upstream client's egress
//! tests: it opens `CONNECT` tunnels and forwards absolute-form requests,
//! counting both and keeping the targets and `Proxy-Authorization` values
//! it was asked with.
//!
//! After the first request of a client connection it only pipes bytes
//! between the two ends, as a tunnel does: a kept connection's later
//! requests reach the same upstream as they were sent (in absolute form,
//! which a server must accept).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy saw.
#[derive(Debug, Default)]
struct Seen {
    tunnels: AtomicUsize,
    forwarded: AtomicUsize,
    targets: Mutex<Vec<String>>,
    authorizations: Mutex<Vec<String>>,
}

/// A running forward proxy; it stops with the runtime that started it.
#[derive(Debug, Clone)]
pub struct ForwardProxy {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl ForwardProxy {
    /// Starts the proxy on a loopback port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("cannot bind the test proxy: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the test proxy has no address: {e}"));
        let seen = Arc::new(Seen::default());
        let served = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, served.clone()));
            }
        });
        Self { addr, seen }
    }

    /// Its URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its URL with credentials, `http://<user>:<password>@127.0.0.1:<port>`.
    pub fn url_with(&self, user: &str, password: &str) -> String {
        format!("http://{user}:{password}@{}", self.addr)
    }

    /// `CONNECT` tunnels opened.
    pub fn tunnels(&self) -> usize {
        self.seen.tunnels.load(Ordering::SeqCst)
    }

    /// Connections whose first request was forwarded in absolute form.
    pub fn forwarded(&self) -> usize {
        self.seen.forwarded.load(Ordering::SeqCst)
    }

    /// The `host:port` of every tunnel and forwarded connection, in order.
    pub fn targets(&self) -> Vec<String> {
        lock(&self.seen.targets).clone()
    }

    /// Every `Proxy-Authorization` value received, in order.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.seen.authorizations).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One client connection: its first request's head says where to go.
async fn serve(mut client: TcpStream, seen: Arc<Seen>) {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
        }
    };
    let head = String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).into_owned();
    let rest = buf.get(end..).unwrap_or_default().to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (method, target) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let mut others = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("proxy-authorization") => {
                lock(&seen.authorizations).push(value.trim().to_owned());
            }
            _ => others.push(line),
        }
    }
    if method == "CONNECT" {
        lock(&seen.targets).push(target.to_owned());
        seen.tunnels.fetch_add(1, Ordering::SeqCst);
        let Ok(mut upstream) = TcpStream::connect(target).await else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
            || upstream.write_all(&rest).await.is_err()
        {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    let Some(absolute) = target.strip_prefix("http://") else {
        let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        return;
    };
    let (authority, path) = match absolute.find('/') {
        Some(at) => absolute.split_at(at),
        None => (absolute, "/"),
    };
    lock(&seen.targets).push(authority.to_owned());
    seen.forwarded.fetch_add(1, Ordering::SeqCst);
    let Ok(mut upstream) = TcpStream::connect(authority).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    let mut forwarded = format!("{method} {path} HTTP/1.1\r\n");
    for line in others {
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("\r\n");
    if upstream.write_all(forwarded.as_bytes()).await.is_err()
        || upstream.write_all(&rest).await.is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
