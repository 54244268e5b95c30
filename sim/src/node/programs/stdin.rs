//! A process's standard input as a stream that arrives while the process runs.
//!
//! An exec or attach session writes what the client sends on channel 0 into a [`StdinWriter`];
//! the program reads from the matching [`Stdin`] when it wants input, as a real process blocks
//! in `read(0)`. Interactive programs (`sh` without a script, `cat` without files) read as the
//! data comes, so a client sees each answer before it sends the next line; programs that need
//! all their input (`wc`, `tar x`) read to end of file. End of file is every writer dropped: the
//! client closing stdin (v5's close signal on channel 255), the session ending, or — for a
//! container started with `stdinOnce` — the first attach closing it.
//!
//! Handles are shared: a shell and the commands it runs read from one input, so a command
//! consumes what it reads and the shell goes on after it, as with a real file descriptor.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{Mutex, mpsc};

/// The reading end of a standard input.
#[derive(Clone, Debug)]
pub struct Stdin(Arc<Mutex<Inner>>);

#[derive(Debug)]
struct Inner {
    /// Bytes received but not read yet.
    pending: Vec<u8>,
    /// More input, until every writer is gone.
    rx: Option<mpsc::UnboundedReceiver<Bytes>>,
}

/// The writing end of a standard input; dropping every clone is end of file.
#[derive(Clone, Debug)]
pub struct StdinWriter(mpsc::UnboundedSender<Bytes>);

impl StdinWriter {
    /// Sends bytes; false when the reader is gone (the process ended).
    pub fn write(&self, data: &[u8]) -> bool {
        self.0.send(Bytes::copy_from_slice(data)).is_ok()
    }
}

impl Stdin {
    /// An input fed through the returned writer.
    pub fn pipe() -> (StdinWriter, Stdin) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            StdinWriter(tx),
            Stdin(Arc::new(Mutex::new(Inner {
                pending: Vec::new(),
                rx: Some(rx),
            }))),
        )
    }

    /// An input that is `data` and then end of file (a file redirect, a pipeline stage).
    pub fn bytes(data: Vec<u8>) -> Stdin {
        Stdin(Arc::new(Mutex::new(Inner {
            pending: data,
            rx: None,
        })))
    }

    /// An input at end of file from the start (`/dev/null`).
    pub fn empty() -> Stdin {
        Stdin::bytes(Vec::new())
    }

    /// The next bytes available, waiting for some; `None` at end of file.
    pub async fn read_chunk(&self) -> Option<Vec<u8>> {
        let mut g = self.0.lock().await;
        if !g.pending.is_empty() {
            return Some(std::mem::take(&mut g.pending));
        }
        loop {
            let rx = g.rx.as_mut()?;
            match rx.recv().await {
                Some(b) if b.is_empty() => continue,
                Some(b) => return Some(b.to_vec()),
                None => {
                    g.rx = None;
                    return None;
                }
            }
        }
    }

    /// The next line with its `\n`, or what is left before end of file; `None` at end of file.
    pub async fn read_line(&self) -> Option<Vec<u8>> {
        let mut g = self.0.lock().await;
        loop {
            if let Some(i) = g.pending.iter().position(|b| *b == b'\n') {
                let rest = g.pending.split_off(i + 1);
                return Some(std::mem::replace(&mut g.pending, rest));
            }
            let next = match g.rx.as_mut() {
                Some(rx) => rx.recv().await,
                None => None,
            };
            match next {
                Some(b) => g.pending.extend_from_slice(&b),
                None => {
                    g.rx = None;
                    return (!g.pending.is_empty()).then(|| std::mem::take(&mut g.pending));
                }
            }
        }
    }

    /// Everything up to end of file.
    pub async fn read_all(&self) -> Vec<u8> {
        let mut g = self.0.lock().await;
        let mut all = std::mem::take(&mut g.pending);
        if let Some(mut rx) = g.rx.take() {
            while let Some(b) = rx.recv().await {
                all.extend_from_slice(&b);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_arrive_while_the_writer_is_open() {
        let (w, r) = Stdin::pipe();
        assert!(w.write(b"one\ntw"));
        assert_eq!(r.read_line().await.as_deref(), Some(&b"one\n"[..]));
        let reader = r.clone();
        let next = tokio::spawn(async move { reader.read_line().await });
        tokio::task::yield_now().await;
        assert!(!next.is_finished(), "a partial line waits for more input");
        assert!(w.write(b"o\nthree"));
        assert_eq!(next.await.unwrap().as_deref(), Some(&b"two\n"[..]));
        drop(w);
        assert_eq!(r.read_line().await.as_deref(), Some(&b"three"[..]));
        assert_eq!(r.read_line().await, None);
    }

    #[tokio::test]
    async fn read_all_waits_for_end_of_file() {
        let (w, r) = Stdin::pipe();
        w.write(b"a");
        let all = tokio::spawn({
            let r = r.clone();
            async move { r.read_all().await }
        });
        w.write(b"b");
        drop(w);
        assert_eq!(all.await.unwrap(), b"ab");
        assert_eq!(r.read_chunk().await, None);
        assert_eq!(Stdin::bytes(b"x".to_vec()).read_chunk().await, Some(b"x".to_vec()));
        assert_eq!(Stdin::empty().read_all().await, b"");
    }
}
