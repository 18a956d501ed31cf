//! Measures what rendering the schema into the prompt changes: the same json_schema requests sent to a
//! worker with and without the system-prompt guide the gateway adds (`structured::add_schema_prompt`),
//! scored field by field against known answers.
//!
//! ```text
//! cargo run -p runaii-gateway --example schema_prompt_eval -- --worker http://127.0.0.1:8081
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    worker: String,
    #[arg(long, default_value = "smollm2-135m-instruct")]
    model: String,
}

struct Case {
    user: String,
    schema: Value,
    expected: Value,
}

fn capital_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "capital": {"type": "string", "description": "The capital city of the country: a city name, never the country's own name"},
            "continent": {"type": "string", "enum": ["Europe", "Asia", "Africa", "Americas", "Oceania"], "description": "The continent the country is on"}
        },
        "required": ["capital", "continent"]
    })
}

fn invoice_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "The invoice number, e.g. A-1024, without the # sign"},
            "amt": {"type": "number", "description": "The total amount due, as a number without currency"},
            "cur": {"type": "string", "description": "The ISO 4217 currency code, e.g. USD or EUR"}
        },
        "required": ["ref", "amt", "cur"]
    })
}

fn cases() -> Vec<Case> {
    let countries = [
        ("France", "Paris", "Europe"),
        ("Japan", "Tokyo", "Asia"),
        ("Italy", "Rome", "Europe"),
        ("Germany", "Berlin", "Europe"),
        ("Spain", "Madrid", "Europe"),
        ("Egypt", "Cairo", "Africa"),
        ("China", "Beijing", "Asia"),
        ("Russia", "Moscow", "Europe"),
        ("Canada", "Ottawa", "Americas"),
        ("Australia", "Canberra", "Oceania"),
    ];
    let invoices = [
        ("Invoice #A-1024, due 2026-11-01, total 420.00 USD.", "A-1024", 420.0, "USD"),
        ("Bill B-77: please pay 99.50 EUR by Friday.", "B-77", 99.5, "EUR"),
        ("Invoice number C-3 — amount due: 1200 GBP.", "C-3", 1200.0, "GBP"),
        ("Ref D-500. Total: 15.25 USD. Thank you!", "D-500", 15.25, "USD"),
        ("Invoice #E-42 for consulting, 3000 JPY due now.", "E-42", 3000.0, "JPY"),
    ];
    let mut out: Vec<Case> = countries
        .iter()
        .map(|(country, capital, continent)| Case {
            user: format!("Tell me about {country}."),
            schema: capital_schema(),
            expected: json!({"capital": capital, "continent": continent}),
        })
        .collect();
    out.extend(invoices.iter().map(|(text, r, amt, cur)| Case {
        user: text.to_string(),
        schema: invoice_schema(),
        expected: json!({"ref": r, "amt": amt, "cur": cur}),
    }));
    out
}

fn matches(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::String(g), Value::String(w)) => g.trim().eq_ignore_ascii_case(w),
        (Value::Number(g), Value::Number(w)) => (g.as_f64().unwrap_or(f64::NAN) - w.as_f64().unwrap_or(0.0)).abs() < 1e-9,
        _ => false,
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let client = reqwest::Client::new();
    let mut totals = [(0usize, 0usize, 0u64); 2];
    println!("| case | field | expected | without guide | with guide |");
    println!("|---|---|---|---|---|");
    for case in cases() {
        let mut answers = Vec::new();
        for (i, guided) in [false, true].into_iter().enumerate() {
            let mut messages = json!([{"role": "user", "content": case.user}]);
            if guided {
                runaii_gateway::structured::add_schema_prompt(&mut messages, &case.schema);
            }
            let req = json!({
                "model": args.model, "messages": messages, "temperature": 0, "max_tokens": 96,
                "response_format": {"type": "json_schema", "json_schema": {"name": "eval", "schema": case.schema}}
            });
            let body: Value =
                client.post(format!("{}/v1/chat/completions", args.worker)).json(&req).send().await.unwrap().json().await.unwrap();
            let content = body["choices"][0]["message"]["content"].as_str().unwrap_or("{}");
            let answer: Value = serde_json::from_str(content).unwrap_or(json!({}));
            totals[i].2 += body["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
            for (field, want) in case.expected.as_object().unwrap() {
                totals[i].1 += 1;
                if matches(&answer[field], want) {
                    totals[i].0 += 1;
                }
            }
            answers.push(answer);
        }
        for (field, want) in case.expected.as_object().unwrap() {
            println!("| {} | {field} | {want} | {} | {} |", case.user, answers[0][field], answers[1][field]);
        }
    }
    for (label, (right, all, prompt)) in ["without guide", "with guide"].iter().zip(totals) {
        println!("{label}: {right}/{all} fields correct ({:.0}%), {prompt} prompt tokens in all", 100.0 * right as f64 / all as f64);
    }
}
