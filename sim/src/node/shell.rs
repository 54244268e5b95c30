//! The shells of the test images: busybox `sh -c`, Windows `cmd /c` and `powershell -Command`,
//! interpreting the commands the cases run (echo, type/cat, dir/ls, hostname, exit codes,
//! sleeps, redirects into volume files, `ipconfig /all`, `nslookup`, `curl`/`wget`, `nc`,
//! `ping`, env/set) against the container's file view and the simulated network.
//!
//! A command the simulator does not emulate fails the way the real shell fails for a missing
//! program (`sh: x: not found`, cmd's "is not recognized…", PowerShell's "The term … is not
//! recognized…"), with a note that the simulator is the reason. Nothing pretends to succeed.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::node::dns::{self, PodDns, ResolveError};
use crate::node::fs::FsError;
use crate::node::http;
use crate::node::net::{NetError, PingOutcome};
use crate::node::programs::{self, BUSYBOX_APPLETS, Ctx, Output, Stream, WINDOWS_PROGRAMS, base_name};
use crate::node::registry::Tool;
use crossconf_model::os::Os;

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
    stdin: Vec<u8>,
}

/// One word of a command line, expanded when the command runs.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Lit(String),
    Var(String),
    Subst(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Word {
    parts: Vec<Part>,
    quoted: bool,
}

impl Word {
    fn lit(&self) -> Option<String> {
        if self.quoted {
            return None;
        }
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(l) => s.push_str(l),
                _ => return None,
            }
        }
        Some(s)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Target {
    File(Word),
    Fd(u8),
}

#[derive(Debug, Clone, PartialEq)]
struct Redir {
    fd: u8,
    append: bool,
    input: bool,
    target: Target,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Simple {
        words: Vec<Word>,
        redirs: Vec<Redir>,
        raw: Option<String>,
    },
    Pipe(Vec<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    List(Vec<Node>),
    While {
        cond: Box<Node>,
        body: Box<Node>,
        until: bool,
    },
    For {
        var: String,
        items: Vec<Word>,
        body: Box<Node>,
    },
    If {
        branches: Vec<(Node, Node)>,
        els: Option<Box<Node>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(Word),
    Op(&'static str),
    Redir(Redir),
}

/// A syntax error, printed as the shell prints it.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct SyntaxError(String);

fn sh_tokens(src: &str) -> Result<Vec<Tok>, SyntaxError> {
    let c: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut cur = Word::default();
    let mut in_word = false;
    let flush = |cur: &mut Word, in_word: &mut bool, toks: &mut Vec<Tok>| {
        if *in_word {
            toks.push(Tok::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    let push_lit = |cur: &mut Word, ch: char| {
        if let Some(Part::Lit(s)) = cur.parts.last_mut() {
            s.push(ch);
        } else {
            cur.parts.push(Part::Lit(ch.to_string()));
        }
    };
    while i < c.len() {
        let ch = c[i];
        match ch {
            ' ' | '\t' => {
                flush(&mut cur, &mut in_word, &mut toks);
                i += 1;
            }
            '\n' | ';' => {
                flush(&mut cur, &mut in_word, &mut toks);
                toks.push(Tok::Op(";"));
                i += 1;
            }
            '#' if !in_word => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '&' | '|' => {
                flush(&mut cur, &mut in_word, &mut toks);
                if i + 1 < c.len() && c[i + 1] == ch {
                    toks.push(Tok::Op(if ch == '&' { "&&" } else { "||" }));
                    i += 2;
                } else if ch == '&' && i + 1 < c.len() && c[i + 1] == '>' {
                    // &> file: both streams.
                    i += 2;
                    toks.push(Tok::Redir(Redir {
                        fd: 1,
                        append: false,
                        input: false,
                        target: Target::Fd(0),
                    }));
                } else {
                    toks.push(Tok::Op(if ch == '&' { "&" } else { "|" }));
                    i += 1;
                }
            }
            '>' | '<' => {
                let fd = if in_word && cur.parts == [Part::Lit("2".into())] {
                    cur = Word::default();
                    in_word = false;
                    2
                } else if in_word && cur.parts == [Part::Lit("1".into())] {
                    cur = Word::default();
                    in_word = false;
                    1
                } else {
                    flush(&mut cur, &mut in_word, &mut toks);
                    if ch == '<' { 0 } else { 1 }
                };
                i += 1;
                let append = ch == '>' && i < c.len() && c[i] == '>';
                if append {
                    i += 1;
                }
                if ch == '>' && i < c.len() && c[i] == '&' {
                    let n = c.get(i + 1).and_then(|d| d.to_digit(10)).unwrap_or(1) as u8;
                    i += 2;
                    toks.push(Tok::Redir(Redir {
                        fd,
                        append,
                        input: false,
                        target: Target::Fd(n),
                    }));
                } else {
                    toks.push(Tok::Redir(Redir {
                        fd,
                        append,
                        input: ch == '<',
                        target: Target::File(Word::default()),
                    }));
                }
            }
            '\'' => {
                in_word = true;
                cur.quoted = true;
                let end = c[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .ok_or_else(|| SyntaxError("sh: syntax error: unterminated quoted string".into()))?;
                let s: String = c[i + 1..i + 1 + end].iter().collect();
                cur.parts.push(Part::Lit(s));
                i += end + 2;
            }
            '"' => {
                in_word = true;
                cur.quoted = true;
                i += 1;
                let mut lit = String::new();
                loop {
                    let Some(&d) = c.get(i) else {
                        return Err(SyntaxError("sh: syntax error: unterminated quoted string".into()));
                    };
                    match d {
                        '"' => {
                            i += 1;
                            break;
                        }
                        '\\' if matches!(c.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                            lit.push(c[i + 1]);
                            i += 2;
                        }
                        '$' => {
                            if !lit.is_empty() {
                                cur.parts.push(Part::Lit(std::mem::take(&mut lit)));
                            }
                            let (p, n) = dollar(&c[i..])?;
                            cur.parts.push(p);
                            i += n;
                        }
                        _ => {
                            lit.push(d);
                            i += 1;
                        }
                    }
                }
                cur.parts.push(Part::Lit(lit));
            }
            '\\' => {
                in_word = true;
                if let Some(&n) = c.get(i + 1) {
                    if n != '\n' {
                        push_lit(&mut cur, n);
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
            '$' => {
                in_word = true;
                let (p, n) = dollar(&c[i..])?;
                cur.parts.push(p);
                i += n;
            }
            '(' | ')' | '{' | '}' if !in_word => {
                // Subshells and groups: treated as plain grouping keywords by the parser.
                toks.push(Tok::Word(Word {
                    parts: vec![Part::Lit(ch.to_string())],
                    quoted: false,
                }));
                i += 1;
            }
            _ => {
                in_word = true;
                push_lit(&mut cur, ch);
                i += 1;
            }
        }
    }
    flush(&mut cur, &mut in_word, &mut toks);
    // Attach redirect targets (the word after a file redirect).
    let mut out = Vec::new();
    let mut it = toks.into_iter().peekable();
    while let Some(t) = it.next() {
        match t {
            Tok::Redir(mut r) if matches!(r.target, Target::File(_)) => match it.next() {
                Some(Tok::Word(w)) => {
                    r.target = Target::File(w);
                    out.push(Tok::Redir(r));
                }
                _ => return Err(SyntaxError("sh: syntax error: unexpected newline".into())),
            },
            t => out.push(t),
        }
    }
    Ok(out)
}

fn dollar(c: &[char]) -> Result<(Part, usize), SyntaxError> {
    match c.get(1) {
        Some('{') => {
            let end = c
                .iter()
                .position(|&x| x == '}')
                .ok_or_else(|| SyntaxError("sh: syntax error: bad substitution".into()))?;
            Ok((Part::Var(c[2..end].iter().collect()), end + 1))
        }
        Some('(') => {
            let mut depth = 0;
            for (j, &x) in c.iter().enumerate().skip(1) {
                if x == '(' {
                    depth += 1;
                } else if x == ')' {
                    depth -= 1;
                    if depth == 0 {
                        return Ok((Part::Subst(c[2..j].iter().collect()), j + 1));
                    }
                }
            }
            Err(SyntaxError("sh: syntax error: unterminated $(".into()))
        }
        Some(&x) if x == '?' || x == '$' || x.is_ascii_digit() => Ok((Part::Var(x.to_string()), 2)),
        Some(&x) if x.is_ascii_alphabetic() || x == '_' => {
            let n = c[1..]
                .iter()
                .take_while(|x| x.is_ascii_alphanumeric() || **x == '_')
                .count();
            Ok((Part::Var(c[1..1 + n].iter().collect()), 1 + n))
        }
        _ => Ok((Part::Lit("$".into()), 1)),
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek_kw(&self) -> Option<String> {
        match self.toks.get(self.pos) {
            Some(Tok::Word(w)) => w.lit(),
            _ => None,
        }
    }
    fn is_kw(&self, kws: &[&str]) -> bool {
        self.peek_kw().is_some_and(|k| kws.contains(&k.as_str()))
    }
    fn skip_semis(&mut self) {
        while matches!(self.toks.get(self.pos), Some(Tok::Op(";"))) {
            self.pos += 1;
        }
    }
    fn expect_kw(&mut self, kw: &str) -> Result<(), SyntaxError> {
        self.skip_semis();
        if self.peek_kw().as_deref() == Some(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError(format!("sh: syntax error: expected \"{kw}\"")))
        }
    }

    /// list := and_or ((';' | '&') and_or)*, stopping at a terminating keyword.
    fn list(&mut self, stop: &[&str]) -> Result<Node, SyntaxError> {
        let mut items = Vec::new();
        loop {
            self.skip_semis();
            if self.pos >= self.toks.len() || self.is_kw(stop) {
                break;
            }
            items.push(self.and_or(stop)?);
            if let Some(Tok::Op(";" | "&")) = self.toks.get(self.pos) {
                self.pos += 1;
            }
        }
        Ok(Node::List(items))
    }

    fn and_or(&mut self, stop: &[&str]) -> Result<Node, SyntaxError> {
        let mut left = self.pipeline(stop)?;
        loop {
            match self.toks.get(self.pos) {
                Some(Tok::Op("&&")) => {
                    self.pos += 1;
                    self.skip_semis();
                    left = Node::And(Box::new(left), Box::new(self.pipeline(stop)?));
                }
                Some(Tok::Op("||")) => {
                    self.pos += 1;
                    self.skip_semis();
                    left = Node::Or(Box::new(left), Box::new(self.pipeline(stop)?));
                }
                _ => return Ok(left),
            }
        }
    }

    fn pipeline(&mut self, stop: &[&str]) -> Result<Node, SyntaxError> {
        let mut cmds = vec![self.command(stop)?];
        while matches!(self.toks.get(self.pos), Some(Tok::Op("|"))) {
            self.pos += 1;
            cmds.push(self.command(stop)?);
        }
        Ok(if cmds.len() == 1 {
            cmds.pop().expect("one")
        } else {
            Node::Pipe(cmds)
        })
    }

    fn command(&mut self, stop: &[&str]) -> Result<Node, SyntaxError> {
        match self.peek_kw().as_deref() {
            Some(k @ ("while" | "until")) => {
                self.pos += 1;
                let cond = self.list(&["do"])?;
                self.expect_kw("do")?;
                let body = self.list(&["done"])?;
                self.expect_kw("done")?;
                Ok(Node::While {
                    cond: Box::new(cond),
                    body: Box::new(body),
                    until: k == "until",
                })
            }
            Some("for") => {
                self.pos += 1;
                let var = self
                    .peek_kw()
                    .ok_or_else(|| SyntaxError("sh: syntax error: bad for loop variable".into()))?;
                self.pos += 1;
                let mut items = Vec::new();
                if self.is_kw(&["in"]) {
                    self.pos += 1;
                    while let Some(Tok::Word(w)) = self.toks.get(self.pos) {
                        items.push(w.clone());
                        self.pos += 1;
                    }
                }
                self.expect_kw("do")?;
                let body = self.list(&["done"])?;
                self.expect_kw("done")?;
                Ok(Node::For {
                    var,
                    items,
                    body: Box::new(body),
                })
            }
            Some("if") => {
                self.pos += 1;
                let mut branches = Vec::new();
                let mut els = None;
                loop {
                    let cond = self.list(&["then"])?;
                    self.expect_kw("then")?;
                    let body = self.list(&["elif", "else", "fi"])?;
                    branches.push((cond, body));
                    self.skip_semis();
                    match self.peek_kw().as_deref() {
                        Some("elif") => self.pos += 1,
                        Some("else") => {
                            self.pos += 1;
                            els = Some(Box::new(self.list(&["fi"])?));
                            self.expect_kw("fi")?;
                            break;
                        }
                        _ => {
                            self.expect_kw("fi")?;
                            break;
                        }
                    }
                }
                Ok(Node::If { branches, els })
            }
            Some(k @ ("{" | "(")) => {
                self.pos += 1;
                let close = if k == "{" { "}" } else { ")" };
                let body = self.list(&[close])?;
                self.expect_kw(close)?;
                Ok(body)
            }
            _ => {
                let mut words = Vec::new();
                let mut redirs = Vec::new();
                loop {
                    match self.toks.get(self.pos) {
                        Some(Tok::Word(w)) => {
                            if words.is_empty() && w.lit().is_some_and(|l| stop.contains(&l.as_str())) {
                                break;
                            }
                            if w.lit().is_some_and(|l| l == ")" || l == "}") && !words.is_empty() {
                                break;
                            }
                            words.push(w.clone());
                            self.pos += 1;
                        }
                        Some(Tok::Redir(r)) => {
                            redirs.push(r.clone());
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                if words.is_empty() && redirs.is_empty() {
                    return Err(SyntaxError("sh: syntax error: unexpected token".into()));
                }
                Ok(Node::Simple {
                    words,
                    redirs,
                    raw: None,
                })
            }
        }
    }
}

fn parse_sh(src: &str) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        toks: sh_tokens(src)?,
        pos: 0,
    };
    let n = p.list(&[])?;
    if p.pos < p.toks.len() {
        return Err(SyntaxError("sh: syntax error: unexpected token".into()));
    }
    Ok(n)
}

/// Parses a cmd.exe line: `&`, `&&`, `||`, `|`, redirects, `%VAR%` (expanded here, as cmd
/// expands at parse time) and `^` escapes. Each simple command keeps its raw text for `echo`.
fn parse_cmd(src: &str, env: &BTreeMap<String, String>) -> Node {
    let expanded = expand_percent(src, env);
    let c: Vec<char> = expanded.chars().collect();
    let mut list = Vec::new();
    let mut pending_op: Option<&str> = None;
    let mut pipe: Vec<Node> = Vec::new();
    let mut i = 0;
    let mut raw = String::new();
    let mut redirs = Vec::new();
    let mut in_q = false;
    let finish = |raw: &mut String, redirs: &mut Vec<Redir>| -> Node {
        let text = std::mem::take(raw);
        let words = split_cmd_words(&text);
        Node::Simple {
            words,
            redirs: std::mem::take(redirs),
            raw: Some(text),
        }
    };
    let mut chain: Option<Node> = None;
    let join = |chain: Option<Node>, op: Option<&str>, n: Node| -> Node {
        match (chain, op) {
            (Some(l), Some("&&")) => Node::And(Box::new(l), Box::new(n)),
            (Some(l), Some("||")) => Node::Or(Box::new(l), Box::new(n)),
            (_, _) => n,
        }
    };
    while i < c.len() {
        let ch = c[i];
        if in_q {
            raw.push(ch);
            if ch == '"' {
                in_q = false;
            }
            i += 1;
            continue;
        }
        match ch {
            '"' => {
                in_q = true;
                raw.push(ch);
                i += 1;
            }
            '^' if i + 1 < c.len() => {
                raw.push(c[i + 1]);
                i += 2;
            }
            '&' | '|' => {
                let double = c.get(i + 1) == Some(&ch);
                let node = finish(&mut raw, &mut redirs);
                pipe.push(node);
                if ch == '|' && !double {
                    i += 1;
                    continue;
                }
                let p = if pipe.len() == 1 {
                    pipe.pop().expect("one")
                } else {
                    Node::Pipe(std::mem::take(&mut pipe))
                };
                let joined = join(chain.take(), pending_op, p);
                if double {
                    chain = Some(joined);
                    pending_op = Some(if ch == '&' { "&&" } else { "||" });
                    i += 2;
                } else {
                    list.push(joined);
                    pending_op = None;
                    i += 1;
                }
            }
            '>' | '<' => {
                let mut fd = if ch == '<' { 0 } else { 1 };
                if raw.ends_with('2') && raw[..raw.len() - 1].ends_with([' ', '\t']) {
                    raw.pop();
                    fd = 2;
                } else if raw.ends_with('1') && raw[..raw.len() - 1].ends_with([' ', '\t']) {
                    raw.pop();
                }
                i += 1;
                let append = ch == '>' && c.get(i) == Some(&'>');
                if append {
                    i += 1;
                }
                if c.get(i) == Some(&'&') {
                    let n = c.get(i + 1).and_then(|d| d.to_digit(10)).unwrap_or(1) as u8;
                    i += 2;
                    redirs.push(Redir {
                        fd,
                        append,
                        input: false,
                        target: Target::Fd(n),
                    });
                    continue;
                }
                while c.get(i) == Some(&' ') {
                    i += 1;
                }
                let mut target = String::new();
                let mut q = false;
                while let Some(&d) = c.get(i) {
                    if d == '"' {
                        q = !q;
                    } else if !q && (d == ' ' || d == '&' || d == '|' || d == '>' || d == '<') {
                        break;
                    } else {
                        target.push(d);
                    }
                    i += 1;
                }
                redirs.push(Redir {
                    fd,
                    append,
                    input: ch == '<',
                    target: Target::File(Word {
                        parts: vec![Part::Lit(target)],
                        quoted: true,
                    }),
                });
            }
            _ => {
                raw.push(ch);
                i += 1;
            }
        }
    }
    if !raw.trim().is_empty() || !redirs.is_empty() {
        pipe.push(finish(&mut raw, &mut redirs));
    }
    if !pipe.is_empty() {
        let p = if pipe.len() == 1 {
            pipe.pop().expect("one")
        } else {
            Node::Pipe(pipe)
        };
        list.push(join(chain.take(), pending_op, p));
    } else if let Some(c) = chain {
        list.push(c);
    }
    Node::List(list)
}

fn expand_percent(src: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(start) = rest.find('%') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('%') {
            Some(end) if end > 0 && !after[..end].contains(' ') => {
                let name = &after[..end];
                match env.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
                    Some((_, v)) => out.push_str(v),
                    None => {
                        out.push('%');
                        out.push_str(name);
                        out.push('%');
                    }
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push('%');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn split_cmd_words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut q = false;
    let mut any = false;
    for ch in text.chars() {
        match ch {
            '"' => {
                q = !q;
                any = true;
            }
            ' ' | '\t' if !q => {
                if any {
                    words.push(Word {
                        parts: vec![Part::Lit(std::mem::take(&mut cur))],
                        quoted: true,
                    });
                    any = false;
                }
            }
            _ => {
                cur.push(ch);
                any = true;
            }
        }
    }
    if any {
        words.push(Word {
            parts: vec![Part::Lit(cur)],
            quoted: true,
        });
    }
    // The first word is a command name: unquoted so that keywords are recognised.
    if let Some(w) = words.first_mut() {
        w.quoted = false;
    }
    words
}

/// The shell interpreter state for one script.
struct Interp {
    ctx: Ctx,
    dialect: Dialect,
    vars: BTreeMap<String, String>,
    last: i32,
    exit: Option<i32>,
    cwd: String,
    /// PowerShell background jobs (Start-Job).
    jobs: Vec<tokio::task::JoinHandle<i32>>,
}

/// Why a command did not run (it was interrupted by a stop).
const STOPPED: i32 = -1;

impl Interp {
    fn new(ctx: Ctx, dialect: Dialect) -> Self {
        let vars = ctx.env.clone();
        let cwd = ctx.cwd.clone();
        Interp {
            ctx,
            dialect,
            jobs: Vec::new(),
            vars,
            last: 0,
            exit: None,
            cwd,
        }
    }

    fn nl(&self) -> &'static str {
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
                            stdin: vec![],
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

    fn run_node<'a>(&'a mut self, n: &'a Node, io: Io) -> BoxFuture<'a, i32> {
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
                                    stdin: std::mem::take(&mut stdin),
                                },
                            )
                            .await;
                        stdin = buf.lock().expect("pipe lock").clone();
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
                    let full = self.abs(&path);
                    if r.input {
                        match self.ctx.fs.read(&full) {
                            Ok(b) => io.stdin = b,
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
        code
    }

    fn redirect_error(&self, io: &Io, path: &str, e: &FsError) {
        let msg = match self.dialect {
            Dialect::Sh => format!("sh: can't create {path}: {}\n", fs_msg(Os::Linux, e)),
            Dialect::Cmd => format!("{}\r\n", fs_msg(Os::Windows, e)),
            Dialect::Ps => format!("Out-File : Access to the path '{path}' is denied.\r\n"),
        };
        io.err.write(msg.as_bytes());
    }

    fn abs(&self, p: &str) -> String {
        let windows_abs = p.len() >= 2 && p.as_bytes()[1] == b':';
        if p.starts_with('/') || p.starts_with('\\') || windows_abs {
            p.to_string()
        } else {
            format!("{}/{}", self.cwd.trim_end_matches(['/', '\\']), p)
        }
    }

    fn out(&self, io: &Io, s: &str) {
        io.out.write(s.as_bytes());
    }

    fn line(&self, io: &Io, s: &str) {
        io.out.write(format!("{s}{}", self.nl()).as_bytes());
    }

    fn err(&self, io: &Io, s: &str) {
        io.err.write(format!("{s}{}", self.nl()).as_bytes());
    }

    fn has_applet(&self, name: &str) -> bool {
        self.ctx.image.has(Tool::Busybox) && BUSYBOX_APPLETS.contains(&name)
    }

    fn has_windows_program(&self, name: &str) -> bool {
        self.ctx.image.has(Tool::Cmd) && WINDOWS_PROGRAMS.contains(&name)
    }

    /// Sleeps, or returns false when the container was stopped meanwhile.
    async fn sleep(&self, d: Duration) -> bool {
        let _busy = self.ctx.usage.busy(0);
        tokio::select! {
            _ = self.ctx.cancel.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    fn command<'a>(&'a mut self, argv: Vec<String>, raw: Option<&'a str>, io: &'a Io) -> BoxFuture<'a, i32> {
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
                "whoami" if self.has_applet("whoami") || self.has_windows_program("whoami") => {
                    let u = match self.ctx.pod.os {
                        Os::Windows => format!("user manager\\{}", self.ctx.user.to_ascii_lowercase()),
                        Os::Linux => self.ctx.user.clone(),
                    };
                    self.line(io, &u);
                    0
                }
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
                "cat" if self.has_applet("cat") => self.cat(&args, io, "cat"),
                "type" if cmd_builtin => self.cat(&args, io, "type"),
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
                    for a in args.iter().filter(|a| !a.starts_with('-') && !a.starts_with('/')) {
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
                    let (invert, pats): (bool, Vec<&String>) = (
                        args.iter().any(|a| a == "-v" || a.eq_ignore_ascii_case("/v")),
                        args.iter()
                            .filter(|a| !a.starts_with('-') && !a.starts_with('/'))
                            .collect(),
                    );
                    let Some(pat) = pats.first() else { return 2 };
                    let text = String::from_utf8_lossy(&io.stdin).to_string();
                    let mut found = false;
                    for l in text.lines() {
                        if l.contains(pat.as_str()) != invert {
                            found = true;
                            self.line(io, l);
                        }
                    }
                    if found { 0 } else { 1 }
                }
                "wc" if self.has_applet("wc") => {
                    let text = String::from_utf8_lossy(&io.stdin).to_string();
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
                        None => String::from_utf8_lossy(&io.stdin).to_string(),
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
                    let data = io.stdin.clone();
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
                    self.line(
                        io,
                        if args.iter().any(|a| a == "-a") {
                            "Linux crossconf-sim 6.1.0 #1 SMP x86_64 GNU/Linux"
                        } else {
                            "Linux"
                        },
                    );
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

    fn cat(&self, args: &[String], io: &Io, cmd: &str) -> i32 {
        let files: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        if files.is_empty() {
            io.out.write(&io.stdin);
            return 0;
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

    fn ls(&self, args: &[String], io: &Io) -> i32 {
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

    fn ipconfig(&self, _args: &[String], io: &Io) -> i32 {
        let p = &self.ctx.pod;
        let (servers, searches) = match &p.dns {
            Ok(d) => (
                d.nameservers.iter().map(ToString::to_string).collect::<Vec<_>>(),
                d.searches.clone(),
            ),
            Err(_) => (vec![], vec![]),
        };
        let pad = "                                       ";
        let mut lines = vec![
            String::new(),
            "Windows IP Configuration".into(),
            String::new(),
            format!("   Host Name . . . . . . . . . . . . : {}", p.hostname),
            "   Primary Dns Suffix  . . . . . . . : ".into(),
            "   Node Type . . . . . . . . . . . . : Hybrid".into(),
            "   IP Routing Enabled. . . . . . . . : No".into(),
            "   WINS Proxy Enabled. . . . . . . . : No".into(),
        ];
        for (i, s) in searches.iter().enumerate() {
            lines.push(if i == 0 {
                format!("   DNS Suffix Search List. . . . . . : {s}")
            } else {
                format!("{pad}{s}")
            });
        }
        lines.extend([
            String::new(),
            "Ethernet adapter vEthernet (eth0):".into(),
            String::new(),
            format!(
                "   Connection-specific DNS Suffix  . : {}",
                searches.first().cloned().unwrap_or_default()
            ),
            "   Description . . . . . . . . . . . : Hyper-V Virtual Ethernet Container Adapter".into(),
            "   DHCP Enabled. . . . . . . . . . . : No".into(),
            "   Autoconfiguration Enabled . . . . : Yes".into(),
            format!("   IPv4 Address. . . . . . . . . . . : {}(Preferred)", p.ip),
            "   Subnet Mask . . . . . . . . . . . : 255.255.255.0".into(),
            format!("   Default Gateway . . . . . . . . . : {}", gateway(p.ip)),
        ]);
        for (i, s) in servers.iter().enumerate() {
            lines.push(if i == 0 {
                format!("   DNS Servers . . . . . . . . . . . : {s}")
            } else {
                format!("{pad}{s}")
            });
        }
        lines.push("   NetBIOS over Tcpip. . . . . . . . : Disabled".into());
        for l in lines {
            self.line(io, &l);
        }
        0
    }

    fn pod_dns(&self) -> Result<PodDns, String> {
        self.ctx.pod.dns.clone()
    }

    async fn resolve(&self, name: &str) -> Result<IpAddr, ResolveError> {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(ip);
        }
        if name.eq_ignore_ascii_case("localhost") {
            return Ok(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        }
        let d = self.pod_dns().map_err(|_| ResolveError::NoServers)?;
        dns::resolve(&d, &self.ctx.net, &self.ctx.source(), name)
            .await
            .map(|r| IpAddr::V4(r.addrs[0]))
    }

    async fn nslookup(&self, args: &[String], io: &Io) -> i32 {
        let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let Some(name) = pos.first() else {
            self.err(io, "nslookup: interactive mode is not emulated; pass a name");
            return 1;
        };
        let Ok(mut d) = self.pod_dns() else {
            self.err(io, "nslookup: no DNS configuration");
            return 1;
        };
        if let Some(server) = pos.get(1) {
            match server.parse::<IpAddr>() {
                Ok(ip) => d.nameservers = vec![ip],
                Err(_) => {
                    self.err(io, &format!("nslookup: can't resolve '{server}'"));
                    return 1;
                }
            }
        }
        let first = d.nameservers[0];
        let win = self.dialect != Dialect::Sh && self.ctx.pod.os == Os::Windows;
        let r = dns::resolve(&d, &self.ctx.net, &self.ctx.source(), name).await;
        if win {
            match &r {
                Ok(res) => {
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {}", res.server));
                    self.line(io, "");
                    self.line(io, &format!("Name:    {}", res.name));
                    let addrs: Vec<String> = res.addrs.iter().map(ToString::to_string).collect();
                    self.line(
                        io,
                        &format!(
                            "{}  {}",
                            if addrs.len() > 1 { "Addresses:" } else { "Address:" },
                            addrs.join(&format!("{}          ", self.nl()))
                        ),
                    );
                    self.line(io, "");
                    0
                }
                Err(ResolveError::NotFound { .. }) => {
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {first}"));
                    self.line(io, "");
                    self.err(io, &format!("*** UnKnown can't find {name}: Non-existent domain"));
                    1
                }
                Err(ResolveError::NoServers) => {
                    self.err(io, "DNS request timed out.");
                    self.err(io, "    timeout was 2 seconds.");
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {first}"));
                    self.line(io, "");
                    self.err(io, "*** Request to UnKnown timed-out");
                    1
                }
            }
        } else {
            match &r {
                Ok(res) => {
                    self.line(io, &format!("Server:\t\t{}", res.server));
                    self.line(io, &format!("Address:\t{}:53", res.server));
                    self.line(io, "");
                    for a in &res.addrs {
                        self.line(io, &format!("Name:\t{}", res.name));
                        self.line(io, &format!("Address: {a}"));
                    }
                    self.line(io, "");
                    0
                }
                Err(ResolveError::NotFound { .. }) => {
                    self.line(io, &format!("Server:\t\t{first}"));
                    self.line(io, &format!("Address:\t{first}:53"));
                    self.line(io, "");
                    self.err(io, &format!("** server can't find {name}: NXDOMAIN"));
                    1
                }
                Err(ResolveError::NoServers) => {
                    self.err(io, ";; connection timed out; no servers could be reached");
                    1
                }
            }
        }
    }

    async fn http_get(
        &self,
        url: &str,
        timeout: Duration,
        headers: &[(String, String)],
    ) -> Result<http::Response, (i32, String)> {
        let rest = url.strip_prefix("http://").unwrap_or(url);
        if url.starts_with("https://") {
            return Err((1, format!("Protocol \"https\" not supported by the simulator ({url})")));
        }
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) => (h, p),
                Err(_) => {
                    return Err((
                        3,
                        format!("URL rejected: Port number was not a decimal number between 0 and 65535 ({url})"),
                    ));
                }
            },
            None => (hostport, 80),
        };
        let ip = self
            .resolve(host)
            .await
            .map_err(|_| (6, format!("Could not resolve host: {host}")))?;
        let addr = SocketAddr::new(ip, port);
        let started = Instant::now();
        http::get(
            self.ctx.net.dialer(),
            &self.ctx.source(),
            addr,
            hostport,
            path,
            headers,
            timeout,
        )
        .await
        .map_err(|e| match e {
            http::HttpError::Timeout { .. } => (
                28,
                format!(
                    "Operation timed out after {} milliseconds with 0 bytes received",
                    started.elapsed().as_millis()
                ),
            ),
            http::HttpError::Dial {
                source:
                    NetError::Dropped { .. }
                    | NetError::TimedOut { .. }
                    | NetError::Unreachable { .. }
                    | NetError::NoRoute { .. },
                ..
            } => (
                28,
                format!(
                    "Failed to connect to {host} port {port} after {} ms: Timeout was reached",
                    started.elapsed().as_millis()
                ),
            ),
            http::HttpError::Dial { .. } => (
                7,
                format!(
                    "Failed to connect to {host} port {port} after {} ms: Couldn't connect to server",
                    started.elapsed().as_millis()
                ),
            ),
            other => (56, crate::node::error_chain(&other)),
        })
    }

    async fn curl(&self, args: &[String], io: &Io) -> i32 {
        let mut silent = false;
        let mut show_err = false;
        let mut fail = false;
        let mut out_file = None;
        let mut timeout = Duration::from_secs(30);
        let mut write_out = None;
        let mut head = false;
        let mut headers = Vec::new();
        let mut url = None;
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let val = || args.get(i + 1).cloned().unwrap_or_default();
            match a {
                "-s" | "--silent" => silent = true,
                "-S" | "--show-error" => show_err = true,
                "-sS" | "-Ss" => {
                    silent = true;
                    show_err = true;
                }
                "-f" | "--fail" => fail = true,
                "-sf" | "-fs" => {
                    silent = true;
                    fail = true;
                }
                "-v" | "-L" | "-k" | "--insecure" | "-4" => {}
                "-I" | "--head" => head = true,
                "-o" | "--output" => {
                    out_file = Some(val());
                    i += 1;
                }
                "-m" | "--max-time" | "--connect-timeout" => {
                    timeout = parse_secs(&val()).unwrap_or(timeout);
                    i += 1;
                }
                "-w" | "--write-out" => {
                    write_out = Some(val());
                    i += 1;
                }
                "-H" | "--header" => {
                    if let Some((k, v)) = val().split_once(':') {
                        headers.push((k.trim().to_string(), v.trim().to_string()));
                    }
                    i += 1;
                }
                a if a.starts_with('-') => {
                    self.err(io, &format!("curl: option {a}: is unknown to the simulator's curl"));
                    return 2;
                }
                a => url = Some(a.to_string()),
            }
            i += 1;
        }
        let Some(url) = url else {
            self.err(io, "curl: no URL specified!");
            return 2;
        };
        match self.http_get(&url, timeout, &headers).await {
            Ok(r) => {
                if fail && r.status >= 400 {
                    if !silent || show_err {
                        self.err(
                            io,
                            &format!("curl: (22) The requested URL returned error: {}", r.status),
                        );
                    }
                    return 22;
                }
                let body = if head {
                    format!("HTTP/1.1 {}\r\n\r\n", r.status).into_bytes()
                } else {
                    r.body.to_vec()
                };
                match out_file {
                    Some(f) if f != "/dev/null" && !is_null_device(&f) => {
                        if let Err(e) = self.ctx.fs.write(&self.abs(&f), &body, false) {
                            self.err(io, &format!("curl: (23) Failure writing output to destination: {e}"));
                            return 23;
                        }
                    }
                    Some(_) => {}
                    None => io.out.write(&body),
                }
                if let Some(w) = write_out {
                    self.out(
                        io,
                        &w.replace("%{http_code}", &r.status.to_string()).replace("\\n", "\n"),
                    );
                }
                0
            }
            Err((code, msg)) => {
                if !silent || show_err {
                    self.err(io, &format!("curl: ({code}) {msg}"));
                }
                if let Some(w) = write_out {
                    self.out(io, &w.replace("%{http_code}", "000").replace("\\n", "\n"));
                }
                code
            }
        }
    }

    async fn wget(&self, args: &[String], io: &Io) -> i32 {
        let mut out_file: Option<String> = None;
        let mut timeout = Duration::from_secs(30);
        let mut spider = false;
        let mut quiet = false;
        let mut url = None;
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "-O" => {
                    out_file = args.get(i + 1).cloned();
                    i += 1;
                }
                "-T" => {
                    timeout = args.get(i + 1).and_then(|v| parse_secs(v)).unwrap_or(timeout);
                    i += 1;
                }
                "-q" => quiet = true,
                "-qO-" | "-qO" => {
                    quiet = true;
                    out_file = Some("-".into());
                }
                "--spider" => spider = true,
                a if a.starts_with("--timeout=") => timeout = parse_secs(&a[10..]).unwrap_or(timeout),
                a if a.starts_with('-') => {}
                a => url = Some(a.to_string()),
            }
            i += 1;
        }
        let Some(url) = url else {
            self.err(io, "BusyBox wget: no URL given");
            return 1;
        };
        if !quiet {
            self.err(io, &format!("Connecting to {}", url.trim_start_matches("http://")));
        }
        match self.http_get(&url, timeout, &[]).await {
            Ok(r) if r.status >= 400 => {
                self.err(io, &format!("wget: server returned error: HTTP/1.1 {}", r.status));
                1
            }
            Ok(r) => {
                if spider {
                    return 0;
                }
                match out_file.as_deref() {
                    Some("-") => io.out.write(&r.body),
                    Some(f) => {
                        if let Err(e) = self.ctx.fs.write(&self.abs(f), &r.body, false) {
                            self.err(io, &format!("wget: can't open '{f}': {}", fs_msg(Os::Linux, &e)));
                            return 1;
                        }
                    }
                    None => {
                        let name = url
                            .rsplit('/')
                            .next()
                            .filter(|s| !s.is_empty() && !s.contains(':'))
                            .unwrap_or("index.html")
                            .to_string();
                        if let Err(e) = self.ctx.fs.write(&self.abs(&name), &r.body, false) {
                            self.err(io, &format!("wget: can't open '{name}': {}", fs_msg(Os::Linux, &e)));
                            return 1;
                        }
                    }
                }
                0
            }
            Err((6, _)) => {
                let host = url
                    .trim_start_matches("http://")
                    .split(['/', ':'])
                    .next()
                    .unwrap_or("")
                    .to_string();
                self.err(io, &format!("wget: bad address '{host}'"));
                1
            }
            Err((28, _)) => {
                self.err(io, "wget: download timed out");
                1
            }
            Err((_, msg)) => {
                self.err(io, &format!("wget: can't connect to remote host: {msg}"));
                1
            }
        }
    }

    async fn nc(&self, args: &[String], io: &Io) -> i32 {
        let mut udp = false;
        let mut zero = false;
        let mut verbose = false;
        let mut wait = Duration::from_secs(5);
        let mut pos = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "-w" || a == "-W" {
                wait = args.get(i + 1).and_then(|v| parse_secs(v)).unwrap_or(wait);
                i += 2;
                continue;
            }
            if let Some(flags) = a.strip_prefix('-') {
                for f in flags.chars() {
                    match f {
                        'u' => udp = true,
                        'z' => zero = true,
                        'v' => verbose = true,
                        'n' => {}
                        'l' => {
                            self.err(io, "nc: listen mode is not emulated by the simulator");
                            return 1;
                        }
                        _ => {}
                    }
                }
            } else {
                pos.push(a.to_string());
            }
            i += 1;
        }
        let (Some(host), Some(port)) = (pos.first(), pos.get(1).and_then(|p| p.parse::<u16>().ok())) else {
            self.err(io, "BusyBox nc: usage: nc [-uzv] [-w SEC] HOST PORT");
            return 1;
        };
        let ip = match self.resolve(host).await {
            Ok(ip) => ip,
            Err(_) => {
                self.err(io, &format!("nc: bad address '{host}'"));
                return 1;
            }
        };
        let addr = SocketAddr::new(ip, port);
        let src = self.ctx.source();
        if udp {
            let payload = if io.stdin.is_empty() {
                b"\n".to_vec()
            } else {
                io.stdin.clone()
            };
            return match self.ctx.net.dialer().udp_request(&src, addr, &payload, wait).await {
                Ok(reply) => {
                    io.out.write(&reply);
                    0
                }
                Err(NetError::TimedOut { .. }) if zero => 0,
                Err(e) => {
                    if verbose {
                        self.err(io, &format!("nc: {e}"));
                    }
                    1
                }
            };
        }
        match tokio::time::timeout(wait, self.ctx.net.dialer().tcp(&src, addr)).await {
            Ok(Ok(mut stream)) => {
                if verbose {
                    self.err(io, &format!("{host} ({ip}:{port}) open"));
                }
                if zero {
                    return 0;
                }
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                if !io.stdin.is_empty() && stream.write_all(&io.stdin).await.is_err() {
                    return 1;
                }
                let _ = stream.shutdown().await;
                let mut buf = Vec::new();
                let _ = tokio::time::timeout(wait, stream.read_to_end(&mut buf)).await;
                io.out.write(&buf);
                0
            }
            Ok(Err(e)) => {
                self.err(
                    io,
                    &format!(
                        "nc: can't connect to remote host ({ip}): {}",
                        match &e {
                            NetError::Io { source, .. } if source.kind() == std::io::ErrorKind::ConnectionRefused =>
                                "Connection refused".to_string(),
                            e => e.to_string(),
                        }
                    ),
                );
                1
            }
            Err(_) => {
                self.err(io, &format!("nc: {host} ({ip}:{port}): Connection timed out"));
                1
            }
        }
    }

    async fn ping(&self, args: &[String], io: &Io) -> i32 {
        let windows_style = self.dialect != Dialect::Sh && self.ctx.pod.os == Os::Windows;
        let mut count: Option<u64> = if windows_style { Some(4) } else { None };
        let mut wait = Duration::from_secs(1);
        let mut host = None;
        let mut i = 0;
        while i < args.len() {
            let a = args[i].to_ascii_lowercase();
            match a.as_str() {
                "-c" | "-n" => {
                    count = args.get(i + 1).and_then(|v| v.parse().ok());
                    i += 1;
                }
                "-t" => count = None,
                "-w" | "-W" => {
                    let v = args.get(i + 1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(1);
                    wait = if windows_style {
                        Duration::from_millis(v)
                    } else {
                        Duration::from_secs(v)
                    };
                    i += 1;
                }
                a if a.starts_with('-') => {}
                _ => host = Some(args[i].clone()),
            }
            i += 1;
        }
        let Some(host) = host else {
            self.err(io, "ping: usage error: Destination address required");
            return 1;
        };
        let ip = match self.resolve(&host).await {
            Ok(ip) => ip,
            Err(_) => {
                if windows_style {
                    self.line(
                        io,
                        &format!("Ping request could not find host {host}. Please check the name and try again."),
                    );
                } else {
                    self.err(io, &format!("ping: bad address '{host}'"));
                }
                return 1;
            }
        };
        let src = self.ctx.source();
        if windows_style {
            self.line(io, "");
            self.line(io, &format!("Pinging {ip} with 32 bytes of data:"));
        } else {
            self.line(io, &format!("PING {host} ({ip}): 56 data bytes"));
        }
        let (mut sent, mut got) = (0u64, 0u64);
        loop {
            if count.is_some_and(|c| sent >= c) {
                break;
            }
            let reply = self.ctx.net.dialer().ping(&src, ip) == PingOutcome::Reply;
            sent += 1;
            if reply {
                got += 1;
                if windows_style {
                    self.line(io, &format!("Reply from {ip}: bytes=32 time<1ms TTL=128"));
                } else {
                    self.line(
                        io,
                        &format!("64 bytes from {ip}: seq={} ttl=64 time=0.050 ms", sent - 1),
                    );
                }
            } else if windows_style {
                if !self.sleep(wait).await {
                    return STOPPED;
                }
                self.line(io, "Request timed out.");
            } else if !self.sleep(wait).await {
                return STOPPED;
            }
            if count.is_none_or(|c| sent < c) && !self.sleep(Duration::from_secs(1)).await {
                return STOPPED;
            }
        }
        let loss = ((sent - got) * 100).checked_div(sent).unwrap_or(0);
        if windows_style {
            self.line(io, "");
            self.line(io, &format!("Ping statistics for {ip}:"));
            self.line(
                io,
                &format!(
                    "    Packets: Sent = {sent}, Received = {got}, Lost = {} ({loss}% loss),",
                    sent - got
                ),
            );
        } else {
            self.line(io, "");
            self.line(io, &format!("--- {host} ping statistics ---"));
            self.line(
                io,
                &format!("{sent} packets transmitted, {got} packets received, {loss}% packet loss"),
            );
        }
        if got > 0 { 0 } else { 1 }
    }
}

fn gateway(ip: std::net::Ipv4Addr) -> std::net::Ipv4Addr {
    let o = ip.octets();
    std::net::Ipv4Addr::new(o[0], o[1], o[2], 1)
}

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

fn io_for(ctx: &Ctx, stdin: Vec<u8>) -> Io {
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
pub async fn run_sh_script(ctx: Ctx, script: &str, stdin: Option<Vec<u8>>) -> i32 {
    let _busy = ctx.usage.busy(1);
    let io = io_for(&ctx, stdin.unwrap_or_default());
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
pub async fn run_sh_argv(ctx: Ctx, args: &[String], stdin: Option<Vec<u8>>) -> i32 {
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
    let script = String::from_utf8_lossy(&stdin.unwrap_or_default()).to_string();
    run_sh_script(ctx, &script, None).await
}

/// Runs a cmd.exe command line.
pub async fn run_cmd_script(ctx: Ctx, script: &str) -> i32 {
    let _busy = ctx.usage.busy(1);
    let node = parse_cmd(script, &ctx.env);
    let io = io_for(&ctx, vec![]);
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
pub async fn run_direct(ctx: Ctx, dialect: Dialect, argv: Vec<String>, stdin: Option<Vec<u8>>) -> i32 {
    let io = io_for(&ctx, stdin.unwrap_or_default());
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
    let io = io_for(&ctx, vec![]);
    let mut it = Interp::new(ctx, Dialect::Ps);
    let code = ps_block(&mut it, &script, &io).await;
    finish(&it, code)
}

fn split_top(s: &str, sep: char) -> Vec<String> {
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

fn ps_block<'a>(it: &'a mut Interp, script: &'a str, io: &'a Io) -> BoxFuture<'a, i32> {
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
                    stdin: vec![],
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

async fn ps_pipeline(it: &mut Interp, stmt: &str, io: &Io) -> i32 {
    let stages = split_top(stmt, '|');
    let mut input: Option<Vec<u8>> = None;
    let mut code = 0;
    for (k, stage) in stages.iter().enumerate() {
        let last = k + 1 == stages.len();
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sub_io = Io {
            out: if last { io.out.clone() } else { Sink::Buf(buf.clone()) },
            err: io.err.clone(),
            stdin: input.take().unwrap_or_default(),
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
            match it.ctx.fs.read(&it.abs(&p)) {
                Ok(b) => {
                    io.out.write(&b);
                    0
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
                .unwrap_or_else(|| io.stdin.clone());
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
                    it.err(io, &format!("Resolve-DnsName : {name} : DNS name does not exist ({e})"));
                    1
                }
            }
        }
        "hostname" | "ipconfig" | "nslookup" | "ping" | "whoami" | "curl.exe" | "cmd" | "timeout" => {
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
mod tests {
    use super::*;

    #[test]
    fn parses_sh_lists_loops_and_redirects() {
        let n = parse_sh("echo a && echo b || exit 3; while true; do sleep 1; done").unwrap();
        let Node::List(items) = n else { panic!() };
        assert_eq!(items.len(), 2);
        assert!(matches!(items[1], Node::While { .. }));
        let n = parse_sh("echo hi > /mnt/x 2>&1").unwrap();
        let Node::List(items) = n else { panic!() };
        let Node::Simple { words, redirs, .. } = &items[0] else {
            panic!()
        };
        assert_eq!(words.len(), 2);
        assert_eq!(redirs.len(), 2);
        assert!(parse_sh("echo 'unterminated").is_err());
        let n = parse_sh("if [ -f /x ]; then echo y; else echo n; fi").unwrap();
        let Node::List(items) = n else { panic!() };
        assert!(matches!(items[0], Node::If { .. }));
    }

    #[test]
    fn parses_cmd_lines_with_raw_echo() {
        let env = BTreeMap::from([("FOO".to_string(), "bar".to_string())]);
        let Node::List(items) = parse_cmd("echo %FOO%> C:\\mnt\\f.txt & type C:\\mnt\\f.txt", &env) else {
            panic!()
        };
        assert_eq!(items.len(), 2);
        let Node::Simple { raw, redirs, .. } = &items[0] else {
            panic!()
        };
        assert_eq!(raw.as_deref(), Some("echo bar "), "cmd keeps the space before &");
        assert_eq!(redirs.len(), 1);
        let Node::List(items) = parse_cmd("exit 3 && echo no", &env) else {
            panic!()
        };
        assert!(matches!(items[0], Node::And(..)));
    }

    #[test]
    fn expands_percent_vars_case_insensitively() {
        let env = BTreeMap::from([("Path".to_string(), "C:\\x".to_string())]);
        assert_eq!(expand_percent("a %PATH% %NOPE% 50%", &env), "a C:\\x %NOPE% 50%");
    }

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

#[cfg(test)]
mod ps_job_tests {
    use super::*;
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
