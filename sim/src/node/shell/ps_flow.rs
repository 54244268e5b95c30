//! PowerShell statements over objects: `if`/`elseif`/`else`, `throw`, assignments and
//! statements whose pipeline starts with an object source (`Get-ComputeProcess`, or a variable
//! holding objects) and filters with `Where-Object`. Separate from `powershell`, whose
//! statements pass text; these evaluate [`PsValue`]s with `ps_objects`.

use futures::future::BoxFuture;

use super::powershell::ps_block;
use super::ps_objects::{PsValue, Scope, eval, format, where_object};
use super::{Interp, Io};

/// The text after `open` up to its balanced `close` (quotes respected) and what follows it;
/// `s` must start with `open`.
fn balanced(s: &str, open: char, close: char) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if !s.starts_with(open) {
        return None;
    }
    let (mut depth, mut q) = (0i32, None::<char>);
    for (i, ch) in s.char_indices() {
        match ch {
            '\'' | '"' if q.is_none() => q = Some(ch),
            c if Some(c) == q => q = None,
            c if c == open && q.is_none() => depth += 1,
            c if c == close && q.is_none() => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `stmt` starts with keyword `kw` (followed by a space, `(` or `{`, or nothing).
fn keyword(stmt: &str, kw: &str) -> bool {
    let lower = stmt.to_ascii_lowercase();
    lower.starts_with(kw)
        && lower[kw.len()..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '(' || c == '{' || c == '\'' || c == '"')
}

impl Interp {
    fn eval_ps(&self, expr: &str) -> Result<PsValue, String> {
        let scope = Scope {
            objects: &self.objects,
            text: &self.vars,
        };
        eval(expr, &scope).map_err(|e| e.to_string())
    }

    /// The objects an object pipeline emits, `None` when `stmt` is no object pipeline (its
    /// first stage is neither an object cmdlet nor a variable holding objects); `Err` is the
    /// error record already written.
    fn object_pipeline(&mut self, stmt: &str, io: &Io) -> Option<Result<Vec<PsValue>, ()>> {
        let stages = super::powershell::split_top(stmt, '|');
        let first = stages.first()?;
        let mut words = first.split_whitespace();
        let cmd = words.next()?.to_ascii_lowercase();
        let mut items = if cmd == "get-computeprocess" {
            // The HostComputeService module is there on the host only (a HostProcess
            // container); elsewhere the command is not found, as the text engine reports.
            let view = self.ctx.compute.clone()?;
            let rest: Vec<&str> = words.collect();
            let param = |name: &str| {
                rest.iter()
                    .position(|w| w.eq_ignore_ascii_case(name))
                    .and_then(|i| rest.get(i + 1))
                    .map(|v| v.trim_matches(['\'', '"']).to_string())
            };
            let (kind, owner) = (param("-Type"), param("-Owner"));
            view.list()
                .into_iter()
                .filter(|s| kind.as_ref().is_none_or(|k| k.eq_ignore_ascii_case(s.kind)))
                .filter(|s| owner.as_ref().is_none_or(|o| o.eq_ignore_ascii_case(&s.owner)))
                .map(|s| {
                    PsValue::Obj(vec![
                        ("Id".into(), PsValue::Str(s.id)),
                        ("Owner".into(), PsValue::Str(s.owner)),
                        ("Type".into(), PsValue::Str(s.kind.into())),
                    ])
                })
                .collect()
        } else if let Some(name) = cmd.strip_prefix('$')
            && stages.len() > 1
            && let Some(v) = self.objects.get(name)
        {
            v.clone().into_items()
        } else {
            return None;
        };
        for stage in &stages[1..] {
            let (cmd, rest) = stage.split_once(char::is_whitespace).unwrap_or((stage, ""));
            if !matches!(cmd.to_ascii_lowercase().as_str(), "where-object" | "where" | "?") {
                self.err(
                    io,
                    &format!("the simulator's PowerShell does not emulate {cmd:?} in an object pipeline ({stmt})"),
                );
                return Some(Err(()));
            }
            match where_object(items, rest, &self.objects, &self.vars) {
                Ok(kept) => items = kept,
                Err(e) => {
                    self.err(io, &format!("Where-Object : {e}"));
                    return Some(Err(()));
                }
            }
        }
        Some(Ok(items))
    }
}

/// Runs `stmt` if it is an object statement and returns its status; `None` leaves it to the
/// text engine.
pub(super) fn ps_object_statement<'a>(it: &'a mut Interp, stmt: &'a str, io: &'a Io) -> BoxFuture<'a, Option<i32>> {
    Box::pin(async move {
        if keyword(stmt, "if") {
            return Some(ps_if(it, stmt, io).await);
        }
        if keyword(stmt, "throw") {
            let expr = stmt[5..].trim();
            let msg = if expr.is_empty() {
                "ScriptHalted".to_string()
            } else {
                match it.eval_ps(expr) {
                    Ok(v) => v.text(),
                    Err(e) => e,
                }
            };
            // An uncaught terminating error ends `powershell -Command` with status 1.
            it.err(io, &msg);
            it.err(
                io,
                &format!("    + CategoryInfo          : OperationStopped: ({msg}:String) [], RuntimeException"),
            );
            it.err(io, &format!("    + FullyQualifiedErrorId : {msg}"));
            it.exit = Some(1);
            return Some(1);
        }
        if let Some(rest) = stmt.strip_prefix('$')
            && let Some((name, rhs)) = rest.split_once('=')
            && !name.trim().to_ascii_lowercase().starts_with("env:")
            && name.trim().chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            let name = name.trim().to_ascii_lowercase();
            return match it.object_pipeline(rhs.trim(), io) {
                None => {
                    // A text value: the text engine keeps it; an object value of the name goes.
                    it.objects.remove(&name);
                    None
                }
                Some(Ok(items)) => {
                    it.objects.insert(name, PsValue::from_output(items));
                    Some(0)
                }
                Some(Err(())) => Some(1),
            };
        }
        if let Some(name) = stmt.strip_prefix('$').map(|n| n.trim().to_ascii_lowercase())
            && let Some(v) = it.objects.get(&name)
        {
            for line in format(&v.clone().into_items()) {
                it.line(io, &line);
            }
            return Some(0);
        }
        match it.object_pipeline(stmt, io)? {
            Ok(items) => {
                for line in format(&items) {
                    it.line(io, &line);
                }
                Some(0)
            }
            Err(()) => Some(1),
        }
    })
}

/// `if (cond) { … } elseif (cond) { … } else { … }`.
async fn ps_if(it: &mut Interp, stmt: &str, io: &Io) -> i32 {
    let mut rest = stmt[2..].trim_start().to_string();
    loop {
        let Some((cond, after)) = balanced(&rest, '(', ')') else {
            it.err(io, "ParserError: Missing '(' after 'if' in if statement.");
            return 1;
        };
        let Some((body, after)) = balanced(after, '{', '}') else {
            it.err(io, "ParserError: Missing statement block after if ( condition ).");
            return 1;
        };
        let hit = match it.eval_ps(cond) {
            Ok(v) => v.truthy(),
            Err(e) => {
                it.err(io, &e);
                return 1;
            }
        };
        if hit {
            return ps_block(it, body, io).await;
        }
        let after = after.trim_start();
        if keyword(after, "elseif") {
            rest = after[6..].trim_start().to_string();
            continue;
        }
        if keyword(after, "else") {
            let Some((body, _)) = balanced(&after[4..], '{', '}') else {
                it.err(io, "ParserError: Missing statement block after 'else' keyword.");
                return 1;
            };
            return ps_block(it, body, io).await;
        }
        return 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Dialect, Interp, io_for};
    use super::*;
    use crate::node::programs::Stdin;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};
    use crossconf_model::os::Os;

    fn vm(kind: &str) -> PsValue {
        PsValue::Obj(vec![
            ("Id".into(), PsValue::Str("x@vm".into())),
            ("Owner".into(), PsValue::Str("containerd-shim-runhcs-v1.exe".into())),
            ("Type".into(), PsValue::Str(kind.into())),
        ])
    }

    /// Upstream hyperv.go's check, with `$all` standing for Get-ComputeProcess's output.
    const SCRIPT: &str = "$vms = $all | Where-Object { ($_.Type -EQ 'VirtualMachine') -and ($_.Owner -EQ \
                          'containerd-shim-runhcs-v1.exe') } ; if ($vms.Length -le 0) { throw 'error' } ; \
                          Write-Output found";

    async fn run(all: PsValue) -> (i32, String) {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 120);
        let io = io_for(&c, Stdin::empty());
        let mut it = Interp::new(c, Dialect::Ps);
        it.objects.insert("all".into(), all);
        let code = ps_block(&mut it, SCRIPT, &io).await;
        (code, text(&out))
    }

    #[tokio::test]
    async fn the_utility_vm_check_passes_with_a_vm_and_throws_without() {
        assert_eq!(
            run(PsValue::Arr(vec![vm("Container"), vm("VirtualMachine")])).await,
            (0, "found\r\n".into())
        );
        assert_eq!(run(vm("VirtualMachine")).await, (0, "found\r\n".into()));
        let (code, out) = run(PsValue::Arr(vec![vm("Container")])).await;
        assert_eq!(code, 1, "throw ends the script with status 1");
        assert!(
            out.starts_with("error\r\n") && out.contains("FullyQualifiedErrorId : error") && !out.contains("found"),
            "{out}"
        );
        assert_eq!(run(PsValue::Null).await.0, 1);
    }

    #[tokio::test]
    async fn if_elseif_else_pick_one_block() {
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 121);
        let io = io_for(&c, Stdin::empty());
        let mut it = Interp::new(c, Dialect::Ps);
        let script = "$n = 2 ; if ($n -eq 1) { Write-Output one } elseif ($n -gt 1) { Write-Output many } else \
                      { Write-Output none } ; if (-not $null) { Write-Output nil }";
        assert_eq!(ps_block(&mut it, script, &io).await, 0);
        assert_eq!(text(&out), "many\r\nnil\r\n");
    }
}
