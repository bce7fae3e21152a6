//! The browser suite's driver: Debian's `chromedriver` driving Debian's
//! `chromium`, headless, with a fresh profile, over loopback, through
//! fantoccini's WebDriver client. No browser is ever downloaded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::cookies::Cookie;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

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

impl Driver {
    /// Starts chromedriver on a port it picks itself, and its WebDriver
    /// URL once it says it listens there.
    async fn start(chromedriver: &Path) -> (Self, String) {
        let mut child = Command::new(chromedriver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = child.stdout.take().expect("chromedriver's output");
        let driver = Self(child);
        let (port_tx, port_rx) = tokio::sync::oneshot::channel();
        // Reads its output to the end, so that it never blocks writing.
        std::thread::spawn(move || {
            let mut port_tx = Some(port_tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let port = line
                    .strip_prefix("ChromeDriver was started successfully on port ")
                    .and_then(|rest| rest.trim_end_matches('.').parse::<u16>().ok());
                if let Some(port) = port
                    && let Some(tx) = port_tx.take()
                {
                    let _ = tx.send(port);
                }
            }
        });
        let port = tokio::time::timeout(Duration::from_secs(20), port_rx)
            .await
            .expect("chromedriver listens within 20 s")
            .expect("chromedriver says on which port it listens");
        (driver, format!("http://127.0.0.1:{port}"))
    }
}

/// A driver process and one browser session in it; both end when dropped.
pub(crate) struct Session {
    client: Client,
    webdriver: String,
    id: String,
    // Dropped in this order, after `Drop::drop` ended the session.
    _driver: Driver,
    _profile: tempfile::TempDir,
}

impl Drop for Session {
    /// Ends the session first, so chromedriver closes the browser and all
    /// its processes (killing only the driver would leave them running),
    /// then stops the driver. The session is ended from a thread of its
    /// own: this runs also while a failed test unwinds and its runtime,
    /// which the client's connection lives on, stops.
    fn drop(&mut self) {
        let webdriver = self.webdriver.clone();
        let id = self.id.clone();
        let ended = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let client = Client::with_existing_session(&webdriver, &id, HttpConnector::new())
                    .await
                    .ok()?;
                // The answer comes once the browser is closed.
                tokio::time::timeout(Duration::from_secs(20), client.close())
                    .await
                    .ok()?
                    .ok()
            })
        });
        let _ = ended.join();
    }
}

impl Session {
    /// Starts chromedriver and a headless chromium with a fresh profile.
    pub(crate) async fn start(browser: &Browser) -> Self {
        let (driver, webdriver) = Driver::start(&browser.chromedriver).await;
        let profile = tempfile::tempdir().expect("a profile folder");
        let capabilities = json!({
            "browserName": "chrome",
            // Bounds every navigation, as a request timeout would.
            "timeouts": { "pageLoad": 60_000, "script": 60_000 },
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
        });
        let capabilities = capabilities.as_object().cloned().expect("an object");
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&webdriver)
            .await
            .unwrap_or_else(|e| panic!("a chromium session: {e}"));
        let id = client
            .session_id()
            .await
            .expect("the session's id")
            .expect("a session");
        Self {
            client,
            webdriver,
            id,
            _driver: driver,
            _profile: profile,
        }
    }

    /// Opens `url` and waits for it to load.
    pub(crate) async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The current URL.
    pub(crate) async fn url(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("the current URL")
            .into()
    }

    /// The page's HTML as the browser holds it.
    pub(crate) async fn source(&self) -> String {
        self.client.source().await.expect("the page's source")
    }

    /// The visible text of the page's body (asked again if the page was
    /// still being replaced).
    pub(crate) async fn text(&self) -> String {
        let mut error = None;
        for _ in 0..200 {
            match self.try_text().await {
                Ok(text) => return text,
                Err(e) => error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page never settled: {error:?}");
    }

    async fn try_text(&self) -> Result<String, CmdError> {
        self.client.find(Locator::Css("body")).await?.text().await
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

    /// Types `text` into the element matching `css`.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Clicks the element matching `css` (a link or a submit button: the
    /// driver waits for the navigation).
    pub(crate) async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// The browser's cookies for the current page (HttpOnly ones too: the
    /// driver sees them; a page's script would not).
    pub(crate) async fn cookies(&self) -> Vec<Cookie<'static>> {
        self.client.get_all_cookies().await.expect("the cookies")
    }

    /// Saves a PNG of the viewport as `<folder>/<name>.png`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let bytes = self.client.screenshot().await.expect("a screenshot");
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
