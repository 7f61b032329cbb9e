//! Welford's online mean and variance.

use serde::{Deserialize, Serialize};

/// Count, mean and M2 (sum of squared deviations from the mean) of a stream of values.
///
/// Update: `mean_n = mean_{n-1} + (x_n - mean_{n-1}) / n`,
/// `M2_n = M2_{n-1} + (x_n - mean_{n-1}) (x_n - mean_n)`; sample variance `M2 / (n - 1)`.
/// Stored as the three numbers so the harness can merge windows and workers exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Welford {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
}

impl Welford {
    pub fn add(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Sample variance, `M2 / (n - 1)`; `None` below two values.
    pub fn variance(&self) -> Option<f64> {
        (self.count >= 2).then(|| self.m2 / (self.count - 1) as f64)
    }

    pub fn std_dev(&self) -> Option<f64> {
        self.variance().map(f64::sqrt)
    }

    /// Folds another stream's statistics into this one, as if its values had been added
    /// here (Chan, Golub and LeVeque's pairwise update).
    pub fn merge(&mut self, other: &Welford) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n_a = self.count as f64;
        let n_b = other.count as f64;
        let n = n_a + n_b;
        let delta = other.mean - self.mean;
        self.mean += delta * n_b / n;
        self.m2 += other.m2 + delta * delta * n_a * n_b / n;
        self.count += other.count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mean_and_sample_variance_match_the_textbook_example() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squared deviations 32, variance 32/7.
        let mut w = Welford::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            w.add(x);
        }
        assert_eq!(w.count, 8);
        assert!((w.mean - 5.0).abs() < 1e-12);
        assert!((w.m2 - 32.0).abs() < 1e-12);
        assert!((w.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn variance_needs_two_values() {
        let mut w = Welford::default();
        assert_eq!(w.variance(), None);
        w.add(3.0);
        assert_eq!(w.variance(), None);
    }

    #[test]
    fn merging_an_empty_stream_changes_nothing() {
        let mut w = Welford::default();
        w.add(1.0);
        w.add(2.0);
        let before = w;
        w.merge(&Welford::default());
        assert_eq!(w, before);
        let mut empty = Welford::default();
        empty.merge(&before);
        assert_eq!(empty, before);
    }

    proptest! {
        #[test]
        fn merge_equals_adding_everything_to_one(
            a in proptest::collection::vec(-1e6f64..1e6, 0..50),
            b in proptest::collection::vec(-1e6f64..1e6, 0..50),
        ) {
            let (mut wa, mut wb, mut all) = (Welford::default(), Welford::default(), Welford::default());
            a.iter().for_each(|x| { wa.add(*x); all.add(*x) });
            b.iter().for_each(|x| { wb.add(*x); all.add(*x) });
            wa.merge(&wb);
            prop_assert_eq!(wa.count, all.count);
            let scale = 1.0 + all.mean.abs();
            prop_assert!((wa.mean - all.mean).abs() <= 1e-9 * scale);
            prop_assert!((wa.m2 - all.m2).abs() <= 1e-6 * (1.0 + all.m2.abs()));
        }
    }
}
