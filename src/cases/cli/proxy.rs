//! `kubectl proxy` on a port the OS picks and on a unix socket (upstream kubectl.go "Proxy
//! server").

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream kubectl.go "Proxy server ... --port 0".
pub(crate) const PORT_ZERO: &str = "[sig-cli] Kubectl client Proxy server should support proxy with --port 0 \
     [Conformance]";
/// Upstream kubectl.go "Proxy server ... --unix-socket".
pub(crate) const UNIX_SOCKET: &str = "[sig-cli] Kubectl client Proxy server should support --unix-socket=/path \
     [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(PORT_ZERO, Kind::Adapted, port_zero),
        case!(UNIX_SOCKET, Kind::Adapted, unix_socket),
    ]
}

/// How long kubectl proxy may take to say where it serves.
const PROXY_START: Duration = Duration::from_secs(30);

/// Starts `kubectl proxy ARGS` and returns the child with the first line it printed
/// (`Starting to serve on ...`).
async fn start_proxy(f: &Framework, args: &[&str]) -> Result<(tokio::process::Child, String, String), CaseError> {
    let (mut cmd, line) = f.kubectl_command(args)?;
    f.step(format!("starting {line}"));
    let mut child = cmd
        .spawn()
        .map_err(|e| CaseError::failed(format!("`{line}` did not start: {e}")))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut first = String::new();
    let read = tokio::time::timeout(PROXY_START, BufReader::new(stdout).read_line(&mut first)).await;
    if !matches!(read, Ok(Ok(n)) if n > 0) {
        let _ = child.start_kill();
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), e.read_to_string(&mut err)).await;
        }
        return Err(CaseError::failed(format!(
            "`{line}` printed nothing on stdout within {PROXY_START:?}; stderr: {}",
            err.trim()
        )));
    }
    Ok((child, first, line))
}

/// What `/api/` answered through the proxy, or why nothing usable came.
fn api_versions(body: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON ({e}): {body}"))?;
    Ok(v["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect())
}

/// A plain HTTP/1.1 GET over `stream`; returns the status line and the body.
async fn http_get<S>(mut stream: S, path: &str) -> Result<(String, String), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: application/json\r\n\r\n");
    stream.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .map_err(|_| "no complete answer within 30 s".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_string();
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked")
    });
    Ok((status, if chunked { dechunk(body) } else { body.to_string() }))
}

/// Decodes a chunked HTTP/1.1 body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `kubectl proxy -p 0 --disable-filter` serves on a port it prints, and `/api/` through it
/// lists at least one version.
async fn port_zero(f: &Framework) -> CaseResult {
    let (mut child, first, line) = start_proxy(f, &["proxy", "-p", "0", "--disable-filter"]).await?;
    let result = async {
        let port: u16 = first
            .trim()
            .strip_prefix("Starting to serve on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| CaseError::failed(format!("could not parse the port from `{line}`'s output {first:?}")))?;
        f.step(format!("curling proxy /api/ output on 127.0.0.1:{port}"));
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| CaseError::failed(format!("dialling kubectl proxy on 127.0.0.1:{port}: {e}")))?;
        let (status, body) = http_get(stream, "/api/")
            .await
            .map_err(|e| CaseError::failed(format!("GET /api/ through kubectl proxy on port {port}: {e}")))?;
        let versions = api_versions(&body)
            .map_err(|e| CaseError::failed(format!("GET /api/ through kubectl proxy answered {status}: {e}")))?;
        ensure!(
            !versions.is_empty(),
            "expected at least one supported API version from /api/ through kubectl proxy, got {status}: {body}"
        );
        Ok::<(), CaseError>(())
    }
    .await;
    let _ = child.kill().await;
    result
}

/// `kubectl proxy --unix-socket=PATH` serves on that socket, and `/api` through it answers.
async fn unix_socket(f: &Framework) -> CaseResult {
    let dir = f.kubectl_settings()?.work_dir().join(format!("proxy-{}", f.ns()));
    std::fs::create_dir_all(&dir).map_err(|e| CaseError::failed(format!("creating {}: {e}", dir.display())))?;
    let path = dir.join("test");
    let arg = format!("--unix-socket={}", path.display());
    let (mut child, _first, line) = start_proxy(f, &["proxy", &arg]).await?;
    let result = async {
        f.step("retrieving proxy /api/ output");
        let stream = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|e| CaseError::failed(format!("dialling `{line}` at {}: {e}", path.display())))?;
        let (status, body) = http_get(stream, "/api")
            .await
            .map_err(|e| CaseError::failed(format!("GET /api at {}: {e}", path.display())))?;
        let versions = api_versions(&body).map_err(|e| {
            CaseError::failed(format!(
                "GET /api through kubectl proxy at {} answered {status}: {e}",
                path.display()
            ))
        })?;
        ensure!(
            !versions.is_empty(),
            "expected at least one supported API version from /api through kubectl proxy at {}, got {status}: {body}",
            path.display()
        );
        Ok::<(), CaseError>(())
    }
    .await;
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_and_versions() {
        assert_eq!(dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "hello world");
        assert_eq!(
            api_versions(r#"{"kind":"APIVersions","versions":["v1"]}"#),
            Ok(vec!["v1".to_string()])
        );
        assert!(api_versions("<html>").is_err());
    }
}
