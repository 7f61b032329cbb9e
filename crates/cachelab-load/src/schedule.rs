//! Open-loop send schedules: when each connection's next request is due, whatever
//! happened to the earlier ones. Pure; times are nanoseconds since the run started.

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use crate::dist::Dist;

#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// Exponential gaps with the given mean: the connection's requests form a Poisson
    /// process, and so do all connections' together.
    Poisson,
    /// Equal gaps; connection i of n starts i/n of a gap late, so that together the
    /// connections send at evenly spaced instants.
    Fixed,
    /// Gaps drawn from a distribution, rescaled so that their mean is the mean gap the
    /// rate asks for (shape and coefficient of variation kept), as mutilate's `--iadist`
    /// with `--qps`; negative draws count as 0.
    Dist {
        dist: Dist,
        /// The distribution as it was written.
        spec: String,
        /// Its mean, finite and positive (checked by the configuration).
        mean: f64,
    },
}

impl Arrival {
    pub fn name(&self) -> String {
        match self {
            Arrival::Poisson => "poisson".into(),
            Arrival::Fixed => "fixed".into(),
            Arrival::Dist { spec, .. } => spec.clone(),
        }
    }
}

/// One connection's schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    arrival: Arrival,
    mean_gap_ns: f64,
    /// Kept in floating point so that rounding does not accumulate into a rate error.
    next_ns: f64,
}

impl Schedule {
    /// The schedule of connection `index` of `connections` sharing `total_rate` requests/s.
    pub fn new<R: Rng + ?Sized>(
        arrival: Arrival,
        total_rate: f64,
        index: usize,
        connections: usize,
        rng: &mut R,
    ) -> Schedule {
        assert!(total_rate > 0.0 && index < connections);
        let mean_gap_ns = 1e9 * connections as f64 / total_rate;
        let first = match arrival {
            Arrival::Fixed => mean_gap_ns * index as f64 / connections as f64,
            _ => gap(&arrival, mean_gap_ns, rng),
        };
        Schedule {
            arrival,
            mean_gap_ns,
            next_ns: first,
        }
    }

    /// When the next request is due.
    pub fn peek(&self) -> u64 {
        self.next_ns as u64
    }

    /// Takes the due time of the next request and moves on to the one after.
    pub fn advance<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let due = self.peek();
        self.next_ns += gap(&self.arrival, self.mean_gap_ns, rng);
        due
    }
}

fn gap<R: Rng + ?Sized>(arrival: &Arrival, mean_ns: f64, rng: &mut R) -> f64 {
    match arrival {
        Arrival::Poisson => {
            let unit: f64 = Exp1.sample(rng);
            unit * mean_ns
        }
        Arrival::Fixed => mean_ns,
        Arrival::Dist { dist, mean, .. } => dist.sample(rng).max(0.0) * (mean_ns / mean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn due_times(
        arrival: Arrival,
        rate: f64,
        index: usize,
        connections: usize,
        until_ns: u64,
    ) -> Vec<u64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut s = Schedule::new(arrival, rate, index, connections, &mut rng);
        let mut out = Vec::new();
        while s.peek() < until_ns {
            out.push(s.advance(&mut rng));
        }
        out
    }

    #[test]
    fn fixed_arrivals_are_evenly_spaced_and_exact_in_count() {
        let t = due_times(Arrival::Fixed, 1000.0, 0, 1, 1_000_000_000);
        assert_eq!(t.len(), 1000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 1_000_000));
    }

    #[test]
    fn fixed_connections_interleave_into_one_even_stream() {
        let mut all: Vec<u64> = (0..4)
            .flat_map(|i| due_times(Arrival::Fixed, 4000.0, i, 4, 10_000_000))
            .collect();
        all.sort_unstable();
        assert_eq!(all.len(), 40);
        assert!(all.windows(2).all(|w| w[1] - w[0] == 250_000), "{all:?}");
    }

    #[test]
    fn poisson_gaps_have_the_asked_mean_and_unit_coefficient_of_variation() {
        // 10 000/s over 10 s: 100 000 gaps; mean within 1.5% (5 standard errors of 0.3%),
        // and an exponential's coefficient of variation of 1 within 2%.
        let t = due_times(Arrival::Poisson, 10_000.0, 0, 1, 10_000_000_000);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd =
            (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64).sqrt();
        assert!((mean / 100_000.0 - 1.0).abs() < 0.015, "mean gap {mean} ns");
        assert!((sd / mean - 1.0).abs() < 0.02, "cv {}", sd / mean);
        assert!(
            (t.len() as f64 / 100_000.0 - 1.0).abs() < 0.015,
            "{} arrivals",
            t.len()
        );
    }

    #[test]
    fn poisson_counts_per_interval_have_variance_equal_to_mean() {
        // Counts in 1 ms windows at 20 000/s: Poisson with mean 20, so variance ~ 20.
        let t = due_times(Arrival::Poisson, 20_000.0, 0, 1, 5_000_000_000);
        let mut counts = vec![0f64; 5000];
        for due in t {
            counts[(due / 1_000_000) as usize] += 1.0;
        }
        let mean = counts.iter().sum::<f64>() / counts.len() as f64;
        let var =
            counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (counts.len() - 1) as f64;
        assert!((var / mean - 1.0).abs() < 0.1, "dispersion {}", var / mean);
    }

    #[test]
    fn drawn_gaps_are_rescaled_to_the_rate_and_keep_their_shape() {
        // fb_ia (generalized Pareto, shape 0.155, mean 18.97 us) at 10 000/s: gaps of
        // mean 100 us, and the distribution's coefficient of variation, 1/sqrt(1 - 2k).
        let dist = crate::dist::builtin::fb_ia();
        let arrival = Arrival::Dist {
            mean: dist.mean().unwrap(),
            spec: "fb_ia".into(),
            dist,
        };
        assert_eq!(arrival.name(), "fb_ia");
        let t = due_times(arrival, 10_000.0, 0, 1, 20_000_000_000);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd =
            (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64).sqrt();
        let cv = 1.0 / (1.0 - 2.0 * 0.154971f64).sqrt();
        assert!((mean / 100_000.0 - 1.0).abs() < 0.02, "mean gap {mean} ns");
        assert!(
            (sd / mean / cv - 1.0).abs() < 0.05,
            "cv {} vs {cv}",
            sd / mean
        );
    }

    #[test]
    fn the_rate_is_shared_by_the_connections() {
        let per_connection = due_times(Arrival::Fixed, 1000.0, 3, 10, 1_000_000_000);
        assert_eq!(per_connection.len(), 100);
        assert_eq!(per_connection[0], 3_000_000);
    }
}
