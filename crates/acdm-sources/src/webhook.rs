//! Notifications POSTed to a receiver of the operator's choosing, signed
//! as the Standard Webhooks specification describes: the headers
//! `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature` (`v1,` and the base64 of HMAC-SHA256 over
//! `<id>.<timestamp>.<body>`, keyed with the secret's bytes: the base64
//! after `whsec_`). A receiver checks the signature and the timestamp,
//! and drops an id it has seen (delivery is at least once).
//!
//! Through the same [`HttpClient`] as the upstreams (its timeouts, proxy,
//! CA file); a POST is never retried here: the outbox retries it later.

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method};
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::Sha256;
use url::Url;

use crate::error::SourceError;
use crate::http::{HttpClient, Idempotency, UpstreamRequest};

const SOURCE: &str = "webhook";

/// A receiver and the key its messages are signed with.
pub struct WebhookSender {
    client: HttpClient,
    url: Url,
    key: SecretBox<Vec<u8>>,
}

impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSender")
            .field("host", &self.url.host_str())
            .finish_non_exhaustive()
    }
}

/// The secret is not `whsec_` and base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the webhook secret must be whsec_ followed by base64")]
pub struct BadSecret;

impl WebhookSender {
    /// Messages to `url`, signed with `secret` (`whsec_<base64>`).
    pub fn new(client: HttpClient, url: Url, secret: &SecretString) -> Result<Self, BadSecret> {
        let key = secret
            .expose_secret()
            .strip_prefix("whsec_")
            .and_then(|encoded| {
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .ok()
            })
            .ok_or(BadSecret)?;
        Ok(Self {
            client,
            url,
            key: SecretBox::new(Box::new(key)),
        })
    }

    /// The `webhook-signature` value of a message.
    pub fn signature(&self, id: &str, timestamp: i64, body: &str) -> String {
        sign(self.key.expose_secret(), id, timestamp, body)
    }

    /// POSTs `body` (JSON) as message `id` sent at `timestamp`. A 2xx
    /// answer is delivered; anything else is an error whose message names
    /// the status (never the body or the URL).
    pub async fn send(&self, id: &str, timestamp: i64, body: &str) -> Result<(), SourceError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let pairs = [
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", self.signature(id, timestamp, body)),
        ];
        for (name, value) in pairs {
            let value = HeaderValue::from_str(&value).map_err(|_| {
                SourceError::InvalidRequest(format!("the {name} header cannot be sent"))
            })?;
            headers.insert(HeaderName::from_static(name), value);
        }
        let request = UpstreamRequest::new(Method::POST, self.url.clone())
            .headers(&headers)
            .body(Bytes::from(body.to_owned()));
        let answer = self
            .client
            .send(SOURCE, Idempotency::Write, &request)
            .await?;
        let status = answer.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(SourceError::upstream(
                SOURCE,
                Some(status.as_u16()),
                format!("the receiver answered {status}"),
            ))
        }
    }
}

/// `v1,` and the base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`.
fn sign(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries (their
    /// test suites sign this message with this secret).
    #[test]
    fn the_signature_is_the_specifications() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let signature = sign(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
