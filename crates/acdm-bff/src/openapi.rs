//! The OpenAPI 3.1 document of `/agent-tools/*` and `/admin/*`, served at
//! `/openapi.json`: generated, never written by hand.
//!
//! - **Operations** come from the tables the routers are built from: the
//!   op families of `acdm_core` (`NcOp`, `BusinessOp`, `ProjectOp`: path,
//!   method, access) and [`AdminOp`] (method, path, handler).
//! - **Schemas** come from the types the handlers parse and send, through
//!   their `schemars` derives (JSON Schema 2020-12, OpenAPI 3.1's own
//!   dialect), collected once under `components/schemas`.
//! - **Responses**: for each operation the `ToolResponse` envelope of its
//!   success with its `data` type, and one response per HTTP status it can
//!   answer with, listing the failure codes of that status (the core code
//!   table gives each code its status). The service gate's plain 401
//!   (`{"error":"service auth failed"}`) is documented where it applies.
//! - **Security**: the service token with the three identity headers for
//!   the BFF, the admin bearer token for the operator API.
//!
//! The document is built once per process ([`document`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use acdm_core::business::Access;
use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use acdm_core::{ErrorCode, headers};
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::admin::AdminOp;

/// The document, built on first use.
pub fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(build)
}

/// Where the schemas live in the document.
const COMPONENTS: &str = "/components/schemas";

/// The failure codes every BFF call can answer with, whatever the
/// operation: identity, scope, role, a browser, the database, a bug.
const BFF_COMMON: &[ErrorCode] = &[
    ErrorCode::MissingIdentityHeaders,
    ErrorCode::PermissionDenied,
    ErrorCode::ScopeViolation,
    ErrorCode::RateLimited,
    ErrorCode::InternalError,
    ErrorCode::ServiceUnavailable,
];

/// What a write adds when a person must approve it first (and the
/// `approval_id` it then carries).
const APPROVAL: &[ErrorCode] = &[
    ErrorCode::ApprovalRequired,
    ErrorCode::ApprovalPending,
    ErrorCode::ApprovalRejected,
    ErrorCode::ApprovalMismatch,
    ErrorCode::ApprovalExpired,
    ErrorCode::ApprovalUsed,
];

/// What a body adds: it may not parse, be too large or not be JSON.
const BODY: &[ErrorCode] = &[ErrorCode::ValidationError, ErrorCode::PayloadTooLarge];

/// What reaching the file store adds.
const UPSTREAM: &[ErrorCode] = &[
    ErrorCode::UpstreamError,
    ErrorCode::UpstreamTimeout,
    ErrorCode::SourceNotConfigured,
];

/// The failure codes every operator call can answer with: no or a wrong
/// token, a browser, 404 when the operator API is off, the database, a bug.
const ADMIN_COMMON: &[ErrorCode] = &[
    ErrorCode::Unauthorized,
    ErrorCode::PermissionDenied,
    ErrorCode::NotFound,
    ErrorCode::InternalError,
    ErrorCode::ServiceUnavailable,
];

/// The failure codes an nc operation can answer with, beyond [`BFF_COMMON`].
fn nc_failures(op: NcOp) -> Vec<ErrorCode> {
    use ErrorCode::*;
    let mut codes = BODY.to_vec();
    match op {
        NcOp::ListMounts => {}
        NcOp::List | NcOp::Read | NcOp::Search => {
            // A folder read as a file, or a file listed as a folder.
            codes.extend([NotFound, InvalidPath, Conflict]);
            codes.extend(UPSTREAM);
        }
        NcOp::Write | NcOp::Delete | NcOp::Move => {
            codes.extend([NotFound, InvalidPath, Conflict, KillSwitchOff]);
            codes.extend(UPSTREAM);
        }
    }
    codes
}

/// The failure codes a business operation can answer with, beyond
/// [`BFF_COMMON`].
fn business_failures(op: BusinessOp) -> Vec<ErrorCode> {
    use BusinessOp::*;
    use ErrorCode::*;
    let mut codes = BODY.to_vec();
    match op {
        ListMeetings | ListCalendar | ListReports | ListMembers | GetProjectMeta => {}
        GetMeeting | ListMeetingFiles => {
            codes.push(NotFound);
            codes.extend(UPSTREAM);
        }
        GetReport => codes.push(NotFound),
        CreateMeeting => codes.push(Conflict),
        UpdateMeeting | UpdateReportStatus => codes.extend([NotFound, Conflict]),
        DeleteMeeting | AttachMeetingFile | DeleteMeetingFile => {
            codes.extend([NotFound, Conflict, KillSwitchOff, InvalidPath]);
            codes.extend(UPSTREAM);
        }
    }
    codes
}

/// The failure codes a project operation can answer with, beyond
/// [`BFF_COMMON`].
fn project_failures(op: ProjectOp) -> Vec<ErrorCode> {
    match op {
        ProjectOp::Overview | ProjectOp::Sow => Vec::new(),
        ProjectOp::AdvanceMilestone => {
            let mut codes = BODY.to_vec();
            codes.push(ErrorCode::Conflict);
            codes
        }
    }
}

/// One operation, as the document needs it.
struct Operation {
    id: String,
    tag: &'static str,
    method: &'static str,
    path: String,
    summary: String,
    description: String,
    parameters: Vec<Value>,
    request: Option<Schema>,
    data: Schema,
    failures: Vec<ErrorCode>,
    /// The gate's plain 401 applies (the BFF), or the admin bearer's.
    bff: bool,
    /// A BFF write: its body may carry `approval_id`.
    approvable: bool,
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.definitions_path = COMPONENTS.into();
            settings.meta_schema = None;
        })
        .into_generator()
}

fn access_text(access: Access) -> String {
    format!(
        "Needs the acting user's role to grant `{}` (least role: `{}`).",
        access.as_str(),
        access.least_role()
    )
}

fn bff_operation(
    family: &'static str,
    name: &'static str,
    label: &'static str,
    (method, path): (&'static str, &'static str),
    (request, data): (Schema, Schema),
    access: Access,
    (failures, approvable): (Vec<ErrorCode>, bool),
) -> Operation {
    let writes = if method == "GET" {
        "a read"
    } else {
        "an operation"
    };
    let mut failures = failures;
    if approvable {
        failures.extend(APPROVAL);
        for code in [ErrorCode::NotFound, ErrorCode::Conflict] {
            if !failures.contains(&code) {
                failures.push(code);
            }
        }
    }
    Operation {
        id: format!("{family}_{}", name.replace('/', "_")),
        tag: family,
        method,
        path: format!("/{path}"),
        summary: format!("{label}: {writes} of the agent's project"),
        description: format!(
            "The project is the agent's (`{}`), resolved by the server; ids of another project are `not_found`. {}",
            headers::AGENT_NAME,
            access_text(access)
        ),
        parameters: Vec::new(),
        request: (method != "GET").then_some(request),
        data,
        failures,
        bff: true,
        approvable,
    }
}

fn operations(generator: &mut SchemaGenerator) -> Vec<Operation> {
    let mut all = Vec::new();
    for op in NcOp::ALL {
        let (request, data) = (
            op.request_subschema(generator),
            op.data_subschema(generator),
        );
        all.push(bff_operation(
            NcOp::FAMILY,
            op.as_str(),
            op.label(),
            (op.method(), op.path()),
            (request, data),
            op.access(),
            (nc_failures(*op), op.writes()),
        ));
    }
    for op in BusinessOp::ALL {
        let (request, data) = (
            op.request_subschema(generator),
            op.data_subschema(generator),
        );
        all.push(bff_operation(
            BusinessOp::FAMILY,
            op.as_str(),
            op.label(),
            (op.method(), op.path()),
            (request, data),
            op.access(),
            (business_failures(*op), op.writes()),
        ));
    }
    for op in ProjectOp::ALL {
        let (request, data) = (
            op.request_subschema(generator),
            op.data_subschema(generator),
        );
        all.push(bff_operation(
            ProjectOp::FAMILY,
            op.as_str(),
            op.label(),
            (op.method(), op.path()),
            (request, data),
            op.access(),
            (project_failures(*op), op.writes()),
        ));
    }
    for op in AdminOp::ALL {
        let mut parameters: Vec<Value> = op
            .path_params()
            .into_iter()
            .map(|param| {
                json!({
                    "name": param.name(),
                    "in": "path",
                    "required": true,
                    "schema": param.schema(generator),
                })
            })
            .collect();
        if let Some(query) = op.query_schema(generator) {
            parameters.extend(query_parameters(&query));
        }
        let mut failures: Vec<ErrorCode> = op.failures().to_vec();
        if !op.path_params().is_empty() && !failures.contains(&ErrorCode::ValidationError) {
            failures.push(ErrorCode::ValidationError);
        }
        all.push(Operation {
            id: op.operation_id(),
            tag: "admin",
            method: op.method(),
            path: op.path().to_owned(),
            summary: op.summary().to_owned(),
            description: "The operator API: `Authorization: Bearer <ACDM_ADMIN_TOKEN>`; every path is 404 while no admin token is configured.".to_owned(),
            parameters,
            request: op.request_subschema(generator),
            data: op.data_subschema(generator),
            failures,
            bff: false,
            approvable: false,
        });
    }
    all
}

/// One query parameter per property of `query` (an object schema).
fn query_parameters(query: &Schema) -> Vec<Value> {
    let Some(properties) = query.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut schema = schema.clone();
            let description = schema
                .as_object_mut()
                .and_then(|s| s.remove("description"))
                .unwrap_or(Value::Null);
            let mut parameter = json!({
                "name": name,
                "in": "query",
                "required": false,
                "schema": strip_null(schema),
            });
            if let (Some(p), Value::String(text)) = (parameter.as_object_mut(), description) {
                p.insert("description".to_owned(), Value::String(text));
            }
            parameter
        })
        .collect()
}

/// A query parameter is absent rather than `null`: drop `null` from its
/// type (`["integer", "null"]` → `"integer"`, `anyOf [X, null]` → X).
fn strip_null(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        if object.get("default") == Some(&Value::Null) {
            object.remove("default");
        }
        if let Some(Value::Array(types)) = object.get("type").cloned() {
            let kept: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
            if let [single] = kept.as_slice() {
                object.insert("type".to_owned(), single.clone());
            } else {
                object.insert("type".to_owned(), Value::Array(kept));
            }
        }
        if let Some(Value::Array(any)) = object.get("anyOf").cloned() {
            let kept: Vec<Value> = any
                .into_iter()
                .filter(|s| s.get("type") != Some(&json!("null")))
                .collect();
            if let [single] = kept.as_slice() {
                object.remove("anyOf");
                let single = single.clone();
                if let Some(inner) = single.as_object() {
                    for (k, v) in inner {
                        object.insert(k.clone(), v.clone());
                    }
                }
            } else {
                object.insert("anyOf".to_owned(), Value::Array(kept));
            }
        }
    }
    schema
}

/// Gives every integer with a Rust width (`format: uint32`, …) the bounds
/// of that width: the parser refuses anything beyond them, so the schema
/// must say so.
fn integer_bounds(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let bounds: Option<(i128, i128)> = match map.get("format").and_then(Value::as_str) {
                Some("uint8") => Some((0, u8::MAX.into())),
                Some("uint16") => Some((0, u16::MAX.into())),
                Some("uint32") => Some((0, u32::MAX.into())),
                Some("uint64" | "uint") => Some((0, u64::MAX.into())),
                Some("int32") => Some((i32::MIN.into(), i32::MAX.into())),
                Some("int64" | "int") => Some((i64::MIN.into(), i64::MAX.into())),
                _ => None,
            };
            if let Some((min, max)) = bounds {
                if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
                    map.insert("minimum".to_owned(), json!(min));
                }
                if !map.contains_key("maximum") && !map.contains_key("exclusiveMaximum") {
                    map.insert("maximum".to_owned(), json!(max));
                }
            }
            map.values_mut().for_each(integer_bounds);
        }
        Value::Array(items) => items.iter_mut().for_each(integer_bounds),
        _ => {}
    }
}

/// The success envelope around `data`.
fn success(data: &Schema) -> Value {
    json!({
        "type": "object",
        "required": ["success", "code", "message", "data", "suggested_action"],
        "properties": {
            "success": { "const": true },
            "code": { "const": "ok" },
            "message": { "type": "string" },
            "data": data,
            "suggested_action": { "type": ["string", "null"] },
        },
        "additionalProperties": false,
    })
}

/// The failure envelope with one of `codes`.
fn failure(codes: &[ErrorCode]) -> Value {
    let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    json!({
        "type": "object",
        "required": ["success", "code", "message", "data", "suggested_action"],
        "properties": {
            "success": { "const": false },
            "code": { "enum": names },
            "message": { "type": "string" },
            "data": {},
            "suggested_action": { "type": ["string", "null"] },
        },
        "additionalProperties": false,
    })
}

fn json_content(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad request",
        401 => "Not authenticated",
        403 => "Refused",
        404 => "Not found",
        405 => "Method not allowed",
        409 => "Conflict",
        413 => "Payload too large",
        415 => "Not JSON",
        422 => "Invalid input",
        429 => "Too many requests",
        500 => "Internal error",
        502 => "Upstream error",
        503 => "Unavailable",
        504 => "Upstream timeout",
        _ => "Failure",
    }
}

fn responses(op: &Operation) -> Value {
    let mut by_status: BTreeMap<u16, Vec<ErrorCode>> = BTreeMap::new();
    let common = if op.bff { BFF_COMMON } else { ADMIN_COMMON };
    for code in common.iter().chain(op.failures.iter()) {
        let codes = by_status.entry(code.http_status()).or_default();
        if !codes.contains(code) {
            codes.push(*code);
        }
    }
    // A body that is not UTF-8 JSON is a `validation_error` sent as 415.
    if op.request.is_some()
        && let Some(validation) = by_status.get(&422).cloned()
    {
        by_status.insert(415, validation);
    }
    let mut out = Map::new();
    let mut ok = json!({
        "description": "Success: the ToolResponse envelope with this operation's `data`",
        "content": json_content(success(&op.data)),
    });
    if let (Some(links), Some(object)) = (links_of(&op.id), ok.as_object_mut()) {
        object.insert("links".to_owned(), links);
    }
    out.insert("200".to_owned(), ok);
    for (status, codes) in by_status {
        let mut schema = failure(&codes);
        if status == 401 && op.bff {
            schema =
                json!({ "oneOf": [{ "$ref": "#/components/schemas/ServiceAuthFailed" }, schema] });
        }
        let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
        let mut response = json!({
            "description": format!("{}: {}", reason(status), names.join(", ")),
            "content": json_content(schema),
        });
        if status == 429
            && let Some(object) = response.as_object_mut()
        {
            object.insert(
                "headers".to_owned(),
                json!({ "Retry-After": {
                    "description": "Seconds to wait before the next call",
                    "required": true,
                    "schema": { "type": "integer", "minimum": 1 },
                }}),
            );
        }
        out.insert(status.to_string(), response);
    }
    Value::Object(out)
}

/// Runtime expressions by name: a link's parameters or body fields.
type Expressions = &'static [(&'static str, &'static str)];

/// How one operation's answer feeds another (OpenAPI links), for clients
/// and for schemathesis's stateful phase: an id a create returns is the id
/// the reads and updates take. `(from, name, to, parameters, body)`; the
/// values are runtime expressions.
const LINKS: &[(&str, &str, &str, Expressions, Expressions)] = &[
    (
        "admin_create_project",
        "ShowProject",
        "admin_show_project",
        &[("slug", "$response.body#/data/slug")],
        &[],
    ),
    (
        "admin_create_project",
        "ListMeetingsOfProject",
        "admin_create_meeting",
        &[("slug", "$response.body#/data/slug")],
        &[],
    ),
    (
        "admin_create_meeting",
        "UpdateMeeting",
        "admin_update_meeting",
        &[
            ("slug", "$request.path.slug"),
            ("id", "$response.body#/data/meeting_id"),
        ],
        &[],
    ),
    (
        "admin_create_meeting",
        "AttachFile",
        "admin_attach_meeting_file",
        &[
            ("slug", "$request.path.slug"),
            ("id", "$response.body#/data/meeting_id"),
        ],
        &[],
    ),
    (
        "admin_create_report",
        "UpdateReport",
        "admin_update_report",
        &[
            ("slug", "$request.path.slug"),
            ("id", "$response.body#/data/report_id"),
        ],
        &[],
    ),
    (
        "admin_mount_agent",
        "UnmountAgent",
        "admin_unmount_agent",
        &[("agent_name", "$response.body#/data/mount/agent_name")],
        &[],
    ),
    (
        "admin_list_events",
        "ShowEvent",
        "admin_show_event",
        &[("id", "$response.body#/data/events/0/id")],
        &[],
    ),
    (
        "admin_list_events",
        "RevertEvent",
        "admin_revert_event",
        &[("id", "$response.body#/data/events/0/id")],
        &[],
    ),
    (
        "admin_revert_event",
        "ShowRevert",
        "admin_show_event",
        &[("id", "$response.body#/data/revert/id")],
        &[],
    ),
    (
        "business_create_meeting",
        "GetMeeting",
        "business_get_meeting",
        &[],
        &[("meeting_id", "$response.body#/data/meeting/meeting_id")],
    ),
    (
        "business_create_meeting",
        "ListMeetingFiles",
        "business_list_meeting_files",
        &[],
        &[("meeting_id", "$response.body#/data/meeting/meeting_id")],
    ),
    (
        "business_create_meeting",
        "DeleteMeeting",
        "business_delete_meeting",
        &[],
        &[("meeting_id", "$response.body#/data/meeting/meeting_id")],
    ),
    (
        "business_list_meetings",
        "GetListedMeeting",
        "business_get_meeting",
        &[],
        &[("meeting_id", "$response.body#/data/items/0/meeting_id")],
    ),
    (
        "business_list_reports",
        "GetListedReport",
        "business_get_report",
        &[],
        &[("report_id", "$response.body#/data/items/0/report_id")],
    ),
    (
        "admin_create_report",
        "GetReport",
        "business_get_report",
        &[],
        &[("report_id", "$response.body#/data/report_id")],
    ),
    (
        "admin_create_meeting",
        "GetCreatedMeeting",
        "business_get_meeting",
        &[],
        &[("meeting_id", "$response.body#/data/meeting_id")],
    ),
];

fn links_of(id: &str) -> Option<Value> {
    let mut out = Map::new();
    for (from, name, to, parameters, body) in LINKS {
        if *from != id {
            continue;
        }
        let mut link = json!({ "operationId": to });
        if let Some(object) = link.as_object_mut() {
            if !parameters.is_empty() {
                let map: Map<String, Value> = parameters
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), json!(v)))
                    .collect();
                object.insert("parameters".to_owned(), Value::Object(map));
            }
            if !body.is_empty() {
                let map: Map<String, Value> = body
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), json!(v)))
                    .collect();
                object.insert("requestBody".to_owned(), Value::Object(map));
            }
        }
        out.insert((*name).to_owned(), link);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn security(bff: bool) -> Value {
    if bff {
        json!([{ "serviceToken": [], "userId": [], "agentName": [], "threadId": [] }])
    } else {
        json!([{ "adminToken": [] }])
    }
}

fn build() -> Value {
    let mut generator = generator();
    let operations = operations(&mut generator);
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for op in &operations {
        let mut operation = json!({
            "operationId": op.id,
            "tags": [op.tag],
            "summary": op.summary,
            "description": op.description,
            "security": security(op.bff),
            "responses": responses(op),
        });
        if let Some(object) = operation.as_object_mut() {
            if !op.parameters.is_empty() {
                object.insert("parameters".to_owned(), Value::Array(op.parameters.clone()));
            }
            if let Some(request) = &op.request {
                object.insert(
                    "requestBody".to_owned(),
                    json!({ "required": true, "content": json_content(request.clone().to_value()) }),
                );
            }
        }
        paths
            .entry(op.path.clone())
            .or_default()
            .insert(op.method.to_ascii_lowercase(), operation);
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    // Every write's body may carry the approval of exactly that call.
    for op in operations.iter().filter(|op| op.approvable) {
        let name = op
            .request
            .as_ref()
            .and_then(|r| r.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next());
        if let Some(properties) = name
            .and_then(|name| schemas.get_mut(name))
            .and_then(|schema| schema.get_mut("properties"))
            .and_then(Value::as_object_mut)
        {
            properties.insert(
                "approval_id".to_owned(),
                json!({
                    "description": "The approval of exactly this call (same arguments), as an `approval_required` answer gave it, once a project owner or admin approved it.",
                    "type": "string",
                    "format": "uuid",
                }),
            );
        }
    }
    for schema in schemas.values_mut() {
        integer_bounds(schema);
    }
    for item in paths.values_mut() {
        for operation in item.values_mut() {
            integer_bounds(operation);
        }
    }
    schemas.insert(
        "ServiceAuthFailed".to_owned(),
        json!({
            "description": "The service gate's refusal: the service token is missing or wrong (a deployment problem, deliberately not an envelope).",
            "type": "object",
            "required": ["error"],
            "properties": { "error": { "const": "service auth failed" } },
            "additionalProperties": false,
        }),
    );
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "acdm-backend: Agent Tools BFF and operator API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every response is a ToolResponse envelope `{success, code, message, data, suggested_action}`; its HTTP status is the class of its code. Generated from the Rust types the handlers parse and send.",
        },
        "tags": [
            { "name": "nc", "description": "File primitives in the agent's project (`/agent-tools/nc/*`)" },
            { "name": "business", "description": "Business objects of the agent's project (`/agent-tools/business/*`)" },
            { "name": "project", "description": "Overview, statement of work and milestones (`/agent-tools/project/*`)" },
            { "name": "admin", "description": "The operator API (`/admin/*`)" },
        ],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "serviceToken": { "type": "apiKey", "in": "header", "name": headers::SERVICE_AUTH, "description": "The shared service token (ACDM_MCP_SERVICE_TOKEN)." },
                "userId": { "type": "apiKey", "in": "header", "name": headers::USER_ID, "description": "The acting user: must be a member of the agent's project." },
                "agentName": { "type": "apiKey", "in": "header", "name": headers::AGENT_NAME, "description": "The agent: its project is resolved from this name." },
                "threadId": { "type": "apiKey", "in": "header", "name": headers::THREAD_ID, "description": "The conversation thread, recorded with every write." },
                "adminToken": { "type": "http", "scheme": "bearer", "description": "The operator token (ACDM_ADMIN_TOKEN)." },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_of_every_family_and_of_the_operator_api_is_documented() {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        let mut expected: Vec<(String, String)> = Vec::new();
        expected.extend(
            NcOp::ALL
                .iter()
                .map(|op| (format!("/{}", op.path()), op.method().to_ascii_lowercase())),
        );
        expected.extend(
            BusinessOp::ALL
                .iter()
                .map(|op| (format!("/{}", op.path()), op.method().to_ascii_lowercase())),
        );
        expected.extend(
            ProjectOp::ALL
                .iter()
                .map(|op| (format!("/{}", op.path()), op.method().to_ascii_lowercase())),
        );
        expected.extend(
            AdminOp::ALL
                .iter()
                .map(|op| (op.path().to_owned(), op.method().to_ascii_lowercase())),
        );
        let documented: Vec<(String, String)> = paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .map(move |method| (path.clone(), method.clone()))
            })
            .collect();
        let mut want = expected.clone();
        want.sort();
        let mut got = documented;
        got.sort();
        assert_eq!(got, want);
        assert_eq!(want.len(), 24 + AdminOp::ALL.len());
    }

    #[test]
    fn every_link_joins_two_documented_operations() {
        let ids: Vec<String> = operations(&mut generator())
            .into_iter()
            .map(|op| op.id)
            .collect();
        for (from, name, to, ..) in LINKS {
            assert!(
                ids.iter().any(|id| id == from),
                "{name}: no operation {from}"
            );
            assert!(ids.iter().any(|id| id == to), "{name}: no operation {to}");
        }
    }

    #[test]
    fn every_reference_resolves_and_no_definition_is_left_behind() {
        let doc = document();
        let text = serde_json::to_string(doc).expect("serialises");
        assert!(!text.contains("#/$defs/"), "a $ref still points into $defs");
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let mut refs = Vec::new();
        collect_refs(doc, &mut refs);
        for r in refs {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("unexpected $ref {r}"));
            assert!(schemas.contains_key(name), "{r} has no definition");
        }
    }

    fn collect_refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "$ref" {
                        out.push(v.as_str().unwrap_or_default().to_owned());
                    } else {
                        collect_refs(v, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn each_failure_status_lists_the_codes_of_that_status_only() {
        for item in document()["paths"].as_object().expect("paths").values() {
            for op in item.as_object().expect("item").values() {
                for (status, response) in op["responses"].as_object().expect("responses") {
                    let schema = &response["content"]["application/json"]["schema"];
                    let envelope = schema.get("oneOf").and_then(|o| o.get(1)).unwrap_or(schema);
                    let Some(codes) = envelope["properties"]["code"]["enum"].as_array() else {
                        assert_eq!(status, "200");
                        continue;
                    };
                    for code in codes {
                        let code: ErrorCode = code
                            .as_str()
                            .unwrap_or_default()
                            .parse()
                            .expect("a known code");
                        // A body that is not JSON is a `validation_error` sent as 415.
                        if status == "415" {
                            assert_eq!(code, ErrorCode::ValidationError);
                        } else {
                            assert_eq!(
                                status,
                                &code.http_status().to_string(),
                                "{}",
                                op["operationId"]
                            );
                        }
                    }
                }
            }
        }
    }
}
