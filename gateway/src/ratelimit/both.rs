//! One answer from two budgets: a request of a tenant with caps is admitted only when its key and its
//! tenant both admit it. When one refuses, the request the other took is given back, so a refused request
//! costs neither budget. The headers describe, for requests and for tokens alike, whichever budget has
//! less left: that is the one the client runs into first.

use super::{Admission, Limits, Quota, Source};
use crate::error::ApiError;

/// The answer, and the budget (`true`: the tenant's) that must get its request back, from where it took it.
pub(super) struct Decided {
    pub admission: Result<Admission, ApiError>,
    pub give_back: Option<(bool, Source)>,
}

type One = Result<(Admission, Source), ApiError>;

pub(super) fn decide(by_key: One, by_tenant: One) -> Decided {
    let took = |one: &One| match one {
        Ok((Admission::Allowed(_) | Admission::Unchecked(_), source)) => Some(*source),
        _ => None,
    };
    match (&by_key, &by_tenant) {
        // A refusal (or an error) of one: the other's request goes back.
        (Err(_) | Ok((Admission::Limited { .. }, _)), _) => {
            let give_back = took(&by_tenant).map(|source| (true, source));
            let admission = match (by_key, by_tenant) {
                // Both refused: the longer wait is the one to tell.
                (Ok((key @ Admission::Limited { .. }, _)), Ok((tenant @ Admission::Limited { .. }, _))) => {
                    Ok(if wait(&tenant) > wait(&key) { tenant } else { key })
                }
                (key, _) => key.map(|(admission, _)| admission),
            };
            Decided { admission, give_back }
        }
        (_, Err(_) | Ok((Admission::Limited { .. }, _))) => {
            Decided { give_back: took(&by_key).map(|source| (false, source)), admission: by_tenant.map(|(admission, _)| admission) }
        }
        (Ok((key, _)), Ok((tenant, _))) => Decided { admission: Ok(merge(*key, *tenant)), give_back: None },
    }
}

fn wait(admission: &Admission) -> u64 {
    match admission {
        Admission::Limited { retry_after_ms, .. } => *retry_after_ms,
        Admission::Allowed(_) | Admission::Unchecked(_) => 0,
    }
}

/// Two admissions, both allowed: the quota of whichever has less left, for requests and for tokens.
fn merge(key: Admission, tenant: Admission) -> Admission {
    match (key, tenant) {
        (Admission::Allowed(k), Admission::Allowed(t)) => Admission::Allowed(tighter(k, t)),
        // Fail-open on one side: the other side's figures are the only ones known.
        (Admission::Allowed(q), _) | (_, Admission::Allowed(q)) => Admission::Allowed(q),
        (key, _) => key,
    }
}

fn tighter(k: Quota, t: Quota) -> Quota {
    let requests = if t.remaining_requests < k.remaining_requests { t } else { k };
    let tokens = if t.remaining_tokens < k.remaining_tokens { t } else { k };
    Quota {
        limits: Limits { requests_per_minute: requests.limits.requests_per_minute, tokens_per_minute: tokens.limits.tokens_per_minute },
        remaining_requests: requests.remaining_requests,
        remaining_tokens: tokens.remaining_tokens,
        reset_requests_ms: requests.reset_requests_ms,
        reset_tokens_ms: tokens.reset_tokens_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(requests: u64, tokens: u64) -> Quota {
        Quota {
            limits: Limits { requests_per_minute: 100, tokens_per_minute: 1000 },
            remaining_requests: requests,
            remaining_tokens: tokens,
            reset_requests_ms: 1,
            reset_tokens_ms: 2,
        }
    }

    fn limited(wait: u64, by_tenant: bool) -> One {
        Ok((Admission::Limited { quota: quota(0, 0), retry_after_ms: wait, by_tokens: false, by_tenant }, Source::Redis))
    }

    #[test]
    fn a_refusal_by_either_gives_the_other_its_request_back() {
        let allowed = || Ok((Admission::Allowed(quota(5, 5)), Source::Redis));
        let d = decide(allowed(), limited(10, true));
        assert!(matches!(d.admission, Ok(Admission::Limited { by_tenant: true, .. })));
        assert_eq!(d.give_back, Some((false, Source::Redis)));
        let d = decide(limited(10, false), Ok((Admission::Allowed(quota(5, 5)), Source::Memory)));
        assert!(matches!(d.admission, Ok(Admission::Limited { by_tenant: false, .. })));
        assert_eq!(d.give_back, Some((true, Source::Memory)));
        let d = decide(Err(ApiError::RateLimiterUnavailable), allowed());
        assert!(d.admission.is_err());
        assert_eq!(d.give_back, Some((true, Source::Redis)));
    }

    #[test]
    fn both_refusing_tell_the_longer_wait_and_give_nothing_back() {
        let d = decide(limited(10, false), limited(30, true));
        assert!(matches!(d.admission, Ok(Admission::Limited { retry_after_ms: 30, by_tenant: true, .. })));
        assert_eq!(d.give_back, None);
    }

    #[test]
    fn both_allowing_report_whichever_has_less_left() {
        let d = decide(Ok((Admission::Allowed(quota(5, 900)), Source::Redis)), Ok((Admission::Allowed(quota(50, 90)), Source::Redis)));
        let Ok(Admission::Allowed(q)) = d.admission else { panic!("refused") };
        assert_eq!((q.remaining_requests, q.remaining_tokens), (5, 90));
        assert_eq!(d.give_back, None);
    }
}
