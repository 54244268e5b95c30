//! agnhost, the Kubernetes e2e test image: the subcommands the cases drive, with the
//! endpoints, flags and output formats of upstream `test/images/agnhost` (UPSTREAM.md).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use super::servers::{serve_http, serve_udp};
use super::{Ctx, until_stopped};
use crate::node::dns;
use crossconf_model::os::Os;

/// Parsed cobra-style flags: `--name=value`, `--name value`, `--flag`.
pub(super) fn flags(args: &[String]) -> (HashMap<String, String>, Vec<String>) {
    let mut m = HashMap::new();
    let mut pos = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(f) = a
            .strip_prefix("--")
            .or_else(|| a.strip_prefix('-').filter(|s| !s.is_empty()))
        {
            if let Some((k, v)) = f.split_once('=') {
                m.insert(k.to_string(), v.to_string());
            } else if i + 1 < args.len()
                // pflag gives a valued flag the next argument, a negative number included
                // (`--udp-port -1`).
                && (!args[i + 1].starts_with('-') || args[i + 1].parse::<i64>().is_ok())
                && !matches!(f, "tcp" | "udp" | "http")
            {
                m.insert(f.to_string(), args[i + 1].clone());
                i += 1;
            } else {
                m.insert(f.to_string(), "true".into());
            }
        } else {
            pos.push(a.clone());
        }
        i += 1;
    }
    (m, pos)
}

pub(super) fn port_flag(f: &HashMap<String, String>, name: &str, default: i64) -> Result<i64, String> {
    match f.get(name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| {
            format!("invalid argument {v:?} for \"--{name}\" flag: strconv.ParseInt: parsing {v:?}: invalid syntax")
        }),
    }
}

/// Runs the agnhost binary with its whole command line: `entrypoint-tester` prints every
/// argument including the executable's own name (upstream prints `os.Args`, so the cases can
/// tell `/agnhost` from `/agnhost-2`); every other subcommand sees only its arguments.
pub async fn run_argv(ctx: Ctx, argv: Vec<String>) -> i32 {
    if argv.get(1).map(String::as_str) == Some("entrypoint-tester") {
        ctx.out.line(&format!("[{}]", argv.join(" ")));
        return 0;
    }
    run(ctx, argv.get(1..).unwrap_or_default().to_vec()).await
}

/// Runs `agnhost <args>`.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let Some(sub) = args.first().cloned() else {
        ctx.out.err_line("Error: agnhost needs a subcommand");
        return 1;
    };
    let rest = args[1..].to_vec();
    let _busy = ctx.usage.busy(2);
    ctx.usage
        .extra_memory_bytes
        .store(12 << 20, std::sync::atomic::Ordering::Relaxed);
    match sub.as_str() {
        "netexec" => super::agnhost_netexec::netexec(ctx, rest).await,
        "serve-hostname" => serve_hostname(ctx, rest).await,
        "dns-server-list" => {
            match &ctx.pod.dns {
                Ok(d) => ctx.out.line(
                    &d.nameservers
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                Err(e) => ctx.out.line(&format!("no DNS configuration: {e}")),
            }
            0
        }
        "dns-suffix" => {
            match &ctx.pod.dns {
                Ok(d) => ctx.out.line(&d.searches.join(",")),
                Err(_) => ctx.out.line(""),
            }
            0
        }
        "etc-hosts" => {
            let path = match ctx.pod.os {
                Os::Linux => "/etc/hosts",
                Os::Windows => "C:\\Windows\\System32\\drivers\\etc\\hosts",
            };
            match ctx.fs.read(path) {
                Ok(b) => {
                    ctx.out.line(&String::from_utf8_lossy(&b));
                    0
                }
                Err(e) => {
                    ctx.out.err_line(&format!("panic: open {path}: {e}"));
                    2
                }
            }
        }
        "pause" => {
            ctx.out.line("Paused");
            ctx.cancel.cancelled().await;
            ctx.out.line("Shutting down after receiving signal: terminated.");
            0
        }
        "liveness" => liveness(ctx).await,
        "grpc-health-checking" => super::agnhost_grpc::run(ctx, rest).await,
        "nettest" => super::agnhost_nettest::run(ctx, rest).await,
        "logs-generator" => logs_generator(ctx, rest).await,
        "test-webserver" => test_webserver(ctx, rest).await,
        "porter" => porter(ctx, rest).await,
        "connect" => connect(ctx, rest).await,
        "inclusterclient" => super::inclusterclient::run(ctx, rest).await,
        "test-service-account-issuer-discovery" => super::agnhost_oidc::run(ctx, rest).await,
        "webhook" => super::agnhost_webhook::run(ctx, rest).await,
        "crd-conversion-webhook" => super::agnhost_crd_conversion::run(ctx, rest).await,
        other => {
            ctx.out.err_line(&format!(
                "Error: unknown command \"{other}\" for \"agnhost\" (the simulator does not emulate agnhost {other})"
            ));
            1
        }
    }
}

async fn serve_hostname(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let port = match port_flag(&f, "port", 9376).map(u16::try_from) {
        Ok(Ok(p)) => p,
        _ => {
            ctx.out.err_line("invalid --port");
            return 1;
        }
    };
    let on = |k: &str, d: bool| f.get(k).map_or(d, |v| v != "false");
    let (tcp, udp, http_on) = (on("tcp", false), on("udp", false), on("http", true));
    let stop = ctx.cancel.child_token();
    let host = ctx.pod.hostname.clone();
    if http_on && !tcp {
        let h = host.clone();
        let router = Router::new().fallback(move || {
            let h = h.clone();
            async move { h }
        });
        if let Err(e) = serve_http(ctx.pod.ip, port, router, stop.clone()).await {
            ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
            return 1;
        }
    }
    if tcp {
        match super::servers::listen(ctx.pod.ip, port) {
            Ok(l) => {
                let (h, stop) = (host.clone(), stop.clone());
                tokio::spawn(async move {
                    loop {
                        let (mut c, _) = tokio::select! {
                            _ = stop.cancelled() => return,
                            r = l.accept() => match r { Ok(x) => x, Err(_) => continue },
                        };
                        use tokio::io::AsyncWriteExt;
                        let _ = c.write_all(h.as_bytes()).await;
                    }
                });
            }
            Err(e) => {
                ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
                return 1;
            }
        }
    }
    if udp {
        let h = host.clone();
        if let Err(e) = serve_udp(ctx.pod.ip, port, stop.clone(), move |_, _| Some(h.clone())).await {
            ctx.out.err_line(&format!("listen udp :{port}: bind: {e}"));
            return 1;
        }
    }
    ctx.out.line(&format!("Serving on port {port}."));
    let code = until_stopped(&ctx).await;
    stop.cancel();
    code
}

/// `agnhost logs-generator --log-lines-total N --run-duration D` (upstream
/// test/images/agnhost/logs-generator): N apiserver-like lines logged through klog (stderr,
/// `I<mmdd> <time> 1 logs_generator.go:76] <id> <method> <url> <status>`), one every D/N, then
/// exits 0. Upstream picks the method, namespace, pod name and status at random; here they
/// follow the line number, so every third line names kube-system as upstream's do on average.
async fn logs_generator(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let total = f
        .get("log-lines-total")
        .or_else(|| f.get("t"))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    if total == 0 {
        ctx.out
            .err_line(&format!("F{} Invalid total number of lines: {total}", klog_time()));
        return 255;
    }
    let Some(duration) = f
        .get("run-duration")
        .or_else(|| f.get("d"))
        .and_then(|v| crate::faults::values::parse_duration(v))
    else {
        ctx.out.err_line(&format!("F{} Invalid duration: 0s", klog_time()));
        return 255;
    };
    let mut ticker = tokio::time::interval(duration / total);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    for id in 0..total {
        ctx.out.err_line(&format!(
            "I{}       1 logs_generator.go:76] {}",
            klog_time(),
            log_line(id)
        ));
        tokio::select! {
            _ = ticker.tick() => {}
            () = ctx.cancel.cancelled() => return 0,
        }
    }
    0
}

/// klog's header time: `mmdd hh:mm:ss.uuuuuu`.
fn klog_time() -> String {
    jiff::Zoned::now()
        .with_time_zone(jiff::tz::TimeZone::UTC)
        .strftime("%m%d %H:%M:%S.%6f")
        .to_string()
}

/// Line `id` of the logs generator: `<id> <method> /api/v1/namespaces/<ns>/pods/<name> <status>`.
fn log_line(id: u32) -> String {
    const METHODS: [&str; 3] = ["GET", "POST", "PUT"];
    const NAMESPACES: [&str; 3] = ["kube-system", "default", "ns"];
    let i = id as usize;
    let name: String = (0..3 + i % 3)
        .map(|k| char::from(b'a' + u8::try_from((i * 7 + k * 13) % 26).unwrap_or(0)))
        .collect();
    format!(
        "{id} {} /api/v1/namespaces/{}/pods/{name} {}",
        METHODS[i % 3],
        NAMESPACES[i % 3],
        200 + (i * 37) % 400
    )
}

async fn liveness(ctx: Ctx) -> i32 {
    let started = Arc::new(Instant::now());
    let router = Router::new()
        .route(
            "/healthz",
            get(move || {
                let started = started.clone();
                async move {
                    let d = started.elapsed();
                    if d > Duration::from_secs(10) {
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("error: {:.6}s", d.as_secs_f64()),
                        )
                            .into_response()
                    } else {
                        "ok".into_response()
                    }
                }
            }),
        )
        .route(
            "/redirect",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                let loc = q.get("loc").cloned().unwrap_or_default();
                (StatusCode::FOUND, [("Location", loc)]).into_response()
            }),
        );
    if let Err(e) = serve_http(ctx.pod.ip, 8080, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("listen tcp :8080: bind: {e}"));
        return 1;
    }
    until_stopped(&ctx).await
}

async fn test_webserver(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let port = match port_flag(&f, "port", 80).map(u16::try_from) {
        Ok(Ok(p)) => p,
        _ => {
            ctx.out.err_line("invalid --port");
            return 1;
        }
    };
    // Upstream test-webserver is `http.FileServer(http.Dir("/"))`: files are served, and a
    // directory (`/` included, which the probe cases hit) answers 200 with a listing.
    let fs = ctx.fs.clone();
    let router = Router::new().fallback(move |uri: axum::http::Uri| {
        let fs = fs.clone();
        async move {
            let path = uri.path();
            if fs.stat(path) == Some(true) {
                return match fs.list(path) {
                    Ok(entries) => {
                        let mut body = String::from("<pre>\n");
                        for e in entries {
                            let slash = if e.is_dir { "/" } else { "" };
                            body.push_str(&format!("<a href=\"{0}{slash}\">{0}{slash}</a>\n", e.name));
                        }
                        body.push_str("</pre>\n");
                        (StatusCode::OK, [("Content-Type", "text/html; charset=utf-8")], body).into_response()
                    }
                    Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error\n").into_response(),
                };
            }
            match fs.read(path) {
                Ok(b) => match extension_type(path) {
                    Some(t) => (StatusCode::OK, [("Content-Type", t)], b).into_response(),
                    None => (StatusCode::OK, b).into_response(),
                },
                Err(_) => (StatusCode::NOT_FOUND, "404 page not found\n").into_response(),
            }
        }
    });
    if let Err(e) = serve_http(ctx.pod.ip, port, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
        return 1;
    }
    until_stopped(&ctx).await
}

/// The Content-Type Go's `http.FileServer` gives a file by its extension (`mime.TypeByExtension`
/// over Go's built-in table), for the extensions the simulated images serve: `data.json` and the
/// update-demo pictures.
fn extension_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "json" => Some("application/json"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "html" | "htm" => Some("text/html; charset=utf-8"),
        _ => None,
    }
}

/// What porter answers on a port serving `value`: the value itself, or with `--json-response`
/// `{"Method":<the request's method>,"Body":<value>}` as `application/json` (upstream's
/// `jsonResponse` struct, marshalled without field tags).
fn porter_answer(value: &str, json: bool, method: &axum::http::Method) -> axum::response::Response {
    if json {
        let body = serde_json::json!({"Method": method.as_str(), "Body": value}).to_string();
        ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        value.to_string().into_response()
    }
}

async fn porter(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let json = f.get("json-response").is_some_and(|v| v != "false");
    let mut any = false;
    for (k, v) in &ctx.env {
        if let Some(p) = k.strip_prefix("SERVE_PORT_") {
            let Ok(port) = p.parse::<u16>() else { continue };
            let body = v.clone();
            let router = Router::new().fallback(move |method: axum::http::Method| {
                let b = body.clone();
                async move { porter_answer(&b, json, &method) }
            });
            if let Err(e) = serve_http(ctx.pod.ip, port, router, ctx.cancel.clone()).await {
                ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
                return 1;
            }
            any = true;
        } else if k.starts_with("SERVE_TLS_PORT_") || k.starts_with("SERVE_SCTP_PORT_") {
            ctx.out.err_line(&format!(
                "{k}: the simulator's porter does not emulate TLS or SCTP ports"
            ));
            return 1;
        }
    }
    if !any {
        ctx.out.err_line("No ports to serve; set SERVE_PORT_<port>=<response>");
        return 1;
    }
    until_stopped(&ctx).await
}

async fn connect(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, pos) = flags(&args);
    let Some(target) = pos.first() else {
        ctx.out.err_line("Error: accepts 1 arg(s), received 0");
        return 1;
    };
    let timeout = f
        .get("timeout")
        .and_then(|t| t.strip_suffix('s').and_then(|n| n.parse::<f64>().ok()))
        .map_or(Duration::from_secs(5), Duration::from_secs_f64);
    let Some((host, port)) = target.rsplit_once(':') else {
        ctx.out.err_line("OTHER: invalid target");
        return 1;
    };
    let Ok(port) = port.parse::<u16>() else {
        ctx.out.err_line("OTHER: invalid port");
        return 1;
    };
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => match &ctx.pod.dns {
            Ok(d) => match dns::resolve(d, &ctx.net, &ctx.source(), host).await {
                Ok(r) => IpAddr::V4(r.addrs[0]),
                Err(e) => {
                    ctx.out.err_line(&format!("DNS: {e}"));
                    return 1;
                }
            },
            Err(e) => {
                ctx.out.err_line(&format!("DNS: {e}"));
                return 1;
            }
        },
    };
    match tokio::time::timeout(timeout, ctx.net.dialer().tcp(&ctx.source(), SocketAddr::new(ip, port))).await {
        Ok(Ok(_)) => 0,
        Ok(Err(crate::node::NetError::Io { source, .. })) if source.kind() == std::io::ErrorKind::ConnectionRefused => {
            ctx.out.err_line("REFUSED");
            1
        }
        Ok(Err(crate::node::NetError::TimedOut { .. } | crate::node::NetError::Dropped { .. })) | Err(_) => {
            ctx.out.err_line("TIMEOUT");
            1
        }
        Ok(Err(e)) => {
            ctx.out.err_line(&format!("OTHER: {e}"));
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn porter_answers_json_with_the_method() {
        use http_body_util::BodyExt;
        let r = porter_answer("foo", true, &axum::http::Method::PATCH);
        assert_eq!(r.headers()["content-type"], "application/json");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v, serde_json::json!({"Method": "PATCH", "Body": "foo"}));
        let plain = porter_answer("foo", false, &axum::http::Method::PATCH);
        let body = plain.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"foo");
    }

    #[test]
    fn parses_cobra_flags() {
        let (f, pos) = flags(&["--http-port=8080".into(), "--udp-port".into(), "9".into(), "x".into()]);
        assert_eq!(f["http-port"], "8080");
        assert_eq!(f["udp-port"], "9");
        assert_eq!(pos, ["x"]);
        let (f, _) = flags(&["--udp".into(), "--port".into(), "1".into()]);
        assert_eq!(f["udp"], "true");
        assert_eq!(f["port"], "1");
    }

    #[test]
    fn logs_generator_lines_look_like_upstreams() {
        let line = log_line(0);
        assert!(line.starts_with("0 GET /api/v1/namespaces/kube-system/pods/"), "{line}");
        let status: u32 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((200..600).contains(&status), "{line}");
        assert!(log_line(1).contains("/namespaces/default/"));
    }

    #[tokio::test]
    async fn logs_generator_logs_the_lines_it_was_asked_for_then_exits() {
        use crate::node::programs::testutil::{AGNHOST, ctx, text};
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 122);
        let args = ["logs-generator", "--log-lines-total", "6", "--run-duration", "60ms"];
        let code = run(c, args.iter().map(ToString::to_string).collect()).await;
        assert_eq!(code, 0);
        let logged = text(&out);
        assert_eq!(logged.lines().count(), 6, "{logged}");
        assert!(
            logged
                .lines()
                .all(|l| l.starts_with('I') && l.contains("logs_generator.go:76] ")),
            "{logged}"
        );
        let (c, _out, _d) = ctx(Os::Linux, AGNHOST, 123);
        assert_eq!(
            run(c, vec!["logs-generator".into()]).await,
            255,
            "no line count is fatal"
        );
    }
}
