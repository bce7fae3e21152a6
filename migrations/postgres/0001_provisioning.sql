-- Provisioning: projects, members, mounts, and the agent mounts the scope
-- resolver reads. Never edit a migration once released; add a new one.
-- Keep in step with migrations/sqlite (same versions, same meaning).

CREATE TABLE projects (
    id          TEXT PRIMARY KEY,                   -- random UUID
    slug        TEXT NOT NULL UNIQUE,               -- [a-z0-9-]{1,63}
    name        TEXT NOT NULL UNIQUE,               -- display and folder name, NFC
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE project_members (
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, user_id)
);

CREATE TABLE project_mounts (
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,                      -- `project` is the default
    root        TEXT NOT NULL,                      -- absolute path in the file store
    writable    BOOLEAN NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE TABLE agent_mounts (
    id            TEXT PRIMARY KEY,                 -- random UUID
    agent_name    TEXT NOT NULL,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    role          TEXT NOT NULL CHECK (role IN ('manager')),
    mounted_at    TIMESTAMPTZ NOT NULL,
    unmounted_at  TIMESTAMPTZ                       -- NULL while active
);

-- An agent manages at most one project at a time.
CREATE UNIQUE INDEX agent_mounts_one_active ON agent_mounts (agent_name) WHERE unmounted_at IS NULL;
CREATE INDEX agent_mounts_by_project ON agent_mounts (project_id);

-- Bumped in the same transaction as every agent mount change; each running
-- server polls it and drops its scope cache when it moves.
CREATE TABLE scope_epoch (
    id     SMALLINT PRIMARY KEY CHECK (id = 1),
    epoch  BIGINT NOT NULL
);
INSERT INTO scope_epoch (id, epoch) VALUES (1, 0);
