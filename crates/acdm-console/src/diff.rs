//! A line diff for the event page: the longest common subsequence of two
//! texts' lines, as kept, added and removed lines. Texts are capped (a
//! diff of anything larger says so instead).

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// In both.
    Same(String),
    /// Only in the new text.
    Added(String),
    /// Only in the old text.
    Removed(String),
}

/// The most lines a side may have for a diff to be computed.
pub const MAX_LINES: usize = 2_000;

/// The diff of `before` and `after`, or `None` when either has more than
/// [`MAX_LINES`] lines.
pub fn lines(before: &str, after: &str) -> Option<Vec<Line>> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        return None;
    }
    // lcs[i][j]: the LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            let value = if a.get(i) == b.get(j) {
                cell(&lcs, i + 1, j + 1) + 1
            } else {
                cell(&lcs, i + 1, j).max(cell(&lcs, i, j + 1))
            };
            if let Some(slot) = lcs.get_mut(i).and_then(|row| row.get_mut(j)) {
                *slot = value;
            }
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                out.push(Line::Same((*x).to_owned()));
                i += 1;
                j += 1;
            }
            (Some(x), Some(_)) if cell(&lcs, i + 1, j) >= cell(&lcs, i, j + 1) => {
                out.push(Line::Removed((*x).to_owned()));
                i += 1;
            }
            (_, Some(y)) => {
                out.push(Line::Added((*y).to_owned()));
                j += 1;
            }
            (Some(x), None) => {
                out.push(Line::Removed((*x).to_owned()));
                i += 1;
            }
            (None, None) => break,
        }
    }
    Some(out)
}

fn cell(table: &[Vec<u32>], i: usize, j: usize) -> u32 {
    table
        .get(i)
        .and_then(|row| row.get(j))
        .copied()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_removed_then_added_and_the_rest_is_kept() {
        let diff = lines("a\nb\nc\n", "a\nB\nc\nd\n").unwrap();
        assert_eq!(
            diff,
            vec![
                Line::Same("a".into()),
                Line::Removed("b".into()),
                Line::Added("B".into()),
                Line::Same("c".into()),
                Line::Added("d".into()),
            ]
        );
        assert_eq!(lines("", "x").unwrap(), vec![Line::Added("x".into())]);
        assert!(lines(&"x\n".repeat(MAX_LINES + 1), "").is_none());
    }
}
