-- Servers cache each agent's scope: the project, its mounts and its
-- members' roles (no database round trip per call). Every change of a
-- mount or a member moves the scope epoch in the same transaction, as
-- agent-mount changes already do, so every server drops its cache (at once
-- on PostgreSQL: the epoch's change is announced). Triggers, not
-- application code: a change made with the CLI, an import or by hand
-- moves it too. Never edit a migration once released; add a new one. Keep
-- in step with migrations/sqlite.

CREATE FUNCTION acdm_bump_scope_epoch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

-- Only what a scope holds: a member's display name or a row's updated_at
-- changing alone leaves every cache as it is.
CREATE TRIGGER project_mounts_bump_scope_epoch
    AFTER INSERT OR DELETE OR UPDATE OF name, root, writable ON project_mounts
    FOR EACH STATEMENT EXECUTE FUNCTION acdm_bump_scope_epoch();

CREATE TRIGGER project_members_bump_scope_epoch
    AFTER INSERT OR DELETE OR UPDATE OF user_id, role ON project_members
    FOR EACH STATEMENT EXECUTE FUNCTION acdm_bump_scope_epoch();
