//! The prow jobs' scripts and command lines: the bash word splitter that reads job scripts,
//! the crossconf invocations and flags found in them, and the checks that they run existing
//! suites into `$ARTIFACTS` with a mounted kubeconfig, and that the binary accepts them.

use super::*;

/// Splits a shell script into simple commands of words. Handles quotes, backslashes, comments,
/// line continuations, the separators `; && || | &` and drops redirections. Enough for the
/// scripts of job definitions; `$VAR` stays literal.
fn shell_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                if !matches!(n, '"' | '\\' | '$' | '`' | '\n') {
                                    word.push('\\');
                                }
                                if n != '\n' {
                                    word.push(n);
                                }
                            }
                        }
                        _ => word.push(c),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => {
                    in_word = true;
                    word.push(n);
                }
            },
            '#' if !in_word => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '>' | '<' => {
                // A redirection: drop an fd number before it, the operator and its target.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut words, &mut word, &mut in_word);
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&')) {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|'))
                {
                    chars.next();
                }
            }
            '\n' | ';' | '&' | '|' => {
                end_word(&mut words, &mut word, &mut in_word);
                if matches!(c, '&' | '|') && chars.peek() == Some(&c) {
                    chars.next();
                }
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[test]
fn the_shell_splitter_reads_job_scripts_as_bash_does() {
    let cmds = shell_commands(
        "set -euo pipefail\n# a comment\ncrossconf run --suite 'suites/a b.yaml' \\\n  --report-dir \"$ARTIFACTS\" >&2 || echo \"x y\" 2>/dev/null; cargo test && exec ./target/debug/crossconf run --sim",
    );
    assert_eq!(
        cmds,
        vec![
            vec!["set", "-euo", "pipefail"],
            vec![
                "crossconf",
                "run",
                "--suite",
                "suites/a b.yaml",
                "--report-dir",
                "$ARTIFACTS"
            ],
            vec!["echo", "x y"],
            vec!["cargo", "test"],
            vec!["exec", "./target/debug/crossconf", "run", "--sim"],
        ]
    );
}

fn is_shell(program: &str) -> bool {
    matches!(program.rsplit('/').next().unwrap_or(program), "bash" | "sh" | "dash")
}

/// The inline script of a container that runs `bash -c SCRIPT`, if it does.
pub(super) fn container_script(c: &Container) -> Option<String> {
    let argv: Vec<String> = c
        .command
        .clone()
        .unwrap_or_default()
        .into_iter()
        .chain(c.args.clone().unwrap_or_default())
        .collect();
    (argv.len() >= 3 && is_shell(&argv[0]) && argv[1] == "-c").then(|| argv[2].clone())
}

/// The simple commands a container runs.
fn container_commands(c: &Container) -> Vec<Vec<String>> {
    match container_script(c) {
        Some(script) => shell_commands(&script),
        None => vec![
            c.command
                .clone()
                .unwrap_or_default()
                .into_iter()
                .chain(c.args.clone().unwrap_or_default())
                .collect(),
        ],
    }
}

/// The words of a command after `exec` and leading `VAR=value` assignments.
fn program_and_args(cmd: &[String]) -> &[String] {
    let mut i = 0;
    while i < cmd.len() && (cmd[i] == "exec" || (cmd[i].contains('=') && !cmd[i].starts_with('-'))) {
        i += 1;
    }
    &cmd[i..]
}

/// The arguments of every `crossconf ...` invocation of a job (the word after `crossconf` first).
fn crossconf_invocations(job: &LoadedJob) -> Vec<Vec<String>> {
    job.spec
        .containers
        .iter()
        .flat_map(container_commands)
        .filter_map(|cmd| {
            let words = program_and_args(&cmd);
            let program = words.first()?;
            (program.rsplit('/').next() == Some("crossconf")).then(|| words[1..].to_vec())
        })
        .collect()
}

fn runs_cargo_test(job: &LoadedJob) -> bool {
    job.spec.containers.iter().flat_map(container_commands).any(|cmd| {
        let words = program_and_args(&cmd);
        words.first().map(String::as_str) == Some("cargo") && words.get(1).map(String::as_str) == Some("test")
    })
}

/// The value of `--flag VALUE` or `--flag=VALUE`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

fn has_flag(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name || a.starts_with(&format!("{name}=")))
}

/// "4h", "90m", "1h30m", "15s" in seconds.
fn duration_secs(s: &str) -> u64 {
    let mut total = 0;
    let mut n = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            n.push(c);
        } else {
            let v: u64 = n.parse().unwrap_or_else(|_| panic!("bad duration {s:?}"));
            n.clear();
            total += v * match c {
                'h' => 3600,
                'm' => 60,
                's' => 1,
                _ => panic!("bad duration {s:?}"),
            };
        }
    }
    assert!(n.is_empty() && total > 0, "bad duration {s:?}");
    total
}

fn suite_files() -> Vec<PathBuf> {
    files_under(&root().join("suites"), &["yaml"])
}

fn stem(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_suffix(".yaml").unwrap_or(file)
}

/// The suite a job runs: the `--suite` of its single `crossconf run`.
fn job_run_args(job: &LoadedJob) -> Vec<String> {
    let runs: Vec<Vec<String>> = crossconf_invocations(job)
        .into_iter()
        .filter(|a| a.first().map(String::as_str) == Some("run"))
        .collect();
    assert_eq!(
        runs.len(),
        1,
        "job {}: expected exactly one `crossconf run`, found {runs:?}",
        job.job.name
    );
    runs.into_iter().next().unwrap()
}

#[test]
fn prow_jobs_run_existing_suites_into_artifacts() {
    let jobs = load_jobs();
    let mut names = BTreeSet::new();
    let mut suites_with_periodic = BTreeSet::new();
    for j in &jobs {
        let name = &j.job.name;
        assert!(names.insert(name.clone()), "job name {name} is used twice");
        assert!(
            j.job.decorate,
            "{}: job {name}: decorate: true (prow's pod utilities set $ARTIFACTS and upload it)",
            rel(&j.file)
        );
        assert!(!j.spec.containers.is_empty(), "job {name}: no container");
        for key in [
            "testgrid-dashboards",
            "testgrid-tab-name",
            "testgrid-alert-email",
            "testgrid-num-failures-to-alert",
            "testgrid-num-columns-recent",
        ] {
            assert!(
                !j.annotation(key).trim().is_empty(),
                "job {name}: annotation {key} is empty"
            );
        }
        j.number_annotation("testgrid-num-failures-to-alert");
        j.number_annotation("testgrid-num-columns-recent");
        assert!(
            j.annotation("testgrid-alert-email").contains('@'),
            "job {name}: testgrid-alert-email is not an address"
        );

        let run = job_run_args(j);
        let suite = flag(&run, "--suite").unwrap_or_else(|| panic!("job {name}: `crossconf run` has no --suite"));
        assert!(
            suite.starts_with("suites/") && root().join(suite).is_file(),
            "job {name}: --suite {suite} is not a file in suites/"
        );
        assert_eq!(
            j.job.labels.get("crossconf.io/suite").map(String::as_str),
            Some(stem(suite)),
            "job {name}: label crossconf.io/suite must name its suite"
        );
        let report_dir = flag(&run, "--report-dir");
        assert!(
            matches!(report_dir, Some("$ARTIFACTS" | "${ARTIFACTS}")),
            "job {name}: `crossconf run` must write to --report-dir \"$ARTIFACTS\", got {report_dir:?}"
        );
        let timeout = j
            .job
            .decoration_config
            .as_ref()
            .and_then(|d| d.timeout.as_deref())
            .unwrap_or_else(|| panic!("job {name}: decoration_config.timeout is missing"));
        let timeout = duration_secs(timeout);

        match j.kind {
            JobType::Periodic => {
                assert_eq!(
                    name,
                    &format!("ci-crossconf-{}", stem(suite)),
                    "periodic names are ci-crossconf-<suite>"
                );
                assert!(
                    j.job.interval.is_some() != j.job.cron.is_some(),
                    "job {name}: exactly one of interval and cron"
                );
                if let Some(i) = &j.job.interval {
                    duration_secs(i);
                }
                if let Some(c) = &j.job.cron {
                    assert_eq!(c.split_whitespace().count(), 5, "job {name}: cron {c:?} needs 5 fields");
                }
                assert!(
                    j.job.extra_refs.iter().any(|r| r.workdir),
                    "job {name}: extra_refs must check out crossconf as the working directory (for suites/)"
                );
                assert!(
                    !has_flag(&run, "--sim"),
                    "job {name}: a periodic runs against a real cluster"
                );
                // Prow must not kill the run before the suite's own budget ends it cleanly.
                let suite_doc = parse_one(&root().join(suite));
                if let Some(t) = suite_doc.get("timeout").and_then(Value::as_str) {
                    assert!(
                        timeout >= duration_secs(t),
                        "job {name}: decoration timeout is shorter than the suite's timeout {t}"
                    );
                }
                check_kubeconfig_is_a_mounted_secret(j, &run);
                suites_with_periodic.insert(stem(suite).to_string());
            }
            JobType::Presubmit | JobType::Postsubmit => {
                assert!(
                    name.starts_with("pull-crossconf-") || name.starts_with("post-crossconf-"),
                    "job {name}: name"
                );
            }
        }
    }

    // Every suite runs in a periodic job.
    let all_suites: BTreeSet<String> = suite_files()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        suites_with_periodic, all_suites,
        "every suite in suites/ has a periodic job and vice versa"
    );

    // The nightly job mirrors the upstream capz Windows nightly job (shared/UPSTREAM.md).
    let nightly = jobs
        .iter()
        .find(|j| j.job.name == "ci-crossconf-windows-nightly")
        .expect("the ci-crossconf-windows-nightly job");
    assert_eq!(
        nightly.job.interval.as_deref(),
        Some("3h"),
        "the nightly job runs every 3h"
    );
    assert_eq!(
        nightly
            .job
            .decoration_config
            .as_ref()
            .and_then(|d| d.timeout.as_deref()),
        Some("4h"),
        "the nightly job times out after 4h"
    );
    let run = job_run_args(nightly);
    assert_eq!(flag(&run, "--suite"), Some("suites/windows-nightly.yaml"));
    assert!(has_flag(&run, "--prepull-images"), "the nightly job prepulls images");
    let dashboards = nightly.dashboards();
    for d in ["sig-windows-master-release", "sig-windows-signal"] {
        assert!(dashboards.iter().any(|x| x == d), "the nightly job is on {d}");
    }
}

/// A job against a real cluster passes `--kubeconfig PATH` where PATH lies in a read-only
/// volume mount of its container backed by a Secret (the cluster's kubeconfig).
fn check_kubeconfig_is_a_mounted_secret(j: &LoadedJob, run: &[String]) {
    let name = &j.job.name;
    let path = flag(run, "--kubeconfig").unwrap_or_else(|| panic!("job {name}: `crossconf run` has no --kubeconfig"));
    let secret_volumes: BTreeSet<&str> = j
        .spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.secret.as_ref().is_some_and(|s| s.secret_name.is_some()))
        .map(|v| v.name.as_str())
        .collect();
    let mounted = j.spec.containers.iter().any(|c| {
        c.volume_mounts.iter().flatten().any(|m| {
            secret_volumes.contains(m.name.as_str())
                && m.read_only == Some(true)
                && path.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))
        })
    });
    assert!(
        mounted,
        "job {name}: --kubeconfig {path} is not in a read-only Secret volume mount"
    );
    for other in crossconf_invocations(j) {
        if other.first().map(String::as_str) == Some("cleanup") {
            assert_eq!(
                flag(&other, "--kubeconfig"),
                Some(path),
                "job {name}: cleanup must use the run's kubeconfig"
            );
        }
    }
}

#[test]
fn the_presubmit_runs_the_simulated_cluster_suite_and_cargo_test() {
    let jobs = load_jobs();
    let presubmits: Vec<&LoadedJob> = jobs.iter().filter(|j| j.kind == JobType::Presubmit).collect();
    assert!(!presubmits.is_empty(), "ci/prow/ has no presubmit");
    for p in presubmits {
        let run = job_run_args(p);
        assert!(
            has_flag(&run, "--sim"),
            "presubmit {}: `crossconf run` must use --sim",
            p.job.name
        );
        assert!(
            !has_flag(&run, "--kubeconfig"),
            "presubmit {}: the simulator needs no kubeconfig",
            p.job.name
        );
        assert!(runs_cargo_test(p), "presubmit {}: must run `cargo test`", p.job.name);
        assert!(
            p.job.always_run == Some(true) || p.job.run_if_changed.is_some(),
            "presubmit {}: never triggered",
            p.job.name
        );
    }
}

/// Every `crossconf` command line of every job is accepted by the real binary: `run` with
/// `--dry-run` (validates flags and loads the suite without touching a cluster), other
/// subcommands with `--help` appended (clap rejects unknown flags before it prints help).
#[test]
fn every_crossconf_command_line_of_the_jobs_is_accepted_by_the_binary() {
    let artifacts = tempfile::tempdir().unwrap();
    let artifacts_str = artifacts.path().to_str().unwrap().to_string();
    let mut checked = 0;
    for j in load_jobs() {
        for args in crossconf_invocations(&j) {
            let args: Vec<String> = args
                .into_iter()
                .map(|a| {
                    a.replace("${ARTIFACTS}", &artifacts_str)
                        .replace("$ARTIFACTS", &artifacts_str)
                })
                .collect();
            let extra = if args.first().map(String::as_str) == Some("run") {
                "--dry-run"
            } else {
                "--help"
            };
            let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
                .args(&args)
                .arg(extra)
                .current_dir(root())
                .env_remove("KUBECONFIG")
                .env_remove("KUBE_TEST_REPO_LIST")
                .env("ARTIFACTS", &artifacts_str)
                .env("CI", "true")
                .output()
                .expect("the crossconf binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "job {}: `crossconf {} {extra}` failed ({}):\n{}{}",
                j.job.name,
                args.join(" "),
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            );
            if extra == "--dry-run" {
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with("dry run: would run "))
                    .unwrap_or_else(|| panic!("job {}: no dry-run summary in:\n{stdout}", j.job.name));
                let n: usize = line["dry run: would run ".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("job {}: unexpected summary {line:?}", j.job.name));
                assert!(n > 0, "job {}: its suite selects no case: {line}", j.job.name);
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "expected the command lines of at least five jobs, checked {checked}"
    );
}
