//! The Twitter cluster presets, `twitter-cluster1` ... `twitter-cluster54`, from the
//! per-cluster table of twitter/cache-trace's `stat/2020Mar.md` (embedded as
//! `data/twitter_2020Mar.tsv`, its columns unchanged). How a row becomes options:
//! - key and value size: the table's mean sizes, fixed;
//! - operations: GET and GETS read; SET, ADD, CAS, REPLACE, APPEND, PREPEND, INCR and
//!   DECR write; DELETE is left out (the load generator sends none); the ratio is
//!   writes:reads in thousandths, reduced;
//! - TTL: the table's common TTLs as a discrete distribution of seconds, their shares
//!   as weights;
//! - popularity: zipf with the table's alpha (uniform where it is 0 or not given);
//! - one-hit wonders: the table gives the share of *objects* requested once (o) and the
//!   mean requests per object (f), so o / f of requests are an object's only request:
//!   that share of GETs ask for keys never set;
//! - lookaside on: a GET that misses is followed by a SET, as a look-aside client does
//!   (`--lookaside=false` turns it off).

use super::Preset;

const TABLE: &str = include_str!("../../data/twitter_2020Mar.tsv");

const SOURCE: &str = "Yang et al., A large scale analysis of hundreds of in-memory cache clusters at Twitter, OSDI 2020; twitter/cache-trace stat/2020Mar.md (commit 1c50367)";

/// `240s`, `1.8h`, `4d` in seconds.
fn seconds(text: &str) -> Option<f64> {
    let (number, unit) = text.split_at(text.len().checked_sub(1)?);
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale)
}

/// `60s:0.39, 300s:0.24` as `discrete:60=0.39,300=0.24`.
fn ttl(text: &str) -> Option<String> {
    let pairs: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (time, share) = t.split_once(':')?;
            Some(format!("{}={}", seconds(time)?.round(), share.trim()))
        })
        .collect::<Option<Vec<_>>>()?;
    (!pairs.is_empty()).then(|| format!("discrete:{}", pairs.join(",")))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `get:0.93 set:0.07` as the ratio `7:93` (writes:reads).
fn ratio(text: &str) -> Option<String> {
    let (mut reads, mut writes) = (0u64, 0u64);
    for op in text.split_whitespace() {
        let (name, share) = op.split_once(':')?;
        let thousandths = (share.parse::<f64>().ok()? * 1000.0).round() as u64;
        match name {
            "get" | "gets" => reads += thousandths,
            "set" | "add" | "cas" | "replace" | "append" | "prepend" | "incr" | "decr" => {
                writes += thousandths
            }
            "delete" => {}
            _ => return None,
        }
    }
    let g = gcd(reads, writes).max(1);
    (reads + writes > 0).then(|| format!("{}:{}", writes / g, reads / g))
}

/// One row of the table as a preset; None for a row that does not parse (the tests
/// hold every row to parsing).
fn preset(row: &str) -> Option<Preset> {
    let c: Vec<&str> = row.split('\t').map(str::trim).collect();
    let [cluster, key, value, kqps, freq, one_hit, ttl_text, ops, alpha] = c.as_slice() else {
        return None;
    };
    let key: f64 = key.parse().ok()?;
    let value: f64 = value.parse().ok()?;
    let freq: f64 = freq.parse().ok()?;
    let one_hit: f64 = one_hit.parse().ok()?;
    let alpha: f64 = alpha.parse().unwrap_or(0.0);
    let ratio = ratio(ops)?;
    let zipf = alpha > 0.0;
    let lone = (one_hit / 100.0 / freq).min(1.0);
    Some(Preset {
        name: format!("twitter-{cluster}"),
        about: format!(
            "Twitter {cluster}: keys {key} B, values {value} B, {ops}, zipf {alpha}, {kqps} kqps in production"
        ),
        source: SOURCE.into(),
        ratio: Some(ratio),
        key_pattern: Some(if zipf { "Z:Z" } else { "R:R" }.into()),
        zipf_exponent: zipf.then_some(alpha),
        data_size_dist: Some(format!("fixed:{value}")),
        key_size_dist: Some(format!("fixed:{key}")),
        expiry_dist: ttl(ttl_text),
        arrival_dist: None,
        key_dist: None,
        lone_get_share: Some((lone * 1e4).round() / 1e4),
        lookaside: Some(true),
    })
}

fn rows() -> impl Iterator<Item = &'static str> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
}

pub fn presets() -> Vec<Preset> {
    rows().filter_map(preset).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_table_becomes_a_preset() {
        assert_eq!(rows().count(), 53);
        for row in rows() {
            assert!(preset(row).is_some(), "{row}");
        }
    }

    #[test]
    fn a_row_maps_to_its_options() {
        let p = presets()
            .into_iter()
            .find(|p| p.name == "twitter-cluster4")
            .unwrap();
        assert_eq!(p.ratio.as_deref(), Some("7:93"));
        assert_eq!(
            (p.key_pattern.as_deref(), p.zipf_exponent),
            (Some("Z:Z"), Some(1.1004))
        );
        assert_eq!(p.data_size_dist.as_deref(), Some("fixed:2439"));
        assert_eq!(p.key_size_dist.as_deref(), Some("fixed:67"));
        assert_eq!(
            p.expiry_dist.as_deref(),
            Some("discrete:60=0.39,300=0.24,3600=0.13,600=0.12,14400=0.09,86400=0.03")
        );
        // 29.33% of objects seen once, 26.5 requests per object: 1.11% of requests.
        assert_eq!(p.lone_get_share, Some(0.0111));
    }

    #[test]
    fn operations_map_to_a_ratio_and_units_to_seconds() {
        assert_eq!(ratio("get:0.99").as_deref(), Some("0:1"));
        assert_eq!(ratio("set:1.00").as_deref(), Some("1:0"));
        assert_eq!(
            ratio("get:0.65 delete:0.22 set:0.13").as_deref(),
            Some("1:5")
        );
        assert_eq!(
            ratio("get:0.96 add:0.02 gets:0.01 cas:0.01").as_deref(),
            Some("3:97")
        );
        assert_eq!(ratio("get:0.5 flush:0.5"), None);
        assert_eq!(
            ttl("1.8h:0.28, 92.6d:0.72").as_deref(),
            Some("discrete:6480=0.28,8000640=0.72")
        );
        assert_eq!(seconds("20s"), Some(20.0));
    }
}
