//! SPDY/3.1 framing, only as far as Kubernetes' streaming protocols use it (port-forward over
//! an `Upgrade: SPDY/3.1` connection, and tunnelled inside websocket messages by kubectl):
//! SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE and DATA.
//!
//! Name/value header blocks are zlib streams primed with the SPDY/3 [`dictionary`], one stream
//! per direction for the whole connection, each block ended with a sync flush (as Go's
//! `spdystream` framer writes and reads them). No Rust crate implements SPDY, so this is a
//! small codec of our own over `flate2`'s zlib (which can set a preset dictionary).

pub mod dictionary;

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// FLAG_FIN on SYN_STREAM, SYN_REPLY, HEADERS and DATA: the sender's half is closed.
pub const FLAG_FIN: u8 = 0x01;

/// RST_STREAM status: PROTOCOL_ERROR.
pub const RST_PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status: CANCEL.
pub const RST_CANCEL: u32 = 5;

/// A header block: lower-case names and their values, in order.
pub type Headers = Vec<(String, String)>;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a stream.
    SynStream {
        /// The stream id (odd from the client).
        stream: u32,
        /// FLAG_FIN / FLAG_UNIDIRECTIONAL.
        flags: u8,
        /// Its headers.
        headers: Headers,
    },
    /// Accepts a stream.
    SynReply {
        /// The stream id.
        stream: u32,
        /// FLAG_FIN.
        flags: u8,
        /// Its headers.
        headers: Headers,
    },
    /// Ends a stream abnormally.
    RstStream {
        /// The stream id.
        stream: u32,
        /// The status code.
        status: u32,
    },
    /// Connection settings (read and ignored: nothing here depends on them).
    Settings,
    /// A ping, answered with the same id.
    Ping(u32),
    /// The peer ends the session.
    GoAway {
        /// The last stream the sender processed.
        last_good: u32,
    },
    /// More headers on a stream.
    Headers {
        /// The stream id.
        stream: u32,
        /// FLAG_FIN.
        flags: u8,
    },
    /// A flow-control window grew.
    WindowUpdate {
        /// The stream id (0: the session).
        stream: u32,
        /// By how much.
        delta: u32,
    },
    /// Stream data.
    Data {
        /// The stream id.
        stream: u32,
        /// FLAG_FIN.
        flags: u8,
        /// The payload.
        data: Vec<u8>,
    },
}

/// Errors of the SPDY codec.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    /// A frame that cannot be read.
    #[error("malformed SPDY frame: {0}")]
    Malformed(&'static str),
    /// The peer speaks another SPDY version.
    #[error("unsupported SPDY version {0}")]
    Version(u16),
    /// The header block did not inflate.
    #[error("SPDY header block: {0}")]
    Zlib(String),
}

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// The largest frame accepted (the 24-bit length field's range is 16 MiB; Go's framer caps
/// header blocks far lower).
const MAX_FRAME: usize = 1 << 24;

/// Frame reader and writer for one connection, holding both zlib streams.
pub struct Codec {
    deflate: Compress,
    inflate: Decompress,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spdy::Codec")
    }
}

impl Default for Codec {
    fn default() -> Self {
        Codec::new()
    }
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl Codec {
    /// A codec at the start of a connection.
    pub fn new() -> Codec {
        let mut deflate = Compress::new(Compression::default(), true);
        // Priming the compressor makes its zlib header carry the dictionary's id (FDICT), as
        // the peer's reader requires.
        deflate
            .set_dictionary(dictionary::DICTIONARY)
            .expect("a fresh zlib stream takes a dictionary");
        Codec {
            deflate,
            inflate: Decompress::new(true),
        }
    }

    fn compress(&mut self, block: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(block.len() + 64);
        let mut input = block;
        loop {
            let before = self.deflate.total_in();
            let status = self.deflate.compress_vec(input, &mut out, FlushCompress::Sync);
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            // Done once all input is taken and the flush fit (spare room left in `out`).
            if status.is_err() || (input.is_empty() && out.len() < out.capacity()) {
                break;
            }
            out.reserve(out.capacity().max(64));
        }
        out
    }

    fn decompress(&mut self, mut input: &[u8]) -> Result<Vec<u8>, SpdyError> {
        let mut out = Vec::with_capacity(input.len() * 4 + 256);
        loop {
            let before = self.inflate.total_in();
            let r = self.inflate.decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = usize::try_from(self.inflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            match r {
                Ok(Status::Ok | Status::BufError) => {
                    if input.is_empty() && out.len() < out.capacity() {
                        return Ok(out);
                    }
                    out.reserve(out.capacity());
                }
                Ok(Status::StreamEnd) => return Ok(out),
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary::DICTIONARY)
                        .map_err(|e| SpdyError::Zlib(e.to_string()))?;
                }
                Err(e) => return Err(SpdyError::Zlib(e.to_string())),
            }
        }
    }

    fn header_block(&mut self, headers: &Headers) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (k, v) in headers {
            b.extend_from_slice(&(k.len() as u32).to_be_bytes());
            b.extend_from_slice(k.as_bytes());
            b.extend_from_slice(&(v.len() as u32).to_be_bytes());
            b.extend_from_slice(v.as_bytes());
        }
        self.compress(&b)
    }

    fn parse_headers(&mut self, compressed: &[u8]) -> Result<Headers, SpdyError> {
        let b = self.decompress(compressed)?;
        let bad = SpdyError::Malformed("header block");
        if b.len() < 4 {
            return Err(bad);
        }
        let n = u32_at(&b, 0) as usize;
        let mut i = 4;
        let mut out = Vec::with_capacity(n.min(64));
        let field = |i: &mut usize| -> Option<String> {
            let len = u32_at(b.get(*i..*i + 4)?, 0) as usize;
            let s = b.get(*i + 4..*i + 4 + len)?;
            *i += 4 + len;
            Some(String::from_utf8_lossy(s).into_owned())
        };
        for _ in 0..n {
            let k = field(&mut i).ok_or(SpdyError::Malformed("header name"))?;
            let v = field(&mut i).ok_or(SpdyError::Malformed("header value"))?;
            out.push((k.to_ascii_lowercase(), v));
        }
        Ok(out)
    }

    /// The bytes of a frame.
    pub fn encode(&mut self, f: &Frame) -> Vec<u8> {
        let control = |kind: u16, flags: u8, body: &[u8]| {
            let mut v = Vec::with_capacity(8 + body.len());
            v.extend_from_slice(&(0x8003u16).to_be_bytes());
            v.extend_from_slice(&kind.to_be_bytes());
            v.push(flags);
            v.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
            v.extend_from_slice(body);
            v
        };
        match f {
            Frame::SynStream { stream, flags, headers } => {
                let mut body = Vec::new();
                body.extend_from_slice(&stream.to_be_bytes());
                body.extend_from_slice(&0u32.to_be_bytes());
                body.extend_from_slice(&[0, 0]);
                body.extend_from_slice(&self.header_block(headers));
                control(SYN_STREAM, *flags, &body)
            }
            Frame::SynReply { stream, flags, headers } => {
                let mut body = stream.to_be_bytes().to_vec();
                body.extend_from_slice(&self.header_block(headers));
                control(SYN_REPLY, *flags, &body)
            }
            Frame::RstStream { stream, status } => {
                let mut body = stream.to_be_bytes().to_vec();
                body.extend_from_slice(&status.to_be_bytes());
                control(RST_STREAM, 0, &body)
            }
            Frame::Settings => control(SETTINGS, 0, &0u32.to_be_bytes()),
            Frame::Ping(id) => control(PING, 0, &id.to_be_bytes()),
            Frame::GoAway { last_good } => {
                let mut body = last_good.to_be_bytes().to_vec();
                body.extend_from_slice(&0u32.to_be_bytes());
                control(GOAWAY, 0, &body)
            }
            Frame::Headers { stream, flags } => {
                let mut body = stream.to_be_bytes().to_vec();
                body.extend_from_slice(&self.header_block(&Vec::new()));
                control(HEADERS, *flags, &body)
            }
            Frame::WindowUpdate { stream, delta } => {
                let mut body = stream.to_be_bytes().to_vec();
                body.extend_from_slice(&delta.to_be_bytes());
                control(WINDOW_UPDATE, 0, &body)
            }
            Frame::Data { stream, flags, data } => {
                let mut v = Vec::with_capacity(8 + data.len());
                v.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
                v.push(*flags);
                v.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
                v.extend_from_slice(data);
                v
            }
        }
    }

    /// Takes one whole frame off the front of `buf`; `None` until one has arrived. Control
    /// frames of kinds SPDY/3.1 no longer uses (NOOP, CREDENTIAL) are skipped.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, SpdyError> {
        loop {
            if buf.len() < 8 {
                return Ok(None);
            }
            let len = (u32_at(buf, 4) & 0x00ff_ffff) as usize;
            if len > MAX_FRAME {
                return Err(SpdyError::Malformed("frame too large"));
            }
            if buf.len() < 8 + len {
                return Ok(None);
            }
            let head = buf.split_to(8);
            let body = buf.split_to(len);
            let flags = head[4];
            if head[0] & 0x80 == 0 {
                return Ok(Some(Frame::Data {
                    stream: u32_at(&head, 0) & 0x7fff_ffff,
                    flags,
                    data: body.to_vec(),
                }));
            }
            let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
            if version != 3 {
                return Err(SpdyError::Version(version));
            }
            let kind = u16::from_be_bytes([head[2], head[3]]);
            let need = |n: usize| {
                if body.len() < n {
                    Err(SpdyError::Malformed("short control frame"))
                } else {
                    Ok(())
                }
            };
            let stream_id = |b: &BytesMut| u32_at(b, 0) & 0x7fff_ffff;
            let frame = match kind {
                SYN_STREAM => {
                    need(10)?;
                    let headers = self.parse_headers(&body[10..])?;
                    Frame::SynStream {
                        stream: stream_id(&body),
                        flags,
                        headers,
                    }
                }
                SYN_REPLY => {
                    need(4)?;
                    let headers = self.parse_headers(&body[4..])?;
                    Frame::SynReply {
                        stream: stream_id(&body),
                        flags,
                        headers,
                    }
                }
                RST_STREAM => {
                    need(8)?;
                    Frame::RstStream {
                        stream: stream_id(&body),
                        status: u32_at(&body, 4),
                    }
                }
                SETTINGS => Frame::Settings,
                PING => {
                    need(4)?;
                    Frame::Ping(u32_at(&body, 0))
                }
                GOAWAY => {
                    need(4)?;
                    Frame::GoAway {
                        last_good: stream_id(&body),
                    }
                }
                HEADERS => {
                    need(4)?;
                    // Inflated to keep the zlib stream in step, then dropped: nothing here
                    // reads trailing headers.
                    self.parse_headers(&body[4..])?;
                    Frame::Headers {
                        stream: stream_id(&body),
                        flags,
                    }
                }
                WINDOW_UPDATE => {
                    need(8)?;
                    Frame::WindowUpdate {
                        stream: stream_id(&body),
                        delta: u32_at(&body, 4) & 0x7fff_ffff,
                    }
                }
                _ => continue,
            };
            let mut rest = body;
            rest.advance(rest.len());
            return Ok(Some(frame));
        }
    }
}

/// A header's value.
pub fn header<'a>(h: &'a Headers, name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frames: &[Frame]) {
        let (mut tx, mut rx) = (Codec::new(), Codec::new());
        let mut buf = BytesMut::new();
        for f in frames {
            buf.extend_from_slice(&tx.encode(f));
        }
        // Fed a byte at a time: frames only come out whole.
        let all = buf.split();
        let mut got = Vec::new();
        for b in all.iter() {
            buf.extend_from_slice(&[*b]);
            while let Some(f) = rx.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
    }

    #[test]
    fn frames_survive_a_round_trip() {
        let h = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        round_trip(&[
            Frame::SynStream {
                stream: 1,
                flags: 0,
                headers: h(&[("streamtype", "error"), ("port", "80"), ("requestid", "0")]),
            },
            Frame::SynStream {
                stream: 3,
                flags: 0,
                headers: h(&[("streamtype", "data"), ("port", "80"), ("requestid", "0")]),
            },
            Frame::SynReply {
                stream: 1,
                flags: 0,
                headers: vec![],
            },
            Frame::Data {
                stream: 3,
                flags: FLAG_FIN,
                data: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            },
            Frame::Ping(1),
            Frame::WindowUpdate { stream: 3, delta: 100 },
            Frame::RstStream {
                stream: 3,
                status: RST_CANCEL,
            },
            Frame::GoAway { last_good: 3 },
        ]);
    }

    #[test]
    fn header_blocks_are_zlib_with_the_spdy_dictionary() {
        let mut c = Codec::new();
        let bytes = c.encode(&Frame::SynReply {
            stream: 1,
            flags: 0,
            headers: vec![],
        });
        // After the 12 bytes of frame head and stream id: a zlib header with FDICT set and the
        // dictionary's Adler-32.
        let z = &bytes[12..];
        assert_eq!(z[0] & 0x0f, 8, "deflate");
        assert_ne!(z[1] & 0x20, 0, "FDICT");
        assert_eq!(u32_at(z, 2), 0xe3c6_a7c2);
    }

    #[test]
    fn other_versions_are_refused() {
        let mut buf = BytesMut::from(&[0x80, 0x02, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1][..]);
        assert!(matches!(Codec::new().decode(&mut buf), Err(SpdyError::Version(2))));
    }
}
