//! What a setting's text may be: each kind parses a value (with the problem
//! an operator reads when it cannot), knows its range if it has one, says
//! whether it is a secret, and shows the typed value for `check-config`.
//!
//! A setting's declaration in `config/mod.rs` names its kind; the reader,
//! the docs row's secret column and the redacted display all come from it,
//! so a secret kind cannot be printed by mistake.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use acdm_core::AbsPath;
use acdm_store::DatabaseTarget;
use secrecy::SecretString;
use serde_json::{Value as Json, json};

use crate::LogFormat;

/// How the text of one setting becomes its typed value.
pub(crate) trait Kind {
    /// The typed value.
    type Value;
    /// Never shown: `check-config` and the docs only say whether it is set.
    const SECRET: bool = false;

    /// The value of non-empty `text`, or the problem with it (never quoting
    /// a secret).
    fn parse(&self, text: &str) -> Result<Self::Value, String>;

    /// The value when the setting is unset or empty: its documented default,
    /// parsed like any other text.
    fn absent(&self, default: &str) -> Result<Self::Value, String> {
        self.parse(default)
    }

    /// The accepted numbers, when the kind is a bounded number (tests
    /// check the docs text states them).
    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        None
    }

    /// The value as `check-config` prints it.
    fn show(&self, value: &Self::Value) -> Json;
}

/// Whether a kind is secret, usable in a `const` table.
pub(crate) const fn is_secret<K: Kind>(_: &K) -> bool {
    K::SECRET
}

/// What `check-config` prints instead of a secret that is set.
pub(crate) const REDACTED: &str = "set (redacted)";
/// What `check-config` prints for an optional setting without a value.
pub(crate) const NOT_SET: &str = "not set";

/// A setting that may stay unset: its default is documented as `(unset)` or
/// `(empty)` and loads as `None`.
pub(crate) struct Optional<K>(pub(crate) K);

impl<K: Kind> Kind for Optional<K> {
    type Value = Option<K::Value>;
    const SECRET: bool = K::SECRET;

    fn parse(&self, text: &str) -> Result<Self::Value, String> {
        self.0.parse(text).map(Some)
    }

    fn absent(&self, default: &str) -> Result<Self::Value, String> {
        match default {
            "(unset)" | "(empty)" => Ok(None),
            other => Err(format!(
                "an optional setting's default must be (unset) or (empty), not `{other}`"
            )),
        }
    }

    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        self.0.range()
    }

    fn show(&self, value: &Self::Value) -> Json {
        value.as_ref().map_or(json!(NOT_SET), |v| self.0.show(v))
    }
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
pub(crate) struct Bool;

impl Kind for Bool {
    type Value = bool;

    fn parse(&self, text: &str) -> Result<bool, String> {
        match text.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(format!("`{text}` is not a boolean; use true or false")),
        }
    }

    fn show(&self, value: &bool) -> Json {
        json!(value)
    }
}

fn bounded(text: &str, range: &RangeInclusive<u64>) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is outside {}–{}", range.start(), range.end())),
        Err(_) => Err(format!("`{text}` is not a whole number")),
    }
}

/// A whole number in a range, as `T`.
pub(crate) struct Number<T>(pub(crate) RangeInclusive<u64>, pub(crate) PhantomData<T>);

/// A whole number in `range`, typed as the field it fills.
pub(crate) const fn number<T>(range: RangeInclusive<u64>) -> Number<T> {
    Number(range, PhantomData)
}

impl<T: TryFrom<u64> + Copy + Into<u64>> Kind for Number<T> {
    type Value = T;

    fn parse(&self, text: &str) -> Result<T, String> {
        let n = bounded(text, &self.0)?;
        T::try_from(n).map_err(|_| format!("{n} is too large"))
    }

    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        Some(self.0.clone())
    }

    fn show(&self, value: &T) -> Json {
        json!((*value).into())
    }
}

/// A count in a range, as `usize` (which `u64` does not convert into on
/// every platform, hence its own kind).
pub(crate) struct Count(pub(crate) RangeInclusive<u64>);

impl Kind for Count {
    type Value = usize;

    fn parse(&self, text: &str) -> Result<usize, String> {
        let n = bounded(text, &self.0)?;
        usize::try_from(n).map_err(|_| format!("{n} is too large for this platform"))
    }

    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        Some(self.0.clone())
    }

    fn show(&self, value: &usize) -> Json {
        json!(value)
    }
}

/// A duration given in whole seconds, in a range.
pub(crate) struct Seconds(pub(crate) RangeInclusive<u64>);

impl Kind for Seconds {
    type Value = Duration;

    fn parse(&self, text: &str) -> Result<Duration, String> {
        bounded(text, &self.0).map(Duration::from_secs)
    }

    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        Some(self.0.clone())
    }

    fn show(&self, value: &Duration) -> Json {
        json!(value.as_secs())
    }
}

/// A duration given in milliseconds, in a range.
pub(crate) struct Millis(pub(crate) RangeInclusive<u64>);

impl Kind for Millis {
    type Value = Duration;

    fn parse(&self, text: &str) -> Result<Duration, String> {
        bounded(text, &self.0).map(Duration::from_millis)
    }

    #[cfg(test)]
    fn range(&self) -> Option<RangeInclusive<u64>> {
        Some(self.0.clone())
    }

    fn show(&self, value: &Duration) -> Json {
        json!(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }
}

/// `address:port`.
pub(crate) struct Address;

impl Kind for Address {
    type Value = SocketAddr;

    fn parse(&self, text: &str) -> Result<SocketAddr, String> {
        text.parse()
            .map_err(|_| format!("`{text}` is not an address:port such as 127.0.0.1:8002"))
    }

    fn show(&self, value: &SocketAddr) -> Json {
        json!(value.to_string())
    }
}

/// A local folder, taken as given.
pub(crate) struct Folder;

impl Kind for Folder {
    type Value = PathBuf;

    fn parse(&self, text: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(text))
    }

    fn show(&self, value: &PathBuf) -> Json {
        json!(value.display().to_string())
    }
}

/// An absolute path in the file store.
pub(crate) struct StorePath;

impl Kind for StorePath {
    type Value = AbsPath;

    fn parse(&self, text: &str) -> Result<AbsPath, String> {
        AbsPath::parse(text).map_err(|e| e.to_string())
    }

    fn show(&self, value: &AbsPath) -> Json {
        json!(value.to_string())
    }
}

/// A shared token that travels in an HTTP header.
pub(crate) struct Token;

impl Kind for Token {
    type Value = SecretString;
    const SECRET: bool = true;

    fn parse(&self, text: &str) -> Result<SecretString, String> {
        let problem = if text.trim().is_empty() {
            "is blank; leave it empty or set a real token"
        } else if text.trim().len() != text.len() {
            "has leading or trailing whitespace; callers must send it byte for byte"
        } else if !text.bytes().all(|b| b.is_ascii_graphic()) {
            "must be visible ASCII without spaces (it travels in an HTTP header)"
        } else if text.len() < 32 {
            "must be at least 32 characters; generate one with `openssl rand -hex 32`"
        } else if text.len() > acdm_core::SharedToken::MAX_LEN {
            return Err(format!(
                "must be at most {} characters",
                acdm_core::SharedToken::MAX_LEN
            ));
        } else {
            return Ok(SecretString::from(text.to_owned()));
        };
        Err(problem.to_owned())
    }

    fn show(&self, _: &SecretString) -> Json {
        json!(REDACTED)
    }
}

/// A password or token from elsewhere, taken as given.
pub(crate) struct Secret;

impl Kind for Secret {
    type Value = SecretString;
    const SECRET: bool = true;

    fn parse(&self, text: &str) -> Result<SecretString, String> {
        Ok(SecretString::from(text.to_owned()))
    }

    fn show(&self, _: &SecretString) -> Json {
        json!(REDACTED)
    }
}

/// A PEM file of certificate authorities, read and checked when the
/// configuration is: a missing, unreadable or certificate-less file stops
/// the start, naming the setting.
pub(crate) struct CaFile;

/// The certificates a [`CaFile`] setting names, and the file they came from.
#[derive(Debug, Clone)]
pub struct CaCertificates {
    /// The file, as the setting gave it.
    pub path: PathBuf,
    /// Its certificates, DER-encoded.
    pub der: Vec<Vec<u8>>,
}

/// The most a certificate file may hold: a bundle of every public root
/// is about 200 KiB.
const CA_FILE_MAX_BYTES: u64 = 4 << 20;

impl Kind for CaFile {
    type Value = CaCertificates;

    fn parse(&self, text: &str) -> Result<CaCertificates, String> {
        use std::io::Read as _;
        let path = PathBuf::from(text);
        let unreadable = |error: std::io::Error| format!("cannot read `{text}`: {error}");
        // Opened, then checked to be a regular file, then read within the
        // bound: a FIFO, a device or a file that grows never holds the
        // start up.
        let file = std::fs::File::open(&path).map_err(unreadable)?;
        if !file.metadata().map_err(unreadable)?.is_file() {
            return Err(format!("`{text}` is not a regular file"));
        }
        let mut pem = Vec::new();
        file.take(CA_FILE_MAX_BYTES + 1)
            .read_to_end(&mut pem)
            .map_err(unreadable)?;
        if pem.len() as u64 > CA_FILE_MAX_BYTES {
            return Err(format!(
                "`{text}` is larger than a certificate file may be ({CA_FILE_MAX_BYTES} bytes)"
            ));
        }
        let der = acdm_sources::http::root_certificates_from_pem(&pem)
            .map_err(|problem| format!("`{text}` {problem}"))?;
        Ok(CaCertificates { path, der })
    }

    fn show(&self, value: &CaCertificates) -> Json {
        json!(format!(
            "{} ({} certificate{})",
            value.path.display(),
            value.der.len(),
            if value.der.len() == 1 { "" } else { "s" }
        ))
    }
}

/// `DATABASE_URL`: may carry a password, so it is a secret.
pub(crate) struct DatabaseUrl;

impl Kind for DatabaseUrl {
    type Value = DatabaseTarget;
    const SECRET: bool = true;

    fn parse(&self, text: &str) -> Result<DatabaseTarget, String> {
        DatabaseTarget::from_url(&SecretString::from(text.to_owned())).map_err(|e| e.to_string())
    }

    fn show(&self, _: &DatabaseTarget) -> Json {
        json!(REDACTED)
    }
}

/// The root of an HTTP(S) instance, without credentials, query or fragment.
pub(crate) struct InstanceUrl;

impl Kind for InstanceUrl {
    type Value = url::Url;

    fn parse(&self, text: &str) -> Result<url::Url, String> {
        let url = http_url(
            text,
            "must not carry credentials; use the token or password setting",
        )?;
        if url.query().is_some() || url.fragment().is_some() {
            Err("must not have a query or fragment; give the instance root".to_owned())
        } else {
            Ok(url)
        }
    }

    fn show(&self, value: &url::Url) -> Json {
        json!(value.as_str())
    }
}

/// An identity provider's URL (its JWKS): HTTPS, or plain HTTP only on a
/// loopback address (a local identity provider); no credentials, no
/// fragment.
pub(crate) struct IssuerUrl;

impl Kind for IssuerUrl {
    type Value = url::Url;

    fn parse(&self, text: &str) -> Result<url::Url, String> {
        let url = http_url(text, "must not carry credentials")?;
        if url.fragment().is_some() || url.query().is_some() {
            Err("must not have a query or fragment".to_owned())
        } else if !acdm_sources::oidc::secure_or_loopback(&url) {
            Err("must be https:// (plain http:// only on a loopback address)".to_owned())
        } else {
            Ok(url)
        }
    }

    fn show(&self, value: &url::Url) -> Json {
        json!(value.as_str())
    }
}

/// An OpenID Connect issuer identifier: an [`IssuerUrl`] kept exactly as
/// written (tokens' `iss` and clients compare it verbatim, a trailing
/// slash included).
pub(crate) struct Issuer;

impl Kind for Issuer {
    type Value = String;

    fn parse(&self, text: &str) -> Result<String, String> {
        IssuerUrl.parse(text).map(|_| text.to_owned())
    }

    fn show(&self, value: &String) -> Json {
        json!(value)
    }
}

/// A comma-separated list of write operations' labels.
pub(crate) struct Policy;

impl Kind for Policy {
    type Value = acdm_core::approval::ApprovalPolicy;

    fn parse(&self, text: &str) -> Result<Self::Value, String> {
        acdm_core::approval::ApprovalPolicy::parse_list(text).map_err(|e| e.to_string())
    }

    fn show(&self, value: &Self::Value) -> Json {
        json!(value.to_list())
    }
}

/// Where notifications are POSTed: an http(s) URL without credentials (a
/// query is allowed: some receivers take their key there).
pub(crate) struct WebhookUrl;

impl Kind for WebhookUrl {
    type Value = url::Url;

    fn parse(&self, text: &str) -> Result<url::Url, String> {
        let url = http_url(
            text,
            "must not carry credentials; the receiver checks the signature",
        )?;
        if url.fragment().is_some() {
            Err("must not have a fragment".to_owned())
        } else {
            Ok(url)
        }
    }

    fn show(&self, value: &url::Url) -> Json {
        // A query may hold the receiver's key.
        let mut shown = value.clone();
        if shown.query().is_some() {
            shown.set_query(Some("(redacted)"));
        }
        json!(shown.as_str())
    }
}

/// A Standard Webhooks signing secret: `whsec_` and base64 of 24 to 64
/// bytes.
pub(crate) struct WebhookSecret;

impl Kind for WebhookSecret {
    type Value = SecretString;
    const SECRET: bool = true;

    fn parse(&self, text: &str) -> Result<SecretString, String> {
        use base64::Engine as _;
        let encoded = text
            .strip_prefix("whsec_")
            .ok_or_else(|| "must start with whsec_ (Standard Webhooks' form)".to_owned())?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| "after whsec_ must be base64".to_owned())?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(format!(
                "must hold 24 to 64 random bytes, not {}; make one with: echo whsec_$(openssl rand -base64 32)",
                bytes.len()
            ));
        }
        Ok(SecretString::from(text.to_owned()))
    }

    fn show(&self, _: &SecretString) -> Json {
        json!(REDACTED)
    }
}

/// An http(s) URL with a host and no credentials (`credentials` says
/// what to do instead).
fn http_url(text: &str, credentials: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        Err("must start with http:// or https://".to_owned())
    } else if url.host_str().is_none_or(str::is_empty) {
        Err("has no host".to_owned())
    } else if !url.username().is_empty() || url.password().is_some() {
        Err(credentials.to_owned())
    } else {
        Ok(url)
    }
}

/// Text accepted by a check.
pub(crate) struct Checked(pub(crate) fn(&str) -> Result<(), String>);

impl Kind for Checked {
    type Value = String;

    fn parse(&self, text: &str) -> Result<String, String> {
        (self.0)(text).map(|()| text.to_owned())
    }

    fn show(&self, value: &String) -> Json {
        json!(value)
    }
}

/// A comma-separated list of `host` or `host:port`, lowercased.
pub(crate) struct Hosts;

impl Kind for Hosts {
    type Value = Vec<String>;

    fn parse(&self, text: &str) -> Result<Vec<String>, String> {
        let hosts: Vec<String> = text
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_ascii_lowercase)
            .collect();
        if hosts.is_empty() {
            return Err("lists no host".to_owned());
        }
        if let Some(bad) = hosts.iter().find(|h| {
            !h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
        }) {
            return Err(format!("`{bad}` is not a host or host:port"));
        }
        Ok(hosts)
    }

    fn show(&self, value: &Vec<String>) -> Json {
        json!(value)
    }
}

/// `auto`, `json` or `pretty`.
pub(crate) struct LogFormats;

impl Kind for LogFormats {
    type Value = LogFormat;

    fn parse(&self, text: &str) -> Result<LogFormat, String> {
        match text.to_ascii_lowercase().as_str() {
            "auto" => Ok(LogFormat::Auto),
            "json" => Ok(LogFormat::Json),
            "pretty" => Ok(LogFormat::Pretty),
            _ => Err(format!("`{text}` is not one of auto, json, pretty")),
        }
    }

    fn show(&self, value: &LogFormat) -> Json {
        json!(match value {
            LogFormat::Auto => "auto",
            LogFormat::Json => "json",
            LogFormat::Pretty => "pretty",
        })
    }
}

/// A log filter in `tracing` syntax, kept as text.
pub(crate) struct LogFilter;

impl Kind for LogFilter {
    type Value = String;

    fn parse(&self, text: &str) -> Result<String, String> {
        tracing_subscriber::EnvFilter::try_new(text)
            .map(|_| text.to_owned())
            .map_err(|e| format!("is not a log filter ({e})"))
    }

    fn show(&self, value: &String) -> Json {
        json!(value)
    }
}

/// A GitLab project: a numeric id or a `group/project` path.
pub(crate) fn check_project_id(text: &str) -> Result<(), String> {
    let numeric = text.bytes().all(|b| b.is_ascii_digit());
    let path_like = text.split('/').count() >= 2
        && text.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        });
    if numeric || path_like {
        Ok(())
    } else {
        Err("must be a numeric project id or a `group/project` path".to_owned())
    }
}

/// A Nextcloud user name that is safe as one path segment.
pub(crate) fn check_nextcloud_user(text: &str) -> Result<(), String> {
    if text.len() > 64 {
        return Err("is longer than 64 characters".to_owned());
    }
    if text
        .chars()
        .any(|c| c.is_control() || c == '/' || c == '\\' || c.is_whitespace())
    {
        return Err("must not contain slashes, whitespace or control characters".to_owned());
    }
    if text == "." || text == ".." {
        return Err("is not a user name".to_owned());
    }
    Ok(())
}
