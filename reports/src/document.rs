//! A tiny document model, so report.md and report.html say exactly the same things.

/// One block of a report.
pub(crate) enum Block {
    Heading(u8, String),
    Paragraph(String),
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    Image {
        alt: String,
        png: String,
        svg: String,
    },
}

pub(crate) fn to_markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        match block {
            Block::Heading(level, text) => out.push_str(&format!("{} {text}\n\n", "#".repeat(*level as usize))),
            Block::Paragraph(text) => out.push_str(&format!("{text}\n\n")),
            Block::Table { header, rows } => {
                let cell = |s: &String| s.replace('|', "\\|");
                out.push_str(&format!(
                    "| {} |\n",
                    header.iter().map(cell).collect::<Vec<_>>().join(" | ")
                ));
                out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
                for row in rows {
                    out.push_str(&format!(
                        "| {} |\n",
                        row.iter().map(cell).collect::<Vec<_>>().join(" | ")
                    ));
                }
                out.push('\n');
            }
            Block::Image { alt, png, .. } => out.push_str(&format!("![{alt}]({png})\n\n")),
        }
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline `code` spans are the only Markdown the paragraphs use.
fn inline(text: &str) -> String {
    escape(text)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

pub(crate) fn to_html(title: &str, blocks: &[Block]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
body{{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
th{{background:#f0f0f0}}img{{max-width:100%}}code{{background:#f4f4f4}}</style></head><body>\n",
        escape(title)
    );
    for block in blocks {
        match block {
            Block::Heading(level, text) => out.push_str(&format!("<h{level}>{}</h{level}>\n", inline(text))),
            Block::Paragraph(text) => out.push_str(&format!("<p>{}</p>\n", inline(text))),
            Block::Table { header, rows } => {
                out.push_str("<table><tr>");
                for h in header {
                    out.push_str(&format!("<th>{}</th>", escape(h)));
                }
                out.push_str("</tr>\n");
                for row in rows {
                    out.push_str("<tr>");
                    for c in row {
                        out.push_str(&format!("<td>{}</td>", escape(c)));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</table>\n");
            }
            Block::Image { alt, svg, .. } => out.push_str(&format!(
                "<p><img src=\"{}\" alt=\"{}\"></p>\n",
                escape(svg),
                escape(alt)
            )),
        }
    }
    out.push_str("</body></html>\n");
    out
}
