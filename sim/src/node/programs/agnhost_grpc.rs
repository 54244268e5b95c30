//! agnhost `grpc-health-checking`: a `grpc.health.v1` server on `--port` (5000) answering SERVING
//! for `--service` (default `""`) until `--delay-unhealthy-sec` (never by default) or a call to
//! `/make-not-serving` on `--http-port` (8080); other service names get NOT_FOUND, as upstream
//! `test/images/agnhost/grpc-health-checking`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use axum::Router;
use axum::routing::get;

use super::agnhost::{flags, port_flag};
use super::servers::{listen, serve_http};
use super::{Ctx, until_stopped};
use crate::node::grpc::{self, Answer, NOT_SERVING, SERVING};

/// No override; forced unhealthy; forced healthy (`forceUnhealthy` nil / true / false).
const UNFORCED: u8 = 0;
const FORCED_UNHEALTHY: u8 = 1;
const FORCED_HEALTHY: u8 = 2;

/// The serving status after `elapsed_secs`, given the `--delay-unhealthy-sec` and any override:
/// as upstream, `/make-serving` only clears a `/make-not-serving`; it does not undo the delay.
fn serving_status(forced: u8, delay_unhealthy: i64, elapsed_secs: f64) -> u64 {
    let late = delay_unhealthy >= 0 && elapsed_secs >= delay_unhealthy as f64;
    if forced == FORCED_UNHEALTHY || late {
        NOT_SERVING
    } else {
        SERVING
    }
}

/// Runs the subcommand.
pub(super) async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let ports = (port_flag(&f, "port", 5000), port_flag(&f, "http-port", 8080));
    let (Ok(port), Ok(http_port)) = ports else {
        ctx.out.err_line("Error: invalid argument for a port flag");
        return 1;
    };
    let delay: i64 = f.get("delay-unhealthy-sec").and_then(|v| v.parse().ok()).unwrap_or(-1);
    let service = f.get("service").cloned().unwrap_or_default();
    let started = Instant::now();
    let forced = Arc::new(AtomicU8::new(UNFORCED));
    let mark = |to: u8| {
        let forced = forced.clone();
        get(move || {
            forced.store(to, Ordering::SeqCst);
            async move { format!("{:?}", started.elapsed()) }
        })
    };
    let router = Router::new()
        .route("/make-not-serving", mark(FORCED_UNHEALTHY))
        .route("/make-serving", mark(FORCED_HEALTHY));
    ctx.out.line(&format!("Http server starting to listen on :{http_port}"));
    if let Err(e) = serve_http(ctx.pod.ip, http_port as u16, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("listen tcp :{http_port}: bind: {e}"));
        return 1;
    }
    let listener = match listen(ctx.pod.ip, port as u16) {
        Ok(l) => l,
        Err(e) => {
            ctx.out.err_line(&format!(
                "Error while starting the listening service listen tcp :{port}: bind: {e}"
            ));
            return 1;
        }
    };
    ctx.out.line(&format!("gRPC server starting to listen on :{port}"));
    let out = ctx.out.clone();
    let check = move |asked: &str| -> Answer {
        out.line("Serving the Check request for health check");
        if asked != service {
            return Err((grpc::code::NOT_FOUND, "unknown service".into()));
        }
        Ok(serving_status(
            forced.load(Ordering::SeqCst),
            delay,
            started.elapsed().as_secs_f64(),
        ))
    };
    grpc::serve(listener, Arc::new(check), ctx.cancel.clone());
    until_stopped(&ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_until_the_delay_or_an_override() {
        assert_eq!(serving_status(UNFORCED, -1, 1e6), SERVING);
        assert_eq!(serving_status(UNFORCED, 10, 9.0), SERVING);
        assert_eq!(serving_status(UNFORCED, 10, 10.0), NOT_SERVING);
        assert_eq!(serving_status(FORCED_UNHEALTHY, -1, 0.0), NOT_SERVING);
        assert_eq!(serving_status(FORCED_HEALTHY, -1, 20.0), SERVING);
        assert_eq!(serving_status(FORCED_HEALTHY, 10, 20.0), NOT_SERVING);
    }
}
