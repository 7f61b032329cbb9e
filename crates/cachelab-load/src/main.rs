use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use cachelab_load::args::Args;
use cachelab_load::config::Config;
use cachelab_load::{report, runner};
use clap::Parser;

/// The options were wrong: nothing was run.
const EXIT_USAGE: u8 = 2;
/// The run could not be made (no connection, nothing answered) or its output not written.
const EXIT_FAILED: u8 = 1;

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match Config::try_from(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("cachelab-load: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(&args, &config) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cachelab-load: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run(args: &Args, config: &Config) -> anyhow::Result<ExitCode> {
    let result = runner::run(config)?;
    let report = report::build(
        config,
        &result.recorder,
        result.started_unix_ms,
        result.duration_ns,
    );
    let text = report::format_summary(&report);
    match &args.out_file {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut stdout = std::io::stdout();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
    }
    if let Some(path) = &args.json_out_file {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(prefix) = &args.hdr_file_prefix {
        let path = format!("{}_FULL_RUN_1.txt", prefix.display());
        std::fs::write(&path, report::hdr_log(&report))
            .with_context(|| format!("cannot write {path}"))?;
    }
    if let Some(warning) = report::fell_behind_warning(&report) {
        eprint!("{warning}");
    }
    let t = &report.totals;
    if t.errors > 0 || t.connection_errors > 0 {
        eprintln!(
            "cachelab-load: warning: {} errors ({} timeouts) and {} connection errors during the run",
            t.errors, t.timeouts, t.connection_errors
        );
    }
    if t.completed == 0 {
        eprintln!("cachelab-load: no request was answered: the run could not be made");
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}
