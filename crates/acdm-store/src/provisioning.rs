//! Provisioning: projects, their members and mounts, and agent mounts.
//!
//! Every change to an agent mount bumps `scope_epoch` in the same
//! transaction, so every running server notices within one poll interval
//! (see [`crate::watch`]).

use acdm_core::domain::{
    AgentMount, AgentRole, Member, MemberRole, Mount, Project, ProjectDetails, ProjectId,
    ProjectRef,
};
use acdm_core::{AbsPath, AgentName, MountName, ProjectName, ProjectSlug, UserId};
use chrono::{DateTime, Utc};

use crate::Store;
use crate::db::{WritePool, with_pool};
use crate::error::StoreError;

/// The `(slug, name)` rows a new project ($1 slug, $2 name, $3 folded
/// name) may collide with; rows from before the folded key ($3) was stored
/// are compared in Rust by [`taken`].
const COLLIDING: &str = "SELECT slug, name FROM projects \
     WHERE slug = $1 OR name = $2 OR name_key = $3 OR name_key IS NULL";

/// Why `slug` and `name` cannot be used, given the `(slug, name)` rows that
/// may collide: the slug is taken, the name is taken, or an existing name
/// differs from it only in case. Names the existing project.
fn taken(slug: &ProjectSlug, name: &ProjectName, rows: &[(String, String)]) -> Option<String> {
    if rows.iter().any(|(s, _)| s == slug.as_str()) {
        return Some(format!("a project with slug `{slug}` already exists"));
    }
    if rows.iter().any(|(_, n)| n == name.as_str()) {
        return Some(format!(
            "a project named `{name}` already exists; its folder would be shared"
        ));
    }
    let key = name.folded();
    rows.iter()
        .find(|(_, n)| ProjectName::parse(n).map_or_else(|_| n.to_lowercase() == key, |n| n.folded() == key))
        .map(|(s, n)| {
            format!(
                "a project named `{n}` (slug `{s}`) already exists; `{name}` differs only in case, and on a case-insensitive file store the two would share one folder"
            )
        })
}

/// The id of the project `slug`, inside a transaction (`NotFound` if none).
macro_rules! project_id_for {
    ($tx:expr, $slug:expr) => {
        sqlx::query_scalar::<_, String>("SELECT id FROM projects WHERE slug = $1")
            .bind($slug.as_str())
            .fetch_optional(&mut *$tx)
            .await?
            .ok_or_else(|| not_found_project($slug))?
    };
}

/// Moves the scope epoch, inside the transaction that changed a mount.
macro_rules! bump_epoch {
    ($tx:expr) => {
        sqlx::query("UPDATE scope_epoch SET epoch = epoch + 1 WHERE id = 1")
            .execute(&mut *$tx)
            .await?
    };
}

crate::db::row! {
    struct MembershipRow {
        id: String,
        slug: String,
        name: String,
        role: String,
    }
}

crate::db::row! {
    struct ProjectRow {
        id: String,
        slug: String,
        name: String,
        created_at: DateTime<Utc>,
    }
}

/// Parses the identifying columns of a `projects` row.
pub(crate) fn project_ref(id: &str, slug: &str, name: &str) -> Result<ProjectRef, StoreError> {
    let bad = |detail: String| StoreError::corrupt("projects", detail);
    Ok(ProjectRef {
        id: id
            .parse::<ProjectId>()
            .map_err(|e| bad(format!("id: {e}")))?,
        slug: ProjectSlug::parse(slug).map_err(|e| bad(format!("slug: {e}")))?,
        name: ProjectName::parse(name).map_err(|e| bad(format!("name: {e}")))?,
    })
}

impl ProjectRow {
    fn into_domain(self) -> Result<Project, StoreError> {
        let ProjectRef { id, slug, name } = project_ref(&self.id, &self.slug, &self.name)?;
        Ok(Project {
            id,
            slug,
            name,
            created_at: self.created_at,
        })
    }
}

crate::db::row! {
    struct MemberRow {
        user_id: String,
        role: String,
        updated_at: DateTime<Utc>,
    }
}

impl MemberRow {
    fn into_domain(self) -> Result<Member, StoreError> {
        let bad = |detail: String| StoreError::corrupt("project_members", detail);
        Ok(Member {
            user_id: UserId::parse(&self.user_id).map_err(|e| bad(format!("user_id: {e}")))?,
            role: self.role.parse().map_err(|e| bad(format!("role: {e}")))?,
            updated_at: self.updated_at,
        })
    }
}

crate::db::row! {
    pub(crate) struct MountRow {
        name: String,
        root: String,
        writable: bool,
    }
}

impl MountRow {
    pub(crate) fn into_domain(self) -> Result<Mount, StoreError> {
        let bad = |detail: String| StoreError::corrupt("project_mounts", detail);
        Ok(Mount {
            name: MountName::parse(&self.name).map_err(|e| bad(format!("name: {e}")))?,
            root: AbsPath::parse(&self.root).map_err(|e| bad(format!("root: {e}")))?,
            writable: self.writable,
        })
    }
}

crate::db::row! {
    struct AgentMountRow {
        agent_name: String,
        slug: String,
        role: String,
        mounted_at: DateTime<Utc>,
        unmounted_at: Option<DateTime<Utc>>,
    }
}

impl AgentMountRow {
    fn into_domain(self) -> Result<AgentMount, StoreError> {
        let bad = |detail: String| StoreError::corrupt("agent_mounts", detail);
        Ok(AgentMount {
            agent_name: AgentName::parse(&self.agent_name)
                .map_err(|e| bad(format!("agent_name: {e}")))?,
            project: ProjectSlug::parse(&self.slug).map_err(|e| bad(format!("slug: {e}")))?,
            role: self.role.parse().map_err(|e| bad(format!("role: {e}")))?,
            mounted_at: self.mounted_at,
            unmounted_at: self.unmounted_at,
        })
    }
}

/// Whether an upsert created a record or changed an existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Upsert {
    /// A new record.
    Created,
    /// An existing record, now changed (or already as asked).
    Updated,
}

/// What mounting an agent did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct AgentMountChange {
    /// The agent's active mount now.
    pub mount: AgentMount,
    /// The mount it replaced when the agent moved from another project.
    pub previous: Option<AgentMount>,
    /// True when the agent already managed this project (nothing changed).
    pub unchanged: bool,
}

impl Store {
    /// Creates a project and its default writable mount `project` at
    /// `<files_base>/<name>`. A taken slug, a taken name, or a name that
    /// differs from a project's only in case (`ALPHA` beside `Alpha`; they
    /// would share one folder on a case-insensitive file store) is a
    /// `Conflict` naming the existing project — also when two such creates
    /// race (the unique index on `name_key` lets only one in).
    pub async fn create_project(
        &self,
        slug: &ProjectSlug,
        name: &ProjectName,
        files_base: &AbsPath,
    ) -> Result<ProjectDetails, StoreError> {
        let id = ProjectId::new_random().to_string();
        let created_at = self.now();
        let root = files_base.child(name).to_string();
        let key = name.folded();
        let lost_race = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let rows: Vec<(String, String)> = sqlx::query_as(
                COLLIDING,
            )
            .bind(slug.as_str())
            .bind(name.as_str())
            .bind(&key)
            .fetch_all(&mut *tx)
            .await?;
            if let Some(message) = taken(slug, name, &rows) {
                return Err(StoreError::Conflict(message));
            }
            let inserted = sqlx::query(
                "INSERT INTO projects (id, slug, name, name_key, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&id)
            .bind(slug.as_str())
            .bind(name.as_str())
            .bind(&key)
            .bind(created_at)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from);
            match inserted {
                // Another create committed the same slug, name or key since
                // the check: this transaction is dropped (rolled back).
                Err(StoreError::Conflict(_)) => true,
                Err(other) => return Err(other),
                Ok(_) => {
                    sqlx::query(
                        "INSERT INTO project_mounts (project_id, name, root, writable, updated_at) \
                         VALUES ($1, $2, $3, $4, $5)",
                    )
                    .bind(&id)
                    .bind(acdm_core::domain::DEFAULT_MOUNT)
                    .bind(&root)
                    .bind(true)
                    .bind(created_at)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    false
                }
            }
        });
        if lost_race {
            let rows: Vec<(String, String)> = with_pool!(&self.pool, p => {
                sqlx::query_as(
                    COLLIDING,
                )
                .bind(slug.as_str())
                .bind(name.as_str())
                .bind(&key)
                .fetch_all(p)
                .await?
            });
            return Err(StoreError::Conflict(
                taken(slug, name, &rows).unwrap_or_else(|| {
                    format!("a project with slug `{slug}` or a name like `{name}` was just created")
                }),
            ));
        }
        tracing::info!(project = %slug, "project created");
        self.project(slug).await
    }

    /// Every project, by slug.
    pub async fn list_projects(&self) -> Result<Vec<Project>, StoreError> {
        let rows: Vec<ProjectRow> = with_pool!(&self.pool, p => {
            sqlx::query_as("SELECT id, slug, name, created_at FROM projects ORDER BY slug")
                .fetch_all(p)
                .await?
        });
        rows.into_iter().map(ProjectRow::into_domain).collect()
    }

    /// The root folder of every project's every mount, each once, sorted:
    /// what the content index covers.
    pub async fn mount_roots(&self) -> Result<Vec<AbsPath>, StoreError> {
        let rows: Vec<MountRow> = with_pool!(&self.pool, p => {
            sqlx::query_as("SELECT name, root, writable FROM project_mounts ORDER BY root")
                .fetch_all(p)
                .await?
        });
        let mut roots = rows
            .into_iter()
            .map(|row| row.into_domain().map(|mount| mount.root))
            .collect::<Result<Vec<_>, _>>()?;
        roots.dedup();
        Ok(roots)
    }

    /// The projects `user` is a member of (any role), with the role,
    /// sorted by name: what a person signed in with their own account may
    /// read.
    pub async fn memberships_of(
        &self,
        user: &UserId,
    ) -> Result<Vec<(ProjectRef, MemberRole)>, StoreError> {
        let rows: Vec<MembershipRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT p.id, p.slug, p.name, m.role FROM project_members m \
                 JOIN projects p ON p.id = m.project_id WHERE m.user_id = $1 ORDER BY p.name",
            )
            .bind(user.as_str())
            .fetch_all(p)
            .await?
        });
        rows.into_iter()
            .map(|row| {
                let project = project_ref(&row.id, &row.slug, &row.name)?;
                let role = row
                    .role
                    .parse::<MemberRole>()
                    .map_err(|e| StoreError::corrupt("project_members", format!("role: {e}")))?;
                Ok((project, role))
            })
            .collect()
    }

    /// A project with its members, mounts and active agents.
    pub async fn project(&self, slug: &ProjectSlug) -> Result<ProjectDetails, StoreError> {
        let (project, members, mounts, agents): (
            Option<ProjectRow>,
            Vec<MemberRow>,
            Vec<MountRow>,
            Vec<AgentMountRow>,
        ) = with_pool!(&self.pool, p => {
            let mut conn = p.acquire().await?;
            let project: Option<ProjectRow> =
                sqlx::query_as("SELECT id, slug, name, created_at FROM projects WHERE slug = $1")
                    .bind(slug.as_str())
                    .fetch_optional(&mut *conn)
                    .await?;
            let Some(project) = project else {
                return Err(not_found_project(slug));
            };
            let members = sqlx::query_as(
                "SELECT user_id, role, updated_at FROM project_members \
                 WHERE project_id = $1 ORDER BY user_id",
            )
            .bind(&project.id)
            .fetch_all(&mut *conn)
            .await?;
            let mounts = sqlx::query_as(
                "SELECT name, root, writable FROM project_mounts WHERE project_id = $1 ORDER BY name",
            )
            .bind(&project.id)
            .fetch_all(&mut *conn)
            .await?;
            let agents = sqlx::query_as(
                "SELECT a.agent_name, p.slug, a.role, a.mounted_at, a.unmounted_at \
                 FROM agent_mounts a JOIN projects p ON p.id = a.project_id \
                 WHERE a.project_id = $1 AND a.unmounted_at IS NULL ORDER BY a.agent_name",
            )
            .bind(&project.id)
            .fetch_all(&mut *conn)
            .await?;
            (Some(project), members, mounts, agents)
        });
        let project = project.ok_or_else(|| not_found_project(slug))?;
        Ok(ProjectDetails {
            project: project.into_domain()?,
            members: members
                .into_iter()
                .map(MemberRow::into_domain)
                .collect::<Result<_, _>>()?,
            mounts: mounts
                .into_iter()
                .map(MountRow::into_domain)
                .collect::<Result<_, _>>()?,
            agents: agents
                .into_iter()
                .map(AgentMountRow::into_domain)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Adds a member with `role`, or changes the role of an existing one.
    pub async fn set_member(
        &self,
        slug: &ProjectSlug,
        user_id: &UserId,
        role: MemberRole,
    ) -> Result<(Member, Upsert), StoreError> {
        let updated_at = self.now();
        let existed = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let project_id = project_id_for!(tx, slug);
            let existed: Option<String> = sqlx::query_scalar(
                "SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2",
            )
            .bind(&project_id)
            .bind(user_id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO project_members (project_id, user_id, role, updated_at) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (project_id, user_id) DO UPDATE SET role = $3, updated_at = $4",
            )
            .bind(&project_id)
            .bind(user_id.as_str())
            .bind(role.as_str())
            .bind(updated_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            existed.is_some()
        });
        tracing::info!(project = %slug, user = %user_id, %role, "member set");
        let member = Member {
            user_id: user_id.clone(),
            role,
            updated_at,
        };
        Ok((
            member,
            if existed {
                Upsert::Updated
            } else {
                Upsert::Created
            },
        ))
    }

    /// Removes a member.
    pub async fn remove_member(
        &self,
        slug: &ProjectSlug,
        user_id: &UserId,
    ) -> Result<(), StoreError> {
        let removed = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let project_id = project_id_for!(tx, slug);
            let result = sqlx::query("DELETE FROM project_members WHERE project_id = $1 AND user_id = $2")
                .bind(&project_id)
                .bind(user_id.as_str())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            result.rows_affected()
        });
        if removed == 0 {
            return Err(StoreError::NotFound {
                what: "member",
                key: format!("{slug}/{user_id}"),
            });
        }
        tracing::info!(project = %slug, user = %user_id, "member removed");
        Ok(())
    }

    /// Adds a mount or changes an existing one. Without `root`, the mount
    /// points at `<files_base>/<project name>`.
    pub async fn set_mount(
        &self,
        slug: &ProjectSlug,
        name: &MountName,
        root: Option<&AbsPath>,
        writable: bool,
        files_base: &AbsPath,
    ) -> Result<(Mount, Upsert), StoreError> {
        // The backend's trash is never a mount (case-insensitively: synced
        // clients fold case).
        if let Some(root) = root {
            let trash = acdm_core::events::trash_root(files_base);
            let folded = |p: &AbsPath| -> Vec<String> {
                p.segments().iter().map(|s| s.to_lowercase()).collect()
            };
            if folded(root).starts_with(&folded(&trash)) {
                return Err(StoreError::Conflict(format!(
                    "a mount root cannot lie in the backend's trash ({})",
                    trash.as_prefix()
                )));
            }
        }
        let updated_at = self.now();
        let (root, existed) = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let (project_id, project_name): (String, String) =
                sqlx::query_as("SELECT id, name FROM projects WHERE slug = $1")
                    .bind(slug.as_str())
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| not_found_project(slug))?;
            let root = match root {
                Some(root) => root.clone(),
                None => files_base.child(
                    &ProjectName::parse(&project_name)
                        .map_err(|e| StoreError::corrupt("projects", format!("name: {e}")))?,
                ),
            };
            let existed: Option<String> = sqlx::query_scalar(
                "SELECT root FROM project_mounts WHERE project_id = $1 AND name = $2",
            )
            .bind(&project_id)
            .bind(name.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO project_mounts (project_id, name, root, writable, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (project_id, name) DO UPDATE SET root = $3, writable = $4, updated_at = $5",
            )
            .bind(&project_id)
            .bind(name.as_str())
            .bind(root.to_string())
            .bind(writable)
            .bind(updated_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            (root, existed.is_some())
        });
        tracing::info!(project = %slug, mount = %name, %root, writable, "mount set");
        let mount = Mount {
            name: name.clone(),
            root,
            writable,
        };
        Ok((
            mount,
            if existed {
                Upsert::Updated
            } else {
                Upsert::Created
            },
        ))
    }

    /// Mounts `agent` as the manager of the project `slug`. An agent manages
    /// one project at a time: mounting it elsewhere ends its current mount
    /// in the same transaction.
    pub async fn mount_agent(
        &self,
        agent: &AgentName,
        slug: &ProjectSlug,
    ) -> Result<AgentMountChange, StoreError> {
        let mounted_at = self.now();
        let (current, unchanged) = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let project_id = project_id_for!(tx, slug);
            let current: Option<(String, String, AgentMountRow)> = {
                let row: Option<(String, String)> = sqlx::query_as(
                    "SELECT id, project_id FROM agent_mounts WHERE agent_name = $1 AND unmounted_at IS NULL",
                )
                .bind(agent.as_str())
                .fetch_optional(&mut *tx)
                .await?;
                match row {
                    None => None,
                    Some((id, current_project)) => {
                        let full: AgentMountRow = sqlx::query_as(
                            "SELECT a.agent_name, p.slug, a.role, a.mounted_at, a.unmounted_at \
                             FROM agent_mounts a JOIN projects p ON p.id = a.project_id WHERE a.id = $1",
                        )
                        .bind(&id)
                        .fetch_one(&mut *tx)
                        .await?;
                        Some((id, current_project, full))
                    }
                }
            };
            let unchanged = current.as_ref().is_some_and(|(_, pid, _)| *pid == project_id);
            if !unchanged {
                if let Some((id, _, _)) = &current {
                    sqlx::query("UPDATE agent_mounts SET unmounted_at = $1 WHERE id = $2")
                        .bind(mounted_at)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(
                    "INSERT INTO agent_mounts (id, agent_name, project_id, role, mounted_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(uuid::Uuid::new_v4().to_string())
                .bind(agent.as_str())
                .bind(&project_id)
                .bind(AgentRole::Manager.as_str())
                .bind(mounted_at)
                .execute(&mut *tx)
                .await?;
                bump_epoch!(tx);
            }
            tx.commit().await?;
            (current.map(|(_, _, row)| row), unchanged)
        });
        let current = current.map(AgentMountRow::into_domain).transpose()?;
        if unchanged {
            let mount = current
                .ok_or_else(|| StoreError::corrupt("agent_mounts", "active mount vanished"))?;
            return Ok(AgentMountChange {
                mount,
                previous: None,
                unchanged: true,
            });
        }
        let previous = current.map(|mut m| {
            m.unmounted_at = Some(mounted_at);
            m
        });
        match &previous {
            Some(prev) => {
                tracing::info!(agent = %agent, project = %slug, from = %prev.project, "agent moved");
            }
            None => tracing::info!(agent = %agent, project = %slug, "agent mounted"),
        }
        Ok(AgentMountChange {
            mount: AgentMount {
                agent_name: agent.clone(),
                project: slug.clone(),
                role: AgentRole::Manager,
                mounted_at,
                unmounted_at: None,
            },
            previous,
            unchanged: false,
        })
    }

    /// Ends `agent`'s active mount. Its scope is revoked on every server
    /// within one scope-epoch poll.
    pub async fn unmount_agent(&self, agent: &AgentName) -> Result<AgentMount, StoreError> {
        let unmounted_at = self.now();
        let row: Option<AgentMountRow> = with_pool!(&self.pool, p => {
            let mut tx = p.begin_write().await?;
            let id: Option<String> = sqlx::query_scalar(
                "SELECT id FROM agent_mounts WHERE agent_name = $1 AND unmounted_at IS NULL",
            )
            .bind(agent.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            let row = match id {
                None => None,
                Some(id) => {
                    sqlx::query("UPDATE agent_mounts SET unmounted_at = $1 WHERE id = $2")
                        .bind(unmounted_at)
                        .bind(&id)
                        .execute(&mut *tx)
                        .await?;
                    bump_epoch!(tx);
                    Some(
                        sqlx::query_as(
                            "SELECT a.agent_name, p.slug, a.role, a.mounted_at, a.unmounted_at \
                             FROM agent_mounts a JOIN projects p ON p.id = a.project_id WHERE a.id = $1",
                        )
                        .bind(&id)
                        .fetch_one(&mut *tx)
                        .await?,
                    )
                }
            };
            tx.commit().await?;
            row
        });
        let row = row.ok_or_else(|| StoreError::NotFound {
            what: "active agent mount",
            key: agent.to_string(),
        })?;
        tracing::info!(agent = %agent, project = %row.slug, "agent unmounted");
        row.into_domain()
    }

    /// Every active agent mount, by agent name.
    pub async fn list_agents(&self) -> Result<Vec<AgentMount>, StoreError> {
        let rows: Vec<AgentMountRow> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT a.agent_name, p.slug, a.role, a.mounted_at, a.unmounted_at \
                 FROM agent_mounts a JOIN projects p ON p.id = a.project_id \
                 WHERE a.unmounted_at IS NULL ORDER BY a.agent_name",
            )
            .fetch_all(p)
            .await?
        });
        rows.into_iter().map(AgentMountRow::into_domain).collect()
    }

    /// The project `agent` actively manages, straight from the table.
    pub async fn manager_project(
        &self,
        agent: &AgentName,
    ) -> Result<Option<ProjectRef>, StoreError> {
        let row: Option<(String, String, String)> = with_pool!(&self.pool, p => {
            sqlx::query_as(
                "SELECT p.id, p.slug, p.name FROM agent_mounts a JOIN projects p ON p.id = a.project_id \
                 WHERE a.agent_name = $1 AND a.role = 'manager' AND a.unmounted_at IS NULL",
            )
            .bind(agent.as_str())
            .fetch_optional(p)
            .await?
        });
        row.map(|(id, slug, name)| project_ref(&id, &slug, &name))
            .transpose()
    }

    /// The scope epoch: it moves whenever any agent mount changes.
    pub async fn scope_epoch(&self) -> Result<i64, StoreError> {
        Ok(with_pool!(&self.pool, p => {
            sqlx::query_scalar("SELECT epoch FROM scope_epoch WHERE id = 1")
                .fetch_one(p)
                .await?
        }))
    }
}

fn not_found_project(slug: &ProjectSlug) -> StoreError {
    StoreError::NotFound {
        what: "project",
        key: slug.to_string(),
    }
}
