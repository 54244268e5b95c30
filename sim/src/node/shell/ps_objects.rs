//! PowerShell's object side, as far as the cases need it: values (`$null`, booleans, integers,
//! strings, objects with properties, arrays), expressions over them (`$_.Type -EQ 'x'`,
//! `-and`/`-or`/`-not`, comparison operators with PowerShell's conversions and collection
//! filtering, member access with the intrinsic `Length`/`Count`), object pipelines
//! (`Get-ComputeProcess | Where-Object { … }`) and the default table view of objects.
//!
//! Separate from `powershell` because that engine passes text between commands; this one is
//! entered only where a statement produces or tests objects (an `if` condition, `throw`, an
//! assignment or statement whose pipeline starts with an object cmdlet).

use std::collections::BTreeMap;

/// A PowerShell value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PsValue {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    /// An object: its type's short name and its properties in display order.
    Obj(Vec<(String, PsValue)>),
    Arr(Vec<PsValue>),
}

impl PsValue {
    /// PowerShell's conversion to boolean (`if`, `-and`, `Where-Object`).
    pub(super) fn truthy(&self) -> bool {
        match self {
            PsValue::Null => false,
            PsValue::Bool(b) => *b,
            PsValue::Int(i) => *i != 0,
            PsValue::Str(s) => !s.is_empty(),
            PsValue::Obj(_) => true,
            PsValue::Arr(a) => match a.as_slice() {
                [] => false,
                [one] => one.truthy(),
                _ => true,
            },
        }
    }

    /// The value as text (`throw`'s message, a string comparison's operand).
    pub(super) fn text(&self) -> String {
        match self {
            PsValue::Null => String::new(),
            PsValue::Bool(true) => "True".into(),
            PsValue::Bool(false) => "False".into(),
            PsValue::Int(i) => i.to_string(),
            PsValue::Str(s) => s.clone(),
            PsValue::Obj(_) => "System.Management.Automation.PSCustomObject".into(),
            PsValue::Arr(a) => a.iter().map(PsValue::text).collect::<Vec<_>>().join(" "),
        }
    }

    /// What a pipeline's output becomes when assigned: nothing is `$null`, one object is
    /// itself, more are an array.
    pub(super) fn from_output(mut items: Vec<PsValue>) -> PsValue {
        match items.len() {
            0 => PsValue::Null,
            1 => items.remove(0),
            _ => PsValue::Arr(items),
        }
    }

    /// The items a value sends down a pipeline (an array's elements, `$null` none).
    pub(super) fn into_items(self) -> Vec<PsValue> {
        match self {
            PsValue::Null => Vec::new(),
            PsValue::Arr(a) => a,
            v => vec![v],
        }
    }

    /// Member access `.name`: a property, the intrinsic `Length`/`Count` (0 for `$null`, 1 for
    /// a scalar, a string's `Length` its characters), or member enumeration over an array.
    fn member(&self, name: &str) -> PsValue {
        let intrinsic = name.eq_ignore_ascii_case("length") || name.eq_ignore_ascii_case("count");
        match self {
            PsValue::Null if intrinsic => PsValue::Int(0),
            PsValue::Null => PsValue::Null,
            PsValue::Str(s) if name.eq_ignore_ascii_case("length") => PsValue::Int(s.chars().count() as i64),
            PsValue::Arr(a) if intrinsic => PsValue::Int(a.len() as i64),
            PsValue::Arr(a) => PsValue::from_output(
                a.iter()
                    .map(|v| v.member(name))
                    .filter(|v| *v != PsValue::Null)
                    .collect(),
            ),
            PsValue::Obj(props) => match props.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
                Some((_, v)) => v.clone(),
                None if intrinsic => PsValue::Int(1),
                None => PsValue::Null,
            },
            _ if intrinsic => PsValue::Int(1),
            _ => PsValue::Null,
        }
    }
}

/// An expression that does not parse or cannot be evaluated, in PowerShell's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct ExprError(pub String);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Var(String),
    Member(String),
    Lit(PsValue),
    Op(String),
    Not,
}

fn tokens(src: &str) -> Result<Vec<Tok>, ExprError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let word = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_' || chars[*i] == ':') {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '$' => {
                i += 1;
                out.push(Tok::Var(word(&mut i)));
            }
            '.' if i + 1 < chars.len() && chars[i + 1].is_alphabetic() => {
                i += 1;
                out.push(Tok::Member(word(&mut i)));
            }
            '\'' | '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(ExprError("The string is missing the terminator: '.".into())),
                        // A doubled quote is one quote character.
                        Some(&q) if q == c && chars.get(i + 1) == Some(&c) => {
                            s.push(c);
                            i += 2;
                        }
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Lit(PsValue::Str(s)));
            }
            '-' if chars.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) => {
                i += 1;
                let op = word(&mut i).to_ascii_lowercase();
                if op == "not" {
                    out.push(Tok::Not);
                } else {
                    out.push(Tok::Op(op));
                }
            }
            c if c.is_ascii_digit() || c == '-' => {
                let start = i;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                let n: String = chars[start..i].iter().collect();
                let v = n
                    .parse()
                    .map_err(|_| ExprError(format!("Unexpected token '{n}' in expression or statement.")))?;
                out.push(Tok::Lit(PsValue::Int(v)));
            }
            _ => {
                let w = word(&mut i);
                if w.is_empty() {
                    return Err(ExprError(format!("Unexpected token '{c}' in expression or statement.")));
                }
                // A bare word in an expression is a string (as an argument would be).
                out.push(Tok::Lit(PsValue::Str(w)));
            }
        }
    }
    Ok(out)
}

/// Variables an expression reads: object-valued ones, then the shell's text variables.
pub(super) struct Scope<'a> {
    pub objects: &'a BTreeMap<String, PsValue>,
    pub text: &'a BTreeMap<String, String>,
}

impl Scope<'_> {
    fn var(&self, name: &str) -> PsValue {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "null" => return PsValue::Null,
            "true" => return PsValue::Bool(true),
            "false" => return PsValue::Bool(false),
            _ => {}
        }
        if let Some(v) = self.objects.get(&lower) {
            return v.clone();
        }
        match self.text.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
            Some((_, v)) => v.trim().parse().map_or_else(|_| PsValue::Str(v.clone()), PsValue::Int),
            None => PsValue::Null,
        }
    }
}

struct Parser<'a, 'b> {
    toks: Vec<Tok>,
    at: usize,
    scope: &'a Scope<'b>,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn or(&mut self) -> Result<PsValue, ExprError> {
        let mut v = self.and()?;
        while matches!(self.peek(), Some(Tok::Op(o)) if o == "or") {
            self.at += 1;
            let r = self.and()?;
            v = PsValue::Bool(v.truthy() || r.truthy());
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<PsValue, ExprError> {
        let mut v = self.not()?;
        while matches!(self.peek(), Some(Tok::Op(o)) if o == "and") {
            self.at += 1;
            let r = self.not()?;
            v = PsValue::Bool(v.truthy() && r.truthy());
        }
        Ok(v)
    }

    fn not(&mut self) -> Result<PsValue, ExprError> {
        if self.peek() == Some(&Tok::Not) {
            self.at += 1;
            return Ok(PsValue::Bool(!self.not()?.truthy()));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<PsValue, ExprError> {
        let left = self.primary()?;
        let Some(Tok::Op(op)) = self.peek().cloned() else {
            return Ok(left);
        };
        if op == "and" || op == "or" {
            return Ok(left);
        }
        self.at += 1;
        let right = self.primary()?;
        compare(&left, &op, &right)
    }

    fn primary(&mut self) -> Result<PsValue, ExprError> {
        let mut v = match self.toks.get(self.at).cloned() {
            Some(Tok::Open) => {
                self.at += 1;
                let v = self.or()?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(ExprError("Missing closing ')' in expression.".into()));
                }
                self.at += 1;
                v
            }
            Some(Tok::Var(name)) => {
                self.at += 1;
                self.scope.var(&name)
            }
            Some(Tok::Lit(v)) => {
                self.at += 1;
                v
            }
            Some(t) => return Err(ExprError(format!("Unexpected token {t:?} in expression or statement."))),
            None => return Err(ExprError("An expression was expected after '('.".into())),
        };
        while let Some(Tok::Member(m)) = self.peek().cloned() {
            self.at += 1;
            v = v.member(&m);
        }
        Ok(v)
    }
}

/// Evaluates a PowerShell expression.
pub(super) fn eval(src: &str, scope: &Scope<'_>) -> Result<PsValue, ExprError> {
    let mut p = Parser {
        toks: tokens(src)?,
        at: 0,
        scope,
    };
    let v = p.or()?;
    if p.at != p.toks.len() {
        return Err(ExprError(format!(
            "Unexpected token in expression or statement: {:?}",
            &p.toks[p.at..]
        )));
    }
    Ok(v)
}

/// A comparison operator applied as PowerShell does: to each element of an array on the left
/// (the result is the elements that match), else with the right side converted to the left
/// side's type; string comparisons ignore case unless the operator starts with `c`.
fn compare(left: &PsValue, op: &str, right: &PsValue) -> Result<PsValue, ExprError> {
    if let PsValue::Arr(items) = left {
        let mut kept = Vec::new();
        for item in items {
            if compare(item, op, right)?.truthy() {
                kept.push(item.clone());
            }
        }
        return Ok(PsValue::Arr(kept));
    }
    let (case_sensitive, base) = match op.strip_prefix('c') {
        Some(b) if b != "ontains" => (true, b),
        _ => (false, op.strip_prefix('i').unwrap_or(op)),
    };
    let order = match (left, right) {
        (PsValue::Null, r) => Some(if *r == PsValue::Null {
            std::cmp::Ordering::Equal
        } else {
            std::cmp::Ordering::Less
        }),
        (PsValue::Int(l), r) => match r {
            PsValue::Int(r) => Some(l.cmp(r)),
            PsValue::Null => Some(std::cmp::Ordering::Greater),
            r => {
                let t = r.text();
                let n: i64 = t.trim().parse().map_err(|_| {
                    ExprError(format!(
                        "Could not compare \"{l}\" to \"{t}\". Error: \"Cannot convert value \"{t}\" to type \"System.Int32\"."
                    ))
                })?;
                Some(l.cmp(&n))
            }
        },
        (PsValue::Bool(l), r) => Some(l.cmp(&r.truthy())),
        (l, r) => {
            let (a, b) = (l.text(), r.text());
            Some(if case_sensitive {
                a.cmp(&b)
            } else {
                a.to_lowercase().cmp(&b.to_lowercase())
            })
        }
    };
    let o = order.unwrap_or(std::cmp::Ordering::Less);
    let b = match base {
        "eq" => o.is_eq(),
        "ne" => o.is_ne(),
        "lt" => o.is_lt(),
        "le" => o.is_le(),
        "gt" => o.is_gt(),
        "ge" => o.is_ge(),
        _ => {
            return Err(ExprError(format!(
                "Unexpected token '-{op}' in expression or statement (the simulator's PowerShell emulates \
                 -eq -ne -lt -le -gt -ge -and -or -not)"
            )));
        }
    };
    Ok(PsValue::Bool(b))
}

/// `Where-Object`'s filter: a script block `{ expr }` evaluated with `$_` set to each item,
/// or the simplified syntax `Property -Op Value`.
pub(super) fn where_object(
    items: Vec<PsValue>,
    filter: &str,
    objects: &BTreeMap<String, PsValue>,
    text: &BTreeMap<String, String>,
) -> Result<Vec<PsValue>, ExprError> {
    let filter = filter.trim();
    let expr = match filter.strip_prefix('{').and_then(|f| f.strip_suffix('}')) {
        Some(block) => block.trim().to_string(),
        None => {
            let words: Vec<&str> = filter.split_whitespace().collect();
            match words.as_slice() {
                [prop, op, value] if op.starts_with('-') => format!("$_.{prop} {op} {value}"),
                [prop] => format!("$_.{prop}"),
                _ => {
                    return Err(ExprError(format!(
                        "Where-Object : cannot bind the filter {filter:?} (a script block or Property -Op Value)"
                    )));
                }
            }
        }
    };
    let mut vars = objects.clone();
    let mut kept = Vec::new();
    for item in items {
        vars.insert("_".into(), item.clone());
        let scope = Scope { objects: &vars, text };
        if eval(&expr, &scope)?.truthy() {
            kept.push(item);
        }
    }
    Ok(kept)
}

/// The default table view of objects (`Format-Table`): a header, a dash rule and a row per
/// object, each column as wide as its widest value; other values one per line.
pub(super) fn format(items: &[PsValue]) -> Vec<String> {
    let Some(PsValue::Obj(first)) = items.first() else {
        return items.iter().map(PsValue::text).collect();
    };
    let names: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
    let cell = |v: &PsValue, name: &str| v.member(name).text();
    let widths: Vec<usize> = names
        .iter()
        .map(|n| {
            items
                .iter()
                .map(|i| cell(i, n).chars().count())
                .chain([n.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let row = |cells: Vec<String>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![String::new()];
    out.push(row(names.iter().map(|n| n.to_string()).collect()));
    out.push(row(names.iter().map(|n| "-".repeat(n.len())).collect()));
    for i in items {
        out.push(row(names.iter().map(|n| cell(i, n)).collect()));
    }
    out.push(String::new());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn system(kind: &str, owner: &str) -> PsValue {
        PsValue::Obj(vec![
            ("Id".into(), PsValue::Str(format!("{kind}-1"))),
            ("Owner".into(), PsValue::Str(owner.into())),
            ("Type".into(), PsValue::Str(kind.into())),
        ])
    }

    fn ev(src: &str, objects: &BTreeMap<String, PsValue>) -> PsValue {
        let text = BTreeMap::new();
        eval(src, &Scope { objects, text: &text }).unwrap()
    }

    #[test]
    fn where_object_filters_with_a_script_block_and_the_simplified_syntax() {
        let items = vec![
            system("VirtualMachine", "containerd-shim-runhcs-v1.exe"),
            system("Container", "containerd-shim-runhcs-v1.exe"),
            system("VirtualMachine", "vmms.exe"),
        ];
        let none = BTreeMap::new();
        let text = BTreeMap::new();
        let block = "{ ($_.Type -EQ 'VirtualMachine') -and ($_.Owner -EQ 'containerd-shim-runhcs-v1.exe') }";
        let kept = where_object(items.clone(), block, &none, &text).unwrap();
        assert_eq!(kept, vec![items[0].clone()]);
        let kept = where_object(items.clone(), "Type -eq virtualmachine", &none, &text).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(where_object(items, "{ $_.Type -match 'x' }", &none, &text).is_err());
    }

    #[test]
    fn length_is_intrinsic_on_null_scalars_and_arrays() {
        let mut vars = BTreeMap::new();
        vars.insert("none".to_string(), PsValue::from_output(vec![]));
        vars.insert(
            "one".to_string(),
            PsValue::from_output(vec![system("VirtualMachine", "o")]),
        );
        vars.insert(
            "two".to_string(),
            PsValue::from_output(vec![system("Container", "o"), system("Container", "o")]),
        );
        assert_eq!(ev("$none.Length -le 0", &vars), PsValue::Bool(true));
        assert_eq!(ev("$one.Length -le 0", &vars), PsValue::Bool(false));
        assert_eq!(ev("$two.Length", &vars), PsValue::Int(2));
        assert_eq!(
            ev("$two.Type", &vars),
            PsValue::Arr(vec![PsValue::Str("Container".into()); 2])
        );
        assert_eq!(ev("'abc'.Length", &vars), PsValue::Int(3));
        assert_eq!(ev("-not ($one.Type -ceq 'virtualmachine')", &vars), PsValue::Bool(true));
        assert_eq!(ev("$two.Type -eq 'container'", &vars).into_items().len(), 2);
    }
}
