//! A small reader for the XML subset JUnit files use.
//!
//! The crate writes JUnit with quick-junit, which cannot read; this reader covers what JUnit
//! writers emit (declaration, comments, elements, attributes, text, CDATA, the predefined and
//! numeric character references, a DOCTYPE without an internal subset) and rejects anything
//! else with a line number rather than guessing.
//!
//! `select::junit_xml` has a second, streaming reader with line-and-column errors for
//! `--rerun-failed` and `--durations-from`; folding the two into one is a known follow-up.

/// A parse problem and its 1-based line.
#[derive(Debug)]
pub(super) struct ParseError {
    pub(super) line: usize,
    pub(super) problem: String,
}

/// A child of an element.
#[derive(Debug)]
pub(super) enum Node {
    Element(Element),
    Text(String),
}

/// An element with its attributes and children.
#[derive(Debug)]
pub(super) struct Element {
    pub(super) name: String,
    pub(super) line: usize,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
}

impl Element {
    pub(super) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub(super) fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|c| match c {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    /// The concatenated text of this element's descendants.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        self.push_text(&mut out);
        out
    }

    fn push_text(&self, out: &mut String) {
        for child in &self.children {
            match child {
                Node::Text(t) => out.push_str(t),
                Node::Element(e) => e.push_text(out),
            }
        }
    }
}

struct Reader<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn line(&self) -> usize {
        1 + self.src[..self.pos].bytes().filter(|&b| b == b'\n').count()
    }

    fn error<T>(&self, problem: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            line: self.line(),
            problem: problem.into(),
        })
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        let trimmed = self.rest().trim_start_matches([' ', '\t', '\r', '\n']);
        self.pos = self.src.len() - trimmed.len();
    }

    /// Skips past `end`, or fails naming `what`.
    fn skip_past(&mut self, end: &str, what: &str) -> Result<&'a str, ParseError> {
        match self.rest().find(end) {
            Some(i) => {
                let skipped = &self.rest()[..i];
                self.pos += i + end.len();
                Ok(skipped)
            }
            None => self.error(format!("unterminated {what}")),
        }
    }

    fn name(&mut self) -> Result<&'a str, ParseError> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
            .unwrap_or(rest.len());
        if len == 0 {
            return self.error("expected a name");
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    /// Comments, processing instructions and a DOCTYPE, wherever they may appear.
    fn skip_misc(&mut self) -> Result<bool, ParseError> {
        if self.eat("<!--") {
            self.skip_past("-->", "comment")?;
        } else if self.eat("<?") {
            self.skip_past("?>", "processing instruction")?;
        } else if self.rest().starts_with("<!DOCTYPE") {
            let decl = self.skip_past(">", "DOCTYPE")?;
            if decl.contains('[') {
                return self.error("a DOCTYPE with an internal subset is not supported");
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn decode(&self, raw: &str) -> Result<String, ParseError> {
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        while let Some(i) = rest.find('&') {
            out.push_str(&rest[..i]);
            rest = &rest[i + 1..];
            let Some(end) = rest.find(';') else {
                return self.error("an '&' is not followed by a reference ending in ';'");
            };
            let entity = &rest[..end];
            let c = match entity {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let code = if let Some(hex) = entity.strip_prefix("#x").or_else(|| entity.strip_prefix("#X")) {
                        u32::from_str_radix(hex, 16).ok()
                    } else if let Some(dec) = entity.strip_prefix('#') {
                        dec.parse().ok()
                    } else {
                        None
                    };
                    code.and_then(char::from_u32)
                }
            };
            match c {
                Some(c) => out.push(c),
                None => return self.error(format!("unknown reference &{entity};")),
            }
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn element(&mut self) -> Result<Element, ParseError> {
        let line = self.line();
        if !self.eat("<") {
            return self.error("expected an element");
        }
        let name = self.name()?.to_string();
        let mut attrs = Vec::new();
        loop {
            self.skip_ws();
            if self.eat("/>") {
                return Ok(Element {
                    name,
                    line,
                    attrs,
                    children: Vec::new(),
                });
            }
            if self.eat(">") {
                break;
            }
            let key = self.name()?.to_string();
            self.skip_ws();
            if !self.eat("=") {
                return self.error(format!("attribute {key} has no value"));
            }
            self.skip_ws();
            let quote = if self.eat("\"") {
                "\""
            } else if self.eat("'") {
                "'"
            } else {
                return self.error(format!("attribute {key} is not quoted"));
            };
            let raw = self.skip_past(quote, "attribute value")?;
            if raw.contains('<') {
                return self.error(format!("attribute {key} contains '<'"));
            }
            attrs.push((key, self.decode(raw)?));
        }
        let mut children = Vec::new();
        loop {
            if self.eat("</") {
                let close = self.name()?;
                if close != name {
                    return self.error(format!("</{close}> closes <{name}>"));
                }
                self.skip_ws();
                if !self.eat(">") {
                    return self.error(format!("</{close} is not closed with '>'"));
                }
                return Ok(Element {
                    name,
                    line,
                    attrs,
                    children,
                });
            }
            if self.eat("<![CDATA[") {
                let text = self.skip_past("]]>", "CDATA section")?;
                children.push(Node::Text(text.to_string()));
            } else if self.skip_misc()? {
            } else if self.rest().starts_with('<') {
                children.push(Node::Element(self.element()?));
            } else if self.rest().is_empty() {
                return self.error(format!("<{name}> is never closed"));
            } else {
                let len = self.rest().find('<').unwrap_or(self.rest().len());
                let raw = &self.rest()[..len];
                let text = self.decode(raw)?;
                self.pos += len;
                children.push(Node::Text(text));
            }
        }
    }
}

/// Parses a whole document into its root element.
pub(super) fn parse(src: &str) -> Result<Element, ParseError> {
    let mut r = Reader {
        src: src.strip_prefix('\u{feff}').unwrap_or(src),
        pos: 0,
    };
    loop {
        r.skip_ws();
        if !r.skip_misc()? {
            break;
        }
    }
    if !r.rest().starts_with('<') {
        return r.error("the document does not start with an element");
    }
    let root = r.element()?;
    loop {
        r.skip_ws();
        if !r.skip_misc()? {
            break;
        }
    }
    if !r.rest().is_empty() {
        return r.error("content after the root element");
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_elements_attributes_text_and_references() {
        let doc = "<?xml version=\"1.0\"?>\n<!-- c -->\n<a x='1 &amp; 2' y=\"&#60;&#x3e;\">\
                   t&lt;<b/><![CDATA[<raw>]]></a>\n";
        let a = parse(doc).unwrap();
        assert_eq!(a.name, "a");
        assert_eq!(a.attr("x"), Some("1 & 2"));
        assert_eq!(a.attr("y"), Some("<>"));
        assert_eq!(a.text(), "t<<raw>");
        assert_eq!(a.elements().count(), 1);
    }

    #[test]
    fn rejects_malformed_documents_with_a_line() {
        for (doc, line, word) in [
            ("<a>\n<b></a>", 2, "closes"),
            ("<a>\n\n", 3, "never closed"),
            ("<a x=1/>", 1, "not quoted"),
            ("<a>&nbsp;</a>", 1, "unknown reference"),
            ("<a/><b/>", 1, "after the root"),
            ("text", 1, "does not start"),
            ("<a><!-- x</a>", 1, "unterminated comment"),
        ] {
            let err = parse(doc).unwrap_err();
            assert_eq!(err.line, line, "{doc}: {err:?}");
            assert!(err.problem.contains(word), "{doc}: {err:?}");
        }
    }
}
