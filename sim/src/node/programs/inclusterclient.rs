//! agnhost `inclusterclient`: an in-cluster API client as upstream's
//! (test/images/agnhost/inclusterclient) — the in-cluster config (the `kubernetes` Service from
//! `KUBERNETES_SERVICE_HOST`/`PORT`, the mounted ServiceAccount token and CA), then every
//! `--poll-interval` seconds a GET of `/healthz` over TLS, logging `calling /healthz` and
//! `authz_header=` (a salted SHA-256 of the Authorization header, so tests can see the token
//! rotate without seeing it), and `status=failed` with the error when the call fails. The
//! token file is read again for every call, as client-go's file-backed token source reloads
//! it. klog's line headers are left out: the messages are upstream's.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use super::Ctx;

const TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
const CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// Runs the subcommand; returns the exit code.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let mut poll = 30u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.split_once('=') {
            Some(("--poll-interval", v)) => Some(v.to_string()),
            _ if a == "--poll-interval" => it.next().cloned(),
            _ => None,
        };
        if let Some(v) = value {
            match v.parse() {
                Ok(n) => poll = n,
                Err(_) => {
                    ctx.out.err_line(&format!(
                        "Error: invalid argument {v:?} for \"--poll-interval\" flag: strconv.ParseInt: parsing {v:?}: invalid syntax"
                    ));
                    return 1;
                }
            }
        }
    }
    ctx.out.err_line("started");
    let (host, port) = match (
        ctx.env.get("KUBERNETES_SERVICE_HOST"),
        ctx.env.get("KUBERNETES_SERVICE_PORT"),
    ) {
        (Some(h), Some(p)) if !h.is_empty() && !p.is_empty() => (h.clone(), p.clone()),
        _ => {
            ctx.out.err_line("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined");
            return 1;
        }
    };
    let addr = match (host.parse::<IpAddr>(), port.parse::<u16>()) {
        (Ok(ip), Ok(p)) => SocketAddr::new(ip, p),
        _ => {
            ctx.out
                .err_line(&format!("parse \"https://{host}:{port}\": invalid host or port"));
            return 1;
        }
    };
    if let Err(e) = ctx.fs.read(TOKEN_FILE) {
        ctx.out.err_line(&format!("open {TOKEN_FILE}: {e}"));
        return 1;
    }
    let mut roots = rustls::RootCertStore::empty();
    match ctx.fs.read(CA_FILE) {
        Ok(pem) => {
            for der in CertificateDer::pem_slice_iter(&pem).flatten() {
                // A certificate the store refuses just leaves the server unverifiable.
                let _ = roots.add(der);
            }
        }
        Err(e) => ctx.out.err_line(&format!(
            "Expected to load root CA config from {CA_FILE}, but got err: open {CA_FILE}: {e}"
        )),
    }
    let tls = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    loop {
        tokio::select! {
            () = ctx.cancel.cancelled() => return 0,
            () = tokio::time::sleep(Duration::from_secs(poll.max(1))) => {}
        }
        ctx.out.err_line("calling /healthz");
        let token = ctx
            .fs
            .read(TOKEN_FILE)
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .unwrap_or_default();
        let auth = if token.is_empty() {
            ctx.out.err_line("authz_header=<empty>");
            None
        } else {
            let header = format!("Bearer {token}");
            ctx.out.err_line(&format!(
                "authz_header={}",
                URL_SAFE_NO_PAD.encode(sha256(format!("salt|{header}").as_bytes()))
            ));
            Some(header)
        };
        match healthz(&ctx, &tls, addr, auth.as_deref()).await {
            Ok((status, _)) if (200..300).contains(&status) => {}
            Ok((status, body)) => {
                ctx.out.err_line("status=failed");
                ctx.out.err_line(&format!(
                    "error checking /healthz: the server returned HTTP {status}\n{body}"
                ));
            }
            Err(e) => {
                ctx.out.err_line("status=failed");
                ctx.out.err_line(&format!("error checking /healthz: {e}\n"));
            }
        }
    }
}

/// SHA-256 through the TLS stack's own hash (no extra dependency).
fn sha256(data: &[u8]) -> Vec<u8> {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .map(|s| s.common.hash_provider.hash(data).as_ref().to_vec())
        .unwrap_or_default()
}

/// One HTTPS GET of `/healthz`: `(status, body)`.
async fn healthz(
    ctx: &Ctx,
    tls: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    auth: Option<&str>,
) -> Result<(u16, String), String> {
    let url = format!("https://{addr}/healthz");
    let fut = async {
        let tcp = ctx
            .net
            .dialer()
            .tcp(&ctx.source(), addr)
            .await
            .map_err(|e| format!("Get \"{url}\": dial tcp {addr}: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await
            .map_err(|e| format!("Get \"{url}\": tls: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("Get \"{url}\": {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = http::Request::builder()
            .method("GET")
            .uri("/healthz")
            .header("Host", addr.to_string())
            .header("Accept", "application/json, */*");
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("Get \"{url}\": {e}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("Get \"{url}\": {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .map_err(|_| format!("Get \"{url}\": context deadline exceeded"))?
}
