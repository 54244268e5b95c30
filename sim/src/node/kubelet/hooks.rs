//! Lifecycle handlers (postStart and preStop): exec and httpGet actions, and resolving a
//! named container port. Separate because both container start and termination run them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::node::net::Source;
use crate::node::programs::{self, Ctx, Output};
use crate::node::{error_chain, http};

use super::Kubelet;

/// Runs a lifecycle handler (exec, httpGet or sleep); the error is the event message.
pub(super) async fn run_handler(
    kl: &Kubelet,
    ctx: &Ctx,
    h: &k8s_openapi::api::core::v1::LifecycleHandler,
    c: &Container,
) -> Result<(), String> {
    // The sleep action (PodLifecycleSleepAction): the kubelet itself waits `seconds` (zero
    // returns at once), bounded like any hook by the grace period its caller enforces.
    if let Some(s) = &h.sleep {
        let secs = u64::try_from(s.seconds).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        return Ok(());
    }
    if let Some(e) = &h.exec {
        let argv = e.command.clone().unwrap_or_default();
        if kl.net.faults().is_on("exec-broken") {
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                "rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)"
            ));
        }
        let (out, buf) = Output::capture();
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx.clone()
        };
        if argv.first().and_then(|a| programs::find(a, &ctx.image)).is_none() {
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                programs::not_found_message(argv.first().map_or("", String::as_str), &ctx.image)
            ));
        }
        let code = programs::run(sub, argv.clone(), None).await;
        if code != 0 {
            let output = String::from_utf8_lossy(&buf.lock().expect("capture lock")).to_string();
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}_{}({})\" failed - error: command '{}' exited with {code}: , message: {output:?}",
                c.name,
                ctx.pod.name,
                ctx.pod.namespace,
                ctx.pod.uid,
                argv.join(" ")
            ));
        }
        return Ok(());
    }
    if let Some(g) = &h.http_get {
        let port = resolve_port(&g.port, c).ok_or_else(|| {
            format!(
                "HTTP lifecycle hook for Container \"{}\": unknown port {:?}",
                c.name, g.port
            )
        })?;
        let host: IpAddr = g
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let path = g.path.clone().unwrap_or_else(|| "/".into());
        let src = Source {
            ip: None,
            node: Some(kl.cfg.name.clone()),
            os: kl.cfg.os,
            is_pod: false,
        };
        let addr = SocketAddr::new(host, port);
        let host_header = addr.to_string();
        // As the kubelet's prober (`NewRequestForHTTPGetAction`), the hook honours its scheme and
        // does not verify an HTTPS server's certificate. A kubelet with `hook-scheme-ignored`
        // (before ConsistentHTTPGetHandlers) always speaks plain HTTP.
        let https = g.scheme.as_deref() == Some("HTTPS") && !kl.net.faults().is_on("hook-scheme-ignored");
        let tls = https.then(|| {
            (
                crate::api::tls::insecure_client_config(),
                rustls::pki_types::ServerName::IpAddress(host.into()),
            )
        });
        let req = http::Request {
            method: "GET",
            host: &host_header,
            path: &path,
            headers: &[],
            body: None,
            tls,
        };
        return match http::request(kl.net.dialer(), &src, addr, &req, Duration::from_secs(10)).await {
            Ok(r) if (200..400).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!(
                "HTTP lifecycle hook ({path}) for Container \"{}\" in Pod \"{}\" failed - error: HTTP status {}",
                c.name, ctx.pod.name, r.status
            )),
            Err(e) => Err(format!(
                "HTTP lifecycle hook ({path}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                error_chain(&e)
            )),
        };
    }
    Err("lifecycle handler has no exec or httpGet action (sleep and tcpSocket handlers are not emulated)".into())
}

pub(super) fn resolve_port(p: &IntOrString, c: &Container) -> Option<u16> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    }
}
