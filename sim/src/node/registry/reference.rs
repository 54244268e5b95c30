//! Image references: parsing `[registry/]repository[:tag][@digest]` and Docker's
//! normalisation (`busybox` is `docker.io/library/busybox:latest`, `k8s.gcr.io` is
//! `registry.k8s.io`).

/// An image reference split into parts, Docker-normalised (`busybox` →
/// `docker.io/library/busybox:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host.
    pub registry: String,
    /// Repository path.
    pub repository: String,
    /// Tag (`latest` when neither tag nor digest is given).
    pub tag: String,
    /// `sha256:…` when the reference pins a digest.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses and normalises `image`.
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (image, None),
        };
        let (registry, path) = match rest.split_once('/') {
            Some((first, p)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (first.to_string(), p.to_string())
            }
            _ => ("docker.io".to_string(), rest.to_string()),
        };
        let registry = if registry == "index.docker.io" || registry == "registry-1.docker.io" {
            "docker.io".into()
        } else if registry == "k8s.gcr.io" {
            "registry.k8s.io".into()
        } else {
            registry
        };
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
            _ => (path.clone(), "latest".to_string()),
        };
        let repository = if registry == "docker.io" && !repo.contains('/') {
            format!("library/{repo}")
        } else {
            repo
        };
        ImageRef {
            registry,
            repository,
            tag,
            digest,
        }
    }

    /// The full normalised reference.
    pub fn full(&self) -> String {
        match &self.digest {
            Some(d) => format!("{}/{}@{d}", self.registry, self.repository),
            None => format!("{}/{}:{}", self.registry, self.repository, self.tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_docker_hub_names() {
        assert_eq!(ImageRef::parse("busybox").full(), "docker.io/library/busybox:latest");
        assert_eq!(
            ImageRef::parse("k8s.gcr.io/pause:3.9").full(),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(ImageRef::parse("localhost:5000/x").registry, "localhost:5000");
    }
}
