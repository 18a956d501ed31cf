//! The `x-ratelimit-*` headers, as OpenAI writes them (resets as durations such as `1s`, `6m0s`,
//! `20ms`), and `retry-after` / `retry-after-ms` on a 429.

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use super::{Admission, Quota};

pub fn apply(headers: &mut HeaderMap, admission: &Admission) {
    let (limits, quota) = match admission {
        Admission::Allowed(quota) | Admission::Limited { quota, .. } => (quota.limits, Some(quota)),
        Admission::Unchecked(limits) => (*limits, None),
    };
    set(headers, "x-ratelimit-limit-requests", limits.requests_per_minute.to_string());
    set(headers, "x-ratelimit-limit-tokens", limits.tokens_per_minute.to_string());
    // Without Redis the remaining budget is unknown: those headers are left out rather than invented.
    if let Some(Quota { remaining_requests, remaining_tokens, reset_requests_ms, reset_tokens_ms, .. }) = quota {
        set(headers, "x-ratelimit-remaining-requests", remaining_requests.to_string());
        set(headers, "x-ratelimit-remaining-tokens", remaining_tokens.to_string());
        set(headers, "x-ratelimit-reset-requests", duration(*reset_requests_ms));
        set(headers, "x-ratelimit-reset-tokens", duration(*reset_tokens_ms));
    }
    if let Admission::Limited { retry_after_ms, .. } = admission {
        set(headers, "retry-after", retry_after_ms.div_ceil(1000).to_string());
        set(headers, "retry-after-ms", retry_after_ms.to_string());
    }
}

fn set(headers: &mut HeaderMap, name: &'static str, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(HeaderName::from_static(name), value);
    }
}

/// Go-style durations, as OpenAI sends them: `20ms`, `1s`, `1.5s`, `6m0s`.
fn duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let minutes = ms / 60_000;
    let rest = ms % 60_000;
    let seconds = if rest.is_multiple_of(1000) { format!("{}s", rest / 1000) } else { format!("{}s", rest as f64 / 1000.0) };
    if minutes > 0 {
        format!("{minutes}m{seconds}")
    } else {
        seconds
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_like_openai_headers() {
        assert_eq!(super::duration(20), "20ms");
        assert_eq!(super::duration(1000), "1s");
        assert_eq!(super::duration(1500), "1.5s");
        assert_eq!(super::duration(360_000), "6m0s");
        assert_eq!(super::duration(61_250), "1m1.25s");
    }
}
