//! twemproxy's `nutcracker.yml`, read as it is: the keys twemproxy reads (`redis: true`
//! pools too, with `redis_auth` and `redis_db`), its defaults, and a clear refusal for
//! what cachelab does not serve.

use std::time::Duration;

use yaml_rust2::Yaml;

use super::fields::{
    check_listeners, check_pool, parse_hash_tag, parse_listen, parse_server, twemproxy_order,
    Defaults, Resolver,
};
use super::spec::{ListenerSpec, PoolSpec};
use crate::routing::hash::Hash;
use crate::routing::plan::{Mode, ReadPolicy};
use crate::routing::ring::Distribution;
use crate::routing::Protocol;

/// nutcracker.yml keys that change nothing here (connection counts and socket options
/// that cachelab sets itself): accepted so the file works as it is.
const NUTCRACKER_IGNORED: &[&str] = &[
    "backlog",
    "client_connections",
    "tcpkeepalive",
    "server_connections",
    "preconnect",
    "server_retry_timeout",
    "reuseport",
];

pub(super) fn parse_nutcracker(
    text: &str,
    defaults: &Defaults,
) -> Result<Vec<ListenerSpec>, String> {
    let docs = super::yaml::load(text).map_err(|e| e.to_string())?;
    let [root] = docs.as_slice() else {
        return Err(format!("expected one YAML document, found {}", docs.len()));
    };
    let pools = root
        .as_hash()
        .ok_or("expected a mapping of pool names to pools")?;
    let mut resolver = Resolver::default();
    let mut listeners = Vec::new();
    for (name, pool) in pools {
        let name = scalar(name).ok_or("a pool name must be a string")?;
        let ctx = |e: String| format!("pool {name}: {e}");
        let fields = pool
            .as_hash()
            .ok_or_else(|| ctx("expected a mapping".into()))?;
        let mut listen = None;
        let mut servers = None;
        let mut pool = PoolSpec {
            name: name.clone(),
            servers: Vec::new(),
            mode: Mode::Shard { replicas: 1 },
            hash: Hash::Fnv1a64,
            hash_tag: None,
            distribution: Distribution::Ketama,
            auto_eject: false,
            read_policy: ReadPolicy::Primary,
            timeout: defaults.timeout,
            failure_limit: defaults.failure_limit,
            server_tls: None,
            protocol: Protocol::Memcached,
            redis_auth: None,
            redis_db: 0,
        };
        for (key, value) in fields {
            let key = scalar(key).ok_or_else(|| ctx("a key must be a string".into()))?;
            let text = || scalar(value).ok_or_else(|| ctx(format!("{key}: expected a value")));
            match key.as_str() {
                "listen" => listen = Some(parse_listen(&text()?, &mut resolver).map_err(ctx)?),
                "hash" => {
                    let h = text()?;
                    pool.hash =
                        Hash::from_name(&h).ok_or_else(|| ctx(format!("unknown hash {h:?}")))?;
                }
                "hash_tag" => pool.hash_tag = Some(parse_hash_tag(&text()?).map_err(ctx)?),
                "distribution" => {
                    let d = text()?;
                    pool.distribution = Distribution::from_name(&d)
                        .ok_or_else(|| ctx(format!("unknown distribution {d:?}")))?;
                }
                "timeout" => {
                    let ms: u64 = text()?
                        .parse()
                        .map_err(|_| ctx("timeout: expected milliseconds".into()))?;
                    pool.timeout = Duration::from_millis(ms.max(1));
                }
                "auto_eject_hosts" => pool.auto_eject = boolean(value).map_err(ctx)?,
                "server_failure_limit" => {
                    pool.failure_limit = text()?
                        .parse()
                        .map_err(|_| ctx("server_failure_limit: expected a number".into()))?;
                }
                "redis" => {
                    if boolean(value).map_err(ctx)? {
                        pool.protocol = Protocol::Redis;
                    }
                }
                "redis_auth" => pool.redis_auth = Some(text()?),
                "redis_db" => {
                    pool.redis_db = text()?
                        .parse()
                        .map_err(|_| ctx("redis_db: expected a database number".into()))?;
                }
                "servers" => {
                    let list = value
                        .as_vec()
                        .ok_or_else(|| ctx("servers: expected a list".into()))?;
                    servers = Some(
                        list.iter()
                            .map(|s| {
                                scalar(s)
                                    .ok_or_else(|| "servers: expected strings".to_string())
                                    .and_then(|s| parse_server(&s, &mut resolver))
                            })
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(ctx)?,
                    );
                }
                k if NUTCRACKER_IGNORED.contains(&k) => {}
                other => return Err(ctx(format!("unknown key {other:?}"))),
            }
        }
        if !pool.auto_eject {
            // Without auto_eject_hosts twemproxy never takes a server out: neither do we.
            pool.failure_limit = 0;
        }
        pool.servers = servers.ok_or_else(|| ctx("no servers".into()))?;
        twemproxy_order(&mut pool);
        check_pool(&pool)?;
        listeners.push(ListenerSpec {
            listen: listen.ok_or_else(|| ctx("no listen address".into()))?,
            pool,
            tls: None,
        });
    }
    check_listeners(&listeners)?;
    Ok(listeners)
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(r.clone()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn boolean(y: &Yaml) -> Result<bool, String> {
    match y {
        Yaml::Boolean(b) => Ok(*b),
        Yaml::String(s) if s == "true" => Ok(true),
        Yaml::String(s) if s == "false" => Ok(false),
        other => Err(format!("expected true or false, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;

    #[test]
    fn a_nutcracker_yml_reads_as_it_is() {
        let yml = "alpha:\n  listen: 127.0.0.1:22121\n  hash: murmur\n  hash_tag: \"{}\"\n  \
                   distribution: modula\n  auto_eject_hosts: true\n  server_retry_timeout: 2000\n  \
                   server_failure_limit: 3\n  timeout: 400\n  preconnect: true\n  servers:\n   \
                   - 127.0.0.1:11311:1 one\n   - 127.0.0.1:11411:1 two\n";
        let l = parse_nutcracker(yml, &Defaults::for_tests()).unwrap();
        assert_eq!(l.len(), 1);
        let p = &l[0].pool;
        assert_eq!(l[0].listen.port(), Some(22121));
        assert_eq!(
            (p.hash, p.distribution),
            (Hash::Murmur, Distribution::Modula)
        );
        assert_eq!(p.hash_tag, Some(*b"{}"));
        assert_eq!((p.auto_eject, p.failure_limit), (true, 3));
        assert_eq!(p.timeout, Duration::from_millis(400));
        assert_eq!(p.mode, Mode::Shard { replicas: 1 });
        assert_eq!(p.servers[1].name, "two");
    }

    #[test]
    fn shard_servers_take_twemproxys_order_shorter_names_first() {
        let yml = "a:\n  listen: 127.0.0.1:22121\n  servers:\n   - 127.0.0.1:11311:1\n   \
                   - 127.0.0.1:11411:1 gamma\n   - 127.0.0.1:11511:1 beta\n";
        let l = parse_nutcracker(yml, &Defaults::for_tests()).unwrap();
        let names: Vec<&str> = l[0].pool.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["beta", "gamma", "127.0.0.1:11311"]);
    }

    #[test]
    fn a_redis_pool_reads_with_its_password_and_database() {
        let redis = "r:\n  listen: 127.0.0.1:22121\n  redis: true\n  redis_auth: s3cret\n  \
                     redis_db: 2\n  servers:\n   - 127.0.0.1:6379:1\n";
        let l = parse_nutcracker(redis, &Defaults::for_tests()).unwrap();
        let p = &l[0].pool;
        assert_eq!(p.protocol, Protocol::Redis);
        assert_eq!((p.redis_auth.as_deref(), p.redis_db), (Some("s3cret"), 2));
        let memcached = redis.replace("redis: true", "redis: false");
        let err = parse_nutcracker(&memcached, &Defaults::for_tests()).unwrap_err();
        assert_eq!(err, "pool r: redis_auth is for a Redis pool");
        let db = redis.replace("redis_db: 2", "redis_db: two");
        let err = parse_nutcracker(&db, &Defaults::for_tests()).unwrap_err();
        assert_eq!(err, "pool r: redis_db: expected a database number");
    }

    #[test]
    fn unknown_keys_are_refused_with_the_pool_named() {
        let typo = "a:\n  listen: 127.0.0.1:22121\n  hsah: md5\n  servers:\n   - 127.0.0.1:1:1\n";
        let err = parse_nutcracker(typo, &Defaults::for_tests()).unwrap_err();
        assert_eq!(err, "pool a: unknown key \"hsah\"");
    }

    #[test]
    fn a_duplicate_server_name_is_refused_naming_it() {
        let yml = "a:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:1:1 x\n   \
                   - 127.0.0.1:2:1 y\n   - 127.0.0.1:3:1 x\n";
        let err = parse_nutcracker(yml, &Defaults::for_tests()).unwrap_err();
        assert_eq!(err, "pool a: two servers named \"x\"");
    }

    #[test]
    fn two_pools_on_one_address_are_refused_but_port_zero_is_no_clash() {
        let pool = |name: &str, listen: &str| {
            format!("{name}:\n  listen: {listen}\n  servers:\n   - 127.0.0.1:1:1\n")
        };
        let clash = pool("a", "127.0.0.1:22121")
            + &pool("b", "127.0.0.1:22122")
            + &pool("c", "127.0.0.1:22121");
        let err = parse_nutcracker(&clash, &Defaults::for_tests()).unwrap_err();
        assert_eq!(
            err,
            "pools a and c listen on the same address 127.0.0.1:22121"
        );
        let zeros = pool("a", "127.0.0.1:0") + &pool("b", "127.0.0.1:0");
        assert_eq!(
            parse_nutcracker(&zeros, &Defaults::for_tests())
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn an_alias_in_a_nutcracker_yml_is_refused() {
        let yml = "a:\n  listen: &l 127.0.0.1:22121\nb:\n  listen: *l\n";
        let err = parse_nutcracker(yml, &Defaults::for_tests()).unwrap_err();
        assert!(err.starts_with("line 4 column 11: YAML aliases"), "{err}");
    }

    #[test]
    fn nutcracker_unix_sockets_read_as_twemproxy_writes_them() {
        let yml =
            "a:\n  listen: /tmp/cachelab-a.sock\n  servers:\n   - /tmp/cachelab-m.sock:1 one\n";
        let l = parse_nutcracker(yml, &Defaults::for_tests()).unwrap();
        assert_eq!(l[0].listen, Endpoint::Unix("/tmp/cachelab-a.sock".into()));
        assert_eq!(l[0].pool.servers[0].name, "one");
        let tls = "a:\n  listen: 127.0.0.1:1\n  tls: true\n  servers:\n   - 127.0.0.1:2:1\n";
        let err = parse_nutcracker(tls, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("unknown key \"tls\""), "{err}");
    }
}
