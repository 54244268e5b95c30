//! The shipped image catalogue and example registry override files, through the public API.

use std::path::Path;

use crossconf::images::{Error, ImageCatalog, RegistryKey, RepoList, render_json};
use crossconf::os::Os;

fn repo_list(name: &str) -> RepoList {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("images/repo-lists")
        .join(name);
    RepoList::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn example_repo_lists_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/repo-lists");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let list = RepoList::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(!list.is_empty(), "{} names no key", path.display());
            count += 1;
        }
    }
    assert!(count >= 2, "expected the private-mirror and air-gapped examples");
}

#[test]
fn private_mirror_moves_exactly_its_keys() {
    let list = repo_list("private-mirror.yaml");
    let named: Vec<RegistryKey> = list.iter().map(|(k, _)| k).collect();
    let catalog = ImageCatalog::load_default().with_overrides(&list);
    for (key, registry) in catalog.registries().iter() {
        if named.contains(&key) {
            assert_eq!(Some(registry), list.get(key));
            assert_ne!(registry, key.default_registry());
        } else {
            assert_eq!(registry, key.default_registry(), "{key} moved");
        }
    }
    let agnhost = catalog.resolve("agnhost", Os::Windows, Some("10.0.17763")).unwrap();
    assert!(agnhost.reference.starts_with("mirror.corp.example.com/"), "{agnhost}");
    let invalid = catalog.resolve("invalid-registry-image", Os::Linux, None).unwrap();
    assert_eq!(invalid.reference, "invalid.registry.k8s.io/invalid/alpine:3.1");
}

#[test]
fn air_gapped_list_leaves_no_public_registry() {
    let catalog = ImageCatalog::load_default().with_overrides(&repo_list("air-gapped.yaml"));
    let json = render_json(&catalog, &[]);
    for image in json["images"].as_array().unwrap() {
        let mut refs: Vec<&str> = image["windows"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|v| v.as_str())
            .collect();
        refs.extend(image["linux"].as_str());
        for r in refs {
            assert!(r.contains(".airgap.local"), "{} still pulls {r}", image["name"]);
        }
    }
}

#[test]
fn unknown_key_in_a_file_is_one_line_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "gcRegistry: ok.example.com\npromoterE2ERegistry: x.example.com\n",
    )
    .unwrap();
    let err = RepoList::from_file(&path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::UnknownRegistryKey { .. }));
    assert!(msg.contains(&path.display().to_string()) && msg.contains("promoterE2ERegistry"));
    assert!(!msg.contains('\n'));
}

#[test]
fn malformed_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.yaml");
    std::fs::write(&path, "gcRegistry: [unclosed\n").unwrap();
    let msg = RepoList::from_file(&path).unwrap_err().to_string();
    assert!(msg.contains("broken.yaml") && msg.contains("line 1"), "{msg}");
    assert!(!msg.contains('\n'));
}

#[test]
fn json_output_lists_core_images_with_both_ltsc_builds() {
    let json = render_json(&ImageCatalog::load_default(), &[]);
    let images = json["images"].as_array().unwrap();
    for name in [
        "agnhost",
        "busybox",
        "pause",
        "nginx",
        "httpd",
        "nonroot",
        "resource-consumer",
    ] {
        let image = images
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert!(image["linux"].is_string(), "{name}");
        for build in ["10.0.17763", "10.0.20348"] {
            assert!(image["windows"][build].is_string(), "{name} lacks {build}");
        }
    }
}

/// Every logical name the case bodies ask for (`f.image("…", os)`, `ContainerBuilder::new(name,
/// "…")`), found by reading their source, so a typo or a new image fails here rather than as a
/// pull error on a cluster.
#[test]
fn every_image_a_case_asks_for_is_in_the_catalogue() {
    let asks =
        regex::Regex::new(r#"(?:\.image\(\s*"([a-z0-9-]+)"|ContainerBuilder::new\([^,()]+,\s*"([a-z0-9-]+)"\s*\))"#)
            .unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![root.join("cases"), root.join("framework")];
    let mut found = std::collections::BTreeMap::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for c in asks.captures_iter(&text) {
                    let name = c.get(1).or(c.get(2)).unwrap().as_str().to_string();
                    found.entry(name).or_insert_with(|| path.display().to_string());
                }
            }
        }
    }
    let catalog = ImageCatalog::load_default();
    for name in crossconf::cases::IMAGES_USED {
        found
            .entry((*name).to_string())
            .or_insert_with(|| "cases::IMAGES_USED".into());
    }
    assert!(found.len() >= 5, "the scan found too few images: {found:?}");
    for (name, file) in &found {
        assert!(
            catalog.get(name).is_some(),
            "{file} asks for image {name:?}, not in images.yaml"
        );
    }
}

/// `crossconf images --output json` as a script reads it, with `args` and `env` added.
fn images_json(args: &[&str], env: &[(&str, &Path)]) -> serde_json::Value {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_crossconf"));
    cmd.args(["images", "--output", "json"])
        .args(args)
        .env_remove("KUBE_TEST_REPO_LIST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every reference of the JSON by (image, variant), variant being `linux` or a Windows build.
fn references(json: &serde_json::Value) -> std::collections::BTreeMap<(String, String), (String, String)> {
    let mut out = std::collections::BTreeMap::new();
    for image in json["images"].as_array().unwrap() {
        let name = image["name"].as_str().unwrap().to_string();
        let key = image["registry_key"].as_str().unwrap().to_string();
        if let Some(r) = image["linux"].as_str() {
            out.insert((name.clone(), "linux".into()), (key.clone(), r.to_string()));
        }
        for (build, r) in image["windows"].as_object().into_iter().flatten() {
            if let Some(r) = r.as_str() {
                out.insert((name.clone(), build.clone()), (key.clone(), r.to_string()));
            }
        }
    }
    out
}

#[test]
fn images_command_lists_every_image_cases_use_with_both_ltsc_builds() {
    let json = images_json(&[], &[]);
    let refs = references(&json);
    let catalog = ImageCatalog::load_default();
    // Every catalogue image (the cases' images are checked against the catalogue above) is
    // listed, each variant it has.
    for spec in catalog.images() {
        if spec.has_os(Os::Linux) {
            assert!(refs.contains_key(&(spec.name.clone(), "linux".into())), "{}", spec.name);
        }
        for build in &spec.windows_builds {
            assert!(
                refs.contains_key(&(spec.name.clone(), build.clone())),
                "{} {build}",
                spec.name
            );
        }
    }
    for name in crossconf::cases::IMAGES_USED
        .iter()
        .copied()
        .chain(["agnhost", "busybox", "pause"])
    {
        let spec = catalog.get(name).unwrap();
        if !spec.has_os(Os::Windows) {
            continue;
        }
        for build in ["10.0.17763", "10.0.20348"] {
            let (_, reference) = refs
                .get(&(name.to_string(), build.to_string()))
                .unwrap_or_else(|| panic!("{name} has no Windows variant for {build}"));
            assert!(reference.contains('/') && reference.contains(':'), "{reference}");
        }
    }
}

#[test]
fn images_command_override_file_moves_exactly_the_named_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("repo-list.yaml");
    std::fs::write(
        &file,
        "promoterE2eRegistry: mirror.example.com/e2e\nmicrosoftRegistry: mirror.example.com/mcr\n",
    )
    .unwrap();
    let before = references(&images_json(&[], &[]));
    let by_flag = references(&images_json(&["--kube-test-repo-list", file.to_str().unwrap()], &[]));
    let by_env = references(&images_json(&[], &[("KUBE_TEST_REPO_LIST", &file)]));
    assert_eq!(by_flag, by_env, "the flag and KUBE_TEST_REPO_LIST must agree");
    assert_eq!(before.len(), by_flag.len());
    let mut moved = 0;
    for (variant, (key, old)) in &before {
        let (_, new) = &by_flag[variant];
        let (_, path) = old.split_once('/').unwrap();
        match key.as_str() {
            "promoterE2eRegistry" => {
                // registry.k8s.io/e2e-test-images/<path>:<tag> → mirror.example.com/e2e/<path>:<tag>
                let rest = path.strip_prefix("e2e-test-images/").unwrap();
                assert_eq!(new, &format!("mirror.example.com/e2e/{rest}"), "{variant:?}");
                moved += 1;
            }
            "microsoftRegistry" => {
                assert_eq!(new, &format!("mirror.example.com/mcr/{path}"), "{variant:?}");
                moved += 1;
            }
            _ => assert_eq!(new, old, "{variant:?} moved although its key {key} is not named"),
        }
    }
    assert!(moved >= 20, "only {moved} references moved");
}
