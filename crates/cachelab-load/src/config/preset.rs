//! `--workload NAME`: a preset's option values fill the options the command line left
//! out ([`crate::presets`] holds the presets).

use crate::args::Args;
use crate::presets::Preset;

/// Fills the options of `args` that the command line left out with `preset`'s values.
/// An option group counts as given if any of its options is (the value sizes: -d,
/// --data-size-range, --data-size-list, --data-size-dist; the expiry: --expiry-range,
/// --expiry-dist; the gaps: --arrival, --arrival-dist), so a preset never combines
/// with an explicit option into a conflict.
pub(super) fn apply(preset: &Preset, args: &mut Args) {
    fn fill<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
        if slot.is_none() {
            slot.clone_from(value);
        }
    }
    fill(&mut args.ratio, &preset.ratio);
    fill(&mut args.key_pattern, &preset.key_pattern);
    fill(&mut args.zipf_exponent, &preset.zipf_exponent);
    let sizes_given =
        args.data_size.is_some() || args.data_size_range.is_some() || args.data_size_list.is_some();
    if !sizes_given {
        fill(&mut args.data_size_dist, &preset.data_size_dist);
    }
    fill(&mut args.key_size_dist, &preset.key_size_dist);
    fill(&mut args.key_dist, &preset.key_dist);
    if args.expiry_range.is_none() {
        fill(&mut args.expiry_dist, &preset.expiry_dist);
    }
    if args.rate.is_some() && args.arrival.is_none() {
        fill(&mut args.arrival_dist, &preset.arrival_dist);
    }
    fill(&mut args.lone_get_share, &preset.lone_get_share);
    fill(&mut args.lookaside, &preset.lookaside);
}

#[cfg(test)]
mod tests {
    //! Presets through the command line: each gives a valid configuration, and any
    //! option given explicitly wins over the preset's.

    use crate::args::Args;
    use clap::Parser;

    use crate::config::{Config, DataSize, Expiry};
    use crate::cycle::Ratio;
    use crate::keys::KeyPattern;
    use crate::presets::{all, list};

    fn config(line: &str) -> Result<Config, String> {
        let args =
            Args::try_parse_from(std::iter::once("cachelab-load").chain(line.split_whitespace()))
                .unwrap();
        Config::try_from(&args).map_err(|e| e.to_string())
    }

    fn data_spec(c: &Config) -> Option<&str> {
        match &c.workload.data_size {
            DataSize::Dist { spec, .. } => Some(spec),
            _ => None,
        }
    }

    #[test]
    fn every_preset_makes_a_valid_configuration_for_memcached_and_redis() {
        for p in all() {
            for protocol in ["memcache_text", "redis"] {
                let c = config(&format!("--workload {} -P {protocol}", p.name))
                    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
                assert_eq!(c.workload.preset.as_deref(), Some(p.name.as_str()));
            }
            let open = config(&format!("--workload {} --rate 1000 --test-time 1", p.name));
            assert!(open.is_ok(), "{}: {open:?}", p.name);
        }
        assert!(all().len() > 50);
    }

    #[test]
    fn fb_etc_is_mutilates_fits_with_thirty_gets_per_set() {
        let c = config("--workload fb-etc --rate 1000 --test-time 1").unwrap();
        let w = &c.workload;
        assert_eq!(w.ratio, Ratio { sets: 1, gets: 30 });
        assert_eq!(data_spec(&c), Some("fb_value"));
        assert_eq!(w.key_size.as_ref().unwrap().spec, "fb_key");
        assert_eq!(c.open_loop.unwrap().arrival.name(), "fb_ia");
        assert!(!w.lookaside);
        // Without --rate there is no schedule to shape.
        assert!(config("--workload fb-etc").unwrap().open_loop.is_none());
    }

    #[test]
    fn meta_memcache_reg_is_gets_lone_gets_and_lookaside() {
        let c = config("--workload meta-memcache-reg").unwrap();
        let w = &c.workload;
        assert_eq!(w.ratio, Ratio { sets: 0, gets: 1 });
        assert_eq!(w.lone_get_share, 0.1204);
        assert!(w.lookaside);
        assert_eq!(data_spec(&c), Some("kvcache_reg_value"));
        assert_eq!(w.key_dist.as_ref().unwrap().0, "kvcache_reg_popularity");
    }

    #[test]
    fn a_twitter_cluster_sets_sizes_mix_ttl_and_popularity() {
        let c = config("--workload twitter-cluster4 -P memcache_text").unwrap();
        let w = &c.workload;
        assert_eq!(w.ratio, Ratio { sets: 7, gets: 93 });
        assert_eq!(w.set_pattern, KeyPattern::Zipf { exponent: 1.1004 });
        assert_eq!(data_spec(&c), Some("fixed:2439"));
        assert!(matches!(&w.expiry, Some(Expiry::Dist { .. })));
        assert!(w.lookaside);
    }

    #[test]
    fn explicit_options_override_the_preset() {
        let c = config(
            "--workload fb-etc --ratio 1:10 -d 100 --key-pattern G --lookaside --rate 10 --arrival fixed --test-time 1",
        )
        .unwrap();
        let w = &c.workload;
        assert_eq!(w.ratio, Ratio { sets: 1, gets: 10 });
        assert_eq!(w.data_size, DataSize::Fixed(100));
        assert_eq!(w.get_pattern.letter(), 'G');
        assert!(w.lookaside);
        assert_eq!(c.open_loop.unwrap().arrival.name(), "fixed");
        let c = config(
            "--workload twitter-cluster4 --expiry-range 1-2 --zipf-exponent 0.5 --lookaside=false",
        )
        .unwrap();
        assert!(matches!(c.workload.expiry, Some(Expiry::Range(_))));
        assert_eq!(c.workload.set_pattern, KeyPattern::Zipf { exponent: 0.5 });
        assert!(!c.workload.lookaside);
    }

    #[test]
    fn an_unknown_preset_is_refused_in_one_line() {
        assert_eq!(
            config("--workload fb-etcc").unwrap_err(),
            "--workload: no preset \"fb-etcc\" (`--workload list` names them)"
        );
        let list = list();
        assert!(list.contains("fb-etc ") && list.contains("twitter-cluster54 "));
        assert!(list.contains("source: Atikoglu et al."));
    }
}
