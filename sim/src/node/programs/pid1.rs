//! Whether a container's first process ends on the runtime's stop signal.
//!
//! A separate concept because it decides how long every container takes to stop. Linux delivers
//! a signal to a PID namespace's init process only when that process installed a handler for it
//! (the kernel drops the default action for init). A busybox shell or applet started as the
//! container's command (`sh -c 'sleep 1000'`, the usual upstream test pod) installs none, so
//! containerd's SIGTERM is lost and the container runs until the SIGKILL at the end of the grace
//! period: on a real node such a pod takes its full `terminationGracePeriodSeconds` to delete,
//! and a liveness restart takes the probe's (or the pod's) grace period. Go programs (agnhost,
//! etcd, the sample API server, the GMSA webhook) and pause, nginx and httpd handle SIGTERM.
//!
//! ash (busybox) and dash exec the last simple command of a `-c` script instead of forking it
//! (`EV_EXIT`), so in `sh -c 'agnhost netexec'` or `sh -c 'mkdir /x; sleep 600'` the program of
//! that last command is PID 1 and decides. A script that sets a trap for TERM handles it.
//!
//! Windows has no such rule: containerd's stop reaches the process as CTRL_SHUTDOWN_EVENT
//! (hcsshim's signal mapping), whose default handler ends it.

use crossconf_model::os::Os;

use super::{Prog, find};
use crate::node::registry::Image;

/// Whether the process `argv` starts as PID 1 of a container of `image` on `os` ends on SIGTERM
/// (true: the runtime's stop signal ends it; false: only the kill at the grace deadline does).
pub fn ends_on_stop_signal(argv: &[String], image: &Image, os: Os) -> bool {
    if os == Os::Windows {
        return true;
    }
    match argv.first().and_then(|a| find(a, image)) {
        // A program the image lacks never starts; nothing to stop.
        None => true,
        Some(Prog::Sh) => match script(argv) {
            Some(s) if traps_term(s) => true,
            Some(s) => match last_simple_command(s) {
                Some(words) if !words.is_empty() => ends_on_stop_signal(&words, image, os),
                _ => false,
            },
            // An interactive shell reading stdin: ash is PID 1 with no handler.
            None => false,
        },
        Some(Prog::Direct | Prog::Tar) => false,
        Some(_) => true,
    }
}

/// The `-c` script of a shell's argv (`sh -c SCRIPT [NAME ARGS...]`, `sh -ec SCRIPT`).
fn script(argv: &[String]) -> Option<&str> {
    let i = argv
        .iter()
        .skip(1)
        .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))?;
    argv.get(i + 2).map(String::as_str)
}

/// Whether `script` installs a handler for SIGTERM (`trap ... TERM`, `SIGTERM` or `15`).
/// `trap '' TERM` (ignore) and `trap - TERM` (default, which init ignores) install none.
fn traps_term(script: &str) -> bool {
    script.lines().flat_map(|l| l.split(';')).any(|cmd| {
        let mut words = cmd.split_whitespace();
        if words.next() != Some("trap") {
            return false;
        }
        let action = words.next().map(|w| w.trim_matches(['"', '\''])).unwrap_or("");
        !action.is_empty()
            && action != "-"
            && words.any(|w| matches!(w.trim_matches(['"', '\'']), "TERM" | "SIGTERM" | "15"))
    })
}

/// The words of the script's last command when ash would exec it: a plain command (no
/// quoting, expansion, redirection, pipeline, background job, subshell or compound command)
/// after the last `;`, `&&`, `||` or newline. `exec` in front of it changes nothing.
fn last_simple_command(script: &str) -> Option<Vec<String>> {
    let trimmed = script.trim_end().trim_end_matches(';');
    let last = trimmed
        .rsplit(['\n', ';'])
        .next()?
        .rsplit("&&")
        .next()?
        .rsplit("||")
        .next()?
        .trim();
    if last.is_empty() || last.contains(['|', '&', '<', '>', '$', '`', '(', ')', '{', '}', '"', '\'', '\\']) {
        return None;
    }
    let mut words: Vec<String> = last.split_whitespace().map(str::to_string).collect();
    if matches!(
        words.first().map(String::as_str),
        Some("do" | "done" | "then" | "fi" | "else" | "esac" | "while" | "until" | "for" | "if")
    ) {
        return None;
    }
    if words.first().map(String::as_str) == Some("exec") {
        words.remove(0);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_string()).collect()
    }

    fn ends(image: &str, os: Os, a: &[&str]) -> bool {
        let reference = match image {
            "agnhost" => "registry.k8s.io/e2e-test-images/agnhost:2.53",
            _ => "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
        };
        let img = registry::resolve(reference, os, Some("10.0.20348"), &[]).expect("image");
        ends_on_stop_signal(&argv(a), &img, os)
    }

    #[test]
    fn a_busybox_sleep_ignores_sigterm_on_linux_only() {
        assert!(!ends("busybox", Os::Linux, &["/bin/sh", "-c", "sleep 1000"]));
        assert!(!ends("busybox", Os::Linux, &["sleep", "3600"]));
        assert!(!ends(
            "busybox",
            Os::Linux,
            &["sh", "-c", "echo ok >/tmp/health; sleep 600"]
        ));
        assert!(!ends(
            "busybox",
            Os::Linux,
            &["sh", "-c", "while true; do sleep 1; done"]
        ));
        assert!(ends("busybox", Os::Windows, &["/bin/sh", "-c", "sleep 1000"]));
    }

    #[test]
    fn programs_with_handlers_end_even_behind_a_shell() {
        assert!(ends("agnhost", Os::Linux, &["/agnhost", "pause"]));
        assert!(ends(
            "agnhost",
            Os::Linux,
            &["/bin/sh", "-c", "mkdir -p /x && exec /agnhost netexec"]
        ));
        assert!(ends(
            "busybox",
            Os::Linux,
            &["sh", "-c", "trap 'exit 0' TERM; sleep 600"]
        ));
        for ignored in ["trap '' TERM; sleep 600", "trap - TERM; sleep 600"] {
            assert!(!ends("busybox", Os::Linux, &["sh", "-c", ignored]), "{ignored}");
        }
        assert!(!ends(
            "agnhost",
            Os::Linux,
            &["/bin/sh", "-c", "/agnhost netexec | tee /log"]
        ));
    }
}
