//! Distributions of key sizes, value sizes, open-loop inter-arrival gaps and expiry
//! times: the analytic families the published workload studies fit (fixed, uniform,
//! normal, exponential, Pareto, generalized Pareto, GEV) and empirical ones from a file.
//! Pure: every draw takes the caller's RNG, so a seed makes a run repeatable.
//!
//! rand_distr draws the families it has (normal, exponential, Pareto); the generalized
//! Pareto and the GEV are drawn by inverting their CDF, as mutilate does. Each
//! distribution also knows its CDF and, where finite, its mean and variance: the tests
//! hold samples to them, and the open loop rescales gaps by the mean.
//!
//! [`parse`] reads the text syntax of the command line and the experiment files
//! (`gpareto:loc=0,scale=214.476,shape=0.348238`, `file:PATH`, ...); [`empirical`]
//! the tables from files.

pub mod builtin;
pub mod empirical;
mod gamma;
pub mod parse;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp, Normal, OpenClosed01, Pareto};

pub use empirical::Empirical;
pub use parse::{parse, DistError};

/// One distribution of real numbers, with its parameters as the text syntax names them.
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    Fixed(f64),
    /// Continuous uniform on `[min, max]`.
    Uniform {
        min: f64,
        max: f64,
    },
    Normal {
        mean: f64,
        sd: f64,
    },
    Exponential {
        mean: f64,
    },
    /// Pareto type I: `P(X > x) = (scale / x)^shape` for `x >= scale`.
    Pareto {
        scale: f64,
        shape: f64,
    },
    /// Generalized Pareto: `P(X > x) = (1 + shape (x - loc) / scale)^(-1/shape)`.
    GPareto {
        loc: f64,
        scale: f64,
        shape: f64,
    },
    /// Generalized extreme value: `P(X <= x) = exp(-(1 + shape (x - loc) / scale)^(-1/shape))`.
    Gev {
        loc: f64,
        scale: f64,
        shape: f64,
    },
    /// A table of values (or ranges) and weights, shared by every copy.
    Empirical(Arc<Empirical>),
    /// Point masses `atoms` (value, probability; probabilities summing to less than 1),
    /// and `rest` for the remaining probability: mutilate's `fb_value` shape.
    Mixture {
        atoms: Arc<[(f64, f64)]>,
        rest: Box<Dist>,
    },
}

/// `(1 + shape z)^(-1/shape)`, the generalized tail, with its `shape -> 0` limit `e^-z`;
/// 0 past the support's upper end (shape < 0), 1 below its lower end (shape > 0).
fn generalized_tail(z: f64, shape: f64) -> f64 {
    if shape == 0.0 {
        return (-z).exp();
    }
    let t = 1.0 + shape * z;
    if t <= 0.0 {
        return if shape > 0.0 { f64::INFINITY } else { 0.0 };
    }
    t.powf(-1.0 / shape)
}

/// The inverse of [`generalized_tail`] in `z` for a tail value `y` in (0, 1]:
/// `((y^-shape) - 1) / shape`, or `-ln y` at shape 0.
fn generalized_tail_inverse(y: f64, shape: f64) -> f64 {
    if shape == 0.0 {
        -y.ln()
    } else {
        (y.powf(-shape) - 1.0) / shape
    }
}

impl Dist {
    /// One draw.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Dist::Fixed(v) => *v,
            Dist::Uniform { min, max } if min == max => *min,
            Dist::Uniform { min, max } => rng.random_range(*min..=*max),
            Dist::Normal { mean, sd } => Normal::new(*mean, *sd).expect("validated sd").sample(rng),
            Dist::Exponential { mean } => {
                Exp::new(1.0 / *mean).expect("validated mean").sample(rng)
            }
            Dist::Pareto { scale, shape } => Pareto::new(*scale, *shape)
                .expect("validated parameters")
                .sample(rng),
            Dist::GPareto { loc, scale, shape } => {
                // 1 - F(x) = U, U uniform on (0, 1].
                let u: f64 = OpenClosed01.sample(rng);
                loc + scale * generalized_tail_inverse(u, *shape)
            }
            Dist::Gev { loc, scale, shape } => {
                // -ln F(x) = E, E a unit exponential (-ln of a uniform on (0, 1]).
                let u: f64 = OpenClosed01.sample(rng);
                loc + scale * generalized_tail_inverse(-u.ln(), *shape)
            }
            Dist::Empirical(table) => table.sample(rng),
            Dist::Mixture { atoms, rest } => {
                let mut u: f64 = rng.random();
                for (value, p) in atoms.iter() {
                    if u < *p {
                        return *value;
                    }
                    u -= p;
                }
                rest.sample(rng)
            }
        }
    }

    /// `P(X <= x)`.
    pub fn cdf(&self, x: f64) -> f64 {
        let step = |at: f64| if x >= at { 1.0 } else { 0.0 };
        match self {
            Dist::Fixed(v) => step(*v),
            Dist::Uniform { min, max } if min == max => step(*min),
            Dist::Uniform { min, max } => ((x - min) / (max - min)).clamp(0.0, 1.0),
            Dist::Normal { mean, sd } => 0.5 * gamma::erfc(-(x - mean) / (sd * 2f64.sqrt())),
            Dist::Exponential { mean } => (1.0 - (-x / mean).exp()).max(0.0),
            Dist::Pareto { scale, shape } if x >= *scale => 1.0 - (scale / x).powf(*shape),
            Dist::Pareto { .. } => 0.0,
            Dist::GPareto { loc, scale, shape } if x >= *loc => {
                1.0 - generalized_tail((x - loc) / scale, *shape)
            }
            Dist::GPareto { .. } => 0.0,
            Dist::Gev { loc, scale, shape } => (-generalized_tail((x - loc) / scale, *shape)).exp(),
            Dist::Empirical(table) => table.cdf(x),
            Dist::Mixture { atoms, rest } => {
                let left: f64 = 1.0 - atoms.iter().map(|a| a.1).sum::<f64>();
                atoms.iter().map(|(v, p)| p * step(*v)).sum::<f64>() + left * rest.cdf(x)
            }
        }
    }

    /// The mean, if finite.
    pub fn mean(&self) -> Option<f64> {
        let m = match self {
            Dist::Fixed(v) => *v,
            Dist::Uniform { min, max } => (min + max) / 2.0,
            Dist::Normal { mean, .. } | Dist::Exponential { mean } => *mean,
            Dist::Pareto { scale, shape } if *shape > 1.0 => shape * scale / (shape - 1.0),
            Dist::GPareto { loc, scale, shape } if *shape < 1.0 => loc + scale / (1.0 - shape),
            Dist::Gev { loc, scale, shape } if *shape == 0.0 => loc + scale * gamma::EULER,
            Dist::Gev { loc, scale, shape } if *shape < 1.0 => {
                loc + scale * (gamma::gamma(1.0 - shape) - 1.0) / shape
            }
            Dist::Empirical(table) => table.mean(),
            Dist::Mixture { atoms, rest } => {
                let left: f64 = 1.0 - atoms.iter().map(|a| a.1).sum::<f64>();
                atoms.iter().map(|(v, p)| v * p).sum::<f64>() + left * rest.mean()?
            }
            _ => return None,
        };
        Some(m)
    }

    /// The variance, if finite.
    pub fn variance(&self) -> Option<f64> {
        let v = match self {
            Dist::Fixed(_) => 0.0,
            Dist::Uniform { min, max } => (max - min).powi(2) / 12.0,
            Dist::Normal { sd, .. } => sd * sd,
            Dist::Exponential { mean } => mean * mean,
            Dist::Pareto { scale, shape } if *shape > 2.0 => {
                scale * scale * shape / ((shape - 1.0).powi(2) * (shape - 2.0))
            }
            Dist::GPareto { scale, shape, .. } if *shape < 0.5 => {
                scale * scale / ((1.0 - shape).powi(2) * (1.0 - 2.0 * shape))
            }
            Dist::Gev { scale, shape, .. } if *shape == 0.0 => {
                scale * scale * std::f64::consts::PI.powi(2) / 6.0
            }
            Dist::Gev { scale, shape, .. } if *shape < 0.5 => {
                let g1 = gamma::gamma(1.0 - shape);
                let g2 = gamma::gamma(1.0 - 2.0 * shape);
                scale * scale * (g2 - g1 * g1) / (shape * shape)
            }
            Dist::Empirical(table) => table.variance(),
            Dist::Mixture { atoms, rest } => {
                let left: f64 = 1.0 - atoms.iter().map(|a| a.1).sum::<f64>();
                let mean = self.mean()?;
                let rest_mean = rest.mean()?;
                let second: f64 = atoms.iter().map(|(v, p)| p * v * v).sum::<f64>()
                    + left * (rest.variance()? + rest_mean * rest_mean);
                second - mean * mean
            }
            _ => return None,
        };
        Some(v)
    }

    /// The smallest and largest values a draw can take (infinite where unbounded).
    pub fn support(&self) -> (f64, f64) {
        match self {
            Dist::Fixed(v) => (*v, *v),
            Dist::Uniform { min, max } => (*min, *max),
            Dist::Normal { .. } => (f64::NEG_INFINITY, f64::INFINITY),
            Dist::Exponential { .. } => (0.0, f64::INFINITY),
            Dist::Pareto { scale, .. } => (*scale, f64::INFINITY),
            Dist::GPareto { loc, scale, shape } if *shape < 0.0 => (*loc, loc - scale / shape),
            Dist::GPareto { loc, .. } => (*loc, f64::INFINITY),
            Dist::Gev { loc, scale, shape } if *shape > 0.0 => (loc - scale / shape, f64::INFINITY),
            Dist::Gev { loc, scale, shape } if *shape < 0.0 => {
                (f64::NEG_INFINITY, loc - scale / shape)
            }
            Dist::Gev { .. } => (f64::NEG_INFINITY, f64::INFINITY),
            Dist::Empirical(table) => table.support(),
            Dist::Mixture { atoms, rest } => {
                let (lo, hi) = rest.support();
                atoms
                    .iter()
                    .fold((lo, hi), |(lo, hi), (v, _)| (lo.min(*v), hi.max(*v)))
            }
        }
    }

    /// A whole number drawn and clamped to `min..=max` (sizes, seconds).
    pub fn sample_clamped<R: Rng + ?Sized>(&self, rng: &mut R, min: u64, max: u64) -> u64 {
        let x = self.sample(rng).round();
        if x.is_nan() {
            return min;
        }
        (x.clamp(min as f64, max as f64)) as u64
    }

    /// The largest whole number [`Dist::sample_clamped`] can return within `min..=max`.
    pub fn clamped_max(&self, min: u64, max: u64) -> u64 {
        let hi = self.support().1.round();
        if hi.is_nan() {
            return max;
        }
        hi.clamp(min as f64, max as f64) as u64
    }

    /// The smallest whole number [`Dist::sample_clamped`] can return within `min..=max`.
    pub fn clamped_min(&self, min: u64, max: u64) -> u64 {
        let lo = self.support().0.round();
        if lo.is_nan() {
            return min;
        }
        lo.clamp(min as f64, max as f64) as u64
    }
}
