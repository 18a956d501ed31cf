//! MCP servers over stdio, through the official Rust SDK (`rmcp`): starting them, offering their tools to
//! the model as OpenAI function tools, and running each call on the server that listed the tool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientConfig, ContentBlock, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

/// A tool that has not answered by then is reported to the model as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// How to start one stdio MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// `--mcp #N (program)` or the config's `[mcp.servers.NAME]`: how messages name it.
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("MCP server {server}: cannot start `{program}`: {source}")]
    Spawn { server: String, program: String, source: std::io::Error },
    #[error("MCP server {server}: the MCP handshake failed: {message}")]
    Handshake { server: String, message: String },
    #[error("MCP server {server}: listing its tools failed: {message}")]
    List { server: String, message: String },
    #[error("tool `{tool}` is offered by both {first} and {second}; tool names must be unique")]
    Duplicate { tool: String, first: String, second: String },
}

struct Server {
    name: String,
    client: RunningService<RoleClient, ClientConfig>,
}

/// The running servers and their tools.
#[derive(Default)]
pub struct Toolbox {
    servers: Vec<Server>,
    /// Tool name → index in `servers`.
    routes: HashMap<String, usize>,
    /// The tools as the chat API takes them, in the servers' order.
    definitions: Vec<Value>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox").field("tools", &self.routes.keys().collect::<Vec<_>>()).finish()
    }
}

impl Toolbox {
    /// Starts every server (together) and lists its tools.
    ///
    /// # Errors
    /// A server that does not start, shake hands or list its tools; two servers offering one tool name.
    /// The servers already started are stopped.
    pub async fn start(specs: Vec<ServerSpec>) -> Result<Self, ToolError> {
        let started = futures::future::join_all(specs.into_iter().map(start_one)).await;
        let mut toolbox = Self::default();
        let mut failure = None;
        for result in started {
            match result {
                Ok((server, tools)) if failure.is_none() => {
                    if let Err(e) = toolbox.add(server, tools) {
                        failure = Some(e);
                    }
                }
                Ok((server, _)) => drop(server.client.cancel().await),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        match failure {
            None => Ok(toolbox),
            Some(e) => {
                toolbox.shutdown().await;
                Err(e)
            }
        }
    }

    fn add(&mut self, server: Server, tools: Vec<rmcp::model::Tool>) -> Result<(), ToolError> {
        let index = self.servers.len();
        for tool in &tools {
            if let Some(&other) = self.routes.get(tool.name.as_ref()) {
                let first = self.servers[other].name.clone();
                let e = ToolError::Duplicate { tool: tool.name.to_string(), first, second: server.name.clone() };
                self.servers.push(server);
                return Err(e);
            }
            self.routes.insert(tool.name.to_string(), index);
        }
        self.definitions.extend(tools.iter().map(definition));
        self.servers.push(server);
        Ok(())
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    /// The tools in the chat API's shape: `{"type": "function", "function": {name, description, parameters}}`.
    #[must_use]
    pub fn definitions(&self) -> &[Value] {
        &self.definitions
    }

    /// Runs `name` with `arguments` (a JSON text) on the server that listed it. Every failure — an unknown
    /// tool, bad arguments, the tool's own error, a broken server — is returned as `error: …` text: it goes
    /// back to the model as the call's result.
    pub async fn call(&self, name: &str, arguments: &str) -> String {
        let Some(&index) = self.routes.get(name) else {
            return format!("error: there is no tool named `{name}`");
        };
        let arguments = match parse_arguments(arguments) {
            Ok(arguments) => arguments,
            Err(e) => return format!("error: the arguments are not a JSON object: {e}"),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        match tokio::time::timeout(CALL_TIMEOUT, self.servers[index].client.call_tool(params)).await {
            Err(_) => format!("error: the tool did not answer within {} s", CALL_TIMEOUT.as_secs()),
            Ok(Err(e)) => format!("error: {e}"),
            Ok(Ok(result)) => {
                let mut text = result.content.iter().map(content_text).collect::<Vec<_>>().join("\n");
                if text.is_empty() {
                    if let Some(structured) = &result.structured_content {
                        text = structured.to_string();
                    }
                }
                if result.is_error == Some(true) {
                    format!("error: {text}")
                } else {
                    text
                }
            }
        }
    }

    /// Closes every server's stdin and waits (briefly) for it to exit.
    pub async fn shutdown(self) {
        futures::future::join_all(self.servers.into_iter().map(|s| s.client.cancel())).await;
    }
}

async fn start_one(spec: ServerSpec) -> Result<(Server, Vec<rmcp::model::Tool>), ToolError> {
    let mut command = tokio::process::Command::new(&spec.program);
    command.args(&spec.args).envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let transport = TokioChildProcess::new(command).map_err(|source| ToolError::Spawn {
        server: spec.name.clone(),
        program: spec.program.clone(),
        source,
    })?;
    let mut info = ClientConfig::default();
    info.client_info = Implementation::new("runaii", env!("CARGO_PKG_VERSION"));
    let client = info.serve(transport).await.map_err(|e| ToolError::Handshake { server: spec.name.clone(), message: e.to_string() })?;
    match client.list_all_tools().await {
        Ok(tools) => Ok((Server { name: spec.name, client }, tools)),
        Err(e) => {
            drop(client.cancel().await);
            Err(ToolError::List { server: spec.name, message: e.to_string() })
        }
    }
}

fn definition(tool: &rmcp::model::Tool) -> Value {
    let mut function = json!({"name": tool.name, "parameters": Value::Object((*tool.input_schema).clone())});
    if let Some(description) = &tool.description {
        function["description"] = json!(description);
    }
    json!({"type": "function", "function": function})
}

/// Models write `""` for a call without arguments.
fn parse_arguments(text: &str) -> Result<serde_json::Map<String, Value>, serde_json::Error> {
    if text.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    serde_json::from_str(text)
}

/// Text as it is; images, audio and resources as their JSON.
fn content_text(block: &ContentBlock) -> String {
    match block.as_text() {
        Some(text) => text.text.clone(),
        None => serde_json::to_string(block).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        assert!(parse_arguments("").is_ok_and(|m| m.is_empty()));
        assert!(parse_arguments(r#"{"city": "Paris"}"#).is_ok_and(|m| m["city"] == "Paris"));
        assert!(parse_arguments("[1]").is_err());
        assert!(parse_arguments("{").is_err());
    }
}
