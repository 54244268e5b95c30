//! The periodic storage compaction kube-apiserver runs against etcd
//! (`k8s.io/apiserver/pkg/storage/etcd3/compact.go`, `--etcd-compaction-interval`, 5 min by
//! default): every interval it compacts to the revision it recorded on the run before, so a
//! resourceVersion stays readable for at least one interval and at most two. After that, a watch
//! resumed from it gets 410 Gone, a list at exactly it gets 410, and a continue token carrying it
//! gets 410 Expired with a continue token for an inconsistent continuation (`objects::read`).
//!
//! The interval comes from the latency profile (`compactionIntervalMs`: upstream's 5 min in
//! `realistic`, seconds in `fast`). The `compaction-off` fault stops the compactor (a server
//! started with `--etcd-compaction-interval=0`): old resourceVersions then stay readable until
//! the bounded watch history drops them.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::state::AppState;

/// The fault switch that stops the compactor.
pub const SWITCH: &str = "compaction-off";

/// Compacts `st` every `interval` to the resourceVersion current at the previous run, until
/// `cancel`.
pub async fn run(st: AppState, interval: Duration, cancel: CancellationToken) {
    let mut previous: Option<u64> = None;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        previous = tick(&st, previous);
    }
}

/// One compactor run: compacts to `previous` (unless the fault is on) and returns the mark for
/// the next run.
fn tick(st: &AppState, previous: Option<u64>) -> Option<u64> {
    if st.cfg.faults.is_on(SWITCH) {
        return None;
    }
    if let Some(to) = previous {
        st.compact_to(to);
        tracing::debug!(to, "storage compacted");
    }
    Some(st.store.current_rv())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::state::StateConfig;

    #[test]
    fn a_resource_version_expires_on_the_second_run_after_it() {
        let st = AppState::new(StateConfig::new(AddressBlock(200)));
        let first = st.store.current_rv();
        let mark = tick(&st, None);
        assert_eq!(mark, Some(first));
        st.store
            .create("configmaps", "ns", "a", serde_json::json!({"metadata": {"name": "a"}}))
            .unwrap();
        let later = st.store.current_rv();
        assert!(later > first);
        // One interval on: compacted to `first`, which is itself still readable.
        let mark = tick(&st, mark);
        assert_eq!(mark, Some(later));
        assert!(st.store.readable_at(first).is_ok());
        // Two intervals on: compacted to `later`; `first` is gone.
        tick(&st, mark);
        assert!(st.store.readable_at(first).is_err());
        assert!(st.store.readable_at(later).is_ok());
    }

    #[test]
    fn the_fault_stops_it() {
        let st = AppState::new(StateConfig::new(AddressBlock(201)));
        st.cfg.faults.set(SWITCH, "", true);
        let first = st.store.current_rv();
        st.store
            .create("configmaps", "ns", "a", serde_json::json!({"metadata": {"name": "a"}}))
            .unwrap();
        let mut mark = None;
        for _ in 0..3 {
            mark = tick(&st, mark);
        }
        assert!(mark.is_none());
        st.store
            .create("configmaps", "ns", "b", serde_json::json!({"metadata": {"name": "b"}}))
            .unwrap();
        assert!(st.store.readable_at(first).is_ok());
    }
}
