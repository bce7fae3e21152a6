//! The wire types of the nc file primitives (spec §6.1,
//! `POST /agent-tools/nc/{op}`): one request and one response `data` type
//! per operation, shared by the BFF (which parses requests strictly and
//! sends these responses) and the harness client (which sends the requests
//! and reads the responses), so the two sides cannot drift.
//!
//! Requests refuse unknown fields: a stray `project_id` is a
//! `validation_error`, never silently ignored. Optional fields are left out
//! when serialised, so a client sends only what it sets.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::EventId;

crate::ops::operations!(
    /// The nc operations, in the order they are documented; each name is
    /// also the last segment of its path (`agent-tools/nc/<name>`).
    NcOp = "nc" {
        /// The project's mounts.
        ListMounts = "list_mounts", read;
        /// One folder level.
        List = "list", read;
        /// A window of a file.
        Read = "read", read;
        /// Files inside the project's mounts.
        Search = "search", read;
        /// Create or overwrite a file.
        Write = "write", write;
        /// Delete (a dry run by default).
        Delete = "delete", write;
        /// Move or rename.
        Move = "move", write;
    }
);

impl NcOp {
    /// What the acting user's role must grant (spec §6.5): reads for
    /// viewers and up, writes for members and up.
    pub const fn access(self) -> crate::domain::Access {
        if self.writes() {
            crate::domain::Access::Contribute
        } else {
            crate::domain::Access::Read
        }
    }

    /// The JSON Schema of the operation's request body, generated from the
    /// very type the BFF parses.
    pub fn request_schema(self) -> schemars::Schema {
        match self {
            Self::ListMounts => schemars::schema_for!(ListMountsRequest),
            Self::List => schemars::schema_for!(ListRequest),
            Self::Read => schemars::schema_for!(ReadRequest),
            Self::Search => schemars::schema_for!(SearchRequest),
            Self::Write => schemars::schema_for!(WriteRequest),
            Self::Delete => schemars::schema_for!(DeleteRequest),
            Self::Move => schemars::schema_for!(MoveRequest),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn request_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::ListMounts => generator.subschema_for::<ListMountsRequest>(),
            Self::List => generator.subschema_for::<ListRequest>(),
            Self::Read => generator.subschema_for::<ReadRequest>(),
            Self::Search => generator.subschema_for::<SearchRequest>(),
            Self::Write => generator.subschema_for::<WriteRequest>(),
            Self::Delete => generator.subschema_for::<DeleteRequest>(),
            Self::Move => generator.subschema_for::<MoveRequest>(),
        }
    }

    /// The JSON Schema of the `data` of its success.
    pub fn data_schema(self) -> schemars::Schema {
        match self {
            Self::ListMounts => schemars::schema_for!(MountsData),
            Self::List => schemars::schema_for!(ListData),
            Self::Read => schemars::schema_for!(ReadData),
            Self::Search => schemars::schema_for!(SearchData),
            Self::Write => schemars::schema_for!(WriteData),
            Self::Delete => schemars::schema_for!(DeleteData),
            Self::Move => schemars::schema_for!(MoveData),
        }
    }

    /// The same schema as a subschema of `generator` (a `$ref` to its
    /// definitions for named types), for documents that collect every
    /// operation's types in one place (the OpenAPI document).
    pub fn data_subschema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self {
            Self::ListMounts => generator.subschema_for::<MountsData>(),
            Self::List => generator.subschema_for::<ListData>(),
            Self::Read => generator.subschema_for::<ReadData>(),
            Self::Search => generator.subschema_for::<SearchData>(),
            Self::Write => generator.subschema_for::<WriteData>(),
            Self::Delete => generator.subschema_for::<DeleteData>(),
            Self::Move => generator.subschema_for::<MoveData>(),
        }
    }
}

/// How file content travels: UTF-8 text, or base64 of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// UTF-8 text.
    #[default]
    Text,
    /// Base64 of binary bytes.
    Base64,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// `list_mounts`: no fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListMountsRequest {}

/// One mount of the project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MountInfo {
    /// Its name (`project` is the default mount).
    pub name: String,
    /// False for read-only mounts.
    pub writable: bool,
}

/// `list_mounts` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MountsData {
    /// The project's mounts, by name.
    pub mounts: Vec<MountInfo>,
}

/// `list`: one folder level.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// The folder, relative to the mount root (`""` for the root).
    #[serde(default)]
    pub rel_path: String,
    /// The mount (default `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
}

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EntryInfo {
    /// Its name.
    pub name: String,
    /// Its path relative to the mount root.
    pub rel_path: String,
    /// True for folders.
    pub is_dir: bool,
    /// Bytes, for files.
    pub size: Option<u64>,
    /// Last modification, when known.
    pub modified: Option<DateTime<Utc>>,
    /// The etag to pass as `if_match`, when known.
    pub etag: Option<String>,
}

/// `list` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListData {
    /// The mount listed.
    pub mount: String,
    /// The folder listed.
    pub rel_path: String,
    /// Its entries, by name.
    pub entries: Vec<EntryInfo>,
    /// True when there were more entries than one answer holds.
    pub truncated: bool,
}

/// `read`: a window of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The file, relative to the mount root.
    pub rel_path: String,
    /// The mount (default `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
    /// First byte to return.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
    /// Most bytes to return (the server's default and cap apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_bytes: Option<u64>,
    /// `text` (the default): a document (`docx`, `xlsx`, `pptx`, `odt`,
    /// `ods`, `odp`, `pdf`, `html`) is read as its text, in Markdown;
    /// `raw`: its exact bytes, as any other file.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub read_as: Option<ReadAs>,
}

/// How `read` returns a document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadAs {
    /// A document's text, in Markdown (other files as they are).
    #[default]
    Text,
    /// The file's exact bytes, whatever its format.
    Raw,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// `read` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadData {
    /// The mount read.
    pub mount: String,
    /// The file read.
    pub rel_path: String,
    /// `text` or `base64`.
    pub encoding: Encoding,
    /// The bytes, as text or base64.
    pub content: String,
    /// The size of what is read, when known: the file's, or for a
    /// document read as text (`extracted_from`) the text's, which `offset`
    /// and `next_offset` count in too.
    pub size: Option<u64>,
    /// For a document read as text: the format its text was extracted from
    /// (`docx`, `xlsx`, `pptx`, `odt`, `ods`, `odp`, `pdf`, `html`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_from: Option<String>,
    /// For a document read as text: what to know about the extraction (a
    /// fallback extractor was used, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extraction_notes: Vec<String>,
    /// For a document read as text: the file's own size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size: Option<u64>,
    /// The file's etag, when known.
    pub etag: Option<String>,
    /// The MIME type, when known.
    pub content_type: Option<String>,
    /// First byte of `content` in the file.
    pub offset: u64,
    /// Bytes of the file `content` covers.
    pub returned_bytes: u64,
    /// True when the file continues after this window.
    pub truncated: bool,
    /// Where to continue (pass it as `offset`), when truncated.
    pub next_offset: Option<u64>,
}

/// `search`: files inside the project's mounts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// What to look for (1–500 characters).
    #[schemars(length(min = 1, max = 500))]
    pub query: String,
    /// Only this mount (default: every mount).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
    /// Most hits (1–100, default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HitInfo {
    /// The mount it is in.
    pub mount: String,
    /// Its path relative to that mount.
    pub rel_path: String,
    /// Its absolute path in the file store (empty from a server that does
    /// not send it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// True for folders, when known.
    pub is_dir: Option<bool>,
    /// Text around the best match, the matched words in `**…**`, when
    /// there is one.
    pub snippet: Option<String>,
    /// The matching line, when the upstream's search gives one.
    pub line: Option<u64>,
    /// Relevance (BM25: higher is better, comparable within one answer),
    /// for hits of the content index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Last change (RFC 3339), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    /// The document format its text was read from (`docx`, `pdf`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_from: Option<String>,
}

/// `search` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchData {
    /// The hits: best first when the content index answered.
    pub hits: Vec<HitInfo>,
    /// How many.
    pub returned: usize,
    /// Every matching file, when the content index answered (the hits are
    /// the best of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_count: Option<u64>,
    /// `index` (file contents, ranked) or `upstream` (the file store's own
    /// search, which may match names only: while the index is first being
    /// built; empty from a server that does not say).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub searched: String,
    /// Ways to search better, when there were fewer than three hits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
}

/// `write`: create or overwrite a whole file (parents are created).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The file, relative to the mount root.
    pub rel_path: String,
    /// The content, as text or base64 (see `encoding`).
    pub content: String,
    /// How `content` is encoded (default `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// Only overwrite when the file still has this etag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub if_match: Option<String>,
    /// The mount (default `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
}

/// `write` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WriteData {
    /// The mount written.
    pub mount: String,
    /// The file written.
    pub rel_path: String,
    /// True when the file did not exist before.
    pub created: bool,
    /// Bytes written.
    pub size: usize,
    /// The new etag, when known.
    pub etag: Option<String>,
    /// The storage event recording the write.
    pub event_id: EventId,
}

/// `delete`: a dry run unless `dry_run` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    /// The file or folder, relative to the mount root.
    pub rel_path: String,
    /// The mount (default `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
    /// Only report what would be removed (the default).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub dry_run: bool,
}

impl Default for DeleteRequest {
    fn default() -> Self {
        Self {
            rel_path: String::new(),
            mount: None,
            dry_run: true,
        }
    }
}

/// One item a delete would remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PreviewEntry {
    /// Its path relative to the mount root.
    pub rel_path: String,
    /// True for folders.
    pub is_dir: bool,
    /// Bytes, for files.
    pub size: Option<u64>,
    /// Its current etag, when the store gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

/// `delete` data: the preview for a dry run, the event for a real one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteData {
    /// True for a dry run (nothing changed).
    pub dry_run: bool,
    /// The mount.
    pub mount: String,
    /// The item.
    pub rel_path: String,
    /// Dry run: what would be removed (the item first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would_delete: Option<Vec<PreviewEntry>>,
    /// Dry run: how many items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// Dry run: true when the list stops short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// Real delete: the storage event (the item is kept in the trash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
}

/// `move`: rename or move a file or folder inside a mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    /// The item, relative to the mount root.
    pub from_rel_path: String,
    /// Where it goes.
    pub to_rel_path: String,
    /// Replace an existing destination (kept in the trash); default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub overwrite: bool,
    /// The mount (default `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"))]
    pub mount: Option<String>,
}

/// `move` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MoveData {
    /// The mount.
    pub mount: String,
    /// Where the item was.
    pub from_rel_path: String,
    /// Where it is now.
    pub to_rel_path: String,
    /// True when an existing destination was replaced.
    pub overwritten: bool,
    /// The storage event recording the move.
    pub event_id: EventId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nc_operations_have_their_wire_names_paths_and_kinds() {
        let names: Vec<&str> = NcOp::ALL.iter().map(|op| op.as_str()).collect();
        assert_eq!(
            names,
            [
                "list_mounts",
                "list",
                "read",
                "search",
                "write",
                "delete",
                "move"
            ]
        );
        assert_eq!(NcOp::Read.path(), "agent-tools/nc/read");
        assert_eq!("move".parse::<NcOp>(), Ok(NcOp::Move));
        let writes: Vec<NcOp> = NcOp::ALL.iter().copied().filter(|op| op.writes()).collect();
        assert_eq!(writes, [NcOp::Write, NcOp::Delete, NcOp::Move]);
        let unknown = "rename".parse::<NcOp>().unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "no nc operation `rename`; the operations are: list_mounts, list, read, search, write, delete, move"
        );
    }

    #[test]
    fn requests_send_only_what_is_set_and_refuse_strangers() {
        let read = ReadRequest {
            rel_path: "a.md".into(),
            ..ReadRequest::default()
        };
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::json!({ "rel_path": "a.md" })
        );
        let delete: DeleteRequest = serde_json::from_str(r#"{"rel_path":"a"}"#).unwrap();
        assert!(
            delete.dry_run,
            "a delete is a dry run unless told otherwise"
        );
        let real = DeleteRequest {
            dry_run: false,
            ..DeleteRequest::default()
        };
        assert_eq!(serde_json::to_value(&real).unwrap()["dry_run"], false);
        let stray = serde_json::from_str::<ListRequest>(r#"{"rel_path":"","project_id":"b"}"#);
        assert!(stray.unwrap_err().to_string().contains("project_id"));
    }
}
