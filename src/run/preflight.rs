//! Preflight: before any case starts, check every Windows node's build against every image the
//! plan needs, so a missing variant fails in seconds with a line naming image, node and build
//! instead of ten cases timing out on pulls that can never succeed.

use std::time::Instant;

use super::StepRecord;
use super::executor::Scheduled;
use crate::cluster::Pools;
use crate::images::{BuildMismatch, ImageCatalog, MismatchReason};
use crate::os::Os;

/// The images a run may pull on `os`: every catalogue image with a variant for it that may be
/// pulled ahead (the invalid-registry and private images are excluded: they are meant to fail
/// or need a secret).
pub fn plan_images(images: &ImageCatalog, os: Os) -> Vec<String> {
    images
        .images()
        .iter()
        .filter(|i| i.prepull && i.has_os(os))
        .map(|i| i.name.clone())
        .collect()
}

/// The preflight step: image/build compatibility for the nodes the plan will use.
pub fn check_images(images: &ImageCatalog, pools: &Pools, scheduled: &[Scheduled], target: Os) -> StepRecord {
    let t0 = Instant::now();
    let runs_any = scheduled.iter().any(|s| s.skip.is_none());
    let needs_windows = target == Os::Windows
        || scheduled
            .iter()
            .any(|s| s.skip.is_none() && s.case.pools == crate::catalog::PoolNeed::BothPools);
    let mut output = String::new();
    let mut failure = None;
    if runs_any && needs_windows {
        let nodes: Vec<(&str, &str)> = pools
            .schedulable(Os::Windows)
            .into_iter()
            .map(|n| (n.name.as_str(), n.windows_build.as_deref().unwrap_or("unknown")))
            .collect();
        let needed = plan_images(images, Os::Windows);
        let needed: Vec<&str> = needed.iter().map(String::as_str).collect();
        let mismatches = images.check_builds(&needed, &nodes);
        for (node, build) in &nodes {
            output.push_str(&format!("node {node}: Windows build {build}\n"));
        }
        if !mismatches.is_empty() {
            let lines: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
            output.push_str(&lines.join("\n"));
            output.push('\n');
            failure = Some(summarize(&mismatches).join("; "));
        } else {
            output.push_str(&format!(
                "images {} have variants for every Windows node\n",
                needed.join(", ")
            ));
        }
    } else {
        output.push_str("no Windows nodes needed by the plan\n");
    }
    StepRecord {
        name: "preflight: image and Windows build compatibility".into(),
        failure,
        duration: t0.elapsed(),
        output,
    }
}

/// The mismatches grouped into one line per Windows build and reason, naming the images and
/// nodes: a node of an unsupported build otherwise yields one line per image and node, and
/// the first line a person reads should say "this build, these images" at once.
pub fn summarize(mismatches: &[BuildMismatch]) -> Vec<String> {
    // (build, reason) → (images, nodes), all in first-seen order.
    type Group<'a> = ((String, String), (Vec<&'a str>, Vec<&'a str>));
    let mut groups: Vec<Group> = Vec::new();
    for m in mismatches {
        let why = match &m.reason {
            MismatchReason::BuildNotSupported { supported } => {
                format!("they have variants for {} only", supported.join(", "))
            }
            MismatchReason::NoWindowsVariant => "they have no Windows variant".to_string(),
            MismatchReason::UnknownImage => "they are not in the image catalogue".to_string(),
        };
        let key = (m.build.clone(), why);
        let at = match groups.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                groups.push((key, Default::default()));
                groups.len() - 1
            }
        };
        let (images, nodes) = &mut groups[at].1;
        if !images.contains(&m.image.as_str()) {
            images.push(&m.image);
        }
        if !nodes.contains(&m.node.as_str()) {
            nodes.push(&m.node);
        }
    }
    groups
        .into_iter()
        .map(|((build, why), (images, nodes))| {
            let (image_word, node_word) = (plural("image", images.len()), plural("node", nodes.len()));
            format!(
                "no variant of {image_word} {} for Windows build {build} of {node_word} {} ({why})",
                images.join(", "),
                nodes.join(", ")
            )
        })
        .collect()
}

fn plural(word: &str, n: usize) -> String {
    if n == 1 { word.to_string() } else { format!("{word}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatches_are_grouped_by_build_and_reason() {
        let catalog = ImageCatalog::load_default();
        let nodes = [
            ("win-1", "10.0.14393"),
            ("win-2", "10.0.14393"),
            ("win-3", "10.0.20348"),
        ];
        let found = catalog.check_builds(&["agnhost", "pause", "linux-only"], &nodes);
        let lines = summarize(&found);
        assert_eq!(
            lines,
            [
                "no variant of images agnhost, pause for Windows build 10.0.14393 of nodes win-1, win-2 \
                 (they have variants for 10.0.17763, 10.0.20348, 10.0.26100 only)",
                "no variant of image linux-only for Windows build 10.0.14393 of nodes win-1, win-2 \
                 (they have no Windows variant)",
                "no variant of image linux-only for Windows build 10.0.20348 of node win-3 (they have no Windows variant)",
            ]
        );
    }
}
