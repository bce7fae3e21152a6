//! The BFF's wire contract, committed: the JSON Schema of every nc and
//! business and project operation's request and success data, with the access each
//! needs (spec §6.5), generated from the very types the
//! BFF parses and the harness client sends. A change to a wire type shows
//! up as a diff of `tests/snapshots/{nc,business,project}-wire.json`, updated deliberately
//! with `ACDM_UPDATE_SNAPSHOTS=1`.

use std::path::Path;

use acdm_core::business::wire::BusinessOp;
use acdm_core::nc::NcOp;
use acdm_core::project::ProjectOp;
use serde_json::{Value, json};

/// Each operation of a family as the snapshot records it.
macro_rules! family {
    ($ops:expr) => {
        Value::Array(
            $ops.iter()
                .map(|op| {
                    json!({
                        "op": op.as_str(),
                        "path": op.path(),
                        "method": op.method(),
                        "writes": op.writes(),
                        "access": op.access(),
                        "request": op.request_schema(),
                        "data": op.data_schema(),
                    })
                })
                .collect(),
        )
    };
}

fn assert_snapshot(name: &str, ops: &Value) {
    acdm_test_support::snapshot::assert_json(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}-wire.json")),
        ops,
    );
}

#[test]
fn the_nc_wire_schemas_match_the_committed_snapshot() {
    assert_snapshot("nc", &family!(NcOp::ALL));
}

#[test]
fn the_business_wire_schemas_match_the_committed_snapshot() {
    assert_snapshot("business", &family!(BusinessOp::ALL));
}

#[test]
fn the_project_wire_schemas_match_the_committed_snapshot() {
    assert_snapshot("project", &family!(ProjectOp::ALL));
}
