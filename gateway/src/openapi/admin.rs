//! What the admin API answers where it builds JSON by hand (`admin::*` with `serde_json`); rows it
//! serializes as they are (`CatalogEntry`, `KeyInfo`, `CostRow`, `LedgerEntry`, `AuditEntry`) carry their
//! own schemas in `db`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::catalog::{DecimalString, ListObject, Usd};
use crate::db::audit::AuditEntry;
use crate::db::keys::KeyInfo;
use crate::db::models::CatalogEntry;
use crate::db::reports::{CostRow, LedgerEntry};

/// A tenant and its money (USD, exact).
#[derive(Serialize, ToSchema)]
pub struct Tenant {
    pub id: Uuid,
    #[schema(pattern = "^tenant$")]
    pub object: String,
    pub name: String,
    pub balance: DecimalString,
    pub reserved: DecimalString,
    pub available: DecimalString,
    #[schema(inline)]
    pub currency: Usd,
    pub created_at: DateTime<Utc>,
}

#[derive(Serialize, ToSchema)]
pub struct TenantList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Tenant>,
}

/// A new catalog model (`POST /admin/v1/models`): `id`, `context_length` and both prices are required;
/// the rest take the column defaults. Fields this API does not know are ignored.
#[derive(Serialize, ToSchema)]
pub struct NewCatalogModel {
    /// 1 to 200 characters.
    pub id: String,
    /// Positive.
    pub context_length: i32,
    /// USD per million input tokens: at least 0, below 10^10, at most 10 decimals.
    #[schema(pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.10")]
    pub input_price_per_mtok: String,
    /// USD per million output tokens, as above.
    #[schema(pattern = r"^-?[0-9]+(\.[0-9]+)?$", example = "0.30")]
    pub output_price_per_mtok: String,
    pub owned_by: Option<String>,
    pub enabled: Option<bool>,
    pub public: Option<bool>,
    pub supports_structured_outputs: Option<bool>,
    pub supports_tools: Option<bool>,
    pub schema_in_prompt: Option<bool>,
    /// Worker URLs (`http://` or `https://`) that serve the model.
    pub workers: Option<Vec<String>>,
}

/// A catalog entry with whether a ready worker serves it now.
#[derive(Serialize, ToSchema)]
pub struct CatalogModel {
    #[serde(flatten)]
    pub entry: CatalogEntry,
    pub is_ready: bool,
}

#[derive(Serialize, ToSchema)]
pub struct CatalogList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<CatalogModel>,
}

/// A worker: announced in Redis or configured in the catalog. Load figures only for ready ones.
#[derive(Serialize, ToSchema)]
pub struct Worker {
    pub model: String,
    pub url: String,
    pub ready: bool,
    #[schema(nullable = false)]
    pub slots: Option<u64>,
    #[schema(nullable = false)]
    pub slots_busy: Option<u64>,
    #[schema(nullable = false)]
    pub queue_depth: Option<u64>,
}

#[derive(Serialize, ToSchema)]
pub struct WorkerList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<Worker>,
}

/// One tenant's month (UTC): sums of its cost records, exact.
#[derive(Serialize, ToSchema)]
pub struct MonthlyTotal {
    pub tenant_id: Uuid,
    #[schema(example = "2026-11")]
    pub month: String,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: DecimalString,
    /// The part of `cost` the balance could not cover (0 unless a cost exceeded its hold and the balance);
    /// the tenant was charged `cost - shortfall`.
    pub shortfall: DecimalString,
    #[schema(inline)]
    pub currency: Usd,
}

#[derive(Serialize, ToSchema)]
pub struct MonthlyTotalList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<MonthlyTotal>,
}

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Serialize, ToSchema)]
pub struct CostRecordPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<CostRow>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Serialize, ToSchema)]
pub struct LedgerPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<LedgerEntry>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// One page, oldest first; pass `next_cursor` as `cursor` for the next.
#[derive(Serialize, ToSchema)]
pub struct AuditPage {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<AuditEntry>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// The balance after a grant, and the grant's ledger entry.
#[derive(Serialize, ToSchema)]
pub struct GrantResult {
    pub balance: DecimalString,
    pub reserved: DecimalString,
    pub grant: GrantDetail,
}

#[derive(Serialize, ToSchema)]
pub struct GrantDetail {
    /// The id of the grant's entry in the credit ledger.
    pub ledger_entry: i64,
    pub amount: DecimalString,
    pub note: String,
}

#[derive(Serialize, ToSchema)]
pub struct KeyList {
    #[schema(inline)]
    pub object: ListObject,
    pub data: Vec<KeyInfo>,
}

/// A new key, with its secret: shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub info: KeyInfo,
    /// The whole key, `rk-<public id>-<secret>`.
    pub key: String,
}

/// Whether a tenant may use a private model, and whether this call changed it.
#[derive(Serialize, ToSchema)]
pub struct ModelAccess {
    pub tenant_id: Uuid,
    pub model: String,
    pub allowed: bool,
    pub changed: bool,
}

/// Every matching record, oldest first: a header line (`request_id,created_at,tenant_id,api_key_id,model,
/// endpoint,status,http_status,error_code,input_tokens,output_tokens,cost,latency_ms`), then one line per
/// record (RFC 4180 quoting; text a spreadsheet would run as a formula starts with `'`).
#[derive(Serialize, ToSchema)]
#[schema(value_type = String)]
pub struct CostRecordsCsv(pub String);
