//! The index's behaviour through its public API: Chinese and English
//! matching, scopes, upserts and deletes, persistence, snippets, hostile
//! queries.
#![expect(
    clippy::unwrap_used,
    reason = "helpers of a test: a failure should be loud"
)]

use std::fs;

use acdm_index::{
    Change, Document, IndexError, IndexSettings, SearchIndex, SearchQuery, SearchResults,
    SourceKind,
};

fn memory() -> SearchIndex {
    SearchIndex::open(&IndexSettings::default()).unwrap()
}

fn on_disk(dir: &std::path::Path) -> Result<SearchIndex, IndexError> {
    SearchIndex::open(&IndexSettings {
        dir: Some(dir.to_owned()),
        ..IndexSettings::default()
    })
}

fn doc(source: SourceKind, key: &str, title: &str, body: &str) -> Document {
    Document {
        source,
        key: key.to_owned(),
        title: title.to_owned(),
        body: body.to_owned(),
        modified: Some(1_770_000_000),
        version: format!("v-{key}"),
        format: Some("md".to_owned()),
    }
}

fn file(key: &str, body: &str) -> Change {
    Change::Upsert(doc(SourceKind::Files, key, "", body))
}

fn search(
    index: &SearchIndex,
    source: SourceKind,
    text: &str,
    scope: Option<&str>,
) -> SearchResults {
    index
        .search(&SearchQuery {
            source,
            text: text.to_owned(),
            scope: scope.map(str::to_owned),
            limit: 10,
        })
        .unwrap()
}

fn keys(results: &SearchResults) -> Vec<&str> {
    results.hits.iter().map(|h| h.key.as_str()).collect()
}

fn files_keys(index: &SearchIndex, text: &str) -> Vec<String> {
    keys(&search(index, SourceKind::Files, text, None))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

const LONG_SENTENCE: &str = "本项目主体结构施工阶段钢筋混凝土框架剪力墙结构的高大模板支撑体系必须经过专家论证后方可组织实施";

#[test]
fn a_long_unpunctuated_chinese_sentence_is_found_by_its_words() {
    assert!(LONG_SENTENCE.chars().count() >= 30);
    let index = memory();
    index
        .apply(vec![
            file("/P/a/safety.md", LONG_SENTENCE),
            file(
                "/P/a/other.md",
                "项目例会纪要：讨论了进度款支付和材料采购。",
            ),
        ])
        .unwrap();
    for query in [
        "模板",
        "专家",
        "剪力墙",
        "专家论证",
        "支撑体系",
        "混凝土框架",
    ] {
        assert_eq!(files_keys(&index, query), ["/P/a/safety.md"], "{query}");
    }
}

#[test]
fn a_word_jieba_cuts_differently_in_the_document_is_found_through_bigrams() {
    // jieba cuts 水泥土搅拌桩 as 水 / 泥土 / 搅拌 / 桩: the word 水泥 is not
    // among them, its bigram is.
    let index = memory();
    index
        .apply(vec![
            file("/P/a/pile.md", "地基处理采用水泥土搅拌桩"),
            file("/P/a/other.md", "屋面防水采用卷材"),
        ])
        .unwrap();
    let found = search(&index, SourceKind::Files, "水泥", None);
    assert_eq!(keys(&found), ["/P/a/pile.md"]);
    assert_eq!(found.hits[0].marked(), "地基处理采用**水泥**土搅拌桩");
}

#[test]
fn an_english_query_matches_other_forms_of_its_words() {
    let index = memory();
    index
        .apply(vec![
            file(
                "/P/a/delivered.md",
                "The rebar was delivered to site on Monday.",
            ),
            file(
                "/P/a/unrelated.md",
                "Meeting minutes: budget review and staffing.",
            ),
        ])
        .unwrap();
    for query in [
        "deliver",
        "delivery",
        "deliveries",
        "DELIVERING",
        "Delivered",
    ] {
        assert_eq!(files_keys(&index, query), ["/P/a/delivered.md"], "{query}");
    }
}

#[test]
fn mixed_chinese_and_english_text_is_found_by_either() {
    let index = memory();
    index
        .apply(vec![
            file(
                "/P/a/bim.md",
                "本周完成BIM模型的clash detection，发现管线碰撞12处。",
            ),
            file("/P/a/other.md", "Weekly report: nothing to declare."),
        ])
        .unwrap();
    for query in ["BIM", "bim模型", "管线碰撞", "clash", "碰撞 detection"] {
        assert_eq!(files_keys(&index, query), ["/P/a/bim.md"], "{query}");
    }
}

#[test]
fn a_scope_keeps_to_its_folder_and_its_source() {
    let index = memory();
    let text = "Concrete pour schedule for the podium slab.";
    index
        .apply(vec![
            file("/Projects/Alpha/site/pour.md", text),
            file("/Projects/Alpha/pour.md", text),
            file("/Projects/Alphabet/pour.md", text),
            file("/Projects/Beta/pour.md", text),
            Change::Upsert(doc(SourceKind::Wiki, "Projects/Alpha/pour.md", "", text)),
        ])
        .unwrap();
    for scope in ["/Projects/Alpha/", "/Projects/Alpha"] {
        let mut found = keys(&search(
            &index,
            SourceKind::Files,
            "concrete pour",
            Some(scope),
        ))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
        found.sort();
        assert_eq!(
            found,
            ["/Projects/Alpha/pour.md", "/Projects/Alpha/site/pour.md"],
            "{scope}"
        );
    }
    let all = search(&index, SourceKind::Files, "concrete pour", None);
    assert_eq!(all.total_count, 4);
    let wiki = search(&index, SourceKind::Wiki, "concrete pour", None);
    assert_eq!(keys(&wiki), ["Projects/Alpha/pour.md"]);
    let empty_scope = search(&index, SourceKind::Files, "concrete pour", Some(""));
    assert_eq!(empty_scope.total_count, 4);
}

#[test]
fn delete_under_removes_that_folder_of_that_source_only_and_empty_means_all() {
    let index = memory();
    let text = "Tower crane inspection checklist.";
    index
        .apply(vec![
            file("/Projects/Alpha/a.md", text),
            file("/Projects/Alpha/deep/b.md", text),
            file("/Projects/Alphabet/c.md", text),
            Change::Upsert(doc(SourceKind::Wiki, "/Projects/Alpha/d.md", "", text)),
        ])
        .unwrap();
    index
        .apply(vec![Change::DeleteUnder {
            source: SourceKind::Files,
            folder: "/Projects/Alpha".to_owned(),
        }])
        .unwrap();
    assert_eq!(files_keys(&index, "crane"), ["/Projects/Alphabet/c.md"]);
    assert_eq!(
        keys(&search(&index, SourceKind::Wiki, "crane", None)),
        ["/Projects/Alpha/d.md"]
    );
    index
        .apply(vec![Change::DeleteUnder {
            source: SourceKind::Files,
            folder: String::new(),
        }])
        .unwrap();
    assert_eq!(
        search(&index, SourceKind::Files, "crane", None).total_count,
        0
    );
    assert_eq!(
        search(&index, SourceKind::Wiki, "crane", None).total_count,
        1
    );
}

#[test]
fn an_upsert_replaces_the_document_and_a_delete_removes_it() {
    let index = memory();
    index
        .apply(vec![file("/P/x.md", "old text about scaffolding")])
        .unwrap();
    index
        .apply(vec![
            file("/P/x.md", "new text about scaffolding and formwork"),
            file("/P/x.md", "newest text about scaffolding and formwork"),
        ])
        .unwrap();
    let found = search(&index, SourceKind::Files, "scaffolding", None);
    assert_eq!(keys(&found), ["/P/x.md"]);
    assert!(
        found.hits[0].snippet.starts_with("newest"),
        "{}",
        found.hits[0].snippet
    );
    assert_eq!(files_keys(&index, "old"), Vec::<String>::new());
    index
        .apply(vec![Change::Delete {
            source: SourceKind::Files,
            key: "/P/x.md".to_owned(),
        }])
        .unwrap();
    assert_eq!(
        search(&index, SourceKind::Files, "scaffolding", None).total_count,
        0
    );
}

#[test]
fn the_same_key_in_both_sources_is_two_documents() {
    let index = memory();
    index
        .apply(vec![
            Change::Upsert(doc(SourceKind::Wiki, "same.md", "", "handover")),
            Change::Upsert(doc(SourceKind::Files, "same.md", "", "handover")),
            Change::Delete {
                source: SourceKind::Wiki,
                key: "same.md".to_owned(),
            },
        ])
        .unwrap();
    assert_eq!(
        search(&index, SourceKind::Wiki, "handover", None).total_count,
        0
    );
    assert_eq!(
        search(&index, SourceKind::Files, "handover", None).total_count,
        1
    );
}

#[test]
fn versions_give_back_every_key_of_a_source() {
    let index = memory();
    index
        .apply(vec![
            file("/P/a.md", "a"),
            file("/P/b.md", "b"),
            Change::Upsert(doc(SourceKind::Wiki, "guides/c.md", "", "c")),
        ])
        .unwrap();
    index
        .apply(vec![
            Change::Upsert(Document {
                version: "etag-2".to_owned(),
                ..doc(SourceKind::Files, "/P/a.md", "", "a2")
            }),
            Change::Delete {
                source: SourceKind::Files,
                key: "/P/b.md".to_owned(),
            },
        ])
        .unwrap();
    let files = index.versions(SourceKind::Files).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files["/P/a.md"], "etag-2");
    let wiki = index.versions(SourceKind::Wiki).unwrap();
    assert_eq!(wiki.len(), 1);
    assert_eq!(wiki["guides/c.md"], "v-guides/c.md");
    let stats = index.stats();
    assert_eq!((stats.files_documents, stats.wiki_documents), (1, 1));
    assert!(stats.segments >= 1 && stats.bytes > 0, "{stats:?}");
}

#[test]
fn an_index_on_disk_keeps_its_documents_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = on_disk(dir.path()).unwrap();
        index
            .apply(vec![file("/P/kept.md", "waterproofing membrane 防水卷材")])
            .unwrap();
    }
    let index = on_disk(dir.path()).unwrap();
    assert_eq!(files_keys(&index, "防水"), ["/P/kept.md"]);
    assert_eq!(index.versions(SourceKind::Files).unwrap().len(), 1);
    assert!(index.stats().bytes > 0);
}

#[test]
fn a_second_writer_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = on_disk(dir.path()).unwrap();
    first.apply(vec![file("/P/a.md", "piling")]).unwrap();
    let second = on_disk(dir.path()).unwrap_err();
    assert_eq!(second.code(), "index_locked");
    // The refused opener deleted nothing.
    drop(first);
    assert_eq!(
        files_keys(&on_disk(dir.path()).unwrap(), "piling"),
        ["/P/a.md"]
    );
}

#[test]
fn an_index_in_use_is_not_recreated_by_another_opener() {
    let dir = tempfile::tempdir().unwrap();
    let first = on_disk(dir.path()).unwrap();
    first.apply(vec![file("/P/a.md", "piling")]).unwrap();
    fs::write(dir.path().join("schema-version"), "0\n").unwrap();
    assert_eq!(on_disk(dir.path()).unwrap_err().code(), "index_locked");
    first.apply(vec![file("/P/b.md", "piling")]).unwrap();
    assert_eq!(
        search(&first, SourceKind::Files, "piling", None).total_count,
        2
    );
}

#[test]
fn an_index_of_another_schema_version_is_recreated_empty() {
    let dir = tempfile::tempdir().unwrap();
    on_disk(dir.path())
        .unwrap()
        .apply(vec![file("/P/a.md", "piling")])
        .unwrap();
    fs::write(dir.path().join("schema-version"), "0\n").unwrap();
    let index = on_disk(dir.path()).unwrap();
    assert!(index.versions(SourceKind::Files).unwrap().is_empty());
    index.apply(vec![file("/P/b.md", "piling")]).unwrap();
    drop(index);
    assert_eq!(
        files_keys(&on_disk(dir.path()).unwrap(), "piling"),
        ["/P/b.md"]
    );
}

#[test]
fn a_damaged_index_is_recreated_empty() {
    let dir = tempfile::tempdir().unwrap();
    on_disk(dir.path())
        .unwrap()
        .apply(vec![file("/P/a.md", "piling")])
        .unwrap();
    fs::write(dir.path().join("index").join("meta.json"), "{ not json").unwrap();
    let index = on_disk(dir.path()).unwrap();
    assert!(index.versions(SourceKind::Files).unwrap().is_empty());
    index.apply(vec![file("/P/b.md", "piling")]).unwrap();
    assert_eq!(files_keys(&index, "piling"), ["/P/b.md"]);
}

#[test]
fn snippets_show_the_matched_words_with_highlights_on_them() {
    let index = memory();
    let english = format!(
        "{} If the Supplier fails to deliver the goods on time, liquidated damages of 0.5% per day apply. {}",
        "General terms. ".repeat(40),
        "Other clauses. ".repeat(40)
    );
    let chinese = format!(
        "{}钢材到货计划：首批钢筋于四月十五日进场。{}",
        "项目概况说明。".repeat(40),
        "其他事项另行通知。".repeat(40)
    );
    index
        .apply(vec![
            file("/P/contract.md", &english),
            file("/P/steel.md", &chinese),
        ])
        .unwrap();
    let hit = &search(&index, SourceKind::Files, "liquidated damages", None).hits[0];
    assert!(hit.snippet.len() <= 420, "{}", hit.snippet.len());
    assert!(
        hit.marked().contains("**liquidated damages**"),
        "{}",
        hit.marked()
    );
    let hit = &search(&index, SourceKind::Files, "钢材到货", None).hits[0];
    assert!(hit.marked().contains("**钢材到货**"), "{}", hit.marked());
    for hit in [&hit.clone()] {
        for range in &hit.highlights {
            let part = hit.snippet.get(range.clone()).unwrap();
            assert!(["钢材", "到货", "钢材到货"].contains(&part), "{part}");
        }
    }
}

#[test]
fn a_title_or_file_name_match_ranks_and_snippets_without_a_body_match() {
    let index = memory();
    index
        .apply(vec![
            Change::Upsert(doc(
                SourceKind::Files,
                "/P/塔吊验收记录.docx",
                "",
                "检查结果：合格。",
            )),
            Change::Upsert(doc(
                SourceKind::Files,
                "/P/notes.docx",
                "Crane handover",
                "All good.",
            )),
        ])
        .unwrap();
    let hit = &search(&index, SourceKind::Files, "塔吊验收", None).hits[0];
    assert_eq!(hit.key, "/P/塔吊验收记录.docx");
    assert_eq!(hit.title, "塔吊验收记录.docx");
    assert_eq!(hit.marked(), "**塔吊验收**记录.docx — 检查结果：合格。");
    let hit = &search(&index, SourceKind::Files, "crane", None).hits[0];
    assert_eq!(
        hit.marked(),
        "Crane handover — All good.".replace("Crane", "**Crane**")
    );
    assert_eq!(
        (hit.modified, hit.format.as_deref()),
        (Some(1_770_000_000), Some("md"))
    );
}

#[test]
fn hostile_query_texts_never_fail_except_as_empty_queries() {
    let index = memory();
    index
        .apply(vec![file(
            "/P/a.md",
            "title:foo AND bar OR \"baz\" 钢材 🚧 emoji",
        )])
        .unwrap();
    let long_english = "concrete ".repeat(1200);
    let long_chinese = "钢材到货".repeat(1000);
    let ten_kb: String = (0..10_240)
        .map(|i| char::from(b' ' + (i % 94) as u8))
        .collect();
    let searchable = [
        "\"unterminated",
        "AND",
        "a AND b OR NOT c",
        "foo*",
        "title:foo",
        "key:/P/a.md",
        "((([[{ bar",
        "-bar +baz ~2 ^3",
        "🚧🏗️ scaffold",
        "钢材 🚧",
        "\u{0}\u{1}钢材",
        long_english.as_str(),
        long_chinese.as_str(),
        ten_kb.as_str(),
    ];
    for text in searchable {
        let found = index.search(&SearchQuery {
            source: SourceKind::Files,
            text: text.to_owned(),
            scope: Some("/P/\"*".to_owned()),
            limit: 5,
        });
        assert!(found.is_ok(), "{text:?}: {found:?}");
    }
    for text in [
        "",
        "   ",
        "*",
        "!!!???",
        "。，、；：",
        "*** ::: ---",
        "🚧🏗️🦺",
    ] {
        let found = index.search(&SearchQuery {
            source: SourceKind::Files,
            text: text.to_owned(),
            scope: None,
            limit: 5,
        });
        assert_eq!(found.unwrap_err().code(), "empty_query", "{text:?}");
    }
}

#[test]
fn a_query_of_stop_words_only_still_searches_them() {
    let index = memory();
    index.apply(vec![file("/P/a.md", "What is this?")]).unwrap();
    assert_eq!(files_keys(&index, "what is this"), ["/P/a.md"]);
}

#[test]
fn a_limit_of_zero_counts_and_a_large_limit_is_capped() {
    let index = memory();
    let changes = (0..120)
        .map(|i| file(&format!("/P/{i}.md"), "formwork"))
        .collect();
    index.apply(changes).unwrap();
    let counted = index
        .search(&SearchQuery {
            source: SourceKind::Files,
            text: "formwork".to_owned(),
            scope: None,
            limit: 0,
        })
        .unwrap();
    assert_eq!((counted.total_count, counted.hits.len()), (120, 0));
    let capped = index
        .search(&SearchQuery {
            source: SourceKind::Files,
            text: "formwork".to_owned(),
            scope: None,
            limit: 1000,
        })
        .unwrap();
    assert_eq!((capped.total_count, capped.hits.len()), (120, 100));
}

#[test]
fn an_invalid_change_applies_nothing_of_its_batch() {
    let index = memory();
    let refused = index.apply(vec![file("/P/a.md", "grouting"), file("", "grouting")]);
    assert_eq!(refused.unwrap_err().code(), "invalid_request");
    assert_eq!(
        search(&index, SourceKind::Files, "grouting", None).total_count,
        0
    );
}

#[test]
fn searches_run_while_batches_are_applied() {
    let index = memory();
    index
        .apply(vec![file("/P/base.md", "backfill compaction")])
        .unwrap();
    std::thread::scope(|s| {
        let writer = index.clone();
        s.spawn(move || {
            for batch in 0..20 {
                let changes = (0..10)
                    .map(|i| file(&format!("/P/{batch}-{i}.md"), "backfill compaction test"))
                    .collect();
                writer.apply(changes).unwrap();
            }
        });
        for _ in 0..2 {
            let reader = index.clone();
            s.spawn(move || {
                for _ in 0..50 {
                    let found = search(&reader, SourceKind::Files, "compaction", None);
                    assert!(found.total_count >= 1);
                }
            });
        }
    });
    assert_eq!(
        search(&index, SourceKind::Files, "compaction", None).total_count,
        201
    );
}
