//! The network tools of the shells: `ipconfig`, `nslookup`, `curl`, `wget`, `nc` and `ping`,
//! with name resolution through the pod's DNS and HTTP over the simulated network. Separate
//! because they are the part of the shells that talks to the cluster's network model.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::{Dialect, Interp, Io, STOPPED, fs_msg, is_null_device, parse_secs};
use crate::node::dns::{self, PodDns, ResolveError};
use crate::node::http;
use crate::node::net::{NetError, PingOutcome};
use crossconf_model::os::Os;

impl Interp {
    pub(super) fn ipconfig(&self, _args: &[String], io: &Io) -> i32 {
        let p = &self.ctx.pod;
        let (servers, searches) = match &p.dns {
            Ok(d) => (
                d.nameservers.iter().map(ToString::to_string).collect::<Vec<_>>(),
                d.searches.clone(),
            ),
            Err(_) => (vec![], vec![]),
        };
        let pad = "                                       ";
        let mut lines = vec![
            String::new(),
            "Windows IP Configuration".into(),
            String::new(),
            format!("   Host Name . . . . . . . . . . . . : {}", p.hostname),
            "   Primary Dns Suffix  . . . . . . . : ".into(),
            "   Node Type . . . . . . . . . . . . : Hybrid".into(),
            "   IP Routing Enabled. . . . . . . . : No".into(),
            "   WINS Proxy Enabled. . . . . . . . : No".into(),
        ];
        for (i, s) in searches.iter().enumerate() {
            lines.push(if i == 0 {
                format!("   DNS Suffix Search List. . . . . . : {s}")
            } else {
                format!("{pad}{s}")
            });
        }
        lines.extend([
            String::new(),
            "Ethernet adapter vEthernet (eth0):".into(),
            String::new(),
            format!(
                "   Connection-specific DNS Suffix  . : {}",
                searches.first().cloned().unwrap_or_default()
            ),
            "   Description . . . . . . . . . . . : Hyper-V Virtual Ethernet Container Adapter".into(),
            "   DHCP Enabled. . . . . . . . . . . : No".into(),
            "   Autoconfiguration Enabled . . . . : Yes".into(),
            format!("   IPv4 Address. . . . . . . . . . . : {}(Preferred)", p.ip),
            "   Subnet Mask . . . . . . . . . . . : 255.255.255.0".into(),
            format!("   Default Gateway . . . . . . . . . : {}", gateway(p.ip)),
        ]);
        for (i, s) in servers.iter().enumerate() {
            lines.push(if i == 0 {
                format!("   DNS Servers . . . . . . . . . . . : {s}")
            } else {
                format!("{pad}{s}")
            });
        }
        lines.push("   NetBIOS over Tcpip. . . . . . . . : Disabled".into());
        for l in lines {
            self.line(io, &l);
        }
        0
    }

    fn pod_dns(&self) -> Result<PodDns, String> {
        self.ctx.pod.dns.clone()
    }

    pub(super) async fn resolve(&self, name: &str) -> Result<IpAddr, ResolveError> {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(ip);
        }
        if name.eq_ignore_ascii_case("localhost") {
            return Ok(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        }
        let d = self.pod_dns().map_err(|_| ResolveError::NoServers)?;
        dns::resolve(&d, &self.ctx.net, &self.ctx.source(), name)
            .await
            .map(|r| IpAddr::V4(r.addrs[0]))
    }

    pub(super) async fn nslookup(&self, args: &[String], io: &Io) -> i32 {
        let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
        let Some(name) = pos.first() else {
            self.err(io, "nslookup: interactive mode is not emulated; pass a name");
            return 1;
        };
        let Ok(mut d) = self.pod_dns() else {
            self.err(io, "nslookup: no DNS configuration");
            return 1;
        };
        if let Some(server) = pos.get(1) {
            match server.parse::<IpAddr>() {
                Ok(ip) => d.nameservers = vec![ip],
                Err(_) => {
                    self.err(io, &format!("nslookup: can't resolve '{server}'"));
                    return 1;
                }
            }
        }
        let first = d.nameservers[0];
        let win = self.dialect != Dialect::Sh && self.ctx.pod.os == Os::Windows;
        let r = dns::resolve(&d, &self.ctx.net, &self.ctx.source(), name).await;
        if win {
            match &r {
                Ok(res) => {
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {}", res.server));
                    self.line(io, "");
                    self.line(io, &format!("Name:    {}", res.name));
                    let addrs: Vec<String> = res.addrs.iter().map(ToString::to_string).collect();
                    self.line(
                        io,
                        &format!(
                            "{}  {}",
                            if addrs.len() > 1 { "Addresses:" } else { "Address:" },
                            addrs.join(&format!("{}          ", self.nl()))
                        ),
                    );
                    self.line(io, "");
                    0
                }
                Err(ResolveError::NotFound { .. }) => {
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {first}"));
                    self.line(io, "");
                    self.err(io, &format!("*** UnKnown can't find {name}: Non-existent domain"));
                    1
                }
                Err(ResolveError::ServFail { .. }) => {
                    // Windows nslookup names DNS_ERROR_RCODE_SERVER_FAILURE "Server failed".
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {first}"));
                    self.line(io, "");
                    self.err(io, &format!("*** UnKnown can't find {name}: Server failed"));
                    1
                }
                Err(ResolveError::NoServers) => {
                    self.err(io, "DNS request timed out.");
                    self.err(io, "    timeout was 2 seconds.");
                    self.line(io, "Server:  UnKnown");
                    self.line(io, &format!("Address:  {first}"));
                    self.line(io, "");
                    self.err(io, "*** Request to UnKnown timed-out");
                    1
                }
            }
        } else {
            match &r {
                Ok(res) => {
                    self.line(io, &format!("Server:\t\t{}", res.server));
                    self.line(io, &format!("Address:\t{}:53", res.server));
                    self.line(io, "");
                    for a in &res.addrs {
                        self.line(io, &format!("Name:\t{}", res.name));
                        self.line(io, &format!("Address: {a}"));
                    }
                    self.line(io, "");
                    0
                }
                Err(ResolveError::NotFound { .. }) => {
                    self.line(io, &format!("Server:\t\t{first}"));
                    self.line(io, &format!("Address:\t{first}:53"));
                    self.line(io, "");
                    self.err(io, &format!("** server can't find {name}: NXDOMAIN"));
                    1
                }
                Err(ResolveError::ServFail { .. }) => {
                    // busybox prints the RCODE's name after retrying the SERVFAIL itself.
                    self.line(io, &format!("Server:\t\t{first}"));
                    self.line(io, &format!("Address:\t{first}:53"));
                    self.line(io, "");
                    self.err(io, &format!("** server can't find {name}: SERVFAIL"));
                    1
                }
                Err(ResolveError::NoServers) => {
                    self.err(io, ";; connection timed out; no servers could be reached");
                    1
                }
            }
        }
    }

    pub(super) async fn http_get(
        &self,
        url: &str,
        timeout: Duration,
        headers: &[(String, String)],
    ) -> Result<http::Response, (i32, String)> {
        if url.starts_with("https://") {
            return Err((1, format!("Protocol \"https\" not supported by the simulator ({url})")));
        }
        self.http_request(url, "GET", None, headers, timeout, &Tls::Verify(None))
            .await
    }

    /// One HTTP or HTTPS request, errors as curl's `(exit code, message)`.
    pub(super) async fn http_request(
        &self,
        url: &str,
        method: &str,
        body: Option<bytes::Bytes>,
        headers: &[(String, String)],
        timeout: Duration,
        tls: &Tls,
    ) -> Result<http::Response, (i32, String)> {
        let https = url.starts_with("https://");
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .unwrap_or(url);
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) => (h, p),
                Err(_) => {
                    return Err((
                        3,
                        format!("URL rejected: Port number was not a decimal number between 0 and 65535 ({url})"),
                    ));
                }
            },
            None => (hostport, if https { 443 } else { 80 }),
        };
        let ip = self
            .resolve(host)
            .await
            .map_err(|_| (6, format!("Could not resolve host: {host}")))?;
        let addr = SocketAddr::new(ip, port);
        let started = Instant::now();
        let tls = if https {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|_| (3, format!("URL rejected: Bad hostname ({url})")))?;
            Some((tls.client_config(), name))
        } else {
            None
        };
        let req = http::Request {
            method,
            host: hostport,
            path,
            headers,
            body,
            tls,
        };
        http::request(self.ctx.net.dialer(), &self.ctx.source(), addr, &req, timeout)
            .await
            .map_err(|e| match e {
                http::HttpError::Tls { source, .. } if source.to_string().contains("UnknownIssuer") => (
                    60,
                    "SSL certificate problem: unable to get local issuer certificate".to_string(),
                ),
                http::HttpError::Tls { source, .. } => (35, format!("SSL connect error: {source}")),
                http::HttpError::Timeout { .. } => (
                    28,
                    format!(
                        "Operation timed out after {} milliseconds with 0 bytes received",
                        started.elapsed().as_millis()
                    ),
                ),
                http::HttpError::Dial {
                    source:
                        NetError::Dropped { .. }
                        | NetError::TimedOut { .. }
                        | NetError::Unreachable { .. }
                        | NetError::NoRoute { .. },
                    ..
                } => (
                    28,
                    format!(
                        "Failed to connect to {host} port {port} after {} ms: Timeout was reached",
                        started.elapsed().as_millis()
                    ),
                ),
                http::HttpError::Dial { .. } => (
                    7,
                    format!(
                        "Failed to connect to {host} port {port} after {} ms: Couldn't connect to server",
                        started.elapsed().as_millis()
                    ),
                ),
                other => (56, crate::node::error_chain(&other)),
            })
    }

    pub(super) async fn curl(&self, args: &[String], io: &Io) -> i32 {
        let mut silent = false;
        let mut show_err = false;
        let mut fail = false;
        let mut out_file = None;
        let mut timeout = Duration::from_secs(30);
        let mut write_out = None;
        let mut head = false;
        let mut headers = Vec::new();
        let mut url = None;
        let mut method: Option<String> = None;
        let mut data: Option<String> = None;
        let mut tls = Tls::Verify(None);
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let val = || args.get(i + 1).cloned().unwrap_or_default();
            match a {
                "-X" | "--request" => {
                    method = Some(val());
                    i += 1;
                }
                "-d" | "--data" | "--data-raw" | "--data-binary" => {
                    data = Some(val());
                    i += 1;
                }
                "--cacert" => {
                    let file = val();
                    match self.ctx.fs.read(&self.abs(&file)) {
                        Ok(pem) => tls = Tls::Verify(Some(pem)),
                        Err(_) => {
                            self.err(io, &format!("curl: (77) error setting certificate file: {file}"));
                            return 77;
                        }
                    }
                    i += 1;
                }
                "-k" | "--insecure" => tls = Tls::Insecure,
                "-s" | "--silent" => silent = true,
                "-S" | "--show-error" => show_err = true,
                "-sS" | "-Ss" => {
                    silent = true;
                    show_err = true;
                }
                "-f" | "--fail" => fail = true,
                "-sf" | "-fs" => {
                    silent = true;
                    fail = true;
                }
                "-v" | "-L" | "-4" => {}
                "-I" | "--head" => head = true,
                "-o" | "--output" => {
                    out_file = Some(val());
                    i += 1;
                }
                "-m" | "--max-time" | "--connect-timeout" => {
                    timeout = parse_secs(&val()).unwrap_or(timeout);
                    i += 1;
                }
                "-w" | "--write-out" => {
                    write_out = Some(val());
                    i += 1;
                }
                "-H" | "--header" => {
                    if let Some((k, v)) = val().split_once(':') {
                        headers.push((k.trim().to_string(), v.trim().to_string()));
                    }
                    i += 1;
                }
                a if a.starts_with('-') => {
                    self.err(io, &format!("curl: option {a}: is unknown to the simulator's curl"));
                    return 2;
                }
                a => url = Some(a.to_string()),
            }
            i += 1;
        }
        let Some(url) = url else {
            self.err(io, "curl: no URL specified!");
            return 2;
        };
        if data.is_some() && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            headers.push(("Content-Type".into(), "application/x-www-form-urlencoded".into()));
        }
        let method = method.unwrap_or_else(|| if data.is_some() { "POST" } else { "GET" }.into());
        let body = data.map(bytes::Bytes::from);
        match self.http_request(&url, &method, body, &headers, timeout, &tls).await {
            Ok(r) => {
                if fail && r.status >= 400 {
                    if !silent || show_err {
                        self.err(
                            io,
                            &format!("curl: (22) The requested URL returned error: {}", r.status),
                        );
                    }
                    return 22;
                }
                let body = if head {
                    format!("HTTP/1.1 {}\r\n\r\n", r.status).into_bytes()
                } else {
                    r.body.to_vec()
                };
                match out_file {
                    Some(f) if f != "/dev/null" && !is_null_device(&f) => {
                        if let Err(e) = self.ctx.fs.write(&self.abs(&f), &body, false) {
                            self.err(io, &format!("curl: (23) Failure writing output to destination: {e}"));
                            return 23;
                        }
                    }
                    Some(_) => {}
                    None => io.out.write(&body),
                }
                if let Some(w) = write_out {
                    self.out(
                        io,
                        &w.replace("%{http_code}", &r.status.to_string()).replace("\\n", "\n"),
                    );
                }
                0
            }
            Err((code, msg)) => {
                if !silent || show_err {
                    self.err(io, &format!("curl: ({code}) {msg}"));
                }
                if let Some(w) = write_out {
                    self.out(io, &w.replace("%{http_code}", "000").replace("\\n", "\n"));
                }
                code
            }
        }
    }

    pub(super) async fn wget(&self, args: &[String], io: &Io) -> i32 {
        let mut out_file: Option<String> = None;
        let mut timeout = Duration::from_secs(30);
        let mut spider = false;
        let mut quiet = false;
        let mut url = None;
        // `--post-data=STRING`: busybox wget POSTs it form-encoded instead of a GET.
        let mut post: Option<String> = None;
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "-O" => {
                    out_file = args.get(i + 1).cloned();
                    i += 1;
                }
                "-T" => {
                    timeout = args.get(i + 1).and_then(|v| parse_secs(v)).unwrap_or(timeout);
                    i += 1;
                }
                "-q" => quiet = true,
                "-qO-" | "-qO" => {
                    quiet = true;
                    out_file = Some("-".into());
                }
                "--spider" => spider = true,
                a if a.starts_with("--timeout=") => timeout = parse_secs(&a[10..]).unwrap_or(timeout),
                a if a.starts_with("--post-data=") => post = Some(a["--post-data=".len()..].to_string()),
                "--post-data" => {
                    post = args.get(i + 1).cloned();
                    i += 1;
                }
                a if a.starts_with('-') => {}
                a => url = Some(a.to_string()),
            }
            i += 1;
        }
        let Some(url) = url else {
            self.err(io, "BusyBox wget: no URL given");
            return 1;
        };
        if !quiet {
            self.err(io, &format!("Connecting to {}", url.trim_start_matches("http://")));
        }
        let answer = match post {
            None => self.http_get(&url, timeout, &[]).await,
            Some(_) if url.starts_with("https://") => {
                Err((1, format!("Protocol \"https\" not supported by the simulator ({url})")))
            }
            Some(data) => {
                let form = [(
                    "Content-Type".to_string(),
                    "application/x-www-form-urlencoded".to_string(),
                )];
                self.http_request(&url, "POST", Some(data.into()), &form, timeout, &Tls::Verify(None))
                    .await
            }
        };
        match answer {
            Ok(r) if r.status >= 400 => {
                self.err(io, &format!("wget: server returned error: HTTP/1.1 {}", r.status));
                1
            }
            Ok(r) => {
                if spider {
                    return 0;
                }
                match out_file.as_deref() {
                    Some("-") => io.out.write(&r.body),
                    Some(f) => {
                        if let Err(e) = self.ctx.fs.write(&self.abs(f), &r.body, false) {
                            self.err(io, &format!("wget: can't open '{f}': {}", fs_msg(Os::Linux, &e)));
                            return 1;
                        }
                    }
                    None => {
                        let name = url
                            .rsplit('/')
                            .next()
                            .filter(|s| !s.is_empty() && !s.contains(':'))
                            .unwrap_or("index.html")
                            .to_string();
                        if let Err(e) = self.ctx.fs.write(&self.abs(&name), &r.body, false) {
                            self.err(io, &format!("wget: can't open '{name}': {}", fs_msg(Os::Linux, &e)));
                            return 1;
                        }
                    }
                }
                0
            }
            Err((6, _)) => {
                let host = url
                    .trim_start_matches("http://")
                    .split(['/', ':'])
                    .next()
                    .unwrap_or("")
                    .to_string();
                self.err(io, &format!("wget: bad address '{host}'"));
                1
            }
            Err((28, _)) => {
                self.err(io, "wget: download timed out");
                1
            }
            Err((_, msg)) => {
                self.err(io, &format!("wget: can't connect to remote host: {msg}"));
                1
            }
        }
    }

    pub(super) async fn nc(&self, args: &[String], io: &Io) -> i32 {
        let mut udp = false;
        let mut zero = false;
        let mut verbose = false;
        let mut wait = Duration::from_secs(5);
        let mut pos = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "-w" || a == "-W" {
                wait = args.get(i + 1).and_then(|v| parse_secs(v)).unwrap_or(wait);
                i += 2;
                continue;
            }
            if let Some(flags) = a.strip_prefix('-') {
                for f in flags.chars() {
                    match f {
                        'u' => udp = true,
                        'z' => zero = true,
                        'v' => verbose = true,
                        'n' => {}
                        'l' => {
                            self.err(io, "nc: listen mode is not emulated by the simulator");
                            return 1;
                        }
                        _ => {}
                    }
                }
            } else {
                pos.push(a.to_string());
            }
            i += 1;
        }
        let (Some(host), Some(port)) = (pos.first(), pos.get(1).and_then(|p| p.parse::<u16>().ok())) else {
            self.err(io, "BusyBox nc: usage: nc [-uzv] [-w SEC] HOST PORT");
            return 1;
        };
        let ip = match self.resolve(host).await {
            Ok(ip) => ip,
            Err(_) => {
                self.err(io, &format!("nc: bad address '{host}'"));
                return 1;
            }
        };
        let addr = SocketAddr::new(ip, port);
        let src = self.ctx.source();
        if udp {
            let payload = io.stdin.read_all().await;
            let payload = if payload.is_empty() { b"\n".to_vec() } else { payload };
            return match self.ctx.net.dialer().udp_request(&src, addr, &payload, wait).await {
                Ok(reply) => {
                    io.out.write(&reply);
                    0
                }
                Err(NetError::TimedOut { .. }) if zero => 0,
                Err(e) => {
                    if verbose {
                        self.err(io, &format!("nc: {e}"));
                    }
                    1
                }
            };
        }
        match tokio::time::timeout(wait, self.ctx.net.dialer().tcp(&src, addr)).await {
            Ok(Ok(mut stream)) => {
                if verbose {
                    self.err(io, &format!("{host} ({ip}:{port}) open"));
                }
                if zero {
                    return 0;
                }
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let input = io.stdin.read_all().await;
                if !input.is_empty() && stream.write_all(&input).await.is_err() {
                    return 1;
                }
                let _ = stream.shutdown().await;
                let mut buf = Vec::new();
                let _ = tokio::time::timeout(wait, stream.read_to_end(&mut buf)).await;
                io.out.write(&buf);
                0
            }
            Ok(Err(e)) => {
                self.err(
                    io,
                    &format!(
                        "nc: can't connect to remote host ({ip}): {}",
                        match &e {
                            NetError::Io { source, .. } if source.kind() == std::io::ErrorKind::ConnectionRefused =>
                                "Connection refused".to_string(),
                            e => e.to_string(),
                        }
                    ),
                );
                1
            }
            Err(_) => {
                self.err(io, &format!("nc: {host} ({ip}:{port}): Connection timed out"));
                1
            }
        }
    }

    pub(super) async fn ping(&self, args: &[String], io: &Io) -> i32 {
        let windows_style = self.dialect != Dialect::Sh && self.ctx.pod.os == Os::Windows;
        let mut count: Option<u64> = if windows_style { Some(4) } else { None };
        let mut wait = Duration::from_secs(1);
        let mut host = None;
        let mut i = 0;
        while i < args.len() {
            let a = args[i].to_ascii_lowercase();
            match a.as_str() {
                "-c" | "-n" => {
                    count = args.get(i + 1).and_then(|v| v.parse().ok());
                    i += 1;
                }
                "-t" => count = None,
                "-w" | "-W" => {
                    let v = args.get(i + 1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(1);
                    wait = if windows_style {
                        Duration::from_millis(v)
                    } else {
                        Duration::from_secs(v)
                    };
                    i += 1;
                }
                a if a.starts_with('-') => {}
                _ => host = Some(args[i].clone()),
            }
            i += 1;
        }
        let Some(host) = host else {
            self.err(io, "ping: usage error: Destination address required");
            return 1;
        };
        let ip = match self.resolve(&host).await {
            Ok(ip) => ip,
            Err(_) => {
                if windows_style {
                    self.line(
                        io,
                        &format!("Ping request could not find host {host}. Please check the name and try again."),
                    );
                } else {
                    self.err(io, &format!("ping: bad address '{host}'"));
                }
                return 1;
            }
        };
        let src = self.ctx.source();
        if windows_style {
            self.line(io, "");
            self.line(io, &format!("Pinging {ip} with 32 bytes of data:"));
        } else {
            self.line(io, &format!("PING {host} ({ip}): 56 data bytes"));
        }
        let (mut sent, mut got) = (0u64, 0u64);
        loop {
            if count.is_some_and(|c| sent >= c) {
                break;
            }
            let reply = self.ctx.net.dialer().ping(&src, ip) == PingOutcome::Reply;
            sent += 1;
            if reply {
                got += 1;
                if windows_style {
                    self.line(io, &format!("Reply from {ip}: bytes=32 time<1ms TTL=128"));
                } else {
                    self.line(
                        io,
                        &format!("64 bytes from {ip}: seq={} ttl=64 time=0.050 ms", sent - 1),
                    );
                }
            } else if windows_style {
                if !self.sleep(wait).await {
                    return STOPPED;
                }
                self.line(io, "Request timed out.");
            } else if !self.sleep(wait).await {
                return STOPPED;
            }
            if count.is_none_or(|c| sent < c) && !self.sleep(Duration::from_secs(1)).await {
                return STOPPED;
            }
        }
        let loss = ((sent - got) * 100).checked_div(sent).unwrap_or(0);
        if windows_style {
            self.line(io, "");
            self.line(io, &format!("Ping statistics for {ip}:"));
            self.line(
                io,
                &format!(
                    "    Packets: Sent = {sent}, Received = {got}, Lost = {} ({loss}% loss),",
                    sent - got
                ),
            );
        } else {
            self.line(io, "");
            self.line(io, &format!("--- {host} ping statistics ---"));
            self.line(
                io,
                &format!("{sent} packets transmitted, {got} packets received, {loss}% packet loss"),
            );
        }
        if got > 0 { 0 } else { 1 }
    }
}

fn gateway(ip: std::net::Ipv4Addr) -> std::net::Ipv4Addr {
    let o = ip.octets();
    std::net::Ipv4Addr::new(o[0], o[1], o[2], 1)
}

/// How curl checks an HTTPS server: against `--cacert` (or, without it, a CA bundle the
/// simulated images do not carry, so verification fails as it would for a private CA), or not
/// at all (`-k`).
pub(super) enum Tls {
    /// Verify against these PEM certificates (none: nothing is trusted).
    Verify(Option<Vec<u8>>),
    /// Accept any certificate.
    Insecure,
}

impl Tls {
    fn client_config(&self) -> std::sync::Arc<rustls::ClientConfig> {
        match self {
            Tls::Insecure => crate::api::tls::insecure_client_config(),
            Tls::Verify(pem) => {
                use rustls::pki_types::pem::PemObject;
                let mut roots = rustls::RootCertStore::empty();
                for der in pem.iter().flat_map(|p| {
                    rustls::pki_types::CertificateDer::pem_slice_iter(p)
                        .flatten()
                        .collect::<Vec<_>>()
                }) {
                    // A certificate the store refuses only leaves the server unverifiable.
                    let _ = roots.add(der);
                }
                std::sync::Arc::new(
                    rustls::ClientConfig::builder()
                        .with_root_certificates(roots)
                        .with_no_client_auth(),
                )
            }
        }
    }
}
