//! The state every request shares: the store, the tokens, the address plan, and the knobs tests
//! use for fault injection.
//!
//! The main structure is [`AppState`], a cheap-to-clone handle.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::addr::AddressBlock;

use super::store::{DEFAULT_HISTORY, Store};

/// Settings of the shared state that do not involve sockets (so `router` tests need no server).
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// The cluster's address block (ClusterIPs, the kubernetes Service).
    pub block: AddressBlock,
    /// The token the kubeconfig and the in-process components use.
    pub admin_token: String,
    /// Changes kept for watch resumption.
    pub history: usize,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK (upstream: about a minute).
    pub bookmark_interval: Duration,
    /// The API server's port, for the kubernetes Service's endpoints.
    pub api_port: u16,
    /// The cluster's fault switches (see [`crate::faults`]).
    pub faults: Arc<crate::faults::Faults>,
    /// The control plane's feature gates (`--feature-gates`).
    pub gates: crate::gates::FeatureGates,
}

impl StateConfig {
    /// Defaults for a block: a random admin token, upstream-like history and bookmark interval.
    pub fn new(block: AddressBlock) -> Self {
        Self {
            block,
            admin_token: random_token(),
            history: DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(60),
            faults: Arc::default(),
            gates: crate::gates::FeatureGates::default(),
            api_port: crate::addr::API_PORT,
        }
    }
}

/// A random 32-hex-character token.
pub fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32).map(|_| format!("{:x}", rng.random_range(0..16u8))).collect()
}

/// Shared state behind [`AppState`].
pub struct Shared {
    /// Object storage.
    pub store: Store,
    /// Settings.
    pub cfg: StateConfig,
    /// Tokens the server issued (TokenRequest, component tokens).
    pub tokens: super::auth::tokens::Tokens,
    /// The RBAC authorizer and its per-user cache.
    pub authz: super::auth::rbac::Authorizer,
    /// Serialises ClusterIP/NodePort allocation with the create that stores it.
    pub alloc: tokio::sync::Mutex<()>,
    /// Bumped to end every open watch (a server-side watch cut, as on an apiserver restart).
    pub watch_cut: watch::Sender<u64>,
    /// Bumped to drop every open connection, upgraded streams (exec, attach, port-forward)
    /// included: what a dying apiserver process does to its sockets (`api-down`, shutdown).
    conn_drops: watch::Sender<u64>,
    /// When the server started (for `/version` and `Age` sanity).
    pub started: std::time::Instant,
    /// The custom kinds this server's CustomResourceDefinitions serve.
    pub crds: super::crd::Table,
    /// The discovery documents of the aggregated API servers (see [`super::aggregator`]).
    pub aggregated: super::aggregator::Cache,
}

/// The cheap-to-clone handle to the state.
#[derive(Clone)]
pub struct AppState(pub Arc<Shared>);

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("block", &self.0.cfg.block)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    /// Fresh state, bootstrapped with the objects every cluster has (namespaces, the kubernetes
    /// Service, system priority classes).
    pub fn new(cfg: StateConfig) -> Self {
        let (watch_cut, _) = watch::channel(0);
        let (conn_drops, _) = watch::channel(0);
        let st = AppState(Arc::new(Shared {
            store: Store::new(cfg.history),
            cfg,
            tokens: super::auth::tokens::Tokens::default(),
            authz: super::auth::rbac::Authorizer::default(),
            alloc: tokio::sync::Mutex::new(()),
            watch_cut,
            conn_drops,
            started: std::time::Instant::now(),
            crds: super::crd::Table::default(),
            aggregated: super::aggregator::Cache::default(),
        }));
        super::bootstrap::bootstrap(&st);
        st
    }

    /// The user a bearer token authenticates as, if any: the admin token is kubeadm's
    /// `kubernetes-admin`; other tokens are checked by [`super::auth::tokens::Tokens`].
    pub fn authenticate_token(&self, token: &str) -> Option<super::auth::UserInfo> {
        if token.is_empty() {
            return None;
        }
        if token == self.cfg.admin_token {
            return Some(super::auth::UserInfo::admin());
        }
        self.tokens.authenticate(&self.store, token)
    }

    /// Issues a never-expiring token for an in-process user (a component identity such as
    /// `system:kube-scheduler`, in `groups` plus `system:authenticated`); returns it.
    pub fn issue_token(&self, user: &str, groups: &[&str]) -> String {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        groups.push(super::auth::user::ALL_AUTHENTICATED.into());
        self.tokens.issue_user(super::auth::UserInfo {
            name: user.into(),
            groups,
            ..Default::default()
        })
    }

    /// Ends every open watch now; clients resume from their last resourceVersion.
    pub fn cut_watches(&self) {
        self.watch_cut.send_modify(|g| *g += 1);
    }

    /// Drops every open connection now (upgraded streams included); see [`Self::connection_drops`].
    pub fn drop_connections(&self) {
        self.conn_drops.send_modify(|g| *g += 1);
    }

    /// A receiver that changes when [`Self::drop_connections`] is called: whatever serves one
    /// connection or stream selects on it and ends. Subscribe before the connection is served,
    /// so no drop falls between.
    pub fn connection_drops(&self) -> watch::Receiver<u64> {
        self.conn_drops.subscribe()
    }

    /// Drops the watch history so resuming watches get 410 Gone.
    pub fn compact(&self) {
        self.store.compact();
    }

    /// Drops the watch history up to `rv` (see [`Store::compact_to`]).
    pub fn compact_to(&self, rv: u64) {
        self.store.compact_to(rv);
    }
}
