//! The busybox `sh` parser: tokens, words with their expansions (`$VAR`, `$(…)`), redirects and
//! the command tree (lists, pipes, `&&`/`||`, `while`/`until`, `for`, `if`) that the
//! interpreter runs. Separate because parsing is pure and tested on its own; cmd.exe lines are
//! parsed into the same tree by `cmd_parse`.

/// One word of a command line, expanded when the command runs.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Part {
    Lit(String),
    Var(String),
    Subst(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Word {
    pub(super) parts: Vec<Part>,
    pub(super) quoted: bool,
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
pub(super) enum Target {
    File(Word),
    Fd(u8),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Redir {
    pub(super) fd: u8,
    pub(super) append: bool,
    pub(super) input: bool,
    pub(super) target: Target,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
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
pub struct SyntaxError(pub(super) String);

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

pub(super) fn parse_sh(src: &str) -> Result<Node, SyntaxError> {
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
}
