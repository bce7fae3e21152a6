-- Several replicas (spec §9): rate limits shared by the deployment. Never
-- edit a migration once released; add a new one. Keep in step with
-- migrations/postgres (which also announces changes with NOTIFY; SQLite
-- servers follow them by polling).

-- One token bucket per key (an agent's calls, an agent's writes, an MCP
-- tool), as GCRA keeps it: the theoretical arrival time, in microseconds.
CREATE TABLE rate_buckets (
    key      TEXT PRIMARY KEY CHECK (length(key) <= 300),
    tat_us   INTEGER NOT NULL,
    granted  INTEGER NOT NULL          -- calls the last lease granted
);
CREATE INDEX rate_buckets_by_tat ON rate_buckets (tat_us);
