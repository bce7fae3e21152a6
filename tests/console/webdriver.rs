//! A small W3C WebDriver client for the browser suite: Debian's
//! `chromedriver` driving Debian's `chromium`, headless, with a fresh
//! profile, over loopback. Only the commands the suite needs; no
//! browser is ever downloaded.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where the browser and its driver are, when both are installed.
pub(crate) struct Browser {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

#[expect(
    clippy::disallowed_methods,
    reason = "a test: the browser's location and whether CI requires it"
)]
fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Browser {
    /// The installed browser, or `None` with a message saying how to get
    /// it. When `ACDM_REQUIRE_BROWSER=1` (CI), a missing browser fails the
    /// test instead.
    pub(crate) fn find() -> Option<Self> {
        let chromium =
            PathBuf::from(setting("ACDM_CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
        let chromedriver =
            PathBuf::from(setting("ACDM_CHROMEDRIVER").unwrap_or("/usr/bin/chromedriver".into()));
        if chromium.is_file() && chromedriver.is_file() {
            return Some(Self {
                chromium,
                chromedriver,
            });
        }
        let message = format!(
            "the console's browser tests need Debian's chromium and chromium-driver ({} / {}): `sudo apt-get install chromium chromium-driver` (or `cargo xtask setup` as root)",
            chromium.display(),
            chromedriver.display()
        );
        assert!(
            setting("ACDM_REQUIRE_BROWSER").as_deref() != Some("1"),
            "ACDM_REQUIRE_BROWSER=1 but {message}"
        );
        #[expect(
            clippy::print_stderr,
            reason = "tells why the browser tests are left out"
        )]
        {
            eprintln!("SKIPPED: {message}");
        }
        None
    }
}

/// The chromedriver process, killed when dropped (also when starting a
/// session fails).
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A driver process and one session in it; both end when dropped.
pub(crate) struct Session {
    _driver: Driver,
    addr: SocketAddr,
    id: String,
    _profile: tempfile::TempDir,
}

impl Drop for Session {
    /// Ends the session first, so chromedriver closes the browser and all
    /// its processes (killing only the driver would leave them running),
    /// then stops the driver.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        if let Ok(mut stream) = std::net::TcpStream::connect(self.addr) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\r\n",
                self.id,
                self.addr.port()
            );
            if stream.write_all(request.as_bytes()).is_ok() {
                // The answer comes once the browser is closed.
                let mut answer = [0u8; 1024];
                let _ = stream.read(&mut answer);
            }
        }
        // The driver stops when `_driver` is dropped, after this.
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One WebDriver command. chromedriver answers `Connection: close` but
/// keeps the socket open, so the answer is read by its `Content-Length`.
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    match call_raw(addr, method, path, body).await {
        Ok(value) => value,
        Err((status, value)) => panic!("webdriver {method} {path} failed ({status}): {value}"),
    }
}

/// One WebDriver command: its `value`, or the status and error it failed with.
async fn call_raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, (u16, Value)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let text = body.map(Value::to_string).unwrap_or_default();
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("chromedriver");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
        addr.port(),
        text.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut framing: Option<(usize, usize)> = None;
    loop {
        if let Some((head_end, length)) = framing
            && bytes.len() >= head_end + length
        {
            break;
        }
        let n = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut chunk))
            .await
            .expect("webdriver answers in time")
            .expect("read");
        assert!(n > 0, "webdriver closed the connection early");
        bytes.extend_from_slice(&chunk[..n]);
        if framing.is_none()
            && let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            framing = Some((end + 4, length));
        }
    }
    let (head_end, length) = framing.expect("a framed answer");
    let status = String::from_utf8_lossy(&bytes[..head_end])
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    let value: Value = serde_json::from_slice(&bytes[head_end..head_end + length])
        .unwrap_or_else(|e| panic!("webdriver answered {status} ({e})"));
    if status == 200 {
        Ok(value["value"].clone())
    } else {
        Err((status, value))
    }
}

impl Session {
    /// Starts chromedriver and a headless chromium with a fresh profile.
    pub(crate) async fn start(browser: &Browser) -> Self {
        let port = free_port();
        let driver = Driver(
            Command::new(&browser.chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts"),
        );
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let started = Instant::now();
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("a profile folder");
        let capabilities = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": browser.chromium,
                    "args": [
                        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        "--disable-dev-shm-usage", "--window-size=1280,1000",
                        format!("--user-data-dir={}", profile.path().display()),
                    ],
                },
            }},
        });
        let value = call(addr, "POST", "/session", Some(&capabilities)).await;
        let id = value["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        Self {
            _driver: driver,
            addr,
            id,
            _profile: profile,
        }
    }

    async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(
            self.addr,
            method,
            &format!("/session/{}{path}", self.id),
            body.as_ref(),
        )
        .await
    }

    /// Opens `url` and waits for it to load.
    pub(crate) async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The current URL.
    pub(crate) async fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML as the browser holds it.
    pub(crate) async fn source(&self) -> String {
        self.cmd("GET", "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The visible text of the page's body (asked again if the page was
    /// still being replaced).
    pub(crate) async fn text(&self) -> String {
        for _ in 0..200 {
            if let Ok(text) = self.try_text().await {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page never settled");
    }

    async fn try_text(&self) -> Result<String, (u16, Value)> {
        let value = call_raw(
            self.addr,
            "POST",
            &format!("/session/{}/element", self.id),
            Some(&json!({ "using": "css selector", "value": "body" })),
        )
        .await?;
        let body = value[ELEMENT].as_str().unwrap_or_default().to_owned();
        let text = call_raw(
            self.addr,
            "GET",
            &format!("/session/{}/element/{body}/text", self.id),
            None,
        )
        .await?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }

    /// The page's text once it contains `needle`: a click on a form's
    /// button returns before the answer's page has replaced the old one,
    /// and nothing in the browser can be waited on instead. Bounded (30 s).
    pub(crate) async fn wait_for(&self, needle: &str) -> String {
        let mut text = String::new();
        for _ in 0..600 {
            text = self.text().await;
            if text.contains(needle) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page never showed {needle:?}; it shows:\n{text}");
    }

    /// The first element matching `css`.
    pub(crate) async fn find(&self, css: &str) -> String {
        let value = self
            .cmd(
                "POST",
                "/element",
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        value[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_owned()
    }

    /// Types `text` into the element matching `css`.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.cmd(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Clicks the element matching `css` (a link or a submit button: the
    /// driver waits for the navigation).
    pub(crate) async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.cmd(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// The browser's cookies for the current page (HttpOnly ones too: the
    /// driver sees them; a page's script would not).
    pub(crate) async fn cookies(&self) -> Vec<Value> {
        self.cmd("GET", "/cookie", None)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Saves a PNG of the viewport as `<folder>/<name>.png`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let data = self.cmd("GET", "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
        let folder = screenshot_dir();
        std::fs::create_dir_all(&folder).expect("the screenshot folder");
        let path = folder.join(format!("{name}.png"));
        std::fs::write(&path, bytes).expect("the screenshot is written");
        path
    }
}

/// `target/console-screenshots/` (or `ACDM_SCREENSHOT_DIR`).
pub(crate) fn screenshot_dir() -> PathBuf {
    setting("ACDM_SCREENSHOT_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots"),
        PathBuf::from,
    )
}
