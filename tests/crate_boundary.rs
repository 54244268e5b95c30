//! The workspace's boundaries, checked rather than kept by discipline.
//!
//! * The harness reaches the simulated cluster in exactly one file, `src/cli/sim.rs`, where
//!   `--sim` and `crossconf sim` are wired behind the `sim` feature. Cases and the framework
//!   talk to a cluster only through the Kubernetes API, so a case that peeks into the
//!   simulator's state would pass on the simulator and mean nothing on a real cluster.
//! * The simulator and the shared model never depend on the harness (Cargo forbids the cycle;
//!   the manifests are checked so the rule has a readable failure too).
//! * The simulator is an optional dependency of the harness, so `--no-default-features`
//!   builds a runner without it.

use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file under `dir`, recursively, sorted for stable messages.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lines of `file` that name `needle` outside `//` comments, as `path:line: text`.
fn code_mentions(file: &Path, needle: &str) -> Vec<String> {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.contains(needle)
        })
        .map(|(n, line)| {
            let rel = file.strip_prefix(ROOT).unwrap_or(file);
            format!("{}:{}: {}", rel.display(), n + 1, line.trim())
        })
        .collect()
}

#[test]
fn only_the_cli_wiring_names_the_simulator_crate() {
    let allowed = Path::new(ROOT).join("src/cli/sim.rs");
    let files = rust_files(&Path::new(ROOT).join("src"));
    assert!(
        files.len() > 50,
        "expected the harness's sources under src/, found {} files",
        files.len()
    );
    assert!(
        !code_mentions(&allowed, "crossconf_sim").is_empty(),
        "src/cli/sim.rs no longer names crossconf_sim; update this test with the new seam"
    );
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| **f != allowed)
        .flat_map(|f| code_mentions(f, "crossconf_sim::"))
        .chain(
            files
                .iter()
                .filter(|f| **f != allowed)
                .flat_map(|f| code_mentions(f, "use crossconf_sim")),
        )
        .collect();
    assert!(
        offenders.is_empty(),
        "only src/cli/sim.rs may use the simulator crate; found:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn cases_and_framework_never_mention_the_simulator() {
    for area in ["src/cases", "src/framework"] {
        let files = rust_files(&Path::new(ROOT).join(area));
        assert!(!files.is_empty(), "no sources under {area}");
        let offenders: Vec<String> = files
            .iter()
            .flat_map(|f| {
                let mut hits = code_mentions(f, "crossconf_sim");
                hits.extend(code_mentions(f, "crate::cli::sim"));
                hits.extend(code_mentions(f, "EmbeddedSim"));
                hits
            })
            .collect();
        assert!(
            offenders.is_empty(),
            "{area} must reach a cluster only through its API; found:\n{}",
            offenders.join("\n")
        );
    }
}

/// The `[dependencies]` table of a manifest, as text (enough for a name check).
fn dependencies_section(manifest: &str) -> String {
    let text = fs::read_to_string(Path::new(ROOT).join(manifest)).expect("manifest");
    let mut in_deps = false;
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if in_deps {
            out.push_str(t);
            out.push('\n');
        }
    }
    out
}

#[test]
fn simulator_and_model_do_not_depend_on_the_harness() {
    for manifest in ["sim/Cargo.toml", "model/Cargo.toml"] {
        let deps = dependencies_section(manifest);
        assert!(!deps.is_empty(), "{manifest} has no [dependencies]");
        for line in deps.lines() {
            let name = line.split(['=', ' ', '.']).next().unwrap_or("");
            assert_ne!(name, "crossconf", "{manifest} depends on the harness: {line}");
        }
    }
    let model = dependencies_section("model/Cargo.toml");
    assert!(
        !model.contains("crossconf-sim"),
        "the shared model must not depend on the simulator:\n{model}"
    );
}

#[test]
fn harness_depends_on_the_simulator_only_optionally() {
    let deps = dependencies_section("Cargo.toml");
    let line = deps
        .lines()
        .find(|l| l.starts_with("crossconf-sim"))
        .expect("the harness lists crossconf-sim among its dependencies");
    assert!(
        line.contains("optional = true"),
        "crossconf-sim must be optional so --no-default-features drops it: {line}"
    );
}
