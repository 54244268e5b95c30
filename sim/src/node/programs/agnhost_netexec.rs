//! agnhost `netexec`, the e2e image's network test server: HTTP (optionally HTTPS) endpoints
//! such as `/hostname`, `/echo`, `/exit`, `/shell` and `/dial`, plus a UDP server, with upstream
//! `test/images/agnhost/netexec`'s flags and answers. Split from [`super::agnhost`] because it is
//! the largest subcommand and the one most cases drive.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agnhost::{flags, port_flag};
use super::servers::{listen, serve_http, serve_tls, serve_udp, tls_from_pem};
use super::{Ctx, until_stopped};
use crate::node::{dns, http, shell};
use crossconf_model::os::Os;

#[derive(Clone)]
struct Netexec {
    ctx: Ctx,
    exit: mpsc::Sender<i32>,
    udp_ready: bool,
}

pub(super) async fn netexec(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let (http_port, udp_port) = match (port_flag(&f, "http-port", 8080), port_flag(&f, "udp-port", 8081)) {
        (Ok(h), Ok(u)) => (h, u),
        (Err(e), _) | (_, Err(e)) => {
            ctx.out.err_line(&format!("Error: {e}"));
            return 1;
        }
    };
    // `--delay-shutdown N`: on SIGTERM upstream netexec keeps serving for N seconds, then exits
    // 0; without it, SIGTERM ends it at once.
    let delay = match f.get("delay-shutdown").map(|v| v.parse::<u64>()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            ctx.out.err_line("Error: invalid argument for --delay-shutdown");
            return 1;
        }
    };
    let (exit_tx, mut exit_rx) = mpsc::channel::<i32>(1);
    let ip = ctx.pod.ip;
    let stop = if delay > 0 {
        CancellationToken::new()
    } else {
        ctx.cancel.child_token()
    };
    // A kill drops this future: the servers stop with it.
    let _servers = stop.clone().drop_guard();
    let mut udp_ready = false;
    if udp_port != -1 {
        let Ok(port) = u16::try_from(udp_port) else {
            ctx.out.err_line(&format!("invalid --udp-port {udp_port}"));
            return 1;
        };
        let (hostname, usage) = (ctx.pod.hostname.clone(), ctx.usage.clone());
        let r = serve_udp(ip, port, stop.clone(), move |text, peer| {
            usage.traffic(text.len(), 64);
            let t = text.trim().to_ascii_lowercase();
            if t == "hostname" {
                Some(hostname.clone())
            } else if let Some(m) = t.strip_prefix("echo ") {
                Some(m.to_string())
            } else if t == "clientip" {
                Some(peer.to_string())
            } else {
                None
            }
        })
        .await;
        if let Err(e) = r {
            ctx.out.err_line(&format!(
                "Error occurred: failed to create listener for UDP address {ip}:{port}:{e}"
            ));
            return 1;
        }
        ctx.out.line(&format!("Started UDP server on port  {port}"));
        udp_ready = true;
    }
    let Ok(hport) = u16::try_from(http_port) else {
        ctx.out.err_line(&format!("invalid --http-port {http_port}"));
        return 1;
    };
    let state = Netexec {
        ctx: ctx.clone(),
        exit: exit_tx,
        udp_ready: udp_ready || udp_port == -1,
    };
    let router = Router::new()
        .route("/", get(|| async { format!("NOW: {}", jiff::Zoned::now()) }))
        .route(
            "/clientip",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        )
        .route("/hostname", get(hostname_handler))
        .route("/hostName", get(hostname_handler))
        .route(
            "/healthz",
            get(|State(s): State<Netexec>| async move {
                if s.udp_ready {
                    StatusCode::OK
                } else {
                    StatusCode::PRECONDITION_FAILED
                }
            }),
        )
        .route("/echo", get(echo_handler))
        .route("/exit", get(exit_handler))
        .route(
            "/shutdown",
            get(|State(s): State<Netexec>| async move {
                let _ = s.exit.send(0).await;
                ""
            }),
        )
        .route("/dial", get(dial_handler))
        .route("/shell", get(shell_handler))
        .route(
            "/redirect",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                let code = q.get("code").and_then(|c| c.parse::<u16>().ok()).unwrap_or(302);
                let loc = q.get("location").cloned().unwrap_or_default();
                Response::builder()
                    .status(StatusCode::from_u16(code).unwrap_or(StatusCode::FOUND))
                    .header("Location", loc)
                    .body(axum::body::Body::empty())
                    .map_or_else(
                        |_| StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                        IntoResponse::into_response,
                    )
            }),
        )
        .with_state(state);
    // `--tls-cert-file` upgrades the server to HTTPS (upstream's `ListenAndServeTLS`, which
    // exits through `log.Fatal` when the pair cannot be read).
    match f.get("tls-cert-file").filter(|c| !c.is_empty()) {
        Some(cert) => {
            let key = f.get("tls-private-key-file").cloned().unwrap_or_default();
            let read = |path: &str| ctx.fs.read(path).map_err(|e| format!("open {path}: {e}"));
            let config = match (read(cert), read(&key)) {
                (Ok(c), Ok(k)) => tls_from_pem(&c, &k),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            let listener = config.and_then(|c| {
                listen(ip, hport)
                    .map(|l| (l, c))
                    .map_err(|e| format!("listen tcp :{hport}: bind: {e}"))
            });
            match listener {
                Ok((l, c)) => serve_tls(l, router, c, stop.clone()),
                Err(e) => {
                    ctx.out.err_line(&e);
                    return 1;
                }
            }
        }
        None => {
            if let Err(e) = serve_http(ip, hport, router, stop.clone()).await {
                ctx.out.err_line(&format!("listen tcp :{hport}: bind: {e}"));
                return 1;
            }
        }
    }
    ctx.out.line(&format!("Started HTTP server on port {hport}"));
    let delayed = async {
        ctx.cancel.cancelled().await;
        ctx.out.line(&format!("Sleeping {delay} seconds before terminating..."));
        tokio::time::sleep(Duration::from_secs(delay)).await;
    };
    let code = tokio::select! {
        c = until_stopped(&ctx), if delay == 0 => c,
        () = delayed, if delay > 0 => 0,
        Some(c) = exit_rx.recv() => c,
    };
    stop.cancel();
    code
}

async fn hostname_handler(State(s): State<Netexec>) -> String {
    s.ctx.usage.traffic(100, s.ctx.pod.hostname.len());
    s.ctx.pod.hostname.clone()
}

/// `/echo?msg=&code=`: logs the request as upstream netexec does (`GET /echo?msg=…&code=…`),
/// which is how lifecycle-hook cases see that a hook reached the handler pod.
async fn echo_handler(State(s): State<Netexec>, Query(q): Query<HashMap<String, String>>) -> Response {
    let msg = q.get("msg").cloned().unwrap_or_default();
    let code = q.get("code").cloned().unwrap_or_default();
    s.ctx.out.line(&format!("GET /echo?msg={msg}&code={code}"));
    match q.get("code").filter(|c| !c.is_empty()) {
        Some(c) => match c.parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok()) {
            Some(code) => (code, msg).into_response(),
            None => format!("argument 'code' must be an integer or empty, got {c:?}\n").into_response(),
        },
        None => msg.into_response(),
    }
}

async fn exit_handler(State(s): State<Netexec>, Query(q): Query<HashMap<String, String>>) -> Response {
    let code = q.get("code").filter(|c| !c.is_empty()).map(|c| c.parse::<i32>());
    let code = match code {
        None => 0,
        Some(Ok(c)) if (0..=127).contains(&c) => c,
        Some(_) => {
            return format!(
                "argument 'code' must be an integer [0-127] or empty, got {:?}\n",
                q.get("code").cloned().unwrap_or_default()
            )
            .into_response();
        }
    };
    s.ctx.out.line(&format!("GET /exit?code={code}"));
    let _ = s.exit.send(code).await;
    "".into_response()
}

async fn shell_handler(State(s): State<Netexec>, Query(q): Query<HashMap<String, String>>) -> Response {
    let cmd = q
        .get("shellCommand")
        .or_else(|| q.get("cmd"))
        .cloned()
        .unwrap_or_default();
    let (out, buf) = super::Output::capture();
    let sub = s.ctx.with_output(out);
    let code = match s.ctx.pod.os {
        Os::Linux => shell::run_sh_script(sub, &cmd, None).await,
        Os::Windows => shell::run_cmd_script(sub, &cmd).await,
    };
    let output = String::from_utf8_lossy(&buf.lock().expect("capture lock")).to_string();
    let mut m = serde_json::Map::new();
    if !output.is_empty() {
        m.insert("output".into(), output.into());
    }
    if code != 0 {
        m.insert("error".into(), format!("exit status {code}").into());
    }
    let status = if code == 0 {
        StatusCode::OK
    } else {
        StatusCode::EXPECTATION_FAILED
    };
    (status, serde_json::Value::Object(m).to_string()).into_response()
}

async fn dial_handler(State(s): State<Netexec>, Query(q): Query<HashMap<String, String>>) -> Response {
    let host = q.get("host").cloned().unwrap_or_default();
    let port = q.get("port").cloned().unwrap_or_default();
    let request = q.get("request").cloned().unwrap_or_default();
    let protocol = q.get("protocol").cloned().unwrap_or_default().to_ascii_lowercase();
    let tries = match q.get("tries").filter(|t| !t.is_empty()) {
        None => 1,
        Some(t) => match t.parse::<u32>() {
            Ok(n) => n,
            Err(e) => return (StatusCode::BAD_REQUEST, format!("tries parameter is invalid. {e}\n")).into_response(),
        },
    };
    if request.is_empty() {
        return (StatusCode::BAD_REQUEST, "request parameter not specified. <nil>\n").into_response();
    }
    if !matches!(protocol.as_str(), "" | "http" | "udp") {
        return (StatusCode::BAD_REQUEST, format!("unsupported protocol. {protocol}\n")).into_response();
    }
    let Ok(port_n) = port.parse::<u16>() else {
        return (
            StatusCode::BAD_REQUEST,
            format!("host and/or port param are invalid. address {host}:{port}: invalid port\n"),
        )
            .into_response();
    };
    let ctx = &s.ctx;
    // Upstream resolves a UDP target once, before any try (`net.ResolveUDPAddr`, 400 when it
    // fails); an HTTP target is resolved by every try's dial, so a name that does not resolve
    // is a failed try (417 with the lookup error), not a bad request.
    let udp_ip = if protocol == "udp" {
        match lookup(ctx, &host).await {
            Ok(ip) => Some(ip),
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("host and/or port param are invalid. lookup {host}: {e}\n"),
                )
                    .into_response();
            }
        }
    } else {
        None
    };
    let mut responses = Vec::new();
    let mut errors = Vec::new();
    let mut last_ok = false;
    for _ in 0..tries {
        let r = if let Some(ip) = udp_ip {
            let addr = SocketAddr::new(ip, port_n);
            ctx.net
                .dialer()
                .udp_request(&ctx.source(), addr, request.as_bytes(), Duration::from_secs(5))
                .await
                .map(|b| String::from_utf8_lossy(&b).to_string())
                .map_err(|e| format!("reading from udp connection failed. err:'{e}'"))
        } else {
            match lookup(ctx, &host).await {
                Ok(ip) => {
                    let addr = SocketAddr::new(ip, port_n);
                    http::get(
                        ctx.net.dialer(),
                        &ctx.source(),
                        addr,
                        &format!("{host}:{port_n}"),
                        &format!("/{request}"),
                        &[],
                        Duration::from_secs(5),
                    )
                    .await
                    .map(|r| String::from_utf8_lossy(&r.body).to_string())
                    .map_err(|e| crate::node::error_chain(&e))
                }
                Err(e) => Err(format!(
                    "Get \"http://{host}:{port_n}/{request}\": dial tcp: lookup {host}: {e}"
                )),
            }
        };
        match r {
            Ok(v) => {
                last_ok = true;
                responses.push(v);
            }
            Err(e) => {
                last_ok = false;
                errors.push(e);
            }
        }
    }
    let mut m = serde_json::Map::new();
    if !responses.is_empty() {
        m.insert("responses".into(), responses.into());
    }
    if !errors.is_empty() {
        m.insert("errors".into(), errors.into());
    }
    let status = if last_ok {
        StatusCode::OK
    } else {
        StatusCode::EXPECTATION_FAILED
    };
    (status, serde_json::Value::Object(m).to_string()).into_response()
}

/// Resolves `host` (an IP or a name) as the pod's resolver would.
async fn lookup(ctx: &Ctx, host: &str) -> Result<IpAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    match &ctx.pod.dns {
        Ok(d) => dns::resolve(d, &ctx.net, &ctx.source(), host)
            .await
            .map(|r| IpAddr::V4(r.addrs[0]))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.clone()),
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::node::net::Source;
    use crate::node::programs::agnhost::run;
    use crate::node::programs::testutil::{AGNHOST, ctx};
    use crossconf_model::os::Os;

    #[tokio::test]
    async fn netexec_serves_https_with_the_image_pair_and_drops_plain_http() {
        let (c, _out, _d) = ctx(Os::Linux, AGNHOST, 121);
        for (rel, content) in crate::node::programs::image_files::of(&c.image) {
            c.fs.write(&format!("/{rel}"), content, false).unwrap();
        }
        let (ip, net) = (c.pod.ip, c.net.clone());
        let args = "netexec --http-port 18443 --udp-port -1 --tls-cert-file /localhost.crt --tls-private-key-file /localhost.key";
        let _h = tokio::spawn(crate::node::programs::agnhost::run(
            c,
            args.split(' ').map(String::from).collect(),
        ));
        let host = Source::host();
        let addr = SocketAddr::new(ip.into(), 18443);
        let req = http::Request {
            method: "GET",
            host: "x",
            path: "/echo?msg=startup",
            headers: &[],
            body: None,
            tls: Some((
                crate::api::tls::insecure_client_config(),
                rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::from(ip).into()),
            )),
        };
        let mut got = None;
        for _ in 0..50 {
            if let Ok(r) = http::request(net.dialer(), &host, addr, &req, Duration::from_secs(1)).await {
                got = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = got.expect("netexec answers over TLS");
        assert_eq!((r.status, &r.body[..]), (200, &b"startup"[..]));
        let plain = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            "/echo?msg=plain",
            &[],
            Duration::from_secs(1),
        )
        .await;
        assert!(
            plain.is_err() || plain.is_ok_and(|r| r.status >= 400),
            "plain HTTP must not be served"
        );
    }

    #[test]
    fn valued_flags_take_a_negative_number() {
        let args: Vec<String> = ["--udp-port", "-1", "--http-port=8080"].map(String::from).to_vec();
        let (f, pos) = flags(&args);
        assert_eq!(f.get("udp-port").map(String::as_str), Some("-1"));
        assert_eq!(f.get("http-port").map(String::as_str), Some("8080"));
        assert!(pos.is_empty());
    }

    #[tokio::test]
    async fn netexec_serves_http_and_udp_on_the_pod_ip() {
        let (c, _out, _d) = ctx(Os::Windows, AGNHOST, 120);
        let (ip, net, cancel) = (c.pod.ip, c.net.clone(), c.cancel.clone());
        let h = tokio::spawn(run(
            c,
            vec!["netexec".into(), "--http-port=18080".into(), "--udp-port=18081".into()],
        ));
        let host = Source::host();
        let addr = SocketAddr::new(ip.into(), 18080);
        let mut got = None;
        for _ in 0..50 {
            if let Ok(r) = http::get(net.dialer(), &host, addr, "x", "/hostname", &[], Duration::from_secs(1)).await {
                got = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = got.expect("netexec answers");
        assert_eq!((r.status, &r.body[..]), (200, &b"pod-120"[..]));
        let udp = net
            .dialer()
            .udp_request(
                &host,
                SocketAddr::new(ip.into(), 18081),
                b"hostname",
                Duration::from_secs(2),
            )
            .await
            .unwrap();
        assert_eq!(udp, b"pod-120");
        let echo = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            "/echo?msg=abc",
            &[],
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(&echo.body[..], b"abc");
        let dial = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            &format!("/dial?request=hostname&protocol=udp&host={ip}&port=18081&tries=1"),
            &[],
            Duration::from_secs(3),
        )
        .await
        .unwrap();
        assert_eq!(dial.status, 200);
        assert_eq!(String::from_utf8_lossy(&dial.body), r#"{"responses":["pod-120"]}"#);
        let bad = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            "/dial?protocol=http&host=x&port=1",
            &[],
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(bad.status, 400);
        let shell = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            "/shell?shellCommand=echo%20hi",
            &[],
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&shell.body), r#"{"output":"hi\r\n"}"#);
        let _ = http::get(
            net.dialer(),
            &host,
            addr,
            "x",
            "/exit?code=7",
            &[],
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(h.await.unwrap(), 7);
        cancel.cancel();
    }

    #[tokio::test]
    async fn dial_to_outside_address_sends_nothing() {
        let (c, _out, _d) = ctx(Os::Linux, AGNHOST, 121);
        let (ip, net, cancel) = (c.pod.ip, c.net.clone(), c.cancel.clone());
        tokio::spawn(run(
            c,
            vec!["netexec".into(), "--http-port=18080".into(), "--udp-port=-1".into()],
        ));
        let host = Source::host();
        let addr = SocketAddr::new(ip.into(), 18080);
        let mut r = None;
        for _ in 0..50 {
            if let Ok(x) = http::get(
                net.dialer(),
                &host,
                addr,
                "x",
                "/dial?request=hostname&protocol=udp&host=1.1.1.1&port=53",
                &[],
                Duration::from_secs(2),
            )
            .await
            {
                r = Some(x);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = r.expect("netexec answers");
        assert_eq!(r.status, 417);
        assert!(String::from_utf8_lossy(&r.body).contains("nothing was sent"));
        let refused = net.dialer().refusals();
        assert!(
            refused.iter().any(|x| x.dst == "1.1.1.1".parse::<IpAddr>().unwrap()),
            "{refused:?}"
        );
        cancel.cancel();
    }
}
