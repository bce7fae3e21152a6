//! `/api-docs`: a readable page of the OpenAPI document, rendered by the
//! server from the same document `/openapi.json` serves — every
//! operation with its security, parameters, request body and responses.
//! No script, no asset from another host; open like `/openapi.json`.

use std::fmt::Write as _;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::html::{esc, page};

fn schema_text(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).unwrap_or_default()
}

/// The value at `keys` (`Null` when absent).
fn at<'a>(value: &'a Value, keys: &[&str]) -> &'a Value {
    keys.iter()
        .try_fold(value, |v, k| v.get(k))
        .unwrap_or(&Value::Null)
}

fn text<'a>(value: &'a Value, keys: &[&str]) -> &'a str {
    at(value, keys).as_str().unwrap_or_default()
}

fn anchor(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The page.
pub fn render(doc: &Value) -> String {
    let mut index = String::from("<ul>");
    let mut body = String::new();
    let empty = serde_json::Map::new();
    let paths = at(doc, &["paths"]).as_object().unwrap_or(&empty);
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap_or(&empty) {
            let id = text(op, &["operationId"]);
            let _ = write!(
                index,
                "<li><a href=\"#{}\"><code>{} {}</code></a> — {}</li>",
                anchor(id),
                esc(&method.to_uppercase()),
                esc(path),
                esc(text(op, &["summary"]))
            );
            let security = at(op, &["security"])
                .as_array()
                .and_then(|s| s.first())
                .and_then(Value::as_object)
                .map(|s| s.keys().cloned().collect::<Vec<_>>().join(" + "))
                .unwrap_or_default();
            let _ = write!(
                body,
                "<h2 id=\"{}\"><code>{} {}</code></h2><p>{}</p><p>{}</p><p>Security: {}</p>",
                anchor(id),
                esc(&method.to_uppercase()),
                esc(path),
                esc(text(op, &["summary"])),
                esc(text(op, &["description"])),
                esc(&security)
            );
            if let Some(parameters) = at(op, &["parameters"]).as_array() {
                body.push_str("<h3>Parameters</h3><ul>");
                for p in parameters {
                    let _ = write!(
                        body,
                        "<li><code>{}</code> ({}): <code>{}</code></li>",
                        esc(text(p, &["name"])),
                        esc(text(p, &["in"])),
                        esc(&at(p, &["schema"]).to_string())
                    );
                }
                body.push_str("</ul>");
            }
            let request = at(
                op,
                &["requestBody", "content", "application/json", "schema"],
            );
            if !request.is_null() {
                let _ = write!(
                    body,
                    "<h3>Request body</h3><pre>{}</pre>",
                    esc(&schema_text(request))
                );
            }
            body.push_str("<h3>Responses</h3><ul>");
            for (status, response) in at(op, &["responses"]).as_object().unwrap_or(&empty) {
                let _ = write!(
                    body,
                    "<li><strong>{}</strong> {}</li>",
                    esc(status),
                    esc(text(response, &["description"]))
                );
            }
            body.push_str("</ul>");
        }
    }
    index.push_str("</ul>");
    let mut schemas = String::from("<h2 id=\"schemas\">Schemas</h2>");
    for (name, schema) in at(doc, &["components", "schemas"])
        .as_object()
        .unwrap_or(&empty)
    {
        let _ = write!(
            schemas,
            "<h3 id=\"schema-{}\">{}</h3><pre>{}</pre>",
            anchor(name),
            esc(name),
            esc(&schema_text(schema))
        );
    }
    page(
        "API: Agent Tools BFF and operator API",
        None,
        &format!(
            "<p>{}</p><p>The machine-readable document: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI 3.1).</p>{index}{body}{schemas}",
            esc(text(doc, &["info", "description"]))
        ),
    )
}

/// `GET /api-docs`.
pub async fn handler() -> Response {
    let mut response = (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        render(acdm_bff::openapi::document()),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
