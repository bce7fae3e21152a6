-- Several replicas (spec §9): rate limits shared by the deployment, and
-- changes every server follows at once. Never edit a migration once
-- released; add a new one. Keep in step with migrations/sqlite.

-- One token bucket per key (an agent's calls, an agent's writes, an MCP
-- tool), as GCRA keeps it: the theoretical arrival time, in microseconds
-- of the database's clock. Replicas lease a few calls at a time from it.
-- Unlogged: a bucket lost in a crash only forgets who called recently.
CREATE UNLOGGED TABLE rate_buckets (
    key      TEXT PRIMARY KEY CHECK (char_length(key) <= 300),
    tat_us   BIGINT NOT NULL,
    granted  INTEGER NOT NULL          -- calls the last lease granted
);
CREATE INDEX rate_buckets_by_tat ON rate_buckets (tat_us);

-- Every committed change to the agent mounts (the scope epoch) or to the
-- operator's switches is announced on the channel `acdm_changes`, so each
-- server reacts within milliseconds instead of at its next poll. Triggers,
-- not application code: a change made with the CLI, by another version or
-- by hand is announced too. The payload is the table's name.
CREATE FUNCTION acdm_announce_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('acdm_changes', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER scope_epoch_announce
    AFTER INSERT OR UPDATE ON scope_epoch
    FOR EACH STATEMENT EXECUTE FUNCTION acdm_announce_change();

CREATE TRIGGER runtime_switches_announce
    AFTER INSERT OR UPDATE OR DELETE ON runtime_switches
    FOR EACH STATEMENT EXECUTE FUNCTION acdm_announce_change();
