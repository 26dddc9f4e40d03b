//! A tiny document model, so report.md and report.html say exactly the same things.
//!
//! Text in headings, paragraphs, lists and table cells may use three bits of Markdown, which
//! the HTML renders: `code`, **bold** and [links](#anchor).

/// One block of a report.
pub(crate) enum Block {
    /// A heading; its anchor is [`anchor`] of its text, as GitHub makes it.
    Heading(u8, String),
    Paragraph(String),
    Table(Table),
    Image {
        alt: String,
        png: String,
        svg: String,
    },
    /// Text to copy as it is (a setting to paste): a code block.
    Code(String),
    /// A bulleted list.
    List(Vec<String>),
    /// Terms and what they mean (a table's columns).
    Terms(Vec<(String, String)>),
    /// Blocks folded under a one-line summary (`<details>`), open or not at first.
    Fold {
        summary: String,
        open: bool,
        blocks: Vec<Block>,
    },
    /// Blocks set apart in a box: the answer a page gives.
    Answer(Vec<Block>),
    /// The answer when it is a failure (nothing fits): a box in the colour of a failure.
    Failure(Vec<Block>),
}

/// A table: its header, rows, and the columns whose cells may wrap between words (every
/// other cell keeps to one line, so that no number breaks in two).
pub(crate) struct Table {
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    /// What each column means, shown when the pointer rests on its header (may be empty).
    pub(crate) titles: Vec<String>,
    pub(crate) wrap: Vec<usize>,
}

impl Table {
    pub(crate) fn new(header: Vec<String>, rows: Vec<Vec<String>>) -> Table {
        Table {
            header,
            rows,
            titles: Vec::new(),
            wrap: Vec::new(),
        }
    }

    pub(crate) fn titles(mut self, titles: Vec<String>) -> Table {
        self.titles = titles;
        self
    }

    pub(crate) fn wrap(mut self, columns: &[usize]) -> Table {
        self.wrap = columns.to_vec();
        self
    }
}

/// Tables longer than this are folded under a summary line.
pub(crate) const FOLD_ROWS: usize = 12;

/// `table`, folded under `summary` when it is longer than [`FOLD_ROWS`].
pub(crate) fn table_folded(summary: String, table: Table) -> Block {
    if table.rows.len() > FOLD_ROWS {
        Block::Fold {
            summary,
            open: false,
            blocks: vec![Block::Table(table)],
        }
    } else {
        Block::Table(table)
    }
}

/// The anchor GitHub gives a heading: lower case, spaces to hyphens, punctuation but `-` and `_`
/// dropped. The HTML uses the same, so that links work in both.
pub(crate) fn anchor(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

pub(crate) fn to_markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    markdown_into(&mut out, blocks);
    out
}

fn markdown_into(out: &mut String, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Heading(level, text) => out.push_str(&format!("{} {text}\n\n", "#".repeat(*level as usize))),
            Block::Paragraph(text) => out.push_str(&format!("{text}\n\n")),
            Block::Table(table) => {
                let cell = |s: &String| s.replace('|', "\\|");
                out.push_str(&format!(
                    "| {} |\n",
                    table.header.iter().map(cell).collect::<Vec<_>>().join(" | ")
                ));
                out.push_str(&format!("|{}\n", "---|".repeat(table.header.len())));
                for row in &table.rows {
                    out.push_str(&format!(
                        "| {} |\n",
                        row.iter().map(cell).collect::<Vec<_>>().join(" | ")
                    ));
                }
                out.push('\n');
            }
            Block::Image { alt, png, .. } => out.push_str(&format!("![{alt}]({png})\n\n")),
            Block::Code(text) => out.push_str(&format!("```sh\n{text}\n```\n\n")),
            Block::List(items) => {
                for item in items {
                    out.push_str(&format!("- {item}\n"));
                }
                out.push('\n');
            }
            Block::Terms(terms) => {
                for (term, meaning) in terms {
                    out.push_str(&format!("- **{term}**: {meaning}\n"));
                }
                out.push('\n');
            }
            Block::Fold { summary, open, blocks } => {
                // GitHub renders <details> in Markdown; the blank lines let the inside be Markdown.
                out.push_str(&format!(
                    "<details{}><summary>{}</summary>\n\n",
                    if *open { " open" } else { "" },
                    inline(summary)
                ));
                markdown_into(out, blocks);
                out.push_str("</details>\n\n");
            }
            Block::Answer(blocks) | Block::Failure(blocks) => markdown_into(out, blocks),
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The Markdown the text uses, as HTML: `code`, **bold**, [text](#anchor).
fn inline(text: &str) -> String {
    inline_with(text, false)
}

/// As [`inline`]; where `breaks`, the text may also break after commas and equals signs
/// (settings such as `max_split_size_mb:256,roundup_power2_divisions:4` have no spaces). The
/// breaks are `<wbr>`, which copying leaves out.
fn inline_with(text: &str, breaks: bool) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("<code>{}</code>", words(part, breaks)));
        } else {
            out.push_str(&links_and_bold(part, breaks));
        }
    }
    out
}

/// Escaped text, with break opportunities where asked.
fn words(text: &str, breaks: bool) -> String {
    let escaped = escape(text);
    if breaks {
        escaped.replace(',', ",<wbr>").replace('=', "=<wbr>")
    } else {
        escaped
    }
}

fn links_and_bold(text: &str, breaks: bool) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        // A link is [text](#anchor); anything else with brackets is text.
        let link = rest[open..].find("](#").and_then(|mid| {
            let label = &rest[open + 1..open + mid];
            let target_start = open + mid + 2;
            let close = rest[target_start..].find(')')?;
            let target = &rest[target_start..target_start + close];
            let simple = !label.contains('[') && !target.contains(char::is_whitespace);
            simple.then_some((label, target, target_start + close + 1))
        });
        match link {
            Some((label, target, end)) => {
                out.push_str(&bold(&rest[..open], breaks));
                out.push_str(&format!("<a href=\"{}\">{}</a>", escape(target), bold(label, breaks)));
                rest = &rest[end..];
            }
            None => {
                out.push_str(&bold(&rest[..=open], breaks));
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(&bold(rest, breaks));
    out
}

fn bold(text: &str, breaks: bool) -> String {
    let parts: Vec<&str> = text.split("**").collect();
    if parts.len().is_multiple_of(2) {
        // Unbalanced: literal.
        return words(text, breaks);
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<strong>{}</strong>", words(part, breaks))
            } else {
                words(part, breaks)
            }
        })
        .collect()
}

/// A table cell: inline Markdown, and break opportunities in a column that wraps.
fn cell(text: &str, wraps: bool) -> String {
    inline_with(text, wraps)
}

const STYLE: &str = "\
*{box-sizing:border-box}\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;max-width:1240px;margin:1.5em auto;padding:0 1.2em;color:#222;line-height:1.45}\
h1{margin:.2em 0 .4em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.15em}h3{margin-top:1.4em}\
.scroll{overflow-x:auto;max-width:100%;margin:.6em 0}\
table{border-collapse:collapse;font-size:.94em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}\
th{background:#f0f0f0;white-space:normal;vertical-align:bottom}th[title]{cursor:help}\
td.wrap,th.wrap{white-space:normal;text-align:left}td.wrap{min-width:8em}td:first-child,th:first-child{text-align:left}\
tr:nth-child(even) td{background:#fafafa}\
img{max-width:100%;height:auto;display:block;margin:.6em 0}\
code{background:#f2f2f2;padding:0 .2em;border-radius:3px;overflow-wrap:anywhere}\
pre.copy{background:#f6f8fa;border:1px solid #c9d1d9;border-radius:6px;padding:.6em .9em;margin:.5em 0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:1.05em}\
pre.copy code{background:none;padding:0;user-select:all}\
.answer{border:2px solid #2f8a4a;background:#f2faf4;border-radius:8px;padding:.3em 1.1em;margin:1em 0}\
.answer h2{border:none;margin-top:.5em}\
.answer.failure{border-color:#b3261e;background:#fdf0ef}.answer.failure h2{color:#b3261e}\
details{margin:.5em 0}summary{cursor:pointer;color:#0b5cad}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:.6em 0}dt{font-weight:600}dd{margin:0}\
ul.toc{columns:2;column-gap:2em}\
";

pub(crate) fn to_html(title: &str, blocks: &[Block]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n",
        escape(title)
    );
    html_into(&mut out, blocks);
    out.push_str("</body></html>\n");
    out
}

fn html_into(out: &mut String, blocks: &[Block]) {
    for block in blocks {
        match block {
            Block::Heading(level, text) => out.push_str(&format!(
                "<h{level} id=\"{}\">{}</h{level}>\n",
                escape(&anchor(text)),
                inline(text)
            )),
            Block::Paragraph(text) => out.push_str(&format!("<p>{}</p>\n", inline(text))),
            Block::Table(table) => {
                out.push_str("<div class=\"scroll\"><table><tr>");
                for (i, h) in table.header.iter().enumerate() {
                    let class = if table.wrap.contains(&i) { " class=\"wrap\"" } else { "" };
                    match table.titles.get(i).filter(|t| !t.is_empty()) {
                        Some(title) => {
                            out.push_str(&format!("<th{class} title=\"{}\">{}</th>", escape(title), inline(h)))
                        }
                        None => out.push_str(&format!("<th{class}>{}</th>", inline(h))),
                    }
                }
                out.push_str("</tr>\n");
                for row in &table.rows {
                    out.push_str("<tr>");
                    for (i, c) in row.iter().enumerate() {
                        let wraps = table.wrap.contains(&i);
                        let class = if wraps { " class=\"wrap\"" } else { "" };
                        out.push_str(&format!("<td{class}>{}</td>", cell(c, wraps)));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table></div>\n");
            }
            Block::Image { alt, svg, .. } => {
                out.push_str(&format!("<img src=\"{}\" alt=\"{}\">\n", escape(svg), escape(alt)))
            }
            Block::Code(text) => out.push_str(&format!("<pre class=\"copy\"><code>{}</code></pre>\n", escape(text))),
            Block::List(items) => {
                out.push_str("<ul>");
                for item in items {
                    out.push_str(&format!("<li>{}</li>", inline(item)));
                }
                out.push_str("</ul>\n");
            }
            Block::Terms(terms) => {
                out.push_str("<dl>");
                for (term, meaning) in terms {
                    out.push_str(&format!("<dt>{}</dt><dd>{}</dd>", inline(term), inline(meaning)));
                }
                out.push_str("</dl>\n");
            }
            Block::Fold { summary, open, blocks } => {
                out.push_str(&format!(
                    "<details{}><summary>{}</summary>\n",
                    if *open { " open" } else { "" },
                    inline(summary)
                ));
                html_into(out, blocks);
                out.push_str("</details>\n");
            }
            Block::Answer(blocks) => {
                out.push_str("<section class=\"answer\">\n");
                html_into(out, blocks);
                out.push_str("</section>\n");
            }
            Block::Failure(blocks) => {
                out.push_str("<section class=\"answer failure\">\n");
                html_into(out, blocks);
                out.push_str("</section>\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_in_text_is_rendered_in_html() {
        assert_eq!(
            inline("Measured on **NVIDIA H100 80GB HBM3** (`h100`)."),
            "Measured on <strong>NVIDIA H100 80GB HBM3</strong> (<code>h100</code>)."
        );
        assert_eq!(
            inline("see [transfer family](#transfer-family), a < b"),
            "see <a href=\"#transfer-family\">transfer family</a>, a &lt; b"
        );
        // Brackets that are no link stay text; settings keep their quotes escaped.
        assert_eq!(
            inline("roundup_power2_divisions:[64:8,>:1]: PYTORCH_ALLOC_CONF=\"x\""),
            "roundup_power2_divisions:[64:8,&gt;:1]: PYTORCH_ALLOC_CONF=&quot;x&quot;"
        );
        assert_eq!(inline("2 ** 3"), "2 ** 3");
    }

    #[test]
    fn anchors_are_githubs() {
        assert_eq!(anchor("transfer family"), "transfer-family");
        assert_eq!(anchor("h2d_pinned"), "h2d_pinned");
        assert_eq!(
            anchor("Self-check: against the recording"),
            "self-check-against-the-recording"
        );
    }

    #[test]
    fn long_tables_fold_and_cells_keep_numbers_whole() {
        let rows = (0..20).map(|i| vec![i.to_string(), "a,b".to_string()]).collect();
        let table = Table::new(vec!["n".into(), "setting".into()], rows).wrap(&[1]);
        let html = to_html("t", &[table_folded("20 rows".into(), table)]);
        assert!(html.contains("<details><summary>20 rows</summary>"), "{html}");
        assert!(html.contains("<td class=\"wrap\">a,<wbr>b</td>"), "{html}");
        assert!(html.contains("td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}"));
        let markdown = to_markdown(&[Block::Code("PYTORCH_ALLOC_CONF=\"x\"".into())]);
        assert_eq!(markdown, "```sh\nPYTORCH_ALLOC_CONF=\"x\"\n```\n\n");
    }
}
