//! `api-latency=DURATION`: latency spikes. 2% of the requests that are not long-running wait a
//! uniformly drawn DURATION..1.5×DURATION before they are served, so p99 latency is about
//! DURATION while most requests stay fast.
//!
//! What it models: an overloaded kube-apiserver or a slow etcd (a compaction, a defrag, a disk
//! stall), which answer correctly but late. A client with a request timeout shorter than the
//! spike sees it time out; one without just waits. The wait happens before the request is
//! processed, as a request queued by priority-and-fairness would.

use std::time::Duration;

use rand::Rng;

use crate::faults::Faults;
use crate::faults::values::parse_duration;

/// The fault switch's name.
pub const SWITCH: &str = "api-latency";

/// The share of requests that meet a spike.
pub const SHARE: f64 = 0.02;

/// How long a request waits: for each configured duration, a draw at [`SHARE`]; a hit waits a
/// uniform time from the duration to 1.5 times it (the longest hit wins). `None`: no spike.
pub fn pick(durations: &[Duration], rng: &mut impl Rng) -> Option<Duration> {
    let mut longest = None;
    for d in durations {
        if rng.random::<f64>() < SHARE {
            let wait = d.mul_f64(rng.random_range(1.0..=1.5));
            longest = longest.max(Some(wait));
        }
    }
    longest
}

/// Waits out the spike this request meets, if any.
pub(super) async fn wait(faults: &Faults, path: &str) {
    let values = faults.values(SWITCH);
    if values.is_empty() {
        return;
    }
    let durations: Vec<Duration> = values.iter().filter_map(|v| parse_duration(v)).collect();
    let Some(delay) = pick(&durations, &mut rand::rng()) else {
        return;
    };
    tracing::debug!(?delay, %path, "API latency spike injected");
    tokio::time::sleep(delay).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::handler::router;
    use crate::api::state::{AppState, StateConfig};
    use axum::body::Body;
    use axum::extract::Request;
    use rand::SeedableRng;
    use tower::ServiceExt;

    #[test]
    fn two_percent_of_requests_wait_between_one_and_one_and_a_half_times() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let d = Duration::from_secs(2);
        let waits: Vec<Duration> = (0..100_000).filter_map(|_| pick(&[d], &mut rng)).collect();
        let share = waits.len() as f64 / 100_000.0;
        assert!((0.017..0.023).contains(&share), "{share}");
        assert!(waits.iter().all(|w| (d..=d.mul_f64(1.5)).contains(w)));
        // Uniform over the range: both halves are hit about as often.
        let low = waits.iter().filter(|w| **w < d.mul_f64(1.25)).count() as f64;
        assert!((0.4..0.6).contains(&(low / waits.len() as f64)), "{low}");
        assert_eq!(pick(&[], &mut rng), None);
    }

    /// Through the router with a paused clock: some of 600 requests are held for at least the
    /// duration, none longer than 1.5 times it, and watches are never held.
    #[tokio::test(start_paused = true)]
    async fn spiked_requests_are_served_late_and_watches_never() {
        let st = AppState::new(StateConfig::new(AddressBlock(202)));
        st.cfg.faults.set(SWITCH, "10s", true);
        let token = st.cfg.admin_token.clone();
        let app = router(st);
        let call = |uri: &str| {
            let req = Request::get(uri)
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap();
            let app = app.clone();
            async move {
                let start = tokio::time::Instant::now();
                let resp = app.oneshot(req).await.unwrap();
                (resp.status().as_u16(), start.elapsed())
            }
        };
        let mut late = 0;
        for _ in 0..600 {
            let (code, took) = call("/api/v1/namespaces/default/configmaps").await;
            assert_eq!(code, 200);
            assert!(took < Duration::from_secs(15), "{took:?}");
            if took >= Duration::from_secs(10) {
                late += 1;
            }
        }
        // 2% of 600: 12 expected; the chance of none is 0.98^600, about 6 in a million.
        assert!((1..=40).contains(&late), "{late} of 600 late");
        for _ in 0..100 {
            let (code, took) = call("/api/v1/configmaps?watch=true&timeoutSeconds=1").await;
            assert_eq!(code, 200);
            assert!(took < Duration::from_secs(10), "a watch waited {took:?}");
        }
    }
}
