//! Handing out leases: the in-process wake-up of waiting long-polls ([`notify`]) and the
//! long-poll itself ([`long_poll`]); [`probe`] timestamps the hand-off's steps for the benchmark.

pub mod long_poll;
pub mod notify;
pub mod probe;
