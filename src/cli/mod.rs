//! The command-line front end: parse, build configs, call the library, map to an exit code.
//!
//! Exit codes (DESIGN.md): 0 every selected case passed (skips are fine), 1 a case failed,
//! 2 bad input or an unreachable cluster (one line on stderr, nothing half-written), 130
//! interrupted. Every user-caused error is a [`CliError::Usage`], rendered once with its
//! source chain on one line.

pub mod args;
mod commands;
mod run;
mod sim;

use std::process::ExitCode;

use clap::Parser;

pub use args::Cli;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum CliError {
    /// Bad input or an unreachable cluster: one line, exit 2.
    Usage(String),
    /// Cases failed (exit 1); the summary was already printed.
    CasesFailed,
    /// Interrupted (exit 130).
    Interrupted,
    /// A doctor check failed (exit 1).
    ChecksFailed,
}

impl CliError {
    /// A usage error from any error, its source chain rendered on one line.
    pub fn usage(e: &(dyn std::error::Error + 'static)) -> CliError {
        CliError::Usage(crate::run::render_chain(e))
    }
}

/// Maps a command result to the process exit code.
pub fn exit_code(result: &Result<(), CliError>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(CliError::CasesFailed) | Err(CliError::ChecksFailed) => 1,
        Err(CliError::Usage(_)) => 2,
        Err(CliError::Interrupted) => 130,
    }
}

/// The whole program: `main` calls this and returns its code.
pub fn main_impl() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    return ExitCode::from(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    });
                }
                _ => {
                    // clap's own rendering is several lines with usage; a user (and a CI log)
                    // needs the first, which names the bad flag or value.
                    let rendered = e.render().to_string();
                    let first = rendered
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("invalid arguments");
                    eprintln!("{}", first.trim());
                    return ExitCode::from(2);
                }
            }
        }
    };
    init_tracing(&cli.log);
    crate::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(commands::dispatch(cli.command));
    if let Err(CliError::Usage(line)) = &result {
        eprintln!("error: {line}");
    }
    // Background tasks (the embedded simulator's pods, watches) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    ExitCode::from(exit_code(&result))
}

fn init_tracing(filter: &str) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_contract() {
        assert_eq!(exit_code(&Ok(())), 0);
        assert_eq!(exit_code(&Err(CliError::CasesFailed)), 1);
        assert_eq!(exit_code(&Err(CliError::Usage("x".into()))), 2);
        assert_eq!(exit_code(&Err(CliError::Interrupted)), 130);
    }
}
