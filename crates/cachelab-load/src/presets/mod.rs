//! Workload presets from published production studies (`--workload NAME`): each is a
//! set of option values, written in the options' own syntax, that fills every option the
//! command line leaves out; an option given explicitly wins. docs/load-generator.md
//! cites each preset's source.
//!
//! - `fb-etc`: Facebook's ETC pool (Atikoglu et al., SIGMETRICS 2012) as mutilate
//!   encodes its fits;
//! - `twitter-clusterN`: the clusters of twitter/cache-trace's `stat/2020Mar.md`
//!   ([`twitter`]);
//! - `meta-memcache-reg`: CacheLib cachebench's `hit_ratio/kvcache_reg` (formerly
//!   `memcache_reg`) configuration.

mod twitter;

/// One preset: its name, where it comes from, and its option values (None: not set).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Preset {
    pub name: String,
    /// What it is, one line.
    pub about: String,
    /// Its source, one line.
    pub source: String,
    pub ratio: Option<String>,
    pub key_pattern: Option<String>,
    pub zipf_exponent: Option<f64>,
    pub data_size_dist: Option<String>,
    pub key_size_dist: Option<String>,
    /// Key popularity for the R pattern (`--key-dist`).
    pub key_dist: Option<String>,
    pub expiry_dist: Option<String>,
    /// Open-loop gaps, used only when `--rate` is given.
    pub arrival_dist: Option<String>,
    pub lone_get_share: Option<f64>,
    pub lookaside: Option<bool>,
}

/// cachebench's kvcache_reg draws operations in proportion to getRatio and
/// loneGetRatio (its other ratios are 0): the lone gets' share of all GETs.
const KVCACHE_REG_GET_RATIO: f64 = 0.9845283120275657;
const KVCACHE_REG_LONE_GET_RATIO: f64 = 0.13471687972434254;

fn fb_etc() -> Preset {
    Preset {
        name: "fb-etc".into(),
        about: "Facebook's ETC memcached pool: GEV key sizes, generalized-Pareto values and gaps, 30 GETs per SET".into(),
        source: "Atikoglu et al., Workload Analysis of a Large-Scale Key-Value Store, SIGMETRICS 2012; fits as in leverich/mutilate Generator.cc (commit d65c6ef)".into(),
        ratio: Some("1:30".into()),
        key_pattern: Some("R:R".into()),
        data_size_dist: Some("fb_value".into()),
        key_size_dist: Some("fb_key".into()),
        arrival_dist: Some("fb_ia".into()),
        lookaside: Some(false),
        ..Preset::default()
    }
}

fn meta_memcache_reg() -> Preset {
    let lone = KVCACHE_REG_LONE_GET_RATIO / (KVCACHE_REG_GET_RATIO + KVCACHE_REG_LONE_GET_RATIO);
    Preset {
        name: "meta-memcache-reg".into(),
        about: "Meta's memcache_reg: GETs only, 12% of them for keys never set, a SET after every miss".into(),
        source: "facebook/CacheLib cachelib/cachebench/test_configs/hit_ratio/kvcache_reg (memcache_reg before commit 143eca6): config.json and sizes.json".into(),
        ratio: Some("0:1".into()),
        key_pattern: Some("R:R".into()),
        data_size_dist: Some("kvcache_reg_value".into()),
        key_size_dist: Some("uniform:min=16,max=255".into()),
        key_dist: Some("kvcache_reg_popularity".into()),
        lone_get_share: Some((lone * 1e4).round() / 1e4),
        lookaside: Some(true),
        ..Preset::default()
    }
}

/// Every preset, in the order `--workload list` prints them.
pub fn all() -> Vec<Preset> {
    let mut presets = vec![fb_etc(), meta_memcache_reg()];
    presets.extend(twitter::presets());
    presets
}

/// The preset called `name`, or a one-line refusal.
pub fn find(name: &str) -> Result<Preset, String> {
    all()
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("no preset {name:?} (`--workload list` names them)"))
}

/// `--workload list`: one preset a line, then its source.
pub fn list() -> String {
    let mut out = String::new();
    for p in all() {
        out += &format!(
            "{:<22} {}\n{:<22} source: {}\n",
            p.name, p.about, "", p.source
        );
    }
    out
}
