//! What the answer must match: a JSON Schema (`--json-schema FILE|'{…}'`, sent as a strict json_schema
//! `response_format`) or a GBNF grammar (`--grammar FILE`, sent as the `grammar` extension field), and the
//! check an answer gets before it is printed.

use std::path::Path;

use serde_json::{json, Value};

use crate::error::CliError;

#[derive(Debug, Clone, Default)]
pub enum Constraint {
    #[default]
    None,
    Schema {
        schema: Value,
        /// The `response_format` sent.
        format: Value,
    },
    Grammar(String),
}

impl Constraint {
    /// From the flags; clap already refuses both at once.
    ///
    /// # Errors
    /// An unreadable file, a schema that is not a JSON object, an empty grammar.
    pub fn from_flags(json_schema: Option<&str>, grammar: Option<&Path>) -> Result<Self, CliError> {
        match (json_schema, grammar) {
            (Some(_), Some(_)) => Err(CliError::Usage("--json-schema and --grammar cannot be used together".into())),
            (Some(source), None) => schema(source),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| CliError::Usage(format!("cannot read the grammar {}: {e}", path.display())))?;
                if text.trim().is_empty() {
                    return Err(CliError::Usage(format!("the grammar {} is empty", path.display())));
                }
                Ok(Self::Grammar(text))
            }
            (None, None) => Ok(Self::None),
        }
    }

    #[must_use]
    pub fn response_format(&self) -> Option<&Value> {
        match self {
            Self::Schema { format, .. } => Some(format),
            _ => None,
        }
    }

    #[must_use]
    pub fn grammar(&self) -> Option<&str> {
        match self {
            Self::Grammar(g) => Some(g),
            _ => None,
        }
    }

    /// The answer as it should be printed: for a schema, the JSON alone once it validates.
    ///
    /// # Errors
    /// [`CliError::InvalidAnswer`] when a schema's answer is not JSON matching it.
    pub fn check<'a>(&self, content: &'a str) -> Result<&'a str, CliError> {
        let Self::Schema { schema, .. } = self else {
            return Ok(content);
        };
        let text = content.trim();
        let value: Value = serde_json::from_str(text).map_err(|e| CliError::InvalidAnswer(format!("not JSON ({e})")))?;
        // The gateway compiled this schema before it answered; one this validator cannot build is left to it.
        if let Ok(validator) = jsonschema::validator_for(schema) {
            if let Some(error) = validator.iter_errors(&value).next() {
                return Err(CliError::InvalidAnswer(format!("{error} at {}", error.instance_path())));
            }
        }
        Ok(text)
    }
}

/// Inline JSON when it starts with `{`, else a file.
fn schema(source: &str) -> Result<Constraint, CliError> {
    let (text, name) = if source.trim_start().starts_with('{') {
        (source.to_owned(), None)
    } else {
        let path = Path::new(source);
        let text = std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("cannot read the schema {source}: {e}")))?;
        (text, path.file_stem().map(|s| s.to_string_lossy().into_owned()))
    };
    let schema: Value = serde_json::from_str(&text).map_err(|e| CliError::Usage(format!("the schema is not valid JSON: {e}")))?;
    if !schema.is_object() {
        return Err(CliError::Usage("the schema must be a JSON object".into()));
    }
    let format = json!({"type": "json_schema", "json_schema": {"name": schema_name(name.as_deref()), "strict": true, "schema": schema}});
    Ok(Constraint::Schema { schema, format })
}

/// The file's stem in the characters OpenAI allows (`[a-zA-Z0-9_-]`, at most 64), or `answer`.
fn schema_name(stem: Option<&str>) -> String {
    let name: String = stem.unwrap_or("").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').take(64).collect();
    if name.is_empty() {
        "answer".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_schemas_and_files() {
        let c = Constraint::from_flags(Some(r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#), None).unwrap();
        let format = c.response_format().cloned().unwrap_or_default();
        assert_eq!((format["json_schema"]["name"].as_str(), format["json_schema"]["strict"].as_bool()), (Some("answer"), Some(true)));
        assert!(matches!(Constraint::from_flags(Some("{nope"), None), Err(CliError::Usage(_))));
        assert!(matches!(Constraint::from_flags(Some("/nonexistent/s.json"), None), Err(CliError::Usage(_))));
        assert!(matches!(Constraint::from_flags(Some("[1]"), None), Err(CliError::Usage(_))), "a path that does not exist");
        assert_eq!(schema_name(Some("my invoice.v2")), "myinvoicev2");
    }

    #[test]
    fn an_answer_must_validate() {
        let c = Constraint::from_flags(Some(r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#), None).unwrap();
        assert_eq!(c.check(" {\"n\": 3}\n").ok(), Some("{\"n\": 3}"));
        assert!(matches!(c.check("{\"n\": \"three\"}"), Err(CliError::InvalidAnswer(_))));
        assert!(matches!(c.check("{\"n\": 3"), Err(CliError::InvalidAnswer(_))));
        assert_eq!(Constraint::None.check("free text").ok(), Some("free text"));
    }
}
