
pub mod config;
