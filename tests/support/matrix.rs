//! A results matrix (rows × columns of cells that pass or fail, each with a short note),
//! rendered as a Markdown table and kept in committed files: a test either writes the table
//! it generated or fails when the committed copy differs, so the table cannot drift.

use std::path::Path;

/// One cell: passed or not, and how (a shaping that applied, or why it failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub pass: bool,
    pub note: String,
}

impl Cell {
    pub fn pass(note: impl Into<String>) -> Cell {
        Cell {
            pass: true,
            note: note.into(),
        }
    }

    pub fn fail(note: impl Into<String>) -> Cell {
        Cell {
            pass: false,
            note: note.into(),
        }
    }

    fn markdown(&self) -> String {
        let mark = if self.pass { "✓" } else { "✗" };
        let note = self.note.replace('|', "/").replace('\n', " ");
        if note.is_empty() {
            mark.to_owned()
        } else {
            format!("{mark} {note}")
        }
    }
}

/// Rows of cells under named columns.
#[derive(Clone, Debug, Default)]
pub struct Matrix {
    pub corner: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<Cell>)>,
}

impl Matrix {
    /// The Markdown table, one line per row.
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} | {} |\n", self.corner, self.columns.join(" | "));
        out += &format!("|---|{}\n", "---|".repeat(self.columns.len()));
        for (name, cells) in &self.rows {
            let cells: Vec<String> = cells.iter().map(Cell::markdown).collect();
            out += &format!("| {name} | {} |\n", cells.join(" | "));
        }
        out
    }

    /// Every failing cell: row, column and the cell.
    pub fn failures(&self) -> Vec<(&str, &str, &Cell)> {
        let mut out = Vec::new();
        for (name, cells) in &self.rows {
            for (column, cell) in self.columns.iter().zip(cells) {
                if !cell.pass {
                    out.push((name.as_str(), column.as_str(), cell));
                }
            }
        }
        out
    }
}

/// Keeps `generated` in the file at `path`: the whole file, or with `markers` only the text
/// between the begin and end marker lines. With `write` the file is written; otherwise a
/// committed copy that differs is an `Err` naming the file and the first differing line.
pub fn keep(
    path: &Path,
    markers: Option<(&str, &str)>,
    generated: &str,
    write: bool,
) -> Result<(), String> {
    let current = std::fs::read_to_string(path).unwrap_or_default();
    let wanted = match markers {
        None => generated.to_owned(),
        Some((begin, end)) => {
            let (Some(b), Some(e)) = (current.find(begin), current.find(end)) else {
                return Err(format!(
                    "{} has no `{begin}` … `{end}` markers",
                    path.display()
                ));
            };
            let head = &current[..b + begin.len()];
            format!("{head}\n{generated}{}", &current[e..])
        }
    };
    if wanted == current {
        return Ok(());
    }
    if write {
        return std::fs::write(path, wanted).map_err(|e| format!("{}: {e}", path.display()));
    }
    let line = wanted
        .lines()
        .zip(current.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| wanted.lines().count().min(current.lines().count()));
    Err(format!(
        "{} differs from what the test generated (first at line {}):\n  committed: {}\n  generated: {}",
        path.display(),
        line + 1,
        current.lines().nth(line).unwrap_or("<end of file>"),
        wanted.lines().nth(line).unwrap_or("<end of file>"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_keeps_between_markers() {
        let m = Matrix {
            corner: "kind".into(),
            columns: vec!["a".into(), "b".into()],
            rows: vec![(
                "x".into(),
                vec![Cell::pass(""), Cell::fail("400 | refused")],
            )],
        };
        assert_eq!(
            m.markdown(),
            "| kind | a | b |\n|---|---|---|\n| x | ✓ | ✗ 400 / refused |\n"
        );
        assert_eq!(m.failures().len(), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("README.md");
        std::fs::write(&path, "top\n<!-- b -->\nold\n<!-- e -->\nbottom\n").unwrap();
        let markers = Some(("<!-- b -->", "<!-- e -->"));
        assert!(keep(&path, markers, "new\n", false).is_err());
        keep(&path, markers, "new\n", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "top\n<!-- b -->\nnew\n<!-- e -->\nbottom\n"
        );
        keep(&path, markers, "new\n", false).unwrap();
    }
}
