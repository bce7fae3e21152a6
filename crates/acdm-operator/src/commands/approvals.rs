//! `approvals …` and `approval-policy …`: the approver's side and the
//! policy per project on the command line, as the operator API has them
//! (the same rules: four eyes, owners and admins of the request's project,
//! pending requests only).

use acdm_bff::approval::Approvals;
use acdm_core::approval::{ApprovalPolicy, ApprovalStatus, WriteOp};
use acdm_core::{ProjectSlug, UserId};
use acdm_store::ApprovalFilter;
use clap::Subcommand;

use super::{Target, failed, parse, print};
use crate::OperatorError;

/// `approvals …`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Approval requests, newest first.
    List {
        /// Only this status (pending, approved, rejected, used, voided, expired).
        #[arg(long)]
        status: Option<String>,
        /// Only this project (slug).
        #[arg(long)]
        project: Option<String>,
        /// Only this operation (`nc.delete`, …).
        #[arg(long)]
        op: Option<String>,
        /// At most this many (1–500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Only requests older than this one (the `next_before` of a page).
        #[arg(long)]
        before: Option<String>,
    },
    /// One request, with its preview.
    Show {
        /// The approval id.
        id: String,
    },
    /// Approves a pending request (an owner or admin of its project, not
    /// the user who asked).
    Approve {
        /// The approval id.
        id: String,
        /// Who approves.
        #[arg(long)]
        user: String,
        /// Why, for the record.
        #[arg(long)]
        note: Option<String>,
    },
    /// Rejects a pending request, with the reason (the agent is told).
    Reject {
        /// The approval id.
        id: String,
        /// Who rejects.
        #[arg(long)]
        user: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
}

/// `approval-policy …`
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// The operations that need approval in a project, and where the list
    /// comes from (`project` or `global`).
    Show {
        /// The project's slug.
        #[arg(long)]
        project: String,
    },
    /// Gives a project its own list (replacing ACDM_APPROVAL_REQUIRED_OPS
    /// for it); an empty list: nothing needs approval there.
    Set {
        /// The project's slug.
        #[arg(long)]
        project: String,
        /// Comma-separated labels (`nc.delete,business.delete_meeting`).
        #[arg(long, default_value = "")]
        ops: String,
    },
    /// Drops a project's own list: the deployment's applies again.
    Clear {
        /// The project's slug.
        #[arg(long)]
        project: String,
    },
}

fn approvals(target: &Target<'_>) -> Approvals {
    Approvals::new(
        target.store.clone(),
        target.approval_policy.clone(),
        acdm_core::approval::ApprovalTtl::DEFAULT,
        None,
    )
}

/// Runs `approvals …`.
pub async fn run(command: ApprovalsCommand, target: &Target<'_>) -> Result<String, OperatorError> {
    let approvals = approvals(target);
    let store = target.store;
    match command {
        ApprovalsCommand::List {
            status,
            project,
            op,
            limit,
            before,
        } => {
            if !(1..=500).contains(&limit) {
                return Err(OperatorError::Usage(
                    "--limit must be between 1 and 500".to_owned(),
                ));
            }
            let filter = ApprovalFilter {
                status: status
                    .as_deref()
                    .map(|s| parse("status", s, str::parse::<ApprovalStatus>))
                    .transpose()?,
                project: project
                    .as_deref()
                    .map(|p| parse("slug", p, ProjectSlug::parse))
                    .transpose()?,
                op: op
                    .as_deref()
                    .map(|o| parse("operation", o, str::parse::<WriteOp>))
                    .transpose()?,
                before: before
                    .as_deref()
                    .map(|b| parse("approval id", b, str::parse))
                    .transpose()?,
                limit,
            };
            let list = store.list_approvals(&filter).await?;
            let next_before = (list.len() == limit as usize)
                .then(|| list.last().map(|a| a.approval_id))
                .flatten();
            let mut views = Vec::with_capacity(list.len());
            for approval in list {
                views.push(approvals.view(approval).await.map_err(failed)?);
            }
            print(&serde_json::json!({ "approvals": views, "next_before": next_before }))
        }
        ApprovalsCommand::Show { id } => {
            let id = parse("approval id", &id, str::parse)?;
            let approval = store.approval(id).await?;
            print(&approvals.view(approval).await.map_err(failed)?)
        }
        ApprovalsCommand::Approve { id, user, note } => {
            let id = parse("approval id", &id, str::parse)?;
            let user = parse("user id", &user, UserId::parse)?;
            let decided = approvals
                .decide(id, true, &user, note.as_deref())
                .await
                .map_err(failed)?;
            print(&approvals.view(decided).await.map_err(failed)?)
        }
        ApprovalsCommand::Reject { id, user, reason } => {
            let id = parse("approval id", &id, str::parse)?;
            let user = parse("user id", &user, UserId::parse)?;
            if reason.trim().is_empty() {
                return Err(OperatorError::Usage(
                    "--reason must not be blank".to_owned(),
                ));
            }
            let decided = approvals
                .decide(id, false, &user, Some(&reason))
                .await
                .map_err(failed)?;
            print(&approvals.view(decided).await.map_err(failed)?)
        }
    }
}

/// Runs `approval-policy …`.
pub async fn policy(command: PolicyCommand, target: &Target<'_>) -> Result<String, OperatorError> {
    let approvals = approvals(target);
    let (project, ops) = match command {
        PolicyCommand::Show { project } => {
            let slug = parse("slug", &project, ProjectSlug::parse)?;
            return print(&approvals.policy(&slug).await.map_err(failed)?);
        }
        PolicyCommand::Set { project, ops } => (
            project,
            Some(parse("operations", &ops, ApprovalPolicy::parse_list)?),
        ),
        PolicyCommand::Clear { project } => (project, None),
    };
    let slug = parse("slug", &project, ProjectSlug::parse)?;
    print(
        &approvals
            .set_policy(&slug, ops.as_ref(), Some("command line"))
            .await
            .map_err(failed)?,
    )
}
