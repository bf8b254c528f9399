//! Handing out leases: the in-process wake-up of waiting long-polls ([`notify`]) and the
//! long-poll itself ([`long_poll`]).

pub mod long_poll;
pub mod notify;
