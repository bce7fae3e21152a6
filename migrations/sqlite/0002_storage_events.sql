-- Storage events (every write and its undo, spec §6.4) and the run-time
-- switches operators flip without a restart. Never edit a migration once
-- released; add a new one.

CREATE TABLE user_storage_events (
    id           TEXT PRIMARY KEY NOT NULL,         -- random UUID, chosen by the caller
    actor_kind   TEXT NOT NULL CHECK (actor_kind IN ('via_agent', 'direct', 'system')),
    user_id      TEXT,
    agent_name   TEXT,
    thread_id    TEXT,
    project_id   TEXT NOT NULL REFERENCES projects (id),
    op           TEXT NOT NULL,                     -- nc_write, nc_delete, nc_move, revert
    target       TEXT NOT NULL,                     -- for people: `project:/notes/a.md`
    params       TEXT NOT NULL,                     -- JSON object, never file contents
    plan         TEXT NOT NULL,                     -- JSON array of steps
    undo         TEXT NOT NULL,                     -- JSON array of steps
    status       TEXT NOT NULL CHECK (status IN ('pending', 'applied', 'failed', 'reverted')),
    result       TEXT,                              -- JSON, once applied
    error        TEXT,                              -- our words, once failed
    reverts      TEXT REFERENCES user_storage_events (id),  -- for a revert: the event it undoes
    reverted_by  TEXT,                              -- the revert that claimed this event
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- Listing newest first, per project, with a (created_at, id) cursor.
CREATE INDEX user_storage_events_by_project ON user_storage_events (project_id, created_at, id);
-- The start-up reconciler's pending intents.
CREATE INDEX user_storage_events_by_status ON user_storage_events (status, created_at);
CREATE INDEX user_storage_events_by_agent ON user_storage_events (agent_name, created_at);

-- Operator overrides (the kill switch). No row means no override: the
-- configured default applies.
CREATE TABLE runtime_switches (
    name        TEXT PRIMARY KEY NOT NULL,
    enabled     BOOLEAN NOT NULL,
    changed_at  TEXT NOT NULL,
    changed_by  TEXT,
    reason      TEXT
);
