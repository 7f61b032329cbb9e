//! Every option of memtier_benchmark (its `long_options` in memtier_benchmark.cpp), and
//! what cachelab-load does with it: supported, accepted because it would change nothing
//! here, or refused by name in one line. docs/load-generator.md has the same table (a
//! test holds the two together). Pure.

use clap::error::{ContextKind, ContextValue, ErrorKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented with memtier's meaning (differences are in the docs).
    Yes,
    /// Accepted and ignored: it would change nothing here.
    Accepted,
    /// Refused by name.
    No,
}

#[derive(Debug, Clone, Copy)]
pub struct MemtierOption {
    pub long: &'static str,
    pub short: Option<char>,
    pub support: Support,
    /// A value that the option accepts, for options that take one (used by the tests).
    pub sample: Option<&'static str>,
    /// Why a refused option is refused, or what to use instead.
    pub why: &'static str,
}

const fn yes(
    long: &'static str,
    short: Option<char>,
    sample: Option<&'static str>,
) -> MemtierOption {
    MemtierOption {
        long,
        short,
        support: Support::Yes,
        sample,
        why: "",
    }
}

const fn no(long: &'static str, short: Option<char>, why: &'static str) -> MemtierOption {
    MemtierOption {
        long,
        short,
        support: Support::No,
        sample: None,
        why,
    }
}

const fn accepted(long: &'static str) -> MemtierOption {
    MemtierOption {
        long,
        short: None,
        support: Support::Accepted,
        sample: None,
        why: "",
    }
}

const WAIT: &str = "no Redis WAIT";
const COMMANDS: &str = "only SET and GET/multi-GET are sent";
const IMPORT: &str = "no data import or verification";
const STATSD: &str = "no StatsD or Graphite output";

/// memtier_benchmark's options, in the order of its `--help`.
pub const OPTIONS: &[MemtierOption] = &[
    yes("host", Some('h'), Some("127.0.0.1")),
    yes("server", Some('s'), Some("127.0.0.1")),
    yes("port", Some('p'), Some("11211")),
    yes(
        "unix-socket",
        Some('S'),
        Some("/tmp/cachelab-memcached.sock"),
    ),
    yes("ipv4", Some('4'), None),
    yes("ipv6", Some('6'), None),
    yes("protocol", Some('P'), Some("memcache_binary")),
    no("authenticate", Some('a'), "no authentication"),
    no("uri", Some('u'), "give --server and --port"),
    yes("tls", None, None),
    yes("cert", None, Some("/tmp/cachelab-client.pem")),
    yes("key", None, Some("/tmp/cachelab-client.key")),
    yes("cacert", None, Some("/tmp/cachelab-ca.pem")),
    yes("tls-skip-verify", None, None),
    yes("tls-protocols", None, Some("TLSv1.2,TLSv1.3")),
    yes("sni", None, Some("cache.example")),
    yes("run-count", Some('x'), Some("2")),
    no("debug", Some('D'), "no debug output"),
    no("cluster-mode", None, "no Redis Cluster"),
    yes("help", None, None),
    yes("version", Some('v'), None),
    yes("out-file", Some('o'), Some("/dev/null")),
    yes("json-out-file", None, Some("/dev/null")),
    no(
        "client-stats",
        None,
        "the JSON report has the per-second series",
    ),
    yes("hdr-file-prefix", None, Some("/tmp/cachelab-load-hdr")),
    no(
        "show-config",
        None,
        "the JSON report records the configuration",
    ),
    accepted("hide-histogram"),
    yes("print-percentiles", None, Some("50,99,99.9")),
    yes("print-all-runs", None, None),
    no("command-stats-breakdown", None, COMMANDS),
    no("statsd-host", None, STATSD),
    no("statsd-port", None, STATSD),
    no("statsd-prefix", None, STATSD),
    no("statsd-run-label", None, STATSD),
    no("graphite-port", None, STATSD),
    yes("requests", Some('n'), Some("100")),
    no(
        "rate-limiting",
        None,
        "a per-connection cap in closed loop; --rate is an open loop at a total rate",
    ),
    yes("clients", Some('c'), Some("2")),
    yes("threads", Some('t'), Some("1")),
    yes("test-time", None, Some("1")),
    no("clients-start", None, "no client staircase"),
    no("clients-step", None, "no client staircase"),
    no("step-duration", None, "no client staircase"),
    yes("ratio", None, Some("1:10")),
    yes("pipeline", None, Some("2")),
    yes("reconnect-interval", None, Some("100")),
    accepted("reconnect-on-error"),
    no(
        "max-reconnect-attempts",
        None,
        "a broken connection is re-opened until the run ends or --reply-timeout passes",
    ),
    no(
        "reconnect-backoff-factor",
        None,
        "re-connection backs off from 10 ms, doubling to 1 s",
    ),
    yes("connection-timeout", None, Some("5")),
    no(
        "thread-conn-start-min-jitter-micros",
        None,
        "connections open before the clock starts",
    ),
    no(
        "thread-conn-start-max-jitter-micros",
        None,
        "connections open before the clock starts",
    ),
    yes("multi-key-get", None, Some("3")),
    no("select-db", None, "Redis database 0 only"),
    accepted("distinct-client-seed"),
    yes("randomize", None, None),
    no("command", None, COMMANDS),
    no("command-ratio", None, COMMANDS),
    no("command-key-pattern", None, COMMANDS),
    no("monitor-input", None, COMMANDS),
    no("monitor-pattern", None, COMMANDS),
    no("scan-incremental-iteration", None, COMMANDS),
    no("scan-incremental-max-iterations", None, COMMANDS),
    yes("data-size", Some('d'), Some("100")),
    no("data-offset", None, "no SETRANGE/GETRANGE"),
    yes("random-data", Some('R'), None),
    yes("data-size-range", None, Some("10-100")),
    yes("data-size-list", None, Some("32:3,1024:1")),
    yes("data-size-pattern", None, Some("S")),
    yes("expiry-range", None, Some("10-100")),
    no("data-import", None, IMPORT),
    no("data-verify", None, IMPORT),
    no("verify-only", None, IMPORT),
    no("generate-keys", None, IMPORT),
    no("no-expiry", None, IMPORT),
    yes("key-prefix", None, Some("k-")),
    yes("key-minimum", None, Some("1")),
    yes("key-maximum", None, Some("1000")),
    yes("key-pattern", None, Some("G:G")),
    yes("key-stddev", None, Some("100")),
    yes("key-median", None, Some("500")),
    yes("key-zipf-exp", None, Some("0.9")),
    no("wait-ratio", None, WAIT),
    no("num-slaves", None, WAIT),
    no("wait-timeout", None, WAIT),
];

/// The memtier option an argument names (`--tls`, `--select-db=3`, `-S`), if any.
pub fn lookup(arg: &str) -> Option<&'static MemtierOption> {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split_once('=').map_or(long, |(name, _)| name);
        return OPTIONS.iter().find(|o| o.long == name);
    }
    let mut chars = arg.strip_prefix('-')?.chars();
    let short = chars.next()?;
    OPTIONS.iter().find(|o| o.short == Some(short))
}

/// The one line that refuses a memtier option or protocol we do not implement, when
/// that is why the command line failed to parse.
pub fn refusal(error: &clap::Error) -> Option<String> {
    let arg = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.as_str(),
        _ => return None,
    };
    match error.kind() {
        ErrorKind::UnknownArgument => {
            let option = lookup(arg).filter(|o| o.support == Support::No)?;
            Some(format!(
                "{arg}: memtier_benchmark's option is not supported by cachelab-load ({}); docs/load-generator.md lists those that are",
                option.why
            ))
        }
        ErrorKind::InvalidValue if arg.starts_with("--protocol") => {
            match error.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(value)) if value == "resp3" => Some(
                    "--protocol resp3: memtier_benchmark's RESP3 is not supported by cachelab-load (redis/resp2, memcache_text and memcache_binary are)".into(),
                ),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Args;
    use crate::config::Config;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("cachelab-load").chain(args.iter().copied()))
    }

    fn spellings(o: &MemtierOption) -> Vec<Vec<String>> {
        let long = format!("--{}", o.long);
        let mut forms = vec![];
        match o.sample {
            Some(v) => {
                forms.push(vec![format!("{long}={v}")]);
                forms.push(vec![long, v.to_string()]);
                if let Some(s) = o.short {
                    forms.push(vec![format!("-{s}"), v.to_string()]);
                }
            }
            None => {
                forms.push(vec![long]);
                if let Some(s) = o.short {
                    forms.push(vec![format!("-{s}")]);
                }
            }
        }
        forms
    }

    #[test]
    fn every_supported_or_accepted_memtier_option_parses_and_validates() {
        for o in OPTIONS.iter().filter(|o| o.support != Support::No) {
            if o.long == "help" || o.long == "version" {
                continue; // they print and exit
            }
            for form in spellings(o) {
                let mut line: Vec<&str> = form.iter().map(String::as_str).collect();
                match o.long {
                    "data-size-pattern" => line.push("--data-size-range=1-9"),
                    "cert" => line.extend(["--tls", "--key=k.pem"]),
                    "key" => line.extend(["--tls", "--cert=c.pem"]),
                    "cacert" | "tls-skip-verify" | "tls-protocols" | "sni" => line.push("--tls"),
                    _ => {}
                }
                let args = parse(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
                Config::try_from(&args).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            }
        }
    }

    #[test]
    fn every_refused_memtier_option_is_refused_by_name_in_one_line() {
        for o in OPTIONS.iter().filter(|o| o.support == Support::No) {
            let mut forms = vec![
                vec![format!("--{}", o.long)],
                vec![format!("--{}=1", o.long)],
            ];
            if let Some(s) = o.short {
                forms.push(vec![format!("-{s}")]);
                forms.push(vec!["-t".into(), "1".into(), format!("-{s}"), "x".into()]);
            }
            for form in forms {
                let line: Vec<&str> = form.iter().map(String::as_str).collect();
                let error = parse(&line).expect_err(o.long);
                let text = refusal(&error).unwrap_or_else(|| panic!("{line:?}: {error}"));
                let named = match o.short {
                    Some(s) if !line.iter().any(|a| a.starts_with("--")) => format!("-{s}"),
                    _ => format!("--{}", o.long),
                };
                assert!(text.starts_with(&named), "{line:?}: {text}");
                assert!(text.contains("not supported") && !text.contains('\n'));
            }
        }
    }

    #[test]
    fn resp3_is_refused_by_name_and_other_mistakes_are_left_to_clap() {
        let e = parse(&["-P", "resp3"]).unwrap_err();
        assert!(refusal(&e).unwrap().starts_with("--protocol resp3"));
        assert!(refusal(&parse(&["-P", "http"]).unwrap_err()).is_none());
        assert!(refusal(&parse(&["--no-such-option"]).unwrap_err()).is_none());
        assert!(refusal(&parse(&["--threads=x"]).unwrap_err()).is_none());
    }

    #[test]
    fn the_docs_table_lists_every_memtier_option_with_its_support() {
        let docs = include_str!("../../../docs/load-generator.md");
        let section = docs
            .split("## memtier_benchmark's options")
            .nth(1)
            .expect("docs/load-generator.md has a section on memtier's options");
        let rows: Vec<(&str, &str)> = section
            .lines()
            .skip_while(|l| !l.starts_with("| memtier option"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1], cells[2])
            })
            .collect();
        for o in OPTIONS {
            let name = format!("`--{}`", o.long);
            let row = rows
                .iter()
                .find(|(names, _)| names.split(", ").any(|n| n == name))
                .unwrap_or_else(|| panic!("{name} is not in the docs table"));
            let expected = match o.support {
                Support::Yes => "yes",
                Support::Accepted => "accepted",
                Support::No => "no",
            };
            assert!(row.1.starts_with(expected), "{name}: {}", row.1);
        }
        let listed: usize = rows
            .iter()
            .map(|(names, _)| names.split(", ").filter(|n| n.starts_with("`--")).count())
            .sum();
        assert_eq!(
            listed,
            OPTIONS.len(),
            "the docs table lists options memtier does not have"
        );
    }
}
