//! A small, strict reader for JUnit XML: the `<testcase>` rows of a report, with their status
//! and time.
//!
//! `--rerun-failed` needs the failed rows and `--durations-from` the times. quick-junit's reader
//! accepts only its own dialect (a `<testsuites>` root, a closed set of child elements), while
//! both must also read upstream ginkgo reports and older single-`<testsuite>` files, and
//! `roxmltree` is only a dev-dependency; so this module knows just enough XML: elements,
//! attributes, entities, comments, CDATA, processing instructions and a DOCTYPE without an
//! internal subset. Anything malformed is an error with its line and column rather than a
//! silently empty answer.

use std::collections::BTreeSet;
use std::time::Duration;

/// One `<testcase>` row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Testcase {
    /// The full case name (upstream's `[It] ` prefix removed).
    pub name: String,
    /// It has a direct `<failure>` or `<error>` child (`flakyFailure` and `rerunFailure` rows
    /// are earlier attempts of a case whose own status decides).
    pub failed: bool,
    /// It has a direct `<skipped>` child.
    pub skipped: bool,
    /// Its `time` attribute, when present.
    pub time: Option<Duration>,
}

/// Upstream's ginkgo reporter names testcases `[It] <full name>`.
fn strip_it(name: &str) -> &str {
    name.strip_prefix("[It] ").unwrap_or(name)
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn location(&self, at: usize) -> String {
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("line {line} column {column}")
    }

    fn fail<T>(&self, at: usize, what: &str) -> Result<T, String> {
        Err(format!("{}: {what}", self.location(at)))
    }

    /// Skips past `end`, failing with `what` when it never comes.
    fn skip_past(&mut self, end: &str, what: &str) -> Result<(), String> {
        match self.rest().find(end) {
            Some(i) => {
                self.pos += i + end.len();
                Ok(())
            }
            None => self.fail(self.pos, what),
        }
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    fn name(&mut self) -> Result<&'a str, String> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '>' | '=' | '<'))
            .unwrap_or(rest.len());
        if len == 0 {
            return self.fail(self.pos, "expected a name");
        }
        self.pos += len;
        Ok(&rest[..len])
    }
}

/// Decodes the five predefined entities and character references.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semi = after
            .find(';')
            .ok_or_else(|| format!("unterminated entity in {raw:?}"))?;
        let entity = &after[..semi];
        let decoded = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = entity.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32)
                    .ok_or_else(|| format!("unknown entity &{entity}; in {raw:?}"))?
            }
        };
        out.push(decoded);
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

struct Open<'a> {
    name: &'a str,
    at: usize,
    /// For a `<testcase>`: what has been read of it so far.
    case: Option<Testcase>,
}

/// Every `<testcase>` of a JUnit document, in document order, or where the XML is malformed.
pub(crate) fn testcases(text: &str) -> Result<Vec<Testcase>, String> {
    let mut r = Reader { text, pos: 0 };
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut cases = Vec::new();
    let mut root_seen = false;
    loop {
        let Some(lt) = r.rest().find('<') else {
            if !stack.is_empty() || r.rest().trim().is_empty() {
                break;
            }
            return r.fail(r.pos, "text outside the root element");
        };
        let text_between = &r.rest()[..lt];
        if stack.is_empty() && !text_between.trim().is_empty() {
            return r.fail(r.pos, "text outside the root element");
        }
        unescape(text_between).map_err(|e| format!("{}: {e}", r.location(r.pos)))?;
        r.pos += lt;
        let start = r.pos;
        let rest = r.rest();
        if rest.starts_with("<?") {
            r.skip_past("?>", "unterminated processing instruction")?;
        } else if rest.starts_with("<!--") {
            r.skip_past("-->", "unterminated comment")?;
        } else if rest.starts_with("<![CDATA[") {
            if stack.is_empty() {
                return r.fail(start, "CDATA outside the root element");
            }
            r.skip_past("]]>", "unterminated CDATA section")?;
        } else if rest.starts_with("<!DOCTYPE") {
            if root_seen {
                return r.fail(start, "DOCTYPE after the root element");
            }
            r.skip_past(">", "unterminated DOCTYPE")?;
        } else if rest.starts_with("</") {
            r.pos += 2;
            let name = r.name()?;
            r.skip_space();
            if !r.rest().starts_with('>') {
                return r.fail(r.pos, "expected '>'");
            }
            r.pos += 1;
            let Some(open) = stack.pop() else {
                return r.fail(start, &format!("closing </{name}> without an opening tag"));
            };
            if open.name != name {
                return r.fail(
                    start,
                    &format!("</{name}> closes <{}> opened at {}", open.name, r.location(open.at)),
                );
            }
            close(open, &mut cases);
        } else {
            r.pos += 1;
            let name = r.name()?;
            if stack.is_empty() {
                if root_seen {
                    return r.fail(start, "a second root element");
                }
                if name != "testsuites" && name != "testsuite" {
                    return r.fail(
                        start,
                        &format!("root element is <{name}>, not <testsuites> or <testsuite>"),
                    );
                }
                root_seen = true;
            }
            let mut case_name = None;
            let mut case_time = None;
            let mut attributes = BTreeSet::new();
            let self_closing = loop {
                r.skip_space();
                let rest = r.rest();
                if rest.starts_with("/>") {
                    r.pos += 2;
                    break true;
                }
                if rest.starts_with('>') {
                    r.pos += 1;
                    break false;
                }
                if rest.is_empty() {
                    return r.fail(start, &format!("unterminated <{name}> tag"));
                }
                let attr_at = r.pos;
                let attr = r.name()?;
                if !attributes.insert(attr) {
                    return r.fail(attr_at, &format!("duplicate attribute {attr}"));
                }
                r.skip_space();
                if !r.rest().starts_with('=') {
                    return r.fail(r.pos, &format!("expected '=' after attribute {attr}"));
                }
                r.pos += 1;
                r.skip_space();
                let Some(quote) = r.rest().chars().next().filter(|c| *c == '"' || *c == '\'') else {
                    return r.fail(r.pos, "expected a quoted attribute value");
                };
                r.pos += 1;
                let Some(end) = r.rest().find(quote) else {
                    return r.fail(attr_at, "unterminated attribute value");
                };
                let raw = &r.rest()[..end];
                if raw.contains('<') {
                    return r.fail(attr_at, "'<' in an attribute value");
                }
                let value = unescape(raw).map_err(|e| format!("{}: {e}", r.location(attr_at)))?;
                r.pos += end + 1;
                if name == "testcase" && attr == "name" {
                    case_name = Some(value);
                } else if name == "testcase" && attr == "time" {
                    case_time = Some(value);
                }
            };
            if let Some(Open { case: Some(case), .. }) = stack.last_mut() {
                match name {
                    "failure" | "error" => case.failed = true,
                    "skipped" => case.skipped = true,
                    _ => {}
                }
            }
            let case = if name == "testcase" {
                let Some(case_name) = case_name else {
                    return r.fail(start, "<testcase> without a name attribute");
                };
                let time = match case_time {
                    None => None,
                    Some(t) => match t.trim().parse::<f64>() {
                        Ok(secs) if secs.is_finite() && secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
                        _ => return r.fail(start, &format!("<testcase> time {t:?} is not a number of seconds")),
                    },
                };
                Some(Testcase {
                    name: strip_it(&case_name).to_string(),
                    failed: false,
                    skipped: false,
                    time,
                })
            } else {
                None
            };
            let open = Open { name, at: start, case };
            if self_closing {
                close(open, &mut cases);
            } else {
                stack.push(open);
            }
        }
        if stack.is_empty() && root_seen && r.rest().trim().is_empty() {
            break;
        }
    }
    if let Some(open) = stack.last() {
        return r.fail(open.at, &format!("<{}> is never closed", open.name));
    }
    if !root_seen {
        return r.fail(0, "no <testsuites> or <testsuite> element");
    }
    Ok(cases)
}

/// Records a closed `<testcase>`.
fn close(open: Open<'_>, cases: &mut Vec<Testcase>) {
    if let Some(case) = open.case {
        cases.push(case);
    }
}
