//! A tiny stdio MCP server for the CLI's tests, written by hand (newline-delimited JSON-RPC 2.0) so that
//! it shares no code with the client it tests.
//!
//! `mcp_fixture [--tools count,fail] [--calls FILE]`: offers `count` (answers `call N`) and/or `fail`
//! (always a tool error), and appends `name arguments` to FILE for every call, so a test can count them.
//! It exits when stdin closes, as the MCP stdio transport asks.

use std::io::{BufRead as _, Write as _};

use serde_json::{json, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut tools = vec!["count".to_owned(), "fail".to_owned()];
    let mut calls_file: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tools" => tools = args.next().unwrap_or_default().split(',').map(str::to_owned).collect(),
            "--calls" => calls_file = args.next(),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let mut calls = 0u32;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&line)?;
        // Notifications (no id) need no answer.
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let outcome = match message["method"].as_str().unwrap_or("") {
            "initialize" => Ok(json!({
                // Whatever version the client asks for: this server speaks the subset every version shares.
                "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "runaii-mcp-fixture", "version": "0.1.0"}
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tools.iter().map(|t| definition(t)).collect::<Vec<_>>()})),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("").to_owned();
                let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
                if let Some(path) = &calls_file {
                    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
                    writeln!(file, "{name} {arguments}")?;
                }
                calls += 1;
                match name.as_str() {
                    "count" if tools.contains(&name) => {
                        Ok(json!({"content": [{"type": "text", "text": format!("call {calls}")}], "isError": false}))
                    }
                    "fail" if tools.contains(&name) => {
                        Ok(json!({"content": [{"type": "text", "text": "the disk is on fire"}], "isError": true}))
                    }
                    _ => Err((-32602, format!("unknown tool {name}"))),
                }
            }
            other => Err((-32601, format!("method not found: {other}"))),
        };
        let reply = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        let mut out = stdout.lock();
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

fn definition(name: &str) -> Value {
    let description = match name {
        "count" => "Counts the calls made to it. Call it with any short word.",
        _ => "Always fails.",
    };
    json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {"word": {"type": "string", "maxLength": 12}},
            "required": ["word"],
            "additionalProperties": false
        }
    })
}
