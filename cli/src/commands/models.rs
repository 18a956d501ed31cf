//! `runaii models`: the catalog the key may use — readiness, context length, prices per million tokens.

use serde_json::Value;

use super::Context;
use crate::args::{ListArgs, OutputFormat};
use crate::error::CliError;
use crate::http::Auth;
use crate::output::{self, Stdout};

/// # Errors
/// The gateway's refusal or a transport failure.
pub async fn list(context: &Context, args: &ListArgs) -> Result<(), CliError> {
    // Public models answer without a key; with one, the tenant's private models too.
    let catalog: Value = context.gateway.get("/v1/models", Auth::KeyIfAny).await?;
    if args.output == OutputFormat::Json {
        output::json(&catalog);
        return Ok(());
    }
    let models = catalog["data"].as_array().map_or(&[][..], Vec::as_slice);
    let rows: Vec<Vec<String>> = models.iter().map(row).collect();
    let header = ["MODEL", "READY", "CONTEXT", "INPUT $/MTOK", "OUTPUT $/MTOK", "SUPPORTS"];
    Stdout::default().write(&output::table(&header, &rows));
    Ok(())
}

fn row(model: &Value) -> Vec<String> {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let supports: Vec<&str> = model["supported_parameters"].as_object().map_or_else(Vec::new, |p| {
        [("structured_outputs", "json_schema"), ("tools", "tools")]
            .into_iter()
            .filter(|(k, _)| p.contains_key(*k))
            .map(|(_, v)| v)
            .collect()
    });
    vec![
        text(&model["id"]),
        if model["is_ready"] == true { "yes" } else { "no" }.to_owned(),
        text(&model["context_length"]),
        text(&model["pricing"]["input_per_million_tokens"]),
        text(&model["pricing"]["output_per_million_tokens"]),
        supports.join(","),
    ]
}
