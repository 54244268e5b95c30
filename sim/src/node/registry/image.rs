//! A resolved image: what a node holds after a pull (platform, programs, ENTRYPOINT and CMD,
//! default user, pull weight, size and a stable digest), how a container's argv comes from it,
//! and why it cannot run on a node of another OS or Windows build.

use sha2_free::digest_of;

use super::{Family, ImageRef, Platform, Tool};
use crate::node::profile::ImageWeight;
use crossconf_model::os::Os;

/// A resolved image: what the node would have in its cache after a successful pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The image as the pod spec names it.
    pub name: String,
    /// The normalised reference.
    pub reference: ImageRef,
    /// The platform variant the node got.
    pub platform: Platform,
    /// The programs inside.
    pub tools: Vec<Tool>,
    /// The image ENTRYPOINT.
    pub entrypoint: Vec<String>,
    /// The image CMD.
    pub cmd: Vec<String>,
    /// The image's default user (`ContainerUser`/`ContainerAdministrator` on Windows).
    pub default_user: String,
    /// Pull-time class.
    pub weight: ImageWeight,
    /// Size in bytes (what `Pulled` events report).
    pub size_bytes: u64,
    /// `sha256:…` digest of the variant.
    pub digest: String,
}

impl Image {
    /// `imageID` as container statuses show it (`registry/repo@sha256:…`).
    pub fn image_id(&self) -> String {
        format!(
            "{}/{}@{}",
            self.reference.registry, self.reference.repository, self.digest
        )
    }

    /// Whether the image contains `tool`.
    pub fn has(&self, tool: Tool) -> bool {
        self.tools.contains(&tool)
    }

    /// The argv a container runs: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces
    /// CMD, as the Kubernetes container spec defines.
    pub fn argv(&self, command: &[String], args: &[String]) -> Vec<String> {
        let mut v = if command.is_empty() {
            self.entrypoint.clone()
        } else {
            command.to_vec()
        };
        if !args.is_empty() {
            v.extend(args.iter().cloned());
        } else if command.is_empty() {
            v.extend(self.cmd.iter().cloned());
        }
        v
    }

    /// Why this image cannot run on a node of `os`/`build`, if it cannot.
    ///
    /// Process isolation needs the container's Windows build to equal the host's ("Windows
    /// container version compatibility"); the message is HCS's.
    pub fn create_mismatch(&self, os: Os, build: Option<&str>) -> Option<String> {
        match (&self.platform, os) {
            (Platform::Linux, Os::Linux) => None,
            (Platform::Windows(b), Os::Windows) if Some(b.as_str()) == build => None,
            (Platform::Windows(b), Os::Windows) => Some(format!(
                "hcs::CreateComputeSystem: The container operating system does not match the host operating system.: image is windows {b}, node is windows {}",
                build.unwrap_or("unknown")
            )),
            (p, os) => Some(format!(
                "image operating system \"{}\" cannot be used on this platform ({p} image on a {os} node)",
                p.os()
            )),
        }
    }
}

pub(super) fn build_image(name: &str, reference: ImageRef, family: Family, platform: Platform) -> Image {
    let win = platform.os() == Os::Windows;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut tools = match family {
        Family::Agnhost | Family::UpdateDemo => vec![Tool::Agnhost, Tool::Busybox],
        Family::Busybox | Family::Alpine | Family::NonRoot | Family::DnsUtils => vec![Tool::Busybox],
        Family::Consumer => vec![Tool::Consumer, Tool::Busybox],
        Family::Addon => vec![Tool::Addon],
        Family::Pause => vec![Tool::Pause],
        Family::Nginx => vec![Tool::Nginx, Tool::Busybox],
        Family::Httpd => vec![Tool::Httpd, Tool::Busybox],
        Family::NanoServer => vec![],
        Family::ServerCore => vec![Tool::PowerShell],
        // Both are distroless images: the one binary and no shell.
        Family::SampleApiServer => vec![Tool::SampleApiServer],
        Family::Etcd => vec![Tool::Etcd],
        Family::GmsaWebhook => vec![Tool::GmsaWebhook],
    };
    if win {
        // Every Windows image carries cmd.exe; the upstream test images are built on a
        // servercore cache layer that brings PowerShell too.
        tools.push(Tool::Cmd);
        if matches!(
            family,
            Family::Agnhost
                | Family::UpdateDemo
                | Family::Busybox
                | Family::Nginx
                | Family::Httpd
                | Family::NonRoot
                | Family::Consumer
                | Family::DnsUtils
        ) {
            tools.push(Tool::PowerShell);
        }
    }
    let (entrypoint, cmd) = match family {
        Family::Agnhost => (s(&["/agnhost"]), s(&["pause"])),
        // test/images/nautilus (and kitten) Dockerfile: `FROM agnhost`, `CMD ["test-webserver"]`.
        Family::UpdateDemo => (s(&["/agnhost"]), s(&["test-webserver"])),
        Family::Busybox | Family::Alpine | Family::NonRoot | Family::DnsUtils => (vec![], s(&["sh"])),
        // The add-on DaemonSets give the daemon's command line, as their real manifests do.
        Family::Addon => (vec![], vec![]),
        Family::Consumer => (s(&["/consumer"]), s(&["--port=8080"])),
        Family::Pause => (s(&[if win { "/pause.exe" } else { "/pause" }]), vec![]),
        Family::Nginx => (vec![], s(&["nginx", "-g", "daemon off;"])),
        Family::Httpd => (vec![], s(&["httpd-foreground"])),
        Family::NanoServer | Family::ServerCore => (vec![], s(&["c:\\windows\\system32\\cmd.exe"])),
        Family::SampleApiServer => (s(&["/kube-sample-apiserver"]), vec![]),
        Family::Etcd => (vec![], s(&["/usr/local/bin/etcd"])),
        Family::GmsaWebhook => (s(&["/admission-webhook/admission-webhook"]), vec![]),
    };
    let weight = match (win, family) {
        (false, _) => ImageWeight::Linux,
        (true, Family::Pause | Family::NanoServer | Family::Addon) => ImageWeight::WindowsNanoServer,
        (true, _) => ImageWeight::WindowsServerCore,
    };
    let size_bytes = match weight {
        ImageWeight::Linux => 20_000_000,
        ImageWeight::WindowsNanoServer => 120_000_000,
        ImageWeight::WindowsServerCore => 2_400_000_000,
    };
    let default_user = match (win, family) {
        (false, Family::NonRoot) => "1234".to_string(),
        (false, _) => "root".to_string(),
        (true, Family::NonRoot) => "ContainerUser".to_string(),
        (true, Family::NanoServer | Family::Pause) => "ContainerUser".to_string(),
        (true, _) => "ContainerAdministrator".to_string(),
    };
    let digest = digest_of(&format!("{}|{platform}", reference.full()));
    Image {
        name: name.to_string(),
        reference,
        platform,
        tools,
        entrypoint,
        cmd,
        default_user,
        weight,
        size_bytes,
        digest,
    }
}

/// A small deterministic digest, so the same image always has the same imageID.
mod sha2_free {
    /// A `sha256:`-shaped digest derived from `s` (FNV-1a, widened; not cryptographic: the
    /// simulator only needs stable, distinct identifiers).
    pub fn digest_of(s: &str) -> String {
        let mut out = String::from("sha256:");
        for round in 0u64..4 {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for b in s.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            out.push_str(&format!("{h:016x}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry::resolve;

    const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

    #[test]
    fn agnhost_runs_on_both_oses() {
        let l = resolve(AGNHOST, Os::Linux, None, &[]).unwrap();
        assert_eq!(l.platform, Platform::Linux);
        assert!(l.has(Tool::Agnhost) && !l.has(Tool::Cmd));
        let w = resolve(AGNHOST, Os::Windows, Some("10.0.20348"), &[]).unwrap();
        assert_eq!(w.platform, Platform::Windows("10.0.20348".into()));
        assert!(w.has(Tool::Cmd));
        assert_ne!(l.digest, w.digest);
        assert_eq!(w.argv(&[], &["netexec".into()]), ["/agnhost", "netexec"]);
        assert_eq!(w.argv(&["cmd".into()], &[]), ["cmd"]);
        assert_eq!(w.argv(&[], &[]), ["/agnhost", "pause"]);
    }

    #[test]
    fn other_windows_build_fails_at_create() {
        let img = resolve(
            "mcr.microsoft.com/windows/nanoserver:ltsc2019",
            Os::Windows,
            Some("10.0.20348"),
            &[],
        )
        .unwrap();
        let why = img.create_mismatch(Os::Windows, Some("10.0.20348")).unwrap();
        assert!(
            why.contains("does not match the host operating system") && why.contains("10.0.17763"),
            "{why}"
        );
        assert!(img.create_mismatch(Os::Windows, Some("10.0.17763")).is_none());
    }
}
