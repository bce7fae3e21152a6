-- Servers cache each agent's scope: the project, its mounts and its
-- members' roles (no database round trip per call). Every change of a
-- mount or a member moves the scope epoch in the same transaction, as
-- agent-mount changes already do, so every server drops its cache within
-- its poll interval. Triggers, not application code: a change made with
-- the CLI, an import or by hand moves it too. Never edit a migration once
-- released; add a new one. Keep in step with migrations/postgres.

CREATE TRIGGER project_mounts_insert_bump_scope_epoch AFTER INSERT ON project_mounts
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

-- Only what a scope holds: a member's display name or a row's updated_at
-- changing alone leaves every cache as it is.
CREATE TRIGGER project_mounts_update_bump_scope_epoch
    AFTER UPDATE OF name, root, writable ON project_mounts
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER project_mounts_delete_bump_scope_epoch AFTER DELETE ON project_mounts
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER project_members_insert_bump_scope_epoch AFTER INSERT ON project_members
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER project_members_update_bump_scope_epoch
    AFTER UPDATE OF user_id, role ON project_members
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER project_members_delete_bump_scope_epoch AFTER DELETE ON project_members
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
