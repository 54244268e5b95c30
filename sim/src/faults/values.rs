//! The value syntax of the transient switches: rates, durations and schedules.
//!
//! Kept apart from the behaviour so the parser can reject a bad `--faults` value with exit 2
//! before any cluster starts, and every part of the simulator reads a value the same way.

use std::time::Duration;

use crate::api::transient::{CODES, Rate};

/// A share of requests or queries: `5%` or `5` (0 to 100), as a fraction from 0 to 1.
pub fn parse_percent(value: &str) -> Option<f64> {
    let p: f64 = value.trim().trim_end_matches('%').trim().parse().ok()?;
    (0.0..=100.0).contains(&p).then_some(p / 100.0)
}

/// A duration with a unit, as Go's `time.ParseDuration` reads simple ones: `500ms`, `5s`, `2m`.
/// Zero is refused: a fault that lasts or recurs every zero seconds means nothing.
pub fn parse_duration(value: &str) -> Option<Duration> {
    let v = value.trim();
    let (number, unit) = v.split_at(v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?);
    let n: f64 = number.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (secs > 0.0 && secs.is_finite()).then(|| Duration::from_secs_f64(secs))
}

/// `DOWN/EVERY`: a fault that lasts `down` and starts again every `every` (`down` < `every`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// How long each episode lasts.
    pub down: Duration,
    /// The time from the start of one episode to the start of the next.
    pub every: Duration,
}

impl Schedule {
    /// Whether an episode is under way `elapsed` after the switch was turned on. The first
    /// episode starts `every / 2` in, so a short run meets it and the system settles first.
    pub fn active_at(&self, elapsed: Duration) -> bool {
        let first = self.every / 2;
        if elapsed < first {
            return false;
        }
        let into = (elapsed - first).as_secs_f64() % self.every.as_secs_f64();
        into < self.down.as_secs_f64()
    }

    /// Time until the next episode starts, `elapsed` after the switch was turned on.
    pub fn next_start(&self, elapsed: Duration) -> Duration {
        let first = self.every / 2;
        if elapsed < first {
            return first - elapsed;
        }
        let into = (elapsed - first).as_secs_f64() % self.every.as_secs_f64();
        Duration::from_secs_f64(self.every.as_secs_f64() - into)
    }
}

/// Parses `8s/60s`.
pub fn parse_schedule(value: &str) -> Option<Schedule> {
    let (down, every) = value.split_once('/')?;
    let (down, every) = (parse_duration(down)?, parse_duration(every)?);
    (down < every).then_some(Schedule { down, every })
}

/// Parses `NODE:REST` into the node name and the rest (the node name is not checked here: the
/// cluster refuses names of nodes it does not have).
pub fn split_node(value: &str) -> Option<(&str, &str)> {
    let (node, rest) = value.split_once(':')?;
    let node = node.trim();
    let valid = !node.is_empty()
        && node
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    valid.then_some((node, rest.trim()))
}

/// `api-errors`: `CODE:PERCENT` for one code, or `PERCENT` alone for an even mix of every code
/// (each of 429, 500, 503 and 504 a quarter of the share).
pub fn parse_api_errors(value: &str) -> Option<Vec<Rate>> {
    if let Some((code, percent)) = value.split_once(':') {
        let code: u16 = code.trim().parse().ok().filter(|c| CODES.contains(c))?;
        return Some(vec![Rate {
            code,
            share: parse_percent(percent)?,
        }]);
    }
    let share = parse_percent(value)?;
    // Drawn in turn, each against what the previous draws left, so the shares add up to `share`.
    let mut left = 1.0;
    let mut rates = Vec::new();
    for (i, &code) in CODES.iter().enumerate() {
        let part = share / CODES.len() as f64;
        let conditional = if i == 0 { part } else { part / left };
        left -= part;
        rates.push(Rate {
            code,
            share: conditional.min(1.0),
        });
    }
    Some(rates)
}

/// The verbs `writes-lost` can lose: the writes that change or remove existing objects.
pub const LOST_WRITE_VERBS: &[&str] = &["patch", "update", "deletecollection"];

/// `writes-lost`: `RESOURCE/VERB`, a resource plural (lowercase, optionally with a subresource:
/// `replicasets/status`) and one of [`LOST_WRITE_VERBS`].
pub fn parse_lost_write(value: &str) -> Option<(&str, &str)> {
    let (resource, verb) = value.rsplit_once('/')?;
    let word_ok = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    let resource_ok = match resource.split_once('/') {
        Some((plural, sub)) => word_ok(plural) && word_ok(sub),
        None => word_ok(resource),
    };
    (resource_ok && LOST_WRITE_VERBS.contains(&verb)).then_some((resource, verb))
}

/// Whether `value` is a valid value for switch `name` (switches with a fixed list of values
/// or free-form names such as a node are checked by the caller).
pub fn valid(name: &str, value: &str) -> bool {
    match name {
        "api-errors" => parse_api_errors(value).is_some(),
        "conn-reset" | "dns-servfail" => parse_percent(value).is_some(),
        "api-latency" | "watch-cut" => parse_duration(value).is_some(),
        "api-down" => parse_schedule(value).is_some(),
        "node-flap" => split_node(value).and_then(|(_, s)| parse_schedule(s)).is_some(),
        "node-lost" => split_node(value).and_then(|(_, d)| parse_duration(d)).is_some(),
        "writes-lost" => parse_lost_write(value).is_some(),
        "field-dropped" => value
            .split_once(':')
            .is_some_and(|(r, p)| !r.is_empty() && !p.is_empty()),
        "watch-events-dropped" => value
            .rsplit_once('/')
            .is_some_and(|(r, t)| !r.is_empty() && matches!(t, "ADDED" | "MODIFIED" | "DELETED")),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_writes_name_a_plural_and_a_verb() {
        assert_eq!(parse_lost_write("events/patch"), Some(("events", "patch")));
        assert_eq!(
            parse_lost_write("limitranges/deletecollection"),
            Some(("limitranges", "deletecollection"))
        );
        assert_eq!(
            parse_lost_write("replicasets/status/patch"),
            Some(("replicasets/status", "patch"))
        );
        for bad in [
            "events",
            "events/get",
            "/patch",
            "Events/patch",
            "events/patch/x",
            "a/b/c/patch",
        ] {
            assert_eq!(parse_lost_write(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_and_schedules() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        for bad in ["5", "s", "0s", "-1s", "5x", ""] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        let s = parse_schedule("4s/20s").unwrap();
        assert!(!s.active_at(Duration::from_secs(9)));
        assert!(s.active_at(Duration::from_secs(10)) && s.active_at(Duration::from_secs(13)));
        assert!(!s.active_at(Duration::from_secs(14)) && s.active_at(Duration::from_secs(31)));
        assert_eq!(s.next_start(Duration::from_secs(4)), Duration::from_secs(6));
        assert_eq!(s.next_start(Duration::from_secs(12)), Duration::from_secs(18));
        assert_eq!(parse_schedule("20s/4s"), None);
        assert_eq!(parse_schedule("4s"), None);
    }

    #[test]
    fn node_values() {
        assert!(valid("node-flap", "win-1:8s/60s"));
        assert!(valid("node-lost", "win-2:30s"));
        for bad in ["win-1", ":8s/60s", "win-1:8s", "Win_1:8s/60s"] {
            assert!(!valid("node-flap", bad), "{bad}");
        }
        assert!(!valid("node-lost", "win-2:8s/60s"));
    }

    #[test]
    fn api_errors_alone_or_mixed() {
        assert_eq!(
            parse_api_errors("429:5%").unwrap(),
            vec![Rate { code: 429, share: 0.05 }]
        );
        let mix = parse_api_errors("8%").unwrap();
        assert_eq!(mix.len(), 4);
        // The chance that a request is answered by any code is the whole share.
        let pass: f64 = mix.iter().map(|r| 1.0 - r.share).product();
        assert!((1.0 - pass - 0.08).abs() < 1e-9, "{}", 1.0 - pass);
        for bad in ["429", "418:5%", "500:101%", "503:x", ":5", "101%"] {
            assert!(parse_api_errors(bad).is_none(), "{bad}");
        }
    }
}
