use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use cachelab_load::args::Args;
use cachelab_load::config::Config;
use cachelab_load::runner::RunResult;
use cachelab_load::{memtier, report, runner};
use clap::Parser;

/// The options were wrong: nothing was run.
const EXIT_USAGE: u8 = 2;
/// The run could not be made (no connection, nothing answered) or its output not written.
const EXIT_FAILED: u8 = 1;
/// The pause between two runs of `--run-count`, memtier's ("let connections settle").
const PAUSE_BETWEEN_RUNS: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => match memtier::refusal(&e) {
            Some(line) => {
                eprintln!("cachelab-load: {line}");
                return ExitCode::from(EXIT_USAGE);
            }
            None => e.exit(),
        },
    };
    if args.workload.as_deref() == Some("list") {
        print!("{}", cachelab_load::presets::list());
        return ExitCode::SUCCESS;
    }
    let config = match Config::try_from(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("cachelab-load: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // A --start-at already past is refused before connecting (and once more after).
    if let Some(at) = config.start_at_unix_ms {
        if let Err(e) = cachelab_load::start::wait_for(at, runner::realtime_ns() / 1_000_000) {
            eprintln!("cachelab-load: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    match run(&args, &config) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cachelab-load: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run(args: &Args, config: &Config) -> anyhow::Result<ExitCode> {
    let mut results: Vec<RunResult> = Vec::with_capacity(config.run_count as usize);
    for i in 1..=config.run_count {
        if i > 1 {
            std::thread::sleep(PAUSE_BETWEEN_RUNS);
        }
        let result = match runner::run(config) {
            Ok(result) => result,
            Err(e) if config.run_count > 1 => {
                return Err(anyhow::Error::from(e).context(format!("run {i}")))
            }
            Err(e) => return Err(e.into()),
        };
        results.push(result);
    }
    let measured: Vec<report::Measured> = results
        .iter()
        .map(|r| report::Measured {
            recorder: &r.recorder,
            started_unix_ms: r.started_unix_ms,
            start_late_us: r.start_late_us,
            duration_ns: r.duration_ns,
        })
        .collect();
    let report = report::build_runs(config, &measured);
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
        for run in &report.runs {
            let path = format!("{}_FULL_RUN_{}.txt", prefix.display(), run.index);
            std::fs::write(&path, report::hdr_log(run))
                .with_context(|| format!("cannot write {path}"))?;
        }
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
    if let Some(silent) = report.runs.iter().find(|r| r.totals.completed == 0) {
        let which = if report.runs.len() > 1 {
            format!(" in run {}", silent.index)
        } else {
            String::new()
        };
        eprintln!("cachelab-load: no request was answered{which}: the run could not be made");
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}
