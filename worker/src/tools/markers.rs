//! A call format's markers as the model's vocabulary holds them. In the family's own models a marker is
//! one control token (`[TOOL_CALLS]`, `<|channel|>`): the grammar must ask for that token by id (its text
//! is not reachable by writing characters), the answer's text must keep it (a control token is otherwise
//! written as nothing), and one that ends generation (`<|call|>` in gpt-oss) is left to the end of the
//! answer. In any other vocabulary the marker is plain text, written and matched character by character.

use super::ToolFormat;

/// How one marker is written by this model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Special {
    pub id: u32,
    /// The token ends generation (end of generation, EOG), so an answer stops on it.
    pub ends: bool,
}

/// The markers of one model's call format that are control tokens; every other marker is text.
#[derive(Debug, Clone, Default)]
pub struct Markers {
    special: Vec<(&'static str, Special)>,
}

impl Markers {
    /// Every marker written as text (a template given without the model, or a vocabulary without them).
    #[must_use]
    pub fn text() -> Self {
        Self::default()
    }

    /// Looks up each of `format`'s markers: `control` answers the control token whose text is the marker,
    /// if the vocabulary has exactly one.
    #[must_use]
    pub fn resolve(format: ToolFormat, control: impl Fn(&str) -> Option<Special>) -> Self {
        Self { special: format.markers().iter().filter_map(|&m| control(m).map(|s| (m, s))).collect() }
    }

    #[must_use]
    pub fn special(&self, marker: &str) -> Option<Special> {
        self.special.iter().find(|(m, _)| *m == marker).map(|(_, s)| *s)
    }

    /// The control tokens an answer keeps as text (those that end it are not part of it).
    #[must_use]
    pub fn kept(&self) -> Vec<u32> {
        self.special.iter().filter(|(_, s)| !s.ends).map(|(_, s)| s.id).collect()
    }

    /// The marker in a Lark grammar: its token, or its text as a literal. A marker that ends generation
    /// is the empty string: the grammar ends there and the model's own end token closes the answer.
    #[must_use]
    pub fn atom(&self, marker: &str) -> String {
        match self.special(marker) {
            Some(Special { ends: true, .. }) => "\"\"".to_owned(),
            Some(Special { id, .. }) => format!("<[{id}]>"),
            None => literal(marker),
        }
    }

    /// Lark rules for `rule`: any text, then `marker` (the marker never inside the text).
    #[must_use]
    pub fn text_through(&self, rule: &str, marker: &str) -> String {
        let terminal = rule.to_uppercase();
        match self.special(marker) {
            // A control token cannot be written as text, so the text needs no exclusion.
            Some(_) => format!("{rule}: {terminal} {atom}\n{terminal}: /(?s:.*)/\n", atom = self.atom(marker)),
            None => {
                let m = regex_escape(marker);
                format!("{rule}: {terminal}\n{terminal}: /(?s:.*){m}/ & ~/(?s:.*){m}(?s:.+)/\n")
            }
        }
    }

    /// A Lark terminal for text that does not start with `marker` (when the marker is a control token,
    /// any text: it cannot start with a token it is not).
    #[must_use]
    pub fn text_not_starting_with(&self, marker: &str) -> String {
        match self.special(marker) {
            Some(_) => "/(?s:.*)/".to_owned(),
            None => format!("/(?s:.*)/ & ~/{}(?s:.*)/", regex_escape(marker)),
        }
    }
}

/// A Lark string literal.
#[must_use]
pub fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `text` as a regex matching itself, in Lark's `/…/`.
#[must_use]
pub fn regex_escape(text: &str) -> String {
    text.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt_oss_like(marker: &str) -> Option<Special> {
        match marker {
            "<|channel|>" => Some(Special { id: 200_005, ends: false }),
            "<|call|>" => Some(Special { id: 200_012, ends: true }),
            _ => None,
        }
    }

    #[test]
    fn control_tokens_are_asked_for_by_id_and_ending_ones_left_to_the_end() {
        let markers = Markers::resolve(ToolFormat::Harmony, gpt_oss_like);
        assert_eq!(markers.atom("<|channel|>"), "<[200005]>");
        assert_eq!(markers.atom("<|call|>"), "\"\"");
        assert_eq!(markers.atom("<|message|>"), "\"<|message|>\"");
        assert_eq!(markers.kept(), vec![200_005]);
        assert!(markers.text_through("think", "<|channel|>").contains("THINK: /(?s:.*)/"));
    }

    #[test]
    fn text_markers_are_excluded_from_the_text_before_them() {
        let markers = Markers::text();
        let rules = markers.text_through("think", "<|end|>");
        assert_eq!(rules, "think: THINK\nTHINK: /(?s:.*)<\\|end\\|>/ & ~/(?s:.*)<\\|end\\|>(?s:.+)/\n");
        assert_eq!(markers.text_not_starting_with("[TOOL_CALLS]"), "/(?s:.*)/ & ~/\\[TOOL_CALLS\\](?s:.*)/");
        assert!(markers.kept().is_empty());
    }
}
