//! A loopback double of the backend: a raw HTTP/1.1 server on port 0 that
//! answers every request with one canned status and body and records the
//! request line, the headers and the body it received.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request as the double received it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// `POST`, …
    pub(crate) method: String,
    /// The request target (`/agent-tools/nc/read`).
    pub(crate) path: String,
    /// Header names lower-cased, in arrival order.
    pub(crate) headers: Vec<(String, String)>,
    /// The raw body.
    pub(crate) body: Vec<u8>,
}

impl Received {
    /// The value of header `name` (any case), when it came exactly once.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        let mut values = self.headers.iter().filter(|(n, _)| *n == name);
        let first = values.next().map(|(_, v)| v.as_str());
        if values.next().is_some() { None } else { first }
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "the body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// What the double does with a request.
#[derive(Clone)]
enum Answer {
    /// Answers with this status and body.
    Canned(u16, String),
    /// Reads the request and never answers.
    Silent,
}

/// The running double; stops when dropped.
pub(crate) struct Double {
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl Double {
    /// A double that answers every request with `status` and `body`.
    pub(crate) async fn answering(status: u16, body: impl Into<String>) -> Self {
        Self::start(Answer::Canned(status, body.into())).await
    }

    /// A double that answers with a success envelope carrying `data`.
    pub(crate) async fn ok(data: Value) -> Self {
        let body = serde_json::json!({
            "success": true, "code": "ok", "message": "done", "data": data, "suggested_action": null,
        });
        Self::answering(200, body.to_string()).await
    }

    /// A double that records requests and never answers them.
    pub(crate) async fn silent() -> Self {
        Self::start(Answer::Silent).await
    }

    async fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                let answer = answer.clone();
                tokio::spawn(async move { serve(stream, answer, log).await });
            }
        });
        Self {
            url,
            received,
            task,
        }
    }

    /// Every request received so far.
    pub(crate) fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The one request received; fails unless there was exactly one.
    pub(crate) fn only_request(&self) -> Received {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{requests:#?}");
        requests.into_iter().next().unwrap()
    }
}

impl Drop for Double {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (head, then `Content-Length` bytes), records it and
/// answers.
async fn serve(mut stream: TcpStream, answer: Answer, log: Arc<Mutex<Vec<Received>>>) {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    log.lock().unwrap().push(Received {
        method,
        path,
        headers,
        body,
    });
    match answer {
        Answer::Canned(status, body) => {
            let response = format!(
                "HTTP/1.1 {status} Canned\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Answer::Silent => {
            // Hold the connection open until the client gives up.
            let _ = stream.read(&mut chunk).await;
        }
    }
}
