//! Reading what containers print: the environment dump each OS's shell produces, parsed into
//! a map, and the comparison cases make against it.

use std::collections::BTreeMap;

use crate::framework::CaseError;
use crate::os::Os;

/// The shell script that prints the container's environment, one `NAME=value` per line.
///
/// Linux `env`; Windows `cmd /c set`. This belongs in the OS profile (`Os::print_env`); it lives
/// here until the profile grows that method, and nothing outside this module calls it.
pub fn print_env_script(os: Os) -> &'static str {
    match os {
        Os::Linux => "env",
        Os::Windows => "set",
    }
}

/// Parses `NAME=value` lines (what `env` and `set` print) into a map; other lines are ignored.
/// Windows line ends are accepted.
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_end_matches('\r');
            let (k, v) = line.split_once('=')?;
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// Checks that `env` holds every `(name, value)` of `expected`; the error lists what differs.
///
/// # Errors
/// A message naming each missing or different variable, and `where_` (pod, node).
pub fn expect_env(env: &BTreeMap<String, String>, expected: &[(&str, &str)], where_: &str) -> Result<(), CaseError> {
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(k, v)| env.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}: expected {v:?}, got {:?}", env.get(*k)))
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(CaseError::failed(format!(
            "environment of {where_} is wrong: {} (saw {} variables)",
            wrong.join("; "),
            env.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_output_parses_on_both_shells() {
        let env = parse_env("PATH=/bin\nCONFIG_DATA_1=value-1\r\nnot a line\nEMPTY=\nA=b=c\n");
        assert_eq!(env["CONFIG_DATA_1"], "value-1");
        assert_eq!(env["EMPTY"], "");
        assert_eq!(env["A"], "b=c");
        assert!(!env.contains_key("not a line"));
        assert!(expect_env(&env, &[("CONFIG_DATA_1", "value-1")], "pod p").is_ok());
        let err = expect_env(&env, &[("CONFIG_DATA_1", "value-2"), ("MISSING", "x")], "pod p").unwrap_err();
        let CaseError::Failed(msg) = err else {
            panic!("not a failure")
        };
        assert!(
            msg.contains("CONFIG_DATA_1: expected \"value-2\", got Some(\"value-1\")"),
            "{msg}"
        );
        assert!(msg.contains("MISSING"), "{msg}");
    }
}
