//! `shutdown.exe`, the Windows tool that restarts or powers off the machine: `/r` (restart),
//! `/s` (power off), `/a` (abort a scheduled one), `/t N` (delay in seconds, 30 when left out),
//! options given with `/` or `-`. Only a process running on the host with its privileges (a
//! HostProcess container, whose [`crate::node::programs::Ctx::host`] reaches the machine's
//! power) can do it; a process in an ordinary Windows container is denied, as the container
//! holds no shutdown privilege over its host. Messages and exit codes as shutdown.exe prints
//! them (the Win32 error number in parentheses).

use std::time::Duration;

use super::{Interp, Io};

/// shutdown.exe's largest `/t` (ten years).
const MAX_DELAY_SECS: u64 = 315_360_000;

impl Interp {
    /// Runs `shutdown ARGS`.
    pub(super) fn shutdown(&self, args: &[String], io: &Io) -> i32 {
        let opts: Vec<String> = args
            .iter()
            .map(|a| a.trim_start_matches(['/', '-']).to_ascii_lowercase())
            .collect();
        let has = |o: &str| opts.iter().any(|a| a == o);
        let delay = match opts.iter().position(|a| a == "t") {
            None => Some(30),
            Some(i) => opts
                .get(i + 1)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n <= MAX_DELAY_SECS),
        };
        let Some(delay) = delay else {
            self.err(io, "The parameter is incorrect.(87)");
            return 87;
        };
        let op = match (has("r"), has("s"), has("a")) {
            (true, false, false) => Some(true),
            (false, true, false) => Some(false),
            (false, false, true) => None,
            _ => {
                self.err(
                    io,
                    "Usage: shutdown [/r | /s | /a] [/t xxx] (the simulator emulates /r, /s, /a and /t)",
                );
                return 1;
            }
        };
        let Some(power) = self.ctx.host.clone() else {
            self.err(io, &format!("{}: Access is denied.(5)", self.ctx.pod.hostname));
            return 5;
        };
        let r = match op {
            Some(reboot) => power.schedule(Duration::from_secs(delay), reboot),
            None => power.abort(),
        };
        match r {
            Ok(()) => 0,
            Err(e) => {
                self.err(io, &format!("{}: {e}", self.ctx.pod.hostname));
                match e {
                    crate::node::kubelet::power::PowerError::AlreadyScheduled => 1190,
                    crate::node::kubelet::power::PowerError::NothingScheduled => 1116,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::node::kubelet::power::Power;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};
    use crate::node::programs::{self};
    use crossconf_model::os::Os;

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn only_a_host_process_schedules_a_restart() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 150);
        assert_eq!(
            programs::run(c, argv(&["shutdown.exe", "/r", "/t", "30"]), None).await,
            5
        );
        assert!(text(&out).contains("Access is denied.(5)"), "{}", text(&out));

        let (mut c, out, _d) = ctx(Os::Windows, AGNHOST, 151);
        let power = Arc::new(Power::default());
        c.host = Some(power.clone());
        let script = "shutdown.exe -r -t 3600";
        assert_eq!(
            programs::run(c.clone(), argv(&["powershell.exe", "-Command", script]), None).await,
            0,
            "{}",
            text(&out)
        );
        assert_eq!(programs::run(c.clone(), argv(&["shutdown", "/r"]), None).await, 1190);
        assert!(text(&out).contains("already been scheduled"), "{}", text(&out));
        assert_eq!(programs::run(c.clone(), argv(&["shutdown", "/a"]), None).await, 0);
        assert_eq!(programs::run(c.clone(), argv(&["shutdown", "/a"]), None).await, 1116);
        assert_eq!(
            programs::run(c.clone(), argv(&["shutdown", "/r", "/t", "x"]), None).await,
            87
        );
        assert_eq!(programs::run(c, argv(&["shutdown", "/r", "/s"]), None).await, 1);
    }
}
