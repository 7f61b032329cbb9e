//! Distributions known by name: the fits of Atikoglu et al., "Workload Analysis of a
//! Large-Scale Key-Value Store" (SIGMETRICS 2012) for Facebook's ETC pool, with the
//! parameters mutilate encodes (leverich/mutilate Generator.cc, commit d65c6ef), and the
//! value sizes and key popularity of Meta's memcache_reg cachebench configuration
//! (docs/load-generator.md cites both).

use std::sync::{Arc, OnceLock};

use super::{Dist, Empirical};

/// The value sizes of CacheLib's `hit_ratio/kvcache_reg/sizes.json`, as rows.
const KVCACHE_REG_SIZES: &str = include_str!("../../data/kvcache_reg_sizes.txt");

/// CacheLib's `hit_ratio/kvcache_reg/pop.json` (commit 143eca6, Apache-2.0), its
/// `popularityBuckets` and `popularityWeights` unchanged (`oneHits` left out): key ranks,
/// most popular first.
const KVCACHE_REG_POP: &str = include_str!("../../data/kvcache_reg_pop.json");

/// ETC's value sizes below 15 bytes, drawn with these probabilities (value, p); the
/// rest of the probability goes to the generalized Pareto of [`fb_value`].
const FB_VALUE_SMALL: [(f64, f64); 15] = [
    (0.0, 0.00536),
    (1.0, 0.00047),
    (2.0, 0.17820),
    (3.0, 0.09239),
    (4.0, 0.00018),
    (5.0, 0.02740),
    (6.0, 0.00065),
    (7.0, 0.00606),
    (8.0, 0.00023),
    (9.0, 0.00837),
    (10.0, 0.00837),
    (11.0, 0.08989),
    (12.0, 0.00092),
    (13.0, 0.00326),
    (14.0, 0.01980),
];

/// ETC's key sizes: GEV(30.7984, 8.20449, 0.078688) bytes.
pub fn fb_key() -> Dist {
    Dist::Gev {
        loc: 30.7984,
        scale: 8.20449,
        shape: 0.078688,
    }
}

/// ETC's value sizes: the small sizes above, else generalized Pareto(15, 214.476, 0.348238).
pub fn fb_value() -> Dist {
    Dist::Mixture {
        atoms: Arc::from(FB_VALUE_SMALL.as_slice()),
        rest: Box::new(Dist::GPareto {
            loc: 15.0,
            scale: 214.476,
            shape: 0.348238,
        }),
    }
}

/// ETC's inter-arrival gaps: generalized Pareto(0, 16.0292, 0.154971) microseconds
/// (mutilate rescales it to the asked rate; so does the open loop here).
pub fn fb_ia() -> Dist {
    Dist::GPareto {
        loc: 0.0,
        scale: 16.0292,
        shape: 0.154971,
    }
}

/// memcache_reg's value sizes, parsed once.
pub fn kvcache_reg_value() -> Dist {
    static TABLE: OnceLock<Arc<Empirical>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        Arc::new(
            Empirical::from_text(KVCACHE_REG_SIZES, "kvcache_reg_value")
                .expect("the embedded table parses (tested)"),
        )
    });
    Dist::Empirical(table.clone())
}

/// memcache_reg's key popularity over ranks 0 .. 10 483 642, parsed once.
pub fn kvcache_reg_popularity() -> Dist {
    static TABLE: OnceLock<Arc<Empirical>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        Arc::new(
            Empirical::from_text(KVCACHE_REG_POP, "kvcache_reg_popularity")
                .expect("the embedded table parses (tested)"),
        )
    });
    Dist::Empirical(table.clone())
}

/// The built-in distribution called `name`, if any.
pub fn named(name: &str) -> Option<Dist> {
    match name {
        "fb_key" => Some(fb_key()),
        "fb_value" => Some(fb_value()),
        "fb_ia" => Some(fb_ia()),
        "kvcache_reg_value" => Some(kvcache_reg_value()),
        "kvcache_reg_popularity" => Some(kvcache_reg_popularity()),
        _ => None,
    }
}
