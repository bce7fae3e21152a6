//! Snippets: the passage of a document's text with the most (and rarest)
//! query terms, whitespace runs collapsed, and where the terms are in it.
//!
//! tantivy's `SnippetGenerator` is not used: jieba's search mode gives
//! overlapping tokens (`中华`, then `中华人民共和国`), which its fragment
//! arithmetic assumes never happens, and its highlights would need mapping
//! through the whitespace collapse anyway.

use std::collections::HashMap;
use std::ops::Range;

use tantivy::tokenizer::TextAnalyzer;

/// The most bytes of document text in a snippet (about 130 Han characters
/// or 60 English words); `…` marks are added where it is cut.
pub(crate) const SNIPPET_BYTES: usize = 400;

/// How much a repeated term adds to a passage's score, against a new one.
const REPEAT_WEIGHT: f32 = 0.1;

/// The query's terms as one analyzer gives them, each with its weight
/// (rarer is heavier).
pub(crate) type Weights = HashMap<String, f32>;

/// A snippet and its highlights (byte ranges in it).
pub(crate) type Snippet = (String, Vec<Range<usize>>);

/// One occurrence of a query term in the text.
struct Match {
    range: Range<usize>,
    term: String,
    weight: f32,
}

/// The most bytes of a body analysed for one snippet: its start, and when
/// the query's terms are not there, as much again from where one of them
/// first appears literally. Analysing an 8 MB body for every hit would
/// cost a second.
const SCAN_BYTES: usize = 32 * 1024;
/// Where a second scan starts, before the literal occurrence.
const SCAN_LEAD: usize = 1024;
/// The most matches looked at in one scan.
const MAX_MATCHES: usize = 4096;

/// Where `weights`' terms occur in `text[from..from + SCAN_BYTES]`, in order
/// (ranges of `text`).
fn matches(analyzer: &mut TextAnalyzer, text: &str, from: usize, weights: &Weights) -> Vec<Match> {
    let from = floor_char(text, from);
    let to = floor_char(text, from.saturating_add(SCAN_BYTES));
    let mut out = Vec::new();
    if weights.is_empty() {
        return out;
    }
    let mut stream = analyzer.token_stream(text.get(from..to).unwrap_or_default());
    while let Some(token) = stream.next() {
        if let Some(weight) = weights.get(&token.text) {
            out.push(Match {
                range: from + token.offset_from..from + token.offset_to,
                term: token.text.clone(),
                weight: *weight,
            });
            if out.len() >= MAX_MATCHES {
                break;
            }
        }
    }
    out.sort_by_key(|m| (m.range.start, m.range.end));
    out
}

/// The first literal occurrence in `text` of one of the terms (as written
/// for Han terms; lowercase, capitalised or uppercase for others, whose
/// stem starts the word more often than not).
fn first_literal(text: &str, terms: &[&Weights]) -> Option<usize> {
    let mut first: Option<usize> = None;
    for term in terms.iter().flat_map(|w| w.keys()) {
        let mut variants = vec![term.clone()];
        if term.is_ascii() {
            let mut capitalised = term.clone();
            if let Some(head) = capitalised.get_mut(..1) {
                head.make_ascii_uppercase();
            }
            variants.push(capitalised);
            variants.push(term.to_ascii_uppercase());
        }
        for variant in variants {
            let limit = first.unwrap_or(text.len());
            if let Some(at) = text.get(..limit).and_then(|t| t.find(&variant)) {
                first = Some(at);
            }
        }
    }
    first
}

/// The matches of the words, else of the bigrams, in the body's start;
/// else around the first literal occurrence of a term further on.
fn body_matches(
    body: &str,
    zh_en: &mut TextAnalyzer,
    bigram: &mut TextAnalyzer,
    words: &Weights,
    bigrams: &Weights,
) -> Vec<Match> {
    let mut found = matches(zh_en, body, 0, words);
    if found.is_empty() {
        found = matches(bigram, body, 0, bigrams);
    }
    if found.is_empty() && body.len() > SCAN_BYTES {
        let rest = body
            .get(SCAN_BYTES.saturating_sub(SCAN_LEAD)..)
            .unwrap_or_default();
        if let Some(at) = first_literal(rest, &[words, bigrams]) {
            let from = SCAN_BYTES.saturating_sub(SCAN_LEAD) + at.saturating_sub(SCAN_LEAD);
            found = matches(zh_en, body, from, words);
            if found.is_empty() {
                found = matches(bigram, body, from, bigrams);
            }
        }
    }
    found
}

/// The snippet of a hit: from the body where the words match; else where
/// its bigrams do; else the title's matches followed by the body's start;
/// else the body's start.
pub(crate) fn make(
    body: &str,
    title: &str,
    analyzers: (&mut TextAnalyzer, &mut TextAnalyzer),
    words: &Weights,
    bigrams: &Weights,
) -> Snippet {
    let (zh_en, bigram) = analyzers;
    let found = body_matches(body, zh_en, bigram, words, bigrams);
    if !found.is_empty() {
        return passage(body, &found, SNIPPET_BYTES);
    }
    let mut in_title = matches(zh_en, title, 0, words);
    if in_title.is_empty() {
        in_title = matches(bigram, title, 0, bigrams);
    }
    if in_title.is_empty() {
        return passage(body, &[], SNIPPET_BYTES);
    }
    let (mut text, highlights) = passage(title, &in_title, SNIPPET_BYTES);
    let (start, _) = passage(body, &[], SNIPPET_BYTES.saturating_sub(text.len()));
    if !start.is_empty() {
        text.push_str(" — ");
        text.push_str(&start);
    }
    (text, highlights)
}

/// The best window of at most `budget` bytes of `text` around `found`
/// (sorted by start), or its start when `found` is empty.
fn passage(text: &str, found: &[Match], budget: usize) -> Snippet {
    let text_end = text.trim_end().len();
    let text_start = text.len() - text.trim_start().len();
    let Some((first, last)) = best_window(found, budget) else {
        let end = word_end_before(
            text,
            text_start.saturating_add(budget).min(text_end),
            text_start,
        );
        return render(text, text_start..end, &[], text_start, text_end);
    };
    let (Some(first_match), Some(last_match)) = (found.get(first), found.get(last)) else {
        return (String::new(), Vec::new());
    };
    let covered_start = first_match.range.start;
    let covered_end = found
        .get(first..=last)
        .unwrap_or_default()
        .iter()
        .map(|m| m.range.end)
        .max()
        .unwrap_or(last_match.range.end);
    let slack = budget.saturating_sub(covered_end - covered_start);
    // Some context before the first match (up to a third of the room left),
    // the rest after the last.
    let lead = (slack / 3).min(120);
    let start = word_start_after(
        text,
        floor_char(text, covered_start.saturating_sub(lead)),
        covered_start,
    )
    .max(text_start);
    let end = word_end_before(
        text,
        floor_char(text, start.saturating_add(budget).min(text_end)),
        covered_end,
    )
    .max(covered_end)
    .min(text_end.max(covered_end));
    let highlights: Vec<Range<usize>> = found
        .iter()
        .map(|m| m.range.clone())
        .filter(|r| r.start >= start && r.end <= end)
        .collect();
    render(text, start..end, &merge(highlights), text_start, text_end)
}

/// The indices (first, last) of the run of matches fitting in `budget`
/// bytes with the best score: each distinct term counts its weight once,
/// a repeat a tenth of it.
fn best_window(found: &[Match], budget: usize) -> Option<(usize, usize)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut score = 0.0_f32;
    let mut best: Option<(f32, usize, usize)> = None;
    let mut next = 0;
    for (i, first) in found.iter().enumerate() {
        while let Some(m) = found.get(next) {
            if m.range.end.saturating_sub(first.range.start) > budget && next > i {
                break;
            }
            let count = counts.entry(m.term.as_str()).or_insert(0);
            score += if *count == 0 {
                m.weight
            } else {
                m.weight * REPEAT_WEIGHT
            };
            *count += 1;
            next += 1;
        }
        if best.is_none_or(|(s, _, _)| score > s + f32::EPSILON) {
            best = Some((score, i, next.saturating_sub(1).max(i)));
        }
        if let Some(count) = counts.get_mut(first.term.as_str()) {
            *count = count.saturating_sub(1);
            score -= if *count == 0 {
                first.weight
            } else {
                first.weight * REPEAT_WEIGHT
            };
        }
    }
    best.map(|(_, first, last)| (first, last))
}

/// Sorted ranges, overlapping ones merged.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The largest char boundary at or before `i`.
fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A letter or digit of a space-separated word (Han characters are words
/// of their own: a cut between two of them is fine).
fn in_word(c: char) -> bool {
    c.is_alphanumeric() && !crate::analysis::is_bigram_script(c)
}

/// `i`, or if it falls inside a word, the end of that word (at most `limit`).
fn word_start_after(text: &str, i: usize, limit: usize) -> usize {
    let before = text.get(..i).and_then(|s| s.chars().next_back());
    if !before.is_some_and(in_word) {
        return i;
    }
    let mut j = i;
    for c in text.get(i..).unwrap_or_default().chars() {
        if !in_word(c) || j >= limit {
            break;
        }
        j += c.len_utf8();
    }
    j.min(limit)
}

/// `i`, or if it falls inside a word, the start of that word (at least `limit`).
fn word_end_before(text: &str, i: usize, limit: usize) -> usize {
    let after = text.get(i..).and_then(|s| s.chars().next());
    if !after.is_some_and(in_word) {
        return i;
    }
    let mut j = i;
    for c in text.get(..i).unwrap_or_default().chars().rev() {
        if !in_word(c) || j <= limit {
            break;
        }
        j -= c.len_utf8();
    }
    j.max(limit)
}

/// `text[window]` with whitespace runs as one space, `…` where text was
/// left out, and `highlights` (ranges of `text`) moved into it.
fn render(
    text: &str,
    window: Range<usize>,
    highlights: &[Range<usize>],
    text_start: usize,
    text_end: usize,
) -> Snippet {
    let Some(fragment) = text.get(window.clone()) else {
        return (String::new(), Vec::new());
    };
    let mut out = String::with_capacity(fragment.len() + 8);
    if window.start > text_start {
        out.push('…');
    }
    // Where each byte of `fragment` landed in `out`.
    let mut landed = vec![0_usize; fragment.len() + 1];
    let mut pending_space = false;
    for (i, c) in fragment.char_indices() {
        if c.is_whitespace() {
            pending_space = true;
            if let Some(slot) = landed.get_mut(i) {
                *slot = out.len();
            }
            continue;
        }
        if pending_space && !out.is_empty() && !out.ends_with('…') {
            out.push(' ');
        }
        pending_space = false;
        for k in 0..c.len_utf8() {
            if let Some(slot) = landed.get_mut(i + k) {
                *slot = out.len();
            }
        }
        out.push(c);
    }
    let content_end = out.len();
    if let Some(slot) = landed.get_mut(fragment.len()) {
        *slot = content_end;
    }
    if window.end < text_end && !out.is_empty() {
        out.push('…');
    }
    // Highlights next to each other, or one space apart, become one
    // (`**liquidated damages**`, `**钢材到货**`).
    let mut moved: Vec<Range<usize>> = Vec::with_capacity(highlights.len());
    for r in highlights {
        let (Some(start), Some(end)) = (
            r.start
                .checked_sub(window.start)
                .and_then(|i| landed.get(i)),
            r.end.checked_sub(window.start).and_then(|i| landed.get(i)),
        ) else {
            continue;
        };
        if end <= start {
            continue;
        }
        match moved.last_mut() {
            Some(last)
                if out
                    .get(last.end..*start)
                    .is_some_and(|gap| gap.is_empty() || gap == " ") =>
            {
                last.end = *end;
            }
            _ => moved.push(*start..*end),
        }
    }
    (out, moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{bigram_analyzer, zh_en_analyzer};

    fn weights(terms: &[&str]) -> Weights {
        terms.iter().map(|t| ((*t).to_owned(), 1.0)).collect()
    }

    fn snippet(body: &str, title: &str, words: &[&str], bigrams: &[&str]) -> Snippet {
        let (mut z, mut b) = (zh_en_analyzer(), bigram_analyzer());
        make(
            body,
            title,
            (&mut z, &mut b),
            &weights(words),
            &weights(bigrams),
        )
    }

    fn highlighted(s: &Snippet) -> Vec<&str> {
        s.1.iter().filter_map(|r| s.0.get(r.clone())).collect()
    }

    #[test]
    fn highlights_point_at_the_matched_words_after_whitespace_collapses() {
        let s = snippet(
            "The   supplier\n\n delivered   late.",
            "",
            &["deliv", "late"],
            &[],
        );
        assert_eq!(s.0, "The supplier delivered late.");
        assert_eq!(highlighted(&s), ["delivered late"]);
    }

    #[test]
    fn a_long_chinese_text_is_cut_on_character_boundaries_around_the_match() {
        let body = format!(
            "{}钢材到货时间为四月十五日{}",
            "项目进度正常。".repeat(60),
            "后续安排另行通知。".repeat(60)
        );
        let s = snippet(&body, "", &["钢材", "到货"], &[]);
        assert!(s.0.len() <= SNIPPET_BYTES + 6, "{}", s.0.len());
        assert!(s.0.starts_with('…') && s.0.ends_with('…'));
        assert_eq!(highlighted(&s), ["钢材到货"]);
    }

    #[test]
    fn overlapping_search_mode_words_give_one_highlight() {
        let s = snippet(
            "中华人民共和国成立",
            "",
            &["中华", "人民", "中华人民共和国"],
            &[],
        );
        assert_eq!(highlighted(&s), ["中华人民共和国"]);
    }

    #[test]
    fn bigrams_highlight_when_the_words_do_not_match() {
        let s = snippet("本周完成了钢结构吊装。", "", &["结构吊"], &["结构", "构吊"]);
        assert_eq!(highlighted(&s), ["结构吊"]);
    }

    #[test]
    fn a_match_in_the_title_only_shows_the_title_then_the_body() {
        let s = snippet("Nothing here matches.", "Weekly report", &["report"], &[]);
        assert_eq!(s.0, "Weekly report — Nothing here matches.");
        assert_eq!(highlighted(&s), ["report"]);
    }

    #[test]
    fn no_match_gives_the_start_of_the_body_cut_between_words() {
        let body = "word ".repeat(200);
        let s = snippet(&body, "", &["other"], &[]);
        assert!(s.1.is_empty());
        assert!(s.0.ends_with("word…"), "{}", s.0);
        assert!(s.0.len() <= SNIPPET_BYTES + 3);
    }

    #[test]
    fn a_match_deep_in_a_long_body_is_found_by_its_literal_text() {
        let body = format!(
            "{}Supplier DELIVERED the rebar late. {}钢材已到货。",
            "filler text. ".repeat(20_000),
            "more filler. ".repeat(20_000)
        );
        let s = snippet(&body, "", &["deliv", "rebar"], &[]);
        assert_eq!(highlighted(&s), ["DELIVERED", "rebar"]);
        let s = snippet(&body, "", &["到货"], &["到货"]);
        assert_eq!(highlighted(&s), ["到货"]);
    }

    #[test]
    fn the_best_window_has_the_most_distinct_terms() {
        let body = format!(
            "alpha alpha alpha alpha. {} alpha beta gamma together. {}",
            "filler ".repeat(100),
            "filler ".repeat(100)
        );
        let s = snippet(&body, "", &["alpha", "beta", "gamma"], &[]);
        assert!(s.0.contains("alpha beta gamma together"), "{}", s.0);
    }
}
