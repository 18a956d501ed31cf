//! A request's priority class at the worker. Online requests (every API call but a batch's lines) are
//! admitted in fair turns among tenants; `batch` requests only fill sequences that no online request is
//! waiting for, never the last free one, and pause while an online request decodes, so work that may take
//! hours (a batch job) never delays an answer someone is waiting on.
//!
//! The gateway sets the header; a worker reached without it treats the request as online.

/// The header a gateway puts on a request that is not online.
pub const HEADER: &str = "x-runaii-priority";

/// Admission classes, in the order the worker serves them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Someone is waiting for the answer.
    #[default]
    Online,
    /// Admitted only when no online request waits for a sequence, and paused while one decodes.
    Batch,
}

impl Priority {
    /// The class a header value names; anything else is refused (`None`), so a worker can answer 400
    /// rather than guess.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "online" => Some(Self::Online),
            "batch" => Some(Self::Batch),
            _ => None,
        }
    }

    /// The header value: online is the default and is not sent.
    #[must_use]
    pub fn header_value(self) -> Option<&'static str> {
        match self {
            Self::Online => None,
            Self::Batch => Some("batch"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_trip_and_unknown_values_are_refused() {
        assert_eq!(Priority::parse("batch"), Some(Priority::Batch));
        assert_eq!(Priority::parse("online"), Some(Priority::Online));
        assert_eq!(Priority::parse("Batch"), None);
        assert_eq!(Priority::Batch.header_value().and_then(Priority::parse), Some(Priority::Batch));
        assert_eq!(Priority::Online.header_value(), None);
        assert!(Priority::Online < Priority::Batch, "online is served first");
    }
}
