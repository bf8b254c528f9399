//! trading-worker against the real gateway and shop-sim over HTTP.
