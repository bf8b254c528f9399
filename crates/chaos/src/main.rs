//! `chaos`: one fault-injection run (see the library docs). Exit 0: every check passed; 1: a
//! violation (the run directory is kept); 2: the harness itself failed.

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let settings = chaos::Settings::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chaos: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match rt.block_on(chaos::run(&settings)) {
        Ok(report) => {
            println!("{}", report.table());
            if report.ok() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("chaos: harness error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
