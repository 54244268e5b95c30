//! Reading one JUnit file into the dashboard's [`CaseResult`]s: which rows are cases, and how
//! failure, flaky, rerun and skip elements map to a cell's status and text (the status rules
//! in the parent module's docs).

use super::xml;
use super::{CaseResult, Status};

/// A JUnit parse problem, with its line.
#[derive(Debug)]
pub(super) struct JunitProblem {
    pub(super) line: usize,
    pub(super) problem: String,
}

/// Every `<testcase>` under the document's `<testsuites>`/`<testsuite>` elements.
pub(super) fn parse_junit(text: &str) -> Result<Vec<CaseResult>, JunitProblem> {
    let root = xml::parse(text).map_err(|e| JunitProblem {
        line: e.line,
        problem: e.problem,
    })?;
    if root.name != "testsuites" && root.name != "testsuite" {
        return Err(JunitProblem {
            line: root.line,
            problem: format!("the root element is <{}>, not <testsuites> or <testsuite>", root.name),
        });
    }
    let mut out = Vec::new();
    collect_cases(&root, "", &mut out)?;
    Ok(out)
}

fn collect_cases(element: &xml::Element, suite: &str, out: &mut Vec<CaseResult>) -> Result<(), JunitProblem> {
    let suite = if element.name == "testsuite" {
        element.attr("name").unwrap_or(suite)
    } else {
        suite
    };
    for child in element.elements() {
        match child.name.as_str() {
            "testsuite" => collect_cases(child, suite, out)?,
            "testcase" => out.push(test_case(child, suite)?),
            _ => {}
        }
    }
    Ok(())
}

/// The text of a failure-like element: its body, else its `message`, prefixed by its `type`
/// when that says more than "failed".
fn failure_text(e: &xml::Element) -> String {
    let body = e.text();
    let body = body.trim();
    let text = if body.is_empty() {
        e.attr("message").unwrap_or("").trim()
    } else {
        body
    };
    match e.attr("type") {
        Some(ty) if !ty.is_empty() && ty != "failed" && ty != "failure" => format!("[{ty}] {text}"),
        _ => text.to_string(),
    }
}

fn test_case(e: &xml::Element, suite: &str) -> Result<CaseResult, JunitProblem> {
    let name = e.attr("name").ok_or_else(|| JunitProblem {
        line: e.line,
        problem: "a <testcase> has no name attribute".into(),
    })?;
    let mut failures = Vec::new();
    let mut retries = Vec::new();
    let mut skip: Option<String> = None;
    let mut properties = Vec::new();
    for child in e.elements() {
        match child.name.as_str() {
            "failure" | "error" => failures.push(failure_text(child)),
            "flakyFailure" | "flakyError" | "rerunFailure" | "rerunError" => {
                retries.push(failure_text(child));
            }
            "skipped" => {
                let body = child.text();
                let reason = child
                    .attr("message")
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or(body.trim());
                skip = Some(reason.trim().to_string());
            }
            "properties" => {
                for p in child.elements().filter(|p| p.name == "property") {
                    let key = p.attr("name").unwrap_or("").to_string();
                    let value = p.attr("value").map(str::to_string).unwrap_or_else(|| p.text());
                    properties.push((key, value));
                }
            }
            _ => {}
        }
    }
    // Attempt properties (`attempt.1 = failed: ...`) and `flaky = true` mark a flaky pass
    // for writers that record retries as properties instead of elements.
    for (key, value) in &properties {
        let is_attempt = key.strip_prefix("attempt.").is_some_and(|n| n.parse::<u32>().is_ok());
        if is_attempt && value.trim_start().to_ascii_lowercase().starts_with("failed") {
            retries.push(format!("{key}: {value}"));
        }
    }
    let flaky_property = properties
        .iter()
        .any(|(k, v)| k == "flaky" && v.trim().eq_ignore_ascii_case("true"));
    let (status, message) = if !failures.is_empty() {
        let mut all = failures;
        if !retries.is_empty() {
            all.push(format!("earlier attempts:\n{}", retries.join("\n\n")));
        }
        (Status::Fail, all.join("\n\n"))
    } else if let Some(reason) = skip {
        (Status::Skip, reason)
    } else if !retries.is_empty() || flaky_property {
        let text = if retries.is_empty() {
            "passed after a failed attempt (flaky property)".to_string()
        } else {
            format!("passed after failed attempts:\n{}", retries.join("\n\n"))
        };
        (Status::Flaky, text)
    } else {
        (Status::Pass, String::new())
    };
    Ok(CaseResult {
        name: name.to_string(),
        suite: suite.to_string(),
        status,
        message,
        seconds: e.attr("time").and_then(|t| t.trim().parse().ok()),
        properties,
    })
}
