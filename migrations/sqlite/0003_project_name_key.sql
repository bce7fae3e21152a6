-- Project names are unique regardless of case: on a case-insensitive file
-- store `Alpha`, `ALPHA` and `alpha` would share one folder. `name_key` is
-- the name with case folded, computed by the service (ProjectName::folded,
-- full Unicode folding, which neither backend's lower() matches), so the
-- unique index makes two concurrent creates of case twins fail one of them.
-- Rows created before this migration keep NULL (NULLs never collide) and
-- the service compares their names itself.
-- Keep in step with the other backend's folder (same versions, same meaning).

ALTER TABLE projects ADD COLUMN name_key TEXT;
CREATE UNIQUE INDEX projects_one_name_per_folded_key ON projects (name_key);
