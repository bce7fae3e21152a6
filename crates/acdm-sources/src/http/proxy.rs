//! The egress proxy: which upstream calls go through it, and how.
//!
//! The rules are curl's, as hyper-util's proxy matcher reads them: a
//! proxy for `http` URLs, one for `https` URLs, and `NO_PROXY` — hosts,
//! domains (with their subdomains), IP addresses, CIDR blocks, or `*` for
//! everything — that go direct. `https` goes through a `CONNECT` tunnel
//! (TLS end to end, the proxy sees only the host and port); `http` is sent
//! to the proxy in absolute form. The values come from the binary's
//! configuration; nothing here reads the environment. A proxy's
//! credentials (`http://user:password@proxy:3128`) are sent as
//! `Proxy-Authorization` and never shown: not in an error, a log line or
//! a `Debug` output.

use http::HeaderValue;
use hyper_util::client::proxy::matcher::Matcher;

/// Where a host's connections go: the URL's scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) tls: bool,
    pub(super) host: String,
    pub(super) port: u16,
}

/// The egress proxy settings, as the usual variables hold them
/// (`HTTP_PROXY`/`http_proxy`, `HTTPS_PROXY`/`https_proxy`,
/// `NO_PROXY`/`no_proxy`). Empty: every call goes direct.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProxySettings {
    /// The proxy for `http` upstreams: `http://[user:password@]host[:port]`
    /// (a value without a scheme is taken as `http://`).
    pub http: Option<String>,
    /// The proxy for `https` upstreams, reached in plain HTTP and asked for
    /// a `CONNECT` tunnel; same form.
    pub https: Option<String>,
    /// Comma-separated hosts, domains, IP addresses, CIDR blocks, or `*`,
    /// that are reached directly.
    pub no_proxy: Option<String>,
}

impl std::fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The proxies' URLs may hold credentials: only whether each is set.
        f.debug_struct("ProxySettings")
            .field("http", &self.http.as_ref().map(|_| "<set>"))
            .field("https", &self.https.as_ref().map(|_| "<set>"))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

/// A proxy's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
}

/// How a host's connections are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// Straight to the host.
    Direct,
    /// To the proxy, each request naming its target in absolute form.
    Forward {
        proxy: Target,
        authorization: Option<HeaderValue>,
    },
    /// Through a `CONNECT` tunnel the proxy opens to the host.
    Tunnel {
        proxy: Target,
        authorization: Option<HeaderValue>,
    },
}

/// The configured proxies, when any is.
pub(super) struct Proxies {
    matcher: Matcher,
}

impl std::fmt::Debug for Proxies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The matcher's own Debug leaves the credentials out.
        f.debug_struct("Proxies")
            .field("matcher", &self.matcher)
            .finish()
    }
}

/// A proxy setting in the form the matcher reads (with a scheme), after
/// checking it is one this client can use; the error names the setting,
/// never its value.
fn checked(value: &str, name: &'static str) -> Result<String, String> {
    let value = value.trim();
    let full = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let url = url::Url::parse(&full).map_err(|_| format!("{name} is not a proxy URL"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{name} must be an http:// proxy (TLS to the proxy and SOCKS are not supported)"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{name} names no proxy host"));
    }
    // Clients disagree on a proxy's port when none is given (curl takes
    // 1080, most others the scheme's 80): the operator says which.
    if full
        .parse::<http::Uri>()
        .ok()
        .and_then(|uri| uri.port_u16())
        .is_none()
    {
        return Err(format!(
            "{name} names no port: add it (`http://host:PORT`; curl would take 1080, most other clients 80)"
        ));
    }
    Ok(full)
}

impl Proxies {
    /// The proxies `settings` configure; `None` when there is none.
    /// An unusable proxy URL is refused rather than ignored, which would
    /// send calls direct that the operator meant to go through it.
    pub(super) fn new(settings: &ProxySettings) -> Result<Option<Self>, String> {
        fn set(value: &Option<String>) -> Option<&str> {
            value.as_deref().filter(|v| !v.trim().is_empty())
        }
        let (http, https) = (set(&settings.http), set(&settings.https));
        // `*` sends everything direct: said here, as the matcher applies
        // it to names only, not to IP addresses.
        let everything_direct = set(&settings.no_proxy)
            .is_some_and(|no| no.split(',').any(|entry| entry.trim() == "*"));
        if (http.is_none() && https.is_none()) || everything_direct {
            return Ok(None);
        }
        let mut builder = Matcher::builder();
        if let Some(http) = http {
            builder = builder.http(checked(http, "HTTP_PROXY")?);
        }
        if let Some(https) = https {
            builder = builder.https(checked(https, "HTTPS_PROXY")?);
        }
        if let Some(no) = set(&settings.no_proxy) {
            builder = builder.no(no);
        }
        Ok(Some(Self {
            matcher: builder.build(),
        }))
    }

    /// How calls to `key` go.
    pub(super) fn route(&self, key: &Key) -> Route {
        let scheme = if key.tls { "https" } else { "http" };
        let Ok(uri) = format!("{scheme}://{}:{}/", key.host, key.port).parse::<http::Uri>() else {
            return Route::Direct;
        };
        let Some(intercept) = self.matcher.intercept(&uri) else {
            return Route::Direct;
        };
        let Some(host) = intercept.uri().host() else {
            return Route::Direct;
        };
        let proxy = Target {
            host: host.to_owned(),
            // Every proxy URL names its port (`checked`).
            port: intercept.uri().port_u16().unwrap_or(80),
        };
        let authorization = intercept.basic_auth().cloned();
        if key.tls {
            Route::Tunnel {
                proxy,
                authorization,
            }
        } else {
            Route::Forward {
                proxy,
                authorization,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tls: bool, host: &str) -> Key {
        Key {
            tls,
            host: host.to_owned(),
            port: if tls { 443 } else { 80 },
        }
    }

    fn proxies(http: &str, https: &str, no: &str) -> Proxies {
        let some = |v: &str| (!v.is_empty()).then(|| v.to_owned());
        Proxies::new(&ProxySettings {
            http: some(http),
            https: some(https),
            no_proxy: some(no),
        })
        .unwrap()
        .unwrap()
    }

    fn via(route: Route) -> Option<(bool, String, u16)> {
        match route {
            Route::Direct => None,
            Route::Forward { proxy, .. } => Some((false, proxy.host, proxy.port)),
            Route::Tunnel { proxy, .. } => Some((true, proxy.host, proxy.port)),
        }
    }

    #[test]
    fn each_scheme_goes_through_its_proxy_unless_no_proxy_names_the_host() {
        let p = proxies(
            "proxy.corp:3128",
            "http://tunnel.corp:8080",
            "internal.example, .lan,10.0.0.0/8, 192.168.1.7",
        );
        let forward = |h: &str| via(p.route(&key(false, h)));
        let tunnel = |h: &str| via(p.route(&key(true, h)));
        assert_eq!(
            forward("cloud.example"),
            Some((false, "proxy.corp".to_owned(), 3128))
        );
        assert_eq!(
            tunnel("gitlab.example"),
            Some((true, "tunnel.corp".to_owned(), 8080))
        );
        // A domain and its subdomains, a leading-dot domain, a CIDR block
        // and an address go direct; a look-alike does not.
        for direct in [
            "internal.example",
            "git.internal.example",
            "nas.lan",
            "10.1.2.3",
            "192.168.1.7",
        ] {
            assert_eq!(tunnel(direct), None, "{direct}");
            assert_eq!(forward(direct), None, "{direct}");
        }
        assert!(tunnel("notinternal.example").is_some());
        // A proxy that names port 80 is on 80.
        let on_80 = proxies("http://proxy.corp:80", "http://tunnel.corp:80", "");
        assert_eq!(
            via(on_80.route(&key(true, "gitlab.example"))),
            Some((true, "tunnel.corp".to_owned(), 80))
        );
        assert!(tunnel("192.168.1.8").is_some());
        assert!(tunnel("11.0.0.1").is_some());
        // `*` sends everything direct, names and addresses.
        let all_direct = Proxies::new(&ProxySettings {
            http: Some("proxy:1".to_owned()),
            https: Some("proxy:2".to_owned()),
            no_proxy: Some("example.org, *".to_owned()),
        })
        .unwrap();
        assert!(all_direct.is_none());
        // Only the scheme that has a proxy uses one.
        let http_only = proxies("proxy:1", "", "");
        assert_eq!(via(http_only.route(&key(true, "gitlab.example"))), None);
        assert!(via(http_only.route(&key(false, "gitlab.example"))).is_some());
    }

    #[test]
    fn credentials_become_proxy_authorization_and_are_never_shown() {
        let settings = ProxySettings {
            http: Some("http://svc:s3cret-pw@proxy.corp:3128".to_owned()),
            https: Some("http://svc:s3cret-pw@proxy.corp:3128".to_owned()),
            no_proxy: None,
        };
        let p = Proxies::new(&settings).unwrap().unwrap();
        let Route::Tunnel { authorization, .. } = p.route(&key(true, "gitlab.example")) else {
            panic!("a tunnel");
        };
        let authorization = authorization.unwrap();
        // base64("svc:s3cret-pw")
        assert_eq!(authorization, "Basic c3ZjOnMzY3JldC1wdw==");
        assert!(authorization.is_sensitive());
        for shown in [format!("{settings:?}"), format!("{p:?}")] {
            assert!(
                !shown.contains("s3cret") && !shown.contains("c3Zj"),
                "{shown}"
            );
        }
    }

    #[test]
    fn an_unusable_proxy_is_refused_without_showing_it_and_none_means_direct() {
        let refused = |http: &str| {
            Proxies::new(&ProxySettings {
                http: Some(http.to_owned()),
                ..ProxySettings::default()
            })
            .unwrap_err()
        };
        for bad in [
            "https://u:s3cret@proxy:443",
            "socks5://u:s3cret@proxy:1080",
            "http://u:s3cret@:8080",
            "http://u:s3cret@proxy.corp",
            "proxy.corp",
        ] {
            let error = refused(bad);
            assert!(error.contains("HTTP_PROXY"), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
        // Without a port the proxy is refused, saying what to add.
        assert!(refused("proxy.corp").contains("names no port"));
        assert!(Proxies::new(&ProxySettings::default()).unwrap().is_none());
        let blank = ProxySettings {
            http: Some("  ".to_owned()),
            https: None,
            no_proxy: Some("*".to_owned()),
        };
        assert!(Proxies::new(&blank).unwrap().is_none());
    }
}
