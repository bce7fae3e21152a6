//! The tool catalog against the real BFF (spec §7): for every tool, cases
//! are generated from its input schema — a minimal and a full instance,
//! each optional field left out, each field given values of every JSON
//! type, the bounds crossed, malformed times and ids, an unknown field —
//! classified by a JSON Schema validator (the `jsonschema` crate, formats
//! asserted), and sent over a real socket with the tool's method and path.
//! A case the schema accepts must never be a `validation_error`; a case it
//! refuses must be one. So a schema cannot promise more, or less, than the
//! server takes.

use std::collections::BTreeSet;

use acdm_core::{AgentName, Identity, ThreadId, ToolResponse, UserId};
use acdm_harness_client::{ToolDefinition, catalog};
use chrono::{TimeDelta, Utc};
use serde_json::{Map, Value, json};

use crate::business::add_member;
use crate::dav::{ALPHA, NcEnv, THREAD};

/// The acting user: an owner, so no role check hides a validation.
const OWNER: &str = "u-owner";

/// Values for a property whose meaning a schema cannot carry.
fn hint(property: &str) -> Option<Value> {
    match property {
        "mount" => Some(json!("project")),
        // Opaque: only a `next_cursor` the server gave is one.
        "cursor" => None,
        _ => None,
    }
}

/// The node's schema types other than `null` (its first alternative for
/// `anyOf`/`oneOf`).
fn types(node: &Value) -> Vec<String> {
    match node.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A value the node accepts, for property `name`.
fn valid(name: &str, node: &Value) -> Option<Value> {
    if let Some(value) = hint(name) {
        return Some(value);
    }
    if name == "cursor" {
        return None;
    }
    if let Some(c) = node.get("const") {
        return Some(c.clone());
    }
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        return values.iter().find(|v| !v.is_null()).cloned();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = node.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .filter(|o| o.get("type") != Some(&json!("null")))
                .find_map(|o| valid(name, o));
        }
    }
    let base = (Utc::now() + TimeDelta::days(2))
        .date_naive()
        .and_hms_opt(9, 0, 0)
        .unwrap()
        .and_utc();
    match types(node).first().map(String::as_str) {
        Some("string") => Some(match node.get("format").and_then(Value::as_str) {
            // Ends come an hour after starts.
            Some("date-time") if name == "to" || name.starts_with("end") => {
                json!((base + TimeDelta::hours(1)).to_rfc3339())
            }
            Some("date-time") => json!(base.to_rfc3339()),
            Some("date") => json!(base.date_naive().to_string()),
            Some("uuid") => json!(uuid::Uuid::new_v4().to_string()),
            _ => {
                let min = node.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                let max = node
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::MAX);
                let mut text = name.to_owned();
                while (text.chars().count() as u64) < min {
                    text.push('x');
                }
                json!(
                    text.chars()
                        .take(usize::try_from(max).unwrap_or(usize::MAX))
                        .collect::<String>()
                )
            }
        }),
        Some("integer") => Some(json!(
            node.get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0)
        )),
        Some("boolean") => Some(json!(true)),
        Some("array") => {
            let item = node.get("items").cloned().unwrap_or(json!({}));
            // List items of user ids: the project's member.
            let value = if name == "attendees" {
                Some(json!(crate::dav::USER))
            } else {
                valid(name, &item)
            };
            Some(json!([value?]))
        }
        Some("object") => Some(instance(node, true)),
        _ => None,
    }
}

/// An instance of an object schema: its required properties, or all of
/// them (`full`).
fn instance(schema: &Value, full: bool) -> Value {
    let required = required(schema);
    let mut out = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, node) in properties {
            if (full || required.contains(name))
                && let Some(value) = valid(name, node)
            {
                out.insert(name.clone(), value);
            }
        }
    }
    Value::Object(out)
}

fn required(schema: &Value) -> BTreeSet<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Every case for `tool`: instances and their mutations, each once.
fn cases(tool: &ToolDefinition) -> Vec<(String, Value)> {
    let schema = &tool.input_schema;
    let minimal = instance(schema, false);
    let full = instance(schema, true);
    let mut out = vec![
        ("minimal".to_owned(), minimal),
        ("full".to_owned(), full.clone()),
    ];
    let mut unknown = full.clone();
    unknown["zz_unknown"] = json!(1);
    out.push(("unknown field".into(), unknown));
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, node) in &properties {
        let mut without = full.clone();
        if without.as_object_mut().unwrap().remove(name).is_some() {
            out.push((format!("without {name}"), without));
        }
        let mut values = vec![
            json!(null),
            json!(true),
            json!(12345),
            json!(-1),
            json!(0),
            json!(1.5),
            json!("text"),
            json!(""),
            json!([]),
            json!({}),
            json!("2026-12-01T09:00:00"),
            json!("not-a-uuid"),
        ];
        for bound in ["minimum", "maximum"] {
            if let Some(n) = node.get(bound).and_then(Value::as_i64) {
                values.extend([json!(n - 1), json!(n), json!(n + 1)]);
            }
        }
        for bound in ["minLength", "maxLength"] {
            if let Some(n) = node.get(bound).and_then(Value::as_u64) {
                let n = usize::try_from(n).unwrap();
                values.extend([
                    json!("a".repeat(n.saturating_sub(1))),
                    json!("a".repeat(n + 1)),
                ]);
            }
        }
        for value in values {
            let mut case = full.clone();
            case[name.as_str()] = value.clone();
            out.push((format!("{name} = {}", short(&value)), case));
        }
    }
    let mut seen = BTreeSet::new();
    out.retain(|(_, case)| seen.insert(case.to_string()));
    out
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 40 {
        format!("{}… ({} chars)", &text[..30], text.len())
    } else {
        text
    }
}

async fn send(env: &NcEnv, tool: &ToolDefinition, body: &Value) -> Value {
    let client = env.harness.as_identity(Identity::new(
        UserId::parse(OWNER).unwrap(),
        AgentName::parse(ALPHA).unwrap(),
        ThreadId::parse(THREAD).unwrap(),
    ));
    let answer: ToolResponse<Value> = if tool.method == "GET" && body == &json!({}) {
        client.get(tool.path).await
    } else if tool.method == "GET" {
        // A GET with a body: what a generic client might send.
        env.raw_get_with_body(tool.path, OWNER, body).await
    } else {
        client.call(tool.path, body).await
    };
    serde_json::to_value(&answer).unwrap()
}

#[tokio::test]
async fn every_tool_schema_accepts_what_the_bff_accepts_and_refuses_what_it_refuses() {
    let Some(env) = NcEnv::start().await else {
        return;
    };
    add_member(&env, "alpha", OWNER, "owner").await;
    let mut disagreements = Vec::new();
    let mut counts = Vec::new();
    for tool in catalog() {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&tool.input_schema)
            .unwrap_or_else(|e| panic!("{}: not a valid schema: {e}", tool.name));
        let (mut accepted, mut refused) = (0, 0);
        for (label, case) in cases(&tool) {
            let schema_accepts = validator.is_valid(&case);
            let answer = send(&env, &tool, &case).await;
            let code = answer["code"].as_str().unwrap_or("?").to_owned();
            let bff_refuses = code == "validation_error";
            if schema_accepts {
                accepted += 1;
            } else {
                refused += 1;
            }
            if schema_accepts == bff_refuses {
                disagreements.push(format!(
                    "{} [{label}] {case}: schema {}, BFF {code}: {}",
                    tool.name,
                    if schema_accepts { "accepts" } else { "refuses" },
                    answer["message"]
                ));
            }
        }
        assert!(accepted >= 1, "{}: no case the schema accepts", tool.name);
        assert!(refused >= 1, "{}: no case the schema refuses", tool.name);
        counts.push(format!("{} {accepted}+{refused}", tool.name));
    }
    println!(
        "cases per tool (schema-valid + schema-invalid): {}",
        counts.join(", ")
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert_eq!(counts.len(), 24, "every operation has its tool");
    env.stop().await;
}
