-- Human approval of risky agent writes: the requests and their decisions,
-- each project's own list of operations that need approval, and the
-- outbox of approval notifications (written in the request's transaction,
-- delivered by whichever replica leases the row first). Never edit a
-- migration once released; add a new one.
-- Keep in step with migrations/sqlite (same versions, same meaning).

CREATE TABLE approvals (
    id            TEXT PRIMARY KEY,                  -- random UUID
    project_id    TEXT NOT NULL REFERENCES projects (id),
    op            TEXT NOT NULL,                     -- a write's label: nc.delete, …
    arguments     TEXT NOT NULL,                     -- JSON: the call as its request type writes it
    requested_by  TEXT NOT NULL,                     -- the acting user
    agent_name    TEXT NOT NULL,
    thread_id     TEXT NOT NULL,
    preview       TEXT NOT NULL,                     -- JSON: what would change, with etags/versions
    status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'used', 'voided')),
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    decided_by    TEXT,
    decided_at    TIMESTAMPTZ,
    note          TEXT,                              -- the approver's note, or why rejected or voided
    event_id      TEXT,                              -- the write's storage event, once used
    updated_at    TIMESTAMPTZ NOT NULL
);

-- Listing newest first, per project or per status, with a (created_at, id) cursor.
CREATE INDEX approvals_by_project ON approvals (project_id, created_at, id);
CREATE INDEX approvals_by_status ON approvals (status, created_at, id);
-- One approval per event: a write names at most one approval.
CREATE UNIQUE INDEX approvals_by_event ON approvals (event_id);

-- A project's own policy; no row: the deployment's ACDM_APPROVAL_REQUIRED_OPS.
CREATE TABLE approval_policies (
    project_id  TEXT PRIMARY KEY REFERENCES projects (id),
    ops         TEXT NOT NULL,                       -- comma-separated labels, may be empty
    changed_at  TIMESTAMPTZ NOT NULL,
    changed_by  TEXT
);

-- Notifications of new requests, delivered at least once.
CREATE TABLE approval_outbox (
    id               TEXT PRIMARY KEY,               -- the webhook-id: stable across retries
    approval_id      TEXT NOT NULL REFERENCES approvals (id),
    payload          TEXT NOT NULL,                  -- the JSON body, signed as sent
    created_at       TIMESTAMPTZ NOT NULL,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    delivered_at     TIMESTAMPTZ,
    last_error       TEXT,                           -- our words: a status or a network failure
    lease_until      TIMESTAMPTZ                              -- a replica is sending it until then
);
CREATE INDEX approval_outbox_due ON approval_outbox (delivered_at, next_attempt_at);
