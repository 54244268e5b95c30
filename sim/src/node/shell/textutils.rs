//! busybox `df` and a field-printing `awk`: upstream's memory-backed emptyDir case reads the
//! size of the volume's tmpfs with `df | grep PATH | awk '{print $2}'`.
//!
//! `df` lists the container's root (overlay) and its file mounts: a tmpfs (emptyDir medium
//! Memory on Linux) with the size the kubelet gave it, every other mount with the node's disk,
//! as a bind mount shows the filesystem it lives on. `awk` runs only `{print ...}` programs of
//! fields and literals; any other program fails with a message saying so, rather than printing
//! something a real awk would not.

use crate::node::fs::dir_size;

use super::Interp;
use super::Io;

/// One `df` row.
struct Row {
    device: &'static str,
    blocks_k: u64,
    used_k: u64,
    at: String,
}

/// The rows `df` prints: the root, then the mounts shortest path first.
fn rows(it: &Interp) -> Vec<Row> {
    let disk_k = it.ctx.pod.disk_bytes / 1024;
    let mut out = vec![Row {
        device: "overlay",
        blocks_k: disk_k,
        used_k: it.ctx.fs.rootfs_used().div_ceil(1024),
        at: "/".into(),
    }];
    for m in it.ctx.fs.mount_table() {
        let used_k = dir_size(&m.host).div_ceil(1024);
        out.push(match m.tmpfs_bytes {
            Some(size) => Row {
                device: "tmpfs",
                blocks_k: size / 1024,
                used_k,
                at: m.at.clone(),
            },
            None => Row {
                device: "/dev/vda1",
                blocks_k: disk_k,
                used_k,
                at: m.at.clone(),
            },
        });
    }
    out
}

/// busybox's layout: the device left-aligned in 20 columns, then 1K-blocks, used, available,
/// use percentage (rounded up) and the mount point.
fn format_row(r: &Row) -> String {
    let avail = r.blocks_k.saturating_sub(r.used_k);
    let pct = (r.used_k * 100).div_ceil(r.blocks_k.max(1));
    format!(
        "{:<20} {:>9} {:>9} {:>9} {:>3}% {}",
        r.device, r.blocks_k, r.used_k, avail, pct, r.at
    )
}

/// One term of an awk `print` list.
#[derive(Debug, PartialEq, Eq)]
enum Term {
    Field(usize),
    Text(String),
}

/// Parses `{print}`, `{print $0}` or `{print $2, $3, "x"}`; None for anything else.
fn parse_print(prog: &str) -> Option<Vec<Term>> {
    let body = prog.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
    let rest = body.strip_prefix("print")?.trim();
    if rest.is_empty() {
        return Some(vec![Term::Field(0)]);
    }
    rest.split(',')
        .map(|t| {
            let t = t.trim();
            if let Some(n) = t.strip_prefix('$') {
                n.parse().ok().map(Term::Field)
            } else {
                t.strip_prefix('"')?
                    .strip_suffix('"')
                    .map(|s| Term::Text(s.to_string()))
            }
        })
        .collect()
}

/// `line` printed through `terms`, fields split on `sep` (whitespace runs when None).
fn print_line(terms: &[Term], line: &str, sep: Option<&str>) -> String {
    let fields: Vec<&str> = match sep {
        Some(s) => line.split(s).collect(),
        None => line.split_whitespace().collect(),
    };
    terms
        .iter()
        .map(|t| match t {
            Term::Field(0) => line.to_string(),
            Term::Field(n) => fields.get(n - 1).copied().unwrap_or_default().to_string(),
            Term::Text(s) => s.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Interp {
    /// busybox `df` (sizes in 1K blocks; `-h`/`-k`/`-P` are accepted and print the same).
    pub(super) fn df(&self, args: &[String], io: &Io) -> i32 {
        let wanted: Vec<String> = args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .map(|a| self.abs(a))
            .collect();
        self.line(io, "Filesystem           1K-blocks      Used Available Use% Mounted on");
        let all = rows(self);
        for r in &all {
            let shown = wanted.is_empty()
                || wanted.iter().any(|w| {
                    // A path argument shows the mount it lives on (the longest prefix).
                    all.iter()
                        .filter(|o| o.at == "/" || w == &o.at || w.starts_with(&format!("{}/", o.at)))
                        .max_by_key(|o| o.at.len())
                        .is_some_and(|o| o.at == r.at)
                });
            if shown {
                self.line(io, &format_row(r));
            }
        }
        0
    }

    /// `awk [-F SEP] '{print ...}' [FILE...]`.
    pub(super) async fn awk(&self, args: &[String], io: &Io) -> i32 {
        let mut sep = None;
        let mut rest = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "-F" {
                sep = it.next().cloned();
            } else if let Some(s) = a.strip_prefix("-F") {
                sep = Some(s.to_string());
            } else {
                rest.push(a.clone());
            }
        }
        let Some((prog, files)) = rest.split_first() else {
            self.err(io, "Usage: awk [OPTIONS] [AWK_PROGRAM] [FILE]...");
            return 1;
        };
        let Some(terms) = parse_print(prog) else {
            self.err(
                io,
                &format!("awk: the simulated busybox runs only '{{print ...}}' programs, not {prog:?}"),
            );
            return 2;
        };
        let text = if files.is_empty() {
            String::from_utf8_lossy(&io.stdin.read_all().await).to_string()
        } else {
            let mut all = String::new();
            for f in files {
                match self.ctx.fs.read(&self.abs(f)) {
                    Ok(b) => all.push_str(&String::from_utf8_lossy(&b)),
                    Err(_) => {
                        self.err(io, &format!("awk: {f}: No such file or directory"));
                        return 2;
                    }
                }
            }
            all
        };
        for line in text.lines() {
            self.line(io, &print_line(&terms, line, sep.as_deref()));
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};
    use crate::node::programs::{self, Stdin};
    use crossconf_model::os::Os;

    #[tokio::test]
    async fn df_lists_the_root_and_mounts_and_awk_picks_a_column() {
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 120);
        let script = "df; df | grep /mnt/rw | awk '{print $6}'; echo a b | awk -F' ' '{print $2, \"!\"}'";
        let code = programs::run(c, vec!["sh".into(), "-c".into(), script.into()], None).await;
        let shown = text(&out);
        assert_eq!(code, 0, "{shown}");
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines[0].starts_with("Filesystem           1K-blocks"), "{shown}");
        assert!(lines[1].starts_with("overlay") && lines[1].ends_with("% /"), "{shown}");
        assert!(lines.iter().any(|l| l.ends_with(" /mnt/rw")), "{shown}");
        assert_eq!(&lines[lines.len() - 2..], ["/mnt/rw", "b !"], "{shown}");
        let (c, out, _d) = ctx(Os::Linux, AGNHOST, 121);
        let code = programs::run(
            c,
            vec!["awk".into(), "NR==1".into()],
            Some(Stdin::bytes(b"x\n".to_vec())),
        )
        .await;
        assert_eq!(code, 2, "{}", text(&out));
    }

    #[test]
    fn print_programs_parse_and_others_do_not() {
        assert_eq!(parse_print("{print $2}"), Some(vec![Term::Field(2)]));
        assert_eq!(parse_print("{ print }"), Some(vec![Term::Field(0)]));
        assert_eq!(
            parse_print("{print $1, \"x\"}"),
            Some(vec![Term::Field(1), Term::Text("x".into())])
        );
        assert_eq!(parse_print("NR==1 {print $2}"), None);
        assert_eq!(parse_print("{sum += $2}"), None);
    }

    #[test]
    fn fields_split_on_whitespace_runs_or_the_separator() {
        let row = format_row(&Row {
            device: "tmpfs",
            blocks_k: 10240,
            used_k: 0,
            at: "/usr/share/volumeshare".into(),
        });
        assert_eq!(
            row,
            "tmpfs                    10240         0     10240   0% /usr/share/volumeshare"
        );
        assert_eq!(print_line(&[Term::Field(2)], &row, None), "10240");
        assert_eq!(print_line(&[Term::Field(2)], "a:b:c", Some(":")), "b");
        assert_eq!(print_line(&[Term::Field(9)], "a b", None), "");
    }
}
