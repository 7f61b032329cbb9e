//! The workload half of the configuration: what each connection sends (operations,
//! keys, sizes, expiry), from the command line; every error names the option at fault.

use cachelab_protocol::limits::MAX_KEY_LEN;

use super::{invalid, ConfigError, Protocol};
use crate::args::{
    Args, ProtocolArg, DEFAULT_DATA_SIZE, DEFAULT_KEY_PATTERN, DEFAULT_RATIO, DEFAULT_ZIPF_EXPONENT,
};
use crate::cycle::{GetKeys, Ratio};
use crate::dist::{self, Dist};
use crate::keys::{KeyPattern, KeyRange};
use crate::keysize::KeySize;
use crate::schedule::Arrival;
use crate::sizes::{
    self, DataSize, Expiry, ExpiryRange, SizePattern, DEFAULT_MAX_ITEM_SIZE, MAX_VALUE_SIZE,
    MEMCACHED_MAX_RELATIVE_EXPTIME,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub protocol: Protocol,
    pub ratio: Ratio,
    pub get_keys: GetKeys,
    pub data_size: DataSize,
    /// Expiry of every SET, if any.
    pub expiry: Option<Expiry>,
    /// Key sizes, if drawn from a distribution (`--key-size-dist`).
    pub key_size: Option<KeySize>,
    /// Share of GET keys asked from keys never set (`--lone-get-share`).
    pub lone_get_share: f64,
    /// A GET that misses is followed by a SET of its key (`--lookaside`); the load
    /// engine reads it.
    pub lookaside: bool,
    /// The `--workload` preset the options started from, if any.
    pub preset: Option<String>,
    /// The R pattern's keys drawn from this distribution (`--key-dist`), with its text.
    pub key_dist: Option<(String, Dist)>,
    pub random_data: bool,
    pub key_prefix: String,
    pub keys: KeyRange,
    pub set_pattern: KeyPattern,
    pub get_pattern: KeyPattern,
}

pub fn parse_ratio(text: &str) -> Result<Ratio, ConfigError> {
    let bad = || invalid("ratio", format!("{text:?} is not S:G with whole numbers"));
    let (s, g) = text.split_once(':').ok_or_else(bad)?;
    let ratio = Ratio {
        sets: s.trim().parse().map_err(|_| bad())?,
        gets: g.trim().parse().map_err(|_| bad())?,
    };
    if ratio.sets == 0 && ratio.gets == 0 {
        return Err(invalid("ratio", "0:0 sends nothing"));
    }
    Ok(ratio)
}

/// `-d`, `--data-size-range` with `--data-size-pattern`, `--data-size-list`, or
/// `--data-size-dist`: at most one of them (memtier allows one of its three). No size
/// may pass [`MAX_VALUE_SIZE`].
fn parse_data_size(args: &Args) -> Result<DataSize, ConfigError> {
    let sizes = parse_data_size_options(args)?;
    let (option, largest) = match &sizes {
        DataSize::Fixed(n) => ("data-size", *n),
        DataSize::Range { max, .. } => ("data-size-range", *max),
        DataSize::List(list) => (
            "data-size-list",
            list.iter().map(|w| w.size).max().unwrap_or(0),
        ),
        DataSize::Dist { .. } => return Ok(sizes),
    };
    if largest as u64 > MAX_VALUE_SIZE {
        return Err(invalid(
            option,
            format!("{largest} bytes is over the largest value allowed, {MAX_VALUE_SIZE} (512 MiB, Redis's largest string)"),
        ));
    }
    Ok(sizes)
}

fn parse_data_size_options(args: &Args) -> Result<DataSize, ConfigError> {
    if let Some(spec) = &args.data_size_dist {
        let given = [
            ("data-size", args.data_size.is_some()),
            ("data-size-range", args.data_size_range.is_some()),
            ("data-size-list", args.data_size_list.is_some()),
        ];
        if let Some((other, _)) = given.iter().find(|(_, given)| *given) {
            return Err(invalid(
                "data-size-dist",
                format!("cannot be used with --{other}"),
            ));
        }
        let max = match args.max_item_size {
            None => DEFAULT_MAX_ITEM_SIZE,
            Some(n) if (1..=MAX_VALUE_SIZE).contains(&n) => n,
            Some(n) => {
                return Err(invalid(
                    "max-item-size",
                    format!("{n} must be from 1 to {MAX_VALUE_SIZE} (512 MiB)"),
                ))
            }
        };
        return Ok(DataSize::Dist {
            dist: dist::parse(spec).map_err(|e| invalid("data-size-dist", e.to_string()))?,
            spec: spec.clone(),
            max: max as usize,
        });
    }
    if args.max_item_size.is_some() {
        return Err(invalid(
            "max-item-size",
            "bounds the sizes of --data-size-dist, which is not given",
        ));
    }
    let pattern = match args.data_size_pattern.as_deref() {
        None | Some("R") => SizePattern::Random,
        Some("S") => SizePattern::Sequential,
        Some(other) => {
            return Err(invalid(
                "data-size-pattern",
                format!("{other:?} is not R or S"),
            ))
        }
    };
    if args.data_size_pattern.is_some() && args.data_size_range.is_none() {
        return Err(invalid(
            "data-size-pattern",
            "chooses sizes from --data-size-range, which is not given",
        ));
    }
    match (args.data_size, &args.data_size_range, &args.data_size_list) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(invalid(
            "data-size",
            "cannot be used with --data-size-range or --data-size-list",
        )),
        (_, Some(_), Some(_)) => Err(invalid(
            "data-size-list",
            "cannot be used with --data-size-range",
        )),
        (_, Some(range), None) => {
            let (min, max) =
                sizes::parse_range(range).map_err(|e| invalid("data-size-range", e))?;
            Ok(DataSize::Range {
                min: min as usize,
                max: max as usize,
                pattern,
            })
        }
        (_, None, Some(list)) => Ok(DataSize::List(
            sizes::parse_size_list(list).map_err(|e| invalid("data-size-list", e))?,
        )),
        (size, None, None) => Ok(DataSize::Fixed(size.unwrap_or(DEFAULT_DATA_SIZE))),
    }
}

/// `--multiget-keys` (ours) or `--multi-key-get` (memtier's), not both.
fn parse_get_keys(args: &Args) -> Result<GetKeys, ConfigError> {
    match args.multi_key_get {
        None => Ok(GetKeys::Every(args.multiget_keys.max(1))),
        Some(_) if args.multiget_keys > 0 => Err(invalid(
            "multi-key-get",
            "cannot be used with --multiget-keys (memtier's keys counted toward --ratio, or ours: every GET that many keys)",
        )),
        Some(0) => Err(invalid("multi-key-get", "must be at least 1")),
        Some(n) => Ok(GetKeys::Memtier(n)),
    }
}

/// The longest relative expiry a server reads as such: memcached's 30 days (longer is a
/// Unix time to it), or any 32-bit number of seconds for Redis.
fn longest_expiry(protocol: Protocol) -> u32 {
    if protocol == Protocol::Redis {
        u32::MAX
    } else {
        MEMCACHED_MAX_RELATIVE_EXPTIME
    }
}

/// `--expiry-range` or `--expiry-dist`, not both.
fn parse_expiry(args: &Args, protocol: Protocol) -> Result<Option<Expiry>, ConfigError> {
    let longest = longest_expiry(protocol);
    match (&args.expiry_range, &args.expiry_dist) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(invalid("expiry-dist", "cannot be used with --expiry-range")),
        (None, Some(spec)) => Ok(Some(Expiry::Dist {
            dist: dist::parse(spec).map_err(|e| invalid("expiry-dist", e.to_string()))?,
            spec: spec.clone(),
            max: longest,
        })),
        (Some(text), None) => {
            let range = ExpiryRange::parse(text).map_err(|e| invalid("expiry-range", e))?;
            if range.max > longest {
                return Err(invalid(
                    "expiry-range",
                    format!(
                        "memcached reads an expiry above {MEMCACHED_MAX_RELATIVE_EXPTIME} s (30 days) as a Unix time: it would expire at once"
                    ),
                ));
            }
            Ok(Some(Expiry::Range(range)))
        }
    }
}

/// `--arrival-dist`: a distribution with a finite positive mean, which the open loop
/// rescales to its rate.
pub(super) fn arrival_dist(spec: &str) -> Result<Arrival, ConfigError> {
    let dist = dist::parse(spec).map_err(|e| invalid("arrival-dist", e.to_string()))?;
    match dist.mean() {
        Some(mean) if mean > 0.0 && mean.is_finite() => Ok(Arrival::Dist {
            dist,
            spec: spec.into(),
            mean,
        }),
        Some(mean) => Err(invalid(
            "arrival-dist",
            format!("its mean is {mean}: gaps need a positive mean to be rescaled to --rate"),
        )),
        None => Err(invalid(
            "arrival-dist",
            "has no finite mean (a Pareto shape at most 1, or a generalized Pareto or GEV shape of 1 or more): it cannot be rescaled to --rate",
        )),
    }
}

/// `--key-size-dist`.
fn parse_key_size(args: &Args) -> Result<Option<KeySize>, ConfigError> {
    let Some(spec) = &args.key_size_dist else {
        return Ok(None);
    };
    Ok(Some(KeySize {
        dist: dist::parse(spec).map_err(|e| invalid("key-size-dist", e.to_string()))?,
        spec: spec.clone(),
    }))
}

/// `--key-dist`: a distribution of bounded support, mapped onto the key range.
fn parse_key_dist(args: &Args) -> Result<Option<(String, Dist)>, ConfigError> {
    let Some(spec) = &args.key_dist else {
        return Ok(None);
    };
    let dist = dist::parse(spec).map_err(|e| invalid("key-dist", e.to_string()))?;
    let (lo, hi) = dist.support();
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Err(invalid(
            "key-dist",
            "needs a distribution with bounds to map onto the key range (uniform, discrete, a file or a built-in table)",
        ));
    }
    Ok(Some((spec.clone(), dist)))
}

/// `--lone-get-share`: keys never set are numbered above the key range, so the range
/// must leave room and the prefix with 20 digits must fit memcached's key limit.
fn parse_lone_get_share(args: &Args) -> Result<f64, ConfigError> {
    let share = args.lone_get_share.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&share) {
        return Err(invalid(
            "lone-get-share",
            format!("{share} must be a share from 0 to 1"),
        ));
    }
    if share > 0.0 {
        if args.key_maximum > u64::MAX / 2 {
            return Err(invalid(
                "lone-get-share",
                "keys never set are numbered above --key-maximum, which leaves no room",
            ));
        }
        if args.key_prefix.len() + 20 > MAX_KEY_LEN {
            return Err(invalid(
                "lone-get-share",
                format!("--key-prefix plus a 20-digit key number would pass memcached's {MAX_KEY_LEN} bytes"),
            ));
        }
    }
    Ok(share)
}

/// `R`, `G`, `Z`, `S`, `P`, or `SET:GET` with one letter on each side.
fn parse_key_patterns(
    args: &Args,
    range: KeyRange,
) -> Result<(KeyPattern, KeyPattern), ConfigError> {
    let text = args.key_pattern.as_deref().unwrap_or(DEFAULT_KEY_PATTERN);
    let letters: Vec<&str> = text.split(':').collect();
    let (set, get) = match letters.as_slice() {
        [both] => (*both, *both),
        [set, get] => (*set, *get),
        _ => return Err(invalid("key-pattern", format!("{text:?} is not SET:GET"))),
    };
    Ok((pattern(set, args, range)?, pattern(get, args, range)?))
}

fn pattern(letter: &str, args: &Args, range: KeyRange) -> Result<KeyPattern, ConfigError> {
    match letter.trim() {
        "R" => Ok(KeyPattern::Uniform),
        "S" => Ok(KeyPattern::Sequential),
        "P" => Ok(KeyPattern::Parallel),
        "G" => {
            let median = args
                .key_median
                .unwrap_or((range.min as f64 + range.max as f64) / 2.0);
            let stddev = args
                .key_stddev
                .unwrap_or((range.max - range.min) as f64 / 6.0);
            if !(stddev > 0.0 && stddev.is_finite()) {
                return Err(invalid(
                    "key-stddev",
                    format!("{stddev} must be positive (is the key range a single key?)"),
                ));
            }
            if !(median >= range.min as f64 && median <= range.max as f64) {
                return Err(invalid(
                    "key-median",
                    format!("{median} is outside the key range"),
                ));
            }
            Ok(KeyPattern::Gaussian { median, stddev })
        }
        "Z" => {
            let exponent = args.zipf_exponent.unwrap_or(DEFAULT_ZIPF_EXPONENT);
            if !(exponent > 0.0 && exponent.is_finite()) {
                return Err(invalid(
                    "zipf-exponent",
                    format!("{exponent} must be positive"),
                ));
            }
            Ok(KeyPattern::Zipf { exponent })
        }
        other => Err(invalid(
            "key-pattern",
            format!("{other:?} is not one of R, G, Z, S, P"),
        )),
    }
}

/// The workload of `args`, for `connections` clients in all.
pub(super) fn parse(args: &Args, connections: usize) -> Result<Workload, ConfigError> {
    if args.key_minimum > args.key_maximum {
        return Err(invalid("key-maximum", "is below --key-minimum"));
    }
    let keys = KeyRange::new(args.key_minimum, args.key_maximum);
    let longest_key = args.key_prefix.len() + args.key_maximum.to_string().len();
    if longest_key > MAX_KEY_LEN {
        return Err(invalid(
            "key-prefix",
            format!("keys would be {longest_key} bytes, over memcached's {MAX_KEY_LEN}"),
        ));
    }
    if args.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(invalid(
            "key-prefix",
            "must not contain spaces or control characters",
        ));
    }
    let (set_pattern, get_pattern) = parse_key_patterns(args, keys)?;
    for p in [set_pattern, get_pattern] {
        if p == KeyPattern::Parallel && (connections as u64) > keys.len() {
            return Err(invalid(
                "key-pattern",
                format!(
                    "P splits {} keys over {connections} clients: fewer keys than clients",
                    keys.len()
                ),
            ));
        }
    }
    let data_size = parse_data_size(args)?;
    let protocol = match args.protocol {
        ProtocolArg::MemcacheText => Protocol::MemcacheText,
        ProtocolArg::MemcacheBinary => Protocol::MemcacheBinary,
        ProtocolArg::Redis => Protocol::Redis,
    };
    Ok(Workload {
        protocol,
        ratio: parse_ratio(args.ratio.as_deref().unwrap_or(DEFAULT_RATIO))?,
        get_keys: parse_get_keys(args)?,
        data_size,
        expiry: parse_expiry(args, protocol)?,
        random_data: args.random_data,
        key_prefix: args.key_prefix.clone(),
        keys,
        set_pattern,
        get_pattern,
        key_size: parse_key_size(args)?,
        lone_get_share: parse_lone_get_share(args)?,
        lookaside: args.lookaside.unwrap_or(false),
        preset: args.workload.clone(),
        key_dist: parse_key_dist(args)?,
    })
}
