//! `card-polling serve`: thin entry point over the library.

use std::process::ExitCode;

use card_polling::settings::{Cli, Command, InvalidSetting};

fn main() -> ExitCode {
    let cli: Cli = rakuten_cli::start("info", &[]);
    let Command::Serve(settings) = cli.command;
    if let Err((name, reason)) = settings
        .edge
        .check_tls()
        .and_then(|()| settings.check_redis_ca())
        .and_then(|()| settings.check_tokens())
    {
        rakuten_cli::exit_invalid::<Cli>(name, reason);
    }
    if let Some(addr) = settings.listen {
        tracing::warn!(
            listen = %addr,
            "deprecated setting RAKUTEN_POLL_LISTEN / --listen: use RAKUTEN_POLL_HOST and RAKUTEN_POLL_PORT"
        );
    }
    let served = tokio::runtime::Runtime::new()
        .map_err(Into::into)
        .and_then(|rt| rt.block_on(card_polling::serve(settings)));
    // A setting only start-up could check (the admin token held by an account) is a bad setting
    // like any other: exit 2, one line naming it (D-admin-token-is-nobody-elses).
    if let Err(e) = &served
        && let Some(bad) = e.downcast_ref::<InvalidSetting>()
    {
        rakuten_cli::exit_invalid::<Cli>(bad.name, &bad.reason);
    }
    rakuten_cli::exit_on_error(served)
}
