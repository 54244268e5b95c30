//! Forwarding through the API server to a stand-in kubelet (HTTPS, self-signed) and a pod's
//! HTTP server: logs, exec over websockets, and the pod, service and node proxies.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Path, RawQuery};
use axum::routing::get;
use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, AttachParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::AsyncReadExt;

fn block() -> AddressBlock {
    AddressBlock(100 + (std::process::id() % 100) as u8 + 17)
}

/// The stand-in kubelet: logs echo their query, exec answers on the stdout channel.
fn kubelet_app() -> Router {
    Router::new()
        .route(
            "/containerLogs/{ns}/{pod}/{container}",
            get(|Path((ns, pod, c)): Path<(String, String, String)>, RawQuery(q): RawQuery| async move {
                format!("log of {ns}/{pod}/{c}\nquery {}\n", q.unwrap_or_default())
            }),
        )
        .route(
            "/exec/{ns}/{pod}/{container}",
            get(|Path((_, _, c)): Path<(String, String, String)>, RawQuery(q): RawQuery, ws: WebSocketUpgrade| async move {
                ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"]).on_upgrade(move |mut socket| async move {
                    let mut out = vec![1u8];
                    out.extend_from_slice(format!("hello from {c}: {}\n", q.unwrap_or_default()).as_bytes());
                    let _ = socket.send(Message::Binary(out.into())).await;
                    let mut status = vec![3u8];
                    status.extend_from_slice(br#"{"metadata":{},"status":"Success"}"#);
                    let _ = socket.send(Message::Binary(status.into())).await;
                    let _ = socket.send(Message::Close(None)).await;
                })
            }),
        )
        .route("/stats/summary", get(|| async { axum::Json(json!({"node": {"nodeName": "n1"}})) }))
}

/// Serves `app` over TLS with a self-signed certificate, like a kubelet.
async fn serve_tls(ip: Ipv4Addr, app: Router) -> SocketAddr {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![ip.to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn logs_exec_and_proxies_reach_the_node_side() {
    crossconf_sim::install_crypto_provider();
    let b = block();
    let srv = ApiServer::start(ApiConfig::new(b).port(0)).await.unwrap();
    let client = Client::try_from(srv.kube_config()).unwrap();
    let kubelet = serve_tls(b.node(0), kubelet_app()).await;
    let pod_ip = b.pod(0, 0).unwrap();
    let pod_listener = tokio::net::TcpListener::bind((pod_ip, 0)).await.unwrap();
    let pod_port = pod_listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let app = Router::new().route(
            "/hello",
            get(|RawQuery(q): RawQuery| async move { format!("pod says hi {}", q.unwrap_or_default()) }),
        );
        axum::serve(pod_listener, app).await.unwrap();
    });

    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": {
        "addresses": [{"type": "InternalIP", "address": b.node(0).to_string()}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet.port()}}}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p", "labels": {"app": "p"}}, "spec": {"nodeName": "n1",
        "containers": [{"name": "c", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"podIP": pod_ip.to_string(), "phase": "Running"}})),
    )
    .await
    .unwrap();

    let logs = pods
        .logs(
            "p",
            &LogParams {
                tail_lines: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(logs.starts_with("log of default/p/c\n"), "{logs}");
    assert!(logs.contains("tailLines=5"), "{logs}");

    let mut proc = pods
        .exec(
            "p",
            ["echo", "hi"],
            &AttachParams::default().stdout(true).stderr(false).stdin(false),
        )
        .await
        .unwrap();
    let mut out = String::new();
    proc.stdout().unwrap().read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("hello from c: "), "{out}");
    assert!(out.contains("command=echo&command=hi"), "{out}");
    let status = proc.take_status().unwrap().await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Success"));

    let text = |path: String| {
        let client = client.clone();
        async move {
            client
                .request_text(http::Request::get(path).body(vec![]).unwrap())
                .await
        }
    };
    let hi = text(format!("/api/v1/namespaces/default/pods/p:{pod_port}/proxy/hello?x=1"))
        .await
        .unwrap();
    assert_eq!(hi, "pod says hi x=1");
    let stats = text("/api/v1/nodes/n1/proxy/stats/summary".into()).await.unwrap();
    assert!(stats.contains("\"nodeName\":\"n1\""), "{stats}");

    // A Service with no endpoints is a 503; with a ready EndpointSlice it reaches the pod.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "p"}, "ports": [{"port": 80, "targetPort": pod_port}]}});
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "default");
    svcs.create(&PostParams::default(), &serde_json::from_value(svc).unwrap())
        .await
        .unwrap();
    // kube retries 503s by default (as it would against a real server); ask once.
    let mut once = srv.kube_config();
    once.default_retry = false;
    let once = Client::try_from(once).unwrap();
    let req = http::Request::get("/api/v1/namespaces/default/services/web:80/proxy/hello")
        .body(vec![])
        .unwrap();
    match once.request_text(req).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!(s.code, 503),
        other => panic!("expected 503, got {other:?}"),
    }
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice = json!({"metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}}, "addressType": "IPv4",
        "endpoints": [{"addresses": [pod_ip.to_string()], "conditions": {"ready": true}}], "ports": [{"name": "", "port": pod_port, "protocol": "TCP"}]});
    slices
        .create(&PostParams::default(), &serde_json::from_value(slice).unwrap())
        .await
        .unwrap();
    let hi = text("/api/v1/namespaces/default/services/web:80/proxy/hello".into())
        .await
        .unwrap();
    assert_eq!(hi, "pod says hi ");
    srv.shutdown().await;
}
