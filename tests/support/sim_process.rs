//! `crossconf sim` as a child process, for tests that need the simulated cluster outside their
//! own process: to deliver signals to a run, to watch a run's events from the side, or to run the
//! CLI against it as a user would (`--kubeconfig FILE`).
//!
//! `doctor`, `prepull` and `interrupt` each carried their own copy of this; one copy here keeps
//! how the child is started, waited for and stopped the same for all of them.

#![expect(
    clippy::disallowed_methods,
    reason = "polls a child process and the file it writes, which have no watch to wait on"
)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// A `crossconf sim` in its own process, stopped with SIGINT when dropped (killed if it has not
/// exited 10 s later).
pub struct SimProcess {
    child: Child,
    /// The kubeconfig the simulator wrote once its cluster answered.
    pub kubeconfig: PathBuf,
    /// Where the simulator's standard error (its log) goes.
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl SimProcess {
    /// Starts `crossconf sim ARGS --kubeconfig-out FILE` (standard output discarded, the log
    /// kept in [`SimProcess::log`]) and waits until the kubeconfig exists; panics if the process
    /// exits first or `ready_within` passes.
    pub fn start(args: &[&str], ready_within: Duration) -> SimProcess {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let log = dir.path().join("sim.log");
        let child = Command::new(env!("CARGO_BIN_EXE_crossconf"))
            .arg("sim")
            .args(args)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut sim = SimProcess {
            child,
            kubeconfig,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + ready_within;
        // The kubeconfig is written atomically once the cluster answers.
        while !sim.kubeconfig.exists() {
            if let Ok(Some(status)) = sim.child.try_wait() {
                let log = std::fs::read_to_string(&sim.log).unwrap_or_default();
                panic!("crossconf sim exited early: {status}; its log:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "the simulator did not write its kubeconfig in {}s",
                ready_within.as_secs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        sim
    }

    /// A kube client for the simulator, from the kubeconfig it wrote.
    pub async fn client(&self) -> kube::Client {
        crossconf::install_crypto_provider();
        let kc = Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

impl SimProcess {
    /// Stops the simulator and returns its log. Dropping a `SimProcess` removes the directory
    /// the log is in, so a test that reads the log after the run calls this instead.
    pub fn finish(mut self) -> String {
        self.stop();
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(the simulator's log could not be read: {e})"))
    }

    /// Interrupts the simulator (it cleans up) and waits for it, killing it after 10 s.
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A finished `crossconf` command (run against the simulator or not) for an assertion message:
/// its exit code, stdout and stderr.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
