//! Transient API-server trouble (`--faults`): what a nightly job meets from a real control plane
//! now and then and must ride out, one switch a module:
//!
//! | switch                     | module        | what a client sees                                      |
//! |----------------------------|---------------|---------------------------------------------------------|
//! | `api-errors=[CODE:]PERCENT`| [`errors`]    | 429/500/503/504 answers, as kube-apiserver writes them   |
//! | `api-latency=DURATION`     | [`latency`]   | 2% of requests answered DURATION..1.5×DURATION late       |
//! | `conn-reset=PERCENT`       | [`reset`]     | the request takes effect, its response is cut mid-body   |
//! | `api-down=DOWN/EVERY`      | [`down`]      | connections dropped, then refused, for DOWN every EVERY  |
//! | `watch-cut=EVERY`          | [`watch_cut`] | every open watch ends; every third cut also 410 on resume |
//!
//! The per-request switches meet the request in [`inject`], a middleware inside authentication
//! (where upstream's priority-and-fairness and timeout filters sit). The two scheduled switches
//! are loops the server runs ([`down::Outages`] in `server.rs`, [`watch_cut::run`]). Every switch
//! is read per request or per tick, so turning one on at run time takes effect at once; a
//! schedule counts from when its loop first saw the switch on.
//!
//! Long-running requests (watches, exec, attach, port-forward, proxies, followed logs) are left
//! alone by the per-request switches: upstream's max-in-flight and timeout filters exempt them,
//! and cutting watches is `watch-cut`'s (and `api-down`'s) business.

pub mod down;
pub mod errors;
pub mod latency;
pub mod reset;
pub mod watch_cut;

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::time::Instant;

use super::state::AppState;

pub use errors::{CODES, Rate};

/// How often the scheduled switches' loops look at the switch (so one turned on or off at run
/// time is noticed within this).
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// Whether upstream treats the request as long-running (exempt from in-flight limits and the
/// request timeout).
pub(crate) fn long_running(req: &Request) -> bool {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let flag = |name: &str| {
        query
            .split('&')
            .any(|kv| kv == name || kv == format!("{name}=true") || kv == format!("{name}=1"))
    };
    path.starts_with("/api/v1/watch/")
        || path.contains("/watch/")
        || flag("watch")
        || ["/exec", "/attach", "/portforward", "/proxy"]
            .iter()
            .any(|s| path.ends_with(s))
        || path.contains("/proxy/")
        || (path.ends_with("/log") && flag("follow"))
}

/// The middleware of the per-request switches: a latency spike first (the request waits in an
/// overloaded server), then an error answer, or else the request is served and, for
/// `conn-reset`, its response cut mid-body.
pub async fn inject(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if long_running(&req) {
        return next.run(req).await;
    }
    let faults = &st.cfg.faults;
    let path = req.uri().path().to_string();
    latency::wait(faults, &path).await;
    if let Some(answer) = errors::draw(faults, &path) {
        return answer;
    }
    let reset = reset::draw(faults, &path);
    let response = next.run(req).await;
    if reset { reset::cut(response).await } else { response }
}

/// Since when a scheduled switch has been on with its current value: the origin its schedule
/// counts from. Turning the switch off, or changing its value, starts the count again.
#[derive(Debug)]
pub(crate) struct SwitchClock<T> {
    seen: Option<(T, Instant)>,
}

impl<T> Default for SwitchClock<T> {
    fn default() -> Self {
        Self { seen: None }
    }
}

impl<T: PartialEq + Copy> SwitchClock<T> {
    /// Records the switch's value now (`None`: off); returns the value and how long it has been
    /// on with it.
    pub(crate) fn observe(&mut self, value: Option<T>) -> Option<(T, Duration)> {
        let now = Instant::now();
        let Some(value) = value else {
            self.seen = None;
            return None;
        };
        match self.seen {
            Some((old, since)) if old == value => Some((value, now - since)),
            _ => {
                self.seen = Some((value, now));
                Some((value, Duration::ZERO))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[test]
    fn long_running_requests_are_recognised() {
        let lr = |uri: &str| long_running(&Request::get(uri).body(Body::empty()).unwrap());
        assert!(lr("/api/v1/pods?watch=true&resourceVersion=5"));
        assert!(lr("/api/v1/watch/namespaces/default/pods"));
        assert!(lr("/api/v1/namespaces/default/pods/p/exec?command=ls"));
        assert!(lr("/api/v1/namespaces/default/pods/p/log?follow=true"));
        assert!(lr("/api/v1/namespaces/default/services/s/proxy/healthz"));
        assert!(!lr("/api/v1/namespaces/default/pods/p/log"));
        assert!(!lr("/api/v1/pods?limit=500"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_switch_clock_restarts_when_the_value_changes_or_goes_off() {
        let mut c = SwitchClock::default();
        assert_eq!(c.observe(Some(1)), Some((1, Duration::ZERO)));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(c.observe(Some(1)), Some((1, Duration::from_secs(3))));
        assert_eq!(c.observe(Some(2)), Some((2, Duration::ZERO)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(c.observe(None), None);
        assert_eq!(c.observe(Some(2)), Some((2, Duration::ZERO)));
    }
}
