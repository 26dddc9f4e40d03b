//! The teaching site's vocabulary (`vramlab teach`): pages of panels, each panel's controls and
//! every view they reach, precomputed from the models and the records. The families' modules in
//! `sim` build them, `reports` writes them as HTML, whose script only looks a view up and draws
//! it.

use std::collections::BTreeMap;

use serde::Serialize;

/// One page of the site: a topic with its panels.
#[derive(Debug, Clone, Serialize)]
pub struct TeachPage {
    /// The file's stem (`banks` writes `banks.html`).
    pub slug: String,
    /// The page's title.
    pub title: String,
    /// Paragraphs that introduce the topic (plain text).
    pub intro: Vec<String>,
    /// The command that shows the same thing in a terminal.
    pub terminal: String,
    /// The page's interactive parts.
    pub panels: Vec<TeachPanel>,
    /// Closing remarks: what the page cannot show, where the numbers come from (plain text).
    pub notes: Vec<String>,
}

/// A set of controls and every view they reach.
#[derive(Debug, Clone, Serialize)]
pub struct TeachPanel {
    /// Unique on its page; names the controls' elements (`<id>-<control>`).
    pub id: String,
    /// The panel's heading.
    pub title: String,
    /// The controls, in the order their values join into a view's key.
    pub controls: Vec<TeachControl>,
    /// Every view, by key: the controls' values joined with `|`.
    pub views: BTreeMap<String, TeachView>,
}

/// One control: a slider over `values`, or a drop-down list of them.
#[derive(Debug, Clone, Serialize)]
pub struct TeachControl {
    /// The parameter's name (as `vramlab explain` takes it, where it does).
    pub name: String,
    /// What the control is called on the page.
    pub label: String,
    /// `range` or `select`.
    pub kind: String,
    /// The values, as they go into a view's key.
    pub values: Vec<String>,
    /// How each value is shown.
    pub labels: Vec<String>,
    /// The index of the value shown first.
    pub initial: usize,
}

/// What the page shows for one setting of a panel's controls.
#[derive(Debug, Clone, Serialize)]
pub struct TeachView {
    /// The figures, each with a stable key (`data-fact`) for tests and readers.
    pub facts: Vec<TeachFact>,
    /// Committed GPU measurements of this very point, or the sentence saying there is none.
    pub measured: Vec<String>,
    /// The terminal command for this point.
    pub command: String,
    /// The terminal's picture of this point (what the command prints), or empty.
    pub text: String,
    /// The picture, as data the page's script draws (`kind` says which drawing).
    pub picture: serde_json::Value,
}

/// One figure of a view.
#[derive(Debug, Clone, Serialize)]
pub struct TeachFact {
    /// A stable name.
    pub key: String,
    /// What it is called on the page.
    pub label: String,
    /// The value, formatted.
    pub value: String,
    /// Whether it is the view's headline (drawn larger).
    pub strong: bool,
    /// Whether the value is a bad one (a conflict, wasted bytes): drawn red, and only then.
    pub bad: bool,
}

impl TeachFact {
    /// A figure named `key`, shown as `label: value`.
    pub fn new(key: &str, label: &str, value: impl Into<String>) -> TeachFact {
        TeachFact {
            key: key.to_string(),
            label: label.to_string(),
            value: value.into(),
            strong: false,
            bad: false,
        }
    }

    /// The same figure, highlighted.
    pub fn strong(mut self) -> TeachFact {
        self.strong = true;
        self
    }

    /// The same figure, marked bad where `bad` (drawn red).
    pub fn bad_if(mut self, bad: bool) -> TeachFact {
        self.bad = bad;
        self
    }
}

impl TeachControl {
    /// A slider (`range`) or list (`select`) named `name` over `values` shown as `labels`,
    /// starting at the value `initial` (the first where it is not among them).
    pub fn new(
        name: &str,
        label: &str,
        kind: &str,
        values: Vec<String>,
        labels: Vec<String>,
        initial: &str,
    ) -> TeachControl {
        let initial = values.iter().position(|v| v == initial).unwrap_or(0);
        TeachControl {
            name: name.to_string(),
            label: label.to_string(),
            kind: kind.to_string(),
            values,
            labels,
            initial,
        }
    }
}

impl TeachPanel {
    /// The view the page shows first: every control at its initial value.
    pub fn initial_view(&self) -> Option<&TeachView> {
        let key: Vec<&str> = self
            .controls
            .iter()
            .map(|c| c.values.get(c.initial).map_or("", String::as_str))
            .collect();
        self.views.get(&key.join("|"))
    }

    /// The terminal command of [`Self::initial_view`]: what a page's "in the terminal" line says,
    /// so that it matches the controls' starting values.
    pub fn initial_command(&self) -> String {
        self.initial_view().map(|v| v.command.clone()).unwrap_or_default()
    }

    /// A panel named `id` whose every view `view` computes from its controls' values (in the
    /// controls' order): every combination the controls reach is computed once, here.
    pub fn build(
        id: &str,
        title: &str,
        controls: Vec<TeachControl>,
        mut view: impl FnMut(&[String]) -> crate::Result<TeachView>,
    ) -> crate::Result<TeachPanel> {
        let mut combinations: Vec<Vec<String>> = vec![Vec::new()];
        for control in &controls {
            combinations = combinations
                .into_iter()
                .flat_map(|prefix| {
                    control.values.iter().map(move |v| {
                        let mut next = prefix.clone();
                        next.push(v.clone());
                        next
                    })
                })
                .collect();
        }
        let mut views = BTreeMap::new();
        for values in combinations {
            views.insert(values.join("|"), view(&values)?);
        }
        Ok(TeachPanel {
            id: id.into(),
            title: title.into(),
            controls,
            views,
        })
    }
}

impl TeachPage {
    /// Joins pages of the same topic (the same `slug`: two families sharing a page, such as the
    /// copies and their overlap), in order: the first's title and command, every panel, the
    /// intro and notes without repeats.
    pub fn merge(pages: Vec<TeachPage>) -> Vec<TeachPage> {
        let mut merged: Vec<TeachPage> = Vec::new();
        for page in pages {
            match merged.iter_mut().find(|p| p.slug == page.slug) {
                Some(first) => {
                    first.panels.extend(page.panels);
                    for line in page.intro {
                        if !first.intro.contains(&line) {
                            first.intro.push(line);
                        }
                    }
                    for line in page.notes {
                        if !first.notes.contains(&line) {
                            first.notes.push(line);
                        }
                    }
                }
                None => merged.push(page),
            }
        }
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str) -> TeachView {
        TeachView {
            facts: vec![TeachFact::new("x", "x", text)],
            measured: Vec::new(),
            command: String::new(),
            text: String::new(),
            picture: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_panel_holds_every_combination_of_its_controls() {
        let control = |name: &str, values: &[&str]| {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            TeachControl::new(name, name, "range", values.clone(), values, "")
        };
        let panel = TeachPanel::build(
            "p",
            "P",
            vec![control("a", &["1", "2", "3"]), control("b", &["x", "y"])],
            |v| Ok(view(&v.join("+"))),
        )
        .unwrap();
        assert_eq!(panel.views.len(), 6);
        assert_eq!(panel.views["3|y"].facts[0].value, "3+y");
        assert_eq!(
            panel.controls[0].initial, 0,
            "an initial value not among the values is the first"
        );
    }

    #[test]
    fn pages_of_one_topic_join() {
        let page = |slug: &str, panel: &str, note: &str| TeachPage {
            slug: slug.into(),
            title: panel.into(),
            intro: vec!["same".into()],
            terminal: String::new(),
            panels: vec![TeachPanel::build(panel, panel, Vec::new(), |_| Ok(view(""))).unwrap()],
            notes: vec![note.into()],
        };
        let merged = TeachPage::merge(vec![page("a", "1", "n"), page("b", "2", "n"), page("a", "3", "m")]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].panels.len(), 2);
        assert_eq!(merged[0].title, "1");
        assert_eq!(merged[0].intro, ["same"]);
        assert_eq!(merged[0].notes, ["n", "m"]);
    }
}
