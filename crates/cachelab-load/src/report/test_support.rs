//! What the report modules' tests share: a configuration from a command line, and a hit.

use clap::Parser;

use crate::args::Args;
use crate::config::Config;
use crate::workload::Outcome;

pub const S: u64 = 1_000_000_000;

pub fn config(line: &str) -> Config {
    let args =
        Args::try_parse_from(std::iter::once("cachelab-load").chain(line.split_whitespace()))
            .unwrap();
    Config::try_from(&args).unwrap()
}

pub fn hit() -> Outcome {
    Outcome {
        hits: 1,
        misses: 0,
        error: false,
    }
}
