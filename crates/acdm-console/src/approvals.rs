//! The approvals pages: the requests waiting for a decision (their count
//! is in the navigation), one request with its preview (what would
//! change, each target with its etag or version; a write's new text; a
//! business delete's rows), and the approve and reject forms — posted
//! with the session's CSRF token, after a confirmation, decided as the
//! signed-in person under the same rules as the operator API (an owner or
//! admin of the request's project, not the user who asked).

use std::fmt::Write as _;

use acdm_core::UserId;
use acdm_core::approval::{ApprovalId, ApprovalStatus};
use acdm_store::ApprovalFilter;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use crate::html::{esc, page, query_value, table};
use crate::{
    ConsoleState, Operator, confirmation, failed, html, not_found, read_form, signed_in,
    unreadable_form,
};

/// The list's filter.
#[derive(Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
}

/// `GET /console/approvals[?status=…]`: pending ones by default.
pub(crate) async fn list(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Query(query): Query<ListQuery>,
) -> Response {
    let status = match query.status.as_deref().unwrap_or("pending") {
        "all" => None,
        raw => match raw.parse::<ApprovalStatus>() {
            Ok(status) => Some(status),
            Err(_) => return not_found(&operator, "No such status."),
        },
    };
    let filter = ApprovalFilter {
        status,
        limit: 200,
        ..ApprovalFilter::default()
    };
    let approvals = match state.inner.approvals.store().list_approvals(&filter).await {
        Ok(list) => list,
        Err(e) => return failed(&operator, &format!("Cannot read the approvals: {e}")),
    };
    let now = state.inner.store.now();
    let rows: Vec<Vec<String>> = approvals
        .iter()
        .map(|a| {
            let r = &a.request;
            vec![
                format!(
                    "<a href=\"/console/approvals/{}\">{}</a>",
                    a.approval_id,
                    esc(&a.created_at.format("%Y-%m-%d %H:%M:%S").to_string())
                ),
                esc(r.project.as_str()),
                format!("<code>{}</code>", esc(r.op.label())),
                esc(summary(&r.preview)),
                esc(r.requested_by.as_str()),
                esc(r.agent.as_str()),
                esc(a.status_at(now).as_str()),
                esc(&a.expires_at.format("%Y-%m-%d %H:%M").to_string()),
            ]
        })
        .collect();
    let mut filters = String::from("<p>Show: ");
    for (name, label) in [
        ("pending", "pending"),
        ("approved", "approved"),
        ("rejected", "rejected"),
        ("used", "used"),
        ("voided", "voided"),
        ("expired", "expired"),
        ("all", "all"),
    ] {
        let _ = write!(
            filters,
            "<a href=\"/console/approvals?status={}\">{label}</a> ",
            query_value(name)
        );
    }
    filters.push_str("</p>");
    let body = format!(
        "{filters}{}",
        table(
            &[
                "asked",
                "project",
                "operation",
                "what",
                "user",
                "agent",
                "status",
                "expires"
            ],
            &rows
        )
    );
    html(page("Approvals", signed_in(&operator), &body))
}

/// The one-line summary a preview carries.
fn summary(preview: &Value) -> &str {
    preview.get("summary").and_then(Value::as_str).unwrap_or("")
}

/// `GET /console/approvals/{id}`.
pub(crate) async fn show(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<ApprovalId>() else {
        return not_found(&operator, "No such approval request.");
    };
    let approvals = &state.inner.approvals;
    let Ok(approval) = approvals.store().approval(id).await else {
        return not_found(&operator, "No such approval request.");
    };
    let view = match approvals.view(approval).await {
        Ok(view) => view,
        Err(failure) => return failed(&operator, failure.envelope().message()),
    };
    let a = &view.approval;
    let r = &a.request;
    let mut body = format!(
        "<p class=\"banner {}\">{}</p><dl>\
         <dt>Project</dt><dd><a href=\"/console/projects/{}\">{}</a></dd>\
         <dt>Operation</dt><dd><code>{}</code></dd>\
         <dt>Asked by</dt><dd>{} through {} (thread {})</dd>\
         <dt>Asked at</dt><dd>{}</dd><dt>Expires</dt><dd>{}</dd>\
         <dt>Status</dt><dd>{}</dd>",
        if view.current_status == ApprovalStatus::Pending {
            "warn"
        } else {
            "ok"
        },
        esc(summary(&r.preview)),
        query_value(r.project.as_str()),
        esc(r.project.as_str()),
        esc(r.op.label()),
        esc(r.requested_by.as_str()),
        esc(r.agent.as_str()),
        esc(r.thread.as_str()),
        esc(&a.created_at.to_rfc3339()),
        esc(&a.expires_at.to_rfc3339()),
        esc(view.current_status.as_str()),
    );
    if let Some(by) = &a.decided_by {
        let _ = write!(
            body,
            "<dt>Decided by</dt><dd>{}{}</dd>",
            esc(by.as_str()),
            a.note
                .as_deref()
                .map(|n| format!(": {}", esc(n)))
                .unwrap_or_default()
        );
    }
    if let Some(error) = &view.notification_error {
        let _ = write!(
            body,
            "<dt>Notification</dt><dd class=\"off\">not delivered yet: {}</dd>",
            esc(error)
        );
    }
    body.push_str("</dl>");
    body.push_str(&preview_html(&r.preview));
    if view.current_status == ApprovalStatus::Pending {
        let action = format!("/console/approvals/{id}");
        let _ = write!(
            body,
            "<h2>Decide</h2>\
             <form method=\"post\" action=\"{action}/approve\">{csrf}\
             <p><label>Note (optional) <input type=\"text\" name=\"note\" maxlength=\"2000\"></label> \
             <button type=\"submit\">Approve</button></p></form>\
             <form method=\"post\" action=\"{action}/reject\">{csrf}\
             <p><label>Reason <input type=\"text\" name=\"reason\" maxlength=\"2000\" required></label> \
             <button type=\"submit\" class=\"danger\">Reject</button></p></form>",
            csrf = crate::html::csrf_field(&operator.csrf),
        );
    }
    html(page("Approval request", signed_in(&operator), &body))
}

/// What would change: each target with its etag or version, then the
/// details (a write's new text, a delete's items, the rows).
fn preview_html(preview: &Value) -> String {
    let mut out = String::from("<h2>What would change</h2>");
    let targets: Vec<Vec<String>> = preview
        .get("targets")
        .and_then(Value::as_array)
        .map(|targets| {
            targets
                .iter()
                .map(|t| {
                    vec![
                        esc(t.get("target").and_then(Value::as_str).unwrap_or("")),
                        match t.get("version") {
                            None | Some(Value::Null) => "(absent)".to_owned(),
                            Some(Value::String(v)) => format!("<code>{}</code>", esc(v)),
                            Some(other) => format!("<code>{}</code>", esc(&other.to_string())),
                        },
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    out.push_str(&table(&["target", "as the approver sees it"], &targets));
    if let Some(text) = preview.get("new_text").and_then(Value::as_str) {
        let _ = write!(out, "<h3>New content</h3><pre>{}</pre>", esc(text));
    }
    if let Some(items) = preview.get("would_delete").and_then(Value::as_array) {
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|i| {
                vec![
                    esc(i.get("rel_path").and_then(Value::as_str).unwrap_or("")),
                    esc(&i.get("size").map(Value::to_string).unwrap_or_default()),
                ]
            })
            .collect();
        let _ = write!(
            out,
            "<h3>Would be deleted</h3>{}",
            table(&["path", "bytes"], &rows)
        );
    }
    let details: serde_json::Map<String, Value> = preview
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "summary" | "targets" | "new_text" | "would_delete"
                    )
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !details.is_empty() {
        let _ = write!(
            out,
            "<h3>Details</h3><pre>{}</pre>",
            esc(&serde_json::to_string_pretty(&details).unwrap_or_default())
        );
    }
    out
}

/// The decision forms.
#[derive(Deserialize)]
pub(crate) struct DecisionForm {
    confirm: Option<String>,
    #[serde(default)]
    note: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/approvals/{id}/approve`.
pub(crate) async fn approve(
    state: State<ConsoleState>,
    operator: axum::Extension<Operator>,
    id: Path<String>,
    body: Bytes,
) -> Response {
    decide(state, operator, id, body, true).await
}

/// `POST /console/approvals/{id}/reject`.
pub(crate) async fn reject(
    state: State<ConsoleState>,
    operator: axum::Extension<Operator>,
    id: Path<String>,
    body: Bytes,
) -> Response {
    decide(state, operator, id, body, false).await
}

async fn decide(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path(id): Path<String>,
    body: Bytes,
    approve: bool,
) -> Response {
    let Ok(form) = read_form::<DecisionForm>(&body) else {
        return unreadable_form(&operator);
    };
    let Ok(id) = id.parse::<ApprovalId>() else {
        return not_found(&operator, "No such approval request.");
    };
    let approvals = &state.inner.approvals;
    let Ok(approval) = approvals.store().approval(id).await else {
        return not_found(&operator, "No such approval request.");
    };
    let text = if approve {
        form.note.trim()
    } else {
        form.reason.trim()
    };
    if !approve && text.is_empty() {
        return failed(
            &operator,
            "A rejection needs its reason: the agent tells the user why.",
        );
    }
    if text.chars().count() > 2000 {
        return failed(&operator, "Keep the text under 2000 characters.");
    }
    let verb = if approve { "approve" } else { "reject" };
    if form.confirm.as_deref() != Some("yes") {
        let what = format!(
            "{} {} in project <code>{}</code>: {}? You decide as <code>{}</code>.",
            if approve { "Approve" } else { "Reject" },
            esc(approval.request.op.label()),
            esc(approval.request.project.as_str()),
            esc(summary(&approval.request.preview)),
            esc(&operator.session.user),
        );
        let field = if approve { "note" } else { "reason" };
        return confirmation(
            &operator,
            if approve {
                "Approve a request"
            } else {
                "Reject a request"
            },
            &what,
            &format!("/console/approvals/{id}/{verb}"),
            &[(field, text)],
        );
    }
    let Ok(user) = UserId::parse(&operator.session.user) else {
        return failed(
            &operator,
            "Your session's user id is not valid; sign in again.",
        );
    };
    let note = (!text.is_empty()).then_some(text);
    match approvals.decide(id, approve, &user, note).await {
        Ok(_) => {
            tracing::warn!(approval = %id, approved = approve, user = %operator.session.user, "approval decided from the console");
            let body = format!(
                "<p class=\"banner ok\">{} as {}.</p><p><a href=\"/console/approvals/{id}\">Back to the request</a> · <a href=\"/console/approvals\">Pending requests</a></p>",
                if approve { "Approved" } else { "Rejected" },
                esc(&operator.session.user)
            );
            html(page("Decided", signed_in(&operator), &body))
        }
        Err(failure) => failed(
            &operator,
            &format!("Not decided: {}", failure.envelope().message()),
        ),
    }
}
