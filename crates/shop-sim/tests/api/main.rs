//! shop-sim over real HTTP.

mod env_example;
mod shop;
