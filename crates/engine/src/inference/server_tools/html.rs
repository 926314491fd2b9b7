//! HTML reduced to readable text, roughly: the `<title>`, the text of the body with a line
//! break at block elements, scripts, styles and other non-text elements left out, the
//! common character references decoded, whitespace collapsed. One linear pass; no DOM.

/// Elements whose content is never text for a reader.
const SKIPPED: [&str; 7] = [
    "script", "style", "noscript", "svg", "template", "iframe", "object",
];

/// Elements that start a new line (a paragraph, but for line-like ones).
const BLOCKS: [&str; 30] = [
    "p",
    "div",
    "br",
    "ul",
    "ol",
    "table",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "blockquote",
    "pre",
    "hr",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
];

/// The page's title and its text.
pub(crate) fn to_text(html: &str) -> (Option<String>, String) {
    let mut out = String::with_capacity(html.len() / 4);
    let mut title = None;
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        text(&rest[..lt], &mut out);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |e| &after[e + 3..]);
            continue;
        }
        let (name, closing, end) = tag(rest);
        rest = &rest[end..];
        if name.is_empty() {
            continue;
        }
        if !closing && SKIPPED.contains(&name.as_str()) {
            rest = after_close(rest, &name);
        } else if !closing && name == "title" {
            let close = find_close(rest, "title").unwrap_or(rest.len());
            let mut t = String::new();
            text(&rest[..close], &mut t);
            let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
            if title.is_none() && !t.is_empty() {
                title = Some(t);
            }
            rest = after_close(rest, "title");
        } else if name == "li" {
            if !closing {
                out.push_str("\n- ");
            }
        } else if matches!(name.as_str(), "br" | "tr" | "dt" | "dd") {
            out.push('\n');
        } else if BLOCKS.contains(&name.as_str()) {
            out.push_str("\n\n");
        } else if matches!(name.as_str(), "td" | "th") && !closing {
            out.push(' ');
        }
    }
    text(rest, &mut out);
    (title, tidy(&out))
}

/// The tag at the start of `s` (which starts with `<`): its lower-case name, whether it
/// closes, and where it ends. Quoted attribute values may hold `>`.
fn tag(s: &str) -> (String, bool, usize) {
    let bytes = s.as_bytes();
    let mut i = 1;
    let closing = bytes.get(1) == Some(&b'/');
    if closing {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
        i += 1;
    }
    let name = s[start..i].to_ascii_lowercase();
    let mut quote = None;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (None, b'"' | b'\'') => quote = Some(bytes[i]),
            (Some(q), c) if c == q => quote = None,
            (None, b'>') => return (name, closing, i + 1),
            _ => {}
        }
        i += 1;
    }
    (name, closing, s.len())
}

/// Where `</name` starts in `s`, case-insensitively.
fn find_close(s: &str, name: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    s.match_indices("</").map(|(i, _)| i).find(|&i| {
        bytes
            .get(i + 2..i + 2 + name.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(name.as_bytes()))
    })
}

/// What follows the element's closing tag (the end when it never closes).
fn after_close<'a>(s: &'a str, name: &str) -> &'a str {
    match find_close(s, name) {
        Some(at) => {
            let rest = &s[at..];
            &rest[rest.find('>').map_or(rest.len(), |e| e + 1)..]
        }
        None => "",
    }
}

/// Text between tags, its references decoded and its whitespace runs made one space.
fn text(raw: &str, out: &mut String) {
    let mut rest = raw;
    let mut space = false;
    while !rest.is_empty() {
        let c = rest.chars().next().unwrap_or(' ');
        if c == '&'
            && let Some((decoded, len)) = reference(rest)
        {
            out.push(decoded);
            rest = &rest[len..];
            space = false;
            continue;
        }
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.push(c);
            space = false;
        }
        rest = &rest[c.len_utf8()..];
    }
}

/// The character a reference at the start of `s` stands for, and its length.
fn reference(s: &str) -> Option<(char, usize)> {
    let end = s.get(..12.min(s.len()))?.find(';')?;
    let body = &s[1..end];
    let c = if let Some(num) = body.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        char::from_u32(code).filter(|c| !c.is_control() || c.is_whitespace())?
    } else {
        match body {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            "nbsp" => ' ',
            "mdash" => '\u{2014}',
            "ndash" => '\u{2013}',
            "hellip" => '\u{2026}',
            "lsquo" => '\u{2018}',
            "rsquo" => '\u{2019}',
            "ldquo" => '\u{201c}',
            "rdquo" => '\u{201d}',
            "copy" => '\u{a9}',
            _ => return None,
        }
    };
    Some((c, end + 1))
}

/// Lines trimmed, at most one blank line in a row, no blank start or end.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    for line in s.lines().map(str::trim) {
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        out.push_str(line);
        blank = 0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_becomes_its_title_and_text() {
        let html = r#"<!doctype html><html><head><title> The  Title </title>
            <style>body { color: red }</style><script>var x = "</p>";</script></head>
            <body><!-- note --><h1>Heading</h1><p>First &amp; <b>bold</b>&nbsp;words.</p>
            <ul><li>one</li><li>two</li></ul><a href="/x?a=1&b=>2">link</a>
            <SCRIPT type="x">hidden</SCRIPT><p>caf&#233; &#x2192; &unknown; end</p></body></html>"#;
        let (title, text) = to_text(html);
        assert_eq!(title.as_deref(), Some("The Title"));
        assert_eq!(
            text,
            "Heading\n\nFirst & bold words.\n\n- one\n- two\n\nlink\n\ncafé → &unknown; end"
        );
    }

    #[test]
    fn broken_markup_ends_without_panicking() {
        for html in [
            "<",
            "<p",
            "<script>never closed",
            "&#xFFFFFFFF;",
            "<!-- open",
            "a &",
            "é<é",
        ] {
            let _ = to_text(html);
        }
        assert_eq!(to_text("plain text").1, "plain text");
    }
}
