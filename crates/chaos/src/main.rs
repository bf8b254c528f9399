//! `chaos`: one fault-injection run (see the library docs). Exit 0: every check passed; 1: a
//! violation (the run directory is kept); 2: the harness itself failed.

fn main() -> std::process::ExitCode {
    // Logs on stderr: stdout carries the report table.
    let settings: chaos::Settings = rakuten_cli::start_with(
        "warn",
        &chaos::settings::DEPRECATED_ENV,
        rakuten_cli::LogOutput::Stderr,
    );
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
