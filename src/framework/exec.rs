//! Exec and logs over the API (what `kubectl exec` and `kubectl logs` do).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{AttachParams, LogParams};
use tokio::io::AsyncReadExt;

use super::{CaseError, Framework};

/// What an exec produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The exit code the kubelet reported (0 on success).
    pub exit_code: i32,
}

impl ExecOutput {
    /// Stdout with surrounding whitespace (and Windows line ends) removed.
    pub fn out(&self) -> String {
        self.stdout.trim().replace("\r\n", "\n")
    }
}

impl Framework {
    /// Runs `command` in `container` of `pod` over the exec subresource (websocket, v5 then v4
    /// channel protocol) and collects its output and exit code.
    ///
    /// # Errors
    /// When the exec cannot be started or its streams fail; a non-zero exit is not an error
    /// (the caller asserts on [`ExecOutput::exit_code`]).
    pub async fn exec(
        &self,
        pod: &str,
        container: Option<&str>,
        command: Vec<String>,
    ) -> Result<ExecOutput, CaseError> {
        self.step(format!("exec in {pod}: {}", command.join(" ")));
        // A stream cut before the command's status arrived (an API server restart drops every
        // connection) says nothing about the command: run it again, as a person would. The
        // commands cases exec read or probe; running one twice is harmless.
        let mut tries = 0;
        loop {
            // A stream whose connection died without a close (an API server restart mid-way)
            // would wait forever: one that says nothing for EXEC_STALL counts as broken.
            let stall = EXEC_STALL.min(self.remaining());
            match self.exec_once(pod, container, &command, stall).await {
                Err(Broken::Stream(why)) if tries < EXEC_STREAM_RETRIES => {
                    tries += 1;
                    self.step(format!("exec stream in {pod} broke ({why}); running the command again"));
                }
                Err(Broken::Stream(why)) => {
                    return Err(CaseError::failed(format!(
                        "exec in pod {pod}: the stream broke {} times, last: {why}",
                        tries + 1
                    )));
                }
                Err(Broken::Case(e)) => return Err(e),
                Ok(out) => return Ok(out),
            }
        }
    }

    /// One try, given `stall` to finish; a stall is reported with the phase it stopped in and
    /// the output so far, so a hang can be told from a slow command.
    async fn exec_once(
        &self,
        pod: &str,
        container: Option<&str>,
        command: &[String],
        stall: std::time::Duration,
    ) -> Result<ExecOutput, Broken> {
        let deadline = tokio::time::Instant::now() + stall;
        let command = command.to_vec();
        let mut params = AttachParams::default().stdout(true).stderr(true).stdin(false);
        if let Some(c) = container {
            params = params.container(c);
        }
        let started = tokio::time::timeout_at(deadline, self.api::<Pod>().exec(pod, command.clone(), &params)).await;
        let Ok(started) = started else {
            return Err(Broken::Stream(format!(
                "the API server did not answer the exec upgrade within {stall:?}"
            )));
        };
        let mut attached = match started {
            Ok(a) => a,
            Err(e) if start_broken(&e) => {
                return Err(Broken::Stream(format!(
                    "starting exec in pod {pod}: {}",
                    super::render_kube_error(&e)
                )));
            }
            Err(e) => {
                return Err(CaseError::from(e)
                    .context(format!("exec {command:?} in pod {pod}"))
                    .into());
            }
        };
        let mut stdout = attached
            .stdout()
            .ok_or_else(|| CaseError::failed("exec returned no stdout stream"))?;
        let mut stderr = attached
            .stderr()
            .ok_or_else(|| CaseError::failed("exec returned no stderr stream"))?;
        let status = attached
            .take_status()
            .ok_or_else(|| CaseError::failed("exec returned no status channel"))?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let status_seen = std::sync::atomic::AtomicBool::new(false);
        let finished = {
            let reads = async {
                let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
                a.and(b)
            };
            let status = async {
                let s = status.await;
                status_seen.store(true, std::sync::atomic::Ordering::SeqCst);
                s
            };
            tokio::pin!(reads, status);
            tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    r = &mut reads => (r, status.await),
                    // The status is the last frame the kubelet sends, after all output: once it
                    // is in, output still in flight gets a moment, but a connection a proxy
                    // keeps open after it (seen through API server restarts) is not waited on.
                    s = &mut status => {
                        let r = tokio::time::timeout(STATUS_GRACE, &mut reads).await.unwrap_or(Ok(0));
                        (r, s)
                    }
                }
            })
            .await
        };
        let Ok((read_result, status)) = finished else {
            let tail = |b: &[u8]| {
                let text = String::from_utf8_lossy(b);
                let start = text.len().saturating_sub(160);
                let start = (start..=text.len())
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(text.len());
                format!("{:?}", &text[start..])
            };
            return Err(Broken::Stream(format!(
                "no end of the command after {stall:?} (stream open, exit status {}, {} bytes of stdout ending {}, {} bytes of stderr ending {})",
                if status_seen.load(std::sync::atomic::Ordering::SeqCst) {
                    "received"
                } else {
                    "not received"
                },
                out.len(),
                tail(&out),
                err.len(),
                tail(&err)
            )));
        };
        read_result.map_err(|e| Broken::Stream(format!("reading exec output from pod {pod}: {e}")))?;
        let exit_code = match status {
            Some(s) if s.status.as_deref() == Some("Success") => 0,
            Some(s) => s
                .details
                .as_ref()
                .and_then(|d| d.causes.as_ref())
                .and_then(|c| c.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
                .and_then(|c| c.message.as_deref())
                .and_then(|m| m.parse().ok())
                .ok_or_else(|| {
                    CaseError::failed(format!(
                        "exec in pod {pod} failed: {}",
                        s.message.unwrap_or_else(|| "no message".into())
                    ))
                })?,
            None => {
                return Err(Broken::Stream(format!("exec in pod {pod} ended without a status")));
            }
        };
        // The exit status is in: the stream's own end is not waited for past the deadline.
        let _ = tokio::time::timeout_at(deadline, attached.join()).await;
        Ok(ExecOutput {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            exit_code,
        })
    }

    /// Runs a shell script in the pod's OS shell (`cmd /c` or `sh -c`).
    ///
    /// # Errors
    /// As [`Framework::exec`].
    pub async fn exec_shell(
        &self,
        pod: &str,
        container: Option<&str>,
        os: crate::os::Os,
        script: &str,
    ) -> Result<ExecOutput, CaseError> {
        self.exec(pod, container, os.shell(script)).await
    }

    /// The logs of `container` of `pod`.
    ///
    /// # Errors
    /// When the log request fails.
    pub async fn logs(&self, pod: &str, container: Option<&str>) -> Result<String, CaseError> {
        let params = LogParams {
            container: container.map(str::to_string),
            ..Default::default()
        };
        self.api::<Pod>()
            .logs(pod, &params)
            .await
            .map_err(|e| CaseError::from(e).context(format!("reading logs of pod {pod}")))
    }
}

/// How long one exec may run before its stream counts as broken: longer than any command a
/// case runs (the longest hold cases a few tens of seconds), shorter than a case timeout.
const EXEC_STALL: std::time::Duration = std::time::Duration::from_secs(120);

/// How long output may still arrive after an exec's exit status.
const STATUS_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Times an exec whose stream broke is run again.
const EXEC_STREAM_RETRIES: u32 = 2;

/// Whether an exec that failed to start failed on the way rather than being refused: the
/// connection was lost before the upgrade was answered (an API server restart, a reset), or
/// the server answered a transient status (429, 503, 504) instead of switching protocols. The
/// command may or may not have started; like a broken stream, it is run again.
fn start_broken(e: &kube::Error) -> bool {
    match e {
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(code)) => {
            matches!(code.as_u16(), 429 | 503 | 504)
        }
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::GetPendingUpgrade(_)) => true,
        _ => false,
    }
}

/// Why one exec attempt did not give an output.
enum Broken {
    /// The stream ended before the command's status: the command's fate is unknown.
    Stream(String),
    /// Anything else, final.
    Case(CaseError),
}

impl From<CaseError> for Broken {
    fn from(e: CaseError) -> Self {
        Broken::Case(e)
    }
}
