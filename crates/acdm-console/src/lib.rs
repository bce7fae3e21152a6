//! acdm-console: the operator console at `/console` — server-rendered
//! HTML for the people who run the service (spec §9).
//!
//! - [`session`]: signed session cookies and CSRF tokens, no server-side
//!   state (any replica serves any request);
//! - [`html`]: escaping and the page layout;
//! - [`diff`]: the line diff an event's page shows;
//! - this module: the routes, the guard in front of them (security
//!   headers on every answer; a session for every page but sign-in; a
//!   same-origin request and the session's CSRF token for every form
//!   post) and the pages: projects (members, mounts, agents, business
//!   view), the audit trail (filters, each event with its diff, revert
//!   with a confirmation, reverts linked both ways), the kill switch and
//!   the scope-cache reset;
//! - [`approvals`]: approval requests, each with its preview, approved or
//!   rejected after a confirmation.
//!
//! Every read works without JavaScript (there is none); every change is a
//! form posted after a confirmation page.
//!
//! **Architecture invariant:** HTML only — no JSON API here; writes go
//! through the journal (reverts), the store (provisioning, the kill
//! switch) and the resolver, as the operator API's do.

pub mod api_docs;
mod approvals;
pub mod diff;
pub mod html;
pub mod session;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acdm_bff::switch::KillSwitch;
use acdm_core::events::{Actor, EventId, EventOp, EventStatus, Step, StorageEvent};
use acdm_core::{AbsPath, AgentName, ProjectSlug, ScopeResolver, SharedToken, ThreadId, UserId};
use acdm_journal::Journal;
use acdm_sources::ReadRange;
use acdm_store::{EventFilter, NC_WRITES_SWITCH, Store};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, NaiveDate, Utc};
use cookie::{Cookie, SameSite};
use serde::Deserialize;

use crate::html::{csrf_field, esc, page, query_value, table};
use crate::session::{COOKIE, LIFETIME_SECONDS, Session, SessionKey};

/// The strict policy of every console answer: only this origin's
/// stylesheet, no script at all, forms only to this origin, never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console's stylesheet, served by the binary.
const CSS: &str = include_str!("../assets/console.css");

/// The most bytes of a file an event page reads for its diff.
const DIFF_BYTES: u64 = 256 * 1024;

/// How long an event page's diffs may search for the shortest diff, all
/// together; past it, each shows what is left as removed, then added.
const DIFF_TIME: Duration = Duration::from_millis(250);

/// What the console needs.
#[derive(Clone)]
pub struct ConsoleState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    journal: Journal,
    switch: KillSwitch,
    resolver: Arc<ScopeResolver>,
    token: SharedToken,
    key: SessionKey,
    secure_cookie: bool,
    approvals: acdm_bff::approval::Approvals,
}

impl ConsoleState {
    /// The console over `journal`'s store, for the deployment whose admin
    /// token is `admin_token` (sign-in checks it; sessions are signed
    /// with a key derived from it). `secure_cookie`: the console is
    /// reached over HTTPS (a TLS proxy in front), so the cookie is
    /// `Secure`.
    pub fn new(
        journal: Journal,
        switch: KillSwitch,
        resolver: Arc<ScopeResolver>,
        admin_token: &str,
        secure_cookie: bool,
        approvals: acdm_bff::approval::Approvals,
    ) -> Option<Self> {
        let token = SharedToken::of(admin_token)?;
        Some(Self {
            inner: Arc::new(Inner {
                store: journal.store().clone(),
                journal,
                switch,
                resolver,
                token,
                key: SessionKey::derive(admin_token.as_bytes())?,
                secure_cookie,
                approvals,
            }),
        })
    }
}

/// The `/console` routes behind their guard.
pub fn router(state: ConsoleState) -> Router {
    Router::new()
        .route("/console", get(home))
        .route("/console/", get(home))
        .route("/console/assets/console.css", get(stylesheet))
        .route("/console/sign-in", get(sign_in_page).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/projects", get(projects))
        .route("/console/projects/{slug}", get(project))
        .route("/console/projects/{slug}/agents", post(mount_agent))
        .route("/console/agents/{agent}/unmount", post(unmount_agent))
        .route("/console/approvals", get(approvals::list))
        .route("/console/approvals/{id}", get(approvals::show))
        .route("/console/approvals/{id}/approve", post(approvals::approve))
        .route("/console/approvals/{id}/reject", post(approvals::reject))
        .route("/console/events", get(events))
        .route("/console/projects/{slug}/events/{id}", get(event))
        .route("/console/projects/{slug}/events/{id}/revert", post(revert))
        .route(
            "/console/kill-switch",
            get(kill_switch).post(set_kill_switch),
        )
        .route("/console/scope-cache/reset", post(reset_scope_cache))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// The signed-in operator, a request extension set by [`guard`].
#[derive(Clone)]
struct Operator {
    session: Session,
    csrf: String,
    /// Approval requests waiting for a decision (the navigation's count).
    pending_approvals: Option<u64>,
}

fn now() -> i64 {
    Utc::now().timestamp()
}

/// The session cookie's value, from the `Cookie` headers (parsed by the
/// `cookie` crate: pairs split at `;`, spaces around names and values
/// ignored, a pair that is not one skipped); the first one named
/// [`COOKIE`].
fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == COOKIE)
        .map(|cookie| cookie.value().to_owned())
}

/// The `Set-Cookie` value of the session cookie carrying `value` for
/// `max_age` seconds: `HttpOnly`, `SameSite=Strict`, `Path=/console`, and
/// `Secure` when the console is served over TLS.
fn session_cookie(secure: bool, value: String, max_age: i64) -> Option<HeaderValue> {
    let cookie = Cookie::build((COOKIE, value))
        .path("/console")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age))
        .build();
    HeaderValue::from_str(&cookie.to_string()).ok()
}

/// Whether a form post comes from a console page. A browser says where
/// a request comes from: `Sec-Fetch-Site` (all current browsers) must be
/// `same-origin`; without it, an `Origin` must name this host. A client
/// that sends neither is not a browser acting for another site (and still
/// needs the session's CSRF token).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site == "same-origin";
    }
    match (headers.get(header::ORIGIN), headers.get(header::HOST)) {
        (None, _) => true,
        (Some(origin), Some(host)) => {
            let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else {
                return false;
            };
            origin
                .split_once("://")
                .is_some_and(|(_, authority)| authority == host)
        }
        (Some(_), None) => false,
    }
}

/// In front of every console route: security headers on every answer;
/// every page but sign-in (and the stylesheet) needs a valid session, and
/// every post a same-origin request carrying the session's CSRF token.
async fn guard(State(state): State<ConsoleState>, req: Request, next: Next) -> Response {
    let mut response = guard_inner(state, req, next).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        // Not `no-referrer`: with it, browsers send `Origin: null` on
        // the console's own form posts.
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

async fn guard_inner(state: ConsoleState, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let is_post = req.method() == axum::http::Method::POST;
    if is_post && !same_origin(req.headers()) {
        return refusal(
            StatusCode::FORBIDDEN,
            "This form was posted from another site; the console accepts its own forms only.",
        );
    }
    if path == "/console/sign-in" || path == "/console/assets/console.css" {
        return next.run(req).await;
    }
    let session = cookie_value(req.headers()).and_then(|v| state.inner.key.open(&v, now()));
    let Some(session) = session else {
        if is_post {
            return refusal(
                StatusCode::UNAUTHORIZED,
                "You are not signed in (or your session ended). Sign in again.",
            );
        }
        return Redirect::to("/console/sign-in").into_response();
    };
    let csrf = state.inner.key.csrf(&session);
    if is_post {
        // The CSRF token travels in the form body: read it, check it, and
        // hand the body on.
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
            return refusal(StatusCode::PAYLOAD_TOO_LARGE, "This form is too large.");
        };
        // A form that cannot be read (a field given twice) is answered as
        // such, not as a wrong token.
        let token = match read_form::<CsrfForm>(&bytes) {
            Ok(form) => form.csrf.unwrap_or_default(),
            Err(_) => {
                return unreadable_form(&Operator {
                    session,
                    csrf,
                    pending_approvals: None,
                });
            }
        };
        if !state.inner.key.csrf_matches(&session, &token) {
            return refusal(
                StatusCode::FORBIDDEN,
                "This form's security token is missing or wrong. Reload the page and try again.",
            );
        }
        req = Request::from_parts(parts, axum::body::Body::from(bytes));
    }
    let pending_approvals = state.inner.store.pending_approval_count().await.ok();
    req.extensions_mut().insert(Operator {
        session,
        csrf,
        pending_approvals,
    });
    next.run(req).await
}

fn refusal(status: StatusCode, message: &str) -> Response {
    let body = page(
        "Refused",
        None,
        &format!(
            "<p class=\"banner off\">{}</p><p><a href=\"/console/sign-in\">Sign in</a></p>",
            esc(message)
        ),
    );
    (status, html_headers(), body).into_response()
}

fn html_headers() -> [(header::HeaderName, &'static str); 1] {
    [(header::CONTENT_TYPE, "text/html; charset=utf-8")]
}

fn html(body: String) -> Response {
    (html_headers(), body).into_response()
}

fn not_found(operator: &Operator, what: &str) -> Response {
    let body = page(
        "Not found",
        signed_in(operator),
        &format!("<p class=\"banner warn\">{}</p>", esc(what)),
    );
    (StatusCode::NOT_FOUND, html_headers(), body).into_response()
}

fn failed(operator: &Operator, what: &str) -> Response {
    let body = page(
        "Not done",
        signed_in(operator),
        &format!("<p class=\"banner off\">{}</p>", esc(what)),
    );
    (StatusCode::CONFLICT, html_headers(), body).into_response()
}

/// A form body (`application/x-www-form-urlencoded`), decoded by
/// `serde_urlencoded`: `+` and percent escapes decoded, bytes that are
/// not UTF-8 replaced, fields the form does not name ignored (every post
/// carries `csrf`). A field given twice makes the form unreadable.
fn read_form<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, serde_urlencoded::de::Error> {
    serde_urlencoded::from_bytes(bytes)
}

/// The answer to a signed-in form that cannot be read. It says what to
/// do, not what was posted (a field may hold a secret).
fn unreadable_form(operator: &Operator) -> Response {
    let body = page(
        "Not done",
        signed_in(operator),
        "<p class=\"banner off\">This form could not be read (a field was given twice?). Reload the page and try again.</p>",
    );
    (StatusCode::BAD_REQUEST, html_headers(), body).into_response()
}

/// The field every post carries, read by [`guard`].
#[derive(Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

/// The sign-in form.
#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    user: String,
}

/// A form that asks for a confirmation first (`confirm=yes` once given).
#[derive(Deserialize)]
struct ConfirmForm {
    confirm: Option<String>,
}

impl ConfirmForm {
    fn confirmed(&self) -> bool {
        self.confirm.as_deref() == Some("yes")
    }
}

/// The form that mounts an agent on a project.
#[derive(Deserialize)]
struct MountForm {
    #[serde(default)]
    agent: String,
    confirm: Option<String>,
}

/// The kill switch's form.
#[derive(Deserialize)]
struct KillSwitchForm {
    writes: Option<String>,
    #[serde(default)]
    reason: String,
}

fn signed_in(operator: &Operator) -> Option<html::SignedIn<'_>> {
    Some(html::SignedIn {
        user: &operator.session.user,
        csrf: &operator.csrf,
        pending_approvals: operator.pending_approvals,
    })
}

// ---- sign-in ----------------------------------------------------------------

async fn home() -> Redirect {
    Redirect::to("/console/projects")
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
        .into_response()
}

fn sign_in_form(problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p class=\"banner off\">{}</p>", esc(p)))
        .unwrap_or_default();
    page(
        "Sign in",
        None,
        &format!(
            "{problem}<form method=\"post\" action=\"/console/sign-in\"><fieldset>\
             <p><label>Admin token <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label></p>\
             <p><label>Your user id <input type=\"text\" name=\"user\" required placeholder=\"u-ops\"></label> \
             (recorded as the person behind every change you make)</p>\
             <p><button type=\"submit\">Sign in</button></p></fieldset></form>"
        ),
    )
}

async fn sign_in_page() -> Response {
    html(sign_in_form(None))
}

async fn sign_in(State(state): State<ConsoleState>, body: Bytes) -> Response {
    let Ok(SignInForm { token, user }) = read_form(&body) else {
        let page = sign_in_form(Some(
            "This form could not be read (a field was given twice?). Reload the page and try again.",
        ));
        return (StatusCode::BAD_REQUEST, html_headers(), page).into_response();
    };
    if !state.inner.token.matches(token.as_bytes()) {
        tracing::warn!("console sign-in refused: not the admin token");
        let page = sign_in_form(Some("That is not this deployment's admin token."));
        return (StatusCode::UNAUTHORIZED, html_headers(), page).into_response();
    }
    let Ok(user) = UserId::parse(user.trim()) else {
        let page = sign_in_form(Some(
            "Give your user id (plain text, no control characters).",
        ));
        return (StatusCode::UNPROCESSABLE_ENTITY, html_headers(), page).into_response();
    };
    let session = Session {
        user: user.to_string(),
        nonce: session::nonce(),
        expires: now() + LIFETIME_SECONDS,
    };
    tracing::info!(user = %user, "operator signed in to the console");
    let cookie = session_cookie(
        state.inner.secure_cookie,
        state.inner.key.seal(&session),
        LIFETIME_SECONDS,
    );
    let mut response = Redirect::to("/console/projects").into_response();
    if let Some(value) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn sign_out(State(state): State<ConsoleState>) -> Response {
    let mut response = Redirect::to("/console/sign-in").into_response();
    if let Some(value) = session_cookie(state.inner.secure_cookie, String::new(), 0) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

// ---- projects ---------------------------------------------------------------

async fn projects(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
) -> Response {
    let projects = match state.inner.store.list_projects().await {
        Ok(projects) => projects,
        Err(e) => return failed(&operator, &format!("cannot list projects: {e}")),
    };
    let rows: Vec<Vec<String>> = projects
        .iter()
        .map(|p| {
            vec![
                format!(
                    "<a href=\"/console/projects/{}\">{}</a>",
                    query_value(p.slug.as_str()),
                    esc(p.slug.as_str())
                ),
                esc(p.name.as_str()),
                esc(&p.created_at.format("%Y-%m-%d %H:%M UTC").to_string()),
            ]
        })
        .collect();
    let body = format!(
        "{}<h2>Scope cache</h2><form method=\"post\" action=\"/console/scope-cache/reset\">{}\
         <button type=\"submit\">Reset the scope cache</button></form>",
        table(&["slug", "name", "created"], &rows),
        csrf_field(&operator.csrf)
    );
    html(page("Projects", signed_in(&operator), &body))
}

async fn project(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path(slug): Path<String>,
) -> Response {
    let Ok(slug) = ProjectSlug::parse(&slug) else {
        return not_found(&operator, "No such project.");
    };
    let Ok(details) = state.inner.store.project(&slug).await else {
        return not_found(&operator, "No such project.");
    };
    let store = &state.inner.store;
    let id = details.project.id;
    let members: Vec<Vec<String>> = details
        .members
        .iter()
        .map(|m| vec![esc(m.user_id.as_str()), esc(m.role.as_str())])
        .collect();
    let mounts: Vec<Vec<String>> = details
        .mounts
        .iter()
        .map(|m| {
            vec![
                esc(m.name.as_str()),
                esc(&m.root.to_string()),
                if m.writable { "writable" } else { "read-only" }.to_owned(),
            ]
        })
        .collect();
    let agents: Vec<Vec<String>> = details
        .agents
        .iter()
        .map(|a| {
            vec![
                esc(a.agent_name.as_str()),
                esc(&a.mounted_at.format("%Y-%m-%d %H:%M UTC").to_string()),
                format!(
                    "<form method=\"post\" action=\"/console/agents/{}/unmount\">{}\
                     <button type=\"submit\" class=\"danger\">Unmount…</button></form>",
                    query_value(a.agent_name.as_str()),
                    csrf_field(&operator.csrf)
                ),
            ]
        })
        .collect();
    let milestones: Vec<Vec<String>> = store
        .milestones(id)
        .await
        .unwrap_or_default()
        .iter()
        .map(|m| {
            vec![
                m.seq.to_string(),
                esc(&m.title),
                esc(m.status.as_str()),
                m.due_date.map(|d| d.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    let from = Utc::now();
    let meetings: Vec<Vec<String>> = store
        .upcoming_meetings(id, from, from + chrono::TimeDelta::days(14), 20)
        .await
        .unwrap_or_default()
        .iter()
        .map(|m| {
            vec![
                esc(&m.starts_at.format("%Y-%m-%d %H:%M UTC").to_string()),
                esc(&m.title),
                esc(m.location.as_deref().unwrap_or("")),
                m.attendees.to_string(),
            ]
        })
        .collect();
    let reports: Vec<Vec<String>> = store
        .report_counts(id)
        .await
        .unwrap_or_default()
        .iter()
        .map(|(status, count)| vec![esc(status.as_str()), count.to_string()])
        .collect();
    let body = format!(
        "<p>{} — <a href=\"/console/events?project={}\">its audit trail</a></p>\
         <h2>Members</h2>{}<h2>Mounts</h2>{}<h2>Agents</h2>{}\
         <form method=\"post\" action=\"/console/projects/{}/agents\">{}\
         <label>Mount agent <input type=\"text\" name=\"agent\" required placeholder=\"project-{}\"></label>\
         <button type=\"submit\">Mount…</button></form>\
         <h2>Milestones</h2>{}<h2>Upcoming meetings (14 days)</h2>{}<h2>Reports by status</h2>{}",
        esc(details.project.name.as_str()),
        query_value(slug.as_str()),
        table(&["user", "role"], &members),
        table(&["name", "root", "agents may"], &mounts),
        table(&["agent", "mounted", ""], &agents),
        query_value(slug.as_str()),
        csrf_field(&operator.csrf),
        esc(slug.as_str()),
        table(&["#", "title", "status", "due"], &milestones),
        table(&["starts", "title", "location", "attendees"], &meetings),
        table(&["status", "reports"], &reports),
    );
    html(page(
        &format!("Project {slug}"),
        signed_in(&operator),
        &body,
    ))
}

/// The confirmation step of a change: the page says what will happen and
/// posts the same form again with `confirm=yes`.
fn confirmation(
    operator: &Operator,
    title: &str,
    what: &str,
    action: &str,
    fields: &[(&str, &str)],
) -> Response {
    let mut hidden = csrf_field(&operator.csrf);
    for (name, value) in fields {
        let _ = write!(
            hidden,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        );
    }
    let body = format!(
        "<div class=\"banner warn\">{what}</div><form method=\"post\" action=\"{}\">{hidden}\
         <input type=\"hidden\" name=\"confirm\" value=\"yes\">\
         <button type=\"submit\" class=\"danger\">Yes, do it</button> <a href=\"/console/projects\">Cancel</a></form>",
        esc(action)
    );
    html(page(title, signed_in(operator), &body))
}

fn done(operator: &Operator, title: &str, what: &str, back: &str) -> Response {
    let body = format!(
        "<p class=\"banner ok\">{}</p><p><a href=\"{}\">Back</a></p>",
        esc(what),
        esc(back)
    );
    html(page(title, signed_in(operator), &body))
}

async fn mount_agent(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path(slug): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(form) = read_form::<MountForm>(&body) else {
        return unreadable_form(&operator);
    };
    let (Ok(slug), Ok(agent)) = (ProjectSlug::parse(&slug), AgentName::parse(&form.agent)) else {
        return failed(
            &operator,
            "Give a project and an agent name (letters, digits, `.`, `_`, `-`).",
        );
    };
    let action = format!("/console/projects/{}/agents", query_value(slug.as_str()));
    if form.confirm.as_deref() != Some("yes") {
        let what = format!(
            "Mount agent <code>{}</code> as the manager of project <code>{}</code>? If it manages another project now, it moves here; its next call acts on this project.",
            esc(agent.as_str()),
            esc(slug.as_str())
        );
        return confirmation(
            &operator,
            "Mount an agent",
            &what,
            &action,
            &[("agent", agent.as_str())],
        );
    }
    match state.inner.store.mount_agent(&agent, &slug).await {
        Ok(_) => {
            state.inner.resolver.invalidate(&agent);
            tracing::warn!(agent = %agent, project = %slug, user = %operator.session.user, "agent mounted from the console");
            done(
                &operator,
                "Agent mounted",
                &format!("{agent} now manages {slug}."),
                &format!("/console/projects/{}", query_value(slug.as_str())),
            )
        }
        Err(e) => failed(&operator, &format!("Not mounted: {e}")),
    }
}

async fn unmount_agent(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path(agent): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(form) = read_form::<ConfirmForm>(&body) else {
        return unreadable_form(&operator);
    };
    let Ok(agent) = AgentName::parse(&agent) else {
        return not_found(&operator, "No such agent.");
    };
    let action = format!("/console/agents/{}/unmount", query_value(agent.as_str()));
    if !form.confirmed() {
        let what = format!(
            "Unmount agent <code>{}</code>? Its calls are refused (scope_violation) on every server within seconds, until it is mounted again.",
            esc(agent.as_str())
        );
        return confirmation(&operator, "Unmount an agent", &what, &action, &[]);
    }
    match state.inner.store.unmount_agent(&agent).await {
        Ok(ended) => {
            state.inner.resolver.invalidate(&agent);
            tracing::warn!(agent = %agent, user = %operator.session.user, "agent unmounted from the console");
            done(
                &operator,
                "Agent unmounted",
                &format!("{agent} no longer manages {}.", ended.project),
                &format!("/console/projects/{}", query_value(ended.project.as_str())),
            )
        }
        Err(e) => failed(&operator, &format!("Not unmounted: {e}")),
    }
}

async fn reset_scope_cache(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
) -> Response {
    let dropped = state.inner.resolver.cached_len();
    state.inner.resolver.reset();
    tracing::warn!(dropped, user = %operator.session.user, "scope cache reset from the console");
    done(
        &operator,
        "Scope cache reset",
        &format!(
            "{dropped} cached agent(s) dropped on this server; the others follow the scope epoch."
        ),
        "/console/projects",
    )
}

// ---- the audit trail --------------------------------------------------------

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

fn filter_of(query: &HashMap<String, String>) -> Result<EventFilter, String> {
    let get = |name: &str| query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut filter = EventFilter {
        limit: 50,
        ..EventFilter::default()
    };
    if let Some(v) = get("project") {
        filter.project = Some(ProjectSlug::parse(v).map_err(|e| format!("project: {e}"))?);
    }
    if let Some(v) = get("agent") {
        filter.agent = Some(AgentName::parse(v).map_err(|e| format!("agent: {e}"))?);
    }
    if let Some(v) = get("user") {
        filter.user = Some(UserId::parse(v).map_err(|e| format!("user: {e}"))?);
    }
    if let Some(v) = get("thread") {
        filter.thread = Some(ThreadId::parse(v).map_err(|e| format!("thread: {e}"))?);
    }
    if let Some(v) = get("op") {
        filter.op = Some(v.parse::<EventOp>().map_err(|e| format!("op: {e}"))?);
    }
    if let Some(v) = get("status") {
        filter.status = Some(
            v.parse::<EventStatus>()
                .map_err(|e| format!("status: {e}"))?,
        );
    }
    if let Some(v) = get("from") {
        filter.since = Some(parse_time(v).ok_or("from: a date (2026-11-25) or an RFC 3339 time")?);
    }
    if let Some(v) = get("to") {
        filter.until = Some(parse_time(v).ok_or("to: a date (2026-11-25) or an RFC 3339 time")?);
    }
    if let Some(v) = get("before") {
        filter.before = Some(
            v.parse::<EventId>()
                .map_err(|_| "before: an event id".to_owned())?,
        );
    }
    Ok(filter)
}

fn event_link(event: &StorageEvent, text: &str) -> String {
    format!(
        "<a href=\"/console/projects/{}/events/{}\">{}</a>",
        query_value(event.project.as_str()),
        event.id,
        esc(text)
    )
}

fn who(event: &StorageEvent) -> String {
    let actor = &event.actor;
    let mut out = esc(actor.user_id.as_ref().map_or("—", UserId::as_str));
    if let Some(agent) = &actor.agent_name {
        let _ = write!(out, " via {}", esc(agent.as_str()));
    }
    if let Some(thread) = &actor.thread_id {
        let _ = write!(out, " <small>(thread {})</small>", esc(thread.as_str()));
    }
    out
}

async fn events(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let value = |name: &str| esc(query.get(name).map_or("", String::as_str));
    let ops: String = std::iter::once(String::from("<option value=\"\">any</option>"))
        .chain(EventOp::ALL.iter().map(|op| {
            let selected = if query.get("op").map(String::as_str) == Some(op.as_str()) {
                " selected"
            } else {
                ""
            };
            format!("<option{selected}>{}</option>", op.as_str())
        }))
        .collect();
    let statuses: String = std::iter::once(String::from("<option value=\"\">any</option>"))
        .chain(EventStatus::ALL.iter().map(|s| {
            let selected = if query.get("status").map(String::as_str) == Some(s.as_str()) {
                " selected"
            } else {
                ""
            };
            format!("<option{selected}>{}</option>", s.as_str())
        }))
        .collect();
    let form = format!(
        "<form method=\"get\" action=\"/console/events\"><fieldset>\
         <label>Project <input name=\"project\" value=\"{}\" size=\"10\"></label>\
         <label>Agent <input name=\"agent\" value=\"{}\" size=\"14\"></label>\
         <label>User <input name=\"user\" value=\"{}\" size=\"10\"></label>\
         <label>Thread <input name=\"thread\" value=\"{}\" size=\"10\"></label>\
         <label>Op <select name=\"op\">{ops}</select></label>\
         <label>Status <select name=\"status\">{statuses}</select></label>\
         <label>From <input name=\"from\" value=\"{}\" size=\"10\" placeholder=\"2026-11-01\"></label>\
         <label>To <input name=\"to\" value=\"{}\" size=\"10\"></label>\
         <button type=\"submit\">Filter</button></fieldset></form>",
        value("project"),
        value("agent"),
        value("user"),
        value("thread"),
        value("from"),
        value("to"),
    );
    let filter = match filter_of(&query) {
        Ok(filter) => filter,
        Err(problem) => {
            let body = format!("{form}<p class=\"banner off\">{}</p>", esc(&problem));
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                html_headers(),
                page("Audit trail", signed_in(&operator), &body),
            )
                .into_response();
        }
    };
    let events = match state.inner.store.list_events(&filter).await {
        Ok(events) => events,
        Err(e) => return failed(&operator, &format!("cannot list events: {e}")),
    };
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            vec![
                event_link(e, &e.created_at.format("%Y-%m-%d %H:%M:%S").to_string()),
                esc(e.project.as_str()),
                esc(e.op.as_str()),
                esc(&e.target),
                who(e),
                esc(e.status.as_str()),
            ]
        })
        .collect();
    let mut body = format!(
        "{form}{}",
        table(
            &["when (UTC)", "project", "op", "target", "who", "status"],
            &rows
        )
    );
    if events.len() == filter.limit as usize
        && let Some(last) = events.last()
    {
        let mut next: Vec<String> = query
            .iter()
            .filter(|(k, _)| k.as_str() != "before")
            .map(|(k, v)| format!("{}={}", query_value(k), query_value(v)))
            .collect();
        next.push(format!("before={}", last.id));
        let _ = write!(
            body,
            "<p><a href=\"/console/events?{}\">Older events</a></p>",
            esc(&next.join("&"))
        );
    }
    html(page("Audit trail", signed_in(&operator), &body))
}

/// The event `id` of project `slug`: `None` when there is no such event
/// or it belongs to another project (an id from another project's page
/// finds nothing).
async fn event_of(state: &ConsoleState, slug: &str, id: &str) -> Option<StorageEvent> {
    let id = id.parse::<EventId>().ok()?;
    let event = state.inner.store.event(id).await.ok()?;
    (event.project.as_str() == slug).then_some(event)
}

/// At most [`DIFF_BYTES`] of the file at `path`, as text (`None`: absent
/// or unreadable).
async fn read_text(state: &ConsoleState, path: &AbsPath) -> Option<String> {
    let files = state.inner.journal.files();
    let stream = files
        .read(
            path,
            ReadRange {
                offset: 0,
                len: DIFF_BYTES,
            },
        )
        .await
        .ok()?;
    let window = stream.collect(DIFF_BYTES).await.ok()?;
    Some(String::from_utf8_lossy(&window.bytes).into_owned())
}

/// The time an event page's diffs have left to search, all together (the
/// file reads between them are not counted).
struct DiffBudget {
    left: Duration,
}

impl DiffBudget {
    /// The diff of `before` and `after`, searched until the budget is
    /// spent, and the time it took taken from the budget.
    fn render(&mut self, before: &str, after: &str) -> String {
        let start = Instant::now();
        let html = render_diff(before, after, start.checked_add(self.left));
        self.left = self.left.saturating_sub(start.elapsed());
        html
    }
}

fn render_diff(before: &str, after: &str, deadline: Option<Instant>) -> String {
    match diff::lines(before, after, deadline) {
        None => "<p>Too large to show as a diff.</p>".to_owned(),
        Some(lines) => {
            let mut out = String::from("<pre class=\"diff\">");
            for line in lines {
                let (class, mark, text) = match &line {
                    diff::Line::Same(t) => ("same", ' ', t),
                    diff::Line::Added(t) => ("add", '+', t),
                    diff::Line::Removed(t) => ("del", '-', t),
                };
                let _ = write!(out, "<span class=\"{class}\">{mark} {}</span>", esc(text));
            }
            out.push_str("</pre>");
            out
        }
    }
}

/// What the event changed: for a file write, the text diff of the kept
/// copy (before) and the file as it is now (after) — or, once the write
/// was reverted, of the file now (the kept copy the revert moved back)
/// and what the write had produced (which the revert moved into its own
/// trash); for a delete or a move, the paths; for a business write, each
/// row's before- and after-image.
async fn changes(state: &ConsoleState, event: &StorageEvent) -> String {
    let mut budget = DiffBudget { left: DIFF_TIME };
    let mut out = String::new();
    let kept: HashMap<String, AbsPath> = event
        .plan
        .iter()
        .filter_map(|step| match step {
            Step::Copy { from, to } => Some((from.to_string(), to.clone())),
            _ => None,
        })
        .collect();
    // Where the revert, if any, moved what this event wrote.
    let mut moved_by_revert: HashMap<String, AbsPath> = HashMap::new();
    if let Some(revert) = event.reverted_by
        && let Ok(revert) = state.inner.store.event(revert).await
    {
        for step in &revert.plan {
            if let Step::Move { from, to } = step {
                moved_by_revert.insert(from.to_string(), to.clone());
            }
        }
    }
    for step in &event.plan {
        match step {
            Step::Put { path, .. } => {
                let key = path.to_string();
                let replaced = kept.contains_key(&key);
                let (before, after, note) = match moved_by_revert.get(&key) {
                    Some(produced) => (
                        if replaced {
                            read_text(state, path).await.unwrap_or_default()
                        } else {
                            String::new()
                        },
                        read_text(state, produced).await.unwrap_or_default(),
                        "Reverted since: before is the file now (what the revert put back); after is what this write produced, kept in the revert's trash.",
                    ),
                    None => (
                        match kept.get(&key) {
                            Some(copy) => read_text(state, copy).await.unwrap_or_default(),
                            None => String::new(),
                        },
                        read_text(state, path).await.unwrap_or_default(),
                        "Before: the copy kept when the write happened (none when the file was new); after: the file as it is now.",
                    ),
                };
                let _ = write!(
                    out,
                    "<h3>{} {}</h3><p>{}</p>{}",
                    if replaced { "Changed" } else { "Created" },
                    esc(&key),
                    esc(note),
                    budget.render(&before, &after)
                );
            }
            Step::Move { from, to } => {
                let _ = write!(
                    out,
                    "<p>Moved <code>{}</code> to <code>{}</code>.</p>",
                    esc(&from.to_string()),
                    esc(&to.to_string())
                );
            }
            Step::Row { before, after } => {
                let show = |row: &Option<Box<acdm_core::business::RowImage>>| {
                    row.as_ref()
                        .and_then(|r| serde_json::to_string_pretty(r).ok())
                        .unwrap_or_default()
                };
                let _ = write!(
                    out,
                    "<h3>Row {}</h3>{}",
                    match (before, after) {
                        (None, Some(_)) => "inserted",
                        (Some(_), None) => "removed",
                        _ => "changed",
                    },
                    budget.render(&show(before), &show(after))
                );
            }
            Step::Copy { .. } | Step::Discard { .. } => {}
        }
    }
    if out.is_empty() {
        out.push_str("<p>No file content or row to show.</p>");
    }
    out
}

/// What reverting `event` will do, in words, from its undo steps.
fn undo_text(event: &StorageEvent) -> String {
    let mut out = String::from("<ul>");
    for step in &event.undo {
        let line = match step {
            Step::Copy { from, to } => format!("copy {from} back to {to}"),
            Step::Put { path, size, .. } => format!("write {path} ({size} bytes)"),
            Step::Move { from, to } => format!("move {from} back to {to}"),
            Step::Discard { path, .. } => {
                format!("move {path}, as this event left it, into the trash")
            }
            Step::Row { before, after } => match (before, after) {
                (Some(_), None) => "remove the row this event inserted".to_owned(),
                (None, Some(_)) => "insert again the row this event removed".to_owned(),
                _ => "write the row back as it was before this event".to_owned(),
            },
        };
        let _ = write!(out, "<li>{}</li>", esc(&line));
    }
    out.push_str("</ul>");
    out
}

async fn event(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path((slug, id)): Path<(String, String)>,
) -> Response {
    let Some(event) = event_of(&state, &slug, &id).await else {
        return not_found(&operator, "No such event in this project.");
    };
    let link = |id: Option<EventId>, label: &str| match id {
        Some(id) => format!(
            "<p>{label} <a href=\"/console/projects/{}/events/{id}\">{id}</a></p>",
            query_value(event.project.as_str())
        ),
        None => String::new(),
    };
    let params = serde_json::to_string_pretty(&event.params).unwrap_or_default();
    let revert = if event.status == EventStatus::Applied && event.reverted_by.is_none() {
        format!(
            "<h2>Revert</h2><form method=\"post\" action=\"/console/projects/{}/events/{}/revert\">{}\
             <button type=\"submit\" class=\"danger\">Revert…</button></form>",
            query_value(event.project.as_str()),
            event.id,
            csrf_field(&operator.csrf)
        )
    } else {
        String::new()
    };
    let body = format!(
        "{}<table><tbody>\
         <tr><th>id</th><td><code>{}</code></td></tr>\
         <tr><th>project</th><td><a href=\"/console/projects/{}\">{}</a></td></tr>\
         <tr><th>op</th><td>{}</td></tr><tr><th>target</th><td>{}</td></tr>\
         <tr><th>who</th><td>{}</td></tr><tr><th>status</th><td>{}</td></tr>\
         <tr><th>when</th><td>{}</td></tr><tr><th>error</th><td>{}</td></tr></tbody></table>\
         {}{}<h2>Parameters</h2><pre>{}</pre><h2>What it changed</h2>{}{}",
        if event.reverted_by.is_some() {
            "<p class=\"banner warn\">This event was reverted.</p>"
        } else {
            ""
        },
        event.id,
        query_value(event.project.as_str()),
        esc(event.project.as_str()),
        esc(event.op.as_str()),
        esc(&event.target),
        who(&event),
        esc(event.status.as_str()),
        esc(&event.created_at.to_rfc3339()),
        esc(event.error.as_deref().unwrap_or("")),
        link(event.reverts, "This event reverts"),
        link(event.reverted_by, "Reverted by"),
        esc(&params),
        changes(&state, &event).await,
        revert,
    );
    html(page(
        &format!("Event {}", &event.id.to_string()[..8]),
        signed_in(&operator),
        &body,
    ))
}

async fn revert(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    Path((slug, id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Ok(form) = read_form::<ConfirmForm>(&body) else {
        return unreadable_form(&operator);
    };
    let Some(event) = event_of(&state, &slug, &id).await else {
        return not_found(&operator, "No such event in this project.");
    };
    let action = format!(
        "/console/projects/{}/events/{}/revert",
        query_value(event.project.as_str()),
        event.id
    );
    if !form.confirmed() {
        let what = format!(
            "Revert <code>{}</code> ({} of {} by {})? The revert is itself an event, recorded as yours ({}). It will:{}\
             It is refused, changing nothing, if what it touches changed since.",
            event.id,
            esc(event.op.as_str()),
            esc(&event.target),
            who(&event),
            esc(&operator.session.user),
            undo_text(&event)
        );
        return confirmation(&operator, "Revert an event", &what, &action, &[]);
    }
    let Ok(user) = UserId::parse(&operator.session.user) else {
        return failed(
            &operator,
            "Your session's user id is not valid; sign in again.",
        );
    };
    match state
        .inner
        .journal
        .revert(&Actor::direct(user), event.id, Some(event.project_id))
        .await
    {
        Ok(revert) => {
            tracing::warn!(event = %event.id, revert = %revert.id, user = %operator.session.user, "storage event reverted from the console");
            let body = format!(
                "<p class=\"banner ok\">Reverted by event {}.</p>",
                event_link(&revert, &revert.id.to_string())
            );
            html(page("Reverted", signed_in(&operator), &body))
        }
        Err(e) => failed(&operator, &format!("Not reverted: {e}")),
    }
}

// ---- the kill switch --------------------------------------------------------

async fn kill_switch(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
) -> Response {
    let row = match state.inner.switch.refresh(&state.inner.store).await {
        Ok(row) => row,
        Err(e) => return failed(&operator, &format!("cannot read the kill switch: {e}")),
    };
    let report = state.inner.switch.report(row);
    let state_line = if report.nc_writes_enabled {
        "<p class=\"banner ok\">Agents' file writes are <strong>enabled</strong>.</p>".to_owned()
    } else {
        format!(
            "<p class=\"banner off\">Agents' file writes are <strong>OFF</strong> (decided by the {}).</p>",
            esc(report.decided_by)
        )
    };
    let last = match &report.operator {
        Some(op) => format!(
            "<p>Last set {} by {} at {}: {}</p>",
            if op.enabled { "on" } else { "off" },
            esc(op.changed_by.as_deref().unwrap_or("someone")),
            esc(&op.changed_at.to_rfc3339()),
            esc(op.reason.as_deref().unwrap_or("(no reason given)"))
        ),
        None => "<p>No operator has set it.</p>".to_owned(),
    };
    let flip = if report.nc_writes_enabled {
        "off"
    } else {
        "on"
    };
    let body = format!(
        "{state_line}{last}<form method=\"post\" action=\"/console/kill-switch\">{}\
         <input type=\"hidden\" name=\"writes\" value=\"{flip}\">\
         <label>Reason <input type=\"text\" name=\"reason\" required maxlength=\"500\" size=\"50\"></label>\
         <button type=\"submit\" class=\"danger\">Switch agents' writes {flip}</button></form>\
         <p>The environment's <code>ACDM_AI_NC_WRITES_ENABLED</code> is {}.</p>",
        csrf_field(&operator.csrf),
        report.environment
    );
    html(page("Kill switch", signed_in(&operator), &body))
}

async fn set_kill_switch(
    State(state): State<ConsoleState>,
    axum::Extension(operator): axum::Extension<Operator>,
    body: Bytes,
) -> Response {
    let Ok(form) = read_form::<KillSwitchForm>(&body) else {
        return unreadable_form(&operator);
    };
    let enabled = match form.writes.as_deref() {
        Some("on") => true,
        Some("off") => false,
        _ => return failed(&operator, "Say whether writes go on or off."),
    };
    let reason = form.reason.trim().to_owned();
    if reason.is_empty() || reason.chars().count() > 500 {
        return failed(&operator, "Give a reason (at most 500 characters).");
    }
    if enabled && !state.inner.switch.environment() {
        return failed(
            &operator,
            "ACDM_AI_NC_WRITES_ENABLED=false in this deployment's environment; writes can only be enabled there.",
        );
    }
    if let Err(e) = state
        .inner
        .store
        .set_switch(
            NC_WRITES_SWITCH,
            enabled,
            Some(&operator.session.user),
            Some(&reason),
        )
        .await
    {
        return failed(&operator, &format!("Not set: {e}"));
    }
    let _ = state.inner.switch.refresh(&state.inner.store).await;
    tracing::warn!(nc_writes_enabled = enabled, user = %operator.session.user, reason = %reason, "kill switch set from the console");
    Redirect::to("/console/kill-switch").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent_escapes() {
        let form: KillSwitchForm =
            read_form(b"csrf=a%2Bb&writes=off&reason=disk+full%3A+%3Cx%3E+100%25+%E2%9C%93+a%2Bb")
                .unwrap();
        assert_eq!(form.writes.as_deref(), Some("off"));
        assert_eq!(form.reason, "disk full: <x> 100% \u{2713} a+b");
        let form: CsrfForm = read_form(b"reason=x&csrf=a%2Bb%3D%3D").unwrap();
        assert_eq!(form.csrf.as_deref(), Some("a+b=="));
        // Missing fields are empty, a name without `=` has an empty value,
        // empty pairs are skipped.
        let form: SignInForm = read_form(b"&user&&").unwrap();
        assert_eq!((form.token.as_str(), form.user.as_str()), ("", ""));
        let form: KillSwitchForm = read_form(b"").unwrap();
        assert_eq!((form.writes, form.reason.as_str()), (None, ""));
        // A broken escape is kept as written; bytes that are not UTF-8
        // are replaced, never refused.
        let form: SignInForm = read_form(b"user=100%zz%4&token=%FF%FEx").unwrap();
        assert_eq!(form.user, "100%zz%4");
        assert_eq!(form.token, "\u{FFFD}\u{FFFD}x");
        let form: MountForm = read_form(b"agent=bot-1&confirm=yes&csrf=x").unwrap();
        assert_eq!(
            (form.agent.as_str(), form.confirm.as_deref()),
            ("bot-1", Some("yes"))
        );
    }

    #[tokio::test]
    async fn a_field_given_twice_makes_a_form_unreadable_and_the_answer_is_a_page_without_it() {
        let sign_in = b"token=first-secret&user=u&token=second-secret";
        assert!(read_form::<SignInForm>(sign_in).is_err());
        assert!(read_form::<CsrfForm>(b"csrf=a&csrf=b").is_err());
        assert!(!read_form::<ConfirmForm>(b"confirm=no&confirm=yes").is_ok_and(|f| f.confirmed()));
        let operator = Operator {
            session: Session {
                user: "u-ops".to_owned(),
                nonce: session::nonce(),
                expires: 0,
            },
            csrf: "token".to_owned(),
            pending_approvals: None,
        };
        let response = unreadable_form(&operator);
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            "text/html; charset=utf-8"
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.contains("This form could not be read"), "{body}");
        assert!(!body.contains("secret"), "{body}");
    }

    #[test]
    fn the_session_cookie_is_found_among_others_whatever_the_spacing() {
        let value = |lines: &[&'static str]| {
            let mut headers = HeaderMap::new();
            for line in lines {
                headers.append(header::COOKIE, HeaderValue::from_static(line));
            }
            cookie_value(&headers)
        };
        assert_eq!(value(&["acdm_console=v1.a.b"]), Some("v1.a.b".to_owned()));
        assert_eq!(
            value(&["theme=dark;acdm_consolex=no ;  acdm_console =  v1.a.b ;other=1"]),
            Some("v1.a.b".to_owned())
        );
        assert_eq!(
            value(&["a=1;;; =x; broken ;acdm_console=v1.c.d; acdm_console=later"]),
            Some("v1.c.d".to_owned()),
            "pairs that are not pairs are skipped, the first of a name counts"
        );
        // Several Cookie headers (as HTTP/2 sends them).
        assert_eq!(
            value(&["theme=dark; lang=en", "\tacdm_console=v1.e.f\t", "x=y"]),
            Some("v1.e.f".to_owned())
        );
        assert_eq!(value(&["acdm_consol=v1; xacdm_console=v2"]), None);
        assert_eq!(value(&[]), None);
    }

    #[test]
    fn the_session_cookie_is_http_only_strict_and_secure_behind_tls() {
        let set = |secure, value: &str, max_age| {
            session_cookie(secure, value.to_owned(), max_age)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            set(false, "v1.a.b", LIFETIME_SECONDS),
            "acdm_console=v1.a.b; HttpOnly; SameSite=Strict; Path=/console; Max-Age=28800"
        );
        assert_eq!(
            set(true, "v1.a.b", LIFETIME_SECONDS),
            "acdm_console=v1.a.b; HttpOnly; SameSite=Strict; Secure; Path=/console; Max-Age=28800"
        );
        // Signing out: the same cookie, empty, gone at once.
        assert_eq!(
            set(true, "", 0),
            "acdm_console=; HttpOnly; SameSite=Strict; Secure; Path=/console; Max-Age=0"
        );
        // What the cookie parser reads back is what was sealed.
        let mut headers = HeaderMap::new();
        let sent = set(false, "v1.a.b", 1);
        let pair = sent.split(';').next().unwrap().to_owned();
        headers.insert(header::COOKIE, HeaderValue::from_str(&pair).unwrap());
        assert_eq!(cookie_value(&headers).as_deref(), Some("v1.a.b"));
    }

    #[test]
    fn only_this_origin_may_post() {
        let check = |pairs: &[(&'static str, &'static str)], expected: bool| {
            let mut headers = HeaderMap::new();
            for (k, v) in pairs {
                headers.insert(*k, HeaderValue::from_static(v));
            }
            assert_eq!(same_origin(&headers), expected, "{pairs:?}");
        };
        check(&[("host", "127.0.0.1:8002")], true);
        check(
            &[
                ("host", "127.0.0.1:8002"),
                ("origin", "http://127.0.0.1:8002"),
            ],
            true,
        );
        check(
            &[
                ("host", "127.0.0.1:8002"),
                ("origin", "http://evil.example"),
            ],
            false,
        );
        check(&[("host", "127.0.0.1:8002"), ("origin", "null")], false);
        check(
            &[("host", "127.0.0.1:8002"), ("sec-fetch-site", "cross-site")],
            false,
        );
        check(
            &[("host", "127.0.0.1:8002"), ("sec-fetch-site", "same-site")],
            false,
        );
        check(
            &[
                ("host", "127.0.0.1:8002"),
                ("sec-fetch-site", "same-origin"),
            ],
            true,
        );
    }
}
