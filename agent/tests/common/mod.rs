//! Helpers shared by the agent's integration tests.

pub mod scrape;
