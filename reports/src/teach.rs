//! The teaching site `vramlab teach` writes: one self-contained HTML page per topic (its
//! controls, and every view the controls can reach, precomputed by `sim`'s families from the
//! models and the records: [`experiments::TeachPage`]). The pages' script only looks a view up
//! and draws it; it computes nothing a model decides. Nothing is fetched: the style, the script,
//! the data and the pictures (SVG) are all inside each page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use experiments::TeachPage;
use serde::Serialize;

use crate::error::Result;

/// Writes `pages` and an index (`index.html`) into `dir`, each page through
/// [`experiments::write_atomically`] (inside the output folder, never through a symbolic link);
/// gives the files written, the index first.
pub fn write_teach_site(dir: &Path, pages: &[TeachPage]) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let index = dir.join("index.html");
    experiments::write_atomically(&index, teach_index_html(pages).as_bytes())?;
    written.push(index);
    for page in pages {
        if let Some(why) = experiments::unsafe_name(&page.slug) {
            return Err(experiments::Error::Invalid(format!("teach page: {why}")).into());
        }
        let path = dir.join(format!("{}.html", page.slug));
        experiments::write_atomically(&path, teach_page_html(page, pages).as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JSON inside a `<script>` element: `</` and `<!--` cannot end it or open a comment.
fn script_json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "{}".into())
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--")
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{} - vramlab teach</title>\n<style>{STYLE}</style>\n</head>\n",
        escape(title)
    )
}

fn nav(pages: &[TeachPage], current: Option<&str>) -> String {
    let mut out = String::from("<nav aria-label=\"topics\"><a href=\"index.html\">vramlab teach</a>");
    for page in pages {
        let here = if current == Some(page.slug.as_str()) {
            " aria-current=\"page\""
        } else {
            ""
        };
        // The title's part before a colon: "Occupancy", not the whole line.
        let short = page.title.split(':').next().unwrap_or(&page.title);
        out.push_str(&format!(
            " <a href=\"{}.html\"{here}>{}</a>",
            escape(&page.slug),
            escape(short)
        ));
    }
    out.push_str("</nav>\n");
    out
}

/// The index page: what each topic shows, with its terminal command.
pub fn teach_index_html(pages: &[TeachPage]) -> String {
    let mut out = head("The memory hierarchy");
    out.push_str("<body>\n");
    out.push_str(&nav(pages, None));
    out.push_str("<main>\n<h1>The memory hierarchy, one warp at a time</h1>\n");
    out.push_str("<p>Each page below draws what one warp or one buffer does, from vramlab's models (the same code as <code>vramlab explain</code>, <code>vramlab run</code> and <code>vramlab replay</code>), beside what a real H100 or H200 measured for the same point where a committed measurement exists. The pages need no network and no server: open them from disk or put them on a course's website.</p>\n<ul class=\"topics\">\n");
    for page in pages {
        out.push_str(&format!(
            "<li><a href=\"{}.html\">{}</a>: {} <span class=\"cmd\">(terminal: <code>{}</code>)</span></li>\n",
            escape(&page.slug),
            escape(&page.title),
            escape(page.intro.first().map_or("", String::as_str)),
            escape(&page.terminal)
        ));
    }
    out.push_str("</ul>\n</main>\n</body>\n</html>\n");
    out
}

/// One topic's page.
pub fn teach_page_html(page: &TeachPage, pages: &[TeachPage]) -> String {
    let mut out = head(&page.title);
    out.push_str("<body>\n");
    out.push_str(&nav(pages, Some(&page.slug)));
    out.push_str(&format!("<main>\n<h1>{}</h1>\n", escape(&page.title)));
    for paragraph in &page.intro {
        out.push_str(&format!("<p>{}</p>\n", escape(paragraph)));
    }
    out.push_str(&format!(
        "<p class=\"terminal\">In the terminal: <code>{}</code></p>\n",
        escape(&page.terminal)
    ));
    let mut data = BTreeMap::new();
    for panel in &page.panels {
        let id = escape(&panel.id);
        out.push_str(&format!(
            "<section class=\"panel\" id=\"{id}\">\n<h2>{}</h2>\n<form class=\"controls\" onsubmit=\"return false\">\n",
            escape(&panel.title)
        ));
        for control in &panel.controls {
            let cid = format!("{id}-{}", escape(&control.name));
            let shown = control.labels.get(control.initial).map_or("", String::as_str);
            out.push_str(&format!("<label for=\"{cid}\">{}</label> ", escape(&control.label)));
            if control.kind == "range" {
                out.push_str(&format!(
                    "<input type=\"range\" id=\"{cid}\" min=\"0\" max=\"{}\" step=\"1\" value=\"{}\" aria-valuetext=\"{}\">",
                    control.values.len().saturating_sub(1),
                    control.initial,
                    escape(shown)
                ));
            } else {
                out.push_str(&format!("<select id=\"{cid}\">"));
                for (i, label) in control.labels.iter().enumerate() {
                    let selected = if i == control.initial { " selected" } else { "" };
                    out.push_str(&format!("<option value=\"{i}\"{selected}>{}</option>", escape(label)));
                }
                out.push_str("</select>");
            }
            out.push_str(&format!(
                " <output id=\"{cid}-out\" for=\"{cid}\">{}</output><br>\n",
                escape(shown)
            ));
        }
        out.push_str("</form>\n");
        out.push_str(&format!(
            "<div class=\"view\">\n<table class=\"facts\" id=\"{id}-facts\"></table>\n<div class=\"measured\" id=\"{id}-measured\"></div>\n<div class=\"picture\" id=\"{id}-picture\"></div>\n<p class=\"cmd\">This point in the terminal: <code id=\"{id}-command\"></code></p>\n<pre id=\"{id}-text\"></pre>\n</div>\n</section>\n"
        ));
        data.insert(panel.id.clone(), panel);
    }
    if !page.notes.is_empty() {
        out.push_str("<section class=\"notes\"><h2>Where the numbers come from</h2>\n<ul>\n");
        for note in &page.notes {
            out.push_str(&format!("<li>{}</li>\n", escape(note)));
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str(&format!(
        "</main>\n<script type=\"application/json\" id=\"teach-data\">{}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        script_json(&data)
    ));
    out
}

const STYLE: &str = r##"
:root { --ink:#1a1a1a; --muted:#555; --line:#ccc; --ok:#2e7d32; --bad:#c62828; --warn:#ef6c00; --a:#1565c0; --b:#6a1b9a; --bg:#fff; }
* { box-sizing: border-box; }
html { font-size:17px; }
body { margin:0; font: 1rem/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--ink); background:var(--bg); }
nav { background:#263238; padding:.5rem 1rem; }
nav a { color:#fff; margin-right:1rem; text-decoration:none; }
nav a[aria-current] { text-decoration:underline; font-weight:600; }
nav a:focus, input:focus, select:focus { outline:3px solid #ffb300; outline-offset:2px; }
main { max-width:1320px; margin:0 auto; padding:1rem 1.5rem 3rem; }
h1 { font-size:1.9rem; margin:.5rem 0; }
h2 { font-size:1.35rem; margin:1.2rem 0 .5rem; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }
pre { background:#f5f5f5; border:1px solid var(--line); padding:.6rem; overflow-x:auto; font-size:.8rem; line-height:1.35; white-space:pre-wrap; overflow-wrap:anywhere; }
.panel { border-top:2px solid var(--line); margin-top:1rem; }
.controls { display:grid; grid-template-columns:max-content minmax(12rem, 28rem) max-content; gap:.3rem .8rem; align-items:center; margin:.5rem 0 1rem; }
.controls br { display:none; }
.controls label { font-weight:600; }
.controls output { font-weight:600; font-variant-numeric:tabular-nums; min-width:6rem; }
input[type=range] { width:100%; height:1.6rem; }
select { font-size:1rem; padding:.2rem; }
.facts { border-collapse:collapse; margin:.3rem 0; font-variant-numeric:tabular-nums; }
.facts th { text-align:left; font-weight:normal; color:var(--muted); padding:.15rem 1rem .15rem 0; }
.facts td { padding:.15rem 0; font-weight:600; white-space:nowrap; }
.facts td.wrap { white-space:normal; }
.facts tr.strong td { font-size:1.15rem; }
.facts tr.bad td { color:var(--bad); }
.measured { margin:.3rem 0 .6rem; padding:.4rem .6rem; border-left:4px solid var(--a); background:#e3f2fd; }
.measured.none { border-left-color:var(--muted); background:#f0f0f0; color:var(--muted); }
.picture svg { max-width:100%; height:auto; display:block; }
.picture text { font: 11px system-ui, sans-serif; fill:var(--ink); }
.picture .big text, .picture text.big { font-size:13px; }
.cmd { color:var(--muted); }
.notes li { margin:.3rem 0; }
.topics li { margin:.5rem 0; }
.side { display:grid; grid-template-columns:1fr 1fr; gap:1rem; }
@media (max-width: 900px) { .controls { grid-template-columns:1fr; } .side { grid-template-columns:1fr; } }
/* A projector: larger type, and the pictures drawn larger with it. */
@media (min-width: 1800px) { html { font-size:22px; } main { max-width:1720px; } .picture svg { zoom:1.3; } }
@media print {
  nav, .controls input, .controls select { display:none; }
  html { font-size:11pt; }
  main { max-width:none; padding:0; }
  .panel { break-inside:avoid; }
  pre { font-size:8pt; white-space:pre-wrap; }
  .measured { background:none; }
  a { color:inherit; }
}
"##;

const SCRIPT: &str = r##"
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('teach-data').textContent);
  function esc(s) { return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;'); }
  function svg(w, h, body, label) {
    return '<svg viewBox="0 0 ' + w + ' ' + h + '" width="' + w + '" height="' + h + '" role="img" aria-label="' + esc(label || '') + '">' + body + '</svg>';
  }
  var colours = { lane: '#90caf9', conflict: '#ef9a9a', broadcast: '#a5d6a7', odd: '#fff3e0', even: '#e8eaf6',
                  hit: '#ffcc80', limit: '#c62828', other: '#90a4ae', l1: '#a5d6a7', l2: '#90caf9', dram: '#ef9a9a',
                  seg: '#eceff1', block: '#1565c0', block2: '#6a1b9a', pinned: '#1565c0', pageable: '#ef6c00', measured: '#000' };
  function fill(c) { return colours[c] || c || '#90caf9'; }
  // Lanes drawn in columns (banks, sectors, words): data.columns labels, cells placed by the caller.
  function cells(p) {
    var cw = p.cell_width || 30, ch = 22, top = 34, left = 70;
    var rows = Math.max(1, p.rows), n = p.column_labels.length;
    var w = Math.max(left + n * cw + 10, left + (p.legend || []).length * 190 + 20), h = top + rows * ch + 30, b = '';
    b += '<text x="4" y="' + (top - 18) + '">' + esc(p.column_title) + '</text>';
    b += '<text x="4" y="' + (top + 14) + '">' + esc(p.row_title) + '</text>';
    for (var i = 0; i < n; i++) {
      var x = left + i * cw;
      b += '<rect x="' + x + '" y="' + top + '" width="' + (cw - 2) + '" height="' + (rows * ch) + '" fill="' + fill(p.column_classes[i]) + '" stroke="#bbb"/>';
      b += '<text x="' + (x + cw / 2 - 1) + '" y="' + (top - 4) + '" text-anchor="middle">' + esc(p.column_labels[i]) + '</text>';
    }
    for (var r = 0; r < rows; r++) {
      b += '<text x="' + (left - 6) + '" y="' + (top + r * ch + 15) + '" text-anchor="end">' + esc((p.row_labels || [])[r] || '') + '</text>';
    }
    p.cells.forEach(function (c) {
      var x = left + c.col * cw, y = top + c.row * ch;
      b += '<rect x="' + (x + 2) + '" y="' + (y + 2) + '" width="' + (cw - 6) + '" height="' + (ch - 4) + '" rx="3" fill="' + fill(c.class) + '" stroke="#333" stroke-width="0.6"><title>' + esc(c.title || '') + '</title></rect>';
      b += '<text x="' + (x + cw / 2 - 1) + '" y="' + (y + 15) + '" text-anchor="middle">' + esc(c.text) + '</text>';
    });
    (p.legend || []).forEach(function (l, i) {
      var x = left + i * 190, y = top + rows * ch + 10;
      b += '<rect x="' + x + '" y="' + y + '" width="14" height="14" fill="' + fill(l[0]) + '" stroke="#333" stroke-width="0.6"/><text x="' + (x + 18) + '" y="' + (y + 12) + '">' + esc(l[1]) + '</text>';
    });
    return svg(w, h, b, p.title);
  }
  // Horizontal bars, one per resource; the binding one coloured.
  function bars(p) {
    var left = 230, bw = 520, bh = 26, w = left + bw + 160, h = p.bars.length * (bh + 8) + 20, b = '';
    var max = Math.max.apply(null, p.bars.map(function (x) { return x.value; }).concat([1]));
    p.bars.forEach(function (x, i) {
      var y = 10 + i * (bh + 8), len = bw * x.value / max;
      b += '<text class="big" x="' + (left - 8) + '" y="' + (y + 17) + '" text-anchor="end">' + esc(x.label) + '</text>';
      b += '<rect x="' + left + '" y="' + y + '" width="' + Math.max(1, len) + '" height="' + bh + '" fill="' + fill(x.class) + '"/>';
      b += '<text class="big" x="' + (left + len + 6) + '" y="' + (y + 17) + '">' + esc(x.text) + '</text>';
    });
    return svg(w, h, b, p.title);
  }
  function ticks(lo, hi, log) {
    var out = [];
    if (log) { for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(Math.pow(10, e)); return out; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) || 1))), n = (hi - lo) / step;
    if (n < 3) step /= 2; if (n > 8) step *= 2;
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(v);
    return out;
  }
  // A model curve with measured points and the point shown marked.
  function curve(p) {
    var w = 1000, h = 400, l = 80, r = 20, t = 20, bt = 76;
    var xs = [], ys = [];
    p.series.forEach(function (s) { s.points.forEach(function (q) { xs.push(q[0]); ys.push(q[1]); }); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = p.ylog ? Math.min.apply(null, ys) : 0, y1 = Math.max.apply(null, ys) * 1.05;
    function sx(x) { return p.xlog ? l + (w - l - r) * (Math.log(x / x0) / Math.log(x1 / x0)) : l + (w - l - r) * (x - x0) / ((x1 - x0) || 1); }
    function sy(y) { return p.ylog ? t + (h - t - bt) * (1 - Math.log(y / y0) / Math.log(y1 / y0)) : t + (h - t - bt) * (1 - (y - y0) / ((y1 - y0) || 1)); }
    var b = '<rect x="' + l + '" y="' + t + '" width="' + (w - l - r) + '" height="' + (h - t - bt) + '" fill="none" stroke="#999"/>';
    (p.bands || []).forEach(function (band) {
      var a = sx(Math.max(band[0], x0)), z = sx(Math.min(band[1], x1));
      if (z > a) b += '<rect x="' + a + '" y="' + t + '" width="' + (z - a) + '" height="' + (h - t - bt) + '" fill="' + fill(band[2]) + '" opacity="0.25"/><text x="' + (a + 4) + '" y="' + (t + 14) + '">' + esc(band[3]) + '</text>';
    });
    (p.xticks || []).forEach(function (q) {
      if (q[0] < x0 || q[0] > x1) return;
      b += '<line x1="' + sx(q[0]) + '" x2="' + sx(q[0]) + '" y1="' + (h - bt) + '" y2="' + (h - bt + 5) + '" stroke="#333"/><text x="' + sx(q[0]) + '" y="' + (h - bt + 18) + '" text-anchor="middle">' + esc(q[1]) + '</text>';
    });
    ticks(Math.max(y0, 1e-9), y1, p.ylog).forEach(function (v) {
      if (v < y0 || v > y1) return;
      b += '<line x1="' + (l - 5) + '" x2="' + l + '" y1="' + sy(v) + '" y2="' + sy(v) + '" stroke="#333"/><text x="' + (l - 8) + '" y="' + (sy(v) + 4) + '" text-anchor="end">' + esc(+v.toPrecision(3)) + '</text>';
    });
    b += '<text x="' + ((w + l) / 2) + '" y="' + (h - bt + 34) + '" text-anchor="middle">' + esc(p.xlabel) + '</text>';
    b += '<text x="14" y="' + ((h - bt) / 2) + '" transform="rotate(-90 14 ' + ((h - bt) / 2) + ')" text-anchor="middle">' + esc(p.ylabel) + '</text>';
    p.series.forEach(function (s, i) {
      var colour = fill(s.class);
      if (s.line) {
        b += '<polyline fill="none" stroke="' + colour + '" stroke-width="2.5" points="' + s.points.map(function (q) { return sx(q[0]) + ',' + sy(q[1]); }).join(' ') + '"/>';
      } else {
        s.points.forEach(function (q) { b += '<rect x="' + (sx(q[0]) - 4) + '" y="' + (sy(q[1]) - 4) + '" width="8" height="8" fill="none" stroke="' + colour + '" stroke-width="2"/>'; });
      }
      var ly = h - 26 + Math.floor(i / 3) * 16, lx = l + (i % 3) * 300;
      b += '<rect x="' + lx + '" y="' + (ly - 10) + '" width="14" height="' + (s.line ? 4 : 10) + '" fill="' + colour + '"/><text x="' + (lx + 18) + '" y="' + ly + '">' + esc(s.name) + '</text>';
    });
    (p.marks || []).forEach(function (m) {
      b += '<circle cx="' + sx(m[0]) + '" cy="' + sy(m[1]) + '" r="7" fill="#ffb300" stroke="#000" stroke-width="1.5"/>';
    });
    return svg(w, h, b, p.title);
  }
  // Device memory: each policy's segments in address order, its live blocks inside them.
  function memory(p) {
    var w = 1240, left = 10, rowh = 44, gap = 3, out = '';
    var most = Math.max.apply(null, p.policies.map(function (q) { return q.segments.length; }).concat([1]));
    var per = (w - 2 * left - gap * most) / p.scale_bytes;
    p.policies.forEach(function (q, pi) {
      var x = left, y = 24, b = '<text class="big" x="' + left + '" y="16">' + esc(q.name) + '</text>';
      q.segments.forEach(function (s) {
        var sw = Math.max(2, s[1] * per);
        b += '<rect x="' + x + '" y="' + y + '" width="' + sw + '" height="' + rowh + '" fill="' + fill('seg') + '" stroke="#546e7a"><title>segment ' + esc(s[2]) + '</title></rect>';
        (s[3] || []).forEach(function (k) {
          b += '<rect x="' + (x + k[0] * per) + '" y="' + (y + 4) + '" width="' + Math.max(1, k[1] * per) + '" height="' + (rowh - 8) + '" fill="' + fill(pi ? 'block2' : 'block') + '"/>';
        });
        x += sw + gap;
      });
      out += '<div class="memory">' + svg(w, y + rowh + 8, b, q.name) + '</div>';
    });
    return out;
  }
  var draw = { cells: cells, bars: bars, curve: curve, memory: memory };
  function update(id) {
    var panel = data[id], values = [];
    panel.controls.forEach(function (c) {
      var el = document.getElementById(id + '-' + c.name);
      var i = +el.value;
      var label = c.labels[i];
      document.getElementById(id + '-' + c.name + '-out').textContent = label;
      if (c.kind === 'range') el.setAttribute('aria-valuetext', label);
      values.push(c.values[i]);
    });
    var view = panel.views[values.join('|')];
    var facts = document.getElementById(id + '-facts');
    if (!view) {
      facts.innerHTML = '<tr><th>not computed</th><td>this combination is outside what the page holds</td></tr>';
      return;
    }
    facts.innerHTML = view.facts.map(function (f) {
      // Headlines drawn larger; red only for a bad value.
      var cls = [f.strong ? 'strong' : '', f.bad ? 'bad' : ''].filter(Boolean).join(' ');
      return '<tr data-fact="' + esc(f.key) + '"' + (cls ? ' class="' + cls + '"' : '') + '><th>' + esc(f.label) + '</th><td' + (f.value.length > 70 ? ' class="wrap"' : '') + '>' + esc(f.value) + '</td></tr>';
    }).join('');
    var measured = document.getElementById(id + '-measured');
    measured.innerHTML = view.measured.map(function (m) { return '<div>' + esc(m) + '</div>'; }).join('');
    measured.className = 'measured' + (view.measured.length && view.measured[0].indexOf('No committed') === 0 ? ' none' : '');
    var picture = document.getElementById(id + '-picture');
    picture.innerHTML = draw[view.picture.kind] ? draw[view.picture.kind](view.picture) : '';
    document.getElementById(id + '-command').textContent = view.command;
    var text = document.getElementById(id + '-text');
    text.textContent = view.text;
    text.hidden = !view.text;
  }
  Object.keys(data).forEach(function (id) {
    data[id].controls.forEach(function (c) {
      var el = document.getElementById(id + '-' + c.name);
      el.addEventListener('input', function () { update(id); });
      el.addEventListener('change', function () { update(id); });
    });
    update(id);
  });
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use experiments::{TeachControl, TeachFact, TeachPanel, TeachView};

    fn page(slug: &str) -> TeachPage {
        let mut views = BTreeMap::new();
        for v in ["1", "2"] {
            views.insert(
                v.to_string(),
                TeachView {
                    facts: vec![TeachFact::new("x", "x", v)],
                    measured: vec!["No committed measurement.".into()],
                    command: format!("vramlab explain t x={v}"),
                    text: "</script><script>alert(1)</script>".into(),
                    picture: serde_json::json!({"kind": "bars", "bars": []}),
                },
            );
        }
        TeachPage {
            slug: slug.into(),
            title: "T <1>".into(),
            intro: vec!["a & b".into()],
            terminal: "vramlab explain t".into(),
            panels: vec![TeachPanel {
                id: "p".into(),
                title: "P".into(),
                controls: vec![TeachControl::new(
                    "x",
                    "X",
                    "range",
                    vec!["1".into(), "2".into()],
                    vec!["one".into(), "two".into()],
                    "2",
                )],
                views,
            }],
            notes: vec![],
        }
    }

    #[test]
    fn a_page_holds_its_data_and_nothing_ends_its_script_early() {
        let pages = vec![page("t")];
        let html = teach_page_html(&pages[0], &pages);
        assert!(html.contains("T &lt;1&gt;") && html.contains("a &amp; b"));
        // The text view's "</script>" must not close the data element.
        assert_eq!(html.matches("</script>").count(), 2, "{html}");
        assert!(
            html.contains("value=\"1\" aria-valuetext=\"two\""),
            "initial value is the one named"
        );
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    }

    #[test]
    fn the_site_refuses_a_slug_that_leaves_the_folder() {
        let dir = std::env::temp_dir().join(format!("vramlab-teach-slug-{}", std::process::id()));
        let err = write_teach_site(&dir, &[page("../x")]).unwrap_err().to_string();
        assert!(err.contains("'../x'"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
