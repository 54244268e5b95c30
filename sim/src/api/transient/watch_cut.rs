//! `watch-cut=EVERY`: every EVERY (counted from when the switch is seen on) the API server ends
//! every open watch; every third cut also compacts the watch history first, so a watch resumed
//! from an older resourceVersion gets 410 Gone.
//!
//! A compaction keeps the history of the last compaction interval (three cuts): it compacts to
//! the resourceVersion that was current at the previous one, as etcd's periodic compactor does
//! (kube-apiserver `--etcd-compaction-interval`, 5 min: each run compacts to the revision it
//! recorded on the run before), and as the watch cache keeps at least its 75 s of fresh events.
//! So a watch resumed at once after a cut or an API server restart goes on, and one whose
//! resourceVersion stood still for a whole interval (an idle watch without bookmarks, a client
//! that was away) meets 410. Compacting to "now" would make every resume after a cut that
//! coincides with a compaction fail, which no real cluster does.
//!
//! What it models: kube-apiserver ends watches all the time (its `--min-request-timeout` gives
//! each watch a random 5–10 min life, a rolling restart or a load balancer's idle timeout ends
//! them all), and etcd compaction (every 5 min upstream) moves the oldest resourceVersion a
//! watch can resume from. A cut watch ends cleanly (the chunked body is terminated); the client
//! re-watches from the last resourceVersion it saw. After a compaction, that resume is answered
//! as upstream's watch cache answers it: HTTP 200, then one `ERROR` event whose object is a
//! Status with code 410, reason `Expired`, message `too old resource version: X (Y)`, and the
//! stream ends; the client must list again (kube-rs's watcher and client-go's reflector do). A
//! list that asks for an exact compacted resourceVersion, or a continue token from before the
//! compaction, is answered 410 too (see `objects::read`).

use std::collections::VecDeque;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{POLL, SwitchClock};
use crate::api::state::AppState;
use crate::faults::Faults;
use crate::faults::values::parse_duration;

/// The fault switch's name.
pub const SWITCH: &str = "watch-cut";

/// Every how many cuts the history is also compacted.
pub const COMPACT_EVERY: u64 = 3;

/// The interval in force: the shortest valid value (one value is expected).
fn interval(faults: &Faults) -> Option<Duration> {
    faults.values(SWITCH).iter().filter_map(|v| parse_duration(v)).min()
}

/// Cuts the watches of `st` while the switch is on, until `cancel`.
pub async fn run(st: AppState, cancel: CancellationToken) {
    let mut clock = SwitchClock::default();
    // Cuts made since the switch came on with its current interval.
    let mut done: u64 = 0;
    // The resourceVersion when the switch came on and at each of the last cuts, oldest first:
    // a compaction goes to the one a whole compaction interval ago.
    let mut marks: VecDeque<u64> = VecDeque::new();
    loop {
        let pause = match clock.observe(interval(&st.cfg.faults)) {
            None => {
                done = 0;
                marks.clear();
                POLL
            }
            Some((every, elapsed)) => {
                if elapsed.is_zero() || marks.is_empty() {
                    done = 0;
                    marks = VecDeque::from([st.store.current_rv()]);
                }
                let due = (elapsed.as_secs_f64() / every.as_secs_f64()).floor() as u64;
                if due > done {
                    // One cut even if the loop fell behind: the watches are gone either way.
                    done = due;
                    cut(&st, done, &mut marks);
                }
                let next = every.mul_f64((done + 1) as f64);
                POLL.min(next.saturating_sub(elapsed))
            }
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Cut number `n` (from 1): every [`COMPACT_EVERY`]th first compacts the history to the
/// resourceVersion of [`COMPACT_EVERY`] cuts ago (the front of `marks`), so clients resuming
/// from before that get 410.
fn cut(st: &AppState, n: u64, marks: &mut VecDeque<u64>) {
    let compact = n.is_multiple_of(COMPACT_EVERY);
    let to = marks.front().copied();
    if let Some(to) = to.filter(|_| compact) {
        st.compact_to(to);
    }
    st.cut_watches();
    let rv = st.store.current_rv();
    marks.push_back(rv);
    while marks.len() > COMPACT_EVERY as usize {
        marks.pop_front();
    }
    tracing::debug!(cut = n, compact, to, rv, "watches cut (watch-cut)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::handler::router;
    use crate::api::state::StateConfig;
    use axum::body::Body;
    use axum::extract::Request;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    fn state() -> AppState {
        AppState::new(StateConfig::new(AddressBlock(202)))
    }

    async fn get(st: &AppState, uri: &str) -> axum::response::Response {
        let req = Request::get(uri)
            .header("authorization", format!("Bearer {}", st.cfg.admin_token))
            .body(Body::empty())
            .unwrap();
        router(st.clone()).oneshot(req).await.unwrap()
    }

    fn configmap(st: &AppState, name: &str) -> u64 {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
        let stored = st.store.create("/configmaps", "default", name, obj).unwrap();
        crate::api::store::rv_of(&stored)
    }

    /// With a paused clock: nothing before EVERY, then one cut every EVERY; the third also
    /// compacts, to where the history stood when the switch came on, the sixth to where it stood
    /// at the third; turning the switch off stops the cuts.
    #[tokio::test(start_paused = true)]
    async fn cuts_every_interval_and_compacts_one_interval_behind() {
        let st = state();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(st.clone(), cancel.clone()));
        let cuts = || *st.watch_cut.borrow();
        let older = configmap(&st, "z");
        configmap(&st, "y");
        st.cfg.faults.set(SWITCH, "10s", true);
        tokio::time::sleep(Duration::from_millis(9_900)).await;
        assert_eq!(cuts(), 0);
        let before = configmap(&st, "a");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(cuts(), 1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cuts(), 2);
        assert!(
            st.store.watch_from(older - 1).is_ok(),
            "no compaction before the third cut"
        );
        let last = configmap(&st, "b");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cuts(), 3);
        let gone = st.store.watch_from(older - 1).unwrap_err();
        assert_eq!((gone.requested, gone.oldest), (older - 1, before - 1));
        assert!(
            st.store.watch_from(before - 1).is_ok(),
            "the last interval's history stays"
        );
        assert!(st.store.watch_from(last - 1).is_ok());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(cuts(), 6);
        let gone = st.store.watch_from(last - 1).unwrap_err();
        assert_eq!((gone.requested, gone.oldest), (last - 1, last));
        st.cfg.faults.set(SWITCH, "10s", false);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(cuts(), 6);
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn lists_at_a_compacted_version_are_410_as_upstream() {
        let st = state();
        let old = configmap(&st, "a");
        configmap(&st, "b");
        let first = get(&st, "/api/v1/namespaces/default/configmaps?limit=1").await;
        let first: Value = serde_json::from_slice(&first.into_body().collect().await.unwrap().to_bytes()).unwrap();
        let token = first["metadata"]["continue"].as_str().unwrap().to_string();
        configmap(&st, "c");
        st.compact();
        let code = |uri: String| {
            let st = st.clone();
            async move {
                let resp = get(&st, &uri).await;
                let code = resp.status().as_u16();
                let body: Value =
                    serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
                (code, body)
            }
        };
        let base = "/api/v1/namespaces/default/configmaps";
        for (query, want) in [
            (format!("resourceVersion={old}&resourceVersionMatch=Exact"), 410),
            (format!("resourceVersion={old}&limit=10"), 410),
            (format!("resourceVersion={old}"), 200),
            (
                format!("resourceVersion={old}&resourceVersionMatch=NotOlderThan&limit=10"),
                200,
            ),
            ("resourceVersion=0&limit=10".to_string(), 200),
            ("limit=10".to_string(), 200),
        ] {
            let (got, body) = code(format!("{base}?{query}")).await;
            assert_eq!(got, want, "{query}: {body}");
            if got == 410 {
                assert_eq!(body["reason"], "Expired");
                assert_eq!(body["message"], "The resourceVersion for the provided list is too old.");
            }
        }
        let (got, body) = code(format!("{base}?limit=1&continue={token}")).await;
        assert_eq!((got, body["reason"].as_str()), (410, Some("Expired")), "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("The provided continue parameter is too old")
        );
        let fresh = body["metadata"]["continue"].as_str().expect("a token to go on with");
        let (got, rest) = code(format!("{base}?limit=5&continue={fresh}")).await;
        assert_eq!(got, 200, "{rest}");
        let names: Vec<_> = rest["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("b"), json!("c")]);
    }
}
