//! A line diff for the event page, by `similar`'s Myers (with its
//! heuristics for hard inputs): two texts' lines as kept, added and
//! removed lines. Both time and memory are bounded: a side of more than
//! [`MAX_LINES`] lines is not diffed (the page says so), the search keeps
//! memory linear in the lines, and past its deadline it stops looking
//! for a shorter diff and shows what is left as removed, then added.
//! (`similar`'s algorithms only: its `text` layer would cost 26 s more of
//! CPU to build, for nothing the page uses.)

use std::time::Instant;

use similar::{Algorithm, DiffTag, capture_diff_slices_deadline};

/// One line of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// In both.
    Same(&'a str),
    /// Only in the new text.
    Added(&'a str),
    /// Only in the old text.
    Removed(&'a str),
}

/// The most lines a side may have for a diff to be computed. The page
/// reads at most 256 KiB of a file, so this bounds files of short lines;
/// the diff of two such sides is at most twice this many lines.
pub const MAX_LINES: usize = 10_000;

/// The diff of `before` and `after` (split as [`str::lines`] splits), or
/// `None` when either has more than [`MAX_LINES`] lines. Once `deadline`
/// (when there is one) has passed, the search stops: the common start
/// and end of what is left are still kept, its middle shown as removed,
/// then added.
pub fn lines<'a>(
    before: &'a str,
    after: &'a str,
    deadline: Option<Instant>,
) -> Option<Vec<Line<'a>>> {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    if old.len() > MAX_LINES || new.len() > MAX_LINES {
        return None;
    }
    let ops = capture_diff_slices_deadline(Algorithm::Myers, &old, &new, deadline);
    let mut out = Vec::with_capacity(old.len().max(new.len()));
    for op in &ops {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        let removed = old.get(old_range).unwrap_or_default();
        let added = new.get(new_range).unwrap_or_default();
        match tag {
            DiffTag::Equal => out.extend(removed.iter().map(|line| Line::Same(line))),
            DiffTag::Delete | DiffTag::Insert | DiffTag::Replace => {
                out.extend(removed.iter().map(|line| Line::Removed(line)));
                out.extend(added.iter().map(|line| Line::Added(line)));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The diff of `before` and `after` with no deadline.
    fn diff<'a>(before: &'a str, after: &'a str) -> Option<Vec<Line<'a>>> {
        lines(before, after, None)
    }

    /// Whether `diff` says `before` became `after`: its kept and removed
    /// lines are `before`'s, its kept and added lines are `after`'s.
    fn replays(diff: &[Line<'_>], before: &str, after: &str) -> bool {
        let old: Vec<&str> = diff
            .iter()
            .filter_map(|line| match line {
                Line::Same(text) | Line::Removed(text) => Some(*text),
                Line::Added(_) => None,
            })
            .collect();
        let new: Vec<&str> = diff
            .iter()
            .filter_map(|line| match line {
                Line::Same(text) | Line::Added(text) => Some(*text),
                Line::Removed(_) => None,
            })
            .collect();
        old == before.lines().collect::<Vec<_>>() && new == after.lines().collect::<Vec<_>>()
    }

    #[test]
    fn a_changed_line_is_removed_then_added_and_the_rest_is_kept() {
        let diff_of = diff("a\nb\nc\n", "a\nB\nc\nd\n").unwrap();
        assert_eq!(
            diff_of,
            vec![
                Line::Same("a"),
                Line::Removed("b"),
                Line::Added("B"),
                Line::Same("c"),
                Line::Added("d"),
            ]
        );
        assert_eq!(diff("", "x").unwrap(), vec![Line::Added("x")]);
        assert_eq!(diff("x", "").unwrap(), vec![Line::Removed("x")]);
        assert_eq!(diff("", "").unwrap(), vec![]);
        // Lines are split as `str::lines` splits: a last line break or a
        // carriage return before it changes nothing.
        assert_eq!(
            diff("a\r\nb", "a\nb\n").unwrap(),
            vec![Line::Same("a"), Line::Same("b")]
        );
    }

    #[test]
    fn more_lines_than_the_limit_are_not_diffed() {
        let longest = "x\n".repeat(MAX_LINES);
        let longer = "x\n".repeat(MAX_LINES + 1);
        assert_eq!(diff(&longest, &longest).unwrap().len(), MAX_LINES);
        assert!(diff(&longer, "").is_none());
        assert!(diff("", &longer).is_none());
    }

    #[test]
    fn the_diff_is_a_short_one() {
        // One line changed in the middle of many: the rest is kept (a
        // diff that removed and added everything would also replay).
        let before: String = (0..3_000).map(|i| format!("line {i}\n")).collect();
        let after = before.replace("line 1500\n", "line 1500, changed\n");
        let diff_of = diff(&before, &after).unwrap();
        assert!(replays(&diff_of, &before, &after));
        let changed: Vec<_> = diff_of
            .iter()
            .filter(|line| !matches!(line, Line::Same(_)))
            .collect();
        assert_eq!(
            changed,
            [
                &Line::Removed("line 1500"),
                &Line::Added("line 1500, changed")
            ]
        );
    }

    #[test]
    fn large_files_that_differ_everywhere_get_a_bounded_diff() {
        // Two 5,000-line files with no line in common, but for a shared
        // first and last line: every line of each is shown once.
        let before: String = (0..5_000).map(|i| format!("old {i}\n")).collect();
        let after: String = (0..5_000).map(|i| format!("new {i}\n")).collect();
        let (before, after) = (
            format!("head\n{before}tail\n"),
            format!("head\n{after}tail\n"),
        );
        let diff_of = diff(&before, &after).unwrap();
        assert!(replays(&diff_of, &before, &after));
        assert_eq!(diff_of.len(), 2 + 5_000 + 5_000);
        assert_eq!(diff_of.first(), Some(&Line::Same("head")));
        assert_eq!(diff_of.last(), Some(&Line::Same("tail")));
    }

    #[test]
    fn past_its_deadline_the_diff_keeps_the_common_ends_and_shows_the_middle_removed_then_added() {
        // Files that share many lines in a different order: a search for
        // the shortest diff has work to do, but its deadline has passed
        // before it starts.
        let before: String = (0..5_000).map(|i| format!("line {}\n", i % 97)).collect();
        let after: String = (0..5_000).map(|i| format!("line {}\n", i % 89)).collect();
        let (before, after) = (
            format!("head\n{before}tail\n"),
            format!("head\n{after}tail\n"),
        );
        let past = Instant::now().checked_sub(Duration::from_secs(1));
        let diff_of = lines(&before, &after, past).unwrap();
        assert!(replays(&diff_of, &before, &after));
        // The common start (head, then line 0 to line 88, in both) and end
        // (tail) kept, everything between removed, then added.
        let kept_at_start = diff_of
            .iter()
            .take_while(|line| matches!(line, Line::Same(_)))
            .count();
        assert_eq!(kept_at_start, 1 + 89);
        assert_eq!(diff_of.last(), Some(&Line::Same("tail")));
        let middle = diff_of
            .get(kept_at_start..diff_of.len() - 1)
            .unwrap_or_default();
        let removed = middle
            .iter()
            .take_while(|line| matches!(line, Line::Removed(_)))
            .count();
        assert_eq!(removed, 5_000 - 89);
        assert!(
            middle
                .get(removed..)
                .unwrap_or_default()
                .iter()
                .all(|line| matches!(line, Line::Added(_)))
        );
        assert_eq!(middle.len(), 2 * (5_000 - 89));
        // Without the deadline, the same files share far more lines.
        let searched = diff(&before, &after).unwrap();
        assert!(replays(&searched, &before, &after));
        let kept = |diff: &[Line<'_>]| diff.iter().filter(|l| matches!(l, Line::Same(_))).count();
        assert!(kept(&searched) > kept(&diff_of), "{}", kept(&searched));
    }
}
