//! The HTML page: the grid of cases × runs, its header cells and the inline CSS and script.
//!
//! CSS and script live in `page.css` and `page.js` beside this file, embedded with
//! `include_str!`, so they can be read and edited as what they are; the page still needs no
//! network.

use std::collections::BTreeSet;

use super::{CaseResult, RunResults, Status};

/// The page's style sheet, inline in `<style>`.
pub(super) const STYLE: &str = include_str!("page.css");

/// The page's script: filtering, the details panel and the URL-fragment hooks.
pub(super) const SCRIPT: &str = include_str!("page.js");

/// HTML-escapes text for element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The bracketed tags of a case name (`[sig-windows]`, `[Serial]`…).
pub(super) fn tags(name: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = name;
    while let Some(start) = rest.find('[') {
        let Some(len) = rest[start..].find(']') else {
            break;
        };
        out.push(&rest[start..=start + len]);
        rest = &rest[start + len + 1..];
    }
    out
}

/// At most `max` characters of the first non-empty line, as TestGrid cuts cell messages.
pub(super) fn short(text: &str, max: usize) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn format_time(seconds: i64) -> String {
    match jiff::Timestamp::from_second(seconds) {
        Ok(ts) => ts.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        Err(_) => format!("timestamp {seconds}"),
    }
}

/// The hover text of a column header: folder, times, result and metadata.
fn run_title(run: &RunResults) -> String {
    let mut lines = vec![format!("results: {}", run.dir.display())];
    if let Some(s) = run.started {
        lines.push(format!("started: {}", format_time(s)));
    }
    if let Some(f) = run.finished {
        lines.push(format!("finished: {}", format_time(f)));
    }
    match run.passed {
        Some(p) => lines.push(format!("passed: {p}")),
        None => lines.push("passed: unknown (no finished.json)".into()),
    }
    for (k, v) in &run.metadata {
        let v = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        lines.push(format!("{k}: {v}"));
    }
    lines.join("\n")
}

fn cell_title(status: Status, case: &CaseResult) -> String {
    let time = case.seconds.map(|s| format!(" in {s:.1}s")).unwrap_or_default();
    match status {
        Status::Pass => format!("passed{time}"),
        Status::Fail => format!("failed{time}: {}", short(&case.message, 140)),
        Status::Flaky => format!("flaky{time}: {}", short(&case.message, 140)),
        Status::Skip => format!("skipped: {}", short(&case.message, 140)),
    }
}

/// One row of the grid: a case or step name, and its result in each run (newest first).
fn write_row(html: &mut String, class: &str, id_prefix: &str, row: usize, name: &str, results: &[Option<&CaseResult>]) {
    let tags = tags(name).join(" ");
    html.push_str(&format!(
        "<tr class=\"{class}\" data-name=\"{}\" data-tags=\"{}\"><th class=\"name\" scope=\"row\" title=\"{}\">{}</th>",
        escape(name),
        escape(&tags),
        escape(name),
        escape(name)
    ));
    for (col, result) in results.iter().enumerate() {
        let id = format!("{id_prefix}-{row}-{col}");
        match result {
            Some(case) => {
                let status = case.status;
                html.push_str(&format!(
                    "<td id=\"{id}\" class=\"cell {}\" data-col=\"{col}\" data-status=\"{}\" title=\"{}\" data-message=\"{}\">{}</td>",
                    status.class(),
                    status.class(),
                    escape(&cell_title(status, case)),
                    escape(&case.message),
                    status.glyph()
                ));
            }
            None => {
                html.push_str(&format!(
                    "<td id=\"{id}\" class=\"cell none\" data-col=\"{col}\" data-status=\"none\" title=\"not in this run\"></td>"
                ));
            }
        }
    }
    html.push_str("</tr>\n");
}

/// The runs newest first: by `started.json` timestamp, runs without one last, then by name.
pub(super) fn newest_first(runs: &[RunResults]) -> Vec<&RunResults> {
    let mut sorted: Vec<&RunResults> = runs.iter().collect();
    sorted.sort_by(|a, b| {
        b.started
            .is_some()
            .cmp(&a.started.is_some())
            .then(b.started.cmp(&a.started))
            .then(a.name.cmp(&b.name))
    });
    sorted
}

/// The whole page for `runs`: a grid of cases × runs, newest run first (see the module docs).
pub fn render(runs: &[RunResults]) -> String {
    let runs = newest_first(runs);
    let case_names: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.cases.iter().map(|c| c.name.as_str()))
        .collect();
    let step_names: Vec<&str> = {
        let mut seen = BTreeSet::new();
        runs.iter()
            .flat_map(|r| r.steps.iter().map(|s| s.name.as_str()))
            .filter(|n| seen.insert(*n))
            .collect()
    };
    let mut html = String::with_capacity(16 * 1024);
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n");
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n");
    html.push_str("<title>crossconf results</title>\n<style>");
    html.push_str(STYLE);
    html.push_str("</style>\n</head>\n<body>\n<h1>crossconf results</h1>\n");
    html.push_str(&format!(
        "<div class=\"bar\"><input id=\"filter\" type=\"search\" placeholder=\"filter by name or tag, e.g. [sig-windows] -[Serial]\" aria-label=\"filter cases\" />\
         <label><input id=\"only-bad\" type=\"checkbox\" /> only failing or flaky</label>\
         <span id=\"shown\">{} cases</span>\
         <span class=\"legend\"><span><i style=\"background:var(--pass)\"></i>pass</span><span><i style=\"background:var(--fail)\"></i>fail</span>\
         <span><i style=\"background:var(--flaky)\"></i>flaky</span><span><i style=\"background:var(--skip)\"></i>skipped</span>\
         <span><i style=\"background:var(--none);border:1px solid #ccc\"></i>not run</span></span></div>\n",
        case_names.len()
    ));
    html.push_str("<table id=\"grid\">\n<thead><tr><th class=\"corner\">case</th>");
    for run in &runs {
        let t = run.totals();
        let failed_run = run.passed == Some(false) || t.failed > 0;
        let time = run.started.map(format_time).unwrap_or_else(|| "no started.json".into());
        html.push_str(&format!(
            "<th class=\"run-col{}\" scope=\"col\" data-run=\"{}\" data-passed=\"{}\" data-failed=\"{}\" data-flaky=\"{}\" data-skipped=\"{}\" title=\"{}\">\
             <span class=\"run-name\">{}</span><span class=\"run-time\">{}</span>\
             <span class=\"totals\"><b class=\"t-pass\" title=\"passed\">{}✓</b><b class=\"t-fail\" title=\"failed\">{}✗</b>\
             <b class=\"t-flaky\" title=\"flaky\">{}~</b><b class=\"t-skip\" title=\"skipped\">{}–</b></span></th>",
            if failed_run { " failed-run" } else { "" },
            escape(&run.name),
            t.passed,
            t.failed,
            t.flaky,
            t.skipped,
            escape(&run_title(run)),
            escape(&run.name),
            escape(&time),
            t.passed,
            t.failed,
            t.flaky,
            t.skipped
        ));
    }
    html.push_str("</tr></thead>\n<tbody id=\"cases\">\n");
    for (i, name) in case_names.iter().enumerate() {
        let results: Vec<Option<&CaseResult>> = runs.iter().map(|r| r.case(name)).collect();
        write_row(&mut html, "case-row", "c", i, name, &results);
    }
    html.push_str("</tbody>\n");
    if !step_names.is_empty() {
        html.push_str(&format!(
            "<tbody id=\"steps\"><tr class=\"section\"><th colspan=\"{}\">runner steps (junit_runner.xml)</th></tr>\n",
            runs.len() + 1
        ));
        for (i, name) in step_names.iter().enumerate() {
            let results: Vec<Option<&CaseResult>> =
                runs.iter().map(|r| r.steps.iter().find(|s| s.name == *name)).collect();
            write_row(&mut html, "step-row", "s", i, name, &results);
        }
        html.push_str("</tbody>\n");
    }
    html.push_str("</table>\n");
    html.push_str(
        "<section id=\"details\" hidden=\"hidden\"><h2 id=\"details-title\"></h2><div class=\"meta\" id=\"details-meta\"></div>\
         <pre id=\"details-text\"></pre></section>\n",
    );
    html.push_str("<script>");
    html.push_str(SCRIPT);
    html.push_str("</script>\n</body>\n</html>\n");
    html
}
