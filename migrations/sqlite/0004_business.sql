-- Business objects (spec §6.2): members' names, project meta, milestones,
-- meetings with attendees and files, reports with their transitions.
-- Every write to these tables goes through the journal, which keeps each
-- row's before-image in its event (user_storage_events) so it can be
-- reverted. Never edit a migration once released; add a new one.
-- Keep in step with migrations/postgres (same versions, same meaning).

ALTER TABLE project_members ADD COLUMN display_name TEXT;

-- One row per project once anything is set; no row reads as the defaults
-- (planning, no description, no dates, UTC).
CREATE TABLE project_meta (
    project_id   TEXT PRIMARY KEY NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    status       TEXT NOT NULL CHECK (status IN ('planning', 'active', 'on_hold', 'completed', 'closed')),
    description  TEXT NOT NULL,
    start_date   TEXT,                              -- YYYY-MM-DD
    end_date     TEXT,                              -- YYYY-MM-DD
    time_zone    TEXT NOT NULL,                     -- IANA name
    updated_at   TEXT NOT NULL,
    CHECK (start_date IS NULL OR end_date IS NULL OR end_date >= start_date)
);

CREATE TABLE milestones (
    project_id           TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    seq                  INTEGER NOT NULL CHECK (seq >= 1),
    title                TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    due_date             TEXT,                      -- YYYY-MM-DD
    status               TEXT NOT NULL CHECK (status IN ('planned', 'current', 'done')),
    acceptance_criteria  TEXT NOT NULL,             -- JSON array of strings
    closed_at            TEXT,
    closed_by            TEXT,
    PRIMARY KEY (project_id, seq)
);
-- At most one current milestone per project.
CREATE UNIQUE INDEX milestones_one_current ON milestones (project_id) WHERE status = 'current';
-- The calendar merges due dates into a window.
CREATE INDEX milestones_by_due_date ON milestones (project_id, due_date);

CREATE TABLE meetings (
    id          TEXT PRIMARY KEY NOT NULL,          -- random UUID
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    title       TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    starts_at   TEXT NOT NULL,
    ends_at     TEXT NOT NULL,
    location    TEXT,
    agenda      TEXT CHECK (agenda IS NULL OR length(agenda) <= 20000),
    notes       TEXT CHECK (notes IS NULL OR length(notes) <= 20000),
    version     BIGINT NOT NULL CHECK (version >= 1),
    created_by  TEXT,
    created_at  TEXT NOT NULL,
    updated_by  TEXT,
    updated_at  TEXT NOT NULL,
    CHECK (ends_at > starts_at)
);
-- list_meetings and the calendar: a project's meetings by start, keyset (starts_at, id).
CREATE INDEX meetings_by_start ON meetings (project_id, starts_at, id);

CREATE TABLE meeting_attendees (
    meeting_id  TEXT NOT NULL REFERENCES meetings (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    position    INTEGER NOT NULL,                   -- the order given
    PRIMARY KEY (meeting_id, user_id)
);

-- No ON DELETE CASCADE from meetings: a meeting's files are removed by the
-- same event as the meeting (rows and files), never by the database alone.
CREATE TABLE meeting_files (
    id            TEXT PRIMARY KEY NOT NULL,        -- random UUID
    meeting_id    TEXT NOT NULL REFERENCES meetings (id),
    project_id    TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    mount         TEXT NOT NULL,
    rel_path      TEXT NOT NULL,
    name          TEXT NOT NULL,
    size          BIGINT NOT NULL CHECK (size >= 0),
    etag          TEXT,
    content_type  TEXT,
    added_by      TEXT,
    added_at      TEXT NOT NULL,
    missing       BOOLEAN NOT NULL,
    checked_at    TEXT                              -- last time the sweep looked
);
-- One row per file: two meetings never share one.
CREATE UNIQUE INDEX meeting_files_one_per_path ON meeting_files (project_id, mount, rel_path);
CREATE INDEX meeting_files_by_meeting ON meeting_files (meeting_id, added_at, id);
-- The sweep visits the least recently checked first.
CREATE INDEX meeting_files_by_check ON meeting_files (checked_at);

CREATE TABLE reports (
    id            TEXT PRIMARY KEY NOT NULL,        -- random UUID
    project_id    TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    title         TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    kind          TEXT NOT NULL CHECK (kind IN ('weekly', 'monthly', 'milestone', 'other')),
    period_start  TEXT NOT NULL,                    -- YYYY-MM-DD
    period_end    TEXT NOT NULL,                    -- YYYY-MM-DD
    body          TEXT NOT NULL CHECK (length(body) <= 100000),
    status        TEXT NOT NULL CHECK (status IN ('draft', 'submitted', 'approved', 'rejected')),
    version       BIGINT NOT NULL CHECK (version >= 1),
    created_by    TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    CHECK (period_end >= period_start)
);
-- list_reports: newest first, all or by status, keyset (created_at, id).
CREATE INDEX reports_by_created ON reports (project_id, created_at, id);
CREATE INDEX reports_by_status ON reports (project_id, status, created_at, id);

CREATE TABLE report_transitions (
    report_id    TEXT NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    from_status  TEXT NOT NULL CHECK (from_status IN ('draft', 'submitted', 'approved', 'rejected')),
    to_status    TEXT NOT NULL CHECK (to_status IN ('draft', 'submitted', 'approved', 'rejected')),
    user_id      TEXT,
    comment      TEXT,
    at           TEXT NOT NULL,
    PRIMARY KEY (report_id, seq)
);
