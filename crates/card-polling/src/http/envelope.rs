//! The answer envelope `{success, msg, data, code}` (spec §8) as the OpenAPI components every
//! route's responses name: [`Envelope`], [`ErrorEnvelope`] and `/health`'s [`HealthEnvelope`].
//! Their schemas are written as JSON ([`answer_schemas`]); the document ([`super::openapi`])
//! puts them in place.

use serde_json::{Value, json};

/// A component whose schema is written as JSON ([`answer_schemas`]): the answer envelopes, whose
/// `data` the handlers build from many store types (described by the routes' docs, not here).
/// utoipa sees a named object; `openapi::document` puts the JSON in its place.
macro_rules! json_component {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::Object::new().into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

json_component!(
    /// A success answer: `{success: true, msg, data, code}`.
    Envelope
);
json_component!(
    /// An error answer: `{success: false, msg, data: null, code}`.
    ErrorEnvelope
);
json_component!(
    /// `/health`'s answer: [`Envelope`] with its `data` described in full.
    HealthEnvelope
);

/// The schemas of [`Envelope`], [`ErrorEnvelope`] and [`HealthEnvelope`].
pub(crate) fn answer_schemas() -> [(&'static str, Value); 3] {
    [
        (
            "Envelope",
            json!({"type": "object", "required": ["success", "msg", "data", "code"], "properties": {
            "success": {"type": "boolean", "const": true}, "msg": {"type": "string"}, "data": {}, "code": {"type": "integer"}}}),
        ),
        (
            "ErrorEnvelope",
            json!({"type": "object", "required": ["success", "msg", "data", "code"], "properties": {
            "success": {"type": "boolean", "const": false}, "msg": {"type": "string", "minLength": 1}, "data": {"type": "null"}, "code": {"type": "integer"}}}),
        ),
        (
            "HealthEnvelope",
            json!({"allOf": [{"$ref": "#/components/schemas/Envelope"}, {"properties": {"data": health_data()}}]}),
        ),
    ]
}

/// `/health`'s `data`: the status alone without a token, everything with one. Its `clock` and
/// `schedule_config` are written out in full (D-poll-clock-skew-no-claims, D-schedule-config-check); the other parts are
/// described by `routes::health`.
fn health_data() -> Value {
    let clock = json!({
        "type": "object",
        "description": "this instance's clock and its check against the shared database's (RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS); never null",
        "required": ["status", "now", "max_skew_ms", "offset_ms", "skewed", "checked_at"],
        "properties": {
            "status": {"type": "string", "enum": ["off", "no_shared_clock", "not_yet_measured", "ok", "skewed"],
                "description": "off: the check is off; no_shared_clock: SQLite, nothing to compare with; not_yet_measured: no claim tried yet; ok / skewed: the last measurement (skewed: this instance makes no claims)"},
            "now": {"type": "string", "format": "date-time", "description": "this instance's clock when it answered"},
            "max_skew_ms": {"type": ["integer", "null"], "minimum": 0, "description": "the tolerance; null with the check off"},
            "offset_ms": {"type": ["integer", "null"], "description": "the database's clock minus this instance's at the last measurement; null before one"},
            "skewed": {"type": "boolean", "description": "the last measurement was beyond the tolerance"},
            "checked_at": {"type": ["string", "null"], "format": "date-time", "description": "when the last measurement was made; null before one"},
        },
    });
    let config = json!({"type": "object", "required": ["shards", "task_types"], "properties": {
        "shards": {"type": "integer", "minimum": 1},
        "task_types": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1},
            "description": "task type name → interval, seconds"},
    }});
    let schedule_config = json!({
        "type": "object",
        "description": "whether the ordinary polling schedule's configuration stored for every instance is still this instance's; checked every 30 s",
        "required": ["status", "checked_at", "instance", "stored"],
        "properties": {
            "status": {"type": "string", "enum": ["not_yet_checked", "same", "differs"],
                "description": "differs: another instance started with other RAKUTEN_POLL_TASK_TYPES / RAKUTEN_POLL_SHARDS rewrote it; this one schedules by its own until restarted"},
            "checked_at": {"type": ["string", "null"], "format": "date-time"},
            "instance": config.clone(),
            "stored": {"anyOf": [config, {"type": "null"}]},
        },
    });
    json!({"anyOf": [
        {"type": "object", "required": ["status", "database"], "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]},
            "database": {"type": "string", "enum": ["reachable", "unreachable"]},
        }},
        {"type": "object", "required": ["status", "database", "hint_backend", "hint_channel_reachable", "queues", "last_cycle_at", "clock", "schedule_config"], "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]},
            "database": {"type": "object"},
            "hint_backend": {"type": "string", "enum": ["memory", "redis"]},
            "hint_channel_reachable": {"type": "boolean"},
            "queues": {"type": "array"},
            "last_cycle_at": {"type": ["string", "null"], "format": "date-time"},
            "clock": clock,
            "schedule_config": schedule_config,
        }},
    ]})
}
