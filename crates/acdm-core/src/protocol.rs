//! The ToolResponse protocol: the envelope every `/agent-tools` and operator
//! API response carries, and the stable error-code table (spec §4).
//!
//! The table is the contract with the engine and with LLM prompts: a code's
//! name, numeric form and HTTP status never change once released. Add codes
//! at the end of their HTTP class.

use std::fmt;
use std::str::FromStr;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! error_codes {
    ($(
        $(#[$doc:meta])*
        $variant:ident = ($name:literal, $status:literal, $n:literal, $action:expr)
    ),* $(,)?) => {
        /// A failure code. Its string name, numeric form (HTTP status × 100 +
        /// n) and HTTP status are fixed by the table in this module.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every failure code, in table order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The stable snake_case name, as sent in `code`.
            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $name, )* }
            }

            /// The HTTP status a response with this code carries.
            pub const fn http_status(self) -> u16 {
                match self { $( ErrorCode::$variant => $status, )* }
            }

            /// The numeric form: HTTP status × 100 + n (`kill_switch_off` = 40310).
            pub const fn numeric(self) -> u32 {
                match self { $( ErrorCode::$variant => $status * 100 + $n, )* }
            }

            /// What a caller (usually an LLM) should do next, when nothing more
            /// specific is known.
            pub const fn default_suggested_action(self) -> Option<&'static str> {
                match self { $( ErrorCode::$variant => $action, )* }
            }
        }
    };
}

error_codes! {
    /// The request could not be parsed: malformed JSON, a missing or unknown
    /// field, a value out of range. `data` may list the field problems.
    ValidationError = ("validation_error", 422, 1,
        Some("Fix the fields named in the message and call again.")),
    /// A document (office file, PDF, HTML) could not be turned into text:
    /// damaged, encrypted, without a text layer, or past the extraction's
    /// bounds (size, time, memory). The message says which.
    DocumentUnreadable = ("document_unreadable", 422, 2,
        Some("Tell the user this document cannot be read as text (the message says why); do not retry it. Its bytes stay readable as they are (BFF nc/read with \"as\": \"raw\").")),
    /// A path broke a path rule (absolute, `..`, encoded traversal, …).
    InvalidPath = ("invalid_path", 400, 1,
        Some("Use a path relative to the mount root, with plain names and no `..`.")),
    /// One of the identity headers is missing or empty.
    MissingIdentityHeaders = ("missing_identity_headers", 401, 1,
        Some("The caller must send X-ACDM-User-Id, X-ACDM-Agent-Name and X-ACDM-Thread-Id; this is a harness configuration problem, not something to retry.")),
    /// The operator API was called without its bearer token, or a wrong one.
    Unauthorized = ("unauthorized", 401, 2,
        Some("Send `Authorization: Bearer <ACDM_ADMIN_TOKEN>`.")),
    /// The caller may not do this (a read-only mount, a role too low, a
    /// browser `Origin`).
    PermissionDenied = ("permission_denied", 403, 1, None),
    /// The agent is not a provisioned project manager, so no project scope
    /// can be resolved.
    ScopeViolation = ("scope_violation", 403, 2,
        Some("This agent has no project. Ask an operator to mount it as a project's manager; do not retry with another project.")),
    /// The write needs a person's approval first: nothing ran. `data`
    /// holds the approval request (`approval_id`, `expires_at`, the
    /// preview of what would change).
    ApprovalRequired = ("approval_required", 403, 3,
        Some("Tell the user this change needs approval (show them the preview); once a project owner or admin has approved it, call again with the same arguments plus approval_id. Do not change the arguments.")),
    /// The approval named by `approval_id` has not been decided yet.
    ApprovalPending = ("approval_pending", 403, 4,
        Some("Wait until a project owner or admin decides; tell the user it is still waiting. Do not create a new request.")),
    /// The approval was rejected; the message holds the reason.
    ApprovalRejected = ("approval_rejected", 403, 5,
        Some("Tell the user it was rejected and why; do not retry this change without a new decision.")),
    /// The approval was given for another call (other arguments, another
    /// operation, user or agent).
    ApprovalMismatch = ("approval_mismatch", 403, 6,
        Some("Call with exactly the arguments that were approved, or call without approval_id to ask for a new approval.")),
    /// The approval expired before it was decided or used.
    ApprovalExpired = ("approval_expired", 410, 1,
        Some("Call again without approval_id to ask for a new approval.")),
    /// The approval has been used: each allows one write.
    ApprovalUsed = ("approval_used", 409, 2,
        Some("The approved change already ran; read the current state. A further change needs a new approval.")),
    /// Agent file writes are switched off by the operator.
    KillSwitchOff = ("kill_switch_off", 403, 10,
        Some("File writes by agents are switched off by an operator. Tell the user; do not retry.")),
    /// Nothing there, or nothing the caller may see.
    NotFound = ("not_found", 404, 1,
        Some("Check the name or path; list the folder or search to find what exists.")),
    /// The HTTP method is not allowed on this endpoint.
    MethodNotAllowed = ("method_not_allowed", 405, 1, None),
    /// A precondition failed: the target exists, the etag changed, an
    /// illegal state transition.
    Conflict = ("conflict", 409, 1,
        Some("Re-read the current state, then decide whether to retry with the new etag or another target.")),
    /// The request body or content is too large.
    PayloadTooLarge = ("payload_too_large", 413, 1,
        Some("Send less data in one call.")),
    /// Too many calls; `message` says when to retry.
    RateLimited = ("rate_limited", 429, 1,
        Some("Wait before calling again.")),
    /// A bug or an unexpected state on our side; details are in the logs.
    InternalError = ("internal_error", 500, 1,
        Some("Retry once; if it fails again, report the request id to an operator.")),
    /// An upstream (GitLab, Nextcloud) answered with an error or garbage.
    UpstreamError = ("upstream_error", 502, 1,
        Some("Retry later; if it persists, tell the user the document store is failing.")),
    /// The source needed for this call is not configured on this server.
    SourceNotConfigured = ("source_not_configured", 503, 1,
        Some("This source is not available on this deployment; do not retry.")),
    /// A dependency of the backend itself (its database) is unavailable, or
    /// the server is shutting down.
    ServiceUnavailable = ("service_unavailable", 503, 2,
        Some("Retry in a few seconds.")),
    /// An upstream did not answer in time.
    UpstreamTimeout = ("upstream_timeout", 504, 1,
        Some("Retry once; ask for a smaller window or a narrower query if it happens again.")),
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code string that names no known failure code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown response code `{0}`")]
pub struct UnknownCode(pub String);

impl FromStr for ErrorCode {
    type Err = UnknownCode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

/// The `code` of an envelope: `ok` or a failure code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseCode {
    /// Success; the only code with `success: true`.
    Ok,
    /// A failure.
    Error(ErrorCode),
}

impl ResponseCode {
    /// The stable name (`ok`, `not_found`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            ResponseCode::Ok => "ok",
            ResponseCode::Error(code) => code.as_str(),
        }
    }

    /// The HTTP status for this code.
    pub const fn http_status(self) -> u16 {
        match self {
            ResponseCode::Ok => 200,
            ResponseCode::Error(code) => code.http_status(),
        }
    }

    /// The numeric form (`ok` is 20000).
    pub const fn numeric(self) -> u32 {
        match self {
            ResponseCode::Ok => 20000,
            ResponseCode::Error(code) => code.numeric(),
        }
    }
}

impl FromStr for ResponseCode {
    type Err = UnknownCode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "ok" {
            Ok(ResponseCode::Ok)
        } else {
            s.parse().map(ResponseCode::Error)
        }
    }
}

impl fmt::Display for ResponseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The envelope of every `/agent-tools` and operator API response:
///
/// ```json
/// {"success": true, "code": "ok", "message": "…", "data": {…}, "suggested_action": null}
/// ```
///
/// `success` is derived from `code`, so an envelope cannot say both
/// `success: true` and `code: "not_found"`; deserialising such a body fails.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResponse<T = serde_json::Value> {
    code: ResponseCode,
    message: String,
    data: Option<T>,
    suggested_action: Option<String>,
}

impl<T> ToolResponse<T> {
    /// A success carrying `data`.
    pub fn ok(data: T, message: impl Into<String>) -> Self {
        Self {
            code: ResponseCode::Ok,
            message: message.into(),
            data: Some(data),
            suggested_action: None,
        }
    }

    /// A failure with the code's default suggested action, if it has one.
    pub fn failure(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: ResponseCode::Error(code),
            message: message.into(),
            data: None,
            suggested_action: code.default_suggested_action().map(str::to_owned),
        }
    }

    /// Replaces the suggested action.
    #[must_use]
    pub fn with_suggested_action(mut self, action: impl Into<String>) -> Self {
        self.suggested_action = Some(action.into());
        self
    }

    /// Removes the suggested action.
    #[must_use]
    pub fn without_suggested_action(mut self) -> Self {
        self.suggested_action = None;
        self
    }

    /// Attaches details to a failure (for example the field problems of a
    /// `validation_error`). On a success it replaces the data.
    #[must_use]
    pub fn with_data(mut self, data: T) -> Self {
        self.data = Some(data);
        self
    }

    /// True when `code` is `ok`.
    pub fn is_success(&self) -> bool {
        self.code == ResponseCode::Ok
    }

    /// The response code.
    pub fn code(&self) -> ResponseCode {
        self.code
    }

    /// The failure code, or `None` for a success.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self.code {
            ResponseCode::Ok => None,
            ResponseCode::Error(code) => Some(code),
        }
    }

    /// The HTTP status this response is sent with.
    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }

    /// The human- and LLM-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The data, if any.
    pub fn data(&self) -> Option<&T> {
        self.data.as_ref()
    }

    /// Takes the data out.
    pub fn into_data(self) -> Option<T> {
        self.data
    }

    /// What the caller should do next, if anything.
    pub fn suggested_action(&self) -> Option<&str> {
        self.suggested_action.as_deref()
    }

    /// Converts the data, keeping everything else.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> ToolResponse<U> {
        ToolResponse {
            code: self.code,
            message: self.message,
            data: self.data.map(f),
            suggested_action: self.suggested_action,
        }
    }
}

impl<T> ToolResponse<Option<T>> {
    /// Turns data that may be absent inside into data that may be absent.
    pub fn flatten(self) -> ToolResponse<T> {
        ToolResponse {
            code: self.code,
            message: self.message,
            data: self.data.flatten(),
            suggested_action: self.suggested_action,
        }
    }
}

/// The wire form, in field order.
#[derive(Serialize)]
struct WireOut<'a, T> {
    success: bool,
    code: &'static str,
    message: &'a str,
    data: &'a Option<T>,
    suggested_action: &'a Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireIn<T> {
    success: bool,
    code: String,
    message: String,
    #[serde(default = "Option::default")]
    data: Option<T>,
    #[serde(default)]
    suggested_action: Option<String>,
}

impl<T: Serialize> Serialize for ToolResponse<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireOut {
            success: self.is_success(),
            code: self.code.as_str(),
            message: &self.message,
            data: &self.data,
            suggested_action: &self.suggested_action,
        }
        .serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ToolResponse<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireIn::<T>::deserialize(deserializer)?;
        let code: ResponseCode = wire.code.parse().map_err(D::Error::custom)?;
        if wire.success != (code == ResponseCode::Ok) {
            return Err(D::Error::custom(format!(
                "inconsistent envelope: success is {} but code is `{code}`",
                wire.success
            )));
        }
        Ok(Self {
            code,
            message: wire.message,
            data: wire.data,
            suggested_action: wire.suggested_action,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;

    #[test]
    fn the_code_table_matches_the_spec() {
        let check = |code: ErrorCode, name: &str, status: u16, numeric: u32| {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.http_status(), status, "{name}");
            assert_eq!(code.numeric(), numeric, "{name}");
            assert_eq!(name.parse::<ErrorCode>(), Ok(code));
        };
        use ErrorCode::*;
        check(ValidationError, "validation_error", 422, 42201);
        check(DocumentUnreadable, "document_unreadable", 422, 42202);
        check(InvalidPath, "invalid_path", 400, 40001);
        check(
            MissingIdentityHeaders,
            "missing_identity_headers",
            401,
            40101,
        );
        check(Unauthorized, "unauthorized", 401, 40102);
        check(PermissionDenied, "permission_denied", 403, 40301);
        check(ScopeViolation, "scope_violation", 403, 40302);
        check(KillSwitchOff, "kill_switch_off", 403, 40310);
        check(ApprovalRequired, "approval_required", 403, 40303);
        check(ApprovalPending, "approval_pending", 403, 40304);
        check(ApprovalRejected, "approval_rejected", 403, 40305);
        check(ApprovalMismatch, "approval_mismatch", 403, 40306);
        check(ApprovalExpired, "approval_expired", 410, 41001);
        check(ApprovalUsed, "approval_used", 409, 40902);
        check(NotFound, "not_found", 404, 40401);
        check(MethodNotAllowed, "method_not_allowed", 405, 40501);
        check(Conflict, "conflict", 409, 40901);
        check(PayloadTooLarge, "payload_too_large", 413, 41301);
        check(RateLimited, "rate_limited", 429, 42901);
        check(InternalError, "internal_error", 500, 50001);
        check(UpstreamError, "upstream_error", 502, 50201);
        check(SourceNotConfigured, "source_not_configured", 503, 50301);
        check(ServiceUnavailable, "service_unavailable", 503, 50302);
        check(UpstreamTimeout, "upstream_timeout", 504, 50401);
        assert_eq!(ErrorCode::ALL.len(), 24);
        assert_eq!(ResponseCode::Ok.numeric(), 20000);
    }

    #[test]
    fn codes_names_and_numbers_are_unique_and_snake_case() {
        let names: HashSet<_> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        let numbers: HashSet<_> = ErrorCode::ALL.iter().map(|c| c.numeric()).collect();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        assert_eq!(numbers.len(), ErrorCode::ALL.len());
        assert!(!names.contains("ok"));
        for code in ErrorCode::ALL {
            let name = code.as_str();
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert_eq!(
                code.numeric() / 100,
                u32::from(code.http_status()),
                "{name}"
            );
        }
    }

    #[test]
    fn a_success_serialises_exactly_as_the_spec_shows() {
        let r = ToolResponse::ok(json!({"mounts": []}), "1 mount");
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"success":true,"code":"ok","message":"1 mount","data":{"mounts":[]},"suggested_action":null}"#
        );
    }

    #[test]
    fn a_failure_carries_its_code_null_data_and_a_default_action() {
        let r = ToolResponse::<()>::failure(ErrorCode::KillSwitchOff, "writes are off");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["success"], json!(false));
        assert_eq!(v["code"], json!("kill_switch_off"));
        assert_eq!(v["message"], json!("writes are off"));
        assert_eq!(v["data"], json!(null));
        assert!(
            v["suggested_action"]
                .as_str()
                .unwrap()
                .contains("switched off")
        );
        assert_eq!(r.http_status(), 403);
        let plain =
            ToolResponse::<()>::failure(ErrorCode::NotFound, "x").without_suggested_action();
        assert_eq!(
            serde_json::to_value(&plain).unwrap()["suggested_action"],
            json!(null)
        );
    }

    #[test]
    fn round_trips_and_refuses_inconsistent_envelopes() {
        let r = ToolResponse::<serde_json::Value>::failure(ErrorCode::Conflict, "etag changed")
            .with_data(json!({"etag": "\"abc\""}));
        let back: ToolResponse = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);

        let bad = |body: serde_json::Value| {
            serde_json::from_value::<ToolResponse>(body)
                .unwrap_err()
                .to_string()
        };
        let e = bad(
            json!({"success": true, "code": "not_found", "message": "", "data": null, "suggested_action": null}),
        );
        assert!(e.contains("inconsistent envelope"), "{e}");
        let e = bad(
            json!({"success": false, "code": "ok", "message": "", "data": null, "suggested_action": null}),
        );
        assert!(e.contains("inconsistent envelope"), "{e}");
        let e = bad(
            json!({"success": false, "code": "teapot", "message": "", "data": null, "suggested_action": null}),
        );
        assert!(e.contains("unknown response code"), "{e}");
        let e = bad(json!({"error": "service auth failed"}));
        assert!(e.contains("unknown field"), "{e}");
    }
}
