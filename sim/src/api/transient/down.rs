//! `api-down=DOWN/EVERY`: the API server restarts. For DOWN every EVERY (the first episode
//! EVERY/2 after the switch is seen on) it drops every open connection, watches and exec
//! streams included, and closes its listening socket, so new connections are refused
//! (`connect: connection refused`); then it listens on the same address again and serves with
//! the same store, resourceVersions and watch history, as a kube-apiserver restarted against the
//! same etcd does.
//!
//! What clients see: requests in flight fail (`EOF`, `connection reset by peer`), watches end
//! (kube-rs's watcher and client-go's reflector re-watch from their last resourceVersion once the
//! server is back), and every request during the outage is refused at once. Nothing answers with
//! an HTTP status meanwhile, so retries on 503 do not help; only retrying the connection does.
//!
//! This module decides *when*; the listener itself is the server's (`server.rs` drops it and
//! binds again).

use std::time::Duration;

use tokio::time::Instant;

use super::{POLL, SwitchClock};
use crate::faults::Faults;
use crate::faults::values::{Schedule, parse_schedule};

/// The fault switch's name.
pub const SWITCH: &str = "api-down";

/// The schedule in force: the first valid value in sorted order (one value is expected).
fn schedule(faults: &Faults) -> Option<Schedule> {
    faults.values(SWITCH).iter().find_map(|v| parse_schedule(v))
}

/// How long the episode under way `elapsed` after the switch came on still lasts; `None` when
/// none is under way.
pub fn remaining(s: &Schedule, elapsed: Duration) -> Option<Duration> {
    if !s.active_at(elapsed) {
        return None;
    }
    let into = s.every.saturating_sub(s.next_start(elapsed));
    Some(s.down.saturating_sub(into)).filter(|left| !left.is_zero())
}

/// Follows the switch for the server's serving loop: when the next outage starts and when it
/// is over.
#[derive(Debug, Default)]
pub struct Outages {
    clock: SwitchClock<Schedule>,
}

impl Outages {
    /// Waits until an episode is under way; returns how long it still lasts.
    pub async fn next(&mut self, faults: &Faults) -> Duration {
        loop {
            let pause = match self.clock.observe(schedule(faults)) {
                Some((s, elapsed)) => match remaining(&s, elapsed) {
                    Some(left) => return left,
                    None => POLL.min(s.next_start(elapsed)),
                },
                None => POLL,
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Waits until the episode that had `left` to run is over: that time has passed, or the
    /// switch was turned off or given another schedule meanwhile.
    pub async fn over(&mut self, faults: &Faults, left: Duration) {
        let end = Instant::now() + left;
        loop {
            let now = Instant::now();
            if now >= end {
                return;
            }
            let still = self
                .clock
                .observe(schedule(faults))
                .is_some_and(|(s, elapsed)| remaining(&s, elapsed).is_some());
            if !still {
                tracing::debug!("api-down turned off or changed: the outage ends early");
                return;
            }
            tokio::time::sleep((end - now).min(POLL)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remaining_outage_follows_the_schedule() {
        let s = parse_schedule("4s/20s").unwrap();
        let secs = Duration::from_secs;
        assert_eq!(remaining(&s, secs(9)), None);
        assert_eq!(remaining(&s, secs(10)), Some(secs(4)));
        assert_eq!(
            remaining(&s, Duration::from_millis(12_500)),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(remaining(&s, secs(14)), None);
        assert_eq!(remaining(&s, secs(31)), Some(secs(3)));
    }

    /// With a paused clock: the first outage starts EVERY/2 after the switch is seen on and
    /// lasts DOWN; turning the switch off ends an outage early; turning it on later starts the
    /// count again.
    #[tokio::test(start_paused = true)]
    async fn outages_start_and_end_on_schedule() {
        let faults = Faults::default();
        let mut o = Outages::default();
        tokio::time::advance(Duration::from_secs(30)).await;
        faults.set(SWITCH, "2s/10s", true);
        let t0 = Instant::now();
        let left = o.next(&faults).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
        assert_eq!(left, Duration::from_secs(2));
        o.over(&faults, left).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(7));
        let left = o.next(&faults).await;
        assert_eq!((t0.elapsed(), left), (Duration::from_secs(15), Duration::from_secs(2)));
        let off = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            faults.set(SWITCH, "2s/10s", false);
        };
        tokio::join!(o.over(&faults, left), off);
        assert!(t0.elapsed() < Duration::from_millis(15_700), "{:?}", t0.elapsed());
        faults.set(SWITCH, "2s/10s", true);
        let t1 = Instant::now();
        o.next(&faults).await;
        assert!(t1.elapsed() >= Duration::from_secs(5), "{:?}", t1.elapsed());
    }

    /// A real server under `api-down=1s/2s`: the first outage (1 s in, for 1 s) refuses new
    /// connections and ends an open watch; afterwards (switch off) the same address serves the
    /// same state and a kube-rs watcher resumes by itself; with the switch on again, a shutdown
    /// during the outage still stops everything.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_real_server_goes_down_and_comes_back_with_its_state() {
        use crate::addr::AddressBlock;
        use crate::api::server::{ApiConfig, ApiServer};
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, PostParams, WatchEvent, WatchParams};
        use kube::runtime::{WatchStreamExt, watcher};

        crate::install_crypto_provider();
        let faults = std::sync::Arc::new(Faults::default());
        let srv = ApiServer::start(ApiConfig::new(AddressBlock(214)).port(0).faults(faults.clone()))
            .await
            .unwrap();
        let addr = srv.addr();
        let client = kube::Client::try_from(srv.kube_config()).unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client, "default");
        let cm = |name: &str| -> ConfigMap {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
        };
        let before = cms.create(&PostParams::default(), &cm("before")).await.unwrap();
        let rv = before.metadata.resource_version.clone().unwrap();
        let mut raw = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let resumed = watcher(cms.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let follower = tokio::spawn(async move {
            let mut resumed = std::pin::pin!(resumed);
            while let Some(ev) = resumed.next().await {
                if let Ok(o) = ev {
                    let _ = seen_tx.send(o.metadata.name.unwrap_or_default());
                }
            }
        });
        assert_eq!(seen.recv().await.as_deref(), Some("before"));

        faults.set(SWITCH, "1s/2s", true);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");
        // The watch opened before the outage has ended (cleanly or not: the socket is gone).
        let end = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                match raw.next().await {
                    Some(Ok(WatchEvent::Added(_) | WatchEvent::Bookmark(_))) => continue,
                    other => return other.map(|r| r.is_ok()),
                }
            }
        })
        .await
        .expect("the open watch ends with the outage");
        assert_ne!(end, Some(true), "the watch delivered an event during the outage");

        tokio::time::sleep((t0 + Duration::from_millis(2_300)).saturating_duration_since(Instant::now())).await;
        // Off before the next outage (3 s in), so the watcher's recovery is not cut again.
        faults.set(SWITCH, "1s/2s", false);
        let after = cms
            .create(&PostParams::default(), &cm("after"))
            .await
            .expect("served again");
        assert!(after.metadata.resource_version.unwrap().parse::<u64>().unwrap() > rv.parse::<u64>().unwrap());
        assert!(cms.get("before").await.is_ok(), "the state survives the restart");
        // The watcher's own backoff decides when: its errors during the outage (the dropped
        // stream, refused re-watches, a stale pooled connection) back off 0.8, 1.6, 3.2 s, each
        // up to doubled by jitter.
        let next = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                match seen.recv().await.as_deref() {
                    Some("after") => return true,
                    Some(_) => continue,
                    None => return false,
                }
            }
        })
        .await;
        assert_eq!(next, Ok(true), "the kube-rs watcher resumes after the outage");

        // On again: the count starts anew, so the next outage is 1 s on. Shut down during it.
        faults.set(SWITCH, "1s/2s", true);
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        tokio::time::timeout(Duration::from_secs(2), srv.shutdown())
            .await
            .expect("shutdown during an outage returns");
        follower.abort();
    }
}
