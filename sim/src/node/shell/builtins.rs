//! The command dispatcher (`command`): shell built-ins and emulated programs by dialect
//! (echo, exit, cd, set/export, sleep, type/cat, dir/ls, touch, test/`[`, grep, hostname,
//! env, …) and the nested shells, falling back to the image's programs and the shells' "not
//! found" messages. Separate from the interpreter core because it is the table of what each
//! shell can run.

use std::time::Duration;

use futures::future::BoxFuture;

use super::{Dialect, Interp, Io, STOPPED, fs_msg, parse_secs, run_cmd_argv, run_powershell_argv, run_sh_argv};
use crate::node::fs::FsError;
use crate::node::programs::{self, Ctx, Output, Stream, base_name};
use crate::node::registry::Tool;
use crossconf_model::os::Os;

impl Interp {
    pub(super) fn command<'a>(&'a mut self, argv: Vec<String>, raw: Option<&'a str>, io: &'a Io) -> BoxFuture<'a, i32> {
        Box::pin(async move {
            let name = base_name(&argv[0]);
            let args: Vec<String> = argv[1..].to_vec();
            let d = self.dialect;
            let cmd_builtin = d == Dialect::Cmd;
            let sh_builtin = d == Dialect::Sh;
            // cmd.exe reads `echo.` (and `echo.text`) as echo with the text after the dot.
            let name = if cmd_builtin && name.starts_with("echo.") {
                "echo".to_string()
            } else {
                name
            };
            match name.as_str() {
                "echo" if cmd_builtin => {
                    let text = raw.map(|r| r.trim_start()).and_then(|r| r.get(4..)).unwrap_or("");
                    if text.is_empty() || text.trim().is_empty() && !text.starts_with('.') {
                        self.line(io, "ECHO is on.");
                    } else if let Some(rest) = text.strip_prefix('.') {
                        self.line(io, rest);
                    } else {
                        self.line(io, &text[1..]);
                    }
                    0
                }
                "echo" if sh_builtin || self.has_applet("echo") => {
                    let (newline, words) = match args.first().map(String::as_str) {
                        Some("-n") => (false, &args[1..]),
                        _ => (true, &args[..]),
                    };
                    let mut s = words.join(" ");
                    if newline {
                        s.push('\n');
                    }
                    self.out(io, &s);
                    0
                }
                "exit" if sh_builtin || cmd_builtin => {
                    let code = args
                        .iter()
                        .find(|a| !a.eq_ignore_ascii_case("/b"))
                        .and_then(|a| a.parse().ok())
                        .unwrap_or(if sh_builtin { self.last } else { 0 });
                    self.exit = Some(code);
                    code
                }
                "read" if sh_builtin => {
                    // `read [-r] NAME...`: one line of stdin split on whitespace, the last name
                    // taking the rest; status 1 at end of file.
                    let names: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
                    let Some(line) = io.stdin.read_line().await else {
                        return 1;
                    };
                    let text = String::from_utf8_lossy(&line);
                    let mut rest = text.trim_end_matches('\n').trim_start();
                    for (i, n) in names.iter().enumerate() {
                        let v = if i + 1 == names.len() {
                            std::mem::take(&mut rest).trim_end().to_string()
                        } else {
                            let (w, r) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                            rest = r.trim_start();
                            w.to_string()
                        };
                        self.vars.insert(n.to_string(), v);
                    }
                    if names.is_empty() {
                        self.vars.insert("REPLY".into(), rest.to_string());
                    }
                    0
                }
                "true" | ":" if sh_builtin || self.has_applet("true") => 0,
                "false" if sh_builtin || self.has_applet("false") => 1,
                "cd" | "chdir" if sh_builtin || cmd_builtin => {
                    let target = args.first().cloned().unwrap_or_else(|| "/".into());
                    let full = self.abs(&target);
                    if self.ctx.fs.stat(&full) == Some(true) {
                        self.cwd = full;
                        0
                    } else {
                        match d {
                            Dialect::Sh => {
                                self.err(io, &format!("sh: cd: can't cd to {target}: No such file or directory"))
                            }
                            _ => self.err(io, "The system cannot find the path specified."),
                        }
                        1
                    }
                }
                "export" if sh_builtin => {
                    for a in &args {
                        if let Some((k, v)) = a.split_once('=') {
                            self.vars.insert(k.into(), v.into());
                        }
                    }
                    0
                }
                "set" if cmd_builtin => match args.first() {
                    Some(a) if a.contains('=') => {
                        let (k, v) = a.split_once('=').unwrap_or_default();
                        self.vars.insert(k.into(), v.into());
                        0
                    }
                    Some(prefix) => {
                        let lines: Vec<String> = self
                            .vars
                            .iter()
                            .filter(|(k, _)| k.to_ascii_lowercase().starts_with(&prefix.to_ascii_lowercase()))
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect();
                        if lines.is_empty() {
                            self.err(io, &format!("Environment variable {prefix} not defined"));
                            1
                        } else {
                            for l in lines {
                                self.line(io, &l);
                            }
                            0
                        }
                    }
                    None => {
                        let lines: Vec<String> = self.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        for l in lines {
                            self.line(io, &l);
                        }
                        0
                    }
                },
                "env" | "printenv" if self.has_applet(&name) => {
                    if let Some(k) = args.first() {
                        return match self.vars.get(k) {
                            Some(v) => {
                                self.line(io, &v.clone());
                                0
                            }
                            None => 1,
                        };
                    }
                    let lines: Vec<String> = self.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    for l in lines {
                        self.line(io, &l);
                    }
                    0
                }
                "ver" if cmd_builtin => {
                    let build = match &self.ctx.image.platform {
                        crate::node::registry::Platform::Windows(b) => b.clone(),
                        crate::node::registry::Platform::Linux => "unknown".into(),
                    };
                    self.line(io, "");
                    self.line(io, &format!("Microsoft Windows [Version {build}]"));
                    0
                }
                "hostname" if self.has_applet("hostname") || self.has_windows_program("hostname") => {
                    self.line(io, &self.ctx.pod.hostname.clone());
                    0
                }
                "whoami" if self.has_applet("whoami") || self.has_windows_program("whoami") => self.whoami(io),
                "net" if self.has_windows_program("net") => self.net(&args, io),
                "nltest" if self.has_windows_program("nltest") => self.nltest(&args, io).await,
                "shutdown" if self.has_windows_program("shutdown") => self.shutdown(&args, io),
                "pwd" if sh_builtin => {
                    self.line(io, &self.cwd.clone());
                    0
                }
                "sleep" if self.has_applet("sleep") => {
                    let secs = args.first().map(String::as_str).unwrap_or("");
                    let dur = if secs == "infinity" {
                        Some(Duration::from_secs(u64::MAX / 4))
                    } else {
                        parse_secs(secs)
                    };
                    match dur {
                        Some(d) => {
                            if self.sleep(d).await {
                                0
                            } else {
                                STOPPED
                            }
                        }
                        None => {
                            self.err(io, &format!("sleep: invalid number '{secs}'"));
                            1
                        }
                    }
                }
                "timeout" if self.has_windows_program("timeout") => {
                    let n = args
                        .iter()
                        .skip_while(|a| !a.eq_ignore_ascii_case("/t"))
                        .nth(1)
                        .and_then(|v| v.parse::<i64>().ok());
                    match n {
                        Some(n) if n >= 0 => {
                            if self.sleep(Duration::from_secs(n as u64)).await {
                                0
                            } else {
                                STOPPED
                            }
                        }
                        Some(_) => {
                            if self.sleep(Duration::from_secs(u64::MAX / 4)).await {
                                0
                            } else {
                                STOPPED
                            }
                        }
                        None => {
                            self.err(
                                io,
                                "ERROR: Invalid syntax. Default option is not allowed more than '1' time(s).",
                            );
                            1
                        }
                    }
                }
                "cat" if self.has_applet("cat") => self.cat(&args, io, "cat").await,
                "hexdump" if self.has_applet("hexdump") => {
                    let mut code = 0;
                    for a in args.iter().filter(|a| !a.starts_with('-')) {
                        match self.ctx.fs.read(&self.abs(a)) {
                            Ok(b) => io.out.write(super::hexdump::canonical(&b).as_bytes()),
                            Err(e) => {
                                self.fs_error(io, "hexdump", a, &e);
                                code = 1;
                            }
                        }
                    }
                    code
                }
                "type" if cmd_builtin => self.cat(&args, io, "type").await,
                "ls" if self.has_applet("ls") => self.ls(&args, io),
                "dir" if cmd_builtin => self.ls(&args, io),
                "mkdir" | "md" if (name == "mkdir" && self.has_applet("mkdir")) || cmd_builtin => {
                    let mut code = 0;
                    for a in args.iter().filter(|a| !a.starts_with('-')) {
                        if let Err(e) = self.ctx.fs.mkdir(&self.abs(a)) {
                            self.fs_error(io, &name, a, &e);
                            code = 1;
                        }
                    }
                    code
                }
                "touch" if self.has_applet("touch") => {
                    let mut code = 0;
                    for a in &args {
                        if let Err(e) = self.ctx.fs.write(&self.abs(a), b"", true) {
                            self.fs_error(io, "touch", a, &e);
                            code = 1;
                        }
                    }
                    code
                }
                "rm" | "del" if (name == "rm" && self.has_applet("rm")) || (name == "del" && cmd_builtin) => {
                    let mut code = 0;
                    // `rm` takes `-f`-style flags and absolute paths start with `/`; `del` takes
                    // `/f`-style switches.
                    let flag = |a: &&String| {
                        if name == "rm" {
                            a.starts_with('-')
                        } else {
                            a.starts_with('/')
                        }
                    };
                    for a in args.iter().filter(|a| !flag(a)) {
                        if let Err(e) = self.ctx.fs.remove(&self.abs(a)) {
                            self.fs_error(io, &name, a, &e);
                            code = 1;
                        }
                    }
                    code
                }
                "test" | "[" if sh_builtin => {
                    let mut a = args.clone();
                    if name == "[" && a.last().map(String::as_str) == Some("]") {
                        a.pop();
                    }
                    self.test(&a)
                }
                "seq" if self.has_applet("seq") => {
                    let nums: Vec<i64> = args.iter().filter_map(|a| a.parse().ok()).collect();
                    let (from, to) = match nums.as_slice() {
                        [to] => (1, *to),
                        [from, to, ..] => (*from, *to),
                        _ => (1, 0),
                    };
                    for n in from..=to {
                        self.line(io, &n.to_string());
                    }
                    0
                }
                "grep" | "findstr" if self.has_applet("grep") || self.has_windows_program("findstr") => {
                    // grep's options start with `-`, findstr's with `/`: a grep pattern may be
                    // a path (`df | grep /usr/share/volumeshare`).
                    let is_option = |a: &str| {
                        if name == "findstr" {
                            a.starts_with('/')
                        } else {
                            a.starts_with('-')
                        }
                    };
                    let (invert, pats): (bool, Vec<&String>) = (
                        args.iter().any(|a| a == "-v" || a.eq_ignore_ascii_case("/v")),
                        args.iter().filter(|a| !is_option(a)).collect(),
                    );
                    let Some(pat) = pats.first() else { return 2 };
                    let text = String::from_utf8_lossy(&io.stdin.read_all().await).to_string();
                    let mut found = false;
                    for l in text.lines() {
                        if l.contains(pat.as_str()) != invert {
                            found = true;
                            self.line(io, l);
                        }
                    }
                    if found { 0 } else { 1 }
                }
                "df" if self.has_applet("df") => self.df(&args, io),
                "awk" if self.has_applet("awk") => self.awk(&args, io).await,
                "wc" if self.has_applet("wc") => {
                    let text = String::from_utf8_lossy(&io.stdin.read_all().await).to_string();
                    if args.iter().any(|a| a == "-l") {
                        self.line(io, &text.lines().count().to_string());
                    } else {
                        self.line(
                            io,
                            &format!(
                                "{} {} {}",
                                text.lines().count(),
                                text.split_whitespace().count(),
                                text.len()
                            ),
                        );
                    }
                    0
                }
                "head" | "tail" if self.has_applet(&name) && byte_count(&args).is_some() => {
                    // `-c`: bytes, not lines (kubectl cp --retries resumes with `tail -c+N`).
                    let Some((from_start, n)) = byte_count(&args) else {
                        return 1;
                    };
                    let data = match args
                        .iter()
                        .rfind(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
                    {
                        Some(f) => match self.ctx.fs.read(&self.abs(f)) {
                            Ok(b) => b,
                            Err(e) => {
                                self.fs_error(io, &name, f, &e);
                                return 1;
                            }
                        },
                        None => io.stdin.read_all().await,
                    };
                    let len = data.len();
                    let range = match (name.as_str(), from_start) {
                        ("tail", true) => n.saturating_sub(1).min(len)..len,
                        ("tail", false) => len.saturating_sub(n)..len,
                        _ => 0..n.min(len),
                    };
                    io.out.write(&data[range]);
                    0
                }
                "head" | "tail" if self.has_applet(&name) => {
                    let n = args
                        .iter()
                        .position(|a| a == "-n")
                        .and_then(|i| args.get(i + 1))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(10usize);
                    let text = match args
                        .iter()
                        .rfind(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
                    {
                        Some(f) => match self.ctx.fs.read(&self.abs(f)) {
                            Ok(b) => String::from_utf8_lossy(&b).to_string(),
                            Err(e) => {
                                self.fs_error(io, &name, f, &e);
                                return 1;
                            }
                        },
                        None => String::from_utf8_lossy(&io.stdin.read_all().await).to_string(),
                    };
                    let lines: Vec<&str> = text.lines().collect();
                    let pick = if name == "head" {
                        &lines[..n.min(lines.len())]
                    } else {
                        &lines[lines.len().saturating_sub(n)..]
                    };
                    for l in pick {
                        self.line(io, l);
                    }
                    0
                }
                "tee" if self.has_applet("tee") => {
                    let data = io.stdin.read_all().await;
                    io.out.write(&data);
                    for f in args.iter().filter(|a| !a.starts_with('-')) {
                        if let Err(e) = self.ctx.fs.write(&self.abs(f), &data, args.iter().any(|a| a == "-a")) {
                            self.fs_error(io, "tee", f, &e);
                            return 1;
                        }
                    }
                    0
                }
                "date" if self.has_applet("date") => {
                    self.line(
                        io,
                        &jiff::Timestamp::now().strftime("%a %b %e %H:%M:%S UTC %Y").to_string(),
                    );
                    0
                }
                "uname" if self.has_applet("uname") => {
                    // busybox-w32 (the upstream Windows busybox image) reports Windows_NT and,
                    // for `-o`, MS/Windows.
                    let windows = self.ctx.pod.os == Os::Windows;
                    let text = match (windows, args.iter().any(|a| a == "-a"), args.iter().any(|a| a == "-o")) {
                        (true, true, _) => format!("Windows_NT {} 10.0 20348 x86_64 MS/Windows", self.ctx.pod.hostname),
                        (true, false, true) => "MS/Windows".into(),
                        (true, false, false) => "Windows_NT".into(),
                        (false, true, _) => "Linux crossconf-sim 6.1.0 #1 SMP x86_64 GNU/Linux".into(),
                        (false, false, true) => "GNU/Linux".into(),
                        (false, false, false) => "Linux".into(),
                    };
                    self.line(io, &text);
                    0
                }
                "id" if self.has_applet("id") => {
                    let u = self.ctx.user.clone();
                    let uid: u32 = if u == "root" { 0 } else { u.parse().unwrap_or(1000) };
                    self.line(io, &format!("uid={uid}({u}) gid={uid} groups={uid}"));
                    0
                }
                "ipconfig" if self.has_windows_program("ipconfig") => self.ipconfig(&args, io),
                "ip" | "ifconfig" if self.has_applet(&name) => {
                    let ip = self.ctx.pod.ip;
                    self.line(io, "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536");
                    self.line(io, "    inet 127.0.0.1/8 scope host lo");
                    self.line(io, "2: eth0@if1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500");
                    self.line(io, &format!("    inet {ip}/24 scope global eth0"));
                    0
                }
                "nslookup" if self.has_applet("nslookup") || self.has_windows_program("nslookup") => {
                    self.nslookup(&args, io).await
                }
                "curl" if self.has_applet("curl") || self.has_windows_program("curl") => self.curl(&args, io).await,
                "wget" if self.has_applet("wget") => self.wget(&args, io).await,
                "nc" if self.has_applet("nc") => self.nc(&args, io).await,
                "ping" if self.has_applet("ping") || self.has_windows_program("ping") => self.ping(&args, io).await,
                "powershell" | "pwsh" if self.ctx.image.has(Tool::PowerShell) => {
                    let sub = self.sub_ctx(io);
                    run_powershell_argv(sub, &args).await
                }
                "cmd" if self.ctx.image.has(Tool::Cmd) => {
                    let sub = self.sub_ctx(io);
                    run_cmd_argv(sub, &args).await
                }
                "sh" if self.ctx.image.has(Tool::Busybox) => {
                    let sub = self.sub_ctx(io);
                    run_sh_argv(sub, &args, Some(io.stdin.clone())).await
                }
                _ => {
                    if programs::find(&argv[0], &self.ctx.image).is_some()
                        && !matches!(programs::find(&argv[0], &self.ctx.image), Some(programs::Prog::Direct))
                    {
                        let sub = self.sub_ctx(io);
                        return programs::run(sub, argv.clone(), Some(io.stdin.clone())).await;
                    }
                    let a0 = &argv[0];
                    match d {
                        Dialect::Sh => {
                            self.err(
                                io,
                                &format!(
                                    "sh: {a0}: not found (the simulator does not emulate {a0:?} in image {})",
                                    self.ctx.image.name
                                ),
                            );
                            127
                        }
                        Dialect::Cmd => {
                            self.err(
                                io,
                                &format!("'{a0}' is not recognized as an internal or external command,"),
                            );
                            self.err(io, &format!("operable program or batch file. (the simulator does not emulate {a0:?} in image {})", self.ctx.image.name));
                            9009
                        }
                        Dialect::Ps => {
                            self.err(io, &format!("{a0} : The term '{a0}' is not recognized as the name of a cmdlet, function, script file, or operable program. (the simulator does not emulate {a0:?})"));
                            1
                        }
                    }
                }
            }
        })
    }

    fn sub_ctx(&self, io: &Io) -> Ctx {
        let (o, e) = (io.out.clone(), io.err.clone());
        let mut env = self.ctx.env.clone();
        env.extend(self.vars.clone());
        Ctx {
            out: Output::new(move |s, d| match s {
                Stream::Stdout => o.write(d),
                Stream::Stderr => e.write(d),
            }),
            env,
            cwd: self.cwd.clone(),
            ..self.ctx.clone()
        }
    }

    fn fs_error(&self, io: &Io, cmd: &str, path: &str, e: &FsError) {
        match self.dialect {
            Dialect::Sh => self.err(io, &format!("{cmd}: {path}: {}", fs_msg(Os::Linux, e))),
            Dialect::Cmd => self.err(io, fs_msg(Os::Windows, e)),
            Dialect::Ps => self.err(io, &format!("{cmd} : {}", fs_msg(Os::Windows, e))),
        }
    }

    /// `cat FILE...`, or without files a copy of stdin made as it arrives, so an interactive
    /// `kubectl exec -i ... cat` echoes each line back before the next is typed.
    async fn cat(&self, args: &[String], io: &Io, cmd: &str) -> i32 {
        let files: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        if files.is_empty() {
            loop {
                tokio::select! {
                    chunk = io.stdin.read_chunk() => match chunk {
                        Some(c) => io.out.write(&c),
                        None => return 0,
                    },
                    () = self.ctx.cancel.cancelled() => return STOPPED,
                }
            }
        }
        let mut code = 0;
        for f in files {
            match self.ctx.fs.read(&self.abs(f)) {
                Ok(b) => io.out.write(&b),
                Err(e) => {
                    code = 1;
                    match (self.dialect, &e) {
                        (Dialect::Sh, FsError::NotFound(_)) => {
                            self.err(io, &format!("{cmd}: can't open '{f}': No such file or directory"))
                        }
                        (Dialect::Cmd, FsError::NotFound(_)) => {
                            self.err(io, "The system cannot find the file specified.")
                        }
                        _ => self.fs_error(io, cmd, f, &e),
                    }
                }
            }
        }
        code
    }

    pub(super) fn ls(&self, args: &[String], io: &Io) -> i32 {
        let paths: Vec<&String> = args
            .iter()
            .filter(|a| {
                !a.starts_with('-') && !a.starts_with('/')
                    || a.starts_with("/") && self.dialect == Dialect::Sh && !a.starts_with("/-")
            })
            .collect();
        let target = paths.first().map_or(self.cwd.clone(), |p| self.abs(p));
        // busybox flags come bundled (`-lL`, `-la`): `l` asks for the long format, `L` follows
        // symlinks (the kubelet publishes ConfigMap/Secret keys as links into `..data`).
        let flags: String = args
            .iter()
            .filter(|a| a.starts_with('-') && a.len() > 1)
            .flat_map(|a| a.chars().skip(1))
            .collect();
        let (long, follow) = (flags.contains('l'), flags.contains('L'));
        match self.ctx.fs.list(&target) {
            Ok(entries) => {
                if self.dialect == Dialect::Sh {
                    for e in entries {
                        if long {
                            self.line(io, &e.long_format(follow));
                        } else {
                            self.line(io, &e.name);
                        }
                    }
                } else if args.iter().any(|a| a.eq_ignore_ascii_case("/b")) {
                    // `dir /b`: bare names, one a line.
                    for e in &entries {
                        self.line(io, &e.name);
                    }
                } else {
                    self.line(io, &format!(" Directory of {}", target.replace('/', "\\")));
                    self.line(io, "");
                    let (mut files, mut dirs) = (0, 0);
                    for e in &entries {
                        if e.is_dir {
                            dirs += 1;
                            self.line(io, &format!("01/01/2026  12:00 AM    <DIR>          {}", e.name));
                        } else {
                            files += 1;
                            self.line(io, &format!("01/01/2026  12:00 AM    {:>14} {}", e.size, e.name));
                        }
                    }
                    self.line(io, &format!("               {files} File(s)"));
                    self.line(io, &format!("               {dirs} Dir(s)"));
                }
                0
            }
            Err(e) => {
                match self.dialect {
                    Dialect::Sh => self.err(io, &format!("ls: {target}: No such file or directory")),
                    _ => {
                        let _ = e;
                        self.err(io, "File Not Found");
                    }
                }
                1
            }
        }
    }

    fn test(&self, a: &[String]) -> i32 {
        let ok = match a {
            [] => false,
            [s] => !s.is_empty(),
            [op, v] if op == "!" => v.is_empty(),
            [op, p] => match op.as_str() {
                "-f" => self.ctx.fs.stat(&self.abs(p)) == Some(false),
                "-d" => self.ctx.fs.stat(&self.abs(p)) == Some(true),
                "-e" => self.ctx.fs.stat(&self.abs(p)).is_some(),
                "-z" => p.is_empty(),
                "-n" => !p.is_empty(),
                _ => false,
            },
            [l, op, r] => match op.as_str() {
                "=" | "==" => l == r,
                "!=" => l != r,
                "-eq" | "-ne" | "-lt" | "-gt" | "-le" | "-ge" => {
                    let (Ok(x), Ok(y)) = (l.parse::<i64>(), r.parse::<i64>()) else {
                        return 2;
                    };
                    match op.as_str() {
                        "-eq" => x == y,
                        "-ne" => x != y,
                        "-lt" => x < y,
                        "-gt" => x > y,
                        "-le" => x <= y,
                        _ => x >= y,
                    }
                }
                _ => false,
            },
            _ => false,
        };
        if ok { 0 } else { 1 }
    }
}

/// The `-c` count of `head`/`tail` (`-c N`, `-cN`, `-c +N`, `-c+N`): whether it counts from
/// the start (`+`) and the number; `None` without `-c` or with a count that is not a number.
fn byte_count(args: &[String]) -> Option<(bool, usize)> {
    let i = args.iter().position(|a| a.starts_with("-c"))?;
    let spec = match &args[i][2..] {
        "" => args.get(i + 1)?.as_str(),
        rest => rest,
    };
    let from_start = spec.starts_with('+');
    spec.trim_start_matches('+').parse().ok().map(|n| (from_start, n))
}
