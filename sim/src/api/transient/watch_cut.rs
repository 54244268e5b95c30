//! `watch-cut=EVERY`: every EVERY (counted from when the switch is seen on) the API server ends
//! every open watch; every third cut also compacts the watch history first, so a watch resumed
//! from an older resourceVersion gets 410 Gone.
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
    loop {
        let pause = match clock.observe(interval(&st.cfg.faults)) {
            None => {
                done = 0;
                POLL
            }
            Some((every, elapsed)) => {
                if elapsed.is_zero() {
                    done = 0;
                }
                let due = (elapsed.as_secs_f64() / every.as_secs_f64()).floor() as u64;
                if due > done {
                    // One cut even if the loop fell behind: the watches are gone either way.
                    done = due;
                    cut(&st, done);
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

/// Cut number `n` (from 1): every [`COMPACT_EVERY`]th compacts the history first, so clients
/// resuming from before now get 410.
fn cut(st: &AppState, n: u64) {
    let compact = n.is_multiple_of(COMPACT_EVERY);
    if compact {
        st.compact();
    }
    st.cut_watches();
    tracing::debug!(cut = n, compact, rv = st.store.current_rv(), "watches cut (watch-cut)");
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

    /// With a paused clock: nothing before EVERY, then one cut every EVERY, the third also
    /// compacting; turning the switch off stops the cuts.
    #[tokio::test(start_paused = true)]
    async fn cuts_every_interval_and_compacts_every_third() {
        let st = state();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(st.clone(), cancel.clone()));
        let cuts = || *st.watch_cut.borrow();
        st.cfg.faults.set(SWITCH, "10s", true);
        tokio::time::sleep(Duration::from_millis(9_900)).await;
        assert_eq!(cuts(), 0);
        let before = configmap(&st, "a");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(cuts(), 1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cuts(), 2);
        assert!(
            st.store.watch_from(before - 1).is_ok(),
            "no compaction before the third cut"
        );
        let last = configmap(&st, "b");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(cuts(), 3);
        let gone = st.store.watch_from(last - 1).unwrap_err();
        assert_eq!((gone.requested, gone.oldest), (last - 1, last));
        assert!(st.store.watch_from(last).is_ok());
        st.cfg.faults.set(SWITCH, "10s", false);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(cuts(), 3);
        cancel.cancel();
        task.await.unwrap();
    }

    /// An open watch ends cleanly at a cut; resuming it after the compacting cut from an older
    /// resourceVersion is answered as upstream answers it: 200, then one ERROR event carrying a
    /// 410 Expired Status, then the end of the stream. A list at that exact version is a 410.
    #[tokio::test]
    async fn a_cut_watch_ends_and_resuming_after_compaction_is_410() {
        let st = state();
        let rv = configmap(&st, "a");
        let resp = get(
            &st,
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        )
        .await;
        assert_eq!(resp.status(), 200);
        let body = tokio::spawn(async move { resp.into_body().collect().await.map(|c| c.to_bytes()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        configmap(&st, "b");
        tokio::time::sleep(Duration::from_millis(50)).await;
        for n in 1..=3 {
            cut(&st, n);
        }
        let got = tokio::time::timeout(Duration::from_secs(5), body)
            .await
            .expect("the cut watch ends")
            .unwrap()
            .expect("cleanly");
        let events: Vec<Value> = got
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["object"]["metadata"]["name"], "b");

        let current = st.store.current_rv();
        let resp = get(
            &st,
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        )
        .await;
        assert_eq!(resp.status(), 200);
        let got = resp.into_body().collect().await.unwrap().to_bytes();
        let event: Value = serde_json::from_slice(got.strip_suffix(b"\n").unwrap()).unwrap();
        assert_eq!(event["type"], "ERROR");
        let status = &event["object"];
        assert_eq!(
            (
                status["kind"].as_str(),
                status["code"].as_u64(),
                status["reason"].as_str()
            ),
            (Some("Status"), Some(410), Some("Expired"))
        );
        assert_eq!(status["message"], format!("too old resource version: {rv} ({current})"));

        let resp = get(
            &st,
            &format!("/api/v1/namespaces/default/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact"),
        )
        .await;
        assert_eq!(resp.status(), 410);
        // From the current version on, watches resume.
        let resp = get(
            &st,
            &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={current}&timeoutSeconds=1"),
        )
        .await;
        let got = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    }

    /// After a compaction, lists that upstream reads from etcd at an exact version are 410
    /// (`Exact`, a version with a limit, a continue token from before, which comes back with a
    /// token that goes on at the current state); the others are served.
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
