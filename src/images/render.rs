//! Rendering the resolved catalogue for `crossconf images`.

use serde_json::{Value, json};

use super::ImageCatalog;
use crate::os::Os;

/// The builds to show: the caller's, or every build the project knows when none are given.
fn builds_or_known<'a>(builds: &'a [&'a str]) -> Vec<&'a str> {
    if builds.is_empty() {
        ImageCatalog::known_windows_builds()
    } else {
        builds.to_vec()
    }
}

/// The row cells (image, os, build, reference) for every image and variant.
fn rows(catalog: &ImageCatalog, builds: &[&str]) -> Vec<[String; 4]> {
    let mut rows = Vec::new();
    for image in catalog.images() {
        let linux = match catalog.resolve(&image.name, Os::Linux, None) {
            Ok(r) => r.reference,
            Err(_) => "(no variant)".into(),
        };
        rows.push([image.name.clone(), "linux".into(), "-".into(), linux]);
        for &build in builds {
            let windows = match catalog.resolve(&image.name, Os::Windows, Some(build)) {
                Ok(r) => r.reference,
                Err(_) => "(no variant)".into(),
            };
            rows.push([image.name.clone(), "windows".into(), build.into(), windows]);
        }
    }
    rows
}

/// A plain-text table of the reference of every image per OS and Windows build, after
/// overrides; `builds` empty means every known build.
///
/// A variant that does not exist shows `(no variant)`, so a missing Windows build is visible
/// before a run rather than as a pull timeout during one.
pub fn render_table(catalog: &ImageCatalog, builds: &[&str]) -> String {
    let builds = builds_or_known(builds);
    let header = ["IMAGE", "OS", "BUILD", "REFERENCE"].map(String::from);
    let rows = rows(catalog, &builds);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The same content as [`render_table`] as JSON:
/// `{"registries": {key: registry}, "images": [{name, registry_key, linux, windows: {build:
/// reference|null}, needs_pull_secret, prepull, note}]}`; a missing variant is `null`.
pub fn render_json(catalog: &ImageCatalog, builds: &[&str]) -> Value {
    let builds = builds_or_known(builds);
    let registries: serde_json::Map<String, Value> = catalog
        .registries()
        .iter()
        .map(|(k, r)| (k.as_str().to_string(), Value::from(r)))
        .collect();
    let images: Vec<Value> = catalog
        .images()
        .iter()
        .map(|image| {
            let linux = catalog.resolve(&image.name, Os::Linux, None).ok().map(|r| r.reference);
            let windows: serde_json::Map<String, Value> = builds
                .iter()
                .map(|&b| {
                    let r = catalog.resolve(&image.name, Os::Windows, Some(b)).ok();
                    (b.to_string(), json!(r.map(|r| r.reference)))
                })
                .collect();
            json!({
                "name": image.name,
                "registry_key": image.registry.as_str(),
                "linux": linux,
                "windows": windows,
                "needs_pull_secret": image.needs_pull_secret,
                "prepull": image.prepull,
                "note": image.note,
            })
        })
        .collect();
    json!({ "registries": registries, "images": images })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::RepoList;

    #[test]
    fn table_shows_every_variant_and_missing_ones() {
        let c = ImageCatalog::load_default();
        let table = render_table(&c, &["10.0.20348"]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("IMAGE"));
        assert_eq!(lines.len(), 1 + 2 * c.images().len());
        assert!(table.contains("registry.k8s.io/e2e-test-images/agnhost:2.52"));
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("linux-only") && l.contains("windows") && l.ends_with("(no variant)"))
        );
    }

    #[test]
    fn json_lists_core_images_with_windows_variants_after_overrides() {
        let list = RepoList::from_yaml("gcRegistry: mirror.example.com\n").unwrap();
        let c = ImageCatalog::load_default().with_overrides(&list);
        let v = render_json(&c, &[]);
        assert_eq!(v["registries"]["gcRegistry"], "mirror.example.com");
        let images = v["images"].as_array().unwrap();
        for name in ["agnhost", "busybox", "pause"] {
            let image = images.iter().find(|i| i["name"] == name).unwrap();
            for build in ["10.0.17763", "10.0.20348"] {
                assert!(image["windows"][build].is_string(), "{name} {build}");
            }
        }
        let pause = images.iter().find(|i| i["name"] == "pause").unwrap();
        assert_eq!(pause["linux"], "mirror.example.com/pause:3.10");
        let linux_only = images.iter().find(|i| i["name"] == "linux-only").unwrap();
        assert!(linux_only["windows"]["10.0.20348"].is_null());
    }
}
