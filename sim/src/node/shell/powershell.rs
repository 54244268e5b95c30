//! The PowerShell subset: statement splitting, blocks, `while`/`foreach`, pipelines, cmdlets
//! (Write-Output, Get-Content, Set-Content, Invoke-WebRequest, Resolve-DnsName, Start-Job, …)
//! and `$env:` expansion. Separate because PowerShell is interpreted by its own small engine,
//! not through the sh/cmd command tree.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Dialect, Interp, Io, STOPPED, Sink, fs_msg};
use crate::node::fs::FsError;
use crate::node::programs::Stdin;
use crossconf_model::os::Os;

pub(super) fn split_top(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut depth, mut q) = (0i32, None::<char>);
    for ch in s.chars() {
        match ch {
            '\'' | '"' if q.is_none() => q = Some(ch),
            c if Some(c) == q => q = None,
            '{' | '(' if q.is_none() => depth += 1,
            '}' | ')' if q.is_none() => depth -= 1,
            c if c == sep && depth == 0 && q.is_none() => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

pub(super) fn ps_block<'a>(it: &'a mut Interp, script: &'a str, io: &'a Io) -> BoxFuture<'a, i32> {
    Box::pin(async move {
        let mut code = 0;
        for stmt in split_top(&script.replace('\n', ";"), ';') {
            if it.exit.is_some() || it.ctx.cancel.is_cancelled() {
                return it.exit.unwrap_or(STOPPED);
            }
            let lower = stmt.to_ascii_lowercase();
            if lower.starts_with("foreach") {
                code = ps_foreach(it, &stmt, io).await;
                if code == STOPPED {
                    return code;
                }
                continue;
            }
            if lower.starts_with("start-job") {
                let (Some(open), Some(close)) = (stmt.find('{'), stmt.rfind('}')) else {
                    it.err(
                        io,
                        "Start-Job : only -ScriptBlock { ... } jobs are emulated by the simulator",
                    );
                    return 1;
                };
                let body = stmt[open + 1..close].to_string();
                let mut job = Interp::new(it.ctx.clone(), Dialect::Ps);
                job.vars = it.vars.clone();
                let job_io = Io {
                    out: Sink::Null,
                    err: Sink::Null,
                    stdin: Stdin::empty(),
                };
                let n = it.jobs.len() + 1;
                it.jobs
                    .push(tokio::spawn(async move { ps_block(&mut job, &body, &job_io).await }));
                it.line(
                    io,
                    &format!("{n}      Job{n}           BackgroundJob   Running       True            localhost"),
                );
                continue;
            }
            // Conditions, throw, and statements over objects (Get-ComputeProcess | Where-Object).
            if let Some(c) = super::ps_flow::ps_object_statement(it, &stmt, io).await {
                code = c;
                it.last = code;
                if it.exit.is_some() {
                    return it.exit.unwrap_or(code);
                }
                continue;
            }
            if lower.starts_with('$') && !lower.contains('=') {
                let name = stmt.trim_start_matches('$').trim().to_string();
                let v = it.vars.get(&name).cloned().unwrap_or_default();
                it.line(io, &v);
                continue;
            }
            if lower.starts_with('$') && !lower.starts_with("$env:") {
                // An assignment: the value is kept as written (arithmetic is not evaluated).
                if let Some((k, v)) = stmt.split_once('=') {
                    it.vars
                        .insert(k.trim().trim_start_matches('$').to_string(), v.trim().to_string());
                }
                continue;
            }
            if lower.replace(' ', "") == "get-job|wait-job" || lower.trim() == "wait-job" {
                let jobs = std::mem::take(&mut it.jobs);
                let cancel = it.ctx.cancel.clone();
                let all = futures::future::join_all(jobs);
                tokio::select! {
                    _ = cancel.cancelled() => return STOPPED,
                    _ = all => {}
                }
                continue;
            }
            if lower.starts_with("while") {
                let (Some(open), Some(close)) = (stmt.find('{'), stmt.rfind('}')) else {
                    it.err(io, "ParserError: Missing statement block in while loop.");
                    return 1;
                };
                let cond = stmt[5..open]
                    .trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .trim()
                    .to_ascii_lowercase();
                if cond != "$true" && cond != "1" {
                    it.err(
                        io,
                        &format!("while ({cond}): only while ($true) loops are emulated by the simulator"),
                    );
                    return 1;
                }
                let body = stmt[open + 1..close].to_string();
                loop {
                    code = ps_block(it, &body, io).await;
                    if code == STOPPED || it.exit.is_some() || it.ctx.cancel.is_cancelled() {
                        return it.exit.unwrap_or(STOPPED);
                    }
                    tokio::task::yield_now().await;
                }
            }
            code = ps_pipeline(it, &stmt, io).await;
            it.last = code;
        }
        code
    })
}

fn ps_words(s: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut q: Option<char> = None;
    let mut any = false;
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        match ch {
            '\'' | '"' if q.is_none() => {
                q = Some(ch);
                any = true;
            }
            c if Some(c) == q => q = None,
            ' ' | '\t' if q.is_none() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            '$' if q != Some('\'')
                && s[s.char_indices().nth(i).map_or(0, |x| x.0)..]
                    .to_ascii_lowercase()
                    .starts_with("$env:") =>
            {
                let rest: String = chars[i + 5..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                let v = env
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&rest))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                cur.push_str(&v);
                any = true;
                i += 5 + rest.chars().count();
                continue;
            }
            _ => {
                cur.push(ch);
                any = true;
            }
        }
        i += 1;
    }
    if any {
        out.push(cur);
    }
    out
}

fn ps_param(words: &[String], names: &[&str]) -> Option<String> {
    words
        .iter()
        .position(|w| names.iter().any(|n| w.eq_ignore_ascii_case(n)))
        .and_then(|i| words.get(i + 1).cloned())
}

fn ps_positional(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for w in &words[1..] {
        if skip {
            skip = false;
            continue;
        }
        if w.starts_with('-') && w.len() > 1 && !w[1..].starts_with(|c: char| c.is_ascii_digit()) {
            skip = !matches!(
                w.to_ascii_lowercase().as_str(),
                "-usebasicparsing" | "-force" | "-nonewline" | "-raw"
            );
            continue;
        }
        out.push(w.clone());
    }
    out
}

/// How many iterations a `foreach` may take before the simulator treats it as a CPU-bound loop
/// that runs until the container stops (upstream's cpu_limits.go loops to 2^31 twice).
const PS_LOOP_LIMIT: i64 = 100_000;

/// `foreach ($x in A..B) { body }`.
async fn ps_foreach(it: &mut Interp, stmt: &str, io: &Io) -> i32 {
    let (Some(open_paren), Some(close_paren), Some(open), Some(close)) =
        (stmt.find('('), stmt.find(')'), stmt.find('{'), stmt.rfind('}'))
    else {
        it.err(io, "ParserError: Missing statement block in foreach loop.");
        return 1;
    };
    let head = &stmt[open_paren + 1..close_paren];
    let Some((var, range)) = head.split_once(" in ") else {
        it.err(io, "ParserError: Missing 'in' after variable in foreach loop.");
        return 1;
    };
    let Some((a, b)) = range
        .trim()
        .split_once("..")
        .and_then(|(a, b)| Some((a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?)))
    else {
        it.err(
            io,
            &format!("foreach over {range:?}: only integer ranges A..B are emulated by the simulator"),
        );
        return 1;
    };
    let var = var.trim().trim_start_matches('$').to_string();
    let body = stmt[open + 1..close].to_string();
    if b - a > PS_LOOP_LIMIT {
        // Billions of iterations of arithmetic: a core stays busy until the container stops.
        let _busy = it.ctx.usage.busy(1000);
        it.ctx.cancel.cancelled().await;
        return STOPPED;
    }
    let mut code = 0;
    for v in a..=b {
        it.vars.insert(var.clone(), v.to_string());
        code = ps_block(it, &body, io).await;
        if code == STOPPED || it.exit.is_some() {
            break;
        }
    }
    code
}

/// `cmd > file` / `cmd >> file` split at the first unquoted, top-level redirect (a stream
/// number before it, `2>`, leaves the statement alone).
fn split_redirect(stmt: &str) -> (String, Option<(String, bool)>) {
    let (mut depth, mut q) = (0i32, None::<char>);
    let bytes = stmt.as_bytes();
    for (i, ch) in stmt.char_indices() {
        match ch {
            '\'' | '"' if q.is_none() => q = Some(ch),
            c if Some(c) == q => q = None,
            '{' | '(' if q.is_none() => depth += 1,
            '}' | ')' if q.is_none() => depth -= 1,
            '>' if q.is_none() && depth == 0 => {
                if i > 0 && bytes[i - 1].is_ascii_digit() {
                    return (stmt.to_string(), None);
                }
                let append = bytes.get(i + 1) == Some(&b'>');
                let target = stmt[i + if append { 2 } else { 1 }..].trim().trim_matches(['\'', '"']);
                return (stmt[..i].trim().to_string(), Some((target.to_string(), append)));
            }
            _ => {}
        }
    }
    (stmt.to_string(), None)
}

/// What `>` writes: Windows PowerShell's Out-File default, UTF-16 LE with a byte order mark.
fn out_file_bytes(text: &[u8]) -> Vec<u8> {
    let mut out = vec![0xff, 0xfe];
    for u in String::from_utf8_lossy(text).encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

/// Text of a file as Get-Content decodes it: UTF-16 LE with its byte order mark, else UTF-8
/// (its BOM dropped); `None` for bytes that are neither.
fn file_text(b: &[u8]) -> Option<String> {
    if let Some(rest) = b.strip_prefix(&[0xff, 0xfe]) {
        let units: Vec<u16> = rest.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        return String::from_utf16(&units).ok();
    }
    let b = b.strip_prefix(&[0xef, 0xbb, 0xbf]).unwrap_or(b);
    std::str::from_utf8(b).ok().map(str::to_string)
}

async fn ps_pipeline(it: &mut Interp, stmt: &str, io: &Io) -> i32 {
    let (stmt, redirect) = split_redirect(stmt);
    let Some((target, append)) = redirect else {
        return ps_stages(it, &stmt, io).await;
    };
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sub = Io {
        out: Sink::Buf(buf.clone()),
        err: io.err.clone(),
        stdin: io.stdin.clone(),
    };
    let code = ps_stages(it, &stmt, &sub).await;
    if target.eq_ignore_ascii_case("$null") {
        return code;
    }
    let data = out_file_bytes(&buf.lock().expect("ps redirect lock"));
    let written = match it.unc_file(&target).await {
        Some(Ok(local)) => local
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(&local)
            })
            .and_then(|mut f| std::io::Write::write_all(&mut f, &data))
            .map_err(|e| e.to_string()),
        Some(Err(e)) => Err(e.to_string()),
        None => it.ctx.fs.write(&it.abs(&target), &data, append).map_err(|e| match e {
            FsError::ReadOnly { .. } => format!("Access to the path '{target}' is denied."),
            e => fs_msg(Os::Windows, &e).to_string(),
        }),
    };
    match written {
        Ok(()) => code,
        Err(why) => {
            it.err(io, &format!("out-file : {why}"));
            1
        }
    }
}

async fn ps_stages(it: &mut Interp, stmt: &str, io: &Io) -> i32 {
    let stages = split_top(stmt, '|');
    let mut input: Option<Vec<u8>> = None;
    let mut code = 0;
    for (k, stage) in stages.iter().enumerate() {
        let last = k + 1 == stages.len();
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sub_io = Io {
            out: if last { io.out.clone() } else { Sink::Buf(buf.clone()) },
            err: io.err.clone(),
            stdin: input.take().map_or_else(|| io.stdin.clone(), Stdin::bytes),
        };
        code = ps_command(it, stage, &sub_io).await;
        input = Some(buf.lock().expect("ps pipe lock").clone());
        if code == STOPPED {
            break;
        }
    }
    code
}

async fn ps_command(it: &mut Interp, stage: &str, io: &Io) -> i32 {
    let mut env = it.ctx.env.clone();
    env.extend(it.vars.clone());
    // (Invoke-WebRequest …).Content / .StatusCode
    let trimmed = stage.trim();
    if trimmed.starts_with('(')
        && let Some(close) = trimmed.rfind(')')
    {
        let inner = &trimmed[1..close];
        let member = trimmed[close + 1..].trim_start_matches('.').to_ascii_lowercase();
        let words = ps_words(inner, &env);
        if words.first().is_some_and(|w| {
            matches!(
                w.to_ascii_lowercase().as_str(),
                "invoke-webrequest" | "iwr" | "curl" | "wget"
            )
        }) {
            return ps_iwr(it, &words, io, Some(member)).await;
        }
        it.err(
            io,
            &format!("the simulator's PowerShell does not emulate the expression {trimmed:?}"),
        );
        return 1;
    }
    let words = ps_words(trimmed, &env);
    let Some(cmd) = words.first().map(|w| w.to_ascii_lowercase()) else {
        return 0;
    };
    let pos = ps_positional(&words);
    match cmd.as_str() {
        "exit" => {
            let code = pos.first().and_then(|v| v.parse().ok()).unwrap_or(0);
            it.exit = Some(code);
            code
        }
        "write-output" | "write-host" | "echo" => {
            it.line(io, &pos.join(" "));
            0
        }
        "start-sleep" | "sleep" => {
            let secs = ps_param(&words, &["-Seconds", "-s"]).or_else(|| pos.first().cloned());
            let ms = ps_param(&words, &["-Milliseconds", "-m"]);
            let d = match (ms, secs) {
                (Some(ms), _) => ms.parse::<u64>().ok().map(Duration::from_millis),
                (None, Some(s)) => s.parse::<f64>().ok().map(Duration::from_secs_f64),
                _ => None,
            };
            match d {
                Some(d) => {
                    if it.sleep(d).await {
                        0
                    } else {
                        STOPPED
                    }
                }
                None => {
                    it.err(io, "Start-Sleep : Cannot bind parameter 'Seconds'.");
                    1
                }
            }
        }
        "get-content" | "gc" | "cat" | "type" => {
            let Some(p) = ps_param(&words, &["-Path", "-LiteralPath"]).or_else(|| pos.first().cloned()) else {
                return 1;
            };
            // A UNC path reads the simulated domain's share, or fails as the share refuses.
            let read = match it.unc_file(&p).await {
                Some(Ok(local)) => std::fs::read(&local).map_err(|_| None),
                Some(Err(e)) => Err(Some(e.to_string())),
                None => it.ctx.fs.read(&it.abs(&p)).map_err(|_| None),
            };
            match read {
                // Get-Content emits the file's lines as strings, each printed on a line of its
                // own (a last line without a line end too); bytes that are not text as they are.
                Ok(b) => {
                    match file_text(&b) {
                        Some(text) => {
                            for line in text.lines() {
                                io.out.write(format!("{line}\r\n").as_bytes());
                            }
                        }
                        None => io.out.write(&b),
                    }
                    0
                }
                Err(Some(why)) => {
                    it.err(io, &format!("Get-Content : {why}"));
                    1
                }
                Err(_) => {
                    it.err(
                        io,
                        &format!("Get-Content : Cannot find path '{p}' because it does not exist."),
                    );
                    1
                }
            }
        }
        "set-content" | "add-content" | "out-file" => {
            let Some(p) = ps_param(&words, &["-Path", "-FilePath", "-LiteralPath"]).or_else(|| pos.first().cloned())
            else {
                return 1;
            };
            let value = ps_param(&words, &["-Value", "-InputObject"])
                .map(|v| format!("{v}\r\n").into_bytes())
                .unwrap_or_default();
            let value = if value.is_empty() {
                io.stdin.read_all().await
            } else {
                value
            };
            let append = cmd == "add-content" || words.iter().any(|w| w.eq_ignore_ascii_case("-Append"));
            match it.ctx.fs.write(&it.abs(&p), &value, append) {
                Ok(()) => 0,
                Err(FsError::ReadOnly { .. }) => {
                    it.err(io, &format!("{} : Access to the path '{p}' is denied.", words[0]));
                    1
                }
                Err(e) => {
                    it.err(io, &format!("{} : {}", words[0], fs_msg(Os::Windows, &e)));
                    1
                }
            }
        }
        "new-item" | "mkdir" | "md" => {
            let Some(p) = ps_param(&words, &["-Path"]).or_else(|| pos.first().cloned()) else {
                return 1;
            };
            let dir = cmd != "new-item"
                || ps_param(&words, &["-ItemType", "-Type"]).is_some_and(|t| t.eq_ignore_ascii_case("directory"));
            let r = if dir {
                it.ctx.fs.mkdir(&it.abs(&p))
            } else {
                it.ctx.fs.write(
                    &it.abs(&p),
                    ps_param(&words, &["-Value"]).unwrap_or_default().as_bytes(),
                    false,
                )
            };
            match r {
                Ok(()) => 0,
                Err(FsError::ReadOnly { .. }) => {
                    it.err(io, &format!("New-Item : Access to the path '{p}' is denied."));
                    1
                }
                Err(e) => {
                    it.err(io, &format!("New-Item : {}", fs_msg(Os::Windows, &e)));
                    1
                }
            }
        }
        "test-path" => {
            let Some(p) = pos.first() else { return 1 };
            it.line(
                io,
                if it.ctx.fs.stat(&it.abs(p)).is_some() {
                    "True"
                } else {
                    "False"
                },
            );
            0
        }
        "get-childitem" | "dir" | "ls" | "gci" => {
            let args: Vec<String> = pos.clone();
            it.dialect = Dialect::Cmd;
            let c = it.ls(&args, io);
            it.dialect = Dialect::Ps;
            c
        }
        "invoke-webrequest" | "iwr" | "curl" | "wget" => ps_iwr(it, &words, io, None).await,
        "resolve-dnsname" => {
            let Some(name) = ps_param(&words, &["-Name"]).or_else(|| pos.first().cloned()) else {
                return 1;
            };
            match it.resolve(&name).await {
                Ok(ip) => {
                    it.line(io, "");
                    it.line(
                        io,
                        "Name                                           Type   TTL   Section    IPAddress",
                    );
                    it.line(
                        io,
                        "----                                           ----   ---   -------    ---------",
                    );
                    it.line(io, &format!("{name:<46} A      5     Answer     {ip}"));
                    0
                }
                Err(e) => {
                    // The Win32 messages of DNS_ERROR_RCODE_NAME_ERROR (9003) and
                    // DNS_ERROR_RCODE_SERVER_FAILURE (9002), and of a timeout (1460).
                    let why = match e {
                        crate::node::dns::ResolveError::NotFound { .. } => "DNS name does not exist",
                        crate::node::dns::ResolveError::ServFail { .. } => "DNS server failure",
                        crate::node::dns::ResolveError::NoServers => {
                            "This operation returned because the timeout period expired"
                        }
                    };
                    it.err(io, &format!("Resolve-DnsName : {name} : {why} ({e})"));
                    1
                }
            }
        }
        "hostname" | "ipconfig" | "nslookup" | "ping" | "whoami" | "curl.exe" | "cmd" | "timeout" | "net"
        | "nltest" | "shutdown" | "shutdown.exe" => {
            let argv: Vec<String> = words.clone();
            it.dialect = Dialect::Cmd;
            let c = it.command(argv, None, io).await;
            it.dialect = Dialect::Ps;
            c
        }
        _ => {
            let argv: Vec<String> = words.clone();
            it.command(argv, None, io).await
        }
    }
}

async fn ps_iwr(it: &mut Interp, words: &[String], io: &Io, member: Option<String>) -> i32 {
    let pos = ps_positional(words);
    let Some(url) = ps_param(words, &["-Uri"]).or_else(|| pos.first().cloned()) else {
        it.err(io, "Invoke-WebRequest : Cannot validate argument on parameter 'Uri'.");
        return 1;
    };
    let timeout = ps_param(words, &["-TimeoutSec"])
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_secs);
    match it.http_get(&url, timeout, &[]).await {
        Ok(r) if r.status >= 400 => {
            it.err(
                io,
                &format!(
                    "Invoke-WebRequest : The remote server returned an error: ({}).",
                    r.status
                ),
            );
            1
        }
        Ok(r) => {
            match member.as_deref() {
                Some("statuscode") => it.line(io, &r.status.to_string()),
                Some("content") | None => {
                    if member.is_none() {
                        it.line(io, "");
                        it.line(io, &format!("StatusCode        : {}", r.status));
                        it.line(io, &format!("Content           : {}", String::from_utf8_lossy(&r.body)));
                    } else {
                        io.out.write(&r.body);
                        it.out(io, "\r\n");
                    }
                }
                Some(other) => {
                    it.err(
                        io,
                        &format!("the simulator's Invoke-WebRequest result has no member {other:?}"),
                    );
                    return 1;
                }
            }
            0
        }
        Err((6, _)) => {
            it.err(io, "Invoke-WebRequest : The remote name could not be resolved");
            1
        }
        Err((_, msg)) => {
            it.err(
                io,
                &format!("Invoke-WebRequest : Unable to connect to the remote server ({msg})"),
            );
            1
        }
    }
}

#[cfg(test)]
mod ps_job_tests {
    use super::*;
    use crate::node::programs;
    use crate::node::programs::testutil::ctx;

    #[tokio::test]
    async fn cpu_limits_script_burns_cpu_until_stopped() {
        let (c, _out, _d) = ctx(Os::Windows, "registry.k8s.io/e2e-test-images/busybox:1.36.1-1", 130);
        let (usage, cancel) = (c.usage.clone(), c.cancel.clone());
        let script = "foreach ($loopnumber in 1..8) { Start-Job -ScriptBlock { $result = 1; foreach($mm in 1..2147483647){$res1=1;foreach($num in 1..2147483647){$res1=$mm*$num*1340371};$res1} } } ; get-job | wait-job";
        let h = tokio::spawn(programs::run(
            c,
            vec!["powershell.exe".into(), "-Command".into(), script.into()],
            None,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            usage.demand_millicores.load(std::sync::atomic::Ordering::SeqCst),
            8000 + 1,
            "8 jobs of a core each plus the shell"
        );
        cancel.cancel();
        assert_eq!(h.await.unwrap(), 1);
    }
}
