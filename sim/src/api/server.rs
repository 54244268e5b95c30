//! The listening server: TLS on the block's API address, HTTP/1.1 (with upgrades, for exec
//! websockets) and HTTP/2 on one port, and the handles other parts use to connect.
//!
//! The main structure is [`ApiServer`], started from an [`ApiConfig`].

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::addr::{self, AddressBlock};

use super::error::Error;
use super::handler::router;
use super::state::{AppState, StateConfig};
use super::{tls, transient};

/// How to start an API server.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The cluster's address block; the server binds `block.api_server()`.
    pub block: AddressBlock,
    /// The port ([`addr::API_PORT`] normally; 0 picks any free port, for tests).
    pub port: u16,
    /// The admin token; `None` generates a random one.
    pub admin_token: Option<String>,
    /// Changes kept for watch resumption ([`super::store::DEFAULT_HISTORY`]).
    pub history: usize,
    /// BOOKMARK interval for watches that allow them (upstream sends about one a minute).
    pub bookmark_interval: Duration,
    /// The cluster's fault switches (admission and validation consult them).
    pub faults: std::sync::Arc<crate::faults::Faults>,
    /// The control plane's feature gates (defaults: alpha gates off).
    pub gates: crate::gates::FeatureGates,
    /// How often storage is compacted (kube-apiserver `--etcd-compaction-interval`); `None`
    /// never compacts (beyond the bounded watch history).
    pub compaction_interval: Option<Duration>,
}

impl ApiConfig {
    /// Defaults for `block`: port 6443, random token, 10,000 changes of history, bookmarks
    /// every minute.
    pub fn new(block: AddressBlock) -> Self {
        Self {
            block,
            port: addr::API_PORT,
            admin_token: None,
            history: super::store::DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(60),
            faults: std::sync::Arc::default(),
            gates: crate::gates::FeatureGates::default(),
            compaction_interval: None,
        }
    }

    /// Sets the storage compaction interval (see [`super::compactor`]).
    #[must_use]
    pub fn compaction_interval(mut self, every: Duration) -> Self {
        self.compaction_interval = Some(every).filter(|d| !d.is_zero());
        self
    }

    /// Sets the feature gates.
    #[must_use]
    pub fn gates(mut self, gates: crate::gates::FeatureGates) -> Self {
        self.gates = gates;
        self
    }

    /// Shares the cluster's fault switches with the server.
    #[must_use]
    pub fn faults(mut self, faults: std::sync::Arc<crate::faults::Faults>) -> Self {
        self.faults = faults;
        self
    }

    /// Sets the port (0 = any).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets the watch history length.
    #[must_use]
    pub fn history(mut self, n: usize) -> Self {
        self.history = n;
        self
    }

    /// Sets the bookmark interval.
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }
}

/// A running API server.
pub struct ApiServer {
    addr: SocketAddr,
    state: AppState,
    ca_pem: String,
    ca_der: Vec<u8>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// Binds `cfg.block.api_server():cfg.port`, generates certificates and serves.
    ///
    /// # Errors
    /// [`Error::AddressInUse`] when the address is taken (try the next block); other variants
    /// for bind, certificate or TLS failures.
    pub async fn start(cfg: ApiConfig) -> Result<ApiServer, Error> {
        let ip = cfg.block.api_server();
        let want = SocketAddr::from((ip, cfg.port));
        let listener = TcpListener::bind(want).await.map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                Error::AddressInUse { addr: want }
            } else {
                Error::Bind { addr: want, source }
            }
        })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr: want, source })?;
        let certs = tls::generate(ip, Some(cfg.block.kubernetes_service()))?;
        let mut scfg = StateConfig::new(cfg.block);
        if let Some(t) = cfg.admin_token {
            scfg.admin_token = t;
        }
        scfg.history = cfg.history;
        scfg.bookmark_interval = cfg.bookmark_interval;
        scfg.api_port = addr.port();
        scfg.faults = cfg.faults;
        scfg.gates = cfg.gates;
        let compaction_interval = cfg.compaction_interval;
        let state = AppState::new(scfg);
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let serving = Serving {
            addr,
            acceptor: tokio_rustls::TlsAcceptor::from(certs.server_config.clone()),
            app: router(state.clone()),
            state: state.clone(),
            cancel: cancel.clone(),
            tracker: tracker.clone(),
        };
        tracker.spawn(serve(listener, serving));
        tracker.spawn(transient::watch_cut::run(state.clone(), cancel.clone()));
        tracker.spawn(super::aggregator::availability::run(state.clone(), cancel.clone()));
        if let Some(every) = compaction_interval {
            tracker.spawn(super::compactor::run(state.clone(), every, cancel.clone()));
        }
        tracing::info!(%addr, "api server listening");
        Ok(ApiServer {
            addr,
            state,
            ca_pem: certs.ca_pem,
            ca_der: certs.ca_der,
            cancel,
            tracker,
        })
    }

    /// `https://127.B.0.1:6443`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) clients trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The key ServiceAccount tokens are signed with (shared with the tokens controller, as
    /// kubeadm gives kube-controller-manager the API server's key pair).
    pub fn service_account_key(&self) -> std::sync::Arc<crate::api::auth::signing::SigningKey> {
        self.state.tokens.key().clone()
    }

    /// The admin bearer token.
    pub fn admin_token(&self) -> &str {
        &self.state.cfg.admin_token
    }

    /// A kube client configuration trusting the CA and carrying the admin token.
    pub fn kube_config(&self) -> kube::Config {
        let uri: http::Uri = self
            .url()
            .parse()
            .expect("an https url of an ip and port is a valid uri");
        let mut cfg = kube::Config::new(uri);
        cfg.root_cert = Some(vec![self.ca_der.clone()]);
        cfg.default_namespace = "default".into();
        // AuthInfo's token is a secrecy type; building it through serde keeps that crate out of
        // our dependencies.
        cfg.auth_info = serde_json::from_value(serde_json::json!({"token": self.admin_token()}))
            .expect("an AuthInfo with only a token deserialises");
        cfg
    }

    /// A client configuration as [`Self::kube_config`]'s, authenticating with `token` instead
    /// of the admin token (the kubelets' own identities).
    pub fn kube_config_for(&self, token: &str) -> kube::Config {
        let mut cfg = self.kube_config();
        cfg.auth_info = serde_json::from_value(serde_json::json!({"token": token}))
            .expect("an AuthInfo with only a token deserialises");
        cfg
    }

    /// A kubeconfig for real clients (kubectl), with the CA data and the token embedded.
    pub fn kubeconfig_yaml(&self, context_name: &str) -> String {
        use base64::Engine;
        // `kubeconfig-stale-ca`: outside clients get a CA that did not sign the serving certificate.
        let stale = self
            .state
            .cfg
            .faults
            .is_on("kubeconfig-stale-ca")
            .then(super::tls::unrelated_ca_pem)
            .and_then(Result::ok);
        let pem = stale.as_deref().unwrap_or(&self.ca_pem);
        let ca = base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {ctx}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {ctx}\n  context:\n    cluster: {ctx}\n    user: {ctx}-admin\n    namespace: default\ncurrent-context: {ctx}\nusers:\n- name: {ctx}-admin\n  user:\n    token: {token}\npreferences: {{}}\n",
            ctx = context_name,
            url = self.url(),
            token = self.admin_token(),
        )
    }

    /// The in-process state (store access and fault injection for tests).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Stops accepting, ends open connections (watches and exec streams included) and waits for
    /// them; also during an `api-down` outage.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.state.cut_watches();
        self.state.drop_connections();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// What serving the listening address needs, besides the listener.
struct Serving {
    addr: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    app: axum::Router,
    state: AppState,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// Serves until cancelled; under `api-down`, closes the listener and drops every connection for
/// each outage (a process restart), then binds the same address again.
async fn serve(listener: TcpListener, s: Serving) {
    let faults = s.state.cfg.faults.clone();
    let mut outages = transient::down::Outages::default();
    let mut listener = listener;
    loop {
        let left = tokio::select! {
            () = s.cancel.cancelled() => return,
            never = accept_loop(&listener, &s) => match never {},
            left = outages.next(&faults) => left,
        };
        // Closing the socket makes new connections refused at once; connections already
        // queued in its backlog are reset.
        drop(listener);
        s.state.drop_connections();
        tracing::info!(addr = %s.addr, ?left, "api server down (api-down): connections dropped, new ones refused");
        tokio::select! {
            () = s.cancel.cancelled() => return,
            () = outages.over(&faults, left) => {}
        }
        let Some(again) = rebind(s.addr, &s.cancel).await else {
            return;
        };
        listener = again;
        tracing::info!(addr = %s.addr, "api server listening again after api-down");
    }
}

/// Binds `addr` again after an outage, retrying until it works or `cancel` fires. tokio sets
/// `SO_REUSEADDR` on Unix, so the dropped connections' `TIME_WAIT` sockets do not block it.
async fn rebind(addr: SocketAddr, cancel: &CancellationToken) -> Option<TcpListener> {
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!(%addr, error = %e, "binding again after api-down failed; retrying"),
        }
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(transient::POLL) => {}
        }
    }
}

/// Accepts connections and serves each in its own task, until the caller drops this future.
async fn accept_loop(listener: &TcpListener, s: &Serving) -> std::convert::Infallible {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Accept errors (fd exhaustion) are transient; keep serving.
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        // Like Go's net package (and so the real apiserver): no Nagle. With it, the last
        // segment of a large response waits for the client's delayed ACK (~40 ms a list).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "TCP_NODELAY not set");
        }
        let acceptor = s.acceptor.clone();
        let app = s.app.clone();
        let cancel = s.cancel.clone();
        // Subscribed before the task starts, so a drop right after the accept still ends it.
        let mut drops = s.state.connection_drops();
        s.tracker.spawn(async move {
            let serve = async {
                let tls = match acceptor.accept(tcp).await {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "tls handshake failed");
                        return;
                    }
                };
                let service = TowerToHyperService::new(app);
                let builder = auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
                if let Err(e) = conn.await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            };
            tokio::select! {
                () = serve => {}
                () = cancel.cancelled() => {}
                _ = drops.changed() => tracing::debug!(%peer, "connection dropped"),
            }
        });
    }
}
