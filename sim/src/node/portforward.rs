//! The kubelet's `portForward/{ns}/{pod}` endpoint, in both its protocols:
//!
//! - **SPDY/3.1** (`Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version: portforward.k8s.io`): the
//!   client opens a pair of streams per connection, `streamtype: error` and `streamtype: data`
//!   with the same `port` and `requestid` headers; the data stream carries the connection's
//!   bytes both ways, and a failure is written on the error stream. kubectl speaks this directly
//!   (with `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) or tunnelled through the API server inside
//!   websocket messages (its default).
//! - **websocket** (`v4.channel.k8s.io`, its base64 variant, or none) with `?ports=80,443`: two
//!   channels per port (data `2i`, error `2i+1`), each opened by the port as two little-endian
//!   bytes; one connection per port. The Python client and kube-rs use it.
//!
//! Connections go to the pod's real listener on its loopback pod IP. A refused dial is reported
//! as containerd's CRI port-forward reports it, inside the kubelet's
//! `error forwarding port P to pod ..., uid : ...`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use axum::extract::ws::{Message, WebSocket};
use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::debug;

use crate::addr;
use crate::node::remotecommand::Framing;
use crate::node::spdy::{self, Codec, FLAG_FIN, Frame};

/// Where forwarded connections go: the pod's address, and how the runtime names its sandbox
/// in error messages.
#[derive(Debug, Clone)]
pub struct Target {
    /// The pod IP (on loopback).
    pub ip: Ipv4Addr,
    /// The sandbox id the runtime reports.
    pub sandbox: String,
    /// The pod UID (the network namespace is named after it).
    pub uid: String,
}

impl Target {
    /// Dials `port` in the pod; the error is the message the error stream carries.
    async fn dial(&self, port: u16) -> Result<TcpStream, String> {
        let a = SocketAddr::from((self.ip, port));
        let refused = |e: std::io::Error| {
            format!(
                "error forwarding port {port} to pod {sb}, uid : failed to execute portforward in network namespace \"/var/run/netns/cni-{uid}\": failed to connect to localhost:{port} inside namespace \"{sb}\", IPv4: dial tcp4 127.0.0.1:{port}: connect: {e} IPv6 dial tcp6 [::1]:{port}: connect: {e} ",
                sb = self.sandbox,
                uid = self.uid,
                e = io_text(&e),
            )
        };
        if !addr::dialable(a.ip()) {
            return Err(refused(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
        }
        TcpStream::connect(a).await.map_err(refused)
    }
}

/// Go's text for an OS error (`connection refused`, not Rust's `Connection refused (os error
/// 111)`).
fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::TimedOut => "connection timed out".into(),
        _ => e.to_string().to_lowercase(),
    }
}

/// Parses the `ports` query values (`80`, `80,443`, repeated), as the kubelet does.
pub fn parse_ports(values: &[String]) -> Result<Vec<u16>, String> {
    if values.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    let mut out = Vec::new();
    for v in values {
        if v.is_empty() {
            return Err("query parameter \"port\" cannot be empty".into());
        }
        for p in v.split(',') {
            let n: u16 = p.parse().map_err(|e| format!("unable to parse {v:?} as a port: {e}"))?;
            if n < 1 {
                return Err(format!("port {v:?} must be > 0"));
            }
            out.push(n);
        }
    }
    Ok(out)
}

/// Serves one websocket port-forward session: one connection per requested port.
pub async fn websocket(socket: WebSocket, framing: Framing, target: Target, ports: Vec<u16>) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<(u8, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((ch, data)) = rx.recv().await {
            if ws_tx.send(framing.encode(ch, &data)).await.is_err() {
                break;
            }
        }
        let _ = ws_tx
            .send(Message::Close(Some(axum::extract::ws::CloseFrame {
                code: axum::extract::ws::close_code::NORMAL,
                reason: "".into(),
            })))
            .await;
    });
    let mut inputs = HashMap::new();
    let mut tasks = Vec::new();
    for (i, port) in ports.iter().copied().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        let _ = tx.send((data, port.to_le_bytes().to_vec()));
        let _ = tx.send((error, port.to_le_bytes().to_vec()));
        let (in_tx, in_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        inputs.insert(data, in_tx);
        let (tx, target) = (tx.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            match target.dial(port).await {
                Ok(tcp) => {
                    let out = tx.clone();
                    // The channel protocol has no half-close: the pod's end of output shows
                    // only when the session closes.
                    pump(tcp, in_rx, move |d| d.is_none_or(|d| out.send((data, d)).is_ok())).await;
                }
                Err(msg) => {
                    let _ = tx.send((error, msg.into_bytes()));
                }
            }
        }));
    }
    drop(tx);
    let reader = async {
        while let Some(Ok(m)) = ws_rx.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
            if let Some((ch, d)) = framing.decode(&m)
                && let Some(input) = inputs.get(&ch)
            {
                let _ = input.send(d);
            }
        }
        inputs.clear();
    };
    let all = futures::future::join_all(tasks);
    tokio::select! {
        _ = all => {}
        () = reader => {}
    }
    let _ = writer.await;
}

/// Copies between a TCP connection and a stream: what arrives on `input` is written to the
/// connection (its end half-closes it), what the connection sends goes to `output`, then
/// `None` when it ends. Returns when both directions are done.
async fn pump(tcp: TcpStream, mut input: mpsc::UnboundedReceiver<Vec<u8>>, output: impl Fn(Option<Vec<u8>>) -> bool) {
    let (mut rd, mut wr) = tcp.into_split();
    let up = async move {
        while let Some(d) = input.recv().await {
            if wr.write_all(&d).await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !output(Some(buf[..n].to_vec())) {
                        break;
                    }
                }
            }
        }
        output(None);
    };
    tokio::join!(up, down);
}

/// One port-forward request of a SPDY session: its two streams.
#[derive(Default)]
struct Pair {
    port: Option<u16>,
    data: Option<u32>,
    error: Option<u32>,
}

/// Serves a SPDY/3.1 port-forward session on an upgraded connection until the client goes.
pub async fn spdy<IO>(io: IO, target: Target)
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(io);
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let writer = tokio::spawn(async move {
        let mut codec = Codec::new();
        while let Some(f) = rx.recv().await {
            if wr.write_all(&codec.encode(&f)).await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let mut codec = Codec::new();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut inputs: HashMap<u32, mpsc::UnboundedSender<Vec<u8>>> = HashMap::new();
    'session: loop {
        loop {
            let frame = match codec.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    debug!(error = %e, "port-forward SPDY session ends");
                    break 'session;
                }
            };
            match frame {
                Frame::SynStream { stream, headers, flags } => {
                    let _ = tx.send(Frame::SynReply {
                        stream,
                        flags: 0,
                        headers: vec![],
                    });
                    let port = spdy::header(&headers, "port").and_then(|p| p.parse::<u16>().ok());
                    let Some(port) = port.filter(|p| *p > 0) else {
                        let _ = tx.send(Frame::RstStream {
                            stream,
                            status: spdy::RST_PROTOCOL_ERROR,
                        });
                        continue;
                    };
                    // Old clients send no request id: each port then has one pair at a time.
                    let id = spdy::header(&headers, "requestid")
                        .map(String::from)
                        .unwrap_or_else(|| format!("port-{port}"));
                    let pair = pairs.entry(id.clone()).or_default();
                    pair.port = Some(port);
                    match spdy::header(&headers, "streamtype") {
                        Some("data") => pair.data = Some(stream),
                        Some("error") => pair.error = Some(stream),
                        _ => {
                            let _ = tx.send(Frame::RstStream {
                                stream,
                                status: spdy::RST_PROTOCOL_ERROR,
                            });
                            continue;
                        }
                    }
                    let _ = flags;
                    if let Pair {
                        port: Some(port),
                        data: Some(data),
                        error: Some(error),
                    } = *pair
                    {
                        pairs.remove(&id);
                        let (in_tx, in_rx) = mpsc::unbounded_channel();
                        inputs.insert(data, in_tx);
                        tokio::spawn(forward(target.clone(), port, data, error, in_rx, tx.clone()));
                    }
                }
                Frame::Data { stream, flags, data } => {
                    if !data.is_empty()
                        && let Some(input) = inputs.get(&stream)
                    {
                        let _ = input.send(data);
                    }
                    if flags & FLAG_FIN != 0 {
                        inputs.remove(&stream);
                    }
                }
                Frame::RstStream { stream, .. } => {
                    inputs.remove(&stream);
                }
                Frame::Ping(id) => {
                    let _ = tx.send(Frame::Ping(id));
                }
                Frame::GoAway { .. } => break 'session,
                Frame::SynReply { .. } | Frame::Settings | Frame::Headers { .. } | Frame::WindowUpdate { .. } => {}
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    drop(inputs);
    drop(tx);
    writer.abort();
}

/// One forwarded connection of a SPDY session.
async fn forward(
    target: Target,
    port: u16,
    data: u32,
    error: u32,
    input: mpsc::UnboundedReceiver<Vec<u8>>,
    tx: mpsc::UnboundedSender<Frame>,
) {
    match target.dial(port).await {
        Ok(tcp) => {
            let out = tx.clone();
            // The pod's end of output is a FIN on the data stream at once: kubectl closes its
            // local connection on it, while its own half may still be sending.
            pump(tcp, input, move |d| {
                let frame = match d {
                    Some(d) => Frame::Data {
                        stream: data,
                        flags: 0,
                        data: d,
                    },
                    None => Frame::Data {
                        stream: data,
                        flags: FLAG_FIN,
                        data: vec![],
                    },
                };
                out.send(frame).is_ok()
            })
            .await;
            let _ = tx.send(Frame::Data {
                stream: error,
                flags: FLAG_FIN,
                data: vec![],
            });
            return;
        }
        Err(msg) => {
            let _ = tx.send(Frame::Data {
                stream: error,
                flags: 0,
                data: msg.into_bytes(),
            });
        }
    }
    for stream in [data, error] {
        let _ = tx.send(Frame::Data {
            stream,
            flags: FLAG_FIN,
            data: vec![],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_parse_like_the_kubelet() {
        assert_eq!(parse_ports(&["80,443".into(), "8080".into()]).unwrap(), [80, 443, 8080]);
        assert!(parse_ports(&[]).unwrap_err().contains("required"));
        assert!(parse_ports(&["0".into()]).unwrap_err().contains("must be > 0"));
        assert!(parse_ports(&["x".into()]).unwrap_err().contains("unable to parse"));
    }

    #[tokio::test]
    async fn spdy_pairs_forward_to_the_pod_and_report_refusals() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            s.write_all(b"pong").await.unwrap();
        });
        let target = Target {
            ip: Ipv4Addr::LOCALHOST,
            sandbox: "sb".into(),
            uid: "u".into(),
        };
        let (client, server) = tokio::io::duplex(1 << 16);
        tokio::spawn(spdy(server, target));
        let (mut rd, mut wr) = tokio::io::split(client);
        let mut c = Codec::new();
        let h = |t: &str, p: u16, id: &str| {
            vec![
                ("streamtype".to_string(), t.to_string()),
                ("port".to_string(), p.to_string()),
                ("requestid".to_string(), id.to_string()),
            ]
        };
        let mut out = Vec::new();
        for f in [
            Frame::SynStream {
                stream: 1,
                flags: 0,
                headers: h("error", port, "0"),
            },
            Frame::SynStream {
                stream: 3,
                flags: 0,
                headers: h("data", port, "0"),
            },
            Frame::Data {
                stream: 3,
                flags: FLAG_FIN,
                data: b"ping".to_vec(),
            },
            Frame::Ping(7),
            Frame::SynStream {
                stream: 5,
                flags: 0,
                headers: h("error", 1, "1"),
            },
            Frame::SynStream {
                stream: 7,
                flags: 0,
                headers: h("data", 1, "1"),
            },
        ] {
            out.extend_from_slice(&c.encode(&f));
        }
        wr.write_all(&out).await.unwrap();
        let mut rc = Codec::new();
        let mut buf = BytesMut::new();
        let (mut data, mut err, mut pinged, mut fins) = (Vec::new(), String::new(), false, 0);
        loop {
            while let Some(f) = rc.decode(&mut buf).unwrap() {
                match f {
                    Frame::Data {
                        stream: 3,
                        data: d,
                        flags,
                    } => {
                        data.extend(d);
                        fins += usize::from(flags & FLAG_FIN != 0);
                    }
                    Frame::Data {
                        stream: 5,
                        data: d,
                        flags,
                    } => {
                        err.push_str(&String::from_utf8_lossy(&d));
                        fins += usize::from(flags & FLAG_FIN != 0);
                    }
                    Frame::Data { flags, .. } => fins += usize::from(flags & FLAG_FIN != 0),
                    Frame::Ping(7) => pinged = true,
                    _ => {}
                }
            }
            if fins == 4 && pinged {
                break;
            }
            assert!(rd.read_buf(&mut buf).await.unwrap() > 0, "session open");
        }
        assert_eq!(data, b"pong");
        assert!(
            err.starts_with("error forwarding port 1 to pod sb, uid : failed to execute portforward"),
            "{err}"
        );
        assert!(
            err.contains("dial tcp4 127.0.0.1:1: connect: connection refused"),
            "{err}"
        );
    }
}
