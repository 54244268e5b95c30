//! What the kubelet server asks of the kubelet: `exec` into a container, container logs and
//! the pod list. Separate because it serves the HTTPS endpoints, not the pod lifecycle.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::node::programs::{self, Ctx, Output, Stdin, StdinWriter, Stream};
use crate::node::runtime::{self, LogBuffer};
use crossconf_model::os::Os;

use super::Kubelet;

/// Errors of `exec` into a container.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// No such pod on this node.
    #[error("pod {0} not found")]
    PodNotFound(String),
    /// No such container, or it is not running.
    #[error("container {container} is not valid for pod {pod}")]
    ContainerNotRunning {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
    /// The command is not in the image.
    #[error("{0}")]
    NotFound(String),
}

impl Kubelet {
    /// Runs `argv` in a running container, streaming output into `out`; returns the exit code.
    pub(crate) async fn exec(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        argv: Vec<String>,
        stdin: Option<Stdin>,
        out: Output,
    ) -> Result<i32, ExecError> {
        let rt = self
            .find_pod(ns, pod)
            .ok_or_else(|| ExecError::PodNotFound(format!("{ns}/{pod}")))?;
        let ctx = {
            let st = rt.state.lock().expect("state lock");
            let c = st
                .main
                .iter()
                .chain(st.init.iter())
                .chain(st.ephemeral.iter())
                .find(|c| c.name == container || container.is_empty());
            c.and_then(|c| c.exec.clone())
        }
        .ok_or_else(|| ExecError::ContainerNotRunning {
            pod: pod.into(),
            container: container.into(),
        })?;
        if self.net.faults().is_on("exec-broken") {
            return Err(ExecError::NotFound("rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)".into()));
        }
        let a0 = argv.first().cloned().unwrap_or_default();
        if programs::find(&a0, &ctx.image).is_none() {
            let msg = match self.cfg.os {
                Os::Linux => format!(
                    "OCI runtime exec failed: exec failed: unable to start container process: exec: \"{a0}\": executable file not found in $PATH: unknown (the simulator emulates no program {a0:?} in image {})",
                    ctx.image.name
                ),
                Os::Windows => format!(
                    "hcs::System::CreateProcess: The system cannot find the file specified.: unknown (the simulator emulates no program {a0:?} in image {})",
                    ctx.image.name
                ),
            };
            return Err(ExecError::NotFound(msg));
        }
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx
        };
        Ok(programs::run(sub, argv, stdin).await)
    }

    /// What an attach to a running container reaches: its output (the log it writes as it
    /// runs) and, when the container was created with `stdin: true`, its standard input.
    pub(crate) fn attach(&self, ns: &str, pod: &str, container: &str) -> Result<Attached, ExecError> {
        let rt = self
            .find_pod(ns, pod)
            .ok_or_else(|| ExecError::PodNotFound(format!("{ns}/{pod}")))?;
        let st = rt.state.lock().expect("state lock");
        let c = st
            .main
            .iter()
            .chain(st.init.iter())
            .chain(st.ephemeral.iter())
            .find(|c| c.name == container || container.is_empty())
            .filter(|c| c.exec.is_some())
            .ok_or_else(|| ExecError::ContainerNotRunning {
                pod: pod.into(),
                container: container.into(),
            })?;
        Ok(Attached {
            logs: c.logs.clone(),
            stdin: c.stdin.clone(),
            stdin_once: c.stdin_once,
            tty: c.tty,
        })
    }

    /// Closes a `stdinOnce` container's input for good: its process reads end of file once the
    /// attach that had it lets go, and later attaches get no stdin.
    pub(crate) fn close_stdin_once(&self, ns: &str, pod: &str, container: &str) {
        if let Some(rt) = self.find_pod(ns, pod) {
            let mut guard = rt.state.lock().expect("state lock");
            let st = &mut *guard;
            if let Some(c) = st
                .main
                .iter_mut()
                .chain(st.ephemeral.iter_mut())
                .find(|c| c.name == container || container.is_empty())
                .filter(|c| c.stdin_once)
            {
                c.stdin = None;
            }
        }
    }

    /// Where a port-forward into a pod connects: its IP, and the names the runtime reports.
    pub(crate) fn port_forward_target(
        &self,
        ns: &str,
        pod: &str,
    ) -> Result<crate::node::portforward::Target, ExecError> {
        let rt = self
            .find_pod(ns, pod)
            .ok_or_else(|| ExecError::PodNotFound(format!("{ns}/{pod}")))?;
        let ip = rt
            .state
            .lock()
            .expect("state lock")
            .ip
            .ok_or_else(|| ExecError::NotFound(format!("pod {pod} has no sandbox running")))?;
        // containerd names a sandbox by a 64-hex-digit id; the pod UID's digits stand in.
        let hex: String = rt.uid.chars().filter(char::is_ascii_hexdigit).collect();
        Ok(crate::node::portforward::Target {
            ip,
            sandbox: format!("{hex}{hex}").chars().take(64).collect(),
            uid: rt.uid.clone(),
        })
    }

    /// The log of a container (the previous run's with `previous`).
    pub(crate) fn logs(&self, ns: &str, pod: &str, container: &str, previous: bool) -> Option<Arc<LogBuffer>> {
        let rt = self.find_pod(ns, pod)?;
        let st = rt.state.lock().expect("state lock");
        let c = if container.is_empty() {
            st.main.first()
        } else {
            st.main
                .iter()
                .chain(st.init.iter())
                .chain(st.ephemeral.iter())
                .find(|c| c.name == container)
        }?;
        if previous {
            c.prev_logs.clone()
        } else {
            Some(c.logs.clone())
        }
    }

    /// The pods on this node, as `/pods` lists them.
    pub(crate) fn pod_list(&self) -> Vec<Pod> {
        self.pods.lock().expect("pods lock").values().map(|p| p.pod()).collect()
    }
}

/// A running container as an attach sees it.
#[derive(Debug)]
pub(crate) struct Attached {
    /// The current run's output.
    pub logs: Arc<LogBuffer>,
    /// Its standard input, when the container has one (`stdin: true`) still open.
    pub stdin: Option<StdinWriter>,
    /// `stdinOnce`: the first attach's end of input closes it.
    pub stdin_once: bool,
    /// `tty: true`.
    pub tty: bool,
}

/// Writes a log to `out` (used by tests and the `/containerLogs` endpoint).
pub(crate) fn log_text(lines: &[runtime::LogLine], timestamps: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for l in lines {
        if timestamps {
            v.extend_from_slice(format!("{} ", l.ts.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")).as_bytes());
        }
        v.extend_from_slice(&l.data);
        let _ = l.stream == Stream::Stderr;
    }
    v
}
