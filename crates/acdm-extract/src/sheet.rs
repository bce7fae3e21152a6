//! Spreadsheets (.xlsx, .ods) through calamine: each sheet `## <name>`
//! then a Markdown table of its used cells, numbers as stored in plain
//! digits, dates as ISO. calamine allocates a sheet's whole area, which an
//! attacker declares: the archive is audited first (inflated size, XML
//! checks), xlsx cells are streamed with calamine's cell reader, and an
//! ods `content.xml` is measured before calamine reads it, so no sheet
//! spanning more than the cell budget is ever allocated.

use std::io::Cursor;

use calamine::{Data, Ods, OdsError, Reader, Xlsx, XlsxError};

use crate::archive::Archive;
use crate::error::ExtractError;
use crate::limits::Limits;
use crate::markdown::{Markdown, table_cell, too_large};
use crate::odf::too_many_cells;
use crate::xml::{Ev, Xml, attr, name};

/// The widest and tallest sheet calamine reads (Excel's own limits).
const MAX_COLUMNS: u64 = 16_384;
const MAX_ROWS: u64 = 1_048_576;

pub(crate) fn extract_xlsx(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    Archive::open(bytes, limits, "Excel (.xlsx)")?.audit(None)?;
    let mut book = Xlsx::new(Cursor::new(bytes)).map_err(xlsx_error)?;
    let mut md = Markdown::new(limits);
    let mut cells_read = 0_u64;
    for sheet in book.sheet_names() {
        md.heading(2, &sheet)?;
        let mut reader = match book.worksheet_cells_reader(&sheet) {
            Ok(reader) => reader,
            Err(XlsxError::NotAWorksheet(_)) => continue,
            Err(error) => return Err(xlsx_error(error)),
        };
        let mut cells: Vec<(u32, u32, String)> = Vec::new();
        let mut held = 0_usize;
        while let Some(cell) = reader.next_cell().map_err(xlsx_error)? {
            let text = table_cell(&value(&Data::from(cell.get_value().clone())));
            if text.is_empty() {
                continue;
            }
            cells_read += 1;
            if cells_read > limits.max_cells {
                return Err(too_many_cells(limits.max_cells));
            }
            held = held.saturating_add(text.len() + 3);
            if held > md.room() {
                return Err(too_large(md.len().saturating_add(md.room())));
            }
            let (row, column) = cell.get_position();
            cells.push((row, column, text));
        }
        write_sparse(&mut md, &sheet, cells, limits)?;
    }
    Ok(md.finish())
}

pub(crate) fn extract_ods(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let mut archive = Archive::open(bytes, limits, "OpenDocument spreadsheet (.ods)")?;
    if let Some(content) = archive.audit(Some("content.xml"))? {
        measure_ods(&content, limits)?;
    }
    let mut book = Ods::new(Cursor::new(bytes)).map_err(ods_error)?;
    let mut md = Markdown::new(limits);
    for sheet in book.sheet_names() {
        md.heading(2, &sheet)?;
        let range = book.worksheet_range(&sheet).map_err(ods_error)?;
        let rows: Vec<Vec<String>> = range
            .rows()
            .map(|row| row.iter().map(|cell| table_cell(&value(cell))).collect())
            .collect();
        let width = rows
            .iter()
            .filter_map(|row| row.iter().rposition(|c| !c.is_empty()))
            .max()
            .map_or(0, |last| last + 1);
        let height = rows
            .iter()
            .rposition(|row| row.iter().any(|c| !c.is_empty()))
            .map_or(0, |last| last + 1);
        if width == 0 {
            continue;
        }
        md.start_table()?;
        for (index, row) in rows.iter().take(height).enumerate() {
            if index > 0 {
                md.newline()?;
            }
            md.table_row(row, width)?;
            if index == 0 {
                md.table_separator(width)?;
            }
        }
    }
    Ok(md.finish())
}

/// Writes a sheet's cells (row, column, text) as a table over the area
/// they span, refusing an area past the cell budget.
fn write_sparse(
    md: &mut Markdown,
    sheet: &str,
    mut cells: Vec<(u32, u32, String)>,
    limits: &Limits,
) -> Result<(), ExtractError> {
    let (Some(top), Some(bottom), Some(left), Some(right)) = (
        cells.iter().map(|c| c.0).min(),
        cells.iter().map(|c| c.0).max(),
        cells.iter().map(|c| c.1).min(),
        cells.iter().map(|c| c.1).max(),
    ) else {
        return Ok(());
    };
    let height = u64::from(bottom - top) + 1;
    let width = u64::from(right - left) + 1;
    if height.saturating_mul(width) > limits.max_cells {
        return Err(ExtractError::TooManyCells(format!(
            "the sheet \"{sheet}\" spans {height} rows by {width} columns, more than the {} cells \
             that may be read; it is too large to be read whole",
            limits.max_cells
        )));
    }
    cells.sort_unstable_by_key(|c| (c.0, c.1));
    let columns = usize::try_from(width).unwrap_or(usize::MAX);
    let mut cells = cells.into_iter().peekable();
    let mut row_cells = vec![String::new(); columns];
    md.start_table()?;
    for row in top..=bottom {
        for cell in &mut row_cells {
            cell.clear();
        }
        while let Some((_, column, text)) = cells.next_if(|c| c.0 == row) {
            if let Some(slot) = usize::try_from(column - left)
                .ok()
                .and_then(|i| row_cells.get_mut(i))
            {
                *slot = text;
            }
        }
        if row > top {
            md.newline()?;
        }
        md.table_row(&row_cells, columns)?;
        if row == top {
            md.table_separator(columns)?;
        }
    }
    Ok(())
}

/// A cell's value as text: numbers as stored (integers without a
/// fraction or an exponent), dates as ISO 8601.
fn value(data: &Data) -> String {
    match data {
        Data::Empty => String::new(),
        Data::String(text) => text.clone(),
        Data::Int(n) => n.to_string(),
        Data::Float(f) => number(*f),
        Data::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        Data::DateTime(date) => {
            if date.is_duration() {
                let seconds = (date.as_f64() * 86_400.0).round();
                duration(seconds)
            } else {
                let (year, month, day, hour, minute, second, _) = date.to_ymd_hms_milli();
                if (hour, minute, second) == (0, 0, 0) {
                    format!("{year:04}-{month:02}-{day:02}")
                } else {
                    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}")
                }
            }
        }
        Data::DateTimeIso(text) => text.strip_suffix("T00:00:00").unwrap_or(text).to_owned(),
        Data::DurationIso(text) => text.clone(),
        Data::Error(error) => error.to_string(),
    }
}

/// A number in plain digits: `2845000`, `0.15`, never `2.845e6`.
fn number(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "a whole number below 10^15 is exactly an i64"
        )]
        let whole = f as i64;
        whole.to_string()
    } else {
        f.to_string()
    }
}

/// A duration of `seconds` as `H:MM:SS`.
fn duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return seconds.to_string();
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "rounded seconds of a spreadsheet duration"
    )]
    let total = seconds.abs() as i64;
    let sign = if seconds < 0.0 { "-" } else { "" };
    format!(
        "{sign}{}:{:02}:{:02}",
        total / 3600,
        (total / 60) % 60,
        total % 60
    )
}

/// Measures an ods `content.xml` before calamine reads it: the cells
/// calamine would hold (repeated cells are copied between content, row by
/// row) and the area each sheet's content spans, all sheets together.
fn measure_ods(content: &str, limits: &Limits) -> Result<(), ExtractError> {
    let mut xml = Xml::new(content, "content.xml", limits);
    let mut held = 0_u64;
    let mut area = 0_u64;
    // Per table: the logical row count, the first and last rows with content, the widest row.
    let mut row_index = 0_u64;
    let mut first: Option<u64> = None;
    let mut last = 0_u64;
    let mut widest = 0_u64;
    // Per row: its repeat count, cells held so far, empty cells pending.
    let mut row_repeat = 1_u64;
    let mut row_cells = 0_u64;
    let mut pending = 0_u64;
    // The cell being read: its repeat count and whether it has content.
    let mut cell: Option<(u64, bool)> = None;
    let repeats = |e: &quick_xml::events::BytesStart<'_>, key: &[u8]| -> u64 {
        attr(e, key)
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(1)
            .max(1)
    };
    let has_value = |e: &quick_xml::events::BytesStart<'_>| {
        attr(e, b"value-type").is_some() || attr(e, b"formula").is_some()
    };
    let end_cell = |repeat: u64, content: bool, row_cells: &mut u64, pending: &mut u64| {
        if content {
            *row_cells = row_cells
                .saturating_add(*pending)
                .saturating_add(repeat)
                .min(MAX_COLUMNS);
            *pending = 0;
        } else {
            *pending = pending.saturating_add(repeat);
        }
    };
    loop {
        match xml.next()? {
            Ev::Start(e) => match name(&e) {
                b"table" => {
                    row_index = 0;
                    first = None;
                    last = 0;
                    widest = 0;
                }
                b"table-row" => {
                    row_repeat = repeats(&e, b"number-rows-repeated");
                    row_cells = 0;
                    pending = 0;
                }
                b"table-cell" | b"covered-table-cell" => {
                    cell = Some((repeats(&e, b"number-columns-repeated"), has_value(&e)));
                }
                _ => {}
            },
            Ev::Empty(e) => match name(&e) {
                b"table-cell" | b"covered-table-cell" => {
                    end_cell(
                        repeats(&e, b"number-columns-repeated"),
                        has_value(&e),
                        &mut row_cells,
                        &mut pending,
                    );
                }
                b"table-row" => {
                    row_index = row_index
                        .saturating_add(repeats(&e, b"number-rows-repeated"))
                        .min(MAX_ROWS);
                }
                _ => {}
            },
            Ev::Text(text) => {
                if let Some((_, content)) = cell.as_mut() {
                    *content |= !text.trim().is_empty();
                }
            }
            Ev::End(end) => match end.as_slice() {
                b"table-cell" | b"covered-table-cell" => {
                    if let Some((repeat, content)) = cell.take() {
                        end_cell(repeat, content, &mut row_cells, &mut pending);
                    }
                }
                b"table-row" => {
                    held = held.saturating_add(row_cells);
                    if row_cells > 0 {
                        first.get_or_insert(row_index);
                        last = row_index.saturating_add(row_repeat);
                        widest = widest.max(row_cells);
                    }
                    row_index = row_index.saturating_add(row_repeat).min(MAX_ROWS);
                }
                b"table" => {
                    if let Some(first) = first {
                        area =
                            area.saturating_add(last.saturating_sub(first).saturating_mul(widest));
                    }
                }
                _ => {}
            },
            Ev::Eof => break,
        }
        if held > limits.max_cells || area > limits.max_cells {
            return Err(too_many_cells(limits.max_cells));
        }
    }
    Ok(())
}

fn xlsx_error(error: XlsxError) -> ExtractError {
    match error {
        XlsxError::Password => ExtractError::Encrypted(
            "the workbook is password-protected; it cannot be read: ask for an unprotected copy"
                .to_owned(),
        ),
        other => ExtractError::Malformed(format!(
            "the file is not a readable Excel (.xlsx) workbook ({other})"
        )),
    }
}

fn ods_error(error: OdsError) -> ExtractError {
    match error {
        OdsError::Password => ExtractError::Encrypted(
            "the spreadsheet is password-protected; it cannot be read: ask for an unprotected copy"
                .to_owned(),
        ),
        OdsError::CellLimitExceeded { max, .. } => {
            too_many_cells(u64::try_from(max).unwrap_or(u64::MAX))
        }
        other => ExtractError::Malformed(format!(
            "the file is not a readable OpenDocument spreadsheet (.ods) ({other})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{duration, number};

    #[test]
    fn numbers_are_plain_digits() {
        assert_eq!(number(2_845_000.0), "2845000");
        assert_eq!(number(0.15), "0.15");
        assert_eq!(number(-12.5), "-12.5");
        assert_eq!(number(1e20), "100000000000000000000");
        assert_eq!(duration(3725.0), "1:02:05");
    }
}
