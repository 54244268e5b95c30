//! `tar`, as the images carry it: busybox's applet on Linux and bsdtar (`tar.exe` in
//! System32) on Windows. It exists because `kubectl cp` is nothing but `tar` over exec:
//! `tar cf - SRC` streams a file or tree out of the container, `tar -xmf - -C DIR` (with
//! `--no-same-permissions --no-same-owner` under `--no-preserve`) unpacks what kubectl sends.
//!
//! Archives are read and written with the `tar` crate against the container's [`FsView`], so
//! read-only mounts refuse extraction with the OS's own error. Supported: modes `c` and `x`,
//! `f FILE` (`-` is stdio), `-C DIR`, `m`, `o`, `p`, old-style bundles (`cf`) and dashed ones
//! (`-xmf`). Modification times are recorded and, without `m`, restored on files; symlinks,
//! hard links and device entries are reported as not extracted rather than faked.

use std::io::Read;

use super::{Ctx, Stdin, Stream};
use crate::node::fs::{DirEntry, FsError, FsView, normalise};
use crossconf_model::os::Os;

/// What the command line asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Opts {
    /// `c` or `x`.
    mode: Option<char>,
    /// The archive (`-` or absent is stdio).
    file: Option<String>,
    /// `-C DIR`.
    dir: Option<String>,
    /// `--no-same-permissions`: leave modes to the umask.
    no_same_permissions: bool,
    /// `m`: leave modification times at the time of extraction.
    no_mtime: bool,
    /// Operands (members to archive).
    paths: Vec<String>,
}

/// Parses tar's argument forms: a first operand without a dash is a bundle of letters (`cf`),
/// later `-xmf` bundles follow getopt (a letter taking a value takes the rest of the bundle or
/// the next argument).
fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts::default();
    let mut it = args.iter().peekable();
    let mut first = true;
    while let Some(a) = it.next() {
        let bundle = if first && !a.starts_with('-') {
            Some(a.as_str())
        } else if a.starts_with("--") {
            match a.as_str() {
                "--no-same-permissions" => o.no_same_permissions = true,
                "--no-same-owner" | "--same-owner" | "--preserve-permissions" | "--same-permissions" => {}
                _ => return Err(format!("unrecognized option '{a}'")),
            }
            None
        } else if a.len() > 1 && a.starts_with('-') {
            Some(&a[1..])
        } else {
            o.paths.push(a.clone());
            None
        };
        first = false;
        let Some(bundle) = bundle else { continue };
        let old_style = !a.starts_with('-');
        let mut chars = bundle.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                'c' | 'x' => {
                    if o.mode.is_some_and(|m| m != c) {
                        return Err(format!("Can't specify both -{c} and -{}", o.mode.unwrap_or(c)));
                    }
                    o.mode = Some(c);
                }
                'm' => o.no_mtime = true,
                'o' | 'p' => {}
                'f' | 'C' => {
                    let rest = &bundle[i + 1..];
                    let value = if !old_style && !rest.is_empty() {
                        let v = rest.to_string();
                        chars = "".char_indices();
                        v
                    } else {
                        it.next()
                            .cloned()
                            .ok_or_else(|| format!("option requires an argument -- '{c}'"))?
                    };
                    if c == 'f' {
                        o.file = Some(value);
                    } else {
                        o.dir = Some(value);
                    }
                }
                _ => return Err(format!("invalid option -- '{c}'")),
            }
        }
    }
    Ok(o)
}

/// Runs `tar ARGS` in `ctx`; the archive comes from `stdin` for `x` and goes to stdout for `c`
/// unless `f` names a file.
pub async fn run(ctx: Ctx, args: &[String], stdin: Option<Stdin>) -> i32 {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            ctx.out.err_line(&format!("tar: {e}"));
            return 1;
        }
    };
    let _busy = ctx.usage.busy(1);
    match opts.mode {
        Some('c') => create(&ctx, &opts),
        Some('x') => {
            let data = match opts.file.as_deref() {
                None | Some("-") => match stdin {
                    Some(s) => s.read_all().await,
                    None => Vec::new(),
                },
                Some(f) => match ctx.fs.read(&normalise(ctx.pod.os, f, &ctx.cwd)) {
                    Ok(d) => d,
                    Err(e) => {
                        ctx.out.err_line(&open_error(ctx.pod.os, f, &e));
                        return 1;
                    }
                },
            };
            extract(&ctx, &opts, &data)
        }
        _ => {
            ctx.out.err_line(match ctx.pod.os {
                Os::Linux => "tar: need to specify one of -c, -t, -x",
                Os::Windows => "tar: Must specify one of -c, -r, -t, -u, -x",
            });
            1
        }
    }
}

/// The text of an error as the OS's `strerror` gives it.
fn strerror(e: &FsError) -> String {
    match e {
        FsError::NotFound(_) => "No such file or directory".into(),
        FsError::ReadOnly { msg, .. } => (*msg).into(),
        FsError::IsDirectory(_) => "Is a directory".into(),
        FsError::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
            std::io::ErrorKind::AlreadyExists => "File exists".into(),
            _ => source.to_string(),
        },
    }
}

/// The message for a file tar cannot open or create.
fn open_error(os: Os, name: &str, e: &FsError) -> String {
    match os {
        Os::Linux => format!("tar: can't open '{name}': {}", strerror(e)),
        Os::Windows => format!("tar: {name}: Can't create '{name}': {}", strerror(e)),
    }
}

/// The member name for operand `p` with what makes it absolute removed, saying so once as
/// each tar does: busybox names the leading `/`; bsdtar (libarchive's `strip_absolute_path`)
/// strips a drive letter and leading separators, warning about whichever came first.
fn member_name(os: Os, p: &str, warned: &mut bool, ctx: &Ctx) -> String {
    let mut s = p;
    let mut warning = None;
    if os == Os::Windows {
        loop {
            let before = s.len();
            let b = s.as_bytes();
            if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
                s = &s[2..];
                warning.get_or_insert_with(|| "tar: Removing leading drive letter from member names".to_string());
            }
            while let Some(c) = s.chars().next().filter(|c| *c == '/' || *c == '\\') {
                s = &s[1..];
                warning.get_or_insert_with(|| format!("tar: Removing leading '{c}' from member names"));
            }
            if s.len() == before {
                break;
            }
        }
    } else if s.starts_with('/') {
        s = s.trim_start_matches('/');
        warning = Some("tar: removing leading '/' from member names".to_string());
    }
    if let Some(w) = warning
        && !*warned
    {
        *warned = true;
        ctx.out.err_line(&w);
    }
    let name = if os == Os::Windows {
        s.replace('\\', "/")
    } else {
        s.to_string()
    };
    name.trim_end_matches('/').to_string()
}

/// `tar c`: archives every operand (resolved against `-C` and the working directory).
fn create(ctx: &Ctx, opts: &Opts) -> i32 {
    let os = ctx.pod.os;
    let base = opts
        .dir
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), |d| normalise(os, d, &ctx.cwd));
    if ctx.fs.stat(&base) != Some(true) {
        ctx.out.err_line(&chdir_error(os, opts.dir.as_deref().unwrap_or(&base)));
        return 1;
    }
    let mut b = tar::Builder::new(Vec::new());
    let mut failed = false;
    let mut warned = false;
    for p in &opts.paths {
        let abs = normalise(os, p, &base);
        let name = member_name(os, p, &mut warned, ctx);
        let entry = match ctx.fs.stat(&abs) {
            None => None,
            Some(true) => Some(DirEntry {
                name: name.clone(),
                is_dir: true,
                size: 0,
                mode: 0o755,
                link: None,
            }),
            Some(false) => ctx.fs.list(&abs).ok().and_then(|l| l.into_iter().next()),
        };
        let Some(entry) = entry else {
            ctx.out.err_line(&match os {
                Os::Linux => format!("tar: {p}: No such file or directory"),
                Os::Windows => format!("tar: {p}: Couldn't find file: No such file or directory"),
            });
            failed = true;
            continue;
        };
        if let Err(e) = add(&ctx.fs, os, &abs, &name, &entry, &mut b) {
            ctx.out.err_line(&format!("tar: {p}: {}", strerror(&e)));
            failed = true;
        }
    }
    let data = match b.into_inner() {
        Ok(d) => d,
        Err(e) => {
            ctx.out.err_line(&format!("tar: {e}"));
            return 1;
        }
    };
    match opts.file.as_deref() {
        None | Some("-") => ctx.out.write(Stream::Stdout, &data),
        Some(f) => {
            if let Err(e) = ctx.fs.write(&normalise(os, f, &ctx.cwd), &data, false) {
                ctx.out.err_line(&open_error(os, f, &e));
                return 1;
            }
        }
    }
    if failed {
        ctx.out.err_line(match os {
            Os::Linux => "tar: error exit delayed from previous errors",
            Os::Windows => "tar: Error exit delayed from previous errors.",
        });
        return 1;
    }
    0
}

/// The error for a `-C` directory that does not exist.
fn chdir_error(os: Os, dir: &str) -> String {
    match os {
        Os::Linux => format!("tar: can't change directory to '{dir}': No such file or directory"),
        // bsdtar's format string ends in a newline of its own before lafe_errc adds one.
        Os::Windows => format!("tar: could not chdir to '{dir}'\n"),
    }
}

/// A header in the format each tar writes: busybox's GNU-flavoured ustar, bsdtar's ustar.
fn header(os: Os, e: &DirEntry, kind: tar::EntryType, size: u64, mtime: Option<std::time::SystemTime>) -> tar::Header {
    let mut h = match os {
        Os::Linux => tar::Header::new_gnu(),
        Os::Windows => tar::Header::new_ustar(),
    };
    h.set_entry_type(kind);
    h.set_mode(e.mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(
        mtime
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs()),
    );
    h
}

/// Adds `abs` (listed as `e`) under member `name`, recursing into directories in name order.
fn add(fs: &FsView, os: Os, abs: &str, name: &str, e: &DirEntry, b: &mut tar::Builder<Vec<u8>>) -> Result<(), FsError> {
    let io = |source| FsError::Io {
        path: abs.to_string(),
        source,
    };
    if let Some(target) = &e.link {
        let mut h = header(os, e, tar::EntryType::Symlink, 0, fs.modified(abs));
        h.set_mode(0o777);
        return b.append_link(&mut h, name, target).map_err(io);
    }
    if e.is_dir {
        let mut h = header(os, e, tar::EntryType::Directory, 0, fs.modified(abs));
        b.append_data(&mut h, format!("{name}/"), std::io::empty())
            .map_err(io)?;
        for child in fs.list(abs)? {
            let child_abs = format!("{}/{}", abs.trim_end_matches('/'), child.name);
            add(fs, os, &child_abs, &format!("{name}/{}", child.name), &child, b)?;
        }
        return Ok(());
    }
    let data = fs.read(abs)?;
    let mut h = header(os, e, tar::EntryType::Regular, data.len() as u64, fs.modified(abs));
    b.append_data(&mut h, name, data.as_slice()).map_err(io)
}

/// Removes what makes a member name escape the target: busybox strips leading `/` and
/// everything up to a last `../` (saying so once); bsdtar strips leading `/` and refuses
/// names containing `..`.
fn safe_name(os: Os, raw: &str, warned: &mut bool, ctx: &Ctx) -> Option<String> {
    let mut name = raw.replace('\\', "/");
    let stripped = name.trim_start_matches('/').to_string();
    let mut removed = name[..name.len() - stripped.len()].to_string();
    name = stripped;
    let has_dotdot = name.split('/').any(|s| s == "..");
    if has_dotdot {
        if os == Os::Windows {
            ctx.out.err_line(&format!("tar: {raw}: Path contains '..'"));
            return None;
        }
        let cut = if name.starts_with("../") || name == ".." {
            name.rfind("/../").map_or(3.min(name.len()), |i| i + 4)
        } else {
            name.rfind("/../").map_or(name.len(), |i| i + 4)
        };
        removed.push_str(&name[..cut]);
        name = name[cut..].to_string();
    }
    if !removed.is_empty() && !*warned {
        *warned = true;
        ctx.out.err_line(&match os {
            Os::Linux => format!("tar: removing leading '{removed}' from member names"),
            Os::Windows => "tar: Removing leading '/' from member names".to_string(),
        });
    }
    Some(name)
}

/// The parent of a normalised container path (`/` for top-level names).
fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

/// `tar x`: unpacks `data` under `-C` (or the working directory).
fn extract(ctx: &Ctx, opts: &Opts, data: &[u8]) -> i32 {
    let os = ctx.pod.os;
    let base = opts
        .dir
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), |d| normalise(os, d, &ctx.cwd));
    if ctx.fs.stat(&base) != Some(true) {
        ctx.out.err_line(&chdir_error(os, opts.dir.as_deref().unwrap_or(&base)));
        return 1;
    }
    let mut archive = tar::Archive::new(data);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return bad_archive(ctx, &e),
    };
    let mut failed = false;
    let mut warned = false;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => return bad_archive(ctx, &e),
        };
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(name) = safe_name(os, &raw, &mut warned, ctx) else {
            failed = true;
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let dest = normalise(os, &name, &base);
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644);
        let mtime = entry.header().mtime().ok();
        let result = match kind {
            tar::EntryType::Directory => ctx.fs.mkdir(&dest),
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                let mut body = Vec::new();
                match entry.read_to_end(&mut body) {
                    Err(e) => return bad_archive(ctx, &e),
                    Ok(_) => ctx
                        .fs
                        .mkdir(parent(&dest))
                        .and_then(|()| ctx.fs.write(&dest, &body, false)),
                }
            }
            other => {
                ctx.out.err_line(&format!(
                    "tar: {raw}: not extracted: the simulated container file system has no {:?} entries",
                    other
                ));
                failed = true;
                continue;
            }
        };
        let result = result
            .and_then(|()| {
                if os == Os::Linux && !opts.no_same_permissions {
                    ctx.fs.chmod(&dest, mode)
                } else {
                    Ok(())
                }
            })
            .and_then(|()| match mtime {
                Some(secs) if !opts.no_mtime && kind != tar::EntryType::Directory => ctx
                    .fs
                    .set_modified(&dest, std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)),
                _ => Ok(()),
            });
        if let Err(e) = result {
            tracing::debug!(member = %raw, error = %e, "tar: extraction failed");
            ctx.out.err_line(&open_error(os, &name, &e));
            failed = true;
        }
    }
    if failed && os == Os::Windows {
        ctx.out.err_line("tar: Error exit delayed from previous errors.");
    }
    i32::from(failed)
}

/// The error for input that is not a tar archive.
fn bad_archive(ctx: &Ctx, e: &std::io::Error) -> i32 {
    tracing::debug!(error = %e, "tar: unreadable archive");
    ctx.out.err_line(match ctx.pod.os {
        Os::Linux => "tar: invalid tar magic",
        Os::Windows => "tar: Error opening archive: Unrecognized archive format",
    });
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_the_forms_kubectl_uses() {
        let o = parse(&args(&["cf", "-", "/tmp/foo"])).unwrap();
        assert_eq!(
            (o.mode, o.file.as_deref(), o.paths),
            (Some('c'), Some("-"), vec!["/tmp/foo".to_string()])
        );
        let o = parse(&args(&[
            "--no-same-permissions",
            "--no-same-owner",
            "-xmf",
            "-",
            "-C",
            "/tmp",
        ]))
        .unwrap();
        assert_eq!(
            (o.mode, o.file.as_deref(), o.dir.as_deref()),
            (Some('x'), Some("-"), Some("/tmp"))
        );
        assert!(o.no_same_permissions);
        assert_eq!(
            parse(&args(&["-xfarch.tar"])).unwrap().file.as_deref(),
            Some("arch.tar")
        );
        assert!(parse(&args(&["-xq"])).unwrap_err().contains("invalid option -- 'q'"));
        assert!(parse(&args(&["-cx"])).is_err());
    }

    #[tokio::test]
    async fn round_trips_a_tree_through_a_linux_container() {
        let (c, buf, _dir) = ctx(Os::Linux, AGNHOST, 3);
        c.fs.mkdir("/mnt/rw/src/sub").unwrap();
        c.fs.write("/mnt/rw/src/a.txt", b"alpha\n", false).unwrap();
        c.fs.write("/mnt/rw/src/sub/b.bin", &[0, 1, 2, 255], false).unwrap();
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (sink, errs) = (stdout.clone(), buf.clone());
        let out = super::super::Output::new(move |s, d| match s {
            Stream::Stdout => sink.lock().unwrap().extend_from_slice(d),
            Stream::Stderr => errs.lock().unwrap().extend_from_slice(d),
        });
        let code = run(c.with_output(out), &args(&["cf", "-", "/mnt/rw/src"]), None).await;
        assert_eq!(code, 0);
        assert_eq!(text(&buf), "tar: removing leading '/' from member names\n");
        let archive = stdout.lock().unwrap().clone();
        c.fs.mkdir("/mnt/rw/dst").unwrap();
        let code = run(
            c.clone(),
            &args(&["-xmf", "-", "-C", "/mnt/rw/dst"]),
            Some(Stdin::bytes(archive)),
        )
        .await;
        assert_eq!(code, 0, "{}", text(&buf));
        assert_eq!(c.fs.read("/mnt/rw/dst/mnt/rw/src/a.txt").unwrap(), b"alpha\n");
        assert_eq!(c.fs.read("/mnt/rw/dst/mnt/rw/src/sub/b.bin").unwrap(), [0, 1, 2, 255]);
        // Without `m` the archived modification time comes back; with it, extraction time.
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        c.fs.set_modified("/mnt/rw/src/a.txt", old).unwrap();
        let (out, data) = super::super::Output::capture();
        assert_eq!(
            run(c.with_output(out), &args(&["cf", "-", "-C", "/mnt/rw", "src"]), None).await,
            0
        );
        let archive = data.lock().unwrap().clone();
        c.fs.mkdir("/mnt/rw/keep").unwrap();
        let code = run(
            c.clone(),
            &args(&["xf", "-", "-C", "/mnt/rw/keep"]),
            Some(Stdin::bytes(archive)),
        )
        .await;
        assert_eq!(code, 0, "{}", text(&buf));
        assert_eq!(c.fs.modified("/mnt/rw/keep/src/a.txt"), Some(old));
        assert_ne!(c.fs.modified("/mnt/rw/dst/mnt/rw/src/a.txt"), Some(old));
    }

    #[tokio::test]
    async fn reports_missing_files_and_directories_as_busybox_does() {
        let (c, buf, _dir) = ctx(Os::Linux, AGNHOST, 4);
        assert_eq!(run(c.clone(), &args(&["cf", "-", "/nope"]), None).await, 1);
        assert!(text(&buf).contains("tar: /nope: No such file or directory\n"));
        assert!(text(&buf).contains("tar: error exit delayed from previous errors\n"));
        let code = run(c.clone(), &args(&["-xmf", "-", "-C", "/gone"]), Some(Stdin::empty())).await;
        assert_eq!(code, 1);
        assert!(text(&buf).contains("tar: can't change directory to '/gone': No such file or directory"));
    }

    #[tokio::test]
    async fn read_only_mounts_refuse_extraction() {
        let (c, buf, _dir) = ctx(Os::Windows, AGNHOST, 5);
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_ustar();
        h.set_size(2);
        h.set_mode(0o644);
        b.append_data(&mut h, "x.txt", &b"hi"[..]).unwrap();
        let data = b.into_inner().unwrap();
        let code = run(
            c.clone(),
            &args(&["-xmf", "-", "-C", "C:\\mnt\\ro"]),
            Some(Stdin::bytes(data.clone())),
        )
        .await;
        assert_eq!(code, 1);
        assert!(text(&buf).contains("Access is denied."), "{}", text(&buf));
        let code = run(
            c.clone(),
            &args(&["-xmf", "-", "-C", "C:\\mnt\\rw"]),
            Some(Stdin::bytes(data)),
        )
        .await;
        assert_eq!(code, 0);
        assert_eq!(c.fs.read("C:\\mnt\\rw\\x.txt").unwrap(), b"hi");
    }

    #[tokio::test]
    async fn the_retry_pipeline_resumes_at_a_byte_offset() {
        let (c, _buf, _dir) = ctx(Os::Linux, "registry.k8s.io/e2e-test-images/busybox:1.36.1-1", 7);
        c.fs.write("/mnt/rw/f.bin", &[7u8; 2000], false).unwrap();
        let run_sh = |script: &str| {
            let (c, script) = (c.clone(), script.to_string());
            async move {
                let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let sink = stdout.clone();
                let out = super::super::Output::new(move |s, d| {
                    if s == Stream::Stdout {
                        sink.lock().unwrap().extend_from_slice(d);
                    }
                });
                let argv = args(&["sh", "-c", &script]);
                assert_eq!(super::super::run(c.with_output(out), argv, None).await, 0);
                stdout.lock().unwrap().clone()
            }
        };
        // kubectl cp --retries runs `tar cf - SRC | tail -c+N`, N being one past the bytes it has.
        let whole = run_sh("tar cf - /mnt/rw/f.bin").await;
        assert_eq!(whole.len(), 512 + 2048 + 1024, "header, padded body, end blocks");
        assert_eq!(run_sh("tar cf - /mnt/rw/f.bin | tail -c+0").await, whole);
        assert_eq!(run_sh("tar cf - /mnt/rw/f.bin | tail -c+513").await, whole[512..]);
        assert_eq!(run_sh("tar cf - /mnt/rw/f.bin | head -c 512").await, whole[..512]);
    }

    #[test]
    fn unsafe_names_are_stripped_or_refused() {
        let (c, buf, _dir) = ctx(Os::Linux, AGNHOST, 6);
        let mut warned = false;
        assert_eq!(
            safe_name(Os::Linux, "../../etc/x", &mut warned, &c).as_deref(),
            Some("etc/x")
        );
        assert!(text(&buf).contains("removing leading '../../' from member names"));
        assert_eq!(safe_name(Os::Windows, "a/../b", &mut warned, &c), None);
        let (mut w1, mut w2) = (false, false);
        assert_eq!(member_name(Os::Windows, "C:\\tmp\\x", &mut w1, &c), "tmp/x");
        assert_eq!(member_name(Os::Windows, "/tmp/y/", &mut w2, &c), "tmp/y");
        assert!(text(&buf).contains("tar: Removing leading drive letter from member names\n"));
        assert!(text(&buf).contains("tar: Removing leading '/' from member names\n"));
    }
}
