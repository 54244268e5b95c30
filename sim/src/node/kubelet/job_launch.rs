//! How containerd 1.6 starts the process of a Windows HostProcess container: hcsshim 0.9's
//! job containers, before the bind filter (`internal/jobcontainers` `CreateProcess` and
//! `getApplicationName`). The image is mounted at `C:\C\<container id>\` on the host, a
//! location not known before the container exists, so hcsshim rewrites the command line and
//! working directory itself:
//!
//! - `%CONTAINER_SANDBOX_MOUNT_POINT%` and `$env:CONTAINER_SANDBOX_MOUNT_POINT` in the command
//!   line and the working directory become the mount point (without its trailing `\`);
//! - a working directory that names neither is taken relative to the mount point (drive
//!   letter dropped: `c:\Windows` is `C:\C\<id>\Windows`); none means the mount point;
//! - the executable is searched as `SearchPathW` does, with `.exe` added to a name without an
//!   extension, in the working directory, then the shim's `PATH`, then the system
//!   directories; an unquoted command line is tried one more word at a time (`C:\Program
//!   Files\x.exe`).
//!
//! containerd 1.7 (hcsshim 0.10 with the bind filter) changed this (the image at `C:\hpc\`,
//! the working directory taken as given), which is why upstream's "container command path
//! validation" case runs against 1.6 only.

use regex::Regex;
use std::sync::OnceLock;

/// The environment variable (and the spellings hcsshim replaces) naming the mount point.
const MOUNT_POINT_VAR: &str = "CONTAINER_SANDBOX_MOUNT_POINT";

/// Where the image of container `cid` is mounted on the host (hcsshim 0.9's
/// `sandboxMountFormat`, `C:\C\%s\`).
pub fn mount_point(cid: &str) -> String {
    format!("C:\\C\\{cid}\\")
}

/// The `PATH` of the containerd shim process on a Windows node, which hcsshim 0.9 searches
/// (not the container's `PATH`): the system's defaults and Windows PowerShell.
pub const HOST_PATH: &str = "C:\\Windows\\system32;C:\\Windows;C:\\Windows\\System32\\Wbem;\
C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\;C:\\Program Files\\containerd";

/// `GetSystemDirectory`, `GetWindowsDirectory\System` and `GetWindowsDirectory`, searched last.
const SYSTEM_PATHS: &[&str] = &["C:\\Windows\\system32", "C:\\Windows\\System", "C:\\Windows"];

/// The process hcsshim starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The arguments, the first one the full path of the executable found.
    pub argv: Vec<String>,
    /// The process's working directory (a Windows path).
    pub cwd: String,
}

/// Resolves the process of a HostProcess container whose command is `argv` (command and args
/// as the kubelet passes them) and working directory `working_dir`, on a node where the image
/// is mounted at `mount_point`. `stat` says whether a host path exists and is a directory.
/// `expand` is false for a runtime that leaves the mount-point variable alone (the
/// `hostprocess-mountpoint-unexpanded` fault).
///
/// # Errors
/// The runtime's message when no executable is found or the working directory does not exist.
pub fn resolve(
    argv: &[String],
    working_dir: Option<&str>,
    mount_point: &str,
    expand: bool,
    stat: impl Fn(&str) -> Option<bool>,
) -> Result<Launch, String> {
    let original = argv.iter().map(|a| escape_arg(a)).collect::<Vec<_>>().join(" ");
    let replace = |s: &str| -> (String, bool) {
        if !expand {
            return (s.to_string(), false);
        }
        let bare = mount_point.trim_end_matches('\\');
        let out = s
            .replace(&format!("%{MOUNT_POINT_VAR}%"), bare)
            .replace(&format!("$env:{MOUNT_POINT_VAR}"), bare);
        let changed = out != s;
        (out, changed)
    };
    let (command_line, _) = replace(&original);
    let cwd = match working_dir.filter(|w| !w.is_empty()) {
        None => mount_point.to_string(),
        Some(w) => match replace(w) {
            (w, true) => w,
            (w, false) => join(mount_point, remove_drive_letter(&w)),
        },
    };
    let mut search: Vec<String> = vec![cwd.clone()];
    search.extend(HOST_PATH.split(';').filter(|p| !p.is_empty()).map(str::to_string));
    search.extend(SYSTEM_PATHS.iter().map(|p| p.to_string()));
    let not_found = || {
        format!(
            "failed to get application name from commandline {original:?}: failed to find executable {command_line:?}"
        )
    };
    let words = split_args(&command_line);
    let (path, rest) = if let Some(quoted) = command_line.strip_prefix('"') {
        let Some(end) = quoted.find('"') else {
            return Err(format!(
                "failed to get application name from commandline {original:?}: no ending quotation mark found in command"
            ));
        };
        let path = search_path(&quoted[..end], &search, &stat)?.ok_or_else(not_found)?;
        (path, words.get(1..).unwrap_or_default().to_vec())
    } else {
        let mut trial = String::new();
        let mut found = None;
        for (i, w) in words.iter().enumerate() {
            trial.push_str(w);
            if let Ok(Some(p)) = search_path(&trial, &search, &stat) {
                found = Some((p, words[i + 1..].to_vec()));
                break;
            }
            trial.push(' ');
        }
        found.ok_or_else(not_found)?
    };
    // CreateProcess refuses a working directory that does not exist (ERROR_DIRECTORY).
    if stat(&cwd) != Some(true) {
        return Err(format!(
            "failed to start host process: chdir {cwd}: The directory name is invalid."
        ));
    }
    let mut argv = vec![path];
    argv.extend(rest.iter().map(|w| unquote(w)));
    Ok(Launch { argv, cwd })
}

/// `SearchPathW` with extension `.exe`: the first directory of `dirs` holding `name` (or
/// `name.exe` when the name has no extension); an absolute name is looked at directly.
/// A directory found under the name is an error, as hcsshim's `searchPathForExe` says.
fn search_path(name: &str, dirs: &[String], stat: &impl Fn(&str) -> Option<bool>) -> Result<Option<String>, String> {
    let file = name.rsplit(['\\', '/']).next().unwrap_or(name);
    let name = if file.contains('.') && !file.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.exe")
    };
    let absolute = name.starts_with(['\\', '/']) || (name.len() >= 2 && name.as_bytes()[1] == b':');
    let candidates: Vec<String> = if absolute {
        vec![name]
    } else {
        dirs.iter().map(|d| join_raw(d, &name)).collect()
    };
    for c in candidates {
        match stat(&c) {
            Some(false) => return Ok(Some(c)),
            Some(true) => return Err(format!("found directory instead of executable {c:?}")),
            None => {}
        }
    }
    Ok(None)
}

/// `dir` and `name` joined with one separator, as `SearchPathW` concatenates them.
fn join_raw(dir: &str, name: &str) -> String {
    format!("{}\\{name}", dir.trim_end_matches(['\\', '/']))
}

/// Go's `filepath.Join(base, rel)` on Windows: one separator, `.`/`..` and doubled or trailing
/// separators cleaned away.
fn join(base: &str, rel: &str) -> String {
    let joined = format!("{}\\{}", base.trim_end_matches(['\\', '/']), rel);
    let (drive, rest) = match joined.as_bytes() {
        [d, b':', ..] if d.is_ascii_alphabetic() => joined.split_at(2),
        _ => ("", joined.as_str()),
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in rest.split(['\\', '/']) {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("{drive}\\{}", parts.join("\\"))
}

/// hcsshim's `removeDriveLetter`: `C:` is `\`, `C:\x` is `\x`, anything else as given.
fn remove_drive_letter(name: &str) -> &str {
    match name.as_bytes() {
        [_, b':'] => "\\",
        [_, b':', ..] => &name[2..],
        _ => name,
    }
}

/// hcsshim's `splitArgs`: words split on white space, a quoted part kept whole with its quotes.
fn split_args(command_line: &str) -> Vec<String> {
    static WORD: OnceLock<Regex> = OnceLock::new();
    let re = WORD.get_or_init(|| Regex::new(r#"[^\s"]+|"([^"]*)""#).expect("a valid pattern"));
    re.find_iter(command_line).map(|m| m.as_str().to_string()).collect()
}

/// A word of a command line as the program's argument parser reads it: quotes removed.
fn unquote(w: &str) -> String {
    w.replace("\\\"", "\u{0}").replace('"', "").replace('\u{0}', "\"")
}

/// Go's `syscall.EscapeArg`, with which a Windows command line is built from arguments: an
/// argument with a space, tab or quote is quoted, its quotes (and the backslashes before
/// them) escaped; an empty one is `""`.
fn escape_arg(s: &str) -> String {
    if s.is_empty() {
        return "\"\"".into();
    }
    let needs_backslash = s.contains(['"', '\\']);
    let has_space = s.contains([' ', '\t']);
    if !needs_backslash && !has_space {
        return s.to_string();
    }
    if !needs_backslash {
        return format!("\"{s}\"");
    }
    let mut b = String::new();
    if has_space {
        b.push('"');
    }
    let mut slashes = 0;
    for c in s.chars() {
        match c {
            '\\' => slashes += 1,
            '"' => {
                b.extend(std::iter::repeat_n('\\', slashes + 1));
                slashes = 0;
            }
            _ => slashes = 0,
        }
        b.push(c);
    }
    if has_space {
        b.extend(std::iter::repeat_n('\\', slashes));
        b.push('"');
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const MP: &str = "C:\\C\\abc\\";

    /// A host with System32's cmd and PowerShell, and the busybox image's `bin\uname.exe` and
    /// base image `Windows\System32\cmd.exe` at the mount point.
    fn stat(p: &str) -> Option<bool> {
        let n = crate::node::fs::normalise(crossconf_model::os::Os::Windows, p, "/");
        let files = [
            "/windows/system32/cmd.exe",
            "/windows/system32/windowspowershell/v1.0/powershell.exe",
            "/c/abc/bin/uname.exe",
            "/c/abc/windows/system32/cmd.exe",
        ];
        if files.contains(&n.as_str()) {
            return Some(false);
        }
        files.iter().any(|f| f.starts_with(&format!("{n}/"))).then_some(true)
    }

    fn run(cmd: &[&str], wd: Option<&str>) -> Result<Launch, String> {
        let argv: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        resolve(&argv, wd, MP, true, stat)
    }

    #[test]
    fn upstream_command_spellings_resolve_as_on_containerd_1_6() {
        let ok = |cmd: &[&str], wd: Option<&str>, exe: &str, cwd: &str| {
            let l = run(cmd, wd).unwrap_or_else(|e| panic!("{cmd:?} in {wd:?}: {e}"));
            assert_eq!(l.argv[0], exe, "{cmd:?} in {wd:?}");
            assert_eq!(l.cwd, cwd, "{cmd:?} in {wd:?}");
        };
        ok(&["cmd.exe", "/c", "ver"], None, "C:\\Windows\\system32\\cmd.exe", MP);
        // c:\Windows is under the mount point: the base image's own System32.
        ok(
            &["System32\\cmd.exe", "/c", "ver"],
            Some("c:\\Windows\\"),
            "C:\\C\\abc\\Windows\\System32\\cmd.exe",
            "C:\\C\\abc\\Windows",
        );
        ok(
            &["%CONTAINER_SANDBOX_MOUNT_POINT%/bin/uname.exe", "-o"],
            None,
            "C:\\C\\abc/bin/uname.exe",
            MP,
        );
        ok(&["bin/uname.exe", "-o"], None, "C:\\C\\abc\\bin/uname.exe", MP);
        ok(
            &["uname.exe", "-o"],
            Some("%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\"),
            "C:\\C\\abc\\bin\\uname.exe",
            "C:\\C\\abc\\bin\\",
        );
        ok(
            &["powershell", "./uname.exe", "-o"],
            Some("$env:CONTAINER_SANDBOX_MOUNT_POINT/bin"),
            "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
            "C:\\C\\abc/bin",
        );
        let l = run(
            &["powershell", "$env:CONTAINER_SANDBOX_MOUNT_POINT\\bin\\uname.exe", "-o"],
            None,
        )
        .unwrap();
        assert_eq!(l.argv[1..], ["C:\\C\\abc\\bin\\uname.exe", "-o"]);
    }

    #[test]
    fn what_cannot_be_found_fails_with_the_runtime_message() {
        let err = resolve(
            &["%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\uname.exe".to_string()],
            None,
            MP,
            false,
            stat,
        )
        .unwrap_err();
        assert!(err.contains("failed to find executable"), "{err}");
        let err = run(&["uname.exe"], Some("C:\\nowhere")).unwrap_err();
        assert!(err.contains("failed to find executable"), "{err}");
        let err = run(&["cmd.exe"], Some("C:\\nowhere")).unwrap_err();
        assert!(err.contains("The directory name is invalid"), "{err}");
    }

    #[test]
    fn arguments_are_escaped_as_go_does() {
        assert_eq!(escape_arg("plain"), "plain");
        assert_eq!(escape_arg("C:\\x y"), "\"C:\\x y\"");
        assert_eq!(escape_arg("a\"b"), "a\\\"b");
        assert_eq!(escape_arg(""), "\"\"");
        assert_eq!(split_args("\"a b\" c"), ["\"a b\"", "c"]);
        assert_eq!(join("C:\\C\\abc\\", "\\Windows\\"), "C:\\C\\abc\\Windows");
        assert_eq!(remove_drive_letter("c:"), "\\");
    }
}
