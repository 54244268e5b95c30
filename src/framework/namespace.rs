//! The per-case namespace: created with a generated name and the run's labels, deleted after.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use super::{CaseError, RunContext};

/// The label every object a run creates carries; `crossconf cleanup` selects on it.
pub const RUN_ID_LABEL: &str = "crossconf.io/run-id";
/// The label naming the case (a slug: label values are limited to 63 characters).
pub const CASE_LABEL: &str = "crossconf.io/case";

/// The labels of a case namespace.
pub fn namespace_labels(run_id: &str, case_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUN_ID_LABEL.to_string(), run_id.to_string()),
        (CASE_LABEL.to_string(), label_slug(case_name)),
        ("e2e-framework".to_string(), "crossconf".to_string()),
    ])
}

/// A valid label value (≤ 63 chars, alphanumerics, `-`, `_`, `.`, alphanumeric at both ends)
/// derived from a case name, with a hash suffix so long names stay distinct.
pub fn label_slug(name: &str) -> String {
    let mut slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    let slug = slug.trim_matches('-');
    let hash = fnv1a(name.as_bytes());
    let head: String = slug.chars().take(52).collect();
    format!("{}-{:010x}", head.trim_end_matches('-'), hash & 0xff_ffff_ffff)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A short prefix for the generated namespace name, from the case's area.
fn name_prefix(case_name: &str) -> String {
    let base = case_name
        .split(']')
        .next()
        .and_then(|s| s.strip_prefix('['))
        .unwrap_or("case")
        .to_ascii_lowercase();
    let clean: String = base
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(20)
        .collect();
    format!("crossconf-{}-", clean.trim_matches('-'))
}

/// A namespace name: the prefix plus five characters from the API server's own `generateName`
/// alphabet (no vowels, no look-alike digits).
fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Creates the case namespace.
///
/// The name is chosen here rather than by `generateName`, so a create whose answer was lost to
/// a transient fault can be replayed and read back (see `cluster::retry::policy`); a name
/// already taken (by another run, 1 in 14 million) is drawn again.
pub(super) async fn create(run: &RunContext, case_name: &str) -> Result<String, CaseError> {
    let api: Api<Namespace> = Api::all(run.client.clone());
    let prefix = name_prefix(case_name);
    let mut tries = 0;
    loop {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(generated_name(&prefix)),
                labels: Some(namespace_labels(&run.run_id, case_name)),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(created) => {
                return created
                    .metadata
                    .name
                    .ok_or_else(|| CaseError::failed("the API server returned a namespace without a name"));
            }
            Err(kube::Error::Api(s)) if s.code == 409 && tries < 3 => tries += 1,
            Err(e) => return Err(CaseError::from(e).context("creating the case namespace")),
        }
    }
}

/// Deletes a namespace (background propagation); a namespace already gone is fine.
///
/// # Errors
/// Any other API error.
pub async fn delete_namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_is_a_valid_label_value_and_distinct() {
        let a = label_slug(
            "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]",
        );
        let b = label_slug(
            "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: udp [NodeConformance] [Conformance]",
        );
        assert_ne!(a, b);
        for s in [&a, &b] {
            assert!(s.len() <= 63, "{s}");
            assert!(s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
            assert!(s.chars().next().unwrap().is_ascii_alphanumeric());
        }
    }

    #[test]
    fn generated_names_are_valid_and_differ() {
        let a = generated_name("crossconf-sig-windows-");
        let b = generated_name("crossconf-sig-windows-");
        assert_ne!(a, b);
        assert_eq!(a.len(), "crossconf-sig-windows-".len() + 5);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    #[test]
    fn prefix_comes_from_the_sig() {
        assert_eq!(name_prefix("[sig-windows] x"), "crossconf-sig-windows-");
        assert_eq!(name_prefix("Hybrid cluster network"), "crossconf-case-");
    }
}
