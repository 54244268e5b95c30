//! `kubectl logs` and its filters (upstream test/e2e/kubectl/logs.go "Kubectl logs logs").

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::{run_labels, run_overrides};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream logs.go "logs".
pub(crate) const LOGS: &str = "[sig-cli] Kubectl logs logs should be able to retrieve and filter logs [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![case!(LOGS, Kind::Adapted, logs)]
}

/// How long the `--since=1s` window may take to hold fewer lines than `--since=24h`: upstream
/// waits 2.5 s once (log times have a second's granularity); here the comparison is repeated
/// each second until then.
const SINCE_WITHIN: Duration = Duration::from_secs(15);

/// Upstream's split after trimming trailing newlines.
fn lines(out: &str) -> Vec<&str> {
    out.trim_end_matches('\n').split('\n').collect()
}

/// Whether `word` is an RFC 3339 time (with or without fractional seconds).
fn is_rfc3339(word: &str) -> bool {
    word.parse::<jiff::Timestamp>().is_ok()
}

/// Runs agnhost's logs generator (100 lines over 20 s) and reads its log with `--tail`,
/// `--limit-bytes`, `--timestamps` and `--since`.
async fn logs(f: &Framework) -> CaseResult {
    let (pod, container) = ("logs-generator", "logs-generator");
    let agnhost = f.image("agnhost", f.target_os())?;
    f.step("creating a pod");
    f.kubectl(&[
        "run",
        pod,
        &format!("--image={agnhost}"),
        "--restart=Never",
        "--pod-running-timeout=2m0s",
        &run_labels(f, &format!("run={pod}")),
        &format!("--overrides={}", run_overrides(f)?),
        "--",
        "logs-generator",
        "--log-lines-total",
        "100",
        "--run-duration",
        "20s",
    ])
    .await?;

    f.step("Waiting for log generator to start.");
    let running_or_done = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
            s.phase.as_deref() == Some("Succeeded")
                || s.phase.as_deref() == Some("Running")
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
        })
    };
    f.wait_for_within(
        &f.api::<Pod>(),
        pod,
        running_or_done,
        "to be running and ready, or succeeded",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;

    f.step("checking for a matching strings");
    look_for_in_log(f, pod, container, "/api/v1/namespaces/kube-system").await?;

    f.step("limiting log lines");
    let out = f.kubectl(&["logs", pod, container, "--tail=1"]).await?;
    ensure!(
        !out.is_empty() && lines(&out).len() == 1,
        "expected `kubectl logs {pod} {container} --tail=1` to print one line, got {out:?}"
    );

    f.step("limiting log bytes");
    let out = f.kubectl(&["logs", pod, container, "--limit-bytes=1"]).await?;
    ensure!(
        out.len() == 1 && lines(&out).len() == 1,
        "expected `kubectl logs {pod} {container} --limit-bytes=1` to print one byte, got {out:?}"
    );

    f.step("exposing timestamps");
    let out = f.kubectl(&["logs", pod, container, "--tail=1", "--timestamps"]).await?;
    let l = lines(&out);
    let words: Vec<&str> = l.first().map(|l| l.split(' ').collect()).unwrap_or_default();
    ensure!(
        l.len() == 1 && words.len() > 1 && is_rfc3339(words[0]),
        "expected `kubectl logs {pod} {container} --tail=1 --timestamps` to print one line starting with an \
         RFC 3339 time, got {out:?}"
    );

    f.step("restricting to a time range");
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let recent_out = f.kubectl(&["logs", pod, container, "--since=1s"]).await?;
        let older_out = f.kubectl(&["logs", pod, container, "--since=24h"]).await?;
        let (recent, older) = (recent_out.split('\n').count(), older_out.split('\n').count());
        if recent < older {
            break;
        }
        if start.elapsed() >= SINCE_WITHIN {
            fail!(
                "expected `kubectl logs --since=1s` to print fewer lines than `--since=24h` (within {SINCE_WITHIN:?}), \
                 got {recent} and {older}\nrecent lines:\n{recent_out}\nolder lines:\n{older_out}"
            );
        }
    }
    f.kubectl(&["delete", "pod", pod]).await?;
    Ok(())
}

/// Upstream `LookForStringInLog`: polls the container's log (through the API) until it holds
/// `wanted`, for up to `PodStartTimeout`.
async fn look_for_in_log(f: &Framework, pod: &str, container: &str, wanted: &str) -> CaseResult {
    let within = crate::framework::POD_START_TIMEOUT.min(f.remaining());
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let log = f.logs(pod, Some(container)).await?;
        if log.contains(wanted) {
            return Ok(());
        }
        if start.elapsed() >= within {
            return Err(CaseError::failed(format!(
                "expected {wanted:?} in the log of container {container} of pod {pod} within {within:?}, got:\n{log}"
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_times_as_upstream_reads_them() {
        assert_eq!(lines("a\nb\n"), ["a", "b"]);
        assert_eq!(lines("x"), ["x"]);
        assert!(is_rfc3339("2026-11-28T23:00:00.123456789Z"));
        assert!(is_rfc3339("2026-11-28T23:00:00Z"));
        assert!(!is_rfc3339("I1128"));
    }
}
