//! shop-sim over real HTTP.

mod shop;
