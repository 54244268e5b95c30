//! The local kind + Windows VM recipe (`ci/local/`): the API server reachable from the VM, and
//! address ranges that fit flannel's VXLAN settings.

use super::*;

// The local kind + Windows VM recipe.

/// `VAR="${VAR:-default}"` in a script: the default.
fn script_default(script: &str, var: &str) -> String {
    let prefix = format!("{var}=\"${{{var}:-");
    script
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).and_then(|r| r.strip_suffix("}\"")))
        .unwrap_or_else(|| panic!("no default for {var}"))
        .to_string()
}

fn cidr(s: &str) -> (u32, u32) {
    let (ip, len) = s.split_once('/').unwrap_or_else(|| panic!("{s} is not a CIDR"));
    let ip: std::net::Ipv4Addr = ip.parse().unwrap_or_else(|_| panic!("{s} is not an IPv4 CIDR"));
    let len: u32 = len.parse().unwrap_or_else(|_| panic!("{s} is not a CIDR"));
    assert!(len <= 32, "{s}");
    (u32::from(ip), len)
}

fn contains(net: (u32, u32), ip: u32) -> bool {
    let mask = if net.1 == 0 { 0 } else { u32::MAX << (32 - net.1) };
    net.0 & mask == ip & mask
}

fn overlap(a: (u32, u32), b: (u32, u32)) -> bool {
    contains(a, b.0) || contains(b, a.0)
}

#[test]
fn the_local_recipe_exposes_the_api_server_to_the_vm_and_fits_flannel_vxlan() {
    let local = root().join("ci/local");
    for f in [
        "README.md",
        "kind-config.yaml",
        "setup-cni.sh",
        "join-windows.ps1",
        "create-cluster.sh",
    ] {
        assert!(local.join(f).is_file(), "ci/local/{f} is missing");
    }
    let kind = parse_one(&local.join("kind-config.yaml"));
    assert_eq!(kind["kind"], "Cluster");
    assert_eq!(kind["apiVersion"], "kind.x-k8s.io/v1alpha4");
    let net = &kind["networking"];
    let api_address = net["apiServerAddress"].as_str().expect("networking.apiServerAddress");
    let api_ip: std::net::Ipv4Addr = api_address.parse().expect("apiServerAddress is an IPv4 address");
    assert!(
        !api_ip.is_loopback(),
        "the Windows VM cannot reach a loopback apiServerAddress"
    );
    // The kubeconfigs kubeadm gives joining nodes name <cluster>-control-plane:6443.
    assert_eq!(
        net["apiServerPort"], 6443,
        "apiServerPort must be 6443 (see kind-config.yaml)"
    );
    assert_eq!(net["disableDefaultCNI"], true, "kindnet must make way for Flannel");
    let pods = cidr(net["podSubnet"].as_str().expect("podSubnet"));
    let services = cidr(net["serviceSubnet"].as_str().expect("serviceSubnet"));
    let nodes = kind["nodes"].as_array().expect("nodes");
    assert!(nodes.iter().any(|n| n["role"] == "control-plane"));
    assert!(
        nodes.iter().any(|n| n["role"] == "worker"),
        "a Linux worker for the Linux side of hybrid cases"
    );

    let create = read(&local.join("create-cluster.sh"));
    let host_ip = script_default(&create, "HOST_IP");
    let vm = cidr(&script_default(&create, "VM_CIDR"));
    let kind_net = cidr(&script_default(&create, "KIND_NETWORK_CIDR"));
    assert_eq!(
        host_ip, api_address,
        "create-cluster.sh's HOST_IP default and kind-config.yaml agree"
    );
    assert!(
        contains(vm, u32::from(api_ip)),
        "the API server address is on the VM network"
    );
    let named = [
        ("podSubnet", pods),
        ("serviceSubnet", services),
        ("VM_CIDR", vm),
        ("KIND_NETWORK_CIDR", kind_net),
    ];
    for (i, (a, na)) in named.iter().enumerate() {
        for (b, nb) in &named[i + 1..] {
            assert!(!overlap(*na, *nb), "{a} and {b} overlap");
        }
    }
    assert_mentions(
        &create,
        "create-cluster.sh",
        &[
            "kind create cluster",
            "kubeadm token create",
            "os=windows:NoSchedule",
            "doctor --kubeconfig",
            "suites/windows-nightly.yaml",
            "--focus",
        ],
    );

    let cni = read(&local.join("setup-cni.sh"));
    assert!(
        cni.lines().any(|l| l.trim() == "VXLAN_VNI=4096"),
        "setup-cni.sh: Flannel for Windows needs VNI 4096"
    );
    assert!(
        cni.lines().any(|l| l.trim() == "VXLAN_PORT=4789"),
        "setup-cni.sh: Flannel for Windows needs port 4789"
    );
    assert!(
        cni.contains("kubernetes-sigs/sig-windows-tools"),
        "setup-cni.sh: name the upstream project"
    );

    let join = read(&local.join("join-windows.ps1"));
    assert_mentions(
        &join,
        "join-windows.ps1",
        &[
            "kubeadm join",
            "--discovery-token-ca-cert-hash",
            "--cri-socket",
            "Install-Containerd.ps1",
            "PrepareNode.ps1",
        ],
    );
    assert!(
        !join.contains("--node-labels"),
        "join-windows.ps1: the kubelet sets the Windows labels itself"
    );

    let readme = read(&local.join("README.md"));
    assert_mentions(
        &readme,
        "ci/local/README.md",
        &[
            "crossconf doctor",
            "crossconf run --suite suites/windows-nightly.yaml --focus",
            "join-windows.ps1",
            "setup-cni.sh",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
