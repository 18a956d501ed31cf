//! Credit grants: the only way money enters a tenant's balance (or, negative, an adjustment leaves it).

use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{audit, snapshot, Actor, OpError};
use crate::db::credits::{self, Balance};
use crate::shapes::DecimalString;

/// The balance after a grant, and the grant's ledger entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GrantResult {
    pub balance: DecimalString,
    pub reserved: DecimalString,
    pub grant: GrantDetail,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GrantDetail {
    /// The id of the grant's entry in the credit ledger.
    pub ledger_entry: i64,
    pub amount: DecimalString,
    pub note: String,
}

/// A balance as the audit log records it before a change.
#[derive(Serialize)]
struct Money {
    balance: DecimalString,
    reserved: DecimalString,
}

impl From<Balance> for Money {
    fn from(b: Balance) -> Self {
        Self { balance: b.balance.into(), reserved: b.reserved.into() }
    }
}

/// The longest note a grant keeps in the ledger.
pub const MAX_NOTE_CHARS: usize = 1000;

/// The largest grant, in size: far above any real one, far inside the balance column.
const MAX_GRANT: u64 = 1_000_000_000_000;

/// Adds `amount` USD (negative for an adjustment) to the tenant's balance, with a ledger entry and an
/// audit row holding the balance before and after.
///
/// # Errors
/// [`OpError::Invalid`] for zero, more than 16 decimals (balances are `NUMERIC(30, 16)`: refused rather
/// than rounded), a size of 10¹² or more, or a note over [`MAX_NOTE_CHARS`]; [`OpError::NotFound`] for an unknown tenant;
/// [`OpError::Conflict`] for an adjustment that would take the balance below what is reserved.
pub async fn grant(db: &sqlx::PgPool, actor: Actor<'_>, tenant: Uuid, amount: Decimal, note: &str) -> Result<GrantResult, OpError> {
    if amount.is_zero() || amount.normalize().scale() > 16 || amount.abs() >= Decimal::from(MAX_GRANT) {
        return Err(OpError::invalid("amount must be non-zero, below 10^12 in size, with at most 16 decimals", "amount"));
    }
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(OpError::invalid(format!("note must be at most {MAX_NOTE_CHARS} characters"), "note"));
    }
    let not_found = || OpError::NotFound(format!("tenant {tenant}"));
    let mut tx = db.begin().await?;
    let before = credits::balance_for_update(&mut tx, tenant).await?.ok_or_else(not_found)?;
    let (ledger_entry, after) = credits::grant(&mut tx, tenant, amount, actor.0, note).await?.ok_or_else(not_found)?;
    let result = GrantResult {
        balance: after.balance.into(),
        reserved: after.reserved.into(),
        grant: GrantDetail { ledger_entry, amount: amount.into(), note: note.to_owned() },
    };
    audit(&mut tx, actor, "credits.grant", ("tenant", tenant.to_string()), snapshot(&Money::from(before)), snapshot(&result)).await?;
    tx.commit().await?;
    Ok(result)
}
