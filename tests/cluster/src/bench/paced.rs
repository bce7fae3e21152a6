//! The open-loop load generator: requests at a fixed offered rate, paced
//! below the millisecond.
//!
//! wrk paces only through its `delay` hook, whose timers count whole
//! milliseconds: every request due within a millisecond leaves at its
//! tick, a dozen at once at 12,000 req/s, and a burst costs the server
//! with more CPU per answer more. Here a pacer thread sleeps until each
//! arrival is due (a Poisson stream: exponential gaps from a seeded
//! generator) and hands it to the connections; the first free one of
//! them sends it. An arrival taken more than a millisecond after it was
//! due (every connection was busy, or the generator waited for a core)
//! is counted `late`. Latency is measured from the send, as wrk measures
//! it, so a late arrival's wait is not in it: that is what the count is
//! for. The connections run on one thread of their own, as a wrk thread
//! does; each answer is judged as wrk's script judges it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};

use crate::bench::wrk::{Figures, Judge, Request};

/// An arrival later than this after it was due is counted late.
const LATE_AFTER: Duration = Duration::from_millis(1);

/// How long the connections keep answering arrivals after the last one
/// was due, before the run ends without them.
const DRAIN: Duration = Duration::from_secs(2);

/// Due times of a Poisson stream: exponential gaps of mean 1/rate, from
/// a seeded xorshift generator, so every run sees the same pattern.
#[derive(Debug, Clone)]
pub(crate) struct Arrivals {
    state: u64,
    mean_gap_ns: f64,
    due_ns: f64,
}

impl Arrivals {
    /// `rate` arrivals per second, the stream `seed` (any number).
    pub(crate) fn new(rate: f64, seed: u64) -> Self {
        Self {
            // xorshift must not start at 0.
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            mean_gap_ns: 1e9 / rate.max(f64::MIN_POSITIVE),
            due_ns: 0.0,
        }
    }

    /// A uniform number in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next arrival's due time, in nanoseconds from the start.
    pub(crate) fn next_ns(&mut self) -> u64 {
        let gap = -self.mean_gap_ns * (1.0 - self.uniform()).ln();
        self.due_ns += gap;
        self.due_ns as u64
    }
}

/// The request as bytes on the wire, as wrk sends it: the request line,
/// `Host`, the scenario's headers and, with a body, its length.
pub(crate) fn wire(request: &Request, addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut head = format!("{} {path} HTTP/1.1\r\nHost: {addr}\r\n", request.method);
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = request.body.as_deref().unwrap_or_default();
    if request.body.is_some() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// A whole answer read off a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Its status.
    pub(crate) status: u16,
    /// Its body (chunks joined).
    pub(crate) body: Vec<u8>,
    /// How many bytes of the buffer it took.
    pub(crate) consumed: usize,
}

/// The answer at the start of `buf`, once it is all there: `Ok(None)`
/// while more is needed. Bodies framed by `Content-Length` or chunked.
pub(crate) fn answer(buf: &[u8]) -> Result<Option<Answer>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        if buf.len() > 64 * 1024 {
            bail!("no end of the answer's head in 64 KiB");
        }
        return Ok(None);
    };
    let head = std::str::from_utf8(buf.get(..end).unwrap_or_default())
        .context("the answer's head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| anyhow!("bad status line `{status_line}`"))?;
    let (mut length, mut chunked) = (None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .with_context(|| format!("bad Content-Length `{value}`"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            chunked = true;
        }
    }
    let start = end + 4;
    if chunked {
        return chunks(buf, start).map(|found| {
            found.map(|(body, consumed)| Answer {
                status,
                body,
                consumed,
            })
        });
    }
    let length = length.unwrap_or(0);
    let Some(body) = buf.get(start..start + length) else {
        return Ok(None);
    };
    Ok(Some(Answer {
        status,
        body: body.to_vec(),
        consumed: start + length,
    }))
}

/// A chunked body starting at `at`: the joined chunks and where the body
/// ends, once it is all there.
fn chunks(buf: &[u8], mut at: usize) -> Result<Option<(Vec<u8>, usize)>> {
    let mut body = Vec::new();
    loop {
        let rest = buf.get(at..).unwrap_or_default();
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line =
            std::str::from_utf8(rest.get(..eol).unwrap_or_default()).context("bad chunk size")?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16)
            .with_context(|| format!("bad chunk size `{line}`"))?;
        at += eol + 2;
        if size == 0 {
            // No trailers here: the body ends with an empty line.
            if buf.len() < at + 2 {
                return Ok(None);
            }
            return Ok(Some((body, at + 2)));
        }
        let (Some(chunk), true) = (buf.get(at..at + size), buf.len() >= at + size + 2) else {
            return Ok(None);
        };
        body.extend_from_slice(chunk);
        at += size + 2;
    }
}

/// One open-loop run.
#[derive(Debug, Clone)]
pub(crate) struct Open {
    /// Connections kept open.
    pub(crate) connections: usize,
    /// Offered req/s.
    pub(crate) rate: f64,
    /// How long arrivals come.
    pub(crate) duration: Duration,
    /// The arrivals' stream.
    pub(crate) seed: u64,
}

/// What one connection saw.
#[derive(Debug, Default)]
struct Tally {
    latencies_us: Vec<u32>,
    late: u64,
    bad_status: u64,
    bad_body: u64,
    connect: u64,
    read: u64,
    write: u64,
    sample: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        self.latencies_us.extend(other.latencies_us);
        self.late += other.late;
        self.bad_status += other.bad_status;
        self.bad_body += other.bad_body;
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        if self.sample.is_none() {
            self.sample = other.sample;
        }
    }

    fn figures(mut self, duration: Duration) -> Figures {
        self.latencies_us.sort_unstable();
        let at = |q: f64| -> u64 {
            let n = self.latencies_us.len();
            let i = (n.saturating_sub(1) as f64 * q).round() as usize;
            self.latencies_us.get(i).map_or(0, |l| u64::from(*l))
        };
        Figures {
            requests: self.latencies_us.len() as u64,
            duration,
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            max_us: self.latencies_us.last().map_or(0, |l| u64::from(*l)),
            bad_status: self.bad_status,
            bad_body: self.bad_body,
            late: self.late,
            socket_errors: [self.connect, self.read, self.write, 0],
            sample: self.sample,
        }
    }
}

/// Runs `open` against `addr` with `request` on `path`, judging every
/// answer with `judge`; blocks until done (call it off the async threads).
pub(crate) fn run(
    open: &Open,
    request: &Request,
    judge: &Judge,
    addr: SocketAddr,
    path: &str,
) -> Result<Figures> {
    let bytes = Arc::new(wire(request, addr, path));
    let judge = Arc::new(judge.clone());
    let (tx, rx) = mpsc::unbounded_channel::<Duration>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    let until = open.duration;
    let mut arrivals = Arrivals::new(open.rate, open.seed);
    let pacer = std::thread::Builder::new()
        .name("bench-pacer".to_owned())
        .spawn(move || {
            let mut due = Duration::from_nanos(arrivals.next_ns());
            while due < until {
                let now = start.elapsed();
                if due > now {
                    std::thread::sleep(due - now);
                }
                // Every arrival due by now, in one go.
                let now = start.elapsed();
                while due <= now && due < until {
                    if tx.send(due).is_err() {
                        return;
                    }
                    due = Duration::from_nanos(arrivals.next_ns());
                }
            }
        })?;
    let rx = Arc::new(Mutex::new(rx));
    let connections = open.connections.max(1);
    let tally = runtime.block_on(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let (rx, bytes, judge) = (rx.clone(), bytes.clone(), judge.clone());
            tasks.spawn(connection(addr, rx, bytes, judge, start, until));
        }
        let mut tally = Tally::default();
        while let Some(done) = tasks.join_next().await {
            tally.merge(done.unwrap_or_default());
        }
        tally
    });
    pacer
        .join()
        .map_err(|_| anyhow!("the pacer thread panicked"))?;
    Ok(tally.figures(open.duration))
}

/// One connection: takes the next arrival, sends, reads and judges the
/// answer, again until the arrivals end (or the drain time is over).
async fn connection(
    addr: SocketAddr,
    arrivals: Arc<Mutex<mpsc::UnboundedReceiver<Duration>>>,
    request: Arc<Vec<u8>>,
    judge: Arc<Judge>,
    start: Instant,
    until: Duration,
) -> Tally {
    let mut tally = Tally::default();
    let mut stream = None;
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let due = {
            let mut arrivals = arrivals.lock().await;
            match arrivals.recv().await {
                Some(due) => due,
                None => break,
            }
        };
        let taken = start.elapsed();
        if taken > until + DRAIN {
            break;
        }
        if taken > due + LATE_AFTER {
            tally.late += 1;
        }
        if stream.is_none() {
            match TcpStream::connect(addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    stream = Some(s);
                }
                Err(_) => {
                    tally.connect += 1;
                    continue;
                }
            }
        }
        let Some(s) = stream.as_mut() else { continue };
        let sent = Instant::now();
        if s.write_all(&request).await.is_err() {
            tally.write += 1;
            stream = None;
            continue;
        }
        buf.clear();
        let answer = loop {
            match answer(&buf) {
                Ok(Some(answer)) => break Some(answer),
                Ok(None) => {}
                Err(_) => break None,
            }
            // Read straight into the buffer's spare room (no-op when it
            // has 16 KiB free already).
            buf.reserve(16 * 1024);
            match s.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break None,
                Ok(_) => {}
            }
        };
        let latency = sent.elapsed();
        let Some(answer) = answer else {
            tally.read += 1;
            stream = None;
            continue;
        };
        tally
            .latencies_us
            .push(u32::try_from(latency.as_micros()).unwrap_or(u32::MAX));
        let body = String::from_utf8_lossy(&answer.body);
        if let Err(why) = judge.check(answer.status, &body) {
            if (200..300).contains(&answer.status) {
                tally.bad_body += 1;
            } else {
                tally.bad_status += 1;
            }
            if tally.sample.is_none() {
                tally.sample = Some(why);
            }
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_come_at_the_rate_with_exponential_gaps() {
        let mut arrivals = Arrivals::new(10_000.0, 1);
        let mut last = 0;
        let mut gaps = Vec::new();
        for _ in 0..200_000 {
            let due = arrivals.next_ns();
            assert!(due >= last);
            gaps.push((due - last) as f64);
            last = due;
        }
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // 100 µs on average; an exponential's deviation equals its mean
        // and its median is ln 2 of it.
        assert!((mean - 100_000.0).abs() < 1_000.0, "{mean}");
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.02, "{sd}");
        gaps.sort_by(f64::total_cmp);
        let median = gaps[gaps.len() / 2];
        assert!(
            (median / mean - std::f64::consts::LN_2).abs() < 0.02,
            "{median}"
        );
        // Seeds give their own streams, the same one each time.
        let first = |seed| Arrivals::new(10_000.0, seed).next_ns();
        assert_eq!(first(1), first(1));
        assert_ne!(first(1), first(2));
    }

    #[test]
    fn the_figures_are_the_percentiles_of_every_latency_and_the_counts() {
        let tally = Tally {
            // 101 latencies, 1 to 101 µs, in no order.
            latencies_us: (1..=101).rev().collect(),
            late: 3,
            bad_body: 2,
            read: 1,
            sample: Some("x".to_owned()),
            ..Tally::default()
        };
        let figures = tally.figures(Duration::from_secs(2));
        assert_eq!(figures.requests, 101);
        assert_eq!(
            (
                figures.p50_us,
                figures.p90_us,
                figures.p99_us,
                figures.max_us
            ),
            (51, 91, 100, 101)
        );
        assert_eq!((figures.late, figures.bad_body), (3, 2));
        assert_eq!(figures.socket_errors, [0, 1, 0, 0]);
        assert!((figures.rate() - 50.5).abs() < 1e-9);
        let none = Tally::default().figures(Duration::from_secs(1));
        assert_eq!((none.requests, none.p99_us, none.max_us), (0, 0, 0));
    }

    #[test]
    fn the_request_goes_out_as_wrk_sends_it() {
        let request = Request {
            method: "POST",
            headers: vec![("X-A".to_owned(), "1".to_owned())],
            body: Some("{}".to_owned()),
        };
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            String::from_utf8(wire(&request, addr, "/mcp")).unwrap(),
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}"
        );
        let get = Request {
            method: "GET",
            headers: Vec::new(),
            body: None,
        };
        assert_eq!(
            String::from_utf8(wire(&get, addr, "/f")).unwrap(),
            "GET /f HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
        );
    }

    #[test]
    fn answers_are_read_whole_by_length_or_chunks_and_not_before() {
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhelloNEXT";
        let read = answer(sized).unwrap().unwrap();
        assert_eq!(
            (read.status, read.body.as_slice(), read.consumed),
            (200, &b"hello"[..], sized.len() - 4)
        );
        for cut in 0..sized.len() - 4 {
            assert_eq!(answer(&sized[..cut]).unwrap(), None, "{cut}");
        }
        let chunked = b"HTTP/1.1 429 Too Many\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let read = answer(chunked).unwrap().unwrap();
        assert_eq!(
            (read.status, read.body.as_slice(), read.consumed),
            (429, &b"abcde"[..], chunked.len())
        );
        for cut in 0..chunked.len() {
            assert_eq!(answer(&chunked[..cut]).unwrap(), None, "{cut}");
        }
        let empty = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(answer(empty).unwrap().unwrap().body, b"");
        assert!(answer(b"garbage\r\n\r\n").is_err());
        assert!(answer(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(answer(&vec![b'a'; 70 * 1024]).is_err());
    }

    #[test]
    fn a_run_against_a_server_judges_every_answer_and_counts_them() {
        // A server answering every request on its connection: the first
        // hundred with the expected text, the rest without it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = served.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.set_nodelay(true);
                let count = count.clone();
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let body = if n < 100 { "good" } else { "bad" };
                            // One write: a second small one would wait on
                            // the client's delayed ACK (Nagle).
                            let answer = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = stream.write_all(answer.as_bytes());
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                        }
                    }
                });
            }
        });
        let request = Request {
            method: "GET",
            headers: Vec::new(),
            body: None,
        };
        let judge = Judge {
            expect: "good".to_owned(),
            refuse: None,
        };
        let open = Open {
            connections: 4,
            rate: 2_000.0,
            duration: Duration::from_millis(150),
            seed: 7,
        };
        let figures = run(&open, &request, &judge, addr, "/x").unwrap();
        let sent = served.load(std::sync::atomic::Ordering::SeqCst) as u64;
        // Every arrival of the stream was sent and answered: as many as
        // the same stream has within the run.
        let mut arrivals = Arrivals::new(open.rate, open.seed);
        let due = std::iter::from_fn(|| Some(arrivals.next_ns()))
            .take_while(|ns| *ns < 150_000_000)
            .count() as u64;
        assert_eq!(figures.requests, due, "{figures:?} served {sent}");
        assert_eq!(sent, due);
        assert_eq!(figures.bad_body, due.saturating_sub(100));
        assert_eq!(figures.bad_status, 0);
        assert_eq!(figures.socket_errors, [0, 0, 0, 0]);
        assert!(figures.p50_us <= figures.p99_us && figures.p99_us <= figures.max_us);
        assert!(
            figures
                .sample
                .as_deref()
                .is_some_and(|s| s.contains("no `good`")),
            "{:?}",
            figures.sample
        );
        // Nothing to connect to: every arrival is a connect error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = closed.local_addr().unwrap();
        drop(closed);
        let figures = run(&open, &request, &judge, gone, "/x").unwrap();
        assert_eq!(figures.requests, 0);
        assert_eq!(figures.socket_errors[0], due, "{figures:?}");
    }
}
