//! Projects, members, mounts and agent mounts.

use acdm_core::domain::{AgentRole, MemberRole};
use acdm_core::{AbsPath, AgentName, MountName, ProjectName, ProjectSlug, UserId};
use acdm_store::{StoreError, Upsert};

use crate::harness::migrated;

pub(crate) fn slug(s: &str) -> ProjectSlug {
    ProjectSlug::parse(s).unwrap()
}
pub(crate) fn name(s: &str) -> ProjectName {
    ProjectName::parse(s).unwrap()
}
pub(crate) fn agent(s: &str) -> AgentName {
    AgentName::parse(s).unwrap()
}
pub(crate) fn base() -> AbsPath {
    AbsPath::parse("/Projects").unwrap()
}

#[tokio::test]
async fn creating_a_project_gives_it_the_default_writable_mount() {
    for db in migrated().await {
        let s = &db.store;
        let details = s
            .create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        assert_eq!(details.project.slug.as_str(), "alpha", "{}", db.name);
        assert_eq!(details.project.name.as_str(), "Alpha");
        assert_eq!(details.mounts.len(), 1);
        assert_eq!(details.mounts[0].name.as_str(), "project");
        assert_eq!(details.mounts[0].root.to_string(), "/Projects/Alpha");
        assert!(details.mounts[0].writable);
        assert!(details.members.is_empty() && details.agents.is_empty());
        assert_eq!(
            s.project(&slug("alpha")).await.unwrap(),
            details,
            "{}: reads back",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn unicode_names_are_stored_nfc_and_read_back_unchanged() {
    for db in migrated().await {
        let s = &db.store;
        let nfd = name("Cafe\u{301} 项目");
        s.create_project(&slug("cafe"), &nfd, &base())
            .await
            .unwrap();
        let back = s.project(&slug("cafe")).await.unwrap();
        assert_eq!(back.project.name.as_str(), "Caf\u{e9} 项目", "{}", db.name);
        assert_eq!(back.mounts[0].root.to_string(), "/Projects/Caf\u{e9} 项目");
        // The NFC spelling is the same name, so it is taken.
        let err = s
            .create_project(&slug("cafe-2"), &name("Caf\u{e9} 项目"), &base())
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(_)),
            "{}: {err:?}",
            db.name
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn taken_slugs_and_names_are_conflicts_with_clear_messages() {
    for db in migrated().await {
        let s = &db.store;
        s.create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        let err = s
            .create_project(&slug("alpha"), &name("Other"), &base())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a project with slug `alpha` already exists",
            "{}",
            db.name
        );
        let err = s
            .create_project(&slug("alpha-2"), &name("Alpha"), &base())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a project named `Alpha` already exists; its folder would be shared"
        );
        assert_eq!(
            s.list_projects().await.unwrap().len(),
            1,
            "nothing half-created"
        );
        db.finish().await;
    }
}

#[tokio::test]
async fn names_differing_only_in_case_are_conflicts_naming_the_existing_project() {
    for db in migrated().await {
        let s = &db.store;
        s.create_project(&slug("alpha"), &name("Alpha"), &base())
            .await
            .unwrap();
        s.create_project(&slug("strasse"), &name("Straße"), &base())
            .await
            .unwrap();
        for (twin_slug, twin, existing) in [
            ("alpha-2", "ALPHA", "`Alpha` (slug `alpha`)"),
            ("alpha-3", "alpha", "`Alpha` (slug `alpha`)"),
            ("alpha-4", "aLpHa", "`Alpha` (slug `alpha`)"),
            ("strasse-2", "STRASSE", "`Straße` (slug `strasse`)"),
        ] {
            let err = s
                .create_project(&slug(twin_slug), &name(twin), &base())
                .await
                .unwrap_err();
            assert!(
                matches!(&err, StoreError::Conflict(m) if m.contains(existing) && m.contains("case")),
                "{}: {twin}: {err}",
                db.name
            );
        }
        assert_eq!(
            s.list_projects().await.unwrap().len(),
            2,
            "{}: no twin created",
            db.name
        );
        // A different name that merely contains the other is fine.
        s.create_project(&slug("alpha-two"), &name("Alpha Two"), &base())
            .await
            .unwrap();
        db.finish().await;
    }
}

#[tokio::test]
async fn of_two_concurrent_case_twins_exactly_one_is_created() {
    for db in migrated().await {
        let other = db.open_again().await;
        for round in 0..5 {
            let (a, b) = (format!("p{round}-a"), format!("p{round}-b"));
            let (upper, lower) = (format!("Project {round}"), format!("PROJECT {round}"));
            let (slug_a, slug_b) = (slug(&a), slug(&b));
            let (name_a, name_b, files) = (name(&upper), name(&lower), base());
            let (first, second) = tokio::join!(
                db.store.create_project(&slug_a, &name_a, &files),
                other.create_project(&slug_b, &name_b, &files),
            );
            assert!(
                first.is_ok() != second.is_ok(),
                "{}: round {round}: {first:?} / {second:?}",
                db.name
            );
            let err = first.err().or(second.err()).unwrap();
            assert!(
                matches!(&err, StoreError::Conflict(m) if m.contains("differs only in case")),
                "{}: {err}",
                db.name
            );
        }
        assert_eq!(db.store.list_projects().await.unwrap().len(), 5);
        other.close().await;
        db.finish().await;
    }
}

#[test]
fn reserved_and_hidden_names_never_reach_provisioning() {
    for reserved in [".acdm-trash", ".ACDM-TRASH", ".hidden", ".htaccess"] {
        assert!(
            ProjectName::parse(reserved).is_err(),
            "{reserved} is not a project name"
        );
    }
}

#[tokio::test]
async fn members_are_added_changed_and_removed() {
    for db in migrated().await {
        let s = &db.store;
        let p = slug("alpha");
        s.create_project(&p, &name("Alpha"), &base()).await.unwrap();
        let u1 = UserId::parse("u1").unwrap();
        let (m, how) = s.set_member(&p, &u1, MemberRole::Member).await.unwrap();
        assert_eq!(
            (m.role, how),
            (MemberRole::Member, Upsert::Created),
            "{}",
            db.name
        );
        let (m, how) = s.set_member(&p, &u1, MemberRole::Owner).await.unwrap();
        assert_eq!((m.role, how), (MemberRole::Owner, Upsert::Updated));
        s.set_member(
            &p,
            &UserId::parse("alice@example.com").unwrap(),
            MemberRole::Viewer,
        )
        .await
        .unwrap();
        let details = s.project(&p).await.unwrap();
        let roles: Vec<_> = details
            .members
            .iter()
            .map(|m| (m.user_id.as_str().to_owned(), m.role))
            .collect();
        assert_eq!(
            roles,
            vec![
                ("alice@example.com".to_owned(), MemberRole::Viewer),
                ("u1".to_owned(), MemberRole::Owner)
            ]
        );
        s.remove_member(&p, &u1).await.unwrap();
        let err = s.remove_member(&p, &u1).await.unwrap_err();
        assert_eq!(err.to_string(), "member `alpha/u1` not found");
        let err = s
            .set_member(&slug("nope"), &u1, MemberRole::Admin)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "project `nope` not found");
        db.finish().await;
    }
}

#[tokio::test]
async fn mounts_default_to_the_project_folder_and_can_be_changed() {
    for db in migrated().await {
        let s = &db.store;
        let p = slug("alpha");
        s.create_project(&p, &name("Alpha"), &base()).await.unwrap();
        let templates = MountName::parse("templates").unwrap();
        let root = AbsPath::parse("/Shared/Templates").unwrap();
        let (m, how) = s
            .set_mount(&p, &templates, Some(&root), false, &base())
            .await
            .unwrap();
        assert_eq!(
            (m.root.to_string(), m.writable, how),
            ("/Shared/Templates".to_owned(), false, Upsert::Created)
        );
        // Make the default mount read-only, keeping its root.
        let project = MountName::parse("project").unwrap();
        let (m, how) = s
            .set_mount(&p, &project, None, false, &base())
            .await
            .unwrap();
        assert_eq!(
            (m.root.to_string(), m.writable, how),
            ("/Projects/Alpha".to_owned(), false, Upsert::Updated)
        );
        let mounts = s.project(&p).await.unwrap().mounts;
        let summary: Vec<_> = mounts
            .iter()
            .map(|m| (m.name.as_str(), m.writable))
            .collect();
        assert_eq!(
            summary,
            vec![("project", false), ("templates", false)],
            "{}",
            db.name
        );
        let err = s
            .set_mount(&slug("nope"), &templates, None, true, &base())
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }));
        // The backend's trash is never a mount, in any case spelling.
        for inside in ["/Projects/.acdm-trash", "/Projects/.ACDM-Trash/alpha/x"] {
            let root = AbsPath::parse(inside).unwrap();
            let err = s
                .set_mount(&p, &templates, Some(&root), true, &base())
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::Conflict(_)), "{inside}: {err}");
        }
        db.finish().await;
    }
}

#[tokio::test]
async fn an_agent_manages_one_project_and_moves_atomically() {
    for db in migrated().await {
        let s = &db.store;
        let (alpha, beta) = (slug("alpha"), slug("beta"));
        s.create_project(&alpha, &name("Alpha"), &base())
            .await
            .unwrap();
        s.create_project(&beta, &name("Beta"), &base())
            .await
            .unwrap();
        let a = agent("project-alpha");
        let epoch0 = s.scope_epoch().await.unwrap();

        assert_eq!(s.manager_project(&a).await.unwrap(), None, "{}", db.name);
        let change = s.mount_agent(&a, &alpha).await.unwrap();
        assert!(!change.unchanged && change.previous.is_none());
        assert_eq!(change.mount.role, AgentRole::Manager);
        assert_eq!(s.manager_project(&a).await.unwrap().unwrap().slug, alpha);
        let epoch1 = s.scope_epoch().await.unwrap();
        assert!(epoch1 > epoch0, "mounting moves the epoch");

        let again = s.mount_agent(&a, &alpha).await.unwrap();
        assert!(again.unchanged);
        assert_eq!(
            s.scope_epoch().await.unwrap(),
            epoch1,
            "a no-op does not move the epoch"
        );

        let moved = s.mount_agent(&a, &beta).await.unwrap();
        let previous = moved.previous.unwrap();
        assert_eq!(previous.project, alpha);
        assert!(previous.unmounted_at.is_some());
        assert_eq!(s.manager_project(&a).await.unwrap().unwrap().slug, beta);
        assert!(s.project(&alpha).await.unwrap().agents.is_empty());
        assert_eq!(s.project(&beta).await.unwrap().agents.len(), 1);
        assert_eq!(s.list_agents().await.unwrap().len(), 1);

        let ended = s.unmount_agent(&a).await.unwrap();
        assert_eq!(ended.project, beta);
        assert!(ended.unmounted_at.is_some());
        assert_eq!(s.manager_project(&a).await.unwrap(), None);
        let err = s.unmount_agent(&a).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "active agent mount `project-alpha` not found"
        );
        assert!(s.scope_epoch().await.unwrap() > epoch1);

        let err = s.mount_agent(&a, &slug("nope")).await.unwrap_err();
        assert_eq!(err.to_string(), "project `nope` not found");
        db.finish().await;
    }
}

#[tokio::test]
async fn concurrent_mounts_of_one_agent_leave_exactly_one_active() {
    for db in migrated().await {
        let s = db.store.clone();
        let projects: Vec<_> = (0..4).map(|i| slug(&format!("p{i}"))).collect();
        for (i, p) in projects.iter().enumerate() {
            s.create_project(p, &name(&format!("P{i}")), &base())
                .await
                .unwrap();
        }
        let a = agent("project-racer");
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (s, a, p) = (s.clone(), a.clone(), projects[i % 4].clone());
                tokio::spawn(async move { s.mount_agent(&a, &p).await })
            })
            .collect();
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) | Err(StoreError::Conflict(_) | StoreError::Unavailable(_)) => {}
                Err(other) => panic!("{}: unexpected {other:?}", db.name),
            }
        }
        let active = s.list_agents().await.unwrap();
        assert_eq!(active.len(), 1, "{}: {active:?}", db.name);
        assert_eq!(
            s.manager_project(&a).await.unwrap().unwrap().slug,
            active[0].project
        );
        db.finish().await;
    }
}
