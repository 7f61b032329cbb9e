//! `--shard`: client-side sharding over a pool's servers, placed as twemproxy places
//! them, so a run straight at the servers ("direct") sends each key where the
//! middleware would.

use cachelab_placement::hash::Hash;
use cachelab_placement::ring::{Distribution, Member};
use cachelab_placement::{Entry, Placement};

use super::{invalid, ConfigError};
use crate::args::Args;
use crate::cycle::GetKeys;

/// twemproxy's defaults: `hash: fnv1a_64`, `distribution: ketama`.
pub const DEFAULT_HASH: Hash = Hash::Fnv1a64;
pub const DEFAULT_DISTRIBUTION: Distribution = Distribution::Ketama;

/// The pool a sharded run spreads its keys over.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    /// In the list's order: a connection's sockets, and the report's servers, follow it.
    pub servers: Vec<Entry>,
    pub hash: Hash,
    pub hash_tag: Option<[u8; 2]>,
    pub distribution: Distribution,
}

impl Shard {
    pub fn placement(&self) -> Placement {
        let members: Vec<Member> = self
            .servers
            .iter()
            .map(|e| Member {
                name: e.name.clone(),
                weight: e.weight,
            })
            .collect();
        Placement::new(self.hash, self.hash_tag, self.distribution, &members)
    }
}

/// `--shard` and its options; `None` without it.
pub(super) fn parse(args: &Args, get_keys: GetKeys) -> Result<Option<Shard>, ConfigError> {
    let Some(list) = &args.shard else {
        let given = [
            ("shard-hash", args.shard_hash.is_some()),
            ("shard-distribution", args.shard_distribution.is_some()),
            ("shard-hash-tag", args.shard_hash_tag.is_some()),
        ];
        return match given.iter().find(|(_, given)| *given) {
            Some((option, _)) => Err(invalid(option, "needs --shard")),
            None => Ok(None),
        };
    };
    let servers = list
        .split(',')
        .map(|text| Entry::parse(text).map_err(|e| invalid("shard", e.to_string())))
        .collect::<Result<Vec<Entry>, ConfigError>>()?;
    if let Some(dup) = servers
        .iter()
        .enumerate()
        .find(|(i, e)| servers[..*i].iter().any(|o| o.name == e.name))
    {
        return Err(invalid(
            "shard",
            format!(
                "two servers named {:?}: their ketama points would be the same; give each a name",
                dup.1.name
            ),
        ));
    }
    let hash = match &args.shard_hash {
        None => DEFAULT_HASH,
        Some(name) => Hash::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Hash::ALL.iter().map(|h| h.name()).collect();
            invalid(
                "shard-hash",
                format!("{name:?} is not one of {}", names.join(", ")),
            )
        })?,
    };
    let distribution = match &args.shard_distribution {
        None => DEFAULT_DISTRIBUTION,
        Some(name) => Distribution::from_name(name).ok_or_else(|| {
            invalid(
                "shard-distribution",
                format!("{name:?} is not one of ketama, modula, random"),
            )
        })?,
    };
    let hash_tag = match &args.shard_hash_tag {
        None => None,
        Some(tag) => match tag.as_bytes() {
            [open, close] => Some([*open, *close]),
            _ => {
                return Err(invalid(
                    "shard-hash-tag",
                    format!("{tag:?} must be two characters, such as {{}}"),
                ))
            }
        },
    };
    if get_keys.max() > 1 {
        return Err(invalid(
            "shard",
            "a GET of several keys would have to be split over the servers, which the \
             sharded client does not do; use --multiget-keys 1, or a middleware",
        ));
    }
    Ok(Some(Shard {
        servers,
        hash,
        hash_tag,
        distribution,
    }))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::Config;

    fn config(args: &[&str]) -> Result<Config, String> {
        let args =
            Args::try_parse_from(std::iter::once("cachelab-load").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        Config::try_from(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn a_pool_reads_like_nutcracker_yml_with_twemproxys_defaults() {
        let c = config(&[
            "--shard",
            "127.0.0.1:11211:2 alpha,/tmp/mc.sock,10.0.0.2:11311",
        ])
        .unwrap();
        let shard = c.shard.unwrap();
        let names: Vec<&str> = shard.servers.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["alpha", "/tmp/mc.sock", "10.0.0.2:11311"]);
        assert_eq!(shard.servers[0].weight, 2);
        assert_eq!(
            (shard.hash, shard.distribution, shard.hash_tag),
            (Hash::Fnv1a64, Distribution::Ketama, None)
        );
        let c = config(&[
            "--shard",
            "a:1,b:2",
            "--shard-hash",
            "murmur",
            "--shard-distribution",
            "modula",
            "--shard-hash-tag",
            "{}",
        ])
        .unwrap();
        let shard = c.shard.unwrap();
        assert_eq!(
            (shard.hash, shard.distribution, shard.hash_tag),
            (Hash::Murmur, Distribution::Modula, Some(*b"{}"))
        );
    }

    #[test]
    fn every_fault_is_one_line_naming_its_option() {
        for (args, fault) in [
            (
                &["--shard", "127.0.0.1"][..],
                "--shard: server \"127.0.0.1\": expected host:port",
            ),
            (
                &["--shard", "a:1,b:x"],
                "--shard: server \"b:x\": invalid port",
            ),
            (&["--shard", "a:1:0"], "weight must be at least 1"),
            (&["--shard", "a:1 x,b:2 x"], "two servers named \"x\""),
            (
                &["--shard", "a:1", "--shard-hash", "sha1"],
                "--shard-hash: \"sha1\" is not one of",
            ),
            (
                &["--shard", "a:1", "--shard-distribution", "ring"],
                "--shard-distribution:",
            ),
            (
                &["--shard", "a:1", "--shard-hash-tag", "{"],
                "--shard-hash-tag:",
            ),
            (&["--shard-hash", "md5"], "--shard-hash: needs --shard"),
            (
                &["--shard", "a:1", "--multiget-keys", "4", "--ratio", "0:1"],
                "split over the servers",
            ),
            (&["--shard", "a:1", "--server", "b"], "cannot be used with"),
        ] {
            let err = config(args).unwrap_err();
            assert!(err.contains(fault), "{args:?}: {err}");
            // clap's own refusals carry its usage line; ours are one line.
            if !err.starts_with("error:") {
                assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            }
        }
    }
}
