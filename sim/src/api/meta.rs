//! Small helpers over `metadata` of JSON objects: names, timestamps, uids, finalizers.

use serde_json::{Map, Value, json};

/// Now as upstream writes timestamps: RFC 3339, UTC, whole seconds.
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `now() + secs`, same format.
pub fn now_plus(secs: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A fresh uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `metadata.name`, empty when absent.
pub fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.uid`, empty when absent.
pub fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
}

/// `metadata.namespace`, empty when absent.
pub fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata` as a mutable map, created when missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let m = obj.as_object_mut().expect("object");
    let e = m.entry("metadata").or_insert_with(|| json!({}));
    if !e.is_object() {
        *e = json!({});
    }
    e.as_object_mut().expect("object")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// Removes empty `metadata` maps/lists the real server never shows (`labels: {}` stays as
/// given; only nulls go).
pub fn drop_nulls(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.retain(|_, v| !v.is_null());
    }
}

/// Seconds since an RFC 3339 timestamp, None when unparsable.
pub fn age_secs(ts: &str) -> Option<i64> {
    let t: jiff::Timestamp = ts.parse().ok()?;
    Some((jiff::Timestamp::now() - t).get_seconds())
}

/// Upstream's short duration format (`HumanDuration`): `5s`, `3m2s`, `4h`, `2d3h`, `5y`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 { format!("{m}m") } else { format!("{m}m{rs}s") };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        let rm = m % 60;
        return if rm == 0 { format!("{h}h") } else { format!("{h}h{rm}m") };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if d < 8 {
        let rh = h % 24;
        return if rh == 0 { format!("{d}d") } else { format!("{d}d{rh}h") };
    }
    if d < 365 * 2 {
        return format!("{d}d");
    }
    format!("{}y", d / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_seconds() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
        assert!(age_secs(&t).unwrap() <= 1);
        assert!(age_secs(&now_plus(30)).unwrap() < -25);
    }

    #[test]
    fn human_durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(60 * 30), "30m");
        assert_eq!(human_duration(3600 * 5 + 60 * 7), "5h7m");
        assert_eq!(human_duration(3600 * 30), "30h");
        assert_eq!(human_duration(86400 * 3), "3d");
    }
}
