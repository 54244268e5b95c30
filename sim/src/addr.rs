//! The address plan of one simulated cluster.
//!
//! Every simulated cluster lives in its own `/16` inside 127.0.0.0/8, so several can run side by
//! side on one machine (tests run in parallel) and nothing ever leaves loopback. The block is
//! claimed by binding the API server's address; a block already in use fails that bind, and the
//! next one is tried.
//!
//! | addresses                      | what                                                   |
//! |--------------------------------|--------------------------------------------------------|
//! | `127.B.0.1:6443`               | the API server                                         |
//! | `127.B.1.(i+1)`                | node `i`'s InternalIP (kubelet on 10250, NodePorts)    |
//! | `127.B.(16+i).2 ..= .254`      | pod IPs of node `i` (up to 64 nodes)                   |
//! | `127.B.96.0/20`                | Service ClusterIPs; `.96.1` kubernetes, `.96.10` DNS   |
//! | `127.B.250.1`                  | the emulated "outside world" host (TCP/UDP/HTTP)       |
//! | `127.B.250.53`                 | the node-level resolver (what `dnsPolicy: Default` uses) |
//! | `127.B.250.88`                 | the Active Directory domain controller (`--gmsa-domain`) |

use std::net::Ipv4Addr;

/// The lowest and highest second octet a cluster may take.
pub const FIRST_BLOCK: u8 = 16;
/// See [`FIRST_BLOCK`].
pub const LAST_BLOCK: u8 = 239;
/// The API server's port on its block address.
pub const API_PORT: u16 = 6443;
/// The kubelet's port on every node address (the real kubelet's default).
pub const KUBELET_PORT: u16 = 10250;
/// The third octet where pod ranges start.
const POD_BASE: u8 = 16;
/// Nodes a block can address pods for.
pub const MAX_NODES: usize = 64;
/// Publicly routable addresses that the simulator maps onto its outside host. They are in
/// TEST-NET-3 (RFC 5737), which is never routed, so even a bug that dialled one directly would
/// not reach anybody; the simulator never dials them anyway.
pub const MODELLED_EXTERNAL_IPS: &[Ipv4Addr] = &[Ipv4Addr::new(203, 0, 113, 10)];
/// The name the node-level resolver answers with the outside host (egress-by-name cases).
pub const EXTERNAL_NAME: &str = "outside.crossconf.test";

/// One cluster's `/16` inside 127.0.0.0/8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressBlock(pub u8);

impl AddressBlock {
    /// The API server's address.
    pub fn api_server(self) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, 0, 1)
    }

    /// The InternalIP of node `index` (0-based).
    pub fn node(self, index: usize) -> Ipv4Addr {
        assert!(
            index < MAX_NODES,
            "node index {index} beyond the block's {MAX_NODES} nodes"
        );
        Ipv4Addr::new(127, self.0, 1, (index + 1) as u8)
    }

    /// Pod address `n` (0-based) on node `index`; `None` when the node's range is exhausted.
    pub fn pod(self, node_index: usize, n: usize) -> Option<Ipv4Addr> {
        if node_index >= MAX_NODES || n > 252 {
            return None;
        }
        Some(Ipv4Addr::new(127, self.0, POD_BASE + node_index as u8, (n + 2) as u8))
    }

    /// The pod CIDR of node `index`, as `spec.podCIDR` shows it.
    pub fn pod_cidr(self, node_index: usize) -> String {
        format!("127.{}.{}.0/24", self.0, POD_BASE + node_index as u8)
    }

    /// The Service CIDR, as the API server's `--service-cluster-ip-range` would be.
    pub fn service_cidr(self) -> String {
        format!("127.{}.96.0/20", self.0)
    }

    /// ClusterIP number `n` of the service range (`n = 1` is `kubernetes`, `10` the DNS).
    pub fn service(self, n: u16) -> Option<Ipv4Addr> {
        if n == 0 || n >= 16 * 256 - 1 {
            return None;
        }
        Some(Ipv4Addr::new(127, self.0, 96 + (n / 256) as u8, (n % 256) as u8))
    }

    /// The ClusterIP of the `default/kubernetes` Service.
    pub fn kubernetes_service(self) -> Ipv4Addr {
        self.service(1).expect("1 is in range")
    }

    /// The ClusterIP of the cluster DNS Service (`kube-system/kube-dns`).
    pub fn dns_service(self) -> Ipv4Addr {
        self.service(10).expect("10 is in range")
    }

    /// The emulated outside host.
    pub fn outside(self) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, 250, 1)
    }

    /// The node-level resolver used by `dnsPolicy: Default`.
    pub fn node_resolver(self) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, 250, 53)
    }

    /// The simulated Active Directory domain controller (LDAP 389, SMB 445), when the cluster
    /// runs one (`--gmsa-domain`).
    pub fn domain_controller(self) -> Ipv4Addr {
        Ipv4Addr::new(127, self.0, 250, 88)
    }

    /// Whether `ip` belongs to this block.
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        let o = ip.octets();
        o[0] == 127 && o[1] == self.0
    }

    /// Whether `ip` is a ClusterIP of this block's Service range.
    pub fn is_service_ip(self, ip: Ipv4Addr) -> bool {
        let o = ip.octets();
        self.contains(ip) && (96..112).contains(&o[2])
    }

    /// The node index whose pod range holds `ip`, if any.
    pub fn pod_node_index(self, ip: Ipv4Addr) -> Option<usize> {
        let o = ip.octets();
        if self.contains(ip) && o[2] >= POD_BASE && ((o[2] - POD_BASE) as usize) < MAX_NODES {
            Some((o[2] - POD_BASE) as usize)
        } else {
            None
        }
    }
}

/// Whether the simulator may open a socket to `ip`: only loopback, ever.
pub fn dialable(ip: std::net::IpAddr) -> bool {
    ip.is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_inside_loopback_and_disjoint() {
        let b = AddressBlock(42);
        let all = [
            b.api_server(),
            b.node(0),
            b.node(2),
            b.pod(0, 0).unwrap(),
            b.pod(2, 252).unwrap(),
            b.kubernetes_service(),
            b.dns_service(),
            b.outside(),
            b.node_resolver(),
        ];
        for ip in all {
            assert!(ip.is_loopback(), "{ip}");
            assert!(b.contains(ip));
        }
        let mut uniq = all.to_vec();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), all.len());
        assert_eq!(b.dns_service(), Ipv4Addr::new(127, 42, 96, 10));
        assert!(b.is_service_ip(b.dns_service()));
        assert!(!b.is_service_ip(b.node(0)));
        assert_eq!(b.pod_node_index(b.pod(3, 7).unwrap()), Some(3));
        assert_eq!(b.pod(0, 253), None);
    }

    #[test]
    fn modelled_external_addresses_are_never_dialable() {
        for ip in MODELLED_EXTERNAL_IPS {
            assert!(!dialable((*ip).into()));
        }
        assert!(!dialable("1.1.1.1".parse().unwrap()));
        assert!(dialable("127.3.4.5".parse().unwrap()));
    }
}
