//! Watches: a chunked stream of `{"type": ..., "object": ...}` lines.
//!
//! The main function is [`serve`]. Semantics follow the real server: without a
//! resourceVersion (or with `0`) the current state comes first as ADDED events; with one, the
//! stream resumes after it from the kept history, and a version older than that history gets a
//! single `ERROR` event carrying a 410 `Expired` Status (what kube-rs's watcher re-lists on).
//! Selectors filter with the old object too, so an object leaving the selection is DELETED.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::error::{ApiError, ApiResult};
use super::objects::{Query, present, selectors};
use super::registry::ResourceDef;
use super::route::flag;
use super::selector::{FieldSelector, LabelSelector};
use super::state::AppState;
use super::store::{Change, EventType};
use super::table::{self, TableOpts};

/// What one watch sees: a resource, optionally one namespace, and selectors.
struct Filter {
    def: &'static ResourceDef,
    key: String,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    table: Option<TableOpts>,
    /// Event types the `watch-events-dropped` fault switch loses for this resource.
    dropped: Vec<String>,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// The event a change produces for this watch, if any.
    fn project(&self, c: &Change) -> Option<(&'static str, Value)> {
        if c.key != self.key || self.ns.as_ref().is_some_and(|n| *n != c.namespace) {
            return None;
        }
        let new = present(self.def, Value::clone(&c.object));
        let now = self.matches(&new);
        let kind = match c.kind {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => now.then_some("DELETED"),
            EventType::Modified => {
                let before = c
                    .old
                    .as_ref()
                    .is_some_and(|o| self.matches(&present(self.def, Value::clone(o))));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }?;
        if self.dropped.iter().any(|d| d == kind) {
            return None;
        }
        Some((kind, new))
    }

    fn line(&self, kind: &str, obj: Value) -> Bytes {
        let obj = match &self.table {
            Some(opts) => table::render(self.def, &[obj], opts, None),
            None => obj,
        };
        let mut s = json!({"type": kind, "object": obj}).to_string();
        s.push('\n');
        Bytes::from(s)
    }

    /// The BOOKMARK that ends the initial events of a `sendInitialEvents=true` watch (the
    /// streaming-list protocol kubectl 1.27+ uses for `wait` and `delete`): it carries the
    /// annotation `k8s.io/initial-events-end: "true"`, and clients wait for it.
    fn initial_events_end(&self, rv: u64) -> Bytes {
        let mut s = json!({"type": "BOOKMARK", "object": {
            "kind": self.def.kind, "apiVersion": self.def.api_version(),
            "metadata": {"resourceVersion": rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}
        }})
        .to_string();
        s.push('\n');
        Bytes::from(s)
    }

    fn bookmark(&self, rv: u64) -> Bytes {
        let mut s = json!({"type": "BOOKMARK", "object": {
            "kind": self.def.kind, "apiVersion": self.def.api_version(),
            "metadata": {"resourceVersion": rv.to_string()}
        }})
        .to_string();
        s.push('\n');
        Bytes::from(s)
    }
}

fn error_line(e: &ApiError) -> Bytes {
    let mut s = format!(
        r#"{{"type":"ERROR","object":{}}}"#,
        super::error::status_text(&e.status())
    );
    s.push('\n');
    Bytes::from(s)
}

/// Serves a watch request.
pub fn serve(
    st: &AppState,
    def: &'static ResourceDef,
    ns: Option<String>,
    name: Option<String>,
    q: &Query,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let (labels, mut fields) = selectors(def, q)?;
    if let Some(n) = &name {
        let extra = FieldSelector::parse(&format!("metadata.name={n}"), def.plural, def.kind, &def.api_version())?;
        fields = if fields.is_empty() {
            extra
        } else {
            FieldSelector::parse(
                &format!(
                    "{},metadata.name={n}",
                    q.get("fieldSelector").cloned().unwrap_or_default()
                ),
                def.plural,
                def.kind,
                &def.api_version(),
            )?
        };
    }
    let filter = Filter {
        def,
        key: def.storage_key(),
        ns,
        labels,
        fields,
        table: table::wants(headers, q.get("includeObject").map(String::as_str)),
        dropped: st
            .cfg
            .faults
            .values("watch-events-dropped")
            .iter()
            .filter_map(|v| v.rsplit_once('/'))
            .filter(|(r, _)| *r == def.plural || (*r == "custom" && def.custom.is_some()))
            .map(|(_, t)| t.to_string())
            .collect(),
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map(Duration::from_secs);
    let bookmarks = flag(q, "allowWatchBookmarks");
    // With sendInitialEvents the resourceVersion is only a lower bound: the current state is
    // always sent first, then the initial-events-end bookmark.
    let send_initial = flag(q, "sendInitialEvents");
    let requested = q
        .get("resourceVersion")
        .filter(|s| !s.is_empty() && *s != "0" && !send_initial);
    // `watch-history-ignored`: a watch from a resourceVersion starts at the current one.
    let current = st.store.current_rv().to_string();
    let requested = match requested {
        Some(_) if st.cfg.faults.applies_to("watch-history-ignored", def.plural) => Some(&current),
        other => other,
    };

    let mut initial: Vec<Bytes> = Vec::new();
    let from = match requested {
        Some(rv) => rv
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        None => {
            let (items, rv) = st.store.list(&filter.key, filter.ns.as_deref());
            for o in items {
                let o = present(def, o);
                if filter.matches(&o) {
                    initial.push(filter.line("ADDED", o));
                }
            }
            if send_initial {
                initial.push(filter.initial_events_end(rv));
            }
            rv
        }
    };
    let (replay, rx) = match st.store.watch_from(from) {
        Ok(x) => x,
        Err(exp) => {
            // Upstream's watch cache prints the oldest version a watch can resume from
            // (`oldest-1`, one below its oldest event).
            let e = ApiError::expired(format!("too old resource version: {} ({})", exp.requested, exp.oldest));
            return Ok(stream_response(futures::stream::iter([Ok::<_, Infallible>(
                error_line(&e),
            )])));
        }
    };
    let (tx, out) = mpsc::channel::<Bytes>(256);
    let cut = st.watch_cut.subscribe();
    let interval = st.cfg.bookmark_interval;
    tokio::spawn(pump(
        filter,
        initial,
        replay,
        rx,
        tx,
        cut,
        timeout,
        bookmarks.then_some(interval),
        from,
    ));
    let body = futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|b| (Ok::<_, Infallible>(b), out))
    });
    Ok(stream_response(body))
}

fn stream_response<S>(s: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Response::builder()
        .status(200)
        .header("Content-Type", "application/json")
        .header("Transfer-Encoding", "chunked")
        .body(Body::from_stream(s))
        .expect("static response parts are valid")
}

/// Moves events to the client until it leaves, the timeout passes or watches are cut.
#[expect(clippy::too_many_arguments, reason = "one task's whole state, passed once")]
async fn pump(
    filter: Filter,
    initial: Vec<Bytes>,
    replay: Vec<Arc<Change>>,
    mut rx: broadcast::Receiver<Arc<Change>>,
    tx: mpsc::Sender<Bytes>,
    mut cut: tokio::sync::watch::Receiver<u64>,
    timeout: Option<Duration>,
    bookmark_every: Option<Duration>,
    from: u64,
) {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut progress = from;
    for b in initial {
        if tx.send(b).await.is_err() {
            return;
        }
    }
    for c in replay {
        progress = progress.max(c.rv);
        if let Some((k, o)) = filter.project(&c)
            && tx.send(filter.line(k, o)).await.is_err()
        {
            return;
        }
    }
    let mut ticker = bookmark_every.map(|d| tokio::time::interval_at(tokio::time::Instant::now() + d, d));
    cut.borrow_and_update();
    loop {
        let sleep_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => futures::future::pending().await,
            }
        };
        let tick = async {
            match ticker.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep_deadline => return,
            _ = cut.changed() => return,
            _ = tx.closed() => return,
            _ = tick => {
                if tx.send(filter.bookmark(progress)).await.is_err() { return; }
            }
            msg = rx.recv() => match msg {
                Ok(c) => {
                    if c.rv <= progress { continue; }
                    progress = c.rv;
                    if let Some((k, o)) = filter.project(&c)
                        && tx.send(filter.line(k, o)).await.is_err()
                    {
                        return;
                    }
                }
                // Too slow to keep up, or the server is going away: end the watch and let the
                // client resume from its last resourceVersion, as the real watch cache does.
                Err(_) => return,
            }
        }
    }
}
