//! The shell scripts of `ci/` and the prow jobs' inline scripts: strict mode, and shellcheck.

use super::prow::container_script;
use super::*;

// Shell scripts.

fn shellcheck_available() -> Result<(), String> {
    match Command::new("shellcheck").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`shellcheck --version` exited with {}", o.status)),
        Err(e) => Err(format!("shellcheck is not installed ({e})")),
    }
}

fn run_shellcheck(files: &[PathBuf]) -> Result<(), String> {
    let out = Command::new("shellcheck")
        .args(["--color=never", "--external-sources", "--shell=bash"])
        .args(files)
        .current_dir(root())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() && out.stdout.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn shell_scripts_under_ci_are_strict_and_pass_shellcheck() {
    let scripts = files_under(&root().join("ci"), &["sh"]);
    assert!(!scripts.is_empty(), "no shell scripts under ci/");
    for s in &scripts {
        let text = read(s);
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first == "#!/usr/bin/env bash" || first == "#!/bin/bash",
            "{}: starts with {first:?}, expected a bash shebang",
            rel(s)
        );
        let first_command = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or_default();
        assert_eq!(
            first_command,
            "set -euo pipefail",
            "{}: the first command must be `set -euo pipefail`",
            rel(s)
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(s).unwrap().permissions().mode();
            assert!(mode & 0o111 != 0, "{}: not executable", rel(s));
        }
    }
    if let Err(reason) = shellcheck_available() {
        println!("skipping shellcheck of {} scripts: {reason}", scripts.len());
        return;
    }
    if let Err(report) = run_shellcheck(&scripts) {
        panic!("shellcheck reports problems in ci/:\n{report}");
    }
}

#[test]
fn the_inline_scripts_of_the_prow_jobs_pass_shellcheck() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for j in load_jobs() {
        for (i, c) in j.spec.containers.iter().enumerate() {
            if let Some(script) = container_script(c) {
                let path = dir.path().join(format!("{}-{i}.sh", j.job.name));
                std::fs::write(&path, format!("#!/bin/bash\n{script}")).unwrap();
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty(), "the jobs run no inline scripts; nothing to check");
    if let Err(reason) = shellcheck_available() {
        println!("skipping shellcheck of {} job scripts: {reason}", files.len());
        return;
    }
    if let Err(report) = run_shellcheck(&files) {
        panic!("shellcheck reports problems in the jobs' scripts:\n{report}");
    }
}
