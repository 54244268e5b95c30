//! The kubelet's exec and attach streams over a websocket, as `wsstream` serves them: every
//! message starts with a channel byte (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize), or in
//! the `base64.` protocols with the channel as an ASCII digit and the data base64-encoded.
//!
//! Stdin is streamed into the process while it runs ([`Stdin`]): end of input is v5's close
//! signal (channel 255 naming channel 0), or the websocket closing. With a TTY the session
//! stands in for the pseudo-terminal: stderr goes out on stdout, typed carriage returns reach
//! the program as newlines and are echoed, output newlines become CR LF. Resize messages
//! (channel 4) are read and dropped: no emulated program asks for the terminal size.

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use base64::Engine as _;
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::node::programs::{Output, Stdin, StdinWriter, Stream};

/// The subprotocols the kubelet accepts for exec and attach, newest first.
pub const PROTOCOLS: [&str; 6] = [
    "v5.channel.k8s.io",
    "v5.base64.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
/// v5's close signal: `[255, channel]` says the client will send no more on `channel`.
const CLOSE: u8 = 255;

/// How long a finished session waits for the client's close frame.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// The negotiated framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// Text messages with an ASCII channel digit and base64 data.
    pub base64: bool,
    /// v4 or later: the error channel carries a Status object, not plain text.
    pub status_json: bool,
    /// v5: the client can close its stdin with a close signal.
    pub close_signal: bool,
}

impl Framing {
    /// The framing of a negotiated subprotocol (`None`: none was offered, the binary default).
    pub fn of(protocol: Option<&str>) -> Framing {
        let p = protocol.unwrap_or("");
        Framing {
            base64: p.contains("base64"),
            status_json: p.starts_with("v4.") || p.starts_with("v5."),
            close_signal: p.starts_with("v5."),
        }
    }

    pub(crate) fn encode(self, ch: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut s = String::from(char::from(b'0' + ch));
            s.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
            Message::Text(s.into())
        } else {
            let mut frame = Vec::with_capacity(data.len() + 1);
            frame.push(ch);
            frame.extend_from_slice(data);
            Message::Binary(frame.into())
        }
    }

    /// A client message as (channel, data); `None` for anything that is not a channel frame.
    pub(crate) fn decode(self, m: &Message) -> Option<(u8, Vec<u8>)> {
        match m {
            // Like wsstream, which reads every data message as bytes: the Python client sends
            // `write_stdin("text")` as a text message with a raw channel byte in front.
            Message::Binary(b) if !self.base64 => b.split_first().map(|(c, d)| (*c, d.to_vec())),
            Message::Text(t) if !self.base64 => t.as_bytes().split_first().map(|(c, d)| (*c, d.to_vec())),
            Message::Text(t) if self.base64 => {
                let (c, d) = t.as_bytes().split_first()?;
                let data = base64::engine::general_purpose::STANDARD.decode(d).ok()?;
                Some((c.wrapping_sub(b'0'), data))
            }
            _ => None,
        }
    }
}

/// Which streams a request asked for.
#[derive(Debug, Clone, Copy)]
pub struct Streams {
    /// `stdin=true`.
    pub stdin: bool,
    /// `tty=true`.
    pub tty: bool,
}

/// The output side of a session: frames queued for the websocket writer.
#[derive(Clone)]
pub struct Sender {
    tx: mpsc::UnboundedSender<Frame>,
}

/// What the websocket writer is asked to do.
enum Frame {
    /// Send data on a channel.
    Data(u8, Vec<u8>),
    /// The session is over: stop writing even if programs (a background job) still hold an
    /// [`Output`] to this session.
    End,
}

impl Sender {
    /// An [`Output`] writing a program's streams to the session (stderr on stdout with a TTY,
    /// newlines as CR LF as a terminal's `onlcr` does).
    pub fn output(&self, tty: bool) -> Output {
        let tx = self.tx.clone();
        Output::new(move |s, d| {
            if tty {
                let _ = tx.send(Frame::Data(STDOUT, onlcr(d)));
            } else {
                let ch = if s == Stream::Stdout { STDOUT } else { STDERR };
                let _ = tx.send(Frame::Data(ch, d.to_vec()));
            }
        })
    }
}

fn onlcr(d: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(d.len());
    for (i, b) in d.iter().enumerate() {
        if *b == b'\n' && (i == 0 || d[i - 1] != b'\r') {
            v.push(b'\r');
        }
        v.push(*b);
    }
    v
}

/// One open session: the output sender, the process's stdin (if asked for) and the terminal
/// size, plus the tasks moving frames.
pub struct Session {
    /// Queues output frames.
    pub out: Sender,
    /// Resolves when the client's input ended (close signal, websocket closed or gone).
    pub input_done: tokio::sync::oneshot::Receiver<()>,
    /// Becomes true when the websocket is closed or broken.
    gone: watch::Receiver<bool>,
    framing: Framing,
    writer: tokio::task::JoinHandle<SplitSink<WebSocket, Message>>,
    reader: tokio::task::JoinHandle<()>,
}

/// Starts moving frames: client stdin into `stdin` (dropped at end of input, so the process
/// reads end of file), output frames out.
pub fn open(socket: WebSocket, framing: Framing, streams: Streams, stdin: Option<StdinWriter>) -> Session {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let (done_tx, input_done) = tokio::sync::oneshot::channel();
    let (gone_tx, gone) = watch::channel(false);
    let echo = tx.clone();
    let writer = tokio::spawn(async move {
        while let Some(Frame::Data(ch, data)) = rx.recv().await {
            if ws_tx.send(framing.encode(ch, &data)).await.is_err() {
                break;
            }
        }
        ws_tx
    });
    let reader = tokio::spawn(async move {
        let mut stdin = stdin.filter(|_| streams.stdin);
        while let Some(Ok(m)) = ws_rx.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
            let Some((ch, data)) = framing.decode(&m) else { continue };
            match ch {
                STDIN => {
                    let Some(w) = stdin.as_ref() else { continue };
                    let data = if streams.tty {
                        // The terminal echoes what is typed and hands CR to the program as NL.
                        let _ = echo.send(Frame::Data(STDOUT, onlcr(&icrnl(&data))));
                        icrnl(&data)
                    } else {
                        data
                    };
                    if !w.write(&data) {
                        stdin = None;
                    }
                }
                CLOSE if framing.close_signal && data.first() == Some(&STDIN) => {
                    drop(stdin.take());
                    let _ = done_tx.send(());
                    // Keep reading until the client closes: resize messages may still come.
                    while let Some(Ok(m)) = ws_rx.next().await {
                        if matches!(m, Message::Close(_)) {
                            break;
                        }
                    }
                    let _ = gone_tx.send(true);
                    return;
                }
                _ => {}
            }
        }
        drop(stdin);
        let _ = done_tx.send(());
        let _ = gone_tx.send(true);
    });
    Session {
        out: Sender { tx },
        input_done,
        gone,
        framing,
        writer,
        reader,
    }
}

fn icrnl(d: &[u8]) -> Vec<u8> {
    d.iter().map(|b| if *b == b'\r' { b'\n' } else { *b }).collect()
}

/// How a command ended, for the error channel.
#[derive(Debug)]
pub enum Outcome {
    /// Exited with this code.
    Exited(i32),
    /// Ended without an exit code to report (an attach whose container stopped).
    Done,
    /// Could not run; the message.
    Failed(String),
}

impl Session {
    /// A signal that turns true once the client's websocket is closed or broken.
    pub fn gone(&self) -> watch::Receiver<bool> {
        self.gone.clone()
    }

    /// Writes the outcome on the error channel and closes the websocket normally (client-go
    /// takes a close without a status code, 1005, for a broken stream).
    pub async fn finish(self, outcome: Outcome, argv: &[String]) {
        let Session {
            out,
            writer,
            reader,
            framing,
            ..
        } = self;
        let msg = match (&outcome, framing.status_json) {
            (Outcome::Exited(0) | Outcome::Done, true) => Some(json!({"metadata": {}, "status": "Success"}).to_string()),
            (Outcome::Exited(0) | Outcome::Done, false) => None,
            (Outcome::Exited(code), true) => Some(exit_status(*code, argv).to_string()),
            (Outcome::Exited(code), false) => Some(exit_message(*code, argv)),
            (Outcome::Failed(m), true) => Some(
                json!({"metadata": {}, "status": "Failure", "message": m, "reason": "InternalError", "details": {"causes": [{"message": m}]}, "code": 500})
                    .to_string(),
            ),
            (Outcome::Failed(m), false) => Some(m.clone()),
        };
        if let Some(m) = msg {
            let _ = out.tx.send(Frame::Data(ERROR, m.into_bytes()));
        }
        let _ = out.tx.send(Frame::End);
        drop(out);
        if let Ok(mut ws) = writer.await {
            let _ = ws
                .send(Message::Close(Some(CloseFrame {
                    code: close_code::NORMAL,
                    reason: "".into(),
                })))
                .await;
        }
        // A lingering close: read what the client still sends until its answering close (or
        // a short wait), so no unread frame makes the kernel reset the connection and throw
        // away output the peer had not read yet.
        let mut reader = reader;
        if tokio::time::timeout(LINGER, &mut reader).await.is_err() {
            reader.abort();
        }
    }
}

fn exit_message(code: i32, argv: &[String]) -> String {
    format!("command terminated with non-zero exit code: error executing command {argv:?}, exit code {code}")
}

/// The Status the error channel carries for an exit code (v4 and later).
pub fn exit_status(code: i32, argv: &[String]) -> Value {
    if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": exit_message(code, argv),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })
    }
}

/// A fresh stdin pipe for an exec that asked for one.
pub fn exec_stdin(streams: Streams) -> (Option<StdinWriter>, Option<Stdin>) {
    if streams.stdin {
        let (w, r) = Stdin::pipe();
        (Some(w), Some(r))
    } else {
        (None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_follows_the_protocol() {
        let v5 = Framing::of(Some("v5.channel.k8s.io"));
        assert!(v5.close_signal && v5.status_json && !v5.base64);
        let v4b = Framing::of(Some("v4.base64.channel.k8s.io"));
        assert!(!v4b.close_signal && v4b.status_json && v4b.base64);
        let old = Framing::of(None);
        assert!(!old.status_json && !old.base64);
        let Message::Text(t) = v4b.encode(1, b"hi") else {
            panic!("text")
        };
        assert_eq!(t.as_str(), "1aGk=");
        assert_eq!(v4b.decode(&Message::Text("0aGk=".into())), Some((0, b"hi".to_vec())));
        assert_eq!(v5.decode(&Message::Binary(vec![255, 0].into())), Some((255, vec![0])));
        assert_eq!(v5.decode(&Message::Text("\u{0}hi".into())), Some((0, b"hi".to_vec())));
    }

    #[test]
    fn terminal_translations() {
        assert_eq!(onlcr(b"a\nb\r\n"), b"a\r\nb\r\n");
        assert_eq!(icrnl(b"ls\r"), b"ls\n");
    }

    #[test]
    fn exit_status_matches_the_kubelet() {
        assert_eq!(exit_status(0, &[])["status"], "Success");
        let s = exit_status(3, &["sh".into()]);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
    }
}
