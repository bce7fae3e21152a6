-- The project family (spec §6.3): the statement of work, and an index for
-- the overview's "last agent writes". Never edit a migration once
-- released; add a new one. Keep in step with migrations/postgres.

-- One row per project once written; no row reads as an empty statement.
-- Written only through the journal (its event keeps the before-image).
CREATE TABLE statements_of_work (
    project_id    TEXT PRIMARY KEY NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    summary       TEXT NOT NULL CHECK (length(summary) <= 20000),
    deliverables  TEXT NOT NULL,                    -- JSON array of {title, description, milestone}
    updated_at    TEXT NOT NULL
);

-- The overview lists a project's last writes by agents, newest first.
CREATE INDEX user_storage_events_by_project_actor
    ON user_storage_events (project_id, actor_kind, created_at);

-- The overview's change stamp: the project's events counted by status.
CREATE INDEX user_storage_events_by_project_status
    ON user_storage_events (project_id, status);
