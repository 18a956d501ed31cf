//! What reconciliation found: the totals, notes, and each discrepancy, as text or JSON.

use std::fmt::Write as _;

use rust_decimal::Decimal;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub records: usize,
    /// Streams cut by a replica that died (`Expect::replica_loss`): neither recorded nor charged.
    pub cut_unrecorded: usize,
    /// Σ `usage.cost` told for completed answers.
    pub told_completed: Decimal,
    /// Σ cost of abandoned streams' records.
    pub charged_abandoned: Decimal,
    /// Σ cost of records of streams cut by a worker failure.
    pub charged_failed: Decimal,
    /// Σ cost of records of requests whose answer the client could not read (timeouts, broken streams).
    pub charged_unread: Decimal,
    /// Σ cost of every record in the window.
    pub ledger: Decimal,
    /// −Σ charges in the window.
    pub charged: Decimal,
    pub grants: Decimal,
    /// Balance after − balance before.
    pub balance_change: Decimal,
    pub reserved_after: Decimal,
    /// Records by status.
    pub by_status: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub totals: Totals,
    /// Facts worth knowing that are not errors.
    pub notes: Vec<String>,
    /// Each way the ledger disagrees with the clients; empty when reconciliation passes.
    pub discrepancies: Vec<Discrepancy>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discrepancy {
    /// What kind of disagreement (`missing_record`, `told_cost_differs`, `reserved`, …), for counting.
    pub kind: &'static str,
    pub detail: String,
}

impl Report {
    pub(super) fn fail(&mut self, kind: &'static str, detail: String) {
        self.discrepancies.push(Discrepancy { kind, detail });
    }

    #[must_use]
    pub fn passed(&self) -> bool {
        self.discrepancies.is_empty()
    }

    #[must_use]
    pub fn render(&self) -> String {
        let t = &self.totals;
        let mut out = String::new();
        let by_status: Vec<String> = t.by_status.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        let _ = writeln!(out, "reconciliation: {} records in the window ({})", t.records, by_status.join(", "));
        let _ = writeln!(
            out,
            "  ledger Σ cost {} = told (completed) {} + abandoned {} + failed {} + unread {}",
            t.ledger.normalize(),
            t.told_completed.normalize(),
            t.charged_abandoned.normalize(),
            t.charged_failed.normalize(),
            t.charged_unread.normalize()
        );
        let _ = writeln!(
            out,
            "  credit ledger charges {}; balance change {} = grants {} − costs {}; reserved after {}",
            t.charged.normalize(),
            t.balance_change.normalize(),
            t.grants.normalize(),
            t.ledger.normalize(),
            t.reserved_after.normalize()
        );
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for d in &self.discrepancies {
            let _ = writeln!(out, "  DISCREPANCY [{}] {}", d.kind, d.detail);
            *kinds.entry(d.kind).or_insert(0) += 1;
        }
        let verdict = if self.passed() { "PASSED" } else { "FAILED" };
        let counts: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(
            out,
            "reconciliation {verdict} ({} discrepancies{}{})",
            self.discrepancies.len(),
            if counts.is_empty() { "" } else { "; " },
            counts.join(", ")
        );
        out
    }
}
