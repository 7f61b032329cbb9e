from cachelab.hosts.memcache_client import Client


def test_set_get_and_multi_get_against_real_memcached(memcached):
    with Client(memcached.host, memcached.port) as c:
        assert c.set("a", b"1") == "STORED"
        assert c.set("b", b"two\r\nlines") == "STORED"
        assert c.get("a") == b"1"
        assert c.get("missing") is None
        assert c.get_multi(["b", "missing", "a"]) == {"b": b"two\r\nlines", "a": b"1"}
        assert int(c.stats()["cmd_get"]) == 5
