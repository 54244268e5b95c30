//! The runner image's Dockerfile: two stages, a toolchain new enough for the crate.

use super::*;

/// "1.89" / "1.89.0" as (major, minor).
fn major_minor(v: &str) -> (u32, u32) {
    let mut it = v.trim().trim_matches('"').split('.');
    let major = it
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("bad version {v:?}"));
    let minor = it
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("bad version {v:?}"));
    (major, minor)
}

#[test]
fn the_runner_image_is_built_in_two_stages_with_a_new_enough_toolchain() {
    let dockerfile = read(&root().join("ci/prow/Dockerfile"));
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let arg = |name: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
            .unwrap_or_else(|| panic!("Dockerfile: ARG {name}=... missing"))
            .to_string()
    };
    let froms: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("FROM "))
        .map(|(i, _)| i)
        .collect();
    assert!(
        froms.len() >= 2,
        "Dockerfile: expected a build stage and a runtime stage"
    );
    let build_from = lines[froms[0]];
    assert!(
        build_from.contains("rust:") && build_from.contains(" AS "),
        "Dockerfile: the first stage builds with the Rust image: {build_from}"
    );
    let runtime_from = lines[*froms.last().unwrap()];
    assert!(
        runtime_from.contains("debian:") && runtime_from.contains("-slim"),
        "Dockerfile: the final stage is slim Debian: {runtime_from}"
    );
    let runtime = &lines[*froms.last().unwrap()..];
    for needle in ["COPY --from=", "COPY suites/", "COPY images/"] {
        assert!(
            runtime.iter().any(|l| l.starts_with(needle)),
            "Dockerfile: final stage lacks {needle}"
        );
    }

    let cargo = read(&root().join("Cargo.toml"));
    let msrv = cargo
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("rust-version")
                .map(|r| r.trim_start_matches([' ', '=']).to_string())
        })
        .expect("Cargo.toml rust-version");
    let rust = arg("RUST_VERSION");
    assert!(
        major_minor(&rust) >= major_minor(&msrv),
        "Dockerfile RUST_VERSION {rust} is older than rust-version {msrv}"
    );

    // The presubmit builds with the same toolchain as the image; periodics all run one image.
    let jobs = load_jobs();
    for j in jobs.iter().filter(|j| j.kind == JobType::Presubmit) {
        for c in &j.spec.containers {
            let image = c.image.as_deref().unwrap_or_default();
            assert!(
                image.contains(&format!("rust:{rust}")),
                "presubmit {}: image {image} is not rust:{rust}",
                j.job.name
            );
        }
    }
    let runner_images: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| j.kind == JobType::Periodic)
        .flat_map(|j| j.spec.containers.iter().filter_map(|c| c.image.as_deref()))
        .collect();
    assert_eq!(
        runner_images.len(),
        1,
        "periodics run one runner image, found {runner_images:?}"
    );
}

// ---------------------------------------------------------------------------------------------
