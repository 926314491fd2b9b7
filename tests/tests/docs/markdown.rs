//! Just enough Markdown for the docs tests: the book's pages (with their `{{#include}}`s
//! expanded, as mdBook does), their fenced code blocks, their links and images, and the
//! anchors mdBook gives their headings.

use std::path::{Path, PathBuf};

/// A page of the book: where it is and its text with includes expanded.
pub struct Page {
    pub path: PathBuf,
    pub text: String,
}

/// A fenced code block: the info string (`yaml,fragment`), its text, its first line.
pub struct Block {
    pub info: String,
    pub body: String,
    pub line: usize,
}

/// A link or image target as written (`../server/limits.md#traffic-limits`).
pub struct Link {
    pub target: String,
    pub line: usize,
}

/// Every `.md` file under `dir`, sorted.
pub fn pages(dir: &Path) -> Vec<Page> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("docs dir reads") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let raw = std::fs::read_to_string(&path).expect("page reads");
            let text = expand_includes(&path, &raw);
            Page { path, text }
        })
        .collect()
}

/// `{{#include path}}` replaced by the file it names (relative to the page); a missing file
/// panics with the page's name.
fn expand_includes(page: &Path, text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        match line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|l| l.strip_suffix("}}"))
        {
            Some(target) => {
                let file = page.parent().expect("page dir").join(target.trim());
                let included = std::fs::read_to_string(&file).unwrap_or_else(|e| {
                    panic!("{}: include {}: {e}", page.display(), file.display())
                });
                out += &included;
            }
            None => out += line,
        }
        out.push('\n');
    }
    out
}

/// The fenced code blocks of `text` (``` or ~~~, indented or not).
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, String, usize, usize)> = None; // fence, info, indent, line
    let mut body = String::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &open {
            None => {
                if let Some(fence) = fence_of(trimmed) {
                    let info = trimmed[fence.len()..].trim().to_owned();
                    open = Some((fence, info, indent, i + 1));
                    body.clear();
                }
            }
            Some((fence, info, fence_indent, start)) => {
                if trimmed.starts_with(fence.as_str()) && trimmed.trim() == fence.as_str() {
                    out.push(Block {
                        info: info.clone(),
                        body: std::mem::take(&mut body),
                        line: *start,
                    });
                    open = None;
                } else {
                    let cut = indent.min(*fence_indent);
                    body += &line[cut..];
                    body.push('\n');
                }
            }
        }
    }
    out
}

fn fence_of(line: &str) -> Option<String> {
    ["```", "~~~"].iter().find_map(|f| {
        line.starts_with(f).then(|| {
            let c = f.chars().next().unwrap_or('`');
            line.chars().take_while(|x| *x == c).collect()
        })
    })
}

/// The text outside code blocks, with code blocks' lines left empty (so line numbers
/// stay right).
pub fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &fence {
            None => {
                if let Some(f) = fence_of(trimmed) {
                    fence = Some(f);
                } else {
                    out += line;
                }
            }
            Some(f) => {
                if trimmed.trim() == f.as_str() {
                    fence = None;
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Links and images in `text` (`[t](x)`, `![a](x)`), outside code blocks and code spans.
pub fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (i, line) in prose(text).lines().enumerate() {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(Link {
                target: target.to_owned(),
                line: i + 1,
            });
            rest = &after[end..];
        }
    }
    out
}

/// The line with every code span blanked out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The anchors mdBook gives the headings of `text`: the heading's text without markup,
/// lower-cased, spaces as `-`, other punctuation dropped; a repeated one gets `-1`, `-2`.
pub fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in prose(text).lines() {
        let Some(title) = heading(line) else { continue };
        let base = slug(&plain_text(title));
        let mut id = base.clone();
        let mut n = 1;
        while out.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        out.push(id);
    }
    out
}

fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
        Some(line[hashes..].trim())
    } else {
        None
    }
}

/// A heading's text as it reads: links keep their text, code spans and emphasis lose
/// their marks.
fn plain_text(title: &str) -> String {
    let mut out = String::new();
    let mut rest = title;
    while let Some(open) = rest.find('[') {
        out += &rest[..open];
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                out += &after[..close];
                rest = &after[end + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out += rest;
    out.replace(['`', '*'], "")
}

fn slug(text: &str) -> String {
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_as_mdbook_makes_them() {
        let text = "# Sign-in for people (OIDC and the device flow)\n\n\
                    ## OpenAI-compatible upstreams (`provider: openai`)\n\
                    ```sh\n# not a heading\n```\n## Notes\n## Notes\n";
        assert_eq!(
            anchors(text),
            [
                "sign-in-for-people-oidc-and-the-device-flow",
                "openai-compatible-upstreams-provider-openai",
                "notes",
                "notes-1"
            ]
        );
    }

    #[test]
    fn links_outside_code() {
        let text = "See [a](x.md#b) and `[c](no.md)`, ![i](../s.png).\n```\n[d](no.md)\n```\n";
        let got: Vec<String> = links(text).into_iter().map(|l| l.target).collect();
        assert_eq!(got, ["x.md#b", "../s.png"]);
    }

    #[test]
    fn indented_blocks_lose_their_indent() {
        let b = blocks("- item\n\n  ```json\n  {\"a\": 1}\n  ```\n");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].info, "json");
        assert_eq!(b[0].body, "{\"a\": 1}\n");
    }
}
