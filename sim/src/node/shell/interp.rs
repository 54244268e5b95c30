//! The core of the interpreter: word expansion, running the command tree (lists, pipes,
//! `&&`/`||`, loops, conditionals), simple commands with assignments and redirects, and the
//! output helpers every command uses. Separate from the commands themselves, which live in
//! `builtins`, `netutils` and `powershell`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::sh_parse::{Node, Part, Redir, Target, Word, parse_sh};
use super::{Dialect, Interp, Io, STOPPED, SharedBuf, Sink, fs_msg, is_assignment, is_null_device};
use crate::node::fs::FsError;
use crate::node::programs::Stdin;
use crate::node::programs::{self, BUSYBOX_APPLETS, Ctx, WINDOWS_PROGRAMS};
use crate::node::registry::Tool;
use crossconf_model::os::Os;

impl Interp {
    pub(super) fn new(ctx: Ctx, dialect: Dialect) -> Self {
        let vars = ctx.env.clone();
        let cwd = ctx.cwd.clone();
        Interp {
            ctx,
            dialect,
            jobs: Vec::new(),
            objects: std::collections::BTreeMap::new(),
            vars,
            last: 0,
            exit: None,
            cwd,
        }
    }

    pub(super) fn nl(&self) -> &'static str {
        if self.dialect == Dialect::Sh { "\n" } else { "\r\n" }
    }

    fn expand<'a>(&'a mut self, w: &'a Word) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let mut s = String::new();
            for p in &w.parts {
                match p {
                    Part::Lit(l) => s.push_str(l),
                    Part::Var(v) if v == "?" => s.push_str(&self.last.to_string()),
                    Part::Var(v) if v == "$" => s.push('1'),
                    Part::Var(v) => s.push_str(self.vars.get(v).map_or("", String::as_str)),
                    Part::Subst(src) => {
                        let buf = Arc::new(Mutex::new(Vec::new()));
                        let io = Io {
                            out: Sink::Buf(buf.clone()),
                            err: Sink::Null,
                            stdin: Stdin::empty(),
                        };
                        if let Ok(n) = parse_sh(src) {
                            let saved = self.exit;
                            self.run_node(&n, io).await;
                            self.exit = saved;
                        }
                        let out = String::from_utf8_lossy(&buf.lock().expect("subst lock")).to_string();
                        s.push_str(out.trim_end_matches('\n'));
                    }
                }
            }
            s
        })
    }

    pub(super) fn run_node<'a>(&'a mut self, n: &'a Node, io: Io) -> BoxFuture<'a, i32> {
        Box::pin(async move {
            if self.exit.is_some() || self.ctx.cancel.is_cancelled() {
                return self.exit.unwrap_or(STOPPED);
            }
            let code = match n {
                Node::List(items) => {
                    let mut code = 0;
                    for it in items {
                        code = self.run_node(it, io.clone()).await;
                        if self.exit.is_some() || code == STOPPED {
                            break;
                        }
                    }
                    code
                }
                Node::And(a, b) => {
                    let c = self.run_node(a, io.clone()).await;
                    if c == 0 && self.exit.is_none() {
                        self.run_node(b, io).await
                    } else {
                        c
                    }
                }
                Node::Or(a, b) => {
                    let c = self.run_node(a, io.clone()).await;
                    if c != 0 && c != STOPPED && self.exit.is_none() {
                        self.run_node(b, io).await
                    } else {
                        c
                    }
                }
                Node::Pipe(cmds) => {
                    let mut stdin = io.stdin.clone();
                    let mut code = 0;
                    for (k, c) in cmds.iter().enumerate() {
                        let last = k + 1 == cmds.len();
                        let buf = Arc::new(Mutex::new(Vec::new()));
                        let out = if last { io.out.clone() } else { Sink::Buf(buf.clone()) };
                        code = self
                            .run_node(
                                c,
                                Io {
                                    out,
                                    err: io.err.clone(),
                                    stdin: std::mem::replace(&mut stdin, Stdin::empty()),
                                },
                            )
                            .await;
                        stdin = Stdin::bytes(buf.lock().expect("pipe lock").clone());
                        if code == STOPPED {
                            break;
                        }
                    }
                    code
                }
                Node::While { cond, body, until } => {
                    let mut code = 0;
                    // A loop that never waits burns a whole core, as a real shell loop does;
                    // stats and CPU limits see that demand.
                    let mut burning: Option<programs::BusyGuard> = None;
                    loop {
                        let iteration = Instant::now();
                        let c = self.run_node(cond, io.clone()).await;
                        if c == STOPPED || self.exit.is_some() || ((c == 0) == *until) {
                            break;
                        }
                        code = self.run_node(body, io.clone()).await;
                        if code == STOPPED || self.exit.is_some() {
                            break;
                        }
                        if iteration.elapsed() < Duration::from_millis(5) {
                            if burning.is_none() {
                                burning = Some(self.ctx.usage.busy(1000));
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        } else {
                            burning = None;
                        }
                    }
                    drop(burning);
                    code
                }
                Node::For { var, items, body } => {
                    let mut code = 0;
                    let mut vals = Vec::new();
                    for w in items {
                        let v = self.expand(w).await;
                        if w.quoted {
                            vals.push(v);
                        } else {
                            vals.extend(v.split_whitespace().map(str::to_string));
                        }
                    }
                    for v in vals {
                        self.vars.insert(var.clone(), v);
                        code = self.run_node(body, io.clone()).await;
                        if code == STOPPED || self.exit.is_some() {
                            break;
                        }
                    }
                    code
                }
                Node::If { branches, els } => {
                    let mut done = None;
                    for (c, b) in branches {
                        if self.run_node(c, io.clone()).await == 0 {
                            done = Some(self.run_node(b, io.clone()).await);
                            break;
                        }
                    }
                    match (done, els) {
                        (Some(c), _) => c,
                        (None, Some(e)) => self.run_node(e, io).await,
                        (None, None) => 0,
                    }
                }
                Node::Simple { words, redirs, raw } => self.run_simple(words, redirs, raw.as_deref(), io).await,
            };
            if code != STOPPED {
                self.last = code;
            }
            code
        })
    }

    async fn run_simple(&mut self, words: &[Word], redirs: &[Redir], raw: Option<&str>, io: Io) -> i32 {
        let mut argv = Vec::new();
        let mut assigns = Vec::new();
        for w in words {
            let v = self.expand(w).await;
            if argv.is_empty() && self.dialect == Dialect::Sh && !w.quoted && is_assignment(&v) {
                assigns.push(v);
                continue;
            }
            if !w.quoted && w.parts.iter().any(|p| matches!(p, Part::Var(_) | Part::Subst(_))) {
                argv.extend(v.split_whitespace().map(str::to_string));
            } else {
                argv.push(v);
            }
        }
        for a in assigns {
            if let Some((k, v)) = a.split_once('=') {
                self.vars.insert(k.to_string(), v.to_string());
            }
        }
        // Redirects: open targets first, so a refused write fails the command before it runs.
        let mut io = io;
        let mut files: Vec<(String, bool, SharedBuf)> = Vec::new();
        let mut shares: Vec<(std::path::PathBuf, SharedBuf)> = Vec::new();
        for r in redirs {
            match &r.target {
                Target::Fd(n) => {
                    if r.fd == 2 && *n == 1 {
                        io.err = io.out.clone();
                    } else if r.fd == 1 && *n == 2 {
                        io.out = io.err.clone();
                    } else if r.fd == 1 && *n == 0 {
                        // &>: both to the file that follows is not supported; treat as 2>&1.
                        io.err = io.out.clone();
                    }
                }
                Target::File(w) => {
                    let path = self.expand(w).await;
                    if is_null_device(&path) {
                        if r.fd == 2 {
                            io.err = Sink::Null;
                        } else if !r.input {
                            io.out = Sink::Null;
                        }
                        continue;
                    }
                    // A UNC path on the simulated domain's share: the share's file, or the
                    // share's refusal in the shell's words.
                    match self.unc_file(&path).await {
                        Some(Ok(local)) => {
                            if let Err(e) = unc_open(&local, r.input, r.append, &mut io) {
                                self.unc_error(&io, &path, &e.to_string());
                                return 1;
                            }
                            if !r.input {
                                let buf = Arc::new(Mutex::new(Vec::new()));
                                if r.fd == 2 {
                                    io.err = Sink::Buf(buf.clone());
                                } else {
                                    io.out = Sink::Buf(buf.clone());
                                }
                                shares.push((local, buf));
                            }
                            continue;
                        }
                        Some(Err(e)) => {
                            self.unc_error(&io, &path, &e.to_string());
                            return 1;
                        }
                        None => {}
                    }
                    let full = self.abs(&path);
                    if r.input {
                        match self.ctx.fs.read(&full) {
                            Ok(b) => io.stdin = Stdin::bytes(b),
                            Err(e) => {
                                self.redirect_error(&io, &path, &e);
                                return 1;
                            }
                        }
                        continue;
                    }
                    if !r.append
                        && let Err(e) = self.ctx.fs.write(&full, b"", false)
                    {
                        self.redirect_error(&io, &path, &e);
                        return 1;
                    }
                    if r.append
                        && let Err(e) = self.ctx.fs.write(&full, b"", true)
                    {
                        self.redirect_error(&io, &path, &e);
                        return 1;
                    }
                    let buf = Arc::new(Mutex::new(Vec::new()));
                    if r.fd == 2 {
                        io.err = Sink::Buf(buf.clone());
                    } else {
                        io.out = Sink::Buf(buf.clone());
                    }
                    files.push((full, true, buf));
                }
            }
        }
        let code = if argv.is_empty() {
            0
        } else {
            self.command(argv, raw, &io).await
        };
        for (path, append, buf) in files {
            let data = buf.lock().expect("redirect lock").clone();
            if let Err(e) = self.ctx.fs.write(&path, &data, append) {
                self.redirect_error(&io, &path, &e);
                return 1;
            }
        }
        for (local, buf) in shares {
            let data = buf.lock().expect("redirect lock").clone();
            let written = std::fs::OpenOptions::new()
                .append(true)
                .open(&local)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &data));
            if let Err(e) = written {
                self.unc_error(&io, &local.to_string_lossy(), &e.to_string());
                return 1;
            }
        }
        code
    }

    /// A redirect to or from a UNC path that failed, in the shell's words.
    fn unc_error(&self, io: &Io, path: &str, why: &str) {
        let msg = match self.dialect {
            Dialect::Sh => format!("sh: can't create {path}: {why}\n"),
            Dialect::Cmd => format!("{why}\r\n"),
            Dialect::Ps => format!("out-file : {why}\r\n"),
        };
        io.err.write(msg.as_bytes());
    }

    fn redirect_error(&self, io: &Io, path: &str, e: &FsError) {
        let msg = match self.dialect {
            Dialect::Sh => format!("sh: can't create {path}: {}\n", fs_msg(Os::Linux, e)),
            Dialect::Cmd => format!("{}\r\n", fs_msg(Os::Windows, e)),
            Dialect::Ps => format!("Out-File : Access to the path '{path}' is denied.\r\n"),
        };
        io.err.write(msg.as_bytes());
    }

    pub(super) fn abs(&self, p: &str) -> String {
        let windows_abs = p.len() >= 2 && p.as_bytes()[1] == b':';
        if p.starts_with('/') || p.starts_with('\\') || windows_abs {
            p.to_string()
        } else {
            format!("{}/{}", self.cwd.trim_end_matches(['/', '\\']), p)
        }
    }

    pub(super) fn out(&self, io: &Io, s: &str) {
        io.out.write(s.as_bytes());
    }

    pub(super) fn line(&self, io: &Io, s: &str) {
        io.out.write(format!("{s}{}", self.nl()).as_bytes());
    }

    pub(super) fn err(&self, io: &Io, s: &str) {
        io.err.write(format!("{s}{}", self.nl()).as_bytes());
    }

    pub(super) fn has_applet(&self, name: &str) -> bool {
        self.ctx.image.has(Tool::Busybox) && BUSYBOX_APPLETS.contains(&name)
    }

    pub(super) fn has_windows_program(&self, name: &str) -> bool {
        self.ctx.image.has(Tool::Cmd) && WINDOWS_PROGRAMS.contains(&name)
    }

    /// Sleeps, or returns false when the container was stopped meanwhile.
    pub(super) async fn sleep(&self, d: Duration) -> bool {
        let _busy = self.ctx.usage.busy(0);
        tokio::select! {
            _ = self.ctx.cancel.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }
}

/// Opens the share file behind a UNC redirect: input reads it into stdin; output truncates
/// (or, appending, creates) it, the command's output being appended after it ran.
fn unc_open(local: &std::path::Path, input: bool, append: bool, io: &mut Io) -> std::io::Result<()> {
    if input {
        io.stdin = Stdin::bytes(std::fs::read(local)?);
        return Ok(());
    }
    if let Some(dir) = local.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(local)
        .map(|_| ())
}
