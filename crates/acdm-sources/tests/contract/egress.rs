//! The way out: calls through a real forward proxy (absolute form for
//! `http`, a `CONNECT` tunnel for `https` with TLS end to end, `NO_PROXY`
//! going direct, the proxy's credentials sent to it and nowhere else), and
//! gzip-compressed XML answers decoded within their bound — a gzip bomb
//! stops at it — while file reads never ask for compression.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use acdm_sources::http::{HttpClient, HttpSettings, ProxySettings};
use acdm_sources::nextcloud::{NextcloudConfig, NextcloudFiles};
use acdm_sources::{FileReader, ReadRange, SourceError};
use acdm_test_support::ForwardProxy;
use acdm_test_support::loopback::read_request;
use secrecy::SecretString;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::abs;

/// The test certificate authority, and the `localhost`/`127.0.0.1`
/// certificate it signed with its key (DER; made once with openssl, valid
/// for a century).
const CA: &[u8] = include_bytes!("tls/ca.der");
/// The same certificate as an operator's PEM file (`ACDM_UPSTREAM_CA_FILE`).
const CA_PEM: &[u8] = include_bytes!("tls/ca.pem");
const LEAF: &[u8] = include_bytes!("tls/leaf.der");
const LEAF_KEY: &[u8] = include_bytes!("tls/leaf.key.der");

/// An answer: status, extra header lines, body.
type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// A loopback WebDAV double that answers every request with what `answer`
/// makes of its head (lower-cased), over TLS when asked, keeping
/// connections alive; it records the heads and counts connections.
struct Upstream {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start(tls: bool, answer: fn(&str) -> Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let acceptor = tls.then(|| {
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![LEAF.to_vec().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(LEAF_KEY.to_vec().into()),
            )
            .unwrap();
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let (h, c) = (heads.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (h, acceptor) = (h.clone(), acceptor.clone());
                tokio::spawn(async move {
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, h, answer).await;
                            }
                        }
                        None => serve(stream, h, answer).await,
                    }
                });
            }
        });
        Self {
            addr,
            heads,
            connections,
        }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    heads: Arc<Mutex<Vec<String>>>,
    answer: fn(&str) -> Answer,
) {
    let mut buf = Vec::new();
    while let Some(head) = read_request(&mut stream, &mut buf).await {
        let (status, headers, body) = answer(&head);
        heads.lock().unwrap().push(head);
        let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
        for (name, value) in headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(&body);
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// The listing of `/Projects/Alpha`: the folder and one file.
fn listing() -> Vec<u8> {
    let mut xml = String::from(r#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">"#);
    for (href, kind) in [
        ("/remote.php/dav/files/u/Projects/Alpha/", "<d:collection/>"),
        ("/remote.php/dav/files/u/Projects/Alpha/a.md", ""),
    ] {
        xml.push_str(&format!(
            "<d:response><d:href>{href}</d:href><d:propstat><d:prop><d:resourcetype>{kind}</d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        ));
    }
    xml.push_str("</d:multistatus>");
    xml.into_bytes()
}

/// A WebDAV double: listings compressed when the request accepts gzip;
/// file reads answered `hello` as they are.
fn webdav(head: &str) -> Answer {
    if head.starts_with("propfind") {
        let xml = listing();
        if head.contains("\r\naccept-encoding: gzip\r\n") {
            return (
                207,
                vec![
                    ("content-type", "application/xml".to_owned()),
                    ("content-encoding", "gzip".to_owned()),
                ],
                gzip(&xml),
            );
        }
        return (
            207,
            vec![("content-type", "application/xml".to_owned())],
            xml,
        );
    }
    (
        206,
        vec![("content-range", "bytes 0-4/5".to_owned())],
        b"hello".to_vec(),
    )
}

fn files(base: &str, settings: HttpSettings) -> NextcloudFiles {
    let http = HttpClient::new(HttpSettings {
        retries: 0,
        ..settings
    })
    .unwrap();
    NextcloudFiles::new(
        NextcloudConfig {
            url: url::Url::parse(base).unwrap(),
            user: "u".to_owned(),
            app_password: Some(SecretString::from("p")),
        },
        http,
    )
    .unwrap()
}

async fn list_and_read(files: &NextcloudFiles) {
    let listed = files.list(&abs("/Projects/Alpha")).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let read = files
        .read(&abs("/Projects/Alpha/a.md"), ReadRange::new(0, 5))
        .await
        .unwrap();
    assert_eq!(read.collect(5).await.unwrap().bytes.as_ref(), b"hello");
}

#[tokio::test]
async fn plain_http_goes_through_the_proxy_in_absolute_form_unless_no_proxy_names_it() {
    let upstream = Upstream::start(false, webdav).await;
    let proxy = ForwardProxy::start().await;
    let base = format!("http://{}/", upstream.addr);
    let through = files(
        &base,
        HttpSettings {
            proxy: ProxySettings {
                http: Some(proxy.url_with("svc", "pr0xy-pw")),
                https: None,
                no_proxy: Some("internal.example".to_owned()),
            },
            ..HttpSettings::default()
        },
    );
    list_and_read(&through).await;
    list_and_read(&through).await;
    // One kept connection through the proxy carried all four calls.
    assert_eq!((proxy.forwarded(), proxy.tunnels()), (1, 0));
    assert_eq!(proxy.targets(), [upstream.addr.to_string()]);
    // base64("svc:pr0xy-pw"), sent to the proxy; the upstream never sees
    // it (the proxy passes later requests on as they are).
    assert_eq!(proxy.authorizations(), ["Basic c3ZjOnByMHh5LXB3"]);
    assert_eq!(upstream.heads().len(), 4);
    assert!(
        upstream.heads()[0].starts_with("propfind /remote.php/dav/files/u/projects/alpha"),
        "{}",
        upstream.heads()[0]
    );
    // NO_PROXY naming the address (or `*`) goes direct.
    for no_proxy in ["127.0.0.1", "localhost, 127.0.0.0/8", "*"] {
        let direct = files(
            &base,
            HttpSettings {
                proxy: ProxySettings {
                    http: Some(proxy.url()),
                    https: None,
                    no_proxy: Some(no_proxy.to_owned()),
                },
                ..HttpSettings::default()
            },
        );
        list_and_read(&direct).await;
    }
    assert_eq!(proxy.forwarded(), 1, "nothing more went through the proxy");
}

#[tokio::test]
async fn https_tunnels_through_the_proxy_with_tls_end_to_end() {
    let upstream = Upstream::start(true, webdav).await;
    let proxy = ForwardProxy::start().await;
    let base = format!("https://localhost:{}/", upstream.addr.port());
    // Trusted as an operator gives it: a PEM file.
    let from_pem = acdm_sources::http::root_certificates_from_pem(CA_PEM).unwrap();
    assert_eq!(from_pem, [CA.to_vec()]);
    let trusting = |proxy_settings| HttpSettings {
        proxy: proxy_settings,
        extra_root_certificates: from_pem.clone(),
        ..HttpSettings::default()
    };
    let through = files(
        &base,
        trusting(ProxySettings {
            http: None,
            https: Some(proxy.url_with("svc", "pr0xy-pw")),
            no_proxy: None,
        }),
    );
    list_and_read(&through).await;
    list_and_read(&through).await;
    assert_eq!((proxy.tunnels(), proxy.forwarded()), (1, 0));
    assert_eq!(
        proxy.targets(),
        [format!("localhost:{}", upstream.addr.port())]
    );
    assert_eq!(proxy.authorizations(), ["Basic c3ZjOnByMHh5LXB3"]);
    assert_eq!(upstream.connections.load(Ordering::SeqCst), 1);
    // NO_PROXY by name goes direct.
    let direct = files(
        &base,
        trusting(ProxySettings {
            http: None,
            https: Some(proxy.url()),
            no_proxy: Some("localhost".to_owned()),
        }),
    );
    list_and_read(&direct).await;
    assert_eq!(proxy.tunnels(), 1);
    // Without the extra root, the certificate is not trusted: through the
    // tunnel or not, nothing is read.
    let untrusting = files(&base, HttpSettings::default());
    let error = untrusting.list(&abs("/Projects/Alpha")).await.unwrap_err();
    assert!(matches!(error, SourceError::Upstream { .. }), "{error:?}");
}

#[tokio::test]
async fn a_proxy_that_refuses_is_an_upstream_error_without_its_address_or_credentials() {
    // A port nothing listens on behind the proxy: it answers 502.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let proxy = ForwardProxy::start().await;
    let through = files(
        &format!("https://localhost:{port}/"),
        HttpSettings {
            proxy: ProxySettings {
                http: None,
                https: Some(proxy.url_with("svc", "pr0xy-pw")),
                no_proxy: None,
            },
            ..HttpSettings::default()
        },
    );
    let error = through.list(&abs("/Projects/Alpha")).await.unwrap_err();
    assert!(matches!(error, SourceError::Upstream { .. }), "{error:?}");
    let text = format!("{error} {error:?}");
    for secret in ["pr0xy", "c3Zj", "127.0.0.1", &port.to_string()] {
        assert!(!text.contains(secret), "{text}");
    }
    assert_eq!(proxy.tunnels(), 1);
}

#[tokio::test]
async fn listings_come_compressed_and_file_reads_never_ask_for_it() {
    let upstream = Upstream::start(false, webdav).await;
    let files = files(
        &format!("http://{}/", upstream.addr),
        HttpSettings::default(),
    );
    list_and_read(&files).await;
    let heads = upstream.heads();
    assert!(
        heads[0].starts_with("propfind") && heads[0].contains("\r\naccept-encoding: gzip\r\n"),
        "{}",
        heads[0]
    );
    assert!(
        heads[1].starts_with("get") && !heads[1].contains("accept-encoding"),
        "{}",
        heads[1]
    );
}

/// A listing that decodes to more than the 16 MiB a listing may have.
fn bomb(head: &str) -> Answer {
    let mut xml = listing();
    xml.resize((16 << 20) + 1024, b' ');
    let _ = head;
    (
        207,
        vec![
            ("content-type", "application/xml".to_owned()),
            ("content-encoding", "gzip".to_owned()),
        ],
        gzip(&xml),
    )
}

#[tokio::test]
async fn a_gzip_bomb_stops_at_the_decoded_bound() {
    let upstream = Upstream::start(false, bomb).await;
    let files = files(
        &format!("http://{}/", upstream.addr),
        HttpSettings::default(),
    );
    let error = files.list(&abs("/Projects/Alpha")).await.unwrap_err();
    match &error {
        SourceError::InvalidResponse { detail, .. } => {
            assert!(detail.contains("larger than"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

/// Compressed bytes that are not gzip.
fn not_gzip(_: &str) -> Answer {
    (
        207,
        vec![("content-encoding", "gzip".to_owned())],
        b"<d:multistatus".to_vec(),
    )
}

/// An encoding the client never asked for.
fn brotli(_: &str) -> Answer {
    (207, vec![("content-encoding", "br".to_owned())], listing())
}

#[tokio::test]
async fn a_broken_or_unasked_encoding_is_an_invalid_response() {
    for answer in [not_gzip as fn(&str) -> Answer, brotli] {
        let upstream = Upstream::start(false, answer).await;
        let files = files(
            &format!("http://{}/", upstream.addr),
            HttpSettings::default(),
        );
        let error = files.list(&abs("/Projects/Alpha")).await.unwrap_err();
        assert!(
            matches!(error, SourceError::InvalidResponse { .. }),
            "{error:?}"
        );
    }
}
