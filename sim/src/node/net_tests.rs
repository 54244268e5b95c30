//! Unit tests of the dialer: nothing leaves loopback, ICMP by OS, and the fault switches
//! that drop traffic (blackhole, node-lost). Kept apart so `net.rs` holds the model only.

use super::*;

fn pod_src(block: AddressBlock, os: Os) -> Source {
    Source {
        ip: block.pod(0, 0),
        node: Some("n0".into()),
        os,
        is_pod: true,
    }
}

#[tokio::test]
async fn outside_addresses_are_refused_without_a_socket() {
    let block = AddressBlock(201);
    let d = Dialer::new(block, Arc::new(Faults::default()));
    let src = pod_src(block, Os::Windows);
    let err = d.tcp(&src, "1.1.1.1:53".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, NetError::Unreachable { .. }), "{err}");
    let err = d
        .udp_request(&src, "8.8.8.8:53".parse().unwrap(), b"x", Duration::from_millis(10))
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Unreachable { .. }), "{err}");
    assert_eq!(d.sockets_opened(), 0, "no socket may be opened for outside addresses");
    assert_eq!(d.refusals().len(), 2);
}

#[test]
fn modelled_external_maps_to_outside_host() {
    let block = AddressBlock(202);
    let d = Dialer::new(block, Arc::new(Faults::default()));
    let ip = addr::MODELLED_EXTERNAL_IPS[0];
    assert_eq!(d.route(&Source::host(), ip.into()).unwrap(), block.outside());
    assert!(d.route(&Source::host(), "127.9.0.1".parse().unwrap()).is_err());
    let src = pod_src(block, Os::Linux);
    assert_eq!(
        d.route(&src, Ipv4Addr::LOCALHOST.into()).unwrap(),
        block.pod(0, 0).unwrap()
    );
}

#[test]
fn icmp_outside_depends_on_os() {
    let block = AddressBlock(203);
    let d = Dialer::new(block, Arc::new(Faults::default()));
    let ext: IpAddr = addr::MODELLED_EXTERNAL_IPS[0].into();
    assert_eq!(d.ping(&pod_src(block, Os::Windows), ext), PingOutcome::NoReply);
    assert_eq!(d.ping(&pod_src(block, Os::Linux), ext), PingOutcome::Reply);
    d.set_live(block.node(0), true);
    assert_eq!(
        d.ping(&pod_src(block, Os::Windows), block.node(0).into()),
        PingOutcome::Reply
    );
    assert_eq!(
        d.ping(&pod_src(block, Os::Windows), block.node(5).into()),
        PingOutcome::NoReply
    );
    assert_eq!(
        d.ping(&pod_src(block, Os::Linux), "1.1.1.1".parse().unwrap()),
        PingOutcome::NoReply
    );
}

#[tokio::test]
async fn blackhole_drops_pod_traffic() {
    let block = AddressBlock(204);
    let faults = Arc::new(Faults::parse("blackhole=n0").unwrap());
    let d = Dialer::new(block, faults.clone());
    let err = d
        .tcp(&pod_src(block, Os::Linux), SocketAddr::new(block.node(1).into(), 1))
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Dropped { .. }), "{err}");
    faults.set_blackholed("n0", false);
    let err = d
        .tcp(&pod_src(block, Os::Linux), SocketAddr::new(block.node(1).into(), 1))
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Io { .. }), "refused by the OS now: {err}");
}

#[tokio::test]
async fn a_lost_node_and_its_pods_are_unreachable() {
    let block = AddressBlock(205);
    let d = Dialer::new(block, Arc::new(Faults::default()));
    d.register_node(0, "n0");
    d.register_node(1, "n1");
    d.set_live(block.node(0), true);
    d.set_node_lost("n0", true);
    let host = Source::host();
    for dst in [block.node(0), block.pod(0, 3).unwrap()] {
        let err = d.tcp(&host, SocketAddr::new(dst.into(), 80)).await.unwrap_err();
        assert!(
            matches!(&err, NetError::Dropped { why, .. } if why.contains("node n0 is lost")),
            "{err}"
        );
        assert_eq!(d.ping(&host, dst.into()), PingOutcome::NoReply);
    }
    let err = d
        .tcp(&pod_src(block, Os::Linux), SocketAddr::new(block.node(1).into(), 1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, NetError::Dropped { .. }),
        "its pods cannot reach out: {err}"
    );
    let err = d
        .tcp(&host, SocketAddr::new(block.pod(1, 3).unwrap().into(), 1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, NetError::Io { .. }),
        "other nodes are not affected: {err}"
    );
}

#[test]
fn fault_spec_parses_and_rejects() {
    let f = Faults::parse("dns-stopped, kube-proxy-off=w1,stats-missing=logsAvailableBytes").unwrap();
    assert!(f.dns_stopped());
    assert!(f.is_kube_proxy_off("w1"));
    assert_eq!(f.stats_missing(), Some(StatsField::LogsAvailableBytes));
    assert!(Faults::parse("nope").is_err());
    assert!(Faults::parse("blackhole").is_err());
    assert!(Faults::parse("stats-missing=bogus").is_err());
}
