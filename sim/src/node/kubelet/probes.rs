//! Startup, liveness and readiness probes: running one probe (exec, httpGet, tcpSocket, grpc) and
//! the probe loop that gates readiness and restarts a container on liveness failure.
//! Separate because probes run beside a container for its whole life.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Probe};
use tokio_util::sync::CancellationToken;

use crate::node::net::Source;
use crate::node::programs::{self, Ctx, Output};
use crate::node::{error_chain, grpc, http};

use super::hooks::resolve_port;
use super::termination::{KillReason, stop_with_grace};
use super::{KUBELET_VERSION, Kubelet, PodRt, Role, sleep_or, with_ctr};

/// Runs one probe; the error is the probe's failure output.
async fn probe_once(kl: &Kubelet, ctx: &Ctx, p: &Probe, c: &Container) -> Result<(), String> {
    let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
    let src = Source {
        ip: None,
        node: Some(kl.cfg.name.clone()),
        os: kl.cfg.os,
        is_pod: false,
    };
    if let Some(e) = &p.exec {
        let argv = e.command.clone().unwrap_or_default();
        if kl.net.faults().is_on("exec-broken") {
            return Err("rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)".into());
        }
        if argv.first().and_then(|a| programs::find(a, &ctx.image)).is_none() {
            return Err(programs::not_found_message(
                argv.first().map_or("", String::as_str),
                &ctx.image,
            ));
        }
        let (out, buf) = Output::capture();
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx.clone()
        };
        let cancel = sub.cancel.clone();
        // `exec-probe-timeout-ignored`: the kubelet before 1.20 (and with the ExecProbeTimeout
        // gate off) let an exec probe run to its end whatever `timeoutSeconds` said.
        let timeout = if kl.net.faults().is_on("exec-probe-timeout-ignored") {
            Duration::from_secs(24 * 3600)
        } else {
            timeout
        };
        return match tokio::time::timeout(timeout, programs::run(sub, argv.clone(), None)).await {
            Ok(0) => Ok(()),
            Ok(code) => Err(format!(
                "command {argv:?} exited with {code}: {}",
                String::from_utf8_lossy(&buf.lock().expect("capture lock"))
            )),
            Err(_) => {
                cancel.cancel();
                Err(format!("command {argv:?} timed out"))
            }
        };
    }
    if let Some(g) = &p.http_get {
        let port = resolve_port(&g.port, c).ok_or_else(|| format!("unknown port {:?}", g.port))?;
        let host: IpAddr = g
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let path = g.path.clone().unwrap_or_else(|| "/".into());
        let headers: Vec<(String, String)> = g
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        let addr = SocketAddr::new(host, port);
        let host_header = addr.to_string();
        // The kubelet's HTTPS probes skip certificate verification (upstream's prober sets
        // InsecureSkipVerify), which the e2e webhook server's readiness probe relies on.
        let tls = (g.scheme.as_deref() == Some("HTTPS")).then(|| {
            (
                crate::api::tls::insecure_client_config(),
                rustls::pki_types::ServerName::IpAddress(host.into()),
            )
        });
        let req = http::Request {
            method: "GET",
            host: &host_header,
            path: &path,
            headers: &headers,
            body: None,
            tls,
        };
        return match http::request(kl.net.dialer(), &src, addr, &req, timeout).await {
            Ok(r) if (200..400).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!("HTTP probe failed with statuscode: {}", r.status)),
            Err(e) => Err(error_chain(&e)),
        };
    }
    if let Some(t) = &p.tcp_socket {
        let port = resolve_port(&t.port, c).ok_or_else(|| format!("unknown port {:?}", t.port))?;
        let host: IpAddr = t
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let addr = SocketAddr::new(host, port);
        return match tokio::time::timeout(timeout, kl.net.dialer().tcp(&src, addr)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {addr}: {}", error_chain(&e))),
            Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
        };
    }
    if let Some(g) = &p.grpc {
        if kl.net.faults().is_on("probe-grpc-unsupported") {
            // A kubelet without the gRPC prober finds no handler it knows (prober.go
            // `missing probe handler`), which counts as a failure.
            return Err(format!(
                "missing probe handler for {}/{}:{}",
                ctx.pod.namespace, ctx.pod.name, c.name
            ));
        }
        let addr = SocketAddr::new(IpAddr::V4(ctx.pod.ip), u16::try_from(g.port).unwrap_or(0));
        return grpc_probe(kl, &src, addr, g.service.as_deref().unwrap_or(""), timeout).await;
    }
    Err("missing probe handler".into())
}

/// A gRPC health probe as upstream `pkg/probe/grpc`: a blocking plaintext dial bounded by the
/// probe timeout (a refused dial is retried until then), one `Health/Check` for `service`, and
/// success only for SERVING. The error is the prober's output.
async fn grpc_probe(
    kl: &Kubelet,
    src: &Source,
    addr: SocketAddr,
    service: &str,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let connect_timeout = || {
        format!(
            "timeout: failed to connect service \"{addr}\" within {}s: context deadline exceeded",
            timeout.as_secs()
        )
    };
    let stream = loop {
        match tokio::time::timeout_at(deadline, kl.net.dialer().tcp(src, addr)).await {
            Ok(Ok(s)) => break s,
            // grpc.WithBlock keeps redialling with backoff until the context ends.
            Ok(Err(_)) => {
                if tokio::time::timeout_at(deadline, tokio::time::sleep(Duration::from_millis(500)))
                    .await
                    .is_err()
                {
                    return Err(connect_timeout());
                }
            }
            Err(_) => return Err(connect_timeout()),
        }
    };
    // The prober's user agent is `kube-probe/<major>.<minor>` of the kubelet.
    let user_agent = KUBELET_VERSION
        .trim_start_matches('v')
        .rsplit_once('.')
        .map_or_else(|| "kube-probe".to_string(), |(mm, _)| format!("kube-probe/{mm}"));
    match tokio::time::timeout_at(deadline, grpc::check(stream, addr, service, &user_agent)).await {
        Err(_) => Err(format!(
            "timeout: health rpc did not complete within {}s",
            timeout.as_secs()
        )),
        Ok(Ok(grpc::SERVING)) => Ok(()),
        Ok(Ok(s)) => Err(format!(
            "service unhealthy (responded with \"{}\")",
            grpc::status_name(s)
        )),
        Ok(Err(grpc::CheckError::Status(grpc::code::UNIMPLEMENTED, msg))) => Err(format!(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {msg}"
        )),
        Ok(Err(grpc::CheckError::Status(code, msg))) => Err(format!(
            "error: health rpc probe failed: rpc error: code = {} desc = {msg}",
            grpc_code_name(code)
        )),
        Ok(Err(grpc::CheckError::Connect(e) | grpc::CheckError::Transport(e))) => Err(format!(
            "error: health rpc probe failed: rpc error: code = Unavailable desc = {e}"
        )),
    }
}

/// grpc-go's name of a status code.
fn grpc_code_name(code: u32) -> &'static str {
    match code {
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        7 => "PermissionDenied",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        16 => "Unauthenticated",
        _ => "Unknown",
    }
}

/// Runs the probes of container `c` (an init container, a sidecar, when `init`; index `idx`)
/// until `done`; a failed liveness or startup probe stops it through `stop`.
pub(super) fn spawn_probes(
    kl: Arc<Kubelet>,
    rt: Arc<PodRt>,
    (c, role, idx): (Container, Role, usize),
    ctx: Ctx,
    done: CancellationToken,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let started_at = Instant::now();
        let period = |p: &Probe| Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
        let delay = |p: &Probe| Duration::from_secs(p.initial_delay_seconds.unwrap_or(0).max(0) as u64);
        let field = Some((c.name.as_str(), role));
        // Startup probe gates the others.
        if let Some(sp) = &c.startup_probe {
            if !sleep_or(delay(sp), &done).await {
                return;
            }
            let threshold = sp.failure_threshold.unwrap_or(3).max(1);
            let mut fails = 0;
            loop {
                match probe_once(&kl, &ctx, sp, &c).await {
                    Ok(()) => break,
                    Err(out) => {
                        fails += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Startup probe failed: {out}"),
                        );
                        if fails >= threshold {
                            kl.pod_event(
                                &rt,
                                field,
                                "Normal",
                                "Killing",
                                &format!("Container {} failed startup probe, will be restarted", c.name),
                            );
                            stop_with_grace(&kl, &rt, (role, idx), &stop, KillReason::Startup).await;
                            return;
                        }
                    }
                }
                if !sleep_or(period(sp), &done).await {
                    return;
                }
            }
            with_ctr(&rt, role, idx, |ct| ct.started = true);
            rt.touch();
        }
        with_ctr(&rt, role, idx, |ct| {
            ct.started = true;
            if c.readiness_probe.is_none() {
                ct.ready = true;
            }
        });
        rt.touch();
        let mut next_ready = c.readiness_probe.as_ref().map(|p| started_at + delay(p));
        let mut next_live = c.liveness_probe.as_ref().map(|p| started_at + delay(p));
        let (mut r_ok, mut r_fail, mut l_fail) = (0, 0, 0);
        loop {
            let next = [next_ready, next_live].into_iter().flatten().min();
            let Some(next) = next else { return };
            let now = Instant::now();
            if next > now && !sleep_or(next - now, &done).await {
                return;
            }
            let now = Instant::now();
            if let (Some(t), Some(p)) = (next_ready, &c.readiness_probe)
                && t <= now
            {
                let r = probe_once(&kl, &ctx, p, &c).await;
                if done.is_cancelled() {
                    return;
                }
                match r {
                    Ok(()) => {
                        r_fail = 0;
                        r_ok += 1;
                        if r_ok >= p.success_threshold.unwrap_or(1).max(1) {
                            let changed = with_ctr(&rt, role, idx, |ct| !std::mem::replace(&mut ct.ready, true));
                            if changed {
                                rt.touch();
                            }
                        }
                    }
                    Err(out) => {
                        r_ok = 0;
                        r_fail += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Readiness probe failed: {out}"),
                        );
                        if r_fail >= p.failure_threshold.unwrap_or(3).max(1) {
                            let changed = with_ctr(&rt, role, idx, |ct| std::mem::replace(&mut ct.ready, false));
                            if changed {
                                rt.touch();
                            }
                        }
                    }
                }
                next_ready = Some(now + period(p));
            }
            if let (Some(t), Some(p)) = (next_live, &c.liveness_probe)
                && t <= now
            {
                match probe_once(&kl, &ctx, p, &c).await {
                    Ok(()) => l_fail = 0,
                    Err(out) => {
                        if done.is_cancelled() {
                            return;
                        }
                        l_fail += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Liveness probe failed: {out}"),
                        );
                        if l_fail >= p.failure_threshold.unwrap_or(3).max(1) {
                            kl.pod_event(
                                &rt,
                                field,
                                "Normal",
                                "Killing",
                                &format!("Container {} failed liveness probe, will be restarted", c.name),
                            );
                            stop_with_grace(&kl, &rt, (role, idx), &stop, KillReason::Liveness).await;
                            return;
                        }
                    }
                }
                next_live = Some(now + period(p));
            }
        }
    });
}
