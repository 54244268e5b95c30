//! The cmd.exe line parser: `&`, `&&`, `||`, `|`, redirects, `%VAR%` expansion at parse time
//! and `^` escapes, producing the same command tree as the sh parser. Separate because cmd's
//! quoting and expansion rules share nothing with sh's.

use std::collections::BTreeMap;

use super::sh_parse::{Node, Part, Redir, Target, Word};

/// Parses a cmd.exe line: `&`, `&&`, `||`, `|`, redirects, `%VAR%` (expanded here, as cmd
/// expands at parse time) and `^` escapes. Each simple command keeps its raw text for `echo`.
pub(super) fn parse_cmd(src: &str, env: &BTreeMap<String, String>) -> Node {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
