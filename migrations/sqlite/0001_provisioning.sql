-- Provisioning: projects, members, mounts, and the agent mounts the scope
-- resolver reads. Never edit a migration once released; add a new one.

CREATE TABLE projects (
    id          TEXT PRIMARY KEY NOT NULL,          -- random UUID
    slug        TEXT NOT NULL UNIQUE,               -- [a-z0-9-]{1,63}
    name        TEXT NOT NULL UNIQUE,               -- display and folder name, NFC
    created_at  TEXT NOT NULL
);

CREATE TABLE project_members (
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, user_id)
);

CREATE TABLE project_mounts (
    project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,                      -- `project` is the default
    root        TEXT NOT NULL,                      -- absolute path in the file store
    writable    BOOLEAN NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE TABLE agent_mounts (
    id            TEXT PRIMARY KEY NOT NULL,        -- random UUID
    agent_name    TEXT NOT NULL,
    project_id    TEXT NOT NULL REFERENCES projects (id),
    role          TEXT NOT NULL CHECK (role IN ('manager')),
    mounted_at    TEXT NOT NULL,
    unmounted_at  TEXT                              -- NULL while active
);

-- An agent manages at most one project at a time.
CREATE UNIQUE INDEX agent_mounts_one_active ON agent_mounts (agent_name) WHERE unmounted_at IS NULL;
CREATE INDEX agent_mounts_by_project ON agent_mounts (project_id);

-- Bumped in the same transaction as every agent mount change; each running
-- server polls it and drops its scope cache when it moves.
CREATE TABLE scope_epoch (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    epoch  BIGINT NOT NULL
);
INSERT INTO scope_epoch (id, epoch) VALUES (1, 0);
