//! CSV for exports (the console's audit and analytics, the desktop's usage export): RFC
//! 4180 quoting, CRLF lines, and a `'` before a cell a spreadsheet would run as a formula
//! (names and groups come from the IdP and are untrusted).

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::Value;

/// A CSV cell: quoted when it must be, and with `'` before what a spreadsheet would run.
pub fn cell(v: &str) -> String {
    let guarded = match v.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => format!("'{v}"),
        _ => v.to_owned(),
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

/// One CSV line of the fields `columns` of `v`, in that order (null is empty).
pub fn line(columns: &[&str], v: &Value) -> String {
    let cells: Vec<String> = columns
        .iter()
        .map(|c| match &v[*c] {
            Value::Null => String::new(),
            Value::String(s) => cell(s),
            other => cell(&other.to_string()),
        })
        .collect();
    format!("{}\r\n", cells.join(","))
}

/// A whole CSV document: the header line, then one line per row.
pub fn document(columns: &[&str], rows: &[Value]) -> String {
    let mut out = format!("{}\r\n", columns.join(","));
    for r in rows {
        out.push_str(&line(columns, r));
    }
    out
}

/// A CSV download named `filename` (ASCII letters, digits, `-`, `_` and `.` only).
pub fn response(filename: &str, body: String) -> Response<Body> {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    let safe: String = filename
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_defused_and_cells_quoted() {
        assert_eq!(cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(cell("-1+2"), "'-1+2");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("line\nbreak"), "\"line\nbreak\"");
        assert_eq!(cell("plain"), "plain");
        let v = serde_json::json!({"a": "x", "b": 3, "c": null});
        assert_eq!(line(&["a", "b", "c"], &v), "x,3,\r\n");
        assert_eq!(document(&["a"], &[v]), "a\r\nx\r\n");
    }
}
