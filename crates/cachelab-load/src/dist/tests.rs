//! Every family against its analytic CDF (a Kolmogorov-Smirnov test) and moments, on
//! fixed seeds so nothing flakes; and a wrong parameter caught by the same test, so the
//! thresholds are known to bite.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;

const N: usize = 20_000;

/// The KS statistic's critical value at the 0.1% level for N samples (1.95 / sqrt(N)).
fn ks_critical() -> f64 {
    1.95 / (N as f64).sqrt()
}

fn draws(d: &Dist, seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n).map(|_| d.sample(&mut rng)).collect()
}

/// sup |F_n(x) - F(x)|, evaluated at and just below every distinct sample value.
fn ks(sample: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut xs = sample.to_vec();
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let mut d: f64 = 0.0;
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j < xs.len() && xs[j] == xs[i] {
            j += 1;
        }
        // The empirical CDF is j/n at x and i/n just below it; the model's is F(x) and
        // F(x-) (equal for a continuous model, apart at a discrete model's atom).
        let below = cdf(xs[i] - 1e-9 * xs[i].abs().max(1.0));
        d = d
            .max((j as f64 / n - cdf(xs[i])).abs())
            .max((i as f64 / n - below).abs());
        i = j;
    }
    d
}

fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    (
        m,
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0),
    )
}

/// The sample fits `d`: KS below the critical value; the mean within 5 standard errors
/// (where the variance is finite); the variance within `var_tol` (relative) if given.
fn assert_fits(d: &Dist, seed: u64, var_tol: Option<f64>) {
    let xs = draws(d, seed, N);
    let stat = ks(&xs, |x| d.cdf(x));
    assert!(
        stat < ks_critical(),
        "{d:?}: KS {stat} >= {}",
        ks_critical()
    );
    let many = draws(d, seed + 1, 10 * N);
    let (m, v) = mean_var(&many);
    if let (Some(mean), Some(var)) = (d.mean(), d.variance()) {
        let se = (var / many.len() as f64).sqrt();
        assert!(
            (m - mean).abs() <= 5.0 * se + 1e-12,
            "{d:?}: mean {m}, expected {mean} (se {se})"
        );
        if let Some(tol) = var_tol {
            assert!(
                (v / var - 1.0).abs() < tol,
                "{d:?}: variance {v}, expected {var}"
            );
        }
    }
}

fn families() -> Vec<(Dist, Option<f64>)> {
    vec![
        (
            Dist::Uniform {
                min: 10.0,
                max: 250.0,
            },
            Some(0.03),
        ),
        (
            Dist::Normal {
                mean: 100.0,
                sd: 15.0,
            },
            Some(0.03),
        ),
        (Dist::Exponential { mean: 3.5 }, Some(0.05)),
        (
            Dist::Pareto {
                scale: 2.0,
                shape: 5.0,
            },
            Some(0.15),
        ),
        (
            Dist::GPareto {
                loc: 0.0,
                scale: 214.476,
                shape: 0.348238,
            },
            None,
        ),
        (
            Dist::GPareto {
                loc: 0.0,
                scale: 16.0292,
                shape: 0.154971,
            },
            Some(0.10),
        ),
        (
            Dist::GPareto {
                loc: 5.0,
                scale: 2.0,
                shape: -0.3,
            },
            Some(0.03),
        ),
        (
            Dist::GPareto {
                loc: 0.0,
                scale: 2.0,
                shape: 0.0,
            },
            Some(0.05),
        ),
        (
            Dist::Gev {
                loc: 30.7984,
                scale: 8.20449,
                shape: 0.078688,
            },
            Some(0.06),
        ),
        (
            Dist::Gev {
                loc: 0.0,
                scale: 1.0,
                shape: -0.2,
            },
            Some(0.03),
        ),
        (
            Dist::Gev {
                loc: 1.0,
                scale: 2.0,
                shape: 0.0,
            },
            Some(0.05),
        ),
    ]
}

#[test]
fn every_family_fits_its_cdf_and_moments() {
    for (i, (d, tol)) in families().into_iter().enumerate() {
        assert_fits(&d, 100 + i as u64, tol);
    }
}

/// The same parameter changed by a tenth (or a shape by 0.1): the KS test must refuse.
#[test]
fn a_wrong_parameter_fails_the_ks_test() {
    let scaled = |d: &Dist| match d.clone() {
        Dist::Uniform { min, max } => Dist::Uniform {
            min,
            max: max * 1.1,
        },
        Dist::Normal { mean, sd } => Dist::Normal { mean, sd: sd * 1.1 },
        Dist::Exponential { mean } => Dist::Exponential { mean: mean * 1.1 },
        Dist::Pareto { scale, shape } => Dist::Pareto {
            scale,
            shape: shape * 1.1,
        },
        Dist::GPareto { loc, scale, shape } => Dist::GPareto {
            loc,
            scale,
            shape: shape + 0.1,
        },
        Dist::Gev { loc, scale, shape } => Dist::Gev {
            loc,
            scale,
            shape: shape + 0.1,
        },
        other => other,
    };
    for (i, (d, _)) in families().into_iter().enumerate() {
        let wrong = scaled(&d);
        let xs = draws(&d, 100 + i as u64, N);
        let stat = ks(&xs, |x| wrong.cdf(x));
        assert!(stat > ks_critical(), "{d:?} passed as {wrong:?}: KS {stat}");
    }
}

#[test]
fn mutilates_etc_fits_fit_and_have_the_papers_shape() {
    let key = builtin::fb_key();
    assert_fits(&key, 7, Some(0.06));
    // ETC's keys: mean about 36 bytes (GEV with a small positive shape).
    let mean = key.mean().unwrap();
    assert!((35.0..38.0).contains(&mean), "fb_key mean {mean}");
    let value = builtin::fb_value();
    assert_fits(&value, 8, None);
    // 44% of ETC's values are under 15 bytes: the atoms' total.
    let small = value.cdf(14.5);
    assert!((small - 0.44155).abs() < 1e-9, "P(value < 15) = {small}");
    assert_fits(&builtin::fb_ia(), 9, Some(0.10));
}

#[test]
fn empirical_tables_fit_their_weights() {
    let d = parse("discrete:1=1,5=2,9=7").unwrap();
    assert!((d.mean().unwrap() - 7.4).abs() < 1e-12);
    assert_fits(&d, 11, Some(0.05));
    let table = Empirical::piecewise(vec![0.0, 10.0, 20.0, 100.0], &[1.0, 0.0, 3.0], "t").unwrap();
    let d = Dist::Empirical(Arc::new(table));
    assert_eq!(d.support(), (0.0, 100.0));
    assert_fits(&d, 12, Some(0.05));
    let reg = builtin::kvcache_reg_value();
    assert_fits(&reg, 13, None);
    let mean = reg.mean().unwrap();
    assert!((mean - 335.185).abs() < 0.01, "kvcache_reg mean {mean}");
    let pop = builtin::kvcache_reg_popularity();
    assert_fits(&pop, 14, None);
    assert_eq!(pop.support(), (0.0, 10_483_642.0));
    // The most popular 1% of keys take 72% of the requests (1% of ranks is 104 836).
    assert!(
        (pop.cdf(104_836.42) - 0.724).abs() < 0.001,
        "{}",
        pop.cdf(104_836.42)
    );
}

#[test]
fn the_same_seed_draws_the_same_values() {
    let d = parse("gev:loc=30.7984,scale=8.20449,shape=0.078688").unwrap();
    assert_eq!(draws(&d, 3, 100), draws(&d, 3, 100));
    assert_ne!(draws(&d, 3, 100), draws(&d, 4, 100));
}

#[test]
fn the_syntax_reads_every_family() {
    for (text, want) in [
        ("42", Dist::Fixed(42.0)),
        ("fixed:42", Dist::Fixed(42.0)),
        ("fixed:value=42", Dist::Fixed(42.0)),
        ("uniform:min=1,max=9", Dist::Uniform { min: 1.0, max: 9.0 }),
        ("normal:mean=5, sd=2", Dist::Normal { mean: 5.0, sd: 2.0 }),
        ("exponential:mean=4", Dist::Exponential { mean: 4.0 }),
        ("exponential:rate=0.25", Dist::Exponential { mean: 4.0 }),
        (
            "pareto:scale=1,shape=2",
            Dist::Pareto {
                scale: 1.0,
                shape: 2.0,
            },
        ),
        (
            "gpareto:loc=0,scale=214.476,shape=0.348238",
            Dist::GPareto {
                loc: 0.0,
                scale: 214.476,
                shape: 0.348238,
            },
        ),
        (
            "gev:loc=30.7984,scale=8.20449,shape=0.078688",
            builtin::fb_key(),
        ),
        ("fb_ia", builtin::fb_ia()),
    ] {
        assert_eq!(parse(text).unwrap(), want, "{text}");
    }
}

#[test]
fn bad_syntax_is_refused_in_one_line_naming_the_parameter() {
    for (text, want) in [
        (
            "gpareto:loc=0,scale=-1,shape=0.3",
            "gpareto: scale=-1 must be positive",
        ),
        ("gev:loc=0,scale=1", "gev: missing shape="),
        (
            "gev:loc=0,sclae=1,shape=0",
            "gev: unknown parameter \"sclae\" (takes loc, scale, shape)",
        ),
        (
            "normal:mean=NaN,sd=1",
            "normal: mean=NaN is not a finite number",
        ),
        ("normal:mean=1,sd=x", "normal: sd=\"x\" is not a number"),
        ("pareto:scale=1,shape=0", "pareto: shape=0 must be positive"),
        ("uniform:min=5,max=1", "uniform: min=5 is above max=1"),
        (
            "exponential:mean=1,rate=1",
            "exponential: give exactly one of mean= and rate=",
        ),
        (
            "gev:loc=0,loc=1,scale=1,shape=0",
            "gev: loc= is given twice",
        ),
        ("discrete:1=0,2=0", "discrete: every weight is 0"),
        (
            "discrete:1=-1",
            "discrete: weight -1 must be a finite number >= 0",
        ),
        ("discrete:", "discrete: no values"),
        ("file:", "file: missing PATH (file:PATH)"),
        (
            "file:/nonexistent/sizes",
            "file /nonexistent/sizes: No such file or directory (os error 2)",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert_eq!(e, want, "{text}");
        assert!(!e.contains('\n'));
    }
    let e = parse("lognormal:mu=1").unwrap_err().to_string();
    assert!(e.starts_with("\"lognormal\" is not a distribution"), "{e}");
}

#[test]
fn files_are_rows_or_cachebench_json_and_errors_name_the_line() {
    let rows = Empirical::from_text("# sizes\n100 3\n200,1\n\n", "f").unwrap();
    assert_eq!(rows.mean(), 125.0);
    for (text, want) in [
        ("", "f: no VALUE WEIGHT rows"),
        ("# nothing\n", "f: no VALUE WEIGHT rows"),
        ("1 1\n2\n", "f line 2: \"2\" is not VALUE WEIGHT"),
        ("1 1\nx 2\n", "f line 2: \"x 2\" is not VALUE WEIGHT with finite numbers"),
        ("1 1\n2 NaN\n", "f line 2: \"2 NaN\" is not VALUE WEIGHT with finite numbers"),
        ("1 -1\n", "f line 1: weight -1 is negative"),
        ("1 0\n2 0\n", "f: every weight is 0"),
        ("{\"valSizeRange\": [1, 2]}", "f: valSizeRange without valSizeRangeProbability"),
        ("{\"valSizeRange\": [1, 2, 3, 4], \"valSizeRangeProbability\": [1]}",
         "f: 4 valSizeRange for 1 valSizeRangeProbability: need as many (discrete) or one more (ranges)"),
        ("{\"valSizeRange\": [3, 2], \"valSizeRangeProbability\": [1]}", "f: bounds must not decrease (3 then 2)"),
        ("{\"x\": 1}", "f: a JSON file needs valSizeRange and valSizeRangeProbability (cachebench's sizes.json) or popularityBuckets and popularityWeights (pop.json)"),
    ] {
        assert_eq!(Empirical::from_text(text, "f").unwrap_err().to_string(), want, "{text:?}");
    }
    let e = Empirical::from_text("{\n\"valSizeRange\": [1,\n", "f")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f line 3: not JSON"), "{e}");
    // sizes.json, discrete and ranged; pop.json as key ranks.
    let discrete = Empirical::from_text(
        r#"{"valSizeRange": [10, 20], "valSizeRangeProbability": [1, 3]}"#,
        "f",
    )
    .unwrap();
    assert_eq!(discrete.mean(), 17.5);
    let ranged = Empirical::from_text(
        r#"{"valSizeRange": [0, 10, 20], "valSizeRangeProbability": [1, 1]}"#,
        "f",
    )
    .unwrap();
    assert_eq!((ranged.mean(), ranged.cdf(5.0)), (10.0, 0.25));
    let pop = Empirical::from_text(
        r#"{"oneHits": 0.1, "popularityBuckets": [1, 9], "popularityWeights": [50, 50]}"#,
        "f",
    )
    .unwrap();
    assert_eq!((pop.support(), pop.cdf(1.0)), ((0.0, 10.0), 0.5));
}

#[test]
fn clamped_draws_stay_in_bounds() {
    let d = parse("normal:mean=0,sd=1000").unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for _ in 0..1000 {
        let x = d.sample_clamped(&mut rng, 1, 250);
        assert!((1..=250).contains(&x));
    }
    assert_eq!((d.clamped_min(1, 250), d.clamped_max(1, 250)), (1, 250));
    let f = Dist::Fixed(7.0);
    assert_eq!((f.clamped_min(1, 250), f.clamped_max(1, 250)), (7, 7));
}
