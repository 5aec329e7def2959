//! Rendering: kubectl-like tables, JSON, YAML and names on stdout.

use std::io::Write;

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::error::UserError;

/// The `apiVersion` of every JSON/YAML document and JSON line kubectl-stack prints (`list`
/// prints kubectl's own `v1` `List`); the shapes are documented in the README ("JSON output").
pub const API_VERSION: &str = "kubectl-stack/v1";

/// A document of `kind` (e.g. `OrphanReport`): `fields` (an object) with `apiVersion` and `kind`.
pub fn document(kind: &str, fields: serde_json::Value) -> serde_json::Value {
    let mut document = serde_json::json!({"apiVersion": API_VERSION, "kind": kind});
    if let (Some(target), serde_json::Value::Object(fields)) = (document.as_object_mut(), fields) {
        target.extend(fields);
    }
    document
}

/// One line of `prune -o json`: `fields` with `apiVersion` and `type` (`plan`, `event`,
/// `diagnosis`, `summary`), then a newline.
pub fn json_line(line_type: &str, fields: serde_json::Value) -> String {
    let mut line = serde_json::json!({"apiVersion": API_VERSION, "type": line_type});
    if let (Some(target), serde_json::Value::Object(fields)) = (line.as_object_mut(), fields) {
        target.extend(fields);
    }
    line.to_string() + "\n"
}

/// Whether stdout was found closed (`| head -n 1`): what is left to print is dropped.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes data to stdout. A closed pipe (`| head`) never ends the program: the work goes on (a
/// prune's waves are not cut short by its reader going away), its progress still on stderr, and
/// the exit code is the work's own. What was not written is said once, on stderr, at the end
/// (see [`stdout_closed`]).
pub fn emit(text: &str) -> Result<(), UserError> {
    if stdout_closed() {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    match written {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
        Err(err) => Err(UserError::failed(format!("cannot write output: {err}"))),
    }
}

/// Whether stdout was closed while the command ran (and so some of its output was dropped).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::SeqCst)
}

/// A kubectl-style table: upper-case headers, no borders, three spaces between columns.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    if let Some(text) = plain_table(headers, &rows) {
        return text;
    }
    comfy_table(headers, rows)
}

/// A [`table`] laid out by comfy-table: any cell, wide characters and line breaks included.
fn comfy_table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().map(|h| h.to_string()));
    for row in rows {
        table.add_row(row);
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 3));
        column.set_cell_alignment(CellAlignment::Left);
    }
    let mut text: String = table.lines().map(|line| line.trim_end().to_string() + "\n").collect();
    if text.is_empty() {
        text.push('\n');
    }
    text
}

/// A [`table`] of printable ASCII cells, written directly: the text comfy-table makes of it
/// (each cell left-aligned, padded to its column's width and 3 spaces more, each line's end
/// trimmed), without its copy of every cell and line — a table of many rows held once.
/// `None` when a cell holds anything else (wide characters, line breaks): comfy-table lays it out.
fn plain_table(headers: &[&str], rows: &[Vec<String>]) -> Option<String> {
    let widths = plain_widths(headers, rows.iter().map(|row| row.as_slice()))?;
    Some(write_plain(
        headers,
        &widths,
        rows.len(),
        rows.iter().map(|row| row.iter().map(String::as_str)),
    ))
}

/// A [`table`] of one row per item, each row made only while it is measured and again while it
/// is written (`row`): no row is held beside the items, so a table of many objects costs its
/// text only. Laid out exactly as [`table`] lays out the same rows.
pub fn table_of<T>(headers: &[&str], items: &[T], row: impl Fn(&T) -> Vec<String>) -> String {
    let widths =
        header_widths(headers).and_then(|start| items.iter().try_fold(start, |widths, item| widen(widths, &row(item))));
    match widths {
        Some(widths) => write_plain(
            headers,
            &widths,
            items.len(),
            items.iter().map(|item| row(item).into_iter()),
        ),
        None => table(headers, items.iter().map(row).collect()),
    }
}

/// Whether a cell is printable ASCII (laid out by [`write_plain`]).
fn plain(cell: &str) -> bool {
    cell.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// The headers' widths, if they are plain.
fn header_widths(headers: &[&str]) -> Option<Vec<usize>> {
    headers
        .iter()
        .all(|h| plain(h))
        .then(|| headers.iter().map(|h| h.len()).collect())
}

/// `widths` widened to a row's cells; `None` when the row does not fit a plain table (another
/// number of cells, or a cell that is not plain).
fn widen<S: AsRef<str>>(mut widths: Vec<usize>, cells: &[S]) -> Option<Vec<usize>> {
    if cells.len() != widths.len() {
        return None;
    }
    for (cell, width) in cells.iter().zip(widths.iter_mut()) {
        let cell = cell.as_ref();
        if !plain(cell) {
            return None;
        }
        *width = (*width).max(cell.len());
    }
    Some(widths)
}

/// The widths of a plain table of `rows`, or `None` (see [`widen`]).
fn plain_widths<'a>(headers: &[&str], mut rows: impl Iterator<Item = &'a [String]>) -> Option<Vec<usize>> {
    rows.try_fold(header_widths(headers)?, widen)
}

/// Writes a plain table: the headers, then each row, each cell padded to its column's width.
fn write_plain<R, C>(headers: &[&str], widths: &[usize], rows: usize, cells: R) -> String
where
    R: Iterator<Item = C>,
    C: Iterator,
    C::Item: AsRef<str>,
{
    let line_width: usize = widths.iter().map(|w| w + GAP).sum::<usize>() + 1;
    let mut text = String::with_capacity(line_width * (rows + 1));
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let start = text.len();
        for (cell, width) in cells.zip(widths) {
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', width - cell.len() + GAP));
        }
        text.truncate(text[start..].trim_end().len() + start);
        text.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in cells {
        let row: Vec<C::Item> = row.collect();
        line(&mut row.iter().map(AsRef::as_ref));
    }
    text
}

/// The columns between two columns of a [`table`].
const GAP: usize = 3;

/// A [`table`] whose lines fit in `width` columns (none when it is `None`, e.g. not a
/// terminal): when it is wider, the `shrink` columns give way in their order, each down to its
/// minimum (never below its header), and their cells are cut with `…`. What still does not fit
/// is printed whole.
pub fn table_fitted(
    headers: &[&str],
    mut rows: Vec<Vec<String>>,
    width: Option<usize>,
    shrink: &[(usize, usize)],
) -> String {
    if let Some(width) = width {
        let widths = fitted_widths(headers, &rows, width, shrink);
        for row in &mut rows {
            for (cell, &room) in row.iter_mut().zip(&widths) {
                cut(cell, room);
            }
        }
    }
    table(headers, rows)
}

/// The widths of the columns of a table fitted in `width` columns.
fn fitted_widths(headers: &[&str], rows: &[Vec<String>], width: usize, shrink: &[(usize, usize)]) -> Vec<usize> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(column) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    for &(column, minimum) in shrink {
        let total = widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1);
        let Some(excess) = total.checked_sub(width).filter(|e| *e > 0) else {
            break;
        };
        let floor = minimum.max(headers.get(column).map_or(0, |h| h.chars().count()));
        if let Some(w) = widths.get_mut(column) {
            *w -= excess.min(w.saturating_sub(floor));
        }
    }
    widths
}

/// Cuts `cell` to `room` characters, its end replaced by `…`.
fn cut(cell: &mut String, room: usize) {
    if cell.chars().count() > room {
        let kept: String = cell.chars().take(room.saturating_sub(1)).collect();
        *cell = kept + "…";
    }
}

/// The width of the terminal stdout is, when it is one.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    Table::new().width().map(usize::from).filter(|w| *w > 0)
}

/// JSON, pretty-printed, with a final newline.
pub fn json<T: Serialize>(value: &T) -> Result<String, UserError> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|err| UserError::failed(format!("cannot render JSON: {err}")))
}

/// YAML.
pub fn yaml<T: Serialize>(value: &T) -> Result<String, UserError> {
    serde_saphyr::to_string(value).map_err(|err| UserError::failed(format!("cannot render YAML: {err}")))
}

/// Age as kubectl prints it (`45s`, `3m20s`, `5h`, `12d`, `2y`), from a timestamp to now.
pub fn age(since: Option<&Time>) -> String {
    match since {
        Some(t) => human_duration(Timestamp::now().duration_since(t.0).as_secs()),
        None => "<unknown>".to_string(),
    }
}

/// kubectl's `HumanDuration` for a number of seconds.
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (minute, hour, day, year) = (60, 3600, 86_400, 365 * 86_400);
    match s {
        s if s < 2 * minute => format!("{s}s"),
        s if s < 10 * minute => {
            let (m, rest) = (s / minute, s % minute);
            if rest == 0 {
                format!("{m}m")
            } else {
                format!("{m}m{rest}s")
            }
        }
        s if s < 3 * hour => format!("{}m", s / minute),
        s if s < 8 * hour => {
            let (h, m) = (s / hour, (s % hour) / minute);
            if m == 0 {
                format!("{h}h")
            } else {
                format!("{h}h{m}m")
            }
        }
        s if s < 2 * day => format!("{}h", s / hour),
        s if s < 8 * day => {
            let (d, h) = (s / day, (s % day) / hour);
            if h == 0 {
                format!("{d}d")
            } else {
                format!("{d}d{h}h")
            }
        }
        s if s < 2 * year => format!("{}d", s / day),
        s if s < 8 * year => {
            let (y, d) = (s / year, (s % year) / day);
            if d == 0 {
                format!("{y}y")
            } else {
                format!("{y}y{d}d")
            }
        }
        s => format!("{}y", s / year),
    }
}

/// Whether colour is allowed on stderr: a terminal, and `NO_COLOR` unset.
pub fn color_allowed() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What comfy-table makes of a table (the layout [`plain_table`] writes directly).
    fn comfy(headers: &[&str], rows: Vec<Vec<String>>) -> String {
        comfy_table(headers, rows)
    }

    #[test]
    fn a_plain_table_is_laid_out_as_comfy_table_lays_it_out() {
        let cases: Vec<(Vec<&str>, Vec<Vec<&str>>)> = vec![
            (vec!["KIND", "NAMESPACE", "NAME"], vec![]),
            (
                vec!["KIND", "NAMESPACE", "NAME"],
                vec![vec!["ConfigMap", "default", "a"]],
            ),
            (
                vec!["KIND", "NAMESPACE", "NAME", "AGE"],
                vec![
                    vec!["Deployment.apps", "", "web", "5d"],
                    vec!["ConfigMap", "a-very-long-namespace-name", "", ""],
                    vec!["X", " leading", "trailing  ", "<none>"],
                    vec!["", "", "", ""],
                ],
            ),
            (vec!["A"], vec![vec!["x"], vec!["longer cell ~!@#$%^&*()"]]),
        ];
        for (headers, rows) in cases {
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|row| row.into_iter().map(String::from).collect())
                .collect();
            assert_eq!(
                table(&headers, rows.clone()),
                comfy(&headers, rows.clone()),
                "{headers:?} {rows:?}"
            );
            assert!(plain_table(&headers, &rows).is_some());
            // Made row by row, the same table.
            assert_eq!(table_of(&headers, &rows, Clone::clone), comfy(&headers, rows.clone()));
        }
        // Anything else is comfy-table's: wide characters, line breaks, short rows.
        let wide = vec![vec!["名前".to_string()]];
        assert_eq!(table_of(&["NAME"], &wide, Clone::clone), comfy(&["NAME"], wide.clone()));
        assert!(plain_table(&["NAME"], &wide).is_none());
        assert_eq!(table(&["NAME"], wide.clone()), comfy(&["NAME"], wide));
        let broken = vec![vec!["two\nlines".to_string()]];
        assert!(plain_table(&["NAME"], &broken).is_none());
        let short = vec![vec!["a".to_string()]];
        assert!(plain_table(&["A", "B"], &short).is_none());
    }

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86_400), "3d");
        assert_eq!(human_duration(20 * 86_400), "20d");
        assert_eq!(human_duration(-5), "0s");
    }

    #[test]
    fn tables_are_kubectl_like() {
        let text = table(
            &["KIND", "NAME"],
            vec![
                vec!["ConfigMap".into(), "a".into()],
                vec!["Deployment.apps".into(), "bb".into()],
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "KIND              NAME");
        assert_eq!(lines[1], "ConfigMap         a");
        assert_eq!(lines[2], "Deployment.apps   bb");
    }

    #[test]
    fn a_fitted_table_cuts_the_columns_that_give_way_first() {
        let rows = vec![vec![
            "web".to_string(),
            "a reason far too long to fit in the width".to_string(),
        ]];
        let text = table_fitted(&["NAME", "WHY"], rows.clone(), Some(30), &[(1, 10), (0, 3)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "web    a reason far too long …");
        assert_eq!(lines[1].chars().count(), 30);
        // Down to its minimum, then the next column gives way (never below its header).
        let text = table_fitted(&["NAME", "WHY"], rows.clone(), Some(12), &[(1, 5), (0, 3)]);
        assert_eq!(text.lines().nth(1), Some("web    a re…"));
        assert_eq!(
            table_fitted(&["NAME", "WHY"], rows.clone(), None, &[(1, 5)]),
            table(&["NAME", "WHY"], rows)
        );
    }
}
