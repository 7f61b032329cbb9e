//! The command line's validation, case by case; errors name the option at fault.

use super::*;
use crate::cycle::{GetKeys, Ratio};
use crate::keys::{KeyPattern, KeyRange};
use crate::schedule::Arrival;
use clap::Parser;

fn config(line: &str) -> Result<Config, ConfigError> {
    let args =
        Args::try_parse_from(std::iter::once("cachelab-load").chain(line.split_whitespace()))
            .unwrap();
    Config::try_from(&args)
}

#[test]
fn defaults_are_memtiers() {
    let c = config("").unwrap();
    assert_eq!(
        (c.server.as_str(), c.port, c.threads, c.clients),
        ("localhost", 6379, 4, 50)
    );
    assert_eq!(c.workload.protocol, Protocol::Redis);
    assert_eq!(c.workload.ratio, Ratio { sets: 1, gets: 10 });
    assert_eq!(c.requests, Some(Requests::PerClient(10_000)));
    assert_eq!(c.workload.key_prefix, "memtier-");
    assert_eq!(c.workload.keys, KeyRange::new(0, 10_000_000));
    assert_eq!(c.workload.data_size, DataSize::Fixed(32));
    assert_eq!(c.workload.set_pattern, KeyPattern::Uniform);
    assert!(c.open_loop.is_none());
}

#[test]
fn tls_options_are_gathered_and_need_tls() {
    let c = config(
        "--tls --cacert ca.pem --cert c.pem --key c.key --sni cache.example --tls-protocols TLSv1.3",
    )
    .unwrap();
    let tls = c.tls.unwrap();
    assert_eq!(tls.cacert, Some(PathBuf::from("ca.pem")));
    assert_eq!(
        tls.client_cert,
        Some((PathBuf::from("c.pem"), PathBuf::from("c.key")))
    );
    assert_eq!(tls.sni.as_deref(), Some("cache.example"));
    assert!(tls.protocols.tls13 && !tls.protocols.tls12);
    assert!(!tls.skip_verify);
    assert_eq!(config("").unwrap().tls, None);
    for line in [
        "--cacert ca.pem",
        "--tls-skip-verify",
        "--sni x",
        "--tls-protocols TLSv1.2",
    ] {
        let e = config(line).unwrap_err().to_string();
        assert!(e.ends_with(": needs --tls"), "{line}: {e}");
    }
    let e = config("--tls --tls-protocols TLSv1.1")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--tls-protocols: TLSv1.1 is not offered"),
        "{e}"
    );
    let e = config("--tls --tls-skip-verify --cacert ca.pem").unwrap_err();
    assert!(e
        .to_string()
        .starts_with("--tls-skip-verify: cannot be used with --cacert"));
}

#[test]
fn a_unix_socket_replaces_server_and_port() {
    let c = config("-S /tmp/cachelab-m.sock").unwrap();
    assert_eq!(c.unix_socket, Some(PathBuf::from("/tmp/cachelab-m.sock")));
}

#[test]
fn a_memtier_command_line_parses_unchanged() {
    let c = config(
        "-h 127.0.0.1 -p 11211 -P memcache_text -t 2 -c 8 --test-time=30 --ratio=1:9 \
         --multi-key-get=3 -d 100 -R --key-prefix=k: --key-minimum=1 --key-maximum=1000 \
         --key-pattern=Z:G --key-zipf-exp=0.99 --pipeline=4 --hide-histogram --distinct-client-seed",
    )
    .unwrap();
    assert_eq!(
        (c.server.as_str(), c.port, c.threads, c.clients, c.pipeline),
        ("127.0.0.1", 11211, 2, 8, 4)
    );
    assert_eq!(c.test_time, Some(Duration::from_secs(30)));
    assert_eq!(c.requests, None);
    assert_eq!(c.workload.get_keys, GetKeys::Memtier(3));
    assert_eq!(c.workload.set_pattern, KeyPattern::Zipf { exponent: 0.99 });
    assert_eq!(
        c.workload.get_pattern,
        KeyPattern::Gaussian {
            median: 500.5,
            stddev: 999.0 / 6.0
        }
    );
    assert!(c.workload.random_data);
}

#[test]
fn populate_is_memtiers_allkeys_idiom() {
    let a = config("--populate --key-maximum=99 -t 1 -c 2").unwrap();
    let b = config("--ratio=1:0 --key-pattern=P:P --requests=allkeys --key-maximum=99 -t 1 -c 2")
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.requests, Some(Requests::AllKeys));
}

#[test]
fn open_loop_needs_a_positive_rate_and_no_pipeline() {
    let c = config("--rate 1000 --arrival fixed --test-time 1").unwrap();
    assert_eq!(
        c.open_loop,
        Some(OpenLoop {
            rate: 1000.0,
            arrival: Arrival::Fixed
        })
    );
    assert!(config("--rate 0").is_err());
    assert!(config("--rate 100 --pipeline 2").is_err());
}

#[test]
fn errors_name_the_option_at_fault() {
    for (line, option) in [
        ("--ratio=0:0", "--ratio"),
        ("--ratio=1-10", "--ratio"),
        ("--key-pattern=X:R", "--key-pattern"),
        ("--key-minimum=10 --key-maximum=5", "--key-maximum"),
        ("--data-size-range=9-3", "--data-size-range"),
        ("--requests=some", "--requests"),
        ("--cooldown=1", "--cooldown"),
        ("--test-time=2 --warmup=1 --cooldown=1", "--warmup"),
        (
            "--key-pattern=P:P --key-maximum=3 -t 1 -c 5",
            "--key-pattern",
        ),
        ("--key-pattern=Z:Z --zipf-exponent=0", "--zipf-exponent"),
        ("--key-prefix=a\x01b", "--key-prefix"),
        ("-d 10 --data-size-range=1-5", "--data-size"),
        ("-d 10 --data-size-list=1:1", "--data-size"),
        (
            "--data-size-range=1-5 --data-size-list=1:1",
            "--data-size-list",
        ),
        ("--data-size-list=1:0", "--data-size-list"),
        ("--data-size-pattern=S", "--data-size-pattern"),
        (
            "--data-size-pattern=X --data-size-range=1-2",
            "--data-size-pattern",
        ),
        ("--expiry-range=0-0", "--expiry-range"),
        (
            "-P memcache_text --expiry-range=1-2592001",
            "--expiry-range",
        ),
        ("--multi-key-get=0", "--multi-key-get"),
        ("--multi-key-get=2 --multiget-keys=2", "--multi-key-get"),
        ("--print-percentiles=50,101", "--print-percentiles"),
        ("--run-count=0", "--run-count"),
        ("--reconnect-interval=0", "--reconnect-interval"),
        ("-4 -6", "--ipv4"),
    ] {
        let e = config(line).unwrap_err().to_string();
        assert!(e.starts_with(option), "{line}: {e}");
    }
}

#[test]
fn memtiers_sizes_expiry_runs_and_percentiles_parse() {
    let c = config(
        "-P redis --data-size-list=32:3,1024:1 --expiry-range=10-20 --print-percentiles=50,99.99 \
         --reconnect-interval=100 -x 3 --print-all-runs --reconnect-on-error --connection-timeout=0 -4",
    )
    .unwrap();
    assert_eq!(c.workload.data_size.max(), 1024);
    assert_eq!(
        c.workload.expiry,
        Some(Expiry::Range(ExpiryRange { min: 10, max: 20 }))
    );
    assert_eq!(c.print_percentiles, [50.0, 99.99]);
    assert_eq!(
        (c.reconnect_interval, c.run_count, c.print_all_runs),
        (Some(100), 3, true)
    );
    assert_eq!(c.connect_timeout, NO_CONNECT_TIMEOUT);
    assert_eq!(c.family, AddressFamily::Ipv4);
    let r = config("--data-size-range=10-20 --data-size-pattern=S").unwrap();
    assert_eq!(
        r.workload.data_size,
        DataSize::Range {
            min: 10,
            max: 20,
            pattern: SizePattern::Sequential
        }
    );
    let d = config("").unwrap();
    assert_eq!(d.print_percentiles, [50.0, 99.0, 99.9]);
    assert_eq!((d.run_count, d.reconnect_interval), (1, None));
    assert_eq!(d.workload.get_keys, GetKeys::Every(1));
    assert_eq!(
        config("--multiget-keys=4").unwrap().workload.get_keys,
        GetKeys::Every(4)
    );
}

#[test]
fn distributions_lone_gets_and_lookaside_parse() {
    let c = config(
        "-P memcache_text --data-size-dist fb_value --key-size-dist fb_key --expiry-dist \
         discrete:60=1,99999999=1 --lone-get-share 0.135 --lookaside --rate 1000 --arrival-dist fb_ia",
    )
    .unwrap();
    let w = &c.workload;
    assert!(
        matches!(&w.data_size, DataSize::Dist { spec, max: 1_000_000, .. } if spec == "fb_value")
    );
    assert_eq!(
        w.data_size.max(),
        1_000_000,
        "a heavy tail is clamped to --max-item-size"
    );
    assert_eq!(w.key_size.as_ref().unwrap().spec, "fb_key");
    assert!(matches!(
        &w.expiry,
        Some(Expiry::Dist { max: 2_592_000, .. })
    ));
    assert_eq!((w.lone_get_share, w.lookaside), (0.135, true));
    let arrival = &c.open_loop.unwrap().arrival;
    assert_eq!(arrival.name(), "fb_ia");
    let off =
        config("--lookaside=false --max-item-size 5000 --data-size-dist uniform:min=1,max=9999")
            .unwrap();
    assert!(!off.workload.lookaside);
    assert_eq!(off.workload.data_size.max(), 5000);
    assert_eq!(config("").unwrap().workload.lone_get_share, 0.0);
    let pop = config("--key-dist kvcache_reg_popularity").unwrap();
    assert_eq!(pop.workload.key_dist.unwrap().0, "kvcache_reg_popularity");
}

#[test]
fn sizes_past_the_bound_are_refused_before_anything_is_allocated() {
    for (line, want) in [
        ("-d 99999999999", "--data-size: 99999999999 bytes is over the largest value allowed, 536870912 (512 MiB, Redis's largest string)"),
        ("--data-size-range 1-99999999999", "--data-size-range: 99999999999 bytes is over the largest value allowed, 536870912 (512 MiB, Redis's largest string)"),
        ("--data-size-list 1:1,99999999999:1", "--data-size-list: 99999999999 bytes is over the largest value allowed, 536870912 (512 MiB, Redis's largest string)"),
        ("--data-size-dist fb_value --max-item-size 99999999999", "--max-item-size: 99999999999 must be from 1 to 536870912 (512 MiB)"),
    ] {
        assert_eq!(config(line).unwrap_err().to_string(), want, "{line}");
    }
    assert!(config("-d 536870912").is_ok());
}

#[test]
fn new_options_name_themselves_in_their_errors() {
    for (line, want) in [
        ("--data-size-dist gpareto:loc=0,scale=-1,shape=0.3", "--data-size-dist: gpareto: scale=-1 must be positive"),
        ("--data-size-dist fb_value -d 10", "--data-size-dist: cannot be used with --data-size"),
        ("--max-item-size 10", "--max-item-size: bounds the sizes of --data-size-dist, which is not given"),
        ("--key-size-dist gev:loc=1,scale=1", "--key-size-dist: gev: missing shape="),
        ("--expiry-dist normal:mean=1,sd=0", "--expiry-dist: normal: sd=0 must be positive"),
        ("--expiry-dist 5 --expiry-range 1-2", "--expiry-dist: cannot be used with --expiry-range"),
        ("--arrival-dist fb_ia", "--arrival-dist: needs --rate (an open loop)"),
        ("--rate 10 --arrival-dist fb_ia --arrival fixed", "--arrival-dist: cannot be used with --arrival"),
        ("--rate 10 --arrival-dist pareto:scale=1,shape=1", "--arrival-dist: has no finite mean (a Pareto shape at most 1, or a generalized Pareto or GEV shape of 1 or more): it cannot be rescaled to --rate"),
        ("--rate 10 --arrival-dist normal:mean=-5,sd=1", "--arrival-dist: its mean is -5: gaps need a positive mean to be rescaled to --rate"),
        ("--lone-get-share 1.5", "--lone-get-share: 1.5 must be a share from 0 to 1"),
        ("--key-dist fb_key", "--key-dist: needs a distribution with bounds to map onto the key range (uniform, discrete, a file or a built-in table)"),
        ("--lone-get-share NaN", "--lone-get-share: NaN must be a share from 0 to 1"),
        ("--lone-get-share 0.1 --key-maximum 18446744073709551615", "--lone-get-share: keys never set are numbered above --key-maximum, which leaves no room"),
    ] {
        let e = config(line).unwrap_err().to_string();
        assert_eq!(e, want, "{line}");
    }
}
