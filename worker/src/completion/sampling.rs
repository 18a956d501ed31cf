//! The request's sampling fields, checked against their ranges, into the engine's sampling parameters.

use runaii_wire::ChatCompletionRequest;

use crate::engine::{Dry, Penalties, SamplingParams};
use crate::error::ApiError;

/// `constrained_json`: the answer is held to a JSON schema, which turns the DRY guard on by default.
pub(super) fn params(request: &ChatCompletionRequest, constrained_json: bool) -> Result<SamplingParams, ApiError> {
    let defaults = SamplingParams::default();
    let temperature = request.temperature.unwrap_or(defaults.temperature);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid("temperature must be between 0 and 2", "temperature"));
    }
    let top_p = request.top_p.unwrap_or(defaults.top_p);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid("top_p must be greater than 0 and at most 1", "top_p"));
    }
    let top_k = match request.top_k {
        None => defaults.top_k,
        Some(0) => usize::MAX,
        Some(k) => k as usize,
    };
    // Without a seed each request draws its own; with one, the same request samples the same tokens.
    let seed = request.seed.map_or_else(rand::random, |s| s as u64);
    let penalties = penalties(request, constrained_json)?;
    let close_json = constrained_json && request.close_before_limit.unwrap_or(true);
    Ok(SamplingParams { temperature, top_p, top_k, seed, penalties, close_json })
}

fn penalties(request: &ChatCompletionRequest, constrained_json: bool) -> Result<Penalties, ApiError> {
    let in_range = |value: Option<f32>, low: f32, high: f32, name: &'static str| match value {
        Some(v) if !(low..=high).contains(&v) => Err(ApiError::invalid(format!("{name} must be between {low} and {high}"), name)),
        v => Ok(v),
    };
    let frequency = in_range(request.frequency_penalty, -2.0, 2.0, "frequency_penalty")?.unwrap_or(0.0);
    let presence = in_range(request.presence_penalty, -2.0, 2.0, "presence_penalty")?.unwrap_or(0.0);
    let default = Dry::CONSTRAINED_DEFAULT;
    let multiplier = in_range(request.dry_multiplier, 0.0, 5.0, "dry_multiplier")?;
    let base = in_range(request.dry_base, 1.0, 4.0, "dry_base")?.unwrap_or(default.base);
    let allowed_length = match request.dry_allowed_length {
        Some(n) if !(1..=100).contains(&n) => {
            return Err(ApiError::invalid("dry_allowed_length must be between 1 and 100", "dry_allowed_length"))
        }
        Some(n) => n as usize,
        None => default.allowed_length,
    };
    let multiplier = multiplier.unwrap_or(if constrained_json { default.multiplier } else { 0.0 });
    let dry = (multiplier > 0.0).then_some(Dry { multiplier, base, allowed_length });
    Ok(Penalties { frequency, presence, dry })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(fields: serde_json::Value) -> ChatCompletionRequest {
        let mut body = serde_json::json!({"model": "m", "messages": []});
        if let (Some(body), Some(fields)) = (body.as_object_mut(), fields.as_object()) {
            body.extend(fields.clone());
        }
        serde_json::from_value(body).unwrap_or_default()
    }

    #[test]
    fn penalties_are_checked_against_openai_ranges() {
        for (field, value) in [("frequency_penalty", 2.5), ("presence_penalty", -2.1), ("dry_multiplier", -1.0), ("dry_base", 0.5)] {
            let refused = params(&request(serde_json::json!({ field: value })), false);
            assert!(matches!(refused, Err(ApiError::InvalidRequest { param: Some(p), .. }) if p == field), "{field}");
        }
        assert!(params(&request(serde_json::json!({"dry_allowed_length": 0})), false).is_err());
        let fine = params(&request(serde_json::json!({"frequency_penalty": -2, "presence_penalty": 2})), false);
        assert!(fine.is_ok_and(|p| p.penalties.frequency == -2.0 && p.penalties.presence == 2.0));
    }

    #[test]
    fn dry_is_on_by_default_only_for_json_schema_answers() {
        let plain = params(&request(serde_json::json!({})), false).map(|p| p.penalties);
        assert!(plain.is_ok_and(|p| p.is_off()));
        let constrained = params(&request(serde_json::json!({})), true).map(|p| p.penalties.dry);
        assert!(constrained.is_ok_and(|d| d == Some(Dry::CONSTRAINED_DEFAULT)));
        let turned_off = params(&request(serde_json::json!({"dry_multiplier": 0})), true).map(|p| p.penalties.dry);
        assert!(turned_off.is_ok_and(|d| d.is_none()));
    }
}
