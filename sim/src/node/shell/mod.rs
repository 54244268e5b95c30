//! The shells of the test images: busybox `sh -c`, Windows `cmd /c` and `powershell -Command`,
//! interpreting the commands the cases run (echo, type/cat, dir/ls, hostname, exit codes,
//! sleeps, redirects into volume files, `ipconfig /all`, `nslookup`, `curl`/`wget`, `nc`,
//! `ping`, env/set) against the container's file view and the simulated network.
//!
//! A command the simulator does not emulate fails the way the real shell fails for a missing
//! program (`sh: x: not found`, cmd's "is not recognized…", PowerShell's "The term … is not
//! recognized…"), with a note that the simulator is the reason. Nothing pretends to succeed.
//!
//! Split by concept: `sh_parse` and `cmd_parse` turn sh and cmd.exe lines into a command
//! tree, `interp` runs that tree (expansion, redirects, pipes, control flow), `builtins`
//! dispatches commands and holds the file and test built-ins, `netutils` the network tools
//! and `powershell` the PowerShell subset. This file keeps the interpreter state, the output
//! plumbing and the entry points.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::node::fs::FsError;
use crate::node::programs::{self, Ctx, Output, Stdin, Stream};
use crossconf_model::os::Os;

use cmd_parse::parse_cmd;
use powershell::ps_block;
use sh_parse::parse_sh;

mod accounts;
mod builtins;
mod cmd_parse;
mod domain;
mod hexdump;
mod interp;
mod netutils;
mod powershell;
mod ps_flow;
mod ps_objects;
mod sh_parse;
mod shutdown;
mod textutils;

pub use sh_parse::SyntaxError;

/// The shell language a command line is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// busybox sh.
    Sh,
    /// cmd.exe.
    Cmd,
    /// PowerShell.
    Ps,
}

/// A buffer shared between a command and whoever reads its output.
type SharedBuf = Arc<Mutex<Vec<u8>>>;

/// Where a command's output goes.
#[derive(Clone)]
enum Sink {
    Pass(Output, Stream),
    Buf(Arc<Mutex<Vec<u8>>>),
    Null,
}

impl Sink {
    fn write(&self, d: &[u8]) {
        match self {
            Sink::Pass(o, s) => o.write(*s, d),
            Sink::Buf(b) => b.lock().expect("sink lock").extend_from_slice(d),
            Sink::Null => {}
        }
    }
}

#[derive(Clone)]
struct Io {
    out: Sink,
    err: Sink,
    stdin: Stdin,
}

/// The shell interpreter state for one script.
struct Interp {
    ctx: Ctx,
    dialect: Dialect,
    vars: BTreeMap<String, String>,
    last: i32,
    exit: Option<i32>,
    cwd: String,
    /// PowerShell variables holding objects (lower-case names), beside the text ones.
    objects: BTreeMap<String, ps_objects::PsValue>,
    /// PowerShell background jobs (Start-Job).
    jobs: Vec<tokio::task::JoinHandle<i32>>,
}

/// Why a command did not run (it was interrupted by a stop).
const STOPPED: i32 = -1;

fn is_assignment(s: &str) -> bool {
    s.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn is_null_device(p: &str) -> bool {
    p == "/dev/null" || p.eq_ignore_ascii_case("nul") || p.eq_ignore_ascii_case("$null")
}

fn parse_secs(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| *v >= 0.0)
        .map(|v| Duration::from_secs_f64(v * mult))
}

fn fs_msg(os: Os, e: &FsError) -> &'static str {
    match (os, e) {
        (_, FsError::ReadOnly { msg, .. }) => msg,
        (Os::Linux, FsError::NotFound(_)) => "No such file or directory",
        (Os::Windows, FsError::NotFound(_)) => "The system cannot find the path specified.",
        (Os::Linux, FsError::IsDirectory(_)) => "Is a directory",
        (Os::Windows, FsError::IsDirectory(_)) => "Access is denied.",
        (Os::Linux, FsError::Io { .. }) => "I/O error",
        (Os::Windows, FsError::Io { .. }) => "The request could not be performed because of an I/O device error.",
    }
}

fn io_for(ctx: &Ctx, stdin: Stdin) -> Io {
    Io {
        out: Sink::Pass(ctx.out.clone(), Stream::Stdout),
        err: Sink::Pass(ctx.out.clone(), Stream::Stderr),
        stdin,
    }
}

fn finish(interp: &Interp, code: i32) -> i32 {
    if code == STOPPED || interp.ctx.cancel.is_cancelled() && interp.exit.is_none() {
        programs::terminated_code(interp.ctx.pod.os)
    } else {
        interp.exit.unwrap_or(code)
    }
}

/// Runs an `sh` script.
pub async fn run_sh_script(ctx: Ctx, script: &str, stdin: Option<Stdin>) -> i32 {
    let _busy = ctx.usage.busy(1);
    let io = io_for(&ctx, stdin.unwrap_or_else(Stdin::empty));
    let node = match parse_sh(script) {
        Ok(n) => n,
        Err(e) => {
            ctx.out.err_line(&e.0);
            return 2;
        }
    };
    let mut it = Interp::new(ctx, Dialect::Sh);
    let code = it.run_node(&node, io).await;
    finish(&it, code)
}

/// Runs `sh ARGS`: `-c SCRIPT`, a script file, or commands from stdin.
pub async fn run_sh_argv(ctx: Ctx, args: &[String], stdin: Option<Stdin>) -> i32 {
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-c" => {
                let Some(script) = args.get(i + 1) else {
                    ctx.out.err_line("sh: -c requires an argument");
                    return 2;
                };
                return run_sh_script(ctx, script, stdin).await;
            }
            "-e" | "-x" | "-u" | "-ex" | "-eu" => i += 1,
            file => {
                return match ctx.fs.read(file) {
                    Ok(b) => {
                        let script = String::from_utf8_lossy(&b).to_string();
                        run_sh_script(ctx, &script, stdin).await
                    }
                    Err(_) => {
                        ctx.out
                            .err_line(&format!("sh: can't open '{file}': No such file or directory"));
                        2
                    }
                };
            }
        }
    }
    // No script: sh reads commands from stdin; a container without stdin exits at once.
    run_sh_stdin(ctx, stdin.unwrap_or_else(Stdin::empty)).await
}

/// Whether a parse error only means the command goes on in the next line (an open quote, an
/// `if` without its `fi`), so a shell reading stdin waits for more rather than failing.
fn incomplete(e: &sh_parse::SyntaxError) -> bool {
    ["unterminated", "expected \"", "unexpected newline"]
        .iter()
        .any(|m| e.0.contains(m))
}

/// `sh` reading its commands from stdin as they arrive: each complete command runs before the
/// next line is read, with the shell's variables kept between them, and commands that read
/// stdin (`cat`, `read`) take the lines that follow, as with a real shell's file descriptor 0.
async fn run_sh_stdin(ctx: Ctx, stdin: Stdin) -> i32 {
    let _busy = ctx.usage.busy(1);
    let io = io_for(&ctx, stdin.clone());
    let mut it = Interp::new(ctx, Dialect::Sh);
    let mut text = String::new();
    let mut code = 0;
    loop {
        let line = tokio::select! {
            l = stdin.read_line() => l,
            () = it.ctx.cancel.cancelled() => return finish(&it, STOPPED),
        };
        let Some(line) = line else {
            if !text.trim().is_empty()
                && let Err(e) = parse_sh(&text)
            {
                it.ctx.out.err_line(&e.0);
                return 2;
            }
            return finish(&it, code);
        };
        text.push_str(&String::from_utf8_lossy(&line));
        let node = match parse_sh(&text) {
            Ok(n) => n,
            Err(e) if incomplete(&e) => continue,
            Err(e) => {
                it.ctx.out.err_line(&e.0);
                text.clear();
                code = 2;
                continue;
            }
        };
        text.clear();
        code = it.run_node(&node, io.clone()).await;
        it.last = code;
        if code == STOPPED || it.exit.is_some() {
            return finish(&it, code);
        }
    }
}

/// Runs a cmd.exe command line.
pub async fn run_cmd_script(ctx: Ctx, script: &str) -> i32 {
    let _busy = ctx.usage.busy(1);
    let node = parse_cmd(script, &ctx.env);
    let io = io_for(&ctx, Stdin::empty());
    let mut it = Interp::new(ctx, Dialect::Cmd);
    let code = it.run_node(&node, io).await;
    finish(&it, code)
}

/// Runs `cmd ARGS` (`/c`, `/S /C "…"`, `/k`).
pub async fn run_cmd_argv(ctx: Ctx, args: &[String]) -> i32 {
    let mut strip = false;
    for (i, a) in args.iter().enumerate() {
        let l = a.to_ascii_lowercase();
        if l == "/s" {
            strip = true;
            continue;
        }
        if l == "/c" || l == "/k" || l == "/r" {
            let mut script = args[i + 1..].join(" ");
            let trimmed = script.trim();
            if (strip || args.len() == i + 2)
                && trimmed.len() >= 2
                && trimmed.starts_with('"')
                && trimmed.ends_with('"')
                && args.len() == i + 2
            {
                script = trimmed[1..trimmed.len() - 1].to_string();
            }
            return run_cmd_script(ctx, &script).await;
        }
        if l == "/q" || l == "/d" || l.starts_with("/e") || l.starts_with("/v") || l.starts_with("/f") {
            continue;
        }
    }
    // Interactive cmd with no console input exits at once, as in a container without stdin.
    ctx.out.line("Microsoft Windows [Version 10.0]");
    0
}

/// Runs a single program without a shell (a busybox applet or a Windows system program).
pub async fn run_direct(ctx: Ctx, dialect: Dialect, argv: Vec<String>, stdin: Option<Stdin>) -> i32 {
    let io = io_for(&ctx, stdin.unwrap_or_else(Stdin::empty));
    let mut it = Interp::new(ctx, dialect);
    let code = it.command(argv, None, &io).await;
    finish(&it, code)
}

/// Runs `powershell ARGS` (`-Command …`, `-c …`), interpreting a small PowerShell subset:
/// statements separated by `;`, `while ($true) { … }`, `exit N`, Write-Output/Write-Host/echo,
/// Start-Sleep, Get-Content, Set-Content/Add-Content, Out-File, New-Item, Test-Path,
/// Get-ChildItem, Invoke-WebRequest (with `.Content`/`.StatusCode`), Resolve-DnsName,
/// `$env:NAME`, and the Windows programs.
pub async fn run_powershell_argv(ctx: Ctx, args: &[String]) -> i32 {
    let mut i = 0;
    let mut script = None;
    while i < args.len() {
        let l = args[i].to_ascii_lowercase();
        match l.as_str() {
            "-command" | "-c" => {
                script = Some(args[i + 1..].join(" "));
                break;
            }
            "-executionpolicy" | "-outputformat" | "-inputformat" => i += 2,
            l if l.starts_with('-') => i += 1,
            _ => {
                script = Some(args[i..].join(" "));
                break;
            }
        }
    }
    let Some(script) = script else {
        return 0;
    };
    let _busy = ctx.usage.busy(1);
    let io = io_for(&ctx, Stdin::empty());
    let mut it = Interp::new(ctx, Dialect::Ps);
    let code = ps_block(&mut it, &script, &io).await;
    finish(&it, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_secs("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_secs("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_secs("x"), None);
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn sh_reads_commands_from_stdin_as_they_come() {
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 110);
        let (w, r) = Stdin::pipe();
        let run = tokio::spawn(programs::run(c, argv(&["sh"]), Some(r)));
        w.write(b"X=42\necho x=$X\nif true; then\n");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(text(&out), "x=42\n", "the first command ran before the rest arrived");
        w.write(b"  echo in-if\nfi\nread A B\none two three\necho $B/$A\ncat\n");
        w.write(b"copied\n");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(text(&out), "x=42\nin-if\ntwo three/one\ncopied\n");
        drop(w);
        assert_eq!(run.await.unwrap(), 0, "cat saw end of file, and so did sh");
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 111);
        let script = b"echo a\nif true; then\n  echo in-if\nfi\nread L\nfrom stdin\necho got=$L\nexit 7\necho b\n";
        let code = programs::run(c, argv(&["sh"]), Some(Stdin::bytes(script.to_vec()))).await;
        assert_eq!((code, text(&out).as_str()), (7, "a\nin-if\ngot=from stdin\n"));
    }

    #[tokio::test]
    async fn cmd_echo_and_exit_codes() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 100);
        assert_eq!(programs::run(c, argv(&["cmd", "/c", "echo", "hi"]), None).await, 0);
        assert_eq!(text(&out), "hi\r\n");
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 101);
        assert_eq!(
            programs::run(c, argv(&["cmd", "/S", "/C", "echo %GREETING% & exit 3"]), None).await,
            3
        );
        assert_eq!(text(&out), "hello \r\n");
    }

    #[tokio::test]
    async fn sh_echo_loops_and_files() {
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 102);
        let script = "for i in 1 2; do echo $i >> /mnt/rw/f; done; cat /mnt/rw/f && echo $GREETING; exit 4";
        assert_eq!(programs::run(c, argv(&["sh", "-c", script]), None).await, 4);
        assert_eq!(text(&out), "1\n2\nhello\n");
    }

    #[tokio::test]
    async fn rm_takes_absolute_paths_and_del_takes_switches() {
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 180);
        let script = "echo x > /mnt/rw/g && rm -f /mnt/rw/g && cat /mnt/rw/g";
        assert_eq!(programs::run(c, argv(&["sh", "-c", script]), None).await, 1);
        assert!(text(&out).contains("No such file"), "{}", text(&out));
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 181);
        let script = "echo x> C:\\mnt\\rw\\g & del /f C:\\mnt\\rw\\g & type C:\\mnt\\rw\\g";
        assert_eq!(programs::run(c, argv(&["cmd", "/c", script]), None).await, 1);
        assert!(!text(&out).contains('x'), "{}", text(&out));
    }

    #[tokio::test]
    async fn read_only_mount_denies_writes_on_windows() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 103);
        let code = programs::run(
            c,
            argv(&["cmd", "/c", "echo windows-volume-test> C:\\mnt\\ro\\file.txt"]),
            None,
        )
        .await;
        assert_eq!(code, 1);
        assert!(text(&out).contains("Access is denied."), "{}", text(&out));
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 104);
        assert_eq!(
            programs::run(c, argv(&["cmd", "/c", "type C:\\mnt\\ro\\data.txt"]), None).await,
            0
        );
        assert_eq!(text(&out), "read-only data\n");
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 105);
        assert_eq!(
            programs::run(c, argv(&["sh", "-c", "echo x > /mnt/ro/file.txt"]), None).await,
            1
        );
        assert!(text(&out).contains("Read-only file system"), "{}", text(&out));
    }

    #[tokio::test]
    async fn unknown_commands_fail_with_the_shells_message() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 106);
        assert_eq!(programs::run(c, argv(&["cmd", "/c", "frobnicate"]), None).await, 9009);
        assert!(text(&out).contains("'frobnicate' is not recognized"), "{}", text(&out));
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 107);
        assert_eq!(programs::run(c, argv(&["sh", "-c", "frobnicate"]), None).await, 127);
        assert!(text(&out).contains("sh: frobnicate: not found"));
        let (c, _out, _d) = ctx(Os::Linux, "registry.k8s.io/pause:3.10", 108);
        assert!(programs::find("sh", &c.image).is_none(), "pause has no shell");
    }

    #[tokio::test]
    async fn powershell_subset() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 109);
        let code = programs::run(c, argv(&["powershell", "-Command", "Write-Output $env:GREETING; Set-Content -Path C:\\mnt\\rw\\p.txt -Value abc; Get-Content C:\\mnt\\rw\\p.txt; exit 2"]), None).await;
        assert_eq!(code, 2);
        assert_eq!(text(&out), "hello\r\nabc\r\n");
    }

    #[tokio::test]
    async fn ping_outside_model_by_os() {
        let ext = crate::addr::MODELLED_EXTERNAL_IPS[0].to_string();
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 110);
        assert_eq!(
            programs::run(c, argv(&["cmd", "/c", &format!("ping -n 1 -w 10 {ext}")]), None).await,
            1
        );
        assert!(text(&out).contains("Request timed out."), "{}", text(&out));
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 111);
        assert_eq!(
            programs::run(c, argv(&["sh", "-c", &format!("ping -c 1 {ext}")]), None).await,
            0
        );
        assert!(text(&out).contains("1 packets received"), "{}", text(&out));
    }

    #[tokio::test]
    async fn stop_ends_sleep_loops() {
        let (c, _out, _d) = ctx(Os::Linux, AGNHOST, 112);
        let cancel = c.cancel.clone();
        let h = tokio::spawn(programs::run(
            c,
            argv(&["sh", "-c", "while true; do sleep 1; done"]),
            None,
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
        assert_eq!(h.await.unwrap(), 143);
    }
}
