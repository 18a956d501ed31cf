//! `runaii keys`: the tenant's API keys through the admin API (`/admin/v1`), which is the only place
//! keys are managed: listing and creating need an admin token with the `admin` role. The tenant is
//! `--tenant`, or the API key's own (from `/v1/account`).

use serde_json::{json, Value};

use super::Context;
use crate::args::{KeysAction, KeysArgs, OutputFormat};
use crate::error::CliError;
use crate::http::{Auth, GatewayError};
use crate::output::{self, Stdout};

/// # Errors
/// No admin token, a refusal, a transport failure.
pub async fn manage(context: &Context, args: KeysArgs) -> Result<(), CliError> {
    if !context.gateway.has_admin_token() {
        return Err(GatewayError::AdminTokenMissing.into());
    }
    let json_out = args.output == OutputFormat::Json;
    match args.action.unwrap_or(KeysAction::List) {
        KeysAction::List => {
            let tenant = tenant(context, args.tenant).await?;
            let keys: Value = context.gateway.get(&format!("/admin/v1/tenants/{tenant}/keys"), Auth::Admin).await?;
            if json_out {
                output::json(&keys);
            } else {
                let rows: Vec<Vec<String>> = keys["data"].as_array().map_or(&[][..], Vec::as_slice).iter().map(key_row).collect();
                Stdout::default().write(&output::table(&["ID", "PREFIX", "NAME", "CREATED", "EXPIRES", "REVOKED", "RPM", "TPM"], &rows));
            }
        }
        KeysAction::Create { name, expires_at, rpm_limit, tpm_limit } => {
            let tenant = tenant(context, args.tenant).await?;
            let spec = json!({"name": name, "expires_at": expires_at, "rpm_limit": rpm_limit, "tpm_limit": tpm_limit});
            let created: Value = context.gateway.post(&format!("/admin/v1/tenants/{tenant}/keys"), &spec, Auth::Admin).await?;
            if json_out {
                output::json(&created);
            } else {
                // The secret alone on stdout, for `KEY=$(runaii keys create)`; what it is on stderr.
                eprintln!(
                    "created key {} ({}) for tenant {tenant}; its secret is shown only now:",
                    text(&created["id"]),
                    text(&created["public_id"])
                );
                Stdout::default().line(&text(&created["key"]));
            }
        }
        KeysAction::Revoke { id } => {
            let revoked: Value = context.gateway.delete(&format!("/admin/v1/keys/{id}"), Auth::Admin).await?;
            if json_out {
                output::json(&revoked);
            } else {
                Stdout::default().line(&format!("revoked key {} at {}", text(&revoked["id"]), text(&revoked["revoked_at"])));
            }
        }
    }
    Ok(())
}

async fn tenant(context: &Context, explicit: Option<String>) -> Result<String, CliError> {
    if let Some(tenant) = explicit {
        return Ok(tenant);
    }
    let account: Value = context.gateway.get("/v1/account", Auth::Key).await?;
    account["tenant"]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| GatewayError::Protocol("the account names no tenant id".into()).into())
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn key_row(k: &Value) -> Vec<String> {
    ["id", "public_id", "name", "created_at", "expires_at", "revoked_at", "rpm_limit", "tpm_limit"].iter().map(|f| text(&k[*f])).collect()
}
