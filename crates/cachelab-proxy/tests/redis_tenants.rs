//! Redis pools that share a redis-server stay apart (issue 33): each pool's server
//! connections are greeted with its own database and password, so two pools on one
//! server with different databases or passwords each read only their own keys, and a
//! pool without the password gets Redis's NOAUTH as twemproxy's would; a reload that
//! changes `redis_db` under a steady load sends every write made after it to the new
//! database. Against real redis-servers.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use cachelab_protocol::RespValue;
use cachelab_testkit::Redis;
use common::resp::{bulk, RespClient};
use common::Proxy;

const NIL: &str = "$-1\r\n";

fn start(config: &std::path::Path, extra: &[&str]) -> Proxy {
    let mut args = vec!["--config".to_string(), config.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    Proxy::start_args(&args)
}

/// The keys of database `db`, read from the server directly (after `AUTH` if given).
fn keys_in(server: &Redis, auth: Option<&str>, db: u32, pattern: &str) -> BTreeSet<String> {
    let db = db.to_string();
    let mut session: Vec<&[&str]> = Vec::new();
    let auth_command;
    if let Some(password) = auth {
        auth_command = ["AUTH", password];
        session.push(&auth_command);
    }
    let select = ["SELECT", db.as_str()];
    let keys = ["KEYS", pattern];
    session.push(&select);
    session.push(&keys);
    let replies = server.session(&session);
    let RespValue::Array(Some(items)) = replies.last().unwrap() else {
        panic!("KEYS answered {replies:?}");
    };
    items
        .iter()
        .map(|item| match item {
            RespValue::Bulk(Some(k)) => String::from_utf8(k.clone()).unwrap(),
            other => panic!("KEYS item {other:?}"),
        })
        .collect()
}

fn set_of(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// The `server_N:addr=` lines of the proxy's `INFO`: what it reports its servers as.
fn reported_servers(client: &mut RespClient) -> Vec<String> {
    let info = client.cmd(&["INFO"]);
    info.lines()
        .filter_map(|l| l.split_once(":addr="))
        .map(|(_, rest)| rest.split(',').next().unwrap().to_string())
        .collect()
}

/// nutcracker.yml as in the issue: pools a (`redis_db: 0`) and b (`redis_db: 5`) both
/// list the same server. Before, both pools' requests went over one set of
/// connections greeted with the last pool's `SELECT`.
#[test]
fn two_pools_on_one_server_with_different_databases_each_read_only_their_own_keys() {
    {
        let server = Redis::start();
        let dir = common::temp_dir();
        let path = dir.path().join("nutcracker.yml");
        let pool = |name: &str, db: u32| {
            format!(
                "{name}:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_db: {db}\n  \
                 servers:\n   - {}:1\n",
                server.addr
            )
        };
        std::fs::write(&path, pool("a", 0) + &pool("b", 5)).unwrap();
        let proxy = start(&path, &["-t", "4"]);
        let mut a = RespClient::connect(proxy.addrs[0]);
        let mut b = RespClient::connect(proxy.addrs[1]);
        assert_eq!(a.cmd(&["SET", "k", "from-a"]), "+OK\r\n");
        assert_eq!(b.cmd(&["SET", "k", "from-b"]), "+OK\r\n");
        assert_eq!(a.cmd(&["SET", "only-a", "1"]), "+OK\r\n");
        assert_eq!(b.cmd(&["SET", "only-b", "2"]), "+OK\r\n");
        // Pipelined, the reads keep all four workers busy: every worker's connection
        // of each pool answers.
        let reads_a: Vec<&[&str]> = [&["GET", "k"][..], &["GET", "only-b"]].repeat(8);
        let reads_b: Vec<&[&str]> = [&["GET", "k"][..], &["GET", "only-a"]].repeat(8);
        for (replies, own) in [
            (a.pipelined(&reads_a), "from-a"),
            (b.pipelined(&reads_b), "from-b"),
        ] {
            for pair in replies.chunks(2) {
                assert_eq!(pair, [bulk(own), NIL.to_string()]);
            }
        }
        assert_eq!(keys_in(&server, None, 0, "*"), set_of(&["k", "only-a"]));
        assert_eq!(keys_in(&server, None, 5, "*"), set_of(&["k", "only-b"]));
        let db5 = server.session(&[&["SELECT", "5"], &["GET", "k"]]);
        assert_eq!(db5[1], RespValue::Bulk(Some(b"from-b".to_vec())));
        // Two servers to the proxy, told apart by their database.
        let addr = server.addr.to_string();
        assert_eq!(
            reported_servers(&mut a),
            [addr.clone(), format!("{addr}/db5")]
        );
    }
}

/// The server's default user has two passwords; pools a and b each give one (and use
/// databases 0 and 5), pool c gives none, pool d a wrong one. a and b each read only
/// their own keys; c's commands get Redis's own NOAUTH (as through twemproxy); d's
/// refused greeting fails d's requests and ejects d's server, not a's or b's.
#[test]
fn pools_with_different_passwords_greet_with_their_own_and_stay_apart() {
    {
        let server = Redis::start();
        assert_eq!(
            server.command(&["ACL", "SETUSER", "default", "resetpass", ">pwa", ">pwb"]),
            RespValue::Simple(b"OK".to_vec())
        );
        let dir = common::temp_dir();
        let path = dir.path().join("proxy.toml");
        let pool = |name: &str, auth: Option<&str>, db: u32| {
            let auth = auth.map_or(String::new(), |a| format!("redis_auth = \"{a}\"\n"));
            format!(
                "[pools.{name}]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\n{auth}\
                 redis_db = {db}\nfailure_limit = 2\nservers = [\"{}\"]\n",
                server.addr
            )
        };
        let text = pool("a", Some("pwa"), 0)
            + &pool("b", Some("pwb"), 5)
            + &pool("c", None, 0)
            + &pool("d", Some("wrong"), 0);
        std::fs::write(&path, text).unwrap();
        let proxy = start(&path, &["-t", "4"]);
        let [mut a, mut b, mut c, mut d] =
            [0, 1, 2, 3].map(|i| RespClient::connect(proxy.addrs[i]));
        assert_eq!(a.cmd(&["AUTH", "pwa"]), "+OK\r\n");
        assert_eq!(b.cmd(&["AUTH", "pwb"]), "+OK\r\n");
        assert_eq!(
            d.cmd(&["AUTH", "wrong"]),
            "+OK\r\n",
            "the pool's own password"
        );
        assert_eq!(a.cmd(&["SET", "ka", "1"]), "+OK\r\n");
        assert_eq!(b.cmd(&["SET", "kb", "2"]), "+OK\r\n");
        for _ in 0..4 {
            assert_eq!(
                c.cmd(&["SET", "kc", "3"]),
                "-NOAUTH Authentication required.\r\n"
            );
            let refused = d.cmd(&["SET", "kd", "4"]);
            assert!(
                refused.starts_with("-ERR") && refused.contains("WRONGPASS"),
                "{refused}"
            );
        }
        for _ in 0..8 {
            assert_eq!(a.cmd(&["GET", "ka"]), bulk("1"));
            assert_eq!(a.cmd(&["GET", "kb"]), NIL);
            assert_eq!(b.cmd(&["GET", "kb"]), bulk("2"));
            assert_eq!(b.cmd(&["GET", "ka"]), NIL);
        }
        assert_eq!(keys_in(&server, Some("pwa"), 0, "*"), set_of(&["ka"]));
        assert_eq!(keys_in(&server, Some("pwb"), 5, "*"), set_of(&["kb"]));
        // Four servers to the proxy; only d's is ejected.
        let info = a.cmd(&["INFO"]);
        let states: Vec<&str> = info
            .lines()
            .filter(|l| l.starts_with("server_"))
            .filter_map(|l| l.split(",state=").nth(1))
            .map(|rest| rest.split(',').next().unwrap())
            .collect();
        assert_eq!(states, ["up", "up", "up", "ejected"], "{info}");
    }
}

/// Writes counted by the epoch they were sent in: 0 before the first reload is asked
/// for, 1 while it runs, 2 after it returned and before the second is asked for, 3
/// while that runs, 4 after it returned.
#[derive(Default)]
struct Tally {
    acked: [AtomicU64; 5],
    errors: AtomicU64,
    /// Keys whose epoch changed between the client reading it and its SET being
    /// answered (a thread descheduled there on a busy machine): its tag is stale, so
    /// the key may be in either database.
    straddled: std::sync::Mutex<BTreeSet<String>>,
}

/// A steady load of SETs over several connections while `redis_db` is reloaded from 0
/// to 5 and back: every SET sent after a reload's "configuration reloaded" (and before
/// the next reload is asked for) lands in the new database; those sent while a reload
/// runs land in one database or the other; none is lost. Each key carries the epoch
/// its client saw before sending it (see `Tally`).
#[test]
fn a_reload_of_redis_db_under_load_sends_every_later_write_to_the_new_database() {
    {
        let server = Redis::start();
        let dir = common::temp_dir();
        let path = dir.path().join("proxy.toml");
        let pool = |db: u32| {
            format!(
                "[pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\nredis_db = {db}\n\
                 servers = [\"{}\"]\n",
                server.addr
            )
        };
        std::fs::write(&path, pool(0)).unwrap();
        let proxy = start(&path, &["-t", "8"]);
        let epoch = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let clients: Vec<_> = (0..4)
            .map(|t| {
                let mut client = RespClient::connect(proxy.addr);
                let (epoch, stop, tally) = (epoch.clone(), stop.clone(), tally.clone());
                thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let e = epoch.load(Ordering::Acquire);
                        let key = format!("e{e}:c{t}:{i}");
                        if client.cmd(&["SET", &key, "v"]) == "+OK\r\n" {
                            tally.acked[e].fetch_add(1, Ordering::Relaxed);
                            if epoch.load(Ordering::Acquire) != e {
                                tally.straddled.lock().unwrap().insert(key);
                            }
                        } else {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let acked = |e: usize| tally.acked[e].load(Ordering::Relaxed);
        let progress = |e: usize| {
            assert!(
                common::wait_until(Duration::from_secs(30), || acked(e) >= 400),
                "the load stalled at {} writes of epoch {e}",
                acked(e)
            );
        };
        progress(0);
        for (reload, db) in [(1, 5), (2, 0)] {
            std::fs::write(&path, pool(db)).unwrap();
            epoch.store(2 * reload - 1, Ordering::Release);
            proxy.reload();
            let log = proxy.wait_for_log("configuration reloaded", reload);
            assert_eq!(
                log.matches("configuration reloaded").count(),
                reload,
                "{log}"
            );
            epoch.store(2 * reload, Ordering::Release);
            progress(2 * reload);
        }
        stop.store(true, Ordering::Release);
        clients.into_iter().for_each(|c| c.join().unwrap());
        assert_eq!(tally.errors.load(Ordering::Relaxed), 0, "errors");

        let count = |db: u32, e: usize| keys_in(&server, None, db, &format!("e{e}:*")).len() as u64;
        // Before the first reload db 0 only, after it db 5 only, after the second db 0
        // only.
        let straddled = tally.straddled.lock().unwrap().clone();
        let misplaced = |db: u32, e: usize| {
            let keys = keys_in(&server, None, db, &format!("e{e}:*"));
            keys.difference(&straddled).count() as u64
        };
        for (e, db, other) in [(0, 0, 5), (2, 5, 0), (4, 0, 5)] {
            assert_eq!(misplaced(other, e), 0, "epoch {e} writes in db {other}");
            assert_eq!(
                count(db, e) + count(other, e),
                acked(e),
                "epoch {e} writes in db {db}"
            );
        }
        // Writes sent while a reload ran may be in either; none is lost.
        for e in [1, 3] {
            assert_eq!(count(0, e) + count(5, e), acked(e), "epoch {e}");
        }
        // Back on db 0 the pool uses its first server id again: two servers, not three.
        let mut client = RespClient::connect(proxy.addr);
        let addr = server.addr.to_string();
        assert_eq!(
            reported_servers(&mut client),
            [addr.clone(), format!("{addr}/db5")]
        );
        eprintln!(
            "writes per epoch {:?}",
            (0..5).map(acked).collect::<Vec<_>>()
        );
    }
}
