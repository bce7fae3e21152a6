//! Strict request parsing: bodies and path parameters that fail to parse
//! answer with a `validation_error` envelope (HTTP 422) naming the field,
//! never a framework default page. A body labelled as anything but UTF-8
//! JSON is a `validation_error` too, sent as HTTP 415.

use acdm_core::ErrorCode;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::envelope::Failure;

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldProblem {
    /// The field (`slug`, `mounts[0].root`); `.` for the body as a whole.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The `data` of a `validation_error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldProblems {
    /// The problems found (parsing stops at the first).
    pub errors: Vec<FieldProblem>,
}

/// A `validation_error` for one field.
pub fn invalid_field(field: &str, problem: impl Into<String>) -> Failure {
    let problem = problem.into();
    Failure::new(ErrorCode::ValidationError, format!("{field}: {problem}")).with_data(
        FieldProblems {
            errors: vec![FieldProblem {
                field: field.to_owned(),
                problem,
            }],
        },
    )
}

/// A JSON body parsed strictly: `Content-Type`, when given, must be
/// `application/json` with no charset or `charset=utf-8` (anything else is
/// HTTP 415, since reading UTF-16 or form data as UTF-8 JSON would be a
/// guess); the body must be one JSON value of the target type, and the
/// target types refuse unknown fields (`#[serde(deny_unknown_fields)]`), so
/// a stray `project_id` is an error rather than silently ignored. Without a
/// `Content-Type` the body is read as JSON.
#[derive(Debug, Clone)]
pub struct StrictJson<T>(pub T);

impl<S, T> FromRequest<S> for StrictJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Failure;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        if let Some(content_type) = req.headers().get(header::CONTENT_TYPE)
            && !is_utf8_json(content_type)
        {
            let problem = format!(
                "send the body as UTF-8 JSON with `Content-Type: application/json` \
                 (charset utf-8 or none), not {}",
                describe_header(content_type)
            );
            return Err(invalid_field("Content-Type", problem)
                .with_http_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        }
        let bytes = match axum::body::to_bytes(req.into_body(), usize::MAX).await {
            Ok(bytes) => bytes,
            Err(error) if is_length_limit(&error) => {
                return Err(Failure::new(
                    ErrorCode::PayloadTooLarge,
                    "the request body is larger than this server accepts",
                ));
            }
            Err(_) => {
                return Err(invalid_field(".", "the request body could not be read"));
            }
        };
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => {
                return Err(invalid_field(
                    ".",
                    "the body is empty; send a JSON object such as {}",
                ));
            }
            // serde would also read a struct from an array; only objects have names.
            Some(b) if *b != b'{' => {
                return Err(invalid_field(
                    ".",
                    "the body must be a JSON object, such as {}",
                ));
            }
            Some(_) => {}
        }
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = match serde_path_to_error::deserialize(&mut deserializer) {
            Ok(value) => value,
            // JSON has one number type: `80.0` is the integer 80 (as JSON
            // Schema says), which serde refuses where it expects one.
            Err(error) if error.inner().to_string().contains("floating point") => {
                let mut json: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| invalid_field(".", strip_position(&e.to_string())))?;
                integral_numbers(&mut json);
                return serde_path_to_error::deserialize(json)
                    .map(Self)
                    .map_err(|error| {
                        let (field, problem) = describe(&error);
                        invalid_field(&field, problem)
                    });
            }
            Err(error) => {
                let (field, problem) = describe(&error);
                return Err(invalid_field(&field, problem));
            }
        };
        deserializer.end().map_err(|error| {
            let message = strip_position(&error.to_string());
            invalid_field(".", format!("the body is not valid JSON ({message})"))
        })?;
        Ok(Self(value))
    }
}

/// A write's body, parsed as strictly as [`StrictJson`], with the
/// `approval_id` it may carry taken out first: every write operation
/// accepts one (the approval of exactly this call, once a person gave it).
pub(crate) async fn write_body<T: DeserializeOwned>(
    req: Request,
) -> Result<(T, Option<acdm_core::approval::ApprovalId>), Failure> {
    let StrictJson(mut fields) =
        StrictJson::<serde_json::Map<String, serde_json::Value>>::from_request(req, &()).await?;
    let approval = match fields.remove("approval_id") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(id)) => Some(id.parse().map_err(|_| {
            invalid_field(
                "approval_id",
                "must be the approval_id an approval_required answer gave (a UUID)",
            )
        })?),
        Some(_) => return Err(invalid_field("approval_id", "must be a string")),
    };
    let mut value = serde_json::Value::Object(fields);
    integral_numbers(&mut value);
    let body = serde_path_to_error::deserialize(value).map_err(|error| {
        let (field, problem) = describe(&error);
        invalid_field(&field, problem)
    })?;
    Ok((body, approval))
}

/// Turns every number with no fractional part (`80.0`) into an integer,
/// where it fits one.
fn integral_numbers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(number) => {
            if let Some(float) = number
                .as_f64()
                .filter(|f| f.fract() == 0.0 && number.is_f64())
            {
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "only integral values inside the target range are converted"
                )]
                let integer = if float >= 0.0 && float <= u64::MAX as f64 {
                    Some(serde_json::Number::from(float as u64))
                } else if float < 0.0 && float >= i64::MIN as f64 {
                    Some(serde_json::Number::from(float as i64))
                } else {
                    None
                };
                if let Some(integer) = integer {
                    *number = integer;
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        serde_json::Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// True for `application/json` with no parameter but an optional
/// `charset=utf-8` (names and values in any case, the value optionally
/// quoted); other parameters are ignored.
fn is_utf8_json(content_type: &HeaderValue) -> bool {
    let Ok(text) = content_type.to_str() else {
        return false;
    };
    let mut parts = text.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return false;
    }
    parts.all(|parameter| {
        let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
        if !name.trim().eq_ignore_ascii_case("charset") {
            return true;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        value.eq_ignore_ascii_case("utf-8")
    })
}

/// A caller's header value for a message: quoted when it is short visible
/// ASCII, otherwise only described.
fn describe_header(value: &HeaderValue) -> String {
    match value.to_str() {
        Ok("") => "an empty Content-Type".to_owned(),
        Ok(text) if text.len() <= 100 => format!("`{text}`"),
        _ => "this Content-Type".to_owned(),
    }
}

/// The field and the problem, from a serde error.
fn describe(error: &serde_path_to_error::Error<serde_json::Error>) -> (String, String) {
    let inner = error.inner();
    let message = strip_position(&inner.to_string());
    let path = error.path().to_string();
    // The path of a missing field is its parent; of an unknown field, the
    // field itself.
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let field = match missing {
        Some(name) if path == "." => name.to_owned(),
        Some(name) => format!("{path}.{name}"),
        None => path,
    };
    if inner.is_syntax() || inner.is_eof() {
        return (
            ".".to_owned(),
            format!("the body is not valid JSON ({message})"),
        );
    }
    (field, message)
}

/// serde_json appends ` at line L column C`; the field name says more.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) if message[at..].contains(" column ") => message[..at].to_owned(),
        _ => message.to_owned(),
    }
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// Parses a path parameter with a validating constructor, or answers with
/// a `validation_error` naming it.
pub fn path_param<T, E: std::fmt::Display>(
    name: &str,
    raw: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, Failure> {
    parse(raw).map_err(|e| invalid_field(name, e.to_string()))
}

/// The operation a route's one parameter (`{op}`) names, as the router
/// decoded it, with the request; or axum's rejection when it cannot be
/// read (not UTF-8 once decoded). Read by the handler after the agent
/// pipeline has admitted the call, as an extractor before it was.
pub(crate) async fn route_op(req: Request) -> Result<(String, Request), Response> {
    let (mut parts, body) = req.into_parts();
    match Path::<String>::from_request_parts(&mut parts, &()).await {
        Ok(Path(op)) => Ok((op, Request::from_parts(parts, body))),
        Err(rejection) => Err(rejection.into_response()),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "fields are only parsed")]
    struct Body1 {
        slug: acdm_core::ProjectSlug,
        #[serde(default)]
        writable: Option<bool>,
    }

    async fn parse(
        content_type: Option<&str>,
        body: &str,
    ) -> Result<Body1, (StatusCode, serde_json::Value)> {
        let mut builder = Request::builder().method("POST").uri("/x");
        if let Some(ct) = content_type {
            builder = builder.header(header::CONTENT_TYPE, ct);
        }
        let req = builder.body(Body::from(body.to_owned())).unwrap();
        match StrictJson::<Body1>::from_request(req, &()).await {
            Ok(StrictJson(v)) => Ok(v),
            Err(failure) => {
                let response = failure.into_response();
                let status = response.status();
                let bytes = to_bytes(response.into_body(), 1 << 16).await.unwrap();
                Err((status, serde_json::from_slice(&bytes).unwrap()))
            }
        }
    }

    async fn check(content_type: Option<&str>, body: &str, expected: Result<(), (&str, &str)>) {
        let got = parse(content_type, body).await;
        match expected {
            Ok(()) => assert!(got.is_ok(), "{body}: {got:?}"),
            Err((field, problem_start)) => {
                let (status, v) = got.unwrap_err();
                assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
                assert_eq!(v["code"], "validation_error", "{body}");
                let e = &v["data"]["errors"][0];
                assert_eq!(e["field"], field, "{body}: {v}");
                let problem = e["problem"].as_str().unwrap();
                assert!(problem.starts_with(problem_start), "{body}: {problem}");
                assert!(!problem.contains(" at line "), "{problem}");
            }
        }
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Paging {
        limit: u32,
        #[serde(default)]
        deep: Option<Vec<i64>>,
    }

    /// Found by schemathesis: JSON has one number type and JSON Schema
    /// counts `80.0` as an integer; serde refused it where it expects one.
    #[tokio::test]
    async fn a_number_without_a_fraction_is_the_integer_it_names() {
        let parse = |body: &'static str| async move {
            let req = Request::builder()
                .method("POST")
                .uri("/x")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .unwrap();
            StrictJson::<Paging>::from_request(req, &())
                .await
                .map(|StrictJson(v)| v)
        };
        let paging = parse(r#"{"limit": 80.0, "deep": [-3.0, 4]}"#)
            .await
            .unwrap();
        assert_eq!((paging.limit, paging.deep), (80, Some(vec![-3, 4])));
        for refused in [
            r#"{"limit": 80.5}"#,
            r#"{"limit": -1.0}"#,
            r#"{"limit": 1e12}"#,
            r#"{"limit": 80.0, "other": 1}"#,
        ] {
            let failure = parse(refused).await.unwrap_err();
            assert_eq!(
                failure.envelope().error_code(),
                Some(ErrorCode::ValidationError),
                "{refused}"
            );
        }
    }

    #[tokio::test]
    async fn bodies_are_parsed_strictly_and_problems_name_the_field() {
        let json = Some("application/json");
        check(json, r#"{"slug":"alpha"}"#, Ok(())).await;
        check(
            Some("application/json; charset=utf-8"),
            r#"{"slug":"a"}"#,
            Ok(()),
        )
        .await;
        check(None, r#"{"slug":"alpha"}"#, Ok(())).await;
        check(
            json,
            r#"{"slug":"alpha","project_id":"beta"}"#,
            Err(("project_id", "unknown field `project_id`")),
        )
        .await;
        check(json, r#"{}"#, Err(("slug", "missing field `slug`"))).await;
        check(json, r#"{"slug":"Alpha"}"#, Err(("slug", "contains 'A'"))).await;
        check(
            json,
            r#"{"slug":"alpha","writable":"yes"}"#,
            Err(("writable", "invalid type")),
        )
        .await;
        check(
            json,
            r#"{"slug":"alpha""#,
            Err((".", "the body is not valid JSON")),
        )
        .await;
        check(
            json,
            r#"{"slug":"alpha"} {"slug":"b"}"#,
            Err((".", "the body is not valid JSON")),
        )
        .await;
        check(json, "", Err((".", "the body is empty"))).await;
        check(json, "[1]", Err((".", "the body must be a JSON object"))).await;
        check(
            json,
            r#"["alpha"]"#,
            Err((".", "the body must be a JSON object")),
        )
        .await;
        check(json, "null", Err((".", "the body must be a JSON object"))).await;
    }

    #[tokio::test]
    async fn only_utf8_json_bodies_are_read_and_others_are_unsupported_media_types() {
        let body = r#"{"slug":"alpha"}"#;
        for accepted in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "application/json; charset=\"utf-8\"",
            "application/json ; Charset=Utf-8",
        ] {
            let got = parse(Some(accepted), body).await;
            assert!(got.is_ok(), "{accepted}: {got:?}");
        }
        for refused in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/x-www-form-urlencoded",
            "application/json; charset=utf-16",
            "application/json; charset=UTF-16LE",
            "application/json; charset=iso-8859-1",
            "application/json; charset=",
            "application/jsonx",
            "application/json-patch+json",
            "multipart/form-data; boundary=x",
            "",
        ] {
            let (status, v) = parse(Some(refused), body).await.unwrap_err();
            assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{refused}");
            assert_eq!(v["code"], "validation_error", "{refused}");
            assert_eq!(v["success"], false, "{refused}");
            let e = &v["data"]["errors"][0];
            assert_eq!(e["field"], "Content-Type", "{refused}: {v}");
            let problem = e["problem"].as_str().unwrap();
            assert!(
                problem.contains("application/json") && problem.contains("UTF-8"),
                "{refused}: {problem}"
            );
        }
    }

    #[tokio::test]
    async fn an_over_limit_body_is_payload_too_large() {
        let limited = http_body_util::Limited::new(Body::from(vec![b' '; 100]), 10);
        let req = Request::builder()
            .method("POST")
            .uri("/x")
            .body(Body::new(limited))
            .unwrap();
        let response = StrictJson::<Body1>::from_request(req, &())
            .await
            .unwrap_err()
            .into_response();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
